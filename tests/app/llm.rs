//! The model path against a stub OpenAI-compatible server on loopback (no internet): structured
//! replies, fenced JSON, bad escapes, truncation, unknown kinds and citations, a server that never
//! answers or answers after the timeout, a 500, every rung of the ladder (json_schema →
//! json_object → plain) with each server's error dialect, replies lacking optional fields,
//! request-shape adaptation (max_completion_tokens, default temperature, no seed, a server that
//! rejects `maxLength`), bounded answers (`maxLength` sent, long strings cut on parse, `max_tokens`
//! from the schema's bounds, prompt and reply fitted into the context `/props` or the
//! configuration gives), and post-mortem drafting by the model with its fallback.

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
pub(crate) enum Mode {
    Content(&'static str, &'static str),
    Hang,
    ServerError,
    RejectSchema(&'static str),
    /// Rejects json_schema (llama.cpp's error dialect: numeric `code`) and json_object (vLLM's:
    /// unwrapped `{"object": "error"}`); answers the plain rung.
    RejectFormats(&'static str),
    /// Answers with this exact response body.
    Raw(&'static str),
    /// Answers after a delay, in milliseconds.
    Delayed(u64, &'static str),
    /// Streamed only (`"stream": true`, as llama.cpp is asked): the content in pieces of this
    /// many characters, one every this many milliseconds, then `finish_reason: stop`.
    Trickle(&'static str, usize, u64),
    /// Like OpenAI's reasoning models: rejects `max_tokens` and `temperature: 0`.
    Reasoning(&'static str),
    /// Investigation answered with `analysis`; post-mortem drafting with `postmortem` and its
    /// finish reason, or never (None).
    Tasks {
        analysis: &'static str,
        postmortem: Option<(&'static str, &'static str)>,
    },
    /// Like OpenAI strict mode once: a `json_schema` format with `maxLength` anywhere is a 400
    /// naming it; without, investigation is answered with `analysis`, drafting with
    /// `postmortem`.
    RejectMaxLength {
        analysis: &'static str,
        postmortem: &'static str,
    },
    /// Rejects a request with `seed` (an unknown parameter to it).
    RejectSeed(&'static str),
}

#[derive(Clone)]
pub(crate) struct Stub {
    mode: Mode,
    /// What `GET /props` answers (llama.cpp's settings); `None`: 404, like OpenAI.
    props: Option<Value>,
    props_calls: Arc<AtomicUsize>,
    calls: Arc<AtomicUsize>,
    schema_calls: Arc<AtomicUsize>,
    pub(crate) bodies: Arc<std::sync::Mutex<Vec<Value>>>,
}

fn api_error(status: StatusCode, body: Value) -> Response {
    (status, Json(body)).into_response()
}

async fn chat(State(s): State<Stub>, Json(body): Json<Value>) -> Response {
    s.calls.fetch_add(1, Ordering::SeqCst);
    s.bodies.lock().unwrap().push(body.clone());
    if body["stream"] == true {
        return crate::llm_stream::streamed(s.mode);
    }
    let format = body["response_format"]["type"].as_str().unwrap_or("");
    let wants_schema = format == "json_schema";
    if wants_schema {
        s.schema_calls.fetch_add(1, Ordering::SeqCst);
    }
    let reply = |content: &str, finish: &str| {
        Json(json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}]})).into_response()
    };
    let is_postmortem = body["messages"][0]["content"]
        .as_str()
        .unwrap_or("")
        .contains("post-mortem");
    match s.mode {
        Mode::Content(c, f) => reply(c, f),
        Mode::RejectMaxLength { .. }
            if wants_schema && body["response_format"].to_string().contains("maxLength") =>
        {
            api_error(
                StatusCode::BAD_REQUEST,
                json!({"error": {"message": "Invalid schema for response_format 'analysis': In context=('properties', 'statement'), 'maxLength' is not permitted.", "type": "invalid_request_error", "param": "response_format", "code": null}}),
            )
        }
        Mode::RejectMaxLength {
            analysis,
            postmortem,
        } => reply(if is_postmortem { postmortem } else { analysis }, "stop"),
        Mode::RejectSeed(_) if body.get("seed").is_some() => api_error(
            StatusCode::BAD_REQUEST,
            json!({"error": {"message": "Unrecognized request argument supplied: seed", "type": "invalid_request_error", "param": null, "code": null}}),
        ),
        Mode::RejectSeed(c) => reply(c, "stop"),
        Mode::Hang => {
            tokio::time::sleep(Duration::from_secs(60)).await;
            reply("{}", "stop")
        }
        Mode::ServerError => (StatusCode::INTERNAL_SERVER_ERROR, Json(json!({"error": {"message": "internal failure", "type": "server_error"}}))).into_response(),
        Mode::RejectSchema(_) if wants_schema => {
            (StatusCode::BAD_REQUEST, Json(json!({"error": {"message": "response_format type json_schema is not supported", "type": "invalid_request_error"}}))).into_response()
        }
        Mode::RejectSchema(c) => reply(c, "stop"),
        Mode::RejectFormats(_) if wants_schema => api_error(
            StatusCode::BAD_REQUEST,
            json!({"error": {"code": 400, "message": "Unsupported response_format type", "type": "invalid_request_error"}}),
        ),
        Mode::RejectFormats(_) if format == "json_object" => api_error(
            StatusCode::BAD_REQUEST,
            json!({"object": "error", "message": "json_object output is not enabled for this model", "type": "BadRequestError", "param": null, "code": 400}),
        ),
        Mode::RejectFormats(c) => reply(c, "stop"),
        Mode::Raw(r) => (
            StatusCode::OK,
            [("content-type", "application/json")],
            r.to_string(),
        )
            .into_response(),
        Mode::Trickle(c, _, _) => reply(c, "stop"),
        Mode::Delayed(ms, c) => {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            reply(c, "stop")
        }
        Mode::Reasoning(_) if body.get("max_tokens").is_some() => api_error(
            StatusCode::BAD_REQUEST,
            json!({"error": {"message": "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.", "type": "invalid_request_error", "param": "max_tokens", "code": "unsupported_parameter"}}),
        ),
        Mode::Reasoning(_) if body.get("temperature").is_some_and(|t| t != 1) => api_error(
            StatusCode::BAD_REQUEST,
            json!({"error": {"message": "Unsupported value: 'temperature' does not support 0 with this model. Only the default (1) value is supported.", "type": "invalid_request_error", "param": "temperature", "code": "unsupported_value"}}),
        ),
        Mode::Reasoning(c) => Json(json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "o-stub",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": c, "refusal": null}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30, "completion_tokens_details": {"reasoning_tokens": 12}}}))
        .into_response(),
        Mode::Tasks { analysis, postmortem } => {
            match (is_postmortem, postmortem) {
                (false, _) => reply(analysis, "stop"),
                (true, Some((c, f))) => reply(c, f),
                (true, None) => {
                    tokio::time::sleep(Duration::from_secs(60)).await;
                    reply("{}", "stop")
                }
            }
        }
    }
}

async fn props(State(s): State<Stub>) -> Response {
    s.props_calls.fetch_add(1, Ordering::SeqCst);
    match &s.props {
        Some(p) => Json(p.clone()).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

pub(crate) async fn stub(mode: Mode) -> (String, Stub) {
    stub_with_props(mode, None).await
}

/// A stub whose `GET /props` (at the server root, as llama.cpp serves it) answers `props`.
pub(crate) async fn stub_with_props(mode: Mode, props_body: Option<Value>) -> (String, Stub) {
    let s = Stub {
        mode,
        props: props_body,
        props_calls: Arc::default(),
        calls: Arc::default(),
        schema_calls: Arc::default(),
        bodies: Arc::default(),
    };
    let app = axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(chat))
        .route("/props", axum::routing::get(props))
        .with_state(s.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://{addr}/v1"), s)
}

pub(crate) async fn app_with_model(base: &str, timeout: Duration) -> (TestApp, Arc<LlmAnalyst>) {
    app_with_context(base, timeout, None).await
}

/// Like [`app_with_model`], with the configured context size of the server.
pub(crate) async fn app_with_context(
    base: &str,
    timeout: Duration,
    context_tokens: Option<u32>,
) -> (TestApp, Arc<LlmAnalyst>) {
    let llm = Arc::new(
        LlmAnalyst::new(LlmConfig {
            base_url: base.into(),
            model: "stub-model".into(),
            api_key: "sk-test".into(),
            timeout,
            token_budget: 4000,
            context_tokens,
        })
        .unwrap(),
    );
    (
        spawn_app_full(Default::default(), Some(llm.clone())).await,
        llm,
    )
}

async fn investigate(app: &TestApp) -> (Value, Duration) {
    let (_, inv, took) = investigate_new(app).await;
    (inv, took)
}

/// Opens an incident with pool-exhaustion evidence (and an email to redact), investigates it;
/// returns its id, the investigation and how long the investigation took.
async fn investigate_new(app: &TestApp) -> (String, Value, Duration) {
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
    (id, res.json().await.unwrap(), took)
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
    let (app, llm) = app_with_model(&base, Duration::from_secs(5)).await;
    let (inv, _) = investigate(&app).await;
    assert_eq!(inv["analyst"], "built-in");
    let notice = inv["notice"].as_str().unwrap();
    assert!(
        notice.contains("model unavailable: invalid output"),
        "{notice}"
    );
    assert!(!inv["recommendations"].as_array().unwrap().is_empty());
    // Where the reply stopped is kept for the log (a reply this short is its own tail).
    let report = llm.last_call().expect("a call was made");
    assert_eq!(report.finish_reason.as_deref(), Some("length"));
    assert_eq!(
        report.reply_tail,
        r#"{"hypotheses": [{"statement": "The pool le"#
    );
    assert_eq!(report.reply_chars, 42);
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

#[tokio::test]
async fn a_server_rejecting_every_response_format_is_read_on_the_plain_rung() {
    let (base, s) = stub(Mode::RejectFormats(VALID)).await;
    let (app, llm) = app_with_model(&base, Duration::from_secs(5)).await;
    let (inv, _) = investigate(&app).await;
    assert_eq!(inv["analyst"], "llm:stub-model", "{inv}");
    assert_eq!(llm.current_rung(), Rung::Plain);
    assert_eq!(s.calls.load(Ordering::SeqCst), 3, "one call per rung");
    {
        let bodies = s.bodies.lock().unwrap();
        let last = bodies.last().unwrap();
        assert!(last.get("response_format").is_none(), "{last}");
        assert_eq!(last["temperature"], 0);
        assert!(
            last["messages"][0]["content"]
                .as_str()
                .unwrap()
                .contains("only one JSON object")
        );
    }
    let (inv2, _) = investigate(&app).await;
    assert_eq!(inv2["analyst"], "llm:stub-model");
    assert_eq!(
        s.calls.load(Ordering::SeqCst),
        4,
        "the plain rung is remembered"
    );
}

#[tokio::test]
async fn a_reply_lacking_every_optional_field_is_accepted() {
    // No id, object, created, model, usage, index, role, finish_reason: content only.
    const MINIMAL: &str = r#"{"choices": [{"message": {"content": "{\"hypotheses\": [{\"statement\": \"pool exhausted\", \"confidence\": \"medium\", \"cites\": [\"OBS-1\"], \"prior_incidents\": []}], \"actions\": [{\"kind\": \"scale_out\", \"target\": \"payments-api\", \"rationale\": \"load\", \"hypothesis\": 0}]}"}}]}"#;
    let (base, _) = stub(Mode::Raw(MINIMAL)).await;
    let (app, _) = app_with_model(&base, Duration::from_secs(5)).await;
    let (inv, _) = investigate(&app).await;
    assert_eq!(inv["analyst"], "llm:stub-model", "{inv}");
    assert_eq!(inv["hypotheses"][0]["statement"], "pool exhausted");
    assert_eq!(inv["recommendations"][0]["kind"], "scale_out");
}

#[tokio::test]
async fn a_reply_without_choices_or_content_is_invalid_output_not_a_500() {
    for raw in [
        r#"{"object": "chat.completion"}"#,
        r#"{"choices": [{"message": {"role": "assistant", "content": null}, "finish_reason": "stop"}]}"#,
        r#"{"choices": [{"message": {"role": "assistant", "content": null, "refusal": "I can't help with that"}, "finish_reason": "stop"}]}"#,
        "<html>Bad gateway</html>",
    ] {
        let (base, _) = stub(Mode::Raw(raw)).await;
        let (app, _) = app_with_model(&base, Duration::from_secs(5)).await;
        let (inv, _) = investigate(&app).await;
        assert_eq!(inv["analyst"], "built-in", "{raw}");
        let notice = inv["notice"].as_str().unwrap();
        assert!(
            notice.contains("model unavailable: invalid output"),
            "{raw}: {notice}"
        );
    }
}

#[tokio::test]
async fn json_cut_off_without_finish_reason_length_is_invalid_output_too() {
    let (base, _) = stub(Mode::Content(
        r#"{"hypotheses": [{"statement": "The pool leaks", "confidence": "high", "cites": ["OBS-1"]"#,
        "stop",
    ))
    .await;
    let (app, _) = app_with_model(&base, Duration::from_secs(5)).await;
    let (inv, _) = investigate(&app).await;
    assert_eq!(inv["analyst"], "built-in");
    let notice = inv["notice"].as_str().unwrap();
    assert!(notice.contains("incomplete (truncated?)"), "{notice}");
}

#[tokio::test]
async fn a_server_answering_after_the_timeout_is_cut_off_at_the_timeout() {
    let (base, s) = stub(Mode::Delayed(2500, VALID)).await;
    let (app, _) = app_with_model(&base, Duration::from_secs(1)).await;
    let (inv, took) = investigate(&app).await;
    assert!(took < Duration::from_millis(2000), "{took:?}");
    assert_eq!(inv["analyst"], "built-in");
    let notice = inv["notice"].as_str().unwrap();
    assert!(
        notice.contains("model unavailable: no answer within 1 s"),
        "{notice}"
    );
    assert_eq!(
        s.calls.load(Ordering::SeqCst),
        1,
        "no retry after a timeout"
    );
}

#[tokio::test]
async fn a_reasoning_model_gets_max_completion_tokens_and_its_default_temperature() {
    let (base, s) = stub(Mode::Reasoning(VALID)).await;
    let (app, llm) = app_with_model(&base, Duration::from_secs(5)).await;
    let (inv, _) = investigate(&app).await;
    assert_eq!(inv["analyst"], "llm:stub-model", "{inv}");
    assert_eq!(llm.current_rung(), Rung::JsonSchema, "not a format problem");
    assert_eq!(s.calls.load(Ordering::SeqCst), 3);
    let (inv2, _) = investigate(&app).await;
    assert_eq!(inv2["analyst"], "llm:stub-model");
    assert_eq!(
        s.calls.load(Ordering::SeqCst),
        4,
        "the request shape is remembered"
    );
    let bodies = s.bodies.lock().unwrap();
    let last = bodies.last().unwrap();
    assert!(last.get("max_tokens").is_none() && last.get("temperature").is_none());
    assert!(last["max_completion_tokens"].as_u64().unwrap() > 0);
    assert_eq!(last["response_format"]["type"], "json_schema");
}

// ---- post-mortem drafting ----

/// Investigates with the stub's analysis, records a failed rollback and a successful restart,
/// resolves; returns the incident id.
async fn resolved_with_actions(app: &TestApp) -> String {
    let (id, inv, _) = investigate_new(app).await;
    assert_eq!(inv["analyst"], "llm:stub-model", "{inv}");
    let rid = |kind: &str| {
        inv["recommendations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["kind"] == kind)
            .unwrap()["id"]
            .as_i64()
            .unwrap()
    };
    let base = format!("/api/v1/incidents/{id}/recommendations");
    for (kind, verdict, note) in [
        ("rollback_deploy", "did_not_resolve", "errors continued"),
        ("restart_service", "resolved", "connections freed"),
    ] {
        let r = rid(kind);
        let res = app
            .post_json(&app.responder, &format!("{base}/{r}/approve"), json!({}))
            .await;
        assert_eq!(res.status().as_u16(), 200);
        let res = app
            .post_json(
                &app.responder,
                &format!("{base}/{r}/verdict"),
                json!({"verdict": verdict, "note": note}),
            )
            .await;
        assert_eq!(res.status().as_u16(), 200);
    }
    let res = app.post_json(&app.responder, &format!("/api/v1/incidents/{id}/resolve"), json!({"summary": "Restarted payments-api", "root_cause": "A connection leak in the retry path."})).await;
    assert_eq!(res.status().as_u16(), 200);
    id
}

async fn draft_pm(app: &TestApp, id: &str) -> (Value, Duration) {
    let started = Instant::now();
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/postmortem"),
            json!({}),
        )
        .await;
    let took = started.elapsed();
    assert_eq!(res.status().as_u16(), 201);
    (res.json().await.unwrap(), took)
}

async fn postmortem_page(app: &TestApp, id: &str) -> String {
    let browser = app.browser("rita").await;
    let res = browser
        .get(app.url(&format!("/incidents/{id}/postmortem")))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    res.text().await.unwrap()
}

const PM: &str = r#"{"summary": "Checkout failed while the pool was exhausted; a restart freed the connections.",
 "trigger": "The 2.14 deploy",
 "contributing_factors": ["No alert on pool wait time"],
 "misleading_hypotheses": ["A bad deploy"],
 "lessons": [
   {"always": "Check for leaked connections before rolling back", "because": "the rollback did not help", "scope": "payments-api", "severity": "high"},
   {"always": "Page the database team", "because": "", "scope": "", "severity": "urgent"},
   "ALWAYS: Alert on pool wait time BECAUSE: detection came late in this incident SCOPE: payments-api SEVERITY: medium"
 ],
 "action_items": ["Fix the leak in the retry path"],
 "detection_gaps": ["Pool wait time is not alerted on"],
 "what_did_not_work": [{"kind": "reboot_cluster", "target": "prod", "outcome": "did_not_resolve", "note": "made up"}],
 "what_worked": []}"#;

#[tokio::test]
async fn the_model_drafts_the_post_mortem_and_the_facts_stay_the_facts() {
    let (base, s) = stub(Mode::Tasks {
        analysis: VALID,
        postmortem: Some((PM, "stop")),
    })
    .await;
    let (app, _) = app_with_model(&base, Duration::from_secs(5)).await;
    let id = resolved_with_actions(&app).await;
    let (stored, _) = draft_pm(&app, &id).await;
    assert_eq!(stored["analyst"], "llm:stub-model", "{stored}");
    let p = &stored["postmortem"];
    assert_eq!(
        p["summary"],
        "Checkout failed while the pool was exhausted; a restart freed the connections."
    );
    assert_eq!(p["trigger"], "The 2.14 deploy");
    assert_eq!(p["root_cause"], "A connection leak in the retry path.");
    // Action kinds and outcomes are the facts', never the model's.
    let kinds = |k: &str| -> Vec<String> {
        p[k].as_array()
            .unwrap()
            .iter()
            .map(|a| a["kind"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(kinds("what_did_not_work"), ["rollback_deploy"]);
    assert_eq!(kinds("what_worked"), ["restart_service"]);
    // Lessons are rules; the one without BECAUSE is dropped and reported; every BECAUSE names
    // the incident; the text form is read.
    let lessons = p["lessons"].as_array().unwrap();
    assert_eq!(lessons.len(), 2, "{lessons:?}");
    for l in lessons {
        assert!(!l["always"].as_str().unwrap().is_empty());
        assert!(l["because"].as_str().unwrap().contains(&id), "{l}");
    }
    assert_eq!(lessons[1]["always"], "Alert on pool wait time");
    assert_eq!(lessons[1]["severity"], "medium");
    assert_eq!(p["action_items"], json!(["Fix the leak in the retry path"]));
    let notice = stored["notice"].as_str().unwrap();
    assert!(
        notice.contains("model proposed 3 lessons, 1 dropped: lesson 2 has no BECAUSE line"),
        "{notice}"
    );
    // The page shows who drafted it and the notice.
    let page = postmortem_page(&app, &id).await;
    assert!(page.contains("llm:stub-model"));
    assert!(page.contains("postmortem-notice") && page.contains("1 dropped"));
    // The post-mortem prompt was structured and redacted like the investigation's.
    let bodies = s.bodies.lock().unwrap();
    let last = bodies.last().unwrap();
    assert_eq!(last["response_format"]["json_schema"]["name"], "postmortem");
    assert_eq!(last["temperature"], 0);
    let sent = last.to_string();
    assert!(sent.contains("rollback_deploy on payments-api: did not resolve"));
    assert!(!sent.contains("jane.doe@example.com"));
}

#[tokio::test]
async fn invalid_model_output_leaves_the_built_in_draft_with_a_visible_notice() {
    let (base, _) = stub(Mode::Tasks {
        analysis: VALID,
        postmortem: Some(("I'm sorry, I cannot write post-mortems.", "stop")),
    })
    .await;
    let (app, _) = app_with_model(&base, Duration::from_secs(5)).await;
    let id = resolved_with_actions(&app).await;
    let (stored, _) = draft_pm(&app, &id).await;
    assert_eq!(stored["analyst"], "built-in", "{stored}");
    let notice = stored["notice"].as_str().unwrap();
    assert!(
        notice.contains("model unavailable: invalid output"),
        "{notice}"
    );
    let p = &stored["postmortem"];
    assert_eq!(p["what_did_not_work"][0]["kind"], "rollback_deploy");
    assert!(
        p["lessons"][0]["always"]
            .as_str()
            .unwrap()
            .starts_with("Before you roll back"),
        "{p}"
    );
    let page = postmortem_page(&app, &id).await;
    assert!(page.contains("model unavailable: invalid output"), "{page}");
}

#[tokio::test]
async fn a_truncated_or_silent_model_falls_back_to_the_built_in_draft() {
    // Truncated.
    let (base, _) = stub(Mode::Tasks {
        analysis: VALID,
        postmortem: Some((r#"{"summary": "Checkout fail"#, "length")),
    })
    .await;
    let (app, _) = app_with_model(&base, Duration::from_secs(5)).await;
    let id = resolved_with_actions(&app).await;
    let (stored, _) = draft_pm(&app, &id).await;
    assert_eq!(stored["analyst"], "built-in");
    assert!(
        stored["notice"]
            .as_str()
            .unwrap()
            .contains("finish_reason=length")
    );
    // Never answers: cut off at the timeout.
    let (base, _) = stub(Mode::Tasks {
        analysis: VALID,
        postmortem: None,
    })
    .await;
    let (app, _) = app_with_model(&base, Duration::from_secs(1)).await;
    let id = resolved_with_actions(&app).await;
    let (stored, took) = draft_pm(&app, &id).await;
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert_eq!(stored["analyst"], "built-in");
    assert!(
        stored["notice"]
            .as_str()
            .unwrap()
            .contains("model unavailable: no answer within 1 s"),
        "{stored}"
    );
}

/// A reply in other field names: `title` for `statement`, `action` for `kind`, `reason` for
/// `rationale`, `likelihood` as a number, `evidence` for `cites`, wrapped in `analysis`.
const SYNONYMS: &str = r#"{"analysis": {"root_causes": [{"title": "Connections leak in the retry path", "likelihood": 0.8, "evidence": ["OBS-1"]}],
 "recommendations": [{"action": "rollback_deploy", "service": "payments-api", "reason": "the leak shipped with the deploy"},
                     {"action": "reboot_the_datacenter", "reason": "no such action"},
                     {"name": "restart", "why": "stopgap"}]}}"#;

#[tokio::test]
async fn a_reply_in_other_field_names_keeps_every_valid_item() {
    let (base, _s) = stub(Mode::Content(SYNONYMS, "stop")).await;
    let (app, _llm) = app_with_model(&base, Duration::from_secs(5)).await;
    let (inv, _) = investigate(&app).await;
    assert_eq!(inv["analyst"], "llm:stub-model", "{inv}");
    assert_eq!(
        inv["hypotheses"][0]["statement"],
        "Connections leak in the retry path"
    );
    let kinds: Vec<&str> = inv["recommendations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"rollback_deploy"), "{kinds:?}");
    assert!(kinds.contains(&"restart_service"), "{kinds:?}");
    let rollback = inv["recommendations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == "rollback_deploy")
        .unwrap();
    assert_eq!(rollback["rationale"], "the leak shipped with the deploy");
    assert!(
        inv["dropped"].to_string().contains("reboot_the_datacenter"),
        "{inv}"
    );
}

#[tokio::test]
async fn a_reply_with_nothing_usable_falls_back_to_the_built_in_result_and_the_audit_says_why() {
    let nothing =
        r#"{"actions": [{"action": "sacrifice_a_goat", "reason": "tradition"}], "hypotheses": []}"#;
    let (base, _s) = stub(Mode::Content(nothing, "stop")).await;
    let (app, _llm) = app_with_model(&base, Duration::from_secs(5)).await;
    let (inv, _) = investigate(&app).await;
    assert_eq!(inv["analyst"], "built-in", "{inv}");
    let notice = inv["notice"].as_str().unwrap_or_default();
    assert!(
        notice.contains("model unavailable: the reply had no usable hypothesis or action"),
        "{notice}"
    );
    assert!(
        !inv["recommendations"].as_array().unwrap().is_empty(),
        "the built-in result is shown: {inv}"
    );
    let detail: String = sqlx::query_scalar(
        "SELECT detail FROM audit_log WHERE action = 'incident.investigate' ORDER BY seq DESC LIMIT 1",
    )
    .fetch_one(&app.pool)
    .await
    .unwrap();
    let detail: Value = serde_json::from_str(&detail).unwrap();
    assert!(
        detail["fallback"]
            .as_str()
            .unwrap_or_default()
            .contains("sacrifice_a_goat"),
        "{detail}"
    );
    assert_eq!(detail["analyst"], "built-in");
}

// ---- bounded answers: maxLength, the reply budget, the server's context ----

/// `s` repeated until it is `n` characters (multi-byte on purpose: cuts must fall between
/// characters).
fn long(s: &str, n: usize) -> String {
    s.chars().cycle().take(n).collect()
}

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// Every `maxLength` in a request body.
fn has_max_length(body: &Value) -> bool {
    body.to_string().contains("maxLength")
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one end-to-end scenario: each step acts on what the steps before it left, so it reads top to bottom"
)]
async fn a_server_rejecting_max_length_gets_the_schema_without_it_and_long_strings_are_cut() {
    let statement = long("Pool épuisé — ", 900);
    let rationale = long("Überlast ", 2000);
    let analysis = leak(
        json!({
            "hypotheses": [{"statement": statement, "confidence": "high", "cites": ["OBS-1"], "prior_incidents": []}],
            "actions": [
                {"kind": "rollback_deploy", "target": "payments-api", "rationale": rationale, "hypothesis": 0},
                {"kind": "restart", "target": "payments-api", "rationale": "stopgap", "hypothesis": 0}
            ]
        })
        .to_string(),
    );
    let summary = long("Zusammenfassung ü ", 3000);
    let always = long("Prüfe die Verbindungen ", 1000);
    let postmortem = leak(
        json!({
            "summary": summary, "trigger": "deploy", "contributing_factors": [long("ß", 500)],
            "misleading_hypotheses": [], "action_items": [], "detection_gaps": [],
            "lessons": [{"always": always, "because": "it leaked", "scope": "payments-api", "severity": "high"}]
        })
        .to_string(),
    );
    let (base, s) = stub(Mode::RejectMaxLength {
        analysis,
        postmortem,
    })
    .await;
    let (app, llm) = app_with_model(&base, Duration::from_secs(5)).await;
    assert!(llm.sends_max_length());
    let (id, inv, _) = investigate_new(&app).await;
    assert_eq!(inv["analyst"], "llm:stub-model", "{inv}");
    assert_eq!(
        llm.current_rung(),
        Rung::JsonSchema,
        "maxLength is not the format: the rung stays"
    );
    assert!(!llm.sends_max_length(), "learned");
    {
        let bodies = s.bodies.lock().unwrap();
        assert_eq!(bodies.len(), 2, "one rejection, one answer");
        assert!(has_max_length(&bodies[0]));
        assert!(!has_max_length(&bodies[1]), "sent without maxLength");
        assert_eq!(bodies[1]["response_format"]["type"], "json_schema");
        assert_eq!(
            bodies[1]["response_format"]["json_schema"]["schema"]["properties"]["hypotheses"]["maxItems"],
            bodies[0]["response_format"]["json_schema"]["schema"]["properties"]["hypotheses"]["maxItems"],
            "maxItems stay"
        );
    }
    let report = llm.last_call().expect("a call answered");
    assert!(report.without_max_length);
    // Cut on parse, at a character boundary, to the schema's bounds.
    let got = inv["hypotheses"][0]["statement"].as_str().unwrap();
    assert!(statement.starts_with(got), "{got}");
    assert!(
        got.chars().count() <= 200 && got.chars().count() > 150,
        "{got}"
    );
    let rec = inv["recommendations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == "rollback_deploy")
        .unwrap();
    let r = rec["rationale"].as_str().unwrap();
    assert!(rationale.starts_with(r) && r.chars().count() <= 400, "{r}");

    // The next call goes without maxLength at once; so does post-mortem drafting.
    let (inv2, _) = investigate(&app).await;
    assert_eq!(inv2["analyst"], "llm:stub-model");
    assert_eq!(s.calls.load(Ordering::SeqCst), 3, "remembered");
    let id = {
        // Resolve the first incident with its recorded actions to draft its post-mortem.
        let rid = rec["id"].as_i64().unwrap();
        let base = format!("/api/v1/incidents/{id}/recommendations");
        let res = app
            .post_json(&app.responder, &format!("{base}/{rid}/approve"), json!({}))
            .await;
        assert_eq!(res.status().as_u16(), 200);
        let res = app
            .post_json(
                &app.responder,
                &format!("{base}/{rid}/verdict"),
                json!({"verdict": "resolved", "note": "ok"}),
            )
            .await;
        assert_eq!(res.status().as_u16(), 200);
        let res = app.post_json(&app.responder, &format!("/api/v1/incidents/{id}/resolve"), json!({"summary": "Rolled back", "root_cause": "A connection leak in the retry path."})).await;
        assert_eq!(res.status().as_u16(), 200);
        id
    };
    let (stored, _) = draft_pm(&app, &id).await;
    assert_eq!(stored["analyst"], "llm:stub-model", "{stored}");
    assert_eq!(s.calls.load(Ordering::SeqCst), 4, "no second rejection");
    assert!(!has_max_length(s.bodies.lock().unwrap().last().unwrap()));
    let p = &stored["postmortem"];
    let sum = p["summary"].as_str().unwrap();
    // Cut to the post-mortem bounds (analyst::llm::limits: summary 300, lesson part 120, list
    // item 80 characters).
    assert!(
        summary.starts_with(sum) && sum.chars().count() <= 300,
        "{sum}"
    );
    let a = p["lessons"][0]["always"].as_str().unwrap();
    assert!(always.starts_with(a) && a.chars().count() <= 120, "{a}");
    let f = p["contributing_factors"][0].as_str().unwrap();
    assert_eq!(f.chars().count(), 80, "{f}");
}

#[tokio::test]
async fn the_schema_carries_max_length_and_max_tokens_comes_from_its_bounds() {
    let (base, s) = stub(Mode::Content(VALID, "stop")).await;
    let (app, llm) = app_with_model(&base, Duration::from_secs(5)).await;
    let (inv, _) = investigate(&app).await;
    assert_eq!(inv["analyst"], "llm:stub-model", "{inv}");
    let bodies = s.bodies.lock().unwrap();
    let body = &bodies[0];
    let schema = &body["response_format"]["json_schema"]["schema"];
    assert_eq!(
        schema,
        &incidentmind::analyst::llm::investigation_schema(),
        "sent as built"
    );
    assert!(has_max_length(body));
    // No context known (no /props, none configured): the reply gets the schema's whole bound.
    let bound =
        incidentmind::analyst::llm::reply_token_bound(schema).expect("every string bounded");
    assert_eq!(body["max_tokens"], bound);
    assert_eq!(body["temperature"], 0);
    assert_eq!(body["seed"], incidentmind::analyst::llm::SEED);
    let report = llm.last_call().unwrap();
    assert_eq!(report.context_tokens, None);
    assert_eq!(report.reply_tokens, bound);
    assert_eq!(report.finish_reason.as_deref(), Some("stop"));
    assert!(!report.without_max_length);
    assert_eq!(report.request_digest.len(), 64);
}

/// Evidence long enough that an unfitted prompt would not leave the reply room in a 2,048-token
/// context.
async fn incident_with_long_evidence(app: &TestApp) -> String {
    let id = app.open_incident("Checkout slow", "payments-api").await;
    let mut log = String::new();
    for k in 0..400 {
        log.push_str(&format!(
            "2026-11-29T10:{:02}:{:02}Z ERROR HikariPool-1 - Connection is not available, request {k} timed out after 30000ms on node-{k}.\n",
            k / 60,
            k % 60
        ));
    }
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/evidence"),
            json!({"kind": "logs", "content": log}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED.as_u16());
    id
}

/// The request fits `ctx` tokens: its messages measured as the analyst measures them
/// ([`incidentmind::analyst::llm::estimate_tokens`]) plus the chat template plus `max_tokens`.
fn fits(body: &Value, ctx: u32) -> bool {
    let chars: usize = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap().chars().count())
        .sum();
    let prompt = incidentmind::analyst::llm::estimate_tokens(chars) + 48;
    let reply = body["max_tokens"].as_u64().unwrap() as u32;
    prompt + reply <= ctx
}

#[tokio::test]
async fn prompt_and_reply_are_fitted_into_the_context_llama_cpp_reports_at_props() {
    let (base, s) = stub_with_props(
        Mode::Content(VALID, "stop"),
        Some(json!({"default_generation_settings": {"n_ctx": 2048, "params": {"seed": 4294967295u64}}, "total_slots": 1})),
    )
    .await;
    // The configured context is larger: the server's own word wins.
    let (app, llm) = app_with_context(&base, Duration::from_secs(5), Some(32_000)).await;
    for _ in 0..2 {
        let id = incident_with_long_evidence(&app).await;
        let res = app
            .post_json(
                &app.responder,
                &format!("/api/v1/incidents/{id}/investigate"),
                json!({}),
            )
            .await;
        assert_eq!(res.status().as_u16(), 201);
        let inv: Value = res.json().await.unwrap();
        assert_eq!(inv["analyst"], "llm:stub-model", "{inv}");
    }
    assert_eq!(
        s.props_calls.load(Ordering::SeqCst),
        1,
        "asked once, remembered"
    );
    let report = llm.last_call().unwrap();
    assert_eq!(report.context_tokens, Some(2048));
    let bodies = s.bodies.lock().unwrap();
    let body = bodies.last().unwrap();
    assert!(fits(body, 2048), "{}", body["max_tokens"]);
    assert_eq!(
        body["cache_prompt"], false,
        "llama.cpp: no KV-cache reuse, so the same request gets the same answer"
    );
    let bound = incidentmind::analyst::llm::reply_token_bound(
        &incidentmind::analyst::llm::investigation_schema(),
    )
    .unwrap();
    let reply = body["max_tokens"].as_u64().unwrap() as u32;
    assert!(reply < bound && reply >= 512, "{reply}");
    let user = body["messages"][1]["content"].as_str().unwrap();
    assert!(
        user.starts_with("Incident INC-"),
        "the incident comes first: {user}"
    );
}

#[tokio::test]
async fn without_props_the_configured_context_is_used_and_the_lower_rungs_get_less_prompt() {
    let (base, s) = stub(Mode::RejectSchema(VALID)).await;
    let (app, llm) = app_with_context(&base, Duration::from_secs(5), Some(3000)).await;
    let id = incident_with_long_evidence(&app).await;
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/investigate"),
            json!({}),
        )
        .await;
    let inv: Value = res.json().await.unwrap();
    assert_eq!(inv["analyst"], "llm:stub-model", "{inv}");
    assert_eq!(llm.current_rung(), Rung::JsonObject);
    assert_eq!(llm.last_call().unwrap().context_tokens, Some(3000));
    let bodies = s.bodies.lock().unwrap();
    assert_eq!(bodies.len(), 2);
    for b in bodies.iter() {
        assert!(fits(b, 3000), "{}", b["max_tokens"]);
        assert!(
            b.get("cache_prompt").is_none(),
            "not llama.cpp (no /props): no field it would not know"
        );
    }
    let user_chars = |b: &Value| {
        b["messages"][1]["content"]
            .as_str()
            .unwrap()
            .chars()
            .count()
    };
    assert!(
        user_chars(&bodies[1]) <= user_chars(&bodies[0]),
        "the schema in the prompt leaves no more room for the incident"
    );
}

#[tokio::test]
async fn a_server_rejecting_seed_is_asked_without_it_and_that_is_remembered() {
    let (base, s) = stub(Mode::RejectSeed(VALID)).await;
    let (app, _) = app_with_model(&base, Duration::from_secs(5)).await;
    let (inv, _) = investigate(&app).await;
    assert_eq!(inv["analyst"], "llm:stub-model", "{inv}");
    let (inv2, _) = investigate(&app).await;
    assert_eq!(inv2["analyst"], "llm:stub-model");
    assert_eq!(s.calls.load(Ordering::SeqCst), 3, "one rejection only");
    let bodies = s.bodies.lock().unwrap();
    assert!(bodies[0].get("seed").is_some());
    let last = bodies.last().unwrap();
    assert!(last.get("seed").is_none());
    assert_eq!(last["temperature"], 0, "temperature stays");
    assert_eq!(
        last["response_format"]["type"], "json_schema",
        "the rung stays"
    );
}

/// An investigation holds one of the few investigation slots only for its own CPU
/// work and gives it back before calling the model server, so slow answers from another server
/// do not queue the investigations behind them. With twice as many investigations as slots and
/// a model answering after 2 s, holding the slot through the call would take two rounds (≥ 4 s).
#[tokio::test]
async fn investigations_waiting_on_a_model_server_do_not_hold_the_slots() {
    let (base, s) = stub(Mode::Delayed(2000, VALID)).await;
    let (app, _) = app_with_model(&base, Duration::from_secs(10)).await;
    let n = incidentmind::memory::investigation_slots() * 2;
    let started = Instant::now();
    let runs = futures::future::join_all((0..n).map(|_| investigate_new(&app))).await;
    let took = started.elapsed();
    for (_, inv, _) in &runs {
        assert_eq!(inv["analyst"], "llm:stub-model", "{inv}");
    }
    assert_eq!(s.calls.load(Ordering::SeqCst), n, "one model call each");
    assert!(
        took < Duration::from_millis(3800),
        "{n} at once took {took:?}"
    );
}
