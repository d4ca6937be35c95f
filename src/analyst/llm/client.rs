//! The HTTP side of the LLM analyst: its configuration, the async-openai client, one chat
//! completion under the structured-output ladder with the request-shape adaptations it learns,
//! the `GET /props` probe for the server's context size, and what each call sent and got back.
//! Just over 600 lines: the analyst's state and the one call loop that reads and updates it
//! stay together.

use std::sync::atomic::{AtomicU8, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use serde_json::{Value, json};

use super::parse::tolerant_json;
use super::prompt::{estimate_tokens, fit_budget, reply_token_bound, reply_token_worst};
use super::reply::{Rejection, names_format, names_word, reply_content, reply_tail};
use super::schema::without_max_length_keyword;
use super::stream::Streamed;
use crate::analyst::AnalystError;
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

/// The LLM analyst. What it learns about its server — the rung that answers, the request-shape
/// adaptations, the server's context size — lives here, on the one analyst `AppState` holds;
/// nothing is process-wide.
#[derive(Debug)]
pub struct LlmAnalyst {
    pub(super) config: LlmConfig,
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
/// permitted"); the parsers still truncate to [`limits`](super::limits).
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
/// for logs, the live tests and the latency figures in docs/model-servers.md.
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
    /// The reply's characters and its last [`REPLY_TAIL_CHARS`](super::REPLY_TAIL_CHARS) characters: where a truncated
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
        let client = crate::openai::client(&config.base_url, &config.api_key, config.timeout)?;
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
    ) -> Result<Asked, AnalystError> {
        let started = Instant::now();
        let context = self.context_tokens().await;
        let reply_bound = reply_token_bound(schema).unwrap_or(DEFAULT_REPLY_TOKENS);
        let reply_worst = reply_token_worst(schema).unwrap_or(reply_bound);
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
                reply_worst,
                self.config.token_budget,
            );
            let user_text = user(budget.user_prompt_chars);
            let user_text = truncate_chars(&user_text, budget.user_prompt_chars);
            let prompt_chars = sys.chars().count() + user_text.chars().count();
            let (req, reply_tokens) = self.request(
                rung,
                quirks,
                schema_name,
                schema,
                &sys,
                user_text,
                budget.reply_tokens,
            );
            let without_max_length = quirks & QUIRK_NO_MAX_LENGTH != 0;
            let request_digest = crate::digest::sha256_hex(req.to_string().as_bytes());
            // llama.cpp (a local server, whose speed is the machine's): streamed and read up
            // to the deadline, keeping the complete items when it comes ([`stream`]).
            let answer = if self.is_llama_cpp() {
                super::stream::read_until(&self.client, req, started + self.stream_window()).await
            } else {
                self.client
                    .chat()
                    .create_byot::<Value, Value>(req)
                    .await
                    .map(|resp| Streamed { resp, cut: false })
            };
            match answer {
                Ok(Streamed { mut resp, cut }) => {
                    let mut cut_note = None;
                    if cut {
                        let raw = resp["choices"][0]["message"]["content"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string();
                        match super::stream::salvage(&raw) {
                            Some(kept) => {
                                resp["choices"][0]["message"]["content"] = json!(kept);
                                resp["choices"][0]["finish_reason"] = json!("deadline");
                                cut_note = Some(format!(
                                    "the model was still writing after {} s; its complete items were kept",
                                    started.elapsed().as_secs()
                                ));
                            }
                            None => {
                                return Err(AnalystError::Timeout(self.config.timeout.as_secs()));
                            }
                        }
                    }
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
                    if let Some(note) = &cut_note {
                        tracing::warn!(rung = rung.as_str(), "{note}");
                    }
                    return content.map(|c| Asked {
                        reply: c,
                        rung,
                        cut: cut_note,
                    });
                }
                Err(e) => (rung, quirks) = self.retry_after(e, rung, quirks)?,
            }
        }
    }

    /// The request body of one rung with the request-shape adaptations `quirks`, and the reply
    /// budget it sends (`max_tokens`, or `max_completion_tokens` for reasoning models).
    #[allow(clippy::too_many_arguments)]
    fn request(
        &self,
        rung: Rung,
        quirks: u8,
        schema_name: &str,
        schema: &Value,
        sys: &str,
        user_text: &str,
        reply_budget: u32,
    ) -> (Value, u32) {
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
            req["max_tokens"] = json!(reply_budget);
            reply_budget
        } else {
            let n = reply_budget.max(MAX_COMPLETION_TOKENS);
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
        (req, reply_tokens)
    }

    /// After a failed call on `rung` with `quirks`: the rung and quirks to try again with (a
    /// rejected request parameter adapts the request shape once; a rejected response format
    /// steps down the ladder), or the error to give up with.
    fn retry_after(
        &self,
        e: OpenAIError,
        mut rung: Rung,
        mut quirks: u8,
    ) -> Result<(Rung, u8), AnalystError> {
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
                return Ok((rung, quirks));
            }
            if m.contains("max_tokens") && quirks & QUIRK_MAX_COMPLETION_TOKENS == 0 {
                tracing::warn!(error = %r.message, "server rejected max_tokens; using max_completion_tokens");
                quirks |= QUIRK_MAX_COMPLETION_TOKENS;
                return Ok((rung, quirks));
            }
            if m.contains("temperature") && quirks & QUIRK_NO_TEMPERATURE == 0 {
                tracing::warn!(error = %r.message, "server rejected temperature 0; using its default");
                quirks |= QUIRK_NO_TEMPERATURE;
                return Ok((rung, quirks));
            }
            if names_word(&m, "seed") && quirks & QUIRK_NO_SEED == 0 {
                tracing::warn!(error = %r.message, "server rejected seed; sending none");
                quirks |= QUIRK_NO_SEED;
                return Ok((rung, quirks));
            }
        }
        let step_down = rejection
            .as_ref()
            .is_some_and(|r| names_format(&r.message) || matches!(r.status, Some(400 | 422)));
        if step_down && rung != Rung::Plain {
            tracing::warn!(rung = rung.as_str(), error = %e, "server rejected the response format; stepping down");
            rung = Rung::from_u8(rung as u8 + 1);
            return Ok((rung, quirks));
        }
        Err(match (e, rejection) {
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
            (other, None) => {
                AnalystError::Transport(truncate_chars(&other.to_string(), 300).to_string())
            }
        })
    }

    /// Runs `ask` under the whole-call timeout and reads the reply as JSON.
    pub(super) async fn ask_json(
        &self,
        system: &str,
        user: &(dyn Fn(usize) -> String + Sync),
        schema_name: &str,
        schema: &Value,
    ) -> Result<(Value, Rung, Option<String>), AnalystError> {
        let call = self.ask(system, user, schema_name, schema);
        let asked = tokio::time::timeout(self.config.timeout, call)
            .await
            .map_err(|_| AnalystError::Timeout(self.config.timeout.as_secs()))??;
        Ok((tolerant_json(&asked.reply)?, asked.rung, asked.cut))
    }

    /// How long a streamed reply is read, from the start of the call: the timeout less a tenth
    /// (at least 1 s, at most 5 s) left for reading what was kept and storing the investigation.
    fn stream_window(&self) -> Duration {
        let t = self.config.timeout;
        t.saturating_sub((t / 10).clamp(Duration::from_secs(1), Duration::from_secs(5)))
    }
}

/// One answered call: the reply's text, the rung that answered, and — when the deadline cut a
/// streamed reply and its complete items were kept — a note saying so.
pub(super) struct Asked {
    reply: String,
    rung: Rung,
    cut: Option<String>,
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
pub(super) fn n_ctx_of(v: &Value) -> Option<u32> {
    v.pointer("/default_generation_settings/n_ctx")
        .or_else(|| v.get("n_ctx"))
        .and_then(Value::as_u64)
        .and_then(|n| u32::try_from(n).ok())
        .filter(|n| (1..CONTEXT_NOT_GIVEN).contains(n))
}
