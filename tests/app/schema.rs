//! The two migration folders give the same schema: a fresh SQLite database and a fresh
//! PostgreSQL database, each migrated by the app's own `store::open`, hold the same tables,
//! columns (name, type class, NOT NULL, order), primary keys, foreign keys, unique constraints,
//! indexes (name, columns, uniqueness) and triggers — except for the differences listed in
//! [`DELIBERATE`], each with its reason. A schema change made in one folder only
//! (`migrations/sqlite` or `migrations/postgres`) fails here. Needs
//! `INCIDENTMIND_TEST_DATABASE_URL` (else SKIPPED; required under `CI=true`).
//!
//! Normalised where the dialects genuinely differ, not listed as differences:
//! - types compare by class (SQLite's affinity rules, sqlite.org/datatype3.html §3.1, which
//!   PostgreSQL's names fall into too): `INTEGER` ~ `bigint`, `TEXT` ~ `text`, `BLOB` ~ `bytea`,
//!   `REAL` ~ `double precision`; FTS5's untyped columns hold text;
//! - a primary-key column counts as NOT NULL: PostgreSQL makes it so, SQLite declares it so only
//!   when told (an `INTEGER PRIMARY KEY` is the rowid and never NULL; the app never writes NULL
//!   into a text key);
//! - constraint and index names SQLite makes up (`sqlite_autoindex_…`) and PostgreSQL makes up
//!   (`…_key`, `…_pkey`): unique constraints and primary keys compare by their columns; indexes
//!   made with `CREATE INDEX` by name and columns;
//! - sqlx's `_sqlx_migrations` table, SQLite's own `sqlite_…` tables and the shadow tables of
//!   its FTS5 tables (internals of the engine, which the app never names).

use std::collections::{BTreeMap, BTreeSet};

use incidentmind::store::{OpenMode, open};
use sqlx::AnyPool;

use crate::helpers::{fresh_postgres_database, postgres_server};

/// A difference between the two schemas that is meant, and why.
enum Deliberate {
    /// A column only the PostgreSQL schema has; it is left out of PostgreSQL's side before the
    /// comparison, with the primary key, unique constraints and indexes that use it.
    PostgresColumn {
        table: &'static str,
        column: &'static str,
        why: &'static str,
    },
    /// Triggers only the PostgreSQL schema has (`(table, trigger)`).
    PostgresTriggers {
        triggers: &'static [(&'static str, &'static str)],
        why: &'static str,
    },
}

/// Why the `*_embeddings` tables have a `rowid` column on PostgreSQL.
const EMBEDDING_ROWID: &str = "SQLite's hidden rowid, which src/store/embeddings.rs reads \
     (\"vectors after rowid N\"): PostgreSQL tables have none, so it is an explicit identity \
     column (UNIQUE) there";

/// Why the full-text tables have `rowid` and `tsv` columns on PostgreSQL.
const FTS_ROWID: &str = "FTS5's implicit rowid (= the record's or document's id), which the app \
     writes and joins on: an ordinary column (the primary key) on PostgreSQL";
const FTS_TSV: &str = "the stored tsvector and its GIN index stand in for FTS5's own index \
     (SQLite's shadow tables, left out)";

/// The deliberate differences between `migrations/sqlite` and `migrations/postgres` (the
/// PostgreSQL schema's header explains each mapping). Every entry must still be a difference:
/// one that no longer is fails the test, so the list stays true.
const DELIBERATE: &[Deliberate] = &[
    Deliberate::PostgresColumn {
        table: "records_fts",
        column: "rowid",
        why: FTS_ROWID,
    },
    Deliberate::PostgresColumn {
        table: "records_fts",
        column: "tsv",
        why: FTS_TSV,
    },
    Deliberate::PostgresColumn {
        table: "incident_documents_fts",
        column: "rowid",
        why: FTS_ROWID,
    },
    Deliberate::PostgresColumn {
        table: "incident_documents_fts",
        column: "tsv",
        why: FTS_TSV,
    },
    Deliberate::PostgresColumn {
        table: "record_embeddings",
        column: "rowid",
        why: EMBEDDING_ROWID,
    },
    Deliberate::PostgresColumn {
        table: "incident_document_embeddings",
        column: "rowid",
        why: EMBEDDING_ROWID,
    },
    Deliberate::PostgresColumn {
        table: "incident_passage_embeddings",
        column: "rowid",
        why: EMBEDDING_ROWID,
    },
    Deliberate::PostgresColumn {
        table: "record_part_embeddings",
        column: "rowid",
        why: EMBEDDING_ROWID,
    },
    Deliberate::PostgresTriggers {
        triggers: &[
            ("record_embeddings", "record_embeddings_rowid"),
            (
                "incident_document_embeddings",
                "incident_document_embeddings_rowid",
            ),
            (
                "incident_passage_embeddings",
                "incident_passage_embeddings_rowid",
            ),
            ("record_part_embeddings", "record_part_embeddings_rowid"),
        ],
        why: "a replaced vector gets a new rowid, as SQLite's INSERT OR REPLACE (delete, then \
              insert) gives it (see store::dialect::STORE_RECORD_EMBEDDING)",
    },
    Deliberate::PostgresTriggers {
        triggers: &[
            ("audit_log", "audit_log_no_truncate"),
            ("proposals", "proposals_no_truncate"),
        ],
        why: "SQLite has no TRUNCATE; on PostgreSQL it would bypass the no-delete triggers",
    },
    Deliberate::PostgresTriggers {
        triggers: &[
            ("users", "users_identity"),
            ("api_tokens", "api_tokens_identity"),
            ("timeline_events", "timeline_events_identity"),
            ("records", "records_identity"),
            ("records", "records_identity_update"),
            ("record_history", "record_history_identity"),
            ("evidence", "evidence_identity"),
            ("investigations", "investigations_identity"),
            ("recommendations", "recommendations_identity"),
            ("integrations", "integrations_identity"),
            ("alert_groups", "alert_groups_identity"),
            ("alerts", "alerts_identity"),
            ("incident_documents", "incident_documents_identity"),
            ("incident_passages", "incident_passages_identity"),
            ("proposals", "proposals_identity"),
            ("record_embeddings", "record_embeddings_identity"),
            (
                "incident_document_embeddings",
                "incident_document_embeddings_identity",
            ),
            (
                "incident_passage_embeddings",
                "incident_passage_embeddings_identity",
            ),
            ("record_part_embeddings", "record_part_embeddings_identity"),
            ("chat_channels", "chat_channels_identity"),
            ("chat_outbox", "chat_outbox_identity"),
        ],
        why: "SQLite gives a new row max(id) + 1, so an explicit id (import, migrate-db) is \
              never generated again; PostgreSQL's identity sequence must be moved past it",
    },
];

#[derive(Debug, Default)]
struct Schema {
    tables: BTreeMap<String, Table>,
    /// `(table, trigger)`.
    triggers: BTreeSet<(String, String)>,
}

#[derive(Debug, Default)]
struct Table {
    columns: Vec<Column>,
    primary_key: Vec<String>,
    foreign_keys: BTreeSet<ForeignKey>,
    unique: BTreeSet<Vec<String>>,
    /// `(name, unique, columns)` of the indexes made with `CREATE INDEX`.
    indexes: BTreeSet<(String, bool, Vec<String>)>,
}

/// `(columns, referenced table, referenced columns, on update, on delete)`.
type ForeignKey = (Vec<String>, String, Vec<String>, String, String);

#[derive(Debug)]
struct Column {
    name: String,
    class: String,
    not_null: bool,
}

/// A declared type's class: SQLite's affinity rules, which PostgreSQL's type names fall into.
fn class_of(declared: &str) -> String {
    let t = declared.to_ascii_uppercase();
    let class = if t.contains("INT") {
        "integer"
    } else if t.contains("CHAR") || t.contains("TEXT") || t.contains("CLOB") || t.is_empty() {
        // Empty: FTS5's untyped columns, which hold text.
        "text"
    } else if t.contains("BLOB") || t.contains("BYTEA") {
        "blob"
    } else if t.contains("REAL") || t.contains("FLOA") || t.contains("DOUB") {
        "real"
    } else {
        // Anything else (tsvector, numeric, …) compares by its own name.
        return declared.to_ascii_lowercase();
    };
    class.to_string()
}

fn list(s: &str) -> Vec<String> {
    if s.is_empty() {
        return Vec::new();
    }
    s.split(',').map(str::to_string).collect()
}

/// The schema of a SQLite database, from `sqlite_master` and the table pragmas.
async fn sqlite_schema(pool: &AnyPool) -> Schema {
    // pragma_table_list's type tells FTS5's shadow tables ('shadow') from the app's.
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM pragma_table_list WHERE schema = 'main' AND type IN ('table', 'virtual')
           AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name != '_sqlx_migrations'",
    )
    .fetch_all(pool)
    .await
    .expect("sqlite tables");
    let mut schema = Schema::default();
    for name in tables {
        let table = sqlite_table(pool, &name).await;
        schema.tables.insert(name, table);
    }
    let triggers: Vec<(String, String)> =
        sqlx::query_as("SELECT tbl_name, name FROM sqlite_master WHERE type = 'trigger'")
            .fetch_all(pool)
            .await
            .expect("sqlite triggers");
    schema.triggers = triggers.into_iter().collect();
    schema
}

/// One SQLite table: `pragma table_info`, `index_list` / `index_info`, `foreign_key_list`.
async fn sqlite_table(pool: &AnyPool, name: &str) -> Table {
    let mut table = Table::default();
    let columns: Vec<(String, String, i64, i64)> = sqlx::query_as(
        "SELECT name, type, \"notnull\", pk FROM pragma_table_info($1) ORDER BY cid",
    )
    .bind(name)
    .fetch_all(pool)
    .await
    .expect("table_info");
    let mut pk: Vec<(i64, String)> = Vec::new();
    for (column, declared, not_null, pk_position) in columns {
        if pk_position > 0 {
            pk.push((pk_position, column.clone()));
        }
        table.columns.push(Column {
            class: class_of(&declared),
            not_null: not_null != 0 || pk_position > 0,
            name: column,
        });
    }
    pk.sort();
    table.primary_key = pk.into_iter().map(|(_, c)| c).collect();
    let indexes: Vec<(String, i64, String)> =
        sqlx::query_as("SELECT name, \"unique\", origin FROM pragma_index_list($1)")
            .bind(name)
            .fetch_all(pool)
            .await
            .expect("index_list");
    for (index, unique, origin) in indexes {
        let columns: Vec<String> =
            sqlx::query_scalar("SELECT name FROM pragma_index_info($1) ORDER BY seqno")
                .bind(&index)
                .fetch_all(pool)
                .await
                .expect("index_info");
        match origin.as_str() {
            // UNIQUE in the table's definition.
            "u" => {
                table.unique.insert(columns);
            }
            // CREATE [UNIQUE] INDEX.
            "c" => {
                table.indexes.insert((index, unique != 0, columns));
            }
            // The primary key's own index: compared as the primary key.
            _ => {}
        }
    }
    type FkRow = (i64, String, String, Option<String>, String, String);
    let fks: Vec<FkRow> = sqlx::query_as(
        "SELECT id, \"table\", \"from\", \"to\", on_update, on_delete
           FROM pragma_foreign_key_list($1) ORDER BY id, seq",
    )
    .bind(name)
    .fetch_all(pool)
    .await
    .expect("foreign_key_list");
    let mut by_id: BTreeMap<i64, ForeignKey> = BTreeMap::new();
    for (id, target, from, to, on_update, on_delete) in fks {
        let fk = by_id
            .entry(id)
            .or_insert_with(|| (Vec::new(), target, Vec::new(), on_update, on_delete));
        fk.0.push(from);
        // No column named: the referenced table's primary key (none of ours does that).
        fk.2.push(to.unwrap_or_else(|| "<primary key>".into()));
    }
    table.foreign_keys = by_id.into_values().collect();
    table
}

/// PostgreSQL's name of a referential action (`pg_constraint.confupdtype`/`confdeltype`).
fn action(code: &str) -> String {
    match code {
        "a" => "NO ACTION",
        "r" => "RESTRICT",
        "c" => "CASCADE",
        "n" => "SET NULL",
        "d" => "SET DEFAULT",
        other => other,
    }
    .to_string()
}

/// The schema of a PostgreSQL database (its current schema), from `information_schema` and
/// `pg_catalog`.
async fn postgres_schema(pool: &AnyPool) -> Schema {
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables
          WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'
            AND table_name != '_sqlx_migrations'",
    )
    .fetch_all(pool)
    .await
    .expect("postgres tables");
    let mut schema = Schema::default();
    for name in tables {
        let table = postgres_table(pool, &name).await;
        schema.tables.insert(name, table);
    }
    let triggers: Vec<(String, String)> = sqlx::query_as(
        "SELECT c.relname::text, t.tgname::text FROM pg_trigger t
           JOIN pg_class c ON c.oid = t.tgrelid
          WHERE NOT t.tgisinternal AND c.relnamespace = current_schema()::regnamespace",
    )
    .fetch_all(pool)
    .await
    .expect("postgres triggers");
    schema.triggers = triggers.into_iter().collect();
    schema
}

/// `(kind p|u|f, columns, referenced table, referenced columns, on update, on delete)` of each
/// primary key, unique and foreign-key constraint of the table `$1`, columns comma-separated in
/// key order.
const POSTGRES_CONSTRAINTS: &str = "
    SELECT c.contype::text,
           (SELECT string_agg(a.attname::text, ',' ORDER BY k.n)
              FROM unnest(c.conkey) WITH ORDINALITY AS k(attnum, n)
              JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum),
           CASE WHEN c.contype = 'f' THEN c.confrelid::regclass::text ELSE '' END,
           coalesce((SELECT string_agg(a.attname::text, ',' ORDER BY k.n)
              FROM unnest(c.confkey) WITH ORDINALITY AS k(attnum, n)
              JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.attnum), ''),
           c.confupdtype::text, c.confdeltype::text
      FROM pg_constraint c
     WHERE c.conrelid = $1::regclass AND c.contype IN ('p', 'u', 'f')";

/// `(name, 'unique' or '', key columns comma-separated)` of the indexes of the table `$1` that
/// back none of its constraints: those made with `CREATE INDEX`.
const POSTGRES_INDEXES: &str = "
    SELECT ic.relname::text,
           CASE WHEN i.indisunique THEN 'unique' ELSE '' END,
           (SELECT string_agg(a.attname::text, ',' ORDER BY k.n)
              FROM unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, n)
              JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
             WHERE k.n <= i.indnkeyatts)
      FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
     WHERE i.indrelid = $1::regclass
       AND NOT EXISTS (SELECT 1 FROM pg_constraint c
                        WHERE c.conindid = i.indexrelid AND c.conrelid = i.indrelid)";

/// One PostgreSQL table: `information_schema.columns`, `pg_constraint`, `pg_index`.
async fn postgres_table(pool: &AnyPool, name: &str) -> Table {
    let mut table = Table::default();
    let columns: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT column_name::text, data_type::text, is_nullable::text
           FROM information_schema.columns
          WHERE table_schema = current_schema() AND table_name = $1
          ORDER BY ordinal_position",
    )
    .bind(name)
    .fetch_all(pool)
    .await
    .expect("columns");
    for (column, declared, nullable) in columns {
        table.columns.push(Column {
            name: column,
            class: class_of(&declared),
            not_null: nullable == "NO",
        });
    }
    let constraints: Vec<(String, String, String, String, String, String)> =
        sqlx::query_as(POSTGRES_CONSTRAINTS)
            .bind(name)
            .fetch_all(pool)
            .await
            .expect("constraints");
    for (kind, columns, target, target_columns, on_update, on_delete) in constraints {
        match kind.as_str() {
            "p" => table.primary_key = list(&columns),
            "u" => {
                table.unique.insert(list(&columns));
            }
            _ => {
                let (on_update, on_delete) = (action(&on_update), action(&on_delete));
                let fk = (
                    list(&columns),
                    target,
                    list(&target_columns),
                    on_update,
                    on_delete,
                );
                table.foreign_keys.insert(fk);
            }
        }
    }
    let indexes: Vec<(String, String, String)> = sqlx::query_as(POSTGRES_INDEXES)
        .bind(name)
        .fetch_all(pool)
        .await
        .expect("indexes");
    for (index, unique, columns) in indexes {
        let unique = unique == "unique";
        table.indexes.insert((index, unique, list(&columns)));
    }
    table
}

/// Takes the [`DELIBERATE`] differences out of PostgreSQL's side; gives the entries that are
/// not differences (any longer), each with what is wrong.
fn remove_deliberate(postgres: &mut Schema, sqlite: &Schema) -> Vec<String> {
    let mut stale = Vec::new();
    for entry in DELIBERATE {
        match entry {
            Deliberate::PostgresColumn { table, column, why } => {
                let on_sqlite = sqlite
                    .tables
                    .get(*table)
                    .is_some_and(|t| t.columns.iter().any(|c| c.name == *column));
                let Some(t) = postgres.tables.get_mut(*table) else {
                    stale.push(format!(
                        "{table}.{column} ({why}): no table {table} on PostgreSQL"
                    ));
                    continue;
                };
                let before = t.columns.len();
                t.columns.retain(|c| c.name != *column);
                if t.columns.len() == before || on_sqlite {
                    stale.push(format!(
                        "{table}.{column} ({why}): not a PostgreSQL-only column any more"
                    ));
                }
                let uses = |cols: &Vec<String>| cols.iter().any(|c| c == column);
                if uses(&t.primary_key) {
                    t.primary_key.clear();
                }
                t.unique.retain(|u| !uses(u));
                t.indexes.retain(|(_, _, cols)| !uses(cols));
            }
            Deliberate::PostgresTriggers { triggers, why } => {
                for (table, trigger) in *triggers {
                    let key = (table.to_string(), trigger.to_string());
                    if !postgres.triggers.remove(&key) || sqlite.triggers.contains(&key) {
                        stale.push(format!(
                            "trigger {table}.{trigger} ({why}): not a PostgreSQL-only trigger \
                             any more"
                        ));
                    }
                }
            }
        }
    }
    stale
}

/// The schema as one line per fact, to compare as sets.
fn facts(schema: &Schema) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let cols = |c: &[String]| format!("({})", c.join(", "));
    for (name, t) in &schema.tables {
        out.insert(format!("table {name}"));
        for c in &t.columns {
            let null = if c.not_null { "NOT NULL" } else { "NULL" };
            out.insert(format!("column {name}.{}: {} {null}", c.name, c.class));
        }
        let order: Vec<String> = t.columns.iter().map(|c| c.name.clone()).collect();
        out.insert(format!("column order of {name}: {}", cols(&order)));
        if !t.primary_key.is_empty() {
            out.insert(format!("primary key of {name}: {}", cols(&t.primary_key)));
        }
        for (from, target, to, on_update, on_delete) in &t.foreign_keys {
            out.insert(format!(
                "foreign key of {name}: {} -> {target} {} on update {on_update} on delete \
                 {on_delete}",
                cols(from),
                cols(to)
            ));
        }
        for u in &t.unique {
            out.insert(format!("unique constraint of {name}: {}", cols(u)));
        }
        for (index, unique, c) in &t.indexes {
            let kind = if *unique { "unique index" } else { "index" };
            out.insert(format!("{kind} {name}.{index}: {}", cols(c)));
        }
    }
    for (table, trigger) in &schema.triggers {
        out.insert(format!("trigger {table}.{trigger}"));
    }
    out
}

/// What differs between the two schemas, as a report; empty when they match.
fn differences(sqlite: &Schema, mut postgres: Schema) -> String {
    let stale = remove_deliberate(&mut postgres, sqlite);
    let (s, p) = (facts(sqlite), facts(&postgres));
    let mut report = String::new();
    let only_sqlite: Vec<&String> = s.difference(&p).collect();
    let only_postgres: Vec<&String> = p.difference(&s).collect();
    if !only_sqlite.is_empty() {
        report.push_str("\nonly in migrations/sqlite:\n");
        for f in only_sqlite {
            report.push_str(&format!("  {f}\n"));
        }
    }
    if !only_postgres.is_empty() {
        report.push_str("\nonly in migrations/postgres:\n");
        for f in only_postgres {
            report.push_str(&format!("  {f}\n"));
        }
    }
    if !stale.is_empty() {
        report.push_str("\nentries of DELIBERATE (tests/app/schema.rs) that no longer hold:\n");
        for f in stale {
            report.push_str(&format!("  {f}\n"));
        }
    }
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_and_postgresql_migrations_give_the_same_schema() {
    let Some(server) = postgres_server("schema::same_schema") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("schema.db");
    let sqlite = open(file.to_str().expect("utf-8"), OpenMode::CreateIfMissing)
        .await
        .expect("migrate SQLite");
    let postgres = open(
        &fresh_postgres_database(&server).await,
        OpenMode::CreateIfMissing,
    )
    .await
    .expect("migrate PostgreSQL");
    let (s, p) = (
        sqlite_schema(&sqlite).await,
        postgres_schema(&postgres).await,
    );
    sqlite.close().await;
    postgres.close().await;
    // The introspection itself found something: a broken query must not pass as "no difference".
    assert!(
        s.tables.len() > 20 && s.tables.values().all(|t| !t.columns.is_empty()),
        "{s:#?}"
    );
    assert!(s.tables["alerts"].indexes.len() == 1 && s.tables["alerts"].foreign_keys.len() == 2);
    assert!(p.tables["alerts"].indexes.len() == 1 && p.tables["alerts"].foreign_keys.len() == 2);
    let report = differences(&s, p);
    assert!(
        report.is_empty(),
        "the SQLite and PostgreSQL migrations give different schemas; a schema change needs a \
         migration in both folders (or, when the difference is meant, an entry with its reason \
         in DELIBERATE):\n{report}"
    );
}
