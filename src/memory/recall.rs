//! Recall (DESIGN.md §4): the one function the UI, the API and the analyst use to find what the
//! organization learned before.
//!
//! Pipeline: negated findings left out of the query ([`super::negation`]) → failure-mode tags
//! (catalogue signatures, the load shape) → candidate lists at two levels:
//! - the incident level: each learned incident's retrieval document ([`super::documents`]) by
//!   BM25 and by vector, plus its best parts (records) by vector, by BM25 and by structured keys,
//!   fused by rank into [`RecallResult::incidents`];
//! - the record level ("parts"): FTS5 BM25 over the expanded text (descriptive), over rules and
//!   runbooks (prescriptive), exact structured keys — failure mode, service and its graph
//!   neighbours, action kind (scope) — and nearest by vector (semantic), fused by rank and then
//!   weighted by kind, recency (per-kind half-life), importance and validation.
//!
//! Fusion is reciprocal rank fusion (Cormack, Clarke & Büttcher, "Reciprocal Rank Fusion
//! outperforms Condorcet and individual rank learning methods", SIGIR 2009). Each result says
//! why it was recalled (lists, matched words, shared tags, cosine) and carries marks for stale,
//! superseded or contradicted records. Nothing is cut by a similarity threshold: when no list has
//! a candidate the result says so. Mechanisms can be turned off one by one ([`RecallTuning`]).
//!
//! Long because it is the one recall pipeline: query expansion, the lists, their fusion and
//! ranking, and the results' "why" are read together, with their tests (about 155 lines).

use std::collections::{BTreeSet, HashMap};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use serde::Serialize;
use sqlx::AnyPool;

pub use super::negation::strip_negated;
use super::{Memory, RecallTuning, embeddings, lock};
use crate::domain::memory::MemoryRecord;
use crate::domain::{ActionKind, MemoryKind, Validation};
use crate::error::AppResult;
use crate::store::memory::Candidate;
use crate::store::recall_index::RecallIndex;
use crate::store::{self, memory as mstore};

/// RRF constant.
const RRF_K: f64 = 60.0;
/// Passages from which a query is a report, whose vector is the mean of its passages' (see
/// [`recall`]); a question is one or two sentences.
const LONG_QUERY: usize = 3;
/// Candidates taken from each list.
const PER_LIST: usize = 60;

/// What to recall for.
#[derive(Debug, Clone, Default)]
pub struct RecallQuery {
    /// Free text: an incident's title, description and observations, or a question.
    pub text: String,
    /// The service in scope.
    pub service: Option<String>,
    /// Failure-mode tags already known (e.g. from evidence); more are derived from `text`.
    pub failure_modes: Vec<String>,
    /// Action kinds in scope (e.g. a recommendation being checked).
    pub action_kinds: Vec<ActionKind>,
    /// Leave out this incident's own records.
    pub exclude_incident: Option<String>,
    /// Only these kinds (empty = every durable kind).
    pub kinds: Vec<MemoryKind>,
    /// How many results (default 10, at most 100).
    pub k: usize,
}

/// Why a record was recalled.
#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Why {
    /// Query words found in the record (after stemming-insensitive comparison).
    pub matched_terms: Vec<String>,
    /// Failure-mode tags shared with the query.
    pub tags: Vec<String>,
    /// Service shared with the query (directly or through a dependency).
    pub services: Vec<String>,
    /// Action kind shared with the query.
    pub action_kinds: Vec<String>,
    /// Which candidate lists found it: `text`, `rules` (BM25), `scope` (structured keys),
    /// `semantic` (nearest by vector).
    #[schema(value_type = Vec<String>)]
    pub lists: Vec<&'static str>,
    /// Cosine similarity of its vector with the query's, when the vector list found it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cosine: Option<f32>,
}

/// One recalled record.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Recalled {
    /// The record (all fields of `GET /api/v1/memories`).
    #[serde(flatten)]
    pub memory: MemoryRecord,
    /// Fused, weighted score (higher is better; only comparable within one result).
    pub score: f64,
    /// Why it was recalled.
    pub why: Why,
    /// `stale` (older than its half-life), `superseded`, `contradicted` (the same action is
    /// recorded both as failing and as working, or a later record denies it), `consolidated`
    /// (merged into a rule that ranks above it).
    #[schema(value_type = Vec<String>)]
    pub marks: Vec<&'static str>,
}

/// The answer of [`recall`].
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct RecallResult {
    /// Best first.
    pub results: Vec<Recalled>,
    /// Past incidents ranked for the query at the incident level, best first (see
    /// [`IncidentMatch`]).
    pub incidents: Vec<IncidentMatch>,
    /// Tags derived from the query (shown to people; used as structured keys).
    pub derived_tags: Vec<String>,
    /// Set when nothing matched: "No relevant organizational memory found".
    pub notice: Option<String>,
}

/// Message when recall finds nothing.
pub const NOTHING_FOUND: &str = "No relevant organizational memory found";

const STOPWORDS: &[&str] = &[
    "the", "and", "for", "with", "that", "this", "from", "was", "were", "are", "is", "be", "been",
    "to", "of", "in", "on", "at", "it", "its", "as", "by", "or", "an", "a", "we", "our", "not",
    "but", "all", "any", "can", "has", "have", "had", "after", "before", "when", "what", "which",
    "who", "should", "would", "could", "do", "does", "did", "i", "you", "they", "them", "there",
    "their", "about", "into", "over", "than", "then", "so", "if", "up", "out", "no", "yes", "how",
    "why", "will", "just", "also", "some", "more", "most", "very", "since", "while", "again",
    "being", "seeing", "seen", "see", "because", "always", "check", "first",
];

/// Whether a matched query word is worth showing in "why recalled": numbers, years and the
/// pieces of timestamps or durations (`2026`, `29t14`, `12z`, `30000ms`) are not words; a token
/// with at least as many letters as digits (`5xx`, `http2`, `sha256`) is. Display only: ranking
/// never looks at this.
pub fn is_displayable_word(w: &str) -> bool {
    let letters = w.chars().filter(|c| c.is_alphabetic()).count();
    let digits = w.chars().filter(char::is_ascii_digit).count();
    letters > 0 && letters >= digits
}

/// Lower-case content words of `text` (≥ 2 chars, no stopwords), deduplicated, in order.
pub fn content_words(text: &str) -> Vec<String> {
    let mut seen = BTreeSet::new();
    text.split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .filter(|w| w.chars().count() >= 2 && !STOPWORDS.contains(&w.as_str()))
        .filter(|w| seen.insert(w.clone()))
        .collect()
}

/// Failure-mode tags of `text` (negated findings left out, see [`strip_negated`]): catalogue
/// signatures plus the load shape.
pub fn derive_tags(text: &str) -> Vec<String> {
    tags_of(&strip_negated(text)).into_iter().collect()
}

/// Failure-mode tags of `text` as it stands (no negation handling): catalogue signatures and the
/// load shape.
pub(super) fn tags_of(text: &str) -> BTreeSet<String> {
    tags_with(text, true)
}

/// [`tags_of`] with the load shape on or off (ablation).
fn tags_with(text: &str, load_shape_on: bool) -> BTreeSet<String> {
    let mut tags: BTreeSet<String> = crate::evidence::signatures::match_tags(text)
        .into_iter()
        .map(str::to_string)
        .collect();
    if load_shape_on {
        tags.extend(load_shape(text).map(str::to_string));
    }
    tags
}

/// A request-rate reading going from a number to another (`qps 40 -> 900`, `throughput went
/// from 2.5k to 9k`, `request rate 2k → 14k`).
static RATE_CHANGE: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(
        r"(?i)\b(?:rps|qps|req/s|requests?/s|requests? per second|request rate|traffic|throughput)\b[^\n;]{0,30}?(?:from\s+)?~?(\d[\d,]*(?:\.\d+)?k?)\s*(?:rps|qps|req/s|/s)?\s*(?:->|→|=>|\bto\b)\s*~?(\d[\d,]*(?:\.\d+)?k?)",
    )
    .expect("static regex")
});

/// A request rate described as unchanged (`throughput unchanged at ~310 req/s`, `traffic is
/// normal`, `rps steady, same as yesterday`).
static RATE_STEADY: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(
        r"(?i)\b(?:rps|qps|req/s|request rate|traffic|throughput)\b[^\n;.]{0,30}?\b(?:steady|flat|unchanged|normal|same as|as usual)\b",
    )
    .expect("static regex")
});

/// `1,050` → 1050, `1.5k` → 1500.
fn reading(s: &str) -> Option<f64> {
    let s = s.replace(',', "");
    match s.strip_suffix(['k', 'K']) {
        Some(n) => n.parse::<f64>().ok().map(|v| v * 1000.0),
        None => s.parse().ok(),
    }
}

/// The load shape a text reports, which tells look-alike failure modes apart (a pool exhausted
/// by a traffic surge against one exhausted by a leak under steady load): `traffic_surge` when a
/// request rate at least doubles (`rps 250 -> 900`), `steady_load` when it is described as
/// steady, flat, normal or unchanged; `None` otherwise.
pub fn load_shape(text: &str) -> Option<&'static str> {
    // A reading is a number on its own, not part of a date, a time or a path
    // (`2024-05-01 to 2024-05-02`, `10:00 to 12:00`).
    let alone = |before: Option<char>, after: Option<char>| {
        let joins = |c: Option<char>| c.is_some_and(|c| matches!(c, '-' | ':' | '/'));
        !joins(before) && before != Some('.') && !joins(after)
    };
    for c in RATE_CHANGE.captures_iter(text) {
        let (Some(m1), Some(m2)) = (c.get(1), c.get(2)) else {
            continue;
        };
        let first_alone = alone(
            text[..m1.start()].chars().next_back(),
            text[m1.end()..].chars().next(),
        );
        let second_alone = alone(
            text[..m2.start()].chars().next_back(),
            text[m2.end()..].chars().next(),
        );
        if let (Some(a), Some(b)) = (reading(m1.as_str()), reading(m2.as_str()))
            && first_alone
            && second_alone
            && a > 0.0
            && b >= 2.0 * a
        {
            return Some("traffic_surge");
        }
    }
    RATE_STEADY.is_match(text).then_some("steady_load")
}

/// The Snowball English (Porter2) stem of a lower-cased word, for matching terms in "why"
/// (<https://snowballstem.org/algorithms/english/stemmer.html>).
fn stem(stemmer: &rust_stemmers::Stemmer, w: &str) -> String {
    stemmer.stem(&w.to_lowercase()).into_owned()
}

/// Weight of a kind in ranking: root causes, failures and rules over narrative.
fn kind_weight(k: MemoryKind) -> f64 {
    use MemoryKind::*;
    match k {
        RootCause | RemediationFailure | Lesson => 1.3,
        Symptom | FalseHypothesis | RemediationSuccess | Runbook | Trigger => 1.15,
        ContributingFactor | RejectedRecommendation | ServiceFact | Dependency => 1.0,
        IncidentSummary => 1.1,
        _ => 0.9,
    }
}

/// What a query asks for, read once from its text with negated findings left out.
struct Expanded {
    /// The query text with negated findings left out ([`strip_negated`]).
    text: String,
    /// Failure-mode tags, given and derived.
    tags: BTreeSet<String>,
    /// Content words of the text.
    words: Vec<String>,
    /// Terms of the descriptive and prescriptive lists: the words plus the words of every tag.
    terms: Vec<String>,
    /// Terms of the incident-document search: every content word of the text, up to
    /// [`DOC_TERMS`].
    doc_terms: Vec<String>,
    /// Action kinds, given and named in free words ([`ActionKind::mentioned_in`]).
    actions: Vec<ActionKind>,
}

/// Most terms OR-ed in the incident-document search (there are few documents, one per
/// incident, so a long query costs little there).
const DOC_TERMS: usize = 80;

fn expand(q: &RecallQuery, tuning: &RecallTuning) -> Expanded {
    let mut tags: BTreeSet<String> = q.failure_modes.iter().cloned().collect();
    let text = if tuning.on("negation") {
        strip_negated(&q.text)
    } else {
        q.text.clone()
    };
    tags.extend(tags_with(&text, tuning.on("load_shape")));
    let mut actions = q.action_kinds.clone();
    for a in ActionKind::mentioned_in(&text) {
        if !actions.contains(&a) {
            actions.push(a);
        }
    }
    let words = content_words(&text);
    let mut expanded = words.join(" ");
    for t in &tags {
        expanded.push(' ');
        expanded.push_str(&t.replace('_', " "));
    }
    let terms = mstore::fts_terms(&expanded);
    let doc_terms: Vec<String> = words
        .iter()
        .filter(|w| w.chars().any(char::is_alphabetic))
        .take(DOC_TERMS)
        .cloned()
        .collect();
    Expanded {
        text,
        tags,
        words,
        terms,
        doc_terms,
        actions,
    }
}

/// Index entries (records containing a term, summed over the terms) the FTS5 expression may
/// cost. BM25 scores every record that matches any term, so one term found in half the memory
/// costs more than all the others together while adding almost nothing to the ranking (its
/// inverse document frequency is near zero). Terms are kept rarest first while their summed
/// counts fit; the rarest term found at all is always kept, and when it alone holds more records
/// than the budget, only its newest `TERM_BUDGET` matches are looked at (recency is a ranking
/// factor anyway, and rules, runbooks and dead ends also come through the structured list).
const TERM_BUDGET: i64 = 1_000;
/// Most matches read from one FTS5 search (term counts may be up to [`DOC_COUNT_TTL`] old).
const FTS_CAP: i64 = 4 * TERM_BUDGET;
/// How long a term's record count is reused before it is counted again.
const DOC_COUNT_TTL: Duration = Duration::from_secs(600);
/// Records each structured key contributes to the scope list: its newest ones.
const KEY_WINDOW: usize = 250;
/// Term statistics kept per memory before the cache starts over (~100 bytes each with the
/// key: at most ~2 MB; a term's count is re-read at most every [`DOC_COUNT_TTL`] anyway).
const TERM_STATS_MAX: usize = 20_000;

/// A term's record count (capped at `TERM_BUDGET + 1`), when it was counted, and once asked for,
/// the id of its `TERM_BUDGET`-th newest match (`None` inside: fewer matches). Kept by
/// [`Memory`] per database epoch and term.
#[derive(Debug, Clone, Copy)]
pub struct TermStats {
    count: i64,
    at: Instant,
    floor: Option<Option<i64>>,
}

/// The cached, fresh stats of `terms` (`None` where missing or stale).
fn cached_stats(memory: &Memory, epoch: &str, terms: &[String]) -> Vec<Option<TermStats>> {
    let now = Instant::now();
    let cache = lock(&memory.inner.term_stats);
    terms
        .iter()
        .map(|t| {
            cache
                .get(&(epoch.to_string(), t.clone()))
                .filter(|s| now.duration_since(s.at) < DOC_COUNT_TTL)
                .copied()
        })
        .collect()
}

fn store_stats(memory: &Memory, epoch: &str, stats: impl IntoIterator<Item = (String, TermStats)>) {
    let mut cache = lock(&memory.inner.term_stats);
    if cache.len() > TERM_STATS_MAX {
        cache.clear();
    }
    cache.extend(stats.into_iter().map(|(t, s)| ((epoch.to_string(), t), s)));
}

/// Record counts of `terms` (capped at `TERM_BUDGET + 1`), from the cache when fresh.
async fn doc_counts(memory: &Memory, epoch: &str, terms: &[String]) -> AppResult<Vec<i64>> {
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
async fn term_floor(memory: &Memory, epoch: &str, term: &str) -> AppResult<Option<i64>> {
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
fn within_budget(counts: &[i64]) -> Vec<bool> {
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
async fn bounded_search(memory: &Memory, epoch: &str, terms: &[String]) -> AppResult<FtsSearch> {
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
async fn text_lists(
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

/// Scope candidates: structured keys (failure modes, the service and its graph neighbours,
/// action kinds), and the neighbours.
fn scope_list(
    index: &RecallIndex,
    q: &RecallQuery,
    tags: &BTreeSet<String>,
    actions: &[ActionKind],
) -> (Vec<Candidate>, Vec<String>) {
    let mut keys: Vec<(&str, String, f64)> = tags
        .iter()
        .map(|t| ("failure_mode", t.clone(), 2.0))
        .collect();
    let mut neighbours = Vec::new();
    if let Some(s) = &q.service {
        keys.push(("service", s.clone(), 1.0));
        neighbours = index.neighbours(s).to_vec();
        keys.extend(neighbours.iter().map(|n| ("service", n.clone(), 0.5)));
    }
    keys.extend(
        actions
            .iter()
            .map(|a| ("action_kind", a.as_str().to_string(), 1.5)),
    );
    let list = index.key_candidates(&keys, q.exclude_incident.as_deref(), KEY_WINDOW, PER_LIST);
    (list, neighbours)
}

/// A fused candidate: its ranking fields, RRF score, the lists that found it and its cosine
/// with the query (when the vector list found it).
struct Fused {
    candidate: Candidate,
    rrf: f64,
    lists: Vec<&'static str>,
    cosine: Option<f32>,
}

/// A past incident as recall ranks it for a new one ("the incident level"): fused by rank over
/// its document's BM25 and vector lists and its best parts' (records') lists.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct IncidentMatch {
    /// The past incident.
    pub incident_id: String,
    /// Fused score (higher is better; comparable within one result only).
    pub score: f64,
    /// Lists that ranked it: `passages`, `doc_bm25`, `doc_vector`, `part_vector`, `part_bm25`,
    /// `keys`.
    #[schema(value_type = Vec<String>)]
    pub lists: Vec<&'static str>,
    /// Its 1-based rank in each of `lists`, in the same order.
    pub ranks: Vec<usize>,
    /// Cosine of its document with the query, when embedded.
    pub cosine: Option<f32>,
}

/// Weight of the incident-level ranking as a list at the record level (see [`recall`]).
const INCIDENT_PRIOR: f64 = 1.0;

/// Candidates each incident-level list contributes.
const INCIDENT_LIST: usize = 30;

/// Per-list weights of the incident-level fusion (see [`fuse_incidents`]). The word lists weigh
/// less than the meaning lists: a new incident is usually written in other words than the past
/// one, and the words already enter twice (the incident document and its parts). Measured on
/// `recall-dev-hard.json` (ablation in the README).
const INCIDENT_LISTS: &[(&str, f64)] = &[
    ("passages", 1.0),
    ("doc_bm25", 0.4),
    ("doc_vector", 1.0),
    ("part_vector", 1.0),
    ("part_bm25", 0.4),
    ("keys", 0.5),
];

/// RRF constant of the incident-level fusion: lists are short (one entry per incident), so a
/// smaller constant than the record level's keeps their first ranks decisive.
const INCIDENT_RRF_K: f64 = 10.0;

/// Share of the incident-level score that comes from the lists' own scores (min-max normalized)
/// rather than their ranks: `λ` of the convex combination in [`fuse_incidents`].
const SCORE_SHARE: f64 = 0.5;

/// One incident-level list: its name and incident ids best first, each with its score when the
/// list has one (a cosine for the vector lists, `-bm25` for the document search).
type IncidentList = (&'static str, Vec<(String, Option<f32>)>);

/// Fuses incident-level lists (incident ids best first, with an optional score) into one
/// ranking, best first, ties by id. Each list `l` with weight `w` adds, for an incident at
/// 1-based rank `r`,
///
/// `w · ((1 − λ) / (k + r) + λ · n / (k + 1))`
///
/// where `n` is its score min-max normalized over the list (1 for the best, 0 for the worst;
/// `1 − (r − 1) / INCIDENT_LIST` for a list without scores), `k` = [`INCIDENT_RRF_K`] and
/// `λ` = `score_share`. The rank part is reciprocal rank fusion (Cormack, Clarke and Büttcher,
/// SIGIR 2009); the score part is the convex combination of normalized scores that Bruch, Gai
/// and Ingber found stronger than RRF for hybrid lexical + dense retrieval ("An Analysis of
/// Fusion Functions for Hybrid Retrieval", ACM TOIS 2023): it keeps how far ahead the best
/// candidate is, which ranks alone throw away. With `λ = 0` this is plain weighted RRF.
fn fuse_incidents(lists: Vec<IncidentList>, score_share: f64) -> Vec<IncidentMatch> {
    let mut by_id: HashMap<String, IncidentMatch> = HashMap::new();
    for (name, list) in lists {
        let weight = INCIDENT_LISTS
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(1.0, |(_, w)| *w);
        let (lo, hi) = list
            .iter()
            .filter_map(|(_, s)| *s)
            .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), s| {
                (lo.min(s), hi.max(s))
            });
        for (rank, (id, score)) in list.into_iter().enumerate() {
            let normalized = match score {
                Some(s) if hi > lo => f64::from((s - lo) / (hi - lo)),
                Some(_) => 1.0,
                None => 1.0 - rank as f64 / INCIDENT_LIST as f64,
            };
            let e = by_id.entry(id.clone()).or_insert_with(|| IncidentMatch {
                incident_id: id,
                score: 0.0,
                lists: Vec::new(),
                ranks: Vec::new(),
                cosine: None,
            });
            e.score += weight
                * ((1.0 - score_share) / (INCIDENT_RRF_K + rank as f64 + 1.0)
                    + score_share * normalized / (INCIDENT_RRF_K + 1.0));
            e.lists.push(name);
            e.ranks.push(rank + 1);
            if name == "doc_vector" {
                e.cosine = score;
            }
        }
    }
    let mut out: Vec<IncidentMatch> = by_id.into_values().collect();
    out.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.incident_id.cmp(&b.incident_id))
    });
    out
}

/// Incident ids in order of their first (best) record in `records`, with that record's cosine.
fn incidents_by_best_part(
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

/// Runs the recall pipeline.
///
/// # Errors
/// Database errors.
pub async fn recall(memory: &Memory, q: &RecallQuery) -> AppResult<RecallResult> {
    let pool = memory.pool();
    let tuning = memory.tuning();
    let k = if q.k == 0 { 10 } else { q.k.min(100) };
    let Expanded {
        text,
        tags,
        words,
        terms,
        doc_terms,
        actions,
    } = expand(q, tuning);
    let kinds = &q.kinds;
    let index = memory.index().await?;
    let search = bounded_search(memory, index.epoch(), &terms).await?;
    let exclude = q.exclude_incident.as_deref();
    let doc_expr = mstore::fts_or_terms(&doc_terms);
    let (lists, (nearest, doc_vector, by_passages), doc_bm25) = tokio::join!(
        text_lists(pool, &index, &search, kinds, exclude),
        vector_lists(memory, &index, &text, exclude),
        crate::store::incident_documents::search(pool, &doc_expr, exclude, INCIDENT_LIST as i64),
    );
    let (text_list, rules_list) = lists?;
    let doc_bm25 = doc_bm25?;
    let (semantic, chance) = (nearest.hits, nearest.floor);
    let semantic_list: Vec<(Candidate, f32)> = semantic
        .iter()
        .filter_map(|(id, c)| index.get(*id).map(|e| (e.candidate.clone(), *c)))
        .collect();
    let (scope_list, neighbours) = scope_list(&index, q, &tags, &actions);

    // The incident level: which past incidents this query is about.
    let incident_lists = incident_lists(
        tuning,
        &index,
        IncidentInputs {
            doc_bm25,
            doc_vector,
            by_passages,
            semantic: &semantic,
            text_list: &text_list,
            scope_list: &scope_list,
        },
    );
    let score_share = if tuning.on("score_fusion") {
        SCORE_SHARE
    } else {
        0.0
    };
    let incidents = fuse_incidents(incident_lists, score_share);

    // The record level ("parts").
    let fused = fuse_records(
        tuning,
        &index,
        &incidents,
        [text_list, rules_list, scope_list],
        semantic_list,
    );
    if fused.is_empty() {
        return Ok(RecallResult {
            results: Vec::new(),
            incidents,
            derived_tags: tags.into_iter().collect(),
            notice: Some(empty_notice(&index, q.service.as_deref())),
        });
    }
    // Rank on the candidates' own fields; load only the k records that are returned.
    let now = store::now();
    let ranked = rank(fused, kinds, now, k);
    let ids: Vec<i64> = ranked.iter().map(|(_, f)| f.candidate.id).collect();
    let mut records: HashMap<i64, MemoryRecord> = mstore::get_many(pool, &ids)
        .await?
        .into_iter()
        .map(|r| (r.id, r))
        .collect();
    let stemmer = rust_stemmers::Stemmer::create(rust_stemmers::Algorithm::English);
    let explain = Explain {
        query_stems: query_stems(&stemmer, &words),
        stemmer,
        tags: &tags,
        service: q.service.as_ref(),
        neighbours: &neighbours,
        actions: &actions,
        chance,
        now,
    };
    let mut results: Vec<Recalled> = ranked
        .into_iter()
        .filter_map(|(score, f)| Some((score, f.lists, f.cosine, records.remove(&f.candidate.id)?)))
        // Retracted since the index was read: never returned.
        .filter(|(_, _, _, r)| r.validation != Validation::Retracted)
        .map(|(score, lists, cosine, r)| explain.recalled(score, lists, cosine, r))
        .collect();
    mark_contradictions(&mut results);
    let notice = thin_notice(&results, q.service.as_deref(), chance);
    Ok(RecallResult {
        results,
        incidents,
        derived_tags: tags.into_iter().collect(),
        notice,
    })
}

/// The vector lists of a query: the nearest records, the nearest incident documents and, passage
/// by passage, the nearest incidents.
async fn vector_lists(
    memory: &Memory,
    index: &RecallIndex,
    text: &str,
    exclude: Option<&str>,
) -> (embeddings::Nearest, Vec<(String, f32)>, Vec<(String, f32)>) {
    let tuning = memory.tuning();
    // Passage by passage, when the query has more than one (an incident's report and evidence).
    let query_passages = super::documents::passages_of(text);
    let by_passage = tuning.on("passages") && query_passages.len() > 1;
    let (query_vector, passage_vectors) =
        if by_passage && query_passages.len() >= LONG_QUERY && tuning.on("passage_mean") {
            // A report: its vector is the mean of its passages' (one embedding pass over short
            // texts, not a second over the whole, which the model would truncate anyway).
            let passages = embeddings::text_vectors(memory, &query_passages).await;
            let whole = passages.as_deref().and_then(embeddings::mean_direction);
            (whole, passages)
        } else if by_passage {
            // A few sentences: the whole and its passages in one batch of short texts.
            let mut texts = Vec::with_capacity(query_passages.len() + 1);
            texts.push(text.to_string());
            texts.extend(query_passages.iter().cloned());
            match embeddings::text_vectors(memory, &texts).await {
                Some(mut vs) if vs.len() == texts.len() => {
                    let whole = vs.remove(0);
                    (Some(whole), Some(vs))
                }
                _ => (None, None),
            }
        } else {
            (embeddings::query_vector(memory, text).await, None)
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
    (nearest, doc_vector, by_passages)
}

/// What the incident-level lists are built from.
struct IncidentInputs<'a> {
    doc_bm25: Vec<(String, f64)>,
    doc_vector: Vec<(String, f32)>,
    by_passages: Vec<(String, f32)>,
    semantic: &'a [(i64, f32)],
    text_list: &'a [Candidate],
    scope_list: &'a [Candidate],
}

/// The incident-level lists the tuning turns on, in fusion order.
fn incident_lists(
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

/// Fuses the record-level lists (`[text, rules, scope]` and the semantic one) by rank, then adds
/// each record's incident's rank as one more list.
fn fuse_records(
    tuning: &RecallTuning,
    index: &RecallIndex,
    incidents: &[IncidentMatch],
    [text_list, rules_list, scope_list]: [Vec<Candidate>; 3],
    semantic_list: Vec<(Candidate, f32)>,
) -> HashMap<i64, Fused> {
    let mut fused: HashMap<i64, Fused> = HashMap::new();
    let mut add = |name: &'static str, list: Vec<(Candidate, Option<f32>)>, weight: f64| {
        for (rank, (c, cosine)) in list.into_iter().enumerate() {
            let e = fused.entry(c.id).or_insert_with(|| Fused {
                candidate: c,
                rrf: 0.0,
                lists: Vec::new(),
                cosine: None,
            });
            e.rrf += weight / (RRF_K + rank as f64 + 1.0);
            e.lists.push(name);
            if cosine.is_some() {
                e.cosine = cosine;
            }
        }
    };
    let plain = |l: Vec<Candidate>| l.into_iter().map(|c| (c, None)).collect::<Vec<_>>();
    if tuning.on("part_bm25") {
        add("text", plain(text_list), 1.0);
        add("rules", plain(rules_list), 0.8);
    }
    if tuning.on("keys") {
        add("scope", plain(scope_list), 1.0);
    }
    if tuning.on("part_vector") {
        add(
            "semantic",
            semantic_list
                .into_iter()
                .map(|(c, cos)| (c, Some(cos)))
                .collect(),
            1.0,
        );
    }
    // A record inherits its incident's relevance: the incident-level ranking is one more list at
    // the record level, each record at its incident's rank.
    if tuning.on("incident_prior") && !fused.is_empty() {
        let rank_of: HashMap<&str, usize> = incidents
            .iter()
            .enumerate()
            .map(|(r, m)| (m.incident_id.as_str(), r))
            .collect();
        for f in fused.values_mut() {
            let inc = index
                .get(f.candidate.id)
                .and_then(|e| e.incident_id.as_deref());
            if let Some(r) = inc.and_then(|i| rank_of.get(i)) {
                f.rrf += INCIDENT_PRIOR / (INCIDENT_RRF_K + *r as f64 + 1.0);
                f.lists.push("incident");
            }
        }
    }
    fused
}

/// Scores the fused candidates on their own fields (kind, age, importance, validation,
/// evidence) and keeps the best `k`, ties by id.
fn rank(
    fused: HashMap<i64, Fused>,
    kinds: &[MemoryKind],
    now: jiff::Timestamp,
    k: usize,
) -> Vec<(f64, Fused)> {
    let mut ranked: Vec<(f64, Fused)> = fused
        .into_values()
        .filter(|f| kinds.is_empty() || kinds.contains(&f.candidate.kind))
        .filter(|f| f.candidate.validation != Validation::Retracted)
        .map(|f| {
            let c = &f.candidate;
            let age = crate::domain::memory::age_days(c.created_at, now);
            let importance = 1.0 + 0.05 * (c.importance.clamp(1, 4) - 2) as f64;
            let consolidated = if c.consolidated_into.is_some() {
                crate::domain::memory::CONSOLIDATED_WEIGHT
            } else {
                1.0
            };
            let score = f.rrf
                * consolidated
                * kind_weight(c.kind)
                * c.kind.recency_weight(age)
                * importance
                * c.validation.weight()
                * (1.0 + 0.02 * (c.evidence_count.clamp(1, 10) - 1) as f64);
            (score, f)
        })
        .collect();
    ranked.sort_by(|(a, fa), (b, fb)| b.total_cmp(a).then(fb.candidate.id.cmp(&fa.candidate.id)));
    ranked.truncate(k);
    ranked
}

/// The query's displayable words with their stems: `(stem, word)`.
fn query_stems(stemmer: &rust_stemmers::Stemmer, words: &[String]) -> Vec<(String, String)> {
    words
        .iter()
        .filter(|w| is_displayable_word(w))
        .map(|w| (stem(stemmer, w), w.clone()))
        .collect()
}

/// What a result's "why" and marks are read against: the query's stems, tags, services and
/// action kinds, its chance level and the time of the recall.
struct Explain<'a> {
    stemmer: rust_stemmers::Stemmer,
    query_stems: Vec<(String, String)>,
    tags: &'a BTreeSet<String>,
    service: Option<&'a String>,
    neighbours: &'a [String],
    actions: &'a [ActionKind],
    chance: Option<f32>,
    now: jiff::Timestamp,
}

impl Explain<'_> {
    /// One returned record with why it came and its marks.
    fn recalled(
        &self,
        score: f64,
        lists: Vec<&'static str>,
        cosine: Option<f32>,
        r: MemoryRecord,
    ) -> Recalled {
        let (stemmer, query_stems, tags) = (&self.stemmer, &self.query_stems, self.tags);
        let (neighbours, actions) = (self.neighbours, self.actions);
        let weak = is_weak(&lists, cosine, self.chance);
        let age = r.age_days(self.now);
        let text_stems: BTreeSet<String> = content_words(&r.text)
            .iter()
            .map(|w| stem(stemmer, w))
            .collect();
        let why = Why {
            matched_terms: query_stems
                .iter()
                .filter(|(s, _)| text_stems.contains(s))
                .map(|(_, w)| w.clone())
                .take(12)
                .collect(),
            tags: r
                .failure_modes
                .iter()
                .filter(|t| tags.contains(*t))
                .cloned()
                .collect(),
            services: r
                .services
                .iter()
                .filter(|s| self.service == Some(*s) || neighbours.contains(s))
                .cloned()
                .collect(),
            action_kinds: r
                .action_kind
                .filter(|a| actions.contains(a))
                .map(|a| vec![a.as_str().to_string()])
                .unwrap_or_default(),
            lists,
            cosine,
        };
        let mut marks = Vec::new();
        if r.kind.is_stale(age) {
            marks.push("stale");
        }
        if r.validation == Validation::Superseded {
            marks.push("superseded");
        }
        if r.data.get("contradicted_by").is_some() {
            marks.push("contradicted");
        }
        if r.consolidated_into().is_some() {
            marks.push("consolidated");
        }
        if weak {
            marks.push("weak match");
        }
        Recalled {
            memory: r,
            score,
            why,
            marks,
        }
    }
}

/// Whether a result came by meaning alone (the vector list, and its incident's rank, which only
/// adds to records some other list found) with a cosine under the query's chance level.
fn is_weak(lists: &[&'static str], cosine: Option<f32>, chance: Option<f32>) -> bool {
    let by_meaning_only = lists.iter().all(|l| matches!(*l, "semantic" | "incident"));
    by_meaning_only && matches!((cosine, chance), (Some(c), Some(f)) if c < f)
}

/// What an empty recall says: that memory is empty, that nothing is stored for the query's
/// service (and nothing elsewhere matched), or that nothing matched at all.
fn empty_notice(index: &RecallIndex, service: Option<&str>) -> String {
    if index.is_empty() {
        return format!("{NOTHING_FOUND}: organizational memory is empty (nothing learned yet)");
    }
    match service {
        Some(s) if !index.has_service(s) => format!(
            "{NOTHING_FOUND}: nothing is stored for {s}, and nothing stored elsewhere matched"
        ),
        _ => format!(
            "{NOTHING_FOUND}: no stored record shares words, failure modes or action kinds with \
             this text"
        ),
    }
}

/// What a non-empty recall says when its results are thin: every result came only through the
/// service (no shared word, failure mode, action kind or meaning), or only by weak meaning.
fn thin_notice(results: &[Recalled], service: Option<&str>, chance: Option<f32>) -> Option<String> {
    if results.is_empty() {
        return None;
    }
    let through_service_only = results.iter().all(|r| {
        r.why.matched_terms.is_empty()
            && r.why.tags.is_empty()
            && r.why.action_kinds.is_empty()
            && !r.why.services.is_empty()
            && r.why.cosine.is_none_or(|c| chance.is_some_and(|f| c < f))
    });
    let weak = results
        .iter()
        .filter(|r| r.marks.contains(&"weak match"))
        .count();
    if through_service_only {
        Some(format!(
            "Matches exist only through the service{}: no stored record shares words, failure \
             modes or action kinds with this text",
            service.map(|s| format!(" ({s})")).unwrap_or_default()
        ))
    } else if weak == results.len() {
        Some(format!(
            "Only weak matches by meaning: each of the {weak} is under this query's chance level \
             (cosine {:.2}); treat them as unrelated",
            chance.unwrap_or_default()
        ))
    } else if weak > 0 {
        Some(format!(
            "{weak} of {} results are weak matches by meaning (cosine under {:.2}, this query's \
             chance level), marked",
            results.len(),
            chance.unwrap_or_default()
        ))
    } else {
        None
    }
}

/// Marks a remediation record `contradicted` when the result also holds the opposite verdict for
/// the same action on a shared service.
fn mark_contradictions(results: &mut [Recalled]) {
    let outcomes: Vec<(ActionKind, MemoryKind, Vec<String>)> = results
        .iter()
        .filter_map(|r| {
            r.memory
                .action_kind
                .map(|a| (a, r.memory.kind, r.memory.services.clone()))
        })
        .collect();
    for r in results.iter_mut() {
        let Some(a) = r.memory.action_kind else {
            continue;
        };
        let opposite = match r.memory.kind {
            MemoryKind::RemediationFailure => MemoryKind::RemediationSuccess,
            MemoryKind::RemediationSuccess => MemoryKind::RemediationFailure,
            _ => continue,
        };
        if outcomes.iter().any(|(oa, ok, os)| {
            *oa == a && *ok == opposite && os.iter().any(|s| r.memory.services.contains(s))
        }) && !r.marks.contains(&"contradicted")
        {
            r.marks.push("contradicted");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn years_numbers_and_timestamp_pieces_are_not_shown_as_matched_words() {
        let shown: Vec<String> =
            content_words("INC-2026-0042 at 2026-11-29T14:05:12Z: 5xx from http2 after 30000ms")
                .into_iter()
                .filter(|w| is_displayable_word(w))
                .collect();
        assert_eq!(shown, ["inc", "5xx", "http2"]);
    }

    #[test]
    fn negated_findings_are_dropped_to_the_end_of_their_clause() {
        assert_eq!(
            strip_negated("workers: 40 'busy', 0 'stuck on locks'; p50 12 ms"),
            "workers: 40 'busy', ; p50 12 ms"
        );
        assert_eq!(
            strip_negated("queue depth rising on 8/8 shards; no parse failures"),
            "queue depth rising on 8/8 shards; "
        );
        assert_eq!(
            strip_negated("retried without backoff. Disk fine"),
            "retried . Disk fine"
        );
        // Not cues: parts of numbers, paths and words.
        for kept in [
            "error rate 0.2% -> 38%",
            "wrote /var/0/log",
            "nothing to see, notation",
        ] {
            assert_eq!(strip_negated(kept), kept);
        }
    }

    #[test]
    fn negation_ends_at_but_and_never_cuts_inside_a_character() {
        assert_eq!(
            strip_negated("no errors but the pool is exhausted"),
            "but the pool is exhausted"
        );
        assert!(
            derive_tags("no errors but the pool is exhausted")
                .contains(&"connection_pool_exhausted".into())
        );
        assert!(
            derive_tags("pg: write to \"pg_wal/0001\" failed: No space left on device")
                .contains(&"disk_full".into())
        );
        // Characters whose lower case has another byte length (Ⱥ grows, the Ångström and
        // Kelvin signs shrink) around a cue.
        for s in ["ȺȺȺ0 ñÅÅÅ", "İİİ0 ñKẞ", "ñ no İ errors", "0 ẞẞ, 0 Ⱥ"] {
            let out = strip_negated(s);
            assert!(out.len() <= s.len(), "{s} → {out}");
        }
        assert_eq!(strip_negated("ȺȺȺ 0 ñÅÅÅ, ok"), "ȺȺȺ , ok");
    }

    #[test]
    fn a_cue_inside_a_failure_phrase_is_kept() {
        for kept in [
            "write failed: No space left on device",
            "dial tcp: lookup db.internal: no such host",
            "connections not returned to the pool",
        ] {
            assert_eq!(strip_negated(kept), kept, "{kept}");
        }
        assert!(derive_tags("write failed: No space left on device").contains(&"disk_full".into()));
        assert!(!derive_tags("0 'unclosed client session'").contains(&"connection_leak".into()));
        assert!(
            derive_tags("25 warnings 'unclosed client session'")
                .contains(&"connection_leak".into())
        );
    }

    #[test]
    fn a_match_by_meaning_alone_under_the_chance_level_is_weak() {
        let chance = Some(0.31);
        assert!(is_weak(&["semantic"], Some(0.12), chance));
        assert!(is_weak(&["semantic", "incident"], Some(0.30), chance));
        // Above chance, or found by another list too, or no chance level known: not weak.
        assert!(!is_weak(&["semantic"], Some(0.45), chance));
        assert!(!is_weak(&["text", "semantic"], Some(0.12), chance));
        assert!(!is_weak(&["semantic"], Some(0.12), None));
        assert!(!is_weak(&["scope"], None, chance));
    }

    #[test]
    fn score_fusion_keeps_the_margin_that_ranks_throw_away() {
        let list = |name: &'static str, xs: &[(&str, f32)]| -> IncidentList {
            (
                name,
                xs.iter()
                    .map(|(i, s)| ((*i).to_string(), Some(*s)))
                    .collect(),
            )
        };
        // Each incident is first in one list and second in the other: a tie by rank. In the
        // first list the two are almost level; in the second, "b" is far ahead.
        let lists = || {
            vec![
                list("doc_vector", &[("a", 0.50), ("b", 0.49), ("c", 0.10)]),
                list("passages", &[("b", 0.90), ("a", 0.30), ("c", 0.20)]),
            ]
        };
        let ids = |m: Vec<IncidentMatch>| -> Vec<String> {
            m.into_iter().map(|m| m.incident_id).collect()
        };
        assert_eq!(ids(fuse_incidents(lists(), 0.0)), ["a", "b", "c"]);
        assert_eq!(ids(fuse_incidents(lists(), SCORE_SHARE)), ["b", "a", "c"]);
        let fused = fuse_incidents(lists(), SCORE_SHARE);
        assert_eq!(fused[0].ranks, [2, 1]);
        assert_eq!(fused[0].cosine, Some(0.49));
    }

    #[test]
    fn the_chance_level_is_two_deviations_over_the_mean() {
        assert_eq!(super::embeddings::chance_level([0.1; 5]), None);
        let mut cosines = vec![0.1f32; 10];
        cosines.extend([0.3f32; 10]);
        let level = super::embeddings::chance_level(cosines).unwrap();
        assert!((level - 0.4).abs() < 1e-5, "{level}");
    }

    #[test]
    fn the_load_shape_tells_a_surge_from_steady_traffic() {
        for surge in [
            "search rps 450 -> 1,200 at 08:30",
            "traffic jumped from 2.5k to 9k rps within a minute",
            "Traffic went from 800 to 4k.",
            "request rate 3k → 12k rps",
        ] {
            assert_eq!(load_shape(surge), Some("traffic_surge"), "{surge}");
        }
        for steady in [
            "request rate flat at ~510 rps (normal)",
            "inbound qps holding steady around 70/s, like yesterday",
            "Traffic looks normal; caches warm",
        ] {
            assert_eq!(load_shape(steady), Some("steady_load"), "{steady}");
        }
        for neither in [
            "request rate 300 -> 350 rps",
            "success ratio 99% -> 21%",
            "traffic dashboard for 2024-05-01 to 2024-05-02",
            "traffic report 10:00 to 12:00",
            "workers 12/12 busy",
        ] {
            assert_eq!(load_shape(neither), None, "{neither}");
        }
    }
}
