//! Failure-mode recognition, measured (issue #52): runs the evidence extraction on each line of
//! a labelled set (the schema of `../shared/data/signatures-dev.json`: `{tags, items: [{id,
//! text, expected: [primary, …]}]}`, `expected: []` for a benign line), each as a paste of
//! logs of its own, then the failure-mode fallback ([`crate::memory::failure_modes`]) as the
//! evidence service runs it, and scores the tags of all observations as
//! `../shared/tools/signatures-score` does: per-tag recall (any position, primary), primary-tag
//! and any-tag hit rates, tag precision on failure lines and the benign false-positive rate.
//! The labels are never given to the system.

use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::evidence::{EvidenceKind, extract};
use crate::memory::failure_modes::{FailureModeMeanings, candidates};

/// A labelled set of lines.
#[derive(Debug, Deserialize)]
pub struct SignatureSet {
    /// The catalogue tags the set uses (the per-tag table's rows, in order).
    #[serde(default)]
    pub tags: Vec<String>,
    /// The lines.
    pub items: Vec<SignatureItem>,
}

/// One labelled line.
#[derive(Debug, Deserialize)]
pub struct SignatureItem {
    /// Its id.
    pub id: String,
    /// The line as software emits it.
    pub text: String,
    /// Acceptable tags, primary first; empty for a benign line.
    pub expected: Vec<String>,
}

/// Which recogniser to turn off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ablation {
    /// Both: the patterns, then the meaning fallback.
    None,
    /// Patterns only.
    Meaning,
    /// The meaning fallback only (pattern tags dropped before it runs).
    Regex,
}

impl Ablation {
    /// `""`, `meaning` or `regex`.
    ///
    /// # Errors
    /// Any other name, in words.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s.trim() {
            "" | "none" => Ok(Self::None),
            "meaning" => Ok(Self::Meaning),
            "regex" => Ok(Self::Regex),
            other => Err(format!(
                "cannot ablate {other}; use meaning (patterns only) or regex (meaning only)"
            )),
        }
    }
}

/// One line's outcome.
#[derive(Debug, Clone)]
pub struct ItemResult {
    /// Its id.
    pub id: String,
    /// Tags predicted (all observations), sorted.
    pub predicted: BTreeSet<String>,
    /// Expected tags, primary first.
    pub expected: Vec<String>,
    /// The line, for the list of misses.
    pub text: String,
}

/// The scores of a run.
#[derive(Debug, Clone)]
pub struct SignatureReport {
    /// What was turned off.
    pub ablation: Ablation,
    /// Per line.
    pub items: Vec<ItemResult>,
    /// The set's tag order.
    pub tags: Vec<String>,
    /// Time spent in extraction and the fallback (model load and catalogue embedding excluded).
    pub elapsed: Duration,
}

/// Headline figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SignatureMetrics {
    /// Failure lines whose primary tag is predicted.
    pub primary_hit: f64,
    /// Failure lines with at least one expected tag predicted.
    pub any_hit: f64,
    /// Predicted tags on failure lines that are expected.
    pub precision: f64,
    /// Benign lines given any tag.
    pub benign_fp: f64,
}

fn rate(n: usize, d: usize) -> f64 {
    if d == 0 {
        f64::NAN
    } else {
        n as f64 / d as f64
    }
}

impl SignatureReport {
    /// The headline figures, computed as `signatures-score` computes them.
    pub fn metrics(&self) -> SignatureMetrics {
        let (mut fail, mut primary, mut any, mut predicted, mut correct) = (0, 0, 0, 0, 0);
        let (mut benign, mut fp) = (0, 0);
        for r in &self.items {
            match r.expected.first() {
                Some(p) => {
                    fail += 1;
                    primary += usize::from(r.predicted.contains(p));
                    any += usize::from(r.expected.iter().any(|e| r.predicted.contains(e)));
                    predicted += r.predicted.len();
                    correct += r
                        .expected
                        .iter()
                        .filter(|e| r.predicted.contains(*e))
                        .count();
                }
                None => {
                    benign += 1;
                    fp += usize::from(!r.predicted.is_empty());
                }
            }
        }
        SignatureMetrics {
            primary_hit: rate(primary, fail),
            any_hit: rate(any, fail),
            precision: rate(correct, predicted),
            benign_fp: rate(fp, benign),
        }
    }
}

impl fmt::Display for SignatureReport {
    /// The per-tag table and the headline figures; `{:#}` adds the missed lines and the benign
    /// false positives.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fails: Vec<&ItemResult> = self
            .items
            .iter()
            .filter(|r| !r.expected.is_empty())
            .collect();
        let benign = self.items.len() - fails.len();
        writeln!(
            f,
            "ablation: {:?}  items: {}  failure lines: {}  benign: {}",
            self.ablation,
            self.items.len(),
            fails.len(),
            benign
        )?;
        writeln!(
            f,
            "{:28} {:>11} {:>4}   {:>15} {:>4}",
            "tag", "recall(any)", "n", "recall(primary)", "n"
        )?;
        for t in &self.tags {
            let any: Vec<&&ItemResult> = fails.iter().filter(|r| r.expected.contains(t)).collect();
            if any.is_empty() {
                continue;
            }
            let pri: Vec<&&ItemResult> = any
                .iter()
                .copied()
                .filter(|r| r.expected[0] == *t)
                .collect();
            let hit_any = any.iter().filter(|r| r.predicted.contains(t)).count();
            let hit_pri = pri.iter().filter(|r| r.predicted.contains(t)).count();
            writeln!(
                f,
                "{t:28} {:>11.3} {:>4}   {:>15.3} {:>4}",
                rate(hit_any, any.len()),
                any.len(),
                rate(hit_pri, pri.len()),
                pri.len()
            )?;
        }
        let m = self.metrics();
        writeln!(f)?;
        writeln!(f, "primary-tag hit rate          {:.3}", m.primary_hit)?;
        writeln!(f, "any-tag hit rate              {:.3}", m.any_hit)?;
        writeln!(f, "tag precision on failures     {:.3}", m.precision)?;
        writeln!(f, "benign false-positive rate    {:.3}", m.benign_fp)?;
        writeln!(
            f,
            "elapsed                       {:.0} ms",
            self.elapsed.as_secs_f64() * 1000.0
        )?;
        if f.alternate() {
            writeln!(f, "\nmissed primary tag:")?;
            for r in &fails {
                if !r.predicted.contains(&r.expected[0]) {
                    writeln!(
                        f,
                        "  {} expected={:?} predicted={:?} :: {}",
                        r.id,
                        r.expected,
                        r.predicted,
                        crate::evidence::truncate_chars(&r.text, 140)
                    )?;
                }
            }
            writeln!(f, "\nbenign false positives:")?;
            for r in self
                .items
                .iter()
                .filter(|r| r.expected.is_empty() && !r.predicted.is_empty())
            {
                writeln!(
                    f,
                    "  {} predicted={:?} :: {}",
                    r.id,
                    r.predicted,
                    crate::evidence::truncate_chars(&r.text, 140)
                )?;
            }
        }
        Ok(())
    }
}

/// Reads the set at `path`.
///
/// # Errors
/// Unreadable or malformed set.
pub fn read_set(path: &Path) -> anyhow::Result<SignatureSet> {
    let raw =
        std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    serde_json::from_str(&raw).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// Runs the set: each line extracted as a paste of logs, pattern tags dropped under
/// [`Ablation::Regex`], then `meanings` (unless [`Ablation::Meaning`] or `None`). With `dump`,
/// each line is written there as one JSON line (`id`, `expected`, the tags its patterns give,
/// and each text the fallback compared with its per-tag and benign similarities), for studying
/// the rule.
///
/// # Errors
/// The model fails on a line; `dump` cannot be written.
pub fn run(
    set: &SignatureSet,
    meanings: Option<&FailureModeMeanings>,
    ablation: Ablation,
    dump: Option<&Path>,
) -> anyhow::Result<SignatureReport> {
    let started = Instant::now();
    let mut items = Vec::with_capacity(set.items.len());
    let mut lines = Vec::new();
    for item in &set.items {
        let mut x = extract(EvidenceKind::Logs, &item.text);
        let by_patterns: BTreeSet<String> = x
            .observations
            .iter()
            .flat_map(|o| o.failure_modes.iter().cloned())
            .collect();
        if ablation == Ablation::Regex {
            for o in &mut x.observations {
                o.failure_modes.clear();
            }
        }
        if let (Some(m), true) = (meanings, ablation != Ablation::Meaning) {
            if dump.is_some() {
                let texts = candidates(EvidenceKind::Logs, &x);
                let scores = m.scores(&texts)?;
                let compared: Vec<serde_json::Value> = texts
                    .iter()
                    .zip(&scores)
                    .map(
                        |(t, s)| serde_json::json!({"text": t, "tags": s.tags, "benign": s.benign}),
                    )
                    .collect();
                lines.push(serde_json::json!({
                    "id": item.id, "expected": item.expected, "patterns": by_patterns,
                    "compared": compared,
                }));
            }
            m.tag_extraction(EvidenceKind::Logs, &mut x)?;
        }
        let predicted = x
            .observations
            .iter()
            .flat_map(|o| o.failure_modes.iter().cloned())
            .collect();
        items.push(ItemResult {
            id: item.id.clone(),
            predicted,
            expected: item.expected.clone(),
            text: item.text.clone(),
        });
    }
    if let Some(path) = dump {
        let body: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        std::fs::write(path, body.join("\n"))?;
    }
    let tags = if set.tags.is_empty() {
        crate::evidence::catalogue()
            .iter()
            .map(|s| s.tag.clone())
            .collect()
    } else {
        set.tags.clone()
    };
    Ok(SignatureReport {
        ablation,
        items,
        tags,
        elapsed: started.elapsed(),
    })
}
