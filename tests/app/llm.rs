//! The model path against a stub OpenAI-compatible server on loopback (no internet): structured
//! replies, fenced JSON, bad escapes, truncation, unknown kinds and citations, a server that never
//! answers or answers after the timeout, a 500, every rung of the ladder (json_schema →
//! json_object → plain) with each server's error dialect, replies lacking optional fields,
//! request-shape adaptation (max_completion_tokens, default temperature), and post-mortem drafting
//! by the model with its fallback.

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
    /// Rejects json_schema (llama.cpp's error dialect: numeric `code`) and json_object (vLLM's:
    /// unwrapped `{"object": "error"}`); answers the plain rung.
    RejectFormats(&'static str),
    /// Answers with this exact response body.
    Raw(&'static str),
    /// Answers after a delay, in milliseconds.
    Delayed(u64, &'static str),
    /// Like OpenAI's reasoning models: rejects `max_tokens` and `temperature: 0`.
    Reasoning(&'static str),
    /// Investigation answered with `analysis`; post-mortem drafting with `postmortem` and its
    /// finish reason, or never (None).
    Tasks {
        analysis: &'static str,
        postmortem: Option<(&'static str, &'static str)>,
    },
}

#[derive(Clone)]
struct Stub {
    mode: Mode,
    calls: Arc<AtomicUsize>,
    schema_calls: Arc<AtomicUsize>,
    bodies: Arc<std::sync::Mutex<Vec<Value>>>,
}

fn api_error(status: StatusCode, body: Value) -> Response {
    (status, Json(body)).into_response()
}

async fn chat(State(s): State<Stub>, Json(body): Json<Value>) -> Response {
    s.calls.fetch_add(1, Ordering::SeqCst);
    s.bodies.lock().unwrap().push(body.clone());
    let format = body["response_format"]["type"].as_str().unwrap_or("");
    let wants_schema = format == "json_schema";
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
            let is_postmortem = body["messages"][0]["content"]
                .as_str()
                .unwrap_or("")
                .contains("post-mortem");
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
