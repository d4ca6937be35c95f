//! The whole memory out and back in: every record for export, and an import's records restored
//! with their ids, counters and links.

use sqlx::AnyPool;

use super::write::{insert_as, insert_cite};
use super::{Row, SELECT, corrupt};
use crate::domain::Validation;
use crate::domain::memory::{MemoryRecord, NewRecord};
use crate::error::{AppError, AppResult};
use crate::store::{Tx, db_time};

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
    for &to in sources {
        insert_cite(tx, from, to).await?;
    }
    Ok(())
}
