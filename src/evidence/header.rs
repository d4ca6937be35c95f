//! Header layouts learned from the paste itself.
//!
//! A log line is a header (the fields a logging framework writes before the message: time, level,
//! pid/thread, host/node, request id, source file, component) followed by the message. The known
//! shapes of [`super::logs`] are fast paths; for anything else this module looks at a sample of
//! lines, reads their leading *fields* ([`next_field`]: a timestamp in any common layout found by
//! [`super::time::scan_stamp`], a `[...]` group, a level word, or a token classified as number, id,
//! word, separator or `component:`), and keeps the longest run of columns whose kind is the same
//! on at least 90% of the lines ([`learn`]). The header must hold an *anchor* (a time or a level
//! column, or a time the fast path already found), ends on a strong column (time, level, bracket,
//! number, id, separator, component; after word columns only a structural one: not a number or
//! id) and may hold at most three word columns in a row; a `component:` column closes it. This is the idea of the format-detection step that benchmark
//! log parsers are given by hand (Zhu et al., "Tools and Benchmarks for Automated Log Parsing",
//! ICSE-SEIP 2019; Jiang et al., "A Large-scale Evaluation for Log Parsing Techniques", ISSTA
//! 2024, both take a per-system header regex as input), learned instead of written.
//!
//! Lines are grouped by the kind of their first field before learning, so two formats that are
//! interleaved in one paste each get a layout; a line that fits no layout keeps its whole text.
//! Applying a layout ([`Layout::apply`]) scans a few fields per line, without allocation.

use super::logs::Level;
use super::time::{Stamp, scan_stamp};

/// Most header fields looked at.
pub const MAX_COLS: usize = 12;
/// Fewest sample lines a layout is learned from.
pub const MIN_SUPPORT: usize = 8;
/// Share of lines that must agree on a column's kind.
const AGREE: f64 = 0.9;

/// What one leading field looks like.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldKind {
    /// A timestamp (possibly several words, possibly bracketed).
    Time,
    /// A `[...]` group that is not a time or a level (thread, request or trace ids, context).
    Bracket,
    /// A severity word.
    Level,
    /// A single upper-case letter (`D`, `I`, `W`, `E`: Android/glog style levels).
    Letter,
    /// Digits only (pid, thread id, sequence number).
    Num,
    /// A word with a digit (host, node, rack, file name of a rotated log, hex id).
    Id,
    /// Punctuation only (`-`, `--`, `:`, `,`).
    Sep,
    /// A word ending with `:` (`sshd[42]:`, `dfs.DataNode:`, `WindowManager:`).
    Comp,
    /// Any other word.
    Word,
}

impl FieldKind {
    fn is_tok(self) -> bool {
        !matches!(self, FieldKind::Time | FieldKind::Bracket)
    }
}

/// One leading field of a line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    /// Its kind.
    pub kind: FieldKind,
    /// Byte offset where it starts.
    pub start: usize,
    /// Byte offset just past it.
    pub end: usize,
    /// The timestamp, for [`FieldKind::Time`].
    pub stamp: Option<Stamp>,
    /// The level, for [`FieldKind::Level`] and [`FieldKind::Letter`].
    pub level: Option<Level>,
}

#[inline]
fn blank(c: u8) -> bool {
    c == b' ' || c == b'\t' || c == b'|'
}

fn letter_level(c: u8) -> Option<Level> {
    Some(match c {
        b'V' | b'T' => Level::Trace,
        b'D' => Level::Debug,
        b'I' => Level::Info,
        b'N' => Level::Notice,
        b'W' => Level::Warn,
        b'E' => Level::Error,
        b'C' => Level::Critical,
        b'F' | b'A' => Level::Fatal,
        _ => return None,
    })
}

/// End of the `[...]` group starting at `at` (index after `]`), nesting allowed, at most 512
/// bytes.
fn bracket_end(b: &[u8], at: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, &c) in b.iter().enumerate().skip(at).take(512) {
        if c == b'[' {
            depth += 1;
        } else if c == b']' {
            depth -= 1;
            if depth == 0 {
                return Some(i + 1);
            }
        }
    }
    None
}

/// Skip blanks (spaces, tabs, and `|` used as a field delimiter) from `at`.
#[inline]
pub fn skip_blanks(b: &[u8], mut at: usize) -> usize {
    while at < b.len() && blank(b[at]) {
        at += 1;
    }
    at
}

#[inline]
fn token_end(b: &[u8], at: usize) -> usize {
    let mut i = at;
    while i < b.len() && !blank(b[i]) {
        i += 1;
    }
    i
}

/// Read the field that starts at or after `at`; `None` at the end of the line.
pub fn next_field(line: &str, at: usize) -> Option<Field> {
    let b = line.as_bytes();
    let start = skip_blanks(b, at);
    if start >= b.len() {
        return None;
    }
    let mk = |kind, end, stamp, level| Field {
        kind,
        start,
        end,
        stamp,
        level,
    };
    if b[start] == b'['
        && let Some(end) = bracket_end(b, start)
    {
        let inner = &line[start + 1..end - 1];
        let inner_t = inner.trim();
        let mut end = end;
        if b.get(end) == Some(&b':') {
            end += 1;
        }
        if let Some((st, used)) = scan_stamp(inner_t.as_bytes())
            && used * 2 >= inner_t.len()
        {
            return Some(mk(FieldKind::Time, end, Some(st), None));
        }
        // seconds since boot, as the kernel ring buffer writes them: `[ 5.123456]`
        let ib = inner_t.as_bytes();
        if let Some(dot) = ib.iter().position(|&c| c == b'.')
            && dot > 0
            && ib.len() - dot == 7
            && ib[..dot].iter().all(u8::is_ascii_digit)
            && ib[dot + 1..].iter().all(u8::is_ascii_digit)
        {
            return Some(mk(FieldKind::Time, end, None, None));
        }
        let last = inner_t.rsplit(':').next().unwrap_or(inner_t);
        if let Some(l) = Level::parse(last) {
            return Some(mk(FieldKind::Level, end, None, Some(l)));
        }
        return Some(mk(FieldKind::Bracket, end, None, None));
    }
    if let Some((st, used)) = scan_stamp(&b[start..]) {
        return Some(mk(FieldKind::Time, start + used, Some(st), None));
    }
    let end = token_end(b, start);
    let tok = &b[start..end];
    let kind = classify(tok);
    let level = match kind {
        FieldKind::Level => Level::parse(&line[start..end]),
        FieldKind::Letter => letter_level(tok[0]),
        _ => None,
    };
    Some(mk(kind, end, None, level))
}

fn classify(tok: &[u8]) -> FieldKind {
    if tok.len() == 1 && tok[0].is_ascii_uppercase() && letter_level(tok[0]).is_some() {
        return FieldKind::Letter;
    }
    if tok.iter().all(u8::is_ascii_digit) {
        return FieldKind::Num;
    }
    if tok.iter().all(u8::is_ascii_punctuation) {
        return FieldKind::Sep;
    }
    if (3..=11).contains(&tok.len())
        && let Ok(s) = std::str::from_utf8(tok)
        && Level::parse(s).is_some()
    {
        return FieldKind::Level;
    }
    if tok.len() >= 2 && tok[tok.len() - 1] == b':' && tok.iter().any(u8::is_ascii_alphabetic) {
        return FieldKind::Comp;
    }
    if tok.iter().any(u8::is_ascii_digit) {
        return FieldKind::Id;
    }
    FieldKind::Word
}

/// Kind of one learned header column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Col {
    /// A timestamp (required).
    Time,
    /// A `[...]` group (required).
    Bracket,
    /// A level word or letter (any single token is accepted; its level is read when it is one).
    Level,
    /// Any single token (a word column between strong ones).
    Tok,
    /// A number, an id with a digit, or a separator. A line whose token there is a plain word
    /// still fits: the word is taken as part of the header unless this is the last column (then
    /// it is the first word of the message: `2812#2812: signal process started`).
    Var,
}

/// A header layout learned from sample lines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Columns, in order.
    pub cols: Vec<Col>,
    /// Strip one more token when it ends with `:` (a component that most lines have).
    pub comp: bool,
    /// Sample lines it was learned from.
    pub support: usize,
}

/// What [`Layout::apply`] found in a line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Applied {
    /// Byte offset of the message.
    pub content: usize,
    /// The most precise timestamp of the header.
    pub stamp: Option<Stamp>,
    /// The header's level.
    pub level: Option<Level>,
}

impl Layout {
    /// Match the header of `line`; `None` when the line does not have this layout.
    pub fn apply(&self, line: &str) -> Option<Applied> {
        let b = line.as_bytes();
        let mut at = 0;
        let mut stamp: Option<Stamp> = None;
        let mut level = None;
        for (ci, col) in self.cols.iter().enumerate() {
            let s = skip_blanks(b, at);
            if s >= b.len() {
                return None;
            }
            match col {
                Col::Var => {
                    let e = token_end(b, s);
                    let t = &b[s..e];
                    let fits =
                        t.iter().any(u8::is_ascii_digit) || t.iter().all(u8::is_ascii_punctuation);
                    if fits || ci + 1 < self.cols.len() {
                        at = e;
                    }
                }
                Col::Tok => {
                    if b[s] == b'[' {
                        at = bracket_end(b, s)?;
                    } else {
                        at = token_end(b, s);
                    }
                }
                Col::Level => {
                    if b[s] == b'[' {
                        let f = next_field(line, s)?;
                        level = level.or(f.level);
                        at = f.end;
                    } else {
                        let e = token_end(b, s);
                        let l = if e == s + 1 {
                            letter_level(b[s])
                        } else {
                            Level::parse(&line[s..e])
                        };
                        level = level.or(l);
                        at = e;
                    }
                }
                Col::Time | Col::Bracket => {
                    let f = next_field(line, s)?;
                    let want = if *col == Col::Time {
                        FieldKind::Time
                    } else {
                        FieldKind::Bracket
                    };
                    if f.kind != want && !(want == FieldKind::Bracket && b[s] == b'[') {
                        return None;
                    }
                    if let Some(st) = f.stamp
                        && stamp.is_none_or(|o| st.precision() > o.precision())
                    {
                        stamp = Some(st);
                    }
                    at = f.end;
                }
            }
        }
        if self.comp {
            let s = skip_blanks(b, at);
            let e = token_end(b, s);
            if e > s + 1 && b[e - 1] == b':' {
                at = e;
            }
        }
        Some(Applied {
            content: skip_blanks(b, at).min(b.len()),
            stamp,
            level,
        })
    }
}

/// Learn the header layouts of `lines` (a sample; see the module doc). `anchored`: the fast path
/// already found a timestamp on these lines, so a header without a time or level column of its
/// own is acceptable. Layouts come back most-supported first.
pub fn learn(lines: &[&str], anchored: bool) -> Vec<Layout> {
    // (kind, followed by a `|` delimiter) of each leading field
    let rows: Vec<Vec<(FieldKind, bool)>> = lines
        .iter()
        .map(|l| {
            let mut v = Vec::with_capacity(MAX_COLS);
            let mut at = 0;
            while v.len() < MAX_COLS {
                match next_field(l, at) {
                    Some(f) => {
                        let b = l.as_bytes();
                        let mut k = f.end;
                        while k < b.len() && (b[k] == b' ' || b[k] == b'\t') {
                            k += 1;
                        }
                        v.push((f.kind, b.get(k) == Some(&b'|')));
                        at = f.end;
                    }
                    None => break,
                }
            }
            v
        })
        .collect();
    let min = MIN_SUPPORT.max(lines.len() / 20);
    // Lines are grouped by the look of their first field: its coarse kind, whether it is
    // bracketed, and whether a `|` follows it (two interleaved formats rarely share all three).
    let key = |l: &str, r: &[(FieldKind, bool)]| -> Option<(u8, bool, bool)> {
        let &(k, piped) = r.first()?;
        let coarse = match k {
            FieldKind::Time => 0,
            FieldKind::Bracket => 1,
            FieldKind::Level => 2,
            _ => 3,
        };
        Some((coarse, l.trim_start().starts_with('['), piped))
    };
    let keys: Vec<Option<(u8, bool, bool)>> =
        lines.iter().zip(&rows).map(|(l, r)| key(l, r)).collect();
    let mut distinct: Vec<(u8, bool, bool)> = Vec::new();
    for k in keys.iter().flatten() {
        if !distinct.contains(k) {
            distinct.push(*k);
        }
    }
    let mut out = Vec::new();
    for k in distinct {
        let group: Vec<&[(FieldKind, bool)]> = rows
            .iter()
            .zip(&keys)
            .filter(|(_, g)| **g == Some(k))
            .map(|(r, _)| r.as_slice())
            .collect();
        if group.len() < min {
            continue;
        }
        if let Some(l) = learn_group(&group, anchored) {
            out.push(l);
        }
    }
    out.sort_by_key(|l| std::cmp::Reverse(l.support));
    out
}

fn learn_group(rows: &[&[(FieldKind, bool)]], anchored: bool) -> Option<Layout> {
    let n = rows.len();
    let need = (n as f64 * AGREE).ceil() as usize;
    let mut cols = Vec::new();
    let mut end = 0;
    let mut anchor_end = if anchored { Some(0) } else { None };
    let mut words = 0;
    for j in 0..MAX_COLS {
        let count = |f: &dyn Fn(FieldKind) -> bool| {
            rows.iter()
                .filter(|r| r.get(j).is_some_and(|&(k, _)| f(k)))
                .count()
        };
        let piped = rows
            .iter()
            .filter(|r| r.get(j).is_some_and(|&(_, p)| p))
            .count();
        let time = count(&|k| k == FieldKind::Time);
        let bracket = count(&|k| k == FieldKind::Bracket);
        let level = count(&|k| k == FieldKind::Level || k == FieldKind::Letter);
        let tok = count(&|k| k.is_tok());
        if time >= need {
            cols.push(Col::Time);
            end = j + 1;
            anchor_end = Some(end);
            words = 0;
        } else if bracket >= need {
            cols.push(Col::Bracket);
            end = j + 1;
            words = 0;
        } else if level >= need {
            cols.push(Col::Level);
            end = j + 1;
            anchor_end = Some(end);
            words = 0;
        } else if tok >= need && piped >= need {
            // a `|`-delimited field (`time|component|pid|message`) is structure, whatever it holds
            cols.push(Col::Tok);
            end = j + 1;
            words = 0;
        } else if tok >= need {
            cols.push(Col::Tok);
            let last = cols.len() - 1;
            let comp = count(&|k| k == FieldKind::Comp);
            let strong = count(&|k| matches!(k, FieldKind::Num | FieldKind::Id | FieldKind::Sep));
            let sep = count(&|k| k == FieldKind::Sep);
            // a component closes the header; at most one word (a host name) may precede it
            if comp >= need && words <= 1 {
                end = j + 1;
                break;
            }
            // After words, only a separator closes a header run: a number or id there is more
            // likely a parameter of the message (`request 42 served`).
            if strong >= need && (words == 0 || sep >= need) {
                cols[last] = Col::Var;
                end = j + 1;
                words = 0;
            } else {
                words += 1;
                if words > 3 {
                    break;
                }
            }
        } else {
            break;
        }
    }
    anchor_end?;
    cols.truncate(end);
    if cols.is_empty() {
        return None;
    }
    let with_more = rows.iter().filter(|r| r.len() > end).count();
    let comps = rows
        .iter()
        .filter(|r| r.get(end).is_some_and(|&(k, _)| k == FieldKind::Comp))
        .count();
    let comp = with_more > 0 && comps * 10 >= with_more * 6;
    Some(Layout {
        cols,
        comp,
        support: n,
    })
}

#[cfg(test)]
mod tests;
