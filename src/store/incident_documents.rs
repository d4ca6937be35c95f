//! Incident documents (migration 0008): one retrieval document per past incident, with its
//! full-text index, for recall's incident-level lists ([`crate::memory::documents`]).

use std::collections::HashMap;

use sqlx::AnyPool;

use super::{Backend, dialect};

use crate::error::AppResult;

/// A document as written: built by [`crate::memory::documents::build`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentRow {
    /// The incident it describes.
    pub incident_id: String,
    /// The incident's service.
    pub service: String,
    /// Full text, indexed for BM25.
    pub text: String,
    /// The part that is embedded (the most telling parts, capped).
    pub embed_text: String,
    /// Names the records it was built from; a changed signature means rebuild.
    pub signature: String,
    /// Passages embedded one by one (evidence lines, report sentences).
    pub passages: Vec<String>,
}

/// Incident id → signature of every stored document.
///
/// # Errors
/// Database errors.
pub async fn signatures(pool: &AnyPool) -> AppResult<HashMap<String, String>> {
    let rows: Vec<(String, String)> =
        sqlx::query_as("SELECT incident_id, signature FROM incident_documents")
            .fetch_all(pool)
            .await?;
    Ok(rows.into_iter().collect())
}

/// Incident id → workflow state, for those of `ids` that have an incident row (imported
/// memories may come from incidents this database never held).
///
/// # Errors
/// Database errors.
pub async fn incident_states(pool: &AnyPool, ids: &[String]) -> AppResult<HashMap<String, String>> {
    let json = serde_json::to_string(ids).map_err(super::memory::corrupt)?;
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SELECT id, state FROM incidents WHERE id IN (SELECT value FROM json_each($1))",
    )
    .bind(json)
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().collect())
}

/// Writes `doc` (replacing the incident's earlier document, its index entry and its vectors) in
/// one transaction.
///
/// # Errors
/// Database errors.
pub async fn upsert(pool: &AnyPool, doc: &DocumentRow) -> AppResult<()> {
    let mut tx = super::begin_write(pool).await?;
    let old: Option<i64> =
        sqlx::query_scalar("SELECT id FROM incident_documents WHERE incident_id = $1")
            .bind(&doc.incident_id)
            .fetch_optional(&mut *tx)
            .await?;
    let at = super::db_time(super::now());
    let id = match old {
        Some(id) => {
            sqlx::query("DELETE FROM incident_documents_fts WHERE rowid = $1")
                .bind(id)
                .execute(&mut *tx)
                .await?;
            for sql in [
                "DELETE FROM incident_document_embeddings WHERE document_id = $1",
                "DELETE FROM incident_passage_embeddings WHERE passage_id IN
                     (SELECT id FROM incident_passages WHERE document_id = $1)",
                "DELETE FROM incident_passages WHERE document_id = $1",
            ] {
                sqlx::query(sql).bind(id).execute(&mut *tx).await?;
            }
            sqlx::query(
                "UPDATE incident_documents SET service = $2, text = $3, embed_text = $4,
                 signature = $5, updated_at = $6 WHERE id = $1",
            )
            .bind(id)
            .bind(&doc.service)
            .bind(&doc.text)
            .bind(&doc.embed_text)
            .bind(&doc.signature)
            .bind(&at)
            .execute(&mut *tx)
            .await?;
            id
        }
        None => sqlx::query_scalar(
            "INSERT INTO incident_documents (incident_id, service, text, embed_text, signature, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
        )
        .bind(&doc.incident_id)
        .bind(&doc.service)
        .bind(&doc.text)
        .bind(&doc.embed_text)
        .bind(&doc.signature)
        .bind(&at)
        .fetch_one(&mut *tx)
        .await?,
    };
    sqlx::query("INSERT INTO incident_documents_fts (rowid, text) VALUES ($1, $2)")
        .bind(id)
        .bind(&doc.text)
        .execute(&mut *tx)
        .await?;
    for p in &doc.passages {
        sqlx::query("INSERT INTO incident_passages (document_id, text) VALUES ($1, $2)")
            .bind(id)
            .bind(p)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Removes the document of `incident_id` (every record it was built from was retracted).
///
/// # Errors
/// Database errors.
pub async fn delete(pool: &AnyPool, incident_id: &str) -> AppResult<()> {
    let mut tx = super::begin_write(pool).await?;
    let id: Option<i64> =
        sqlx::query_scalar("SELECT id FROM incident_documents WHERE incident_id = $1")
            .bind(incident_id)
            .fetch_optional(&mut *tx)
            .await?;
    if let Some(id) = id {
        for sql in [
            "DELETE FROM incident_documents_fts WHERE rowid = $1",
            "DELETE FROM incident_document_embeddings WHERE document_id = $1",
            "DELETE FROM incident_passage_embeddings WHERE passage_id IN
                 (SELECT id FROM incident_passages WHERE document_id = $1)",
            "DELETE FROM incident_passages WHERE document_id = $1",
            "DELETE FROM incident_documents WHERE id = $1",
        ] {
            sqlx::query(sql).bind(id).execute(&mut *tx).await?;
        }
        // A removed document moves recall's generation too.
        sqlx::query("UPDATE recall_generation SET value = value + 1 WHERE id = 1")
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// BM25 search of the documents for the FTS5 expression `expr` (see
/// [`super::memory::fts_or_terms`]): `(incident id, −bm25)` best first (higher is better; FTS5's
/// `bm25()` is lower-is-better), at most `limit`, without `exclude`.
///
/// # Errors
/// Database errors.
pub async fn search(
    pool: &AnyPool,
    expr: &str,
    exclude: Option<&str>,
    limit: i64,
) -> AppResult<Vec<(String, f64)>> {
    if expr.is_empty() {
        return Ok(Vec::new());
    }
    Ok(
        sqlx::query_as(dialect::DOCUMENT_SEARCH.on(Backend::of(pool)))
            .bind(expr)
            .bind(exclude)
            .bind(limit)
            .fetch_all(pool)
            .await?,
    )
}

/// Incident id → the embedded part of its document (report, evidence, causes; see
/// [`crate::memory::documents::build`]), for those of `ids` that have a document.
///
/// # Errors
/// Database errors.
pub async fn reports(pool: &AnyPool, ids: &[String]) -> AppResult<HashMap<String, String>> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let json = serde_json::to_string(ids).map_err(super::memory::corrupt)?;
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SELECT incident_id, embed_text FROM incident_documents
         WHERE incident_id IN (SELECT value FROM json_each($1))",
    )
    .bind(json)
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().collect())
}
