//! The LLM analyst: any OpenAI-compatible chat-completions server (OpenAI, Azure, Ollama, vLLM,
//! llama.cpp) through async-openai, with our own tolerant response types (`byot`) so replies
//! lacking optional fields (`id`, `created`, `usage`) are accepted.
//!
//! Structured-output ladder: `response_format: json_schema` → on a rejection naming the format,
//! `json_object` with the schema in the prompt → a plain prompt read by the tolerant parser. The
//! rung that answered is remembered for later calls. One timeout bounds the whole call; there are
//! no automatic retries. Everything sent is redacted and bounded to a token budget.

use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_trait::async_trait;
use serde_json::{Value, json};

use super::{
    Analyst, AnalystError, AnalystOutput, InvestigationInput, PriorIncident, ProposedAction,
    ProposedHypothesis,
};
use crate::domain::Confidence;

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
    /// Prompt budget in tokens (≈ 4 characters each).
    pub token_budget: usize,
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

/// The LLM analyst.
#[derive(Debug)]
pub struct LlmAnalyst {
    config: LlmConfig,
    client: Client<OpenAIConfig>,
    rung: AtomicU8,
}

impl LlmAnalyst {
    /// Builds the client. The key and base URL always come from `config` (never from `OPENAI_*`).
    ///
    /// # Errors
    /// When the HTTP client cannot be built.
    pub fn new(config: LlmConfig) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder().timeout(config.timeout).build()?;
        let oc = OpenAIConfig::new()
            .with_api_base(config.base_url.trim_end_matches('/'))
            .with_api_key(config.api_key.clone());
        // The plain reqwest service, without async-openai's default retry layer: one call per
        // rung, bounded by our timeout, never multiplied by retries.
        let client = Client::with_config(oc)
            .with_http_service(async_openai::middleware::ReqwestService::new(http));
        Ok(Self {
            client,
            config,
            rung: AtomicU8::new(0),
        })
    }

    /// The rung later calls start at.
    pub fn current_rung(&self) -> Rung {
        Rung::from_u8(self.rung.load(Ordering::Relaxed))
    }

    async fn ask(
        &self,
        system: &str,
        user: &str,
        schema: &Value,
    ) -> Result<(String, Rung), AnalystError> {
        let mut rung = self.current_rung();
        loop {
            let mut sys = system.to_string();
            let mut req = json!({
                "model": self.config.model,
                "temperature": 0,
                "stream": false,
                "max_tokens": 1500,
            });
            match rung {
                Rung::JsonSchema => {
                    req["response_format"] = json!({"type": "json_schema", "json_schema": {"name": "analysis", "strict": true, "schema": schema}});
                }
                Rung::JsonObject => {
                    req["response_format"] = json!({"type": "json_object"});
                    sys.push_str(&format!(
                        "\n\nAnswer with one JSON object matching this JSON schema:\n{schema}"
                    ));
                }
                Rung::Plain => {
                    sys.push_str(&format!("\n\nAnswer with only one JSON object (no prose) matching this JSON schema:\n{schema}"));
                }
            }
            req["messages"] =
                json!([{"role": "system", "content": sys}, {"role": "user", "content": user}]);
            match self.client.chat().create_byot::<Value, Value>(req).await {
                Ok(resp) => {
                    self.rung.store(rung as u8, Ordering::Relaxed);
                    tracing::info!(rung = rung.as_str(), model = %self.config.model, "model answered");
                    let choice = resp.get("choices").and_then(|c| c.get(0)).ok_or_else(|| {
                        AnalystError::InvalidOutput("no choices in the reply".into())
                    })?;
                    if choice.get("finish_reason").and_then(Value::as_str) == Some("length") {
                        return Err(AnalystError::InvalidOutput(
                            "the reply was truncated (finish_reason=length)".into(),
                        ));
                    }
                    let content = choice
                        .get("message")
                        .and_then(|m| m.get("content"))
                        .and_then(Value::as_str)
                        .ok_or_else(|| {
                            AnalystError::InvalidOutput("the reply has no message content".into())
                        })?;
                    return Ok((content.to_string(), rung));
                }
                Err(e) => {
                    let names_format = |m: &str| {
                        let m = m.to_ascii_lowercase();
                        m.contains("response_format")
                            || m.contains("json_schema")
                            || m.contains("json_object")
                            || m.contains("schema")
                            || m.contains("format")
                    };
                    let step_down = match &e {
                        OpenAIError::ApiError(a) => {
                            names_format(&a.api_error.message)
                                || a.status_code.is_client_error() && a.status_code.as_u16() == 400
                        }
                        OpenAIError::JSONDeserialize(_, body) => names_format(body),
                        _ => false,
                    };
                    if step_down && rung != Rung::Plain {
                        tracing::warn!(rung = rung.as_str(), error = %e, "server rejected the response format; stepping down");
                        rung = Rung::from_u8(rung as u8 + 1);
                        continue;
                    }
                    return Err(match e {
                        OpenAIError::Reqwest(r) if r.is_timeout() => {
                            AnalystError::Timeout(self.config.timeout.as_secs())
                        }
                        OpenAIError::JSONDeserialize(err, _) => {
                            AnalystError::InvalidOutput(err.to_string())
                        }
                        other => AnalystError::Transport(
                            crate::evidence::truncate_chars(&other.to_string(), 300).to_string(),
                        ),
                    });
                }
            }
        }
    }
}

/// JSON schema of the investigation answer (strict mode: every property required, no options).
pub fn investigation_schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["hypotheses", "actions"],
        "properties": {
            "hypotheses": {"type": "array", "items": {
                "type": "object", "additionalProperties": false,
                "required": ["statement", "confidence", "cites", "prior_incidents"],
                "properties": {
                    "statement": {"type": "string"},
                    "confidence": {"type": "string", "enum": ["low", "medium", "high"]},
                    "cites": {"type": "array", "items": {"type": "string"}},
                    "prior_incidents": {"type": "array", "items": {
                        "type": "object", "additionalProperties": false, "required": ["id", "why"],
                        "properties": {"id": {"type": "string"}, "why": {"type": "string"}}}}
                }}},
            "actions": {"type": "array", "items": {
                "type": "object", "additionalProperties": false,
                "required": ["kind", "target", "rationale", "hypothesis"],
                "properties": {
                    "kind": {"type": "string", "enum": crate::domain::ActionKind::ALL.iter().map(|k| k.as_str()).collect::<Vec<_>>()},
                    "target": {"type": "string"},
                    "rationale": {"type": "string"},
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
        let line = format!(
            "- {}: {}\n",
            o.reference(),
            crate::evidence::truncate_chars(&o.text, 400)
        );
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
            crate::evidence::truncate_chars(&m.text, 400)
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

/// Extracts the first balanced JSON object from a reply that may be fenced or wrapped in prose,
/// repairing invalid escape sequences (`\q` → `\\q`).
///
/// # Errors
/// [`AnalystError::InvalidOutput`] when no complete object is found or it does not parse.
pub fn tolerant_json(reply: &str) -> Result<Value, AnalystError> {
    let start = reply
        .find('{')
        .ok_or_else(|| AnalystError::InvalidOutput("no JSON object in the reply".into()))?;
    let bytes = reply.as_bytes();
    let (mut depth, mut in_str, mut esc, mut end) = (0i32, false, false, None);
    for (k, &b) in bytes.iter().enumerate().skip(start) {
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
                    end = Some(k);
                    break;
                }
            }
            _ => {}
        }
    }
    let end = end.ok_or_else(|| {
        AnalystError::InvalidOutput("the JSON object is incomplete (truncated?)".into())
    })?;
    let raw = &reply[start..=end];
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

/// Reads the model's JSON into [`AnalystOutput`], dropping (and reporting) malformed items.
///
/// # Errors
/// [`AnalystError::InvalidOutput`] when the top level lacks `hypotheses` and `actions`.
pub fn output_from_json(v: &Value) -> Result<AnalystOutput, AnalystError> {
    let hyps = v.get("hypotheses").and_then(Value::as_array);
    let acts = v.get("actions").and_then(Value::as_array);
    if hyps.is_none() && acts.is_none() {
        return Err(AnalystError::InvalidOutput(
            "no hypotheses or actions in the reply".into(),
        ));
    }
    let mut out = AnalystOutput::default();
    for h in hyps.into_iter().flatten() {
        let Some(statement) = h
            .get("statement")
            .and_then(Value::as_str)
            .filter(|s| !s.trim().is_empty())
        else {
            out.dropped.push("a hypothesis without a statement".into());
            continue;
        };
        let confidence = h
            .get("confidence")
            .and_then(Value::as_str)
            .and_then(|c| Confidence::parse(&c.to_lowercase()).ok())
            .unwrap_or(Confidence::Low);
        let cites = h
            .get("cites")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|c| {
                        c.as_str()
                            .map(str::to_string)
                            .or_else(|| c.as_i64().map(|n| n.to_string()))
                    })
                    .filter_map(|s| parse_ref(&s))
                    .collect()
            })
            .unwrap_or_default();
        let prior_incidents = h
            .get("prior_incidents")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|p| {
                        Some(PriorIncident {
                            id: p.get("id")?.as_str()?.trim().to_string(),
                            why: p
                                .get("why")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_string(),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        out.hypotheses.push(ProposedHypothesis {
            statement: crate::evidence::truncate_chars(statement, 1000).to_string(),
            confidence,
            cites,
            prior_incidents,
        });
    }
    for a in acts.into_iter().flatten() {
        let Some(kind) = a.get("kind").and_then(Value::as_str) else {
            out.dropped.push("an action without a kind".into());
            continue;
        };
        out.actions.push(ProposedAction {
            kind: kind.to_string(),
            target: a
                .get("target")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            rationale: crate::evidence::truncate_chars(
                a.get("rationale").and_then(Value::as_str).unwrap_or(""),
                1000,
            )
            .to_string(),
            hypothesis: a
                .get("hypothesis")
                .and_then(Value::as_u64)
                .map(|n| n as usize),
        });
    }
    Ok(out)
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
        let user = user_prompt(input, self.config.token_budget.saturating_mul(4));
        let schema = investigation_schema();
        let call = self.ask(&system, &user, &schema);
        let (reply, rung) = tokio::time::timeout(self.config.timeout, call)
            .await
            .map_err(|_| AnalystError::Timeout(self.config.timeout.as_secs()))??;
        let v = tolerant_json(&reply)?;
        let mut out = output_from_json(&v)?;
        out.dropped
            .iter_mut()
            .for_each(|d| d.push_str(&format!(" (rung {})", rung.as_str())));
        Ok(out)
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
    fn references_parse_and_incident_ids_are_not_record_ids() {
        assert_eq!(parse_ref("OBS-12"), Some(12));
        assert_eq!(parse_ref("MEM-40"), Some(40));
        assert_eq!(parse_ref("7"), Some(7));
        assert_eq!(parse_ref("INC-2026-0001"), None);
        assert_eq!(parse_ref("nonsense"), None);
    }
}
