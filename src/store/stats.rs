//! Counts for the operator's metrics (`GET /metrics`): read-only aggregate queries over the
//! other aggregates' tables, each one statement.

use sqlx::AnyPool;

use crate::error::AppResult;

/// Incidents not yet learned, counted by `(state, severity)`, as stored (`investigating`,
/// `SEV2`); combinations without incidents are absent.
///
/// # Errors
/// Database errors.
pub async fn open_incidents(pool: &AnyPool) -> AppResult<Vec<(String, String, i64)>> {
    Ok(sqlx::query_as(
        "SELECT state, severity, COUNT(*) FROM incidents WHERE state <> 'learned' \
         GROUP BY state, severity",
    )
    .fetch_all(pool)
    .await?)
}

/// Memory records counted by kind (every validation state); kinds without records are absent.
///
/// # Errors
/// Database errors.
pub async fn records_by_kind(pool: &AnyPool) -> AppResult<Vec<(String, i64)>> {
    Ok(
        sqlx::query_as("SELECT kind, COUNT(*) FROM records GROUP BY kind")
            .fetch_all(pool)
            .await?,
    )
}

/// Entries in the audit log.
///
/// # Errors
/// Database errors.
pub async fn audit_entries(pool: &AnyPool) -> AppResult<i64> {
    Ok(sqlx::query_scalar("SELECT COUNT(*) FROM audit_log")
        .fetch_one(pool)
        .await?)
}
