//! The Prometheus source (`services::prometheus`): a real Prometheus (Debian's `prometheus`
//! package, 2.42) scraping a tiny exporter the test serves on loopback — a counter whose rate the
//! test sets and a gauge that climbs — and an Alertmanager webhook whose alerts' `generatorURL`s
//! carry expressions over those series: their series must be metrics evidence within 5 s of
//! the webhook, read right (flat rate, climbing gauge), with the query, the window and the link
//! kept. A small stub stands in only for what a real server cannot be made to show on demand
//! (down, slow, a `bad_data` answer, an empty result, a result over the caps), and the
//! responder's query endpoint is checked for its statuses.
//!
//! The binary is `$INCIDENTMIND_PROMETHEUS_BIN`, else `prometheus` on `PATH`. Without it the
//! real-server test prints SKIPPED and passes, except under `CI=true` or
//! `INCIDENTMIND_REQUIRE_PROMETHEUS=1` (`.ci/run` installs the package and sets it), where it
//! fails. Spawning a process is fine here: `tests/no_exec.rs` scans `src/` only.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use incidentmind::prometheus::PrometheusConfig;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestApp, error_of, spawn_app, spawn_app_with};
use crate::peer::{Peer, find_binary, free_port};
use crate::webhooks::integration;

/// The Prometheus binary, or `None` when none is installed.
fn prometheus_binary() -> Option<PathBuf> {
    find_binary("INCIDENTMIND_PROMETHEUS_BIN", &["prometheus"])
}

/// The exporter's state: the counter's value, its rate (per second, set by the test) and when
/// it was last advanced; the gauge climbs with the time since the start.
struct Exporter {
    started: Instant,
    counter: f64,
    rate: f64,
    last: Instant,
}

/// Serves `GET /metrics` on loopback (Prometheus text format): `imtest_requests_total`, a
/// counter advancing at the rate in `state`, and `imtest_pool_wait_seconds`, a gauge climbing
/// 0.05 per second. Returns its `host:port`.
async fn start_exporter(state: Arc<Mutex<Exporter>>) -> String {
    use axum::extract::State;
    async fn metrics(State(s): State<Arc<Mutex<Exporter>>>) -> String {
        let mut e = s.lock().unwrap();
        let now = Instant::now();
        let dt = now.duration_since(e.last).as_secs_f64();
        e.counter += e.rate * dt;
        e.last = now;
        let climb = 0.2 + 0.05 * now.duration_since(e.started).as_secs_f64();
        format!(
            "# TYPE imtest_requests_total counter\n\
             imtest_requests_total{{service=\"checkout\"}} {}\n\
             # TYPE imtest_pool_wait_seconds gauge\n\
             imtest_pool_wait_seconds{{service=\"checkout\"}} {climb}\n",
            e.counter
        )
    }
    let app = axum::Router::new()
        .route("/metrics", axum::routing::get(metrics))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        axum::serve(listener, app).await.expect("exporter");
    });
    addr.to_string()
}

/// Starts `binary` on a loopback port scraping `target` every second, data in `dir`, and waits
/// (up to 30 s) until `GET /-/ready` answers 200.
async fn start(binary: &Path, dir: &Path, target: &str, client: &reqwest::Client) -> Peer {
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: imtest\n    static_configs:\n      - targets: ['{target}']\n"
        ),
    )
    .expect("write prometheus.yml");
    let data = dir.join("data");
    let args = |port: u16| {
        vec![
            format!("--config.file={}", config.display()),
            format!("--storage.tsdb.path={}", data.display()),
            format!("--web.listen-address=127.0.0.1:{port}"),
            "--log.level=warn".to_string(),
        ]
    };
    Peer::start("prometheus", binary, dir, args, client).await
}

/// An instant query's single value, when it has one.
async fn instant_value(client: &reqwest::Client, base: &str, query: &str) -> Option<f64> {
    let mut url = url::Url::parse(&format!("{base}/api/v1/query")).ok()?;
    url.query_pairs_mut().append_pair("query", query);
    let v: Value = client.get(url).send().await.ok()?.json().await.ok()?;
    v["data"]["result"][0]["value"][1].as_str()?.parse().ok()
}

/// A generator URL as Prometheus writes it, with `expr` URL-encoded in `g0.expr`.
fn generator_url(expr: &str) -> String {
    let mut u = url::Url::parse("http://prometheus.internal:9090/graph").unwrap();
    u.query_pairs_mut()
        .append_pair("g0.expr", expr)
        .append_pair("g0.tab", "1");
    u.to_string()
}

/// An Alertmanager v4 delivery of one group with one firing alert per `(fingerprint, name,
/// expr)`, started at `starts_at`.
fn delivery(group: &str, starts_at: &str, alerts: &[(&str, &str, &str)]) -> Value {
    let alerts: Vec<Value> = alerts
        .iter()
        .map(|(fp, name, expr)| {
            json!({
                "status": "firing",
                "labels": {"alertname": name, "service": "checkout", "severity": "page"},
                "annotations": {"summary": format!("{name} on checkout")},
                "startsAt": starts_at,
                "endsAt": "0001-01-01T00:00:00Z",
                "generatorURL": generator_url(expr),
                "fingerprint": fp
            })
        })
        .collect();
    json!({
        "version": "4", "groupKey": group, "status": "firing", "receiver": "incidentmind",
        "groupLabels": {"service": "checkout"}, "commonLabels": {"service": "checkout"},
        "commonAnnotations": {}, "externalURL": "http://alertmanager.internal:9093",
        "alerts": alerts
    })
}

/// Posts `body` to the Alertmanager webhook; returns the incident id and how long the answer
/// took.
async fn deliver(app: &TestApp, secret: &str, body: &Value) -> (String, Duration) {
    let sent = Instant::now();
    let res = app
        .client
        .post(app.url("/api/v1/webhooks/alertmanager"))
        .bearer_auth(secret)
        .json(body)
        .send()
        .await
        .expect("webhook");
    let took = sent.elapsed();
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    let v: Value = res.json().await.unwrap();
    (v["incidents"][0].as_str().unwrap().to_string(), took)
}

/// The incident's evidence and observations (`GET …/evidence`).
async fn evidence_of(app: &TestApp, id: &str) -> Value {
    app.get(&app.responder, &format!("/api/v1/incidents/{id}/evidence"))
        .await
        .json()
        .await
        .unwrap()
}

/// The evidence Prometheus pulled for an alert (author `prometheus`).
fn pulled(v: &Value) -> Vec<Value> {
    v["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["author"] == "prometheus")
        .cloned()
        .collect()
}

/// The text of the observations of evidence `eid`.
fn observations_of(v: &Value, eid: i64) -> Vec<String> {
    v["observations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["data"]["evidence_id"] == eid)
        .map(|o| o["text"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The stored content of evidence `eid`, as JSON.
async fn content_of(app: &TestApp, eid: i64) -> Value {
    let text: String = sqlx::query_scalar("SELECT content FROM evidence WHERE id = $1")
        .bind(eid)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The incident's timeline notes of kind `prometheus`.
async fn notes_of(app: &TestApp, id: &str) -> Vec<String> {
    let v: Value = app
        .get(&app.responder, &format!("/api/v1/incidents/{id}"))
        .await
        .json()
        .await
        .unwrap();
    v["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "prometheus")
        .map(|e| e["detail"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(
    clippy::too_many_lines,
    reason = "one end-to-end scenario: each step acts on what the steps before it left, so it reads top to bottom"
)]
async fn a_real_prometheus_gives_the_alerts_series_as_evidence_read_flat_and_climbing() {
    let Some(binary) = prometheus_binary() else {
        crate::skip::skip(
            "the real-Prometheus test",
            "no Prometheus binary (install Debian's prometheus, as .ci/run does, or set \
             INCIDENTMIND_PROMETHEUS_BIN)",
            crate::skip::Required::InCi(Some("INCIDENTMIND_REQUIRE_PROMETHEUS")),
        );
        return;
    };
    let now = Instant::now();
    let exporter = Arc::new(Mutex::new(Exporter {
        started: now,
        counter: 1000.0,
        rate: 20.0,
        last: now,
    }));
    let target = start_exporter(exporter.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let client = reqwest::Client::new();
    let prom = start(&binary, dir.path(), &target, &client).await;
    // Readiness: enough scraped samples for a rate and a trend (no fixed sleep).
    prom.eventually("ten samples of the gauge", || async {
        let n = instant_value(
            &client,
            &prom.base,
            "count_over_time(imtest_pool_wait_seconds[1m])",
        )
        .await?;
        (n >= 10.0).then_some(())
    })
    .await;

    let mut config = PrometheusConfig::new(prom.base.clone());
    config.max_points = 1000;
    let app = spawn_app_with(incidentmind::Settings {
        prometheus: Some(config),
        ..Default::default()
    })
    .await;
    let (_, secret) = integration(&app, "prod-alertmanager", "alertmanager", json!({})).await;
    let starts_at = jiff::Timestamp::now();
    let starts = starts_at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let gauge = r#"imtest_pool_wait_seconds{service="checkout"}"#;
    let rate = "sum(irate(imtest_requests_total[5s]))";
    let body = delivery(
        "{}:{service=\"checkout\"}",
        &starts,
        &[
            ("fp-pool", "CheckoutPoolWaitHigh", gauge),
            ("fp-rate", "CheckoutTraffic", rate),
        ],
    );
    let sent = Instant::now();
    let (id, answered) = deliver(&app, &secret, &body).await;
    assert!(
        answered < Duration::from_secs(2),
        "the webhook answers without waiting for Prometheus ({answered:?})"
    );
    let v = prom
        .eventually("both alerts' series as evidence", || async {
            let v = evidence_of(&app, &id).await;
            (pulled(&v).len() == 2).then_some(v)
        })
        .await;
    let took = sent.elapsed();
    println!(
        "webhook → both series stored as evidence: {:.2} s (webhook answered in {} ms)",
        took.as_secs_f64(),
        answered.as_millis()
    );
    assert!(
        took < Duration::from_secs(5),
        "the alert's series within 5 s of the webhook, took {took:?}"
    );

    for e in pulled(&v) {
        assert_eq!(e["kind"], "metrics");
        assert_eq!(e["format"], "prometheus-json");
        let eid = e["id"].as_i64().unwrap();
        let doc = content_of(&app, eid).await;
        let query = doc["query"].as_str().unwrap();
        let obs = observations_of(&v, eid);
        let series = obs.iter().find(|o| !o.starts_with("Leak-like")).unwrap();
        if query == gauge {
            assert!(series.contains("climbing"), "the gauge climbs: {obs:?}");
        } else {
            assert_eq!(query, rate);
            assert!(
                series.contains(" flat "),
                "the request rate is flat: {obs:?}"
            );
        }
        // The link back: Prometheus's graph page of the same query.
        let link = url::Url::parse(doc["link"].as_str().unwrap()).unwrap();
        assert!(
            link.as_str().starts_with(&format!("{}/graph?", prom.base)),
            "{link}"
        );
        let expr = link.query_pairs().find(|(k, _)| k == "g0.expr").unwrap().1;
        assert_eq!(expr, query);
        // The window: from 15 minutes before startsAt to about now.
        let start: jiff::Timestamp = doc["window"]["start"].as_str().unwrap().parse().unwrap();
        let end: jiff::Timestamp = doc["window"]["end"].as_str().unwrap().parse().unwrap();
        let before = starts_at.as_second() - start.as_second();
        assert!(
            (899..=901).contains(&before),
            "window starts 15 min before: {before} s"
        );
        assert!(
            (end.as_second() - starts_at.as_second()).abs() <= 10,
            "{end}"
        );
        assert_eq!(doc["window"]["step_seconds"], 1);
        assert!(doc["notice"].is_null(), "{doc}");
        assert!(e["source"].as_str().unwrap().starts_with("prometheus: "));
    }

    // The same alerts again (Alertmanager repeats a group): no second query, no second copy.
    deliver(&app, &secret, &body).await;
    let again = evidence_of(&app, &id).await;
    assert_eq!(pulled(&again).len(), 2);
    assert!(notes_of(&app, &id).await.is_empty());

    // A responder's own query on the same Prometheus, then a bad one and a repeat.
    let path = format!("/api/v1/incidents/{id}/evidence/prometheus");
    let res = app
        .post_json(
            &app.responder,
            &path,
            json!({"query": "imtest_pool_wait_seconds"}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let stored: Value = res.json().await.unwrap();
    assert_eq!(stored["query"], "imtest_pool_wait_seconds");
    assert!(stored["link"].as_str().unwrap().contains("/graph?g0.expr="));
    assert_eq!(stored["evidence"]["author"], "rita");
    let body = json!({"query": "sum(rate(imtest_requests_total[5s])", "step": 2,
                      "start": stored["start"], "end": stored["end"]});
    let (status, code, message) = error_of(app.post_json(&app.responder, &path, body).await).await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::BAD_REQUEST, "bad_request")
    );
    assert!(
        message.starts_with("Prometheus rejected the query:") && message.contains("parse error"),
        "{message}"
    );
    let same = json!({"query": "imtest_pool_wait_seconds", "start": stored["start"],
                      "end": stored["end"], "step": stored["step"]});
    let res = app.post_json(&app.responder, &path, same).await;
    assert_eq!(res.status(), StatusCode::OK);
    let v: Value = res.json().await.unwrap();
    assert!(
        v["notice"].as_str().unwrap().contains("already evidence"),
        "{v}"
    );
    drop(prom);
}

/// A stand-in for Prometheus's query API that answers by the query: `slow` after 3 s, `bad`
/// with a `bad_data` error, `empty` with no series, `many` with 30 series of 1,200 points,
/// anything else with one short series.
pub(crate) async fn start_stub() -> String {
    use axum::extract::Query;
    use axum::http::StatusCode as S;
    use std::collections::HashMap;
    async fn query_range(Query(q): Query<HashMap<String, String>>) -> (S, axum::Json<Value>) {
        let query = q.get("query").cloned().unwrap_or_default();
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
        match query.as_str() {
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
            _ => ok(series(1, 5)),
        }
    }
    let app = axum::Router::new().route("/api/v1/query_range", axum::routing::get(query_range));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        axum::serve(listener, app).await.expect("stub");
    });
    format!("http://{addr}")
}

/// Settings over a Prometheus at `url` with a 1 s timeout and caps of 5 series and 100 points.
pub(crate) fn stub_settings(url: &str) -> incidentmind::Settings {
    let mut config = PrometheusConfig::new(url);
    config.timeout = Duration::from_secs(1);
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
