//! Chat channels (issue #50): the outbox written by the incident write (a rolled-back write
//! queues nothing), Slack and Teams bodies against a loopback receiver (hostile alert text
//! escaped, Slack's limits kept, 429 + Retry-After honoured, failed messages listed and retried),
//! bad channel input, and two workers delivering each message once. The real-Matrix test is in
//! `chat_matrix.rs`. Slack and Teams themselves are not reached: the receiver stands in for them.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use incidentmind::services::chat::ChatSettings;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestApp, error_of, spawn_app};

/// What the receiver answers next: status, `Retry-After` seconds.
type Script = Arc<Mutex<VecDeque<(u16, Option<u64>)>>>;

/// A stand-in for chat webhooks on loopback: keeps every body with its path and arrival time and
/// answers from its script (200 `ok` when the script is empty).
#[derive(Clone)]
pub(crate) struct Receiver {
    pub base: String,
    pub got: Arc<Mutex<Vec<(String, Value, Instant)>>>,
    pub script: Script,
}

impl Receiver {
    pub async fn start() -> Self {
        use axum::extract::{Path, State};
        use axum::response::IntoResponse;
        type St = (Arc<Mutex<Vec<(String, Value, Instant)>>>, Script);
        async fn take(
            State((got, script)): State<St>,
            Path(path): Path<String>,
            body: axum::body::Bytes,
        ) -> axum::response::Response {
            let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            got.lock().unwrap().push((path, v, Instant::now()));
            let next = script.lock().unwrap().pop_front();
            match next {
                None | Some((200, _)) => (StatusCode::OK, "ok").into_response(),
                Some((status, retry)) => {
                    let mut res = (
                        StatusCode::from_u16(status).unwrap(),
                        format!("scripted {status}"),
                    )
                        .into_response();
                    if let Some(s) = retry {
                        res.headers_mut()
                            .insert("retry-after", s.to_string().parse().unwrap());
                    }
                    res
                }
            }
        }
        let got: Arc<Mutex<Vec<(String, Value, Instant)>>> = Arc::default();
        let script: Script = Arc::default();
        let app = axum::Router::new()
            .route("/{*path}", axum::routing::post(take))
            .with_state((got.clone(), script.clone()));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            base: format!("http://{addr}"),
            got,
            script,
        }
    }

    /// Bodies posted to `path`, in arrival order.
    pub fn bodies(&self, path: &str) -> Vec<Value> {
        self.got
            .lock()
            .unwrap()
            .iter()
            .filter(|(p, _, _)| p == path)
            .map(|(_, v, _)| v.clone())
            .collect()
    }

    /// Waits up to `secs` until `path` got `n` bodies.
    pub async fn wait_for(&self, path: &str, n: usize, secs: u64) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let b = self.bodies(path);
            if b.len() >= n || Instant::now() > deadline {
                return b;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Fast waits for tests.
pub(crate) fn fast(public_url: &str) -> ChatSettings {
    ChatSettings {
        public_url: public_url.to_string(),
        poll: Duration::from_millis(50),
        backoff_max: Duration::from_secs(2),
        give_up_after: Duration::from_secs(600),
        first_read_wait: Duration::from_secs(20),
    }
}

/// Starts the outbox worker (as `App::spawn_background` does) on `app`'s database; it stops
/// when the returned sender is dropped.
pub(crate) fn worker(app: &TestApp, settings: ChatSettings) -> tokio::sync::watch::Sender<bool> {
    let (stop, stopped) = tokio::sync::watch::channel(false);
    tokio::spawn(incidentmind::services::chat::run_worker(
        app.pool.clone(),
        app.memory.clone(),
        settings,
        std::sync::Arc::clone(&app.foreground),
        stopped,
    ));
    stop
}

/// Creates a channel as the admin (asserting 201); returns it.
pub(crate) async fn channel(app: &TestApp, body: Value) -> Value {
    let res = app
        .post_json(&app.admin, "/api/v1/chat/channels", body)
        .await;
    let status = res.status();
    let v: Value = res.json().await.unwrap();
    assert_eq!(status, StatusCode::CREATED, "{v}");
    v
}

/// An Alertmanager integration's secret.
pub(crate) async fn alertmanager(app: &TestApp, service: &str) -> String {
    let res = app
        .post_json(
            &app.admin,
            "/api/v1/integrations",
            json!({"name": "am", "source": "alertmanager", "default_service": service}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let v: Value = res.json().await.unwrap();
    v["secret"].as_str().unwrap().to_string()
}

/// Posts one Alertmanager group (`status` firing or resolved) with `summary`; returns the
/// incident it went to.
pub(crate) async fn alert(
    app: &TestApp,
    secret: &str,
    group: &str,
    service: &str,
    summary: &str,
    status: &str,
) -> String {
    let body = json!({
        "version": "4", "groupKey": format!("{{}}:{{alertname=\"{group}\"}}"), "status": status,
        "receiver": "im", "commonLabels": {"alertname": group, "service": service},
        "commonAnnotations": {"summary": summary},
        "alerts": [{"status": status, "fingerprint": format!("fp-{group}"),
            "labels": {"alertname": group, "service": service, "severity": "critical"},
            "annotations": {"summary": summary},
            "startsAt": "2026-12-01T09:00:00Z",
            "endsAt": if status == "resolved" { "2026-12-01T09:30:00Z" } else { "0001-01-01T00:00:00Z" }}]
    });
    let res = app
        .client
        .post(app.url("/api/v1/webhooks/alertmanager"))
        .bearer_auth(secret)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status_code = res.status();
    let v: Value = res.json().await.unwrap();
    assert_eq!(status_code, StatusCode::ACCEPTED, "{v}");
    v["incidents"][0].as_str().unwrap().to_string()
}

/// Outbox rows of `event`.
async fn queued(app: &TestApp, event: &str) -> i64 {
    sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM chat_outbox WHERE event = $1")
        .bind(event)
        .fetch_one(&app.pool)
        .await
        .unwrap()
}

const HOSTILE: &str = "<!channel> @here @room <@U024BE7LH> <b>x</b> [reset your password](https://evil.example/a) <https://evil.example/b|Open runbook> queue stuck";

#[tokio::test]
async fn hostile_alert_text_reaches_slack_and_teams_escaped_and_within_limits() {
    let app = spawn_app().await;
    let rx = Receiver::start().await;
    channel(
        &app,
        json!({"name": "slack", "kind": "slack_webhook",
        "url": format!("{}/slack/T1/B1/secretpath", rx.base)}),
    )
    .await;
    channel(
        &app,
        json!({"name": "teams", "kind": "teams_workflow",
        "url": format!("{}/teams/flow", rx.base)}),
    )
    .await;
    let _w = worker(&app, fast("https://im.example"));
    let secret = alertmanager(&app, "ledger").await;
    let id = alert(&app, &secret, "LedgerStuck", "ledger", HOSTILE, "firing").await;

    let slack = rx.wait_for("slack/T1/B1/secretpath", 1, 30).await;
    let teams = rx.wait_for("teams/flow", 1, 30).await;
    assert_eq!(slack.len(), 1, "one message per channel");
    assert_eq!(teams.len(), 1);
    let s = &slack[0];
    let all = s.to_string();
    for bad in [
        "<!channel>",
        "<@U024",
        "<https://evil",
        "<b>",
        "](https://evil",
        "@here",
        "@room",
    ] {
        assert!(!all.contains(bad), "slack body holds {bad}: {all}");
    }
    assert!(all.contains("&lt;!channel&gt;"), "{all}");
    let blocks = s["blocks"].as_array().unwrap();
    assert!(blocks.len() <= 50);
    for b in blocks {
        if let Some(t) = b["text"]["text"].as_str() {
            assert!(t.chars().count() <= 3000);
        }
    }
    let link = format!("https://im.example/incidents/{id}");
    assert!(
        s["text"].as_str().unwrap().ends_with(&link),
        "{}",
        s["text"]
    );
    assert!(
        s["text"].as_str().unwrap().starts_with("Incident opened"),
        "{}",
        s["text"]
    );
    let t = teams[0].to_string();
    for bad in ["<at", "](https://evil", "<https://evil", "@here", "@room"] {
        assert!(!t.contains(bad), "teams body holds {bad}: {t}");
    }
    assert_eq!(
        teams[0]["attachments"][0]["content"]["actions"][0]["url"],
        link
    );
}

#[tokio::test]
async fn a_429_is_retried_after_its_retry_after_and_the_message_delivered_once() {
    let app = spawn_app().await;
    let rx = Receiver::start().await;
    rx.script.lock().unwrap().push_back((429, Some(2)));
    channel(
        &app,
        json!({"name": "slack", "kind": "slack_webhook",
        "url": format!("{}/hook", rx.base), "events": ["opened"]}),
    )
    .await;
    let _w = worker(&app, fast("https://im.example"));
    app.open_incident("Checkout queue backs up", "checkout")
        .await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while rx.bodies("hook").len() < 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let got = rx.got.lock().unwrap().clone();
    assert_eq!(got.len(), 2, "one refused with 429, one taken, no more");
    let waited = got[1].2.duration_since(got[0].2);
    assert!(waited >= Duration::from_millis(1900), "waited {waited:?}");
    let (status, attempts): (String, i64) =
        sqlx::query_as("SELECT status, attempts FROM chat_outbox")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!((status.as_str(), attempts), ("delivered", 2));
}

#[tokio::test]
async fn a_rolled_back_write_queues_nothing_and_each_event_is_queued_once_per_channel() {
    let app = spawn_app().await;
    channel(
        &app,
        json!({"name": "a", "kind": "slack_webhook", "url": "http://127.0.0.1:9/a"}),
    )
    .await;
    channel(
        &app,
        json!({"name": "b", "kind": "teams_workflow", "url": "http://127.0.0.1:9/b",
        "min_severity": "SEV1"}),
    )
    .await;
    // SEV2: only channel a wants it.
    let id = app.open_incident("Search results stale", "search").await;
    assert_eq!(queued(&app, "opened").await, 1);

    // A stale resolve is refused (409) and writes nothing, outbox included.
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/resolve"),
            json!({"summary": "s", "root_cause": "the indexer stalled", "version": 999}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CONFLICT);
    assert_eq!(queued(&app, "resolved").await, 0);

    // A write rolled back after its event: nothing queued.
    let mut tx = incidentmind::store::begin_write(&app.pool).await.unwrap();
    let iid = incidentmind::domain::IncidentId::parse(&id).unwrap();
    incidentmind::store::incidents::add_event(
        &mut tx,
        &iid,
        incidentmind::store::now(),
        "rita",
        "resolve",
        "resolved",
    )
    .await
    .unwrap();
    assert_eq!(
        sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM chat_outbox WHERE event = 'resolved'")
            .fetch_one(&mut *tx)
            .await
            .unwrap(),
        1,
        "inside the transaction the row is there"
    );
    tx.rollback().await.unwrap();
    assert_eq!(queued(&app, "resolved").await, 0);

    assert_eq!(app.resolve(&id).await.status(), StatusCode::OK);
    assert_eq!(queued(&app, "resolved").await, 1);
    // Evidence is no chat event.
    assert_eq!(
        sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM chat_outbox")
            .fetch_one(&app.pool)
            .await
            .unwrap(),
        2
    );
}

#[tokio::test]
async fn bad_channel_input_is_a_clear_4xx_and_an_unreachable_host_a_test_outcome() {
    let app = spawn_app().await;
    for (body, field) in [
        (
            json!({"name": "x", "kind": "slack_webhook", "url": "ftp://hooks.example/x"}),
            "url",
        ),
        (
            json!({"name": "x", "kind": "slack_webhook", "url": "javascript:alert(1)"}),
            "url",
        ),
        (
            json!({"name": "x", "kind": "matrix", "url": "https://m.example", "access_token": "t"}),
            "room_id",
        ),
        (
            json!({"name": "x", "kind": "matrix", "url": "https://m.example", "room_id": "!r:m.example"}),
            "access_token",
        ),
        (
            json!({"name": "x", "kind": "irc", "url": "https://m.example"}),
            "kind",
        ),
        (
            json!({"name": "x", "kind": "slack_webhook", "url": "https://h.example/x", "events": ["paged"]}),
            "events",
        ),
    ] {
        let res = app
            .post_json(&app.admin, "/api/v1/chat/channels", body.clone())
            .await;
        let (status, code, message) = error_of(res).await;
        assert_eq!(
            status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{body}: {message}"
        );
        assert_eq!(code, "validation");
        assert!(message.starts_with(field), "{body}: {message}");
    }
    let res = app
        .post_json(
            &app.responder,
            "/api/v1/chat/channels",
            json!({"name": "x", "kind": "slack_webhook", "url": "https://h.example/x"}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::FORBIDDEN);

    // An unreachable host: the test button says so (not a 500).
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let c = channel(
        &app,
        json!({"name": "dead", "kind": "slack_webhook",
        "url": format!("http://{closed}/hook")}),
    )
    .await;
    let res = app
        .post_json(
            &app.admin,
            &format!("/api/v1/chat/channels/{}/test", c["id"]),
            json!({}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let out: Value = res.json().await.unwrap();
    assert_eq!(out["delivered"], false);
    assert!(
        out["said"].as_str().unwrap().contains("could not connect"),
        "{out}"
    );
    assert!(
        !out.to_string().contains("/hook"),
        "the webhook's path is its secret: {out}"
    );

    // A webhook that does not exist: its status and a hint.
    let rx = Receiver::start().await;
    rx.script.lock().unwrap().push_back((404, None));
    let c = channel(
        &app,
        json!({"name": "gone", "kind": "teams_workflow",
        "url": format!("{}/flow", rx.base)}),
    )
    .await;
    let out: Value = app
        .post_json(
            &app.admin,
            &format!("/api/v1/chat/channels/{}/test", c["id"]),
            json!({}),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        (out["delivered"].clone(), out["status"].clone()),
        (json!(false), json!(404))
    );
    assert!(
        out["hint"].as_str().unwrap().contains("does not exist"),
        "{out}"
    );
    // And one that works says what the service said.
    let out: Value = app
        .post_json(
            &app.admin,
            &format!("/api/v1/chat/channels/{}/test", c["id"]),
            json!({}),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        (out["delivered"].clone(), out["said"].clone()),
        (json!(true), json!("ok"))
    );

    // The channel never shows its secret.
    let list = app
        .get(&app.admin, "/api/v1/chat/channels")
        .await
        .text()
        .await
        .unwrap();
    assert!(!list.contains("/flow") && !list.contains("/hook"), "{list}");
}

#[tokio::test]
async fn a_refused_message_is_listed_as_failed_and_a_retry_delivers_it() {
    let app = spawn_app().await;
    let rx = Receiver::start().await;
    rx.script.lock().unwrap().push_back((403, None));
    let c = channel(
        &app,
        json!({"name": "slack", "kind": "slack_webhook",
        "url": format!("{}/hook", rx.base), "events": ["opened"]}),
    )
    .await;
    let cid = c["id"].as_i64().unwrap();
    let _w = worker(&app, fast("https://im.example"));
    let id = app.open_incident("Cart totals wrong", "cart").await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let failed = loop {
        let v: Value = app
            .get(&app.admin, &format!("/api/v1/chat/channels/{cid}"))
            .await
            .json()
            .await
            .unwrap();
        if !v["failed"].as_array().unwrap().is_empty() || Instant::now() > deadline {
            break v["failed"].clone();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(failed[0]["incident_id"], id);
    assert!(
        failed[0]["last_error"].as_str().unwrap().contains("403"),
        "{failed}"
    );
    let page = app
        .page(&app.browser("ada").await, &format!("/chat/{cid}"))
        .await;
    let mid = failed[0]["id"].as_i64().unwrap();
    assert!(
        page.contains(&format!("/chat/{cid}/messages/{mid}/retry")),
        "{page}"
    );

    let b = app.browser("ada").await;
    let res = b
        .post(app.url(&format!("/chat/{cid}/messages/{mid}/retry")))
        .header("origin", &app.base)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    let got = rx.wait_for("hook", 2, 20).await;
    assert_eq!(got.len(), 2);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let status: String = sqlx::query_scalar("SELECT status FROM chat_outbox")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(status, "delivered");
}

#[tokio::test]
async fn two_workers_on_one_database_deliver_each_message_once() {
    let app = spawn_app().await;
    let rx = Receiver::start().await;
    channel(
        &app,
        json!({"name": "slack", "kind": "slack_webhook",
        "url": format!("{}/hook", rx.base), "events": ["opened"]}),
    )
    .await;
    let mut ids = Vec::new();
    for i in 0..20 {
        ids.push(
            app.open_incident(&format!("Batch job {i} late"), "batch")
                .await,
        );
    }
    // Two workers, each on its own pool, as two instances would run them.
    let other =
        incidentmind::store::open(&app.database_url, incidentmind::store::OpenMode::MustExist)
            .await
            .unwrap();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    for pool in [app.pool.clone(), other] {
        let memory = incidentmind::memory::Memory::new(pool.clone(), None);
        tokio::spawn(incidentmind::services::chat::run_worker(
            pool,
            memory,
            fast("https://im.example"),
            std::sync::Arc::default(),
            stopped.clone(),
        ));
    }
    let got = rx.wait_for("hook", 20, 30).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let got_now = rx.bodies("hook");
    assert_eq!(got_now.len(), 20, "{got:?}");
    for id in &ids {
        let n = got_now
            .iter()
            .filter(|b| {
                b["text"]
                    .as_str()
                    .unwrap()
                    .ends_with(&format!("/incidents/{id}"))
            })
            .count();
        assert_eq!(n, 1, "{id}");
    }
    drop(stop);
}
