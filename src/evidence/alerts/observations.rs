//! Pasted alert bodies → evidence observations: one per alert, firing first by salience, with
//! failure-mode tags from running the signature catalogue over the alert name, summary and
//! label values; text that holds no alert becomes one observation of the text.

use super::spans::line_of;
use super::{Alert, parse_alerts};
use crate::evidence::{
    Extraction, LineRange, MAX_OBSERVATIONS, Observation, match_tags, thousands, time,
    truncate_chars,
};

/// Extract observations from an alert body (one per alert, sorted firing-first by salience).
pub fn extract(text: &str) -> Extraction {
    let lines = text.lines().count() as u64;
    let (format, alerts) = parse_alerts(text);
    let mut obs: Vec<Observation> = alerts.iter().map(|a| observation(text, a)).collect();
    if obs.is_empty() {
        obs.push(text_observation(text, lines));
    }
    obs.sort_by_key(|o| std::cmp::Reverse(o.salience));
    obs.truncate(MAX_OBSERVATIONS);
    Extraction {
        observations: obs,
        lines,
        bytes: text.len() as u64,
        templates: alerts.len(),
        format: format.into(),
    }
}

/// One alert's observation: `Alert {name} {status} ({severity}) {window}: {summary} [labels]`,
/// its lines in `text`, tags and salience (active and severe alerts first).
fn observation(text: &str, a: &Alert) -> Observation {
    let labels: Vec<String> = a
        .labels
        .iter()
        .filter(|(k, _)| k != "alertname" && k != "severity")
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let (starts_at, ends_at) = (ns(a.starts_at), ns(a.ends_at));
    let when = match (starts_at, ends_at) {
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
    Observation {
        statement,
        line_ranges: vec![LineRange { start, end }],
        count: 1,
        first_seen: starts_at.and_then(time::to_timestamp),
        last_seen: ends_at.and_then(time::to_timestamp),
        failure_modes: tags.clone(),
        level: a.severity.clone(),
        example: None,
        salience: if active { 60 } else { 30 } + sev_score + 5 * tags.len().min(3) as u32,
    }
}

/// Text that holds no alert: one observation of the whole text (salience 50).
fn text_observation(text: &str, lines: u64) -> Observation {
    let trimmed = text.trim();
    let tags: Vec<String> = match_tags(trimmed).iter().map(|t| t.to_string()).collect();
    Observation {
        statement: format!(
            "Alert text ({} lines): {}",
            thousands(lines),
            truncate_chars(trimmed, 300)
        ),
        line_ranges: LineRange::whole(lines),
        count: 1,
        first_seen: None,
        last_seen: None,
        failure_modes: tags,
        level: None,
        example: None,
        salience: 50,
    }
}

/// An alert instant as the `i64` epoch nanoseconds of `evidence::time` (lenient reads always fit).
fn ns(t: Option<i128>) -> Option<i64> {
    t.and_then(|t| i64::try_from(t).ok())
}
