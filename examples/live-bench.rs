//! Live incident page benchmark (issue #55): `--streams` open change streams
//! (`GET /incidents/{id}/events`) on one instance, on loopback.
//!
//! Usage: `cargo run --release --example live-bench -- [--streams 2000] [--changes 30]
//! [--seconds 5] [--connections 50] [--server URL --server-pid PID --token TOKEN]`
//!
//! With `--server`, the app under test is a separate `incidentmind serve` (started with
//! `--live-streams-per-user` above `--streams` and `--rate-api-token 0`); its resident set is read
//! from `/proc/PID/status`, so the RSS growth is the server's alone, and "commit" is when this
//! process sent the write (the commit follows it): the figure is an upper bound.
//!
//! Builds the app as `serve` does (`App::build`, a fresh SQLite file, no embedding model),
//! opens one incident, then:
//!
//! 1. measures `GET /healthz` and `GET /incidents/{id}` saturated (closed loop: `--connections`
//!    client tasks for `--seconds`, each on its own keep-alive connection) with no stream open;
//! 2. opens `--streams` streams on the incident (raw HTTP/1.1 over loopback, one connection
//!    each, reading every event) and reads the resident set before and after;
//! 3. resolves and reopens the incident in turn through the API, `--changes` writes 200 ms
//!    apart, and for each measures from commit to delivery on every stream: commit is when
//!    this process's change hub hands the notice out (the write publishes it right after its
//!    commit), delivery when a stream's reader has the event's data line;
//! 4. measures `/healthz` and the page again with the streams open.
//!
//! Prints the figures and PASS/FAIL against the floors: p99 commit-to-delivery ≤ 250 ms,
//! RSS growth ≤ 50 MB per 1,000 streams, each route's rate with streams ≥ 90 % of without.
//! Client and server share this process and its cores, so the RSS growth counts the clients'
//! sockets and tasks too, and the throughput is shared with the idle readers: the figures are
//! an upper bound on the server's cost.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use incidentmind::Settings;
use incidentmind::app::{App, Config};
use incidentmind::services::users::add_user;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const P99_MAX_MS: f64 = 250.0;
const RSS_PER_1000_MAX_MB: f64 = 50.0;
const RATE_KEPT_MIN: f64 = 0.90;

struct Args {
    streams: usize,
    changes: usize,
    seconds: u64,
    connections: usize,
    /// A separate server under test: its base URL, its process id and a responder's token.
    server: Option<String>,
    server_pid: Option<u32>,
    token: Option<String>,
}

fn args() -> Args {
    let mut a = Args {
        streams: 2000,
        changes: 30,
        seconds: 5,
        connections: 50,
        server: None,
        server_pid: None,
        token: None,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i + 1 < argv.len() {
        let v = &argv[i + 1];
        match argv[i].as_str() {
            "--streams" => a.streams = v.parse().expect("--streams N"),
            "--changes" => a.changes = v.parse().expect("--changes N"),
            "--seconds" => a.seconds = v.parse().expect("--seconds N"),
            "--connections" => a.connections = v.parse().expect("--connections N"),
            "--server" => a.server = Some(v.trim_end_matches('/').to_string()),
            "--server-pid" => a.server_pid = Some(v.parse().expect("--server-pid PID")),
            "--token" => a.token = Some(v.clone()),
            other => panic!("unknown option {other}"),
        }
        i += 2;
    }
    a
}

/// The resident set of process `pid` (this one when `None`), MiB (`VmRSS` of
/// `/proc/PID/status`; 0 elsewhere).
fn rss_mib(pid: Option<u32>) -> f64 {
    let path = pid.map_or_else(
        || "/proc/self/status".to_string(),
        |p| format!("/proc/{p}/status"),
    );
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Requests per second of `GET url` saturated by `connections` keep-alive clients for
/// `seconds`, and how many failed.
async fn saturate(url: &str, token: &str, connections: usize, seconds: u64) -> (f64, usize) {
    let stop = Instant::now() + Duration::from_secs(seconds);
    let tasks: Vec<_> = (0..connections)
        .map(|_| {
            let (url, token) = (url.to_string(), token.to_string());
            tokio::spawn(async move {
                let client = reqwest::Client::builder()
                    .pool_max_idle_per_host(1)
                    .build()
                    .expect("client");
                let (mut ok, mut failed) = (0usize, 0usize);
                while Instant::now() < stop {
                    let answered = match client.get(&url).bearer_auth(&token).send().await {
                        Ok(r) if r.status().is_success() => r.bytes().await.is_ok(),
                        _ => false,
                    };
                    if answered {
                        ok += 1;
                    } else {
                        failed += 1;
                    }
                }
                (ok, failed)
            })
        })
        .collect();
    let (mut ok, mut failed) = (0, 0);
    for t in tasks {
        let (o, f) = t.await.expect("client task");
        ok += o;
        failed += f;
    }
    (ok as f64 / seconds as f64, failed)
}

/// When each stream got each event id.
type Deliveries = Arc<Mutex<HashMap<i64, Vec<Instant>>>>;

/// Opens one stream over raw HTTP/1.1 and records when each `change` event arrives; returns
/// once the response head is read (the stream is open).
async fn open_stream(addr: std::net::SocketAddr, path: String, token: String, got: Deliveries) {
    let mut socket = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n"
    );
    socket.write_all(request.as_bytes()).await.expect("send");
    let mut reader = BufReader::with_capacity(1024, socket);
    let mut line = String::new();
    reader.read_line(&mut line).await.expect("status line");
    assert!(line.contains(" 200 "), "stream refused: {line}");
    loop {
        line.clear();
        reader.read_line(&mut line).await.expect("header");
        if line == "\r\n" || line.is_empty() {
            break;
        }
    }
    tokio::spawn(async move {
        let mut id: Option<i64> = None;
        loop {
            line.clear();
            match reader.read_line(&mut line).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            // Chunked framing lines (sizes) and blank lines are skipped; fields are read.
            if let Some(v) = line.strip_prefix("id: ") {
                id = v.trim().parse().ok();
            } else if line.starts_with("data: ")
                && line.contains("\"kind\"")
                && let Some(i) = id.take()
            {
                let at = Instant::now();
                got.lock()
                    .expect("deliveries")
                    .entry(i)
                    .or_default()
                    .push(at);
            }
        }
    });
}

/// The id of `incident`'s newest timeline event, read over the API (its `timeline`).
async fn newest_event(
    client: &reqwest::Client,
    base: &str,
    incident: &str,
    token: &str,
) -> anyhow::Result<i64> {
    let v: serde_json::Value = client
        .get(format!("{base}/api/v1/incidents/{incident}"))
        .bearer_auth(token)
        .send()
        .await?
        .json()
        .await?;
    let events = v
        .get("timeline")
        .and_then(|e| e.as_array())
        .ok_or_else(|| anyhow::anyhow!("no timeline in {v}"))?;
    events
        .iter()
        .filter_map(|e| e.get("id").and_then(serde_json::Value::as_i64))
        .max()
        .ok_or_else(|| anyhow::anyhow!("no event in {v}"))
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let a = args();
    let dir = tempfile::tempdir()?;
    // In-process (the default): the app is built here, as `serve` builds it.
    let (app, base, token) = match (&a.server, &a.token) {
        (Some(server), Some(token)) => (None, server.clone(), token.clone()),
        (Some(_), None) => anyhow::bail!("--server needs --token (a responder's API token)"),
        (None, _) => {
            let db = dir.path().join("live-bench.db");
            let mut settings = Settings::default();
            settings.live.streams_per_user = a.streams + 10;
            settings.rate_limits.api_per_token = 0;
            let app = App::build(Config {
                settings,
                ..Config::new(db.to_str().expect("utf-8"))
            })
            .await?;
            let token = add_user(app.pool(), "rita", "responder", None).await?;
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
            let base = format!("http://{}", listener.local_addr()?);
            let router = app.router.clone();
            tokio::spawn(async move {
                let _ = axum::serve(listener, router).await;
            });
            (Some(app), base, token)
        }
    };
    let addr: std::net::SocketAddr = base
        .trim_start_matches("http://")
        .parse()
        .map_err(|e| anyhow::anyhow!("--server must be http://IP:PORT: {e}"))?;
    let pid = if app.is_some() { None } else { a.server_pid };
    if app.is_none() && pid.is_none() {
        println!("(no --server-pid: the RSS figures are this client's, not the server's)");
    }
    let client = reqwest::Client::new();
    let created: serde_json::Value = client
        .post(format!("{base}/api/v1/incidents"))
        .bearer_auth(&token)
        .json(&serde_json::json!({"title": "Bench incident", "service": "bench", "severity": "SEV3", "description": "live bench"}))
        .send()
        .await?
        .json()
        .await?;
    let id = created["id"].as_str().expect("incident id").to_string();
    let page = format!("{base}/incidents/{id}");
    let health = format!("{base}/healthz");

    println!(
        "live-bench: {} streams, {} changes, {} s per rate at {} connections",
        a.streams, a.changes, a.seconds, a.connections
    );
    let (health_before, e1) = saturate(&health, &token, a.connections, a.seconds).await;
    let (page_before, e2) = saturate(&page, &token, a.connections, a.seconds).await;
    println!(
        "without streams: /healthz {health_before:.0} req/s ({e1} failed), incident page {page_before:.0} req/s ({e2} failed)"
    );

    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_before = rss_mib(pid);
    let got: Deliveries = Arc::default();
    let opened = Instant::now();
    let path = format!("/incidents/{id}/events");
    for chunk in (0..a.streams).collect::<Vec<_>>().chunks(100) {
        let opens: Vec<_> = chunk
            .iter()
            .map(|_| open_stream(addr, path.clone(), token.clone(), Arc::clone(&got)))
            .collect();
        futures::future::join_all(opens).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_after = rss_mib(pid);
    let per_1000 = (rss_after - rss_before) / (a.streams as f64 / 1000.0);
    println!(
        "{} streams open in {:.1} s; RSS {rss_before:.1} → {rss_after:.1} MiB: {per_1000:.1} MiB per 1,000 streams",
        a.streams,
        opened.elapsed().as_secs_f64()
    );

    // Commit times: when this process's hub hands the notice out (in-process), or when the
    // write was sent (a separate server: read back as the newest event id after it).
    let committed: Arc<Mutex<HashMap<i64, Instant>>> = Arc::default();
    if let Some(app) = &app {
        let mut sub = app
            .state
            .pool
            .changes()
            .subscribe(&incidentmind::domain::IncidentId::parse(&id)?);
        let seen = Arc::clone(&committed);
        tokio::spawn(async move {
            while let Ok(Some(c)) = sub.next().await {
                seen.lock()
                    .expect("commits")
                    .insert(c.event_id, Instant::now());
            }
        });
    }
    for i in 0..a.changes {
        // Resolve and reopen in turn: each is one incident write with one timeline event.
        let (step, body) = if i % 2 == 0 {
            (
                "resolve",
                serde_json::json!({"summary": format!("bench round {i}"), "root_cause": "bench"}),
            )
        } else {
            ("reopen", serde_json::json!({}))
        };
        let sent = Instant::now();
        let res = client
            .post(format!("{base}/api/v1/incidents/{id}/{step}"))
            .bearer_auth(&token)
            .json(&body)
            .send()
            .await?;
        assert!(res.status().is_success(), "{step}: {}", res.status());
        if app.is_none() {
            let newest = newest_event(&client, &base, &id, &token).await?;
            committed
                .lock()
                .expect("commits")
                .entry(newest)
                .or_insert(sent);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut lat: Vec<f64> = Vec::new();
    let mut missing = 0usize;
    {
        let commits = committed.lock().expect("commits");
        let deliveries = got.lock().expect("deliveries");
        for (event, at) in commits.iter() {
            let arrived = deliveries.get(event).map_or(&[][..], Vec::as_slice);
            missing += a.streams.saturating_sub(arrived.len());
            lat.extend(
                arrived
                    .iter()
                    .map(|d| d.saturating_duration_since(*at).as_secs_f64() * 1000.0),
            );
        }
        println!(
            "changes committed: {}, deliveries: {} (missing {missing})",
            commits.len(),
            lat.len()
        );
    }
    lat.sort_by(f64::total_cmp);
    let (p50, p99, max) = (
        percentile(&lat, 0.5),
        percentile(&lat, 0.99),
        lat.last().copied().unwrap_or(f64::NAN),
    );
    println!("commit → delivery: p50 {p50:.1} ms, p99 {p99:.1} ms, max {max:.1} ms");

    let (health_with, e3) = saturate(&health, &token, a.connections, a.seconds).await;
    let (page_with, e4) = saturate(&page, &token, a.connections, a.seconds).await;
    println!(
        "with {} streams: /healthz {health_with:.0} req/s ({e3} failed, {:.0} %), incident page {page_with:.0} req/s ({e4} failed, {:.0} %)",
        a.streams,
        100.0 * health_with / health_before,
        100.0 * page_with / page_before
    );
    let verdict = |ok: bool| if ok { "PASS" } else { "FAIL" };
    println!(
        "{} p99 commit→delivery {p99:.1} ms ≤ {P99_MAX_MS} ms (and none missing: {missing})",
        verdict(p99 <= P99_MAX_MS && missing == 0)
    );
    println!(
        "{} RSS growth {per_1000:.1} MiB per 1,000 streams ≤ {RSS_PER_1000_MAX_MB}",
        verdict(per_1000 <= RSS_PER_1000_MAX_MB)
    );
    println!(
        "{} /healthz with streams at {:.0} % of without (≥ 90 %)",
        verdict(health_with >= RATE_KEPT_MIN * health_before),
        100.0 * health_with / health_before
    );
    println!(
        "{} incident page with streams at {:.0} % of without (≥ 90 %)",
        verdict(page_with >= RATE_KEPT_MIN * page_before),
        100.0 * page_with / page_before
    );
    Ok(())
}
