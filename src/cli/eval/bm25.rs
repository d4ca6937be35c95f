//! Plain BM25, the baseline the evaluation prints beside the product's figures: one document per
//! past incident (every field of the set's entry), lower-cased `[a-z0-9]+` tokens, Okapi BM25 with
//! the defaults of the `rank-bm25` Python package (`BM25Okapi`: k1 = 1.5, b = 0.75, a negative
//! IDF replaced by 0.25 × the mean IDF), which is how the shared sets quote their baselines.
//! Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond" (2009).
//!
//! Evaluation only: the product's own word search is SQLite FTS5's `bm25()` over its documents.

use std::collections::HashMap;

use crate::services::sample::PastIncident;

const K1: f64 = 1.5;
const B: f64 = 0.75;
const EPSILON: f64 = 0.25;

/// Lower-cased `[a-z0-9]+` tokens of `text`.
pub fn tokens(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit()))
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect()
}

/// The text of a past incident's document: every field of its entry.
pub fn document_of(p: &PastIncident) -> String {
    let mut parts = vec![
        p.service.clone(),
        p.title.clone(),
        p.description.clone(),
        p.evidence.join("\n"),
        p.root_cause.clone(),
    ];
    for a in p.failed_action.iter().chain([&p.worked_action]) {
        parts.extend([a.kind.clone(), a.target.clone(), a.note.clone()]);
    }
    parts.extend([
        p.lesson.always.clone(),
        p.lesson.because.clone(),
        p.lesson.scope.clone(),
        p.lesson.severity.clone(),
    ]);
    parts.join("\n")
}

/// A BM25 index over the past incidents of one set.
pub struct Bm25 {
    ids: Vec<String>,
    docs: Vec<HashMap<String, f64>>,
    lens: Vec<f64>,
    avg_len: f64,
    idf: HashMap<String, f64>,
}

impl Bm25 {
    /// Indexes `past`, one document each.
    pub fn new(past: &[PastIncident]) -> Self {
        let mut docs = Vec::new();
        let mut lens = Vec::new();
        let mut df: HashMap<String, f64> = HashMap::new();
        for p in past {
            let toks = tokens(&document_of(p));
            lens.push(toks.len() as f64);
            let mut tf: HashMap<String, f64> = HashMap::new();
            for t in toks {
                *tf.entry(t).or_default() += 1.0;
            }
            for t in tf.keys() {
                *df.entry(t.clone()).or_default() += 1.0;
            }
            docs.push(tf);
        }
        let n = docs.len() as f64;
        let avg_len = if docs.is_empty() {
            0.0
        } else {
            lens.iter().sum::<f64>() / n
        };
        let mut idf: HashMap<String, f64> = df
            .iter()
            .map(|(t, f)| (t.clone(), ((n - f + 0.5) / (f + 0.5)).ln()))
            .collect();
        let mean = if idf.is_empty() {
            0.0
        } else {
            idf.values().sum::<f64>() / idf.len() as f64
        };
        for v in idf.values_mut() {
            if *v < 0.0 {
                *v = EPSILON * mean;
            }
        }
        Self {
            ids: past.iter().map(|p| p.id.clone()).collect(),
            docs,
            lens,
            avg_len,
            idf,
        }
    }

    /// The past ids best first with their scores (ties by set order).
    pub fn rank(&self, query: &str) -> Vec<(String, f64)> {
        let q = tokens(query);
        let mut scored: Vec<(usize, f64)> = self
            .docs
            .iter()
            .enumerate()
            .map(|(i, tf)| {
                let norm = K1 * (1.0 - B + B * self.lens[i] / self.avg_len.max(1.0));
                let s = q
                    .iter()
                    .map(|t| {
                        let f = tf.get(t).copied().unwrap_or(0.0);
                        self.idf.get(t).copied().unwrap_or(0.0) * f * (K1 + 1.0) / (f + norm)
                    })
                    .sum::<f64>();
                (i, s)
            })
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored
            .into_iter()
            .map(|(i, s)| (self.ids[i].clone(), s))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_lower_case_alphanumeric_runs() {
        assert_eq!(
            tokens("Pool_Size=40, p99 → 2.5s"),
            vec!["pool", "size", "40", "p99", "2", "5s"]
        );
    }
}
