//! A llama.cpp server (it answers `GET /props`) is asked with `"stream": true` and its reply is
//! read up to the deadline (issue #57, 10): a small model on a busy CPU that is still writing
//! when the timeout nears gives its complete items, not nothing after the whole timeout.

use std::time::{Duration, Instant};

use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::{Value, json};

use crate::llm::{Mode, app_with_context, stub_with_props};

/// The stub's streamed answer (OpenAI's chat-completion chunks as server-sent events, ending
/// with `[DONE]`): [`Mode::Content`] in three pieces at once, [`Mode::Trickle`] piece by piece.
pub(crate) fn streamed(mode: Mode) -> Response {
    let (content, piece, every_ms, finish) = match mode {
        Mode::Content(c, f) => (c, c.len().div_ceil(3).max(1), 0, f),
        Mode::Trickle(c, piece, ms) => (c, piece, ms, "stop"),
        _ => panic!("this stub streams only Content and Trickle"),
    };
    let chars: Vec<char> = content.chars().collect();
    let mut events: Vec<(u64, String)> = chars
        .chunks(piece)
        .map(|p| {
            let text: String = p.iter().collect();
            let chunk = json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]});
            (every_ms, chunk.to_string())
        })
        .collect();
    events.push((
        0,
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}], "usage": {"prompt_tokens": 10, "completion_tokens": 20}})
            .to_string(),
    ));
    events.push((0, "[DONE]".to_string()));
    let stream = futures::stream::iter(events).then(|(ms, data)| async move {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok::<_, std::convert::Infallible>(Event::default().data(data))
    });
    Sse::new(stream).into_response()
}

fn llama_props() -> Option<Value> {
    Some(json!({"default_generation_settings": {"n_ctx": 4096}, "total_slots": 1}))
}

/// Two hypotheses and three actions; written slowly, only part of it arrives in time.
const LONG: &str = r#"{"hypotheses": [{"statement": "The pool leaks connections", "confidence": "high", "cites": ["OBS-1"], "prior_incidents": []}, {"statement": "Slow queries hold connections", "confidence": "low", "cites": ["OBS-1"], "prior_incidents": []}], "actions": [{"kind": "rollback_deploy", "target": "payments-api", "rationale": "the leak shipped with the deploy", "hypothesis": 0}, {"kind": "raise_pool_limit", "target": "payments-api", "rationale": "more room while the leak is found", "hypothesis": 0}, {"kind": "restart_service", "target": "payments-api", "rationale": "frees the leaked connections for a while", "hypothesis": 0}]}"#;

async fn investigate(app: &crate::helpers::TestApp) -> (Value, Duration) {
    let id = app.open_incident("Checkout slow", "payments-api").await;
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/evidence"),
            json!({"kind": "logs", "content": "2026-11-29T10:01:00Z ERROR pool: no connection available within 30000 ms\n2026-11-29T10:01:05Z ERROR pool: no connection available within 30000 ms"}),
        )
        .await;
    assert_eq!(res.status().as_u16(), 201);
    let started = Instant::now();
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/investigate"),
            json!({}),
        )
        .await;
    assert_eq!(res.status().as_u16(), 201);
    (res.json().await.expect("json"), started.elapsed())
}

#[tokio::test]
async fn a_llama_cpp_reply_still_being_written_at_the_deadline_keeps_its_complete_items() {
    // 10 characters every 100 ms: the whole reply would take about 7 s; the timeout is 4 s.
    let (base, s) = stub_with_props(Mode::Trickle(LONG, 10, 100), llama_props()).await;
    let (app, llm) = app_with_context(&base, Duration::from_secs(4), None).await;
    let (inv, took) = investigate(&app).await;
    assert!(
        took < Duration::from_secs(4),
        "within the timeout: {took:?}"
    );
    assert_eq!(
        inv["analyst"], "llm:stub-model",
        "the model's answer: {inv}"
    );
    let notice = inv["notice"].as_str().unwrap_or_default();
    assert!(
        notice.contains("still writing") && notice.contains("complete items were kept"),
        "{notice}"
    );
    let statements: Vec<&str> = inv["hypotheses"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|h| h["statement"].as_str())
        .collect();
    assert!(
        statements.contains(&"The pool leaks connections"),
        "{statements:?}"
    );
    let body = s.bodies.lock().unwrap().last().cloned().unwrap();
    assert_eq!(body["stream"], true, "llama.cpp is asked to stream");
    assert_eq!(
        llm.last_call().unwrap().finish_reason.as_deref(),
        Some("deadline")
    );
}

#[tokio::test]
async fn a_llama_cpp_reply_streamed_in_time_is_used_whole() {
    let (base, _s) = stub_with_props(Mode::Trickle(LONG, 200, 10), llama_props()).await;
    let (app, _llm) = app_with_context(&base, Duration::from_secs(10), None).await;
    let (inv, _) = investigate(&app).await;
    assert_eq!(inv["analyst"], "llm:stub-model", "{inv}");
    assert_eq!(inv["hypotheses"].as_array().unwrap().len(), 2, "{inv}");
    let notice = inv["notice"].as_str().unwrap_or_default();
    assert!(!notice.contains("still writing"), "{notice}");
}
