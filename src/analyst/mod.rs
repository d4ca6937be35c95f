//! The analyst (DESIGN.md §6): one trait, two implementations. [`builtin::BuiltinAnalyst`] is the
//! default — offline, deterministic, rules over evidence tags and recalled memory. The LLM
//! analyst (`llm`) asks an OpenAI-compatible server; [`fallback::WithFallback`] answers with the
//! built-in result when it fails.
//!
//! Whatever an analyst proposes is validated by the investigation service against the same
//! types: action kinds are coerced or dropped, citations of unknown records are dropped,
//! confidence is re-capped by the ceilings of DESIGN.md §2.

pub mod builtin;
pub mod fallback;
pub mod llm;
pub mod metered;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::domain::memory::MemoryRecord;
use crate::domain::postmortem::{DraftFacts, Postmortem};
use crate::domain::{Confidence, Incident};
use crate::memory::recall::Recalled;

/// Everything an analyst may look at for one incident.
#[derive(Debug, Clone)]
pub struct InvestigationInput {
    /// The incident.
    pub incident: Incident,
    /// Its observations (records of type observation), most salient first.
    pub observations: Vec<MemoryRecord>,
    /// What recall returned for it (other incidents' memories, rules, runbooks, notes).
    pub recalled: Vec<Recalled>,
    /// Failure-mode tags of the incident (from its evidence and its description).
    pub failure_modes: Vec<String>,
    /// Remediations (kind `remediation_success` or `remediation_failure`, each with its action
    /// kind) recorded during the most similar recalled incidents, most similar incident first —
    /// see [`crate::services::investigation::SIMILAR_INCIDENTS`]. Responders reach for what was
    /// tried last time, so the analyst proposes these too and the dead-end check flags the
    /// failures.
    pub tried: Vec<MemoryRecord>,
    /// Ids of the most similar past incidents whose dead ends count for this one
    /// ([`crate::services::investigation::similar_incidents`]).
    pub similar: Vec<String>,
    /// The incident's redaction map (read only: a copy), so what a prompt redacts gets the
    /// placeholders the stored records carry.
    pub redactor: crate::evidence::redact::Redactor,
}

/// A prior incident a hypothesis leans on, and why it is relevant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PriorIncident {
    /// `INC-YYYY-NNNN`.
    pub id: String,
    /// Why it is relevant to this incident.
    pub why: String,
}

/// A root-cause hypothesis as proposed (before validation).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProposedHypothesis {
    /// One sentence.
    pub statement: String,
    /// Confidence the analyst would give; capped later.
    pub confidence: Confidence,
    /// Ids of records it rests on (observations of this incident, recalled memories).
    pub cites: Vec<i64>,
    /// Prior incidents it leans on.
    pub prior_incidents: Vec<PriorIncident>,
}

/// A recommended action as proposed (before validation): `kind` is free text until coerced into
/// [`crate::domain::ActionKind`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProposedAction {
    /// Action kind name or alias (`raise_pool_limit`, `restart`…).
    pub kind: String,
    /// What it acts on (a service, node, flag…).
    pub target: String,
    /// Why, for people.
    pub rationale: String,
    /// Index into the hypotheses it follows from.
    pub hypothesis: Option<usize>,
}

/// What an analyst returns.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AnalystOutput {
    /// Hypotheses, most likely first.
    pub hypotheses: Vec<ProposedHypothesis>,
    /// Recommended actions, most useful first.
    pub actions: Vec<ProposedAction>,
    /// Items the analyst itself discarded while parsing (e.g. malformed entries).
    pub dropped: Vec<String>,
    /// What the engineer must know about this answer, shown as the investigation's notice
    /// (e.g. actions with a broad scope no evidence supports, and the confidence cap that
    /// followed).
    #[serde(default)]
    pub notices: Vec<String>,
    /// Why the model's answer was not used, when [`fallback::WithFallback`] answered with the
    /// built-in analysis instead (never part of a model's reply).
    #[serde(skip)]
    pub fallback: Option<String>,
}

/// Why an analyst could not answer; [`fallback::WithFallback`] then answers with the built-in
/// result and "model unavailable: …".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnalystError {
    /// No answer within the timeout.
    #[error("no answer within {0} s")]
    Timeout(u64),
    /// Connection refused, DNS, TLS, an HTTP error status…
    #[error("transport error: {0}")]
    Transport(String),
    /// The answer was not valid structured output (or was truncated).
    #[error("invalid output: {0}")]
    InvalidOutput(String),
}

/// An analyst.
#[async_trait]
pub trait Analyst: Send + Sync + std::fmt::Debug {
    /// Short name shown on the page (`built-in`, `llm:model-name`).
    fn name(&self) -> String;

    /// Whether [`Analyst::investigate`] waits on another server (a model): the investigation
    /// service then gives back its CPU slot first. The default is `false`.
    fn calls_a_server(&self) -> bool {
        false
    }

    /// Proposes hypotheses and actions for an incident.
    ///
    /// # Errors
    /// [`AnalystError`] when no usable answer was produced.
    async fn investigate(&self, input: &InvestigationInput) -> Result<AnalystOutput, AnalystError>;

    /// Drafts a post-mortem from the facts. `builtin` is the built-in template draft of the same
    /// facts: the built-in analyst returns it as is; a model rewrites its prose (summary,
    /// trigger, contributing factors, misleading hypotheses, lessons, action items, detection
    /// gaps) and keeps its facts (impact, symptoms, root cause, what worked / did not work,
    /// rejected recommendations). The service re-checks the result either way.
    ///
    /// The default returns `builtin` unchanged.
    ///
    /// # Errors
    /// [`AnalystError`] when no usable draft was produced.
    async fn draft_postmortem(
        &self,
        facts: &DraftFacts,
        builtin: &Postmortem,
    ) -> Result<Postmortem, AnalystError> {
        let _ = facts;
        Ok(builtin.clone())
    }
}
