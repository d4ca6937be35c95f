//! Command line: `serve` (the default; builds the app with [`crate::App::build`]), `user add`,
//! `user token`, `audit verify`, `export`, `import`, `backup`, `restore`, `history load`, `demo`,
//! `eval recall`, `consolidate`.
//!
//! Every option also reads an `INCIDENTMIND_…` environment variable; `--help` lists them.
//!
//! Long because it holds every command's clap options next to the function that runs the command.

pub mod demo;
pub mod eval;

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

/// Which embeddings recall compares (`serve`, `import`, `history load`, `eval recall`). `Debug`
/// never prints the API key.
#[derive(Clone, Args)]
pub struct EmbeddingArgs {
    /// Base URL of an OpenAI-compatible embeddings endpoint (`…/v1`); unset = the built-in model
    /// (or none with `--embeddings off`).
    #[arg(long, env = "INCIDENTMIND_EMBEDDINGS_BASE_URL")]
    pub embeddings_base_url: Option<String>,
    /// Embedding model name.
    #[arg(
        long,
        env = "INCIDENTMIND_EMBEDDINGS_MODEL",
        default_value = "text-embedding-3-small"
    )]
    pub embeddings_model: String,
    /// API key for the embeddings endpoint (empty: the model key `INCIDENTMIND_LLM_API_KEY` when
    /// both base URLs are the same, else none).
    #[arg(
        long,
        env = "INCIDENTMIND_EMBEDDINGS_API_KEY",
        default_value = "",
        hide_env_values = true,
        hide_default_value = true
    )]
    pub embeddings_api_key: String,
    /// Which embeddings recall compares: `auto` (the endpoint when
    /// `INCIDENTMIND_EMBEDDINGS_BASE_URL` is set, else the built-in all-MiniLM-L6-v2), `builtin`,
    /// `endpoint` or `off` (recall on words and structured keys only).
    #[arg(
        long,
        env = "INCIDENTMIND_EMBEDDINGS",
        default_value = "auto",
        value_parser = ["auto", "builtin", "endpoint", "off"]
    )]
    pub embeddings: String,
    /// Folder of the built-in embedding model (`config.json`, `tokenizer.json`,
    /// `model.safetensors`); default `models/all-MiniLM-L6-v2`.
    #[arg(long, env = "INCIDENTMIND_EMBEDDINGS_MODEL_DIR")]
    pub embeddings_model_dir: Option<std::path::PathBuf>,
}

impl std::fmt::Debug for EmbeddingArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddingArgs")
            .field("embeddings_base_url", &self.embeddings_base_url)
            .field("embeddings_model", &self.embeddings_model)
            .field("embeddings", &self.embeddings)
            .field("embeddings_model_dir", &self.embeddings_model_dir)
            .finish_non_exhaustive()
    }
}

/// The Prometheus source (`serve`). `Debug` never prints the token or the password.
#[derive(Clone, Args)]
pub struct PrometheusArgs {
    /// Base URL of a Prometheus server (`http://prometheus:9090`): alerts whose `generatorURL`
    /// carries an expression get its series as evidence, and responders may run queries from
    /// the incident page. Unset: nothing is pulled.
    #[arg(long, env = "INCIDENTMIND_PROMETHEUS_URL")]
    pub prometheus_url: Option<String>,
    /// Bearer token sent to Prometheus (`Authorization: Bearer …`).
    #[arg(
        long,
        env = "INCIDENTMIND_PROMETHEUS_TOKEN",
        hide_env_values = true,
        conflicts_with = "prometheus_user"
    )]
    pub prometheus_token: Option<String>,
    /// User name for HTTP basic authentication to Prometheus.
    #[arg(long, env = "INCIDENTMIND_PROMETHEUS_USER")]
    pub prometheus_user: Option<String>,
    /// Password for HTTP basic authentication to Prometheus.
    #[arg(
        long,
        env = "INCIDENTMIND_PROMETHEUS_PASSWORD",
        hide_env_values = true,
        requires = "prometheus_user"
    )]
    pub prometheus_password: Option<String>,
    /// Whole-request timeout of one Prometheus query, in seconds.
    #[arg(
        long,
        env = "INCIDENTMIND_PROMETHEUS_TIMEOUT_SECS",
        default_value_t = 10
    )]
    pub prometheus_timeout_secs: u64,
    /// Series kept from one query; more are dropped with a notice on the incident.
    #[arg(long, env = "INCIDENTMIND_PROMETHEUS_MAX_SERIES", default_value_t = crate::prometheus::DEFAULT_MAX_SERIES)]
    pub prometheus_max_series: usize,
    /// Points kept per series (the step is chosen to fit); more are dropped with a notice.
    #[arg(long, env = "INCIDENTMIND_PROMETHEUS_MAX_POINTS", default_value_t = crate::prometheus::DEFAULT_MAX_POINTS)]
    pub prometheus_max_points: usize,
    /// Let responders run their own PromQL queries from an incident (they run with the app's
    /// Prometheus credentials); `false`: only the alerts' own series are pulled.
    #[arg(
        long,
        env = "INCIDENTMIND_PROMETHEUS_RESPONDER_QUERIES",
        default_value_t = true,
        action = clap::ArgAction::Set
    )]
    pub prometheus_responder_queries: bool,
}

impl std::fmt::Debug for PrometheusArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrometheusArgs")
            .field(
                "prometheus_url",
                &self
                    .prometheus_url
                    .as_deref()
                    .map(crate::store::redacted_url),
            )
            .field(
                "prometheus_token",
                &self.prometheus_token.as_ref().map(|_| "<redacted>"),
            )
            .field("prometheus_user", &self.prometheus_user)
            .field(
                "prometheus_password",
                &self.prometheus_password.as_ref().map(|_| "<redacted>"),
            )
            .field("prometheus_timeout_secs", &self.prometheus_timeout_secs)
            .field("prometheus_max_series", &self.prometheus_max_series)
            .field("prometheus_max_points", &self.prometheus_max_points)
            .field(
                "prometheus_responder_queries",
                &self.prometheus_responder_queries,
            )
            .finish()
    }
}

impl PrometheusArgs {
    /// The source's settings; `None` without a URL.
    pub fn config(&self) -> Option<crate::prometheus::PrometheusConfig> {
        use crate::prometheus::{PrometheusAuth, PrometheusConfig};
        let url = self
            .prometheus_url
            .as_deref()
            .map(str::trim)
            .filter(|u| !u.is_empty())?;
        let auth = match (&self.prometheus_token, &self.prometheus_user) {
            (Some(t), _) if !t.trim().is_empty() => PrometheusAuth::Bearer(t.trim().to_string()),
            (_, Some(u)) if !u.trim().is_empty() => PrometheusAuth::Basic {
                user: u.trim().to_string(),
                password: self.prometheus_password.clone().unwrap_or_default(),
            },
            _ => PrometheusAuth::None,
        };
        Some(PrometheusConfig {
            url: url.to_string(),
            auth,
            timeout: std::time::Duration::from_secs(self.prometheus_timeout_secs.max(1)),
            max_series: self.prometheus_max_series.max(1),
            max_points: self.prometheus_max_points.max(2),
            responder_queries: self.prometheus_responder_queries,
        })
    }
}

/// Web server options (`serve`, the default command). `Debug` never prints the model API key.
#[derive(Clone, Args)]
pub struct ServeArgs {
    /// The database.
    #[command(flatten)]
    pub db: DbArgs,
    /// Address to listen on.
    #[arg(long, env = "INCIDENTMIND_BIND", default_value = "127.0.0.1:3000")]
    pub bind: String,
    /// Largest accepted request body for ordinary requests, in bytes.
    #[arg(long, env = "INCIDENTMIND_MAX_BODY_BYTES", default_value_t = 1024 * 1024)]
    pub max_body_bytes: usize,
    /// Largest accepted evidence upload (logs, metrics, alerts), in bytes.
    #[arg(long, env = "INCIDENTMIND_MAX_EVIDENCE_BYTES", default_value_t = 50 * 1024 * 1024)]
    pub max_evidence_bytes: usize,
    /// Base URL of an OpenAI-compatible server (`…/v1`); unset = built-in analyst only.
    #[arg(long, env = LLM_BASE_URL_ENV)]
    pub llm_base_url: Option<String>,
    /// Model name for the LLM analyst.
    #[arg(long, env = "INCIDENTMIND_LLM_MODEL", default_value = "gpt-4o-mini")]
    pub llm_model: String,
    /// API key for the model server (empty for local servers).
    #[arg(
        long,
        env = LLM_API_KEY_ENV,
        default_value = "",
        hide_env_values = true,
        hide_default_value = true
    )]
    pub llm_api_key: String,
    /// Whole-call timeout for the model, in seconds.
    #[arg(long, env = "INCIDENTMIND_LLM_TIMEOUT_SECS", default_value_t = 30)]
    pub llm_timeout_secs: u64,
    /// Prompt budget for the model, in tokens.
    #[arg(long, env = "INCIDENTMIND_LLM_TOKEN_BUDGET", default_value_t = 6000)]
    pub llm_token_budget: usize,
    /// The model server's context size in tokens (llama.cpp's `-c`, Ollama's
    /// `OLLAMA_CONTEXT_LENGTH`, vLLM's `--max-model-len`); prompt and reply are fitted into it.
    /// A llama.cpp server says its own at `GET /props`, which wins. Unset: unknown, not fitted.
    #[arg(long, env = "INCIDENTMIND_LLM_CONTEXT_TOKENS")]
    pub llm_context_tokens: Option<u32>,
    /// Embeddings.
    #[command(flatten)]
    pub embeddings: EmbeddingArgs,
    /// The Prometheus source (boxed: it would make `Serve` the one large variant of
    /// [`Command`]).
    #[command(flatten)]
    pub prometheus: Box<PrometheusArgs>,
    /// Let the last editor of a post-mortem draft confirm it (small teams).
    #[arg(long, env = "INCIDENTMIND_ALLOW_SELF_CONFIRM", default_value_t = false)]
    pub allow_self_confirm: bool,
    /// Mark the session cookie `Secure` (set when served over HTTPS).
    #[arg(long, env = "INCIDENTMIND_SECURE_COOKIES", default_value_t = false)]
    pub secure_cookies: bool,
    /// Serve `GET /metrics` (Prometheus text format) to requests with `Authorization: Bearer
    /// <this token>`; unset, `/metrics` is not served (404).
    #[arg(
        long,
        env = "INCIDENTMIND_METRICS_TOKEN",
        hide_env_values = true,
        hide_default_value = true
    )]
    pub metrics_token: Option<String>,
    /// Also serve `GET /metrics` on this address (e.g. `127.0.0.1:9464`, or an interface only
    /// Prometheus reaches), without a token: that address serves nothing else. Independent of
    /// --metrics-token, which governs `/metrics` on --bind.
    #[arg(long, env = "INCIDENTMIND_METRICS_LISTEN")]
    pub metrics_listen: Option<String>,
    /// Sign-in attempts allowed per account name per minute (0: no limit); 429 over it.
    #[arg(long, env = "INCIDENTMIND_RATE_SIGNIN_ACCOUNT", default_value_t = 10)]
    pub rate_signin_account: u32,
    /// Sign-in attempts allowed per client address per minute (0: no limit).
    #[arg(long, env = "INCIDENTMIND_RATE_SIGNIN_ADDRESS", default_value_t = 30)]
    pub rate_signin_address: u32,
    /// Webhook deliveries allowed per integration per minute (0: no limit).
    #[arg(long, env = "INCIDENTMIND_RATE_WEBHOOK", default_value_t = 600)]
    pub rate_webhook: u32,
    /// Requests allowed per API token per minute (0: no limit).
    #[arg(long, env = "INCIDENTMIND_RATE_API_TOKEN", default_value_t = 600)]
    pub rate_api_token: u32,
    /// Addresses of reverse proxies whose `X-Forwarded-For` names the client (comma-separated
    /// IPs); from any other peer the header is ignored.
    #[arg(long, env = "INCIDENTMIND_TRUSTED_PROXIES", value_delimiter = ',')]
    pub trusted_proxies: Vec<std::net::IpAddr>,
    /// Standing rules (confirmed lessons) per service above which consolidation proposals for
    /// that service are queued first and say so.
    #[arg(long, env = "INCIDENTMIND_RULE_CAP", default_value_t = crate::domain::consolidation::DEFAULT_RULE_CAP)]
    pub rule_cap: usize,
    /// Run consolidation (near-duplicate lessons and failure records merged into proposed rules
    /// for the review queue) every this many hours; 0: off (run `incidentmind consolidate`).
    #[arg(
        long,
        env = "INCIDENTMIND_CONSOLIDATE_EVERY_HOURS",
        default_value_t = 0
    )]
    pub consolidate_every_hours: u64,
    /// On SIGTERM or Ctrl-C: seconds in-flight requests get to finish (new connections are
    /// refused at once); after it the process exits anyway.
    #[arg(long, env = "INCIDENTMIND_SHUTDOWN_GRACE_SECS", default_value_t = 20)]
    pub shutdown_grace_secs: u64,
}

/// The environment variable of the model server's base URL.
const LLM_BASE_URL_ENV: &str = "INCIDENTMIND_LLM_BASE_URL";
/// The environment variable of the model server's API key.
const LLM_API_KEY_ENV: &str = "INCIDENTMIND_LLM_API_KEY";

impl std::fmt::Debug for ServeArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeArgs")
            .field("db", &self.db)
            .field("bind", &self.bind)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("max_evidence_bytes", &self.max_evidence_bytes)
            .field("llm_base_url", &self.llm_base_url)
            .field("llm_model", &self.llm_model)
            .field(
                "llm_api_key",
                &if self.llm_api_key.is_empty() {
                    ""
                } else {
                    "<redacted>"
                },
            )
            .field("llm_timeout_secs", &self.llm_timeout_secs)
            .field("llm_context_tokens", &self.llm_context_tokens)
            .field("embeddings", &self.embeddings)
            .field("prometheus", &self.prometheus)
            .field("shutdown_grace_secs", &self.shutdown_grace_secs)
            .field("rule_cap", &self.rule_cap)
            .field("consolidate_every_hours", &self.consolidate_every_hours)
            .field("metrics_listen", &self.metrics_listen)
            .finish_non_exhaustive()
    }
}

/// Subcommands.
#[derive(Debug, Subcommand)]
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
        /// incident_prior, score_fusion, siblings, sibling_records.
        #[arg(long, default_value = "")]
        ablate: String,
        /// Recall weights set to another value, comma-separated `name=value` (stability checks):
        /// sibling_weight, sibling_band, incident_prior.
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
        Command::User(UserCommand::Add {
            name,
            role,
            password_stdin,
            db,
        }) => user_add(name, role, password_stdin, db).await,
        Command::User(UserCommand::Token { name, db }) => {
            let pool = open(&db, MustExist).await?;
            let (user, _) = users::find_with_password(&pool, &name)
                .await?
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "no user named {name} in {}; create one with `incidentmind user add {name}`",
                        db.database_url
                    )
                })?;
            let token = crate::services::users::issue_token(&pool, user.id).await?;
            println!("{token}");
            Ok(())
        }
        Command::Demo => crate::cli::demo::run().await,
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

/// `consolidate`: builds the app as `serve` does (database, memory with the chosen embedder)
/// over an existing database and runs [`crate::services::consolidation::consolidate`] once.
async fn consolidate(
    db: &DbArgs,
    embeddings: &EmbeddingArgs,
    rule_cap: usize,
) -> anyhow::Result<()> {
    open(db, store::OpenMode::MustExist).await?.close().await;
    let app = App::build(crate::app::Config {
        database_url: db.database_url.clone(),
        settings: Settings {
            rule_cap,
            ..Settings::default()
        },
        embedder: embedder(embeddings, None)?,
        llm: None,
    })
    .await?;
    let report =
        crate::services::consolidation::consolidate(app.memory(), app.state.settings.rule_cap)
            .await?;
    println!("{report}");
    Ok(())
}

/// `incidentmind user add`: creates the user (the password read from stdin when asked) and
/// prints its API token.
async fn user_add(
    name: String,
    role: String,
    password_stdin: bool,
    db: DbArgs,
) -> anyhow::Result<()> {
    use store::OpenMode::CreateIfMissing;
    let password = if password_stdin {
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line)?;
        let p = line.trim_end_matches(['\r', '\n']).to_string();
        anyhow::ensure!(
            p.chars().count() >= 8,
            "the password must be at least 8 characters"
        );
        Some(p)
    } else {
        None
    };
    let pool = open(&db, CreateIfMissing).await?;
    let token = crate::services::users::add_user(&pool, &name, &role, password.as_deref()).await?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "created user {name} ({role})")?;
    writeln!(out, "{token}")?;
    Ok(())
}

/// Checks the database file at `path`: opens it (it must be an IncidentMind database), runs
/// `PRAGMA integrity_check` and verifies the audit chain; returns what it holds and the number
/// of audit entries checked.
async fn check_database(path: &std::path::Path) -> anyhow::Result<(store::backup::Contents, i64)> {
    let url = path.to_string_lossy();
    let pool = store::open(&url, store::OpenMode::MustExist).await?;
    let checked = async {
        let problems = store::backup::integrity_check(&pool).await?;
        anyhow::ensure!(
            problems == ["ok"],
            "{}: integrity check failed: {}",
            path.display(),
            problems.join("; ")
        );
        let entries = match audit::verify(&pool).await? {
            audit::Verification::Intact { entries } => entries,
            audit::Verification::Broken { seq, reason } => {
                anyhow::bail!(
                    "{}: audit log BROKEN at entry {seq}: {reason}",
                    path.display()
                )
            }
        };
        Ok((store::backup::contents(&pool).await?, entries))
    }
    .await;
    pool.close().await;
    checked
}

/// `migrate-db --from URL --to URL`: [`store::migrate::copy_database`], then the audit chain
/// verified on the target; prints rows per table.
async fn migrate_db(from: &str, to: &str) -> anyhow::Result<()> {
    let source = store::open(from, store::OpenMode::MustExist).await?;
    let target = store::open(to, store::OpenMode::CreateIfMissing).await?;
    let report = store::migrate::copy_database(&source, &target).await;
    source.close().await;
    let report = match report {
        Ok(r) => r,
        Err(e) => {
            target.close().await;
            anyhow::bail!("nothing was copied: {e}");
        }
    };
    let mut total = 0;
    for (table, rows) in &report {
        println!("{table:<32} {rows:>9}");
        total += rows;
    }
    println!("{:<32} {total:>9}", "rows copied");
    let verified = audit::verify(&target).await?;
    target.close().await;
    match verified {
        audit::Verification::Intact { entries } => {
            println!(
                "audit chain on {}: intact ({entries} entries)",
                store::redacted_url(to)
            );
            Ok(())
        }
        audit::Verification::Broken { seq, reason } => {
            anyhow::bail!("the audit chain on the target is broken at entry {seq}: {reason}")
        }
    }
}

/// Refuses `command` (a SQLite file operation) on a PostgreSQL database, naming the tool to use.
fn sqlite_only(db: &DbArgs, command: &str, instead: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        store::Backend::of_url(&db.database_url) == store::Backend::Sqlite,
        "`{command}` copies a SQLite file; this database is PostgreSQL: use {instead}"
    );
    Ok(())
}

/// `backup FILE`: `VACUUM INTO` from the live database, then [`check_database`] on the copy. A
/// copy that fails its check is left in place for inspection and the command fails.
async fn backup(file: &std::path::Path, db: &DbArgs) -> anyhow::Result<()> {
    sqlite_only(db, "backup", "pg_dump")?;
    anyhow::ensure!(
        !file.exists(),
        "{} already exists; give a new file name (backups are never overwritten)",
        file.display()
    );
    let pool = open(db, store::OpenMode::MustExist).await?;
    let copied = store::backup::vacuum_into(&pool, file).await;
    pool.close().await;
    copied.map_err(|e| {
        anyhow::anyhow!(
            "cannot write the backup to {}: {}; check that its folder exists and is writable",
            file.display(),
            std::error::Error::source(&e).map_or_else(|| e.to_string(), |s| s.to_string())
        )
    })?;
    let (contents, entries) = check_database(file)
        .await
        .map_err(|e| e.context(format!("the backup at {} failed its check", file.display())))?;
    let bytes = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
    println!(
        "backup written to {} ({bytes} bytes): integrity ok, audit log intact ({entries} \
         entries); {contents}",
        file.display()
    );
    Ok(())
}

/// `restore FILE`: checks the backup, refuses a non-empty target without `force`, writes a
/// copy of the backup beside the target and renames it over the target (after removing the
/// target's `-wal` and `-shm`, which belong to the old file), then checks the result.
async fn restore(file: &std::path::Path, force: bool, db: &DbArgs) -> anyhow::Result<()> {
    sqlite_only(
        db,
        "restore",
        "pg_restore, or migrate-db from a SQLite backup",
    )?;
    let (contents, _) = check_database(file)
        .await
        .map_err(|e| e.context(format!("not restoring from {}", file.display())))?;
    let target = store::database_file(&db.database_url)?;
    if target.exists() && !force {
        let existing = store::open(&target.to_string_lossy(), store::OpenMode::MustExist).await;
        match existing {
            Ok(pool) => {
                let held = store::backup::contents(&pool).await;
                pool.close().await;
                let held = held?;
                anyhow::ensure!(
                    held.is_empty(),
                    "{} is not empty ({held}); pass --force to replace it with {}",
                    target.display(),
                    file.display()
                );
            }
            Err(e) => anyhow::bail!("{e}; pass --force to replace it with {}", file.display()),
        }
    }
    let side = |suffix: &str| {
        let mut p = target.clone().into_os_string();
        p.push(suffix);
        std::path::PathBuf::from(p)
    };
    let staged = side(".restoring");
    let _ = std::fs::remove_file(&staged);
    let source = store::open(&file.to_string_lossy(), store::OpenMode::MustExist).await?;
    let copied = store::backup::vacuum_into(&source, &staged).await;
    source.close().await;
    copied.map_err(|e| {
        anyhow::anyhow!(
            "cannot write {} (beside the database): {e}; check that the folder is writable",
            staged.display()
        )
    })?;
    for stale in [side("-wal"), side("-shm")] {
        match std::fs::remove_file(&stale) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => anyhow::bail!("cannot remove {}: {e}", stale.display()),
        }
    }
    std::fs::rename(&staged, &target)
        .map_err(|e| anyhow::anyhow!("cannot move the restored copy into place: {e}"))?;
    let (restored, entries) = check_database(&target).await?;
    anyhow::ensure!(
        restored == contents,
        "the restored database holds {restored}, the backup {contents}"
    );
    println!(
        "restored {} into {}: integrity ok, audit log intact ({entries} entries); {restored}",
        file.display(),
        target.display()
    );
    Ok(())
}

/// `import FILE`: reads the file before the database is opened (a missing file creates nothing).
async fn import(
    file: &std::path::Path,
    skip_existing: bool,
    db: &DbArgs,
    embeddings: &EmbeddingArgs,
) -> anyhow::Result<()> {
    use crate::services::memory::ImportError;
    let bytes = std::fs::read(file).map_err(|e| {
        anyhow::anyhow!(
            "cannot read the import file {}: {e}; give the path of a .jsonl file written by \
             `incidentmind export`",
            file.display()
        )
    })?;
    let text = String::from_utf8_lossy(&bytes);
    let pool = open(db, store::OpenMode::CreateIfMissing).await?;
    match crate::services::memory::import(&pool, "import", &text, skip_existing).await {
        Ok(done) => {
            println!(
                "imported {} records from {}{}",
                done.imported,
                file.display(),
                if done.skipped > 0 {
                    format!(
                        "; skipped {} whose id was already in the database",
                        done.skipped
                    )
                } else {
                    String::new()
                }
            );
            let memory = crate::memory::Memory::new(pool.clone(), embedder(embeddings, None)?);
            let (docs, vectors) = crate::memory::embeddings::catch_up(&memory).await?;
            println!("indexed {docs} incident documents, embedded {vectors} texts");
            Ok(())
        }
        Err(ImportError::BadLines(bad)) => {
            for b in &bad {
                eprintln!("{}: line {}: {}", file.display(), b.line, b.message);
            }
            anyhow::bail!(
                "{} bad line(s) in {}; nothing was imported",
                bad.len(),
                file.display()
            )
        }
        Err(ImportError::Existing(ids)) => anyhow::bail!(
            "{} record(s) of {} are already in {} (ids {}); nothing was imported. Pass \
             --skip-existing to import only the others",
            ids.len(),
            file.display(),
            db.database_url,
            id_list(&ids)
        ),
        Err(ImportError::App(e)) => Err(e.into()),
    }
}

/// Up to ten ids, then "…".
fn id_list(ids: &[i64]) -> String {
    let mut s = ids
        .iter()
        .take(10)
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    if ids.len() > 10 {
        s.push_str(", …");
    }
    s
}

/// The model server whose key the embeddings endpoint may share: its base URL and API key.
#[derive(Debug, Clone, Default)]
pub struct ModelServer {
    /// `INCIDENTMIND_LLM_BASE_URL`.
    pub base_url: Option<String>,
    /// `INCIDENTMIND_LLM_API_KEY`.
    pub api_key: String,
}

impl ModelServer {
    /// The server `serve`'s options name.
    fn of(args: &ServeArgs) -> Self {
        Self {
            base_url: args.llm_base_url.clone(),
            api_key: args.llm_api_key.clone(),
        }
    }

    /// For commands without model options (`import`, `history load`, `eval`): the same
    /// environment variables `serve` reads, so the embeddings key falls back the same way.
    fn from_env() -> Self {
        Self {
            base_url: std::env::var(LLM_BASE_URL_ENV).ok(),
            api_key: std::env::var(LLM_API_KEY_ENV).unwrap_or_default(),
        }
    }
}

/// The key sent to the embeddings endpoint at `base`: its own key when set, else the model key
/// when the embeddings endpoint is the model's own server (same base URL), else none — the model
/// key never goes to another host.
fn embeddings_api_key(args: &EmbeddingArgs, model: &ModelServer, base: &str) -> String {
    let same_server = model.base_url.as_deref().map(|b| b.trim_end_matches('/'))
        == Some(base.trim_end_matches('/'));
    if args.embeddings_api_key.is_empty() && same_server {
        model.api_key.clone()
    } else {
        args.embeddings_api_key.clone()
    }
}

/// The embedder `args` choose (see [`EmbeddingArgs::embeddings`]): the built-in model (loaded
/// here, ≈ 170 ms), an OpenAI-compatible endpoint, or none. `model` is the model server whose
/// key an endpoint on the same server shares (`None`: read from the environment).
///
/// # Errors
/// `builtin` (or `auto` without an endpoint) when the model files cannot be loaded — the message
/// names the folder and how to turn embeddings off; `endpoint` without a base URL.
pub fn embedder(
    args: &EmbeddingArgs,
    model: Option<&ModelServer>,
) -> anyhow::Result<Option<std::sync::Arc<dyn crate::memory::Embedder>>> {
    use crate::memory::embeddings::{BuiltinEmbedder, EmbeddingConfig, OpenAiEmbedder};
    let base = args
        .embeddings_base_url
        .as_deref()
        .filter(|b| !b.trim().is_empty());
    let choice = match (args.embeddings.as_str(), base) {
        ("auto", Some(_)) => "endpoint",
        ("auto", None) => "builtin",
        (other, _) => other,
    };
    match choice {
        "off" => {
            tracing::info!("embeddings off: recall on words and structured keys only");
            Ok(None)
        }
        "endpoint" => {
            let base = base.ok_or_else(|| {
                anyhow::anyhow!("--embeddings endpoint needs INCIDENTMIND_EMBEDDINGS_BASE_URL")
            })?;
            let api_key = match model {
                Some(m) => embeddings_api_key(args, m, base),
                None => embeddings_api_key(args, &ModelServer::from_env(), base),
            };
            let embedder = OpenAiEmbedder::new(EmbeddingConfig {
                base_url: base.to_string(),
                model: args.embeddings_model.clone(),
                api_key,
                timeout: std::time::Duration::from_secs(5),
            })?;
            tracing::info!(model = %args.embeddings_model, base = %base, "embeddings endpoint configured");
            Ok(Some(std::sync::Arc::new(embedder)))
        }
        _ => {
            let dir = args
                .embeddings_model_dir
                .clone()
                .unwrap_or_else(crate::memory::minilm::default_dir);
            let started = std::time::Instant::now();
            let embedder = BuiltinEmbedder::load(&dir).map_err(|e| {
                anyhow::anyhow!(
                    "{e}\nThe built-in embedding model is read from {}; give another folder with \
                     --embeddings-model-dir, or run without embeddings with --embeddings off",
                    dir.display()
                )
            })?;
            tracing::info!(
                model = crate::memory::minilm::MODEL_NAME,
                dir = %dir.display(),
                load_ms = started.elapsed().as_millis() as u64,
                "built-in embedding model loaded"
            );
            Ok(Some(std::sync::Arc::new(embedder)))
        }
    }
}

/// What `serve`'s flags build: settings, the embedder they choose and the model analyst when a
/// model server is configured.
///
/// # Errors
/// The embedder cannot be loaded or configured ([`embedder`]); the model client cannot be built.
pub fn serve_config(args: &ServeArgs) -> anyhow::Result<crate::app::Config> {
    let settings = Settings {
        max_body_bytes: args.max_body_bytes,
        secure_cookies: args.secure_cookies,
        max_evidence_bytes: args.max_evidence_bytes,
        allow_self_confirm: args.allow_self_confirm,
        metrics_token_sha256: args
            .metrics_token
            .as_deref()
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(|t| crate::digest::sha256_hex(t.as_bytes())),
        rate_limits: crate::web::limits::RateLimitSettings {
            signin_per_account: args.rate_signin_account,
            signin_per_address: args.rate_signin_address,
            webhook_per_integration: args.rate_webhook,
            api_per_token: args.rate_api_token,
            trusted_proxies: args.trusted_proxies.clone(),
        },
        rule_cap: args.rule_cap,
        consolidate_every: (args.consolidate_every_hours > 0).then(|| {
            std::time::Duration::from_secs(args.consolidate_every_hours.saturating_mul(3600))
        }),
        prometheus: args.prometheus.config(),
    };
    let embedder = embedder(&args.embeddings, Some(&ModelServer::of(args)))?;
    let llm: Option<std::sync::Arc<dyn crate::analyst::Analyst>> = if let Some(base) = args
        .llm_base_url
        .as_deref()
        .filter(|b| !b.trim().is_empty())
    {
        let llm = crate::analyst::llm::LlmAnalyst::new(crate::analyst::llm::LlmConfig {
            base_url: base.to_string(),
            model: args.llm_model.clone(),
            api_key: args.llm_api_key.clone(),
            timeout: std::time::Duration::from_secs(args.llm_timeout_secs.max(1)),
            token_budget: args.llm_token_budget.max(500),
            context_tokens: args.llm_context_tokens.filter(|n| *n > 0),
        })?;
        tracing::info!(model = %args.llm_model, base = %base, "LLM analyst configured");
        Some(std::sync::Arc::new(llm))
    } else {
        tracing::info!("no model configured: using the built-in analyst");
        None
    };
    Ok(crate::app::Config {
        database_url: args.db.database_url.clone(),
        settings,
        embedder,
        llm,
    })
}

/// `serve`: builds the app ([`App::build`]), runs its background work beside it
/// ([`App::spawn_background`]: memory worker, metrics upkeep, consolidation schedule), and serves until
/// Ctrl-C or SIGTERM. Then it stops accepting connections, tells the worker to stop at its next
/// safe point (between batches) and lets in-flight requests finish for up to
/// `--shutdown-grace-secs`; after that it returns anyway (exit status 0, with a warning).
async fn serve(args: &ServeArgs) -> anyhow::Result<()> {
    use std::future::IntoFuture as _;
    let app = App::build(serve_config(args)?).await?;
    let grace = std::time::Duration::from_secs(args.shutdown_grace_secs);
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let worker = app.spawn_background(std::time::Duration::from_secs(10), stopped);
    // Bound before the app's listener, so a taken address fails the start.
    if let Some(addr) = args
        .metrics_listen
        .as_deref()
        .filter(|a| !a.trim().is_empty())
    {
        let metrics = tokio::net::TcpListener::bind(addr.trim())
            .await
            .map_err(|e| {
                anyhow::Error::new(e).context(format!("cannot listen on --metrics-listen {addr}"))
            })?;
        tracing::info!("serving /metrics on http://{}", metrics.local_addr()?);
        crate::web::ops::spawn_metrics_listener(metrics, app.state.clone(), stop.subscribe());
    }
    let listener = tokio::net::TcpListener::bind(&args.bind).await?;
    tracing::info!("listening on http://{}", listener.local_addr()?);
    let mut signalled = stop.subscribe();
    let server = axum::serve(
        listener,
        app.router
            .into_make_service_with_connect_info::<std::net::SocketAddr>(),
    )
    .with_graceful_shutdown(async move {
        shutdown_signal().await;
        tracing::info!(
            grace_secs = grace.as_secs(),
            "shutting down: no new connections; in-flight requests may finish"
        );
        let _ = stop.send(true);
    })
    .into_future();
    let deadline = async {
        let _ = signalled.wait_for(|s| *s).await;
        tokio::time::sleep(grace).await;
    };
    tokio::select! {
        served = server => served?,
        () = deadline => {
            tracing::warn!(
                grace_secs = grace.as_secs(),
                "shutdown grace period over with requests still in flight; exiting anyway"
            );
            return Ok(());
        }
    }
    // The worker stops between batches; a batch in progress gets the same grace period.
    if tokio::time::timeout(grace, worker).await.is_err() {
        tracing::warn!("the memory worker did not stop within the grace period");
    }
    tracing::info!("shut down");
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = terminate => {},
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;

    fn args(flags: &[&str]) -> ServeArgs {
        let cli = Cli::try_parse_from([&["incidentmind"], flags].concat()).expect("valid flags");
        cli.serve
    }

    #[test]
    fn prometheus_flags_build_the_source_and_debug_hides_its_secrets() {
        assert_eq!(args(&[]).prometheus.config(), None);
        let a = args(&[
            "--prometheus-url",
            "http://prometheus:9090",
            "--prometheus-token",
            "prom-tok-1",
            "--prometheus-max-points",
            "300",
            "--prometheus-responder-queries",
            "false",
        ]);
        let c = a.prometheus.config().expect("configured");
        assert_eq!(
            c.auth,
            crate::prometheus::PrometheusAuth::Bearer("prom-tok-1".into())
        );
        assert_eq!((c.max_points, c.responder_queries), (300, false));
        assert!(!format!("{a:?}").contains("prom-tok-1"));
        let b = args(&[
            "--prometheus-url",
            "http://prometheus:9090",
            "--prometheus-user",
            "ops",
            "--prometheus-password",
            "prom-pw-2",
        ]);
        assert!(matches!(
            b.prometheus.config().map(|c| c.auth),
            Some(crate::prometheus::PrometheusAuth::Basic { .. })
        ));
        let shown = format!("{b:?} {:?}", b.prometheus.config());
        assert!(!shown.contains("prom-pw-2"), "{shown}");
    }

    #[test]
    fn the_model_key_goes_to_the_embeddings_endpoint_only_on_the_same_server() {
        let base = "https://api.openai.com/v1";
        let same = args(&[
            "--llm-base-url",
            "https://api.openai.com/v1/",
            "--llm-api-key",
            "sk-model",
        ]);
        assert_eq!(
            embeddings_api_key(&same.embeddings, &ModelServer::of(&same), base),
            "sk-model"
        );
        let other = args(&[
            "--llm-base-url",
            "https://llm.example/v1",
            "--llm-api-key",
            "sk-model",
        ]);
        assert_eq!(
            embeddings_api_key(&other.embeddings, &ModelServer::of(&other), base),
            ""
        );
        let own = args(&[
            "--llm-api-key",
            "sk-model",
            "--embeddings-api-key",
            "sk-embed",
        ]);
        assert_eq!(
            embeddings_api_key(&own.embeddings, &ModelServer::of(&own), base),
            "sk-embed"
        );
    }
}
