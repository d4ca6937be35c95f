//! A chat completion read as a stream up to a deadline, for llama.cpp servers (issue #57).
//!
//! A small model on a loaded CPU generates a few tokens a second under a JSON-schema grammar: a
//! reply that fills its schema takes longer than the model timeout, and a call that waits for
//! the whole body gets nothing at all. Streamed (`"stream": true`, OpenAI's server-sent events,
//! which llama.cpp's server speaks), the reply is read as it is generated; at the deadline the
//! connection is dropped (llama.cpp then cancels the generation) and the complete items written
//! so far are kept ([`salvage`]).

use std::time::Instant;

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use futures::StreamExt;
use serde_json::{Value, json};

/// A streamed reply as one chat-completion body (`choices[0].message.content`,
/// `finish_reason`, `usage`), and whether the deadline cut it.
pub(super) struct Streamed {
    /// The reply in the shape of a non-streamed chat completion.
    pub resp: Value,
    /// `true` when the deadline came (or the stream broke) before the server finished.
    pub cut: bool,
}

/// Sends `req` (its `stream` set to `true` here) and reads the reply until the server ends it or
/// `deadline` passes.
///
/// # Errors
/// The request's own error (a rejected parameter or format is answered before any event, so the
/// ladder reads it as for a plain call); a stream that breaks before any content.
pub(super) async fn read_until(
    client: &Client<OpenAIConfig>,
    mut req: Value,
    deadline: Instant,
) -> Result<Streamed, OpenAIError> {
    req["stream"] = json!(true);
    let mut events = client
        .chat()
        .create_stream_byot::<Value, Value>(req)
        .await?;
    let mut content = String::new();
    let (mut finish, mut usage) = (Value::Null, Value::Null);
    let mut cut = false;
    loop {
        match tokio::time::timeout_at(deadline.into(), events.next()).await {
            Err(_) => {
                cut = true;
                break;
            }
            Ok(None) => break,
            Ok(Some(Err(e))) if content.is_empty() => return Err(e),
            Ok(Some(Err(e))) => {
                tracing::warn!(error = %e, "model stream broke; keeping what was written");
                cut = true;
                break;
            }
            Ok(Some(Ok(chunk))) => {
                let choice = &chunk["choices"][0];
                if let Some(piece) = choice["delta"]["content"].as_str() {
                    content.push_str(piece);
                }
                if choice["finish_reason"].is_string() {
                    finish = choice["finish_reason"].clone();
                }
                if chunk["usage"].is_object() {
                    usage = chunk["usage"].clone();
                }
            }
        }
    }
    Ok(Streamed {
        resp: json!({
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}],
            "usage": usage,
        }),
        cut,
    })
}

/// The complete part of a JSON object cut off mid-way: the text up to the last array element or
/// value that was closed (`}` or `]`), with the brackets still open closed after it, so a reply
/// cut during its third action keeps the first two whole and never half an item. `None` when
/// nothing was closed yet, or the text does not start an object.
pub(super) fn salvage(text: &str) -> Option<String> {
    let start = text.find('{')?;
    let bytes = text.as_bytes();
    let (mut in_str, mut esc) = (false, false);
    let mut open: Vec<u8> = Vec::new();
    // (end of the kept text, the brackets open there)
    let mut last: Option<(usize, Vec<u8>)> = None;
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
            b'{' | b'[' => open.push(b),
            b'}' | b']' => {
                open.pop();
                if open.is_empty() {
                    // The object is whole: nothing to salvage.
                    return Some(text[start..=k].to_string());
                }
                last = Some((k + 1, open.clone()));
            }
            _ => {}
        }
    }
    let (end, still_open) = last?;
    let mut out = text[start..end].trim_end().to_string();
    for b in still_open.iter().rev() {
        out.push(if *b == b'{' { '}' } else { ']' });
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::salvage;
    use serde_json::{Value, json};

    fn parsed(s: &str) -> Value {
        serde_json::from_str(&salvage(s).expect("salvaged")).expect("valid JSON")
    }

    #[test]
    fn a_reply_cut_in_its_third_action_keeps_the_first_two_whole() {
        let cut = r#"{"hypotheses": [{"statement": "pool {exhausted}", "confidence": "low", "cites": ["OBS-1"]}], "actions": [{"kind": "restart_service", "target": "a"}, {"kind": "scale_out", "target": "b"}, {"kind": "raise_po"#;
        assert_eq!(
            parsed(cut),
            json!({"hypotheses": [{"statement": "pool {exhausted}", "confidence": "low", "cites": ["OBS-1"]}],
                   "actions": [{"kind": "restart_service", "target": "a"}, {"kind": "scale_out", "target": "b"}]})
        );
    }

    #[test]
    fn a_whole_object_is_kept_as_it_is_and_nothing_closed_is_nothing() {
        assert_eq!(parsed(r#"{"a": [1]} trailing"#), json!({"a": [1]}));
        assert_eq!(salvage(r#"{"hypotheses": [{"statement": "po"#), None);
        assert_eq!(salvage("no json"), None);
    }

    #[test]
    fn brackets_and_escaped_quotes_inside_strings_do_not_count() {
        let cut = r#"{"hypotheses": [{"statement": "a \"] }\" b", "cites": []}, {"statement": "x"#;
        assert_eq!(
            parsed(cut),
            json!({"hypotheses": [{"statement": "a \"] }\" b", "cites": []}]})
        );
    }
}
