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
//! Long because it holds the public types every parser returns and the log extractor that ranks
//! their observations; the parsers themselves are in the submodules named above.

pub mod alerts;
pub mod csv;
pub mod drain;
pub mod header;
pub mod logs;
pub mod metrics;
pub mod redact;
pub mod shape;
pub mod signatures;
pub mod time;

use serde::{Deserialize, Serialize};

pub use signatures::{Signature, catalogue, failure_mode_description, match_tags};

use drain::{AddResult, Drain, DrainConfig, Tokens};
use header::Layout;
use logs::{Level, LineParser, LogFormat};

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

#[derive(Debug, Clone)]
struct TemplateStats {
    alive: bool,
    count: u64,
    level: Option<Level>,
    first_ts: Option<i64>,
    last_ts: Option<i64>,
    first_line: u64,
    last_line: u64,
    ranges: Vec<LineRange>,
    example: String,
    buckets: [u32; BUCKETS],
}

/// Streaming log extractor with bounded memory: feed lines with [`LogExtractor::push_line`] (or
/// raw chunks with [`LogExtractor::push_chunk`]), then call [`LogExtractor::finish`].
///
/// The first [`SAMPLE_LINES`] lines are buffered and header layouts are learned from them
/// ([`header`]); then every line goes once through: shape detection (known fast paths; the
/// majority shape of the first 32 lines is tried first, other shapes are still tried per line) →
/// learned header (time, level and the other leading fields taken off the content the fast path
/// left, or off the whole line for `plain`) → shape cache (a message whose bytes equal one seen
/// before but for its digits goes straight to that template, before any tokenizing; see
/// [`shape`]) → masking → exact-match cache (a masked message seen before goes straight to its
/// template) → Drain (He et al., ICWS 2017; depth 4, similarity 0.7, 100 children, variable
/// depth, template merging and sibling merging, see [`drain`]) → per-template statistics.
/// Signatures run once per template in `finish`. No allocation per line once warm (a JSON line
/// is the exception: its message is decoded).
#[derive(Debug)]
pub struct LogExtractor {
    parser: LineParser,
    preferred: Option<LogFormat>,
    preferred_checked: bool,
    /// Most of the first lines had a learned layout of `plain`: try it before the fast paths.
    learned_first: bool,
    fast: bool,
    learn: bool,
    votes: Vec<(LogFormat, u64)>,
    drain: Drain,
    toks: Tokens,
    stats: Vec<TemplateStats>,
    parent: Vec<u32>,
    lines: u64,
    bytes: u64,
    overflow: u64,
    first_ts: Option<i64>,
    last_ts: Option<i64>,
    bucket_width: u64,
    record_ids: bool,
    ids: Vec<u32>,
    pending: String,
    /// Raw lines buffered until the header layouts are learned (`None` once learned).
    sample: Option<Sample>,
    /// Learned layouts and the fast-path shape whose content they apply to.
    layouts: Vec<(LogFormat, Layout)>,
    /// Exact-match cache: hash of the masked token text → template id (see [`drain`]).
    cache: std::collections::HashMap<u64, u32, drain::BuildIdHash>,
    /// Shape cache: hash of the message with its digits blanked → template id (see [`shape`]).
    shapes: std::collections::HashMap<u64, u32, drain::BuildIdHash>,
    /// Whether the shape cache is used (ablation; default on).
    shape_cache: bool,
}

/// The "late" rule of [`LogExtractor::finish`]: first seen in the second half of a window of
/// at least 20 lines.
fn late_reason(s: &TemplateStats, lines: u64) -> Option<String> {
    if lines >= 20 && s.first_line * 2 > lines {
        let pct = 100 - (s.first_line - 1) * 100 / lines;
        let at = s
            .first_ts
            .map(|t| format!(" ({})", time::fmt_instant(t)))
            .unwrap_or_default();
        return Some(format!(
            "first seen at line {}{at}, only in the last {pct}% of the window",
            thousands(s.first_line)
        ));
    }
    None
}

/// One flagged template as an observation: its statement (level, count, reasons, template)
/// and its lines, times, failure modes and example.
fn template_observation(
    s: &TemplateStats,
    template: &str,
    tags: &[&str],
    level: Option<Level>,
    inferred: bool,
    mut reasons: Vec<String>,
    salience: u32,
) -> Observation {
    let prefix = statement_prefix(level, inferred);
    if !tags.is_empty() {
        reasons.push(format!("failure mode {}", tags.join(", ")));
    }
    let reasons = if reasons.is_empty() {
        String::new()
    } else {
        format!(" ({})", reasons.join("; "))
    };
    let times = if s.count == 1 {
        "once".to_string()
    } else {
        format!("{} times", thousands(s.count))
    };
    Observation {
        statement: format!(
            "{prefix} seen {times}{reasons}: {}",
            truncate_chars(template, 300)
        ),
        line_ranges: s.ranges.clone(),
        count: s.count,
        first_seen: s.first_ts.and_then(time::to_timestamp),
        last_seen: s.last_ts.and_then(time::to_timestamp),
        failure_modes: tags.iter().map(|t| t.to_string()).collect(),
        level: level.map(|l| l.as_str().to_string()),
        example: Some(s.example.clone()),
        salience,
    }
}

/// The level rule of [`LogExtractor::finish`]: its salience (fatal/critical 50, error 40, warn
/// 15) and whether the level alone qualifies the template (error and above).
fn level_salience(level: Option<Level>) -> (u32, bool) {
    match level {
        Some(Level::Fatal | Level::Critical) => (50, true),
        Some(Level::Error) => (40, true),
        Some(Level::Warn) => (15, false),
        _ => (0, false),
    }
}

/// The rate rule of [`LogExtractor::finish`]: a rise (25) or fall (10) between the window's
/// halves, or a stop (10), with its reason.
fn rate_change(
    s: &TemplateStats,
    half: usize,
    used: usize,
    l1: u64,
    l2: u64,
    lines: u64,
) -> Option<(u32, String)> {
    if half >= 1 && l1 > 0 && l2 > 0 {
        let c1: u64 = s.buckets[..half].iter().map(|&x| x as u64).sum();
        let c2: u64 = s.buckets[half..used].iter().map(|&x| x as u64).sum();
        let r1 = c1 as f64 / l1 as f64;
        let r2 = c2 as f64 / l2 as f64;
        if c1 > 0 && c2 >= 10 && r2 >= 4.0 * r1 {
            return Some((
                25,
                format!(
                    "rate ×{:.1} in the second half of the window ({c1} → {c2} lines)",
                    r2 / r1
                ),
            ));
        } else if c2 > 0 && c1 >= 10 && r1 >= 4.0 * r2 {
            return Some((
                10,
                format!(
                    "rate fell ×{:.1} in the second half of the window ({c1} → {c2} lines)",
                    r1 / r2
                ),
            ));
        } else if c2 == 0 && c1 >= 10 && lines >= 20 {
            return Some((10, format!("stopped after line {}", thousands(s.last_line))));
        }
    }
    None
}

/// How an observation's statement names its template's level: parsed, inferred or none.
fn statement_prefix(level: Option<Level>, inferred: bool) -> String {
    match (level, inferred) {
        (Some(l), false) if l >= Level::Warn => {
            format!("{} template", l.as_str().to_uppercase())
        }
        (Some(l), true) if l >= Level::Error => String::from("Failure-like template"),
        _ => String::from("Template"),
    }
}

/// Lines kept for layout learning: one text buffer and line boundaries.
#[derive(Debug, Default)]
struct Sample {
    text: String,
    ends: Vec<usize>,
}

impl Default for LogExtractor {
    fn default() -> Self {
        Self::new()
    }
}

/// Template id recorded for a line that produced no template (empty line or template overflow).
pub const NO_TEMPLATE: u32 = u32::MAX;

impl LogExtractor {
    /// New extractor; year-less timestamps use the current UTC year (see [`logs`]).
    pub fn new() -> Self {
        Self::with_parser(LineParser::new(None))
    }

    /// New extractor with an explicit reference year for year-less timestamps (syslog, klog).
    pub fn with_year(year: i32) -> Self {
        Self::with_parser(LineParser::new(Some(year)))
    }

    fn with_parser(parser: LineParser) -> Self {
        LogExtractor {
            parser,
            preferred: None,
            preferred_checked: false,
            learned_first: false,
            fast: true,
            learn: true,
            votes: Vec::new(),
            drain: Drain::new(DrainConfig {
                max_clusters: MAX_TEMPLATES,
                ..DrainConfig::default()
            }),
            toks: Tokens::default(),
            stats: Vec::new(),
            parent: Vec::new(),
            lines: 0,
            bytes: 0,
            overflow: 0,
            first_ts: None,
            last_ts: None,
            bucket_width: 16,
            record_ids: false,
            ids: Vec::new(),
            pending: String::new(),
            sample: Some(Sample::default()),
            layouts: Vec::new(),
            cache: Default::default(),
            shapes: Default::default(),
            shape_cache: true,
        }
    }

    /// Use the shape cache (`true`, the default) or tokenize every message (for measuring what
    /// it saves, and for checking that it changes no grouping; see [`shape`]).
    pub fn shape_cache(mut self, on: bool) -> Self {
        self.shape_cache = on;
        self
    }

    /// Turn the known-shape fast paths of [`logs`] off (`false`): every line is then read as
    /// `plain` and its header must be learned (see [`header`]). For evaluating how the learner
    /// does on layouts it has no parser for; the default is on.
    pub fn fast_paths(mut self, on: bool) -> Self {
        self.fast = on;
        self
    }

    /// Learn header layouts from the first lines (`true`, the default) or not (for ablation).
    pub fn learn_headers(mut self, on: bool) -> Self {
        self.learn = on;
        self
    }

    /// Replace the Drain parameters (before any line is pushed; the template cap stays
    /// [`MAX_TEMPLATES`]). For ablation and tuning; the defaults are [`DrainConfig::default`].
    pub fn drain_config(mut self, cfg: DrainConfig) -> Self {
        self.toks.set_options(cfg.masks);
        self.drain = Drain::new(DrainConfig {
            max_clusters: MAX_TEMPLATES,
            ..cfg
        });
        self
    }

    /// Record the template id of every line (for grouping-accuracy benchmarks). Memory then grows
    /// by 4 bytes per line: only for inputs bounded by the caller.
    pub fn record_template_ids(mut self, on: bool) -> Self {
        self.record_ids = on;
        self
    }

    /// Template id of each line pushed so far (index = line number - 1; [`NO_TEMPLATE`] for empty
    /// lines); empty unless [`LogExtractor::record_template_ids`] was enabled. Lines with equal ids
    /// were grouped together.
    pub fn template_ids(&mut self) -> Vec<u32> {
        self.end_sample();
        self.ids
            .iter()
            .map(|&i| if i == NO_TEMPLATE { i } else { self.find(i) })
            .collect()
    }

    /// Feed a chunk of text that may end mid-line; the partial line is kept (at most 64 KiB of it;
    /// the rest of an over-long line is counted in bytes but dropped) until the next chunk or
    /// [`LogExtractor::finish`].
    pub fn push_chunk(&mut self, chunk: &str) {
        let mut rest = chunk;
        while let Some(nl) = rest.find('\n') {
            let piece = &rest[..nl];
            if self.pending.is_empty() {
                self.push_line(piece.strip_suffix('\r').unwrap_or(piece));
            } else {
                self.append_pending(piece);
                let line = std::mem::take(&mut self.pending);
                self.push_line(line.strip_suffix('\r').unwrap_or(&line));
            }
            rest = &rest[nl + 1..];
        }
        self.append_pending(rest);
    }

    fn append_pending(&mut self, s: &str) {
        let room = (64 * 1024usize).saturating_sub(self.pending.len());
        if s.len() <= room {
            self.pending.push_str(s);
        } else {
            self.pending.push_str(truncate_bytes(s, room));
            self.bytes += (s.len() - truncate_bytes(s, room).len()) as u64;
        }
    }

    /// Feed one line (without its newline).
    ///
    /// The first [`SAMPLE_LINES`] lines are buffered and the header layouts are learned from them
    /// (see [`header`]); then they and every later line go through the one-pass pipeline.
    pub fn push_line(&mut self, line: &str) {
        if let Some(s) = &mut self.sample {
            let head = truncate_bytes(line, 64 * 1024);
            self.bytes += (line.len() - head.len()) as u64;
            s.text.push_str(head);
            s.ends.push(s.text.len());
            if s.ends.len() >= SAMPLE_LINES {
                self.end_sample();
            }
            return;
        }
        self.process_line(line);
    }

    /// Learn the header layouts from the buffered lines, then process them.
    fn end_sample(&mut self) {
        let Some(sample) = self.sample.take() else {
            return;
        };
        let mut lines = Vec::with_capacity(sample.ends.len());
        let mut start = 0;
        for &e in &sample.ends {
            lines.push(&sample.text[start..e]);
            start = e;
        }
        self.learn_layouts(&lines);
        for l in lines {
            self.process_line(l);
        }
    }

    /// Group the sample by fast-path shape and learn header layouts for the content each shape
    /// leaves (the whole line for `plain`).
    fn learn_layouts(&mut self, lines: &[&str]) {
        if !self.learn {
            return;
        }
        let mut parser = self.parser.clone();
        let mut groups: Vec<(LogFormat, usize, Vec<&str>)> = Vec::new();
        for l in lines {
            if l.trim().is_empty() {
                continue;
            }
            let p = if self.fast {
                parser.parse_any(l)
            } else {
                parser.parse(l, Some(LogFormat::Plain))
            };
            let std::borrow::Cow::Borrowed(c) = p.content else {
                continue;
            };
            let timed = usize::from(p.ts.is_some());
            match groups.iter_mut().find(|g| g.0 == p.format) {
                Some(g) => {
                    g.1 += timed;
                    g.2.push(c);
                }
                None => groups.push((p.format, timed, vec![c])),
            }
        }
        for (format, timed, contents) in groups {
            if contents.len() < header::MIN_SUPPORT {
                continue;
            }
            let anchored = timed * 2 > contents.len();
            for layout in header::learn(&contents, anchored) {
                self.layouts.push((format, layout));
            }
        }
    }

    /// The one-pass pipeline for one line: shape → learned header → masking → Drain → stats.
    fn process_line(&mut self, line: &str) {
        self.lines += 1;
        self.bytes += line.len() as u64 + 1;
        let line_no = self.lines;
        // blank? (byte check first; `trim` only for a line that starts with non-ASCII bytes)
        let blank = match line.bytes().find(|c| !c.is_ascii_whitespace()) {
            None => true,
            Some(c) if c.is_ascii() => false,
            Some(_) => line.trim().is_empty(),
        };
        if blank {
            if self.record_ids {
                self.ids.push(NO_TEMPLATE);
            }
            return;
        }
        // Over-long lines: only the head takes part in parsing.
        let head = truncate_bytes(line, 64 * 1024);
        let (p, offset) = self.read_header(head);
        let (format, ts, level) = (p.format, p.ts, p.level);
        let content: &str = &p.content[offset..];
        match self.votes.iter_mut().find(|(f, _)| *f == format) {
            Some(v) => v.1 += 1,
            None => self.votes.push((format, 1)),
        }
        if !self.preferred_checked && self.lines >= 32 {
            self.preferred_checked = true;
            // The majority shape is tried first from now on; `plain` (which accepts anything) is
            // never preferred, so other shapes keep their parsers.
            let top = self.votes.iter().max_by_key(|v| v.1).map(|v| v.0);
            self.preferred = top.filter(|f| !matches!(f, LogFormat::Plain | LogFormat::Learned));
            // Nearly all lines have a learned layout (at least 90%: a paste that mixes in a known
            // shape keeps its parser): the layouts are tried on the raw line before the fast
            // paths, which would all be tried and fail first.
            let learned = self
                .votes
                .iter()
                .find(|v| v.0 == LogFormat::Learned)
                .map_or(0, |v| v.1);
            self.learned_first =
                self.fast && top == Some(LogFormat::Learned) && learned * 10 >= self.lines * 9;
        }
        if let Some(ts) = ts {
            self.first_ts = Some(self.first_ts.map_or(ts, |f| f.min(ts)));
            self.last_ts = Some(self.last_ts.map_or(ts, |l| l.max(ts)));
        }
        let content = truncate_bytes(content, MAX_TOKENIZE_BYTES);
        let added = self.template_of(content);
        let id = match added {
            AddResult::Template { id, new } => {
                if new {
                    self.stats.push(TemplateStats {
                        alive: true,
                        count: 0,
                        level: None,
                        first_ts: None,
                        last_ts: None,
                        first_line: line_no,
                        last_line: line_no,
                        ranges: Vec::new(),
                        example: truncate_chars(line, MAX_EXAMPLE_CHARS).to_string(),
                        buckets: [0; BUCKETS],
                    });
                    self.parent.push(id);
                }
                for (keep, gone) in self.drain.take_merges() {
                    self.merge(keep, gone);
                }
                id
            }
            AddResult::Overflow => {
                self.overflow += 1;
                if self.record_ids {
                    self.ids.push(NO_TEMPLATE);
                }
                return;
            }
        };
        if self.record_ids {
            self.ids.push(id);
        }
        // rate histogram: keep line_no within BUCKETS * width
        // bucket_width is a power of two: shifts instead of divisions
        while (line_no - 1) >> self.bucket_width.trailing_zeros() >= BUCKETS as u64 {
            self.bucket_width *= 2;
            for s in &mut self.stats {
                for i in 0..BUCKETS / 2 {
                    s.buckets[i] = s.buckets[2 * i] + s.buckets[2 * i + 1];
                }
                for b in &mut s.buckets[BUCKETS / 2..] {
                    *b = 0;
                }
            }
        }
        let bucket = ((line_no - 1) >> self.bucket_width.trailing_zeros()) as usize;
        let s = &mut self.stats[id as usize];
        s.count += 1;
        s.buckets[bucket] += 1;
        s.last_line = line_no;
        if level > s.level {
            s.level = level;
        }
        if let Some(ts) = ts {
            s.first_ts = Some(s.first_ts.map_or(ts, |f| f.min(ts)));
            s.last_ts = Some(s.last_ts.map_or(ts, |l| l.max(ts)));
        }
        push_range(&mut s.ranges, line_no);
    }

    /// The header of one line: a fast-path shape, then the first learned layout of that shape
    /// that fits the content it left. Returns the parsed line (format `learned` when a layout
    /// of `plain` fitted; time and level from the layout when the shape had none) and the byte
    /// offset of the message in its content.
    fn read_header<'a>(&mut self, head: &'a str) -> (logs::ParsedLine<'a>, usize) {
        if self.learned_first {
            let mut p = self.parser.parse(head, Some(LogFormat::Plain));
            if let Some(offset) = self.apply_layout(&mut p) {
                return (p, offset);
            }
        }
        let mut p = if self.fast {
            self.parser.parse(head, self.preferred)
        } else {
            self.parser.parse(head, Some(LogFormat::Plain))
        };
        let offset = self.apply_layout(&mut p).unwrap_or(0);
        (p, offset)
    }

    /// Apply the first learned layout of `p`'s shape that fits its content (see
    /// [`LogExtractor::read_header`]); the message offset, `None` when none fits.
    fn apply_layout(&mut self, p: &mut logs::ParsedLine<'_>) -> Option<usize> {
        for (f, layout) in &self.layouts {
            if *f != p.format {
                continue;
            }
            if let Some(a) = layout.apply(&p.content) {
                if p.ts.is_none()
                    && let Some(st) = a.stamp
                {
                    p.ts = self.parser.stamp_ns(st);
                }
                p.level = p.level.or(a.level);
                if p.format == LogFormat::Plain {
                    p.format = LogFormat::Learned;
                }
                return Some(a.content);
            }
        }
        None
    }

    /// The template of one message: the shape cache (a message of a shape seen before, see
    /// [`shape`]), else tokenize and mask, then the exact-match cache (the same masked tokens
    /// seen before), else Drain.
    fn template_of(&mut self, content: &str) -> AddResult {
        let shape = if self.shape_cache {
            let h = shape::shape_hash(content.as_bytes());
            if let Some(&id) = self.shapes.get(&h) {
                return AddResult::Template {
                    id: self.find(id),
                    new: false,
                };
            }
            Some(h)
        } else {
            None
        };
        self.toks.fill(content, MAX_TOKENS);
        let key = self.toks.hash();
        let r = match self.cache.get(&key) {
            Some(&id) => AddResult::Template {
                id: self.find(id),
                new: false,
            },
            None => {
                let r = self.drain.add(&self.toks);
                if let AddResult::Template { id, .. } = r {
                    if self.cache.len() >= CACHE_MAX {
                        self.cache.clear();
                    }
                    self.cache.insert(key, id);
                }
                r
            }
        };
        if let (Some(h), AddResult::Template { id, .. }) = (shape, r)
            && !self.toks.keeps_loose_digits()
        {
            if self.shapes.len() >= CACHE_MAX {
                self.shapes.clear();
            }
            self.shapes.insert(h, id);
        }
        r
    }

    fn find(&self, mut id: u32) -> u32 {
        while self.parent[id as usize] != id {
            id = self.parent[id as usize];
        }
        id
    }

    /// Fold template `gone` into `keep` (a categorical position saturated).
    fn merge(&mut self, keep: u32, gone: u32) {
        let (keep, gone) = (self.find(keep), self.find(gone));
        if keep == gone {
            return;
        }
        self.parent[gone as usize] = keep;
        let g = std::mem::replace(
            &mut self.stats[gone as usize],
            TemplateStats {
                alive: false,
                count: 0,
                level: None,
                first_ts: None,
                last_ts: None,
                first_line: 0,
                last_line: 0,
                ranges: Vec::new(),
                example: String::new(),
                buckets: [0; BUCKETS],
            },
        );
        let k = &mut self.stats[keep as usize];
        k.count += g.count;
        k.level = k.level.max(g.level);
        k.first_ts = min_opt(k.first_ts, g.first_ts);
        k.last_ts = max_opt(k.last_ts, g.last_ts);
        if g.first_line < k.first_line {
            k.first_line = g.first_line;
            k.example = g.example;
        }
        k.last_line = k.last_line.max(g.last_line);
        for (a, b) in k.buckets.iter_mut().zip(g.buckets.iter()) {
            *a += b;
        }
        let mut all: Vec<LineRange> = k.ranges.drain(..).chain(g.ranges).collect();
        all.sort_by_key(|r| r.start);
        let mut merged: Vec<LineRange> = Vec::new();
        for r in all {
            match merged.last_mut() {
                Some(m) if r.start <= m.end + 1 => m.end = m.end.max(r.end),
                _ => merged.push(r),
            }
        }
        if merged.len() > MAX_RANGES {
            let last = merged[merged.len() - 1];
            merged.truncate(MAX_RANGES - 1);
            merged.push(last);
        }
        k.ranges = merged;
    }

    /// Header layouts learned from the first lines (see [`header`]), each with the fast-path
    /// shape whose remaining content it applies to (`plain`: the whole line).
    pub fn learned_layouts(&mut self) -> Vec<(LogFormat, Layout)> {
        self.end_sample();
        self.layouts.clone()
    }

    /// Number of live templates so far.
    pub fn template_count(&mut self) -> usize {
        self.end_sample();
        self.stats.iter().filter(|s| s.alive).count()
    }

    /// Live templates so far as (template text, line count), in creation order.
    pub fn templates(&mut self) -> Vec<(u32, String, u64)> {
        self.end_sample();
        (0..self.stats.len() as u32)
            .filter(|&i| self.stats[i as usize].alive)
            .map(|i| {
                (
                    i,
                    self.drain.variant_template(i),
                    self.stats[i as usize].count,
                )
            })
            .collect()
    }

    /// Finish: rank templates into observations (see [`LogExtractor`] and module docs for the
    /// rules) and add the summary observation first.
    ///
    /// Rules, all over the *line window* (line 1 .. last line, split into halves):
    /// - error/critical/fatal templates (level parsed, or inferred from failure words when the
    ///   shape has no level);
    /// - rate change: the per-line rate in the second half is ≥ 4× the first half (or ≤ ¼) with
    ///   ≥ 10 lines on the busy side;
    /// - late: first seen after the middle of the window (windows ≥ 20 lines);
    /// - every template matched by a failure signature;
    /// - warn templates fill remaining room;
    /// - in a paste of at most [`SHORT_PASTE_LINES`] lines, every template with no level at all
    ///   (neither parsed nor inferred): a person chose those lines.
    ///
    /// Salience = level (fatal/critical 50, error 40, warn 15) + signatures (35, +5 per extra tag,
    /// max 2) + rate rise 25 / fall 10 + late 20 + min(20, 3·log2(count+1)).
    pub fn finish(mut self) -> Extraction {
        if !self.pending.is_empty() {
            let line = std::mem::take(&mut self.pending);
            self.push_line(line.strip_suffix('\r').unwrap_or(&line));
        }
        self.end_sample();
        let lines = self.lines;
        let mut all_tags: Vec<String> = Vec::new();
        let mut cands: Vec<Observation> = Vec::new();
        let mut error_lines = 0u64;
        let width = self.bucket_width;
        let used = if lines == 0 {
            0
        } else {
            ((lines - 1) / width + 1) as usize
        };
        let half = used / 2;
        let l1 = (half as u64 * width).min(lines);
        let l2 = lines - l1;
        let mut templates = 0usize;
        for (vid, s) in self.stats.iter().enumerate() {
            if !s.alive {
                continue;
            }
            templates += 1;
            let template = self.drain.variant_template(vid as u32);
            let text = format!("{template}\n{}", s.example);
            let tags = match_tags(&text);
            let (level, inferred) = match s.level {
                Some(l) => (Some(l), false),
                None => (infer_level(&template), true),
            };
            if level >= Some(Level::Error) {
                error_lines += s.count;
            }
            for t in &tags {
                if !all_tags.iter().any(|x| x == t) {
                    all_tags.push(t.to_string());
                }
            }
            let (mut salience, mut qualifies) = level_salience(level);
            let mut reasons: Vec<String> = Vec::new();
            if !tags.is_empty() {
                salience += 35 + 5 * (tags.len() as u32 - 1).min(2);
                qualifies = true;
            }
            if let Some((add, reason)) = rate_change(s, half, used, l1, l2, lines) {
                salience += add;
                qualifies = true;
                reasons.push(reason);
            }
            if let Some(reason) = late_reason(s, lines) {
                salience += 20;
                qualifies = true;
                reasons.push(reason);
            }
            let hand_picked = lines <= SHORT_PASTE_LINES && level.is_none();
            if !qualifies && level != Some(Level::Warn) && !hand_picked {
                continue;
            }
            salience += (3.0 * ((s.count + 1) as f64).log2()).min(20.0) as u32;
            cands.push(template_observation(
                s, &template, &tags, level, inferred, reasons, salience,
            ));
        }
        cands.sort_by(|a, b| b.salience.cmp(&a.salience).then(b.count.cmp(&a.count)));
        let left_out = cands.len().saturating_sub(MAX_OBSERVATIONS - 1);
        cands.truncate(MAX_OBSERVATIONS - 1);

        let format = self.format_name();
        let summary = self.summary(templates, error_lines, left_out, &format);
        let mut observations = Vec::with_capacity(cands.len() + 1);
        observations.push(Observation {
            statement: summary,
            line_ranges: LineRange::whole(lines),
            count: lines,
            first_seen: self.first_ts.and_then(time::to_timestamp),
            last_seen: self.last_ts.and_then(time::to_timestamp),
            failure_modes: all_tags,
            level: None,
            example: None,
            salience: SUMMARY_SALIENCE,
        });
        observations.extend(cands);
        Extraction {
            observations,
            lines,
            bytes: self.bytes,
            templates,
            format,
        }
    }

    /// The summary observation's statement: lines, window, templates, errors, what was left out
    /// and the format.
    fn summary(&self, templates: usize, error_lines: u64, left_out: usize, format: &str) -> String {
        let lines = self.lines;
        let mut summary = format!("{} lines", thousands(lines));
        if let (Some(a), Some(b)) = (self.first_ts, self.last_ts) {
            summary.push_str(&format!(", {}", time::fmt_window(a, Some(b))));
        }
        summary.push_str(&format!(
            ", {} template{}, {} error{}",
            thousands(templates as u64),
            if templates == 1 { "" } else { "s" },
            thousands(error_lines),
            if error_lines == 1 { "" } else { "s" }
        ));
        if self.overflow > 0 {
            summary.push_str(&format!(
                ", {} lines beyond the template cap",
                thousands(self.overflow)
            ));
        }
        if left_out > 0 {
            summary.push_str(&format!(
                ", {} more flagged templates not shown (the {} most salient are kept)",
                thousands(left_out as u64),
                MAX_OBSERVATIONS - 1
            ));
        }
        summary.push_str(&format!(" ({format})"));
        summary
    }

    fn format_name(&self) -> String {
        let total: u64 = self.votes.iter().map(|v| v.1).sum();
        match self.votes.iter().max_by_key(|v| v.1) {
            Some((f, n)) if *n * 2 > total => f.as_str().to_string(),
            Some(_) => "mixed".into(),
            None => "empty".into(),
        }
    }
}

/// Level inferred from words of a template when the log shape carries none.
fn infer_level(template: &str) -> Option<Level> {
    let t = template.to_ascii_lowercase();
    let has = |w: &str| t.contains(w);
    if has("fatal") || has("panic") || has("emerg") {
        Some(Level::Fatal)
    } else if has("error")
        || has("fail")
        || has("exception")
        || has("refused")
        || has("denied")
        || has("unable to")
        || has("cannot ")
        || has("couldn't")
    {
        Some(Level::Error)
    } else if has("warn") {
        Some(Level::Warn)
    } else {
        None
    }
}

#[cfg(test)]
mod tests;
