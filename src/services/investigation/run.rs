//! One investigation: the analyst (built-in, or the model with the built-in as fallback) answers
//! on the incident's input; its answer is validated (citations, the closed vocabulary, confidence
//! ceilings), each action checked against dead ends and precedents, and everything stored in one
//! transaction.

use std::collections::{HashMap, HashSet};

use sqlx::AnyPool;

use super::view::{InvestigationView, view_of};
use super::warnings::{Precedent, Warning, dead_end_warnings, precedent};
use crate::analyst::{Analyst, AnalystOutput, InvestigationInput, PriorIncident};
use crate::domain::memory::{
    MemoryRecord, NewRecord, SourceInfo, check_citations, confidence_ceiling,
};
use crate::domain::{ActionKind, Confidence, EpistemicType, IncidentId, MemoryKind};
use crate::error::{AppError, AppResult};
use crate::evidence::redact::Redactor;
use crate::memory::Memory;
use crate::memory::incident::IncidentRecall;
use crate::memory::recall::{self, Recalled};
use crate::store::investigations::{self, NewAction, NewInvestigation};
use crate::store::{self, incidents, recommendations as rstore};

/// Runs an investigation on incident `id` for `actor` with `analyst` (the app's is the model
/// with the built-in analyst behind it, [`crate::analyst::fallback::WithFallback`]), validates,
/// stores and returns it.
///
/// # Errors
/// [`AppError::NotFound`]; [`AppError::Conflict`] for a stale `expected_version` (checked
/// before the work) and for a learned incident (checked before the work and in the write
/// transaction); [`AppError::Upstream`] never in practice (the app's analyst falls back to the
/// built-in one); database errors.
pub async fn investigate(
    memory: &Memory,
    analyst: &dyn Analyst,
    actor: &str,
    id: &IncidentId,
    expected_version: Option<i64>,
) -> AppResult<InvestigationView> {
    let pool = memory.pool();
    let incident = incidents::get(pool, id).await?;
    // Checked before the work, and again in the write transaction at the end
    // (`store::investigations::save`), which refuses an incident learned meanwhile.
    incident.check_version(expected_version)?;
    incident.check_open()?;
    // One of a few slots while the work is CPU work here; given back before a model call,
    // which waits on another server (holding it would queue every investigation behind it).
    let slot = memory.investigation_slot().await;
    let past = memory.recall_for_incident(&incident, 12).await?;
    let rejected = past.rejected.clone();
    let still_indexing = past.still_indexing;
    let input = input_of(past);
    let memory_empty = input.recalled.is_empty();
    let mut notices: Vec<String> = Vec::new();
    if still_indexing {
        notices.push(crate::memory::STILL_INDEXING.to_string());
    }
    if memory_empty {
        notices.push(recall::NOTHING_FOUND.to_string());
    }
    if analyst.calls_a_server() {
        // A model call waits on another server: holding the slot would queue every
        // investigation behind it.
        drop(slot);
    }
    // Never fails: the built-in analyst answers when the model does not.
    let output = analyst
        .investigate(&input)
        .await
        .map_err(|e| AppError::Upstream(e.to_string()))?;
    let analyst_name = match output.fallback {
        Some(_) => "built-in".to_string(),
        None => analyst.name(),
    };
    notices.extend(output.notices.iter().cloned());
    let checked = Checked {
        input: &input,
        rejected: &rejected,
        output: &output,
        analyst: &analyst_name,
        memory_empty,
    };
    store_investigation(pool, actor, checked, notices).await
}

/// The analyst's input from what memory holds for an incident: the incident, its observations
/// and tags, the recalled records, the similar incidents and the remediations tried during them.
fn input_of(past: IncidentRecall) -> InvestigationInput {
    InvestigationInput {
        redactor: past.redactor,
        incident: past.incident,
        observations: past.observations,
        recalled: past.recall.results,
        failure_modes: past.tags,
        tried: past.tried,
        similar: past.similar,
    }
}

/// What an analyst is given for `incident` with its `observations` and `failure_modes` read
/// already: recall with k = 12 and the remediations tried during its
/// [`crate::memory::incident::SIMILAR_INCIDENTS`] most similar past incidents.
///
/// # Errors
/// Database errors.
pub async fn analyst_input(
    memory: &Memory,
    incident: crate::domain::Incident,
    observations: Vec<MemoryRecord>,
    failure_modes: Vec<String>,
) -> AppResult<InvestigationInput> {
    let past = memory
        .recall_with(&incident, observations, failure_modes, 12)
        .await?;
    Ok(input_of(past))
}

/// What an investigation's answer is checked against, and the answer.
struct Checked<'a> {
    /// The analyst's input: the incident, its observations and tags, recall, similar
    /// incidents and what was tried during them.
    input: &'a InvestigationInput,
    /// Rejected recommendations of the similar incidents, most similar first.
    rejected: &'a [MemoryRecord],
    /// The analyst's answer.
    output: &'a AnalystOutput,
    /// The analyst's name.
    analyst: &'a str,
    /// Whether recall found nothing.
    memory_empty: bool,
}

/// A validated hypothesis: its place in the analyst's answer, statement, confidence after
/// ceilings, cited record ids and prior incidents.
type CheckedHypothesis = (usize, String, Confidence, Vec<i64>, Vec<PriorIncident>);

/// A chosen action: kind, target, rationale (with its precedent), the hypothesis it follows
/// from, its dead-end warning and its precedent's rank.
type CheckedAction = (
    ActionKind,
    String,
    String,
    Option<usize>,
    Option<Warning>,
    u8,
);

/// Checks the analyst's answer, writes it and returns it as stored.
async fn store_investigation(
    pool: &store::Db,
    actor: &str,
    checked: Checked<'_>,
    notices: Vec<String>,
) -> AppResult<InvestigationView> {
    let Checked { input, output, .. } = checked;
    let incident = &input.incident;
    let now = store::now();
    let mut dropped = output.dropped.clone();
    let before = Before::read(pool, &checked).await?;
    let known = known_sources(&input.observations, &input.recalled, now);
    let hyps = checked_hypotheses(
        incident,
        &input.observations,
        &known,
        &before.existing,
        output,
        checked.memory_empty,
        &mut dropped,
    );
    for (_, _, _, cites, _) in &hyps {
        let types: Vec<EpistemicType> = cites
            .iter()
            .filter_map(|c| known.get(c).map(|s| s.epistemic_type))
            .collect();
        check_citations(EpistemicType::Inference, &types)?;
    }
    let actions = checked_actions(&checked, before, &mut dropped);
    if !dropped.is_empty() {
        tracing::info!(incident.id = %incident.id, dropped = dropped.len(), "analyst output items dropped");
    }
    let notice = notice_of(notices, output, &dropped);
    let recalled: Vec<i64> = input.recalled.iter().map(|r| r.memory.id).collect();
    let written = Written {
        actor,
        incident,
        tags: &input.failure_modes,
        analyst: checked.analyst,
        fallback: output.fallback.as_deref(),
        now,
    };
    let stored = investigations::save(pool, &incident.id, actor, |current, redactor| {
        // A Learn that committed while the analyst worked closed the incident.
        current.check_open()?;
        Ok(written.investigation(redactor, notice, dropped, recalled, &hyps, actions))
    })
    .await?;
    Ok(view_of(stored))
}

/// Known records an analyst may cite: this incident's observations and what recall returned.
fn known_sources(
    observations: &[MemoryRecord],
    recalled: &[Recalled],
    now: jiff::Timestamp,
) -> HashMap<i64, SourceInfo> {
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
    known
}

/// The analyst's hypotheses with citations of known records and existing incidents only, the
/// most salient observation cited when none is left, and confidence after ceilings; what is
/// dropped is said in `dropped`. `existing` holds the prior incidents cited that exist.
fn checked_hypotheses(
    incident: &crate::domain::Incident,
    observations: &[MemoryRecord],
    known: &HashMap<i64, SourceInfo>,
    existing: &HashSet<String>,
    output: &AnalystOutput,
    memory_empty: bool,
    dropped: &mut Vec<String>,
) -> Vec<CheckedHypothesis> {
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
            if p.id != incident.id.as_str() && existing.contains(&p.id) {
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
        // Say why a contradicted source lowered it.
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
    hyps
}

/// The action kinds the analyst proposed, coerced into the closed vocabulary, each once, in
/// its order (unknown kinds left out: [`checked_actions`] says which).
fn chosen_kinds(output: &AnalystOutput) -> Vec<ActionKind> {
    let mut seen = HashSet::new();
    output
        .actions
        .iter()
        .filter_map(|a| ActionKind::coerce(&a.kind))
        .filter(|k| seen.insert(*k))
        .collect()
}

/// What the team decided before, read once for the checks: the prior incidents cited that
/// exist, and for each chosen kind ([`chosen_kinds`], in order) its dead-end warning and its
/// [`Precedent`] (rejected earlier in this incident, worked or rejected during a similar past
/// incident).
struct Before {
    existing: HashSet<String>,
    warnings: Vec<Option<Warning>>,
    precedents: Vec<Precedent>,
}

impl Before {
    /// Reads what the checks of `checked`'s answer need about its incident: this incident's
    /// recommendations and the cited incidents first, then the recorded outcomes of the chosen
    /// kinds.
    async fn read(pool: &AnyPool, checked: &Checked<'_>) -> AppResult<Self> {
        let Checked { input, output, .. } = *checked;
        let incident = &input.incident;
        let kinds = chosen_kinds(output);
        let priors: Vec<String> = output
            .hypotheses
            .iter()
            .flat_map(|h| h.prior_incidents.iter().map(|p| p.id.clone()))
            .collect();
        // Rejected earlier in this incident, newest first: kind and reason.
        let rejected_here: Vec<(String, String)> = rstore::of_incident(pool, incident.id.as_str())
            .await?
            .into_iter()
            .rev()
            .filter(|r| r.status == crate::domain::action::RecommendationStatus::Rejected)
            .map(|r| (r.action_kind, r.reject_reason.unwrap_or_default()))
            .collect();
        let existing = rstore::existing_incidents(pool, &priors).await?;
        let warnings = dead_end_warnings(
            pool,
            &kinds,
            &incident.service,
            &input.failure_modes,
            &input.similar,
        )
        .await?;
        let precedents = kinds
            .iter()
            .map(|k| precedent(*k, &rejected_here, &input.tried, checked.rejected))
            .collect();
        Ok(Self {
            existing,
            warnings,
            precedents,
        })
    }
}

/// The analyst's actions coerced into the closed vocabulary (one per kind, unknown kinds said in
/// `dropped`), each with its dead-end warning and its precedent — what the team decided before:
/// rejections earlier in this incident, what worked or was rejected during the similar past
/// incidents (most similar first) — in the order shown.
fn checked_actions(
    checked: &Checked<'_>,
    before: Before,
    dropped: &mut Vec<String>,
) -> Vec<CheckedAction> {
    let Checked { input, output, .. } = *checked;
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
    let mut actions = Vec::new();
    let decided = before.warnings.into_iter().zip(before.precedents);
    for ((k, a), (warning, precedent)) in chosen.into_iter().zip(decided) {
        let target = if a.target.trim().is_empty() {
            input.incident.service.clone()
        } else {
            crate::evidence::truncate_chars(a.target.trim(), 200).to_string()
        };
        let rank = precedent.rank();
        actions.push((
            k,
            target,
            precedent.explain(&a.rationale),
            a.hypothesis,
            warning,
            rank,
        ));
    }
    // Resolved before first, rejected before after the others, known dead ends last; never
    // hidden. Stable: the analyst's order within each group.
    actions.sort_by_key(|a| (a.4.is_some(), a.5));
    actions
}

/// The investigation's notice: `notices` and, when the model proposed unknown kinds, which.
fn notice_of(notices: Vec<String>, output: &AnalystOutput, dropped: &[String]) -> Option<String> {
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
    if notice_parts.is_empty() {
        None
    } else {
        Some(notice_parts.join(". "))
    }
}

/// Who writes an investigation, about what, and when.
struct Written<'a> {
    actor: &'a str,
    incident: &'a crate::domain::Incident,
    tags: &'a [String],
    analyst: &'a str,
    fallback: Option<&'a str>,
    now: jiff::Timestamp,
}

impl Written<'_> {
    /// The checked investigation as written, redacted with the incident's map: what the
    /// analyst (a model, possibly echoing its input) wrote is redacted like any input — the
    /// dropped items, the notice and each action's target and rationale, then each record's
    /// text and target.
    fn investigation(
        &self,
        redactor: &mut Redactor,
        mut notice: Option<String>,
        mut dropped: Vec<String>,
        recalled: Vec<i64>,
        hyps: &[CheckedHypothesis],
        mut actions: Vec<CheckedAction>,
    ) -> NewInvestigation {
        for d in dropped.iter_mut() {
            *d = redactor.redact(d);
        }
        if let Some(n) = notice.as_mut() {
            *n = redactor.redact(n);
        }
        for a in actions.iter_mut() {
            a.1 = redactor.redact(&a.1);
            a.2 = redactor.redact(&a.2);
        }
        let hypotheses = hyps
            .iter()
            .map(|(i, statement, confidence, cites, prior)| {
                let mut r = self.record(MemoryKind::Hypothesis, redactor.redact(statement));
                r.epistemic_type = EpistemicType::Inference;
                r.confidence = Some(*confidence);
                r.cites = cites.clone();
                r.data = serde_json::json!({"prior_incidents": prior, "analyst": self.analyst});
                (*i, r)
            })
            .collect::<Vec<_>>();
        let flagged = actions.iter().filter(|a| a.4.is_some()).count();
        let event = format!(
            "{} hypotheses, {} recommendations ({} flagged as known dead ends) by the {} analyst",
            hyps.len(),
            actions.len(),
            flagged,
            self.analyst
        );
        let recommendations = actions
            .into_iter()
            .map(|(kind, target, rationale, hypothesis, warning, _)| {
                let text = format!("{} on {target}: {rationale}", kind.label());
                let mut r = self.record(MemoryKind::Recommendation, redactor.redact(&text));
                r.epistemic_type = EpistemicType::Decision;
                r.action_kind = Some(kind);
                r.target = Some(redactor.redact(&target));
                r.validation = crate::domain::Validation::Pending;
                r.data = serde_json::json!({"warning": warning});
                NewAction {
                    record: r,
                    hypothesis,
                    kind,
                    target,
                    rationale,
                    warning: warning
                        .as_ref()
                        .map(|w| serde_json::to_string(w).unwrap_or_default()),
                }
            })
            .collect();
        NewInvestigation {
            incident_id: self.incident.id.clone(),
            actor: self.actor.to_string(),
            analyst: self.analyst.to_string(),
            fallback: self.fallback.map(str::to_string),
            notice,
            dropped,
            recalled,
            at: self.now,
            hypotheses,
            recommendations,
            event,
        }
    }

    /// A working record of `kind` about the incident, its service and tags.
    fn record(&self, kind: MemoryKind, text: String) -> NewRecord {
        let mut r = NewRecord::new(kind, text, self.actor);
        r.incident_id = Some(self.incident.id.to_string());
        r.services = vec![self.incident.service.clone()];
        r.failure_modes = self.tags.to_vec();
        r
    }
}
