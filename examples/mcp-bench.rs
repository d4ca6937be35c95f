//! MCP benchmark (issue #51): latency of `check_remediation` and `recall_similar_incidents`
//! through the real `/mcp` endpoint, with many MCP sessions at once.
//!
//! Usage: `cargo run --release --example mcp-bench -- [--db PATH] [--sessions 20] [--calls 25]
//! [--embeddings builtin|off]`.
//!
//! Builds the app as `serve` does over `--db` (a database to reuse, e.g. one `recall-bench --db`
//! kept with 100,000 memories; without it, a temporary SQLite file with the sample history),
//! serves it on a loopback port, opens `--sessions` MCP sessions with the official Rust SDK's
//! Streamable HTTP client (each initialises, as a client does), and has every session call both
//! tools `--calls` times, alternating, all sessions at once; query embedding is included (the
//! questions are new texts: a few words of each differ from call to call). Prints p50 / p99 / max
//! (ms) per tool and PASS/FAIL against the floor: p99 ≤ 50 ms. Latencies are wall-clock on
//! a shared machine: run it on a quiet one.

use std::time::{Duration, Instant};

use incidentmind::app::{App, Config};
use rmcp::ServiceExt as _;
use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

/// The floor: p99 of either tool at most this many milliseconds.
const P99_MAX_MS: f64 = 50.0;

/// Symptoms the sessions describe (each call varies one word so no answer is a cache hit).
const SYMPTOMS: [&str; 4] = [
    "checkout requests wait for a free database connection and time out",
    "workers are killed for using too much memory after the release",
    "clients get 429 responses from the public API gateway",
    "disk on the log volume fills up and writes fail",
];

/// Actions the sessions check.
const ACTIONS: [&str; 4] = [
    "raise_pool_limit",
    "restart_service",
    "rollback_deploy",
    "scale_out",
];

struct Args {
    db: Option<String>,
    sessions: usize,
    calls: usize,
    embeddings: bool,
}

fn args() -> anyhow::Result<Args> {
    let mut a = Args {
        db: None,
        sessions: 20,
        calls: 25,
        embeddings: true,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .ok_or_else(|| anyhow::anyhow!("{flag} needs a value"))
        };
        match flag.as_str() {
            "--db" => a.db = Some(value()?),
            "--sessions" => a.sessions = value()?.parse()?,
            "--calls" => a.calls = value()?.parse()?,
            "--embeddings" => a.embeddings = value()? != "off",
            other => anyhow::bail!(
                "unknown argument {other}; usage: mcp-bench [--db PATH] [--sessions 20] [--calls 25] [--embeddings builtin|off]"
            ),
        }
    }
    Ok(a)
}

/// p-th percentile (0..=100) of sorted `ms`.
fn percentile(ms: &[f64], p: f64) -> f64 {
    if ms.is_empty() {
        return f64::NAN;
    }
    let k = ((p / 100.0) * (ms.len() - 1) as f64).round() as usize;
    ms[k.min(ms.len() - 1)]
}

/// One session: initialise, then `calls` calls of each tool, alternating; the latencies (ms) of
/// `check_remediation` and of `recall_similar_incidents`.
async fn session(
    url: String,
    token: String,
    n: usize,
    calls: usize,
) -> anyhow::Result<(Vec<f64>, Vec<f64>)> {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url).auth_header(token),
    );
    let info = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("mcp-bench", env!("CARGO_PKG_VERSION")),
    );
    let client = info.serve(transport).await?;
    let (mut check, mut recall) = (Vec::new(), Vec::new());
    for i in 0..calls {
        let symptom = format!("{} (call {n}-{i})", SYMPTOMS[(n + i) % SYMPTOMS.len()]);
        let mut args = serde_json::Map::new();
        args.insert("action".into(), ACTIONS[(n + i) % ACTIONS.len()].into());
        args.insert("service".into(), format!("service-{}", (n + i) % 7).into());
        args.insert("symptoms".into(), symptom.clone().into());
        let started = Instant::now();
        let r = client
            .call_tool(CallToolRequestParams::new("check_remediation").with_arguments(args))
            .await?;
        check.push(started.elapsed().as_secs_f64() * 1000.0);
        anyhow::ensure!(r.is_error != Some(true), "check_remediation failed: {r:?}");
        let mut args = serde_json::Map::new();
        args.insert("description".into(), symptom.into());
        let started = Instant::now();
        let r = client
            .call_tool(CallToolRequestParams::new("recall_similar_incidents").with_arguments(args))
            .await?;
        recall.push(started.elapsed().as_secs_f64() * 1000.0);
        anyhow::ensure!(
            r.is_error != Some(true),
            "recall_similar_incidents failed: {r:?}"
        );
    }
    client.cancel().await?;
    Ok((check, recall))
}

fn main() -> anyhow::Result<()> {
    let a = args()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let dir = tempfile::tempdir()?;
        let database_url = match &a.db {
            Some(db) => db.clone(),
            None => dir.path().join("mcp-bench.db").display().to_string(),
        };
        let embedder: Option<std::sync::Arc<dyn incidentmind::memory::Embedder>> = if a.embeddings {
            let e = incidentmind::memory::embeddings::BuiltinEmbedder::load(
                &incidentmind::memory::minilm::default_dir(),
            )?;
            Some(std::sync::Arc::new(e))
        } else {
            None
        };
        let mut config = Config::new(database_url);
        config.embedder = embedder;
        config.settings.rate_limits.api_per_token = 0;
        let app = App::build(config).await?;
        if a.db.is_none() {
            incidentmind::services::sample::load_history(app.memory()).await?;
        }
        // Memory's derived data first (incident documents, vectors), as a server that has run a
        // while has it: otherwise the memory worker embeds beside the measured calls.
        let caught = Instant::now();
        let (rebuilt, stored) = incidentmind::memory::embeddings::catch_up(app.memory()).await?;
        println!(
            "memory caught up before the clock: {rebuilt} incident documents rebuilt, {stored} vectors stored, {:.1} s",
            caught.elapsed().as_secs_f64()
        );
        let (_stop_tx, stop) = tokio::sync::watch::channel(false);
        app.spawn_background(Duration::from_millis(200), stop);
        let name = format!("mcp-bench-{}", std::process::id());
        let token =
            incidentmind::services::users::add_user(app.pool(), &name, "responder", None).await?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/mcp", listener.local_addr()?);
        let router = app.router.clone();
        tokio::spawn(async move { axum::serve(listener, router).await });
        // One warm-up session: the index and the model load before the clock starts.
        session(url.clone(), token.clone(), 0, 2).await?;
        let started = Instant::now();
        let runs: Vec<_> = (0..a.sessions)
            .map(|n| tokio::spawn(session(url.clone(), token.clone(), n, a.calls)))
            .collect();
        let (mut check, mut recall) = (Vec::new(), Vec::new());
        for r in runs {
            let (c, q) = r.await??;
            check.extend(c);
            recall.extend(q);
        }
        let wall = started.elapsed();
        let mut failed = false;
        println!(
            "mcp-bench: {} sessions × {} calls of each tool, embeddings {}, {:.1} s",
            a.sessions,
            a.calls,
            if a.embeddings { "built-in" } else { "off" },
            wall.as_secs_f64()
        );
        for (tool, ms) in [
            ("check_remediation", &mut check),
            ("recall_similar_incidents", &mut recall),
        ] {
            ms.sort_by(f64::total_cmp);
            let p99 = percentile(ms, 99.0);
            let pass = p99 <= P99_MAX_MS;
            failed |= !pass;
            println!(
                "{tool:<26} n={:<5} p50 {:>7.2} ms  p99 {:>7.2} ms  max {:>7.2} ms  {}",
                ms.len(),
                percentile(ms, 50.0),
                p99,
                ms.last().copied().unwrap_or(f64::NAN),
                if pass { "PASS" } else { "FAIL (p99 > 50 ms)" }
            );
        }
        if failed {
            std::process::exit(1);
        }
        Ok(())
    })
}
