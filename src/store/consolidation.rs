//! What consolidation reads and the one mark it writes: the records it may merge,
//! their vectors, the standing rules per service, and `data.consolidated_into` on a source
//! once a reviewer accepted the merged rule (the records stay, with their history).

use std::collections::{BTreeMap, HashMap};

use sqlx::AnyPool;

use super::{Tx, now};
use crate::error::AppResult;

/// Ids of the records consolidation may merge: confirmed lessons and remediation failures of an
/// incident, with an action kind, not consolidated yet; ascending (at most 5,000).
///
/// # Errors
/// Database errors.
pub async fn candidate_ids(pool: &AnyPool) -> AppResult<Vec<i64>> {
    Ok(sqlx::query_scalar(
        "SELECT id FROM records
          WHERE kind IN ('lesson', 'remediation_failure') AND validation = 'confirmed'
            AND action_kind IS NOT NULL AND COALESCE(incident_id, '') != ''
            AND json_extract(data, '$.consolidated_into') IS NULL
          ORDER BY id LIMIT 5000",
    )
    .fetch_all(pool)
    .await?)
}

/// The vector consolidation compares for each of `ids` under `model`: a rule's ALWAYS part when
/// it has one, else the record's own vector. Records without either are left out.
///
/// # Errors
/// Database errors; [`crate::error::AppError::Internal`] for a blob that is not f32s.
pub async fn vectors(
    pool: &AnyPool,
    model: &str,
    ids: &[i64],
) -> AppResult<HashMap<i64, Vec<f32>>> {
    let rows: Vec<(i64, Option<Vec<u8>>)> = sqlx::query_as(
        "SELECT i.id,
                COALESCE((SELECT p.vector FROM record_part_embeddings p
                           WHERE p.record_id = i.id AND p.model = $2 AND p.part = 0),
                         (SELECT e.vector FROM record_embeddings e
                           WHERE e.record_id = i.id AND e.model = $2))
           FROM (SELECT CAST(value AS BIGINT) AS id FROM json_each($1)) AS i",
    )
    .bind(serde_json::to_string(ids).unwrap_or_else(|_| "[]".into()))
    .bind(model)
    .fetch_all(pool)
    .await?;
    rows.into_iter()
        .filter_map(|(id, blob)| blob.map(|b| (id, b)))
        .map(|(id, blob)| {
            let v = super::embeddings::floats(&blob)
                .ok_or_else(|| super::memory::corrupt(format!("embedding of record {id}")))?;
            Ok((id, v))
        })
        .collect()
}

/// Standing rules per service: confirmed lessons not consolidated into another, counted for
/// each service they name.
///
/// # Errors
/// Database errors.
pub async fn standing_rules(pool: &AnyPool) -> AppResult<BTreeMap<String, usize>> {
    let rows: Vec<(String, i64)> = sqlx::query_as(
        "SELECT s.value, COUNT(*) FROM records r, json_each(r.services) s
          WHERE r.kind = 'lesson' AND r.validation = 'confirmed'
            AND json_extract(r.data, '$.consolidated_into') IS NULL
          GROUP BY s.value",
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(s, n)| (s, usize::try_from(n).unwrap_or(0)))
        .collect())
}

/// Marks record `id` consolidated into record `into` (`data.consolidated_into`), with a history
/// entry `consolidated` carrying `detail`. The ranking table follows by trigger (migration
/// 0013), which moves the recall generation.
///
/// # Errors
/// Database errors.
pub async fn mark_consolidated(
    tx: &mut Tx,
    id: i64,
    into: i64,
    actor: &str,
    detail: &str,
) -> AppResult<()> {
    sqlx::query(
        "UPDATE records SET data = json_set(data, '$.consolidated_into', $1) WHERE id = $2",
    )
    .bind(into)
    .bind(id)
    .execute(&mut **tx)
    .await?;
    super::memory::add_history(tx, id, actor, "consolidated", detail, now()).await
}
