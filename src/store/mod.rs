//! The only place with SQL. One module per aggregate; functions take a pool or a transaction and
//! return domain types (DESIGN.md §7).

pub mod alerts;
pub mod audit;
pub mod embeddings;
pub mod evidence;
pub mod incident_documents;
pub mod incidents;
pub mod integrations;
pub mod memory;
pub mod postmortems;
pub mod recall_index;
pub mod recommendations;
pub mod redaction;
pub mod sessions;
pub mod users;

use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{SqlitePool, Transaction};

use crate::error::{AppError, AppResult};

/// A write transaction on the app's SQLite database.
pub type Tx = Transaction<'static, sqlx::Sqlite>;

/// Opens (creating if missing) the SQLite database at `url` (`sqlite://path.db` or a plain path),
/// in WAL mode with a 10 s busy timeout and foreign keys on, and runs the embedded migrations.
/// Reads go through a memory map of up to 256 MiB (shared by every connection, no copy per
/// page read) and a 16 MiB page cache per connection: recall touches thousands of index pages
/// per query.
///
/// # Errors
/// [`AppError::Internal`] when the file cannot be opened or a migration fails.
pub async fn connect(url: &str) -> AppResult<SqlitePool> {
    let url = if url.starts_with("sqlite:") {
        url.to_string()
    } else {
        format!("sqlite://{url}")
    };
    let opts = SqliteConnectOptions::from_str(&url)
        .map_err(|e| AppError::Internal(anyhow::anyhow!("bad database URL {url}: {e}")))?
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(Duration::from_secs(10))
        .foreign_keys(true)
        .pragma("mmap_size", "268435456")
        .pragma("cache_size", "-16384");
    let pool = SqlitePoolOptions::new()
        .max_connections(8)
        .connect_with(opts)
        .await?;
    sqlx::migrate!().run(&pool).await?;
    Ok(pool)
}

/// Starts a write transaction that takes SQLite's write lock at once (`BEGIN IMMEDIATE`), so
/// concurrent writers queue on the busy timeout instead of failing on a lock upgrade.
///
/// # Errors
/// [`AppError::Internal`] when the database is unavailable.
pub async fn begin_write(pool: &SqlitePool) -> AppResult<Tx> {
    Ok(pool.begin_with("BEGIN IMMEDIATE").await?)
}

/// Formats an instant for storage: RFC 3339 in UTC with exactly six fractional digits, so that
/// text order is time order (`2026-11-29T16:40:00.000000Z`).
pub fn db_time(ts: jiff::Timestamp) -> String {
    ts.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// Parses an instant written by [`db_time`] (or any RFC 3339 text).
///
/// # Errors
/// [`AppError::Internal`]: the database holds something this program did not write.
pub fn parse_db_time(s: &str) -> AppResult<jiff::Timestamp> {
    s.parse::<jiff::Timestamp>()
        .map_err(|e| AppError::Internal(anyhow::anyhow!("bad stored instant {s:?}: {e}")))
}

/// The current instant, truncated to microseconds (the stored precision).
pub fn now() -> jiff::Timestamp {
    let now = jiff::Timestamp::now();
    let micros = now.as_microsecond();
    jiff::Timestamp::from_microsecond(micros).unwrap_or(now)
}

/// Whether `e` is a unique-constraint violation (used to turn races into 409s).
pub fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.is_unique_violation())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_instants_have_fixed_width_and_round_trip() {
        let ts: jiff::Timestamp = "2026-11-29T16:40:00Z".parse().unwrap();
        assert_eq!(db_time(ts), "2026-11-29T16:40:00.000000Z");
        let ts2: jiff::Timestamp = "2026-11-29T16:40:00.5Z".parse().unwrap();
        assert_eq!(db_time(ts2), "2026-11-29T16:40:00.500000Z");
        assert!(db_time(ts) < db_time(ts2));
        assert_eq!(parse_db_time(&db_time(ts2)).unwrap(), ts2);
    }
}
