//! Embedding vectors of durable records (migration 0007) and of incident documents (migration
//! 0008), for recall's vector lists ([`crate::memory::embeddings`]).

use sqlx::AnyPool;

use super::Backend;
use super::dialect::{self, Statement};
use super::memory::{corrupt, durable_kinds_json};
use crate::error::AppResult;

/// Durable, non-retracted records without a vector for `model`, oldest first: `(id, text)`, at
/// most `limit`.
///
/// # Errors
/// Database errors.
pub async fn missing(pool: &AnyPool, model: &str, limit: i64) -> AppResult<Vec<(i64, String)>> {
    Ok(sqlx::query_as(
        "SELECT r.id, r.text FROM records r
         WHERE r.validation != 'retracted' AND r.kind IN (SELECT value FROM json_each($1))
           AND NOT EXISTS (SELECT 1 FROM record_embeddings e WHERE e.record_id = r.id AND e.model = $2)
         ORDER BY r.id LIMIT $3",
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
pub async fn store(pool: &AnyPool, model: &str, vectors: &[(i64, Vec<f32>)]) -> AppResult<()> {
    store_rows(pool, dialect::STORE_RECORD_EMBEDDING, model, vectors).await
}

/// Writes `(id, vector)` rows for `model` with `insert` (one of [`dialect`]'s vector upserts,
/// binding `$1` id, `$2` model, `$3` the vector as little-endian f32s) in one transaction.
async fn store_rows(
    pool: &AnyPool,
    insert: Statement,
    model: &str,
    vectors: &[(i64, Vec<f32>)],
) -> AppResult<()> {
    let sql = insert.on(Backend::of(pool));
    let mut tx = super::begin_write(pool).await?;
    for (id, v) in vectors {
        sqlx::query(sql)
            .bind(id)
            .bind(model)
            .bind(blob_of(v))
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// A vector as stored: little-endian f32s.
fn blob_of(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Vectors of `model` stored after row `after` (the table's rowid): `(rowid, record id, vector)`
/// in rowid order, at most `limit`. Recall keeps what it read and asks only for newer rows.
///
/// # Errors
/// Database errors; [`crate::error::AppError::Internal`] for a blob that is not f32s.
pub async fn since(
    pool: &AnyPool,
    model: &str,
    after: i64,
    limit: i64,
) -> AppResult<Vec<(i64, i64, Vec<f32>)>> {
    let table = ("record_embeddings", "embedding of record");
    rows_since(pool, table, model, after, limit).await
}

/// Vectors of `model` in `table` (`record_embeddings`, `record_part_embeddings`) after row
/// `after`: `(rowid, record id, vector)` in rowid order, at most `limit`; a blob that is not
/// f32s is `what` of its record, corrupt.
async fn rows_since(
    pool: &AnyPool,
    (table, what): (&'static str, &'static str),
    model: &str,
    after: i64,
    limit: i64,
) -> AppResult<Vec<(i64, i64, Vec<f32>)>> {
    let sql = format!(
        "SELECT rowid, record_id, vector FROM {table}
         WHERE model = $1 AND rowid > $2 ORDER BY rowid LIMIT $3"
    );
    let rows: Vec<(i64, i64, Vec<u8>)> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(model)
        .bind(after)
        .bind(limit)
        .fetch_all(pool)
        .await?;
    rows.into_iter()
        .map(|(rowid, id, blob)| {
            let v = floats(&blob)
                .ok_or_else(|| corrupt(format!("{what} {id} is {} bytes", blob.len())))?;
            Ok((rowid, id, v))
        })
        .collect()
}

/// `(records with a vector of model, durable non-retracted records)`: the backfill's progress.
///
/// # Errors
/// Database errors.
pub async fn progress(pool: &AnyPool, model: &str) -> AppResult<(i64, i64)> {
    Ok(sqlx::query_as(
        "SELECT
           (SELECT count(*) FROM record_embeddings e JOIN records r ON r.id = e.record_id
             WHERE e.model = $2 AND r.validation != 'retracted'
               AND r.kind IN (SELECT value FROM json_each($1))),
           (SELECT count(*) FROM records r WHERE r.validation != 'retracted'
               AND r.kind IN (SELECT value FROM json_each($1)))",
    )
    .bind(durable_kinds_json())
    .bind(model)
    .fetch_one(pool)
    .await?)
}

/// Incident documents without a vector for `model`, oldest first: `(document id, embed text)`,
/// at most `limit`.
///
/// # Errors
/// Database errors.
pub async fn missing_documents(
    pool: &AnyPool,
    model: &str,
    limit: i64,
) -> AppResult<Vec<(i64, String)>> {
    let texts = (
        "incident_documents d",
        "d.embed_text",
        "incident_document_embeddings e",
        "e.document_id",
    );
    texts_without_vectors(pool, texts, model, limit).await
}

/// `(id, text)` of the rows of a text table (`(table d, d.text column, vector table e, e.id
/// column)`, names from this module) without a vector for `model`, oldest first, at most
/// `limit`: what the backfill embeds next.
async fn texts_without_vectors(
    pool: &AnyPool,
    (table, text, vectors, key): (&'static str, &'static str, &'static str, &'static str),
    model: &str,
    limit: i64,
) -> AppResult<Vec<(i64, String)>> {
    let sql = format!(
        "SELECT d.id, {text} FROM {table}
         WHERE NOT EXISTS (SELECT 1 FROM {vectors} WHERE {key} = d.id AND e.model = $1)
         ORDER BY d.id LIMIT $2"
    );
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(model)
        .bind(limit)
        .fetch_all(pool)
        .await?)
}

/// Stores incident-document vectors for `model` (`(document id, vector)`), replacing earlier
/// ones; a document rebuilt or deleted meanwhile is skipped (its new text gets a new vector).
///
/// # Errors
/// Database errors.
pub async fn store_documents(
    pool: &AnyPool,
    model: &str,
    vectors: &[(i64, Vec<f32>)],
) -> AppResult<()> {
    store_rows(pool, dialect::STORE_DOCUMENT_EMBEDDING, model, vectors).await
}

/// The state of the incident-document vectors of `model`: `(rows, max rowid, recall
/// generation)`. When it is unchanged, so are the vectors.
///
/// # Errors
/// Database errors.
pub async fn documents_state(pool: &AnyPool, model: &str) -> AppResult<(i64, i64, i64)> {
    Ok(sqlx::query_as(
        "SELECT count(*), coalesce(max(rowid), 0),
                (SELECT value FROM recall_generation WHERE id = 1)
         FROM incident_document_embeddings WHERE model = $1",
    )
    .bind(model)
    .fetch_one(pool)
    .await?)
}

/// Every incident-document vector of `model`: `(incident id, vector)`.
///
/// # Errors
/// Database errors; [`crate::error::AppError::Internal`] for a blob that is not f32s.
pub async fn documents(pool: &AnyPool, model: &str) -> AppResult<Vec<(String, Vec<f32>)>> {
    let rows: Vec<(String, Vec<u8>)> = sqlx::query_as(
        "SELECT d.incident_id, e.vector FROM incident_document_embeddings e
         JOIN incident_documents d ON d.id = e.document_id WHERE e.model = $1",
    )
    .bind(model)
    .fetch_all(pool)
    .await?;
    by_incident(rows, "embedding of document")
}

/// Decodes `(incident id, blob)` rows; a blob that is not f32s is `what` of that incident,
/// corrupt.
fn by_incident(rows: Vec<(String, Vec<u8>)>, what: &str) -> AppResult<Vec<(String, Vec<f32>)>> {
    rows.into_iter()
        .map(|(id, blob)| {
            let v = floats(&blob).ok_or_else(|| corrupt(format!("{what} {id}")))?;
            Ok((id, v))
        })
        .collect()
}

/// Little-endian f32s of a blob; `None` when its length is not a multiple of 4.
pub(super) fn floats(blob: &[u8]) -> Option<Vec<f32>> {
    blob.len().is_multiple_of(4).then(|| {
        blob.chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    })
}

/// Incident passages without a vector for `model`, oldest first: `(passage id, text)`, at most
/// `limit`.
///
/// # Errors
/// Database errors.
pub async fn missing_passages(
    pool: &AnyPool,
    model: &str,
    limit: i64,
) -> AppResult<Vec<(i64, String)>> {
    let texts = (
        "incident_passages d",
        "d.text",
        "incident_passage_embeddings e",
        "e.passage_id",
    );
    texts_without_vectors(pool, texts, model, limit).await
}

/// Stores passage vectors for `model` (`(passage id, vector)`); a passage deleted meanwhile is
/// skipped.
///
/// # Errors
/// Database errors.
pub async fn store_passages(
    pool: &AnyPool,
    model: &str,
    vectors: &[(i64, Vec<f32>)],
) -> AppResult<()> {
    store_rows(pool, dialect::STORE_PASSAGE_EMBEDDING, model, vectors).await
}

/// Every passage vector of `model` with its incident: `(incident id, vector)`, grouped by
/// incident.
///
/// # Errors
/// Database errors; [`crate::error::AppError::Internal`] for a blob that is not f32s.
pub async fn passages(pool: &AnyPool, model: &str) -> AppResult<Vec<(String, Vec<f32>)>> {
    let rows: Vec<(String, Vec<u8>)> = sqlx::query_as(
        "SELECT d.incident_id, e.vector FROM incident_passage_embeddings e
         JOIN incident_passages p ON p.id = e.passage_id
         JOIN incident_documents d ON d.id = p.document_id
         WHERE e.model = $1 ORDER BY d.incident_id, p.id",
    )
    .bind(model)
    .fetch_all(pool)
    .await?;
    by_incident(rows, "embedding of a passage of")
}

/// The state of the passage vectors of `model`: `(rows, max rowid)`.
///
/// # Errors
/// Database errors.
pub async fn passages_state(pool: &AnyPool, model: &str) -> AppResult<(i64, i64)> {
    Ok(sqlx::query_as(
        "SELECT count(*), coalesce(max(rowid), 0) FROM incident_passage_embeddings WHERE model = $1",
    )
    .bind(model)
    .fetch_one(pool)
    .await?)
}

/// Parts of durable, non-retracted rules (lessons and runbooks with ALWAYS / BECAUSE / SCOPE)
/// without vectors for `model`: `(record id, [always, because, scope])`, oldest first, at most
/// `limit` records.
///
/// # Errors
/// Database errors.
pub async fn missing_parts(
    pool: &AnyPool,
    model: &str,
    limit: i64,
) -> AppResult<Vec<(i64, [String; 3])>> {
    let rows: Vec<(i64, String, String, String)> = sqlx::query_as(
        "SELECT r.id, coalesce(r.rule_always, ''), coalesce(r.rule_because, ''),
                coalesce(r.rule_scope, '')
         FROM records r
         WHERE r.validation != 'retracted' AND r.rule_always IS NOT NULL
           AND r.kind IN (SELECT value FROM json_each($1))
           AND NOT EXISTS (SELECT 1 FROM record_part_embeddings e
                           WHERE e.record_id = r.id AND e.model = $2)
         ORDER BY r.id LIMIT $3",
    )
    .bind(durable_kinds_json())
    .bind(model)
    .bind(limit)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(id, a, b, c)| (id, [a, b, c]))
        .collect())
}

/// Stores part vectors for `model`: `(record id, part number, vector)`; a record deleted
/// meanwhile is skipped.
///
/// # Errors
/// Database errors.
pub async fn store_parts(
    pool: &AnyPool,
    model: &str,
    vectors: &[(i64, i64, Vec<f32>)],
) -> AppResult<()> {
    let sql = dialect::STORE_PART_EMBEDDING.on(Backend::of(pool));
    let mut tx = super::begin_write(pool).await?;
    for (id, part, v) in vectors {
        let blob = blob_of(v);
        sqlx::query(sql)
            .bind(id)
            .bind(part)
            .bind(model)
            .bind(blob)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Part vectors of `model` stored after row `after`: `(rowid, record id, vector)` in rowid
/// order, at most `limit`.
///
/// # Errors
/// Database errors; [`crate::error::AppError::Internal`] for a blob that is not f32s.
pub async fn parts_since(
    pool: &AnyPool,
    model: &str,
    after: i64,
    limit: i64,
) -> AppResult<Vec<(i64, i64, Vec<f32>)>> {
    let table = ("record_part_embeddings", "part embedding of record");
    rows_since(pool, table, model, after, limit).await
}

/// One stored vector of a record, as export writes it: the model, the part (`None`: the whole
/// record; 0–2: a rule's ALWAYS, BECAUSE, SCOPE) and the vector.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredVector {
    /// The record.
    pub record_id: i64,
    /// Model name the vector belongs to.
    pub model: String,
    /// `None` for the record's own vector, else its rule part number.
    pub part: Option<i64>,
    /// The vector (unit length as stored by the backfill).
    pub vector: Vec<f32>,
}

/// Every record and part vector of every model, by record id then part (the record's own
/// first): what `export` carries so an import does not embed again.
///
/// # Errors
/// Database errors; [`crate::error::AppError::Internal`] for a blob that is not f32s.
pub async fn all_vectors(pool: &AnyPool) -> AppResult<Vec<StoredVector>> {
    let rows: Vec<(i64, String, Option<i64>, Vec<u8>)> = sqlx::query_as(
        "SELECT record_id, model, NULL, vector FROM record_embeddings
         UNION ALL
         SELECT record_id, model, part, vector FROM record_part_embeddings
         ORDER BY 1, 3 NULLS FIRST, 2",
    )
    .fetch_all(pool)
    .await?;
    rows.into_iter()
        .map(|(record_id, model, part, blob)| {
            let vector = floats(&blob).ok_or_else(|| corrupt("embedding vector"))?;
            Ok(StoredVector {
                record_id,
                model,
                part,
                vector,
            })
        })
        .collect()
}

/// Writes imported vectors inside the import's transaction, replacing any stored for the same
/// record, model and part.
///
/// # Errors
/// Database errors.
pub async fn restore_vectors(tx: &mut super::Tx, vectors: &[StoredVector]) -> AppResult<()> {
    let backend = Backend::of_tx(tx);
    let whole = dialect::RESTORE_RECORD_EMBEDDING.on(backend);
    let part_sql = dialect::RESTORE_PART_EMBEDDING.on(backend);
    for v in vectors {
        let blob = blob_of(&v.vector);
        match v.part {
            None => {
                sqlx::query(whole)
                    .bind(v.record_id)
                    .bind(&v.model)
                    .bind(blob)
                    .execute(&mut **tx)
                    .await?;
            }
            Some(part) => {
                sqlx::query(part_sql)
                    .bind(v.record_id)
                    .bind(part)
                    .bind(&v.model)
                    .bind(blob)
                    .execute(&mut **tx)
                    .await?;
            }
        }
    }
    Ok(())
}
