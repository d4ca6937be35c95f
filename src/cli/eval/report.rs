//! The set's schema (queries and questions) and the report a run fills: per-query results,
//! hit@k and MRR, must-warn coverage.

use serde::Deserialize;

use crate::services::sample::PastIncident;

/// A query incident of the set.
#[derive(Debug, Clone, Deserialize)]
pub struct EvalQuery {
    /// `Q01`…
    pub id: String,
    /// The new incident, in its reporter's words.
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
    /// Queries with a must_warn.
    pub must_warn_total: usize,
    /// Share of those with a listed recommendation whose warning cites the expected incident.
    pub must_warn_coverage: f64,
    /// Share of those where a warned recommendation was hidden (must be 0).
    pub hidden: f64,
    /// Wall-clock seconds of the whole evaluation.
    pub elapsed_secs: f64,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for q in &self.queries {
            writeln!(
                f,
                "{} expected={} rank={:<4} top3=[{}]{}{}",
                q.id,
                q.expected,
                q.rank.map_or("-".to_string(), |r| r.to_string()),
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
                "{} expected={} rank={:<4} rank_all={:<4} top3=[{}]",
                p.id,
                p.expected,
                p.rank_lessons.map_or("-".to_string(), |r| r.to_string()),
                p.rank_all.map_or("-".to_string(), |r| r.to_string()),
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
            "must-warn coverage {:.3} of {}  hidden {:.3}",
            self.must_warn_coverage, self.must_warn_total, self.hidden
        )?;
        write!(f, "elapsed {:.1} s", self.elapsed_secs)
    }
}
