//! Records (working and durable memory), their structured keys, links, history, the FTS5 index
//! and the service dependency graph. Retracted records are excluded from every candidate query.
//!
//! Long because it is the one module of SQL for records: every query on the records, their keys,
//! links, history and FTS index sits here, as `store/` keeps one module per aggregate.

use sqlx::AnyPool;

use super::{Backend, Tx, db_time, now, parse_db_time};
use crate::domain::memory::{MemoryRecord, NewRecord};
use crate::domain::{
    ActionKind, Confidence, EpistemicType, MemoryKind, Rule, RuleSeverity, Validation,
};
use crate::error::{AppError, AppResult};

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

pub(super) fn corrupt(e: impl std::fmt::Display) -> AppError {
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

/// Words indexed beside the text so scope matches by search too: services, tags, action kind.
fn scope_text(r: &NewRecord) -> String {
    scope_of(
        &r.services,
        &r.failure_modes,
        r.action_kind.map(ActionKind::as_str),
    )
}

/// The `scope` column of a record's full-text entry: its services, failure modes and action
/// kind as words (`payments-api` → `payments api`).
pub(super) fn scope_of(
    services: &[String],
    failure_modes: &[String],
    action_kind: Option<&str>,
) -> String {
    let mut s = String::new();
    for part in services.iter().chain(failure_modes.iter()) {
        s.push_str(&part.replace(['_', '-'], " "));
        s.push(' ');
    }
    if let Some(a) = action_kind {
        s.push_str(&a.replace('_', " "));
    }
    s
}

/// Inserts a record with its keys, links, FTS entry (durable kinds only) and a history entry,
/// inside the caller's transaction. With an `origin` already present, writes nothing and returns
/// the existing record's id and `false`.
///
/// # Errors
/// Database errors.
pub async fn insert(tx: &mut Tx, r: &NewRecord, at: jiff::Timestamp) -> AppResult<(i64, bool)> {
    insert_as(tx, r, at, None).await
}

/// [`insert`] with the id given (`explicit`, for an import) or assigned by the database.
async fn insert_as(
    tx: &mut Tx,
    r: &NewRecord,
    at: jiff::Timestamp,
    explicit: Option<i64>,
) -> AppResult<(i64, bool)> {
    if let Some(origin) = &r.origin {
        let existing: Option<i64> = sqlx::query_scalar("SELECT id FROM records WHERE origin = $1")
            .bind(origin)
            .fetch_optional(&mut **tx)
            .await?;
        if let Some(id) = existing {
            return Ok((id, false));
        }
    }
    let rule = r.rule.as_ref();
    let (id_column, id_value) = if explicit.is_some() {
        ("id, ", "$20, ")
    } else {
        ("", "")
    };
    let sql = format!(
        "INSERT INTO records ({id_column}kind, epistemic_type, text, services, failure_modes,
            action_kind, target, incident_id, validation, confidence, importance, rule_always,
            rule_because, rule_scope, rule_severity, author, created_at, origin, data)
         VALUES ({id_value}$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16,
            $17, $18, $19) RETURNING id"
    );
    let mut query = sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql))
        .bind(r.kind.as_str())
        .bind(r.epistemic_type.as_str())
        .bind(&r.text)
        .bind(serde_json::to_string(&r.services).map_err(corrupt)?)
        .bind(serde_json::to_string(&r.failure_modes).map_err(corrupt)?)
        .bind(r.action_kind.map(ActionKind::as_str))
        .bind(r.target.as_deref())
        .bind(r.incident_id.as_deref())
        .bind(r.validation.as_str())
        .bind(r.confidence.map(Confidence::as_str))
        .bind(r.importance)
        .bind(rule.map(|x| x.always.as_str()))
        .bind(rule.map(|x| x.because.as_str()))
        .bind(rule.map(|x| x.scope.as_str()))
        .bind(rule.map(|x| x.severity.as_str()))
        .bind(&r.author)
        .bind(db_time(at))
        .bind(r.origin.as_deref())
        .bind(if r.data.is_null() {
            "{}".to_string()
        } else {
            r.data.to_string()
        });
    if let Some(id) = explicit {
        query = query.bind(id);
    }
    let id: i64 = query.fetch_one(&mut **tx).await?;
    let keys = r
        .services
        .iter()
        .map(|s| ("service", s.as_str()))
        .chain(r.failure_modes.iter().map(|t| ("failure_mode", t.as_str())))
        .chain(r.action_kind.map(|a| ("action_kind", a.as_str())));
    for (key, value) in keys {
        sqlx::query(
            "INSERT INTO record_keys (key, value, record_id) VALUES ($1, $2, $3) \
             ON CONFLICT DO NOTHING",
        )
        .bind(key)
        .bind(value)
        .bind(id)
        .execute(&mut **tx)
        .await?;
    }
    for to in &r.cites {
        sqlx::query(
            "INSERT INTO record_links (from_id, to_id, relation) VALUES ($1, $2, 'cites') \
             ON CONFLICT DO NOTHING",
        )
        .bind(id)
        .bind(to)
        .execute(&mut **tx)
        .await?;
    }
    if r.kind.is_durable() {
        sqlx::query("INSERT INTO records_fts (rowid, text, scope) VALUES ($1, $2, $3)")
            .bind(id)
            .bind(&r.text)
            .bind(scope_text(r))
            .execute(&mut **tx)
            .await?;
    }
    add_history(tx, id, &r.author, "created", r.validation.as_str(), at).await?;
    Ok((id, true))
}

/// Records per statement in [`insert_bulk`].
const BULK_CHUNK: usize = 1000;

/// Inserts many records inside the caller's transaction, writing exactly what [`insert`] writes
/// for each (the row, its keys, its `cites` links, the FTS entry for durable kinds, a `created`
/// history entry) but with five statements per thousand records instead of several per record.
/// Each record comes with its creation instant. Records with an `origin` go through [`insert`]
/// one by one, so idempotency holds. Returns the ids in input order. Like [`insert`], this is the
/// store layer: no redaction, citation check or audit entry (see `services::memory::write_in`).
///
/// # Errors
/// Database errors (e.g. a `cites` id that does not exist).
pub async fn insert_bulk(
    tx: &mut Tx,
    records: &[(NewRecord, jiff::Timestamp)],
) -> AppResult<Vec<i64>> {
    let mut ids = Vec::with_capacity(records.len());
    let mut batch: Vec<&(NewRecord, jiff::Timestamp)> = Vec::new();
    for item in records {
        if item.0.origin.is_some() {
            insert_batch(tx, &batch, &mut ids).await?;
            batch.clear();
            ids.push(insert(tx, &item.0, item.1).await?.0);
        } else {
            batch.push(item);
            if batch.len() == BULK_CHUNK {
                insert_batch(tx, &batch, &mut ids).await?;
                batch.clear();
            }
        }
    }
    insert_batch(tx, &batch, &mut ids).await?;
    Ok(ids)
}

/// One chunk of [`insert_bulk`] (records without `origin`): ids are assigned after the largest
/// existing one, as SQLite would, and every table is filled from one JSON array parameter.
async fn insert_batch(
    tx: &mut Tx,
    batch: &[&(NewRecord, jiff::Timestamp)],
    ids: &mut Vec<i64>,
) -> AppResult<()> {
    use serde_json::{Value, json};
    if batch.is_empty() {
        return Ok(());
    }
    let first: i64 = sqlx::query_scalar("SELECT COALESCE(MAX(id), 0) + 1 FROM records")
        .fetch_one(&mut **tx)
        .await?;
    let (mut rows, mut keys, mut links, mut fts, mut history) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (i, (r, at)) in batch.iter().enumerate() {
        let id = first + i as i64;
        let rule = r.rule.as_ref();
        let at = db_time(*at);
        rows.push(json!([
            id,
            r.kind.as_str(),
            r.epistemic_type.as_str(),
            r.text,
            serde_json::to_string(&r.services).map_err(corrupt)?,
            serde_json::to_string(&r.failure_modes).map_err(corrupt)?,
            r.action_kind.map(ActionKind::as_str),
            r.target,
            r.incident_id,
            r.validation.as_str(),
            r.confidence.map(Confidence::as_str),
            r.importance,
            rule.map(|x| x.always.as_str()),
            rule.map(|x| x.because.as_str()),
            rule.map(|x| x.scope.as_str()),
            rule.map(|x| x.severity.as_str()),
            r.author,
            at,
            if r.data.is_null() {
                "{}".to_string()
            } else {
                r.data.to_string()
            },
        ]));
        keys.extend(r.services.iter().map(|s| json!(["service", s, id])));
        keys.extend(
            r.failure_modes
                .iter()
                .map(|t| json!(["failure_mode", t, id])),
        );
        keys.extend(
            r.action_kind
                .map(|a| json!(["action_kind", a.as_str(), id])),
        );
        links.extend(r.cites.iter().map(|to| json!([id, to])));
        if r.kind.is_durable() {
            fts.push(json!([id, r.text, scope_text(r)]));
        }
        history.push(json!([id, r.author, r.validation.as_str(), at]));
        ids.push(id);
    }
    // Integers travel as JSON and come out of `->>` as text on PostgreSQL: cast them back.
    let statements: [(&str, Vec<Value>); 5] = [
        (
            "INSERT INTO records (id, kind, epistemic_type, text, services, failure_modes, action_kind,
                target, incident_id, validation, confidence, importance, rule_always, rule_because,
                rule_scope, rule_severity, author, created_at, data)
             SELECT CAST(v->>0 AS BIGINT), v->>1, v->>2, v->>3, v->>4, v->>5, v->>6, v->>7, v->>8,
                v->>9, v->>10, CAST(v->>11 AS BIGINT), v->>12, v->>13, v->>14, v->>15, v->>16,
                v->>17, v->>18
             FROM (SELECT value AS v FROM json_each($1)) AS j",
            rows,
        ),
        (
            "INSERT INTO record_keys (key, value, record_id)
             SELECT v->>0, v->>1, CAST(v->>2 AS BIGINT) FROM (SELECT value AS v FROM json_each($1)) AS j
             WHERE true ON CONFLICT DO NOTHING",
            keys,
        ),
        (
            "INSERT INTO record_links (from_id, to_id, relation)
             SELECT CAST(v->>0 AS BIGINT), CAST(v->>1 AS BIGINT), 'cites'
             FROM (SELECT value AS v FROM json_each($1)) AS j WHERE true ON CONFLICT DO NOTHING",
            links,
        ),
        (
            "INSERT INTO records_fts (rowid, text, scope)
             SELECT CAST(v->>0 AS BIGINT), v->>1, v->>2 FROM (SELECT value AS v FROM json_each($1)) AS j",
            fts,
        ),
        (
            "INSERT INTO record_history (record_id, at, actor, change, detail)
             SELECT CAST(v->>0 AS BIGINT), v->>3, v->>1, 'created', v->>2
             FROM (SELECT value AS v FROM json_each($1)) AS j",
            history,
        ),
    ];
    for (sql, values) in statements {
        if values.is_empty() {
            continue;
        }
        sqlx::query(sql)
            .bind(Value::Array(values).to_string())
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}

/// Records a change of a record (created, superseded, retracted, evidence bumped).
///
/// # Errors
/// Database errors.
pub async fn add_history(
    tx: &mut Tx,
    id: i64,
    actor: &str,
    change: &str,
    detail: &str,
    at: jiff::Timestamp,
) -> AppResult<()> {
    sqlx::query(
        "INSERT INTO record_history (record_id, at, actor, change, detail) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(id)
    .bind(db_time(at))
    .bind(actor)
    .bind(change)
    .bind(detail)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Loads one record with its source ids.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown id.
pub async fn get(pool: &AnyPool, id: i64) -> AppResult<MemoryRecord> {
    let sql = format!("{SELECT} WHERE r.id = $1");
    let row: Option<Row> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(id)
        .fetch_optional(pool)
        .await?;
    row.ok_or_else(|| AppError::NotFound(format!("memory {id}")))?
        .into_record()
}

/// Same as [`get`] inside a transaction.
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
    /// With `q`: skip this many of the best matches (a search's later pages; relevance has no
    /// stable key to page on). Ignored without `q`.
    pub offset: Option<i64>,
}

/// Durable kinds as a JSON array, for `IN (SELECT value FROM json_each(?))`.
pub(super) fn durable_kinds_json() -> String {
    let kinds: Vec<&str> = MemoryKind::ALL
        .iter()
        .filter(|k| k.is_durable())
        .map(|k| k.as_str())
        .collect();
    serde_json::to_string(&kinds).unwrap_or_else(|_| "[]".into())
}

/// Lists records, newest first (or by relevance when `q` is set).
///
/// Only the filters that are set reach the SQL, so SQLite can pick the index they match
/// (`records_incident` for an incident's records, `records_kind` for a kind): a generic
/// `(? IS NULL OR col = ?)` form hides every index and scans the whole table.
///
/// # Errors
/// Database errors.
pub async fn list(pool: &AnyPool, f: &MemoryFilter) -> AppResult<Vec<MemoryRecord>> {
    use sqlx::Arguments as _;
    let backend = Backend::of(pool);
    let fts = f.q.as_deref().map(fts_or_query).filter(|q| !q.is_empty());
    let mut sql = String::from(SELECT);
    let mut args = sqlx::any::AnyArguments::default();
    // Appends `$n` for the next argument (sqlx's QueryBuilder writes `?` for the Any driver,
    // which PostgreSQL does not take).
    let mut bind = |sql: &mut String, v: Value| -> AppResult<()> {
        match v {
            Value::Text(t) => args.add(t),
            Value::Int(n) => args.add(n),
        }
        .map_err(|e| AppError::Internal(anyhow::anyhow!("bind: {e}")))?;
        sql.push_str(&format!("${}", args.len()));
        Ok(())
    };
    enum Value {
        Text(String),
        Int(i64),
    }
    if fts.is_some() {
        sql.push_str(" JOIN records_fts ON records_fts.rowid = r.id");
    }
    sql.push_str(" WHERE 1 = 1");
    if let Some(kind) = f.kind {
        sql.push_str(" AND r.kind = ");
        bind(&mut sql, Value::Text(kind.as_str().into()))?;
    }
    if let Some(service) = f.service.as_deref() {
        sql.push_str(" AND EXISTS (SELECT 1 FROM record_keys k WHERE k.record_id = r.id AND k.key = 'service' AND k.value = ");
        bind(&mut sql, Value::Text(service.into()))?;
        sql.push(')');
    }
    if let Some(mode) = f.failure_mode.as_deref() {
        sql.push_str(" AND EXISTS (SELECT 1 FROM record_keys k WHERE k.record_id = r.id AND k.key = 'failure_mode' AND k.value = ");
        bind(&mut sql, Value::Text(mode.into()))?;
        sql.push(')');
    }
    if let Some(incident) = f.incident.as_deref() {
        sql.push_str(" AND r.incident_id = ");
        bind(&mut sql, Value::Text(incident.into()))?;
    }
    if let Some(v) = f.validation {
        sql.push_str(" AND r.validation = ");
        bind(&mut sql, Value::Text(v.as_str().into()))?;
    }
    if !(f.include_working || f.incident.is_some()) {
        sql.push_str(" AND r.kind IN (SELECT value FROM json_each(");
        bind(&mut sql, Value::Text(durable_kinds_json()))?;
        sql.push_str("))");
    }
    let mut order = String::new();
    match (&fts, f.after_id) {
        (Some(q), _) => {
            let mut p = String::new();
            bind(&mut p, Value::Text(q.clone()))?;
            match backend {
                Backend::Sqlite => {
                    sql.push_str(&format!(" AND records_fts MATCH {p}"));
                    order = " ORDER BY bm25(records_fts, 1.0, 0.5)".into();
                }
                Backend::Postgres => {
                    let q = format!("websearch_to_tsquery('incidentmind', {p})");
                    sql.push_str(&format!(" AND records_fts.tsv @@ {q}"));
                    order = format!(" ORDER BY ts_rank_cd(records_fts.tsv, {q}) DESC, r.id DESC");
                }
            }
        }
        (None, Some(after)) if f.oldest_first => {
            sql.push_str(" AND r.id > ");
            bind(&mut sql, Value::Int(after))?;
        }
        (None, Some(after)) => {
            sql.push_str(" AND r.id < ");
            bind(&mut sql, Value::Int(after))?;
        }
        (None, None) => {}
    }
    if order.is_empty() {
        order = if f.oldest_first {
            " ORDER BY r.id ASC"
        } else {
            " ORDER BY r.id DESC"
        }
        .into();
    }
    sql.push_str(&order);
    sql.push_str(" LIMIT ");
    bind(&mut sql, Value::Int(f.limit.unwrap_or(200).clamp(1, 1000)))?;
    if let (Some(_), Some(skip)) = (&fts, f.offset.filter(|n| *n > 0)) {
        sql.push_str(" OFFSET ");
        bind(&mut sql, Value::Int(skip))?;
    }
    let rows: Vec<Row> = sqlx::query_as_with(sqlx::AssertSqlSafe(sql), args)
        .fetch_all(pool)
        .await?;
    rows.into_iter().map(Row::into_record).collect()
}

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
pub(super) type CandidateJson = (i64, String, String, String, i64, i64, Option<i64>);

pub(super) fn parse_candidate(
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

/// Records that `service` depends on `depends_on` (idempotent).
///
/// # Errors
/// Database errors.
pub async fn add_dependency(tx: &mut Tx, service: &str, depends_on: &str) -> AppResult<()> {
    sqlx::query(
        "INSERT INTO service_dependencies (service, depends_on) VALUES ($1, $2) ON CONFLICT DO NOTHING",
    )
        .bind(service)
        .bind(depends_on)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Confirmed (or superseded) remediation failures about `action` that a dead-end warning may
/// cite: written during one of `incidents`, or keyed with `service` or one of `modes`. Those of
/// `incidents` are chosen first, then the newest, at most `limit`; returned oldest first. (A
/// large memory holds hundreds per action; the warning names a few.)
///
/// # Errors
/// Database errors.
pub async fn dead_ends_for(
    pool: &AnyPool,
    action: ActionKind,
    service: &str,
    modes: &[String],
    incidents: &[String],
    limit: i64,
) -> AppResult<Vec<MemoryRecord>> {
    let modes = serde_json::to_string(modes).map_err(corrupt)?;
    let incidents = serde_json::to_string(incidents).map_err(corrupt)?;
    // The ids are chosen first, from the index; only the chosen rows are then read whole (a
    // sort under LIMIT would otherwise carry every candidate's text, data and sources).
    let sql = format!(
        "{SELECT} WHERE r.id IN (
           SELECT c.id FROM records c WHERE c.action_kind = $1 AND c.kind = 'remediation_failure'
             AND c.validation IN ('confirmed', 'superseded')
             AND (c.incident_id IN (SELECT value FROM json_each($4))
               OR EXISTS (SELECT 1 FROM record_keys k WHERE k.key = 'service' AND k.value = $2
                            AND k.record_id = c.id)
               OR EXISTS (SELECT 1 FROM record_keys k WHERE k.key = 'failure_mode'
                            AND k.value IN (SELECT value FROM json_each($3)) AND k.record_id = c.id))
             ORDER BY CASE WHEN c.incident_id IN (SELECT value FROM json_each($4)) THEN 1 ELSE 0 END DESC,
                      c.id DESC
             LIMIT $5)
         ORDER BY r.id"
    );
    let rows: Vec<Row> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(action.as_str())
        .bind(service)
        .bind(modes)
        .bind(incidents)
        .bind(limit)
        .fetch_all(pool)
        .await?;
    rows.into_iter().map(Row::into_record).collect()
}

/// The oldest `limit` confirmed (or superseded) remediation successes about `action`.
///
/// # Errors
/// Database errors.
pub async fn successes_for(
    pool: &AnyPool,
    action: ActionKind,
    limit: i64,
) -> AppResult<Vec<MemoryRecord>> {
    let sql = format!(
        "{SELECT} WHERE r.id IN (
           SELECT c.id FROM records c WHERE c.action_kind = $1 AND c.kind = 'remediation_success'
             AND c.validation IN ('confirmed', 'superseded') ORDER BY c.id LIMIT $2)
         ORDER BY r.id"
    );
    let rows: Vec<Row> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(action.as_str())
        .bind(limit)
        .fetch_all(pool)
        .await?;
    rows.into_iter().map(Row::into_record).collect()
}

/// Remediation records (`remediation_success` and `remediation_failure`, confirmed or
/// superseded) written during the incidents `incident_ids` (`INC-YYYY-NNNN`), oldest first.
///
/// # Errors
/// Database errors.
pub async fn remediations_of_incidents(
    pool: &AnyPool,
    incident_ids: &[String],
) -> AppResult<Vec<MemoryRecord>> {
    let kinds = "'remediation_failure', 'remediation_success'";
    confirmed_of_incidents(pool, kinds, incident_ids).await
}

/// Rejected-recommendation records (confirmed or superseded) written at Learn for the incidents
/// `incident_ids`, oldest first.
///
/// # Errors
/// Database errors.
pub async fn rejections_of_incidents(
    pool: &AnyPool,
    incident_ids: &[String],
) -> AppResult<Vec<MemoryRecord>> {
    confirmed_of_incidents(pool, "'rejected_recommendation'", incident_ids).await
}

/// Confirmed or superseded records of `kinds` (an SQL list of kind names from this module)
/// written during the incidents `incident_ids`, oldest first.
async fn confirmed_of_incidents(
    pool: &AnyPool,
    kinds: &'static str,
    incident_ids: &[String],
) -> AppResult<Vec<MemoryRecord>> {
    if incident_ids.is_empty() {
        return Ok(Vec::new());
    }
    let ids = serde_json::to_string(incident_ids).map_err(corrupt)?;
    let sql = format!(
        "{SELECT} WHERE r.incident_id IN (SELECT value FROM json_each($1)) AND r.kind IN ({kinds})
           AND r.validation IN ('confirmed', 'superseded') ORDER BY r.id"
    );
    let rows: Vec<Row> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(ids)
        .fetch_all(pool)
        .await?;
    rows.into_iter().map(Row::into_record).collect()
}

/// Changes a record's validation state (and its successor when superseded), with history.
///
/// # Errors
/// Database errors.
pub async fn set_validation(
    tx: &mut Tx,
    id: i64,
    v: Validation,
    superseded_by: Option<i64>,
    actor: &str,
    reason: &str,
) -> AppResult<()> {
    sqlx::query("UPDATE records SET validation = $1, superseded_by = COALESCE($2, superseded_by) WHERE id = $3")
        .bind(v.as_str())
        .bind(superseded_by)
        .bind(id)
        .execute(&mut **tx)
        .await?;
    if v == Validation::Retracted {
        sqlx::query("DELETE FROM records_fts WHERE rowid = $1")
            .bind(id)
            .execute(&mut **tx)
            .await?;
    }
    add_history(tx, id, actor, v.as_str(), reason, now()).await
}

/// Adds one to a record's evidence count (a later incident confirmed the same knowledge).
///
/// # Errors
/// Database errors.
pub async fn bump_evidence(tx: &mut Tx, id: i64, actor: &str, detail: &str) -> AppResult<()> {
    sqlx::query("UPDATE records SET evidence_count = evidence_count + 1 WHERE id = $1")
        .bind(id)
        .execute(&mut **tx)
        .await?;
    add_history(tx, id, actor, "evidence", detail, now()).await
}

/// Marks record `id` contradicted by record `by` (`data.contradicted_by`), with a
/// history entry `contradicted` carrying `detail`, and bumps the recall generation so cached
/// recall results show the mark at once. The record stays as it is otherwise: a reviewer
/// resolves the contradiction by superseding it.
///
/// # Errors
/// Database errors.
pub async fn mark_contradicted(
    tx: &mut Tx,
    id: i64,
    by: i64,
    actor: &str,
    detail: &str,
) -> AppResult<()> {
    sqlx::query("UPDATE records SET data = json_set(data, '$.contradicted_by', $1) WHERE id = $2")
        .bind(by)
        .bind(id)
        .execute(&mut **tx)
        .await?;
    sqlx::query("UPDATE recall_generation SET value = value + 1 WHERE id = 1")
        .execute(&mut **tx)
        .await?;
    add_history(tx, id, actor, "contradicted", detail, now()).await
}

/// Marks records as returned by recall (count and instant).
///
/// # Errors
/// Database errors.
pub async fn touch_recalled(pool: &AnyPool, ids: &[i64]) -> AppResult<()> {
    if ids.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "UPDATE records SET recall_count = recall_count + 1, last_recalled_at = $1
         WHERE id IN (SELECT CAST(value AS BIGINT) FROM json_each($2))",
    )
    .bind(db_time(now()))
    .bind(serde_json::to_string(ids).map_err(corrupt)?)
    .execute(pool)
    .await?;
    Ok(())
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

/// Every record, oldest first (for export).
///
/// # Errors
/// Database errors.
pub async fn all(pool: &AnyPool) -> AppResult<Vec<MemoryRecord>> {
    let sql = format!("{SELECT} ORDER BY r.id");
    let rows: Vec<Row> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .fetch_all(pool)
        .await?;
    rows.into_iter().map(Row::into_record).collect()
}

/// Which of `ids` are record ids in the database, ascending.
///
/// # Errors
/// Database errors.
pub async fn existing_ids(tx: &mut Tx, ids: &[i64]) -> AppResult<std::collections::BTreeSet<i64>> {
    let ids = serde_json::to_string(ids).map_err(corrupt)?;
    let found: Vec<i64> = sqlx::query_scalar(
        "SELECT id FROM records WHERE id IN (SELECT CAST(value AS BIGINT) FROM json_each($1))",
    )
    .bind(ids)
    .fetch_all(&mut **tx)
    .await?;
    let found = found.into_iter().collect();
    Ok(found)
}

/// Writes an exported record back with its id, instants and counters (import into an empty
/// database), inside the caller's transaction.
///
/// # Errors
/// [`AppError::Conflict`] when the id exists; database errors.
pub async fn restore(tx: &mut Tx, r: &MemoryRecord) -> AppResult<()> {
    let new = NewRecord {
        kind: r.kind,
        epistemic_type: r.epistemic_type,
        text: r.text.clone(),
        services: r.services.clone(),
        failure_modes: r.failure_modes.clone(),
        action_kind: r.action_kind,
        target: r.target.clone(),
        incident_id: r.incident_id.clone(),
        validation: r.validation,
        confidence: r.confidence,
        importance: r.importance,
        rule: r.rule.clone(),
        author: r.author.clone(),
        cites: Vec::new(),
        origin: None,
        data: r.data.clone(),
    };
    let exists: Option<i64> = sqlx::query_scalar("SELECT id FROM records WHERE id = $1")
        .bind(r.id)
        .fetch_optional(&mut **tx)
        .await?;
    if exists.is_some() {
        return Err(AppError::Conflict(format!(
            "memory {} already exists",
            r.id
        )));
    }
    // With its own id (never assigned and then changed: on PostgreSQL the keys and history
    // written by the insert would hold the old id against the foreign keys).
    insert_as(tx, &new, r.created_at, Some(r.id)).await?;
    // `superseded_by` points at another record, which may come later in the file: it is set by
    // `restore_links` once every record exists.
    sqlx::query(
        "UPDATE records SET last_recalled_at = $1, recall_count = $2, evidence_count = $3
         WHERE id = $4",
    )
    .bind(r.last_recalled_at.map(db_time))
    .bind(r.recall_count)
    .bind(r.evidence_count)
    .bind(r.id)
    .execute(&mut **tx)
    .await?;
    if r.kind.is_durable() && r.validation == Validation::Retracted {
        // A retracted record is not searchable (the insert indexed it as any durable record).
        sqlx::query("DELETE FROM records_fts WHERE rowid = $1")
            .bind(r.id)
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}

/// Adds the links of an imported record `r` once all records exist: its `cites` links and the
/// record that superseded it (both may point at records later in the file).
///
/// # Errors
/// Database errors.
pub async fn restore_links(tx: &mut Tx, r: &MemoryRecord) -> AppResult<()> {
    let (from, sources) = (r.id, &r.sources);
    if let Some(newer) = r.superseded_by {
        sqlx::query("UPDATE records SET superseded_by = $1 WHERE id = $2")
            .bind(newer)
            .bind(from)
            .execute(&mut **tx)
            .await?;
    }
    for to in sources {
        sqlx::query(
            "INSERT INTO record_links (from_id, to_id, relation) VALUES ($1, $2, 'cites') \
             ON CONFLICT DO NOTHING",
        )
        .bind(from)
        .bind(to)
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}
