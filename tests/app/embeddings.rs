//! Optional embeddings: a loopback server standing in for an OpenAI-compatible `/v1/embeddings`
//! endpoint adds the semantic list to recall; a retracted record never comes back through it;
//! a failing endpoint leaves recall working.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use incidentmind::domain::MemoryKind;
use incidentmind::domain::memory::NewRecord;
use incidentmind::memory::embeddings::{self, EmbeddingConfig, OpenAiEmbedder};
use incidentmind::memory::recall::{RecallQuery, recall};
use incidentmind::services::memory as msvc;
use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app_with_embedder};

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

/// How the stub answers: every text it was sent is kept in `seen`.
#[derive(Clone, Default)]
struct Stub {
    /// Answer every call with a 500.
    down: bool,
    seen: Arc<Mutex<Vec<String>>>,
    /// Milliseconds to think before each answer (a busy model).
    delay_ms: Arc<std::sync::atomic::AtomicU64>,
}

async fn embed(State(stub): State<Stub>, Json(body): Json<Value>) -> Response {
    let inputs: Vec<String> = match &body["input"] {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a
            .iter()
            .map(|x| x.as_str().unwrap_or("").to_string())
            .collect(),
        _ => Vec::new(),
    };
    stub.seen.lock().unwrap().extend(inputs.iter().cloned());
    let delay = stub.delay_ms.load(std::sync::atomic::Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(delay)).await;
    if stub.down {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({"error": {"message": "model not loaded", "type": "server_error"}})),
        )
            .into_response();
    }
    // A text the model refuses for good (as a 512-token model refuses a long one).
    if inputs.iter().any(|t| t.contains("POISON")) {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": {"message": "input too long", "type": "invalid_request_error"}})),
        )
            .into_response();
    }
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": vector(t)}))
        .collect();
    Json(json!({"object": "list", "data": data, "model": body["model"]})).into_response()
}

async fn stub(down: bool) -> (String, Stub) {
    let stub = Stub {
        down,
        ..Default::default()
    };
    let app = axum::Router::new()
        .route("/v1/embeddings", axum::routing::post(embed))
        .with_state(stub.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://{addr}/v1"), stub)
}

/// A test app whose database uses the stub model (answering with 500s when `down`).
async fn app_with_stub(down: bool) -> (TestApp, Arc<OpenAiEmbedder>, Stub) {
    let (base, stub) = stub(down).await;
    let e = Arc::new(
        OpenAiEmbedder::new(EmbeddingConfig {
            base_url: base,
            model: "stub-embed".into(),
            api_key: String::new(),
            timeout: Duration::from_secs(5),
        })
        .unwrap(),
    );
    let app = spawn_app_with_embedder(e.clone()).await;
    (app, e, stub)
}

/// Records embedded by one backfill batch.
async fn backfill(app: &TestApp, _e: &OpenAiEmbedder) -> usize {
    embeddings::backfill(&app.memory, 32).await.unwrap()
}

fn symptom(text: &str, service: &str) -> NewRecord {
    let mut r = NewRecord::new(MemoryKind::Symptom, text, "victor");
    r.services = vec![service.into()];
    r
}

#[tokio::test]
async fn embeddings_add_a_semantic_list_and_a_retracted_record_never_comes_back_through_it() {
    let (app, e, stub) = app_with_stub(false).await;
    let cardiac = msvc::write(
        &app.db,
        symptom("Cardiac telemetry flatlined", "vitals-api"),
    )
    .await
    .unwrap();
    let disk = msvc::write(&app.db, symptom("Storage volume filled", "log-shipper"))
        .await
        .unwrap();
    // Working records are never embedded nor recalled.
    msvc::write(
        &app.db,
        NewRecord::new(MemoryKind::Observation, "heart silent", "rita"),
    )
    .await
    .unwrap();
    assert_eq!(backfill(&app, &e).await, 2);
    assert_eq!(backfill(&app, &e).await, 0);

    // No word in common with the record: only the semantic list can find it, and ranks it first.
    let q = RecallQuery {
        text: "heart monitor went quiet".into(),
        ..Default::default()
    };
    let res = recall(&app.memory, &q).await.unwrap();
    let ids: Vec<i64> = res.results.iter().map(|r| r.memory.id).collect();
    assert_eq!(ids.first(), Some(&cardiac.id), "{ids:?}");
    // Queries are redacted before they leave the machine.
    let with_secret = RecallQuery {
        text: "heart alarm paged jane.doe@example.com".into(),
        ..Default::default()
    };
    recall(&app.memory, &with_secret).await.unwrap();
    let seen = stub.seen.lock().unwrap().clone();
    assert!(
        seen.iter().any(|t| t.contains("heart alarm paged")),
        "{seen:?}"
    );
    assert!(seen.iter().all(|t| !t.contains("jane.doe")), "{seen:?}");
    assert_eq!(res.results[0].why.lists, vec!["semantic"]);
    assert!(ids.contains(&disk.id), "no similarity cut-off: {ids:?}");

    msvc::retract(&app.pool, "victor", cardiac.id, "not ours")
        .await
        .unwrap();
    let res = recall(&app.memory, &q).await.unwrap();
    assert!(res.results.iter().all(|r| r.memory.id != cardiac.id));
}

#[tokio::test]
async fn a_failing_embeddings_endpoint_leaves_recall_working() {
    let (app, e, stub) = app_with_stub(true).await;
    let disk = msvc::write(&app.db, symptom("Storage volume filled", "log-shipper"))
        .await
        .unwrap();
    let _ = &e;
    let err = embeddings::backfill(&app.memory, 32).await.unwrap_err();
    assert!(err.to_string().contains("model not loaded"), "{err}");
    let res = recall(
        &app.memory,
        &RecallQuery {
            text: "storage volume".into(),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(res.results[0].memory.id, disk.id);
    assert!(!res.results[0].why.lists.contains(&"semantic"));
    // A failed endpoint is left alone for a while: the next recall does not wait for it again.
    let calls = stub.seen.lock().unwrap().len();
    recall(
        &app.memory,
        &RecallQuery {
            text: "storage volume again".into(),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(stub.seen.lock().unwrap().len(), calls);
}

#[tokio::test]
async fn a_record_the_endpoint_refuses_for_good_does_not_stall_the_others() {
    let (app, e, _stub) = app_with_stub(false).await;
    let poison = msvc::write(&app.db, symptom("POISON pill heart", "vitals-api"))
        .await
        .unwrap();
    let cardiac = msvc::write(
        &app.db,
        symptom("Cardiac telemetry flatlined", "vitals-api"),
    )
    .await
    .unwrap();
    // The batch is refused; one by one, the good record is embedded and the bad one skipped.
    assert_eq!(backfill(&app, &e).await, 2);
    assert_eq!(backfill(&app, &e).await, 0);
    let res = recall(
        &app.memory,
        &RecallQuery {
            text: "pulse went silent".into(),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let semantic: Vec<i64> = res
        .results
        .iter()
        .filter(|r| r.why.lists.contains(&"semantic"))
        .map(|r| r.memory.id)
        .collect();
    assert_eq!(semantic, vec![cardiac.id], "poison {}", poison.id);
}

#[tokio::test]
async fn export_carries_the_vectors_so_an_import_embeds_nothing_again() {
    let (app, e, stub) = app_with_stub(false).await;
    for (text, svc) in [
        ("cardiac monitor went silent on ward four", "ward-telemetry"),
        (
            "storage volume filled by rotated audit files",
            "audit-store",
        ),
    ] {
        msvc::write(&app.db, symptom(text, svc)).await.unwrap();
    }
    assert_eq!(backfill(&app, &e).await, 2);
    let file = msvc::export(&app.pool).await.unwrap();
    assert!(
        file.lines()
            .all(|l| l.contains("\"vectors\":[{\"model\":\"stub-embed\"")),
        "every line carries its vector: {file}"
    );

    // Into a fresh database served by the same model: the backfill finds nothing to embed, the
    // stub is not called, and recall by meaning works at once.
    let (other, e2, stub2) = app_with_stub(false).await;
    let n = msvc::import(&other.pool, "test", &file, false)
        .await
        .unwrap();
    assert_eq!(n.imported, 2);
    assert_eq!(backfill(&other, &e2).await, 0);
    assert!(stub2.seen.lock().unwrap().is_empty());
    let res = recall(
        &other.memory,
        &RecallQuery {
            text: "pulse flatlined".into(),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert!(
        res.results[0].memory.text.starts_with("cardiac monitor"),
        "{:?}",
        res.results
            .iter()
            .map(|r| &r.memory.text)
            .collect::<Vec<_>>()
    );
    // Only the query was embedded by the second app.
    assert_eq!(stub2.seen.lock().unwrap().len(), 1);
    // Round trip: the second export equals the first.
    assert_eq!(msvc::export(&other.pool).await.unwrap(), file);
    drop(stub);
}

#[tokio::test]
async fn an_import_line_with_a_broken_vector_is_reported_and_nothing_is_imported() {
    let app = crate::helpers::spawn_app().await;
    let line = json!({
        "id": 1, "kind": "symptom", "epistemic_type": "observation",
        "text": "queue depth doubled", "services": [], "failure_modes": [],
        "vectors": [{"model": "m", "f32le_hex": "abc"}]
    });
    // Take the shape of a real exported record and break only its vector.
    msvc::write(&app.db, symptom("queue depth doubled", "queue-svc"))
        .await
        .unwrap();
    let exported = msvc::export(&app.pool).await.unwrap();
    let mut record: Value = serde_json::from_str(exported.lines().next().unwrap()).unwrap();
    record["vectors"] = line["vectors"].clone();
    let other = crate::helpers::spawn_app().await;
    let Err(msvc::ImportError::BadLines(bad)) =
        msvc::import(&other.pool, "test", &record.to_string(), false).await
    else {
        panic!("a broken vector must be a bad line");
    };
    assert_eq!(bad.len(), 1);
    assert_eq!(bad[0].line, 1);
    assert!(bad[0].message.starts_with("vector:"), "{}", bad[0].message);
    assert_eq!(other.count("records").await, 0);
}

#[tokio::test]
async fn the_memory_page_shows_the_backfill_until_every_record_has_a_vector() {
    let (app, e, _stub) = app_with_stub(false).await;
    for text in [
        "heart monitor quiet",
        "disk volume exhausted",
        "pulse silent again",
    ] {
        msvc::write(&app.db, symptom(text, "ward-telemetry"))
            .await
            .unwrap();
    }
    let page = app
        .get(&app.responder, "/memories")
        .await
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("0 of 3 records have a vector (stub-embed)"),
        "{page}"
    );
    assert_eq!(backfill(&app, &e).await, 3);
    let page = app
        .get(&app.responder, "/memories")
        .await
        .text()
        .await
        .unwrap();
    assert!(!page.contains("embedding-progress"), "{page}");
}

/// A busy model answers in 3 s: the first view of a new incident comes at once with a notice
/// (recall is computed in the background, issue #56; then the word and key matches while the
/// vectors are computed), and a later view has the matches by meaning.
#[tokio::test]
async fn a_new_incident_page_never_waits_on_the_embedder() {
    let (app, e, stub) = app_with_stub(false).await;
    msvc::write(
        &app.db,
        symptom(
            "the storage volume filled on the log shipper hosts",
            "log-shipper",
        ),
    )
    .await
    .unwrap();
    backfill(&app, &e).await;
    stub.delay_ms
        .store(3_000, std::sync::atomic::Ordering::SeqCst);
    let id = app
        .open_incident("Log shipper stalls: disk full on two hosts", "log-shipper")
        .await;
    let page = format!("/incidents/{id}");
    let started = std::time::Instant::now();
    let res = app.get(&app.responder, &page).await;
    let waited = started.elapsed();
    assert_eq!(res.status(), StatusCode::OK);
    let html = res.text().await.unwrap();
    assert!(
        waited < Duration::from_millis(2_500),
        "the first view took {waited:?}"
    );
    let waiting = |html: &str| {
        html.contains("Matches by meaning are still being computed")
            || html.contains(incidentmind::web::incident::RECALL_PENDING)
    };
    assert!(waiting(&html), "{html}");
    // The recall and its vectors arrive in the background; a later view recalls with them.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let html = app.get(&app.responder, &page).await.text().await.unwrap();
        if !waiting(&html) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the page still waits for its vectors: {html}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The chat's first read waits for its recall's query vectors by asking the memory's caches
/// (`Memory::page_recall_pending`), not by recalling on every poll (issue #50: a burst of
/// alert-opened incidents slowed the webhooks): the first ask starts the computation and says
/// "not yet", a later one says ready, and the page recall then has them.
#[tokio::test]
async fn a_first_read_waits_for_its_query_vectors_with_a_cache_read() {
    let (app, _e, stub) = app_with_stub(false).await;
    stub.delay_ms
        .store(400, std::sync::atomic::Ordering::SeqCst);
    let id = app
        .open_incident("Checkout stalls on the card processor", "checkout")
        .await;
    let incident = incidentmind::store::incidents::get(
        &app.pool,
        &incidentmind::domain::IncidentId::parse(&id).unwrap(),
    )
    .await
    .unwrap();
    let pending = app
        .memory
        .page_recall_pending(&incident, &[])
        .await
        .unwrap()
        .expect("the query's vectors are not computed before anyone asked");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    // The handle alone says when they are ready: a cache read.
    while !pending.ready(&app.memory) {
        assert!(
            std::time::Instant::now() < deadline,
            "the vectors were never computed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        app.memory
            .page_recall_pending(&incident, &[])
            .await
            .unwrap(),
        None,
        "ready for the page recall too"
    );
    let page = app
        .memory
        .recall_for_page(&incident, &[], &[], 5)
        .await
        .unwrap();
    assert!(
        !page.recall.vectors_pending,
        "the page recall has the vectors the readiness check saw"
    );
}

/// While an "opened" message waits for its first read, the outbox worker keeps it under its
/// claim and writes nothing (issue #50: writing every waiting row back each poll took SQLite's
/// write lock hundreds of times a second in an alert storm, and webhooks queued behind it):
/// the row's schedule and attempts stay as they were until it is delivered, with its first read.
#[tokio::test]
async fn a_first_read_waits_under_its_claim_without_writing_the_outbox() {
    use crate::chat::{Receiver, channel, fast, worker};
    let (app, _e, stub) = app_with_stub(false).await;
    stub.delay_ms
        .store(1500, std::sync::atomic::Ordering::SeqCst);
    let rx = Receiver::start().await;
    channel(
        &app,
        json!({"name": "on-call", "kind": "slack_webhook", "url": format!("{}/slack/wait", rx.base)}),
    )
    .await;
    let _w = worker(&app, fast("https://im.example"));
    app.open_incident("Checkout stalls on the card processor", "checkout")
        .await;
    let row = || async {
        sqlx::query_as::<_, (String, i64, String, Option<String>)>(
            "SELECT next_attempt_at, attempts, status, claimed_until FROM chat_outbox
              WHERE event = 'opened'",
        )
        .fetch_one(&app.pool)
        .await
        .unwrap()
    };
    let queued = row().await;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut seen_waiting = 0;
    loop {
        let now = row().await;
        if now.2 != "pending" {
            break;
        }
        if now.3.is_some() {
            seen_waiting += 1;
            assert_eq!(
                (&now.0, now.1),
                (&queued.0, queued.1),
                "a waiting first read is not written back while it waits"
            );
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never delivered: {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        seen_waiting >= 3,
        "the message waited under its claim ({seen_waiting} looks)"
    );
    let got = rx.wait_for("slack/wait", 1, 30).await;
    let text = got[0]["text"].as_str().unwrap_or_default().to_string();
    assert!(text.starts_with("Incident opened"), "{text}");
    let (status, attempts): (String, i64) =
        sqlx::query_as("SELECT status, attempts FROM chat_outbox WHERE event = 'opened'")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(
        (status.as_str(), attempts),
        ("delivered", 1),
        "one attempt: the one that delivered it"
    );
}
