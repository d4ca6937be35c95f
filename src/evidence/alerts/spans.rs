//! Where each alert of a pasted body sits in its text: byte spans of the elements of the
//! body's alert array (a scan that respects strings and nesting), and their 1-based lines.

use super::{Alert, Format};

/// Sets each alert's byte span in `text` by its format: the elements of `alerts[]` (Alertmanager,
/// Grafana), of the bare array, or of `messages[]` (PagerDuty V2); the whole text otherwise, or
/// when the scan finds fewer elements than alerts.
pub(super) fn assign(text: &str, format: Format, alerts: &mut [Alert]) {
    let spans = match format {
        Format::Alertmanager | Format::Grafana => array_spans(text, "alerts"),
        Format::AlertmanagerApi => {
            let off = text.len() - text.trim_start().len();
            top_level_spans(text.as_bytes(), off)
        }
        Format::PagerdutyV2 => array_spans(text, "messages"),
        _ => Vec::new(),
    };
    for (i, a) in alerts.iter_mut().enumerate() {
        a.span = spans.get(i).copied().unwrap_or((0, text.len()));
    }
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

/// The 1-based line of byte `byte` of `text`.
pub(super) fn line_of(text: &str, byte: usize) -> u64 {
    text.as_bytes()[..byte.min(text.len())]
        .iter()
        .filter(|&&c| c == b'\n')
        .count() as u64
        + 1
}
