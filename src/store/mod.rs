//! The only place with SQL. One module per aggregate; functions take a pool or a transaction and
//! return domain types (DESIGN.md §7).

pub mod alerts;
pub mod audit;
pub mod backup;
pub mod consolidation;
pub mod embeddings;
pub mod evidence;
pub mod incident_documents;
pub mod incidents;
pub mod insights;
pub mod integrations;
pub mod memory;
pub mod postmortems;
pub mod proposals;
pub mod recall_index;
pub mod recommendations;
pub mod redaction;
pub mod sessions;
pub mod stats;
pub mod users;

use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{SqlitePool, Transaction};

use crate::error::{AppError, AppResult};

/// A write transaction on the app's SQLite database.
pub type Tx = Transaction<'static, sqlx::Sqlite>;

/// Whether [`open`] may create a missing database file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// Create the file (and run the migrations) when it is missing: `serve`, `user add`, …
    CreateIfMissing,
    /// Open only a database that exists and was written by this program: read-only commands
    /// (`audit verify`, `export`), where a mistyped path must not yield an empty database.
    MustExist,
}

/// Why the database could not be opened. Every message names the file and what to do.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The URL is not a SQLite URL or path.
    #[error(
        "bad database URL {url:?}: {reason}; give a file path or a sqlite:// URL with \
         --database-url (or INCIDENTMIND_DATABASE_URL)"
    )]
    BadUrl {
        /// The URL as given.
        url: String,
        /// What the parser said.
        reason: String,
    },
    /// [`OpenMode::MustExist`] and there is no file.
    #[error(
        "no database at {}: this command reads an existing database and never creates one; \
         check --database-url (or INCIDENTMIND_DATABASE_URL)",
        path.display()
    )]
    Missing {
        /// The file looked for (absolute).
        path: std::path::PathBuf,
    },
    /// The file is not an IncidentMind database (not SQLite, or, for [`OpenMode::MustExist`],
    /// SQLite without this program's migrations).
    #[error(
        "{} is not an IncidentMind database ({reason}); check --database-url (or \
         INCIDENTMIND_DATABASE_URL)",
        path.display()
    )]
    Foreign {
        /// The file (absolute).
        path: std::path::PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// SQLite could not open or create the file.
    #[error(
        "cannot open the database at {}: {reason}; check that its folder exists and that this \
         user may write there (SQLite also writes -wal and -shm files beside it), or give another \
         path with --database-url (or INCIDENTMIND_DATABASE_URL)",
        path.display()
    )]
    Open {
        /// The file (absolute).
        path: std::path::PathBuf,
        /// What SQLite said.
        reason: String,
    },
    /// The schema could not be brought up to date.
    #[error(
        "the database at {} could not be migrated: {reason}; is it a database of a newer \
         IncidentMind, or another program's file?",
        path.display()
    )]
    Migrate {
        /// The file (absolute).
        path: std::path::PathBuf,
        /// What the migrator said.
        reason: String,
    },
}

impl From<OpenError> for AppError {
    fn from(e: OpenError) -> Self {
        AppError::Internal(e.into())
    }
}

/// Opens (creating if missing) the SQLite database at `url` (`sqlite://path.db` or a plain path);
/// see [`open`].
///
/// # Errors
/// [`AppError::Internal`] wrapping an [`OpenError`].
pub async fn connect(url: &str) -> AppResult<SqlitePool> {
    Ok(open(url, OpenMode::CreateIfMissing).await?)
}

/// Opens the SQLite database at `url` (`sqlite://path.db` or a plain path), in WAL mode with a
/// 10 s busy timeout and foreign keys on, and runs the embedded migrations. With
/// [`OpenMode::MustExist`] a missing file, or one this program did not write, is refused before
/// anything is written. Reads go through a memory map of up to 256 MiB (shared by every
/// connection, no copy per page read) and a 4 MiB page cache per connection.
///
/// # Errors
/// [`OpenError`], naming the file.
pub async fn open(url: &str, mode: OpenMode) -> Result<SqlitePool, OpenError> {
    let (full, opts) = connect_options(url)?;
    let file = opts.get_filename();
    let path = std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf());
    let in_memory = file.as_os_str() == ":memory:" || full.contains("mode=memory");
    if mode == OpenMode::MustExist && !in_memory && !path.is_file() {
        return Err(OpenError::Missing { path });
    }
    let opts = opts
        .create_if_missing(mode == OpenMode::CreateIfMissing)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(Duration::from_secs(10))
        .foreign_keys(true)
        .pragma("mmap_size", "268435456")
        // 4 MiB of page cache per connection: with the map above, pages are read from the
        // file's mapping; a larger cache only held copies (≈ 11 MB more RSS at 100k records).
        .pragma("cache_size", "-4096");
    let open_error = |e: sqlx::Error| match &e {
        // SQLITE_NOTADB: the file exists and is something else.
        sqlx::Error::Database(d) if d.code().as_deref() == Some("26") => OpenError::Foreign {
            path: path.clone(),
            reason: "not a SQLite file".into(),
        },
        _ => OpenError::Open {
            path: path.clone(),
            reason: e.to_string(),
        },
    };
    let pool = SqlitePoolOptions::new()
        .max_connections(8)
        .before_acquire(|conn, _| Box::pin(outside_transaction(conn)))
        .connect_with(opts)
        .await
        .map_err(open_error)?;
    if mode == OpenMode::MustExist && !in_memory {
        let ours: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'",
        )
        .fetch_one(&pool)
        .await
        .map_err(open_error)?;
        if ours == 0 {
            pool.close().await;
            return Err(OpenError::Foreign {
                path,
                reason: "a SQLite file without this program's tables".into(),
            });
        }
    }
    sqlx::migrate!()
        .run(&pool)
        .await
        .map_err(|e| OpenError::Migrate {
            path: path.clone(),
            reason: e.to_string(),
        })?;
    Ok(pool)
}

/// The file a database URL (`sqlite://path.db` or a plain path, as [`open`] takes) names, made
/// absolute.
///
/// # Errors
/// [`OpenError::BadUrl`].
pub fn database_file(url: &str) -> Result<std::path::PathBuf, OpenError> {
    let (_, opts) = connect_options(url)?;
    let file = opts.get_filename();
    Ok(std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf()))
}

/// `url` as a full `sqlite:` URL (a plain path gets `sqlite://` in front) and its parsed
/// options, for [`open`] and [`database_file`].
fn connect_options(url: &str) -> Result<(String, SqliteConnectOptions), OpenError> {
    let full = if url.starts_with("sqlite:") {
        url.to_string()
    } else {
        format!("sqlite://{url}")
    };
    let opts = SqliteConnectOptions::from_str(&full).map_err(|e| OpenError::BadUrl {
        url: url.to_string(),
        reason: e.to_string(),
    })?;
    Ok((full, opts))
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

/// The schema's migration state: `(applied, expected)`, where `applied` counts the successful
/// rows of sqlx's `_sqlx_migrations` table and `expected` the up-migrations embedded in this
/// binary (`migrations/`). Equal when the schema is current.
///
/// # Errors
/// [`AppError::Internal`] when the database does not answer.
pub async fn migration_status(pool: &SqlitePool) -> AppResult<(i64, i64)> {
    let expected = sqlx::migrate!()
        .iter()
        .filter(|m| !m.migration_type.is_down_migration())
        .count() as i64;
    let applied: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM _sqlx_migrations WHERE success = 1")
            .fetch_one(pool)
            .await?;
    Ok((applied, expected))
}

/// Runs `SELECT 1`: does the database answer a query?
///
/// # Errors
/// [`AppError::Internal`] with the driver's error.
pub async fn ping(pool: &SqlitePool) -> AppResult<()> {
    sqlx::query("SELECT 1").execute(pool).await?;
    Ok(())
}

/// Whether a pooled connection may be handed out: only outside a transaction, as SQLite sees it
/// and as sqlx counts it.
///
/// A write that fails with `SQLITE_FULL` (or `SQLITE_IOERR`, `SQLITE_NOMEM`) makes SQLite roll the
/// transaction back by itself (sqlite.org/lang_transaction.html, "Response To Errors Within A
/// Transaction"). The dropped `Transaction` then sends `ROLLBACK`, which fails with "no
/// transaction is active", and sqlx 0.9 keeps counting the connection as one level deep, so
/// every later `BEGIN IMMEDIATE` on it fails ("attempted to call begin_with at non-zero
/// transaction depth"): after a full disk the app answered 500 to writes until a restart. Such
/// a connection is closed here and the pool opens a fresh one. The queued `ROLLBACK` of a
/// transaction dropped just before runs ahead of a ping, so a connection is judged after it.
async fn outside_transaction(conn: &mut sqlx::SqliteConnection) -> Result<bool, sqlx::Error> {
    use sqlx::Connection as _;
    if !conn.is_in_transaction() {
        return Ok(true);
    }
    conn.ping().await?;
    Ok(!conn.is_in_transaction())
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
