//! Evidence extraction benchmark: grouping accuracy (GA) on Loghub samples and log throughput.
//!
//! Usage: `cargo run --release --example evidence-bench -- [FILE [--structured FILE_structured.csv]
//! [--repeat-to-mb N]]`. With no FILE, runs every `*_2k.log` under `../shared/data/loghub` (or
//! `$INCIDENTMIND_SHARED_DATA/loghub`), printing lines, MB/s, templates and GA, then a throughput
//! run on a ~100 MB in-memory log built by repeating one sample.
//!
//! GA (Zhu et al., "Tools and Benchmarks for Automated Log Parsing", ICSE-SEIP 2019): a line is
//! correctly parsed when the set of lines in its predicted group equals the set of lines in its
//! ground-truth group (`EventId` column of the structured CSV).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use incidentmind::evidence::{LogExtractor, csv};

fn grouping_accuracy(pred: &[u32], truth: &[String]) -> f64 {
    let n = pred.len().min(truth.len());
    if n == 0 {
        return 0.0;
    }
    let mut pred_groups: HashMap<u32, Vec<usize>> = HashMap::new();
    let mut truth_groups: HashMap<&str, Vec<usize>> = HashMap::new();
    for i in 0..n {
        pred_groups.entry(pred[i]).or_default().push(i);
        truth_groups.entry(truth[i].as_str()).or_default().push(i);
    }
    let mut correct = 0usize;
    for members in truth_groups.values() {
        let p = pred[members[0]];
        if p != u32::MAX
            && members.iter().all(|&i| pred[i] == p)
            && pred_groups[&p].len() == members.len()
        {
            correct += members.len();
        }
    }
    correct as f64 / n as f64
}

fn truth_ids(structured: &Path) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(structured).ok()?;
    let recs = csv::records(&text);
    let (_, header) = recs.first()?;
    let col = header.iter().position(|h| h == "EventId")?;
    Some(
        recs[1..]
            .iter()
            .filter_map(|(_, f)| f.get(col).cloned())
            .collect(),
    )
}

struct RunResult {
    lines: u64,
    mbps: f64,
    templates: usize,
    ga: Option<f64>,
    format: String,
}

fn run(text: &str, truth: Option<&[String]>) -> RunResult {
    let t0 = Instant::now();
    let mut x = LogExtractor::new().record_template_ids(truth.is_some());
    for line in text.lines() {
        x.push_line(line);
    }
    let ids = x.template_ids();
    let e = x.finish();
    let secs = t0.elapsed().as_secs_f64();
    RunResult {
        lines: e.lines,
        mbps: text.len() as f64 / 1e6 / secs.max(1e-9),
        templates: e.templates,
        ga: truth.map(|t| grouping_accuracy(&ids, t)),
        format: e.format,
    }
}

fn throughput(sample: &str, mb: usize) {
    let mut big = String::with_capacity(mb * 1_000_000 + sample.len());
    while big.len() < mb * 1_000_000 {
        big.push_str(sample);
        if !sample.ends_with('\n') {
            big.push('\n');
        }
    }
    let r = run(&big, None);
    println!(
        "throughput: {:.1} MB in memory, {} lines, {} templates: {:.1} MB/s",
        big.len() as f64 / 1e6,
        r.lines,
        r.templates,
        r.mbps
    );
}

fn shared_dir() -> PathBuf {
    if let Ok(d) = std::env::var("INCIDENTMIND_SHARED_DATA") {
        return PathBuf::from(d);
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data")
}

fn main() {
    // Compile the signature catalogue once up front so timings show steady-state throughput.
    let _ = incidentmind::evidence::catalogue();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(file) = args.first().filter(|a| !a.starts_with("--")) {
        let mut structured = None;
        let mut repeat = None;
        let mut i = 1;
        while i < args.len() {
            match args[i].as_str() {
                "--structured" => {
                    structured = args.get(i + 1).cloned();
                    i += 1;
                }
                "--repeat-to-mb" => {
                    repeat = args.get(i + 1).and_then(|s| s.parse::<usize>().ok());
                    i += 1;
                }
                other => eprintln!("ignoring argument {other}"),
            }
            i += 1;
        }
        let text = std::fs::read(file)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_else(|e| {
                eprintln!("cannot read {file}: {e}");
                std::process::exit(2)
            });
        let truth = structured.and_then(|s| truth_ids(Path::new(&s)));
        let r = run(&text, truth.as_deref());
        println!(
            "{file}: {} lines, {:.1} MB/s, {} templates, format {}, GA {}",
            r.lines,
            r.mbps,
            r.templates,
            r.format,
            r.ga.map(|g| format!("{g:.4}"))
                .unwrap_or_else(|| "n/a".into())
        );
        if let Some(mb) = repeat {
            throughput(&text, mb);
        }
        return;
    }
    let dir = shared_dir().join("loghub");
    let mut entries: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_dir())
            .collect(),
        Err(e) => {
            eprintln!("no loghub data at {}: {e}", dir.display());
            std::process::exit(2);
        }
    };
    entries.sort();
    let mut sample_for_throughput = None;
    let mut min_ga = f64::INFINITY;
    println!(
        "{:<10} {:>6} {:>8} {:>9} {:>7}  format",
        "dataset", "lines", "MB/s", "templates", "GA"
    );
    for d in entries {
        let name = d
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        let log = d.join(format!("{name}_2k.log"));
        let Ok(bytes) = std::fs::read(&log) else {
            continue;
        };
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let truth = truth_ids(&d.join(format!("{name}_2k.log_structured.csv")));
        // First pass warms the regex caches; the second is reported (steady state).
        let _ = run(&text, None);
        let r = run(&text, truth.as_deref());
        println!(
            "{:<10} {:>6} {:>8.1} {:>9} {:>7}  {}",
            name,
            r.lines,
            r.mbps,
            r.templates,
            r.ga.map(|g| format!("{g:.4}"))
                .unwrap_or_else(|| "n/a".into()),
            r.format
        );
        if let Some(g) = r.ga {
            min_ga = min_ga.min(g);
        }
        if name == "HDFS" || sample_for_throughput.is_none() {
            sample_for_throughput = Some((name, text));
        }
    }
    if min_ga.is_finite() {
        println!("lowest GA: {min_ga:.4}");
    }
    if let Some((name, text)) = sample_for_throughput {
        print!("{name} repeated → ");
        throughput(&text, 100);
    }
}
