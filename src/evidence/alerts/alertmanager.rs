//! Prometheus Alertmanager webhook v4 (Alertmanager docs, "webhook_config": `version: "4"`,
//! `groupKey`, `status`, `receiver`, `groupLabels`, `commonLabels`, `commonAnnotations`,
//! `externalURL`, `alerts[]`), Grafana-managed alerting webhook (the same shape plus `orgId`,
//! `version: "1"`, `title`, `message`), and a bare array of alerts (Alertmanager API v2
//! `postAlerts` input). Each alert: `status`, `labels`, `annotations`, `startsAt`, `endsAt`
//! (RFC 3339; the Go zero time means not set), `fingerprint`.

use serde_json::{Map, Value};

use super::fields::{bad, instant, labels as pairs, object, text, type_name};
use super::{Alert, AlertStatus, Body, FieldError, Format, Group, Mode, Sender, lookup};
use crate::evidence::truncate_chars;

/// An Alertmanager or Grafana body: the v4 envelope, or a bare array of alerts.
pub(super) fn read(sender: Sender, v: &Value, mode: Mode) -> Result<Body, FieldError> {
    if let Some(arr) = v.as_array() {
        return read_array(arr, mode);
    }
    let Some(root) = object(v, "body", mode)? else {
        return Ok(empty(Format::Alertmanager));
    };
    let format =
        if root.contains_key("orgId") || root.get("version").and_then(Value::as_str) == Some("1") {
            Format::Grafana
        } else {
            Format::Alertmanager
        };
    let alerts = envelope_alerts(sender, root, mode)?;
    let mut group = Group {
        state: status(root.get("status"), "status", mode)?,
        labels: pairs(root.get("groupLabels"), "groupLabels", mode)?,
        common_labels: pairs(root.get("commonLabels"), "commonLabels", mode)?,
        common_annotations: pairs(root.get("commonAnnotations"), "commonAnnotations", mode)?,
        external_url: text(root.get("externalURL"), "externalURL", mode)?,
        key: text(root.get("groupKey"), "groupKey", mode)?,
        alerts: Vec::with_capacity(alerts.len()),
        truncated: truncated(root.get("truncatedAlerts"), mode)?,
    };
    for (i, a) in alerts.iter().enumerate() {
        group.alerts.push(alert(a, &format!("alerts[{i}]"), mode)?);
    }
    Ok(Body {
        format,
        event: None,
        groups: vec![group],
    })
}

/// `truncatedAlerts` (Alertmanager webhook v4: how many alerts `max_alerts` left out): a
/// whole number ≥ 0; absent is 0; strict: anything else is an error.
fn truncated(v: Option<&Value>, mode: Mode) -> Result<u64, FieldError> {
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return Ok(0);
    };
    match (v.as_u64(), mode) {
        (Some(n), _) => Ok(n),
        (None, Mode::Lenient) => Ok(0),
        (None, Mode::Strict) => Err(bad(
            "truncatedAlerts",
            format!("must be a whole number ≥ 0, got {}", type_name(v)),
        )),
    }
}

fn empty(format: Format) -> Body {
    Body {
        format,
        event: None,
        groups: Vec::new(),
    }
}

/// The envelope's `alerts`: a non-empty array (strict), else what there is.
fn envelope_alerts(
    sender: Sender,
    root: &Map<String, Value>,
    mode: Mode,
) -> Result<&[Value], FieldError> {
    match (root.get("alerts"), mode) {
        (Some(Value::Array(a)), Mode::Lenient) => Ok(a),
        (_, Mode::Lenient) => Ok(&[]),
        (Some(Value::Array(a)), Mode::Strict) if a.is_empty() => {
            Err(bad("alerts", "must hold at least one alert"))
        }
        (Some(Value::Array(a)), Mode::Strict) => Ok(a),
        (Some(other), Mode::Strict) => Err(bad(
            "alerts",
            format!("must be an array of alerts, got {}", type_name(other)),
        )),
        (None, Mode::Strict) => Err(bad(
            "alerts",
            format!(
                "is required: this endpoint takes the {} webhook body",
                if sender == Sender::Grafana {
                    "Grafana alerting"
                } else {
                    "Alertmanager (version 4)"
                }
            ),
        )),
    }
}

/// A bare array of alerts: one group without a key.
fn read_array(arr: &[Value], mode: Mode) -> Result<Body, FieldError> {
    if arr.is_empty() && mode == Mode::Strict {
        return Err(bad("body", "must hold at least one alert"));
    }
    let mut group = Group::default();
    for (i, a) in arr.iter().enumerate() {
        group.alerts.push(alert(a, &format!("[{i}]"), mode)?);
    }
    Ok(Body {
        format: Format::AlertmanagerApi,
        event: None,
        groups: vec![group],
    })
}

/// A `status`: `firing`/`alerting` or `resolved`/`ok`/`normal` (any case); strict: anything
/// else is an error.
fn status(v: Option<&Value>, path: &str, mode: Mode) -> Result<Option<AlertStatus>, FieldError> {
    match text(v, path, mode)?
        .map(|s| s.to_ascii_lowercase())
        .as_deref()
    {
        None => Ok(None),
        Some("firing") | Some("alerting") => Ok(Some(AlertStatus::Firing)),
        Some("resolved") | Some("ok") | Some("normal") => Ok(Some(AlertStatus::Resolved)),
        Some(_) if mode == Mode::Lenient => Ok(None),
        Some(other) => Err(bad(
            path,
            format!("'{}' is not firing or resolved", truncate_chars(other, 40)),
        )),
    }
}

/// One alert object at `path`.
fn alert(a: &Value, path: &str, mode: Mode) -> Result<Alert, FieldError> {
    let none = Map::new();
    let obj = object(a, path, mode)?.unwrap_or(&none);
    let labels = pairs(obj.get("labels"), &format!("{path}.labels"), mode)?;
    let annotations = pairs(obj.get("annotations"), &format!("{path}.annotations"), mode)?;
    let starts_at = instant(obj.get("startsAt"), &format!("{path}.startsAt"), mode)?;
    let ends_at = instant(obj.get("endsAt"), &format!("{path}.endsAt"), mode)?;
    let status_path = format!("{path}.status");
    let state = status(obj.get("status"), &status_path, mode)?;
    let said = text(obj.get("status"), &status_path, mode)?;
    let fingerprint = text(obj.get("fingerprint"), &format!("{path}.fingerprint"), mode)?;
    let title = lookup(&labels, "alertname");
    let summary = ["summary", "description", "message"]
        .iter()
        .find_map(|k| lookup(&annotations, k));
    Ok(Alert {
        fingerprint,
        name: title.clone().unwrap_or_else(|| "alert".into()),
        title,
        status: said.unwrap_or_else(|| {
            if ends_at.is_some() {
                "resolved"
            } else {
                "firing"
            }
            .into()
        }),
        state,
        severity: lookup(&labels, "severity").or_else(|| lookup(&labels, "priority")),
        service: ["service", "job", "app"]
            .iter()
            .find_map(|k| lookup(&labels, k)),
        labels,
        annotations,
        summary,
        starts_at,
        ends_at,
        ..Alert::default()
    })
}
