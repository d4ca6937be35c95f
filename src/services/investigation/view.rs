//! A stored investigation as the API and the incident page show it: its hypotheses,
//! recommendations and recalled memories.

use std::collections::HashMap;

use serde::Serialize;
use sqlx::AnyPool;

use super::warnings::Warning;
use crate::analyst::PriorIncident;
use crate::domain::memory::MemoryRecord;
use crate::domain::{ActionKind, Confidence, MemoryKind};
use crate::error::{AppError, AppResult};
use crate::store::investigations::{self, StoredInvestigation};

/// A hypothesis as returned by the API.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct HypothesisView {
    /// Record id.
    pub id: i64,
    /// `INF-12`.
    pub reference: String,
    /// Statement.
    pub statement: String,
    /// After ceilings.
    pub confidence: Confidence,
    /// Cited records (`OBS-3`, `MEM-40`).
    pub cites: Vec<String>,
    /// Prior incidents with why they are relevant.
    pub prior_incidents: Vec<PriorIncident>,
}

/// A recommendation as returned by the API.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct RecommendationView {
    /// Id for the approve / reject / verdict routes.
    pub id: i64,
    /// ActionKind snake_case name.
    pub kind: String,
    /// People label of the kind.
    pub label: String,
    /// Target.
    pub target: String,
    /// Why.
    pub rationale: String,
    /// Dead-end banner or null.
    pub warning: Option<Warning>,
    /// Proposed, approved or rejected.
    pub status: crate::domain::action::RecommendationStatus,
    /// Rejection reason.
    pub reject_reason: Option<String>,
    /// Why it was approved although it carried the dead-end banner: what is different this time.
    pub approve_reason: Option<String>,
    /// Verdict, once given.
    pub verdict: Option<String>,
    /// Verdict note.
    pub verdict_note: Option<String>,
    /// Simulated transcript, once approved.
    pub transcript: Option<String>,
    /// The hypothesis it follows from.
    pub hypothesis_id: Option<i64>,
}

/// The answer of an investigation (and the latest one, for the page).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct InvestigationView {
    /// Investigation id.
    pub investigation_id: i64,
    /// `built-in` or `llm:<model>`.
    pub analyst: String,
    /// Hypotheses, most likely first.
    pub hypotheses: Vec<HypothesisView>,
    /// Recommendations: unflagged first, flagged last, none hidden.
    pub recommendations: Vec<RecommendationView>,
    /// What recall returned (memory ids with why).
    pub recalled: Vec<RecalledView>,
    /// "No relevant organizational memory found" and/or "model unavailable: …".
    pub notice: Option<String>,
    /// What validation dropped ("unknown kind 'reboot_cluster'").
    pub dropped: Vec<String>,
}

/// A recalled memory in the investigation answer.
#[derive(Debug, Clone, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct RecalledView {
    /// Memory id.
    pub id: i64,
    /// Kind.
    pub kind: MemoryKind,
    /// Source incident.
    pub incident_id: Option<String>,
    /// Text.
    pub text: String,
    /// Why recalled, one line.
    pub why: String,
}

/// Loads a stored investigation with its hypotheses, recommendations and recalled memories.
///
/// # Errors
/// Database errors; [`AppError::NotFound`].
pub async fn view_investigation(pool: &AnyPool, inv_id: i64) -> AppResult<InvestigationView> {
    Ok(view_of(investigations::stored(pool, inv_id).await?))
}

/// A stored investigation as the API and the page show it.
pub(super) fn view_of(stored: StoredInvestigation) -> InvestigationView {
    let StoredInvestigation {
        investigation: inv,
        hypotheses: hyps,
        cited,
        recommendations: recs,
        transcripts,
        recalled,
    } = stored;
    let cite_refs: HashMap<i64, String> = cited.iter().map(|r| (r.id, r.reference())).collect();
    let mut hypotheses: Vec<HypothesisView> = hyps
        .iter()
        .map(|h| HypothesisView {
            id: h.id,
            reference: h.reference(),
            statement: h.text.clone(),
            confidence: h.confidence.unwrap_or(Confidence::Low),
            cites: h
                .sources
                .iter()
                .map(|s| cite_refs.get(s).cloned().unwrap_or_else(|| format!("#{s}")))
                .collect(),
            prior_incidents: h
                .data
                .get("prior_incidents")
                .cloned()
                .and_then(|v| serde_json::from_value(v).ok())
                .unwrap_or_default(),
        })
        .collect();
    strongest_first(&mut hypotheses);
    let recommendations = recs
        .into_iter()
        .map(|r| RecommendationView {
            label: ActionKind::parse(&r.action_kind)
                .map(|k| k.label().to_string())
                .unwrap_or_default(),
            warning: r
                .warning
                .as_deref()
                .and_then(|w| serde_json::from_str(w).ok()),
            transcript: r.transcript_id.and_then(|t| {
                transcripts
                    .iter()
                    .find(|x| x.id == t)
                    .map(|x| x.text.clone())
            }),
            id: r.id,
            kind: r.action_kind,
            target: r.target,
            rationale: r.rationale,
            status: r.status,
            reject_reason: r.reject_reason,
            approve_reason: r.approve_reason,
            verdict: r.verdict,
            verdict_note: r.verdict_note,
            hypothesis_id: r.hypothesis_id,
        })
        .collect();
    let recalled = recalled
        .into_iter()
        .map(|m: MemoryRecord| RecalledView {
            id: m.id,
            kind: m.kind,
            incident_id: m.incident_id.clone(),
            why: String::new(),
            text: m.text,
        })
        .collect();
    InvestigationView {
        investigation_id: inv.id,
        analyst: inv.analyst,
        hypotheses,
        recommendations,
        recalled,
        notice: inv.notice,
        dropped: serde_json::from_str(&inv.dropped).unwrap_or_default(),
    }
}

/// Orders hypotheses as people read them and as Learn grades the first (issue #49): the highest
/// confidence first, then the one citing more observations (`OBS-…`), then more sources in all;
/// ties keep the analyst's order.
pub(super) fn strongest_first(hypotheses: &mut [HypothesisView]) {
    let observations =
        |h: &HypothesisView| h.cites.iter().filter(|c| c.starts_with("OBS-")).count();
    hypotheses.sort_by(|a, b| {
        b.confidence
            .cmp(&a.confidence)
            .then_with(|| observations(b).cmp(&observations(a)))
            .then_with(|| b.cites.len().cmp(&a.cites.len()))
    });
}

/// One recommendation of investigation `inv` as the API shows it.
pub(super) async fn recommendation_view(
    pool: &AnyPool,
    inv: i64,
    rid: i64,
) -> AppResult<RecommendationView> {
    view_investigation(pool, inv)
        .await?
        .recommendations
        .into_iter()
        .find(|r| r.id == rid)
        .ok_or_else(|| AppError::NotFound(format!("recommendation {rid}")))
}
