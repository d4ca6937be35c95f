//! Prometheus-source benchmark: how soon an alert's series is on its incident, and what pulling
//! it costs the webhook.
//!
//! Usage: `cargo run --release --example prometheus-bench -- [--samples 30] [--count 600]
//! [--rate 20]`. Needs the `prometheus` binary (`$INCIDENTMIND_PROMETHEUS_BIN`, else on `PATH`;
//! Debian's `prometheus` package).
//!
//! Starts a real Prometheus on loopback scraping, every second, an exporter this process serves
//! (a request counter at 20/s, an error counter at 1/s, a gauge that climbs), waits for ten
//! samples, and builds two apps as `serve` builds them (`incidentmind::App::build` over fresh
//! SQLite files, no embedding model, the webhook rate limit off): **on**, with
//! `--prometheus-url` and the request and error rate templates set, and **off**, without.
//!
//! - **(a) webhook → series on the incident**: `--samples` times, one Alertmanager delivery of a
//!   new group with one alert whose `generatorURL` holds the gauge's expression, posted to the
//!   on app; the time from sending it until the incident's Prometheus evidence row exists
//!   (polled in the database every 5 ms). Floor: **the slowest ≤ 5 s**.
//! - **(b) the webhook's p99, source on vs off**: `--count` deliveries per phase paced at
//!   `--rate` per second, each a new group of two alerts (gauge and request rate), so every one
//!   opens an incident and, on the on app, pulls three queries per alert in the background;
//!   phases alternate off, on, off, on (each after the on app's pulls drained), and the p50 and
//!   p99 of each app over its two phases are compared. Floor: **p99 on ≤ 1.10 × p99 off**.
//!
//! Client, apps, exporter and Prometheus share this machine's cores; latencies are wall clock.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use incidentmind::prometheus::PrometheusConfig;
use incidentmind::{App, Settings, services::users::add_user};
use serde_json::{Value, json};

/// The gauge the alerts fire on.
const GAUGE: &str = r#"imtest_pool_wait_seconds{service="checkout"}"#;
/// The request rate an alert of (b) also names.
const RATE: &str = "sum(irate(imtest_requests_total[5s]))";

/// The exporter's counters and when they were last advanced.
struct Exporter {
    started: Instant,
    requests: f64,
    errors: f64,
    last: Instant,
}

/// Serves `GET /metrics` on loopback; returns its `host:port`.
async fn start_exporter() -> anyhow::Result<String> {
    use axum::extract::State;
    type Shared = Arc<Mutex<Exporter>>;
    async fn metrics(State(s): State<Shared>) -> String {
        let Ok(mut e) = s.lock() else {
            return String::new();
        };
        let now = Instant::now();
        let dt = now.duration_since(e.last).as_secs_f64();
        e.requests += 20.0 * dt;
        e.errors += dt;
        e.last = now;
        let climb = 0.2 + 0.05 * now.duration_since(e.started).as_secs_f64();
        format!(
            "# TYPE imtest_requests_total counter\nimtest_requests_total{{service=\"checkout\"}} {}\n\
             # TYPE imtest_errors_total counter\nimtest_errors_total{{service=\"checkout\"}} {}\n\
             # TYPE imtest_pool_wait_seconds gauge\nimtest_pool_wait_seconds{{service=\"checkout\"}} {climb}\n",
            e.requests, e.errors
        )
    }
    let now = Instant::now();
    let state: Shared = Arc::new(Mutex::new(Exporter {
        started: now,
        requests: 1000.0,
        errors: 10.0,
        last: now,
    }));
    let app = axum::Router::new()
        .route("/metrics", axum::routing::get(metrics))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(addr.to_string())
}

/// A Prometheus process, killed when dropped.
struct Prom {
    child: Child,
    base: String,
}

impl Drop for Prom {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts Prometheus scraping `target` every second and waits until it holds ten samples.
async fn start_prometheus(dir: &std::path::Path, target: &str) -> anyhow::Result<Prom> {
    let binary = std::env::var_os("INCIDENTMIND_PROMETHEUS_BIN")
        .map(PathBuf::from)
        .or_else(|| {
            let path = std::env::var_os("PATH")?;
            std::env::split_paths(&path)
                .map(|d| d.join("prometheus"))
                .find(|p| p.is_file())
        })
        .ok_or_else(|| anyhow::anyhow!("no prometheus binary (install Debian's prometheus or set INCIDENTMIND_PROMETHEUS_BIN)"))?;
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: bench\n    static_configs:\n      - targets: ['{target}']\n"
        ),
    )?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let log = std::fs::File::create(dir.join("prometheus.log"))?;
    let child = Command::new(binary)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--log.level=warn")
        .stdout(Stdio::from(log.try_clone()?))
        .stderr(Stdio::from(log))
        .spawn()?;
    let prom = Prom {
        child,
        base: format!("http://127.0.0.1:{port}"),
    };
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let url = format!(
        "{}/api/v1/query?query=count_over_time(imtest_pool_wait_seconds[1m])",
        prom.base
    );
    loop {
        anyhow::ensure!(
            Instant::now() < deadline,
            "Prometheus not ready with ten samples in 60 s"
        );
        if let Ok(res) = client.get(&url).send().await
            && let Ok(v) = res.json::<Value>().await
            && let Some(n) = v["data"]["result"][0]["value"][1].as_str()
            && n.parse::<f64>().unwrap_or(0.0) >= 10.0
        {
            return Ok(prom);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// An app served on loopback with an Alertmanager integration.
struct Served {
    pool: sqlx::AnyPool,
    base: String,
    secret: String,
    _dir: tempfile::TempDir,
}

async fn serve(prometheus: Option<PrometheusConfig>) -> anyhow::Result<Served> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("bench.db");
    let mut settings = Settings::default();
    settings.rate_limits.webhook_per_integration = 0;
    settings.prometheus = prometheus;
    let mut config = incidentmind::app::Config::new(path.to_str().unwrap_or("bench.db"));
    config.settings = settings;
    let app = App::build(config).await?;
    let pool = app.pool().clone();
    let admin = add_user(&pool, "ada", "admin", None).await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let router = app.router.clone();
    tokio::spawn(async move {
        let _ = axum::serve(
            listener,
            router.into_make_service_with_connect_info::<std::net::SocketAddr>(),
        )
        .await;
    });
    let res = reqwest::Client::new()
        .post(format!("{base}/api/v1/integrations"))
        .bearer_auth(&admin)
        .json(&json!({"name": "bench-am", "source": "alertmanager"}))
        .send()
        .await?;
    anyhow::ensure!(
        res.status().as_u16() == 201,
        "integration: {}",
        res.status()
    );
    let v: Value = res.json().await?;
    let secret = v["secret"].as_str().unwrap_or_default().to_string();
    Ok(Served {
        pool,
        base,
        secret,
        _dir: dir,
    })
}

/// An Alertmanager v4 delivery of group `group`, one firing alert per expression.
fn delivery(group: &str, exprs: &[&str]) -> Value {
    let starts = jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let alerts: Vec<Value> = exprs
        .iter()
        .enumerate()
        .map(|(i, expr)| {
            let mut u = url::Url::parse("http://prometheus.internal:9090/graph").expect("url");
            u.query_pairs_mut().append_pair("g0.expr", expr);
            json!({
                "status": "firing",
                "labels": {"alertname": format!("Bench{i}"), "service": "checkout", "group": group},
                "annotations": {"summary": format!("bench alert {i} of {group}")},
                "startsAt": starts, "endsAt": "0001-01-01T00:00:00Z",
                "generatorURL": u.to_string(), "fingerprint": format!("{group}-{i}")
            })
        })
        .collect();
    json!({"version": "4", "groupKey": group, "status": "firing", "receiver": "incidentmind",
           "groupLabels": {"group": group}, "commonLabels": {"service": "checkout"},
           "commonAnnotations": {}, "externalURL": "http://alertmanager.internal:9093",
           "alerts": alerts})
}

/// Posts one delivery; returns the first incident id and the answer's latency.
async fn post(
    client: &reqwest::Client,
    s: &Served,
    body: &Value,
) -> anyhow::Result<(String, Duration)> {
    let sent = Instant::now();
    let res = client
        .post(format!("{}/api/v1/webhooks/alertmanager", s.base))
        .bearer_auth(&s.secret)
        .json(body)
        .send()
        .await?;
    let took = sent.elapsed();
    anyhow::ensure!(res.status().as_u16() == 202, "webhook: {}", res.status());
    let v: Value = res.json().await?;
    let id = v["incidents"][0].as_str().unwrap_or_default().to_string();
    Ok((id, took))
}

/// Evidence rows Prometheus stored, on `incident` or (None) on every incident.
async fn pulled(pool: &sqlx::AnyPool, incident: Option<&str>) -> anyhow::Result<i64> {
    let n: i64 =
        match incident {
            Some(id) => sqlx::query_scalar(
                "SELECT COUNT(*) FROM evidence WHERE author = 'prometheus' AND incident_id = $1",
            )
            .bind(id)
            .fetch_one(pool)
            .await?,
            None => {
                sqlx::query_scalar("SELECT COUNT(*) FROM evidence WHERE author = 'prometheus'")
                    .fetch_one(pool)
                    .await?
            }
        };
    Ok(n)
}

/// The `q` quantile of `xs` (sorted here), milliseconds.
fn quantile(xs: &mut [Duration], q: f64) -> f64 {
    xs.sort();
    let i = ((xs.len() as f64 - 1.0) * q).round() as usize;
    xs.get(i).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

/// `count` deliveries of new groups at `rate` per second; their latencies.
async fn phase(
    client: &reqwest::Client,
    s: &Served,
    tag: &str,
    count: usize,
    rate: f64,
) -> anyhow::Result<Vec<Duration>> {
    let start = tokio::time::Instant::now();
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        tokio::time::sleep_until(start + Duration::from_secs_f64(i as f64 / rate)).await;
        let body = delivery(&format!("{tag}-{i}"), &[GAUGE, RATE]);
        out.push(post(client, s, &body).await?.1);
    }
    Ok(out)
}

fn main() -> anyhow::Result<()> {
    incidentmind::startup::prepare();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run())
}

async fn run() -> anyhow::Result<()> {
    let (mut samples, mut count, mut rate) = (30usize, 600usize, 20.0f64);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| anyhow::anyhow!("{a} needs a value"))
        };
        match a.as_str() {
            "--samples" => samples = value()?.parse()?,
            "--count" => count = value()?.parse()?,
            "--rate" => rate = value()?.parse()?,
            other => anyhow::bail!(
                "unknown argument {other}; usage: prometheus-bench [--samples 30] [--count 600] [--rate 20]"
            ),
        }
    }
    anyhow::ensure!(
        samples > 0 && count > 0 && rate > 0.0,
        "samples, count and rate must be > 0"
    );
    let dir = tempfile::tempdir()?;
    let target = start_exporter().await?;
    let t = Instant::now();
    let prom = start_prometheus(dir.path(), &target).await?;
    println!(
        "prometheus: ready with ten samples in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let mut config = PrometheusConfig::new(prom.base.clone());
    config.request_rate =
        Some(r#"sum(irate(imtest_requests_total{service="$service"}[5s]))"#.into());
    config.error_rate = Some(r#"sum(irate(imtest_errors_total{service="$service"}[5s]))"#.into());
    let on = serve(Some(config)).await?;
    let off = serve(None).await?;
    let client = reqwest::Client::new();

    // (a) webhook → the alert's series on the incident.
    let mut waits = Vec::with_capacity(samples);
    for i in 0..samples {
        let sent = Instant::now();
        let (id, _) = post(&client, &on, &delivery(&format!("a-{i}"), &[GAUGE])).await?;
        loop {
            if pulled(&on.pool, Some(&id)).await? > 0 {
                break;
            }
            anyhow::ensure!(
                sent.elapsed() < Duration::from_secs(30),
                "no series on {id} after 30 s"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        waits.push(sent.elapsed());
    }
    let slowest = waits.iter().max().copied().unwrap_or_default();
    let p50 = quantile(&mut waits, 0.5);
    println!(
        "(a) webhook → series on the incident, {samples} alerts: p50 {p50:.0} ms, slowest {:.0} ms (floor ≤ 5000 ms) {}",
        slowest.as_secs_f64() * 1000.0,
        if slowest <= Duration::from_secs(5) {
            "PASS"
        } else {
            "FAIL"
        }
    );

    // (b) the webhook's own latency with the source on and off, alternating.
    let (mut lat_on, mut lat_off) = (Vec::new(), Vec::new());
    for round in 0..2 {
        lat_off.extend(phase(&client, &off, &format!("off{round}"), count, rate).await?);
        let before = pulled(&on.pool, None).await?;
        let t = Instant::now();
        lat_on.extend(phase(&client, &on, &format!("on{round}"), count, rate).await?);
        let want = before + 2 * count as i64;
        while pulled(&on.pool, None).await? < want {
            anyhow::ensure!(
                t.elapsed() < Duration::from_secs(600),
                "pulls not drained in 10 min"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        println!(
            "    round {round}: {count} deliveries each at {rate}/s; the on app's {} pulls done {:.1} s after its phase began",
            2 * count,
            t.elapsed().as_secs_f64()
        );
    }
    let (on50, on99) = (quantile(&mut lat_on, 0.5), quantile(&mut lat_on, 0.99));
    let (off50, off99) = (quantile(&mut lat_off, 0.5), quantile(&mut lat_off, 0.99));
    let ratio = on99 / off99.max(1e-9);
    println!("(b) webhook latency, {} deliveries per app:", lat_on.len());
    println!("    source off: p50 {off50:.2} ms, p99 {off99:.2} ms");
    println!("    source on:  p50 {on50:.2} ms, p99 {on99:.2} ms");
    println!(
        "    p99 on / off = {ratio:.3} (floor ≤ 1.10) {}",
        if ratio <= 1.10 { "PASS" } else { "FAIL" }
    );
    drop(prom);
    Ok(())
}
