//! Investigations and recommendations with their lifecycle (proposed → approved | rejected;
//! approved → verdict). State changes are compare-and-set, so a double submission changes
//! nothing the second time.

use sqlx::AnyPool;

use super::{Tx, db_time};
use crate::domain::action::RecommendationStatus;
use crate::error::{AppError, AppResult};

/// A stored recommendation.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow, serde::Serialize)]
pub struct Recommendation {
    /// Id used in routes (`…/recommendations/{rid}`).
    pub id: i64,
    /// The investigation that proposed it.
    pub investigation_id: i64,
    /// Incident.
    pub incident_id: String,
    /// The `decision` record holding it.
    pub record_id: i64,
    /// The hypothesis record it follows from.
    pub hypothesis_id: Option<i64>,
    /// ActionKind name.
    pub action_kind: String,
    /// Target.
    pub target: String,
    /// Why.
    pub rationale: String,
    /// Dead-end warning as JSON (`{message, incident_ids, …}`), if any.
    pub warning: Option<String>,
    /// Display order: unflagged first.
    pub position: i64,
    /// Proposed, approved or rejected.
    #[sqlx(try_from = "String")]
    pub status: RecommendationStatus,
    /// Who approved or rejected.
    pub decided_by: Option<String>,
    /// When.
    pub decided_at: Option<String>,
    /// Why it was rejected.
    pub reject_reason: Option<String>,
    /// The simulated transcript record.
    pub transcript_id: Option<i64>,
    /// resolved / partially_resolved / did_not_resolve / made_worse.
    pub verdict: Option<String>,
    /// The engineer's note with the verdict.
    pub verdict_note: Option<String>,
    /// Who gave the verdict.
    pub verdict_by: Option<String>,
    /// When.
    pub verdict_at: Option<String>,
    /// Why it was approved although it carried the dead-end banner: what is different this time.
    pub approve_reason: Option<String>,
}

/// Creates an investigation row; returns its id.
///
/// # Errors
/// Database errors.
#[allow(clippy::too_many_arguments)]
pub async fn insert_investigation(
    tx: &mut Tx,
    incident_id: &str,
    actor: &str,
    analyst: &str,
    notice: Option<&str>,
    dropped: &[String],
    recalled: &[i64],
    at: jiff::Timestamp,
) -> AppResult<i64> {
    Ok(sqlx::query_scalar(
        "INSERT INTO investigations (incident_id, actor, analyst, notice, dropped, recalled, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
    )
    .bind(incident_id)
    .bind(actor)
    .bind(analyst)
    .bind(notice)
    .bind(serde_json::to_string(dropped).unwrap_or_else(|_| "[]".into()))
    .bind(serde_json::to_string(recalled).unwrap_or_else(|_| "[]".into()))
    .bind(db_time(at))
    .fetch_one(&mut **tx)
    .await?)
}

/// A stored investigation.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow, serde::Serialize)]
pub struct Investigation {
    /// Id.
    pub id: i64,
    /// Incident.
    pub incident_id: String,
    /// Who ran it.
    pub actor: String,
    /// `built-in` or `llm:<model>`.
    pub analyst: String,
    /// Notice shown with it.
    pub notice: Option<String>,
    /// JSON list of dropped items.
    pub dropped: String,
    /// JSON list of recalled record ids.
    pub recalled: String,
    /// When.
    pub created_at: String,
}

/// The latest investigation of an incident.
///
/// # Errors
/// Database errors.
pub async fn latest_investigation(
    pool: &AnyPool,
    incident_id: &str,
) -> AppResult<Option<Investigation>> {
    Ok(sqlx::query_as(
        "SELECT * FROM investigations WHERE incident_id = $1 ORDER BY id DESC LIMIT 1",
    )
    .bind(incident_id)
    .fetch_optional(pool)
    .await?)
}

/// Fields of a new recommendation.
#[derive(Debug, Clone)]
pub struct NewRecommendation<'a> {
    /// Investigation.
    pub investigation_id: i64,
    /// Incident.
    pub incident_id: &'a str,
    /// Its decision record.
    pub record_id: i64,
    /// Hypothesis record.
    pub hypothesis_id: Option<i64>,
    /// ActionKind name.
    pub action_kind: &'a str,
    /// Target.
    pub target: &'a str,
    /// Rationale.
    pub rationale: &'a str,
    /// Warning JSON.
    pub warning: Option<String>,
    /// Position.
    pub position: i64,
}

/// Inserts a recommendation; returns its id.
///
/// # Errors
/// Database errors.
pub async fn insert(tx: &mut Tx, r: &NewRecommendation<'_>) -> AppResult<i64> {
    Ok(sqlx::query_scalar(
        "INSERT INTO recommendations (investigation_id, incident_id, record_id, hypothesis_id, action_kind, target,
             rationale, warning, position) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
    )
    .bind(r.investigation_id)
    .bind(r.incident_id)
    .bind(r.record_id)
    .bind(r.hypothesis_id)
    .bind(r.action_kind)
    .bind(r.target)
    .bind(r.rationale)
    .bind(&r.warning)
    .bind(r.position)
    .fetch_one(&mut **tx)
    .await?)
}

/// Recommendations of one investigation, in display order.
///
/// # Errors
/// Database errors.
pub async fn of_investigation(
    pool: &AnyPool,
    investigation_id: i64,
) -> AppResult<Vec<Recommendation>> {
    Ok(sqlx::query_as(
        "SELECT * FROM recommendations WHERE investigation_id = $1 ORDER BY position, id",
    )
    .bind(investigation_id)
    .fetch_all(pool)
    .await?)
}

/// Every recommendation of an incident (all investigations), oldest first.
///
/// # Errors
/// Database errors.
pub async fn of_incident(pool: &AnyPool, incident_id: &str) -> AppResult<Vec<Recommendation>> {
    Ok(sqlx::query_as("SELECT * FROM recommendations WHERE incident_id = $1 ORDER BY investigation_id, position, id")
        .bind(incident_id)
        .fetch_all(pool)
        .await?)
}

/// Loads one recommendation of an incident inside a transaction.
///
/// # Errors
/// [`AppError::NotFound`].
pub async fn get_in(tx: &mut Tx, incident_id: &str, id: i64) -> AppResult<Recommendation> {
    sqlx::query_as("SELECT * FROM recommendations WHERE id = $1 AND incident_id = $2")
        .bind(id)
        .bind(incident_id)
        .fetch_optional(&mut **tx)
        .await?
        .ok_or_else(|| AppError::NotFound(format!("recommendation {id} of {incident_id}")))
}

/// proposed → approved (with the transcript record and, for a dead end, `reason`: what is
/// different this time) or rejected (with `reason`: why not). Returns whether
/// this call made the change.
///
/// # Errors
/// Database errors.
pub async fn decide(
    tx: &mut Tx,
    id: i64,
    approve: bool,
    actor: &str,
    reason: Option<&str>,
    transcript_id: Option<i64>,
    at: jiff::Timestamp,
) -> AppResult<bool> {
    Ok(sqlx::query(
        "UPDATE recommendations SET status = $1, decided_by = $2, decided_at = $3, reject_reason = $4,
                transcript_id = $5, approve_reason = $6
         WHERE id = $7 AND status = 'proposed'",
    )
    .bind(if approve {
        RecommendationStatus::Approved
    } else {
        RecommendationStatus::Rejected
    }
    .as_str())
    .bind(actor)
    .bind(db_time(at))
    .bind(if approve { None } else { reason })
    .bind(transcript_id)
    .bind(if approve { reason } else { None })
    .bind(id)
    .execute(&mut **tx)
    .await?
    .rows_affected()
        == 1)
}

/// Records the verdict on an approved recommendation that has none yet. Returns whether this
/// call made the change.
///
/// # Errors
/// Database errors.
pub async fn set_verdict(
    tx: &mut Tx,
    id: i64,
    verdict: &str,
    note: &str,
    actor: &str,
    at: jiff::Timestamp,
) -> AppResult<bool> {
    Ok(sqlx::query(
        "UPDATE recommendations SET verdict = $1, verdict_note = $2, verdict_by = $3, verdict_at = $4
         WHERE id = $5 AND status = 'approved' AND verdict IS NULL",
    )
    .bind(verdict)
    .bind(note)
    .bind(actor)
    .bind(db_time(at))
    .bind(id)
    .execute(&mut **tx)
    .await?
    .rows_affected()
        == 1)
}

/// Which of `ids` are incident ids (to drop citations of incidents that do not exist).
///
/// # Errors
/// Database errors.
pub async fn existing_incidents(
    pool: &AnyPool,
    ids: &[String],
) -> AppResult<std::collections::HashSet<String>> {
    if ids.is_empty() {
        return Ok(std::collections::HashSet::new());
    }
    let found: Vec<String> = sqlx::query_scalar(
        "SELECT id FROM incidents WHERE id IN (SELECT value FROM json_each($1))",
    )
    .bind(serde_json::to_string(ids).map_err(|e| AppError::Internal(e.into()))?)
    .fetch_all(pool)
    .await?;
    Ok(found.into_iter().collect())
}

/// Loads one investigation.
///
/// # Errors
/// [`AppError::NotFound`].
pub async fn get_investigation(pool: &AnyPool, id: i64) -> AppResult<Investigation> {
    sqlx::query_as("SELECT * FROM investigations WHERE id = $1")
        .bind(id)
        .fetch_optional(pool)
        .await?
        .ok_or_else(|| AppError::NotFound(format!("investigation {id}")))
}
