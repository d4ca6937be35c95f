//! An incident nobody pasted anything into, in a real browser: an Alertmanager webhook opens it
//! and the app pulls the alert's series and its service's request rate from a real Prometheus
//! (`tests/support/prometheus.rs`: a pool-wait gauge that climbs while the request rate stays
//! flat). Memory holds one past incident on another service, learned through the API
//! (resolve → post-mortem with a trigger → confirm → learn), whose own metrics read the same way.
//! The page must show the pulled series with the query and its link to Prometheus's graph, and
//! its similar-incidents panel must recall the past incident through that metric evidence,
//! naming the observation it matched. Screenshots of the page at desktop (1366 px) and phone
//! (390 px) width are saved under `target/artifacts/` (`{desktop,phone}-prometheus-incident*.png`)
//! after the same checks as every page of the walkthrough (no sideways scroll, whole words in
//! tables, axe-core).

use std::time::{Duration, Instant};

use fantoccini::{Client, Locator};
use incidentmind::prometheus::PrometheusConfig;
use incidentmind::{App, Settings, services::users::add_user};
use serde_json::{Value, json};

use crate::ui::{DESKTOP, PASSWORD, PHONE, scroll_to, sign_in, wait_for_text};

/// The alert's expression: the gauge the exporter climbs.
const GAUGE: &str = r#"imtest_pool_wait_seconds{service="checkout"}"#;

/// An app built as `serve` builds it, reading the Prometheus at `prometheus`, with a responder,
/// a reviewer and an admin (their API tokens) and an Alertmanager integration (its secret).
struct Served {
    base: String,
    http: reqwest::Client,
    rita: String,
    victor: String,
    secret: String,
    _dir: tempfile::TempDir,
}

impl Served {
    async fn start(prometheus: &str) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = PrometheusConfig::new(prometheus);
        config.max_points = 1000;
        config.request_rate =
            Some(r#"sum(irate(imtest_requests_total{service="$service"}[5s]))"#.into());
        let mut app_config = incidentmind::app::Config::new(
            dir.path().join("alert-page.db").to_str().expect("utf-8"),
        );
        app_config.settings = Settings {
            prometheus: Some(config),
            ..Settings::default()
        };
        let app = App::build(app_config).await.expect("app");
        let pool = app.pool().clone();
        let rita = add_user(&pool, "rita", "responder", Some(PASSWORD))
            .await
            .expect("rita");
        let victor = add_user(&pool, "victor", "reviewer", Some(PASSWORD))
            .await
            .expect("victor");
        let ada = add_user(&pool, "ada", "admin", Some(PASSWORD))
            .await
            .expect("ada");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let router = app.router.clone();
        tokio::spawn(async move {
            let _ = axum::serve(
                listener,
                router.into_make_service_with_connect_info::<std::net::SocketAddr>(),
            )
            .await;
        });
        let mut served = Self {
            base,
            http: reqwest::Client::new(),
            rita,
            victor,
            secret: String::new(),
            _dir: dir,
        };
        let integration = served
            .send(
                &ada,
                "/api/v1/integrations",
                json!({"name": "prod-alertmanager", "source": "alertmanager"}),
                201,
            )
            .await;
        served.secret = integration["secret"].as_str().expect("secret").to_string();
        served
    }

    /// `POST path` with `body` as `token`, asserting `status`; the answer's JSON.
    async fn send(&self, token: &str, path: &str, body: Value, status: u16) -> Value {
        self.answer(
            self.http.post(format!("{}{path}", self.base)),
            token,
            body,
            status,
        )
        .await
    }

    async fn answer(
        &self,
        req: reqwest::RequestBuilder,
        token: &str,
        body: Value,
        status: u16,
    ) -> Value {
        let res = req
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .expect("request");
        let got = res.status().as_u16();
        let text = res.text().await.unwrap_or_default();
        assert_eq!(got, status, "{body}: {text}");
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }

    /// `GET path` as `token`, as JSON.
    async fn get(&self, token: &str, path: &str) -> Value {
        self.http
            .get(format!("{}{path}", self.base))
            .bearer_auth(token)
            .send()
            .await
            .expect("request")
            .json()
            .await
            .expect("json")
    }
}

/// Pool-wait samples climbing over 20 minutes while the request rate holds near 140/s, as a
/// Prometheus range answer: the past incident's own metrics.
fn past_metrics() -> String {
    let t0 = 1_795_000_000i64;
    let points = |f: &dyn Fn(i64) -> f64| -> Vec<Value> {
        (0..40)
            .map(|i| json!([t0 + i * 30, format!("{:.3}", f(i))]))
            .collect()
    };
    json!({"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"__name__": "ledger_pool_wait_seconds", "service": "ledger"},
         "values": points(&|i| 0.05 + 0.04 * i as f64)},
        {"metric": {"__name__": "request_rate", "service": "ledger"},
         "values": points(&|i| 140.0 + if i % 2 == 0 { 1.5 } else { -1.5 })}
    ]}})
    .to_string()
}

/// A past incident on the ledger service taken through the workflow over the API: metrics
/// pasted, resolved, drafted, a trigger written, confirmed by a reviewer, learned. Its id.
async fn learned_past_leak(app: &Served) -> String {
    let rita = &app.rita;
    let opened = app
        .send(
            rita,
            "/api/v1/incidents",
            json!({"title": "Ledger writes stall behind the pool", "service": "ledger",
                   "severity": "SEV2",
                   "description": "Posting journal entries hangs; traffic is normal."}),
            201,
        )
        .await;
    let id = opened["id"].as_str().expect("id").to_string();
    let path = |tail: &str| format!("/api/v1/incidents/{id}{tail}");
    app.send(
        rita,
        &path("/evidence"),
        json!({"kind": "metrics", "source": "ledger dashboard export", "content": past_metrics()}),
        201,
    )
    .await;
    app.send(
        rita,
        &path("/resolve"),
        json!({"summary": "Restarted the ledger writers; pool wait back to normal.",
               "root_cause": "The batch importer kept a pooled connection open per failed row."}),
        200,
    )
    .await;
    app.send(rita, &path("/postmortem"), json!({}), 201).await;
    let mut pm = app.get(rita, &path("/postmortem")).await["postmortem"].clone();
    pm["trigger"] = json!("The nightly batch import hitting malformed rows");
    app.answer(
        app.http.put(format!("{}{}", app.base, path("/postmortem"))),
        rita,
        pm,
        200,
    )
    .await;
    app.send(&app.victor, &path("/postmortem/confirm"), json!({}), 200)
        .await;
    app.send(&app.victor, &path("/learn"), json!({}), 200).await;
    id
}

/// An Alertmanager delivery of one alert on the climbing gauge, started now; the incident it
/// opened, once its pulled series are evidence.
async fn alert_incident(app: &Served) -> String {
    let mut link = url::Url::parse("http://prometheus.internal:9090/graph").expect("url");
    link.query_pairs_mut()
        .append_pair("g0.expr", GAUGE)
        .append_pair("g0.tab", "1");
    let starts = jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let body = json!({
        "version": "4", "groupKey": "{}:{alertname=\"CheckoutPoolWaitClimbing\"}",
        "status": "firing", "receiver": "incidentmind",
        "groupLabels": {"alertname": "CheckoutPoolWaitClimbing"},
        "commonLabels": {"alertname": "CheckoutPoolWaitClimbing", "service": "checkout"},
        "commonAnnotations": {}, "externalURL": "http://alertmanager.internal:9093",
        "alerts": [{
            "status": "firing",
            "labels": {"alertname": "CheckoutPoolWaitClimbing", "service": "checkout",
                       "severity": "page"},
            "annotations": {"summary": "Checkout waits longer and longer for a database connection"},
            "startsAt": starts, "endsAt": "0001-01-01T00:00:00Z",
            "generatorURL": link.to_string(), "fingerprint": "fp-checkout-pool"
        }]
    });
    let sent = Instant::now();
    let answer = app
        .send(&app.secret, "/api/v1/webhooks/alertmanager", body, 202)
        .await;
    assert!(
        sent.elapsed() < Duration::from_secs(2),
        "the webhook answers without waiting for Prometheus"
    );
    let id = answer["incidents"][0]
        .as_str()
        .expect("incident")
        .to_string();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let v = app
            .get(&app.rita, &format!("/api/v1/incidents/{id}/evidence"))
            .await;
        let evidence = v["evidence"].as_array().cloned().unwrap_or_default();
        if evidence.iter().any(|e| e["author"] == "prometheus") {
            for e in &evidence {
                assert!(
                    e["author"] == "prometheus" || e["kind"] == "alert",
                    "only the alert and what Prometheus gave: {e}"
                );
            }
            return id;
        }
        assert!(Instant::now() < deadline, "the pulled series within 30 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The text of the first element matching `css` whose text contains `needle`.
async fn element_with(c: &Client, css: &str, needle: &str) -> fantoccini::elements::Element {
    for e in c.find_all(Locator::Css(css)).await.expect(css) {
        if e.text().await.is_ok_and(|t| t.contains(needle)) {
            return e;
        }
    }
    panic!("no {css} containing {needle:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_incident_from_an_alert_shows_its_pulled_series_and_recalls_a_past_leak_through_them() {
    let Some(tools) = crate::ui::tools("the alert-page browser test") else {
        return;
    };
    let Some(real) = crate::prometheus_real::real_prometheus().await else {
        return;
    };
    let app = Served::start(&real.peer.base).await;
    let past = learned_past_leak(&app).await;
    let id = alert_incident(&app).await;
    for vp in [DESKTOP, PHONE] {
        let checks = tools.checks(vp);
        let session = tools.session(vp).await;
        let c = &session.client;
        sign_in(c, &app.base, "rita").await;
        c.goto(&format!("{}/incidents/{id}", app.base))
            .await
            .expect("incident page");
        // The pulled series, read as a leak: the gauge climbs while the request rate is flat.
        wait_for_text(c, "#observations", "Leak-like").await;
        let leak = element_with(c, "#observations li", "Leak-like").await;
        let said = leak.text().await.expect("text");
        assert!(
            said.contains("imtest_pool_wait_seconds") && said.contains("stays flat"),
            "{said}"
        );
        // With the query it came from and the link to Prometheus's graph of it.
        let query = leak
            .find(Locator::Css(".query-link code.promql"))
            .await
            .expect("the query")
            .text()
            .await
            .expect("query text");
        assert_eq!(query, GAUGE);
        let href = leak
            .find(Locator::Css("a.prom-link"))
            .await
            .expect("the link to Prometheus")
            .attr("href")
            .await
            .expect("href")
            .expect("an href");
        let href = url::Url::parse(&href).expect("a URL");
        assert!(
            href.as_str()
                .starts_with(&format!("{}/graph?", real.peer.base)),
            "{href}"
        );
        let expr = href.query_pairs().find(|(k, _)| k == "g0.expr");
        assert_eq!(expr.map(|(_, v)| v.to_string()).as_deref(), Some(GAUGE));
        let reference = leak
            .find(Locator::Css(".ref"))
            .await
            .expect("reference")
            .text()
            .await
            .expect("OBS-…");
        // Nothing pasted: the evidence list holds the alert and Prometheus's document only.
        let listed = crate::ui::text_of(c, "#observations p.meta").await;
        assert!(
            listed.contains("alert") && listed.contains("prometheus: "),
            "{listed}"
        );
        // Recall: the past ledger incident, matched through this leak-like observation.
        wait_for_text(c, "#similar", &past).await;
        let recalled = element_with(c, "#similar li", &past).await;
        let why = recalled.text().await.expect("text");
        assert!(
            why.contains(&format!(
                "Matched through this incident's {reference} (connection_leak)"
            )),
            "{why}"
        );
        assert!(why.contains("failure modes: connection_leak"), "{why}");
        checks.page(c, "prometheus-incident").await;
        scroll_to(c, "#observations").await;
        checks
            .shot_as(c, &format!("{}-prometheus-incident-evidence", vp.name))
            .await;
        scroll_to(c, "#memory").await;
        checks
            .shot_as(c, &format!("{}-prometheus-incident-recall", vp.name))
            .await;
        c.clone().close().await.expect("close");
    }
    drop(real);
}
