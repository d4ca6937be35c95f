//! Alert webhook bodies → one observation per alert.
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
//! - anything else: one observation from the text (JSON fields title/summary/message/status if
//!   present).
//!
//! Failure-mode tags come from running the signature catalogue over the alert name, summary,
//! description and label values.

use serde_json::Value;

use super::{Extraction, LineRange, Observation, match_tags, thousands, time, truncate_chars};

/// A normalised alert.
#[derive(Clone, Debug, PartialEq)]
pub struct Alert {
    /// Alert name / title.
    pub name: String,
    /// `firing`, `resolved`, `triggered`, `acknowledged`, `open`, `closed`, ...
    pub status: String,
    /// Severity / urgency / priority as given.
    pub severity: Option<String>,
    /// Labels (key, value) in input order.
    pub labels: Vec<(String, String)>,
    /// Summary / description text.
    pub summary: Option<String>,
    /// Start (epoch ns, UTC).
    pub starts_at: Option<i64>,
    /// End (epoch ns, UTC); `None` while firing.
    pub ends_at: Option<i64>,
    /// Byte span of the alert in the submitted text.
    pub span: (usize, usize),
}

fn s(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(x) if !x.trim().is_empty() => Some(x.trim().to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn ts_str(v: Option<&Value>) -> Option<i64> {
    let t = v?.as_str()?;
    if t.starts_with("0001-01-01") {
        return None; // Go zero time: still firing
    }
    time::parse_any(t)
}

/// Byte spans of the top-level elements of the first JSON array under `"key"` (scan respects
/// strings and nesting).
fn array_spans(text: &str, key: &str) -> Vec<(usize, usize)> {
    let pat = format!("\"{key}\"");
    let Some(kpos) = text.find(&pat) else {
        return Vec::new();
    };
    let b = text.as_bytes();
    let mut i = kpos + pat.len();
    while i < b.len() && (b[i].is_ascii_whitespace() || b[i] == b':') {
        i += 1;
    }
    if b.get(i) != Some(&b'[') {
        return Vec::new();
    }
    top_level_spans(b, i)
}

fn top_level_spans(b: &[u8], open: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut in_str = false;
    let mut esc = false;
    let mut start = None;
    for (j, &c) in b.iter().enumerate().skip(open + 1) {
        if in_str {
            if esc {
                esc = false;
            } else if c == b'\\' {
                esc = true;
            } else if c == b'"' {
                in_str = false;
            }
            continue;
        }
        match c {
            b'"' => {
                in_str = true;
                if depth == 0 && start.is_none() {
                    start = Some(j);
                }
            }
            b'{' | b'[' => {
                if depth == 0 {
                    start = Some(j);
                }
                depth += 1;
            }
            b'}' | b']' => {
                if depth == 0 {
                    break;
                }
                depth -= 1;
                if depth == 0
                    && let Some(st) = start.take()
                {
                    out.push((st, j + 1));
                }
            }
            _ => {}
        }
    }
    out
}

fn line_of(text: &str, byte: usize) -> u64 {
    text.as_bytes()[..byte.min(text.len())]
        .iter()
        .filter(|&&c| c == b'\n')
        .count() as u64
        + 1
}

fn labels_of(v: Option<&Value>) -> Vec<(String, String)> {
    v.and_then(|l| l.as_object())
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| s(Some(v)).map(|x| (k.clone(), x)))
                .collect()
        })
        .unwrap_or_default()
}

fn am_alert(a: &Value, span: (usize, usize)) -> Alert {
    let labels = labels_of(a.get("labels"));
    let ann = a.get("annotations");
    let get_label = |k: &str| labels.iter().find(|(a, _)| a == k).map(|(_, v)| v.clone());
    let summary = s(ann.and_then(|x| x.get("summary")))
        .or_else(|| s(ann.and_then(|x| x.get("description"))))
        .or_else(|| s(ann.and_then(|x| x.get("message"))));
    Alert {
        name: get_label("alertname").unwrap_or_else(|| "alert".into()),
        status: s(a.get("status")).unwrap_or_else(|| {
            if ts_str(a.get("endsAt")).is_some() {
                "resolved".into()
            } else {
                "firing".into()
            }
        }),
        severity: get_label("severity").or_else(|| get_label("priority")),
        labels,
        summary,
        starts_at: ts_str(a.get("startsAt")),
        ends_at: ts_str(a.get("endsAt")),
        span,
    }
}

/// Parse a body into alerts; returns (format name, alerts). Unknown shapes give no alerts.
pub fn parse_alerts(text: &str) -> (&'static str, Vec<Alert>) {
    let Ok(v) = serde_json::from_str::<Value>(text) else {
        return ("text", Vec::new());
    };
    let whole = (0, text.len());
    if let Some(arr) = v.get("alerts").and_then(|a| a.as_array()) {
        let spans = array_spans(text, "alerts");
        let fmt =
            if v.get("orgId").is_some() || v.get("version").and_then(|x| x.as_str()) == Some("1") {
                "grafana"
            } else {
                "alertmanager"
            };
        let alerts = arr
            .iter()
            .enumerate()
            .map(|(i, a)| am_alert(a, spans.get(i).copied().unwrap_or(whole)))
            .collect();
        return (fmt, alerts);
    }
    if let Some(arr) = v.as_array()
        && arr.iter().all(|a| a.get("labels").is_some())
        && !arr.is_empty()
    {
        let t = text.trim_start();
        let off = text.len() - t.len();
        let spans: Vec<(usize, usize)> = top_level_spans(text.as_bytes(), off)
            .into_iter()
            .collect::<Vec<_>>();
        let alerts = arr
            .iter()
            .enumerate()
            .map(|(i, a)| am_alert(a, spans.get(i).copied().unwrap_or(whole)))
            .collect();
        return ("alertmanager-api", alerts);
    }
    if let Some(ev) = v.get("event")
        && ev.get("event_type").is_some()
    {
        return ("pagerduty-v3", vec![pagerduty(ev.get("data"), ev, whole)]);
    }
    if let Some(msgs) = v.get("messages").and_then(|m| m.as_array()) {
        let spans = array_spans(text, "messages");
        let alerts = msgs
            .iter()
            .enumerate()
            .map(|(i, m)| pagerduty(m.get("incident"), m, spans.get(i).copied().unwrap_or(whole)))
            .collect();
        return ("pagerduty-v2", alerts);
    }
    if let (Some(action), Some(a)) = (s(v.get("action")), v.get("alert")) {
        let mut labels = Vec::new();
        for k in ["alias", "priority", "entity", "source", "tinyId"] {
            if let Some(x) = s(a.get(k)) {
                labels.push((k.to_string(), x));
            }
        }
        for k in ["tags", "teams"] {
            if let Some(arr) = a.get(k).and_then(|x| x.as_array()) {
                let vals: Vec<String> = arr.iter().filter_map(|x| s(Some(x))).collect();
                if !vals.is_empty() {
                    labels.push((k.to_string(), vals.join(",")));
                }
            }
        }
        let status = match action.to_ascii_lowercase().as_str() {
            "create" => "open".to_string(),
            "close" | "delete" => "closed".to_string(),
            "acknowledge" => "acknowledged".to_string(),
            o => o.to_string(),
        };
        let created = a
            .get("createdAt")
            .and_then(|x| x.as_i64())
            .map(|ms| ms.saturating_mul(1_000_000));
        let updated = a.get("updatedAt").and_then(|x| x.as_i64());
        return (
            "opsgenie",
            vec![Alert {
                name: s(a.get("message")).unwrap_or_else(|| "opsgenie alert".into()),
                status: status.clone(),
                severity: s(a.get("priority")),
                labels,
                summary: s(a.get("description")),
                starts_at: created,
                ends_at: if status == "closed" { updated } else { None },
                span: whole,
            }],
        );
    }
    // generic JSON
    let pick = |keys: &[&str]| keys.iter().find_map(|k| s(v.get(*k)));
    match pick(&["title", "name", "alertname", "summary", "message", "text"]) {
        Some(name) => (
            "json",
            vec![Alert {
                name,
                status: pick(&["status", "state"]).unwrap_or_else(|| "unknown".into()),
                severity: pick(&["severity", "priority", "urgency", "level"]),
                labels: Vec::new(),
                summary: pick(&["description", "details", "body"]),
                starts_at: ["startsAt", "created_at", "timestamp", "time"]
                    .iter()
                    .find_map(|k| ts_str(v.get(*k))),
                ends_at: None,
                span: whole,
            }],
        ),
        None => ("json", Vec::new()),
    }
}

fn pagerduty(data: Option<&Value>, ev: &Value, span: (usize, usize)) -> Alert {
    let empty = Value::Null;
    let d = data.unwrap_or(&empty);
    let event_type = s(ev.get("event_type"))
        .or_else(|| s(ev.get("event")))
        .unwrap_or_default();
    let mut labels = vec![("event_type".to_string(), event_type.clone())];
    if let Some(svc) = s(d.get("service").and_then(|x| x.get("summary"))) {
        labels.push(("service".into(), svc));
    }
    let priority = s(d.get("priority").and_then(|x| x.get("summary")));
    if let Some(p) = &priority {
        labels.push(("priority".into(), p.clone()));
    }
    let urgency = s(d.get("urgency"));
    if let Some(u) = &urgency {
        labels.push(("urgency".into(), u.clone()));
    }
    if let Some(k) = s(d.get("incident_key")) {
        labels.push(("incident_key".into(), k));
    }
    let is_incident = d
        .get("type")
        .and_then(|t| t.as_str())
        .is_none_or(|t| t == "incident");
    let name = if is_incident {
        s(d.get("title"))
            .or_else(|| s(d.get("summary")))
            .unwrap_or_else(|| event_type.clone())
    } else {
        format!("{event_type}: {}", s(d.get("summary")).unwrap_or_default())
    };
    let status = s(d.get("status"))
        .filter(|_| is_incident)
        .unwrap_or_else(|| event_type.rsplit('.').next().unwrap_or("event").to_string());
    Alert {
        name,
        status: status.clone(),
        severity: priority.or(urgency),
        labels,
        summary: s(d.get("description")),
        starts_at: ts_str(d.get("created_at")).or_else(|| ts_str(ev.get("occurred_at"))),
        ends_at: if status == "resolved" {
            ts_str(ev.get("occurred_at"))
        } else {
            None
        },
        span,
    }
}

/// Extract observations from an alert body (one per alert, sorted firing-first by salience).
pub fn extract(text: &str) -> Extraction {
    let lines = text.lines().count() as u64;
    let (format, alerts) = parse_alerts(text);
    let mut obs = Vec::new();
    for a in &alerts {
        let labels: Vec<String> = a
            .labels
            .iter()
            .filter(|(k, _)| k != "alertname" && k != "severity")
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let when = match (a.starts_at, a.ends_at) {
            (Some(s), e) => format!(" {}", time::fmt_window(s, e)),
            _ => String::new(),
        };
        let sev = a
            .severity
            .as_ref()
            .map(|s| format!(" ({s})"))
            .unwrap_or_default();
        let mut statement = format!("Alert {} {}{sev}{when}", a.name, a.status);
        if let Some(sm) = &a.summary {
            statement.push_str(": ");
            statement.push_str(truncate_chars(sm, 300));
        }
        if !labels.is_empty() {
            statement.push_str(&format!(" [{}]", labels.join(", ")));
        }
        let tag_text = format!(
            "{}\n{}\n{}",
            a.name,
            a.summary.clone().unwrap_or_default(),
            a.labels
                .iter()
                .map(|(_, v)| v.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        );
        let tags: Vec<String> = match_tags(&tag_text)
            .iter()
            .map(|t| t.to_string())
            .collect();
        let active = matches!(
            a.status.as_str(),
            "firing" | "triggered" | "open" | "acknowledged"
        );
        let sev_score = match a.severity.as_deref().map(|s| s.to_ascii_lowercase()) {
            Some(s) if s == "critical" || s == "p1" || s == "high" || s == "page" => 20,
            Some(s) if s == "warning" || s == "p2" || s == "p3" => 10,
            _ => 5,
        };
        let start = line_of(text, a.span.0);
        let end = line_of(text, a.span.1.saturating_sub(1)).max(start);
        obs.push(Observation {
            statement,
            line_ranges: vec![LineRange { start, end }],
            count: 1,
            first_seen: a.starts_at.and_then(time::to_timestamp),
            last_seen: a.ends_at.and_then(time::to_timestamp),
            failure_modes: tags.clone(),
            level: a.severity.clone(),
            example: None,
            salience: if active { 60 } else { 30 } + sev_score + 5 * tags.len().min(3) as u32,
        });
    }
    if obs.is_empty() {
        let trimmed = text.trim();
        let tags: Vec<String> = match_tags(trimmed).iter().map(|t| t.to_string()).collect();
        obs.push(Observation {
            statement: format!(
                "Alert text ({} lines): {}",
                thousands(lines),
                truncate_chars(trimmed, 300)
            ),
            line_ranges: if lines > 0 {
                vec![LineRange {
                    start: 1,
                    end: lines,
                }]
            } else {
                vec![]
            },
            count: 1,
            first_seen: None,
            last_seen: None,
            failure_modes: tags,
            level: None,
            example: None,
            salience: 50,
        });
    }
    obs.sort_by_key(|o| std::cmp::Reverse(o.salience));
    obs.truncate(super::MAX_OBSERVATIONS);
    Extraction {
        observations: obs,
        lines,
        bytes: text.len() as u64,
        templates: alerts.len(),
        format: format.into(),
    }
}
