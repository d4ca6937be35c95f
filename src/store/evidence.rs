//! Evidence as submitted (already redacted): one row per paste, upload or alert.

use sqlx::AnyPool;

use super::{Tx, db_time};
use crate::error::{AppError, AppResult};

/// A stored piece of evidence without its content.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow, serde::Serialize, utoipa::ToSchema)]
pub struct EvidenceMeta {
    /// Row id.
    pub id: i64,
    /// Incident it belongs to.
    pub incident_id: String,
    /// logs / metrics / alert / note.
    pub kind: String,
    /// Where it came from (file name, integration, free text).
    pub source: String,
    /// Size in bytes as submitted.
    pub bytes: i64,
    /// Lines as submitted.
    pub lines: i64,
    /// Detected shape (`syslog`, `prometheus-text`, `alertmanager`, …).
    pub format: String,
    /// Who submitted it.
    pub author: String,
    /// When (RFC 3339 UTC).
    pub created_at: String,
}

/// What to insert.
#[derive(Debug, Clone)]
pub struct NewEvidence<'a> {
    /// Incident id.
    pub incident_id: &'a str,
    /// Kind name.
    pub kind: &'a str,
    /// Source label.
    pub source: &'a str,
    /// Redacted content.
    pub content: &'a str,
    /// Bytes as submitted.
    pub bytes: i64,
    /// Lines as submitted.
    pub lines: i64,
    /// Detected format.
    pub format: &'a str,
    /// Author.
    pub author: &'a str,
    /// Idempotency key (alert fingerprint and status, …); a repeat returns `None`.
    pub dedup_key: Option<&'a str>,
}

/// Inserts evidence; with a `dedup_key` already present returns `None` and writes nothing.
///
/// # Errors
/// Database errors.
pub async fn insert(
    tx: &mut Tx,
    e: &NewEvidence<'_>,
    at: jiff::Timestamp,
) -> AppResult<Option<i64>> {
    let id: Option<i64> = sqlx::query_scalar(
        "INSERT INTO evidence (incident_id, kind, source, content, bytes, lines, format, author, created_at, dedup_key)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (dedup_key) DO NOTHING RETURNING id",
    )
    .bind(e.incident_id)
    .bind(e.kind)
    .bind(e.source)
    .bind(e.content)
    .bind(e.bytes)
    .bind(e.lines)
    .bind(e.format)
    .bind(e.author)
    .bind(db_time(at))
    .bind(e.dedup_key)
    .fetch_optional(&mut **tx)
    .await?;
    Ok(id)
}

/// Evidence of an incident, oldest first (without content).
///
/// # Errors
/// Database errors.
pub async fn list(pool: &AnyPool, incident_id: &str) -> AppResult<Vec<EvidenceMeta>> {
    Ok(sqlx::query_as(
        "SELECT id, incident_id, kind, source, bytes, lines, format, author, created_at FROM evidence
         WHERE incident_id = $1 ORDER BY id",
    )
    .bind(incident_id)
    .fetch_all(pool)
    .await?)
}

/// Lines `from..=to` (1-based) of one piece of evidence, with their numbers; at most `max` lines.
///
/// # Errors
/// [`AppError::NotFound`] when the evidence does not belong to the incident.
pub async fn lines(
    pool: &AnyPool,
    incident_id: &str,
    id: i64,
    from: u64,
    to: u64,
    max: u64,
) -> AppResult<(EvidenceMeta, Vec<(u64, String)>)> {
    #[derive(sqlx::FromRow)]
    struct Row {
        #[sqlx(flatten)]
        meta: EvidenceMeta,
        content: String,
    }
    let row: Option<Row> = sqlx::query_as(
        "SELECT id, incident_id, kind, source, bytes, lines, format, author, created_at, content FROM evidence
         WHERE incident_id = $1 AND id = $2",
    )
    .bind(incident_id)
    .bind(id)
    .fetch_optional(pool)
    .await?;
    let row = row.ok_or_else(|| AppError::NotFound(format!("evidence {id} of {incident_id}")))?;
    let from = from.max(1);
    let to = to.max(from).min(from + max.saturating_sub(1));
    let out = row
        .content
        .lines()
        .enumerate()
        .map(|(i, l)| (i as u64 + 1, l))
        .skip_while(|(n, _)| *n < from)
        .take_while(|(n, _)| *n <= to)
        .map(|(n, l)| (n, crate::evidence::truncate_chars(l, 2000).to_string()))
        .collect();
    Ok((row.meta, out))
}

/// The evidence stored under `dedup_key` (a repeated delivery or paste), if any.
///
/// # Errors
/// Database errors.
pub async fn find_by_key(pool: &AnyPool, dedup_key: &str) -> AppResult<Option<EvidenceMeta>> {
    Ok(sqlx::query_as(
        "SELECT id, incident_id, kind, source, bytes, lines, format, author, created_at FROM evidence
         WHERE dedup_key = $1",
    )
    .bind(dedup_key)
    .fetch_optional(pool)
    .await?)
}
