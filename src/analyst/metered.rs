//! A model analyst that counts its calls and fallbacks in the app's [`Metrics`]
//! (`incidentmind_model_calls_total`), and otherwise answers exactly as the analyst it wraps.

use std::sync::Arc;

use async_trait::async_trait;

use super::{Analyst, AnalystError, AnalystOutput, InvestigationInput};
use crate::domain::postmortem::{DraftFacts, Postmortem};
use crate::metrics::Metrics;

/// Why a model result was replaced by the built-in one, as a metric label.
fn fallback_reason(e: &AnalystError) -> &'static str {
    match e {
        AnalystError::Timeout(_) => "timeout",
        AnalystError::Transport(_) => "transport",
        AnalystError::InvalidOutput(_) => "invalid_output",
    }
}

/// A model analyst that counts its calls and fallbacks in [`Metrics`] and otherwise answers
/// exactly as the analyst it wraps.
#[derive(Debug)]
pub struct MeteredAnalyst {
    inner: Arc<dyn Analyst>,
    metrics: Metrics,
}

impl MeteredAnalyst {
    /// Wraps `inner`, counting into `metrics`.
    pub fn new(inner: Arc<dyn Analyst>, metrics: Metrics) -> Self {
        Self { inner, metrics }
    }
}

#[async_trait]
impl Analyst for MeteredAnalyst {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn calls_a_server(&self) -> bool {
        self.inner.calls_a_server()
    }

    async fn investigate(&self, input: &InvestigationInput) -> Result<AnalystOutput, AnalystError> {
        let out = self.inner.investigate(input).await;
        let fallback = match &out {
            // The same test the investigation service applies before using a model's answer.
            Ok(o) if crate::analyst::llm::has_usable_items(o) => None,
            Ok(_) => Some("unusable"),
            Err(e) => Some(fallback_reason(e)),
        };
        self.metrics.model_call("investigate", fallback);
        out
    }

    async fn draft_postmortem(
        &self,
        facts: &DraftFacts,
        builtin: &Postmortem,
    ) -> Result<Postmortem, AnalystError> {
        let out = self.inner.draft_postmortem(facts, builtin).await;
        self.metrics
            .model_call("postmortem", out.as_ref().err().map(fallback_reason));
        out
    }
}
