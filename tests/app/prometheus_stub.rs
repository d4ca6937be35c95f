//! The Prometheus source against a small stand-in for Prometheus's query API, for what a real
//! server cannot be made to show on demand: down, slow, a `bad_data` answer, an empty result, a
//! result over the caps. Also the responder's query endpoint's statuses, the evidence panel's
//! form, and the Grafana alerts whose payload does or does not carry a query.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use incidentmind::prometheus::PrometheusConfig;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestApp, error_of, spawn_app, spawn_app_with};
use crate::peer::free_port;
use crate::prometheus::{content_of, deliver, delivery, evidence_of, notes_of, pulled};
use crate::webhooks::integration;

/// What the stand-in saw: requests per query, and the most it was answering at once.
#[derive(Default)]
pub(crate) struct Seen {
    requests: Mutex<HashMap<String, usize>>,
    now: AtomicUsize,
    most: AtomicUsize,
}

impl Seen {
    /// Requests for `query` so far.
    pub(crate) fn requests(&self, query: &str) -> usize {
        self.requests
            .lock()
            .unwrap()
            .get(query)
            .copied()
            .unwrap_or(0)
    }

    /// The most requests it was answering at once.
    pub(crate) fn most_at_once(&self) -> usize {
        self.most.load(Ordering::SeqCst)
    }
}

/// A stand-in for Prometheus's query API that answers by the query: `slow` after 3 s, `bad`
/// with a `bad_data` error, `empty` with no series, `many` with 30 series of 1,200 points,
/// `flaky` with HTTP 503 the first time and a series after, `down` always with HTTP 503,
/// `held…` with one series after 150 ms, anything else with one short series.
pub(crate) async fn start_stub() -> String {
    start_stub_seeing().await.0
}

/// [`start_stub`], with what it saw.
pub(crate) async fn start_stub_seeing() -> (String, Arc<Seen>) {
    use axum::extract::{Query, State};
    use axum::http::StatusCode as S;
    async fn query_range(
        State(seen): State<Arc<Seen>>,
        Query(q): Query<HashMap<String, String>>,
    ) -> (S, axum::Json<Value>) {
        let query = q.get("query").cloned().unwrap_or_default();
        let n = {
            let mut requests = seen.requests.lock().unwrap();
            let n = requests.entry(query.clone()).or_default();
            *n += 1;
            *n
        };
        let at_once = seen.now.fetch_add(1, Ordering::SeqCst) + 1;
        seen.most.fetch_max(at_once, Ordering::SeqCst);
        let answer = answer(&query, n).await;
        seen.now.fetch_sub(1, Ordering::SeqCst);
        answer
    }
    async fn answer(query: &str, n: usize) -> (S, axum::Json<Value>) {
        let series = |n: usize, points: usize| -> Value {
            (0..n)
                .map(|i| {
                    json!({"metric": {"__name__": "stub_total", "i": i.to_string()},
                           "values": (0..points).map(|t| json!([1_700_000_000 + t, format!("{}", t * 2)])).collect::<Vec<_>>()})
                })
                .collect()
        };
        let ok = |result: Value| {
            (
                S::OK,
                axum::Json(
                    json!({"status": "success", "data": {"resultType": "matrix", "result": result}}),
                ),
            )
        };
        let unavailable = || {
            (
                S::SERVICE_UNAVAILABLE,
                axum::Json(json!({"status": "error", "errorType": "unavailable",
                                  "error": "the query engine is overloaded"})),
            )
        };
        match query {
            "slow" => {
                tokio::time::sleep(Duration::from_secs(3)).await;
                ok(series(1, 3))
            }
            "bad" => (
                S::BAD_REQUEST,
                axum::Json(json!({"status": "error", "errorType": "bad_data",
                                  "error": "1:4: parse error: unexpected end of input"})),
            ),
            "empty" => ok(json!([])),
            "many" => ok(series(30, 1200)),
            // About 18 MB: over the 16 MiB an answer was once read whole.
            "huge" => ok(series(3_000, 300)),
            "flaky" if n == 1 => unavailable(),
            "down" => unavailable(),
            q if q.starts_with("held") => {
                tokio::time::sleep(Duration::from_millis(150)).await;
                ok(series(1, 5))
            }
            _ => ok(series(1, 5)),
        }
    }
    let seen = Arc::new(Seen::default());
    let app = axum::Router::new()
        .route("/api/v1/query_range", axum::routing::get(query_range))
        .with_state(Arc::clone(&seen));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        axum::serve(listener, app).await.expect("stub");
    });
    (format!("http://{addr}"), seen)
}

/// Settings over a Prometheus at `url` with a 1 s timeout, caps of 5 series and 100 points,
/// and retries after 50 ms.
pub(crate) fn stub_settings(url: &str) -> incidentmind::Settings {
    let mut config = PrometheusConfig::new(url);
    config.timeout = Duration::from_secs(1);
    config.retry_backoff = Duration::from_millis(50);
    config.max_series = 5;
    config.max_points = 100;
    incidentmind::Settings {
        prometheus: Some(config),
        ..Default::default()
    }
}

/// Polls the incident's `prometheus` notes for up to 10 s until there are `n`.
async fn wait_for_notes(app: &TestApp, id: &str, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let notes = notes_of(app, id).await;
        if notes.len() >= n {
            return notes;
        }
        assert!(
            Instant::now() < deadline,
            "{n} notes within 10 s: {notes:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_slow_rejecting_empty_or_oversized_prometheus_leaves_notes_not_lost_alerts() {
    let stub = start_stub().await;
    let app = spawn_app_with(stub_settings(&stub)).await;
    let (_, secret) = integration(&app, "am", "alertmanager", json!({})).await;
    let body = delivery(
        "g-failures",
        "2026-12-04T10:00:00Z",
        &[
            ("fp-slow", "Slow", "slow"),
            ("fp-bad", "Bad", "bad"),
            ("fp-empty", "Empty", "empty"),
            ("fp-many", "Many", "many"),
        ],
    );
    let (id, answered) = deliver(&app, &secret, &body).await;
    assert!(answered < Duration::from_secs(1), "{answered:?}");
    // Every alert is on the incident whatever Prometheus does.
    let v = evidence_of(&app, &id).await;
    let alerts = v["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "alert");
    assert_eq!(alerts.count(), 4);
    // Three failures and the truncation notice.
    let notes = wait_for_notes(&app, &id, 4).await;
    let has = |needle: &str| notes.iter().any(|n| n.contains(needle));
    assert!(
        has("did not answer within 1 s") && has("'Slow'"),
        "{notes:?}"
    );
    assert!(has("rejected the query: 1:4: parse error"), "{notes:?}");
    assert!(has("matched no series"), "{notes:?}");
    assert!(
        has("30 series matched; only the first 5 are kept")
            && has("only the latest 100 of each are kept"),
        "{notes:?}"
    );
    let v = evidence_of(&app, &id).await;
    let kept = pulled(&v);
    assert_eq!(kept.len(), 1, "only the oversized result is evidence");
    let doc = content_of(&app, kept[0]["id"].as_i64().unwrap()).await;
    assert_eq!(doc["data"]["result"].as_array().unwrap().len(), 5);
    assert_eq!(
        doc["data"]["result"][0]["values"].as_array().unwrap().len(),
        100
    );
    assert!(doc["notice"].as_str().unwrap().starts_with("Truncated:"));

    // Prometheus down: a note, the incident and its alert stand.
    let down = spawn_app_with(stub_settings(&format!("http://127.0.0.1:{}", free_port()))).await;
    let (_, secret) = integration(&down, "am", "alertmanager", json!({})).await;
    let body = delivery("g-down", "2026-12-04T10:00:00Z", &[("fp-x", "X", "up")]);
    let (id, _) = deliver(&down, &secret, &body).await;
    let notes = wait_for_notes(&down, &id, 1).await;
    assert!(notes[0].contains("Prometheus is unreachable"), "{notes:?}");
    assert!(pulled(&evidence_of(&down, &id).await).is_empty());
}

#[tokio::test]
async fn the_prometheus_query_endpoint_answers_404_400_422_502_and_201() {
    // Not configured: 404 that says how to configure it.
    let plain = spawn_app().await;
    let id = plain.open_incident("Checkout slow", "checkout").await;
    let path = format!("/api/v1/incidents/{id}/evidence/prometheus");
    let (status, _, message) = error_of(
        plain
            .post_json(&plain.responder, &path, json!({"query": "up"}))
            .await,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(message.contains("--prometheus-url"), "{message}");

    // Turned off: 404 that says so.
    let mut settings = stub_settings("http://127.0.0.1:9");
    if let Some(p) = settings.prometheus.as_mut() {
        p.responder_queries = false;
    }
    let off = spawn_app_with(settings).await;
    let id = off.open_incident("Checkout slow", "checkout").await;
    let path = format!("/api/v1/incidents/{id}/evidence/prometheus");
    let (status, _, message) = error_of(
        off.post_json(&off.admin, &path, json!({"query": "up"}))
            .await,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(message.contains("turned off"), "{message}");

    let stub = start_stub().await;
    let app = spawn_app_with(stub_settings(&stub)).await;
    let id = app.open_incident("Checkout slow", "checkout").await;
    let path = format!("/api/v1/incidents/{id}/evidence/prometheus");
    // No credentials: 401; every role (responder is the lowest) may query.
    let res = app
        .client
        .post(app.url(&path))
        .json(&json!({"query": "up"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    for (token, q) in [
        (&app.responder, "up"),
        (&app.reviewer, "up or vector(1)"),
        (&app.admin, "up or vector(2)"),
    ] {
        let res = app.post_json(token, &path, json!({"query": q})).await;
        assert_eq!(res.status(), StatusCode::CREATED);
    }
    let cases = [
        (
            json!({"query": "bad"}),
            StatusCode::BAD_REQUEST,
            "parse error: unexpected end",
        ),
        (
            json!({"query": "empty"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "matched no series",
        ),
        (
            json!({"query": "slow"}),
            StatusCode::BAD_GATEWAY,
            "did not answer within 1 s",
        ),
        (
            json!({"query": " "}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "query",
        ),
        (
            json!({"query": "up", "start": "yesterday"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "RFC 3339",
        ),
        (
            json!({"query": "up", "start": 1_700_000_100, "end": 1_700_000_000}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "before end",
        ),
    ];
    for (body, want, needle) in cases {
        let (status, _, message) =
            error_of(app.post_json(&app.responder, &path, body.clone()).await).await;
        assert_eq!(status, want, "{body}: {message}");
        assert!(message.contains(needle), "{body}: {message}");
    }
    let missing = "/api/v1/incidents/INC-2020-9999/evidence/prometheus";
    let res = app
        .post_json(&app.responder, missing, json!({"query": "up"}))
        .await;
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn the_evidence_panel_form_queries_prometheus_and_keeps_a_rejected_query() {
    let stub = start_stub().await;
    let app = spawn_app_with(stub_settings(&stub)).await;
    let id = app.open_incident("Checkout slow", "checkout").await;
    let b = app.browser("rita").await;
    let page = app.page(&b, &format!("/incidents/{id}")).await;
    assert!(
        page.contains("id=\"query-prometheus\""),
        "the form is offered"
    );
    let post = |query: &'static str| {
        b.post(app.url(&format!("/incidents/{id}/evidence/prometheus")))
            .header("origin", &app.base)
            .form(&[("query", query), ("start", ""), ("end", ""), ("step", "")])
            .send()
    };
    let res = post("bad").await.unwrap();
    assert_eq!(res.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let html = res.text().await.unwrap();
    assert!(
        html.contains("parse error: unexpected end of input"),
        "the error is shown"
    );
    assert!(html.contains("value=\"bad\""), "the query is kept");
    // … and next to the form it came from, not only at the top of the page (issue #49).
    let form = html
        .split("action=\"/incidents/")
        .find(|f| f.contains("/evidence/prometheus\""))
        .and_then(|f| f.split("</form>").next())
        .expect("the Prometheus form");
    assert!(
        form.contains("id=\"prometheus-error\">")
            && form.contains("parse error: unexpected end of input"),
        "{form}"
    );
    let res = post("up").await.unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        pulled(&evidence_of(&app, &id).await).len(),
        0,
        "authored by the responder"
    );
    let v = evidence_of(&app, &id).await;
    assert!(
        v["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["author"] == "rita" && e["source"] == "prometheus: up")
    );

    // No source configured: no form.
    let plain = spawn_app().await;
    let id = plain.open_incident("Checkout slow", "checkout").await;
    let b = plain.browser("rita").await;
    let page = plain.page(&b, &format!("/incidents/{id}")).await;
    assert!(!page.contains("id=\"query-prometheus\""));
}

/// Posts a Grafana alerting body to its webhook; returns the incident id.
async fn deliver_grafana(app: &TestApp, secret: &str, body: Vec<u8>) -> String {
    let res = app
        .client
        .post(app.url("/api/v1/webhooks/grafana"))
        .bearer_auth(secret)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("webhook");
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    let v: Value = res.json().await.unwrap();
    v["incidents"][0].as_str().unwrap().to_string()
}

#[tokio::test]
async fn a_grafana_alert_gives_its_rule_query_only_when_its_payload_carries_one() {
    let stub = start_stub().await;
    let app = spawn_app_with(stub_settings(&stub)).await;
    let (_, secret) = integration(&app, "grafana", "grafana", json!({})).await;
    // Grafana's own example: rule links (`/alerting/<uid>/edit`) and values, no query.
    let official = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../shared/data/alerts/grafana_alerting_webhook.official.json"
    );
    let plain = deliver_grafana(&app, &secret, std::fs::read(official).unwrap()).await;
    // A ruler alert whose generatorURL is a Grafana Explore link holding its PromQL, and a
    // Grafana-managed alert beside it (rule link, dashboard, panel and values: no query).
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/grafana_alerts_explore.json"
    );
    let id = deliver_grafana(&app, &secret, std::fs::read(fixture).unwrap()).await;
    let expr = r#"sum(rate(http_requests_total{service="checkout",code=~"5.."}[5m])) / sum(rate(http_requests_total{service="checkout"}[5m]))"#;
    let deadline = Instant::now() + Duration::from_secs(10);
    let v = loop {
        let v = evidence_of(&app, &id).await;
        if !pulled(&v).is_empty() {
            break v;
        }
        assert!(Instant::now() < deadline, "the rule's series within 10 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let kept = pulled(&v);
    assert_eq!(kept.len(), 1, "only the alert whose payload holds a query");
    let doc = content_of(&app, kept[0]["id"].as_i64().unwrap()).await;
    assert_eq!(doc["query"], expr);
    assert!(
        doc["window"]["start"]
            .as_str()
            .unwrap()
            .starts_with("2026-12-04T09:45:00"),
        "15 minutes before startsAt: {doc}"
    );
    assert!(notes_of(&app, &id).await.is_empty(), "nothing was tried");
    // Nothing is made up for the alerts without one.
    assert!(pulled(&evidence_of(&app, &plain).await).is_empty());
    assert!(notes_of(&app, &plain).await.is_empty());
}

#[tokio::test]
async fn a_failed_rate_query_leaves_a_note_and_a_template_needing_a_service_waits_for_one() {
    let stub = start_stub().await;
    let mut settings = stub_settings(&stub);
    if let Some(p) = settings.prometheus.as_mut() {
        p.request_rate = Some("bad".into());
        p.error_rate = Some(r#"errors{service="$service"}"#.into());
    }
    let app = spawn_app_with(settings).await;
    let (_, secret) = integration(&app, "am", "alertmanager", json!({})).await;
    // An alert without a service label: the error rate template cannot be filled.
    let mut body = delivery(
        "g-no-service",
        "2026-12-04T10:00:00Z",
        &[("fp-1", "NoSvc", "up")],
    );
    body["alerts"][0]["labels"]
        .as_object_mut()
        .unwrap()
        .remove("service");
    body["groupLabels"] = json!({"alertname": "NoSvc"});
    body["commonLabels"] = json!({"alertname": "NoSvc"});
    let (id, _) = deliver(&app, &secret, &body).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let v = loop {
        let v = evidence_of(&app, &id).await;
        if !pulled(&v).is_empty() {
            break v;
        }
        assert!(Instant::now() < deadline, "the alert's series within 10 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let doc = content_of(&app, pulled(&v)[0]["id"].as_i64().unwrap()).await;
    assert_eq!(doc["query"], "up");
    assert!(
        doc["related"].is_null(),
        "nothing beside the alert's own: {doc}"
    );
    let notes = notes_of(&app, &id).await;
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].starts_with(
            "The request rate of alert 'NoSvc' was not pulled: Prometheus rejected the query"
        ),
        "{notes:?}"
    );
}

/// Polls the incident's pulled evidence for up to 10 s until there are `n`.
async fn wait_for_pulled(app: &TestApp, id: &str, n: usize) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let v = evidence_of(app, id).await;
        if pulled(&v).len() >= n {
            return v;
        }
        assert!(Instant::now() < deadline, "{n} pulled within 10 s: {v}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_transient_failure_is_tried_again_and_a_lasting_one_leaves_one_note_after_three_tries() {
    let (stub, seen) = start_stub_seeing().await;
    let app = spawn_app_with(stub_settings(&stub)).await;
    let (_, secret) = integration(&app, "am", "alertmanager", json!({})).await;

    // 503, then 200: the retry stores the series and the incident has no note.
    let body = delivery(
        "g-flaky",
        "2026-12-04T10:00:00Z",
        &[("fp-flaky", "Flaky", "flaky")],
    );
    let (id, answered) = deliver(&app, &secret, &body).await;
    assert!(answered < Duration::from_secs(1), "{answered:?}");
    let v = wait_for_pulled(&app, &id, 1).await;
    let doc = content_of(&app, pulled(&v)[0]["id"].as_i64().unwrap()).await;
    assert_eq!(doc["query"], "flaky");
    assert_eq!(seen.requests("flaky"), 2, "one failure, one retry");
    assert!(notes_of(&app, &id).await.is_empty(), "nothing to note");

    // Always 503: three requests (two retries), then one note; the incident and its alert stand.
    let body = delivery(
        "g-down",
        "2026-12-04T10:00:00Z",
        &[("fp-down", "Down", "down")],
    );
    let (id, answered) = deliver(&app, &secret, &body).await;
    assert!(answered < Duration::from_secs(1), "{answered:?}");
    let notes = wait_for_notes(&app, &id, 1).await;
    assert!(
        notes[0].starts_with("The series of alert 'Down' was not pulled (after 3 attempts)")
            && notes[0].contains("HTTP 503"),
        "{notes:?}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(seen.requests("down"), 3, "the attempts are bounded");
    assert_eq!(notes_of(&app, &id).await.len(), 1, "one note");
    let v = evidence_of(&app, &id).await;
    assert!(pulled(&v).is_empty());
    assert!(
        v["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "alert")
    );

    // A rejected query (4xx) is not tried again.
    let body = delivery("g-bad", "2026-12-04T10:00:00Z", &[("fp-bad", "Bad", "bad")]);
    let (id, _) = deliver(&app, &secret, &body).await;
    let notes = wait_for_notes(&app, &id, 1).await;
    assert!(
        notes[0].starts_with("The series of alert 'Bad' was not pulled: Prometheus rejected"),
        "{notes:?}"
    );
    assert_eq!(seen.requests("bad"), 1);
}

/// A delivery's group is written in the source's write line: while a pulled document holds
/// the turn the delivery waits, and it writes as soon as the turn is free (so a webhook meets at
/// most one pull's write and never SQLite's busy wait behind several).
#[tokio::test]
async fn a_deliverys_writes_wait_their_turn_behind_a_pulled_document_being_written() {
    use incidentmind::prometheus::Prometheus;
    use incidentmind::services::ingest::{
        Source, ingest, integration as stored_integration, parse_delivery,
    };
    let stub = start_stub().await;
    let app = spawn_app_with(stub_settings(&stub)).await;
    let (integration_id, _) = integration(&app, "am", "alertmanager", json!({})).await;
    let integ = stored_integration(&app.pool, integration_id).await.unwrap();
    let prom = Arc::new(Prometheus::new(PrometheusConfig::new(stub.clone())).unwrap());
    let body = delivery(
        "g-turn",
        "2026-12-04T10:00:00Z",
        &[("fp-turn", "Turn", "up")],
    );
    let parsed = parse_delivery(Source::Alertmanager, body.to_string().as_bytes()).unwrap();

    let turn = prom.write_line().acquire().await.expect("the write turn");
    let (pool, p) = (app.memory.pool().clone(), Arc::clone(&prom));
    let written = tokio::spawn(async move { ingest(&pool, &integ, &parsed, Some(&p)).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !written.is_finished(),
        "the delivery wrote while a pull held the turn"
    );
    let incidents: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM incidents")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(incidents, 0, "nothing is written before the turn");

    drop(turn);
    let outcome = tokio::time::timeout(Duration::from_secs(10), written)
        .await
        .expect("the delivery wrote once the turn was free")
        .unwrap()
        .unwrap();
    assert_eq!(outcome.opened.len(), 1);
    assert_eq!(outcome.firing, 1);
}

#[tokio::test]
async fn a_burst_of_alerts_pulls_within_the_concurrency_limit_and_asks_once_per_query() {
    let (stub, seen) = start_stub_seeing().await;
    let mut settings = stub_settings(&stub);
    if let Some(p) = settings.prometheus.as_mut() {
        p.pull_concurrency = 2;
    }
    let app = spawn_app_with(settings).await;
    let (_, secret) = integration(&app, "am", "alertmanager", json!({})).await;
    // Eight groups at once: six alerts on slow queries of their own, and two groups of three
    // firing alerts of one rule each (the same expression over windows from the same start to
    // the moment of their pull).
    let mut deliveries = Vec::new();
    for i in 0..6 {
        let (fp, name, expr) = (format!("fp-h{i}"), format!("Held{i}"), format!("held{i}"));
        deliveries.push(delivery(
            &format!("g-held-{i}"),
            "2026-12-04T10:00:00Z",
            &[(fp.as_str(), name.as_str(), expr.as_str())],
        ));
    }
    for g in ["a", "b"] {
        let fps: Vec<String> = (0..3).map(|i| format!("fp-{g}{i}")).collect();
        let alerts: Vec<(&str, &str, &str)> = fps
            .iter()
            .map(|f| (f.as_str(), "SameRule", "shared-rule"))
            .collect();
        deliveries.push(delivery(
            &format!("g-shared-{g}"),
            "2026-12-04T10:00:00Z",
            &alerts,
        ));
    }
    let answers =
        futures::future::join_all(deliveries.iter().map(|b| deliver(&app, &secret, b))).await;
    for (_, answered) in &answers {
        assert!(*answered < Duration::from_secs(2), "{answered:?}");
    }
    for ((id, _), want) in answers.iter().zip([1, 1, 1, 1, 1, 1, 3, 3]) {
        wait_for_pulled(&app, id, want).await;
        assert!(notes_of(&app, id).await.is_empty());
    }
    assert!(
        seen.most_at_once() <= 2,
        "at most two queries at once, saw {}",
        seen.most_at_once()
    );
    assert_eq!(
        seen.requests("shared-rule"),
        1,
        "six alerts of one rule, one request"
    );
}
