//! PagerDuty webhooks: V3 (PagerDuty developer docs, "Webhooks v3 overview": an envelope
//! `event{id, event_type, occurred_at, data}`; incident `data` has `id`, `type`, `title`,
//! `status`, `urgency`, `priority.summary`, `service.summary`, `incident_key`, `created_at`,
//! `html_url`) and, leniently, V2 (`messages[]`, each with `event` and `incident`). Event type
//! `incident.triggered` means firing, `incident.resolved` resolved; every other type has no
//! [`AlertStatus`].

use serde_json::Value;

use super::fields::{bad, instant, loose, required_object, text};
use super::{Alert, AlertStatus, Body, FieldError, Format, Mode};

/// A V3 envelope. Strict: `event`, `event.event_type` are required; an event type without a
/// status ends the read; then `event.data` and an incident id are required.
pub(super) fn read_v3(v: &Value, mode: Mode) -> Result<Body, FieldError> {
    let null = Value::Null;
    let event = match v.as_object() {
        Some(root) => root.get("event"),
        None if mode == Mode::Strict => {
            super::fields::object(v, "body", mode)?;
            None
        }
        None => None,
    };
    let why = ": this endpoint takes a PagerDuty v3 webhook envelope";
    required_object(event, "event", why, mode)?;
    let ev = event.unwrap_or(&null);
    let event_type = text(ev.get("event_type"), "event.event_type", mode)?;
    if mode == Mode::Strict {
        let Some(event_type) = event_type else {
            return Err(bad("event.event_type", "is required"));
        };
        if state_of(&event_type).is_none() {
            return Ok(Body {
                format: Format::PagerdutyV3,
                event: Some(event_type),
                groups: Vec::new(),
            });
        }
        required_object(ev.get("data"), "event.data", " for incident events", mode)?;
    }
    let (key, alert) = incident(ev, ev.get("data"), mode)?;
    Ok(Body::one(
        Format::PagerdutyV3,
        Some(alert.labels[0].1.clone()),
        key,
        alert,
    ))
}

/// A V2 body (lenient only): one alert per message.
pub(super) fn read_v2(v: &Value) -> Body {
    let messages = v.get("messages").and_then(Value::as_array);
    let alerts = messages
        .into_iter()
        .flatten()
        .filter_map(|m| incident(m, m.get("incident"), Mode::Lenient).ok())
        .map(|(_, a)| a)
        .collect();
    Body {
        format: Format::PagerdutyV2,
        event: None,
        groups: vec![super::Group {
            alerts,
            ..super::Group::default()
        }],
    }
}

/// What an event type means for its incident.
fn state_of(event_type: &str) -> Option<AlertStatus> {
    match event_type {
        "incident.triggered" => Some(AlertStatus::Firing),
        "incident.resolved" => Some(AlertStatus::Resolved),
        _ => None,
    }
}

/// One event `ev` about `data` → (group key, alert). Strict: an incident id is required and
/// `data.created_at`, `event.occurred_at` must be RFC 3339.
fn incident(
    ev: &Value,
    data: Option<&Value>,
    mode: Mode,
) -> Result<(Option<String>, Alert), FieldError> {
    let null = Value::Null;
    let d = data.unwrap_or(&null);
    let event_type = loose(ev.get("event_type"))
        .or_else(|| loose(ev.get("event")))
        .unwrap_or_default();
    let id = loose(d.get("id"));
    let incident_key = loose(d.get("incident_key"));
    let fingerprint = id
        .clone()
        .or_else(|| incident_key.clone())
        .or_else(|| loose(ev.get("id")));
    if fingerprint.is_none() && mode == Mode::Strict {
        return Err(bad(
            "event.data.id",
            "is required (the PagerDuty incident id)",
        ));
    }
    let created = instant(d.get("created_at"), "event.data.created_at", mode)?;
    let occurred_at = instant(ev.get("occurred_at"), "event.occurred_at", mode)?;
    let service = loose(d.get("service").and_then(|x| x.get("summary")));
    let priority = loose(d.get("priority").and_then(|x| x.get("summary")));
    let urgency = loose(d.get("urgency"));
    let mut labels = vec![("event_type".to_string(), event_type.clone())];
    for (k, v) in [
        ("service", &service),
        ("priority", &priority),
        ("urgency", &urgency),
        ("incident_key", &incident_key),
    ] {
        if let Some(v) = v {
            labels.push((k.to_string(), v.clone()));
        }
    }
    let is_incident = d
        .get("type")
        .and_then(Value::as_str)
        .is_none_or(|t| t == "incident");
    let title = loose(d.get("title")).or_else(|| loose(d.get("summary")));
    let name = if is_incident {
        title.clone().unwrap_or_else(|| event_type.clone())
    } else {
        format!(
            "{event_type}: {}",
            loose(d.get("summary")).unwrap_or_default()
        )
    };
    let status = loose(d.get("status"))
        .filter(|_| is_incident)
        .unwrap_or_else(|| event_type.rsplit('.').next().unwrap_or("event").to_string());
    let key = incident_key.or(id).or_else(|| fingerprint.clone());
    let alert = Alert {
        fingerprint,
        title,
        name,
        state: state_of(&event_type),
        severity: priority.or(urgency),
        service,
        labels,
        summary: loose(d.get("description")),
        url: loose(d.get("html_url")),
        starts_at: created.or(occurred_at),
        ends_at: occurred_at.filter(|_| status == "resolved"),
        occurred_at,
        status,
        ..Alert::default()
    };
    Ok((key, alert))
}
