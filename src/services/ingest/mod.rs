//! Alert ingest: integrations and their secrets, the four sender formats normalised to
//! groups of alerts, and applying a delivery — open or update one incident per alert group, one
//! evidence record and observation per alert, idempotent under retries and concurrency.
//!
//! Formats (samples and notes in `shared/data/alerts/`):
//! - Prometheus Alertmanager webhook v4 and Grafana-managed alerting webhook (`version: "1"`,
//!   `orgId`): a group (`groupKey`) maps to one incident; each alert (`fingerprint`) has its own
//!   `status` that wins over the top-level one; `endsAt: "0001-01-01T00:00:00Z"` (Go zero time)
//!   means still firing. A bare JSON array of alerts (Alertmanager API v2 input) is accepted
//!   too, grouped by `alertname` and `service`, with a fingerprint derived from the labels.
//! - PagerDuty v3 webhook envelope (`event.event_type`, `event.data`): `incident.triggered`
//!   opens, `incident.resolved` resolves the alert; every other event type is acknowledged and
//!   ignored. Signature: `X-PagerDuty-Signature: v1=<hex HMAC-SHA256 of the raw body>`, several
//!   comma-separated while secrets rotate (PagerDuty developer docs, "Verifying Signatures",
//!   webhooks v3).
//! - Opsgenie outgoing Webhook integration (`action`, `alert{alertId, alias, message, priority,
//!   createdAt (epoch ms), updatedAt (epoch ns)}`): `Create` opens, `Close` resolves, other
//!   actions are ignored.
//!
//! Idempotency lives in the database: `alert_groups` has `UNIQUE (integration_id, group_key)`
//! and is written in the same `BEGIN IMMEDIATE` transaction that opens the incident; alerts are
//! `UNIQUE (incident_id, fingerprint)`; evidence carries a dedup key
//! `{source}:{incident}:{fingerprint}:{status}:{startsAt}`. No in-process lock is involved, so it
//! holds across several app instances sharing the database.
//!
//! Time: sender instants are parsed with their offsets and stored in UTC. An instant more than
//! [`FUTURE_SKEW`] ahead of receipt, or an end before the start, is kept but flagged on the
//! timeline; the received-at instant orders the timeline and measures flagged durations.
//!
//! Files: `integrations.rs` (integrations, their secrets and the webhook authentication policy),
//! `parse.rs` (the four sender formats, read by `evidence::alerts::read`, → [`Delivery`]),
//! `clean.rs` (what alert fields become before they are stored), `apply.rs` (the ingest
//! transaction).

mod apply;
mod clean;
mod integrations;
mod parse;

// One flat namespace for callers: `services::ingest::{authenticate, parse_delivery, ingest, …}`.
pub use apply::{GroupOutcome, IngestOutcome, group_summary, ingest, summary};
pub use integrations::{
    Credentials, IncidentAlerts, IntegrationInput, IntegrationUpdate, authenticate,
    create_integration, incident_alerts, integration, list_integrations, pagerduty_signature,
    secret_digest, update_integration, verify_pagerduty_signature,
};
pub use parse::{AlertStatus, Delivery, IncomingAlert, IncomingGroup, parse_delivery};

use std::collections::BTreeMap;

use crate::domain::{Severity, ValidationError};
/// How far ahead of receipt a sender instant may be before it is flagged (5 minutes).
pub const FUTURE_SKEW: jiff::SignedDuration = jiff::SignedDuration::from_secs(5 * 60);

/// Longest integration name, characters.
pub const NAME_MAX: usize = 100;

/// Longest PagerDuty signing secret accepted, characters.
pub const SIGNING_SECRET_MAX: usize = 500;

/// Service used when neither the alert nor the integration names one.
pub const FALLBACK_SERVICE: &str = "unassigned";

/// An alert sender, one webhook endpoint each (`/api/v1/webhooks/{source}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// Prometheus Alertmanager webhook v4.
    Alertmanager,
    /// PagerDuty v3 webhook subscription.
    Pagerduty,
    /// Grafana-managed alerting webhook contact point.
    Grafana,
    /// Opsgenie outgoing Webhook integration.
    Opsgenie,
}

impl Source {
    /// All sources.
    pub const ALL: [Source; 4] = [
        Self::Alertmanager,
        Self::Pagerduty,
        Self::Grafana,
        Self::Opsgenie,
    ];

    /// Parses `alertmanager`, `pagerduty`, `grafana` or `opsgenie` (case-insensitive).
    ///
    /// # Errors
    /// [`ValidationError`] on `source` for anything else.
    pub fn parse(s: &str) -> Result<Self, ValidationError> {
        let s = s.trim().to_ascii_lowercase();
        Self::ALL
            .into_iter()
            .find(|x| x.as_str() == s)
            .ok_or_else(|| {
                ValidationError::new("source", "use alertmanager, pagerduty, grafana or opsgenie")
            })
    }

    /// The lower-case name stored and used in the webhook path.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Alertmanager => "alertmanager",
            Self::Pagerduty => "pagerduty",
            Self::Grafana => "grafana",
            Self::Opsgenie => "opsgenie",
        }
    }

    /// Short prefix of evidence dedup keys.
    fn key_prefix(self) -> &'static str {
        match self {
            Self::Alertmanager => "am",
            Self::Pagerduty => "pd",
            Self::Grafana => "gf",
            Self::Opsgenie => "og",
        }
    }
}

/// The severity mapping every integration starts from (lower-case sender value → severity).
/// Values given at creation are merged over it.
pub fn default_severity_map() -> BTreeMap<String, Severity> {
    use Severity::*;
    [
        ("critical", Sev1),
        ("page", Sev1),
        ("p1", Sev1),
        ("sev1", Sev1),
        ("high", Sev2),
        ("error", Sev2),
        ("major", Sev2),
        ("p2", Sev2),
        ("sev2", Sev2),
        ("warning", Sev3),
        ("warn", Sev3),
        ("medium", Sev3),
        ("minor", Sev3),
        ("p3", Sev3),
        ("sev3", Sev3),
        ("info", Sev4),
        ("low", Sev4),
        ("none", Sev4),
        ("p4", Sev4),
        ("p5", Sev4),
        ("sev4", Sev4),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}
