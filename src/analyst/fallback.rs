//! The model with the built-in analyst behind it: an investigation always gets an answer. When
//! the model fails or answers nothing usable, the built-in analysis is returned with a notice
//! saying why, and [`AnalystOutput::fallback`] set (DESIGN.md §6).

use std::sync::Arc;

use async_trait::async_trait;

use super::builtin::BuiltinAnalyst;
use super::{Analyst, AnalystError, AnalystOutput, InvestigationInput};
use crate::domain::postmortem::{DraftFacts, Postmortem};
use crate::evidence::truncate_chars;

/// `model` when it answers usably, else [`BuiltinAnalyst`]; without a model, the built-in
/// analyst alone. Its [`Analyst::investigate`] never fails.
#[derive(Debug, Clone, Default)]
pub struct WithFallback {
    /// The model analyst, when one is configured.
    pub model: Option<Arc<dyn Analyst>>,
}

impl WithFallback {
    /// The built-in analysis of `input`, with why the model's answer was not used.
    fn builtin(input: &InvestigationInput, reason: String) -> AnalystOutput {
        let mut out = BuiltinAnalyst::analyse(input);
        out.notices.insert(
            0,
            format!("model unavailable: {reason}; showing the built-in analysis"),
        );
        out.fallback = Some(reason);
        out
    }
}

/// Why a model's answer with nothing usable in it was not used: the unknown action kinds (at
/// most 200 characters) and what its parser dropped (at most 300).
fn unusable(out: &AnalystOutput) -> String {
    let mut reason = "the reply had no usable hypothesis or action".to_string();
    let unknown: Vec<&str> = out.actions.iter().map(|a| a.kind.as_str()).collect();
    if !unknown.is_empty() {
        reason.push_str(&format!(
            " (unknown kinds: {})",
            truncate_chars(&unknown.join(", "), 200)
        ));
    }
    if !out.dropped.is_empty() {
        reason.push_str(&format!(
            " (dropped: {})",
            truncate_chars(&out.dropped.join("; "), 300)
        ));
    }
    reason
}

#[async_trait]
impl Analyst for WithFallback {
    /// The model's name, or `built-in` without one (an answer that fell back says so in
    /// [`AnalystOutput::fallback`]).
    fn name(&self) -> String {
        self.model
            .as_ref()
            .map_or_else(|| "built-in".into(), |m| m.name())
    }

    /// Any model counts (not only one that says so), so the investigation gives back its CPU
    /// slot before every model call.
    fn calls_a_server(&self) -> bool {
        self.model.is_some()
    }

    async fn investigate(&self, input: &InvestigationInput) -> Result<AnalystOutput, AnalystError> {
        let Some(model) = &self.model else {
            return Ok(BuiltinAnalyst::analyse(input));
        };
        Ok(match model.investigate(input).await {
            Ok(o) if super::llm::has_usable_items(&o) => o,
            Ok(o) => {
                let reason = unusable(&o);
                tracing::warn!(reason = %reason, "model output unusable; using the built-in analyst");
                Self::builtin(input, reason)
            }
            Err(e) => {
                tracing::warn!(error = %e, "model unavailable; using the built-in analyst");
                Self::builtin(input, e.to_string())
            }
        })
    }

    async fn draft_postmortem(
        &self,
        facts: &DraftFacts,
        builtin: &Postmortem,
    ) -> Result<Postmortem, AnalystError> {
        match &self.model {
            Some(m) => m.draft_postmortem(facts, builtin).await,
            None => Ok(builtin.clone()),
        }
    }
}
