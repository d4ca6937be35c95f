//! Alert ingest (issue #7): integrations and their secrets, the four sender formats normalised to
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

use std::collections::BTreeMap;

use hmac::{Hmac, Mac};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use sqlx::SqlitePool;

use crate::domain::{
    IncidentId, IncidentState, NewIncident, Severity, ValidationError, optional_text, required_text,
};
use crate::error::{AppError, AppResult};
use crate::evidence::{EvidenceKind, truncate_chars};
use crate::store::integrations::{self as istore, Integration, IntegrationPatch, NewIntegration};
use crate::store::{self, alerts as astore, audit, incidents};

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

// ---------------------------------------------------------------------------------------------
// Integrations and secrets
// ---------------------------------------------------------------------------------------------

/// SHA-256 (hex) of a bearer secret: what is stored and looked up.
pub fn secret_digest(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// Whether `header` (the value of `X-PagerDuty-Signature`) holds a `v1=<hex>` signature that is
/// the HMAC-SHA256 of `body` under `secret`. The header may list several signatures separated by
/// commas (secret rotation); one match is enough. Comparison is constant-time
/// (PagerDuty webhooks v3, "Verifying Signatures").
pub fn verify_pagerduty_signature(secret: &str, body: &[u8], header: &str) -> bool {
    header.split(',').any(|part| {
        let Some(hex_sig) = part.trim().strip_prefix("v1=") else {
            return false;
        };
        let Ok(sig) = hex::decode(hex_sig.trim()) else {
            return false;
        };
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
            return false;
        };
        mac.update(body);
        mac.verify_slice(&sig).is_ok()
    })
}

/// The `X-PagerDuty-Signature` value for `body` under `secret` (`v1=<hex>`), as PagerDuty sends it.
pub fn pagerduty_signature(secret: &str, body: &[u8]) -> String {
    let mut mac = match Hmac::<Sha256>::new_from_slice(secret.as_bytes()) {
        Ok(m) => m,
        Err(_) => return String::new(), // HMAC accepts keys of any length; unreachable
    };
    mac.update(body);
    format!("v1={}", hex::encode(mac.finalize().into_bytes()))
}

/// Body of `POST /api/v1/integrations` (and the admin form).
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct IntegrationInput {
    /// Unique name, 1–100 characters.
    #[serde(default)]
    pub name: String,
    /// `alertmanager`, `pagerduty`, `grafana` or `opsgenie`.
    #[serde(default)]
    pub source: String,
    /// Service for alerts that name none (default `unassigned`).
    #[serde(default)]
    pub default_service: Option<String>,
    /// Severity for alerts whose severity is missing or unmapped (default `SEV3`).
    #[serde(default)]
    pub default_severity: Option<String>,
    /// Sender value → `SEV1`…`SEV4`, merged over [`default_severity_map`].
    #[serde(default)]
    pub severity_map: Option<BTreeMap<String, String>>,
    /// PagerDuty only: the subscription's signing secret.
    #[serde(default)]
    pub signing_secret: Option<String>,
}

/// Body of `PATCH /api/v1/integrations/{id}`: absent fields stay as they are.
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct IntegrationUpdate {
    /// New default service.
    #[serde(default)]
    pub default_service: Option<String>,
    /// New default severity.
    #[serde(default)]
    pub default_severity: Option<String>,
    /// New mapping, merged over [`default_severity_map`] (replaces the previous one).
    #[serde(default)]
    pub severity_map: Option<BTreeMap<String, String>>,
    /// PagerDuty only: new signing secret; an empty string removes it.
    #[serde(default)]
    pub signing_secret: Option<String>,
}

fn parse_map(m: &BTreeMap<String, String>) -> Result<BTreeMap<String, Severity>, ValidationError> {
    let mut out = default_severity_map();
    for (k, v) in m {
        let key = required_text("severity_map", &k.to_lowercase(), 64)?;
        let sev = Severity::parse(v).map_err(|_| {
            ValidationError::new(
                "severity_map",
                format!("'{v}' (for '{key}') is not a severity; use SEV1, SEV2, SEV3 or SEV4"),
            )
        })?;
        out.insert(key, sev);
    }
    Ok(out)
}

fn parse_signing_secret(source: Source, s: &str) -> Result<Option<String>, ValidationError> {
    let s = optional_text("signing_secret", s, SIGNING_SECRET_MAX)?;
    if s.is_empty() {
        return Ok(None);
    }
    if source != Source::Pagerduty {
        return Err(ValidationError::new(
            "signing_secret",
            "only PagerDuty signs its webhooks; leave it empty for this source",
        ));
    }
    Ok(Some(s))
}

fn parse_default_severity(s: Option<&str>) -> Result<Severity, ValidationError> {
    match s.map(str::trim).filter(|s| !s.is_empty()) {
        None => Ok(Severity::Sev3),
        Some(s) => {
            Severity::parse(s).map_err(|e| ValidationError::new("default_severity", e.message))
        }
    }
}

fn parse_default_service(s: Option<&str>) -> Result<String, ValidationError> {
    match s.map(str::trim).filter(|s| !s.is_empty()) {
        None => Ok(FALLBACK_SERVICE.to_string()),
        Some(s) => crate::domain::incident::parse_service(s)
            .map_err(|e| ValidationError::new("default_service", e.message)),
    }
}

/// Creates an integration on behalf of `actor` (the caller checks the admin role) and returns
/// it with its bearer secret (`whk_` + 64 hex digits), which is shown once: only its SHA-256 is
/// stored.
///
/// # Errors
/// [`AppError::Validation`] naming the bad field; [`AppError::Conflict`] when the name is
/// taken; database errors.
pub async fn create_integration(
    pool: &SqlitePool,
    actor: &str,
    input: &IntegrationInput,
) -> AppResult<(Integration, String)> {
    let name = required_text("name", &input.name, NAME_MAX)?;
    let source = Source::parse(&input.source)?;
    let default_service = parse_default_service(input.default_service.as_deref())?;
    let default_severity = parse_default_severity(input.default_severity.as_deref())?;
    let severity_map = parse_map(&input.severity_map.clone().unwrap_or_default())?;
    let signing_secret =
        parse_signing_secret(source, input.signing_secret.as_deref().unwrap_or(""))?;
    let bytes: [u8; 32] = rand::random();
    let secret = format!("whk_{}", hex::encode(bytes));
    let digest = secret_digest(&secret);
    let new = NewIntegration {
        name: &name,
        source: source.as_str(),
        default_service: &default_service,
        default_severity,
        severity_map: &severity_map,
        secret_sha256: &digest,
        signing_secret: signing_secret.as_deref(),
        created_by: actor,
    };
    let mut tx = store::begin_write(pool).await?;
    let id = istore::insert(&mut tx, &new, store::now()).await?;
    let detail = serde_json::json!({"name": name, "source": source, "signing_secret": signing_secret.is_some()});
    audit::append(
        &mut tx,
        actor,
        "integration.create",
        &format!("integration:{id}"),
        &detail.to_string(),
    )
    .await?;
    tx.commit().await?;
    tracing::info!(
        integration.id = id,
        source = source.as_str(),
        "integration created"
    );
    Ok((istore::get(pool, id).await?, secret))
}

/// Changes an integration's defaults, mapping or PagerDuty signing secret on behalf of `actor`
/// (the caller checks the admin role).
///
/// # Errors
/// [`AppError::NotFound`]; [`AppError::Validation`] naming the bad field; database errors.
pub async fn update_integration(
    pool: &SqlitePool,
    actor: &str,
    id: i64,
    input: &IntegrationUpdate,
) -> AppResult<Integration> {
    let current = istore::get(pool, id).await?;
    let source = Source::parse(&current.source).map_err(|e| AppError::Internal(e.into()))?;
    let patch = IntegrationPatch {
        default_service: input
            .default_service
            .as_deref()
            .map(|s| parse_default_service(Some(s)))
            .transpose()?,
        default_severity: input
            .default_severity
            .as_deref()
            .map(|s| parse_default_severity(Some(s)))
            .transpose()?,
        severity_map: input.severity_map.as_ref().map(parse_map).transpose()?,
        signing_secret: input
            .signing_secret
            .as_deref()
            .map(|s| parse_signing_secret(source, s))
            .transpose()?,
    };
    let mut tx = store::begin_write(pool).await?;
    istore::update(&mut tx, id, &patch, store::now()).await?;
    let detail = serde_json::json!({
        "default_service": patch.default_service,
        "default_severity": patch.default_severity,
        "severity_map": patch.severity_map.is_some(),
        "signing_secret": patch.signing_secret.as_ref().map(|s| if s.is_some() { "set" } else { "removed" }),
    });
    audit::append(
        &mut tx,
        actor,
        "integration.update",
        &format!("integration:{id}"),
        &detail.to_string(),
    )
    .await?;
    tx.commit().await?;
    istore::get(pool, id).await
}

// ---------------------------------------------------------------------------------------------
// Normalising deliveries
// ---------------------------------------------------------------------------------------------

/// Status of one alert after normalisation.
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

/// One alert of a delivery, normalised.
#[derive(Debug, Clone, PartialEq)]
pub struct IncomingAlert {
    /// Sender's identity of the alert (fingerprint, PagerDuty incident id, Opsgenie alertId).
    pub fingerprint: String,
    /// Alert name (`alertname` label, PagerDuty title, Opsgenie message).
    pub name: String,
    /// Firing or resolved (the alert's own status wins over the group's).
    pub status: AlertStatus,
    /// Sender severity value (`severity`/`priority` label, PagerDuty priority/urgency).
    pub severity: Option<String>,
    /// Service the alert names (`service`, `job`, `app` label; PagerDuty service summary).
    pub service: Option<String>,
    /// Start (UTC); `None` when the sender gave none.
    pub starts_at: Option<jiff::Timestamp>,
    /// End (UTC) of a resolved alert; `None` while firing or when not given.
    pub ends_at: Option<jiff::Timestamp>,
    /// The evidence text stored for it (pretty JSON of the alert in its envelope).
    pub content: String,
}

/// A group of alerts that maps to one incident.
#[derive(Debug, Clone, PartialEq)]
pub struct IncomingGroup {
    /// Sender's group key (`groupKey`, PagerDuty incident key, Opsgenie alias).
    pub key: String,
    /// Incident title candidate (cleaned to 1–200 characters later).
    pub title: String,
    /// Extra text for the incident description (annotations, links).
    pub description: String,
    /// Service the group names, if any.
    pub service: Option<String>,
    /// The alerts, in delivery order.
    pub alerts: Vec<IncomingAlert>,
}

/// A parsed delivery: the groups to apply, or why it is acknowledged and ignored.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    /// Groups to apply (empty when ignored).
    pub groups: Vec<IncomingGroup>,
    /// Why nothing is applied (e.g. a PagerDuty `service.updated` event).
    pub ignored: Option<String>,
}

fn bad(path: &str, msg: impl std::fmt::Display) -> AppError {
    AppError::BadRequest(format!("{path}: {msg}"))
}

fn parse_json(body: &[u8]) -> AppResult<Value> {
    serde_json::from_slice(body)
        .map_err(|e| AppError::BadRequest(format!("body is not valid JSON: {e}")))
}

fn as_obj<'a>(v: &'a Value, path: &str) -> AppResult<&'a Map<String, Value>> {
    v.as_object()
        .ok_or_else(|| bad(path, format!("must be an object, got {}", type_name(v))))
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// An optional scalar as text: missing/null/blank → `None`; numbers and booleans as text;
/// arrays and objects are a 400 naming `path`.
fn opt_text(v: Option<&Value>, path: &str) -> AppResult<Option<String>> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.trim().to_string()).filter(|s| !s.is_empty())),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(Value::Bool(b)) => Ok(Some(b.to_string())),
        Some(other) => Err(bad(
            path,
            format!("must be a string, got {}", type_name(other)),
        )),
    }
}

/// Lenient variant for optional fields of PagerDuty/Opsgenie: anything but a scalar is `None`.
fn loose_text(v: Option<&Value>) -> Option<String> {
    opt_text(v, "").ok().flatten()
}

/// An optional RFC 3339 instant (any offset) → UTC; the Go zero time means "not set".
fn opt_instant(v: Option<&Value>, path: &str) -> AppResult<Option<jiff::Timestamp>> {
    let Some(s) = opt_text(v, path)? else {
        return Ok(None);
    };
    if s.starts_with("0001-01-01") {
        return Ok(None);
    }
    s.parse::<jiff::Timestamp>().map(Some).map_err(|_| {
        bad(
            path,
            format!(
                "'{}' is not an RFC 3339 instant like 2026-11-29T14:46:36Z",
                truncate_chars(&s, 60)
            ),
        )
    })
}

/// Labels or annotations: an object of scalars (nulls skipped), in key order.
fn label_map(v: Option<&Value>, path: &str) -> AppResult<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return Ok(out);
    };
    for (k, x) in as_obj(v, path)? {
        if let Some(s) = opt_text(Some(x), &format!("{path}.{}", truncate_chars(k, 60)))? {
            out.insert(k.clone(), s);
        }
    }
    Ok(out)
}

fn first_of(maps: &[&BTreeMap<String, String>], keys: &[&str]) -> Option<String> {
    keys.iter()
        .find_map(|k| maps.iter().find_map(|m| m.get(*k).cloned()))
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

fn labels_fingerprint(labels: &BTreeMap<String, String>) -> String {
    let mut h = Sha256::new();
    for (k, v) in labels {
        h.update(k.as_bytes());
        h.update([0]);
        h.update(v.as_bytes());
        h.update([0]);
    }
    hex::encode(&h.finalize()[..8])
}

/// Parses a delivery of `source` from its raw body.
///
/// # Errors
/// [`AppError::BadRequest`] for malformed JSON or a wrong shape, naming the field
/// (`alerts[1].startsAt: …`).
pub fn parse_delivery(source: Source, body: &[u8]) -> AppResult<Delivery> {
    let v = parse_json(body)?;
    match source {
        Source::Alertmanager | Source::Grafana => parse_alertmanager(source, &v),
        Source::Pagerduty => parse_pagerduty(&v),
        Source::Opsgenie => parse_opsgenie(&v),
    }
}

fn parse_status(v: Option<&Value>, path: &str) -> AppResult<Option<AlertStatus>> {
    match opt_text(v, path)?
        .map(|s| s.to_ascii_lowercase())
        .as_deref()
    {
        None => Ok(None),
        Some("firing") | Some("alerting") => Ok(Some(AlertStatus::Firing)),
        Some("resolved") | Some("ok") | Some("normal") => Ok(Some(AlertStatus::Resolved)),
        Some(other) => Err(bad(
            path,
            format!("'{}' is not firing or resolved", truncate_chars(other, 40)),
        )),
    }
}

/// One Alertmanager/Grafana alert object.
fn am_alert(
    a: &Value,
    path: &str,
    group_status: Option<AlertStatus>,
    common_labels: &BTreeMap<String, String>,
    envelope: &Map<String, Value>,
) -> AppResult<(IncomingAlert, BTreeMap<String, String>)> {
    let obj = as_obj(a, path)?;
    let labels = label_map(obj.get("labels"), &format!("{path}.labels"))?;
    let annotations = label_map(obj.get("annotations"), &format!("{path}.annotations"))?;
    let starts_at = opt_instant(obj.get("startsAt"), &format!("{path}.startsAt"))?;
    let ends_at = opt_instant(obj.get("endsAt"), &format!("{path}.endsAt"))?;
    let own = parse_status(obj.get("status"), &format!("{path}.status"))?;
    let status = own.or(group_status).unwrap_or_else(|| match ends_at {
        Some(e) if e <= jiff::Timestamp::now() => AlertStatus::Resolved,
        _ => AlertStatus::Firing,
    });
    let fingerprint = match opt_text(obj.get("fingerprint"), &format!("{path}.fingerprint"))? {
        Some(f) => f,
        None => labels_fingerprint(&labels),
    };
    let name = labels
        .get("alertname")
        .cloned()
        .or_else(|| annotations.get("summary").cloned())
        .unwrap_or_else(|| "alert".to_string());
    let mut env = envelope.clone();
    env.insert("status".into(), Value::String(status.as_str().into()));
    env.insert("alerts".into(), Value::Array(vec![a.clone()]));
    let alert = IncomingAlert {
        fingerprint,
        name,
        status,
        severity: first_of(&[&labels, common_labels], &["severity", "priority"]),
        service: first_of(&[&labels], &["service", "job", "app"]),
        starts_at,
        ends_at: if status == AlertStatus::Resolved {
            ends_at
        } else {
            None
        },
        content: pretty(&Value::Object(env)),
    };
    Ok((alert, annotations))
}

fn parse_alertmanager(source: Source, v: &Value) -> AppResult<Delivery> {
    if let Some(arr) = v.as_array() {
        return parse_alert_array(arr);
    }
    let root = as_obj(v, "body")?;
    let alerts = match root.get("alerts") {
        Some(Value::Array(a)) => a,
        Some(other) => {
            return Err(bad(
                "alerts",
                format!("must be an array of alerts, got {}", type_name(other)),
            ));
        }
        None => {
            return Err(bad(
                "alerts",
                format!(
                    "is required: this endpoint takes the {} webhook body",
                    if source == Source::Grafana {
                        "Grafana alerting"
                    } else {
                        "Alertmanager (version 4)"
                    }
                ),
            ));
        }
    };
    if alerts.is_empty() {
        return Err(bad("alerts", "must hold at least one alert"));
    }
    let group_status = parse_status(root.get("status"), "status")?;
    let group_labels = label_map(root.get("groupLabels"), "groupLabels")?;
    let common_labels = label_map(root.get("commonLabels"), "commonLabels")?;
    let common_ann = label_map(root.get("commonAnnotations"), "commonAnnotations")?;
    let external = opt_text(root.get("externalURL"), "externalURL")?;
    let group_key = match opt_text(root.get("groupKey"), "groupKey")? {
        Some(k) => k,
        None => format!(
            "{{{}}}",
            group_labels
                .iter()
                .map(|(k, v)| format!("{k}={v:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut envelope = root.clone();
    envelope.remove("alerts");
    envelope.remove("message");
    let mut out = Vec::with_capacity(alerts.len());
    let mut first_ann = BTreeMap::new();
    for (i, a) in alerts.iter().enumerate() {
        let (alert, ann) = am_alert(
            a,
            &format!("alerts[{i}]"),
            group_status,
            &common_labels,
            &envelope,
        )?;
        if i == 0 {
            first_ann = ann;
        }
        out.push(alert);
    }
    let mut names: Vec<&str> = Vec::new();
    for a in &out {
        if !names.contains(&a.name.as_str()) {
            names.push(&a.name);
        }
    }
    let title = common_ann
        .get("summary")
        .cloned()
        .or_else(|| first_of(&[&common_labels, &group_labels], &["alertname"]))
        .unwrap_or_else(|| names.join(", "));
    let mut description = Vec::new();
    if let Some(d) = common_ann
        .get("description")
        .or_else(|| first_ann.get("description"))
    {
        description.push(d.clone());
    }
    if let Some(r) = common_ann.get("runbook_url") {
        description.push(format!("Runbook: {r}"));
    }
    if let Some(u) = external {
        description.push(format!("Source: {u}"));
    }
    let service = first_of(&[&common_labels, &group_labels], &["service", "job", "app"])
        .or_else(|| out.iter().find_map(|a| a.service.clone()));
    Ok(Delivery {
        groups: vec![IncomingGroup {
            key: group_key,
            title,
            description: description.join("\n\n"),
            service,
            alerts: out,
        }],
        ignored: None,
    })
}

/// A bare array of alerts (Alertmanager API v2 input): grouped by `alertname` and `service`.
fn parse_alert_array(arr: &[Value]) -> AppResult<Delivery> {
    if arr.is_empty() {
        return Err(bad("body", "must hold at least one alert"));
    }
    let empty = BTreeMap::new();
    let mut groups: Vec<IncomingGroup> = Vec::new();
    for (i, a) in arr.iter().enumerate() {
        let path = format!("[{i}]");
        let labels = label_map(as_obj(a, &path)?.get("labels"), &format!("{path}.labels"))?;
        let key = format!(
            "{{alertname={:?}, service={:?}}}",
            labels.get("alertname").map(String::as_str).unwrap_or(""),
            labels.get("service").map(String::as_str).unwrap_or("")
        );
        let (alert, ann) = am_alert(a, &path, None, &empty, &Map::new())?;
        match groups.iter_mut().find(|g| g.key == key) {
            Some(g) => g.alerts.push(alert),
            None => groups.push(IncomingGroup {
                key,
                title: ann
                    .get("summary")
                    .cloned()
                    .unwrap_or_else(|| alert.name.clone()),
                description: ann.get("description").cloned().unwrap_or_default(),
                service: alert.service.clone(),
                alerts: vec![alert],
            }),
        }
    }
    Ok(Delivery {
        groups,
        ignored: None,
    })
}

fn parse_pagerduty(v: &Value) -> AppResult<Delivery> {
    let root = as_obj(v, "body")?;
    let event = match root.get("event") {
        Some(e) => as_obj(e, "event")?,
        None => {
            return Err(bad(
                "event",
                "is required: this endpoint takes a PagerDuty v3 webhook envelope",
            ));
        }
    };
    let event_type = opt_text(event.get("event_type"), "event.event_type")?
        .ok_or_else(|| bad("event.event_type", "is required"))?;
    let status = match event_type.as_str() {
        "incident.triggered" => AlertStatus::Firing,
        "incident.resolved" => AlertStatus::Resolved,
        other => {
            return Ok(Delivery {
                groups: Vec::new(),
                ignored: Some(format!(
                    "PagerDuty event type {} is acknowledged and not acted on",
                    truncate_chars(other, 80)
                )),
            });
        }
    };
    let data = match event.get("data") {
        Some(d) => as_obj(d, "event.data")?,
        None => return Err(bad("event.data", "is required for incident events")),
    };
    let id = loose_text(data.get("id"));
    let key = loose_text(data.get("incident_key"));
    let fingerprint = id
        .clone()
        .or_else(|| key.clone())
        .or_else(|| loose_text(event.get("id")))
        .ok_or_else(|| bad("event.data.id", "is required (the PagerDuty incident id)"))?;
    let group_key = key.or(id).unwrap_or_else(|| fingerprint.clone());
    let title = loose_text(data.get("title"))
        .or_else(|| loose_text(data.get("summary")))
        .unwrap_or_else(|| format!("PagerDuty incident {fingerprint}"));
    let sub = |k: &str| loose_text(data.get(k).and_then(|x| x.get("summary")));
    let starts_at = opt_instant(data.get("created_at"), "event.data.created_at")?;
    let occurred = opt_instant(event.get("occurred_at"), "event.occurred_at")?;
    let mut description = Vec::new();
    if let Some(d) = loose_text(data.get("description")) {
        description.push(d);
    }
    if let Some(u) = loose_text(data.get("html_url")) {
        description.push(format!("PagerDuty: {u}"));
    }
    let service = sub("service");
    let alert = IncomingAlert {
        fingerprint,
        name: title.clone(),
        status,
        severity: sub("priority").or_else(|| loose_text(data.get("urgency"))),
        service: service.clone(),
        starts_at: starts_at.or(occurred),
        ends_at: if status == AlertStatus::Resolved {
            occurred
        } else {
            None
        },
        content: pretty(v),
    };
    Ok(Delivery {
        groups: vec![IncomingGroup {
            key: group_key,
            title,
            description: description.join("\n\n"),
            service,
            alerts: vec![alert],
        }],
        ignored: None,
    })
}

fn epoch(v: Option<&Value>, path: &str, unit: &str) -> AppResult<Option<jiff::Timestamp>> {
    let n = match v {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(n)) => n,
        Some(other) => {
            return Err(bad(
                path,
                format!("must be epoch {unit} (a number), got {}", type_name(other)),
            ));
        }
    };
    let as_i128 = n
        .as_i64()
        .map(i128::from)
        .or_else(|| n.as_u64().map(i128::from))
        .or_else(|| n.as_f64().filter(|f| f.is_finite()).map(|f| f as i128));
    let ts = as_i128.and_then(|x| {
        let ns = if unit == "milliseconds" {
            x.checked_mul(1_000_000)?
        } else {
            x
        };
        jiff::Timestamp::from_nanosecond(ns).ok()
    });
    ts.map(Some)
        .ok_or_else(|| bad(path, format!("{n} is out of range for epoch {unit}")))
}

fn parse_opsgenie(v: &Value) -> AppResult<Delivery> {
    let root = as_obj(v, "body")?;
    let action = opt_text(root.get("action"), "action")?.ok_or_else(|| {
        bad(
            "action",
            "is required: this endpoint takes the Opsgenie Webhook integration body",
        )
    })?;
    let alert = match root.get("alert") {
        Some(a) => as_obj(a, "alert")?,
        None => return Err(bad("alert", "is required")),
    };
    let status = match action.to_ascii_lowercase().as_str() {
        "create" => AlertStatus::Firing,
        "close" => AlertStatus::Resolved,
        _ => {
            return Ok(Delivery {
                groups: Vec::new(),
                ignored: Some(format!(
                    "Opsgenie action {} is acknowledged and not acted on",
                    truncate_chars(&action, 80)
                )),
            });
        }
    };
    let alias = loose_text(alert.get("alias"));
    let alert_id = loose_text(alert.get("alertId"));
    let group_key = alias
        .clone()
        .or_else(|| alert_id.clone())
        .ok_or_else(|| bad("alert.alias", "is required (or alert.alertId)"))?;
    let fingerprint = alert_id.or(alias).unwrap_or_else(|| group_key.clone());
    let created = epoch(alert.get("createdAt"), "alert.createdAt", "milliseconds")?;
    let updated = epoch(alert.get("updatedAt"), "alert.updatedAt", "nanoseconds")?;
    let title = loose_text(alert.get("message")).unwrap_or_else(|| {
        format!(
            "Opsgenie alert {}",
            loose_text(alert.get("tinyId")).unwrap_or_else(|| fingerprint.clone())
        )
    });
    let tags: Vec<String> = alert
        .get("tags")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|t| loose_text(Some(t))).collect())
        .unwrap_or_default();
    let service = loose_text(alert.get("entity")).or_else(|| {
        tags.iter().find_map(|t| {
            t.strip_prefix("service:")
                .or_else(|| t.strip_prefix("service="))
                .map(|s| s.trim().to_string())
        })
    });
    let description = loose_text(alert.get("description")).unwrap_or_default();
    let a = IncomingAlert {
        fingerprint,
        name: title.clone(),
        status,
        severity: loose_text(alert.get("priority")),
        service: service.clone(),
        starts_at: created,
        ends_at: if status == AlertStatus::Resolved {
            updated
        } else {
            None
        },
        content: pretty(v),
    };
    Ok(Delivery {
        groups: vec![IncomingGroup {
            key: group_key,
            title,
            description,
            service,
            alerts: vec![a],
        }],
        ignored: None,
    })
}

// ---------------------------------------------------------------------------------------------
// Applying a delivery
// ---------------------------------------------------------------------------------------------

/// What a delivery did to one group.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GroupOutcome {
    /// Sender's group key.
    pub group_key: String,
    /// Incident the group maps to.
    pub incident: String,
    /// Whether this delivery opened that incident.
    pub opened: bool,
    /// The learned incident this one follows, when the group fired again after learning.
    pub follows: Option<String>,
    /// Alerts of the incident now firing.
    pub firing: i64,
    /// Alerts of the incident now resolved.
    pub resolved: i64,
    /// For people: `2 of 3 firing`.
    pub summary: String,
    /// Evidence records created by this delivery (0 on a repeat).
    pub evidence_created: usize,
}

/// What a delivery did, for the webhook's 202 response.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct IngestOutcome {
    /// Incidents the delivery's groups map to (opened or updated), without repeats.
    pub incidents: Vec<String>,
    /// Of those, the ones this delivery opened.
    pub opened: Vec<String>,
    /// Alerts firing / resolved across those incidents after the delivery.
    pub firing: i64,
    /// See `firing`.
    pub resolved: i64,
    /// Per group.
    pub groups: Vec<GroupOutcome>,
    /// Why nothing was applied, when so.
    pub ignored: Option<String>,
}

/// Replaces control characters and runs of whitespace by one space, trims, and keeps at most
/// `max` characters.
fn clean_line(s: &str, max: usize) -> String {
    let joined = s
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    truncate_chars(&joined, max).to_string()
}

/// Removes control characters other than newline and tab; keeps at most `max` characters.
fn clean_text(s: &str, max: usize) -> String {
    let t: String = s
        .chars()
        .map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                ' '
            } else {
                c
            }
        })
        .collect();
    truncate_chars(t.trim(), max).to_string()
}

/// A service name from a label: lower-case, other characters than letters, digits, `-_./`
/// become `-`; `None` when nothing usable is left.
fn clean_service(s: &str) -> Option<String> {
    let mapped: String = s
        .trim()
        .to_lowercase()
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | '/') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let t = truncate_chars(
        mapped.trim_matches('-'),
        crate::domain::incident::SERVICE_MAX,
    )
    .trim_matches('-')
    .to_string();
    crate::domain::incident::parse_service(&t).ok()
}

fn map_severity(integ: &Integration, value: Option<&str>) -> Severity {
    value
        .map(|v| v.trim().to_lowercase())
        .and_then(|v| integ.severity_map.get(&v).copied())
        .unwrap_or(integ.default_severity)
}

fn skew_flags(a: &IncomingAlert, received: jiff::Timestamp) -> Vec<(String, String)> {
    let mut flags = Vec::new();
    let limit = received.checked_add(FUTURE_SKEW).unwrap_or(received);
    let ahead = |t: jiff::Timestamp| {
        let mins = (t.as_second() - received.as_second()) / 60;
        format!("{mins} min ahead of receipt")
    };
    if let Some(s) = a.starts_at
        && s > limit
    {
        flags.push((
            "starts_in_future".to_string(),
            format!("startsAt {s} is {}", ahead(s)),
        ));
    }
    if let Some(e) = a.ends_at
        && e > limit
    {
        flags.push((
            "ends_in_future".to_string(),
            format!("endsAt {e} is {}", ahead(e)),
        ));
    }
    if let (Some(s), Some(e)) = (a.starts_at, a.ends_at)
        && e < s
    {
        flags.push((
            "ends_before_start".to_string(),
            format!("endsAt {e} is before startsAt {s}"),
        ));
    }
    flags
}

fn short(s: &str) -> &str {
    truncate_chars(s, 64)
}

/// Applies a parsed delivery from `integ`: per group, one write transaction that finds or opens
/// the incident (recording the group in `alert_groups` with `ON CONFLICT DO NOTHING`), upserts
/// the alerts and writes the timeline (`alerts`: "2 of 3 firing"; `alert_flagged` for skewed
/// instants; `follows` for a group that fired again after its incident was learned) and the
/// audit log; then one evidence record per alert through [`crate::services::evidence::add`]
/// with a dedup key, so repeats add nothing.
///
/// A group that is unknown and has nothing firing opens no incident. Resolving alerts never
/// resolves the incident: a person does that with a summary and a root cause.
///
/// # Errors
/// Database errors only; sender input was validated by [`parse_delivery`].
pub async fn ingest(
    pool: &SqlitePool,
    integ: &Integration,
    delivery: &Delivery,
) -> AppResult<IngestOutcome> {
    let mut out = IngestOutcome {
        ignored: delivery.ignored.clone(),
        ..IngestOutcome::default()
    };
    for group in &delivery.groups {
        let Some(g) = ingest_group(pool, integ, group).await? else {
            continue;
        };
        if !out.incidents.contains(&g.incident) {
            out.incidents.push(g.incident.clone());
            out.firing += g.firing;
            out.resolved += g.resolved;
        }
        if g.opened {
            out.opened.push(g.incident.clone());
        }
        out.groups.push(g);
    }
    if delivery.ignored.is_none() && out.groups.is_empty() {
        out.ignored = Some("no alert is firing and the group is not known: nothing to open".into());
    }
    Ok(out)
}

fn source_of(integ: &Integration) -> AppResult<Source> {
    Source::parse(&integ.source).map_err(|e| AppError::Internal(e.into()))
}

async fn open_for_group(
    tx: &mut store::Tx,
    integ: &Integration,
    group: &IncomingGroup,
    actor: &str,
    received: jiff::Timestamp,
) -> AppResult<crate::domain::Incident> {
    let source = source_of(integ)?;
    let severities = group
        .alerts
        .iter()
        .filter(|a| a.status == AlertStatus::Firing)
        .map(|a| map_severity(integ, a.severity.as_deref()));
    let severity = severities.min().unwrap_or(integ.default_severity);
    let service = group
        .service
        .as_deref()
        .and_then(clean_service)
        .unwrap_or_else(|| integ.default_service.clone());
    let title = clean_line(&group.title, 200);
    let title = if title.is_empty() {
        "Alert".to_string()
    } else {
        title
    };
    let mut description = format!(
        "Opened by the {} integration '{}' for alert group {}.",
        source.as_str(),
        integ.name,
        short(&group.key)
    );
    if !group.description.trim().is_empty() {
        description.push_str("\n\n");
        description.push_str(&group.description);
    }
    let description = clean_text(&description, crate::domain::incident::TEXT_MAX);
    let new = NewIncident::parse(&title, &service, severity.as_str(), &description)
        .or_else(|_| NewIncident::parse("Alert", FALLBACK_SERVICE, severity.as_str(), ""))?;
    let incident = crate::services::workflow::open_in(tx, &new, actor, received).await?;
    let detail = serde_json::json!({
        "title": incident.title, "service": incident.service, "severity": incident.severity,
        "integration": integ.name, "group_key": group.key,
    });
    audit::append(
        tx,
        actor,
        "incident.open",
        incident.id.as_str(),
        &detail.to_string(),
    )
    .await?;
    Ok(incident)
}

fn parse_incident_id(s: &str) -> AppResult<IncidentId> {
    IncidentId::parse(s).map_err(|e| AppError::Internal(anyhow::anyhow!("stored group: {e}")))
}

async fn ingest_group(
    pool: &SqlitePool,
    integ: &Integration,
    group: &IncomingGroup,
) -> AppResult<Option<GroupOutcome>> {
    let source = source_of(integ)?;
    let actor = format!("integration:{}", integ.name);
    let any_firing = group.alerts.iter().any(|a| a.status == AlertStatus::Firing);
    let received = store::now();
    let mut attempt = 0;
    let (mut tx, group_id, incident_id, opened, follows) = loop {
        attempt += 1;
        let mut tx = store::begin_write(pool).await?;
        match astore::find_group(&mut tx, integ.id, &group.key).await? {
            None => {
                if !any_firing {
                    tx.rollback().await?;
                    return Ok(None);
                }
                let incident = open_for_group(&mut tx, integ, group, &actor, received).await?;
                match astore::insert_group(&mut tx, integ.id, &group.key, &incident.id, received)
                    .await?
                {
                    Some(gid) => break (tx, gid, incident.id, true, None),
                    None if attempt < 3 => {
                        tx.rollback().await?;
                        continue;
                    }
                    None => {
                        tx.rollback().await?;
                        return Err(AppError::Conflict(
                            "the alert group changed while this delivery ran; retry".into(),
                        ));
                    }
                }
            }
            Some(g) => {
                let current_id = parse_incident_id(&g.incident_id)?;
                let current = incidents::get_in(&mut tx, &current_id).await?;
                if current.state != IncidentState::Learned {
                    break (tx, g.id, current_id, false, None);
                }
                if !any_firing {
                    // Late resolutions for a learned incident: nothing to record.
                    let (firing, resolved) = astore::counts_in(&mut tx, &current_id).await?;
                    tx.rollback().await?;
                    return Ok(Some(GroupOutcome {
                        group_key: group.key.clone(),
                        incident: current_id.to_string(),
                        opened: false,
                        follows: g.previous_incident_id.clone(),
                        firing,
                        resolved,
                        summary: summary(firing, resolved),
                        evidence_created: 0,
                    }));
                }
                let incident = open_for_group(&mut tx, integ, group, &actor, received).await?;
                incidents::add_event(
                    &mut tx,
                    &incident.id,
                    received,
                    &actor,
                    "follows",
                    &format!(
                        "follows {current_id} (learned): the same {} alert group fired again",
                        source.as_str()
                    ),
                )
                .await?;
                if astore::move_group(&mut tx, g.id, &current_id, &incident.id, received).await? {
                    break (tx, g.id, incident.id, true, Some(current_id.to_string()));
                }
                tx.rollback().await?;
                if attempt >= 3 {
                    return Err(AppError::Conflict(
                        "the alert group changed while this delivery ran; retry".into(),
                    ));
                }
            }
        }
    };
    let mut changes = Vec::with_capacity(group.alerts.len());
    let mut changed = 0usize;
    for a in &group.alerts {
        let flags = skew_flags(a, received);
        let names: Vec<String> = flags.iter().map(|(n, _)| n.clone()).collect();
        let severity = map_severity(integ, a.severity.as_deref());
        let service = a
            .service
            .as_deref()
            .and_then(clean_service)
            .unwrap_or_else(|| integ.default_service.clone());
        let mut name = a.name.clone();
        crate::services::memory::redact_for(&mut tx, Some(incident_id.as_str()), &mut [&mut name])
            .await?;
        let name = clean_line(&name, 200);
        let change = astore::upsert_alert(
            &mut tx,
            &astore::AlertUpsert {
                group_id,
                incident_id: &incident_id,
                fingerprint: &a.fingerprint,
                name: &name,
                status: a.status.as_str(),
                severity,
                service: &service,
                starts_at: a.starts_at,
                ends_at: a.ends_at,
                flags: &names,
            },
            received,
        )
        .await?;
        let fresh = matches!(
            change,
            astore::AlertChange::New | astore::AlertChange::StatusChanged
        );
        if fresh {
            changed += 1;
            for (_, why) in &flags {
                incidents::add_event(
                    &mut tx,
                    &incident_id,
                    received,
                    &actor,
                    "alert_flagged",
                    &format!(
                        "alert {} ({}): {why}; kept as sent, ordering and durations use the received time",
                        short(&name),
                        short(&a.fingerprint)
                    ),
                )
                .await?;
            }
        }
        changes.push(change);
    }
    let (firing, resolved) = astore::counts_in(&mut tx, &incident_id).await?;
    if changed > 0 {
        let mut title = group.title.clone();
        crate::services::memory::redact_for(&mut tx, Some(incident_id.as_str()), &mut [&mut title])
            .await?;
        let mut detail = format!("{}: {}", clean_line(&title, 120), summary(firing, resolved));
        if firing == 0 {
            detail.push_str(
                " — every alert resolved; the incident stays open until a person resolves it",
            );
        }
        incidents::add_event(&mut tx, &incident_id, received, &actor, "alerts", &detail).await?;
        let audit_detail = serde_json::json!({
            "integration": integ.name, "group_key": group.key, "changed": changed,
            "firing": firing, "resolved": resolved,
        });
        audit::append(
            &mut tx,
            &actor,
            "alerts.ingest",
            incident_id.as_str(),
            &audit_detail.to_string(),
        )
        .await?;
    }
    tx.commit().await?;
    if opened {
        tracing::info!(incident.id = %incident_id, integration = %integ.name, "incident opened by an alert");
    }
    let source_label = format!("{} ({})", integ.name, source.as_str());
    let mut evidence_created = 0;
    for (a, change) in group.alerts.iter().zip(&changes) {
        if *change == astore::AlertChange::Stale {
            continue;
        }
        let key = format!(
            "{}:{}:{}:{}:{}",
            source.key_prefix(),
            incident_id,
            a.fingerprint,
            a.status.as_str(),
            a.starts_at
                .map(store::db_time)
                .unwrap_or_else(|| "-".into())
        );
        match crate::services::evidence::add(
            pool,
            &actor,
            &incident_id,
            EvidenceKind::Alert,
            a.content.clone(),
            &source_label,
            Some(&key),
        )
        .await
        {
            Ok(added) if added.created => evidence_created += 1,
            Ok(_) => {}
            Err(AppError::Conflict(m)) => {
                tracing::warn!(incident.id = %incident_id, reason = %m, "alert evidence not added");
            }
            Err(e) => return Err(e),
        }
    }
    Ok(Some(GroupOutcome {
        group_key: group.key.clone(),
        incident: incident_id.to_string(),
        opened,
        follows,
        firing,
        resolved,
        summary: summary(firing, resolved),
        evidence_created,
    }))
}

fn summary(firing: i64, resolved: i64) -> String {
    format!("{firing} of {} firing", firing + resolved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_verify_on_the_raw_body_and_accept_a_rotation_list() {
        let body = br#"{"event":{}}"#;
        let sig = pagerduty_signature("s3cret", body);
        assert!(verify_pagerduty_signature("s3cret", body, &sig));
        let rotating = format!("v1=00ff, {sig}");
        assert!(verify_pagerduty_signature("s3cret", body, &rotating));
        assert!(!verify_pagerduty_signature("other", body, &sig));
        assert!(!verify_pagerduty_signature("s3cret", b"{}", &sig));
        assert!(!verify_pagerduty_signature("s3cret", body, "v1=zz"));
        assert!(!verify_pagerduty_signature("s3cret", body, ""));
    }

    #[test]
    fn go_zero_time_means_still_firing_and_offsets_become_utc() {
        let body = br#"{"groupKey":"g","alerts":[{"labels":{"alertname":"A"},"fingerprint":"f",
            "startsAt":"2021-10-12T09:51:03.157076+02:00","endsAt":"0001-01-01T00:00:00Z"}]}"#;
        let d = parse_delivery(Source::Grafana, body).unwrap();
        let a = &d.groups[0].alerts[0];
        assert_eq!(a.status, AlertStatus::Firing);
        assert_eq!(a.ends_at, None);
        assert_eq!(
            store::db_time(a.starts_at.unwrap()),
            "2021-10-12T07:51:03.157076Z"
        );
    }

    #[test]
    fn wrong_shapes_name_the_field() {
        let e = parse_delivery(Source::Alertmanager, br#"{"alerts":[{"labels":[]}]}"#)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("alerts[0].labels:"), "{e}");
        let e = parse_delivery(
            Source::Alertmanager,
            br#"{"alerts":[{"startsAt":"yesterday"}]}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("alerts[0].startsAt:"), "{e}");
        let e = parse_delivery(
            Source::Opsgenie,
            br#"{"action":"Create","alert":{"createdAt":"x","alias":"a"}}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("alert.createdAt:"), "{e}");
        let e = parse_delivery(Source::Pagerduty, br#"{"nope":1}"#)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("event:"), "{e}");
    }

    #[test]
    fn services_from_labels_are_cleaned_or_dropped() {
        assert_eq!(
            clean_service("Checkout API").as_deref(),
            Some("checkout-api")
        );
        assert_eq!(clean_service("  "), None);
        assert_eq!(
            clean_service(&"x".repeat(10_000)).map(|s| s.len()),
            Some(100)
        );
    }
}
