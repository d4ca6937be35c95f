//! Command line: `serve` (the default; builds the app with [`crate::App::build`]), `user add`,
//! `user token`, `audit verify`, `export`, `import`, `backup`, `restore`, `history load`, `demo`,
//! `eval recall`, `consolidate`, `mcp` (the stdio bridge to a server's `/mcp`).
//!
//! Every option also reads an `INCIDENTMIND_…` environment variable; `--help` lists them. This
//! file holds the command tree and its dispatch; `serve.rs` the web app's options and its run,
//! `commands.rs` the database commands, `demo.rs` and `eval.rs` their commands.

mod accounts;
mod commands;
pub mod demo;
pub mod eval;
pub mod identity;
mod serve;

use std::io::{BufRead, Write};

use clap::{Args, Parser, Subcommand};
use sqlx::AnyPool;

use crate::app::App;
use crate::store::{self, audit, users};
use crate::web::Settings;

/// IncidentMind: work production incidents with an organizational memory.
///
/// Without a command it runs the web app (`serve`) with the options below.
#[derive(Debug, Parser)]
#[command(version, about, args_conflicts_with_subcommands = true)]
pub struct Cli {
    /// Log lines on stderr: `text` (for people; colour codes only when stderr is a terminal) or
    /// `json` (one JSON object per line with the fields of the spans around the event, such as
    /// `http.route`, `request.id` and `incident.id`, for a log collector).
    #[arg(
        long,
        global = true,
        env = "INCIDENTMIND_LOG_FORMAT",
        default_value = "text",
        value_parser = ["text", "json"]
    )]
    pub log_format: String,
    /// Options of the web server, for `incidentmind` without a command.
    #[command(flatten)]
    pub serve: ServeArgs,
    /// What to do; `serve` when omitted.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Where the database is: every command that reads or writes it takes this option.
#[derive(Debug, Clone, Args)]
pub struct DbArgs {
    /// SQLite database file (or `sqlite://…` URL), or a PostgreSQL `postgres://…` URL. `serve`,
    /// `user add`, `import` and `history load` create it (or its schema) when missing; `audit
    /// verify`, `export` and `user token` refuse to.
    #[arg(
        long,
        env = "INCIDENTMIND_DATABASE_URL",
        default_value = "incidentmind.db"
    )]
    pub database_url: String,
}

use commands::{backup, consolidate, import, migrate_db, restore, user_add};
use serve::serve;
pub use serve::{EmbeddingArgs, ModelServer, PrometheusArgs, ServeArgs, embedder, serve_config};

/// Subcommands.
#[derive(Debug, Subcommand)]
#[allow(
    clippy::large_enum_variant,
    reason = "parsed once at start; boxing `serve`'s options would buy nothing"
)]
pub enum Command {
    /// Run the web app (default).
    Serve(ServeArgs),
    /// Manage users.
    #[command(subcommand)]
    User(UserCommand),
    /// Inspect the append-only audit log.
    #[command(subcommand)]
    Audit(AuditCommand),
    /// Write every memory record to stdout as JSON lines.
    Export {
        /// The database (must exist).
        #[command(flatten)]
        db: DbArgs,
    },
    /// Run the whole story against a temporary database through the HTTP API and print it.
    Demo,
    /// The sample organizational history.
    #[command(subcommand)]
    History(HistoryCommand),
    /// Import memory records from a JSON-lines file written by `export` (all or nothing).
    Import {
        /// Path of the .jsonl file.
        file: std::path::PathBuf,
        /// Leave records whose id is already in the database as they are and import the rest
        /// (without it, any existing id stops the import before anything is written).
        #[arg(long)]
        skip_existing: bool,
        /// The database.
        #[command(flatten)]
        db: DbArgs,
        /// Embeddings of the imported records.
        #[command(flatten)]
        embeddings: EmbeddingArgs,
    },
    /// Write an online, consistent copy of the database to FILE (SQLite `VACUUM INTO`; safe
    /// while `serve` runs), then check the copy: `PRAGMA integrity_check` and the audit chain.
    Backup {
        /// Where to write the copy (must not exist yet).
        file: std::path::PathBuf,
        /// The database to copy (must exist).
        #[command(flatten)]
        db: DbArgs,
    },
    /// Replace the database with a backup written by `backup`, after checking the backup. Stop
    /// the server first. Refuses to overwrite a database that holds anything without --force.
    Restore {
        /// The backup file.
        file: std::path::PathBuf,
        /// Overwrite a database that is not empty.
        #[arg(long)]
        force: bool,
        /// The database to replace (created when missing).
        #[command(flatten)]
        db: DbArgs,
    },
    /// Copy a whole database into an empty one, on either backend (e.g. `--from incidentmind.db
    /// --to postgres://user@host/incidentmind`): users, tokens, sessions, incidents and their
    /// timelines, evidence, memory with its embeddings, integrations, proposals and the audit
    /// log, ids kept, in one transaction on the target; then verify the audit chain there. Stop
    /// the server on the source first.
    MigrateDb {
        /// The database to copy (must exist): a SQLite path or URL, or a postgres:// URL.
        #[arg(long)]
        from: String,
        /// The database to fill (created, with its schema, when missing; must hold nothing).
        #[arg(long)]
        to: String,
    },
    /// Measure quality on a labelled set (runs on its own temporary database).
    #[command(subcommand)]
    Eval(EvalCommand),
    /// Bridge an MCP client that only starts local processes to a running server: relays the
    /// JSON-RPC messages on stdin and stdout to the server's `/mcp` (Streamable HTTP) with an API
    /// token. Starts no process; see docs/mcp.md.
    Mcp {
        /// The server's MCP endpoint, e.g. `https://incidentmind.example.com/mcp`.
        #[arg(long, env = "INCIDENTMIND_MCP_URL")]
        url: String,
        /// An API token (`incidentmind user token NAME`), sent as `Authorization: Bearer`.
        #[arg(long, env = "INCIDENTMIND_MCP_TOKEN", hide_env_values = true)]
        token: String,
    },
    /// Find near-duplicate lessons and failure records of different incidents and propose one
    /// merged rule per group for the review queue (nothing is written to memory until a
    /// reviewer accepts). `serve` runs the same on a schedule with --consolidate-every-hours.
    Consolidate {
        /// The database (must exist).
        #[command(flatten)]
        db: DbArgs,
        /// Embeddings compared (with `off`, word overlap).
        #[command(flatten)]
        embeddings: EmbeddingArgs,
        /// Standing rules per service above which its proposals are queued first.
        #[arg(long, env = "INCIDENTMIND_RULE_CAP", default_value_t = crate::domain::consolidation::DEFAULT_RULE_CAP)]
        rule_cap: usize,
    },
}

/// `eval …`
#[derive(Debug, Subcommand)]
pub enum EvalCommand {
    /// Recall evaluation: replay `past[]`, investigate `queries[]`, ask `prescriptive[]`; print
    /// per-item ranks, hit@1 / hit@3 / MRR, must-warn coverage and elapsed time.
    Recall {
        /// Path of the set (schema of recall-dev.json).
        file: std::path::PathBuf,
        /// For each query whose expected incident is not first, also print its failure-mode tags
        /// and every recalled record with why it was recalled.
        #[arg(long)]
        verbose: bool,
        /// Recall mechanisms to turn off, comma-separated (ablation): doc_bm25, doc_vector,
        /// passages, passage_mean, part_vector, part_bm25, keys, negation, load_shape,
        /// incident_prior, score_fusion, siblings, sibling_records, service_notes, lexical_floor,
        /// question_conditions, question_actions, question_rules, action_reach,
        /// question_prior.
        #[arg(long, default_value = "")]
        ablate: String,
        /// Recall weights set to another value, comma-separated `name=value` (stability checks):
        /// sibling_weight, sibling_band, incident_prior, floor_gap, floor_margin, action_weight,
        /// action_band, question_prior.
        #[arg(long = "set", default_value = "")]
        weights: String,
        /// Keep the database after replaying the past incidents at this path and reuse it on
        /// the next runs (for trying recall settings; delete it when the replay changes).
        #[arg(long)]
        replayed: Option<std::path::PathBuf>,
        /// Embeddings recall compares.
        #[command(flatten)]
        embeddings: EmbeddingArgs,
    },
    /// Failure-mode recognition: extract each line of the set (schema of
    /// signatures-dev.json) as a paste of logs, with the meaning fallback on the built-in model;
    /// print per-tag recall, primary-tag and any-tag hit rates, tag precision and the benign
    /// false-positive rate.
    Signatures {
        /// Path of the set.
        file: std::path::PathBuf,
        /// `meaning` (patterns only) or `regex` (the meaning fallback only).
        #[arg(long, default_value = "")]
        ablate: String,
        /// The fallback's rule set to other values, comma-separated `name=value` (stability
        /// checks): threshold, margin, benign_margin.
        #[arg(long = "set", default_value = "")]
        rule: String,
        /// Also list the lines whose primary tag is missed and the benign lines tagged.
        #[arg(long)]
        verbose: bool,
        /// Write what the fallback compared (text read, similarities) as JSON lines here.
        #[arg(long)]
        dump: Option<std::path::PathBuf>,
        /// Folder of the built-in model (default: models/all-MiniLM-L6-v2).
        #[arg(long, env = "INCIDENTMIND_EMBEDDINGS_MODEL_DIR")]
        model_dir: Option<std::path::PathBuf>,
    },
}

/// `user …`
#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Create a user and print a new API token as the last line of stdout.
    Add {
        /// Sign-in name (letters, digits, `.`, `_`, `-`, `@`).
        name: String,
        /// responder, reviewer or admin.
        #[arg(long, default_value = "responder")]
        role: String,
        /// Read a password from the first line of stdin (needed to sign in in a browser).
        #[arg(long)]
        password_stdin: bool,
        /// The database (created when missing).
        #[command(flatten)]
        db: DbArgs,
    },
    /// Print a new API token for an existing user (last line of stdout).
    Token {
        /// The user's name.
        name: String,
        /// What the token is for (shown in the lists).
        #[arg(long = "name", id = "token_name", default_value = "cli")]
        token_name: String,
        /// Days until it stops working; unset: never.
        #[arg(long)]
        expires_in_days: Option<u32>,
        /// The database (must exist).
        #[command(flatten)]
        db: DbArgs,
    },
    /// List a user's API tokens (id, name, made, expires, last used, state).
    Tokens {
        /// The user's name.
        name: String,
        /// The database (must exist).
        #[command(flatten)]
        db: DbArgs,
    },
    /// Revoke API token ID (from `user tokens`): it stops working at once, on every instance.
    Revoke {
        /// The token's id.
        id: i64,
        /// The database (must exist).
        #[command(flatten)]
        db: DbArgs,
    },
    /// Set a user's password from the first line of stdin; their sessions end.
    Password {
        /// The user's name.
        name: String,
        /// The database (must exist).
        #[command(flatten)]
        db: DbArgs,
    },
    /// Disable a user: their sessions and API tokens stop at once; they cannot sign in.
    Disable {
        /// The user's name.
        name: String,
        /// The database (must exist).
        #[command(flatten)]
        db: DbArgs,
    },
    /// Enable a disabled user again.
    Enable {
        /// The user's name.
        name: String,
        /// The database (must exist).
        #[command(flatten)]
        db: DbArgs,
    },
}

/// `history …`
#[derive(Debug, Subcommand)]
pub enum HistoryCommand {
    /// Replay the embedded sample history (examples/history.json) through the normal workflow.
    Load {
        /// The database (created when missing).
        #[command(flatten)]
        db: DbArgs,
        /// Embeddings of the loaded records.
        #[command(flatten)]
        embeddings: EmbeddingArgs,
    },
}

/// `audit …`
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Recompute the hash chain; exits 1 at the first broken entry.
    Verify {
        /// The database (must exist).
        #[command(flatten)]
        db: DbArgs,
    },
}

/// Parses the command line and runs it.
///
/// # Errors
/// Any failure, printed by `main` on stderr with exit code 1 (including a broken audit chain).
pub async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    init_tracing(cli.log_format == "json");
    run(cli).await
}

/// Installs the process's log subscriber (the one global of the program: `tracing` has one
/// dispatcher per process), writing to stderr at `RUST_LOG` (default `incidentmind=info,
/// tower_http=info`): JSON lines (`tracing-subscriber`'s json format, with the current span and
/// the span list) when `json`, else text.
fn init_tracing(json: bool) {
    use std::io::IsTerminal as _;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "incidentmind=info,tower_http=info".into());
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = if json {
        logs.json()
            .with_current_span(true)
            .with_span_list(true)
            .with_ansi(false)
            .try_init()
    } else {
        // Colour codes only for a person at a terminal, never into a log file or a pipe.
        logs.with_ansi(std::io::stderr().is_terminal()).try_init()
    };
}

/// `eval signatures`: see [`crate::cli::eval::signatures`].
fn eval_signatures(
    file: &std::path::Path,
    ablate: &str,
    rule: &str,
    verbose: bool,
    dump: Option<&std::path::Path>,
    model_dir: Option<std::path::PathBuf>,
) -> anyhow::Result<()> {
    use crate::cli::eval::signatures::{self, Ablation};
    use crate::memory::failure_modes::{FailureModeMeanings, MeaningTuning};
    let ablation = Ablation::parse(ablate).map_err(anyhow::Error::msg)?;
    let tuning = MeaningTuning::default()
        .parse_set(rule)
        .map_err(anyhow::Error::msg)?;
    let set = signatures::read_set(file)?;
    let meanings = if ablation == Ablation::Meaning {
        None
    } else {
        let dir = model_dir.unwrap_or_else(crate::memory::minilm::default_dir);
        let started = std::time::Instant::now();
        let model = std::sync::Arc::new(crate::memory::minilm::MiniLm::load(&dir)?);
        let m = FailureModeMeanings::build(model, tuning)?;
        println!(
            "model loaded and catalogue embedded in {:.0} ms; rule {:?}",
            started.elapsed().as_secs_f64() * 1000.0,
            m.tuning()
        );
        Some(m)
    };
    let report = signatures::run(&set, meanings.as_ref(), ablation, dump)?;
    if verbose {
        println!("{report:#}");
    } else {
        println!("{report}");
    }
    Ok(())
}

async fn open(db: &DbArgs, mode: store::OpenMode) -> anyhow::Result<AnyPool> {
    Ok(store::open(&db.database_url, mode).await?)
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    use store::OpenMode::{CreateIfMissing, MustExist};
    match cli.command.unwrap_or(Command::Serve(cli.serve)) {
        Command::Serve(args) => serve(&args).await,
        Command::Eval(EvalCommand::Recall {
            file,
            verbose,
            ablate,
            weights,
            replayed,
            embeddings,
        }) => {
            let tuning = crate::memory::RecallTuning::parse_off(&ablate)
                .and_then(|t| t.parse_weights(&weights))
                .map_err(anyhow::Error::msg)?;
            let embedder = embedder(&embeddings, None)?;
            let report =
                crate::cli::eval::recall_eval_with(&file, embedder, tuning, replayed.as_deref())
                    .await?;
            if verbose {
                println!("{report:#}");
            } else {
                println!("{report}");
            }
            Ok(())
        }
        Command::Eval(EvalCommand::Signatures {
            file,
            ablate,
            rule,
            verbose,
            dump,
            model_dir,
        }) => eval_signatures(&file, &ablate, &rule, verbose, dump.as_deref(), model_dir),
        Command::User(UserCommand::Add {
            name,
            role,
            password_stdin,
            db,
        }) => user_add(name, role, password_stdin, db).await,
        Command::User(UserCommand::Token {
            name,
            token_name,
            expires_in_days,
            db,
        }) => {
            let pool = open(&db, MustExist).await?;
            let (user, _) = users::find_with_password(&pool, &name)
                .await?
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "no enabled user named {name} in {}; create one with `incidentmind user add {name}`",
                        db.database_url
                    )
                })?;
            let days = expires_in_days.map(|d| d.to_string()).unwrap_or_default();
            let (token_name, days) =
                crate::services::accounts::parse_token_request(&token_name, &days)?;
            let (_, token) =
                crate::services::accounts::create_token(&pool, "cli", &user, &token_name, days)
                    .await?;
            println!("{token}");
            Ok(())
        }
        Command::User(command) => accounts::run(command).await,
        Command::Demo => crate::cli::demo::run().await,
        Command::Mcp { url, token } => crate::mcp::bridge::run(&url, &token).await,
        Command::History(HistoryCommand::Load { db, embeddings }) => {
            let pool = open(&db, CreateIfMissing).await?;
            let memory = crate::memory::Memory::new(pool.clone(), embedder(&embeddings, None)?);
            let loaded = crate::services::sample::load_history(&memory).await?;
            let (docs, vectors) = crate::memory::embeddings::catch_up(&memory).await?;
            println!("indexed {docs} incident documents, embedded {vectors} texts");
            for (src, id) in &loaded {
                println!("{src} → {id} (learned)");
            }
            println!("loaded {} past incidents", loaded.len());
            Ok(())
        }
        Command::Export { db } => {
            let pool = open(&db, MustExist).await?;
            let out = crate::services::memory::export(&pool).await?;
            std::io::stdout().lock().write_all(out.as_bytes())?;
            Ok(())
        }
        Command::Import {
            file,
            skip_existing,
            db,
            embeddings,
        } => import(&file, skip_existing, &db, &embeddings).await,
        Command::Consolidate {
            db,
            embeddings,
            rule_cap,
        } => consolidate(&db, &embeddings, rule_cap).await,
        Command::Backup { file, db } => backup(&file, &db).await,
        Command::MigrateDb { from, to } => migrate_db(&from, &to).await,
        Command::Restore { file, force, db } => restore(&file, force, &db).await,
        Command::Audit(AuditCommand::Verify { db }) => {
            let pool = open(&db, MustExist).await?;
            match audit::verify(&pool).await? {
                audit::Verification::Intact { entries } => {
                    println!("audit log intact: {entries} entries");
                    Ok(())
                }
                audit::Verification::Broken { seq, reason } => {
                    anyhow::bail!("audit log BROKEN at entry {seq}: {reason}")
                }
            }
        }
    }
}
