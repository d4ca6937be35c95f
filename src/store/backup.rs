//! Backups of the SQLite database: an online consistent copy (`VACUUM INTO`, which reads one
//! snapshot under WAL while writers go on) and the checks run on a copy before it is trusted.

use sqlx::AnyPool;

use crate::error::AppResult;

/// Writes a consistent copy of the whole database behind `pool` to `path` (SQLite `VACUUM
/// INTO`: one read transaction, so the copy is one snapshot, compacted; writers are not
/// blocked under WAL). SQLite refuses a `path` that exists and is not empty.
///
/// # Errors
/// Database errors (the file exists, its folder is missing or not writable, …).
pub async fn vacuum_into(pool: &AnyPool, path: &std::path::Path) -> AppResult<()> {
    sqlx::query(super::dialect::SQLITE_VACUUM_INTO)
        .bind(path.to_string_lossy().into_owned())
        .execute(pool)
        .await?;
    Ok(())
}

/// `PRAGMA integrity_check`: `["ok"]` for a sound database, else SQLite's list of problems.
///
/// # Errors
/// Database errors.
pub async fn integrity_check(pool: &AnyPool) -> AppResult<Vec<String>> {
    Ok(sqlx::query_scalar(super::dialect::SQLITE_INTEGRITY_CHECK)
        .fetch_all(pool)
        .await?)
}

/// What a database holds, to tell an empty one (schema only) from one worth keeping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Contents {
    /// Rows of `users`.
    pub users: i64,
    /// Rows of `incidents`.
    pub incidents: i64,
    /// Memory records (`records`).
    pub records: i64,
    /// Audit log entries.
    pub audit_entries: i64,
}

impl Contents {
    /// Nothing in any of the four tables.
    pub fn is_empty(&self) -> bool {
        self.users == 0 && self.incidents == 0 && self.records == 0 && self.audit_entries == 0
    }
}

impl std::fmt::Display for Contents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} users, {} incidents, {} memory records, {} audit entries",
            self.users, self.incidents, self.records, self.audit_entries
        )
    }
}

/// Counts [`Contents`] in one read.
///
/// # Errors
/// Database errors.
pub async fn contents(pool: &AnyPool) -> AppResult<Contents> {
    let (users, incidents, records, audit_entries): (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT COUNT(*) FROM users), (SELECT COUNT(*) FROM incidents), \
         (SELECT COUNT(*) FROM records), (SELECT COUNT(*) FROM audit_log)",
    )
    .fetch_one(pool)
    .await?;
    Ok(Contents {
        users,
        incidents,
        records,
        audit_entries,
    })
}
