//! One investigation: the analyst (built-in, or the model with the built-in as fallback) answers
//! on the incident's input; its answer is validated (citations, the closed vocabulary, confidence
//! ceilings), each action checked against dead ends and precedents, and everything stored in one
//! transaction.

use std::collections::{HashMap, HashSet};

use sqlx::AnyPool;

use super::input::{analyst_input, incident_tags};
use super::view::{InvestigationView, view_investigation};
use super::warnings::{Warning, dead_end_warning, precedent};
use crate::analyst::builtin::BuiltinAnalyst;
use crate::analyst::{Analyst, AnalystOutput, PriorIncident};
use crate::domain::memory::{MemoryRecord, NewRecord, SourceInfo, confidence_ceiling};
use crate::domain::{ActionKind, Confidence, EpistemicType, IncidentId, IncidentState, MemoryKind};
use crate::error::{AppError, AppResult};
use crate::memory::Memory;
use crate::memory::recall::{self, Recalled};
use crate::store::{self, audit, incidents, memory as mstore, recommendations as rstore};

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
    // One of a few slots while the work is CPU work here; given back before a model call,
    // which waits on another server (holding it would queue every investigation behind it).
    let slot = memory.investigation_slot().await;
    let (observations, tags) = incident_tags(pool, &incident).await?;
    let input = analyst_input(memory, incident.clone(), observations, tags).await?;
    let memory_empty = input.recalled.is_empty();
    let mut notices: Vec<String> = Vec::new();
    if memory_empty {
        notices.push(recall::NOTHING_FOUND.to_string());
    }
    let mut fallback: Option<String> = None;
    let (output, analyst_name): (AnalystOutput, String) = match llm {
        Some(a) => {
            drop(slot);
            match a.investigate(&input).await {
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
            }
        }
        None => (BuiltinAnalyst::analyse(&input), "built-in".into()),
    };
    notices.extend(output.notices.iter().cloned());
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

#[allow(clippy::too_many_arguments)]
async fn store_investigation(
    pool: &AnyPool,
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
    let known = known_sources(observations, recalled, now);
    let hyps = checked_hypotheses(
        pool,
        incident,
        observations,
        &known,
        &output,
        memory_empty,
        &mut dropped,
    )
    .await?;
    let actions = checked_actions(pool, incident, tags, similar, &output, &mut dropped).await?;
    if !dropped.is_empty() {
        tracing::info!(incident.id = %incident.id, dropped = dropped.len(), "analyst output items dropped");
    }
    let notice = notice_of(notices, &output, &dropped);
    let inv_id = save_investigation(
        pool,
        actor,
        incident,
        recalled,
        tags,
        analyst_name,
        fallback,
        now,
        notice,
        dropped,
        &hyps,
        actions,
    )
    .await?;
    view_investigation(pool, inv_id).await
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
/// dropped is said in `dropped`.
async fn checked_hypotheses(
    pool: &AnyPool,
    incident: &crate::domain::Incident,
    observations: &[MemoryRecord],
    known: &HashMap<i64, SourceInfo>,
    output: &AnalystOutput,
    memory_empty: bool,
    dropped: &mut Vec<String>,
) -> AppResult<Vec<CheckedHypothesis>> {
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
    Ok(hyps)
}

/// The analyst's actions coerced into the closed vocabulary (one per kind, unknown kinds said in
/// `dropped`), each with its dead-end warning and precedent, in the order shown.
async fn checked_actions(
    pool: &AnyPool,
    incident: &crate::domain::Incident,
    tags: &[String],
    similar: &[String],
    output: &AnalystOutput,
    dropped: &mut Vec<String>,
) -> AppResult<Vec<CheckedAction>> {
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
    Ok(actions)
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

/// Writes the checked investigation in one transaction — redacted, with its hypotheses,
/// recommendations, timeline event and audit line — and returns its id.
#[allow(clippy::too_many_arguments)]
async fn save_investigation(
    pool: &AnyPool,
    actor: &str,
    incident: &crate::domain::Incident,
    recalled: &[Recalled],
    tags: &[String],
    analyst_name: &str,
    fallback: Option<&str>,
    now: jiff::Timestamp,
    mut notice: Option<String>,
    mut dropped: Vec<String>,
    hyps: &[CheckedHypothesis],
    mut actions: Vec<CheckedAction>,
) -> AppResult<i64> {
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
    write_records(
        &mut tx,
        actor,
        incident,
        tags,
        analyst_name,
        inv_id,
        hyps,
        &actions,
    )
    .await?;
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
    Ok(inv_id)
}

/// Writes the hypotheses and recommendations of investigation `inv_id` in `tx`.
#[allow(clippy::too_many_arguments)]
async fn write_records(
    tx: &mut store::Tx,
    actor: &str,
    incident: &crate::domain::Incident,
    tags: &[String],
    analyst_name: &str,
    inv_id: i64,
    hyps: &[CheckedHypothesis],
    actions: &[CheckedAction],
) -> AppResult<()> {
    let mut hyp_ids = Vec::new();
    for (i, statement, confidence, cites, prior) in hyps {
        let mut r = NewRecord::new(MemoryKind::Hypothesis, statement.clone(), actor);
        r.epistemic_type = EpistemicType::Inference;
        r.incident_id = Some(incident.id.to_string());
        r.services = vec![incident.service.clone()];
        r.failure_modes = tags.to_vec();
        r.confidence = Some(*confidence);
        r.cites = cites.clone();
        r.data = serde_json::json!({"investigation_id": inv_id, "prior_incidents": prior, "analyst": analyst_name});
        let (hid, _) = crate::services::memory::write_in(&mut *tx, r).await?;
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
        let (rid, _) = crate::services::memory::write_in(&mut *tx, r).await?;
        let warning_json = warning
            .as_ref()
            .map(|w| serde_json::to_string(w).unwrap_or_default());
        rstore::insert(
            &mut *tx,
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
    Ok(())
}
