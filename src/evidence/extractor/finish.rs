//! Ranking: the rules that turn per-template statistics into observations and the summary.

use super::super::logs::Level;
use super::super::*;
use super::{LogExtractor, TemplateStats};

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

impl LogExtractor {
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
