//! The model path against a stub OpenAI-compatible server on loopback (no internet): structured
//! replies, fenced JSON, bad escapes, truncation, unknown kinds and citations, a server that never
//! answers, a 500, and a server that rejects json_schema (the ladder).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use incidentmind::analyst::llm::{LlmAnalyst, LlmConfig, Rung};
use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app_full};

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Content(&'static str, &'static str),
    Hang,
    ServerError,
    RejectSchema(&'static str),
}

#[derive(Clone)]
struct Stub {
    mode: Mode,
    calls: Arc<AtomicUsize>,
    schema_calls: Arc<AtomicUsize>,
    bodies: Arc<std::sync::Mutex<Vec<Value>>>,
}

async fn chat(State(s): State<Stub>, Json(body): Json<Value>) -> Response {
    s.calls.fetch_add(1, Ordering::SeqCst);
    s.bodies.lock().unwrap().push(body.clone());
    let wants_schema = body["response_format"]["type"] == "json_schema";
    if wants_schema {
        s.schema_calls.fetch_add(1, Ordering::SeqCst);
    }
    let reply = |content: &str, finish: &str| {
        Json(json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}]})).into_response()
    };
    match s.mode {
        Mode::Content(c, f) => reply(c, f),
        Mode::Hang => {
            tokio::time::sleep(Duration::from_secs(60)).await;
            reply("{}", "stop")
        }
        Mode::ServerError => (StatusCode::INTERNAL_SERVER_ERROR, Json(json!({"error": {"message": "internal failure", "type": "server_error"}}))).into_response(),
        Mode::RejectSchema(_) if wants_schema => {
            (StatusCode::BAD_REQUEST, Json(json!({"error": {"message": "response_format type json_schema is not supported", "type": "invalid_request_error"}}))).into_response()
        }
        Mode::RejectSchema(c) => reply(c, "stop"),
    }
}

async fn stub(mode: Mode) -> (String, Stub) {
    let s = Stub {
        mode,
        calls: Arc::default(),
        schema_calls: Arc::default(),
        bodies: Arc::default(),
    };
    let app = axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(chat))
        .with_state(s.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://{addr}/v1"), s)
}

async fn app_with_model(base: &str, timeout: Duration) -> (TestApp, Arc<LlmAnalyst>) {
    let llm = Arc::new(
        LlmAnalyst::new(LlmConfig {
            base_url: base.into(),
            model: "stub-model".into(),
            api_key: "sk-test".into(),
            timeout,
            token_budget: 4000,
        })
        .unwrap(),
    );
    (
        spawn_app_full(Default::default(), Some(llm.clone())).await,
        llm,
    )
}

async fn investigate(app: &TestApp) -> (Value, Duration) {
    let id = app.open_incident("Checkout slow", "payments-api").await;
    let res = app
        .post_json(&app.responder, &format!("/api/v1/incidents/{id}/evidence"), json!({"kind": "logs", "content": "2026-11-29T10:01:00Z ERROR HikariPool-1 - Connection is not available, request timed out after 30000ms.\nuser mail jane.doe@example.com"}))
        .await;
    assert_eq!(res.status(), StatusCode::CREATED.as_u16());
    let started = Instant::now();
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/investigate"),
            json!({}),
        )
        .await;
    let took = started.elapsed();
    assert_eq!(res.status().as_u16(), 201);
    (res.json().await.unwrap(), took)
}

const VALID: &str = r#"{"hypotheses": [{"statement": "The pool leaks connections", "confidence": "high", "cites": ["OBS-1"], "prior_incidents": []}],
 "actions": [{"kind": "rollback_deploy", "target": "payments-api", "rationale": "leak shipped with the deploy", "hypothesis": 0},
             {"kind": "restart", "target": "payments-api", "rationale": "stopgap", "hypothesis": 0}]}"#;

#[tokio::test]
async fn a_valid_structured_reply_is_used_and_everything_sent_is_redacted() {
    let (base, s) = stub(Mode::Content(VALID, "stop")).await;
    let (app, llm) = app_with_model(&base, Duration::from_secs(5)).await;
    let (inv, _) = investigate(&app).await;
    assert_eq!(inv["analyst"], "llm:stub-model");
    assert_eq!(
        inv["hypotheses"][0]["statement"],
        "The pool leaks connections"
    );
    assert_eq!(inv["hypotheses"][0]["cites"], json!(["OBS-1"]));
    assert_eq!(
        inv["hypotheses"][0]["confidence"], "low",
        "no memory: capped low"
    );
    let kinds: Vec<&str> = inv["recommendations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["rollback_deploy", "restart_service"],
        "alias coerced"
    );
    assert_eq!(llm.current_rung(), Rung::JsonSchema);
    let body = s.bodies.lock().unwrap()[0].clone();
    assert_eq!(body["temperature"], 0);
    assert_eq!(body["response_format"]["type"], "json_schema");
    let sent = body.to_string();
    assert!(
        !sent.contains("jane.doe@example.com"),
        "redacted before sending"
    );
    assert!(
        sent.contains("remediation_failure") || sent.contains("NOT recommend"),
        "prompt explains memory use"
    );
}

#[tokio::test]
async fn fenced_json_and_invalid_escapes_are_read() {
    for content in [
        "Here you go:\n```json\n{\"hypotheses\": [{\"statement\": \"slow queries\", \"confidence\": \"medium\", \"cites\": [\"OBS-1\"], \"prior_incidents\": []}], \"actions\": []}\n```",
        r#"{"hypotheses": [{"statement": "disk C:\data\q full", "confidence": "low", "cites": [], "prior_incidents": []}], "actions": [{"kind": "free_disk_space", "target": "", "rationale": "r", "hypothesis": 0}]}"#,
    ] {
        let (base, _) = stub(Mode::Content(content, "stop")).await;
        let (app, _) = app_with_model(&base, Duration::from_secs(5)).await;
        let (inv, _) = investigate(&app).await;
        assert_eq!(inv["analyst"], "llm:stub-model", "{inv}");
        assert!(
            inv["notice"]
                .as_str()
                .unwrap_or("")
                .find("model unavailable")
                .is_none(),
            "{inv}"
        );
    }
}

#[tokio::test]
async fn a_truncated_reply_falls_back_to_the_built_in_analysis_with_a_notice() {
    let (base, _) = stub(Mode::Content(
        r#"{"hypotheses": [{"statement": "The pool le"#,
        "length",
    ))
    .await;
    let (app, _) = app_with_model(&base, Duration::from_secs(5)).await;
    let (inv, _) = investigate(&app).await;
    assert_eq!(inv["analyst"], "built-in");
    let notice = inv["notice"].as_str().unwrap();
    assert!(
        notice.contains("model unavailable: invalid output"),
        "{notice}"
    );
    assert!(!inv["recommendations"].as_array().unwrap().is_empty());
}

#[tokio::test]
async fn unknown_kinds_and_citations_of_missing_incidents_are_dropped_and_reported() {
    let content = r#"{"hypotheses": [{"statement": "Same as last time", "confidence": "high", "cites": ["OBS-1", "MEM-999"], "prior_incidents": [{"id": "INC-1999-0042", "why": "made up"}]}],
      "actions": [{"kind": "reboot_cluster", "target": "prod", "rationale": "yolo", "hypothesis": 0},
                  {"kind": "scale_out", "target": "payments-api", "rationale": "load", "hypothesis": 0},
                  {"kind": "rm -rf /", "target": "", "rationale": "", "hypothesis": 0}]}"#;
    let (base, _) = stub(Mode::Content(content, "stop")).await;
    let (app, _) = app_with_model(&base, Duration::from_secs(5)).await;
    let (inv, _) = investigate(&app).await;
    let kinds: Vec<&str> = inv["recommendations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["scale_out"]);
    let notice = inv["notice"].as_str().unwrap();
    assert!(
        notice.contains("model proposed 3 actions, 2 dropped: unknown kind 'reboot_cluster'"),
        "{notice}"
    );
    let dropped = inv["dropped"].to_string();
    assert!(dropped.contains("INC-1999-0042"), "{dropped}");
    assert!(dropped.contains("unknown record 999"), "{dropped}");
    assert!(
        inv["hypotheses"][0]["prior_incidents"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert_eq!(inv["hypotheses"][0]["cites"], json!(["OBS-1"]));
}

#[tokio::test]
async fn a_server_that_never_answers_is_cut_off_by_the_timeout() {
    let (base, _) = stub(Mode::Hang).await;
    let (app, _) = app_with_model(&base, Duration::from_secs(1)).await;
    let (inv, took) = investigate(&app).await;
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert_eq!(inv["analyst"], "built-in");
    assert!(
        inv["notice"]
            .as_str()
            .unwrap()
            .contains("model unavailable"),
        "{inv}"
    );
}

#[tokio::test]
async fn a_500_falls_back_without_walking_the_ladder() {
    let (base, s) = stub(Mode::ServerError).await;
    let (app, _) = app_with_model(&base, Duration::from_secs(5)).await;
    let (inv, _) = investigate(&app).await;
    assert_eq!(inv["analyst"], "built-in");
    assert!(
        inv["notice"]
            .as_str()
            .unwrap()
            .contains("model unavailable: transport error"),
        "{inv}"
    );
    assert_eq!(s.calls.load(Ordering::SeqCst), 1, "no automatic retries");
}

#[tokio::test]
async fn a_server_rejecting_json_schema_steps_down_and_remembers_the_rung() {
    let (base, s) = stub(Mode::RejectSchema(VALID)).await;
    let (app, llm) = app_with_model(&base, Duration::from_secs(5)).await;
    let (inv, _) = investigate(&app).await;
    assert_eq!(inv["analyst"], "llm:stub-model", "{inv}");
    assert_eq!(llm.current_rung(), Rung::JsonObject);
    let (inv2, _) = investigate(&app).await;
    assert_eq!(inv2["analyst"], "llm:stub-model");
    assert_eq!(
        s.schema_calls.load(Ordering::SeqCst),
        1,
        "later calls start at json_object"
    );
    let bodies = s.bodies.lock().unwrap();
    assert_eq!(
        bodies.last().unwrap()["response_format"]["type"],
        "json_object"
    );
    assert!(
        bodies.last().unwrap()["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("JSON schema")
    );
}
