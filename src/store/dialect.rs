//! Every statement whose text differs between SQLite and PostgreSQL, by name.
//!
//! The store's SQL is one text for both backends wherever the two dialects agree (the PostgreSQL
//! schema, `migrations/postgres/0001_schema.sql`, adds the few SQLite JSON functions that text
//! uses). What cannot be one text lives here, each item with what it does and why the backends
//! differ, so that a reader sees the whole dialect surface in one file and a change to one
//! spelling sits next to the other:
//!
//! - a [`Statement`]: the same operation in both spellings, picked with [`Statement::on`];
//! - a `SQLITE_…` or `POSTGRES_…` constant: a statement only one backend runs (its counterpart
//!   has another shape, or there is none).
//!
//! Only text lives here; the functions that bind and run it stay in their store modules.
//! (`store::memory`'s full-text statements are still in that file, to move here.)

use super::Backend;

/// One operation in each backend's spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Statement {
    /// The text SQLite runs.
    pub sqlite: &'static str,
    /// The text PostgreSQL runs.
    pub postgres: &'static str,
}

impl Statement {
    /// The text for `backend`.
    pub const fn on(self, backend: Backend) -> &'static str {
        match backend {
            Backend::Sqlite => self.sqlite,
            Backend::Postgres => self.postgres,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Connections and transactions
// ---------------------------------------------------------------------------------------------

/// Settings of every SQLite connection: WAL, `synchronous = NORMAL` (durable at each
/// checkpoint, never corrupt: SQLite "WAL mode" documentation), a 10 s busy timeout, foreign
/// keys on, no memory map and a 4 MiB page cache per connection (8 connections: at most 32 MiB).
///
/// Without the map, pages not in a connection's cache are read with `pread` from the kernel's
/// page cache, so the process's memory is bounded by the caches whatever the file's size. With a
/// 256 MiB map, the mapped pages counted in the process's RSS as the database grew: 37 → 78 MiB
/// over a 300 s `soak-bench` (10,000 evidence records added), most of its RSS growth.
///
/// SQLite only: these are per-connection pragmas of an embedded engine; a PostgreSQL server is
/// configured by its operator, and enforces foreign keys always.
pub const SQLITE_TUNING: &str = "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; \
     PRAGMA busy_timeout = 10000; PRAGMA foreign_keys = ON; \
     PRAGMA mmap_size = 0; PRAGMA cache_size = -4096;";

/// Starts a SQLite write transaction holding the database's write lock from its first
/// statement, so that writers queue on the busy timeout instead of failing on a lock upgrade.
///
/// SQLite only: PostgreSQL has no `BEGIN IMMEDIATE` (its writers lock rows, not the database);
/// there a write transaction is a plain `BEGIN` followed by [`POSTGRES_WRITE_LOCK`].
pub const SQLITE_BEGIN_WRITE: &str = "BEGIN IMMEDIATE";

/// Takes the app's transaction-level advisory lock (`$1`: its key), released at commit or
/// rollback: writers from every app instance on the database run one at a time, as SQLite's
/// [`SQLITE_BEGIN_WRITE`] makes them, so the compare-and-set transitions, the webhook dedupe and
/// the audit chain's append keep the guarantees they have there.
///
/// PostgreSQL only: SQLite has one writer per database by construction.
pub const POSTGRES_WRITE_LOCK: &str = "SELECT 1 FROM pg_advisory_xact_lock($1)";

/// Makes the current (read) transaction see one snapshot from its first statement to its last.
///
/// PostgreSQL only: its default isolation (READ COMMITTED) takes a new snapshot per statement;
/// a SQLite read transaction reads one snapshot already.
pub const POSTGRES_SNAPSHOT_READ: &str =
    "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY";

// ---------------------------------------------------------------------------------------------
// Catalogue: what the database holds
// ---------------------------------------------------------------------------------------------

/// Whether sqlx's `_sqlx_migrations` table exists: one row, the count (0 or 1). Tells a database
/// this program wrote from a foreign one before anything is written.
///
/// The catalogues differ: SQLite lists its objects in `sqlite_master`; PostgreSQL in
/// `information_schema` (per schema: the connection's current one).
pub const MIGRATIONS_TABLE_EXISTS: Statement = Statement {
    sqlite: "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'",
    postgres: "SELECT count(*) FROM information_schema.tables
                WHERE table_schema = current_schema() AND table_name = '_sqlx_migrations'",
};

/// Names of the base tables of the database: one row each.
///
/// The catalogues differ (see [`MIGRATIONS_TABLE_EXISTS`]). SQLite's list includes its virtual
/// (FTS5) tables and their shadow tables; PostgreSQL's `table_name` is cast to `text` because
/// its type, `sql_identifier`, is not one the Any driver decodes.
pub const BASE_TABLES: Statement = Statement {
    sqlite: "SELECT name FROM sqlite_master WHERE type = 'table'",
    postgres: "SELECT table_name::text FROM information_schema.tables
                WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'",
};

/// `(name, declared type)` of the plain columns of the table `$1`, in table order.
///
/// The catalogues differ: SQLite answers `pragma_table_info`; PostgreSQL
/// `information_schema.columns`, where generated columns (the full-text tables' `tsv`) are left
/// out, since nothing writes them.
pub const TABLE_COLUMNS: Statement = Statement {
    sqlite: "SELECT name, type FROM pragma_table_info($1) ORDER BY cid",
    postgres: "SELECT column_name::text, data_type::text FROM information_schema.columns
                WHERE table_schema = current_schema() AND table_name = $1 AND is_generated = 'NEVER'
                ORDER BY ordinal_position",
};

// ---------------------------------------------------------------------------------------------
// Full-text search
// ---------------------------------------------------------------------------------------------

/// BM25 search of the incident documents: `(incident id, score)` best first, higher is better;
/// `$1` the query (an FTS5 expression of quoted words OR-ed), `$2` an incident to leave out (or
/// NULL), `$3` at most this many.
///
/// Full text differs: SQLite's `incident_documents_fts` is an FTS5 table queried with `MATCH`
/// and ranked with `bm25()` (lower is better, so negated); PostgreSQL's is a table with a
/// stored `tsvector` queried with `@@ websearch_to_tsquery` (which reads the same quoted, OR-ed
/// words) and ranked with `ts_rank_cd` (higher is better; ties broken by incident id).
pub const DOCUMENT_SEARCH: Statement = Statement {
    sqlite: "SELECT d.incident_id, -bm25(incident_documents_fts) FROM incident_documents_fts f
             JOIN incident_documents d ON d.id = f.rowid
             WHERE incident_documents_fts MATCH $1 AND ($2 IS NULL OR d.incident_id != $2)
             ORDER BY bm25(incident_documents_fts) LIMIT $3",
    postgres: "SELECT d.incident_id,
                      CAST(ts_rank_cd(f.tsv, websearch_to_tsquery('incidentmind', $1))
                           AS DOUBLE PRECISION) AS s
               FROM incident_documents_fts f
               JOIN incident_documents d ON d.id = f.rowid
               WHERE f.tsv @@ websearch_to_tsquery('incidentmind', $1)
                 AND ($2 IS NULL OR d.incident_id != $2)
               ORDER BY s DESC, d.incident_id LIMIT $3",
};

// ---------------------------------------------------------------------------------------------
// Recall's index
// ---------------------------------------------------------------------------------------------

/// Recall's whole index in one row of three JSON-array texts (`$1`: the durable kinds, a JSON
/// array): the live records' ranking fields with their incident
/// (`[[id, kind, validation, created_at, importance, evidence_count, consolidated_into],
/// incident_id]`), the structured keys of those records (`[key, value, record id]`) and the
/// service graph (`[service, depends_on]`). One row, not many: rows cross a thread boundary one
/// by one, arrays do not.
///
/// JSON differs: SQLite builds arrays with `json_group_array` / `json_array` (an empty group is
/// `[]`); PostgreSQL with its own `json_agg` / `json_build_array` (an empty group is NULL, so
/// `coalesce`d) and reads the kinds with `jsonb_array_elements_text`.
pub const RECALL_INDEX: Statement = Statement {
    sqlite: "WITH live AS MATERIALIZED (
                 SELECT * FROM records_rank
                 WHERE validation != 'retracted' AND kind IN (SELECT value FROM json_each($1)))
             SELECT
               (SELECT json_group_array(json_array(
                    json_array(id, kind, validation, created_at, importance, evidence_count,
                               consolidated_into),
                    incident_id)) FROM live),
               (SELECT json_group_array(json_array(k.key, k.value, k.record_id))
                  FROM record_keys k JOIN live ON live.id = k.record_id),
               (SELECT json_group_array(json_array(service, depends_on)) FROM service_dependencies)",
    postgres: "WITH live AS MATERIALIZED (
                   SELECT * FROM records_rank
                   WHERE validation != 'retracted'
                     AND kind IN (SELECT jsonb_array_elements_text($1::jsonb)))
               SELECT
                 (SELECT coalesce(json_agg(json_build_array(
                      json_build_array(id, kind, validation, created_at, importance,
                                       evidence_count, consolidated_into),
                      incident_id)), '[]')::text FROM live),
                 (SELECT coalesce(json_agg(json_build_array(k.key, k.value, k.record_id)), '[]')::text
                    FROM record_keys k JOIN live ON live.id = k.record_id),
                 (SELECT coalesce(json_agg(json_build_array(service, depends_on)), '[]')::text
                    FROM service_dependencies)",
};

// ---------------------------------------------------------------------------------------------
// Embedding vectors: insert or replace
// ---------------------------------------------------------------------------------------------

/// A [`Statement`] that inserts `target` (`table (columns) VALUES … | SELECT …`) and replaces
/// the vector of the row with the same `keys`; see [`STORE_RECORD_EMBEDDING`] for why the
/// spellings differ.
macro_rules! replace_vector {
    ($target:literal, $keys:literal) => {
        Statement {
            sqlite: concat!("INSERT OR REPLACE INTO ", $target),
            postgres: concat!(
                "INSERT INTO ",
                $target,
                " ON CONFLICT (",
                $keys,
                ") DO UPDATE SET vector = excluded.vector"
            ),
        }
    };
}

/// Stores the vector of record `$1` for model `$2` (`$3`: little-endian f32s), replacing an
/// earlier one; a record deleted meanwhile gets none.
///
/// Upserts differ in what they do to the row's rowid, which readers of "vectors after rowid N"
/// (`store::embeddings::since`) rely on: SQLite's `INSERT OR REPLACE` deletes the old row and
/// inserts a new one with a new rowid; PostgreSQL's `ON CONFLICT … DO UPDATE` keeps the row, and
/// the schema's `embedding_rowid_renew` trigger gives its explicit `rowid` column a new value
/// likewise. (SQLite 3.24+ knows `ON CONFLICT DO UPDATE` too, but an update keeps the rowid.)
pub const STORE_RECORD_EMBEDDING: Statement = replace_vector!(
    "record_embeddings (record_id, model, vector) SELECT id, $2, $3 FROM records WHERE id = $1",
    "record_id, model"
);

/// Stores the vector of incident document `$1` for model `$2` (`$3`: little-endian f32s),
/// replacing an earlier one; a document deleted meanwhile gets none. Spellings: see
/// [`STORE_RECORD_EMBEDDING`].
pub const STORE_DOCUMENT_EMBEDDING: Statement = replace_vector!(
    "incident_document_embeddings (document_id, model, vector)
     SELECT id, $2, $3 FROM incident_documents WHERE id = $1",
    "document_id, model"
);

/// Stores the vector of incident passage `$1` for model `$2` (`$3`: little-endian f32s),
/// replacing an earlier one; a passage deleted meanwhile gets none. Spellings: see
/// [`STORE_RECORD_EMBEDDING`].
pub const STORE_PASSAGE_EMBEDDING: Statement = replace_vector!(
    "incident_passage_embeddings (passage_id, model, vector)
     SELECT id, $2, $3 FROM incident_passages WHERE id = $1",
    "passage_id, model"
);

/// Stores the vector of part `$2` (0–2: a rule's ALWAYS, BECAUSE, SCOPE) of record `$1` for
/// model `$3` (`$4`: little-endian f32s), replacing an earlier one; a record deleted meanwhile
/// gets none. Spellings: see [`STORE_RECORD_EMBEDDING`].
pub const STORE_PART_EMBEDDING: Statement = replace_vector!(
    "record_part_embeddings (record_id, part, model, vector)
     SELECT id, $2, $3, $4 FROM records WHERE id = $1",
    "record_id, part, model"
);

/// Writes an imported vector of record `$1` for model `$2` (`$3`), replacing one stored for the
/// same record and model. Spellings: see [`STORE_RECORD_EMBEDDING`].
pub const RESTORE_RECORD_EMBEDDING: Statement = replace_vector!(
    "record_embeddings (record_id, model, vector) VALUES ($1, $2, $3)",
    "record_id, model"
);

/// Writes an imported vector of part `$2` of record `$1` for model `$3` (`$4`), replacing one
/// stored for the same record, part and model. Spellings: see [`STORE_RECORD_EMBEDDING`].
pub const RESTORE_PART_EMBEDDING: Statement = replace_vector!(
    "record_part_embeddings (record_id, part, model, vector) VALUES ($1, $2, $3, $4)",
    "record_id, part, model"
);

// ---------------------------------------------------------------------------------------------
// Backups (SQLite files)
// ---------------------------------------------------------------------------------------------

/// Writes a consistent copy of the whole database to the file `$1`: one read transaction, so
/// the copy is one snapshot, compacted; writers are not blocked under WAL. SQLite refuses a
/// path that exists and is not empty.
///
/// SQLite only: a PostgreSQL database is copied with `pg_dump` (`backup` refuses its URL).
pub const SQLITE_VACUUM_INTO: &str = "VACUUM INTO $1";

/// SQLite's check of the whole file: one row `ok` for a sound database, else one row per
/// problem.
///
/// SQLite only: PostgreSQL has no counterpart over SQL (`amcheck` is an extension); `backup`
/// and `restore`, which run it on a copy, take SQLite files only.
pub const SQLITE_INTEGRITY_CHECK: &str = "PRAGMA integrity_check";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_statement_picks_its_backends_text() {
        let s = Statement {
            sqlite: "a",
            postgres: "b",
        };
        assert_eq!(s.on(Backend::Sqlite), "a");
        assert_eq!(s.on(Backend::Postgres), "b");
    }

    #[test]
    fn a_replaced_vector_is_an_insert_or_replace_on_sqlite_and_an_upsert_on_postgresql() {
        assert_eq!(
            RESTORE_RECORD_EMBEDDING.sqlite,
            "INSERT OR REPLACE INTO record_embeddings (record_id, model, vector) VALUES ($1, $2, $3)"
        );
        assert_eq!(
            RESTORE_RECORD_EMBEDDING.postgres,
            "INSERT INTO record_embeddings (record_id, model, vector) VALUES ($1, $2, $3) \
             ON CONFLICT (record_id, model) DO UPDATE SET vector = excluded.vector"
        );
    }
}
