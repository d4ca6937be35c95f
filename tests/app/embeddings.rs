//! Optional embeddings: a loopback server standing in for an OpenAI-compatible `/v1/embeddings`
//! endpoint adds the semantic list to recall; a retracted record never comes back through it;
//! a failing endpoint leaves recall working.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use incidentmind::domain::MemoryKind;
use incidentmind::domain::memory::NewRecord;
use incidentmind::embeddings::{self, EmbeddingConfig, OpenAiEmbedder};
use incidentmind::recall::{RecallQuery, recall};
use incidentmind::services::memory as msvc;
use serde_json::{Value, json};

use crate::helpers::spawn_app;

/// Words that mean the same thing to the stub model: one dimension each.
const CONCEPTS: &[&[&str]] = &[
    &["heart", "cardiac", "pulse"],
    &["quiet", "flatlined", "silent"],
    &["disk", "storage", "volume"],
    &["full", "filled", "exhausted"],
];

/// The stub model: one dimension per concept present, plus a constant one (never a zero vector).
fn vector(text: &str) -> Vec<f32> {
    let lower = text.to_lowercase();
    let words: Vec<&str> = lower.split(|c: char| !c.is_alphanumeric()).collect();
    let mut v: Vec<f32> = CONCEPTS
        .iter()
        .map(|c| f32::from(u8::from(c.iter().any(|w| words.contains(w)))))
        .collect();
    v.push(0.1);
    v
}

async fn embed(State(fail): State<bool>, Json(body): Json<Value>) -> Response {
    if fail {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({"error": {"message": "model not loaded", "type": "server_error"}})),
        )
            .into_response();
    }
    let inputs: Vec<String> = match &body["input"] {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a
            .iter()
            .map(|x| x.as_str().unwrap_or("").to_string())
            .collect(),
        _ => Vec::new(),
    };
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": vector(t)}))
        .collect();
    Json(json!({"object": "list", "data": data, "model": body["model"]})).into_response()
}

async fn stub(fail: bool) -> String {
    let app = axum::Router::new()
        .route("/v1/embeddings", axum::routing::post(embed))
        .with_state(fail);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{addr}/v1")
}

fn embedder(base: &str) -> Arc<OpenAiEmbedder> {
    Arc::new(
        OpenAiEmbedder::new(EmbeddingConfig {
            base_url: base.into(),
            model: "stub-embed".into(),
            api_key: String::new(),
            timeout: Duration::from_secs(5),
        })
        .unwrap(),
    )
}

fn symptom(text: &str, service: &str) -> NewRecord {
    let mut r = NewRecord::new(MemoryKind::Symptom, text, "victor");
    r.services = vec![service.into()];
    r
}

#[tokio::test]
async fn embeddings_add_a_semantic_list_and_a_retracted_record_never_comes_back_through_it() {
    let app = spawn_app().await;
    let e = embedder(&stub(false).await);
    embeddings::register(&app.pool, e.clone());
    let cardiac = msvc::write(
        &app.pool,
        symptom("Cardiac telemetry flatlined", "vitals-api"),
    )
    .await
    .unwrap();
    let disk = msvc::write(&app.pool, symptom("Storage volume filled", "log-shipper"))
        .await
        .unwrap();
    // Working records are never embedded nor recalled.
    msvc::write(
        &app.pool,
        NewRecord::new(MemoryKind::Observation, "heart silent", "rita"),
    )
    .await
    .unwrap();
    assert_eq!(
        embeddings::backfill(&app.pool, e.as_ref(), 32)
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        embeddings::backfill(&app.pool, e.as_ref(), 32)
            .await
            .unwrap(),
        0
    );

    // No word in common with the record: only the semantic list can find it, and ranks it first.
    let q = RecallQuery {
        text: "heart monitor went quiet".into(),
        ..Default::default()
    };
    let res = recall(&app.pool, &q).await.unwrap();
    let ids: Vec<i64> = res.results.iter().map(|r| r.memory.id).collect();
    assert_eq!(ids.first(), Some(&cardiac.id), "{ids:?}");
    assert_eq!(res.results[0].why.lists, vec!["semantic"]);
    assert!(ids.contains(&disk.id), "no similarity cut-off: {ids:?}");

    msvc::retract(&app.pool, "victor", cardiac.id, "not ours")
        .await
        .unwrap();
    let res = recall(&app.pool, &q).await.unwrap();
    assert!(res.results.iter().all(|r| r.memory.id != cardiac.id));
}

#[tokio::test]
async fn a_failing_embeddings_endpoint_leaves_recall_working() {
    let app = spawn_app().await;
    let e = embedder(&stub(true).await);
    embeddings::register(&app.pool, e.clone());
    let disk = msvc::write(&app.pool, symptom("Storage volume filled", "log-shipper"))
        .await
        .unwrap();
    let err = embeddings::backfill(&app.pool, e.as_ref(), 32)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("model not loaded"), "{err}");
    let res = recall(
        &app.pool,
        &RecallQuery {
            text: "storage volume".into(),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(res.results[0].memory.id, disk.id);
    assert!(!res.results[0].why.lists.contains(&"semantic"));
}
