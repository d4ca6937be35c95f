//! The set's schema (queries and questions) and the report a run fills: per-query results,
//! hit@k and MRR, must-warn coverage.

use serde::Deserialize;

use crate::services::sample::PastIncident;

/// A query incident of the set.
#[derive(Debug, Clone, Deserialize)]
pub struct EvalQuery {
    /// `Q01`…
    pub id: String,
    /// The reporter's one-line title (an alert-opened incident's is the alert name); absent in
    /// the oldest set, where the description's first sentence stands in.
    #[serde(default)]
    pub title: Option<String>,
    /// The new incident, in its reporter's words (empty for a terse one).
    #[serde(default)]
    pub description: String,
    /// Evidence lines available at query time.
    #[serde(default)]
    pub evidence: Vec<String>,
    /// Answer key: the past incident id that should be recalled.
    pub expected: String,
    /// Answer key: the kind of action that did not work during the expected past incident.
    #[serde(default)]
    pub must_warn: Option<String>,
    /// Answer key: only the evidence tells it apart from a look-alike.
    #[serde(default)]
    pub hard: bool,
}

impl EvalQuery {
    /// The title the query's incident is opened with: its own title when it has one, else the
    /// first sentence of its description (an error names the query when both are empty).
    pub fn incident_title(&self) -> String {
        match self.title.as_deref().map(str::trim) {
            Some(t) if !t.is_empty() => {
                crate::evidence::truncate_chars(t, crate::domain::incident::TITLE_MAX).to_string()
            }
            _ => super::first_sentence(&self.description),
        }
    }

    /// What a reader of the new incident sees: title, description and evidence (the plain
    /// BM25 baseline's query).
    pub fn text(&self) -> String {
        let mut parts = vec![self.incident_title(), self.description.clone()];
        parts.extend(self.evidence.iter().cloned());
        parts.join("\n")
    }
}

/// Where plain BM25 ([`super::bm25`]) puts the expected past incident for one item.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BaselineRank {
    /// 1-based rank of the expected past incident (`None`: scored 0 or absent).
    pub rank: Option<usize>,
    /// Whether BM25's first is clear: its score at least [`CONFIDENT_GAP`] above the second's.
    pub confident: bool,
}

/// How far (as a share of the second's score) BM25's first must lead for the evaluation to call
/// BM25 confident on an item.
pub const CONFIDENT_GAP: f64 = 0.25;

impl BaselineRank {
    /// The rank of `expected` in `ranked` (best first, with scores).
    pub fn of(ranked: &[(String, f64)], expected: &str) -> Self {
        let rank = ranked
            .iter()
            .position(|(id, s)| id == expected && *s > 0.0)
            .map(|p| p + 1);
        let first = ranked.first().map_or(0.0, |r| r.1);
        let second = ranked.get(1).map_or(0.0, |r| r.1);
        Self {
            rank,
            confident: first > 0.0 && first >= (1.0 + CONFIDENT_GAP) * second,
        }
    }
}

/// The product against plain BM25 on one group of items, first place only.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Versus {
    /// BM25 misses, the product has it first (the meaning lists rescued BM25).
    pub rescued: usize,
    /// BM25 has it first, the product does not.
    pub lost: usize,
    /// Items where BM25 is confident ([`CONFIDENT_GAP`]).
    pub confident: usize,
    /// Confident and wrong, and the product has it first (overturned rightly).
    pub overturned_rightly: usize,
    /// Confident and right, and the product does not have it first (overturned wrongly).
    pub overturned_wrongly: usize,
}

impl Versus {
    /// Counts over `(product rank, BM25)` pairs.
    pub fn of(items: &[(Option<usize>, BaselineRank)]) -> Self {
        let mut v = Self::default();
        for (ours, bm) in items {
            let (ours, theirs) = (*ours == Some(1), bm.rank == Some(1));
            v.rescued += usize::from(ours && !theirs);
            v.lost += usize::from(theirs && !ours);
            if bm.confident {
                v.confident += 1;
                v.overturned_rightly += usize::from(ours && !theirs);
                v.overturned_wrongly += usize::from(theirs && !ours);
            }
        }
        v
    }
}

impl std::fmt::Display for Versus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "rescued {}  lost {}  BM25 confident {} (overturned rightly {}, wrongly {})",
            self.rescued,
            self.lost,
            self.confident,
            self.overturned_rightly,
            self.overturned_wrongly
        )
    }
}

/// A prescriptive question of the set.
#[derive(Debug, Clone, Deserialize)]
pub struct EvalQuestion {
    /// `P01`…
    pub id: String,
    /// The question.
    pub question: String,
    /// Answer key: the past incident whose rule recall should bring up.
    pub expected: String,
}

/// The evaluation set file.
#[derive(Debug, Clone, Deserialize)]
pub struct EvalSet {
    /// Past incidents loaded into memory first.
    pub past: Vec<PastIncident>,
    /// New incidents.
    #[serde(default)]
    pub queries: Vec<EvalQuery>,
    /// Forward-looking questions.
    #[serde(default)]
    pub prescriptive: Vec<EvalQuestion>,
}

/// hit@1, hit@3 and MRR over a group of items.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Metrics {
    /// Items scored.
    pub n: usize,
    /// Share with the expected incident first.
    pub hit1: f64,
    /// Share with the expected incident in the first three.
    pub hit3: f64,
    /// Mean reciprocal rank (0 for a miss).
    pub mrr: f64,
}

impl Metrics {
    /// Metrics of 1-based ranks (`None` = not recalled).
    pub fn of(ranks: &[Option<usize>]) -> Self {
        let n = ranks.len();
        if n == 0 {
            return Self::default();
        }
        let share = |f: &dyn Fn(usize) -> bool| {
            ranks.iter().filter(|r| r.is_some_and(f)).count() as f64 / n as f64
        };
        Self {
            n,
            hit1: share(&|r| r == 1),
            hit3: share(&|r| r <= 3),
            mrr: ranks.iter().flatten().map(|r| 1.0 / *r as f64).sum::<f64>() / n as f64,
        }
    }
}

impl std::fmt::Display for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "n={:>2}  hit@1={:.3}  hit@3={:.3}  MRR={:.3}",
            self.n, self.hit1, self.hit3, self.mrr
        )
    }
}

/// Outcome of a must-warn check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WarnStatus {
    /// The recommendation is listed and its warning cites the expected incident.
    Ok,
    /// The analyst did not propose that action kind.
    Missing,
    /// Listed, but its warning is absent or does not cite the expected incident.
    Unwarned,
    /// Proposed (and warned by the dead-end check) but absent from the list.
    Hidden,
}

impl WarnStatus {
    /// Lower-case label.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Missing => "missing",
            Self::Unwarned => "unwarned",
            Self::Hidden => "hidden",
        }
    }
}

/// One scored query.
#[derive(Debug, Clone)]
pub struct QueryResult {
    /// Query id.
    pub id: String,
    /// Expected past id.
    pub expected: String,
    /// 1-based rank of the expected incident among distinct recalled incidents.
    pub rank: Option<usize>,
    /// Recalled incidents in order, as past ids where known.
    pub top: Vec<String>,
    /// Hard item.
    pub hard: bool,
    /// Must-warn outcome (None when the set has no must_warn).
    pub warn: Option<(String, WarnStatus)>,
    /// Where plain BM25 puts the expected incident.
    pub bm25: Option<BaselineRank>,
    /// The incident's failure-mode tags, then one line per recalled record (incident, kind, why
    /// recalled), to study a miss; printed by the alternate format (`{:#}`, `--verbose`) for
    /// items whose expected incident is not first.
    pub detail: Vec<String>,
}

/// One scored prescriptive question.
#[derive(Debug, Clone)]
pub struct QuestionResult {
    /// Question id.
    pub id: String,
    /// Expected past id.
    pub expected: String,
    /// Rank among incidents of recalled lessons.
    pub rank_lessons: Option<usize>,
    /// Rank among incidents of recalled records of every kind.
    pub rank_all: Option<usize>,
    /// Incidents of recalled lessons, as past ids.
    pub top: Vec<String>,
    /// Where plain BM25 puts the expected incident.
    pub bm25: Option<BaselineRank>,
    /// The incident-level ranking, then the first recalled records with their lists and
    /// cosine, to study a miss (printed by `{:#}` for questions whose lesson is not first).
    pub detail: Vec<String>,
}

/// The evaluation report.
#[derive(Debug, Clone)]
pub struct Report {
    /// Per-query results.
    pub queries: Vec<QueryResult>,
    /// Per-question results.
    pub prescriptive: Vec<QuestionResult>,
    /// Queries.
    pub query_metrics: Metrics,
    /// The `hard` subset of the queries.
    pub hard_metrics: Metrics,
    /// Prescriptive questions, ranked by recalled lessons.
    pub prescriptive_metrics: Metrics,
    /// Prescriptive questions, ranked by recalled records of every kind.
    pub prescriptive_all_metrics: Metrics,
    /// Plain BM25 on the queries.
    pub bm25_query_metrics: Metrics,
    /// Plain BM25 on the prescriptive questions.
    pub bm25_prescriptive_metrics: Metrics,
    /// The product against plain BM25 on the queries.
    pub query_versus: Versus,
    /// The product against plain BM25 on the prescriptive questions.
    pub prescriptive_versus: Versus,
    /// Queries with a must_warn.
    pub must_warn_total: usize,
    /// Share of those with a listed recommendation whose warning cites the expected incident.
    pub must_warn_coverage: f64,
    /// Share of those where a warned recommendation was hidden (must be 0).
    pub hidden: f64,
    /// Wall-clock seconds of the whole evaluation.
    pub elapsed_secs: f64,
}

/// An item's BM25 rank as printed: `-` for a miss, `*` after it when BM25 is confident.
fn bm25_rank(b: Option<BaselineRank>) -> String {
    b.map_or("?".to_string(), |b| {
        format!(
            "{}{}",
            b.rank.map_or("-".to_string(), |r| r.to_string()),
            if b.confident { "*" } else { "" }
        )
    })
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for q in &self.queries {
            writeln!(
                f,
                "{} expected={} rank={:<4} bm25={:<4} top3=[{}]{}{}",
                q.id,
                q.expected,
                q.rank.map_or("-".to_string(), |r| r.to_string()),
                bm25_rank(q.bm25),
                q.top.iter().take(3).cloned().collect::<Vec<_>>().join(", "),
                if q.hard { " hard" } else { "" },
                q.warn
                    .as_ref()
                    .map(|(k, s)| format!(" must_warn {k}: {}", s.as_str()))
                    .unwrap_or_default()
            )?;
            if f.alternate() && q.rank != Some(1) {
                for line in &q.detail {
                    writeln!(f, "    {line}")?;
                }
            }
        }
        for p in &self.prescriptive {
            writeln!(
                f,
                "{} expected={} rank={:<4} rank_all={:<4} bm25={:<4} top3=[{}]",
                p.id,
                p.expected,
                p.rank_lessons.map_or("-".to_string(), |r| r.to_string()),
                p.rank_all.map_or("-".to_string(), |r| r.to_string()),
                bm25_rank(p.bm25),
                p.top.iter().take(3).cloned().collect::<Vec<_>>().join(", "),
            )?;
            if f.alternate() && p.rank_lessons != Some(1) {
                for line in &p.detail {
                    writeln!(f, "    {line}")?;
                }
            }
        }
        writeln!(f, "queries           {}", self.query_metrics)?;
        writeln!(f, "queries (hard)    {}", self.hard_metrics)?;
        writeln!(f, "prescriptive      {}", self.prescriptive_metrics)?;
        writeln!(f, "prescriptive(all) {}", self.prescriptive_all_metrics)?;
        writeln!(
            f,
            "plain BM25 queries      {}  margin {:+.3}",
            self.bm25_query_metrics,
            self.query_metrics.hit1 - self.bm25_query_metrics.hit1
        )?;
        writeln!(
            f,
            "plain BM25 prescriptive {}  margin {:+.3}",
            self.bm25_prescriptive_metrics,
            self.prescriptive_metrics.hit1 - self.bm25_prescriptive_metrics.hit1
        )?;
        writeln!(f, "vs BM25 queries      {}", self.query_versus)?;
        writeln!(f, "vs BM25 prescriptive {}", self.prescriptive_versus)?;
        writeln!(
            f,
            "must-warn coverage {:.3} of {}  hidden {:.3}",
            self.must_warn_coverage, self.must_warn_total, self.hidden
        )?;
        write!(f, "elapsed {:.1} s", self.elapsed_secs)
    }
}
