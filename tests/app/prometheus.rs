//! The Prometheus source (`services::prometheus`): a real Prometheus (Debian's `prometheus`
//! package, 2.42) scraping a tiny exporter the test serves on loopback — a counter whose rate the
//! test sets and a gauge that climbs — and an Alertmanager webhook whose alerts' `generatorURL`s
//! carry expressions over those series: their series must be metrics evidence within 5 s of
//! the webhook, read right (flat rate, climbing gauge), with the query, the window and the link
//! kept, and the request and error rates of the alert's service pulled beside them when their
//! templates are configured. `prometheus_stub.rs` stands in for what a real server cannot be
//! made to show on demand.
//!
//! The server and its exporter are started by `tests/support/prometheus.rs` (shared with the
//! browser test), which also says when the real-server tests skip. Spawning a process is fine
//! here: `tests/no_exec.rs` scans `src/` only.

use std::time::{Duration, Instant};

use incidentmind::prometheus::PrometheusConfig;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestApp, error_of, spawn_app_with};
use crate::prometheus_real::real_prometheus;
use crate::webhooks::integration;

/// A generator URL as Prometheus writes it, with `expr` URL-encoded in `g0.expr`.
pub(crate) fn generator_url(expr: &str) -> String {
    let mut u = url::Url::parse("http://prometheus.internal:9090/graph").unwrap();
    u.query_pairs_mut()
        .append_pair("g0.expr", expr)
        .append_pair("g0.tab", "1");
    u.to_string()
}

/// An Alertmanager v4 delivery of one group with one firing alert per `(fingerprint, name,
/// expr)`, started at `starts_at`.
pub(crate) fn delivery(group: &str, starts_at: &str, alerts: &[(&str, &str, &str)]) -> Value {
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
pub(crate) async fn deliver(app: &TestApp, secret: &str, body: &Value) -> (String, Duration) {
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
pub(crate) async fn evidence_of(app: &TestApp, id: &str) -> Value {
    app.get(&app.responder, &format!("/api/v1/incidents/{id}/evidence"))
        .await
        .json()
        .await
        .unwrap()
}

/// The evidence Prometheus pulled for an alert (author `prometheus`).
pub(crate) fn pulled(v: &Value) -> Vec<Value> {
    v["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["author"] == "prometheus")
        .cloned()
        .collect()
}

/// The text of the observations of evidence `eid`.
pub(crate) fn observations_of(v: &Value, eid: i64) -> Vec<String> {
    v["observations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["data"]["evidence_id"] == eid)
        .map(|o| o["text"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The stored content of evidence `eid`, as JSON.
pub(crate) async fn content_of(app: &TestApp, eid: i64) -> Value {
    let text: String = sqlx::query_scalar("SELECT content FROM evidence WHERE id = $1")
        .bind(eid)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The incident's timeline notes of kind `prometheus`.
pub(crate) async fn notes_of(app: &TestApp, id: &str) -> Vec<String> {
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
    let Some(real) = real_prometheus().await else {
        return;
    };
    let prom = &real.peer;
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
        assert!(
            doc["related"].is_null(),
            "no templates, nothing beside: {doc}"
        );
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
    drop(real);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_services_request_and_error_rates_come_with_the_alerts_series_and_decide() {
    let Some(real) = real_prometheus().await else {
        return;
    };
    let mut config = PrometheusConfig::new(real.peer.base.clone());
    config.max_points = 1000;
    config.request_rate =
        Some(r#"sum(irate(imtest_requests_total{service="$service"}[5s]))"#.into());
    config.error_rate = Some(r#"sum(irate(imtest_errors_total{service="${service}"}[5s]))"#.into());
    let app = spawn_app_with(incidentmind::Settings {
        prometheus: Some(config),
        ..Default::default()
    })
    .await;
    let (_, secret) = integration(&app, "prod-alertmanager", "alertmanager", json!({})).await;
    let starts = jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let gauge = r#"imtest_pool_wait_seconds{service="checkout"}"#;
    let body = delivery(
        "{}:{alertname=\"CheckoutPoolWaitHigh\"}",
        &starts,
        &[("fp-pool", "CheckoutPoolWaitHigh", gauge)],
    );
    let (id, _) = deliver(&app, &secret, &body).await;
    let v = real
        .peer
        .eventually("the alert's series as evidence", || async {
            let v = evidence_of(&app, &id).await;
            (pulled(&v).len() == 1).then_some(v)
        })
        .await;
    let e = &pulled(&v)[0];
    let eid = e["id"].as_i64().unwrap();
    let doc = content_of(&app, eid).await;
    assert_eq!(doc["query"], gauge, "the alert's own query leads");
    // Both templates, filled with the alert's service, over the alert's window, each linked.
    let related = doc["related"].as_array().expect("related queries");
    let expected = [
        (
            "request_rate",
            r#"sum(irate(imtest_requests_total{service="checkout"}[5s]))"#,
        ),
        (
            "error_rate",
            r#"sum(irate(imtest_errors_total{service="checkout"}[5s]))"#,
        ),
    ];
    assert_eq!(related.len(), 2, "{doc}");
    for (r, (measures, query)) in related.iter().zip(expected) {
        assert_eq!(
            (r["measures"].as_str(), r["query"].as_str()),
            (Some(measures), Some(query))
        );
        let link = url::Url::parse(r["link"].as_str().unwrap()).unwrap();
        let expr = link.query_pairs().find(|(k, _)| k == "g0.expr").unwrap().1;
        assert_eq!(expr, query);
        let own = url::Url::parse(doc["link"].as_str().unwrap()).unwrap();
        let range = |u: &url::Url| {
            u.query_pairs()
                .find(|(k, _)| k == "g0.range_input")
                .unwrap()
                .1
                .to_string()
        };
        assert_eq!(range(&link), range(&own), "the same window");
    }
    // Read as decisive: traffic flat while the gauge climbs, and the pair named leak-like.
    let obs = observations_of(&v, eid);
    let has = |prefix: &str, word: &str| {
        obs.iter()
            .any(|o| o.starts_with(prefix) && o.contains(word))
    };
    // The flat level as the observation says it ("~19.9", "~0.994"): the exporter serves about
    // 20 requests and 1 error a second, and `irate` over a scrape window lands within a few
    // per cent of that (a printed "~20" or "~19.9" depends on the scrape's timing).
    let level = |prefix: &str| -> f64 {
        obs.iter()
            .find(|o| o.starts_with(prefix) && o.contains("value flat"))
            .and_then(|o| o.split_once("~"))
            .and_then(|(_, rest)| rest.split([' ', ',', ')']).next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no flat level for {prefix}: {obs:#?}"))
    };
    let requests = level(r#"request_rate{service="checkout"}"#);
    assert!((19.0..=21.0).contains(&requests), "{requests}: {obs:#?}");
    let errors = level(r#"error_rate{service="checkout"}"#);
    assert!((0.95..=1.05).contains(&errors), "{errors}: {obs:#?}");
    assert!(has("imtest_pool_wait_seconds", "climbing"), "{obs:#?}");
    assert!(
        has(
            "Leak-like: imtest_pool_wait_seconds",
            r#"while request rate request_rate{service="checkout"} stays flat"#
        ),
        "{obs:#?}"
    );
    let tagged = v["observations"]
        .as_array()
        .unwrap()
        .iter()
        .any(|o| o["data"]["evidence_id"] == eid && o.to_string().contains("connection_leak"));
    assert!(tagged, "the leak-like pair names its failure mode");

    // The same alert again: served from the stored evidence, nothing pulled twice.
    deliver(&app, &secret, &body).await;
    assert_eq!(pulled(&evidence_of(&app, &id).await).len(), 1);
    assert!(notes_of(&app, &id).await.is_empty());
    drop(real);
}
