//! Incident-page load benchmark (issue #14): how the incident page holds at 200 connections
//! against `/healthz` in the same run, on loopback.
//!
//! Usage: `cargo run --release --example page-bench -- [--connections 200] [--seconds 10]
//! [--embeddings builtin|off] [--also PATH]…` (`--also` measures more paths saturated, for
//! information, e.g. `/api/v1/me` for the cost of authentication alone).
//!
//! Builds the real router (`incidentmind::router` over an `AppState` wired as `serve` wires it,
//! with the built-in embedding model unless `--embeddings off`) on a fresh SQLite file, replays
//! the sample history, opens an incident with a paste and investigates it, then measures, signed
//! in with an API token, in two ways:
//!
//! 1. **Saturated (closed loop)**: for each of `GET /healthz` and `GET /incidents/{id}`,
//!    `--connections` client tasks for `--seconds`, each sending one request after another on
//!    its own keep-alive connection. This gives each route's capacity; the floor is the page's
//!    rate ≥ 30 % of `/healthz`'s. Latency here is queueing: with `c` connections always
//!    waiting, the mean is `c / rate` (Little's law), so `/healthz` itself shows a p99 near
//!    20 ms at 200 connections on two cores. It is printed, not judged.
//! 2. **Paced (open loop)**: the same connections send the page at a fixed total rate, 30 % of
//!    `/healthz`'s saturated rate (the rate floor above), each on its own schedule, and a
//!    request's latency counts from when it was due, not from when it was sent, so a stall is
//!    charged to every request it delayed (the "coordinated omission" correction of wrk2, after
//!    Gil Tene, "How NOT to Measure Latency", 2015). The floor is the page's p99 ≤ 20 ms.
//!
//! Prints requests/s, p50 and p99 (ms) and PASS/FAIL against both floors. Client and server
//! share this process and its cores, as a load balancer and the app would not: the figures are
//! a lower bound.

use std::sync::Arc;
use std::time::{Duration, Instant};

use incidentmind::memory::embeddings::BuiltinEmbedder;
use incidentmind::{AppState, Settings, router, services::users::add_user, store};

/// Floor: the incident page's saturated rate at least this share of `/healthz`'s, and its p99
/// when paced at that share of `/healthz`'s rate…
const PAGE_RATE_MIN: f64 = 0.30;
/// …at most this many milliseconds.
const PAGE_P99_MAX_MS: f64 = 20.0;

/// One route's figures: requests per second, p50 and p99 in ms, non-2xx responses.
struct Figures {
    rate: f64,
    p50: f64,
    p99: f64,
    errors: usize,
}

/// A client of its own, so each task holds its own keep-alive connection.
fn connection() -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .pool_max_idle_per_host(1)
        .build()?)
}

/// Sends one GET of `url` with `token` and reads the body; whether it answered 2xx.
async fn fetch(client: &reqwest::Client, url: &str, token: &str) -> bool {
    match client.get(url).bearer_auth(token).send().await {
        Ok(res) if res.status().is_success() => res.bytes().await.is_ok(),
        _ => false,
    }
}

/// Every task's latencies and its count of failed requests, together.
async fn gather(
    tasks: Vec<tokio::task::JoinHandle<(Vec<Duration>, usize)>>,
) -> anyhow::Result<(Vec<Duration>, usize)> {
    let mut all = Vec::new();
    let mut errors = 0;
    for t in tasks {
        let (times, e) = t.await?;
        all.extend(times);
        errors += e;
    }
    Ok((all, errors))
}

/// Runs `connections` tasks against `url` for `seconds`; each has its own client (its own
/// connection) and sends the next request when the last one is answered.
async fn load(url: &str, token: &str, connections: usize, seconds: u64) -> anyhow::Result<Figures> {
    let until = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = Vec::with_capacity(connections);
    for _ in 0..connections {
        let client = connection()?;
        let url = url.to_string();
        let token = token.to_string();
        tasks.push(tokio::spawn(async move {
            let mut times = Vec::new();
            let mut errors = 0usize;
            while Instant::now() < until {
                let t = Instant::now();
                if !fetch(&client, &url, &token).await {
                    errors += 1;
                }
                times.push(t.elapsed());
            }
            (times, errors)
        }));
    }
    let started = Instant::now();
    let (all, errors) = gather(tasks).await?;
    let elapsed = started.elapsed().as_secs_f64().max(seconds as f64);
    Ok(figures(all, errors, elapsed))
}

/// Sends `url` on `connections` connections at `rate` requests per second in total for
/// `seconds`: connection `i` sends its `j`-th request when it is due, at
/// `(i / connections + j) / per_connection` seconds, where `per_connection = rate /
/// connections`, or at once when the previous answer came after that. A latency is measured
/// from when the request was due (see the module doc). Each connection sends one request first,
/// unmeasured, to open it.
async fn paced(
    url: &str,
    token: &str,
    connections: usize,
    seconds: u64,
    rate: f64,
) -> anyhow::Result<Figures> {
    // Each connection is opened and used once before the schedule starts (within 2 s), so
    // the figures are of requests on open connections, as a load balancer's are.
    let start = Instant::now() + Duration::from_secs(2);
    let until = start + Duration::from_secs(seconds);
    let period = Duration::from_secs_f64(connections as f64 / rate.max(1.0));
    let mut tasks = Vec::with_capacity(connections);
    for i in 0..connections {
        let client = connection()?;
        let url = url.to_string();
        let token = token.to_string();
        let first = start + period.mul_f64(i as f64 / connections as f64);
        tasks.push(tokio::spawn(async move {
            let mut times = Vec::new();
            let mut errors = 0usize;
            fetch(&client, &url, &token).await;
            let mut due = first;
            while due < until {
                tokio::time::sleep_until(due.into()).await;
                if !fetch(&client, &url, &token).await {
                    errors += 1;
                }
                times.push(due.elapsed());
                due += period;
            }
            (times, errors)
        }));
    }
    let (all, errors) = gather(tasks).await?;
    Ok(figures(all, errors, seconds as f64))
}

/// Figures of `times` (latencies) over `seconds`, with `errors` non-2xx answers.
fn figures(mut all: Vec<Duration>, errors: usize, seconds: f64) -> Figures {
    all.sort();
    let at = |p: f64| {
        let i = ((p * all.len() as f64).ceil() as usize).clamp(1, all.len().max(1)) - 1;
        all.get(i).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    };
    Figures {
        rate: all.len() as f64 / seconds,
        p50: at(0.50),
        p99: at(0.99),
        errors,
    }
}

/// The process settings first (`incidentmind::startup`), as the `incidentmind` binary makes
/// them, then the bench on a multi-threaded runtime.
fn main() -> anyhow::Result<()> {
    incidentmind::startup::prepare();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run())
}

#[allow(
    clippy::too_many_lines,
    reason = "a benchmark run: it sets up, measures each figure in turn and prints it against its floor, top to bottom"
)]
async fn run() -> anyhow::Result<()> {
    let mut connections = 200usize;
    let mut seconds = 10u64;
    let mut with_model = true;
    let mut also: Vec<String> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| anyhow::anyhow!("{a} needs a value"))
        };
        match a.as_str() {
            "--connections" => connections = value()?.parse()?,
            "--seconds" => seconds = value()?.parse()?,
            "--embeddings" => {
                with_model = match value()?.as_str() {
                    "builtin" => true,
                    "off" => false,
                    other => anyhow::bail!("--embeddings takes builtin or off, not {other}"),
                }
            }
            "--also" => also.push(value()?),
            other => anyhow::bail!(
                "unknown argument {other}; usage: page-bench [--connections 200] [--seconds 10] [--embeddings builtin|off] [--also PATH]…"
            ),
        }
    }
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("page-bench.db");
    let pool = store::connect(path.to_str().expect("utf-8 temp path")).await?;
    let token = add_user(&pool, "rita", "responder", None).await?;
    let embedder: Option<Arc<dyn incidentmind::memory::Embedder>> = if with_model {
        Some(Arc::new(BuiltinEmbedder::load(
            &incidentmind::memory::minilm::default_dir(),
        )?))
    } else {
        None
    };
    let memory = incidentmind::memory::Memory::new(pool.clone(), embedder);
    let t = Instant::now();
    let loaded = incidentmind::services::sample::load_history(&memory).await?;
    incidentmind::memory::embeddings::catch_up(&memory).await?;
    println!(
        "sample history: {} incidents learned and embedded in {:.1} s",
        loaded.len(),
        t.elapsed().as_secs_f64()
    );

    let new = incidentmind::domain::NewIncident {
        title: "Checkout API answers 503 after the morning deploy".into(),
        service: "checkout-api".into(),
        severity: incidentmind::domain::Severity::Sev2,
        description: "Error rate on checkout went from 0.1 % to 12 % within minutes.".into(),
    };
    let inc = incidentmind::services::workflow::open_incident(
        &incidentmind::store::Db::new(pool.clone()),
        "rita",
        &new,
    )
    .await?;
    let paste = (0..40)
        .map(|n| {
            format!(
                "2026-06-02T09:{:02}:{:02}Z ERROR upstream connect error: connection pool \
                 exhausted (active=50, max=50) request_id=r{n}",
                n / 60,
                n % 60
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    incidentmind::services::evidence::add(
        memory.pool(),
        "rita",
        &inc.id,
        incidentmind::evidence::EvidenceKind::Logs,
        paste,
        "bench",
        None,
    )
    .await?;
    incidentmind::services::investigation::investigate(
        &memory,
        &incidentmind::analyst::builtin::BuiltinAnalyst,
        "rita",
        &inc.id,
        None,
    )
    .await?;

    // The API token's rate limit (600 a minute by default) is off: this measures rendering,
    // and 200 connections on one token would mostly be answered 429.
    let mut settings = Settings::default();
    settings.rate_limits.api_per_token = 0;
    let state = AppState::new(pool.clone(), settings).with_memory(memory);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move {
        let _ = axum::serve(listener, router(state)).await;
    });
    let page = format!("{base}/incidents/{}", inc.id);
    // Warm-up: the page's recall is computed once and cached, as after any change.
    let warm = reqwest::Client::new();
    let res = warm.get(&page).bearer_auth(&token).send().await?;
    anyhow::ensure!(
        res.status().is_success(),
        "GET {page} answered {}",
        res.status()
    );

    println!("{connections} connections, {seconds} s per run, client and server in one process");
    println!("saturated (each connection sends the next request when answered):");
    let health = load(&format!("{base}/healthz"), &token, connections, seconds).await?;
    let incident = load(&page, &token, connections, seconds).await?;
    let show = |name: &str, f: &Figures| {
        println!(
            "  {name:<16} {:>8.0} req/s  p50 {:>7.2} ms  p99 {:>7.2} ms  errors {}",
            f.rate, f.p50, f.p99, f.errors
        );
    };
    show("/healthz", &health);
    show("/incidents/{id}", &incident);
    for path in &also {
        let f = load(&format!("{base}{path}"), &token, connections, seconds).await?;
        show(path, &f);
    }
    let target = health.rate * PAGE_RATE_MIN;
    println!(
        "paced at {target:.0} req/s in total ({:.0} % of /healthz's rate), latency from when due:",
        PAGE_RATE_MIN * 100.0
    );
    let steady = paced(&page, &token, connections, seconds, target).await?;
    show("/incidents/{id}", &steady);
    // For information: the same at three quarters of the page's own capacity, the load a
    // deployment is sized for.
    let own = incident.rate * 0.75;
    println!("paced at {own:.0} req/s (75 % of the page's own saturated rate), for information:");
    let sized = paced(&page, &token, connections, seconds, own).await?;
    show("/incidents/{id}", &sized);
    let share = incident.rate / health.rate.max(1e-9);
    let share_ok = share >= PAGE_RATE_MIN;
    let p99_ok = steady.p99 <= PAGE_P99_MAX_MS;
    println!(
        "  {} incident page saturated rate {:.0} % of /healthz (floor {:.0} %)",
        if share_ok { "PASS" } else { "FAIL" },
        share * 100.0,
        PAGE_RATE_MIN * 100.0
    );
    println!(
        "  {} incident page p99 {:.2} ms paced at {:.0} % of /healthz's rate (floor {PAGE_P99_MAX_MS} ms)",
        if p99_ok { "PASS" } else { "FAIL" },
        steady.p99,
        PAGE_RATE_MIN * 100.0
    );
    println!(
        "{}",
        if p99_ok && share_ok && incident.errors == 0 && steady.errors == 0 {
            "PASS"
        } else {
            "FAIL"
        }
    );
    Ok(())
}
