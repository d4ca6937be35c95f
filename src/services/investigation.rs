//! Investigation (DESIGN.md §5–§6): recall + analyst → validated hypotheses (inferences) and
//! recommendations (decisions) from the closed vocabulary, each checked in code against recorded
//! remediation failures; approvals produce simulated transcripts; verdicts of "did not resolve"
//! become remediation-failure memory at once.

use std::collections::{BTreeSet, HashSet};

use serde::Serialize;
use sqlx::SqlitePool;

use crate::analyst::builtin::BuiltinAnalyst;
use crate::analyst::{Analyst, AnalystOutput, InvestigationInput, PriorIncident};
use crate::domain::memory::{MemoryRecord, NewRecord, SourceInfo, confidence_ceiling};
use crate::domain::{
    ActionKind, Confidence, EpistemicType, IncidentId, IncidentState, MemoryKind, ValidationError,
};
use crate::error::{AppError, AppResult};
use crate::memory::Memory;
use crate::memory::recall::{self, IncidentMatch, RecallQuery, Recalled};
use crate::store::{self, audit, incidents, memory as mstore, recommendations as rstore};

/// A dead-end warning on a recommendation.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Warning {
    /// The banner text.
    pub message: String,
    /// Incidents where the action did not resolve or made things worse.
    pub incident_ids: Vec<String>,
    /// The remediation-failure memories behind it.
    pub memory_ids: Vec<i64>,
    /// Incidents where the same action worked under a different failure mode.
    pub worked_in: Vec<String>,
}

/// Failure-mode tags too generic to tie two incidents together on their own (almost every
/// incident times out somewhere); they never make a dead-end match by themselves.
pub const GENERIC_TAGS: &[&str] = &[
    "timeout",
    "upstream_5xx",
    "error_rate_high",
    "health_check_failed",
    "deploy_change",
    "config_change",
    "process_restart",
    "steady_load",
    "traffic_surge",
];

/// How many of the most similar past incidents (distinct incidents, in recall order) count as
/// "similar" for dead-end warnings and lend the actions tried during them to the analyst.
pub const SIMILAR_INCIDENTS: usize = 2;

/// A runner-up whose incident-level score is at least this share of the top one's is too close
/// to call: recall cannot tell the two apart, so both lend their dead ends (warn, never hide).
pub const CLOSE_CALL: f64 = 0.9;

/// The first [`SIMILAR_INCIDENTS`] distinct incident ids among `recalled`, in recall order: the
/// most similar incident always, the next ones only with a record that shares the service (or a
/// neighbour) or a specific failure mode (not in [`GENERIC_TAGS`]) with this incident, or when
/// `incidents` (recall's incident-level ranking) scores it within [`CLOSE_CALL`] of the first —
/// a distant runner-up found by words alone is not similar enough to lend its dead ends.
pub fn similar_incidents(recalled: &[Recalled], incidents: &[IncidentMatch]) -> Vec<String> {
    let close_call = |inc: &str| match incidents {
        [first, second, ..] => {
            second.incident_id == inc
                && first.score > 0.0
                && second.score >= CLOSE_CALL * first.score
        }
        _ => false,
    };
    let related = |r: &Recalled, inc: &str| {
        !r.why.services.is_empty()
            || r.why
                .tags
                .iter()
                .any(|t| !GENERIC_TAGS.contains(&t.as_str()))
            || close_call(inc)
    };
    let mut out: Vec<String> = Vec::new();
    for r in recalled {
        let Some(inc) = r.memory.incident_id.as_ref() else {
            continue;
        };
        if out.len() >= SIMILAR_INCIDENTS {
            break;
        }
        if !out.contains(inc) && (out.is_empty() || related(r, inc)) {
            out.push(inc.clone());
        }
    }
    out
}

/// Most past failures one dead-end warning cites (those of similar incidents first).
const DEAD_END_CITES: i64 = 12;

/// Successes of an action read to find two that did not share this incident's failure.
const SUCCESSES_READ: i64 = 50;

/// Checks an action against recorded remediation failures: same action kind and (same service,
/// a shared, specific failure mode — see [`GENERIC_TAGS`] — or a failure recorded during one of
/// the `similar` incidents, the most similar past incidents recall found for this one, see
/// [`similar_incidents`]). Successes of the same action under a different failure mode are named
/// too. `None` when nothing matches. At most [`DEAD_END_CITES`] failures are cited.
///
/// # Errors
/// Database errors.
pub async fn dead_end_warning(
    pool: &SqlitePool,
    action: ActionKind,
    service: &str,
    tags: &[String],
    similar: &[String],
) -> AppResult<Option<Warning>> {
    let modes: Vec<String> = tags
        .iter()
        .filter(|t| !GENERIC_TAGS.contains(&t.as_str()))
        .cloned()
        .collect();
    let records =
        mstore::dead_ends_for(pool, action, service, &modes, similar, DEAD_END_CITES).await?;
    let shares = |r: &MemoryRecord| {
        r.services.iter().any(|s| s == service)
            || r.failure_modes
                .iter()
                .any(|t| tags.contains(t) && !GENERIC_TAGS.contains(&t.as_str()))
            || r.incident_id.as_ref().is_some_and(|i| similar.contains(i))
    };
    let failures: Vec<&MemoryRecord> = records
        .iter()
        .filter(|r| r.kind == MemoryKind::RemediationFailure && shares(r))
        .collect();
    if failures.is_empty() {
        return Ok(None);
    }
    let mut incident_ids: Vec<String> = Vec::new();
    let mut parts = Vec::new();
    for f in &failures {
        let inc = f
            .incident_id
            .clone()
            .unwrap_or_else(|| "an earlier incident".into());
        let outcome = if f.data.get("verdict").and_then(|v| v.as_str()) == Some("made_worse") {
            "made it worse"
        } else {
            "did not resolve"
        };
        let note = f
            .data
            .get("note")
            .and_then(|v| v.as_str())
            .filter(|n| !n.is_empty())
            .unwrap_or(&f.text);
        parts.push(format!(
            "tried during {inc} and {outcome}: {}",
            crate::evidence::truncate_chars(note, 300).trim_end_matches('.')
        ));
        if !incident_ids.contains(&inc) {
            incident_ids.push(inc);
        }
    }
    let failure_tags: BTreeSet<&String> = failures
        .iter()
        .flat_map(|f| f.failure_modes.iter())
        .collect();
    let worked = mstore::successes_for(pool, action, SUCCESSES_READ).await?;
    let successes: Vec<&MemoryRecord> = worked
        .iter()
        .filter(|r| {
            r.kind == MemoryKind::RemediationSuccess
                && !r
                    .failure_modes
                    .iter()
                    .any(|t| failure_tags.contains(t) && tags.contains(t))
        })
        .collect();
    let mut message = format!(
        "{} {}. Confirm why this time is different before approving.",
        action.label(),
        parts.join("; ")
    );
    let mut worked_in = Vec::new();
    for s in successes.iter().take(2) {
        let inc = s
            .incident_id
            .clone()
            .unwrap_or_else(|| "an earlier incident".into());
        message.push_str(&format!(
            " It did work during {inc} ({}).",
            if s.failure_modes.is_empty() {
                "different failure mode".to_string()
            } else {
                s.failure_modes.join(", ")
            }
        ));
        worked_in.push(inc);
    }
    Ok(Some(Warning {
        message,
        incident_ids,
        memory_ids: failures.iter().map(|f| f.id).collect(),
        worked_in,
    }))
}

/// What the team decided about an action before, for its place in the list: an action that
/// resolved a similar past incident comes first, one the team rejected (earlier in this
/// incident, or during a similar past incident) after the others, a known dead end last
/// ([`dead_end_warning`]). The reason is shown in front of the rationale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Precedent {
    /// It resolved (or partly resolved) `incident`, a similar past incident; `text` says how.
    Resolved {
        /// The past incident.
        incident: String,
        /// The remediation-success record's text.
        text: String,
    },
    /// Nothing recorded.
    Unknown,
    /// The team rejected it: `during` this incident or a similar past one, for `reason`.
    Rejected {
        /// Where: "earlier in this incident" or "during the similar past incident INC-…".
        during: String,
        /// Why it was rejected.
        reason: String,
    },
}

impl Precedent {
    /// Sort key: resolved before → 0, nothing → 1, rejected before → 2.
    pub fn rank(&self) -> u8 {
        match self {
            Self::Resolved { .. } => 0,
            Self::Unknown => 1,
            Self::Rejected { .. } => 2,
        }
    }

    /// The rationale with the precedent in front of it (unless it already names it).
    pub fn explain(&self, rationale: &str) -> String {
        match self {
            Self::Unknown => rationale.to_string(),
            Self::Resolved { incident, .. } if rationale.contains(incident.as_str()) => {
                rationale.to_string()
            }
            Self::Resolved { incident, text } => format!(
                "Resolved the similar past incident {incident} ({}). {rationale}",
                crate::evidence::truncate_chars(text, 200).trim_end_matches('.')
            ),
            Self::Rejected { during, reason } => format!(
                "Rejected {during}: {}. {rationale}",
                crate::evidence::truncate_chars(reason, 300).trim_end_matches('.')
            ),
        }
    }
}

/// The [`Precedent`] of `action`: rejected in this incident (`rejected_here`: kinds with the
/// reason) first, then resolved during a similar past incident (`past`: remediation records of
/// the similar incidents, most similar first), then rejected during one (`past_rejections`).
pub fn precedent(
    action: ActionKind,
    rejected_here: &[(String, String)],
    past: &[MemoryRecord],
    past_rejections: &[MemoryRecord],
) -> Precedent {
    if let Some((_, reason)) = rejected_here.iter().find(|(k, _)| k == action.as_str()) {
        return Precedent::Rejected {
            during: "earlier in this incident".into(),
            reason: reason.clone(),
        };
    }
    if let Some(r) = past.iter().find(|r| {
        r.kind == MemoryKind::RemediationSuccess
            && r.action_kind == Some(action)
            && r.incident_id.is_some()
    }) {
        return Precedent::Resolved {
            incident: r.incident_id.clone().unwrap_or_default(),
            text: r.text.clone(),
        };
    }
    if let Some(r) = past_rejections
        .iter()
        .find(|r| r.action_kind == Some(action))
    {
        let inc = r.incident_id.clone().unwrap_or_default();
        // Learn writes "… was rejected during INC-…: <reason>".
        let reason = r
            .text
            .split_once(&format!("during {inc}: "))
            .map_or(r.text.as_str(), |(_, why)| why);
        return Precedent::Rejected {
            during: format!("during the similar past incident {inc}"),
            reason: reason.to_string(),
        };
    }
    Precedent::Unknown
}

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
    /// proposed / approved / rejected.
    pub status: String,
    /// Rejection reason.
    pub reject_reason: Option<String>,
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

/// Failure-mode tags of an incident: its observations' tags plus tags derived from its title and
/// description.
///
/// # Errors
/// Database errors.
pub async fn incident_tags(
    pool: &SqlitePool,
    incident: &crate::domain::Incident,
) -> AppResult<(Vec<MemoryRecord>, Vec<String>)> {
    let filter = mstore::MemoryFilter {
        incident: Some(incident.id.to_string()),
        kind: Some(MemoryKind::Observation),
        limit: Some(1000),
        ..Default::default()
    };
    let mut observations = mstore::list(pool, &filter).await?;
    observations.sort_by_key(|o| {
        std::cmp::Reverse(o.data.get("salience").and_then(|s| s.as_i64()).unwrap_or(0))
    });
    let mut tags: BTreeSet<String> = observations
        .iter()
        .flat_map(|o| o.failure_modes.iter().cloned())
        .collect();
    // A line break between them: a negation in the title must not reach into the description.
    tags.extend(recall::derive_tags(&format!(
        "{}\n{}",
        incident.title, incident.description
    )));
    // The synonym table and the load shape read the evidence lines too, not only the catalogue.
    for o in &observations {
        if let Some(line) = o.data.get("example").and_then(|e| e.as_str()) {
            tags.extend(recall::derive_tags(line));
        }
    }
    Ok((observations, tags.into_iter().collect()))
}

/// The recall an incident page and the analyst use: descriptive text of the incident, its
/// service and failure modes, excluding its own records.
///
/// # Errors
/// Database errors.
pub async fn recall_for_incident(
    memory: &Memory,
    incident: &crate::domain::Incident,
    observations: &[MemoryRecord],
    tags: &[String],
    k: usize,
) -> AppResult<recall::RecallResult> {
    let mut text = format!("{}\n{}", incident.title, incident.description);
    for o in observations
        .iter()
        .filter(|o| !crate::domain::memory::is_summary(o))
        .take(10)
    {
        // The line itself, not the statement around it ("ERROR template seen 12 times …").
        let line = o
            .data
            .get("example")
            .and_then(|e| e.as_str())
            .unwrap_or(&o.text);
        text.push('\n');
        text.push_str(crate::evidence::truncate_chars(line, 300));
    }
    let q = RecallQuery {
        text,
        service: Some(incident.service.clone()),
        failure_modes: tags.to_vec(),
        exclude_incident: Some(incident.id.to_string()),
        // A wider pool than shown, so each past incident's similarity sums its best records.
        k: k.max(INCIDENT_POOL),
        ..Default::default()
    };
    let mut result = recall::recall(memory, &q).await?;
    incidents_first(&mut result.results, &result.incidents);
    // At most PER_INCIDENT records of one past incident are shown, so rules and dead ends of
    // the next incidents still fit.
    let mut shown: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    result.results.retain(|r| match &r.memory.incident_id {
        Some(i) => {
            let n = shown.entry(i.clone()).or_default();
            *n += 1;
            *n <= PER_INCIDENT
        }
        None => true,
    });
    result.results.truncate(k);
    Ok(result)
}

/// [`recall_for_incident`] for an incident page: recall runs when the memory, the incident or
/// its evidence changed since the page last showed it, and is read from [`Memory`]'s cache
/// otherwise (a page view costs one generation read, not a recall).
///
/// # Errors
/// Database errors.
pub async fn page_recall(
    memory: &Memory,
    incident: &crate::domain::Incident,
    observations: &[MemoryRecord],
    tags: &[String],
    k: usize,
) -> AppResult<std::sync::Arc<recall::RecallResult>> {
    let index = memory.index().await?;
    let (epoch, generation) = index.generation();
    let key = format!(
        "{epoch}:{generation}:{}:{}:{}:{k}",
        incident.version,
        observations.len(),
        observations.iter().map(|o| o.id).max().unwrap_or(0)
    );
    if let Some(hit) = memory.page_recall(incident.id.as_str(), &key) {
        return Ok(hit);
    }
    let result =
        std::sync::Arc::new(recall_for_incident(memory, incident, observations, tags, k).await?);
    memory.keep_page_recall(incident.id.as_str(), key, std::sync::Arc::clone(&result));
    Ok(result)
}

/// Records recalled for an incident page before they are grouped by past incident and cut to
/// what is shown.
const INCIDENT_POOL: usize = 40;

/// Records of one past incident shown at most on an incident page.
const PER_INCIDENT: usize = 4;

/// Orders recall results for an incident page by past incident, most similar first: the
/// incident-level ranking of recall ([`IncidentMatch`]: documents, passages and parts fused by
/// rank). Records of one incident keep their order; records of no incident (notes, runbooks)
/// come after the [`SIMILAR_INCIDENTS`] most similar incidents, and records of incidents the
/// ranking does not hold last. Stable, and only reorders.
///
/// (An earlier boost per shared failure-mode tag was removed: on `recall-dev-hard.json` it moved
/// hit@1 from 0.944 down to 0.889.)
pub fn incidents_first(results: &mut [Recalled], incidents: &[IncidentMatch]) {
    let position: std::collections::HashMap<&str, f64> = incidents
        .iter()
        .enumerate()
        .map(|(p, m)| (m.incident_id.as_str(), p as f64))
        .collect();
    let key = |r: &Recalled| match r.memory.incident_id.as_deref() {
        Some(i) => position.get(i).copied().unwrap_or(f64::MAX),
        None => SIMILAR_INCIDENTS as f64 - 0.5,
    };
    results.sort_by(|a, b| key(a).total_cmp(&key(b)));
}

/// What an analyst is given for `incident`: its observations and failure-mode tags (from
/// [`incident_tags`]), what recall returns for it (k = 12, see [`recall_for_incident`]) and the
/// remediations tried during its [`SIMILAR_INCIDENTS`] most similar past incidents.
///
/// # Errors
/// Database errors.
pub async fn analyst_input(
    memory: &Memory,
    incident: crate::domain::Incident,
    observations: Vec<MemoryRecord>,
    failure_modes: Vec<String>,
) -> AppResult<InvestigationInput> {
    let pool = memory.pool();
    let result = recall_for_incident(memory, &incident, &observations, &failure_modes, 12).await?;
    let similar = similar_incidents(&result.results, &result.incidents);
    let recalled = result.results;
    let mut tried = mstore::remediations_of_incidents(pool, &similar).await?;
    // Most similar incident first; within one incident, in the order they were recorded.
    tried.sort_by_key(|r| {
        similar
            .iter()
            .position(|s| r.incident_id.as_ref() == Some(s))
            .unwrap_or(usize::MAX)
    });
    Ok(InvestigationInput {
        incident,
        observations,
        recalled,
        failure_modes,
        tried,
        similar,
    })
}

/// Runs an investigation on incident `id` for `actor` with the built-in analyst, or `llm` when
/// configured (falling back to the built-in result with a notice), validates, stores and returns
/// it.
///
/// # Errors
/// [`AppError::NotFound`]; [`AppError::Conflict`] for a learned incident.
pub async fn investigate(
    memory: &Memory,
    llm: Option<&dyn Analyst>,
    actor: &str,
    id: &IncidentId,
) -> AppResult<InvestigationView> {
    let pool = memory.pool();
    let incident = incidents::get(pool, id).await?;
    if incident.state == IncidentState::Learned {
        return Err(AppError::Conflict(format!("{id} is learned and closed")));
    }
    let (observations, tags) = incident_tags(pool, &incident).await?;
    let input = analyst_input(memory, incident.clone(), observations, tags).await?;
    let memory_empty = input.recalled.is_empty();
    let mut notices: Vec<String> = Vec::new();
    if memory_empty {
        notices.push(recall::NOTHING_FOUND.to_string());
    }
    let mut fallback: Option<String> = None;
    let (output, analyst_name): (AnalystOutput, String) = match llm {
        Some(a) => match a.investigate(&input).await {
            Ok(o) if crate::analyst::llm::has_usable_items(&o) => (o, a.name()),
            Ok(o) => {
                let mut reason = "the reply had no usable hypothesis or action".to_string();
                let unknown: Vec<&str> = o.actions.iter().map(|a| a.kind.as_str()).collect();
                if !unknown.is_empty() {
                    reason.push_str(&format!(
                        " (unknown kinds: {})",
                        crate::evidence::truncate_chars(&unknown.join(", "), 200)
                    ));
                }
                if !o.dropped.is_empty() {
                    reason.push_str(&format!(
                        " (dropped: {})",
                        crate::evidence::truncate_chars(&o.dropped.join("; "), 300)
                    ));
                }
                tracing::warn!(reason = %reason, "model output unusable; using the built-in analyst");
                notices.push(format!(
                    "model unavailable: {reason}; showing the built-in analysis"
                ));
                fallback = Some(reason);
                (BuiltinAnalyst::analyse(&input), "built-in".into())
            }
            Err(e) => {
                tracing::warn!(error = %e, "model unavailable; using the built-in analyst");
                notices.push(format!(
                    "model unavailable: {e}; showing the built-in analysis"
                ));
                fallback = Some(e.to_string());
                (BuiltinAnalyst::analyse(&input), "built-in".into())
            }
        },
        None => (BuiltinAnalyst::analyse(&input), "built-in".into()),
    };
    let similar = input.similar.clone();
    store_investigation(
        pool,
        actor,
        &incident,
        &input.observations,
        &input.recalled,
        &input.failure_modes,
        &similar,
        output,
        &analyst_name,
        notices,
        memory_empty,
        fallback.as_deref(),
    )
    .await
}

#[allow(clippy::too_many_arguments)]
async fn store_investigation(
    pool: &SqlitePool,
    actor: &str,
    incident: &crate::domain::Incident,
    observations: &[MemoryRecord],
    recalled: &[Recalled],
    tags: &[String],
    similar: &[String],
    output: AnalystOutput,
    analyst_name: &str,
    notices: Vec<String>,
    memory_empty: bool,
    fallback: Option<&str>,
) -> AppResult<InvestigationView> {
    let now = store::now();
    let mut dropped = output.dropped.clone();
    // Known records an analyst may cite: this incident's observations and what recall returned.
    let mut known: std::collections::HashMap<i64, SourceInfo> = std::collections::HashMap::new();
    for o in observations {
        known.insert(
            o.id,
            SourceInfo {
                epistemic_type: o.epistemic_type,
                kind: o.kind,
                age_days: o.age_days(now),
                contradicted_by: None,
            },
        );
    }
    for r in recalled {
        known.insert(
            r.memory.id,
            SourceInfo {
                epistemic_type: r.memory.epistemic_type,
                kind: r.memory.kind,
                age_days: r.memory.age_days(now),
                contradicted_by: r
                    .memory
                    .data
                    .get("contradicted_by")
                    .and_then(|v| v.as_i64()),
            },
        );
    }
    let mut hyps = Vec::new();
    for (i, h) in output.hypotheses.iter().enumerate() {
        let mut cites = Vec::new();
        for c in &h.cites {
            if known.contains_key(c) {
                if !cites.contains(c) {
                    cites.push(*c);
                }
            } else {
                dropped.push(format!(
                    "hypothesis {}: citation of unknown record {c}",
                    i + 1
                ));
            }
        }
        let mut prior = Vec::new();
        for p in &h.prior_incidents {
            if p.id != incident.id.as_str() && rstore::incident_exists(pool, &p.id).await? {
                prior.push(p.clone());
            } else {
                dropped.push(format!(
                    "hypothesis {}: citation of incident '{}' that does not exist",
                    i + 1,
                    crate::evidence::truncate_chars(&p.id, 40)
                ));
            }
        }
        if cites.is_empty() {
            // An inference must rest on something: fall back to the most salient observation.
            match observations.first() {
                Some(o) => cites.push(o.id),
                None => {
                    dropped.push(format!(
                        "hypothesis {}: no evidence to cite (add evidence first)",
                        i + 1
                    ));
                    continue;
                }
            }
        }
        let sources: Vec<SourceInfo> = cites.iter().filter_map(|c| known.get(c).copied()).collect();
        let mut confidence = confidence_ceiling(h.confidence, &sources);
        if memory_empty {
            confidence = Confidence::Low;
        }
        // Say why a contradicted source lowered it (issue #22).
        let denied: Vec<String> = cites
            .iter()
            .filter_map(|c| Some((c, known.get(c)?.contradicted_by?)))
            .map(|(c, by)| format!("MEM-{c} is contradicted by the later MEM-{by}"))
            .collect();
        let statement = if denied.is_empty() {
            h.statement.clone()
        } else {
            format!(
                "{} (confidence lowered: {})",
                h.statement,
                denied.join("; ")
            )
        };
        hyps.push((i, statement, confidence, cites, prior));
    }
    // What the team decided before: rejections earlier in this incident, what worked or was
    // rejected during the similar past incidents (most similar first).
    let rejected_here: Vec<(String, String)> = rstore::of_incident(pool, incident.id.as_str())
        .await?
        .into_iter()
        .rev()
        .filter(|r| r.status == "rejected")
        .map(|r| (r.action_kind, r.reject_reason.unwrap_or_default()))
        .collect();
    let by_similarity = |r: &MemoryRecord| {
        similar
            .iter()
            .position(|s| r.incident_id.as_ref() == Some(s))
            .unwrap_or(usize::MAX)
    };
    let mut past = mstore::remediations_of_incidents(pool, similar).await?;
    past.sort_by_key(by_similarity);
    let mut past_rejections = mstore::rejections_of_incidents(pool, similar).await?;
    past_rejections.sort_by_key(by_similarity);
    // Actions: coerce into the closed vocabulary, drop the rest, one per kind.
    let mut chosen = Vec::new();
    let mut seen = HashSet::new();
    for a in &output.actions {
        match ActionKind::coerce(&a.kind) {
            Some(k) if seen.insert(k) => chosen.push((k, a)),
            Some(_) => {}
            None => dropped.push(format!(
                "unknown kind '{}'",
                crate::evidence::truncate_chars(&a.kind, 60)
            )),
        }
    }
    // Every action's dead-end check at once: each is a few indexed reads, on the pool's
    // connections side by side.
    let warnings = futures::future::try_join_all(
        chosen
            .iter()
            .map(|(k, _)| dead_end_warning(pool, *k, &incident.service, tags, similar)),
    )
    .await?;
    let mut actions = Vec::new();
    for ((k, a), warning) in chosen.into_iter().zip(warnings) {
        let target = if a.target.trim().is_empty() {
            incident.service.clone()
        } else {
            crate::evidence::truncate_chars(a.target.trim(), 200).to_string()
        };
        let before = precedent(k, &rejected_here, &past, &past_rejections);
        let rank = before.rank();
        actions.push((
            k,
            target,
            before.explain(&a.rationale),
            a.hypothesis,
            warning,
            rank,
        ));
    }
    // Resolved before first, rejected before after the others, known dead ends last; never
    // hidden. Stable: the analyst's order within each group.
    actions.sort_by_key(|a| (a.4.is_some(), a.5));
    if !dropped.is_empty() {
        tracing::info!(incident.id = %incident.id, dropped = dropped.len(), "analyst output items dropped");
    }
    let mut notice_parts = notices;
    let proposed = output.actions.len();
    let unknown = dropped
        .iter()
        .filter(|d| d.starts_with("unknown kind"))
        .count();
    if unknown > 0 {
        notice_parts.push(format!(
            "model proposed {proposed} actions, {unknown} dropped: {}",
            dropped
                .iter()
                .filter(|d| d.starts_with("unknown kind"))
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let mut notice = if notice_parts.is_empty() {
        None
    } else {
        Some(notice_parts.join(". "))
    };

    let mut tx = store::begin_write(pool).await?;
    // What the analyst (a model, possibly echoing its input) wrote is redacted like any input.
    {
        let mut texts: Vec<&mut String> = dropped.iter_mut().collect();
        if let Some(n) = notice.as_mut() {
            texts.push(n);
        }
        for a in actions.iter_mut() {
            texts.push(&mut a.1);
            texts.push(&mut a.2);
        }
        crate::services::memory::redact_for(&mut tx, Some(incident.id.as_str()), &mut texts)
            .await?;
    }
    let recalled_ids: Vec<i64> = recalled.iter().map(|r| r.memory.id).collect();
    let inv_id = rstore::insert_investigation(
        &mut tx,
        incident.id.as_str(),
        actor,
        analyst_name,
        notice.as_deref(),
        &dropped,
        &recalled_ids,
        now,
    )
    .await?;
    let mut hyp_ids = Vec::new();
    for (i, statement, confidence, cites, prior) in &hyps {
        let mut r = NewRecord::new(MemoryKind::Hypothesis, statement.clone(), actor);
        r.epistemic_type = EpistemicType::Inference;
        r.incident_id = Some(incident.id.to_string());
        r.services = vec![incident.service.clone()];
        r.failure_modes = tags.to_vec();
        r.confidence = Some(*confidence);
        r.cites = cites.clone();
        r.data = serde_json::json!({"investigation_id": inv_id, "prior_incidents": prior, "analyst": analyst_name});
        let (hid, _) = crate::services::memory::write_in(&mut tx, r).await?;
        hyp_ids.push((*i, hid));
    }
    for (pos, (kind, target, rationale, hyp, warning, _)) in actions.iter().enumerate() {
        let hypothesis_id =
            hyp.and_then(|h| hyp_ids.iter().find(|(i, _)| *i == h).map(|(_, id)| *id));
        let mut r = NewRecord::new(
            MemoryKind::Recommendation,
            format!("{} on {target}: {rationale}", kind.label()),
            actor,
        );
        r.epistemic_type = EpistemicType::Decision;
        r.incident_id = Some(incident.id.to_string());
        r.services = vec![incident.service.clone()];
        r.failure_modes = tags.to_vec();
        r.action_kind = Some(*kind);
        r.target = Some(target.clone());
        r.validation = crate::domain::Validation::Pending;
        r.cites = hypothesis_id.into_iter().collect();
        r.data = serde_json::json!({"investigation_id": inv_id, "warning": warning});
        let (rid, _) = crate::services::memory::write_in(&mut tx, r).await?;
        let warning_json = warning
            .as_ref()
            .map(|w| serde_json::to_string(w).unwrap_or_default());
        rstore::insert(
            &mut tx,
            &rstore::NewRecommendation {
                investigation_id: inv_id,
                incident_id: incident.id.as_str(),
                record_id: rid,
                hypothesis_id,
                action_kind: kind.as_str(),
                target,
                rationale,
                warning: warning_json,
                position: pos as i64,
            },
        )
        .await?;
    }
    let flagged = actions.iter().filter(|a| a.4.is_some()).count();
    let detail = format!(
        "{} hypotheses, {} recommendations ({} flagged as known dead ends) by the {} analyst",
        hyps.len(),
        actions.len(),
        flagged,
        analyst_name
    );
    incidents::add_event(&mut tx, &incident.id, now, actor, "investigated", &detail).await?;
    audit::append(
        &mut tx,
        actor,
        "incident.investigate",
        incident.id.as_str(),
        &serde_json::json!({
            "investigation": inv_id, "analyst": analyst_name, "fallback": fallback,
        })
        .to_string(),
    )
    .await?;
    tx.commit().await?;
    view_investigation(pool, inv_id).await
}

/// Loads a stored investigation with its hypotheses, recommendations and recalled memories.
///
/// # Errors
/// Database errors; [`AppError::NotFound`].
pub async fn view_investigation(pool: &SqlitePool, inv_id: i64) -> AppResult<InvestigationView> {
    let inv = rstore::get_investigation(pool, inv_id).await?;
    let filter = mstore::MemoryFilter {
        incident: Some(inv.incident_id.clone()),
        kind: Some(MemoryKind::Hypothesis),
        limit: Some(1000),
        ..Default::default()
    };
    let mut hyps: Vec<MemoryRecord> = mstore::list(pool, &filter)
        .await?
        .into_iter()
        .filter(|h| h.data.get("investigation_id").and_then(|v| v.as_i64()) == Some(inv_id))
        .collect();
    hyps.sort_by_key(|h| h.id);
    let mut cite_refs = std::collections::HashMap::new();
    let all_cited: Vec<i64> = hyps
        .iter()
        .flat_map(|h| h.sources.iter().copied())
        .collect();
    for r in mstore::get_many(pool, &all_cited).await? {
        cite_refs.insert(r.id, r.reference());
    }
    let hypotheses = hyps
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
    let recs = rstore::of_investigation(pool, inv_id).await?;
    let transcripts = mstore::get_many(
        pool,
        &recs
            .iter()
            .filter_map(|r| r.transcript_id)
            .collect::<Vec<_>>(),
    )
    .await?;
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
            verdict: r.verdict,
            verdict_note: r.verdict_note,
            hypothesis_id: r.hypothesis_id,
        })
        .collect();
    let recalled_ids: Vec<i64> = serde_json::from_str(&inv.recalled).unwrap_or_default();
    let recalled = mstore::get_many(pool, &recalled_ids)
        .await?
        .into_iter()
        .map(|m| RecalledView {
            id: m.id,
            kind: m.kind,
            incident_id: m.incident_id.clone(),
            why: String::new(),
            text: m.text,
        })
        .collect();
    Ok(InvestigationView {
        investigation_id: inv.id,
        analyst: inv.analyst,
        hypotheses,
        recommendations,
        recalled,
        notice: inv.notice,
        dropped: serde_json::from_str(&inv.dropped).unwrap_or_default(),
    })
}

/// Deterministic simulated transcript of an action (no command is ever run).
pub fn simulate(kind: ActionKind, target: &str, incident: &str) -> String {
    // No counts, sizes, durations or limits: nothing ran, so any number here would be invented
    // (and read as a fact next to the evidence). What the action would change is named in words.
    let body = match kind {
        ActionKind::RestartService => format!(
            "rolling restart of {target}: every instance restarted one at a time, each back \
             behind the load balancer once its health check passed"
        ),
        ActionKind::RollbackDeploy => {
            format!("rolled back {target} to the previous release on every instance")
        }
        ActionKind::ScaleOut => {
            format!("added instances of {target}; new instances join the load balancer once ready")
        }
        ActionKind::ScaleIn => format!("removed instances of {target} after draining them"),
        ActionKind::RaisePoolLimit => format!(
            "raised the connection-pool limit of {target}; config reloaded on every instance \
             (check the database's connection limit has room for it)"
        ),
        ActionKind::LowerPoolLimit => format!(
            "lowered the connection-pool limit of {target}; config reloaded on every instance"
        ),
        ActionKind::FailoverDatabase => {
            format!("promoted the replica of {target}; writes go to the new primary")
        }
        ActionKind::FlushCache => {
            format!("flushed the cache of {target}: entries are rebuilt on the next reads")
        }
        ActionKind::DisableFeatureFlag => {
            format!("disabled the newest feature flag on {target} for all traffic")
        }
        ActionKind::DrainNode => {
            format!("cordoned and drained the node running {target}; its pods were rescheduled")
        }
        ActionKind::RotateCredentials => {
            format!("issued new credentials / certificate for {target} and reloaded its instances")
        }
        ActionKind::BlockTrafficSource => {
            format!("added a deny rule for the offending source in front of {target}")
        }
        ActionKind::IncreaseTimeout => format!("raised the request timeout of {target}"),
        ActionKind::RollForwardFix => {
            format!("deployed a fix to {target} on every instance")
        }
        ActionKind::PageOwnerTeam => format!("paged the team owning {target}"),
        ActionKind::GatherMoreEvidence => format!(
            "collected logs, metrics and recent changes for {target}; attach them as evidence"
        ),
        ActionKind::FreeDiskSpace => {
            format!("removed rotated logs and temporary files on {target}")
        }
        ActionKind::ThrottleClients => {
            format!("applied a rate limit to the heaviest clients of {target}")
        }
    };
    format!(
        "[SIMULATED — no command was run] {incident}\n$ simulate {} --target {target}\n{body}\nstatus: completed (simulation)",
        kind.as_str()
    )
}

/// Approves a proposed recommendation: writes the simulated transcript (an `action_result`
/// record) and puts it on the timeline. A second approval, or approving a rejected one, is a 409.
///
/// # Errors
/// [`AppError::NotFound`], [`AppError::Conflict`].
pub async fn approve(
    pool: &SqlitePool,
    actor: &str,
    id: &IncidentId,
    rid: i64,
) -> AppResult<RecommendationView> {
    let mut tx = store::begin_write(pool).await?;
    let incident = incidents::get_in(&mut tx, id).await?;
    if incident.state == IncidentState::Learned {
        return Err(AppError::Conflict(format!("{id} is learned and closed")));
    }
    let rec = rstore::get_in(&mut tx, id.as_str(), rid).await?;
    if rec.status != "proposed" {
        return Err(AppError::Conflict(format!(
            "recommendation {rid} is already {}",
            rec.status
        )));
    }
    let kind = ActionKind::parse(&rec.action_kind)?;
    let mut t = NewRecord::new(
        MemoryKind::ActionTranscript,
        simulate(kind, &rec.target, id.as_str()),
        actor,
    );
    t.epistemic_type = EpistemicType::ActionResult;
    t.incident_id = Some(id.to_string());
    t.services = vec![incident.service.clone()];
    t.action_kind = Some(kind);
    t.target = Some(rec.target.clone());
    t.cites = vec![rec.record_id];
    t.origin = Some(format!("approve:{rid}"));
    t.data = serde_json::json!({"simulated": true, "recommendation_id": rid});
    let (tid, _) = crate::services::memory::write_in(&mut tx, t).await?;
    let at = store::now();
    if !rstore::decide(&mut tx, rid, true, actor, None, Some(tid), at).await? {
        return Err(AppError::Conflict(format!(
            "recommendation {rid} was decided by someone else"
        )));
    }
    incidents::add_event(
        &mut tx,
        id,
        at,
        actor,
        "action_approved",
        &format!("{} on {} (simulated)", kind.as_str(), rec.target),
    )
    .await?;
    audit::append(
        &mut tx,
        actor,
        "recommendation.approve",
        id.as_str(),
        &serde_json::json!({"recommendation": rid, "kind": kind}).to_string(),
    )
    .await?;
    tx.commit().await?;
    recommendation_view(pool, rec.investigation_id, rid).await
}

async fn recommendation_view(
    pool: &SqlitePool,
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

/// Rejects a proposed recommendation with a reason (kept for Learn as a rejected
/// recommendation).
///
/// # Errors
/// Validation error for an empty reason; [`AppError::NotFound`]; [`AppError::Conflict`].
pub async fn reject(
    pool: &SqlitePool,
    actor: &str,
    id: &IncidentId,
    rid: i64,
    reason: &str,
) -> AppResult<RecommendationView> {
    let reason = crate::domain::required_text("reason", reason, 2000)?;
    let mut tx = store::begin_write(pool).await?;
    let rec = rstore::get_in(&mut tx, id.as_str(), rid).await?;
    if rec.status != "proposed" {
        return Err(AppError::Conflict(format!(
            "recommendation {rid} is already {}",
            rec.status
        )));
    }
    let mut reason_r = reason.clone();
    crate::services::memory::redact_for(&mut tx, Some(id.as_str()), &mut [&mut reason_r]).await?;
    let at = store::now();
    rstore::decide(&mut tx, rid, false, actor, Some(&reason_r), None, at).await?;
    incidents::add_event(
        &mut tx,
        id,
        at,
        actor,
        "action_rejected",
        &format!("{} on {}: {reason_r}", rec.action_kind, rec.target),
    )
    .await?;
    audit::append(
        &mut tx,
        actor,
        "recommendation.reject",
        id.as_str(),
        &serde_json::json!({"recommendation": rid}).to_string(),
    )
    .await?;
    tx.commit().await?;
    recommendation_view(pool, rec.investigation_id, rid).await
}

/// Verdicts on an approved action.
pub const VERDICTS: [&str; 4] = [
    "resolved",
    "partially_resolved",
    "did_not_resolve",
    "made_worse",
];

/// Records the verdict on an approved recommendation; `did_not_resolve` and `made_worse` write a
/// confirmed remediation_failure memory in the same transaction, visible to recall at once.
///
/// # Errors
/// Validation error for an unknown verdict; [`AppError::Conflict`] when not approved or already
/// judged.
pub async fn verdict(
    pool: &SqlitePool,
    actor: &str,
    id: &IncidentId,
    rid: i64,
    verdict: &str,
    note: &str,
) -> AppResult<RecommendationView> {
    let verdict = verdict.trim();
    if !VERDICTS.contains(&verdict) {
        return Err(ValidationError::new(
            "verdict",
            format!("'{verdict}' is not a verdict; use {}", VERDICTS.join(", ")),
        )
        .into());
    }
    let note = crate::domain::optional_text("note", note, 4000)?;
    let mut tx = store::begin_write(pool).await?;
    let incident = incidents::get_in(&mut tx, id).await?;
    let rec = rstore::get_in(&mut tx, id.as_str(), rid).await?;
    if rec.status != "approved" {
        return Err(AppError::Conflict(format!(
            "recommendation {rid} is {}: approve it before giving a verdict",
            rec.status
        )));
    }
    if let Some(v) = &rec.verdict {
        return Err(AppError::Conflict(format!(
            "recommendation {rid} already has the verdict {v}"
        )));
    }
    let mut note_r = note.clone();
    crate::services::memory::redact_for(&mut tx, Some(id.as_str()), &mut [&mut note_r]).await?;
    let at = store::now();
    if !rstore::set_verdict(&mut tx, rid, verdict, &note_r, actor, at).await? {
        return Err(AppError::Conflict(format!(
            "recommendation {rid} already has a verdict"
        )));
    }
    let kind = ActionKind::parse(&rec.action_kind)?;
    if verdict == "did_not_resolve" || verdict == "made_worse" {
        let (_, tags) = incident_tags(pool, &incident).await?;
        let outcome = if verdict == "made_worse" {
            "made it worse"
        } else {
            "did not resolve it"
        };
        let mut text = format!(
            "{} on {} during {} ({}) {outcome}",
            kind.label(),
            rec.target,
            id,
            incident.title
        );
        if !note_r.is_empty() {
            text.push_str(&format!(": {note_r}"));
        }
        let mut m = NewRecord::new(MemoryKind::RemediationFailure, text, actor);
        m.incident_id = Some(id.to_string());
        m.services = vec![incident.service.clone()];
        m.failure_modes = tags;
        m.action_kind = Some(kind);
        m.target = Some(rec.target.clone());
        m.importance = 3;
        m.cites = rec.transcript_id.into_iter().collect();
        m.origin = Some(format!("verdict:{rid}"));
        m.data = serde_json::json!({"verdict": verdict, "note": note_r, "recommendation_id": rid});
        let (failure, _) = crate::services::memory::write_in(&mut tx, m).await?;
        crate::services::proposals::draft_reflection_in(
            &mut tx, &incident, &rec, verdict, &note_r, failure, actor,
        )
        .await?;
    }
    incidents::add_event(
        &mut tx,
        id,
        at,
        actor,
        "verdict",
        &format!(
            "{} on {}: {}{}",
            kind.label(),
            rec.target,
            crate::domain::action::verdict_label(verdict),
            if note_r.is_empty() {
                String::new()
            } else {
                format!(" — {note_r}")
            }
        ),
    )
    .await?;
    audit::append(
        &mut tx,
        actor,
        "recommendation.verdict",
        id.as_str(),
        &serde_json::json!({"recommendation": rid, "verdict": verdict}).to_string(),
    )
    .await?;
    tx.commit().await?;
    recommendation_view(pool, rec.investigation_id, rid).await
}

/// A person adds an action of their own (from the closed vocabulary) to the incident's latest
/// investigation — or to a new one when none ran yet. It gets the same dead-end check as the
/// analyst's proposals.
///
/// # Errors
/// Validation errors for an unknown kind or empty target; [`AppError::Conflict`] when learned.
pub async fn propose(
    memory: &Memory,
    actor: &str,
    id: &IncidentId,
    kind: &str,
    target: &str,
    rationale: &str,
) -> AppResult<RecommendationView> {
    let pool = memory.pool();
    let kind = ActionKind::coerce(kind).ok_or_else(|| {
        ValidationError::new(
            "kind",
            format!(
                "'{kind}' is not an action kind; use one of: {}",
                ActionKind::ALL
                    .iter()
                    .map(|k| k.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
    })?;
    let incident = incidents::get(pool, id).await?;
    if incident.state == IncidentState::Learned {
        return Err(AppError::Conflict(format!("{id} is learned and closed")));
    }
    let target = if target.trim().is_empty() {
        incident.service.clone()
    } else {
        crate::domain::optional_text("target", target, 200)?
    };
    let mut rationale = crate::domain::optional_text("rationale", rationale, 2000)?;
    let mut target = target;
    let (observations, tags) = incident_tags(pool, &incident).await?;
    let recalled = recall_for_incident(memory, &incident, &observations, &tags, 12).await?;
    let similar = similar_incidents(&recalled.results, &recalled.incidents);
    let warning = dead_end_warning(pool, kind, &incident.service, &tags, &similar).await?;
    let now = store::now();
    let mut tx = store::begin_write(pool).await?;
    crate::services::memory::redact_for(
        &mut tx,
        Some(id.as_str()),
        &mut [&mut target, &mut rationale],
    )
    .await?;
    let latest = rstore::latest_investigation(pool, id.as_str()).await?;
    let inv_id = match latest {
        Some(i) => i.id,
        None => {
            rstore::insert_investigation(&mut tx, id.as_str(), actor, "person", None, &[], &[], now)
                .await?
        }
    };
    let position: i64 = rstore::of_investigation(pool, inv_id).await?.len() as i64
        + if warning.is_some() { 1000 } else { 0 };
    let mut r = NewRecord::new(
        MemoryKind::Recommendation,
        format!("{} on {target}: {rationale}", kind.label()),
        actor,
    );
    r.epistemic_type = EpistemicType::Decision;
    r.incident_id = Some(id.to_string());
    r.services = vec![incident.service.clone()];
    r.failure_modes = tags;
    r.action_kind = Some(kind);
    r.target = Some(target.clone());
    r.validation = crate::domain::Validation::Pending;
    r.data =
        serde_json::json!({"investigation_id": inv_id, "warning": warning, "proposed_by": actor});
    let (rid, _) = crate::services::memory::write_in(&mut tx, r).await?;
    let warning_json = warning
        .as_ref()
        .map(|w| serde_json::to_string(w).unwrap_or_default());
    let rec_id = rstore::insert(
        &mut tx,
        &rstore::NewRecommendation {
            investigation_id: inv_id,
            incident_id: id.as_str(),
            record_id: rid,
            hypothesis_id: None,
            action_kind: kind.as_str(),
            target: &target,
            rationale: &rationale,
            warning: warning_json,
            position,
        },
    )
    .await?;
    incidents::add_event(
        &mut tx,
        id,
        now,
        actor,
        "action_proposed",
        &format!("{} on {target}", kind.as_str()),
    )
    .await?;
    tx.commit().await?;
    recommendation_view(pool, inv_id, rec_id).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simulated_transcripts_invent_no_numbers() {
        for kind in ActionKind::ALL {
            let t = simulate(*kind, "orders-api", "INC-2026-0001");
            let body: String = t.lines().skip(1).collect::<Vec<_>>().join("\n");
            assert!(
                !body.chars().any(|c| c.is_ascii_digit()),
                "{kind:?} invents a number: {body}"
            );
            assert!(t.starts_with("[SIMULATED"), "{t}");
        }
    }
    use crate::domain::{EpistemicType, MemoryKind, Validation};
    use crate::memory::recall::Why;

    /// A recalled record of `incident` (or of none) with `score`, its failure modes and `why`.
    fn recalled(id: i64, incident: Option<&str>, score: f64, tags: &[&str], why: Why) -> Recalled {
        Recalled {
            memory: MemoryRecord {
                id,
                kind: MemoryKind::RootCause,
                epistemic_type: EpistemicType::Inference,
                text: format!("record {id}"),
                services: Vec::new(),
                failure_modes: tags.iter().map(|t| t.to_string()).collect(),
                action_kind: None,
                target: None,
                incident_id: incident.map(str::to_string),
                validation: Validation::Confirmed,
                confidence: None,
                importance: 2,
                rule: None,
                author: "victor".into(),
                created_at: jiff::Timestamp::UNIX_EPOCH,
                last_recalled_at: None,
                recall_count: 0,
                evidence_count: 1,
                superseded_by: None,
                sources: Vec::new(),
                data: serde_json::Value::Null,
            },
            score,
            why,
            marks: Vec::new(),
        }
    }

    fn ids(results: &[Recalled]) -> Vec<i64> {
        results.iter().map(|r| r.memory.id).collect()
    }

    fn matched(id: &str, score: f64) -> IncidentMatch {
        IncidentMatch {
            incident_id: id.into(),
            score,
            lists: vec!["doc_vector"],
            ranks: vec![1],
            cosine: None,
        }
    }

    #[test]
    fn records_follow_the_incident_ranking_and_notes_come_after_the_most_similar() {
        let (a, b, c) = ("INC-2026-0001", "INC-2026-0002", "INC-2026-0003");
        let mut results = vec![
            recalled(1, Some(b), 0.9, &[], Why::default()),
            recalled(2, None, 1.0, &[], Why::default()),
            recalled(3, Some(a), 0.5, &[], Why::default()),
            recalled(4, Some(c), 0.4, &[], Why::default()),
            recalled(5, Some(a), 0.3, &[], Why::default()),
        ];
        let ranking = [matched(a, 0.3), matched(b, 0.2), matched(c, 0.1)];
        incidents_first(&mut results, &ranking);
        // A's records in their own order, then B, then the note, then C.
        assert_eq!(ids(&results), vec![3, 5, 1, 2, 4]);
    }

    #[test]
    fn a_runner_up_found_by_words_alone_is_not_similar_enough() {
        let words = Why {
            matched_terms: vec!["pool".into()],
            tags: vec!["timeout".into()],
            ..Why::default()
        };
        let specific = Why {
            tags: vec!["connection_leak".into()],
            ..Why::default()
        };
        let most = recalled(1, Some("INC-2026-0001"), 0.9, &[], words.clone());
        let words_only = recalled(2, Some("INC-2026-0002"), 0.8, &[], words);
        let sharing = recalled(3, Some("INC-2026-0003"), 0.7, &[], specific);
        // The most similar always counts; the runner-up only when it shares a specific tag or
        // the service.
        assert_eq!(
            similar_incidents(&[most.clone(), words_only.clone()], &[]),
            vec!["INC-2026-0001".to_string()]
        );
        assert_eq!(
            similar_incidents(&[most.clone(), sharing], &[]),
            vec!["INC-2026-0001".to_string(), "INC-2026-0003".to_string()]
        );
        // A runner-up by words alone counts when recall's incident ranking cannot tell it from
        // the first; not when it trails clearly.
        let close = [
            matched("INC-2026-0001", 0.40),
            matched("INC-2026-0002", 0.38),
        ];
        assert_eq!(
            similar_incidents(&[most.clone(), words_only.clone()], &close),
            vec!["INC-2026-0001".to_string(), "INC-2026-0002".to_string()]
        );
        let distant = [
            matched("INC-2026-0001", 0.40),
            matched("INC-2026-0002", 0.30),
        ];
        assert_eq!(
            similar_incidents(&[most, words_only], &distant),
            vec!["INC-2026-0001".to_string()]
        );
    }
}
