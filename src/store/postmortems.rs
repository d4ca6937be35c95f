//! Post-mortem drafts (one per incident), their confirmation, and the stored result of Learn.

use sqlx::AnyPool;

use super::{Tx, db_time, parse_db_time};
use crate::domain::postmortem::Postmortem;
use crate::error::{AppError, AppResult};

/// A stored post-mortem with who drafted, edited and confirmed it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, utoipa::ToSchema)]
pub struct StoredPostmortem {
    /// Incident.
    pub incident_id: String,
    /// The document.
    pub postmortem: Postmortem,
    /// Who drafted it.
    pub drafted_by: String,
    /// Who edited it last (the drafter until someone edits).
    pub edited_by: String,
    /// When it was last edited (UTC).
    #[schema(value_type = String, format = DateTime)]
    pub edited_at: jiff::Timestamp,
    /// The reviewer who confirmed it, while confirmed.
    pub confirmed_by: Option<String>,
    /// When.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub confirmed_at: Option<jiff::Timestamp>,
    /// `built-in` or `llm:<model>`.
    pub analyst: String,
    /// Notice from drafting (model unavailable…).
    pub notice: Option<String>,
    /// Incremented by every edit.
    pub version: i64,
}

#[derive(sqlx::FromRow)]
struct Row {
    incident_id: String,
    draft: String,
    drafted_by: String,
    edited_by: String,
    edited_at: String,
    confirmed_by: Option<String>,
    confirmed_at: Option<String>,
    analyst: String,
    notice: Option<String>,
    version: i64,
}

fn from_row(r: Row) -> AppResult<StoredPostmortem> {
    Ok(StoredPostmortem {
        postmortem: serde_json::from_str(&r.draft).map_err(|e| AppError::Internal(e.into()))?,
        incident_id: r.incident_id,
        drafted_by: r.drafted_by,
        edited_by: r.edited_by,
        edited_at: parse_db_time(&r.edited_at)?,
        confirmed_by: r.confirmed_by,
        confirmed_at: r.confirmed_at.as_deref().map(parse_db_time).transpose()?,
        analyst: r.analyst,
        notice: r.notice,
        version: r.version,
    })
}

/// Loads an incident's post-mortem.
///
/// # Errors
/// [`AppError::NotFound`] when none was drafted.
pub async fn get(pool: &AnyPool, incident_id: &str) -> AppResult<StoredPostmortem> {
    let row: Option<Row> = sqlx::query_as("SELECT * FROM postmortems WHERE incident_id = $1")
        .bind(incident_id)
        .fetch_optional(pool)
        .await?;
    from_row(row.ok_or_else(|| AppError::NotFound(format!("a post-mortem for {incident_id}")))?)
}

/// Same as [`get`] inside a transaction.
///
/// # Errors
/// [`AppError::NotFound`] when none was drafted.
pub async fn get_in(tx: &mut Tx, incident_id: &str) -> AppResult<StoredPostmortem> {
    let row: Option<Row> = sqlx::query_as("SELECT * FROM postmortems WHERE incident_id = $1")
        .bind(incident_id)
        .fetch_optional(&mut **tx)
        .await?;
    from_row(row.ok_or_else(|| AppError::NotFound(format!("a post-mortem for {incident_id}")))?)
}

/// Writes a (re)drafted post-mortem, replacing an earlier draft and clearing any confirmation.
///
/// # Errors
/// Database errors.
pub async fn upsert_draft(
    tx: &mut Tx,
    incident_id: &str,
    pm: &Postmortem,
    actor: &str,
    analyst: &str,
    notice: Option<&str>,
    at: jiff::Timestamp,
) -> AppResult<()> {
    let json = serde_json::to_string(pm).map_err(|e| AppError::Internal(e.into()))?;
    let t = db_time(at);
    sqlx::query(
        "INSERT INTO postmortems (incident_id, draft, drafted_by, drafted_at, edited_by, edited_at, analyst, notice)
         VALUES ($1, $2, $3, $4, $3, $4, $5, $6)
         ON CONFLICT (incident_id) DO UPDATE SET draft = excluded.draft, drafted_by = excluded.drafted_by,
           drafted_at = excluded.drafted_at, edited_by = excluded.edited_by, edited_at = excluded.edited_at,
           analyst = excluded.analyst, notice = excluded.notice, confirmed_by = NULL, confirmed_at = NULL,
           version = postmortems.version + 1",
    )
    .bind(incident_id)
    .bind(json)
    .bind(actor)
    .bind(t)
    .bind(analyst)
    .bind(notice)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Saves an edit (compare-and-set on `version` when given). Returns whether it was applied.
///
/// # Errors
/// Database errors.
pub async fn save_edit(
    tx: &mut Tx,
    incident_id: &str,
    pm: &Postmortem,
    actor: &str,
    at: jiff::Timestamp,
    expected_version: Option<i64>,
) -> AppResult<bool> {
    let json = serde_json::to_string(pm).map_err(|e| AppError::Internal(e.into()))?;
    Ok(sqlx::query(
        "UPDATE postmortems SET draft = $1, edited_by = $2, edited_at = $3, version = version + 1
         WHERE incident_id = $4 AND ($5 IS NULL OR version = $6)",
    )
    .bind(json)
    .bind(actor)
    .bind(db_time(at))
    .bind(incident_id)
    .bind(expected_version)
    .bind(expected_version)
    .execute(&mut **tx)
    .await?
    .rows_affected()
        == 1)
}

/// Sets (or with `None` clears) the confirmation.
///
/// # Errors
/// Database errors.
pub async fn set_confirmation(
    tx: &mut Tx,
    incident_id: &str,
    reviewer: Option<&str>,
    at: jiff::Timestamp,
) -> AppResult<()> {
    sqlx::query(
        "UPDATE postmortems SET confirmed_by = $1, confirmed_at = $2 WHERE incident_id = $3",
    )
    .bind(reviewer)
    .bind(reviewer.map(|_| db_time(at)))
    .bind(incident_id)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Stores the result of Learn (JSON) once.
///
/// # Errors
/// Database errors.
pub async fn save_learning(
    tx: &mut Tx,
    incident_id: &str,
    actor: &str,
    result: &str,
    at: jiff::Timestamp,
) -> AppResult<()> {
    sqlx::query(
        "INSERT INTO learnings (incident_id, learned_by, learned_at, result) VALUES ($1, $2, $3, $4)",
    )
    .bind(incident_id)
    .bind(actor)
    .bind(db_time(at))
    .bind(result)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// The stored result of Learn, if the incident was learned.
///
/// # Errors
/// Database errors.
pub async fn learning(pool: &AnyPool, incident_id: &str) -> AppResult<Option<String>> {
    Ok(
        sqlx::query_scalar("SELECT result FROM learnings WHERE incident_id = $1")
            .bind(incident_id)
            .fetch_optional(pool)
            .await?,
    )
}

/// Review queue: lessons without a grounding incident (`(id, text)`), and learned incidents with
/// no lesson (`(incident id, title)`).
///
/// # Errors
/// Database errors.
pub async fn review_queue(
    pool: &AnyPool,
) -> AppResult<(Vec<(i64, String)>, Vec<(String, String)>)> {
    let ungrounded = sqlx::query_as(
        "SELECT id, text FROM records WHERE kind = 'lesson' AND validation IN ('confirmed', 'pending')
           AND (incident_id IS NULL OR incident_id = '') ORDER BY id",
    )
    .fetch_all(pool)
    .await?;
    let ruleless = sqlx::query_as(
        "SELECT i.id, i.title FROM incidents i WHERE i.state = 'learned'
           AND NOT EXISTS (SELECT 1 FROM records r WHERE r.kind = 'lesson' AND r.incident_id = i.id AND r.validation != 'retracted')
         ORDER BY i.id",
    )
    .fetch_all(pool)
    .await?;
    Ok((ungrounded, ruleless))
}

/// Confirmed records marked contradicted by a later one and not yet superseded
/// (`(id, text, contradicted_by)`), oldest first: the reviewer queue's contradictions to
/// resolve.
///
/// # Errors
/// Database errors.
pub async fn contradictions(pool: &AnyPool) -> AppResult<Vec<(i64, String, i64)>> {
    Ok(sqlx::query_as(
        "SELECT id, text, CAST(json_extract(data, '$.contradicted_by') AS INTEGER) FROM records
          WHERE json_extract(data, '$.contradicted_by') IS NOT NULL AND validation = 'confirmed'
          ORDER BY id LIMIT 500",
    )
    .fetch_all(pool)
    .await?)
}
