//! Large-evidence benchmark (issue 22, item 2): time and peak RSS of one paste of 1, 2, 4, 8,
//! 16, 32 and 50 MB through the real router over loopback HTTP, as `curl --data-binary` would
//! send it.
//!
//! Usage: `cargo run --release --example evidence-large -- [--sizes 1,2,4,8,16,32,50]`.
//!
//! For each size: a synthetic log (timestamped lines of a few dozen shapes with public and
//! private addresses, four-part versions, ids, a token now and then, and a burst of errors in
//! the second half) is generated, the process's peak RSS is reset (`/proc/self/clear_refs`), the
//! paste is posted as `text/plain` to a fresh incident, and the answer's status, the seconds it
//! took, the peak RSS during the request (minus the RSS before it, which holds the paste the
//! client keeps), the RSS after and the lines/observations stored are printed. The issue's
//! floors: 20 MB in ≤ 10 s, 50 MB in ≤ 25 s, peak ≤ 3× the paste, back near idle after.
//! Server and client share this process, so the figures include the client's copy of the body.

use std::time::Instant;

use incidentmind::{AppState, Settings, router, services::users::add_user, store};

fn status_kb(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// A synthetic log of about `bytes` bytes.
fn synthetic_log(bytes: usize) -> String {
    let shapes = [
        "INFO  checkout request id={id} from 203.0.113.{o} took {ms} ms",
        "INFO  ledger call ok peer=10.2.{o}.7 svc-d 2.14.0.{o} latency {ms}ms",
        "DEBUG cache hit key=order:{id} size {ms}",
        "WARN  slow query on orders (took {ms} ms) table=line_items",
        "INFO  user {id} signed in from 198.51.100.{o}",
        "INFO  GET /api/v1/orders/{id} 200 {ms}ms",
        "WARN  retrying payment {id} attempt {o}",
        "INFO  deployed checkout 3.1.0.{o} on node-{o}",
        "DEBUG token refresh for client {id} ok (bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ{id}In0.c2lnbmF0dXJl{o})",
    ];
    let errors = [
        "ERROR HikariPool-1 - Connection is not available, request timed out after 30000ms.",
        "ERROR ledger upstream 203.0.113.{o}:443 connect timeout after {ms} ms",
    ];
    let mut out = String::with_capacity(bytes + 256);
    let mut n: u64 = 0;
    while out.len() < bytes {
        n += 1;
        let late = out.len() > bytes / 2;
        let shape = if late && n.is_multiple_of(9) {
            errors[(n / 9 % 2) as usize]
        } else {
            shapes[(n * 7 % shapes.len() as u64) as usize]
        };
        let secs = n / 40;
        let line = shape
            .replace(
                "{id}",
                &format!("{:08x}", n.wrapping_mul(2654435761) & 0xffff_ffff),
            )
            .replace("{o}", &(n % 250 + 1).to_string())
            .replace("{ms}", &(n * 37 % 5000).to_string());
        out.push_str(&format!(
            "2026-12-01T{:02}:{:02}:{:02}.{:03}Z {line}\n",
            10 + secs / 3600 % 12,
            secs / 60 % 60,
            secs % 60,
            n % 1000
        ));
    }
    out
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

async fn run() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let sizes: Vec<usize> = args
        .iter()
        .position(|a| a == "--sizes")
        .and_then(|i| args.get(i + 1))
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 2, 4, 8, 16, 32, 50]);
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("bench.db");
    let pool = store::connect(db.to_str().unwrap_or("bench.db")).await?;
    let token = add_user(&pool, "bench", "responder", None).await?;
    let state = AppState::new(pool.clone(), Settings::default())
        .with_memory(incidentmind::memory::Memory::new(pool.clone(), None));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move {
        let _ = axum::serve(listener, router(state)).await;
    });
    let client = reqwest::Client::new();
    let idle = status_kb("VmRSS:");
    println!("idle RSS {} MB", idle / 1024);
    println!(
        "{:>5} {:>7} {:>8} {:>9} {:>9} {:>7} {:>9} {:>9} {:>9} {:>5} {:>6}",
        "MB",
        "status",
        "seconds",
        "MB/s",
        "peak+MB",
        "×paste",
        "after MB",
        "heap MB",
        "mapped MB",
        "obs",
        "lines"
    );
    // `BENCH_KIND=note` posts the same text as a note (no log extraction), to split the cost.
    let kind = std::env::var("BENCH_KIND").unwrap_or_else(|_| "logs".into());
    for mb in sizes {
        let bytes = mb * 1024 * 1024;
        let paste = synthetic_log(bytes - 1024);
        let res = client
            .post(format!("{base}/api/v1/incidents"))
            .bearer_auth(&token)
            .json(
                &serde_json::json!({"title": format!("bench {mb} MB"), "service": "checkout",
                                      "severity": "SEV3", "description": ""}),
            )
            .send()
            .await?;
        let id = res.json::<serde_json::Value>().await?["id"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let before = status_kb("VmRSS:");
        reset_peak();
        let started = Instant::now();
        let res = client
            .post(format!("{base}/api/v1/incidents/{id}/evidence?kind={kind}"))
            .bearer_auth(&token)
            .header("content-type", "text/plain")
            .body(paste)
            .send()
            .await?;
        let status = res.status();
        let v: serde_json::Value = res.json().await.unwrap_or_default();
        let secs = started.elapsed().as_secs_f64();
        let peak = status_kb("VmHWM:");
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        let after = status_kb("VmRSS:");
        // Heap and stacks, against file pages mapped in (the SQLite database, read through its
        // memory map, grows with every paste stored: page cache, not the paste held).
        let (heap, mapped) = (status_kb("RssAnon:"), status_kb("RssFile:"));
        let extra_mb = peak.saturating_sub(before) as f64 / 1024.0;
        println!(
            "{:>5} {:>7} {:>8.2} {:>9.1} {:>9.0} {:>7.2} {:>9} {:>9} {:>9} {:>5} {:>6}",
            mb,
            status.as_u16(),
            secs,
            mb as f64 / secs,
            extra_mb,
            extra_mb / mb as f64,
            after / 1024,
            heap / 1024,
            mapped / 1024,
            v["observations"].as_array().map_or(0, |a| a.len()),
            v["evidence"]["lines"].as_i64().unwrap_or(0),
        );
        if !status.is_success() {
            println!("      {}", v);
        }
    }
    Ok(())
}
