//! What a sender's alert fields become before they are stored: one-line and multi-line text
//! without control characters, a service name from a label, the integration's severity for a
//! sender's value, and the flags for instants that cannot be right. Pure: no I/O.

use crate::domain::Severity;
use crate::evidence::truncate_chars;
use crate::store::integrations::Integration;

use super::{FUTURE_SKEW, IncomingAlert};

/// Replaces control characters and runs of whitespace by one space, trims, and keeps at most
/// `max` characters.
pub(super) fn clean_line(s: &str, max: usize) -> String {
    let joined = s
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    truncate_chars(&joined, max).to_string()
}

/// Removes control characters other than newline and tab; keeps at most `max` characters.
pub(super) fn clean_text(s: &str, max: usize) -> String {
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
pub(super) fn clean_service(s: &str) -> Option<String> {
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

/// The severity an integration maps a sender's `value` to; its default when the value is
/// missing or unmapped.
pub(super) fn map_severity(integ: &Integration, value: Option<&str>) -> Severity {
    value
        .map(|v| v.trim().to_lowercase())
        .and_then(|v| integ.severity_map.get(&v).copied())
        .unwrap_or(integ.default_severity)
}

/// Timeline flags for an alert's instants: a start or end more than [`FUTURE_SKEW`] ahead of
/// `received`, or an end before the start. The alert is kept either way.
pub(super) fn skew_flags(a: &IncomingAlert, received: jiff::Timestamp) -> Vec<(String, String)> {
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

/// At most 64 characters of `s`, for the timeline.
pub(super) fn short(s: &str) -> &str {
    truncate_chars(s, 64)
}

#[cfg(test)]
mod tests {
    use super::*;

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
