//! `serve` and what it is built from: the web app's options (`ServeArgs`, with the embedding
//! and Prometheus options), the app's configuration from them (`serve_config`, `embedder`), and
//! the server's run with graceful shutdown.

use super::*;

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
    /// PromQL template of a service's request rate, pulled beside each alert's own series over
    /// the same window and stored with it; `$service` stands for the alert's service label
    /// value, escaped as a PromQL string, so write it inside double quotes:
    /// `sum(rate(http_requests_total{service="$service"}[5m]))`. Unset: not pulled.
    #[arg(long, env = "INCIDENTMIND_PROMETHEUS_REQUEST_RATE")]
    pub prometheus_request_rate: Option<String>,
    /// PromQL template of a service's error rate, like `--prometheus-request-rate`:
    /// `sum(rate(http_requests_total{service="$service",code=~"5.."}[5m]))`. Unset: not pulled.
    #[arg(long, env = "INCIDENTMIND_PROMETHEUS_ERROR_RATE")]
    pub prometheus_error_rate: Option<String>,
    /// Times a failed query of an alert's pull is tried again (Prometheus unreachable, slower
    /// than the timeout, HTTP 5xx or 429), after 250 ms and then twice as long each time; a
    /// query Prometheus rejects is never tried again.
    #[arg(long, env = "INCIDENTMIND_PROMETHEUS_RETRIES", default_value_t = crate::prometheus::DEFAULT_RETRIES)]
    pub prometheus_retries: u32,
    /// Alerts' queries sent to Prometheus at once; the others wait their turn.
    #[arg(long, env = "INCIDENTMIND_PROMETHEUS_PULL_CONCURRENCY", default_value_t = crate::prometheus::DEFAULT_PULL_CONCURRENCY)]
    pub prometheus_pull_concurrency: usize,
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
            .field("prometheus_request_rate", &self.prometheus_request_rate)
            .field("prometheus_error_rate", &self.prometheus_error_rate)
            .field("prometheus_retries", &self.prometheus_retries)
            .field(
                "prometheus_pull_concurrency",
                &self.prometheus_pull_concurrency,
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
            request_rate: template(self.prometheus_request_rate.as_deref()),
            error_rate: template(self.prometheus_error_rate.as_deref()),
            retries: self.prometheus_retries,
            pull_concurrency: self.prometheus_pull_concurrency.max(1),
            ..PrometheusConfig::new(url)
        })
    }
}

/// A query template as given, `None` when unset or blank.
fn template(t: Option<&str>) -> Option<String> {
    t.map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string)
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
    /// The app's address as people reach it (`https://incidents.example.com`): chat messages
    /// link to `{public_url}/incidents/{id}`. Default: `http://` + `--bind`.
    #[arg(long, env = "INCIDENTMIND_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Largest accepted request body for ordinary requests, in bytes.
    #[arg(long, env = "INCIDENTMIND_MAX_BODY_BYTES", default_value_t = 1024 * 1024)]
    pub max_body_bytes: usize,
    /// Largest accepted evidence upload (logs, metrics, alerts), in bytes.
    #[arg(long, env = "INCIDENTMIND_MAX_EVIDENCE_BYTES", default_value_t = 50 * 1024 * 1024)]
    pub max_evidence_bytes: usize,
    /// Largest accepted alert webhook body, in bytes (Alertmanager does not retry a 413: keep
    /// it above what its `max_alerts` lets through).
    #[arg(long, env = "INCIDENTMIND_MAX_WEBHOOK_BYTES", default_value_t = crate::web::DEFAULT_MAX_WEBHOOK_BYTES)]
    pub max_webhook_bytes: usize,
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
    /// Sign-in: OpenID Connect, the authenticating proxy, passwords, groups → role.
    #[command(flatten)]
    pub identity: Box<super::identity::IdentityArgs>,
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
    /// Live incident streams (`GET /incidents/{id}/events`) one user may hold open at once on
    /// this instance (tabs and windows); a 429 above it.
    #[arg(long, env = "INCIDENTMIND_LIVE_STREAMS_PER_USER", default_value_t = 8)]
    pub live_streams_per_user: usize,
    /// Minutes a live incident stream stays open without a change before it ends (the browser
    /// reconnects from where it was and is authenticated again).
    #[arg(long, env = "INCIDENTMIND_LIVE_IDLE_MINUTES", default_value_t = 30)]
    pub live_idle_minutes: u64,
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
pub(super) const LLM_BASE_URL_ENV: &str = "INCIDENTMIND_LLM_BASE_URL";
/// The environment variable of the model server's API key.
pub(super) const LLM_API_KEY_ENV: &str = "INCIDENTMIND_LLM_API_KEY";

impl std::fmt::Debug for ServeArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeArgs")
            .field("db", &self.db)
            .field("bind", &self.bind)
            .field("public_url", &self.public_url)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("max_evidence_bytes", &self.max_evidence_bytes)
            .field("max_webhook_bytes", &self.max_webhook_bytes)
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
            .field("identity", &self.identity)
            .field("shutdown_grace_secs", &self.shutdown_grace_secs)
            .field("rule_cap", &self.rule_cap)
            .field("consolidate_every_hours", &self.consolidate_every_hours)
            .field("metrics_listen", &self.metrics_listen)
            .finish_non_exhaustive()
    }
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
pub(super) fn embeddings_api_key(args: &EmbeddingArgs, model: &ModelServer, base: &str) -> String {
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
    let public_url = args
        .public_url
        .clone()
        .filter(|u| !u.trim().is_empty())
        .unwrap_or_else(|| format!("http://{}", args.bind));
    let settings = Settings {
        identity: args.identity.settings(&public_url)?,
        max_body_bytes: args.max_body_bytes,
        secure_cookies: args.secure_cookies,
        max_evidence_bytes: args.max_evidence_bytes,
        max_webhook_bytes: args.max_webhook_bytes,
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
        live: crate::web::live::LiveSettings {
            streams_per_user: args.live_streams_per_user.max(1),
            idle_limit: std::time::Duration::from_secs(args.live_idle_minutes.max(1) * 60),
            ..Default::default()
        },
        chat: crate::services::chat::ChatSettings {
            public_url,
            ..Default::default()
        },
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
pub(super) async fn serve(args: &ServeArgs) -> anyhow::Result<()> {
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
    let closing = std::sync::Arc::clone(&app.state.live);
    let server = axum::serve(
        listener,
        app.router
            .into_make_service_with_connect_info::<std::net::SocketAddr>(),
    )
    .with_graceful_shutdown(async move {
        shutdown_signal().await;
        // Open live streams end now, or they would hold the shutdown until its grace ends.
        closing.close();
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

pub(super) async fn shutdown_signal() {
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
mod tests;
