//! Writing records: insert (one or in bulk) with their keys, links, full-text entry and
//! history; changes of validation, evidence, contradiction and recall counters; the service
//! dependency graph.

use sqlx::AnyPool;

use super::corrupt;
use crate::domain::memory::NewRecord;
use crate::domain::{ActionKind, Confidence, Validation};
use crate::error::AppResult;
use crate::store::{Tx, db_time, now};

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
pub(in crate::store) fn scope_of(
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
pub(super) async fn insert_as(
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
    for &to in &r.cites {
        insert_cite(tx, id, to).await?;
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

/// Records that `from` cites `to` (once: a second time changes nothing).
pub(super) async fn insert_cite(tx: &mut Tx, from: i64, to: i64) -> AppResult<()> {
    sqlx::query(
        "INSERT INTO record_links (from_id, to_id, relation) VALUES ($1, $2, 'cites') \
         ON CONFLICT DO NOTHING",
    )
    .bind(from)
    .bind(to)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

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
///
/// Long on purpose: the JSON arrays of every table are built in one pass over the batch, so a
/// record's row, keys, links, full-text entry and history stay in step.
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
