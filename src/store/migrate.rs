//! `migrate-db`: copies a whole IncidentMind database to an empty one on the other
//! (or the same) backend — SQLite to PostgreSQL to outgrow one machine, PostgreSQL to SQLite to
//! come back — in one write transaction on the target.
//!
//! Every table is copied row for row with its ids, in an order where each foreign key points at
//! a table copied before ([`COPIED`]). What the target derives itself is not copied but rebuilt:
//! the full-text tables from the records and incident documents (SQLite's FTS5 tables are
//! contentless and cannot be read back), `records_rank` (filled by the target's triggers as the
//! records arrive) and `recall_generation` (the target's own counter, moved on). Trigger side
//! effects that would make the copy differ from the source are undone: `incidents.revision` is
//! set back to the source's value, and `records.superseded_by` (a link to a later record) is
//! written once every record exists.

use sqlx::any::{AnyRow, AnyTypeInfoKind};
use sqlx::{AnyPool, Row, ValueRef as _};

use super::memory::{corrupt, durable_kinds_json, scope_of};
use super::{Backend, Tx, dialect};
use crate::error::{AppError, AppResult};

/// Tables copied, in foreign-key order (a table comes after every table it references).
pub const COPIED: &[&str] = &[
    "users",
    "api_tokens",
    "sessions",
    "incident_counters",
    "incidents",
    "timeline_events",
    "audit_log",
    "records",
    "record_keys",
    "record_links",
    "record_history",
    "service_dependencies",
    "redaction_maps",
    "evidence",
    "investigations",
    "recommendations",
    "postmortems",
    "learnings",
    "integrations",
    "alert_groups",
    "alerts",
    "record_embeddings",
    "incident_documents",
    "incident_document_embeddings",
    "incident_passages",
    "incident_passage_embeddings",
    "record_part_embeddings",
    "proposals",
    "hypothesis_grades",
    "chat_channels",
    "chat_outbox",
];

/// Tables (and, on SQLite, FTS5 shadow-table prefixes) the target derives instead of copying.
pub const DERIVED: &[&str] = &[
    "records_fts",
    "incident_documents_fts",
    "records_rank",
    "recall_generation",
];

/// Why a copy was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    /// The target already holds rows in a table the copy writes.
    #[error(
        "the target database is not empty (rows in {held}); migrate-db only writes into a fresh \
         database"
    )]
    TargetNotEmpty {
        /// `table: rows` of every table that holds any, comma-separated.
        held: String,
    },
    /// A table this program does not know: the source is from a newer IncidentMind.
    #[error(
        "table {0:?} is not one migrate-db knows; is the source from a newer IncidentMind? \
         (nothing was written)"
    )]
    UnknownTable(String),
}

impl From<MigrateError> for AppError {
    fn from(e: MigrateError) -> Self {
        match e {
            MigrateError::TargetNotEmpty { .. } => AppError::Conflict(e.to_string()),
            MigrateError::UnknownTable(_) => AppError::Internal(e.into()),
        }
    }
}

/// Rows copied per table, in copy order.
pub type CopyReport = Vec<(&'static str, u64)>;

/// Copies every table of `from` into the empty database `to` (see the module doc) in one write
/// transaction on `to`: all of it or nothing.
///
/// # Errors
/// [`MigrateError::TargetNotEmpty`] (as [`AppError::Conflict`]), an unknown table, database
/// errors of either side (the target is then left as it was).
pub async fn copy_database(from: &AnyPool, to: &AnyPool) -> AppResult<CopyReport> {
    for t in tables(from).await? {
        let known = COPIED.contains(&t.as_str())
            || DERIVED
                .iter()
                .any(|d| t == *d || t.starts_with(&format!("{d}_")))
            || t.starts_with("_sqlx")
            || t.starts_with("sqlite_");
        if !known {
            return Err(MigrateError::UnknownTable(t).into());
        }
    }
    let mut held = Vec::new();
    for &t in COPIED {
        let n: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM {t}")))
            .fetch_one(to)
            .await?;
        if n > 0 {
            held.push(format!("{t}: {n}"));
        }
    }
    if !held.is_empty() {
        return Err(MigrateError::TargetNotEmpty {
            held: held.join(", "),
        }
        .into());
    }
    let mut tx = super::begin_write(to).await?;
    let mut report = CopyReport::new();
    for &table in COPIED {
        report.push((table, copy_table(from, &mut tx, table).await?));
    }
    restore_trigger_effects(from, &mut tx).await?;
    rebuild_full_text(&mut tx).await?;
    tx.commit().await?;
    Ok(report)
}

/// Base tables of the database behind `pool`.
async fn tables(pool: &AnyPool) -> AppResult<Vec<String>> {
    Ok(
        sqlx::query_scalar(dialect::BASE_TABLES.on(Backend::of(pool)))
            .fetch_all(pool)
            .await?,
    )
}

/// A column's storage class, as both backends can bind it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Class {
    Int,
    Real,
    Text,
    Blob,
}

impl Class {
    /// From a declared type: SQLite's affinity rules (sqlite.org/datatype3.html §3.1), which
    /// PostgreSQL's type names (`bigint`, `text`, `bytea`, `double precision`) also fall into.
    fn of_declared(t: &str) -> Class {
        let t = t.to_ascii_uppercase();
        if t.contains("INT") {
            Class::Int
        } else if t.contains("CHAR") || t.contains("TEXT") || t.contains("CLOB") {
            Class::Text
        } else if t.contains("BLOB") || t.contains("BYTEA") {
            Class::Blob
        } else if t.contains("REAL") || t.contains("FLOA") || t.contains("DOUB") {
            Class::Real
        } else {
            Class::Text
        }
    }
}

/// `(name, class)` of the plain (not generated) columns of `table`, in table order.
async fn columns(conn: &mut sqlx::AnyConnection, table: &str) -> AppResult<Vec<(String, Class)>> {
    let sql = dialect::TABLE_COLUMNS.on(Backend::of_connection(conn));
    let rows: Vec<(String, String)> = sqlx::query_as(sql)
        .bind(table)
        .fetch_all(&mut *conn)
        .await?;
    Ok(rows
        .into_iter()
        .map(|(n, t)| (n, Class::of_declared(&t)))
        .collect())
}

/// One value of a source row, by what it holds.
enum Cell {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

fn cell(row: &AnyRow, i: usize) -> AppResult<Cell> {
    let raw = row.try_get_raw(i)?;
    if raw.is_null() {
        return Ok(Cell::Null);
    }
    let kind = raw.type_info().kind();
    Ok(match kind {
        AnyTypeInfoKind::SmallInt | AnyTypeInfoKind::Integer | AnyTypeInfoKind::BigInt => {
            Cell::Int(row.try_get(i)?)
        }
        AnyTypeInfoKind::Real | AnyTypeInfoKind::Double => Cell::Real(row.try_get(i)?),
        AnyTypeInfoKind::Blob => Cell::Blob(row.try_get(i)?),
        AnyTypeInfoKind::Bool => Cell::Int(i64::from(row.try_get::<bool, _>(i)?)),
        AnyTypeInfoKind::Null => Cell::Null,
        AnyTypeInfoKind::Text => Cell::Text(row.try_get(i)?),
    })
}

/// Copies `table` row for row (columns both sides have; `records.superseded_by` left empty, see
/// [`restore_trigger_effects`]): the number of rows.
async fn copy_table(from: &AnyPool, tx: &mut Tx, table: &'static str) -> AppResult<u64> {
    let target = columns(tx, table).await?;
    let mut source_conn = from.acquire().await?;
    let source: Vec<String> = columns(&mut source_conn, table)
        .await?
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    drop(source_conn);
    let cols: Vec<(String, Class)> = target
        .into_iter()
        .filter(|(n, _)| source.contains(n))
        .collect();
    let names: Vec<&str> = cols.iter().map(|(n, _)| n.as_str()).collect();
    let select = format!("SELECT {} FROM {table} ORDER BY 1", names.join(", "));
    let placeholders: Vec<String> = (1..=cols.len()).map(|i| format!("${i}")).collect();
    let insert = format!(
        "INSERT INTO {table} ({}) VALUES ({})",
        names.join(", "),
        placeholders.join(", ")
    );
    let rows: Vec<AnyRow> = sqlx::query(sqlx::AssertSqlSafe(select))
        .fetch_all(from)
        .await?;
    for row in &rows {
        let mut q = sqlx::query(sqlx::AssertSqlSafe(insert.as_str()));
        for (i, (name, class)) in cols.iter().enumerate() {
            let v = if table == "records" && name == "superseded_by" {
                Cell::Null
            } else {
                cell(row, i)?
            };
            q = bind(q, *class, v).map_err(|e| corrupt(format!("{table}.{name}: {e}")))?;
        }
        q.execute(&mut **tx).await?;
    }
    Ok(rows.len() as u64)
}

type AnyQuery<'q> = sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>;

/// Binds `v` as the target column's class (a typed NULL for an empty cell, so PostgreSQL knows
/// its type).
fn bind(q: AnyQuery<'_>, class: Class, v: Cell) -> Result<AnyQuery<'_>, String> {
    Ok(match (class, v) {
        (Class::Int, Cell::Null) => q.bind(None::<i64>),
        (Class::Real, Cell::Null) => q.bind(None::<f64>),
        (Class::Text, Cell::Null) => q.bind(None::<String>),
        (Class::Blob, Cell::Null) => q.bind(None::<Vec<u8>>),
        (Class::Int, Cell::Int(n)) => q.bind(n),
        (Class::Int, Cell::Text(t)) => q.bind(t.parse::<i64>().map_err(|e| e.to_string())?),
        (Class::Real, Cell::Real(f)) => q.bind(f),
        (Class::Real, Cell::Int(n)) => q.bind(n as f64),
        (Class::Text, Cell::Text(t)) => q.bind(t),
        (Class::Text, Cell::Int(n)) => q.bind(n.to_string()),
        (Class::Text, Cell::Real(f)) => q.bind(f.to_string()),
        (Class::Blob, Cell::Blob(b)) => q.bind(b),
        (Class::Blob, Cell::Text(t)) => q.bind(t.into_bytes()),
        (c, _) => return Err(format!("a value that does not fit a {c:?} column")),
    })
}

/// Writes `records.superseded_by` and sets `incidents.revision` back to the source's values
/// (the target's triggers counted every copied child row).
async fn restore_trigger_effects(from: &AnyPool, tx: &mut Tx) -> AppResult<()> {
    let links: Vec<(i64, i64)> = sqlx::query_as(
        "SELECT id, superseded_by FROM records WHERE superseded_by IS NOT NULL ORDER BY id",
    )
    .fetch_all(from)
    .await?;
    for (id, by) in links {
        sqlx::query("UPDATE records SET superseded_by = $1 WHERE id = $2")
            .bind(by)
            .bind(id)
            .execute(&mut **tx)
            .await?;
    }
    let revisions: Vec<(String, i64)> =
        sqlx::query_as("SELECT id, revision FROM incidents ORDER BY id")
            .fetch_all(from)
            .await?;
    for (id, revision) in revisions {
        sqlx::query("UPDATE incidents SET revision = $1 WHERE id = $2")
            .bind(revision)
            .bind(&id)
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}

/// Fills the target's full-text tables from its records (durable, not retracted, as
/// [`super::memory::insert`] indexes them) and incident documents.
async fn rebuild_full_text(tx: &mut Tx) -> AppResult<()> {
    type FtsRow = (i64, String, String, String, Option<String>);
    let rows: Vec<FtsRow> = sqlx::query_as(
        "SELECT id, text, services, failure_modes, action_kind FROM records
          WHERE kind IN (SELECT value FROM json_each($1)) AND validation != 'retracted'
          ORDER BY id",
    )
    .bind(durable_kinds_json())
    .fetch_all(&mut **tx)
    .await?;
    for (id, text, services, modes, action) in rows {
        let services: Vec<String> = serde_json::from_str(&services).map_err(corrupt)?;
        let modes: Vec<String> = serde_json::from_str(&modes).map_err(corrupt)?;
        sqlx::query("INSERT INTO records_fts (rowid, text, scope) VALUES ($1, $2, $3)")
            .bind(id)
            .bind(text)
            .bind(scope_of(&services, &modes, action.as_deref()))
            .execute(&mut **tx)
            .await?;
    }
    sqlx::query(
        "INSERT INTO incident_documents_fts (rowid, text)
         SELECT id, text FROM incident_documents ORDER BY id",
    )
    .execute(&mut **tx)
    .await?;
    sqlx::query("UPDATE recall_generation SET value = value + 1 WHERE id = 1")
        .execute(&mut **tx)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_types_map_to_the_class_both_backends_bind() {
        for (t, c) in [
            ("INTEGER", Class::Int),
            ("bigint", Class::Int),
            ("TEXT", Class::Text),
            ("text", Class::Text),
            ("character varying", Class::Text),
            ("BLOB", Class::Blob),
            ("bytea", Class::Blob),
            ("REAL", Class::Real),
            ("double precision", Class::Real),
            ("", Class::Text),
        ] {
            assert_eq!(Class::of_declared(t), c, "{t}");
        }
    }
}
