//! What a model server sends back: its refusal of a request ([`Rejection`], read in each
//! server's dialect, and whether it names a parameter or the response format), the reply's
//! message content, and the tail kept for logs.

use async_openai::error::OpenAIError;
use serde_json::Value;

use crate::analyst::AnalystError;
use crate::evidence::truncate_chars;

/// Characters of a reply kept in [`CallReport::reply_tail`](super::CallReport::reply_tail).
pub const REPLY_TAIL_CHARS: usize = 240;

/// The last [`REPLY_TAIL_CHARS`] characters of `reply`.
pub(super) fn reply_tail(reply: &str) -> String {
    let n = reply.chars().count();
    reply
        .chars()
        .skip(n.saturating_sub(REPLY_TAIL_CHARS))
        .collect()
}

/// `true` when `word` (lower-case) occurs in `m` as a word of its own (`'seed'` but not
/// `proceeds`).
pub(super) fn names_word(m: &str, word: &str) -> bool {
    m.split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .any(|w| w.eq_ignore_ascii_case(word))
}

pub(super) fn names_format(m: &str) -> bool {
    let m = m.to_ascii_lowercase();
    m.contains("response_format")
        || m.contains("json_schema")
        || m.contains("json_object")
        || m.contains("schema")
        || m.contains("format")
}

/// A server's refusal of a request: its HTTP status when known and its message.
pub(super) struct Rejection {
    pub(super) status: Option<u16>,
    pub(super) message: String,
}

impl Rejection {
    /// The refusal inside an error, if the server answered with one. Servers differ: OpenAI and
    /// Ollama wrap it as `{"error": {"message", "code": "…"}}`, llama.cpp gives a numeric `code`
    /// (which async-openai fails to read, leaving the raw body), vLLM sends it unwrapped
    /// (`{"object": "error", "message", "code": 400}`).
    pub(super) fn of(e: &OpenAIError) -> Option<Self> {
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

    pub(super) fn is_client_error(&self) -> bool {
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
pub(super) fn reply_content(resp: &Value) -> Result<String, AnalystError> {
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
