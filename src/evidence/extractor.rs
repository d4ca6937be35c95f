//! The streaming log extractor: [`LogExtractor`] takes lines (or chunks) and keeps per-template
//! statistics with bounded memory; header learning is in [`layout`], ranking into observations
//! in [`finish`].

mod finish;
mod layout;

use super::drain::{AddResult, Drain, DrainConfig, Tokens};
use super::header::Layout;
use super::logs::{Level, LineParser, LogFormat};
use super::*;

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
        self.vote(format);
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
        self.count(id, line_no, ts, level);
    }

    /// Count one line's shape; after 32 lines, choose the shape tried first (and whether the
    /// learned layouts go before the fast paths).
    fn vote(&mut self, format: LogFormat) {
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
    }

    /// Count line `line_no` (with its time and level) in template `id`'s statistics and rate
    /// histogram.
    fn count(&mut self, id: u32, line_no: u64, ts: Option<i64>, level: Option<Level>) {
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
}
