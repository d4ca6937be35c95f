//! The one alert parser: the four senders' webhook bodies → [`Body`]: groups of normalised
//! [`Alert`]s. Alert ingest (`services::ingest`) reads a delivery with [`read`] (strict: a wrong
//! shape is a [`FieldError`] naming the JSON path); pasted alert evidence reads any text with
//! [`parse_alerts`] (lenient: a malformed field is absent, an unknown shape falls back) and turns
//! it into observations with [`extract`].
//!
//! Shapes (see `shared/data/alerts/NOTES.md`):
//! - Prometheus Alertmanager webhook v4 and Grafana alerting webhook (`alerts[]` with `status`,
//!   `labels`, `annotations`, `startsAt`, `endsAt`; Grafana has `orgId` / `version: "1"`). The Go
//!   zero time `0001-01-01T00:00:00Z` in `endsAt` means "still firing" and becomes `None`;
//! - a bare JSON array of Alertmanager alerts (API v2 input);
//! - PagerDuty V3 webhook (`event.event_type`, `event.data`; incident title/status/urgency/priority)
//!   and V2 (`messages[]`);
//! - Opsgenie webhook (`action`, `alert{message, alias, tags, createdAt (epoch ms), updatedAt
//!   (epoch ns)}`); `message` may carry leading whitespace. Action `Create` ⇒ status `open`,
//!   `Close` ⇒ `closed`, `Acknowledge` ⇒ `acknowledged`;
//! - anything else (pasted evidence only): one alert from the JSON fields
//!   title/summary/message/status if present, or none.
//!
//! Files: `alertmanager.rs`, `pagerduty.rs`, `opsgenie.rs` (one sender format each, both modes),
//! `fields.rs` (typed field reads with their JSON paths; the one instant parser), `spans.rs` (where
//! each alert sits in the pasted text), `observations.rs` (alerts → evidence observations).
//! No I/O.

mod alertmanager;
mod fields;
mod observations;
mod opsgenie;
mod pagerduty;
mod spans;

use serde_json::Value;

pub use fields::{FieldError, Mode};
pub use observations::extract;

use fields::{instant, loose};

/// Status of one alert after normalisation: what the sender's status means for its incident.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlertStatus {
    /// Firing / triggered / open.
    Firing,
    /// Resolved / closed.
    Resolved,
}

impl AlertStatus {
    /// `firing` or `resolved`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Firing => "firing",
            Self::Resolved => "resolved",
        }
    }
}

/// An alert sender: the four webhook formats [`read`] takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sender {
    /// Prometheus Alertmanager webhook v4 (or a bare array of alerts).
    Alertmanager,
    /// Grafana-managed alerting webhook (the Alertmanager shape plus `orgId`, `version: "1"`).
    Grafana,
    /// PagerDuty webhooks v3 envelope.
    Pagerduty,
    /// Opsgenie outgoing Webhook integration.
    Opsgenie,
}

/// What a body turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Alertmanager webhook v4 envelope.
    Alertmanager,
    /// Grafana alerting webhook envelope.
    Grafana,
    /// Bare array of Alertmanager alerts (API v2 input).
    AlertmanagerApi,
    /// PagerDuty webhooks v3 (`event`).
    PagerdutyV3,
    /// PagerDuty webhooks v2 (`messages[]`).
    PagerdutyV2,
    /// Opsgenie webhook (`action`, `alert`).
    Opsgenie,
    /// Other JSON (pasted evidence only).
    Json,
    /// Not JSON (pasted evidence only).
    Text,
}

impl Format {
    /// The name evidence records: `alertmanager`, `grafana`, `alertmanager-api`,
    /// `pagerduty-v3`, `pagerduty-v2`, `opsgenie`, `json` or `text`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Alertmanager => "alertmanager",
            Self::Grafana => "grafana",
            Self::AlertmanagerApi => "alertmanager-api",
            Self::PagerdutyV3 => "pagerduty-v3",
            Self::PagerdutyV2 => "pagerduty-v2",
            Self::Opsgenie => "opsgenie",
            Self::Json => "json",
            Self::Text => "text",
        }
    }
}

/// A normalised alert: what its sender said, field by field (`None` when not given, or —
/// leniently — malformed). Instants are epoch nanoseconds (UTC) within `jiff::Timestamp`'s range.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Alert {
    /// Sender's identity of the alert: Alertmanager `fingerprint`; PagerDuty `data.id`, else
    /// `data.incident_key`, else `event.id`; Opsgenie `alertId`, else `alias`.
    pub fingerprint: Option<String>,
    /// The sender's own name for it: the `alertname` label, PagerDuty `data.title` (else
    /// `data.summary`), Opsgenie `message`.
    pub title: Option<String>,
    /// Name as evidence shows it: `title`, else the format's fallback (`alert`, the PagerDuty
    /// event type, `opsgenie alert`); a PagerDuty event about something other than an incident
    /// is `{event_type}: {data.summary}`.
    pub name: String,
    /// Status in the sender's words: `firing`, `resolved`, `triggered`, `acknowledged`, `open`,
    /// `closed`, … (Alertmanager without one: `resolved` when `endsAt` is set, else `firing`).
    pub status: String,
    /// What the status means when the format's vocabulary says: Alertmanager
    /// `firing`/`alerting`, `resolved`/`ok`/`normal`; PagerDuty `incident.triggered`,
    /// `incident.resolved`; Opsgenie `Create`, `Close`. `None` otherwise.
    pub state: Option<AlertStatus>,
    /// Severity / urgency / priority as given (`severity`, else `priority` label; PagerDuty
    /// priority summary, else urgency; Opsgenie priority).
    pub severity: Option<String>,
    /// Service it names (`service`, `job`, `app` label; PagerDuty service summary; Opsgenie
    /// `entity`, else a `service:`/`service=` tag).
    pub service: Option<String>,
    /// Labels (key, value) in input order; PagerDuty and Opsgenie: their identifying fields.
    pub labels: Vec<(String, String)>,
    /// Alertmanager annotations (key, value) in input order.
    pub annotations: Vec<(String, String)>,
    /// Summary / description text (annotation `summary`, `description`, `message`; PagerDuty
    /// and Opsgenie `description`).
    pub summary: Option<String>,
    /// Link to the alert at its sender (PagerDuty `html_url`).
    pub url: Option<String>,
    /// Start (epoch ns, UTC).
    pub starts_at: Option<i128>,
    /// End (epoch ns, UTC) as given; `None` while firing.
    pub ends_at: Option<i128>,
    /// When the reported event happened (PagerDuty `occurred_at`; epoch ns, UTC).
    pub occurred_at: Option<i128>,
    /// Byte span of the alert in the pasted text (`(0, 0)` when read by [`read`]).
    pub span: (usize, usize),
}

/// A group of alerts as the sender grouped them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Group {
    /// Sender's group key: Alertmanager `groupKey`; PagerDuty `data.incident_key`, else the
    /// incident id; Opsgenie `alias`, else `alertId`.
    pub key: Option<String>,
    /// The group's status (Alertmanager top-level `status`), when given.
    pub state: Option<AlertStatus>,
    /// Alertmanager `groupLabels`.
    pub labels: Vec<(String, String)>,
    /// Alertmanager `commonLabels`.
    pub common_labels: Vec<(String, String)>,
    /// Alertmanager `commonAnnotations`.
    pub common_annotations: Vec<(String, String)>,
    /// Alertmanager `externalURL`.
    pub external_url: Option<String>,
    /// The alerts, in body order.
    pub alerts: Vec<Alert>,
    /// Alerts of the group the sender left out of the body (Alertmanager `truncatedAlerts`,
    /// set when the receiver's `max_alerts` cut the group): 0 when none or not said.
    pub truncated: u64,
}

/// A parsed body.
#[derive(Clone, Debug, PartialEq)]
pub struct Body {
    /// Its format.
    pub format: Format,
    /// PagerDuty event type / Opsgenie action of the body, when it has one.
    pub event: Option<String>,
    /// Its groups (a bare Alertmanager array: one group without a key). Strict reads leave it
    /// empty for a PagerDuty event type or Opsgenie action without a [`AlertStatus`]: nothing
    /// of such a body is read past it.
    pub groups: Vec<Group>,
}

impl Body {
    fn one(format: Format, event: Option<String>, key: Option<String>, alert: Alert) -> Self {
        Self {
            format,
            event,
            groups: vec![Group {
                key,
                alerts: vec![alert],
                ..Group::default()
            }],
        }
    }

    /// Every alert of every group, in body order.
    pub fn into_alerts(self) -> Vec<Alert> {
        self.groups.into_iter().flat_map(|g| g.alerts).collect()
    }
}

/// Reads a webhook delivery of `sender` strictly.
///
/// # Errors
/// [`FieldError`] naming the JSON path of the first field of the wrong shape
/// (`alerts[1].startsAt: …`), or of a required one that is missing (`event: is required: …`).
pub fn read(sender: Sender, v: &Value) -> Result<Body, FieldError> {
    match sender {
        Sender::Alertmanager | Sender::Grafana => alertmanager::read(sender, v, Mode::Strict),
        Sender::Pagerduty => pagerduty::read_v3(v, Mode::Strict),
        Sender::Opsgenie => opsgenie::read(v, Mode::Strict),
    }
}

/// Reads a pasted body leniently, recognising its format by shape; returns (format name,
/// alerts). Unknown shapes give no alerts (or one, from a JSON object's `title`/`name`/…).
pub fn parse_alerts(text: &str) -> (&'static str, Vec<Alert>) {
    let Ok(v) = serde_json::from_str::<Value>(text) else {
        return (Format::Text.as_str(), Vec::new());
    };
    let body = sniff(&v);
    let format = body.format;
    let mut alerts = body.into_alerts();
    spans::assign(text, format, &mut alerts);
    (format.as_str(), alerts)
}

/// The lenient read of any JSON value: each format in turn, by the shape that marks it.
fn sniff(v: &Value) -> Body {
    let lenient = |r: Result<Body, FieldError>| r.expect("lenient reads do not fail");
    if v.get("alerts").is_some_and(Value::is_array) {
        return lenient(alertmanager::read(Sender::Alertmanager, v, Mode::Lenient));
    }
    if let Some(arr) = v.as_array()
        && arr.iter().all(|a| a.get("labels").is_some())
        && !arr.is_empty()
    {
        return lenient(alertmanager::read(Sender::Alertmanager, v, Mode::Lenient));
    }
    if v.get("event")
        .is_some_and(|ev| ev.get("event_type").is_some())
    {
        return lenient(pagerduty::read_v3(v, Mode::Lenient));
    }
    if v.get("messages").is_some_and(Value::is_array) {
        return pagerduty::read_v2(v);
    }
    if loose(v.get("action")).is_some() && v.get("alert").is_some() {
        return lenient(opsgenie::read(v, Mode::Lenient));
    }
    Body {
        format: Format::Json,
        event: None,
        groups: generic(v)
            .map(|a| Body::one(Format::Json, None, None, a).groups)
            .unwrap_or_default(),
    }
}

/// Any other JSON: one alert from its title-like field, if it has one.
fn generic(v: &Value) -> Option<Alert> {
    let pick = |keys: &[&str]| keys.iter().find_map(|k| loose(v.get(*k)));
    let name = pick(&["title", "name", "alertname", "summary", "message", "text"])?;
    let starts_at = ["startsAt", "created_at", "timestamp", "time"]
        .iter()
        .find_map(|k| instant(v.get(*k), k, Mode::Lenient).ok().flatten());
    Some(Alert {
        title: Some(name.clone()),
        name,
        status: pick(&["status", "state"]).unwrap_or_else(|| "unknown".into()),
        severity: pick(&["severity", "priority", "urgency", "level"]),
        summary: pick(&["description", "details", "body"]),
        starts_at,
        ..Alert::default()
    })
}

/// The first value of `key` in (key, value) pairs.
pub fn lookup(pairs: &[(String, String)], key: &str) -> Option<String> {
    pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
}
