//! The incident aggregate's rules: identifiers, severities, the workflow state machine of
//! DESIGN.md §1 and the validation of a new incident and of a resolution.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::{ValidationError, optional_text, required_text};

/// Maximum title length in characters.
pub const TITLE_MAX: usize = 200;
/// Maximum service name length in characters.
pub const SERVICE_MAX: usize = 100;
/// Maximum description / summary / root-cause length in characters.
pub const TEXT_MAX: usize = 20_000;

/// Incident identifier `INC-YYYY-NNNN`: year of opening and a per-year sequence starting at 1,
/// zero-padded to at least four digits (`INC-2026-0007`, `INC-2026-12345`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(transparent)]
pub struct IncidentId(String);

impl IncidentId {
    /// Formats the id for `year` and sequence number `seq` (1-based).
    pub fn new(year: i16, seq: i64) -> Self {
        Self(format!("INC-{year:04}-{seq:04}"))
    }

    /// Parses `INC-YYYY-NNNN` (four-digit year, at least four digits of sequence).
    ///
    /// # Errors
    /// [`ValidationError`] on any other shape.
    pub fn parse(s: &str) -> Result<Self, ValidationError> {
        let bad = || {
            ValidationError::new(
                "id",
                format!("'{s}' is not an incident id like INC-2026-0001"),
            )
        };
        let rest = s.strip_prefix("INC-").ok_or_else(bad)?;
        let (year, seq) = rest.split_once('-').ok_or_else(bad)?;
        let digits = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
        if year.len() != 4 || !digits(year) || seq.len() < 4 || seq.len() > 9 || !digits(seq) {
            return Err(bad());
        }
        Ok(Self(s.to_string()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for IncidentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Incident severity, SEV1 (most severe: customer-facing outage) to SEV4 (minor).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
)]
pub enum Severity {
    /// Critical: a core service down for many customers.
    #[serde(rename = "SEV1")]
    Sev1,
    /// Major: significant degradation or a subset of customers down.
    #[serde(rename = "SEV2")]
    Sev2,
    /// Minor: limited impact, a workaround exists.
    #[serde(rename = "SEV3")]
    Sev3,
    /// Low: cosmetic or internal only.
    #[serde(rename = "SEV4")]
    Sev4,
}

impl Severity {
    /// All severities, most severe first.
    pub const ALL: [Severity; 4] = [Self::Sev1, Self::Sev2, Self::Sev3, Self::Sev4];

    /// Parses `SEV1`…`SEV4`, case-insensitive, also `1`…`4`.
    ///
    /// # Errors
    /// [`ValidationError`] on `severity` for anything else.
    pub fn parse(s: &str) -> Result<Self, ValidationError> {
        match s.trim().to_ascii_uppercase().as_str() {
            "SEV1" | "1" => Ok(Self::Sev1),
            "SEV2" | "2" => Ok(Self::Sev2),
            "SEV3" | "3" => Ok(Self::Sev3),
            "SEV4" | "4" => Ok(Self::Sev4),
            _ => Err(ValidationError::new(
                "severity",
                format!("'{s}' is not a severity; use SEV1, SEV2, SEV3 or SEV4"),
            )),
        }
    }

    /// `SEV1`…`SEV4`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sev1 => "SEV1",
            Self::Sev2 => "SEV2",
            Self::Sev3 => "SEV3",
            Self::Sev4 => "SEV4",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where an incident is in the workflow (DESIGN.md §1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum IncidentState {
    /// Being worked: evidence, hypotheses, actions.
    Investigating,
    /// Mitigated; summary and root cause recorded.
    Resolved,
    /// A post-mortem draft exists and can be edited.
    PostmortemDraft,
    /// A reviewer confirmed the post-mortem.
    Confirmed,
    /// Confirmed knowledge was written to organizational memory. Terminal.
    Learned,
}

impl IncidentState {
    /// Every state in workflow order.
    pub const ALL: [IncidentState; 5] = [
        Self::Investigating,
        Self::Resolved,
        Self::PostmortemDraft,
        Self::Confirmed,
        Self::Learned,
    ];

    /// Parses the snake_case name (`postmortem_draft`).
    ///
    /// # Errors
    /// [`ValidationError`] on `state` for an unknown name.
    pub fn parse(s: &str) -> Result<Self, ValidationError> {
        Self::ALL
            .into_iter()
            .find(|st| st.as_str() == s.trim())
            .ok_or_else(|| {
                ValidationError::new(
                    "state",
                    format!("'{s}' is not a state; use investigating, resolved, postmortem_draft, confirmed or learned"),
                )
            })
    }

    /// The snake_case name stored in the database and used by the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Investigating => "investigating",
            Self::Resolved => "resolved",
            Self::PostmortemDraft => "postmortem_draft",
            Self::Confirmed => "confirmed",
            Self::Learned => "learned",
        }
    }

    /// A label for people ("Post-mortem draft").
    pub fn label(self) -> &'static str {
        match self {
            Self::Investigating => "Investigating",
            Self::Resolved => "Resolved",
            Self::PostmortemDraft => "Post-mortem draft",
            Self::Confirmed => "Confirmed",
            Self::Learned => "Learned",
        }
    }

    /// Applies `t`, returning the next state.
    ///
    /// Legal moves: investigating —resolve→ resolved —draft_postmortem→ postmortem_draft
    /// —confirm→ confirmed —learn→ learned; reopen takes resolved and postmortem_draft back to
    /// investigating and a confirmed post-mortem back to its draft (clearing the confirmation).
    ///
    /// # Errors
    /// [`InvalidTransition`] for every other pair; its message names the current state and what
    /// must happen first.
    pub fn apply(self, t: Transition) -> Result<IncidentState, InvalidTransition> {
        use IncidentState::*;
        use Transition::*;
        match (self, t) {
            (Investigating, Resolve) => Ok(Resolved),
            (Resolved, DraftPostmortem) => Ok(PostmortemDraft),
            (PostmortemDraft, Confirm) => Ok(Confirmed),
            (Confirmed, Learn) => Ok(Learned),
            (Resolved | PostmortemDraft, Reopen) => Ok(Investigating),
            (Confirmed, Reopen) => Ok(PostmortemDraft),
            (from, action) => Err(InvalidTransition { from, action }),
        }
    }

    /// Whether `t` is legal from this state.
    pub fn allows(self, t: Transition) -> bool {
        self.apply(t).is_ok()
    }
}

impl fmt::Display for IncidentState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A workflow action that moves an incident between states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transition {
    /// Record that the incident is mitigated (needs a summary and a root cause).
    Resolve,
    /// Go back to investigating (or from a confirmed post-mortem back to its draft).
    Reopen,
    /// Create the post-mortem draft.
    DraftPostmortem,
    /// A reviewer confirms the post-mortem.
    Confirm,
    /// Write the confirmed knowledge to memory.
    Learn,
}

impl Transition {
    /// The snake_case name used on the timeline and in the audit log.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Resolve => "resolve",
            Self::Reopen => "reopen",
            Self::DraftPostmortem => "draft_postmortem",
            Self::Confirm => "confirm",
            Self::Learn => "learn",
        }
    }
}

/// An impossible workflow move; maps to HTTP 409.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("cannot {} an incident that is {}: {}", action.as_str().replace('_', " "), from.label().to_lowercase(), self.hint())]
pub struct InvalidTransition {
    /// The state the incident is in.
    pub from: IncidentState,
    /// The action that was attempted.
    pub action: Transition,
}

impl InvalidTransition {
    /// What must happen first, in words.
    pub fn hint(&self) -> &'static str {
        use IncidentState::*;
        use Transition::*;
        match (self.from, self.action) {
            (Learned, _) => "a learned incident is closed; open a new incident instead",
            (_, Resolve) => "only an incident under investigation can be resolved; reopen it first",
            (Investigating, DraftPostmortem) => "resolve the incident first",
            (_, DraftPostmortem) => "a post-mortem draft already exists",
            (Investigating | Resolved, Confirm) => "draft the post-mortem first",
            (_, Confirm) => "the post-mortem is already confirmed",
            (Investigating | Resolved | PostmortemDraft, Learn) => {
                "a reviewer must confirm the post-mortem first"
            }
            (_, Learn) => "the incident is already learned",
            (Investigating, Reopen) => "the incident is already under investigation",
            (_, Reopen) => "this state cannot be reopened",
        }
    }
}

/// A validated request to open an incident.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewIncident {
    /// 1–200 characters.
    pub title: String,
    /// Service name: 1–100 characters of letters, digits, `-`, `_`, `.`, `/`, lower-cased.
    pub service: String,
    /// SEV1…SEV4.
    pub severity: Severity,
    /// Free text (Markdown), up to 20,000 characters.
    pub description: String,
}

impl NewIncident {
    /// Validates raw input as typed into the form or sent to the API.
    ///
    /// # Errors
    /// The first [`ValidationError`] found, naming its field.
    pub fn parse(
        title: &str,
        service: &str,
        severity: &str,
        description: &str,
    ) -> Result<Self, ValidationError> {
        let title = required_text("title", title, TITLE_MAX)?;
        let service = parse_service(service)?;
        let severity = Severity::parse(severity)?;
        let description = optional_text("description", description, TEXT_MAX)?;
        Ok(Self {
            title,
            service,
            severity,
            description,
        })
    }
}

/// Validates and normalises a service name (lower-case; letters, digits, `-_./`).
///
/// # Errors
/// [`ValidationError`] on `service`.
pub fn parse_service(service: &str) -> Result<String, ValidationError> {
    let s = required_text("service", service, SERVICE_MAX)?.to_lowercase();
    if !s
        .chars()
        .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
    {
        return Err(ValidationError::new(
            "service",
            "may contain only letters, digits, '-', '_', '.' and '/' (e.g. payments-api)",
        ));
    }
    Ok(s)
}

/// What a responder records when resolving: a summary and the root cause as understood now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolution {
    /// What happened and how it was mitigated; 1–20,000 characters.
    pub summary: String,
    /// The root cause as understood at resolution; 1–20,000 characters.
    pub root_cause: String,
}

impl Resolution {
    /// Validates the two fields.
    ///
    /// # Errors
    /// [`ValidationError`] on `summary` or `root_cause` when empty or too long.
    pub fn parse(summary: &str, root_cause: &str) -> Result<Self, ValidationError> {
        Ok(Self {
            summary: required_text("summary", summary, TEXT_MAX)?,
            root_cause: required_text("root_cause", root_cause, TEXT_MAX)?,
        })
    }
}

/// The role a person needs to apply a transition (DESIGN.md §1: confirm needs a reviewer).
pub fn required_role(t: Transition) -> super::Role {
    match t {
        Transition::Confirm => super::Role::Reviewer,
        _ => super::Role::Responder,
    }
}

/// An incident as stored: identity, description, workflow state and its compare-and-set version.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Incident {
    /// `INC-YYYY-NNNN`.
    pub id: IncidentId,
    /// Short headline.
    pub title: String,
    /// Affected service (lower-case).
    pub service: String,
    /// SEV1…SEV4.
    pub severity: Severity,
    /// Free text.
    pub description: String,
    /// Workflow state.
    pub state: IncidentState,
    /// User name of whoever opened it (or the integration that did).
    pub opened_by: String,
    /// When it was opened (UTC).
    #[schema(value_type = String, format = DateTime)]
    pub opened_at: jiff::Timestamp,
    /// Last change (UTC).
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: jiff::Timestamp,
    /// When it was last resolved (UTC), if it has been.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub resolved_at: Option<jiff::Timestamp>,
    /// Resolution summary, once resolved.
    pub summary: Option<String>,
    /// Root cause as recorded at resolution.
    pub root_cause: Option<String>,
    /// Incremented by every change; used for compare-and-set.
    pub version: i64,
}

impl Incident {
    /// Refuses a write based on a stale page: `expected_version` (the incident version a page
    /// or client based its request on) must be this incident's version; `None` skips the check
    /// (API clients that send no version). Call it on the incident read inside the write
    /// transaction.
    ///
    /// # Errors
    /// [`StaleVersion`] (a 409) naming the current state and both versions.
    pub fn check_version(&self, expected_version: Option<i64>) -> Result<(), StaleVersion> {
        match expected_version {
            Some(based_on) if based_on != self.version => Err(StaleVersion {
                id: self.id.clone(),
                state: self.state,
                now: self.version,
                based_on,
            }),
            _ => Ok(()),
        }
    }

    /// Refuses new work on a learned incident: its memory is written and it is closed.
    ///
    /// # Errors
    /// [`Closed`] (a 409).
    pub fn check_open(&self) -> Result<(), Closed> {
        match self.state {
            IncidentState::Learned => Err(Closed {
                id: self.id.clone(),
            }),
            _ => Ok(()),
        }
    }
}

/// New work asked of a learned incident.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{id} is learned and closed")]
pub struct Closed {
    /// The incident.
    pub id: IncidentId,
}

/// A request based on an incident version that is no longer current: what the incident is now,
/// and that nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{id} changed since this page was loaded: it is now {state_label} (version {now}, the page \
     showed version {based_on}). Nothing was changed; check the current state and submit again \
     if it still applies.",
    state_label = state.label()
)]
pub struct StaleVersion {
    /// The incident.
    pub id: IncidentId,
    /// Its state now.
    pub state: IncidentState,
    /// Its version now.
    pub now: i64,
    /// The version the request was based on.
    pub based_on: i64,
}

/// One entry on an incident's timeline.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct TimelineEvent {
    /// Monotonic id (order of recording).
    pub id: i64,
    /// When it happened (UTC).
    #[schema(value_type = String, format = DateTime)]
    pub at: jiff::Timestamp,
    /// Who did it: a user name, an integration, or `system`.
    pub actor: String,
    /// What happened: `opened`, a transition name (`resolve`), `evidence_added`, …
    pub kind: String,
    /// One line for people.
    pub detail: String,
}

/// Unit tests' incidents.
#[cfg(test)]
impl Incident {
    /// A resolved incident for unit tests: opened by `rita`, opened, changed and resolved at
    /// `at`, version 2, with no summary or root cause (tests set what they read).
    pub(crate) fn resolved_example(
        id: IncidentId,
        title: &str,
        service: &str,
        severity: Severity,
        at: jiff::Timestamp,
    ) -> Self {
        Self {
            id,
            title: title.into(),
            service: service.into(),
            severity,
            description: String::new(),
            state: IncidentState::Resolved,
            opened_by: "rita".into(),
            opened_at: at,
            updated_at: at,
            resolved_at: Some(at),
            summary: None,
            root_cause: None,
            version: 2,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use IncidentState::*;
    use Transition::*;

    const ALL_T: [Transition; 5] = [Resolve, Reopen, DraftPostmortem, Confirm, Learn];

    #[test]
    fn the_legal_transitions_are_exactly_those_of_the_design() {
        let legal: Vec<_> = IncidentState::ALL
            .iter()
            .flat_map(|&s| ALL_T.iter().map(move |&t| (s, t)))
            .filter_map(|(s, t)| s.apply(t).ok().map(|n| (s, t, n)))
            .collect();
        assert_eq!(
            legal,
            vec![
                (Investigating, Resolve, Resolved),
                (Resolved, Reopen, Investigating),
                (Resolved, DraftPostmortem, PostmortemDraft),
                (PostmortemDraft, Reopen, Investigating),
                (PostmortemDraft, Confirm, Confirmed),
                (Confirmed, Reopen, PostmortemDraft),
                (Confirmed, Learn, Learned),
            ]
        );
    }

    #[test]
    fn an_illegal_transition_names_the_state_and_what_must_happen_first() {
        let e = Investigating.apply(Learn).unwrap_err();
        assert_eq!(
            e.to_string(),
            "cannot learn an incident that is investigating: a reviewer must confirm the post-mortem first"
        );
        let e = Resolved.apply(Confirm).unwrap_err();
        assert!(e.to_string().contains("draft the post-mortem first"), "{e}");
        assert!(
            Learned
                .apply(Reopen)
                .unwrap_err()
                .to_string()
                .contains("closed")
        );
    }

    #[test]
    fn severities_parse_case_insensitively_and_reject_others() {
        assert_eq!(Severity::parse("sev2").unwrap(), Severity::Sev2);
        assert_eq!(Severity::parse("3").unwrap(), Severity::Sev3);
        assert_eq!(Severity::parse("SEV5").unwrap_err().field, "severity");
    }

    #[test]
    fn ids_are_zero_padded_and_parsed_strictly() {
        assert_eq!(IncidentId::new(2026, 7).as_str(), "INC-2026-0007");
        assert_eq!(IncidentId::new(2026, 12345).as_str(), "INC-2026-12345");
        assert!(IncidentId::parse("INC-2026-0007").is_ok());
        for bad in [
            "INC-26-0007",
            "INC-2026-7",
            "inc-2026-0007",
            "INC-2026-00a7",
            "",
        ] {
            assert!(IncidentId::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn new_incident_validation_names_the_field() {
        let ok = NewIncident::parse(" Checkout slow ", "Payments-API", "SEV2", "").unwrap();
        assert_eq!(ok.title, "Checkout slow");
        assert_eq!(ok.service, "payments-api");
        assert_eq!(
            NewIncident::parse("", "a", "SEV1", "").unwrap_err().field,
            "title"
        );
        let long = "x".repeat(201);
        let e = NewIncident::parse(&long, "a", "SEV1", "").unwrap_err();
        assert_eq!(e.field, "title");
        assert!(e.message.contains("200"));
        assert_eq!(
            NewIncident::parse("t", "a b", "SEV1", "")
                .unwrap_err()
                .field,
            "service"
        );
        assert_eq!(
            NewIncident::parse("t\u{0007}", "a", "SEV1", "")
                .unwrap_err()
                .field,
            "title"
        );
    }

    #[test]
    fn a_stale_version_names_both_versions_and_a_learned_incident_is_closed() {
        let at = jiff::Timestamp::UNIX_EPOCH;
        let id = IncidentId::new(2026, 7);
        let mut incident = Incident::resolved_example(id, "t", "api", Severity::Sev2, at);
        assert_eq!(incident.check_version(None), Ok(()));
        assert_eq!(incident.check_version(Some(2)), Ok(()));
        let stale = incident.check_version(Some(1)).unwrap_err().to_string();
        assert_eq!(
            stale,
            "INC-2026-0007 changed since this page was loaded: it is now Resolved (version 2, \
             the page showed version 1). Nothing was changed; check the current state and submit \
             again if it still applies."
        );
        assert_eq!(incident.check_open(), Ok(()));
        incident.state = Learned;
        assert_eq!(
            incident.check_open().unwrap_err().to_string(),
            "INC-2026-0007 is learned and closed"
        );
    }
}
