//! The LLM analyst: any OpenAI-compatible chat-completions server (OpenAI, Azure, Ollama, vLLM,
//! llama.cpp) through async-openai, with our own tolerant response types (`byot`) so replies
//! lacking optional fields (`id`, `created`, `usage`) are accepted.
//!
//! Structured-output ladder: `response_format: json_schema` → on a rejection naming the format,
//! `json_object` with the schema in the prompt → a plain prompt read by the tolerant parser. The
//! rung that answered is remembered for later calls. One timeout bounds the whole call; there are
//! no automatic retries. Everything sent is redacted and bounded to a token budget.
//!
//! Bounded answers: every string of both schemas has a `maxLength` and every array a `maxItems`
//! ([`limits`]), so a grammar-constrained server (llama.cpp, vLLM) cannot stay inside one string
//! until the token limit; the parsers truncate to the same bounds at a character boundary, so
//! the bounds hold whether or not the server enforced them. `max_tokens` is sized from those
//! bounds ([`reply_token_bound`]), and the prompt is trimmed so prompt and reply fit the
//! server's context ([`fit_budget`]): llama.cpp's `GET /props` (`n_ctx`) when it answers, else
//! [`LlmConfig::context_tokens`].
//!
//! Request shapes differ between servers: a 400 naming `maxLength` sends the schema without it
//! (the parsers still truncate), one naming `max_tokens` switches to `max_completion_tokens`
//! (OpenAI's reasoning models), one naming `temperature` or `seed` leaves it out; each is
//! remembered like the rung, on the analyst (in `AppState`). Temperature is 0 and the seed fixed
//! ([`SEED`]) so the same request gets the same answer. Error bodies are read in each server's
//! dialect.
//!
//! The same ladder drafts post-mortems ([`postmortem_schema`]): the model writes the prose and
//! the lessons (as ALWAYS/BECAUSE/SCOPE/SEVERITY rules); the facts stay the built-in draft's.

use std::sync::atomic::{AtomicU8, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_trait::async_trait;
use serde_json::{Value, json};

use super::{
    Analyst, AnalystError, AnalystOutput, InvestigationInput, PriorIncident, ProposedAction,
    ProposedHypothesis,
};
use crate::domain::postmortem::{DraftFacts, Postmortem};
use crate::domain::{Confidence, Rule, RuleSeverity};
use crate::evidence::truncate_chars;

/// Configuration of the model server.
#[derive(Clone)]
pub struct LlmConfig {
    /// Base URL including `/v1`, e.g. `http://127.0.0.1:8080/v1`.
    pub base_url: String,
    /// Model name.
    pub model: String,
    /// API key (empty for local servers).
    pub api_key: String,
    /// Whole-call timeout.
    pub timeout: Duration,
    /// Prompt budget in tokens (≈ 4 characters each). When the server's context is known the
    /// prompt may get less, so that prompt and reply fit it ([`fit_budget`]).
    pub token_budget: usize,
    /// The server's context size in tokens (llama.cpp's `-c`, Ollama's `OLLAMA_CONTEXT_LENGTH`,
    /// vLLM's `--max-model-len`), used when the server does not say it at `GET /props`. `None`:
    /// unknown, the prompt gets `token_budget` and the reply its bound, unfitted.
    pub context_tokens: Option<u32>,
}

impl std::fmt::Debug for LlmConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field(
                "api_key",
                &if self.api_key.is_empty() {
                    ""
                } else {
                    "<redacted>"
                },
            )
            .field("timeout", &self.timeout)
            .field("token_budget", &self.token_budget)
            .field("context_tokens", &self.context_tokens)
            .finish()
    }
}

/// Rungs of the structured-output ladder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rung {
    /// `response_format: {type: json_schema}`.
    JsonSchema = 0,
    /// `response_format: {type: json_object}` with the schema in the prompt.
    JsonObject = 1,
    /// No response format; the tolerant parser reads the reply.
    Plain = 2,
}

impl Rung {
    fn from_u8(v: u8) -> Self {
        match v {
            0 => Self::JsonSchema,
            1 => Self::JsonObject,
            _ => Self::Plain,
        }
    }

    /// Name for logs and notices.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::JsonSchema => "json_schema",
            Self::JsonObject => "json_object",
            Self::Plain => "plain",
        }
    }
}

/// An async-openai client for the OpenAI-compatible server at `base_url` (ending in `/v1`),
/// sending `api_key` as a bearer token (empty: none), every call bounded by `timeout`. It uses the
/// plain reqwest service, without async-openai's default retry layer: one HTTP call per request,
/// never multiplied by retries. Shared by the LLM analyst and [`crate::memory::embeddings`].
///
/// # Errors
/// When the HTTP client cannot be built (TLS back end unavailable).
pub fn openai_client(
    base_url: &str,
    api_key: &str,
    timeout: Duration,
) -> anyhow::Result<Client<OpenAIConfig>> {
    let http = reqwest::Client::builder().timeout(timeout).build()?;
    let config = OpenAIConfig::new()
        .with_api_base(base_url.trim_end_matches('/'))
        .with_api_key(api_key);
    Ok(Client::with_config(config)
        .with_http_service(async_openai::middleware::ReqwestService::new(http)))
}

/// The LLM analyst. What it learns about its server — the rung that answers, the request-shape
/// adaptations, the server's context size — lives here, on the one analyst `AppState` holds;
/// nothing is process-wide.
#[derive(Debug)]
pub struct LlmAnalyst {
    config: LlmConfig,
    client: Client<OpenAIConfig>,
    /// For `GET /props` (not an OpenAI endpoint, so not through async-openai).
    http: reqwest::Client,
    rung: AtomicU8,
    quirks: AtomicU8,
    /// The context size `/props` gave: [`CONTEXT_UNPROBED`], [`CONTEXT_NOT_GIVEN`] or tokens.
    server_context: AtomicU32,
    last_call: std::sync::Mutex<Option<CallReport>>,
}

/// Request-shape adaptation: send `max_completion_tokens` instead of `max_tokens` (OpenAI's
/// reasoning models reject the latter).
const QUIRK_MAX_COMPLETION_TOKENS: u8 = 1;
/// Request-shape adaptation: leave `temperature` out (models that accept only the default).
const QUIRK_NO_TEMPERATURE: u8 = 2;
/// Request-shape adaptation: send the `json_schema` format without `maxLength` (servers whose
/// schema subset lacks it answer 400 naming it, e.g. OpenAI strict mode's "'maxLength' is not
/// permitted"); the parsers still truncate to [`limits`].
const QUIRK_NO_MAX_LENGTH: u8 = 4;
/// Request-shape adaptation: leave `seed` out (servers that reject it).
const QUIRK_NO_SEED: u8 = 8;

/// [`LlmAnalyst::server_context`]: `/props` not asked yet (or the server was unreachable).
const CONTEXT_UNPROBED: u32 = 0;
/// [`LlmAnalyst::server_context`]: the server answered `/props` without a context size (or not
/// at all: OpenAI, vLLM, Ollama); [`LlmConfig::context_tokens`] applies.
const CONTEXT_NOT_GIVEN: u32 = u32::MAX;

/// Upper bound of the model timeout. Every HTTP request to IncidentMind is cut off at
/// [`crate::web::REQUEST_TIMEOUT`] (120 s, 408; checked at compile time there); the model call
/// must end well before that so the page can show the built-in result with "model unavailable:
/// …" instead of an error.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(90);

/// The seed sent with every request (OpenAI's and llama.cpp's `seed`), with temperature 0, so
/// the same request gets the same answer where the server allows it; a server that rejects the
/// parameter gets none.
pub const SEED: u64 = 20;

/// Reply budget (`max_tokens`) for a schema without bounds on every string and array. Ours have
/// them: see [`reply_token_bound`].
const DEFAULT_REPLY_TOKENS: u32 = 1500;
/// With `max_completion_tokens` the budget includes hidden reasoning tokens: ask for at least
/// this many.
const MAX_COMPLETION_TOKENS: u32 = 4096;
/// Bound of the `GET /props` request (it answers from memory on llama.cpp).
const PROPS_TIMEOUT: Duration = Duration::from_secs(3);
/// Largest `/props` body read (llama.cpp's is a few kB, chat template included).
const PROPS_MAX_BYTES: usize = 1 << 20;

/// What one model call sent and got back (the last one is kept, see [`LlmAnalyst::last_call`]):
/// for logs, the live tests and the README's latency figures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallReport {
    /// The rung that answered.
    pub rung: Rung,
    /// The server's context in tokens (from `/props`, else the configuration), when known.
    pub context_tokens: Option<u32>,
    /// The reply budget sent (`max_tokens`, or `max_completion_tokens` for reasoning models).
    pub reply_tokens: u32,
    /// Characters of the prompt sent (system and user messages).
    pub prompt_chars: usize,
    /// The prompt's size in tokens as [`fit_budget`] estimates it.
    pub prompt_tokens_estimate: u32,
    /// The prompt's size in tokens as the server counted it (`usage.prompt_tokens`), if given.
    pub prompt_tokens: Option<u64>,
    /// The reply's size in tokens as the server counted it (`usage.completion_tokens`).
    pub completion_tokens: Option<u64>,
    /// `finish_reason` of the first choice (`stop`, `length`, …).
    pub finish_reason: Option<String>,
    /// `true` when the schema went without `maxLength` (the server rejected it).
    pub without_max_length: bool,
    /// SHA-256 hex of the request body the server answered: equal digests mean equal requests.
    pub request_digest: String,
    /// SHA-256 hex of the reply's message content (empty content: of the empty string).
    pub reply_digest: String,
    /// The reply's characters and its last [`REPLY_TAIL_CHARS`] characters: where a truncated
    /// reply (`finish_reason=length`) stopped, for the log and the live tests.
    pub reply_chars: usize,
    /// See [`CallReport::reply_chars`].
    pub reply_tail: String,
    /// Wall time from the start of the call (the `/props` probe and the ladder included) to
    /// the answer.
    pub elapsed: Duration,
}

impl LlmAnalyst {
    /// Builds the client. The key and base URL always come from `config` (never from `OPENAI_*`).
    /// A timeout above [`MAX_TIMEOUT`] is capped to it.
    ///
    /// # Errors
    /// When the HTTP client cannot be built.
    pub fn new(mut config: LlmConfig) -> anyhow::Result<Self> {
        if config.timeout > MAX_TIMEOUT {
            tracing::warn!(
                configured = ?config.timeout,
                used = ?MAX_TIMEOUT,
                "model timeout capped: the request itself gives up after 120 s, and the model must give up first so the page can show the built-in result"
            );
            config.timeout = MAX_TIMEOUT;
        }
        let client = openai_client(&config.base_url, &config.api_key, config.timeout)?;
        let http = reqwest::Client::builder()
            .timeout(PROPS_TIMEOUT.min(config.timeout))
            .build()?;
        Ok(Self {
            client,
            http,
            config,
            rung: AtomicU8::new(0),
            quirks: AtomicU8::new(0),
            server_context: AtomicU32::new(CONTEXT_UNPROBED),
            last_call: std::sync::Mutex::new(None),
        })
    }

    /// Starts the ladder at `rung` instead of `json_schema` (for servers known not to support
    /// the higher rungs, and for tests that exercise each rung against a real server).
    pub fn with_start_rung(self, rung: Rung) -> Self {
        self.rung.store(rung as u8, Ordering::Relaxed);
        self
    }

    /// The rung later calls start at (after a call: the rung that answered it).
    pub fn current_rung(&self) -> Rung {
        Rung::from_u8(self.rung.load(Ordering::Relaxed))
    }

    /// The model name.
    pub fn model(&self) -> &str {
        &self.config.model
    }

    /// What the last call that reached the model sent and got back (`None` before one did). With
    /// concurrent calls, whichever answered last.
    pub fn last_call(&self) -> Option<CallReport> {
        self.last_call
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// `false` once the server rejected `maxLength`: schemas then go without it (and the
    /// parsers still cut every string to its bound).
    pub fn sends_max_length(&self) -> bool {
        self.quirks.load(Ordering::Relaxed) & QUIRK_NO_MAX_LENGTH == 0
    }

    /// The server's context size in tokens: what llama.cpp's `GET /props` says (asked once, on
    /// the first call, and remembered), else [`LlmConfig::context_tokens`]. An unreachable
    /// server is asked again on the next call.
    async fn context_tokens(&self) -> Option<u32> {
        match self.server_context.load(Ordering::Relaxed) {
            CONTEXT_UNPROBED => {}
            CONTEXT_NOT_GIVEN => return self.config.context_tokens,
            n => return Some(n),
        }
        match self.probe_props().await {
            Props::Context(n) => {
                tracing::info!(n_ctx = n, "model server context size from /props");
                self.server_context.store(n, Ordering::Relaxed);
                Some(n)
            }
            Props::NotGiven => {
                self.server_context
                    .store(CONTEXT_NOT_GIVEN, Ordering::Relaxed);
                self.config.context_tokens
            }
            Props::Unavailable(e) => {
                tracing::debug!(error = %e, "model server /props unavailable; asking again next call");
                self.config.context_tokens
            }
        }
    }

    /// Whether the server is llama.cpp's: it answered `GET /props` with a context size.
    fn is_llama_cpp(&self) -> bool {
        !matches!(
            self.server_context.load(Ordering::Relaxed),
            CONTEXT_UNPROBED | CONTEXT_NOT_GIVEN
        )
    }

    /// `GET /props` at the server root ([`props_url`]). llama.cpp's server answers it with its
    /// settings, the context size at `default_generation_settings.n_ctx` (llama.cpp
    /// `tools/server/README.md`, "GET /props: Get server global properties"); other servers
    /// answer 404.
    async fn probe_props(&self) -> Props {
        let mut req = self.http.get(props_url(&self.config.base_url));
        if !self.config.api_key.is_empty() {
            req = req.bearer_auth(&self.config.api_key);
        }
        let mut res = match req.send().await {
            Ok(r) => r,
            Err(e) => return Props::Unavailable(e.to_string()),
        };
        let status = res.status();
        if status.is_server_error() {
            // llama.cpp answers 503 while it loads the model.
            return Props::Unavailable(format!("HTTP {status}"));
        }
        if !status.is_success() {
            return Props::NotGiven;
        }
        let mut body = Vec::new();
        loop {
            match res.chunk().await {
                Ok(Some(c)) if body.len() + c.len() <= PROPS_MAX_BYTES => {
                    body.extend_from_slice(&c)
                }
                Ok(Some(_)) => return Props::NotGiven,
                Ok(None) => break,
                Err(e) => return Props::Unavailable(e.to_string()),
            }
        }
        match serde_json::from_slice::<Value>(&body)
            .ok()
            .as_ref()
            .and_then(n_ctx_of)
        {
            Some(n) => Props::Context(n),
            None => Props::NotGiven,
        }
    }

    fn record(&self, report: CallReport) {
        *self
            .last_call
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(report);
    }

    /// One chat completion under the ladder. `user` builds the user message within a budget in
    /// characters (it is asked again per rung: a rung with the schema in the prompt leaves less
    /// room). The caller bounds the call with the timeout.
    async fn ask(
        &self,
        system: &str,
        user: &(dyn Fn(usize) -> String + Sync),
        schema_name: &str,
        schema: &Value,
    ) -> Result<(String, Rung), AnalystError> {
        let started = Instant::now();
        let context = self.context_tokens().await;
        let reply_bound = reply_token_bound(schema).unwrap_or(DEFAULT_REPLY_TOKENS);
        let mut rung = self.current_rung();
        let mut quirks = self.quirks.load(Ordering::Relaxed);
        loop {
            let mut sys = system.to_string();
            match rung {
                Rung::JsonSchema => {}
                Rung::JsonObject => sys.push_str(&format!(
                    "\n\nAnswer with one JSON object matching this JSON schema:\n{schema}"
                )),
                Rung::Plain => sys.push_str(&format!(
                    "\n\nAnswer with only one JSON object (no prose) matching this JSON schema:\n{schema}"
                )),
            }
            let budget = fit_budget(
                context,
                sys.chars().count(),
                reply_bound,
                self.config.token_budget,
            );
            let user_text = user(budget.user_prompt_chars);
            let user_text = truncate_chars(&user_text, budget.user_prompt_chars);
            let prompt_chars = sys.chars().count() + user_text.chars().count();
            let mut req = json!({
                "model": self.config.model,
                "stream": false,
            });
            if quirks & QUIRK_NO_TEMPERATURE == 0 {
                req["temperature"] = json!(0);
            }
            if quirks & QUIRK_NO_SEED == 0 {
                req["seed"] = json!(SEED);
            }
            if self.is_llama_cpp() {
                // llama.cpp reuses the previous request's KV cache by default, and its logits
                // differ between prompt-processing and generation batch sizes, so the same
                // request answered differently the first time and after (llama.cpp
                // tools/server/README.md, `cache_prompt`; seen in `tests/llm_live.rs`). Only
                // sent to llama.cpp: OpenAI refuses fields it does not know.
                req["cache_prompt"] = json!(false);
            }
            let reply_tokens = if quirks & QUIRK_MAX_COMPLETION_TOKENS == 0 {
                req["max_tokens"] = json!(budget.reply_tokens);
                budget.reply_tokens
            } else {
                let n = budget.reply_tokens.max(MAX_COMPLETION_TOKENS);
                req["max_completion_tokens"] = json!(n);
                n
            };
            let without_max_length = quirks & QUIRK_NO_MAX_LENGTH != 0;
            match rung {
                Rung::JsonSchema => {
                    let sent = if without_max_length {
                        without_max_length_keyword(schema)
                    } else {
                        schema.clone()
                    };
                    req["response_format"] = json!({"type": "json_schema", "json_schema": {"name": schema_name, "strict": true, "schema": sent}});
                }
                Rung::JsonObject => req["response_format"] = json!({"type": "json_object"}),
                Rung::Plain => {}
            }
            req["messages"] =
                json!([{"role": "system", "content": sys}, {"role": "user", "content": user_text}]);
            let request_digest = crate::digest::sha256_hex(req.to_string().as_bytes());
            match self.client.chat().create_byot::<Value, Value>(req).await {
                Ok(resp) => {
                    self.rung.store(rung as u8, Ordering::Relaxed);
                    self.quirks.store(quirks, Ordering::Relaxed);
                    let content = reply_content(&resp);
                    let choice = &resp["choices"][0];
                    // As sent, also when `reply_content` refused it (a truncated reply).
                    let raw_reply = choice["message"]["content"].as_str().unwrap_or_default();
                    let report = CallReport {
                        rung,
                        context_tokens: context,
                        reply_tokens,
                        prompt_chars,
                        prompt_tokens_estimate: estimate_tokens(prompt_chars),
                        prompt_tokens: resp["usage"]["prompt_tokens"].as_u64(),
                        completion_tokens: resp["usage"]["completion_tokens"].as_u64(),
                        finish_reason: choice["finish_reason"].as_str().map(str::to_string),
                        without_max_length,
                        request_digest,
                        reply_digest: crate::digest::sha256_hex(
                            content.as_deref().unwrap_or_default().as_bytes(),
                        ),
                        reply_chars: raw_reply.chars().count(),
                        reply_tail: reply_tail(raw_reply),
                        elapsed: started.elapsed(),
                    };
                    if report.finish_reason.as_deref() == Some("length") {
                        tracing::warn!(
                            rung = rung.as_str(),
                            reply_chars = report.reply_chars,
                            tail = %report.reply_tail,
                            "model reply truncated at its token budget"
                        );
                    }
                    tracing::info!(
                        rung = rung.as_str(),
                        model = %self.config.model,
                        max_tokens = reply_tokens,
                        context = ?context,
                        prompt_tokens = ?report.prompt_tokens,
                        completion_tokens = ?report.completion_tokens,
                        finish_reason = ?report.finish_reason,
                        elapsed_ms = report.elapsed.as_millis() as u64,
                        "model answered"
                    );
                    self.record(report);
                    return content.map(|c| (c, rung));
                }
                Err(e) => {
                    let rejection = Rejection::of(&e);
                    // A rejected request parameter: adapt the request shape once, remember it.
                    if let Some(r) = &rejection
                        && r.is_client_error()
                    {
                        let m = r.message.to_ascii_lowercase();
                        if rung == Rung::JsonSchema
                            && names_word(&m, "maxlength")
                            && quirks & QUIRK_NO_MAX_LENGTH == 0
                        {
                            tracing::warn!(error = %r.message, "server rejected maxLength; sending the schema without it and truncating on parse");
                            quirks |= QUIRK_NO_MAX_LENGTH;
                            continue;
                        }
                        if m.contains("max_tokens") && quirks & QUIRK_MAX_COMPLETION_TOKENS == 0 {
                            tracing::warn!(error = %r.message, "server rejected max_tokens; using max_completion_tokens");
                            quirks |= QUIRK_MAX_COMPLETION_TOKENS;
                            continue;
                        }
                        if m.contains("temperature") && quirks & QUIRK_NO_TEMPERATURE == 0 {
                            tracing::warn!(error = %r.message, "server rejected temperature 0; using its default");
                            quirks |= QUIRK_NO_TEMPERATURE;
                            continue;
                        }
                        if names_word(&m, "seed") && quirks & QUIRK_NO_SEED == 0 {
                            tracing::warn!(error = %r.message, "server rejected seed; sending none");
                            quirks |= QUIRK_NO_SEED;
                            continue;
                        }
                    }
                    let step_down = rejection.as_ref().is_some_and(|r| {
                        names_format(&r.message) || matches!(r.status, Some(400 | 422))
                    });
                    if step_down && rung != Rung::Plain {
                        tracing::warn!(rung = rung.as_str(), error = %e, "server rejected the response format; stepping down");
                        rung = Rung::from_u8(rung as u8 + 1);
                        continue;
                    }
                    return Err(match (e, rejection) {
                        (OpenAIError::Reqwest(r), _) if r.is_timeout() => {
                            AnalystError::Timeout(self.config.timeout.as_secs())
                        }
                        (_, Some(r)) => AnalystError::Transport(r.to_string()),
                        (OpenAIError::JSONDeserialize(err, body), None) => {
                            AnalystError::InvalidOutput(format!(
                                "the server's reply is not a chat completion ({err}): {}",
                                truncate_chars(&body, 200)
                            ))
                        }
                        (other, None) => AnalystError::Transport(
                            truncate_chars(&other.to_string(), 300).to_string(),
                        ),
                    });
                }
            }
        }
    }

    /// Runs `ask` under the whole-call timeout and reads the reply as JSON.
    async fn ask_json(
        &self,
        system: &str,
        user: &(dyn Fn(usize) -> String + Sync),
        schema_name: &str,
        schema: &Value,
    ) -> Result<(Value, Rung), AnalystError> {
        let call = self.ask(system, user, schema_name, schema);
        let (reply, rung) = tokio::time::timeout(self.config.timeout, call)
            .await
            .map_err(|_| AnalystError::Timeout(self.config.timeout.as_secs()))??;
        Ok((tolerant_json(&reply)?, rung))
    }
}

/// What `GET /props` told.
enum Props {
    /// The context size in tokens.
    Context(u32),
    /// An answer without one (404 on servers other than llama.cpp).
    NotGiven,
    /// No answer (unreachable, 5xx while loading): ask again next call.
    Unavailable(String),
}

/// The `/props` URL of the server at `base_url`: llama.cpp serves it at the server root, not
/// under `/v1`, so a trailing `/v1` is dropped (`http://h:8080/v1` → `http://h:8080/props`;
/// a server behind a path prefix keeps it: `http://h/llm/v1` → `http://h/llm/props`).
pub fn props_url(base_url: &str) -> String {
    let base = base_url.trim_end_matches('/');
    let root = base.strip_suffix("/v1").unwrap_or(base);
    format!("{root}/props")
}

/// The context size in a `/props` body: `default_generation_settings.n_ctx` (llama.cpp), else a
/// top-level `n_ctx`; at least 1.
fn n_ctx_of(v: &Value) -> Option<u32> {
    v.pointer("/default_generation_settings/n_ctx")
        .or_else(|| v.get("n_ctx"))
        .and_then(Value::as_u64)
        .and_then(|n| u32::try_from(n).ok())
        .filter(|n| (1..CONTEXT_NOT_GIVEN).contains(n))
}

/// Characters per token when a prompt is measured against a known context: log lines, ids and
/// JSON tokenize densely (≈ 3 characters per token), so this errs on the side of fitting.
const FIT_CHARS_PER_TOKEN: usize = 3;
/// Tokens a chat template adds around the two messages and the start of the reply.
const TEMPLATE_TOKENS: u32 = 48;
/// The least a fitted user prompt gets (the incident itself), unless that leaves the reply less
/// than half the room.
const MIN_USER_PROMPT_TOKENS: u32 = 256;
/// Tokens allowed outside the JSON of a reply (a code fence, a line of prose on the plain rung).
const REPLY_SLACK_TOKENS: u64 = 32;

/// The tokens `chars` characters of prompt take, as [`fit_budget`] counts them.
pub fn estimate_tokens(chars: usize) -> u32 {
    u32::try_from(chars.div_ceil(FIT_CHARS_PER_TOKEN)).unwrap_or(u32::MAX)
}

/// The size of one request: the reply budget (`max_tokens`) and the user prompt's budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// `max_tokens`.
    pub reply_tokens: u32,
    /// The user message's budget, in characters.
    pub user_prompt_chars: usize,
}

/// Fits one request into the server's `context` (tokens; `None`: unknown). `fixed_prompt_chars`
/// is the system message (with the schema on the lower rungs), `reply_bound` the reply's bound
/// ([`reply_token_bound`]), `token_budget` the configured prompt budget.
///
/// Unknown context: the reply gets its bound and the user prompt `token_budget` at ≈ 4
/// characters per token, as configured. Known context: the prompt is measured at
/// [`FIT_CHARS_PER_TOKEN`], a margin of 5 % (at least 32 tokens) and the chat template are set
/// aside, the reply gets its bound (but leaves the user prompt at least 256 tokens, or half the
/// room) and the user prompt the rest, at most `token_budget`. So prompt + reply ≤ context.
pub fn fit_budget(
    context: Option<u32>,
    fixed_prompt_chars: usize,
    reply_bound: u32,
    token_budget: usize,
) -> Budget {
    let Some(ctx) = context else {
        return Budget {
            reply_tokens: reply_bound,
            user_prompt_chars: token_budget.saturating_mul(4),
        };
    };
    let fixed = estimate_tokens(fixed_prompt_chars).saturating_add(TEMPLATE_TOKENS);
    let margin = (ctx / 20).max(32);
    let room = ctx.saturating_sub(fixed).saturating_sub(margin);
    let reply = reply_bound
        .min(room.saturating_sub(MIN_USER_PROMPT_TOKENS).max(room / 2))
        .max(1);
    let user_tokens = (room.saturating_sub(reply) as usize).min(token_budget);
    Budget {
        reply_tokens: reply,
        user_prompt_chars: user_tokens.saturating_mul(FIT_CHARS_PER_TOKEN),
    }
}

/// Characters of a reply kept in [`CallReport::reply_tail`].
pub const REPLY_TAIL_CHARS: usize = 240;

/// The last [`REPLY_TAIL_CHARS`] characters of `reply`.
fn reply_tail(reply: &str) -> String {
    let n = reply.chars().count();
    reply
        .chars()
        .skip(n.saturating_sub(REPLY_TAIL_CHARS))
        .collect()
}

/// The most tokens a reply valid under `schema` can take, or `None` when a string or an array
/// of it is unbounded. Strings count their `maxLength` (or longest `enum` value) at
/// [`FIT_CHARS_PER_TOKEN`] characters per token plus the quotes; integers and numbers 8 tokens;
/// every key, separator and the whitespace a grammar allows around it 2 tokens; arrays their
/// `maxItems` items. Plus [`REPLY_SLACK_TOKENS`] for a fence or a line of prose.
pub fn reply_token_bound(schema: &Value) -> Option<u32> {
    fn text(chars: usize) -> u64 {
        chars.div_ceil(FIT_CHARS_PER_TOKEN) as u64
    }
    fn walk(s: &Value) -> Option<u64> {
        const SEP: u64 = 2;
        match s.get("type").and_then(Value::as_str)? {
            "object" => {
                let mut t = 2;
                for (k, v) in s.get("properties")?.as_object()? {
                    t += text(k.chars().count()) + 3 + SEP + walk(v)?;
                }
                Some(t)
            }
            "array" => {
                let n = s.get("maxItems")?.as_u64()?;
                Some(2 + n * (walk(s.get("items")?)? + SEP))
            }
            "string" => {
                let chars = match s.get("enum").and_then(Value::as_array) {
                    Some(e) => e
                        .iter()
                        .filter_map(Value::as_str)
                        .map(|x| x.chars().count())
                        .max()?,
                    None => usize::try_from(s.get("maxLength")?.as_u64()?).ok()?,
                };
                Some(2 + text(chars))
            }
            "integer" | "number" => Some(8),
            "boolean" | "null" => Some(2),
            _ => None,
        }
    }
    u32::try_from(walk(schema)? + REPLY_SLACK_TOKENS).ok()
}

/// `schema` without its `maxLength` keywords (for servers that reject them).
fn without_max_length_keyword(schema: &Value) -> Value {
    match schema {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, v)| !(k.as_str() == "maxLength" && v.is_number()))
                .map(|(k, v)| (k.clone(), without_max_length_keyword(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_max_length_keyword).collect()),
        other => other.clone(),
    }
}

/// `true` when `word` (lower-case) occurs in `m` as a word of its own (`'seed'` but not
/// `proceeds`).
fn names_word(m: &str, word: &str) -> bool {
    m.split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .any(|w| w.eq_ignore_ascii_case(word))
}

fn names_format(m: &str) -> bool {
    let m = m.to_ascii_lowercase();
    m.contains("response_format")
        || m.contains("json_schema")
        || m.contains("json_object")
        || m.contains("schema")
        || m.contains("format")
}

/// A server's refusal of a request: its HTTP status when known and its message.
struct Rejection {
    status: Option<u16>,
    message: String,
}

impl Rejection {
    /// The refusal inside an error, if the server answered with one. Servers differ: OpenAI and
    /// Ollama wrap it as `{"error": {"message", "code": "…"}}`, llama.cpp gives a numeric `code`
    /// (which async-openai fails to read, leaving the raw body), vLLM sends it unwrapped
    /// (`{"object": "error", "message", "code": 400}`).
    fn of(e: &OpenAIError) -> Option<Self> {
        match e {
            OpenAIError::ApiError(a) => {
                let mut message = a.api_error.message.clone();
                if let Some(p) = &a.api_error.param {
                    message.push_str(&format!(" (param: {p})"));
                }
                // Server errors arrive as the raw body: read a JSON message out of it.
                if let Some(inner) = serde_json::from_str::<Value>(&message)
                    .ok()
                    .as_ref()
                    .and_then(error_message)
                {
                    message = inner;
                }
                Some(Self {
                    status: Some(a.status_code.as_u16()),
                    message,
                })
            }
            OpenAIError::JSONDeserialize(_, body) => {
                let v: Value = serde_json::from_str(body).ok()?;
                let err = v.get("error").unwrap_or(&v);
                let is_error = v.get("error").is_some()
                    || v.get("object").and_then(Value::as_str) == Some("error");
                if !is_error {
                    return None;
                }
                let status = err
                    .get("code")
                    .and_then(Value::as_u64)
                    .and_then(|c| u16::try_from(c).ok())
                    .filter(|c| (400..600).contains(c));
                Some(Self {
                    status,
                    message: error_message(&v)
                        .unwrap_or_else(|| truncate_chars(body, 300).to_string()),
                })
            }
            _ => None,
        }
    }

    fn is_client_error(&self) -> bool {
        self.status.is_none_or(|s| (400..500).contains(&s))
    }
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let m = truncate_chars(self.message.trim(), 300);
        match self.status {
            Some(s) => write!(f, "HTTP {s}: {m}"),
            None => write!(f, "{m}"),
        }
    }
}

fn error_message(v: &Value) -> Option<String> {
    let err = v.get("error").unwrap_or(v);
    err.get("message")
        .and_then(Value::as_str)
        .or_else(|| err.as_str())
        .map(str::to_string)
}

/// The text of the first choice. Optional fields (`id`, `created`, `usage`, `index`, `role`,
/// `finish_reason`) may be missing; `finish_reason=length` is invalid output (truncated); a
/// refusal or a reply with only reasoning and no content is invalid output too.
fn reply_content(resp: &Value) -> Result<String, AnalystError> {
    let choice = resp
        .get("choices")
        .and_then(|c| c.get(0))
        .ok_or_else(|| AnalystError::InvalidOutput("no choices in the reply".into()))?;
    if choice.get("finish_reason").and_then(Value::as_str) == Some("length") {
        return Err(AnalystError::InvalidOutput(
            "the reply was truncated (finish_reason=length)".into(),
        ));
    }
    let message = choice.get("message");
    if let Some(r) = message
        .and_then(|m| m.get("refusal"))
        .and_then(Value::as_str)
        .filter(|r| !r.trim().is_empty())
    {
        return Err(AnalystError::InvalidOutput(format!(
            "the model refused: {}",
            truncate_chars(r, 200)
        )));
    }
    let content = match message.and_then(|m| m.get("content")) {
        Some(Value::String(s)) => s.clone(),
        // Content as a list of parts: `[{"type": "text", "text": "…"}]`.
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str).or_else(|| p.as_str()))
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    };
    if content.trim().is_empty() {
        return Err(AnalystError::InvalidOutput(
            "the reply has no message content".into(),
        ));
    }
    Ok(content)
}

/// Bounds of a model's answer; the schemas send them and the parsers truncate to them, so an
/// answer stays within them whether or not the server enforced the schema. String bounds are
/// in characters: JSON Schema's `maxLength` counts Unicode code points (JSON Schema Validation,
/// draft 2020-12, §6.3.1), and the parsers cut at a character boundary
/// ([`crate::evidence::truncate_chars`]). Strings with an `enum` (confidence, action kind,
/// severity) are bounded by it.
pub mod limits {
    /// A hypothesis statement (one sentence), characters.
    pub const STATEMENT: usize = 200;
    /// A cited record reference (`OBS-12`, `MEM-40`), characters.
    pub const CITE: usize = 16;
    /// A prior incident id (`INC-2026-0001`), characters.
    pub const INCIDENT_ID: usize = 16;
    /// Why a prior incident is relevant, characters.
    pub const WHY: usize = 200;
    /// An action kind as read on the rungs without a schema (before coercion), characters.
    pub const KIND: usize = 40;
    /// What an action acts on (a service, node, flag: title-sized), characters.
    pub const TARGET: usize = 120;
    /// Why an action, for people, characters.
    pub const RATIONALE: usize = 400;
    /// A post-mortem summary (one paragraph), characters.
    pub const SUMMARY: usize = 600;
    /// A post-mortem trigger, characters.
    pub const TRIGGER: usize = 300;
    /// One item of a post-mortem list (contributing factor, misleading hypothesis, action item,
    /// detection gap), characters.
    pub const LIST_ITEM: usize = 160;
    /// A lesson's ALWAYS or BECAUSE part, characters.
    pub const LESSON_PART: usize = 300;
    /// A lesson's SCOPE, characters.
    pub const SCOPE: usize = 120;
    /// Hypotheses in an investigation answer.
    pub const HYPOTHESES: usize = 3;
    /// Citations per hypothesis.
    pub const CITES: usize = 5;
    /// Prior incidents per hypothesis.
    pub const PRIOR_INCIDENTS: usize = 2;
    /// Actions in an investigation answer.
    pub const ACTIONS: usize = 5;
    /// Items of each post-mortem list.
    pub const LIST_ITEMS: usize = 4;
    /// Lessons in a post-mortem answer.
    pub const LESSONS: usize = 3;
}

/// A JSON-schema string of at most `max` characters.
fn bounded_string(max: usize) -> Value {
    json!({"type": "string", "maxLength": max})
}

/// JSON schema of the investigation answer (strict mode: every property required, no options).
/// Every array has a `maxItems` and every string a `maxLength` or an `enum` ([`limits`];
/// OpenAI strict mode, vLLM, Ollama and llama.cpp's grammar accept both, and a server that
/// rejects `maxLength` gets the schema without it): a small local model under a grammar
/// otherwise repeats array items, or stays inside one string, until the reply is cut off at the
/// token limit.
pub fn investigation_schema() -> Value {
    use limits as l;
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["hypotheses", "actions"],
        "properties": {
            "hypotheses": {"type": "array", "maxItems": l::HYPOTHESES, "items": {
                "type": "object", "additionalProperties": false,
                "required": ["statement", "confidence", "cites", "prior_incidents"],
                "properties": {
                    "statement": bounded_string(l::STATEMENT),
                    "confidence": {"type": "string", "enum": ["low", "medium", "high"]},
                    "cites": {"type": "array", "maxItems": l::CITES, "items": bounded_string(l::CITE)},
                    "prior_incidents": {"type": "array", "maxItems": l::PRIOR_INCIDENTS, "items": {
                        "type": "object", "additionalProperties": false, "required": ["id", "why"],
                        "properties": {"id": bounded_string(l::INCIDENT_ID), "why": bounded_string(l::WHY)}}}
                }}},
            "actions": {"type": "array", "maxItems": l::ACTIONS, "items": {
                "type": "object", "additionalProperties": false,
                "required": ["kind", "target", "rationale", "hypothesis"],
                "properties": {
                    "kind": {"type": "string", "enum": crate::domain::ActionKind::ALL.iter().map(|k| k.as_str()).collect::<Vec<_>>()},
                    "target": bounded_string(l::TARGET),
                    "rationale": bounded_string(l::RATIONALE),
                    "hypothesis": {"type": "integer"}
                }}}
        }
    })
}

/// What the system prompt tells the model, including how to use memory.
pub const SYSTEM_PROMPT: &str = "You are an incident-response analyst. From the incident, its observations (OBS-n) and \
the organization's memory (MEM-n, with the incident INC-… each came from), propose root-cause hypotheses and actions.\n\
Rules:\n- Cite the OBS-n and MEM-n ids each hypothesis rests on; cite prior incident ids (INC-…) and say why each is relevant.\n\
- Do NOT recommend an action recorded in memory as not working (remediation_failure) unless you say why this time differs.\n\
- Follow the rules (lessons, ALWAYS/BECAUSE) that apply.\n- Use only these action kinds: {kinds}.\n\
- Confidence: low, medium or high. Never invent ids.";

/// Builds the user prompt within `budget_chars`: incident first, then observations and memories
/// by rank until the budget is spent, with a note of what was left out.
pub fn user_prompt(input: &InvestigationInput, budget_chars: usize) -> String {
    let i = &input.incident;
    let mut out = format!(
        "Incident {} ({}, service {}): {}\n{}\nFailure modes: {}\n\nObservations:\n",
        i.id,
        i.severity,
        i.service,
        i.title,
        i.description,
        input.failure_modes.join(", ")
    );
    let mut left_obs = 0;
    for o in &input.observations {
        let line = format!("- {}: {}\n", o.reference(), truncate_chars(&o.text, 400));
        if out.len() + line.len() > budget_chars * 2 / 3 {
            left_obs += 1;
            continue;
        }
        out.push_str(&line);
    }
    out.push_str("\nOrganizational memory:\n");
    let mut left_mem = 0;
    for r in &input.recalled {
        let m = &r.memory;
        let line = format!(
            "- MEM-{} [{}{}]: {}\n",
            m.id,
            m.kind,
            m.incident_id
                .as_deref()
                .map(|x| format!(", from {x}"))
                .unwrap_or_default(),
            truncate_chars(&m.text, 400)
        );
        if out.len() + line.len() > budget_chars {
            left_mem += 1;
            continue;
        }
        out.push_str(&line);
    }
    if input.recalled.is_empty() {
        out.push_str("(none relevant)\n");
    }
    if left_obs + left_mem > 0 {
        out.push_str(&format!(
            "\n(Left out for length: {left_obs} observations, {left_mem} memories.)\n"
        ));
    }
    crate::redact::redact_once(&out)
}

/// Extracts the first balanced JSON object from a reply that may be fenced, wrapped in prose or
/// preceded by a `<think>…</think>` block, repairing invalid escape sequences (`\q` → `\\q`).
/// A complete `{…}` that does not parse (prose such as "use {braces}") is skipped for the next.
///
/// # Errors
/// [`AnalystError::InvalidOutput`] when no complete object is found or it does not parse.
pub fn tolerant_json(reply: &str) -> Result<Value, AnalystError> {
    let reply = match reply.rfind("</think>") {
        Some(k) => &reply[k + "</think>".len()..],
        None => reply,
    };
    let mut from = 0;
    let mut first_error = None;
    while let Some(off) = reply[from..].find('{') {
        let start = from + off;
        let Some(end) = balanced_end(reply, start) else {
            return Err(first_error.unwrap_or_else(|| {
                AnalystError::InvalidOutput("the JSON object is incomplete (truncated?)".into())
            }));
        };
        match parse_repaired(&reply[start..=end]) {
            Ok(v) => return Ok(v),
            Err(e) => {
                first_error.get_or_insert(e);
                from = end + 1;
            }
        }
    }
    Err(first_error
        .unwrap_or_else(|| AnalystError::InvalidOutput("no JSON object in the reply".into())))
}

/// Index of the `}` closing the object that opens at `start`, if the text holds all of it.
fn balanced_end(text: &str, start: usize) -> Option<usize> {
    let (mut depth, mut in_str, mut esc) = (0i32, false, false);
    for (k, &b) in text.as_bytes().iter().enumerate().skip(start) {
        if in_str {
            match (esc, b) {
                (true, _) => esc = false,
                (false, b'\\') => esc = true,
                (false, b'"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(k);
                }
            }
            _ => {}
        }
    }
    None
}

fn parse_repaired(raw: &str) -> Result<Value, AnalystError> {
    if let Ok(v) = serde_json::from_str(raw) {
        return Ok(v);
    }
    // Repair backslashes that do not start a valid JSON escape.
    let mut fixed = String::with_capacity(raw.len() + 8);
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.peek() {
                Some('"' | '\\' | '/' | 'b' | 'f' | 'n' | 'r' | 't' | 'u') => {
                    fixed.push(c);
                    if let Some(n) = chars.next() {
                        fixed.push(n);
                    }
                }
                _ => fixed.push_str("\\\\"),
            }
        } else {
            fixed.push(c);
        }
    }
    serde_json::from_str(&fixed)
        .map_err(|e| AnalystError::InvalidOutput(format!("the reply is not valid JSON: {e}")))
}

/// Parses a record reference (`OBS-12`, `MEM-40`, `12`) to its id.
pub fn parse_ref(s: &str) -> Option<i64> {
    let t = s.trim();
    let digits = t.rsplit('-').next().unwrap_or(t);
    if t.starts_with("INC-") {
        return None;
    }
    digits.parse().ok()
}

/// Names a model uses for each schema field, the schema's own first. Models that ignore the
/// schema (plain rung, small local models) write `action` for `kind`, `reason` for `rationale`,
/// `title` for `statement`, …: each is read as the schema field, never passed through.
mod synonyms {
    pub const HYPOTHESES: &[&str] = &[
        "hypotheses",
        "hypothesis",
        "root_causes",
        "possible_causes",
        "causes",
        "findings",
        "theories",
    ];
    pub const ACTIONS: &[&str] = &[
        "actions",
        "recommendations",
        "recommended_actions",
        "remediations",
        "remediation",
        "next_steps",
        "steps",
        "mitigations",
    ];
    pub const STATEMENT: &[&str] = &[
        "statement",
        "hypothesis",
        "text",
        "description",
        "summary",
        "title",
        "name",
        "claim",
        "cause",
    ];
    pub const CONFIDENCE: &[&str] = &["confidence", "likelihood", "certainty", "probability"];
    pub const CITES: &[&str] = &[
        "cites",
        "citations",
        "evidence",
        "sources",
        "observations",
        "references",
        "refs",
    ];
    pub const PRIOR: &[&str] = &[
        "prior_incidents",
        "similar_incidents",
        "past_incidents",
        "related_incidents",
        "incidents",
    ];
    pub const PRIOR_ID: &[&str] = &["id", "incident", "incident_id"];
    pub const WHY: &[&str] = &["why", "reason", "rationale", "relevance"];
    pub const KIND: &[&str] = &["kind", "action", "action_kind", "type", "name", "title"];
    pub const TARGET: &[&str] = &["target", "service", "component", "resource"];
    pub const RATIONALE: &[&str] = &[
        "rationale",
        "reason",
        "why",
        "justification",
        "explanation",
        "description",
    ];
    pub const HYPOTHESIS_REF: &[&str] = &[
        "hypothesis",
        "hypothesis_index",
        "hypothesis_id",
        "for_hypothesis",
    ];
}

/// The first of `names` present on `v` (keys compared case-insensitively, `-`/space as `_`).
fn field<'a>(v: &'a Value, names: &[&str]) -> Option<&'a Value> {
    let obj = v.as_object()?;
    for n in names {
        if let Some(x) = obj.get(*n) {
            return Some(x);
        }
    }
    obj.iter().find_map(|(k, x)| {
        let k = k.to_ascii_lowercase().replace(['-', ' '], "_");
        names.contains(&k.as_str()).then_some(x)
    })
}

/// A field as text (numbers are written out), trimmed, non-empty.
fn field_text<'a>(v: &'a Value, names: &[&str]) -> Option<std::borrow::Cow<'a, str>> {
    match field(v, names)? {
        Value::String(s) if !s.trim().is_empty() => Some(std::borrow::Cow::Borrowed(s.trim())),
        Value::Number(n) => Some(std::borrow::Cow::Owned(n.to_string())),
        _ => None,
    }
}

/// A confidence as a word, or as a number in 0–1 or 0–100.
fn confidence_of(v: Option<&Value>) -> Confidence {
    match v {
        Some(Value::String(s)) => {
            let s = s.trim().to_lowercase();
            Confidence::parse(&s)
                .ok()
                .or_else(|| s.trim_end_matches('%').parse::<f64>().ok().map(level))
                .unwrap_or(Confidence::Low)
        }
        Some(Value::Number(n)) => n.as_f64().map(level).unwrap_or(Confidence::Low),
        _ => Confidence::Low,
    }
}

fn level(x: f64) -> Confidence {
    let x = if x > 1.0 { x / 100.0 } else { x };
    if x >= 0.7 {
        Confidence::High
    } else if x >= 0.4 {
        Confidence::Medium
    } else {
        Confidence::Low
    }
}

/// The object holding the answer: the reply itself, or the one object it wraps
/// (`{"analysis": {...}}`, `{"result": {...}}`).
fn answer_root(v: &Value) -> &Value {
    if field(v, synonyms::HYPOTHESES).is_some() || field(v, synonyms::ACTIONS).is_some() {
        return v;
    }
    match v.as_object() {
        Some(o) if o.len() == 1 => o.values().next().filter(|x| x.is_object()).unwrap_or(v),
        _ => v,
    }
}

/// Items of a list field; a single object or string is read as a list of one.
fn items(v: Option<&Value>) -> Vec<&Value> {
    match v {
        Some(Value::Array(a)) => a.iter().collect(),
        Some(x @ (Value::Object(_) | Value::String(_))) => vec![x],
        _ => Vec::new(),
    }
}

/// Reads the model's JSON into [`AnalystOutput`], mapping known synonyms of the schema's field
/// names ([`synonyms`]), keeping every valid item and dropping (and reporting) malformed ones.
///
/// # Errors
/// [`AnalystError::InvalidOutput`] when the top level has no hypotheses or actions under any
/// known name.
pub fn output_from_json(v: &Value) -> Result<AnalystOutput, AnalystError> {
    let v = answer_root(v);
    let hyps = field(v, synonyms::HYPOTHESES);
    let acts = field(v, synonyms::ACTIONS);
    if hyps.is_none() && acts.is_none() {
        return Err(AnalystError::InvalidOutput(
            "no hypotheses or actions in the reply".into(),
        ));
    }
    let mut out = AnalystOutput::default();
    for h in items(hyps) {
        let statement = match h {
            Value::String(s) if !s.trim().is_empty() => Some(std::borrow::Cow::Borrowed(s.trim())),
            _ => field_text(h, synonyms::STATEMENT),
        };
        let Some(statement) = statement else {
            out.dropped.push("a hypothesis without a statement".into());
            continue;
        };
        let confidence = confidence_of(field(h, synonyms::CONFIDENCE));
        let cites = items(field(h, synonyms::CITES))
            .into_iter()
            .chain(field(h, synonyms::CITES).filter(|c| c.is_number()))
            .filter_map(|c| {
                c.as_str()
                    .map(str::to_string)
                    .or_else(|| c.as_i64().map(|n| n.to_string()))
            })
            .flat_map(|s| {
                s.split([',', ' '])
                    .filter_map(parse_ref)
                    .collect::<Vec<_>>()
            })
            .collect();
        let prior_incidents = items(field(h, synonyms::PRIOR))
            .into_iter()
            .filter_map(|p| match p {
                Value::String(s) => Some(PriorIncident {
                    id: bounded(s, limits::INCIDENT_ID),
                    why: String::new(),
                }),
                _ => Some(PriorIncident {
                    id: bounded(&field_text(p, synonyms::PRIOR_ID)?, limits::INCIDENT_ID),
                    why: field_text(p, synonyms::WHY)
                        .map(|w| bounded(&w, limits::WHY))
                        .unwrap_or_default(),
                }),
            })
            .collect();
        out.hypotheses.push(ProposedHypothesis {
            statement: bounded(&statement, limits::STATEMENT),
            confidence,
            cites,
            prior_incidents,
        });
    }
    for a in items(acts) {
        let kind = match a {
            Value::String(s) if !s.trim().is_empty() => Some(std::borrow::Cow::Borrowed(s.trim())),
            _ => field_text(a, synonyms::KIND),
        };
        let Some(kind) = kind else {
            out.dropped.push("an action without a kind".into());
            continue;
        };
        let hypothesis = field(a, synonyms::HYPOTHESIS_REF).and_then(|h| match h {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => s
                .trim()
                .trim_start_matches(|c: char| !c.is_ascii_digit())
                .parse()
                .ok(),
            _ => None,
        });
        out.actions.push(ProposedAction {
            kind: bounded(&kind, limits::KIND),
            target: field_text(a, synonyms::TARGET)
                .map(|t| bounded(&t, limits::TARGET))
                .unwrap_or_default(),
            rationale: bounded(
                &field_text(a, synonyms::RATIONALE).unwrap_or_default(),
                limits::RATIONALE,
            ),
            hypothesis: hypothesis.map(|n| n as usize),
        });
    }
    Ok(out)
}

/// `true` when `out` holds something validation can keep: a hypothesis with a statement or an
/// action whose kind maps to the closed vocabulary.
pub fn has_usable_items(out: &AnalystOutput) -> bool {
    !out.hypotheses.is_empty()
        || out
            .actions
            .iter()
            .any(|a| crate::domain::ActionKind::coerce(&a.kind).is_some())
}

/// JSON schema of the post-mortem answer (strict mode: every property required, no options;
/// every string bounded by a `maxLength` or an `enum`, every array by `maxItems`, as in
/// [`investigation_schema`] — see [`limits`]). Only the prose the model may write; facts
/// (impact, actions and their outcomes, root cause) are not asked for.
pub fn postmortem_schema() -> Value {
    use limits as l;
    let strings =
        json!({"type": "array", "maxItems": l::LIST_ITEMS, "items": bounded_string(l::LIST_ITEM)});
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["summary", "trigger", "contributing_factors", "misleading_hypotheses",
                     "lessons", "action_items", "detection_gaps"],
        "properties": {
            "summary": bounded_string(l::SUMMARY),
            "trigger": bounded_string(l::TRIGGER),
            "contributing_factors": strings,
            "misleading_hypotheses": strings,
            "lessons": {"type": "array", "maxItems": l::LESSONS, "items": {
                "type": "object", "additionalProperties": false,
                "required": ["always", "because", "scope", "severity"],
                "properties": {
                    "always": bounded_string(l::LESSON_PART),
                    "because": bounded_string(l::LESSON_PART),
                    "scope": bounded_string(l::SCOPE),
                    "severity": {"type": "string", "enum": ["critical", "high", "medium", "low"]}
                }}},
            "action_items": strings,
            "detection_gaps": strings
        }
    })
}

/// What the system prompt tells the model when it drafts a post-mortem.
pub const POSTMORTEM_PROMPT: &str = "You draft blameless incident post-mortems from the facts given. \
Use only those facts: never invent actions, outcomes, times or incident ids.\n\
Write:\n- summary: one paragraph on what happened and how it was resolved.\n\
- trigger: what set it off, or \"Unknown\".\n- contributing_factors: what made it possible or worse.\n\
- misleading_hypotheses: first explanations that turned out wrong.\n\
- lessons: rules, each with always (an imperative starting with a verb), because (why, naming \
the incident {id}), scope (the service and/or failure modes it applies to) and severity \
(critical, high, medium or low). An action that did not resolve the incident must become a \
lesson warning against relying on it.\n- action_items: concrete follow-ups.\n\
- detection_gaps: how detection fell short.";

/// Builds the post-mortem prompt within `budget_chars`: the incident, its resolution and the
/// actions with their outcomes first, then observations by rank until the budget is spent, with
/// a note of what was left out. Redacted.
pub fn postmortem_prompt(f: &DraftFacts, builtin: &Postmortem, budget_chars: usize) -> String {
    let i = &f.incident;
    let t = |ts: Option<jiff::Timestamp>| {
        ts.map_or_else(
            || "unknown".to_string(),
            |t| t.strftime("%Y-%m-%d %H:%M UTC").to_string(),
        )
    };
    let mut out = format!(
        "Incident {} ({}, service {}): {}\n{}\nResolution summary: {}\nRoot cause (confirmed by the responders): {}\nFailure modes: {}\n",
        i.id,
        i.severity,
        i.service,
        i.title,
        truncate_chars(&i.description, 1000),
        truncate_chars(i.summary.as_deref().unwrap_or("not given"), 1000),
        truncate_chars(i.root_cause.as_deref().unwrap_or("not given"), 1000),
        if f.failure_modes.is_empty() {
            "none tagged".to_string()
        } else {
            f.failure_modes.join(", ")
        },
    );
    let im = &builtin.impact;
    out.push_str(&format!(
        "Impact: started {}, detected {}, mitigated {}, resolved {} (time to detect {} min, to resolve {} min)\n\nActions taken and their outcomes:\n",
        t(im.started_at),
        t(im.detected_at),
        t(im.mitigated_at),
        t(im.resolved_at),
        im.time_to_detect_secs / 60,
        im.time_to_resolve_secs / 60
    ));
    if f.actions.is_empty() {
        out.push_str("(none recorded)\n");
    }
    for (a, _) in &f.actions {
        out.push_str(&format!(
            "- {} on {}: {}{}\n",
            a.kind,
            a.target,
            a.outcome.replace('_', " "),
            if a.note.is_empty() {
                String::new()
            } else {
                format!(" — {}", truncate_chars(&a.note, 300))
            }
        ));
    }
    if !f.misleading.is_empty() {
        out.push_str("\nHypotheses behind actions that failed (misleading):\n");
        for m in &f.misleading {
            out.push_str(&format!("- {}\n", truncate_chars(m, 300)));
        }
    }
    out.push_str("\nObservations, most salient first:\n");
    let mut left = 0;
    for o in &f.observations {
        let line = format!("- {}\n", truncate_chars(o, 400));
        if out.len() + line.len() > budget_chars {
            left += 1;
            continue;
        }
        out.push_str(&line);
    }
    if f.observations.is_empty() {
        out.push_str("(none)\n");
    }
    if left > 0 {
        out.push_str(&format!("\n(Left out for length: {left} observations.)\n"));
    }
    crate::redact::redact_once(&out)
}

/// A string list of the reply, each item trimmed, non-empty and at most [`limits::LIST_ITEM`]
/// characters.
fn text_list(v: &Value, key: &str) -> Option<Vec<String>> {
    let items = v.get(key)?.as_array()?;
    Some(
        items
            .iter()
            .filter_map(|x| x.as_str().map(str::trim).filter(|x| !x.is_empty()))
            .take(12)
            .map(|x| bounded(x, limits::LIST_ITEM))
            .collect(),
    )
}

/// `s` trimmed and cut to at most `max` characters, at a character boundary (a server that
/// rejected `maxLength` did not enforce it; the lower rungs never do).
fn bounded(s: &str, max: usize) -> String {
    truncate_chars(s.trim(), max).trim_end().to_string()
}

/// Strips a repeated label the model may have kept (`ALWAYS: …`, `because - …`).
fn strip_label<'a>(text: &'a str, label: &str) -> &'a str {
    let t = text.trim();
    match t.get(..label.len()) {
        Some(head) if head.eq_ignore_ascii_case(label) => {
            t[label.len()..].trim_start_matches([':', '-', ' ']).trim()
        }
        _ => t,
    }
}

/// Reads a lesson given as an object `{always, because, scope, severity}` or as one text
/// `ALWAYS: … BECAUSE: … SCOPE: … SEVERITY: …`. Missing parts stay empty (the service drops
/// such lessons and says so); an unknown severity becomes `default_severity`.
fn lesson_from_json(v: &Value, default_severity: RuleSeverity, default_scope: &str) -> Rule {
    let (always, because, scope, severity) = match v {
        Value::String(text) => {
            let upper = text.to_ascii_uppercase();
            let part = |label: &str| -> String {
                let Some(k) = upper.find(&format!("{label}:")) else {
                    return String::new();
                };
                let rest = &text[k + label.len() + 1..];
                let rest_up = &upper[k + label.len() + 1..];
                let end = ["ALWAYS:", "BECAUSE:", "SCOPE:", "SEVERITY:"]
                    .iter()
                    .filter_map(|l| rest_up.find(l))
                    .min()
                    .unwrap_or(rest.len());
                rest[..end].trim().to_string()
            };
            (
                part("ALWAYS"),
                part("BECAUSE"),
                part("SCOPE"),
                part("SEVERITY"),
            )
        }
        _ => {
            let field = |k: &str| {
                v.get(k)
                    .and_then(Value::as_str)
                    .map(|x| strip_label(x, k).to_string())
                    .unwrap_or_default()
            };
            (
                field("always"),
                field("because"),
                field("scope"),
                field("severity"),
            )
        }
    };
    Rule {
        always: bounded(&always, limits::LESSON_PART),
        because: bounded(&because, limits::LESSON_PART),
        scope: if scope.trim().is_empty() {
            default_scope.to_string()
        } else {
            bounded(&scope, limits::SCOPE)
        },
        severity: RuleSeverity::parse(&severity.trim().to_ascii_lowercase())
            .unwrap_or(default_severity),
    }
}

/// Reads the model's post-mortem JSON over the built-in draft: the model's summary, trigger,
/// contributing factors, misleading hypotheses (added after the facts' ones), lessons, action
/// items and detection gaps; everything else — impact, symptoms, root cause, what worked, what
/// did not work, rejected recommendations — stays the built-in draft's (the facts). Missing or
/// empty prose fields keep the built-in text.
///
/// # Errors
/// [`AnalystError::InvalidOutput`] when the reply has neither a summary nor lessons.
pub fn postmortem_from_json(
    v: &Value,
    facts: &DraftFacts,
    builtin: &Postmortem,
) -> Result<Postmortem, AnalystError> {
    let text = |k: &str, max: usize| {
        v.get(k)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|x| !x.is_empty())
            .map(|x| bounded(x, max))
    };
    let lessons = v.get("lessons").and_then(Value::as_array);
    let summary = text("summary", limits::SUMMARY);
    if summary.is_none() && lessons.is_none() {
        return Err(AnalystError::InvalidOutput(
            "no summary or lessons in the post-mortem reply".into(),
        ));
    }
    let i = &facts.incident;
    let default_scope = if facts.failure_modes.is_empty() {
        i.service.clone()
    } else {
        format!("{}; {}", i.service, facts.failure_modes.join(", "))
    };
    let default_severity = crate::domain::postmortem::rule_severity(i.severity);
    let mut pm = builtin.clone();
    if let Some(s) = summary {
        pm.summary = s;
    }
    if let Some(t) = text("trigger", limits::TRIGGER) {
        pm.trigger = t;
    }
    if let Some(c) = text_list(v, "contributing_factors") {
        pm.contributing_factors = c;
    }
    if let Some(m) = text_list(v, "misleading_hypotheses") {
        let mut all = facts.misleading.clone();
        for h in m {
            if !all.iter().any(|x| x.eq_ignore_ascii_case(&h)) {
                all.push(h);
            }
        }
        pm.misleading_hypotheses = all;
    }
    if let Some(ls) = lessons {
        pm.lessons = ls
            .iter()
            .take(12)
            .map(|l| lesson_from_json(l, default_severity, &default_scope))
            .collect();
    }
    if let Some(a) = text_list(v, "action_items") {
        pm.action_items = a;
    }
    if let Some(d) = text_list(v, "detection_gaps") {
        pm.detection_gaps = d;
    }
    Ok(pm)
}

#[async_trait]
impl Analyst for LlmAnalyst {
    fn name(&self) -> String {
        format!("llm:{}", self.config.model)
    }

    async fn investigate(&self, input: &InvestigationInput) -> Result<AnalystOutput, AnalystError> {
        let kinds: Vec<&str> = crate::domain::ActionKind::ALL
            .iter()
            .map(|k| k.as_str())
            .collect();
        let system = SYSTEM_PROMPT.replace("{kinds}", &kinds.join(", "));
        let user = |budget_chars: usize| user_prompt(input, budget_chars);
        let schema = investigation_schema();
        let (v, rung) = self.ask_json(&system, &user, "analysis", &schema).await?;
        let mut out = output_from_json(&v)?;
        out.dropped
            .iter_mut()
            .for_each(|d| d.push_str(&format!(" (rung {})", rung.as_str())));
        Ok(out)
    }

    async fn draft_postmortem(
        &self,
        facts: &DraftFacts,
        builtin: &Postmortem,
    ) -> Result<Postmortem, AnalystError> {
        let system = POSTMORTEM_PROMPT.replace("{id}", facts.incident.id.as_str());
        let user = |budget_chars: usize| postmortem_prompt(facts, builtin, budget_chars);
        let (v, rung) = self
            .ask_json(&system, &user, "postmortem", &postmortem_schema())
            .await?;
        tracing::info!(rung = rung.as_str(), "model drafted the post-mortem");
        postmortem_from_json(&v, facts, builtin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tolerant_parser_reads_fenced_and_prose_wrapped_json_and_repairs_escapes() {
        let v = tolerant_json("Sure! ```json\n{\"hypotheses\": [], \"actions\": [{\"kind\": \"restart\"}]}\n``` hope it helps").unwrap();
        assert_eq!(v["actions"][0]["kind"], "restart");
        let v = tolerant_json(
            r#"{"hypotheses": [{"statement": "path C:\data\q is full"}], "actions": []}"#,
        )
        .unwrap();
        assert_eq!(v["hypotheses"][0]["statement"], r"path C:\data\q is full");
        assert!(matches!(
            tolerant_json(r#"{"hypotheses": [{"statement": "cut"#),
            Err(AnalystError::InvalidOutput(_))
        ));
        assert!(tolerant_json("no json here").is_err());
    }

    #[test]
    fn the_tolerant_parser_skips_think_blocks_and_braces_in_prose() {
        let v = tolerant_json(
            "<think>the answer needs {hypotheses}</think>\nUse {braces} like so: {\"actions\": []}",
        )
        .unwrap();
        assert_eq!(v, json!({"actions": []}));
        assert!(matches!(
            tolerant_json("{not json} and then {\"cut\": "),
            Err(AnalystError::InvalidOutput(_))
        ));
    }

    #[test]
    fn error_bodies_are_read_in_each_servers_dialect() {
        let body = |b: &str| {
            // What async-openai leaves when the body does not match its error type.
            let dummy = serde_json::from_str::<()>("x").unwrap_err();
            let e = OpenAIError::JSONDeserialize(dummy, b.to_string());
            Rejection::of(&e).map(|r| (r.status, r.message))
        };
        // llama.cpp: numeric code.
        assert_eq!(
            body(
                r#"{"error": {"code": 400, "message": "bad format", "type": "invalid_request_error"}}"#
            ),
            Some((Some(400), "bad format".to_string()))
        );
        // vLLM: unwrapped.
        assert_eq!(
            body(
                r#"{"object": "error", "message": "too long", "type": "BadRequestError", "code": 400}"#
            ),
            Some((Some(400), "too long".to_string()))
        );
        // Not an error body at all.
        assert_eq!(body("<html>502</html>"), None);
    }

    #[test]
    fn a_post_mortem_reply_keeps_the_facts_and_reads_lessons_in_either_form() {
        use crate::domain::postmortem::{ActionOutcome, draft};
        use crate::domain::{ActionKind, Incident, IncidentId, IncidentState, Severity};
        let now = jiff::Timestamp::UNIX_EPOCH;
        let facts = DraftFacts {
            incident: Incident {
                id: IncidentId::new(2026, 3),
                title: "Checkout errors".into(),
                service: "payments-api".into(),
                severity: Severity::Sev1,
                description: String::new(),
                state: IncidentState::Resolved,
                opened_by: "rita".into(),
                opened_at: now,
                updated_at: now,
                resolved_at: Some(now),
                summary: Some("Rolled back".into()),
                root_cause: Some("A leak".into()),
                version: 2,
            },
            failure_modes: vec!["connection_leak".into()],
            observations: vec!["pool exhausted".into()],
            earliest_evidence: None,
            actions: vec![(
                ActionOutcome {
                    kind: ActionKind::RaisePoolLimit,
                    target: "payments-api".into(),
                    outcome: "did_not_resolve".into(),
                    note: String::new(),
                },
                None,
            )],
            misleading: vec!["Pool too small".into()],
        };
        let builtin = draft(&facts);
        let v = json!({
            "summary": "It leaked.", "trigger": "", "root_cause": "aliens",
            "what_did_not_work": [{"kind": "reboot_cluster"}],
            "misleading_hypotheses": ["pool too small", "DNS"],
            "lessons": [
                {"always": "ALWAYS: check for leaks", "because": "it leaked", "scope": "", "severity": "CRITICAL"},
                "ALWAYS: alert on pool wait BECAUSE: found late SEVERITY: bogus"
            ]
        });
        let pm = postmortem_from_json(&v, &facts, &builtin).unwrap();
        assert_eq!(pm.summary, "It leaked.");
        assert_eq!(
            pm.trigger, builtin.trigger,
            "empty prose keeps the built-in text"
        );
        assert_eq!(pm.root_cause, "A leak");
        assert_eq!(pm.what_did_not_work, builtin.what_did_not_work);
        assert_eq!(pm.misleading_hypotheses, ["Pool too small", "DNS"]);
        assert_eq!(pm.lessons[0].always, "check for leaks");
        assert_eq!(pm.lessons[0].severity, RuleSeverity::Critical);
        assert_eq!(pm.lessons[0].scope, "payments-api; connection_leak");
        assert_eq!(pm.lessons[1].always, "alert on pool wait");
        assert_eq!(pm.lessons[1].because, "found late");
        assert_eq!(
            pm.lessons[1].severity,
            RuleSeverity::Critical,
            "SEV1 default"
        );
        assert!(postmortem_from_json(&json!({"foo": 1}), &facts, &builtin).is_err());
        let schema = postmortem_schema();
        assert_eq!(
            schema["required"].as_array().unwrap().len(),
            schema["properties"].as_object().unwrap().len(),
            "strict: every property required"
        );
    }

    #[test]
    fn references_parse_and_incident_ids_are_not_record_ids() {
        assert_eq!(parse_ref("OBS-12"), Some(12));
        assert_eq!(parse_ref("MEM-40"), Some(40));
        assert_eq!(parse_ref("7"), Some(7));
        assert_eq!(parse_ref("INC-2026-0001"), None);
        assert_eq!(parse_ref("nonsense"), None);
    }
}

#[cfg(test)]
mod bounds {
    use super::*;

    /// Every array of `schema` and below, as JSON pointers, with its `maxItems` if any.
    fn arrays(schema: &Value, at: String, out: &mut Vec<(String, Option<u64>)>) {
        match schema {
            Value::Object(m) => {
                if m.get("type").and_then(Value::as_str) == Some("array") {
                    out.push((at.clone(), m.get("maxItems").and_then(Value::as_u64)));
                }
                for (k, v) in m {
                    arrays(v, format!("{at}/{k}"), out);
                }
            }
            Value::Array(a) => {
                for (i, v) in a.iter().enumerate() {
                    arrays(v, format!("{at}/{i}"), out);
                }
            }
            _ => {}
        }
    }

    #[test]
    fn every_array_of_both_schemas_is_bounded() {
        for schema in [investigation_schema(), postmortem_schema()] {
            let mut found = Vec::new();
            arrays(&schema, String::new(), &mut found);
            assert!(found.len() >= 4, "{found:?}");
            for (at, max) in found {
                assert!(max.is_some_and(|m| (1..=8).contains(&m)), "{at}: {max:?}");
            }
        }
    }

    #[test]
    fn a_timeout_above_the_cap_is_capped() {
        let config = |secs| LlmConfig {
            base_url: "http://127.0.0.1:9/v1".into(),
            model: "m".into(),
            api_key: String::new(),
            timeout: Duration::from_secs(secs),
            token_budget: 1000,
            context_tokens: None,
        };
        assert_eq!(
            LlmAnalyst::new(config(600)).unwrap().config.timeout,
            MAX_TIMEOUT
        );
        assert_eq!(
            LlmAnalyst::new(config(20)).unwrap().config.timeout,
            Duration::from_secs(20)
        );
    }

    /// Every string of `schema` and below, as JSON pointers, with its `maxLength` (or, for an
    /// `enum`, its longest value) if any.
    fn strings(schema: &Value, at: String, out: &mut Vec<(String, Option<u64>)>) {
        match schema {
            Value::Object(m) => {
                if m.get("type").and_then(Value::as_str) == Some("string") {
                    let bound = m.get("maxLength").and_then(Value::as_u64).or_else(|| {
                        m.get("enum")?
                            .as_array()?
                            .iter()
                            .filter_map(Value::as_str)
                            .map(|x| x.chars().count() as u64)
                            .max()
                    });
                    out.push((at.clone(), bound));
                }
                for (k, v) in m {
                    strings(v, format!("{at}/{k}"), out);
                }
            }
            Value::Array(a) => {
                for (i, v) in a.iter().enumerate() {
                    strings(v, format!("{at}/{i}"), out);
                }
            }
            _ => {}
        }
    }

    #[test]
    fn every_string_of_both_schemas_is_bounded() {
        for schema in [investigation_schema(), postmortem_schema()] {
            let mut found = Vec::new();
            strings(&schema, String::new(), &mut found);
            assert!(found.len() >= 5, "{found:?}");
            for (at, max) in found {
                assert!(max.is_some_and(|m| (1..=600).contains(&m)), "{at}: {max:?}");
            }
        }
        let s = investigation_schema();
        let hyp = &s["properties"]["hypotheses"]["items"]["properties"];
        assert_eq!(hyp["statement"]["maxLength"], limits::STATEMENT);
        let act = &s["properties"]["actions"]["items"]["properties"];
        assert_eq!(act["rationale"]["maxLength"], 400);
        let p = postmortem_schema();
        let lesson = &p["properties"]["lessons"]["items"]["properties"];
        assert_eq!(lesson["always"]["maxLength"], 300);
        assert_eq!(lesson["because"]["maxLength"], 300);
    }

    #[test]
    fn without_max_length_the_schema_loses_only_its_max_lengths() {
        for schema in [investigation_schema(), postmortem_schema()] {
            let bare = without_max_length_keyword(&schema);
            assert!(!bare.to_string().contains("maxLength"));
            let mut a = Vec::new();
            arrays(&bare, String::new(), &mut a);
            let mut b = Vec::new();
            arrays(&schema, String::new(), &mut b);
            assert_eq!(a, b, "maxItems stay");
            assert_eq!(bare["required"], schema["required"]);
            assert_eq!(reply_token_bound(&bare), None, "unbounded strings");
        }
    }

    #[test]
    fn the_reply_bound_counts_every_string_and_item_and_fits_a_small_context() {
        let tiny = json!({"type": "object", "properties": {
            "a": {"type": "string", "maxLength": 30},
            "b": {"type": "array", "maxItems": 2, "items": {"type": "string", "enum": ["low", "medium"]}}
        }});
        // object 2; "a": key 1 + 3 + 2 + (2 + 10); "b": key 1 + 3 + 2 + (2 + 2 × ((2 + 2) + 2)).
        assert_eq!(
            reply_token_bound(&tiny),
            Some(2 + 18 + 20 + REPLY_SLACK_TOKENS as u32)
        );
        assert_eq!(
            reply_token_bound(&json!({"type": "string"})),
            None,
            "no maxLength"
        );
        assert_eq!(
            reply_token_bound(&json!({"type": "array", "items": {"type": "integer"}})),
            None,
            "no maxItems"
        );
        for schema in [investigation_schema(), postmortem_schema()] {
            let bound = reply_token_bound(&schema).expect("bounded");
            // At least the strings' characters at 4 per token; small enough that a 4096-token
            // context (the local test server's) keeps room for the prompt.
            assert!((1000..=2600).contains(&bound), "{bound}");
        }
    }

    #[test]
    fn a_known_context_holds_prompt_and_reply_and_an_unknown_one_keeps_the_configuration() {
        let unknown = fit_budget(None, 5000, 2000, 6000);
        assert_eq!(
            unknown,
            Budget {
                reply_tokens: 2000,
                user_prompt_chars: 24_000
            }
        );
        for (ctx, fixed, bound, configured) in [
            (4096, 900, 2200, 1200),
            (4096, 3000, 2200, 1200),
            (2048, 900, 2200, 6000),
            (1024, 2000, 2200, 6000),
            (131_072, 900, 2200, 6000),
        ] {
            let b = fit_budget(Some(ctx), fixed, bound, configured);
            let prompt =
                estimate_tokens(fixed) + TEMPLATE_TOKENS + estimate_tokens(b.user_prompt_chars);
            assert!(
                prompt + b.reply_tokens <= ctx,
                "{ctx}: {prompt} + {} > context",
                b.reply_tokens
            );
            assert!(b.reply_tokens <= bound && b.reply_tokens >= 1, "{b:?}");
            assert!(
                b.user_prompt_chars <= configured * FIT_CHARS_PER_TOKEN,
                "{b:?}"
            );
        }
        // Room enough: the reply gets its whole bound and the prompt the configured budget.
        let b = fit_budget(Some(131_072), 900, 2200, 6000);
        assert_eq!(b.reply_tokens, 2200);
        assert_eq!(b.user_prompt_chars, 6000 * FIT_CHARS_PER_TOKEN);
        // Tight: the reply gives way so the prompt keeps its floor.
        let b = fit_budget(Some(2048), 900, 2200, 6000);
        assert!(b.reply_tokens < 2200);
        assert!(b.user_prompt_chars >= MIN_USER_PROMPT_TOKENS as usize * FIT_CHARS_PER_TOKEN);
    }

    #[test]
    fn props_live_at_the_server_root_and_say_n_ctx() {
        assert_eq!(
            props_url("http://127.0.0.1:8089/v1"),
            "http://127.0.0.1:8089/props"
        );
        assert_eq!(
            props_url("http://127.0.0.1:8089/v1/"),
            "http://127.0.0.1:8089/props"
        );
        assert_eq!(props_url("http://h/llm/v1"), "http://h/llm/props");
        assert_eq!(props_url("http://h:8080"), "http://h:8080/props");
        assert_eq!(
            n_ctx_of(&json!({"default_generation_settings": {"n_ctx": 4096}, "total_slots": 1})),
            Some(4096)
        );
        assert_eq!(n_ctx_of(&json!({"n_ctx": 2048})), Some(2048));
        assert_eq!(
            n_ctx_of(&json!({"default_generation_settings": {"n_ctx": 0}})),
            None
        );
        assert_eq!(n_ctx_of(&json!({"n_ctx": -1})), None);
        assert_eq!(n_ctx_of(&json!({"n_ctx": "4096"})), None);
        assert_eq!(n_ctx_of(&json!({"object": "list"})), None);
    }

    #[test]
    fn rejected_parameters_are_named_as_words() {
        assert!(names_word(
            "unrecognized request argument supplied: seed",
            "seed"
        ));
        assert!(names_word("'seed' is not supported", "seed"));
        assert!(!names_word("the request proceeds", "seed"));
        assert!(names_word(
            "in context=('properties', 'statement'), 'maxlength' is not permitted.",
            "maxlength"
        ));
    }

    #[test]
    fn overlong_strings_are_cut_on_parse_at_a_character_boundary() {
        let long = "é".repeat(1000);
        let v = json!({
            "hypotheses": [{"statement": long, "confidence": "high", "cites": [],
                            "prior_incidents": [{"id": long, "why": long}]}],
            "actions": [{"kind": "restart", "target": long, "rationale": long, "hypothesis": 0}]
        });
        let out = output_from_json(&v).unwrap();
        let h = &out.hypotheses[0];
        assert_eq!(h.statement.chars().count(), limits::STATEMENT);
        assert!(long.starts_with(&h.statement));
        assert_eq!(h.prior_incidents[0].id.chars().count(), limits::INCIDENT_ID);
        assert_eq!(h.prior_incidents[0].why.chars().count(), limits::WHY);
        let a = &out.actions[0];
        assert_eq!(a.target.chars().count(), limits::TARGET);
        assert_eq!(a.rationale.chars().count(), limits::RATIONALE);
        // Trimmed after the cut: no trailing blank left by a cut between words.
        let words = format!("{} tail", "word ".repeat(100));
        let v = json!({"hypotheses": [{"statement": words}], "actions": []});
        let s = &output_from_json(&v).unwrap().hypotheses[0].statement;
        assert!(
            s.chars().count() <= limits::STATEMENT && !s.ends_with(' '),
            "{s:?}"
        );
        // A lesson given as one text is cut per part.
        let rule = lesson_from_json(
            &json!(format!(
                "ALWAYS: {long} BECAUSE: {long} SCOPE: {long} SEVERITY: high"
            )),
            RuleSeverity::Low,
            "x",
        );
        assert_eq!(rule.always.chars().count(), limits::LESSON_PART);
        assert_eq!(rule.because.chars().count(), limits::LESSON_PART);
        assert_eq!(rule.scope.chars().count(), limits::SCOPE);
        assert_eq!(rule.severity, RuleSeverity::High);
    }
}
