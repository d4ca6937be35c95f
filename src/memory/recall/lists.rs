//! The candidate lists of recall: the bounded full-text search and its term statistics, the
//! word lists (descriptive and prescriptive), the structured-key list, the vector lists (records,
//! incident documents, passages) and the incident-level lists built from them.

use std::time::{Duration, Instant};

use sqlx::AnyPool;

use super::fusion::IncidentList;
use super::query::expand;
use super::{INCIDENT_LIST, Memory, RecallQuery, RecallTuning};
use crate::domain::MemoryKind;
use crate::error::AppResult;
use crate::memory::embeddings;
use crate::store::memory::{self as mstore, Candidate};
use crate::store::recall_index::RecallIndex;

/// Passages from which a query is a report, whose vector is the mean of its passages' (see
/// [`recall`]); a question is one or two sentences.
pub(super) const LONG_QUERY: usize = 3;

/// Candidates taken from each list.
pub(super) const PER_LIST: usize = 60;

/// Index entries (records containing a term, summed over the terms) the FTS5 expression may
/// cost. BM25 scores every record that matches any term, so one term found in half the memory
/// costs more than all the others together while adding almost nothing to the ranking (its
/// inverse document frequency is near zero). Terms are kept rarest first while their summed
/// counts fit; the rarest term found at all is always kept, and when it alone holds more records
/// than the budget, only its newest `TERM_BUDGET` matches are looked at (recency is a ranking
/// factor anyway, and rules, runbooks and dead ends also come through the structured list).
pub(super) const TERM_BUDGET: i64 = 1_000;

/// Most matches read from one FTS5 search (term counts may be up to [`DOC_COUNT_TTL`] old).
pub(super) const FTS_CAP: i64 = 4 * TERM_BUDGET;

/// How long a term's record count is reused before it is counted again.
pub(super) const DOC_COUNT_TTL: Duration = Duration::from_secs(600);

/// Records each structured key contributes to the scope list: its newest ones.
pub(super) const KEY_WINDOW: usize = 250;

/// Term statistics kept per memory at most (~100 bytes each with the key: at most ~2 MB); the
/// cache evicts the least used beyond it, and each entry after [`DOC_COUNT_TTL`], when its count
/// would be re-read anyway.
const TERM_STATS_MAX: u64 = 20_000;

/// The term statistics cache of one [`Memory`]: (database epoch, term) → [`TermStats`], at most
/// [`TERM_STATS_MAX`] entries.
pub(in crate::memory) type TermStatsCache = moka::sync::Cache<(String, String), TermStats>;

/// An empty [`TermStatsCache`].
pub(in crate::memory) fn term_stats_cache() -> TermStatsCache {
    moka::sync::Cache::builder()
        .max_capacity(TERM_STATS_MAX)
        .time_to_live(DOC_COUNT_TTL)
        .build()
}

/// A term's record count (capped at `TERM_BUDGET + 1`), when it was counted, and once asked for,
/// the id of its `TERM_BUDGET`-th newest match (`None` inside: fewer matches). Kept by
/// [`Memory`] per database epoch and term.
#[derive(Debug, Clone, Copy)]
pub struct TermStats {
    pub(super) count: i64,
    pub(super) at: Instant,
    pub(super) floor: Option<Option<i64>>,
}

/// The cached, fresh stats of `terms` (`None` where missing or stale).
pub(super) fn cached_stats(
    memory: &Memory,
    epoch: &str,
    terms: &[String],
) -> Vec<Option<TermStats>> {
    let now = Instant::now();
    let cache = &memory.inner.term_stats;
    terms
        .iter()
        .map(|t| {
            cache
                .get(&(epoch.to_string(), t.clone()))
                .filter(|s| now.duration_since(s.at) < DOC_COUNT_TTL)
        })
        .collect()
}

/// Keeps `stats` of terms of the database at `epoch` in the memory's cache.
pub(super) fn store_stats(
    memory: &Memory,
    epoch: &str,
    stats: impl IntoIterator<Item = (String, TermStats)>,
) {
    for (t, s) in stats {
        memory.inner.term_stats.insert((epoch.to_string(), t), s);
    }
}

/// Record counts of `terms` (capped at `TERM_BUDGET + 1`), from the cache when fresh.
pub(super) async fn doc_counts(
    memory: &Memory,
    epoch: &str,
    terms: &[String],
) -> AppResult<Vec<i64>> {
    let mut stats = cached_stats(memory, epoch, terms);
    let missing: Vec<String> = terms
        .iter()
        .zip(&stats)
        .filter(|(_, s)| s.is_none())
        .map(|(t, _)| t.clone())
        .collect();
    if !missing.is_empty() {
        let counts = mstore::term_doc_counts(memory.pool(), &missing, TERM_BUDGET + 1).await?;
        let at = Instant::now();
        let fresh: Vec<(String, TermStats)> = missing
            .into_iter()
            .zip(counts)
            .map(|(t, count)| {
                let s = TermStats {
                    count,
                    at,
                    floor: None,
                };
                (t, s)
            })
            .collect();
        let mut fresh_iter = fresh.iter();
        for s in stats.iter_mut().filter(|s| s.is_none()) {
            *s = fresh_iter.next().map(|(_, f)| *f);
        }
        store_stats(memory, epoch, fresh);
    }
    Ok(stats
        .into_iter()
        .map(|s| s.map_or(0, |s| s.count))
        .collect())
}

/// The id of the [`TERM_BUDGET`]-th newest match of `term`, from the cache when fresh.
pub(super) async fn term_floor(memory: &Memory, epoch: &str, term: &str) -> AppResult<Option<i64>> {
    let cached = cached_stats(memory, epoch, &[term.to_string()])
        .pop()
        .flatten();
    if let Some(floor) = cached.and_then(|s| s.floor) {
        return Ok(floor);
    }
    let floor = mstore::newest_match_floor(memory.pool(), term, TERM_BUDGET).await?;
    let stats = TermStats {
        count: cached.map_or(TERM_BUDGET + 1, |s| s.count),
        at: cached.map_or_else(Instant::now, |s| s.at),
        floor: Some(floor),
    };
    store_stats(memory, epoch, [(term.to_string(), stats)]);
    Ok(floor)
}

/// Which of `terms` (with their record counts) the expression keeps: see [`TERM_BUDGET`].
/// Terms found nowhere cost nothing and are kept (a record written since may hold them).
pub(super) fn within_budget(counts: &[i64]) -> Vec<bool> {
    let mut order: Vec<usize> = (0..counts.len()).collect();
    order.sort_by_key(|&i| (counts[i], i));
    let mut keep = vec![false; counts.len()];
    let (mut spent, mut any) = (0, false);
    for i in order {
        let n = counts[i];
        if n == 0 || spent + n <= TERM_BUDGET || !any {
            keep[i] = true;
            spent += n;
            any |= n > 0;
        }
    }
    keep
}

/// The full-text search recall runs for a query: an FTS5 expression OR-ing the kept terms, and
/// the lowest record id it looks at (0: all).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FtsSearch {
    /// FTS5 expression (empty: no search).
    pub expr: String,
    /// Lowest record id (`rowid`) searched.
    pub min_rowid: i64,
}

/// The search of `terms` within [`TERM_BUDGET`].
pub(super) async fn bounded_search(
    memory: &Memory,
    epoch: &str,
    terms: &[String],
) -> AppResult<FtsSearch> {
    let counts = doc_counts(memory, epoch, terms).await?;
    let keep = within_budget(&counts);
    let kept: Vec<String> = terms
        .iter()
        .zip(&keep)
        .filter(|(_, k)| **k)
        .map(|(t, _)| t.clone())
        .collect();
    // Over budget only when the rarest term alone is: look at its newest matches.
    let spent: i64 = counts
        .iter()
        .zip(&keep)
        .filter(|(_, k)| **k)
        .map(|(n, _)| n)
        .sum();
    let mut min_rowid = 0;
    if spent > TERM_BUDGET
        && let Some((term, _)) = terms
            .iter()
            .zip(&counts)
            .filter(|(_, n)| **n > TERM_BUDGET)
            .find(|(t, _)| kept.contains(t))
    {
        min_rowid = term_floor(memory, epoch, term).await?.unwrap_or(0);
    }
    Ok(FtsSearch {
        expr: mstore::fts_or_terms(&kept),
        min_rowid,
    })
}

/// The full-text search [`recall`] runs for `q` (for benchmarks and diagnostics).
///
/// # Errors
/// Database errors.
pub async fn fts_search(memory: &Memory, q: &RecallQuery) -> AppResult<FtsSearch> {
    let index = memory.index().await?;
    bounded_search(memory, index.epoch(), &expand(q, memory.tuning()).terms).await
}

/// Descriptive and prescriptive candidate lists from one FTS5 search: the first [`PER_LIST`]
/// durable, non-retracted matches of `kinds` (empty: every durable kind), and the first half as
/// many rules and runbooks, best BM25 first, without `exclude`'s own records.
pub(super) async fn text_lists(
    pool: &AnyPool,
    index: &RecallIndex,
    search: &FtsSearch,
    kinds: &[MemoryKind],
    exclude: Option<&str>,
) -> AppResult<(Vec<Candidate>, Vec<Candidate>)> {
    let rule_kinds: Vec<MemoryKind> = [MemoryKind::Lesson, MemoryKind::Runbook]
        .into_iter()
        .filter(|k| kinds.is_empty() || kinds.contains(k))
        .collect();
    let (text_limit, rule_limit) = (PER_LIST, PER_LIST / 2);
    let (mut text, mut rules) = (Vec::new(), Vec::new());
    for id in mstore::fts_matches(pool, &search.expr, search.min_rowid, FTS_CAP).await? {
        let Some(e) = index.get(id) else { continue };
        if exclude.is_some() && e.incident_id.as_deref() == exclude {
            continue;
        }
        let kind = e.candidate.kind;
        if text.len() < text_limit && (kinds.is_empty() || kinds.contains(&kind)) {
            text.push(e.candidate.clone());
        }
        if rules.len() < rule_limit && rule_kinds.contains(&kind) {
            rules.push(e.candidate.clone());
        }
        if text.len() == text_limit && (rules.len() == rule_limit || rule_kinds.is_empty()) {
            break;
        }
    }
    Ok((text, rules))
}

/// Incident ids in order of their first (best) record in `records`, with that record's cosine.
pub(super) fn incidents_by_best_part(
    index: &RecallIndex,
    records: impl IntoIterator<Item = (i64, Option<f32>)>,
) -> Vec<(String, Option<f32>)> {
    let mut out: Vec<(String, Option<f32>)> = Vec::new();
    for (id, cosine) in records {
        let Some(inc) = index.get(id).and_then(|e| e.incident_id.clone()) else {
            continue;
        };
        if !out.iter().any(|(i, _)| *i == inc) {
            out.push((inc, cosine));
        }
        if out.len() >= INCIDENT_LIST {
            break;
        }
    }
    out
}

/// The vector lists of a query (see [`vector_lists`]).
#[derive(Default)]
pub(super) struct VectorLists {
    /// The nearest records.
    pub(super) nearest: embeddings::Nearest,
    /// The nearest incident documents, with their cosine.
    pub(super) doc_vector: Vec<(String, f32)>,
    /// Past incidents by how well their passages cover the query's.
    pub(super) by_passages: Vec<(String, f32)>,
    /// The query's vectors were not computed yet and recall did not wait for them: they are
    /// being computed in the background, and a later recall of the same text has them.
    pub(super) pending: bool,
}

/// What a query's vectors are computed from ([`query_texts`]).
pub(super) struct QueryTexts {
    /// The query's passages ([`crate::memory::documents::passages_of`]).
    pub passages: Vec<String>,
    /// Whether it is read passage by passage (more than one, and the tuning says so).
    pub by_passage: bool,
    /// Whether it is a report: its vector is the mean of its passages'.
    pub report: bool,
    /// What is embedded: a report's passages (one pass over short texts, not a second over the
    /// whole, which the model would truncate anyway); a few sentences' whole and passages in one
    /// batch; else the whole.
    pub texts: Vec<String>,
}

/// The texts `text`'s query vectors are computed from (see [`QueryTexts`]).
pub(super) fn query_texts(memory: &Memory, text: &str) -> QueryTexts {
    let tuning = memory.tuning();
    let passages = crate::memory::documents::passages_of(text);
    let by_passage = tuning.on("passages") && passages.len() > 1;
    let report = by_passage && passages.len() >= LONG_QUERY && tuning.on("passage_mean");
    let texts: Vec<String> = if report {
        passages.clone()
    } else if by_passage {
        std::iter::once(text.to_string())
            .chain(passages.iter().cloned())
            .collect()
    } else {
        vec![text.to_string()]
    };
    QueryTexts {
        passages,
        by_passage,
        report,
        texts,
    }
}

/// Whether `text`'s query vectors are computed already (always, without an embedder): a read of
/// the memory's caches, no model call. When they are not, their computation is started in the
/// background ([`Memory::embed_later`]).
pub(super) fn vectors_ready(memory: &Memory, text: &str) -> bool {
    if memory.embedder_ready().is_none() {
        return true;
    }
    let q = query_texts(memory, text);
    let cached = if q.by_passage {
        embeddings::cached_text_vectors(memory, &q.texts).is_some()
    } else {
        embeddings::cached_query_vector(memory, text).is_some()
    };
    if !cached {
        memory.embed_later(q.texts, q.by_passage);
    }
    cached
}

/// The vector lists of a query: the nearest records, the nearest incident documents and, passage
/// by passage, the nearest incidents. With `wait` false (a page view), only vectors already
/// computed are used; missing ones are computed in the background ([`Memory::embed_later`]) and
/// the lists come back empty with `pending` set.
pub(super) async fn vector_lists(
    memory: &Memory,
    index: &RecallIndex,
    text: &str,
    exclude: Option<&str>,
    wait: bool,
) -> VectorLists {
    let QueryTexts {
        passages: query_passages,
        by_passage,
        report,
        texts,
    } = query_texts(memory, text);
    let vectors = if !by_passage {
        if wait {
            embeddings::query_vector(memory, text)
                .await
                .map(|v| vec![v])
        } else {
            embeddings::cached_query_vector(memory, text).map(|v| vec![v])
        }
    } else if wait {
        embeddings::text_vectors(memory, &texts).await
    } else {
        embeddings::cached_text_vectors(memory, &texts)
    };
    let pending = vectors.is_none() && !wait && memory.embed_later(texts, by_passage);
    let (query_vector, passage_vectors) = match vectors {
        Some(vs) if report => (embeddings::mean_direction(&vs), Some(vs)),
        Some(mut vs) if by_passage && vs.len() == query_passages.len() + 1 => {
            let whole = vs.remove(0);
            (Some(whole), Some(vs))
        }
        Some(mut vs) if !by_passage && vs.len() == 1 => (vs.pop(), None),
        _ => (None, None),
    };
    // The vector scans run here, while the word searches' SQL is still running on the
    // database's own threads.
    let (nearest, doc_vector) = match &query_vector {
        Some(v) => (
            embeddings::nearest_records(memory, index, v, exclude, PER_LIST).await,
            embeddings::nearest_documents(memory, index.epoch(), v, exclude, INCIDENT_LIST).await,
        ),
        None => (embeddings::Nearest::default(), Vec::new()),
    };
    let by_passages = match &passage_vectors {
        Some(vs) => {
            embeddings::nearest_by_passages(memory, index.epoch(), vs, exclude, INCIDENT_LIST).await
        }
        None => Vec::new(),
    };
    VectorLists {
        nearest,
        doc_vector,
        by_passages,
        pending,
    }
}

/// What the incident-level lists are built from.
pub(super) struct IncidentInputs<'a> {
    pub(super) doc_bm25: Vec<(String, f64)>,
    pub(super) doc_vector: Vec<(String, f32)>,
    pub(super) by_passages: Vec<(String, f32)>,
    pub(super) semantic: &'a [(i64, f32)],
    pub(super) text_list: &'a [Candidate],
    pub(super) scope_list: &'a [Candidate],
}

/// The incident-level lists the tuning turns on, in fusion order.
pub(super) fn incident_lists(
    tuning: &RecallTuning,
    index: &RecallIndex,
    inputs: IncidentInputs<'_>,
) -> Vec<IncidentList> {
    let IncidentInputs {
        doc_bm25,
        doc_vector,
        by_passages,
        semantic,
        text_list,
        scope_list,
    } = inputs;
    let mut incident_lists: Vec<IncidentList> = Vec::new();
    if tuning.on("doc_bm25") {
        incident_lists.push((
            "doc_bm25",
            doc_bm25
                .into_iter()
                .map(|(i, s)| (i, Some(s as f32)))
                .collect(),
        ));
    }
    if tuning.on("doc_vector") {
        incident_lists.push((
            "doc_vector",
            doc_vector.into_iter().map(|(i, c)| (i, Some(c))).collect(),
        ));
    }
    if !by_passages.is_empty() {
        incident_lists.push((
            "passages",
            by_passages.into_iter().map(|(i, c)| (i, Some(c))).collect(),
        ));
    }
    if tuning.on("part_vector") {
        incident_lists.push((
            "part_vector",
            incidents_by_best_part(index, semantic.iter().map(|(id, c)| (*id, Some(*c)))),
        ));
    }
    if tuning.on("part_bm25") {
        incident_lists.push((
            "part_bm25",
            incidents_by_best_part(index, text_list.iter().map(|c| (c.id, None))),
        ));
    }
    if tuning.on("keys") {
        incident_lists.push((
            "keys",
            incidents_by_best_part(index, scope_list.iter().map(|c| (c.id, None))),
        ));
    }
    incident_lists
}
