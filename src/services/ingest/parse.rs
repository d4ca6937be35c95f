//! Normalising deliveries: the four sender formats (see the module doc of `services::ingest`)
//! parsed into a [`Delivery`] of alert groups; a wrong shape is a 400 naming the field.

use std::collections::BTreeMap;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::error::{AppError, AppResult};
use crate::evidence::truncate_chars;

use super::*;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store;

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
}
