//! The reads behind the insights page: per window (incidents opened at or after
//! `since`), the failed actions with their approval and verdict instants, the first alert start
//! of each incident and which incidents a lesson names. Read-only.

use std::collections::{BTreeMap, BTreeSet};

use sqlx::AnyPool;

use super::{db_time, parse_db_time};
use crate::error::{AppError, AppResult};

/// An approved recommendation judged `did_not_resolve` or `made_worse`, on an incident of the
/// window.
#[derive(Debug, Clone)]
pub struct FailedActionRow {
    /// Its incident.
    pub incident_id: String,
    /// The incident's service.
    pub service: String,
    /// ActionKind name.
    pub action_kind: String,
    /// When it was approved.
    pub approved_at: jiff::Timestamp,
    /// When the failing verdict was given.
    pub verdict_at: jiff::Timestamp,
    /// The failure modes of the remediation-failure record the verdict wrote (`origin =
    /// verdict:{rid}`); `None` when that record is missing.
    pub failure_modes: Option<Vec<String>>,
}

/// The failed actions on incidents opened at or after `since`, by verdict time.
///
/// # Errors
/// Database errors; [`AppError::Internal`] for an unreadable stored instant or tag list.
pub async fn failed_actions(
    pool: &AnyPool,
    since: jiff::Timestamp,
) -> AppResult<Vec<FailedActionRow>> {
    #[derive(sqlx::FromRow)]
    struct Row {
        incident_id: String,
        service: String,
        action_kind: String,
        decided_at: String,
        verdict_at: String,
        failure_modes: Option<String>,
    }
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT r.incident_id, i.service, r.action_kind, r.decided_at, r.verdict_at, m.failure_modes
           FROM recommendations r
           JOIN incidents i ON i.id = r.incident_id
           LEFT JOIN records m ON m.origin = 'verdict:' || r.id
          WHERE r.status = 'approved' AND r.verdict IN ('did_not_resolve', 'made_worse')
            AND r.decided_at IS NOT NULL AND r.verdict_at IS NOT NULL AND i.opened_at >= $1
          ORDER BY r.verdict_at, r.id",
    )
    .bind(db_time(since))
    .fetch_all(pool)
    .await?;
    rows.into_iter()
        .map(|r| {
            Ok(FailedActionRow {
                approved_at: parse_db_time(&r.decided_at)?,
                verdict_at: parse_db_time(&r.verdict_at)?,
                failure_modes: r
                    .failure_modes
                    .as_deref()
                    .map(serde_json::from_str)
                    .transpose()
                    .map_err(|e| AppError::Internal(anyhow::anyhow!("stored tags: {e}")))?,
                incident_id: r.incident_id,
                service: r.service,
                action_kind: r.action_kind,
            })
        })
        .collect()
}

/// The earliest alert start (`starts_at` as the sender reported it) of each incident opened at or
/// after `since` that an alert reached. Starts a sender wrote in a form that does not parse as an
/// instant are skipped.
///
/// # Errors
/// Database errors.
pub async fn first_alert_starts(
    pool: &AnyPool,
    since: jiff::Timestamp,
) -> AppResult<BTreeMap<String, jiff::Timestamp>> {
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SELECT a.incident_id, a.starts_at FROM alerts a JOIN incidents i ON i.id = a.incident_id
          WHERE a.starts_at IS NOT NULL AND i.opened_at >= $1",
    )
    .bind(db_time(since))
    .fetch_all(pool)
    .await?;
    let mut first: BTreeMap<String, jiff::Timestamp> = BTreeMap::new();
    for (incident, start) in rows {
        let Ok(at) = start.parse::<jiff::Timestamp>() else {
            continue;
        };
        first
            .entry(incident)
            .and_modify(|t| *t = (*t).min(at))
            .or_insert(at);
    }
    Ok(first)
}

/// The incidents opened at or after `since` that a lesson not retracted names as its incident
/// (the same rule as the review queue's "learned incidents without a rule").
///
/// # Errors
/// Database errors.
pub async fn incidents_with_lessons(
    pool: &AnyPool,
    since: jiff::Timestamp,
) -> AppResult<BTreeSet<String>> {
    let ids: Vec<String> = sqlx::query_scalar(
        "SELECT DISTINCT r.incident_id FROM records r JOIN incidents i ON i.id = r.incident_id
          WHERE r.kind = 'lesson' AND r.validation != 'retracted' AND i.opened_at >= $1",
    )
    .bind(db_time(since))
    .fetch_all(pool)
    .await?;
    Ok(ids.into_iter().collect())
}
