//! Full-text search over durable records: the FTS5 expressions recall and the memory list
//! build, BM25 candidates, term statistics (record counts, the newest-match floor) and what
//! recall needs of a candidate to rank it.

use sqlx::AnyPool;

use super::{corrupt, durable_kinds_json};
use crate::domain::{MemoryKind, Validation};
use crate::error::AppResult;
use crate::store::{Backend, parse_db_time};

/// Turns free text into an FTS5 expression: each word (letters/digits, ≥ 2 chars) quoted and
/// OR-ed, at most 40 words. Quoting makes any user text safe to pass to MATCH.
pub fn fts_or_query(text: &str) -> String {
    fts_or_terms(&fts_terms(text))
}

/// The words [`fts_or_query`] OR-s: lower-case, letters/digits, ≥ 2 chars, deduplicated, in
/// order, at most 40.
pub fn fts_terms(text: &str) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 2)
        .map(str::to_lowercase)
        .filter(|w| seen.insert(w.clone()))
        .take(40)
        .collect()
}

/// An FTS5 expression OR-ing `terms` (each quoted; see [`fts_terms`]).
pub fn fts_or_terms(terms: &[String]) -> String {
    terms
        .iter()
        .map(|w| format!("\"{w}\""))
        .collect::<Vec<_>>()
        .join(" OR ")
}

/// BM25 candidates for an FTS5 expression among durable, non-retracted records: `(id, rank)`
/// best first. `kinds` restricts the kinds (empty = all durable); `exclude_incident` drops one
/// incident's own records.
///
/// # Errors
/// Database errors (an FTS syntax error cannot happen with [`fts_or_query`] output).
pub async fn fts_candidates(
    pool: &AnyPool,
    expr: &str,
    kinds: &[MemoryKind],
    exclude_incident: Option<&str>,
    limit: i64,
) -> AppResult<Vec<i64>> {
    if expr.is_empty() {
        return Ok(Vec::new());
    }
    let kinds_json = if kinds.is_empty() {
        durable_kinds_json()
    } else {
        serde_json::to_string(&kinds.iter().map(|k| k.as_str()).collect::<Vec<_>>())
            .map_err(corrupt)?
    };
    let ids: Vec<i64> = sqlx::query_scalar(Backend::of(pool).sql(
        "SELECT r.id FROM records_fts JOIN records r ON r.id = records_fts.rowid
         WHERE records_fts MATCH $1 AND r.validation != 'retracted'
           AND r.kind IN (SELECT value FROM json_each($2))
           AND ($3 IS NULL OR r.incident_id IS NULL OR r.incident_id != $4)
         ORDER BY bm25(records_fts, 1.0, 0.6) LIMIT $5",
        "SELECT r.id FROM records_fts JOIN records r ON r.id = records_fts.rowid
         WHERE records_fts.tsv @@ websearch_to_tsquery('incidentmind', $1)
           AND r.validation != 'retracted'
           AND r.kind IN (SELECT value FROM json_each($2))
           AND ($3 IS NULL OR r.incident_id IS NULL OR r.incident_id != $4)
         ORDER BY ts_rank_cd(records_fts.tsv, websearch_to_tsquery('incidentmind', $1)) DESC, r.id
         LIMIT $5",
    ))
    .bind(expr)
    .bind(kinds_json)
    .bind(exclude_incident)
    .bind(exclude_incident)
    .bind(limit)
    .fetch_all(pool)
    .await?;
    Ok(ids)
}

/// How many searchable records contain each of `words` (letters/digits only, as
/// [`fts_terms`] splits them), counting at most `cap` per word: a word matching `cap` or more
/// records reports `cap`, so a common word costs no more than `cap` index entries. Same order as
/// `words`.
///
/// # Errors
/// Database errors.
pub async fn term_doc_counts(pool: &AnyPool, words: &[String], cap: i64) -> AppResult<Vec<i64>> {
    if words.is_empty() {
        return Ok(Vec::new());
    }
    let quoted: Vec<String> = words
        .iter()
        .map(|w| {
            let w: String = w.chars().filter(|c| c.is_alphanumeric()).collect();
            format!("\"{w}\"")
        })
        .collect();
    // One row (a JSON array): rows cross a thread boundary one by one, arrays do not.
    let counts: String = sqlx::query_scalar(Backend::of(pool).sql(
        "SELECT json_group_array((SELECT count(*) FROM (
                    SELECT 1 FROM records_fts WHERE records_fts MATCH j.value LIMIT $2)) ORDER BY j.key)
         FROM json_each($1) j",
        "SELECT json_group_array((SELECT count(*) FROM (
                    SELECT 1 FROM records_fts
                    WHERE tsv @@ websearch_to_tsquery('incidentmind', j.value) LIMIT $2) AS m)
                ORDER BY j.key)
         FROM json_each($1) j",
    ))
    .bind(serde_json::to_string(&quoted).map_err(corrupt)?)
    .bind(cap)
    .fetch_one(pool)
    .await?;
    serde_json::from_str(&counts).map_err(corrupt)
}

/// What recall needs of a candidate to rank it, before it loads the whole record.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// Record id.
    pub id: i64,
    /// Kind.
    pub kind: MemoryKind,
    /// Validation state.
    pub validation: Validation,
    /// When it was written.
    pub created_at: jiff::Timestamp,
    /// 1 (low) … 4 (critical).
    pub importance: i64,
    /// How many learnings confirmed it.
    pub evidence_count: i64,
    /// The merged rule it was consolidated into (`data.consolidated_into`), if any.
    pub consolidated_into: Option<i64>,
}

/// A [`Candidate`] as `json_array(id, kind, validation, created_at, importance, evidence_count,
/// consolidated_into)`.
pub(in crate::store) type CandidateJson = (i64, String, String, String, i64, i64, Option<i64>);

pub(in crate::store) fn parse_candidate(
    (id, kind, validation, created_at, importance, evidence_count, consolidated_into): CandidateJson,
) -> AppResult<Candidate> {
    Ok(Candidate {
        id,
        kind: MemoryKind::parse(&kind).map_err(corrupt)?,
        validation: Validation::parse(&validation).map_err(corrupt)?,
        created_at: parse_db_time(&created_at)?,
        importance,
        evidence_count,
        consolidated_into,
    })
}

/// Every match of the FTS5 expression `expr` among records with id ≥ `min_rowid`, as record ids
/// best BM25 first (columns weighted text 1.0, scope 0.6), at most `cap`. Only durable records
/// are indexed and a retraction removes its entry; the caller still checks each id against
/// [`super::recall_index`] (kind filters, excluded incident, a retraction since). BM25 scores every
/// match to sort them, so the cost follows the number of matches: recall bounds it through its
/// term budget and `min_rowid`.
///
/// # Errors
/// Database errors.
pub async fn fts_matches(
    pool: &AnyPool,
    expr: &str,
    min_rowid: i64,
    cap: i64,
) -> AppResult<Vec<i64>> {
    if expr.is_empty() {
        return Ok(Vec::new());
    }
    // One row (a JSON array): rows cross a thread boundary one by one, arrays do not.
    let rows: String = sqlx::query_scalar(Backend::of(pool).sql(
        "SELECT json_group_array(id ORDER BY s, id) FROM (
             SELECT rowid AS id, bm25(records_fts, 1.0, 0.6) AS s FROM records_fts
             WHERE records_fts MATCH $1 AND rowid >= $2 ORDER BY s LIMIT $3)",
        "SELECT coalesce(json_group_array(id ORDER BY s, id), '[]') FROM (
             SELECT rowid AS id, -ts_rank_cd(tsv, websearch_to_tsquery('incidentmind', $1)) AS s
             FROM records_fts
             WHERE tsv @@ websearch_to_tsquery('incidentmind', $1) AND rowid >= $2
             ORDER BY s, id LIMIT $3) AS m",
    ))
    .bind(expr)
    .bind(min_rowid)
    .bind(cap)
    .fetch_one(pool)
    .await?;
    serde_json::from_str(&rows).map_err(corrupt)
}

/// The id of the `n`-th newest record whose text holds `word` (1-based), or `None` when fewer
/// hold it: the lowest id a search for `word` among its `n` newest matches needs to look at.
///
/// # Errors
/// Database errors.
pub async fn newest_match_floor(pool: &AnyPool, word: &str, n: i64) -> AppResult<Option<i64>> {
    let word: String = word.chars().filter(|c| c.is_alphanumeric()).collect();
    Ok(sqlx::query_scalar(Backend::of(pool).sql(
        "SELECT rowid FROM records_fts WHERE records_fts MATCH $1 ORDER BY rowid DESC LIMIT 1 OFFSET $2",
        "SELECT rowid FROM records_fts WHERE tsv @@ websearch_to_tsquery('incidentmind', $1)
         ORDER BY rowid DESC LIMIT 1 OFFSET $2",
    ))
    .bind(format!("\"{word}\""))
    .bind((n - 1).max(0))
    .fetch_optional(pool)
    .await?)
}
