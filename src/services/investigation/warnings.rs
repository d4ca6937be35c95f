//! What the team learned about an action before: the most similar past incidents
//! ([`similar_incidents`]), dead-end warnings from recorded remediation failures
//! ([`dead_end_warning`]) and the [`Precedent`] that places an action in the list.

use std::collections::BTreeSet;

use serde::Serialize;
use sqlx::AnyPool;

use crate::domain::memory::MemoryRecord;
use crate::domain::{ActionKind, MemoryKind};
use crate::error::AppResult;
use crate::memory::recall::{IncidentMatch, Recalled};
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

/// The first [`SIMILAR_INCIDENTS`] distinct incident ids among `recalled` (weak matches left
/// out), in recall order: the most similar incident always, the next ones only with a record that shares the service (or a
/// neighbour) or a specific failure mode (not in [`GENERIC_TAGS`]) with this incident, or when
/// `incidents` (recall's incident-level ranking) scores it within [`CLOSE_CALL`] of the first —
/// a distant runner-up found by words alone is not similar enough to lend its dead ends. Every
/// incident the sibling stage compared ([`IncidentMatch::sibling`]) is added after them.
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
    // A weak match (by meaning alone, under chance) is shown as weak but lends nothing.
    for r in recalled.iter().filter(|r| !r.marks.contains(&"weak match")) {
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
    // Siblings recall could not tell apart on its lists (it ranked them on conditions read from
    // text, which may be misread): each lends its dead ends, whatever its final rank.
    for m in incidents.iter().filter(|m| m.sibling) {
        if !out.contains(&m.incident_id) {
            out.push(m.incident_id.clone());
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
    pool: &AnyPool,
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
