//! Pure domain types and rules: incident states and transitions, severities, roles and the
//! validation of what people type. Nothing in here does I/O (DESIGN.md §7).

pub mod action;
pub mod chat;
pub mod confirm;
pub mod consolidation;
pub mod identity;
pub mod incident;
pub mod insights;
pub mod memory;
pub mod model_reply;
pub mod postmortem;
pub mod proposals;
pub mod recalled;
pub mod text;
pub mod user;

pub use action::ActionKind;
pub use confirm::{ConfirmPolicy, ConfirmRefusal};
pub use incident::{
    Incident, IncidentId, IncidentState, InvalidTransition, NewIncident, Resolution, Severity,
    TimelineEvent, Transition,
};
pub use memory::{Confidence, EpistemicType, MemoryKind, Rule, RuleSeverity, Validation};
pub use user::{Role, UserName};

/// A rule broken by input a person supplied; the message says what to change.
///
/// Shape: the offending field's name (as in the form and the JSON API) and a sentence.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ValidationError {
    /// Field name as used by the JSON API and the HTML forms, e.g. `title`.
    pub field: &'static str,
    /// What is wrong and how to fix it, e.g. "must be at most 200 characters".
    pub message: String,
}

impl ValidationError {
    /// Builds an error for `field` with a human message.
    pub fn new(field: &'static str, message: impl Into<String>) -> Self {
        Self {
            field,
            message: message.into(),
        }
    }
}

/// Trims `value` and checks it is non-empty and at most `max` characters (Unicode scalar values).
///
/// # Errors
/// [`ValidationError`] naming `field` when empty after trimming or too long.
pub fn required_text(
    field: &'static str,
    value: &str,
    max: usize,
) -> Result<String, ValidationError> {
    let v = value.trim();
    if v.is_empty() {
        return Err(ValidationError::new(field, "is required"));
    }
    optional_text(field, v, max)
}

/// Trims `value` and checks it is at most `max` characters; empty is allowed.
///
/// # Errors
/// [`ValidationError`] naming `field` when too long or when it holds control characters other
/// than newline and tab.
pub fn optional_text(
    field: &'static str,
    value: &str,
    max: usize,
) -> Result<String, ValidationError> {
    let v = value.trim();
    let n = v.chars().count();
    if n > max {
        return Err(ValidationError::new(
            field,
            format!("must be at most {max} characters (got {n})"),
        ));
    }
    if v.chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t' && c != '\r')
    {
        return Err(ValidationError::new(
            field,
            "must not contain control characters",
        ));
    }
    Ok(v.to_string())
}
