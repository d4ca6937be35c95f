//! Normalising deliveries: the four sender formats (see the module doc of `services::ingest`),
//! read by the one alert parser (`evidence::alerts::read`, strict), mapped to a [`Delivery`] of
//! alert groups; a wrong shape is a 400 naming the field.

use super::Source;
use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::error::{AppError, AppResult};
use crate::evidence::alerts::{self, Alert, Body, Sender};
use crate::evidence::truncate_chars;

pub use crate::evidence::alerts::AlertStatus;

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
    /// Alertmanager's `generatorURL` (the Prometheus graph link with the rule's expression).
    pub generator_url: Option<String>,
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
    /// Alerts of the group the sender did not send (Alertmanager `truncatedAlerts`, cut by
    /// the receiver's `max_alerts`): 0 when none.
    pub not_sent: i64,
}

/// A parsed delivery: the groups to apply, or why it is acknowledged and ignored.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    /// Groups to apply (empty when ignored).
    pub groups: Vec<IncomingGroup>,
    /// Why nothing is applied (e.g. a PagerDuty `service.updated` event).
    pub ignored: Option<String>,
}

fn parse_json(body: &[u8]) -> AppResult<Value> {
    serde_json::from_slice(body)
        .map_err(|e| AppError::BadRequest(format!("body is not valid JSON: {e}")))
}

fn pairs(p: &[(String, String)]) -> BTreeMap<String, String> {
    p.iter().cloned().collect()
}

fn first_of(maps: &[&BTreeMap<String, String>], keys: &[&str]) -> Option<String> {
    keys.iter()
        .find_map(|k| maps.iter().find_map(|m| m.get(*k).cloned()))
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

/// An instant of the parser (epoch ns, already within range) as a timestamp.
fn ts(ns: Option<i128>) -> Option<jiff::Timestamp> {
    ns.and_then(|n| jiff::Timestamp::from_nanosecond(n).ok())
}

/// 16 hex digits of the SHA-256 of the labels (key NUL value NUL …, in key order): the
/// fingerprint of an alert that came without one.
fn labels_fingerprint(labels: &BTreeMap<String, String>) -> String {
    let mut bytes = Vec::new();
    for (k, v) in labels {
        for part in [k, v] {
            bytes.extend_from_slice(part.as_bytes());
            bytes.push(0);
        }
    }
    crate::digest::sha256_hex(&bytes)[..16].to_string()
}

/// Parses a delivery of `source` from its raw body (through the one alert parser,
/// [`crate::evidence::alerts::read`]).
///
/// # Errors
/// [`AppError::BadRequest`] for malformed JSON or a wrong shape, naming the field
/// (`alerts[1].startsAt: …`).
pub fn parse_delivery(source: Source, body: &[u8]) -> AppResult<Delivery> {
    let v = parse_json(body)?;
    let sender = match source {
        Source::Alertmanager => Sender::Alertmanager,
        Source::Grafana => Sender::Grafana,
        Source::Pagerduty => Sender::Pagerduty,
        Source::Opsgenie => Sender::Opsgenie,
    };
    let read = alerts::read(sender, &v).map_err(|e| AppError::BadRequest(e.to_string()))?;
    match (source, v.as_array()) {
        (Source::Alertmanager | Source::Grafana, Some(raw)) => Ok(alert_array(read, raw)),
        (Source::Alertmanager | Source::Grafana, None) => Ok(envelope(read, &v)),
        (Source::Pagerduty, _) => Ok(single(read, &v, "PagerDuty event type", |a| {
            format!("PagerDuty incident {a}")
        })),
        (Source::Opsgenie, _) => Ok(single(read, &v, "Opsgenie action", |a| {
            format!("Opsgenie alert {a}")
        })),
    }
}

/// One Alertmanager/Grafana alert (`raw` as sent) in its envelope: its own status wins over the
/// group's; without either, an end in the past means resolved.
fn am_alert(
    a: &Alert,
    raw: &Value,
    group_status: Option<AlertStatus>,
    common_labels: &BTreeMap<String, String>,
    envelope: &Map<String, Value>,
) -> IncomingAlert {
    let labels = pairs(&a.labels);
    let ends_at = ts(a.ends_at);
    let status = a.state.or(group_status).unwrap_or_else(|| match ends_at {
        Some(e) if e <= jiff::Timestamp::now() => AlertStatus::Resolved,
        _ => AlertStatus::Firing,
    });
    let mut env = envelope.clone();
    env.insert("status".into(), Value::String(status.as_str().into()));
    env.insert("alerts".into(), Value::Array(vec![raw.clone()]));
    IncomingAlert {
        fingerprint: a
            .fingerprint
            .clone()
            .unwrap_or_else(|| labels_fingerprint(&labels)),
        name: a
            .title
            .clone()
            .or_else(|| alerts::lookup(&a.annotations, "summary"))
            .unwrap_or_else(|| "alert".to_string()),
        status,
        severity: first_of(&[&labels, common_labels], &["severity", "priority"]),
        service: a.service.clone(),
        starts_at: ts(a.starts_at),
        ends_at: ends_at.filter(|_| status == AlertStatus::Resolved),
        content: pretty(&Value::Object(env)),
        generator_url: raw
            .get("generatorURL")
            .and_then(Value::as_str)
            .map(str::to_string),
    }
}

/// The v4 envelope: one group.
fn envelope(read: Body, v: &Value) -> Delivery {
    let g = read.groups.into_iter().next().unwrap_or_default();
    let root = v.as_object().cloned().unwrap_or_default();
    let raw = root.get("alerts").and_then(Value::as_array);
    let group_labels = pairs(&g.labels);
    let common_labels = pairs(&g.common_labels);
    let common_ann = pairs(&g.common_annotations);
    let group_key = g.key.clone().unwrap_or_else(|| {
        let labels: Vec<String> = group_labels
            .iter()
            .map(|(k, v)| format!("{k}={v:?}"))
            .collect();
        format!("{{{}}}", labels.join(", "))
    });
    let mut envelope = root.clone();
    envelope.remove("alerts");
    envelope.remove("message");
    let out: Vec<IncomingAlert> = g
        .alerts
        .iter()
        .zip(raw.into_iter().flatten())
        .map(|(a, raw)| am_alert(a, raw, g.state, &common_labels, &envelope))
        .collect();
    let first_ann = g.alerts.first().map(|a| pairs(&a.annotations));
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
        .or_else(|| first_ann.as_ref().and_then(|f| f.get("description")))
    {
        description.push(d.clone());
    }
    if let Some(r) = common_ann.get("runbook_url") {
        description.push(format!("Runbook: {r}"));
    }
    if let Some(u) = g.external_url {
        description.push(format!("Source: {u}"));
    }
    let service = first_of(&[&common_labels, &group_labels], &["service", "job", "app"])
        .or_else(|| out.iter().find_map(|a| a.service.clone()));
    Delivery {
        groups: vec![IncomingGroup {
            key: group_key,
            title,
            description: description.join("\n\n"),
            service,
            alerts: out,
            not_sent: i64::try_from(g.truncated).unwrap_or(i64::MAX),
        }],
        ignored: None,
    }
}

/// A bare array of alerts (Alertmanager API v2 input): grouped by `alertname` and `service`.
fn alert_array(read: Body, raw: &[Value]) -> Delivery {
    let empty = BTreeMap::new();
    let mut groups: Vec<IncomingGroup> = Vec::new();
    let parsed = read.into_alerts();
    for (a, raw) in parsed.iter().zip(raw) {
        let key = format!(
            "{{alertname={:?}, service={:?}}}",
            alerts::lookup(&a.labels, "alertname").unwrap_or_default(),
            alerts::lookup(&a.labels, "service").unwrap_or_default()
        );
        let alert = am_alert(a, raw, None, &empty, &Map::new());
        match groups.iter_mut().find(|g| g.key == key) {
            Some(g) => g.alerts.push(alert),
            None => groups.push(IncomingGroup {
                key,
                title: alerts::lookup(&a.annotations, "summary")
                    .unwrap_or_else(|| alert.name.clone()),
                description: alerts::lookup(&a.annotations, "description").unwrap_or_default(),
                service: alert.service.clone(),
                alerts: vec![alert],
                not_sent: 0,
            }),
        }
    }
    Delivery {
        groups,
        ignored: None,
    }
}

/// A PagerDuty or Opsgenie body (one alert, one group; `v` is its content); a body whose event
/// type / action the parser gave no status is acknowledged and ignored (`what` names it).
/// `untitled` names an alert without a title from its Opsgenie `tinyId` or its fingerprint.
fn single(read: Body, v: &Value, what: &str, untitled: impl Fn(&str) -> String) -> Delivery {
    let event = read.event.clone().unwrap_or_default();
    let Some(g) = read.groups.into_iter().next() else {
        return Delivery {
            groups: Vec::new(),
            ignored: Some(format!(
                "{what} {} is acknowledged and not acted on",
                truncate_chars(&event, 80)
            )),
        };
    };
    let a = g.alerts.into_iter().next().unwrap_or_default();
    let fingerprint = a.fingerprint.clone().unwrap_or_default();
    let key = g.key.unwrap_or_else(|| fingerprint.clone());
    let title = a.title.clone().unwrap_or_else(|| {
        untitled(&alerts::lookup(&a.labels, "tinyId").unwrap_or_else(|| fingerprint.clone()))
    });
    let mut description = Vec::new();
    description.extend(a.summary.clone());
    if let Some(u) = &a.url {
        description.push(format!("PagerDuty: {u}"));
    }
    let status = a.state.unwrap_or(AlertStatus::Firing);
    let alert = IncomingAlert {
        fingerprint,
        name: title.clone(),
        status,
        severity: a.severity,
        service: a.service.clone(),
        starts_at: ts(a.starts_at),
        ends_at: ts(a.ends_at.or(a.occurred_at)).filter(|_| status == AlertStatus::Resolved),
        content: pretty(v),
        generator_url: None,
    };
    Delivery {
        groups: vec![IncomingGroup {
            key,
            title,
            description: description.join("\n\n"),
            service: a.service,
            alerts: vec![alert],
            not_sent: 0,
        }],
        ignored: None,
    }
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
