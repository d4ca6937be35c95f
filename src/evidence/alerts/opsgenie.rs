//! Opsgenie outgoing Webhook integration (Opsgenie docs, "Webhook Integration": `action`,
//! `alert{alertId, alias, tinyId, message, description, priority, entity, source, tags, teams,
//! createdAt (epoch ms), updatedAt (epoch ns)}`). Action `Create` means firing, `Close`
//! resolved; other actions have no [`AlertStatus`]. An alert is identified by its `alias` (the
//! de-duplication key), else its `alertId`.

use serde_json::{Map, Value};

use super::fields::{Unit, bad, epoch, loose, object, required_object, text};
use super::{Alert, AlertStatus, Body, FieldError, Format, Mode};

/// An Opsgenie body. Strict: `action` and the `alert` object are required; an action without a
/// status ends the read; then `alert.alias` (or `alert.alertId`) is required and the epoch
/// fields must be numbers.
pub(super) fn read(v: &Value, mode: Mode) -> Result<Body, FieldError> {
    let none = Map::new();
    let root = object(v, "body", mode)?.unwrap_or(&none);
    let action = text(root.get("action"), "action", mode)?;
    let Some(action) = action.or_else(|| (mode == Mode::Lenient).then(String::new)) else {
        return Err(bad(
            "action",
            "is required: this endpoint takes the Opsgenie Webhook integration body",
        ));
    };
    let alert = required_object(root.get("alert"), "alert", "", mode)?.unwrap_or(&none);
    let state = match action.to_ascii_lowercase().as_str() {
        "create" => Some(AlertStatus::Firing),
        "close" => Some(AlertStatus::Resolved),
        _ => None,
    };
    if state.is_none() && mode == Mode::Strict {
        return Ok(Body {
            format: Format::Opsgenie,
            event: Some(action),
            groups: Vec::new(),
        });
    }
    let alias = loose(alert.get("alias"));
    let alert_id = loose(alert.get("alertId"));
    let key = alias.clone().or_else(|| alert_id.clone());
    if key.is_none() && mode == Mode::Strict {
        return Err(bad("alert.alias", "is required (or alert.alertId)"));
    }
    let created = epoch(
        alert.get("createdAt"),
        "alert.createdAt",
        Unit::Milliseconds,
        mode,
    )?;
    let updated = epoch(
        alert.get("updatedAt"),
        "alert.updatedAt",
        Unit::Nanoseconds,
        mode,
    )?;
    let status = match action.to_ascii_lowercase().as_str() {
        "create" => "open".to_string(),
        "close" | "delete" => "closed".to_string(),
        "acknowledge" => "acknowledged".to_string(),
        o => o.to_string(),
    };
    let tags = list(alert, "tags");
    let service = loose(alert.get("entity")).or_else(|| {
        tags.iter().find_map(|t| {
            t.strip_prefix("service:")
                .or_else(|| t.strip_prefix("service="))
                .map(|s| s.trim().to_string())
        })
    });
    let labels = labels(alert, &tags);
    let title = loose(alert.get("message"));
    // The alias is Opsgenie's de-duplication key (Opsgenie Alert API, "alias"): a Close sent by
    // alias may carry another alertId, and must close the alert it names, not add one.
    let alert = Alert {
        fingerprint: alias.or(alert_id),
        name: title.clone().unwrap_or_else(|| "opsgenie alert".into()),
        title,
        state,
        severity: loose(alert.get("priority")),
        service,
        labels,
        summary: loose(alert.get("description")),
        starts_at: created,
        ends_at: updated.filter(|_| status == "closed"),
        status,
        ..Alert::default()
    };
    Ok(Body::one(Format::Opsgenie, Some(action), key, alert))
}

/// The scalars of array field `k` as text.
fn list(alert: &Map<String, Value>, k: &str) -> Vec<String> {
    alert
        .get(k)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|t| loose(Some(t))).collect())
        .unwrap_or_default()
}

/// The alert's identifying fields as labels: `alias`, `priority`, `entity`, `source`,
/// `tinyId`, then `tags` and `teams` joined with commas.
fn labels(alert: &Map<String, Value>, tags: &[String]) -> Vec<(String, String)> {
    let mut labels: Vec<(String, String)> = ["alias", "priority", "entity", "source", "tinyId"]
        .iter()
        .filter_map(|k| loose(alert.get(*k)).map(|x| (k.to_string(), x)))
        .collect();
    for (k, vals) in [("tags", tags.to_vec()), ("teams", list(alert, "teams"))] {
        if !vals.is_empty() {
            labels.push((k.to_string(), vals.join(",")));
        }
    }
    labels
}
