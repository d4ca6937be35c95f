//! The tools the MCP server offers ([`list`]) and their dispatch ([`call`]): each reads its
//! arguments into a typed struct (its JSON Schema is derived from the same struct), checks them,
//! asks the caller's role when it writes, calls one service and hands the result to
//! [`super::answers`] to be written. Every failure an agent can act on — an unknown tool,
//! arguments that break the schema, an unknown incident, a role that may not write — comes
//! back as a [`ToolError`] with a plain message, shown to the agent as a tool error.
//!
//! No tool writes memory, confirms, learns, approves or records a verdict: the only write is
//! [`ADD_EVIDENCE`], into an incident, through the evidence service a paste goes through.

use rmcp::handler::server::common::schema_for_type;
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::Caller;
use super::answers;
use crate::domain::{ActionKind, IncidentId, IncidentState, Role};
use crate::error::AppError;
use crate::evidence::EvidenceKind;
use crate::services::evidence as esvc;
use crate::services::questions::{self, QUESTION_CHARS, Remediation, Situation};
use crate::store::incidents::{IncidentCursor, IncidentFilter};

/// `recall_similar_incidents`.
pub const RECALL_SIMILAR_INCIDENTS: &str = "recall_similar_incidents";
/// `check_remediation`.
pub const CHECK_REMEDIATION: &str = "check_remediation";
/// `search_lessons`.
pub const SEARCH_LESSONS: &str = "search_lessons";
/// `get_incident`.
pub const GET_INCIDENT: &str = "get_incident";
/// `list_incidents`.
pub const LIST_INCIDENTS: &str = "list_incidents";
/// `get_runbook`.
pub const GET_RUNBOOK: &str = "get_runbook";
/// `add_evidence`: the one write.
pub const ADD_EVIDENCE: &str = "add_evidence";

/// Every tool name, in the order [`list`] gives them.
pub const NAMES: [&str; 7] = [
    RECALL_SIMILAR_INCIDENTS,
    CHECK_REMEDIATION,
    SEARCH_LESSONS,
    GET_INCIDENT,
    LIST_INCIDENTS,
    GET_RUNBOOK,
    ADD_EVIDENCE,
];

/// Longest service name accepted, characters.
const SERVICE_CHARS: usize = 100;

/// Incidents one `list_incidents` page holds.
pub const LIST_PAGE: i64 = 20;

/// Lessons one `search_lessons` answer holds at most.
const LESSONS_MAX: usize = 10;

/// Runbooks one `get_runbook` answer holds at most.
const RUNBOOKS_MAX: usize = 5;

/// A failure the agent can act on: the message it is shown as a tool error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError(pub String);

impl From<AppError> for ToolError {
    /// The error's public message with what to do about it: a 4xx says what was wrong; a 5xx
    /// is logged here with its source chain and says only that it failed.
    fn from(e: AppError) -> Self {
        if e.status().is_server_error() {
            tracing::error!(error = ?e, "MCP tool call failed");
        }
        let message = match &e {
            AppError::NotFound(what) => {
                format!("{what} not found: check the id (list_incidents lists the incidents)")
            }
            _ => e.public_message(),
        };
        Self(message)
    }
}

/// Arguments of `recall_similar_incidents`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecallArgs {
    /// What is happening now, in your own words (a sentence or a whole report).
    pub description: String,
    /// The affected service, if you know it (e.g. `checkout-api`).
    #[serde(default)]
    pub service: Option<String>,
    /// Log lines, alert text or metric readings you saw, one per item (at most 20 are read).
    #[serde(default)]
    pub evidence_lines: Option<Vec<String>>,
}

/// Arguments of `check_remediation`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckArgs {
    /// The action you are about to take: an action kind (`restart_service`, `rollback_deploy`,
    /// `scale_out`, `raise_pool_limit`, …) or words ("bump the pool size").
    pub action: String,
    /// What the action targets (a service, a node, a flag), if any.
    #[serde(default)]
    pub target: Option<String>,
    /// The service the incident is on (e.g. `checkout-api`).
    pub service: String,
    /// What you see, in your own words: lets the check also find failures during similar past
    /// incidents on other services.
    #[serde(default)]
    pub symptoms: Option<String>,
}

/// Arguments of `search_lessons`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LessonsArgs {
    /// A question or a situation ("what should I check before raising the pool limit?").
    pub question: String,
    /// Only rules that apply to this service, if given.
    #[serde(default)]
    pub service: Option<String>,
}

/// Arguments of `get_incident`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IncidentArgs {
    /// The incident id, `INC-YYYY-NNNN`.
    pub id: String,
}

/// Arguments of `list_incidents`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    /// Only incidents in this state: investigating, resolved, postmortem_draft, confirmed or
    /// learned.
    #[serde(default)]
    pub state: Option<String>,
    /// Only incidents on this service.
    #[serde(default)]
    pub service: Option<String>,
    /// Only incidents opened at or after this time (RFC 3339, e.g. `2026-12-01T00:00:00Z`, or a
    /// date, `2026-12-01`, read as midnight UTC).
    #[serde(default)]
    pub since: Option<String>,
    /// The `next_cursor` of the previous page, for the page after it.
    #[serde(default)]
    pub cursor: Option<String>,
}

/// Arguments of `get_runbook`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunbookArgs {
    /// The service (e.g. `checkout-api`).
    pub service: String,
    /// What you see, to pick the runbook for that symptom.
    #[serde(default)]
    pub symptom: Option<String>,
}

/// Kinds of evidence `add_evidence` takes.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceKindArg {
    /// Log lines.
    Logs,
    /// Metric samples (Prometheus text or JSON, CSV).
    Metrics,
    /// An alert body (Alertmanager, Grafana, PagerDuty, Opsgenie) or alert text.
    Alert,
    /// Free text.
    Note,
}

impl From<EvidenceKindArg> for EvidenceKind {
    fn from(k: EvidenceKindArg) -> Self {
        match k {
            EvidenceKindArg::Logs => Self::Logs,
            EvidenceKindArg::Metrics => Self::Metrics,
            EvidenceKindArg::Alert => Self::Alert,
            EvidenceKindArg::Note => Self::Note,
        }
    }
}

/// Arguments of `add_evidence`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EvidenceArgs {
    /// The incident, `INC-YYYY-NNNN`.
    pub incident_id: String,
    /// The evidence as text: log lines, metric samples, an alert body or a note.
    pub text: String,
    /// What the text is.
    pub kind: EvidenceKindArg,
}

/// A tool of `name` with `description`, its input schema derived from `T`, read-only or not.
fn tool<T: JsonSchema + 'static>(
    name: &'static str,
    description: &'static str,
    read_only: bool,
) -> Tool {
    let annotations = ToolAnnotations::new()
        .read_only(read_only)
        .destructive(false)
        .idempotent(true)
        .open_world(false);
    Tool::new(name, description, schema_for_type::<T>()).with_annotations(annotations)
}

/// Every tool the server offers, with the descriptions an agent picks from.
pub fn list() -> Vec<Tool> {
    vec![
        tool::<RecallArgs>(
            RECALL_SIMILAR_INCIDENTS,
            "Find past incidents of this organization like the one you describe, ranked as \
             IncidentMind's incident page ranks them. Each comes with why it was recalled, its \
             confirmed root cause, what worked, what did NOT work (with the engineers' verdict \
             notes), what was rejected and its lessons (ALWAYS / BECAUSE / SCOPE / SEVERITY). \
             Call it first when an incident starts.",
            true,
        ),
        tool::<CheckArgs>(
            CHECK_REMEDIATION,
            "Before you act: was this action tried here before, and did it fail? Answers with \
             the recorded failures that match (incident, what was tried, the verdict, when, and \
             where the same action did work under another failure mode), what worked instead \
             and the runbooks that apply, or says in words that there is no recorded failure.",
            true,
        ),
        tool::<LessonsArgs>(
            SEARCH_LESSONS,
            "Search the organization's prescriptive rules (lessons learned from confirmed \
             post-mortems, ALWAYS / BECAUSE / SCOPE / SEVERITY) for a question or situation.",
            true,
        ),
        tool::<IncidentArgs>(
            GET_INCIDENT,
            "Read one incident: its state, timeline summary, observations from its evidence, \
             hypotheses, actions with their verdicts, and its post-mortem once confirmed.",
            true,
        ),
        tool::<ListArgs>(
            LIST_INCIDENTS,
            "List incidents, newest first, 20 a page, filtered by state, service and opening \
             time; pass next_cursor back as cursor for the next page.",
            true,
        ),
        tool::<RunbookArgs>(
            GET_RUNBOOK,
            "Find the runbooks (steps and common causes) for a service, best first for a \
             symptom if you give one.",
            true,
        ),
        tool::<EvidenceArgs>(
            ADD_EVIDENCE,
            "Add evidence (log lines, metrics, an alert body or a note) to an open incident, as \
             a responder pasting it would: it is parsed into observations and redacted, and the \
             incident's timeline and audit log record it as yours, through MCP. Needs the \
             responder role. It never writes organizational memory.",
            false,
        ),
    ]
}

/// Runs tool `name` for `caller` (whose client introduced itself as `client`) with `args`; the
/// answer's text, or the [`ToolError`] to show.
///
/// # Errors
/// [`ToolError`] for an unknown tool, bad arguments, an unknown incident, a refused role or a
/// failed service call.
pub async fn call(
    caller: &Caller,
    client: &str,
    name: &str,
    args: Option<JsonObject>,
) -> Result<String, ToolError> {
    let args = serde_json::Value::Object(args.unwrap_or_default());
    let state = &caller.state;
    let limit = super::render::RESULT_LIMIT_BYTES;
    match name {
        RECALL_SIMILAR_INCIDENTS => {
            let a: RecallArgs = parse(name, args)?;
            let situation = Situation {
                description: required("description", &a.description, QUESTION_CHARS)?,
                service: service_of(a.service.as_deref())?,
                evidence_lines: a.evidence_lines.unwrap_or_default(),
            };
            let found = questions::similar_incidents(&state.memory, &situation).await?;
            Ok(answers::similar(&found).render(limit))
        }
        CHECK_REMEDIATION => {
            let a: CheckArgs = parse(name, args)?;
            let remediation = Remediation {
                action: action_of(&a.action)?,
                target: a.target.filter(|t| !t.trim().is_empty()),
                service: service_of(Some(&a.service))?.ok_or_else(|| {
                    ToolError("service: give the service the incident is on".into())
                })?,
                symptoms: optional("symptoms", a.symptoms.as_deref(), QUESTION_CHARS)?,
            };
            let check = questions::check_remediation(&state.memory, &remediation).await?;
            Ok(answers::remediation(&remediation, &check).render(limit))
        }
        SEARCH_LESSONS => {
            let a: LessonsArgs = parse(name, args)?;
            let question = required("question", &a.question, QUESTION_CHARS)?;
            let service = service_of(a.service.as_deref())?;
            let (found, notice) =
                questions::lessons(&state.memory, &question, service.as_deref(), LESSONS_MAX)
                    .await?;
            Ok(answers::lessons(&found, notice.as_deref()).render(limit))
        }
        GET_INCIDENT => {
            let a: IncidentArgs = parse(name, args)?;
            let id = incident_id(&a.id)?;
            let read = questions::incident(&state.pool, &id).await?;
            Ok(answers::incident(&read).render(limit))
        }
        LIST_INCIDENTS => {
            let a: ListArgs = parse(name, args)?;
            let (filter, since) = list_filter(&a)?;
            let (mut rows, mut next) =
                crate::services::incidents::page_of(&state.pool, filter, LIST_PAGE).await?;
            // Newest first: once one is older than `since`, every later one is too.
            if let Some(since) = since
                && let Some(k) = rows.iter().position(|i| i.opened_at < since)
            {
                rows.truncate(k);
                next = None;
            }
            Ok(answers::incident_list(&rows, next.as_deref()).render(limit))
        }
        GET_RUNBOOK => {
            let a: RunbookArgs = parse(name, args)?;
            let situation = Situation {
                description: optional("symptom", a.symptom.as_deref(), QUESTION_CHARS)?,
                service: service_of(Some(&a.service))?,
                evidence_lines: Vec::new(),
            };
            if situation.service.is_none() {
                return Err(ToolError(
                    "service: give the service to find runbooks for".into(),
                ));
            }
            let found = questions::runbooks(&state.memory, &situation, RUNBOOKS_MAX).await?;
            Ok(answers::runbooks(&situation, &found).render(limit))
        }
        ADD_EVIDENCE => {
            let a: EvidenceArgs = parse(name, args)?;
            if !caller.user.role.includes(Role::Responder) {
                return Err(AppError::needs_role(Role::Responder, "adding evidence").into());
            }
            let id = incident_id(&a.incident_id)?;
            let kind = EvidenceKind::from(a.kind);
            if a.text.trim().is_empty() {
                return Err(ToolError(
                    "text: is empty; give log lines, metrics, an alert body or a note".into(),
                ));
            }
            let limit_bytes = state.settings.max_evidence_bytes;
            if a.text.len() > limit_bytes {
                return Err(AppError::PayloadTooLarge { limit_bytes }.into());
            }
            let key = esvc::paste_key(&id, kind, &a.text);
            let source = source_of(client);
            let submission = esvc::Submission {
                kind,
                content: a.text,
                source: &source,
                dedup_key: Some(&key),
                expected_version: None,
                link: None,
                write_line: None,
                meaning: state.memory.failure_mode_meanings_ready(),
            };
            let added = esvc::submit(&state.pool, &caller.user.name, &id, submission).await?;
            state.memory.wake();
            Ok(answers::evidence_added(&id, &caller.user.name, &added).render(limit))
        }
        other => Err(ToolError(format!(
            "unknown tool '{other}'; this server offers: {}",
            NAMES.join(", ")
        ))),
    }
}

/// The evidence source an agent's write is marked with: `MCP: <client name and version>`.
pub fn source_of(client: &str) -> String {
    let client = client.trim();
    let source = if client.is_empty() {
        "MCP".to_string()
    } else {
        format!("MCP: {client}")
    };
    crate::evidence::truncate_chars(&source, esvc::SOURCE_MAX).to_string()
}

/// `args` read as tool `name`'s arguments; a [`ToolError`] naming what broke the schema.
fn parse<T: DeserializeOwned>(name: &str, args: serde_json::Value) -> Result<T, ToolError> {
    serde_json::from_value(args).map_err(|e| {
        ToolError(format!(
            "bad arguments for {name}: {e}; see the tool's input schema (tools/list)"
        ))
    })
}

/// A required text field, trimmed, non-empty, at most `max` characters.
fn required(field: &'static str, value: &str, max: usize) -> Result<String, ToolError> {
    crate::domain::required_text(field, value, max).map_err(|e| ToolError(e.to_string()))
}

/// An optional text field, trimmed (empty when absent), at most `max` characters.
fn optional(field: &'static str, value: Option<&str>, max: usize) -> Result<String, ToolError> {
    crate::domain::optional_text(field, value.unwrap_or(""), max)
        .map_err(|e| ToolError(e.to_string()))
}

/// A service name as incidents store it (trimmed, lower-case); `None` when absent or empty.
fn service_of(value: Option<&str>) -> Result<Option<String>, ToolError> {
    let s = optional("service", value, SERVICE_CHARS)?;
    Ok((!s.is_empty()).then(|| s.to_lowercase()))
}

/// An incident id as given by an agent.
fn incident_id(value: &str) -> Result<IncidentId, ToolError> {
    IncidentId::parse(value.trim()).map_err(|_| {
        ToolError(format!(
            "'{value}' is not an incident id; ids look like INC-2026-0042 (list_incidents lists them)"
        ))
    })
}

/// The action kind of `value`, coerced the way a model's free text is: the exact name or an
/// alias ([`ActionKind::coerce`]), else the first action its words name
/// ([`ActionKind::mentioned_in`]).
fn action_of(value: &str) -> Result<ActionKind, ToolError> {
    ActionKind::coerce(value)
        .or_else(|| ActionKind::mentioned_in(value).first().copied())
        .ok_or_else(|| {
            let all: Vec<&str> = ActionKind::ALL.iter().map(|k| k.as_str()).collect();
            ToolError(format!(
                "action: '{value}' is not an action IncidentMind records; use one of: {}",
                all.join(", ")
            ))
        })
}

/// The store filter and the `since` bound of `list_incidents`' arguments.
fn list_filter(a: &ListArgs) -> Result<(IncidentFilter, Option<jiff::Timestamp>), ToolError> {
    let err = |e: crate::domain::ValidationError| ToolError(e.to_string());
    let state = match a.state.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        Some(s) => Some(IncidentState::parse(s).map_err(err)?),
        None => None,
    };
    let after = match a.cursor.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        Some(c) => Some(IncidentCursor::parse(c).map_err(|_| {
            ToolError("cursor: is not a next_cursor from list_incidents; start without it".into())
        })?),
        None => None,
    };
    let since = match a.since.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        Some(s) => Some(since_of(s)?),
        None => None,
    };
    let filter = IncidentFilter {
        state,
        service: service_of(a.service.as_deref())?,
        after,
        ..Default::default()
    };
    Ok((filter, since))
}

/// An RFC 3339 time, or a date read as midnight UTC.
fn since_of(s: &str) -> Result<jiff::Timestamp, ToolError> {
    if let Ok(t) = s.parse::<jiff::Timestamp>() {
        return Ok(t);
    }
    s.parse::<jiff::civil::Date>()
        .ok()
        .and_then(|d| format!("{d}T00:00:00Z").parse::<jiff::Timestamp>().ok())
        .ok_or_else(|| {
            ToolError(format!(
                "since: '{s}' is not a time; use RFC 3339 (2026-12-01T00:00:00Z) or a date (2026-12-01)"
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_words_are_coerced_to_an_action_kind_or_refused_with_the_vocabulary() {
        assert_eq!(
            action_of("raise_pool_limit"),
            Ok(ActionKind::RaisePoolLimit)
        );
        assert_eq!(action_of("Restart Service"), Ok(ActionKind::RestartService));
        let err = action_of("sacrifice a goat").unwrap_err().0;
        assert!(err.contains("restart_service"), "{err}");
    }

    #[test]
    fn every_tool_is_listed_once_with_an_object_schema() {
        let tools = list();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(names, NAMES);
        for t in &tools {
            let kind = t.input_schema.get("type").and_then(|k| k.as_str());
            assert_eq!(kind, Some("object"), "{}", t.name);
        }
        let only_write: Vec<&str> = tools
            .iter()
            .filter(|t| t.annotations.as_ref().and_then(|a| a.read_only_hint) != Some(true))
            .map(|t| t.name.as_ref())
            .collect();
        assert_eq!(only_write, [ADD_EVIDENCE]);
    }

    #[test]
    fn since_reads_a_time_or_a_date_and_refuses_anything_else() {
        assert_eq!(
            since_of("2026-12-01").unwrap().to_string(),
            "2026-12-01T00:00:00Z"
        );
        assert!(since_of("2026-12-01T10:00:00Z").is_ok());
        assert!(since_of("last tuesday").unwrap_err().0.contains("RFC 3339"));
    }

    #[test]
    fn bad_arguments_name_the_field() {
        let e = parse::<CheckArgs>(CHECK_REMEDIATION, serde_json::json!({"action": "x"}))
            .unwrap_err()
            .0;
        assert!(e.contains("missing field `service`"), "{e}");
        let e = parse::<IncidentArgs>(GET_INCIDENT, serde_json::json!({"id": "x", "extra": 1}))
            .unwrap_err()
            .0;
        assert!(e.contains("unknown field `extra`"), "{e}");
    }
}
