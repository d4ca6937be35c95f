//! Tests of the public evidence API: log pastes and notes here; metrics and alerts in
//! [`metrics_alerts`], learned layouts and hand-picked pastes in [`layouts`].

use super::*;

/// A file of `../shared/data`. Missing data skips the test locally, but fails it when `CI=true`
/// (CI always has the shared folder, so a skip there would hide a broken path).
fn shared(rel: &str) -> Option<String> {
    let path = format!("{}/../shared/data/{rel}", env!("CARGO_MANIFEST_DIR"));
    match std::fs::read(&path) {
        Ok(b) => Some(String::from_utf8_lossy(&b).into_owned()),
        Err(e) => {
            assert!(
                std::env::var("CI").map_or(true, |v| v != "true"),
                "{path} is missing and CI=true: the shared data must be there ({e})"
            );
            eprintln!("skipping: {path} not found");
            None
        }
    }
}

/// A file of our own `tests/data` (always in the repository).
fn own(rel: &str) -> String {
    let path = format!("{}/tests/data/{rel}", env!("CARGO_MANIFEST_DIR"));
    match std::fs::read(&path) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(e) => panic!("{path}: {e}"),
    }
}

const SNIPPET: &str = "\
2024-05-01T10:00:00Z INFO request served path=/cart in 12 ms
2024-05-01T10:00:01Z INFO request served path=/cart in 15 ms
2024-05-01T10:00:02Z ERROR Connection pool exhausted (waited 5000 ms)
2024-05-01T10:00:03Z INFO request served path=/cart in 9 ms
2024-05-01T10:00:04Z ERROR Connection pool exhausted (waited 5001 ms)
2024-05-01T10:00:05Z WARN retrying order 123 after timeout
2024-05-01T10:00:06Z ERROR Connection pool exhausted (waited 5002 ms)
";

#[test]
fn snippet_gives_expected_templates_and_counts() {
    let mut x = LogExtractor::new();
    for l in SNIPPET.lines() {
        x.push_line(l);
    }
    let t: Vec<(String, u64)> = x.templates().into_iter().map(|(_, t, c)| (t, c)).collect();
    assert_eq!(
        t,
        vec![
            ("request served path=/cart in <*> ms".to_string(), 3),
            ("Connection pool exhausted (waited <*> ms)".to_string(), 3),
            ("retrying order <*> after timeout".to_string(), 1),
        ]
    );
    let e = x.finish();
    assert_eq!((e.lines, e.templates, e.format.as_str()), (7, 3, "iso8601"));
    let summary = &e.observations[0];
    assert_eq!(
        summary.statement,
        "7 lines, 2024-05-01 10:00 → 10:00 UTC, 3 templates, 3 errors (iso8601)"
    );
    assert_eq!(summary.line_ranges, vec![LineRange { start: 1, end: 7 }]);
    assert!(
        summary
            .failure_modes
            .contains(&"connection_pool_exhausted".to_string())
    );
    let pool = &e.observations[1];
    assert!(
        pool.statement.starts_with("ERROR template seen 3 times")
            && pool
                .statement
                .ends_with(": Connection pool exhausted (waited <*> ms)"),
        "{}",
        pool.statement
    );
    assert_eq!(pool.count, 3);
    assert_eq!(pool.level.as_deref(), Some("error"));
    assert_eq!(
        pool.line_ranges,
        vec![
            LineRange { start: 3, end: 3 },
            LineRange { start: 5, end: 5 },
            LineRange { start: 7, end: 7 }
        ]
    );
    assert_eq!(
        pool.failure_modes,
        vec!["connection_pool_exhausted".to_string()]
    );
    assert_eq!(
        pool.first_seen,
        Some("2024-05-01T10:00:02Z".parse().unwrap())
    );
    assert_eq!(
        pool.last_seen,
        Some("2024-05-01T10:00:06Z".parse().unwrap())
    );
    assert_eq!(
        pool.example.as_deref(),
        Some("2024-05-01T10:00:02Z ERROR Connection pool exhausted (waited 5000 ms)")
    );
    // the WARN template with a timeout signature is surfaced; plain INFO is not
    assert_eq!(e.observations.len(), 3);
    assert!(
        e.observations[2]
            .statement
            .starts_with("WARN template seen once")
    );
    assert_eq!(e.observations[2].failure_modes, vec!["timeout".to_string()]);
    // same through extract()
    let e2 = extract(EvidenceKind::Logs, SNIPPET);
    assert_eq!(e2.observations[1..], e.observations[1..]);
    assert_eq!(e2.bytes, SNIPPET.len() as u64);
}

#[test]
fn late_and_rising_templates_are_surfaced() {
    let mut text = String::new();
    for i in 0..200 {
        text.push_str(&format!(
            "Jun 14 15:{:02}:{:02} web app[1]: heartbeat ok seq {i}\n",
            i / 60,
            i % 60
        ));
        if i >= 150 {
            text.push_str(&format!(
                "Jun 14 15:{:02}:{:02} web app[1]: upstream slow for order {i}\n",
                i / 60,
                i % 60
            ));
        }
        if i % 50 == 0 || i >= 180 {
            text.push_str(&format!(
                "Jun 14 15:{:02}:{:02} web app[1]: cache refresh {i}\n",
                i / 60,
                i % 60
            ));
        }
    }
    let e = extract(EvidenceKind::Logs, &text);
    let late = e
        .observations
        .iter()
        .find(|o| o.statement.ends_with("upstream slow for order <*>"))
        .expect("late template");
    assert!(
        late.statement.contains("only in the last"),
        "{}",
        late.statement
    );
    assert_eq!(late.count, 50);
    let rising = e
        .observations
        .iter()
        .find(|o| o.statement.ends_with("cache refresh <*>"))
        .expect("rising template");
    assert!(rising.statement.contains("rate ×"), "{}", rising.statement);
    assert!(
        !e.observations
            .iter()
            .any(|o| o.statement.ends_with("heartbeat ok seq <*>"))
    );
    assert!(
        e.observations
            .windows(2)
            .all(|w| w[0].salience >= w[1].salience)
    );
}

#[test]
fn huge_single_line_is_bounded() {
    let big = format!("2024-05-01T10:00:00Z ERROR {}", "x".repeat(5 * 1024 * 1024));
    let text = format!("{big}\n2024-05-01T10:00:01Z INFO fine\n");
    let t0 = std::time::Instant::now();
    let e = extract(EvidenceKind::Logs, &text);
    assert!(t0.elapsed().as_secs() < 5);
    assert_eq!(e.lines, 2);
    for o in &e.observations {
        assert!(
            o.example
                .as_ref()
                .is_none_or(|x| x.chars().count() <= MAX_EXAMPLE_CHARS)
        );
        assert!(o.statement.chars().count() < 1_000);
    }
    let mut x = LogExtractor::new();
    x.push_chunk(&big[..1_000_000]);
    x.push_chunk(&big[1_000_000..]);
    x.push_chunk("\nnext line\n");
    let e = x.finish();
    assert_eq!(e.lines, 2);
}

#[test]
fn template_count_is_capped() {
    let mut x = LogExtractor::new();
    for i in 0..(MAX_TEMPLATES + 500) {
        // distinct constant words, nothing to mask
        let w: String = format!("{i:x}")
            .chars()
            .map(|c| (b'g' + c.to_digit(16).unwrap() as u8) as char)
            .collect();
        x.push_line(&format!("{w} alpha{w} beta{w}"));
    }
    assert!(x.template_count() <= MAX_TEMPLATES);
    let e = x.finish();
    assert!(
        e.observations[0]
            .statement
            .contains("beyond the template cap"),
        "{}",
        e.observations[0].statement
    );
    assert!(e.observations.len() <= MAX_OBSERVATIONS);
}

#[test]
fn chunks_equal_lines() {
    let mut a = LogExtractor::with_year(2024);
    for l in SNIPPET.lines() {
        a.push_line(l);
    }
    let mut b = LogExtractor::with_year(2024);
    for chunk in SNIPPET.as_bytes().chunks(17) {
        b.push_chunk(std::str::from_utf8(chunk).unwrap());
    }
    assert_eq!(a.finish(), b.finish());
}

fn grouping_accuracy(pred: &[u32], truth: &[String]) -> f64 {
    use std::collections::HashMap;
    let mut p: HashMap<u32, usize> = HashMap::new();
    let mut t: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, id) in pred.iter().enumerate() {
        *p.entry(*id).or_default() += 1;
        t.entry(truth[i].as_str()).or_default().push(i);
    }
    let ok: usize = t
        .values()
        .filter(|m| m.iter().all(|&i| pred[i] == pred[m[0]]) && p[&pred[m[0]]] == m.len())
        .map(|m| m.len())
        .sum();
    ok as f64 / pred.len() as f64
}

#[test]
fn loghub_grouping_accuracy() {
    for (name, min) in [
        ("HDFS", 0.99),
        ("Apache", 0.9),
        ("OpenSSH", 0.9),
        ("Zookeeper", 0.9),
        ("Linux", 0.9),
    ] {
        let (Some(log), Some(st)) = (
            shared(&format!("loghub/{name}/{name}_2k.log")),
            shared(&format!("loghub/{name}/{name}_2k.log_structured.csv")),
        ) else {
            continue;
        };
        let recs = csv::records(&st);
        let col = recs[0].1.iter().position(|h| h == "EventId").unwrap();
        let truth: Vec<String> = recs[1..].iter().map(|(_, f)| f[col].clone()).collect();
        let mut x = LogExtractor::new().record_template_ids(true);
        for l in log.lines() {
            x.push_line(l);
        }
        let ga = grouping_accuracy(&x.template_ids(), &truth);
        assert!(ga >= min, "{name}: GA {ga} < {min}");
    }
}

#[test]
fn loghub_apache_observations() {
    let Some(log) = shared("loghub/Apache/Apache_2k.log") else {
        return;
    };
    let e = extract(EvidenceKind::Logs, &log);
    assert_eq!(e.format, "apache");
    assert_eq!(e.templates, 6);
    assert!(
        e.observations[0]
            .statement
            .starts_with("2,000 lines, 2005-12-04 04:47 → "),
        "{}",
        e.observations[0].statement
    );
    let err = e
        .observations
        .iter()
        .find(|o| {
            o.statement
                .contains("mod_jk child workerEnv in error state <*>")
        })
        .unwrap();
    assert_eq!(err.level.as_deref(), Some("error"));
    assert!(err.line_ranges.len() <= MAX_RANGES);
    assert!(err.line_ranges.windows(2).all(|w| w[0].end < w[1].start));
}

#[test]
fn kinds_parse_and_serialize() {
    for k in [
        EvidenceKind::Logs,
        EvidenceKind::Metrics,
        EvidenceKind::Alert,
        EvidenceKind::Note,
    ] {
        assert_eq!(EvidenceKind::parse(k.as_str()), Some(k));
        assert_eq!(
            serde_json::to_string(&k).unwrap(),
            format!("\"{}\"", k.as_str())
        );
    }
    assert_eq!(EvidenceKind::parse("LOG"), Some(EvidenceKind::Logs));
    assert_eq!(EvidenceKind::parse("bogus"), None);
    let e = extract(EvidenceKind::Logs, SNIPPET);
    let back: Extraction = serde_json::from_str(&serde_json::to_string(&e).unwrap()).unwrap();
    assert_eq!(back, e);
}

#[test]
fn note_gets_tags() {
    let e = extract(
        EvidenceKind::Note,
        "Checkout pods in CrashLoopBackOff right after the deploy; DB says too many connections",
    );
    assert_eq!(e.observations.len(), 1);
    let tags = &e.observations[0].failure_modes;
    assert!(
        tags.contains(&"crash_loop_backoff".to_string())
            && tags.contains(&"too_many_connections".to_string()),
        "{tags:?}"
    );
    assert_eq!(e.format, "note");
}

mod layouts;
mod metrics_alerts;
