//! Embedding vectors of durable records (migration 0007), for the optional semantic list of
//! recall ([`crate::embeddings`]).

use sqlx::SqlitePool;

use super::memory::{corrupt, durable_kinds_json};
use crate::error::AppResult;

/// Durable, non-retracted records without a vector for `model`, oldest first: `(id, text)`, at
/// most `limit`.
///
/// # Errors
/// Database errors.
pub async fn missing(pool: &SqlitePool, model: &str, limit: i64) -> AppResult<Vec<(i64, String)>> {
    Ok(sqlx::query_as(
        "SELECT r.id, r.text FROM records r
         WHERE r.validation != 'retracted' AND r.kind IN (SELECT value FROM json_each(?1))
           AND NOT EXISTS (SELECT 1 FROM record_embeddings e WHERE e.record_id = r.id AND e.model = ?2)
         ORDER BY r.id LIMIT ?3",
    )
    .bind(durable_kinds_json())
    .bind(model)
    .bind(limit)
    .fetch_all(pool)
    .await?)
}

/// Stores `vectors` (`(record id, vector)`) for `model`, replacing earlier ones, in one
/// transaction. A record deleted meanwhile is skipped.
///
/// # Errors
/// Database errors.
pub async fn store(pool: &SqlitePool, model: &str, vectors: &[(i64, Vec<f32>)]) -> AppResult<()> {
    let mut tx = super::begin_write(pool).await?;
    for (id, v) in vectors {
        let blob: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        sqlx::query(
            "INSERT OR REPLACE INTO record_embeddings (record_id, model, vector)
             SELECT id, ?2, ?3 FROM records WHERE id = ?1",
        )
        .bind(id)
        .bind(model)
        .bind(blob)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Vectors of `model` stored after row `after` (the table's rowid): `(rowid, record id, vector)`
/// in rowid order, at most `limit`. Recall keeps what it read and asks only for newer rows.
///
/// # Errors
/// Database errors; [`crate::error::AppError::Internal`] for a blob that is not f32s.
pub async fn since(
    pool: &SqlitePool,
    model: &str,
    after: i64,
    limit: i64,
) -> AppResult<Vec<(i64, i64, Vec<f32>)>> {
    let rows: Vec<(i64, i64, Vec<u8>)> = sqlx::query_as(
        "SELECT rowid, record_id, vector FROM record_embeddings
         WHERE model = ?1 AND rowid > ?2 ORDER BY rowid LIMIT ?3",
    )
    .bind(model)
    .bind(after)
    .bind(limit)
    .fetch_all(pool)
    .await?;
    rows.into_iter()
        .map(|(rowid, id, blob)| {
            if blob.len() % 4 != 0 {
                return Err(corrupt(format!(
                    "embedding of record {id} is {} bytes",
                    blob.len()
                )));
            }
            let v = blob
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            Ok((rowid, id, v))
        })
        .collect()
}
