//! Health of the running app, for the operator endpoints: whether the database answers, whether
//! its migrations are current, and the gauges `/metrics` reports at scrape time.

use sqlx::AnyPool;

use crate::error::AppResult;
use crate::memory::Memory;
use crate::store;

/// `Ok` when the database answers `SELECT 1`.
///
/// # Errors
/// The driver's error when it does not.
pub async fn ping(pool: &AnyPool) -> AppResult<()> {
    store::ping(pool).await
}

/// `(applied, expected)` migration counts: equal when the schema is current.
///
/// # Errors
/// Database errors (the migrations table cannot be read).
pub async fn migration_status(pool: &AnyPool) -> AppResult<(i64, i64)> {
    store::migration_status(pool).await
}

/// The scrape-time gauges: every (state, severity) and every kind, 0 where the store has none,
/// so a series that drops to zero is reported as 0 rather than left at its last value.
///
/// # Errors
/// Database errors.
pub async fn gauges(pool: &AnyPool, memory: &Memory) -> AppResult<crate::metrics::Gauges> {
    use crate::domain::memory::MemoryKind;
    use crate::domain::{IncidentState, Severity};
    let open = store::stats::open_incidents(pool).await?;
    let mut open_incidents = Vec::new();
    for st in IncidentState::ALL
        .into_iter()
        .filter(|s| *s != IncidentState::Learned)
    {
        for sev in Severity::ALL {
            let n = open
                .iter()
                .find(|(s, v, _)| s == st.as_str() && v == sev.as_str())
                .map_or(0, |(_, _, n)| *n);
            open_incidents.push((st.as_str(), sev.as_str(), n));
        }
    }
    let kinds = store::stats::records_by_kind(pool).await?;
    let records_by_kind = MemoryKind::ALL
        .iter()
        .map(|k| {
            let n = kinds
                .iter()
                .find(|(name, _)| name == k.as_str())
                .map_or(0, |(_, n)| *n);
            (k.as_str(), n)
        })
        .collect();
    let (done, total) = crate::memory::embeddings::progress(memory).await?;
    Ok(crate::metrics::Gauges {
        open_incidents,
        records_by_kind,
        audit_entries: store::stats::audit_entries(pool).await?,
        embedding_backlog: (total - done).max(0),
    })
}
