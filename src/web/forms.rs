//! The incident page's forms: what they carry (the incident version the page showed, the
//! resolve form) and what the user typed, given back when a submit is refused.

use serde::Deserialize;

use super::AppState;
use super::errors::{PageError, PageForm};

/// The resolve form; `version` is the incident version the page showed.
#[derive(Deserialize, Default, Debug, Clone)]
pub struct ResolveForm {
    /// Summary.
    #[serde(default)]
    pub summary: String,
    /// Root cause.
    #[serde(default)]
    pub root_cause: String,
    /// Incident version the page was based on.
    #[serde(default)]
    pub version: Option<i64>,
}

/// A form that carries nothing but the incident version its page showed (reopen, investigate,
/// approve, draft, confirm, learn). As an extractor it reads an urlencoded body when there is one;
/// a post without a body (a script, an older page) carries no version and is not checked.
#[derive(Deserialize, Default, Debug, Clone, Copy)]
pub struct VersionForm {
    /// Incident version the page was based on.
    #[serde(default)]
    pub version: Option<i64>,
}

impl axum::extract::FromRequest<AppState> for VersionForm {
    type Rejection = PageError;

    async fn from_request(
        req: axum::extract::Request,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        optional_form(req, state).await
    }
}

/// The confirm form of the post-mortem page: the incident version the page showed and the
/// post-mortem version of the draft shown on it (an edit since moves only the second).
#[derive(Deserialize, Default, Debug, Clone, Copy)]
pub struct ConfirmForm {
    /// Incident version the page was based on.
    #[serde(default)]
    pub version: Option<i64>,
    /// Post-mortem version of the draft the reviewer read.
    #[serde(default)]
    pub postmortem_version: Option<i64>,
}

impl axum::extract::FromRequest<AppState> for ConfirmForm {
    type Rejection = PageError;

    async fn from_request(
        req: axum::extract::Request,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        optional_form(req, state).await
    }
}

/// Reads an urlencoded form when the request carries one; a post without one (a script, an
/// older page) is `T::default()`.
///
/// # Errors
/// A form that does not parse (400), or one over the body limit (413).
pub(super) async fn optional_form<T: serde::de::DeserializeOwned + Default>(
    req: axum::extract::Request,
    state: &AppState,
) -> Result<T, PageError> {
    use axum::extract::FromRequest;
    let is_form = req
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    if !is_form {
        return Ok(T::default());
    }
    let PageForm(f) = PageForm::<T>::from_request(req, state).await?;
    Ok(f)
}

/// What the user typed into the incident page's forms, given back when a submit fails (409 on a
/// stale page, 422 on bad input), so nothing typed is lost.
#[derive(Debug, Default, Clone)]
pub struct KeptInput {
    /// The resolve form.
    pub resolve: ResolveForm,
    /// Evidence kind, source and pasted content.
    pub evidence: (String, String, String),
    /// Reject reason typed for one recommendation.
    pub reject: Option<(i64, String)>,
    /// What is different this time, typed to approve one recommendation (a known dead end).
    pub approve: Option<(i64, String)>,
    /// Verdict and note chosen for one recommendation.
    pub verdict: Option<(i64, String, String)>,
    /// The Prometheus query form: query, start, end and step as typed.
    pub prometheus: [String; 4],
    /// The "propose an action" form: kind, target and rationale as typed.
    pub propose: [String; 3],
    /// The incident version the refused form was based on: after a 409 the page lists what
    /// changed since.
    pub based_on: Option<i64>,
}

impl KeptInput {
    /// The reject reason kept for recommendation `rid` (empty if none).
    pub fn reject_reason(&self, rid: impl std::borrow::Borrow<i64>) -> &str {
        match &self.reject {
            Some((r, reason)) if r == rid.borrow() => reason,
            _ => "",
        }
    }

    /// The approve reason kept for recommendation `rid` (empty if none).
    pub fn approve_reason(&self, rid: impl std::borrow::Borrow<i64>) -> &str {
        match &self.approve {
            Some((r, reason)) if r == rid.borrow() => reason,
            _ => "",
        }
    }

    /// The verdict note kept for recommendation `rid` (empty if none).
    pub fn verdict_note(&self, rid: impl std::borrow::Borrow<i64>) -> &str {
        match &self.verdict {
            Some((r, _, note)) if r == rid.borrow() => note,
            _ => "",
        }
    }

    /// Whether a verdict was chosen for recommendation `rid` in the failed submit.
    pub fn verdict_chosen(&self, rid: impl std::borrow::Borrow<i64>) -> bool {
        matches!(&self.verdict, Some((r, v, _)) if r == rid.borrow() && !v.is_empty())
    }

    /// Whether `value` was the verdict chosen for recommendation `rid`.
    pub fn verdict_is(&self, rid: impl std::borrow::Borrow<i64>, value: &str) -> bool {
        matches!(&self.verdict, Some((r, v, _)) if r == rid.borrow() && v == value)
    }

    /// Whether `kind` was the evidence kind chosen.
    pub fn evidence_kind_is(&self, kind: &str) -> bool {
        self.evidence.0 == kind
    }

    /// The evidence source typed.
    pub fn evidence_source(&self) -> &str {
        &self.evidence.1
    }

    /// The evidence pasted.
    pub fn evidence_content(&self) -> &str {
        &self.evidence.2
    }

    /// Field `i` of the Prometheus query form as typed (0 query, 1 start, 2 end, 3 step).
    pub fn prometheus_field(&self, i: usize) -> &str {
        self.prometheus
            .get(i)
            .map(String::as_str)
            .unwrap_or_default()
    }

    /// Field `i` of the propose form as typed (0 kind, 1 target, 2 rationale).
    pub fn propose_field(&self, i: usize) -> &str {
        self.propose.get(i).map(String::as_str).unwrap_or_default()
    }

    /// Whether anything was typed into the resolve form.
    pub fn has_resolve(&self) -> bool {
        !self.resolve.summary.is_empty() || !self.resolve.root_cause.is_empty()
    }
}
