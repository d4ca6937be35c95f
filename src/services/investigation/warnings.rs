//! What the team learned about an action before: dead-end warnings from recorded remediation
//! failures ([`dead_end_warning`]) and the [`Precedent`] that places an action in the list. The
//! most similar past incidents they lean on ([`similar_incidents`]) are chosen by memory.

use std::collections::BTreeSet;

use serde::Serialize;
use sqlx::AnyPool;

use crate::domain::memory::MemoryRecord;
use crate::domain::{ActionKind, MemoryKind};
use crate::error::AppResult;
pub use crate::memory::incident::{CLOSE_CALL, GENERIC_TAGS, SIMILAR_INCIDENTS, similar_incidents};
use crate::store::memory as mstore;

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
    pool: &AnyPool,
    action: ActionKind,
    service: &str,
    tags: &[String],
    similar: &[String],
) -> AppResult<Option<Warning>> {
    Ok(dead_end_warnings(pool, &[action], service, tags, similar)
        .await?
        .pop()
        .flatten())
}

/// [`dead_end_warning`] for each of `actions`, in their order, from one read of the failures
/// and successes recorded for them.
///
/// # Errors
/// Database errors.
pub async fn dead_end_warnings(
    pool: &AnyPool,
    actions: &[ActionKind],
    service: &str,
    tags: &[String],
    similar: &[String],
) -> AppResult<Vec<Option<Warning>>> {
    let modes: Vec<String> = tags
        .iter()
        .filter(|t| !GENERIC_TAGS.contains(&t.as_str()))
        .cloned()
        .collect();
    let outcomes = mstore::outcomes_of_actions(
        pool,
        actions,
        service,
        &modes,
        similar,
        DEAD_END_CITES,
        SUCCESSES_READ,
    )
    .await?;
    Ok(actions
        .iter()
        .zip(&outcomes)
        .map(|(action, (failed, worked))| {
            warning_of(*action, service, tags, similar, failed, worked)
        })
        .collect())
}

/// The dead-end warning on `action` from the remediation failures (`records`) and successes
/// (`worked`) recorded for it: see [`dead_end_warning`].
fn warning_of(
    action: ActionKind,
    service: &str,
    tags: &[String],
    similar: &[String],
    records: &[MemoryRecord],
    worked: &[MemoryRecord],
) -> Option<Warning> {
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
        return None;
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
        // The engineer's note says what happened; without one the banner says no more (the
        // record's own text names the incident and the outcome again: "… during INC-… did not
        // resolve it").
        let note = f
            .data
            .get("note")
            .and_then(|v| v.as_str())
            .filter(|n| !n.trim().is_empty())
            .map(|n| {
                format!(
                    ": {}",
                    crate::domain::text::clip_sentences(n, 300).trim_end_matches('.')
                )
            })
            .unwrap_or_default();
        parts.push(format!("tried during {inc} and {outcome}{note}"));
        if !incident_ids.contains(&inc) {
            incident_ids.push(inc);
        }
    }
    let failure_tags: BTreeSet<&String> = failures
        .iter()
        .flat_map(|f| f.failure_modes.iter())
        .collect();
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
    Some(Warning {
        message,
        incident_ids,
        memory_ids: failures.iter().map(|f| f.id).collect(),
        worked_in,
    })
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
