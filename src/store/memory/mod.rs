//! Records (working and durable memory), their structured keys, links, history, the FTS5 index
//! and the service dependency graph. Retracted records are excluded from every candidate query.
//!
//! One module of SQL for records, by concern: this file reads records whole (one, several, a
//! filtered list, a record's history); [`write`] inserts and changes them; [`search`] holds the
//! full-text searches and the term statistics recall bounds them by; [`outcomes`] reads what was
//! tried during past incidents (remediations, rejections, dead ends); [`export`] reads and
//! restores the whole memory.

mod export;
mod outcomes;
mod search;
mod write;

use sqlx::AnyPool;

use super::{Backend, Tx, parse_db_time};
use crate::domain::memory::MemoryRecord;
use crate::domain::{
    ActionKind, Confidence, EpistemicType, MemoryKind, Rule, RuleSeverity, Validation,
};
use crate::error::{AppError, AppResult};
pub use export::{all, existing_ids, restore, restore_links};
pub use outcomes::{dead_ends_for, outcomes_of_actions, outcomes_of_incidents};
pub use search::{
    Candidate, fts_candidates, fts_matches, fts_or_query, fts_or_terms, fts_terms,
    newest_match_floor, term_doc_counts,
};
pub(in crate::store) use search::{CandidateJson, parse_candidate};
pub(in crate::store) use write::scope_of;
pub use write::{
    add_dependency, add_history, bump_evidence, insert, insert_bulk, mark_contradicted,
    set_validation, touch_recalled,
};

#[derive(sqlx::FromRow)]
struct Row {
    id: i64,
    kind: String,
    epistemic_type: String,
    text: String,
    services: String,
    failure_modes: String,
    action_kind: Option<String>,
    target: Option<String>,
    incident_id: Option<String>,
    validation: String,
    confidence: Option<String>,
    importance: i64,
    rule_always: Option<String>,
    rule_because: Option<String>,
    rule_scope: Option<String>,
    rule_severity: Option<String>,
    author: String,
    created_at: String,
    last_recalled_at: Option<String>,
    recall_count: i64,
    evidence_count: i64,
    superseded_by: Option<i64>,
    data: String,
    sources: Option<String>,
}

const SELECT: &str = "SELECT r.id, r.kind, r.epistemic_type, r.text, r.services, r.failure_modes, r.action_kind,
    r.target, r.incident_id, r.validation, r.confidence, r.importance, r.rule_always, r.rule_because,
    r.rule_scope, r.rule_severity, r.author, r.created_at, r.last_recalled_at, r.recall_count,
    r.evidence_count, r.superseded_by, r.data,
    (SELECT string_agg(CAST(to_id AS TEXT), ',' ORDER BY to_id) FROM record_links l WHERE l.from_id = r.id) AS sources
    FROM records r";

pub(in crate::store) fn corrupt(e: impl std::fmt::Display) -> AppError {
    AppError::Internal(anyhow::anyhow!("stored record: {e}"))
}

impl Row {
    fn into_record(self) -> AppResult<MemoryRecord> {
        let rule = match (
            self.rule_always,
            self.rule_because,
            self.rule_scope,
            self.rule_severity,
        ) {
            (Some(always), Some(because), Some(scope), Some(sev)) => Some(Rule {
                always,
                because,
                scope,
                severity: RuleSeverity::parse(&sev).map_err(corrupt)?,
            }),
            _ => None,
        };
        Ok(MemoryRecord {
            id: self.id,
            kind: MemoryKind::parse(&self.kind).map_err(corrupt)?,
            epistemic_type: EpistemicType::parse(&self.epistemic_type).map_err(corrupt)?,
            text: self.text,
            services: serde_json::from_str(&self.services).map_err(corrupt)?,
            failure_modes: serde_json::from_str(&self.failure_modes).map_err(corrupt)?,
            action_kind: self
                .action_kind
                .as_deref()
                .map(ActionKind::parse)
                .transpose()
                .map_err(corrupt)?,
            target: self.target,
            incident_id: self.incident_id,
            validation: Validation::parse(&self.validation).map_err(corrupt)?,
            confidence: self
                .confidence
                .as_deref()
                .map(Confidence::parse)
                .transpose()
                .map_err(corrupt)?,
            importance: self.importance,
            rule,
            author: self.author,
            created_at: parse_db_time(&self.created_at)?,
            last_recalled_at: self
                .last_recalled_at
                .as_deref()
                .map(parse_db_time)
                .transpose()?,
            recall_count: self.recall_count,
            evidence_count: self.evidence_count,
            superseded_by: self.superseded_by,
            sources: self
                .sources
                .unwrap_or_default()
                .split(',')
                .filter_map(|s| s.parse().ok())
                .collect(),
            data: serde_json::from_str(&self.data).map_err(corrupt)?,
        })
    }
}

/// Loads one record with its source ids.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown id.
pub async fn record(pool: &AnyPool, id: i64) -> AppResult<MemoryRecord> {
    let sql = format!("{SELECT} WHERE r.id = $1");
    let row: Option<Row> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(id)
        .fetch_optional(pool)
        .await?;
    row.ok_or_else(|| AppError::NotFound(format!("memory {id}")))?
        .into_record()
}

/// Same as [`record`] inside a transaction.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown id.
pub async fn get_in(tx: &mut Tx, id: i64) -> AppResult<MemoryRecord> {
    let sql = format!("{SELECT} WHERE r.id = $1");
    let row: Option<Row> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(id)
        .fetch_optional(&mut **tx)
        .await?;
    row.ok_or_else(|| AppError::NotFound(format!("memory {id}")))?
        .into_record()
}

/// Loads several records by id, in the order of `ids` (unknown ids skipped).
///
/// # Errors
/// Database errors.
pub async fn get_many(pool: &AnyPool, ids: &[i64]) -> AppResult<Vec<MemoryRecord>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let list = serde_json::to_string(ids).map_err(corrupt)?;
    let sql = format!("{SELECT} WHERE r.id IN (SELECT CAST(value AS BIGINT) FROM json_each($1))");
    let rows: Vec<Row> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(list)
        .fetch_all(pool)
        .await?;
    let mut recs: Vec<MemoryRecord> = rows
        .into_iter()
        .map(Row::into_record)
        .collect::<AppResult<_>>()?;
    recs.sort_by_key(|r| ids.iter().position(|i| *i == r.id).unwrap_or(usize::MAX));
    Ok(recs)
}

/// [`get_many`] of `ids`, and the records that replaced them
/// ([`MemoryRecord::replaced_by`]) and are not among them, first seen first (unknown ids
/// skipped).
///
/// # Errors
/// Database errors.
pub async fn get_many_with_replacements(
    pool: &AnyPool,
    ids: &[i64],
) -> AppResult<(Vec<MemoryRecord>, Vec<MemoryRecord>)> {
    let records = get_many(pool, ids).await?;
    let mut by: Vec<i64> = Vec::new();
    for id in records.iter().filter_map(MemoryRecord::replaced_by) {
        if !by.contains(&id) && !ids.contains(&id) {
            by.push(id);
        }
    }
    let replacements = get_many(pool, &by).await?;
    Ok((records, replacements))
}

/// Filters for [`list`]; `None` / empty means any.
#[derive(Debug, Clone, Default)]
pub struct MemoryFilter {
    /// Full-text query (FTS5 terms, OR-ed).
    pub q: Option<String>,
    /// Only this kind.
    pub kind: Option<MemoryKind>,
    /// Only records keyed to this service.
    pub service: Option<String>,
    /// Only records keyed to this failure mode.
    pub failure_mode: Option<String>,
    /// Only records from this incident.
    pub incident: Option<String>,
    /// Only this validation state.
    pub validation: Option<Validation>,
    /// Include working records (observations, hypotheses…); default durable only.
    pub include_working: bool,
    /// At most this many (default 200, max 1000).
    pub limit: Option<i64>,
    /// Oldest first instead of newest first (ignored with `q`, which orders by relevance).
    pub oldest_first: bool,
    /// Keyset pagination without `q`: only records after this id in the list's order.
    pub after_id: Option<i64>,
    /// Keyset pagination backwards without `q`: only the records just before this id in the
    /// list's order (the page before the one that starts with it), still in the list's order.
    pub before_id: Option<i64>,
    /// With `q`: skip this many of the best matches (a search's later pages; relevance has no
    /// stable key to page on). Ignored without `q`.
    pub offset: Option<i64>,
    /// With `q`: order the matches by date ([`MemoryFilter::oldest_first`]) instead of relevance.
    pub by_date: bool,
}

/// Durable kinds as a JSON array, for `IN (SELECT value FROM json_each(?))`.
pub(in crate::store) fn durable_kinds_json() -> String {
    let kinds: Vec<&str> = MemoryKind::ALL
        .iter()
        .filter(|k| k.is_durable())
        .map(|k| k.as_str())
        .collect();
    serde_json::to_string(&kinds).unwrap_or_else(|_| "[]".into())
}

/// Lists records, newest first (or by relevance when `q` is set, unless
/// [`MemoryFilter::by_date`]).
///
/// Only the filters that are set reach the SQL, so SQLite can pick the index they match
/// (`records_incident` for an incident's records, `records_kind` for a kind): a generic
/// `(? IS NULL OR col = ?)` form hides every index and scans the whole table.
///
/// # Errors
/// Database errors.
pub async fn list(pool: &AnyPool, f: &MemoryFilter) -> AppResult<Vec<MemoryRecord>> {
    let mut q = Filtered::new(Backend::of(pool), f, SELECT)?;
    let fts = q.fts.clone();
    let backwards = fts.is_none() && f.before_id.is_some() && f.after_id.is_none();
    let mut order = String::new();
    match (&fts, f.after_id, f.before_id) {
        (Some(p), _, _) => {
            if !f.by_date {
                order = match q.backend {
                    Backend::Sqlite => " ORDER BY bm25(records_fts, 1.0, 0.5)".into(),
                    Backend::Postgres => format!(
                        " ORDER BY ts_rank_cd(records_fts.tsv, websearch_to_tsquery('incidentmind', {p})) DESC, r.id DESC"
                    ),
                };
            }
        }
        (None, Some(after), _) => {
            q.sql.push_str(if f.oldest_first {
                " AND r.id > "
            } else {
                " AND r.id < "
            });
            q.bind_int(after)?;
        }
        (None, None, Some(before)) => {
            q.sql.push_str(if f.oldest_first {
                " AND r.id < "
            } else {
                " AND r.id > "
            });
            q.bind_int(before)?;
        }
        (None, None, None) => {}
    }
    if order.is_empty() {
        // Backwards, the page just before is read in the reverse order, then turned round.
        order = if f.oldest_first != backwards {
            " ORDER BY r.id ASC"
        } else {
            " ORDER BY r.id DESC"
        }
        .into();
    }
    q.sql.push_str(&order);
    q.sql.push_str(" LIMIT ");
    q.bind_int(f.limit.unwrap_or(200).clamp(1, 1000))?;
    if let (Some(_), Some(skip)) = (&fts, f.offset.filter(|n| *n > 0)) {
        q.sql.push_str(" OFFSET ");
        q.bind_int(skip)?;
    }
    let rows: Vec<Row> = sqlx::query_as_with(sqlx::AssertSqlSafe(q.sql), q.args)
        .fetch_all(pool)
        .await?;
    let mut records = rows
        .into_iter()
        .map(Row::into_record)
        .collect::<AppResult<Vec<_>>>()?;
    if backwards {
        records.reverse();
    }
    Ok(records)
}

/// How many records [`list`] would give for `f` without a limit or page (the Memory page's
/// "123 records"), counting at most `cap` (a count past it says "more than").
///
/// # Errors
/// Database errors.
pub async fn count(pool: &AnyPool, f: &MemoryFilter, cap: i64) -> AppResult<i64> {
    let mut q = Filtered::new(Backend::of(pool), f, "SELECT r.id FROM records r")?;
    q.sql.push_str(" LIMIT ");
    q.bind_int(cap.max(1))?;
    let sql = format!("SELECT COUNT(*) FROM ({}) AS matched", q.sql);
    let (n,): (i64,) = sqlx::query_as_with(sqlx::AssertSqlSafe(sql), q.args)
        .fetch_one(pool)
        .await?;
    Ok(n)
}

/// The `SELECT … WHERE …` of a [`MemoryFilter`] (without order, keyset or limit) and its
/// arguments, numbered `$1…` (sqlx's QueryBuilder writes `?` for the Any driver, which
/// PostgreSQL does not take).
struct Filtered {
    backend: Backend,
    sql: String,
    args: sqlx::any::AnyArguments,
    /// The full-text query's placeholder (`$n`), when `q` is set and has terms.
    fts: Option<String>,
}

impl Filtered {
    fn new(backend: Backend, f: &MemoryFilter, select: &str) -> AppResult<Self> {
        let mut q = Self {
            backend,
            sql: select.to_string(),
            args: sqlx::any::AnyArguments::default(),
            fts: None,
        };
        let terms = f.q.as_deref().map(fts_or_query).filter(|t| !t.is_empty());
        if terms.is_some() {
            q.sql
                .push_str(" JOIN records_fts ON records_fts.rowid = r.id");
        }
        q.sql.push_str(" WHERE 1 = 1");
        if let Some(kind) = f.kind {
            q.sql.push_str(" AND r.kind = ");
            q.bind_text(kind.as_str().into())?;
        }
        if let Some(service) = f.service.as_deref() {
            q.sql.push_str(" AND EXISTS (SELECT 1 FROM record_keys k WHERE k.record_id = r.id AND k.key = 'service' AND k.value = ");
            q.bind_text(service.into())?;
            q.sql.push(')');
        }
        if let Some(mode) = f.failure_mode.as_deref() {
            q.sql.push_str(" AND EXISTS (SELECT 1 FROM record_keys k WHERE k.record_id = r.id AND k.key = 'failure_mode' AND k.value = ");
            q.bind_text(mode.into())?;
            q.sql.push(')');
        }
        if let Some(incident) = f.incident.as_deref() {
            q.sql.push_str(" AND r.incident_id = ");
            q.bind_text(incident.into())?;
        }
        if let Some(v) = f.validation {
            q.sql.push_str(" AND r.validation = ");
            q.bind_text(v.as_str().into())?;
        }
        if !(f.include_working || f.incident.is_some()) {
            q.sql
                .push_str(" AND r.kind IN (SELECT value FROM json_each(");
            q.bind_text(durable_kinds_json())?;
            q.sql.push_str("))");
        }
        if let Some(terms) = terms {
            let placeholder = q.arg(terms)?;
            match backend {
                Backend::Sqlite => q
                    .sql
                    .push_str(&format!(" AND records_fts MATCH {placeholder}")),
                Backend::Postgres => q.sql.push_str(&format!(
                    " AND records_fts.tsv @@ websearch_to_tsquery('incidentmind', {placeholder})"
                )),
            }
            q.fts = Some(placeholder);
        }
        Ok(q)
    }

    /// Adds argument `v` and gives its placeholder (`$n`).
    fn arg<T>(&mut self, v: T) -> AppResult<String>
    where
        T: for<'q> sqlx::Encode<'q, sqlx::Any> + sqlx::Type<sqlx::Any> + Send + 'static,
    {
        use sqlx::Arguments as _;
        self.args
            .add(v)
            .map_err(|e| AppError::Internal(anyhow::anyhow!("bind: {e}")))?;
        Ok(format!("${}", self.args.len()))
    }

    /// Adds text argument `v` at the end of the SQL.
    fn bind_text(&mut self, v: String) -> AppResult<()> {
        let p = self.arg(v)?;
        self.sql.push_str(&p);
        Ok(())
    }

    /// Adds integer argument `v` at the end of the SQL.
    fn bind_int(&mut self, v: i64) -> AppResult<()> {
        let p = self.arg(v)?;
        self.sql.push_str(&p);
        Ok(())
    }
}

/// A record's history, oldest first: `(at, actor, change, detail)`.
///
/// # Errors
/// Database errors.
pub async fn history(pool: &AnyPool, id: i64) -> AppResult<Vec<(String, String, String, String)>> {
    Ok(sqlx::query_as(
        "SELECT at, actor, change, detail FROM record_history WHERE record_id = $1 ORDER BY id",
    )
    .bind(id)
    .fetch_all(pool)
    .await?)
}
