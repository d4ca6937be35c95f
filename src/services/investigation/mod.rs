//! Investigation (DESIGN.md §5–§6): recall + analyst → validated hypotheses (inferences) and
//! recommendations (decisions) from the closed vocabulary, each checked in code against recorded
//! remediation failures; approvals produce simulated transcripts; verdicts of "did not resolve"
//! become remediation-failure memory at once.
//!
//! By concern: [`run`] reads the incident through the one door into memory
//! ([`crate::memory::Memory::recall_for_incident`]: failure-mode tags, the incident's recall,
//! similar incidents and what was tried during them), runs the analyst, validates its answer and
//! stores it; [`warnings`] similar incidents, dead-end warnings and precedents; [`actions`] what
//! people do with a recommendation (approve with a simulated transcript, reject, verdict,
//! propose their own); [`view`] the stored investigation as the API and the page show it.

mod actions;
mod run;
mod view;
mod warnings;

#[cfg(test)]
mod tests;

pub use crate::memory::incident::{
    incident_tags, incidents_first, ranked_recall as recall_for_incident,
};
pub use actions::{
    APPROVE_REASON_MAX, APPROVE_REASON_QUESTION, VERDICTS, approve, approve_reason, propose,
    reject, simulate, verdict,
};
pub use run::{analyst_input, investigate};
pub use view::{
    HypothesisView, InvestigationView, RecalledView, RecommendationView, view_investigation,
};
pub use warnings::{
    CLOSE_CALL, GENERIC_TAGS, Precedent, SIMILAR_INCIDENTS, Warning, dead_end_warning,
    dead_end_warnings, precedent, similar_incidents,
};
