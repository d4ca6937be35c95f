//! The only place with SQL. One module per aggregate; functions take a pool or a transaction and
//! return domain types (DESIGN.md §7).

pub mod alerts;
pub mod audit;
pub mod backup;
pub mod changes;
pub mod chat;
pub mod consolidation;
pub mod dialect;
pub mod embeddings;
pub mod evidence;
pub mod incident_documents;
mod incident_write;
pub mod incidents;
pub mod insights;
pub mod integrations;
pub mod investigations;
pub mod listen;
pub mod memory;
pub mod migrate;
pub mod postmortems;
pub mod proposals;
pub mod recall_index;
pub mod recommendations;
pub mod redaction;
pub mod sessions;
pub mod stats;
pub mod tokens;
pub mod users;

use std::str::FromStr;

use sqlx::any::AnyPoolOptions;
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{AnyPool, Transaction};

use crate::error::{AppError, AppResult};
pub use incident_write::{Event, IncidentWrite, Tags, UnitOfWork, Write};

/// A write transaction on the app's database (either backend).
pub type Tx = Transaction<'static, sqlx::Any>;

/// The app's database: its pool and the hub its incident writes announce their changes to
/// ([`changes::ChangeHub`]). Cheap to clone (clones share both); it reads as the pool it holds
/// (`Deref`), so a read takes `&Db` where it takes `&AnyPool`.
#[derive(Debug, Clone)]
pub struct Db {
    pool: AnyPool,
    changes: changes::ChangeHub,
}

impl Db {
    /// The database of `pool`, with a hub of its own.
    pub fn new(pool: AnyPool) -> Self {
        Self {
            pool,
            changes: changes::ChangeHub::default(),
        }
    }

    /// The pool.
    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// The change notices of this process's incident writes on this database: subscribe to
    /// follow an incident ([`changes::ChangeHub::subscribe`]).
    pub fn changes(&self) -> &changes::ChangeHub {
        &self.changes
    }
}

impl std::ops::Deref for Db {
    type Target = AnyPool;

    fn deref(&self) -> &AnyPool {
        &self.pool
    }
}

impl From<AnyPool> for Db {
    fn from(pool: AnyPool) -> Self {
        Self::new(pool)
    }
}

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

/// Which database engine holds the app's data, chosen by the database URL's scheme.
///
/// SQLite (a path, `sqlite:` URL) is the default and needs nothing installed; PostgreSQL
/// (`postgres://` or `postgresql://`) lets several app instances share one database. The store's
/// SQL is one text for both wherever the two dialects agree; where they do not, the statement is
/// a named item of [`dialect`] and a query picks its text with [`dialect::Statement::on`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// An embedded SQLite file (or `:memory:`).
    Sqlite,
    /// A PostgreSQL server (15 or later).
    Postgres,
}

impl Backend {
    /// The backend a database URL selects: `postgres://…` and `postgresql://…` select
    /// PostgreSQL, anything else (a path, `sqlite:…`) SQLite.
    pub fn of_url(url: &str) -> Backend {
        let lower = url.trim_start().to_ascii_lowercase();
        if lower.starts_with("postgres://") || lower.starts_with("postgresql://") {
            Backend::Postgres
        } else {
            Backend::Sqlite
        }
    }

    /// The backend an open pool talks to.
    pub fn of(pool: &AnyPool) -> Backend {
        match pool.connect_options().database_url.scheme() {
            "postgres" | "postgresql" => Backend::Postgres,
            _ => Backend::Sqlite,
        }
    }

    /// The backend a transaction talks to.
    pub fn of_tx(tx: &Tx) -> Backend {
        Backend::of_connection(tx)
    }

    /// The backend a connection talks to.
    pub fn of_connection(conn: &sqlx::AnyConnection) -> Backend {
        match conn.backend_name() {
            "PostgreSQL" => Backend::Postgres,
            _ => Backend::Sqlite,
        }
    }

    /// Picks the statement text for this backend: `sqlite` on SQLite, `postgres` on PostgreSQL.
    /// Only `store::memory`'s full-text statements still use it; a new statement that differs
    /// between the backends is a [`dialect::Statement`] instead.
    pub fn sql(self, sqlite: &'static str, postgres: &'static str) -> &'static str {
        match self {
            Backend::Sqlite => sqlite,
            Backend::Postgres => postgres,
        }
    }
}

/// Opens (creating if missing) the database at `url`; see [`open`].
///
/// # Errors
/// [`AppError::Internal`] wrapping an [`OpenError`].
pub async fn connect(url: &str) -> AppResult<AnyPool> {
    Ok(open(url, OpenMode::CreateIfMissing).await?)
}

/// Opens the database at `url` and runs the embedded migrations of its backend
/// (`migrations/sqlite` or `migrations/postgres`).
///
/// - SQLite (`sqlite://path.db` or a plain path): WAL mode, a 10 s busy timeout, foreign keys
///   on, and the page reads of [`dialect::SQLITE_TUNING`]. With [`OpenMode::MustExist`] a missing
///   file, or one this program did not write, is refused before anything is written.
/// - PostgreSQL (`postgres://user@host:port/db`): a pool of up to 20 connections; with
///   [`OpenMode::MustExist`] a database without this program's tables is refused.
///
/// # Errors
/// [`OpenError`], naming the file or URL.
pub async fn open(url: &str, mode: OpenMode) -> Result<AnyPool, OpenError> {
    sqlx::any::install_default_drivers();
    if Backend::of_url(url) == Backend::Postgres {
        return open_postgres(url, mode).await;
    }
    let (full, opts) = connect_options(url)?;
    let file = opts.get_filename();
    let path = std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf());
    let in_memory = file.as_os_str() == ":memory:" || full.contains("mode=memory");
    if mode == OpenMode::MustExist && !in_memory && !path.is_file() {
        return Err(OpenError::Missing { path });
    }
    if !in_memory && !is_sqlite_or_empty(&path) {
        return Err(OpenError::Foreign {
            path,
            reason: "not a SQLite file".into(),
        });
    }
    // The Any driver reads only the URL: the open mode goes into it, the pragmas run on every
    // new connection.
    let any_url = if in_memory || full.contains("mode=") {
        full.clone()
    } else {
        let sep = if full.contains('?') { '&' } else { '?' };
        let m = if mode == OpenMode::CreateIfMissing {
            "rwc"
        } else {
            "rw"
        };
        format!("{full}{sep}mode={m}")
    };
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
    let pool = AnyPoolOptions::new()
        .max_connections(8)
        .after_connect(|conn, _| {
            Box::pin(async move {
                // No memory map, 4 MiB of page cache per connection: see `dialect::SQLITE_TUNING`.
                sqlx::raw_sql(dialect::SQLITE_TUNING).execute(conn).await?;
                Ok(())
            })
        })
        .before_acquire(|conn, _| Box::pin(outside_transaction(conn)))
        .connect(&any_url)
        .await
        .map_err(open_error)?;
    let must_be_ours = (mode == OpenMode::MustExist && !in_memory).then_some(Ours {
        count: dialect::MIGRATIONS_TABLE_EXISTS.sqlite,
        otherwise: "a SQLite file without this program's tables",
    });
    let migrator = sqlx::migrate!("migrations/sqlite");
    finish_open(pool, path.clone(), must_be_ours, &migrator, open_error).await
}

/// How [`finish_open`] tells this program's database from another one.
struct Ours {
    /// Counts this program's migrations table (0: not ours).
    count: &'static str,
    /// The [`OpenError::Foreign`] reason when it is not.
    otherwise: &'static str,
}

/// The end of [`open`] on either backend: a database that must already exist has to hold this
/// program's tables (`must_be_ours`), then the migrations run.
async fn finish_open(
    pool: AnyPool,
    path: std::path::PathBuf,
    must_be_ours: Option<Ours>,
    migrator: &sqlx::migrate::Migrator,
    open_error: impl Fn(sqlx::Error) -> OpenError,
) -> Result<AnyPool, OpenError> {
    if let Some(ours) = must_be_ours {
        let n: i64 = sqlx::query_scalar(ours.count)
            .fetch_one(&pool)
            .await
            .map_err(open_error)?;
        if n == 0 {
            pool.close().await;
            return Err(OpenError::Foreign {
                path,
                reason: ours.otherwise.into(),
            });
        }
    }
    migrator.run(&pool).await.map_err(|e| OpenError::Migrate {
        path,
        reason: e.to_string(),
    })?;
    Ok(pool)
}

/// Whether the file at `path` is missing, empty, or starts with SQLite's 16-byte header
/// ("SQLite format 3\0", sqlite.org/fileformat.html §1.3.1). Checked before the pool opens: a
/// connection to a foreign file fails only at its first statement, which the pool retries until
/// its timeout.
fn is_sqlite_or_empty(path: &std::path::Path) -> bool {
    use std::io::Read as _;
    let Ok(f) = std::fs::File::open(path) else {
        return true;
    };
    let mut head = Vec::with_capacity(16);
    match f.take(16).read_to_end(&mut head) {
        Ok(0) => true,
        Ok(_) => head == b"SQLite format 3\0",
        Err(_) => false,
    }
}

/// [`open`] for a `postgres://` URL.
async fn open_postgres(url: &str, mode: OpenMode) -> Result<AnyPool, OpenError> {
    let shown = redacted_url(url);
    let path = std::path::PathBuf::from(&shown);
    let open_error = |e: sqlx::Error| OpenError::Open {
        path: path.clone(),
        reason: e.to_string(),
    };
    let pool = AnyPoolOptions::new()
        .max_connections(20)
        .before_acquire(|conn, _| Box::pin(outside_transaction(conn)))
        .connect(url)
        .await
        .map_err(open_error)?;
    let must_be_ours = (mode == OpenMode::MustExist).then_some(Ours {
        count: dialect::MIGRATIONS_TABLE_EXISTS.postgres,
        otherwise: "a PostgreSQL database without this program's tables",
    });
    let migrator = sqlx::migrate!("migrations/postgres");
    finish_open(pool, path.clone(), must_be_ours, &migrator, open_error).await
}

/// A database URL with its password replaced by `***`, for messages and logs.
pub fn redacted_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        _ => url.to_string(),
    }
}

/// The file a SQLite database URL (`sqlite://path.db` or a plain path, as [`open`] takes) names,
/// made absolute.
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

/// Key of the PostgreSQL advisory lock every write transaction takes ([`begin_write`]).
const WRITE_LOCK_KEY: i64 = 0x1dc1_dea7;

/// Starts a write transaction that holds the database's write lock from its first statement, so
/// concurrent writers queue instead of interleaving.
///
/// - SQLite: `BEGIN IMMEDIATE` (writers queue on the busy timeout instead of failing on a lock
///   upgrade).
/// - PostgreSQL: `BEGIN` and a transaction-level advisory lock (`pg_advisory_xact_lock`, released
///   at commit or rollback), so writers from every app instance on the database run one at a
///   time, as on SQLite: the compare-and-set transitions, the webhook dedupe and the audit
///   chain's append keep the guarantees they have there. Reads never take it.
///
/// # Errors
/// [`AppError::Internal`] when the database is unavailable.
pub async fn begin_write(pool: &AnyPool) -> AppResult<Tx> {
    match Backend::of(pool) {
        Backend::Sqlite => Ok(pool.begin_with(dialect::SQLITE_BEGIN_WRITE).await?),
        Backend::Postgres => {
            let mut tx = pool.begin().await?;
            sqlx::query(dialect::POSTGRES_WRITE_LOCK)
                .bind(WRITE_LOCK_KEY)
                .execute(&mut *tx)
                .await?;
            Ok(tx)
        }
    }
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
pub async fn migration_status(pool: &AnyPool) -> AppResult<(i64, i64)> {
    let expected = match Backend::of(pool) {
        Backend::Sqlite => sqlx::migrate!("migrations/sqlite"),
        Backend::Postgres => sqlx::migrate!("migrations/postgres"),
    }
    .iter()
    .filter(|m| !m.migration_type.is_down_migration())
    .count() as i64;
    let applied: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM _sqlx_migrations WHERE success")
        .fetch_one(pool)
        .await?;
    Ok((applied, expected))
}

/// Runs `SELECT 1`: does the database answer a query?
///
/// # Errors
/// [`AppError::Internal`] with the driver's error.
pub async fn ping(pool: &AnyPool) -> AppResult<()> {
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
async fn outside_transaction(conn: &mut sqlx::AnyConnection) -> Result<bool, sqlx::Error> {
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
    fn the_url_scheme_picks_the_backend() {
        for (url, backend) in [
            ("incidentmind.db", Backend::Sqlite),
            ("/var/lib/incidentmind/im.db", Backend::Sqlite),
            ("sqlite://im.db?mode=rwc", Backend::Sqlite),
            ("postgres://u:p@db:5432/im", Backend::Postgres),
            ("postgresql://db/im", Backend::Postgres),
            ("PostgreS://db/im", Backend::Postgres),
            // A file whose name starts like the scheme is still a file.
            ("postgres.db", Backend::Sqlite),
        ] {
            assert_eq!(Backend::of_url(url), backend, "{url}");
        }
        assert_eq!(Backend::Postgres.sql("a", "b"), "b");
        assert_eq!(Backend::Sqlite.sql("a", "b"), "a");
    }

    #[test]
    fn a_database_password_never_reaches_a_message() {
        assert_eq!(
            redacted_url("postgres://im:s3cr3t@db.internal:5432/im"),
            "postgres://im:***@db.internal:5432/im"
        );
        assert_eq!(redacted_url("postgres://db/im"), "postgres://db/im");
        assert_eq!(redacted_url("im.db"), "im.db");
    }

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
