//! The built-in analyst: deterministic, offline. A playbook (data) maps failure-mode tags to
//! root-cause hypotheses and actions; evidence disambiguates look-alikes (a flat request rate
//! with climbing pool wait reads as a leak, a climbing one as load); recalled memory adds "same as
//! INC-…" hypotheses, actions that worked before, and rules.
//!
//! The playbook table is in `playbook`; the tests are in `builtin/tests.rs`.

use std::collections::BTreeSet;

use async_trait::async_trait;

use super::{
    Analyst, AnalystError, AnalystOutput, InvestigationInput, PriorIncident, ProposedAction,
    ProposedHypothesis,
};
use crate::domain::postmortem::{DraftFacts, Postmortem};
use crate::domain::{ActionKind, Confidence, MemoryKind};

mod playbook;

pub use playbook::{PLAYBOOK, Play};

/// The built-in analyst.
#[derive(Debug, Clone, Default)]
pub struct BuiltinAnalyst;

fn incident_of(m: &crate::memory::recall::Recalled) -> Option<&str> {
    m.memory.incident_id.as_deref()
}

/// Whether recall marked `m` a weak match (found by meaning alone, under the query's chance
/// level): shown as such, but never a precedent — it lends no cause and no action.
fn is_weak(m: &crate::memory::recall::Recalled) -> bool {
    m.marks.contains(&"weak match")
}

/// Whether any recalled record of a past incident is a real (not weak) match.
fn has_precedent(input: &InvestigationInput) -> bool {
    input
        .recalled
        .iter()
        .any(|r| incident_of(r).is_some() && !is_weak(r))
}

/// What the engineer noted about a remediation of incident `inc`, as `": note"` cut at a
/// sentence end within `max` characters, or empty. The record's own text names the action, the
/// incident and the outcome, which the rationale already says: only the note is added (issue
/// #49: no "INC-… did not resolve it: … during INC-… did not resolve it"). The note is the
/// record's `data.note`, else what follows `inc` and a colon in its text.
fn note_of(r: &crate::domain::memory::MemoryRecord, inc: &str, max: usize) -> String {
    let from_data = r.data.get("note").and_then(|v| v.as_str());
    let from_text = || {
        r.text
            .split_once(inc)
            .and_then(|(_, rest)| rest.split_once(": "))
            .map(|(_, note)| note)
    };
    match from_data.or_else(from_text).map(str::trim) {
        Some(n) if !n.is_empty() => format!(": {}", crate::domain::text::clip_sentences(n, max)),
        _ => String::new(),
    }
}

/// Ids of up to 5 of the incident's observations that carry one of `play_tags`.
fn cites_for(input: &InvestigationInput, play_tags: &[&str]) -> Vec<i64> {
    input
        .observations
        .iter()
        .filter(|o| {
            o.failure_modes
                .iter()
                .any(|t| play_tags.contains(&t.as_str()))
        })
        .map(|o| o.id)
        .take(5)
        .collect()
}

/// Step 1 of [`BuiltinAnalyst::analyse`]: hypotheses from recalled root causes.
fn prior_hypotheses(input: &InvestigationInput, out: &mut AnalystOutput) {
    // 1. Prior incidents: a confirmed root cause recalled with shared failure modes.
    // A past incident of this service comes first; another service's root cause is offered
    // only below it, at low confidence, and not at all on wording alone when this service has
    // one (issue #49: never an unrelated incident as "Same cause as" above the service's own).
    let same_service =
        |r: &&crate::memory::recall::Recalled| r.memory.services.contains(&input.incident.service);
    let mut causes: Vec<&crate::memory::recall::Recalled> = input
        .recalled
        .iter()
        .filter(|r| r.memory.kind == MemoryKind::RootCause && !is_weak(r))
        .filter(|r| incident_of(r).is_some())
        .collect();
    causes.sort_by_key(|r| !same_service(r));
    let has_own = causes.first().is_some_and(same_service);
    let mut seen_prior = BTreeSet::new();
    for r in causes {
        let Some(inc) = incident_of(r) else { continue };
        let own = same_service(&r);
        if has_own && !own && r.why.tags.is_empty() {
            continue;
        }
        if !seen_prior.insert(inc.to_string()) || seen_prior.len() > 2 {
            continue;
        }
        let shared: Vec<String> = r.why.tags.clone();
        let why = if r.why.lists.contains(&"replaces") {
            "a later finding that replaced a recalled root cause".to_string()
        } else if shared.is_empty() {
            format!("similar wording ({})", r.why.matched_terms.join(", "))
        } else {
            format!("same failure modes ({})", shared.join(", "))
        };
        let mut cites = vec![r.memory.id];
        cites.extend(cites_for(
            input,
            &shared.iter().map(String::as_str).collect::<Vec<_>>(),
        ));
        out.hypotheses.push(ProposedHypothesis {
            statement: format!(
                "Same cause as {inc}: {}",
                crate::domain::recalled::after_incident_id(&r.memory.text, inc)
            ),
            confidence: if shared.is_empty() || (has_own && !own) {
                Confidence::Low
            } else {
                Confidence::Medium
            },
            cites,
            prior_incidents: vec![PriorIncident {
                id: inc.to_string(),
                why,
            }],
        });
    }
}

/// Step 2 of [`BuiltinAnalyst::analyse`]: the plays whose tags match, with their actions.
fn playbook(input: &InvestigationInput, tags: &BTreeSet<&str>, out: &mut AnalystOutput) {
    // 2. The playbook over this incident's tags.
    for play in PLAYBOOK {
        if !play.when.iter().all(|t| tags.contains(t))
            || play.unless.iter().any(|t| tags.contains(t))
        {
            continue;
        }
        let h = out.hypotheses.len();
        let prior: Vec<PriorIncident> = input
            .recalled
            .iter()
            .filter(|r| !is_weak(r))
            .filter(|r| {
                r.memory
                    .failure_modes
                    .iter()
                    .any(|t| play.when.contains(&t.as_str()))
            })
            .filter_map(|r| incident_of(r).map(|i| (i, r)))
            .take(2)
            .map(|(i, r)| PriorIncident {
                id: i.to_string(),
                why: format!(
                    "{} recorded there: {}",
                    r.memory.kind,
                    crate::domain::text::clip_sentences(&r.memory.text, 160)
                ),
            })
            .collect();
        out.hypotheses.push(ProposedHypothesis {
            statement: play.hypothesis.to_string(),
            confidence: play.confidence,
            cites: cites_for(input, play.when),
            prior_incidents: prior,
        });
        for (kind, why) in play.actions {
            out.actions.push(ProposedAction {
                kind: kind.as_str().into(),
                target: input.incident.service.clone(),
                rationale: (*why).into(),
                hypothesis: Some(h),
            });
        }
    }
}

/// Steps 3 and 4 of [`BuiltinAnalyst::analyse`]: actions that worked or were tried before.
fn tried_before(input: &InvestigationInput, out: &mut AnalystOutput) {
    // 3. What worked before on similar incidents.
    for r in input.recalled.iter().filter(|r| {
        r.memory.kind == MemoryKind::RemediationSuccess && !r.why.tags.is_empty() && !is_weak(r)
    }) {
        if let (Some(a), Some(inc)) = (r.memory.action_kind, incident_of(r)) {
            out.actions.push(ProposedAction {
                kind: a.as_str().into(),
                target: input.incident.service.clone(),
                rationale: format!(
                    "Resolved {inc} ({}){}",
                    r.why.tags.join(", "),
                    note_of(&r.memory, inc, 200)
                ),
                hypothesis: None,
            });
        }
    }
    // 4. Actions recorded as tried in the most similar recalled incidents, whether they
    // worked or not: responders reach for them too. The dead-end check flags the ones that
    // failed there; flagged recommendations sort last and are never hidden.
    for r in &input.tried {
        let (Some(a), Some(inc)) = (r.action_kind, r.incident_id.as_deref()) else {
            continue;
        };
        let outcome = match r.kind {
            MemoryKind::RemediationFailure => "did not resolve it",
            MemoryKind::RemediationSuccess => "resolved it",
            _ => continue,
        };
        out.actions.push(ProposedAction {
            kind: a.as_str().into(),
            target: input.incident.service.clone(),
            rationale: format!(
                "Tried during the similar incident {inc} and {outcome}{}",
                note_of(r, inc, 200)
            ),
            hypothesis: None,
        });
    }
}

impl BuiltinAnalyst {
    /// The deterministic analysis (also used as the fallback of the LLM analyst).
    pub fn analyse(input: &InvestigationInput) -> AnalystOutput {
        let tags: BTreeSet<&str> = input.failure_modes.iter().map(String::as_str).collect();
        let service = input.incident.service.clone();
        let mut out = AnalystOutput::default();
        prior_hypotheses(input, &mut out);
        playbook(input, &tags, &mut out);
        tried_before(input, &mut out);
        if !input.recalled.is_empty() && !has_precedent(input) {
            out.hypotheses.push(ProposedHypothesis {
                statement: "No precedent in organizational memory: the past incidents recalled \
                            are weak matches, so this reasoning rests on this incident's evidence \
                            alone"
                    .into(),
                confidence: Confidence::Low,
                cites: input.observations.iter().take(3).map(|o| o.id).collect(),
                prior_incidents: Vec::new(),
            });
        }
        if out.hypotheses.is_empty() {
            out.hypotheses.push(ProposedHypothesis {
                statement: "Not enough evidence for a specific cause yet".into(),
                confidence: Confidence::Low,
                cites: input.observations.iter().take(3).map(|o| o.id).collect(),
                prior_incidents: Vec::new(),
            });
        }
        out.actions.push(ProposedAction {
            kind: ActionKind::GatherMoreEvidence.as_str().into(),
            target: service,
            rationale: "Add logs, metrics (request rate next to latency / pool wait) and alerts: each narrows the cause".into(),
            hypothesis: None,
        });
        // One recommendation per action kind: the first (most specific) wins.
        let mut seen = BTreeSet::new();
        out.actions.retain(|a| seen.insert(a.kind.clone()));
        out
    }
}

#[async_trait]
impl Analyst for BuiltinAnalyst {
    fn name(&self) -> String {
        "built-in".into()
    }

    async fn investigate(&self, input: &InvestigationInput) -> Result<AnalystOutput, AnalystError> {
        Ok(Self::analyse(input))
    }

    async fn draft_postmortem(
        &self,
        _facts: &DraftFacts,
        builtin: &Postmortem,
    ) -> Result<Postmortem, AnalystError> {
        Ok(builtin.clone())
    }
}

#[cfg(test)]
mod tests;
