//! What the failure-mode fallback (issue #52) adds to a large paste: extracts a synthetic log of
//! `--mb` MB (default 20) as logs, then runs the fallback on the extraction as the evidence
//! service does, with an empty vector cache (the first paste of its kind) and again with the
//! cache filled, and prints the seconds of each, the templates and the observations tagged by
//! meaning. The bound: the fallback adds ≤ 2 s to a 20 MB paste.
//!
//! Usage: `cargo run --release --example failure-modes-bench -- [--mb 20]`.
//!
//! The log holds many shapes of routine lines and, in its second half, warnings and errors in
//! words no catalogue pattern knows (so every one of them is compared), each shape with varying
//! ids, addresses and numbers.

use std::sync::Arc;
use std::time::Instant;

use incidentmind::evidence::{EvidenceKind, extract};
use incidentmind::memory::failure_modes::{FailureModeMeanings, MeaningTuning};
use incidentmind::memory::minilm::{MiniLm, default_dir};

/// A synthetic log of about `bytes` bytes (see the module doc).
fn synthetic_log(bytes: usize) -> String {
    let routine = [
        "INFO  cart service handled order {id} for customer {n} in {ms} ms",
        "INFO  search index refreshed shard {n} with {ms} documents",
        "DEBUG session {id} touched by worker {n}",
        "INFO  payment batch {id} settled, {n} entries",
        "INFO  sent newsletter chunk {n} to relay 10.1.{o}.{o}",
        "INFO  thumbnail job {id} done in {ms} ms",
    ];
    let trouble = [
        "WARN  ledger writer: queue of pending entries keeps growing, {n} waiting",
        "ERROR billing: every pooled database handle is checked out, caller {id} gave up",
        "ERROR uploads: the volume for tenant {n} has zero bytes free",
        "ERROR fx-rates: the quote feed at 10.4.{o}.{o} stopped answering, {ms} ms without reply",
        "WARN  scheduler: job {id} is waiting on a row held by job {n}",
        "ERROR notifier: the mail relay closed the link halfway through message {id}",
        "ERROR auth: the signing key presented by client {n} is no longer valid",
        "WARN  node agent: free memory under {n} MB on host slot {o}",
    ];
    let mut out = String::with_capacity(bytes + 256);
    let mut i: u64 = 0;
    while out.len() < bytes {
        i += 1;
        let second_half = out.len() > bytes / 2;
        let shape = if second_half && i.is_multiple_of(7) {
            trouble[(i / 7) as usize % trouble.len()]
        } else {
            routine[i as usize % routine.len()]
        };
        let line = shape
            .replace("{id}", &format!("{:08x}", i.wrapping_mul(2_654_435_761)))
            .replace("{n}", &(i % 997).to_string())
            .replace("{ms}", &(i % 313).to_string())
            .replace("{o}", &(i % 250).to_string());
        out.push_str(&format!(
            "2026-12-07T01:{:02}:{:02}.{:03}Z {line}\n",
            (i / 60_000) % 60,
            (i / 1000) % 60,
            i % 1000
        ));
    }
    out
}

fn main() -> anyhow::Result<()> {
    let mut mb = 20usize;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--mb" => mb = args.next().unwrap_or_default().parse()?,
            other => {
                anyhow::bail!("unknown argument {other}; usage: failure-modes-bench [--mb 20]")
            }
        }
    }
    incidentmind::startup::prepare();
    let t = Instant::now();
    let model = Arc::new(MiniLm::load(&default_dir())?);
    let build = Instant::now();
    let meanings = FailureModeMeanings::build(model, MeaningTuning::default())?;
    println!(
        "model loaded in {:.2} s; catalogue meanings embedded in {:.2} s (once, at start)",
        build.duration_since(t).as_secs_f64(),
        build.elapsed().as_secs_f64()
    );
    let log = synthetic_log(mb << 20);
    let t = Instant::now();
    let x = extract(EvidenceKind::Logs, &log);
    let extract_s = t.elapsed().as_secs_f64();
    println!(
        "{:.1} MB, {} lines, {} templates: extraction {:.2} s ({:.0} MB/s)",
        log.len() as f64 / 1e6,
        x.lines,
        x.templates,
        extract_s,
        log.len() as f64 / 1e6 / extract_s
    );
    for round in ["empty cache", "filled cache"] {
        let mut y = x.clone();
        let t = Instant::now();
        let tagged = meanings.tag_extraction(EvidenceKind::Logs, &mut y)?;
        println!(
            "fallback ({round}): +{:.2} s, {tagged} of {} observations tagged by meaning",
            t.elapsed().as_secs_f64(),
            y.observations.len() - 1
        );
    }
    Ok(())
}
