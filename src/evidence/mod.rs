//! Evidence extraction: turns pasted logs, metric samples, alert bodies and notes into a short,
//! ranked list of [`Observation`]s (DESIGN.md §2: the `observation` epistemic type), each pointing
//! back at the 1-based line numbers it came from.
//!
//! This module owns: log shape detection and parsing ([`logs`]), header layouts learned from the
//! paste for shapes without a parser ([`header`], timestamps in any layout from [`time`]), online
//! template mining with Drain ([`drain`]), the failure-signature catalogue ([`signatures`], data in `signatures.json`), metric
//! series analysis ([`metrics`]), alert webhook normalisation ([`alerts`]). It is pure domain code:
//! no I/O, deterministic for a given input (except the default year for year-less syslog lines, see
//! [`logs`]).
//!
//! Work is bounded: [`LogExtractor`] keeps at most [`MAX_TEMPLATES`] templates, at most
//! [`MAX_RANGES`] line ranges per template, tokenizes at most [`MAX_TOKENIZE_BYTES`] of a message,
//! and stores examples of at most [`MAX_EXAMPLE_CHARS`] characters, whatever the input size.
//!
//! The public types every parser returns are here; the log extractor that ranks their
//! observations is in `extractor`'s submodules.

pub mod alerts;
pub mod csv;
pub mod drain;
mod extractor;
pub mod header;
pub mod logs;
pub mod message;
pub mod metrics;
pub mod redact;
pub mod shape;
pub mod signatures;
pub mod time;

use serde::{Deserialize, Serialize};

pub use signatures::{Signature, benign_examples, catalogue, failure_mode_description, match_tags};

pub use extractor::{LogExtractor, NO_TEMPLATE};

/// Maximum number of templates a [`LogExtractor`] keeps (further unmatched lines count as
/// "other").
pub const MAX_TEMPLATES: usize = 5_000;
/// Maximum stored line ranges per template (the first `MAX_RANGES - 1` and the latest one).
pub const MAX_RANGES: usize = 20;
/// Bytes of a message that are tokenized; the rest of a huge line is ignored for grouping.
pub const MAX_TOKENIZE_BYTES: usize = 4_096;
/// Maximum characters kept for an example line.
pub const MAX_EXAMPLE_CHARS: usize = 500;
/// Maximum observations returned by [`extract`] (summary included).
pub const MAX_OBSERVATIONS: usize = 25;
/// Salience of the summary observation of a log submission (line count, window, templates,
/// errors, format): always first, and not itself a symptom.
pub const SUMMARY_SALIENCE: u32 = 1000;
/// A log paste of at most this many lines is read as hand-picked: its lines without any level
/// (notes, command output, metric readings typed in) each become an observation too.
pub const SHORT_PASTE_LINES: u64 = 30;
/// Maximum tokens per message given to Drain.
const MAX_TOKENS: usize = 256;
/// Buckets of the per-template line histogram used for rate-change detection.
const BUCKETS: usize = 64;
/// Lines buffered at the start of a paste to learn its header layouts from (see [`header`]).
pub const SAMPLE_LINES: usize = 256;
/// Entries of the exact-match cache (masked message → template) before it is cleared.
const CACHE_MAX: usize = 1 << 16;

/// What kind of text was submitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceKind {
    /// Log lines.
    Logs,
    /// Metric samples (Prometheus text, Prometheus range-query JSON, CSV).
    Metrics,
    /// Alert webhook body (Alertmanager, Grafana, PagerDuty v3, Opsgenie) or alert text.
    Alert,
    /// Free text written by a person.
    Note,
}

impl EvidenceKind {
    /// Parse the snake_case name (`"logs"`, `"metrics"`, `"alert"`, `"note"`); also accepts
    /// `"log"`, `"metric"`, `"alerts"`, `"notes"`. Case-insensitive.
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "logs" | "log" => Some(EvidenceKind::Logs),
            "metrics" | "metric" => Some(EvidenceKind::Metrics),
            "alert" | "alerts" => Some(EvidenceKind::Alert),
            "note" | "notes" => Some(EvidenceKind::Note),
            _ => None,
        }
    }

    /// The snake_case name, as serialised.
    pub fn as_str(self) -> &'static str {
        match self {
            EvidenceKind::Logs => "logs",
            EvidenceKind::Metrics => "metrics",
            EvidenceKind::Alert => "alert",
            EvidenceKind::Note => "note",
        }
    }
}

/// Inclusive range of 1-based line numbers in the submitted text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineRange {
    /// First line (1-based).
    pub start: u64,
    /// Last line (inclusive).
    pub end: u64,
}

impl LineRange {
    /// The range of a whole text of `lines` lines: `[1, lines]`, or none for an empty text.
    pub fn whole(lines: u64) -> Vec<LineRange> {
        if lines > 0 {
            vec![LineRange {
                start: 1,
                end: lines,
            }]
        } else {
            Vec::new()
        }
    }
}

/// One thing the world reported, readable in a few seconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// One readable sentence, e.g. `ERROR template seen 412 times: Connection pool exhausted
    /// (waited <*> ms)`.
    pub statement: String,
    /// Where it came from: merged, ascending, at most [`MAX_RANGES`] ranges.
    pub line_ranges: Vec<LineRange>,
    /// Number of lines / samples / alerts behind it.
    pub count: u64,
    /// Earliest timestamp (UTC), when known.
    pub first_seen: Option<jiff::Timestamp>,
    /// Latest timestamp (UTC), when known.
    pub last_seen: Option<jiff::Timestamp>,
    /// Failure-mode tags from the catalogue (snake_case, stable).
    pub failure_modes: Vec<String>,
    /// Severity for log templates / alerts: "trace", "debug", "info", "notice", "warn", "error",
    /// "critical", "fatal" (alerts: the `severity` label as given).
    pub level: Option<String>,
    /// One example line, at most [`MAX_EXAMPLE_CHARS`] characters.
    pub example: Option<String>,
    /// Ranking score, higher = show first (the summary observation gets [`SUMMARY_SALIENCE`]).
    pub salience: u32,
}

/// Result of extracting evidence from one submission.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Extraction {
    /// Ranked observations (highest salience first), at most [`MAX_OBSERVATIONS`].
    pub observations: Vec<Observation>,
    /// Lines in the submission.
    pub lines: u64,
    /// Bytes in the submission.
    pub bytes: u64,
    /// Templates (logs), series (metrics) or alerts (alert) found.
    pub templates: usize,
    /// Detected shape, e.g. `syslog`, `apache`, `log4j`, `json`, `prometheus-text`,
    /// `alertmanager`, `note`; `mixed` when no shape has a majority.
    pub format: String,
}

/// Extract observations from a whole submission of the given kind. Never fails: text that does
/// not parse as the expected shape yields at least a summary or note observation.
pub fn extract(kind: EvidenceKind, text: &str) -> Extraction {
    match kind {
        EvidenceKind::Logs => {
            let mut x = LogExtractor::new();
            for line in text.lines() {
                x.push_line(line);
            }
            let mut e = x.finish();
            e.bytes = text.len() as u64;
            e
        }
        EvidenceKind::Metrics => metrics::extract(text),
        EvidenceKind::Alert => alerts::extract(text),
        EvidenceKind::Note => note(text),
    }
}

fn note(text: &str) -> Extraction {
    let lines = text.lines().count() as u64;
    let trimmed = text.trim();
    let mut statement = truncate_chars(trimmed, 1_000).to_string();
    if statement.is_empty() {
        statement = String::from("(empty note)");
    }
    let tags = match_tags(trimmed);
    let obs = Observation {
        statement,
        line_ranges: LineRange::whole(lines),
        count: 1,
        first_seen: None,
        last_seen: None,
        failure_modes: tags.iter().map(|s| s.to_string()).collect(),
        level: None,
        example: None,
        salience: 50 + 10 * tags.len() as u32,
    };
    Extraction {
        observations: vec![obs],
        lines,
        bytes: text.len() as u64,
        templates: 0,
        format: "note".into(),
    }
}

/// Truncate to at most `n` characters (on a char boundary).
pub fn truncate_chars(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

fn truncate_bytes(s: &str, n: usize) -> &str {
    if s.len() <= n {
        return s;
    }
    let mut i = n;
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    &s[..i]
}

/// Format an integer with thousands separators (`2000` → `2,000`).
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Append a line number to a merged range list capped at `MAX_RANGES` (first ranges kept, the last
/// slot follows the latest lines).
fn push_range(ranges: &mut Vec<LineRange>, line: u64) {
    if let Some(last) = ranges.last_mut() {
        if last.end + 1 == line || last.end == line {
            last.end = line;
            return;
        }
        if ranges.len() >= MAX_RANGES {
            let last = ranges.last_mut().expect("non-empty");
            *last = LineRange {
                start: line,
                end: line,
            };
            return;
        }
    }
    ranges.push(LineRange {
        start: line,
        end: line,
    });
}

fn min_opt(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

fn max_opt(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    a.max(b)
}

#[cfg(test)]
mod tests;
