//! A real Prometheus for the tests (Debian's `prometheus` package, 2.42) scraping, every second,
//! a tiny exporter the test serves on loopback: `imtest_requests_total` and `imtest_errors_total`,
//! counters advancing at 20/s and 1/s (a flat request rate), and `imtest_pool_wait_seconds`, a
//! gauge that climbs. Used by the app suite's Prometheus-source tests and by the browser test
//! of an incident opened by an alert.
//!
//! The binary is `$INCIDENTMIND_PROMETHEUS_BIN`, else `prometheus` on `PATH`. Without it
//! [`real_prometheus`] prints SKIPPED and returns `None`, except under `CI=true` or
//! `INCIDENTMIND_REQUIRE_PROMETHEUS=1` (`.ci/run` installs the package and sets it), where it
//! fails. Needs `mod peer` and `mod skip` (`tests/support/`) at the crate root.
#![allow(dead_code, reason = "each test binary uses the parts it needs")]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::Value;

use crate::peer::{Peer, find_binary};

/// The Prometheus binary, or `None` when none is installed.
fn prometheus_binary() -> Option<PathBuf> {
    find_binary("INCIDENTMIND_PROMETHEUS_BIN", &["prometheus"])
}

/// The exporter's state: the request counter's value, the error counter's (advancing at a
/// twentieth of the requests' rate), the rate (per second) and when they were last advanced;
/// the gauge climbs with the time since the start.
struct Exporter {
    started: Instant,
    counter: f64,
    errors: f64,
    rate: f64,
    last: Instant,
}

/// Serves `GET /metrics` on loopback (Prometheus text format): `imtest_requests_total` and
/// `imtest_errors_total`, counters advancing at the rates in `state`, and
/// `imtest_pool_wait_seconds`, a gauge climbing 0.05 per second. Returns its `host:port`.
async fn start_exporter(state: Arc<Mutex<Exporter>>) -> String {
    use axum::extract::State;
    async fn metrics(State(s): State<Arc<Mutex<Exporter>>>) -> String {
        let mut e = s.lock().unwrap();
        let now = Instant::now();
        let dt = now.duration_since(e.last).as_secs_f64();
        e.counter += e.rate * dt;
        e.errors += e.rate / 20.0 * dt;
        e.last = now;
        let climb = 0.2 + 0.05 * now.duration_since(e.started).as_secs_f64();
        format!(
            "# TYPE imtest_requests_total counter\n\
             imtest_requests_total{{service=\"checkout\"}} {}\n\
             # TYPE imtest_errors_total counter\n\
             imtest_errors_total{{service=\"checkout\"}} {}\n\
             # TYPE imtest_pool_wait_seconds gauge\n\
             imtest_pool_wait_seconds{{service=\"checkout\"}} {climb}\n",
            e.counter, e.errors
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
async fn start_server(binary: &Path, dir: &Path, target: &str, client: &reqwest::Client) -> Peer {
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

/// A real Prometheus scraping the test's exporter (requests at 20/s, errors at 1/s, the gauge
/// climbing), ready with ten samples of the gauge; `None` after the skip notice when no binary
/// is installed. Dropping it stops Prometheus before its data folder goes.
pub struct RealPrometheus {
    /// The running server.
    pub peer: Peer,
    _dir: tempfile::TempDir,
}

/// Starts the exporter and a Prometheus scraping it, ready with ten samples of the gauge;
/// `None` (after the skip notice) when no binary is installed.
pub async fn real_prometheus() -> Option<RealPrometheus> {
    let Some(binary) = prometheus_binary() else {
        crate::skip::skip(
            "the real-Prometheus test",
            "no Prometheus binary (install Debian's prometheus, as .ci/run does, or set \
             INCIDENTMIND_PROMETHEUS_BIN)",
            crate::skip::Required::InCi(Some("INCIDENTMIND_REQUIRE_PROMETHEUS")),
        );
        return None;
    };
    let now = Instant::now();
    let exporter = Arc::new(Mutex::new(Exporter {
        started: now,
        counter: 1000.0,
        errors: 10.0,
        rate: 20.0,
        last: now,
    }));
    let target = start_exporter(exporter).await;
    let dir = tempfile::tempdir().unwrap();
    let client = reqwest::Client::new();
    let peer = start_server(&binary, dir.path(), &target, &client).await;
    // Readiness: enough scraped samples for a rate and a trend (no fixed sleep).
    peer.eventually("ten samples of the gauge", || async {
        let n = instant_value(
            &client,
            &peer.base,
            "count_over_time(imtest_pool_wait_seconds[1m])",
        )
        .await?;
        (n >= 10.0).then_some(())
    })
    .await;
    Some(RealPrometheus { peer, _dir: dir })
}
