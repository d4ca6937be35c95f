//! What was tried during past incidents: remediation successes and failures, rejected
//! recommendations, and the dead ends a warning may cite.

use sqlx::AnyPool;

use super::{Row, SELECT, corrupt};
use crate::domain::ActionKind;
use crate::domain::memory::MemoryRecord;
use crate::error::AppResult;

/// For each of `actions`, in their order: the remediation failures a dead-end warning on it may
/// cite (see [`dead_ends_for`]: of `incidents`, or keyed with `service` or one of `modes`; at
/// most `cites`) and its oldest `successes` remediation successes. The reads of each action run
/// side by side on the pool's connections.
///
/// # Errors
/// Database errors.
pub async fn outcomes_of_actions(
    pool: &AnyPool,
    actions: &[ActionKind],
    service: &str,
    modes: &[String],
    incidents: &[String],
    cites: i64,
    successes: i64,
) -> AppResult<Vec<(Vec<MemoryRecord>, Vec<MemoryRecord>)>> {
    futures::future::try_join_all(actions.iter().map(|action| async move {
        let failed = dead_ends_for(pool, *action, service, modes, incidents, cites).await?;
        let worked = successes_for(pool, *action, successes).await?;
        Ok::<_, crate::error::AppError>((failed, worked))
    }))
    .await
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
async fn successes_for(
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

/// What was tried and decided during the incidents `incident_ids` (`INC-YYYY-NNNN`): their
/// remediation successes and failures and rejected recommendations, confirmed or superseded,
/// oldest first.
///
/// # Errors
/// Database errors.
pub async fn outcomes_of_incidents(
    pool: &AnyPool,
    incident_ids: &[String],
) -> AppResult<Vec<MemoryRecord>> {
    let kinds = "'remediation_failure', 'remediation_success', 'rejected_recommendation'";
    confirmed_of_incidents(pool, kinds, incident_ids).await
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
