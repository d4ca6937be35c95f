//! Tests of the public evidence API (logs, metrics, alerts, notes).
//!
//! A tests file: long because it covers every evidence kind through the public API.

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

// ---------- metrics ----------

fn series(f: impl Fn(f64) -> f64) -> Vec<(f64, f64)> {
    (0..20).map(|i| (i as f64 * 60.0, f(i as f64))).collect()
}

#[test]
fn trends_are_classified() {
    use metrics::{Trend, classify};
    assert_eq!(classify(&series(|i| 100.0 + (i % 2.0))).0, Trend::Flat);
    let (t, slope) = classify(&series(|i| 10.0 + 5.0 * i));
    assert_eq!(t, Trend::Climbing);
    assert!((slope - 5.0 / 60.0).abs() < 1e-9);
    assert_eq!(
        classify(&series(|i| 200.0 - 7.0 * i + (i % 3.0))).0,
        Trend::Falling
    );
    assert_eq!(
        classify(&series(|i| if i == 12.0 {
            900.0
        } else {
            50.0 + (i % 2.0)
        }))
        .0,
        Trend::Spike
    );
    assert_eq!(
        classify(&series(|i| if i < 10.0 {
            20.0 + (i % 2.0)
        } else {
            80.0 + (i % 2.0)
        }))
        .0,
        Trend::Step
    );
    assert_eq!(
        classify(&series(|i| 50.0 + 20.0 * ((i * 7.0) % 5.0 - 2.0))).0,
        Trend::Flat
    );
    assert_eq!(classify(&[(0.0, 1.0), (1.0, 5.0)]).0, Trend::Flat);
}

fn prom_scrapes(rate: impl Fn(f64) -> f64, wait: impl Fn(f64) -> f64) -> String {
    let mut s =
        String::from("# TYPE http_requests_total counter\n# TYPE db_pool_wait_seconds gauge\n");
    let mut total = 0.0;
    for i in 0..12 {
        let ts = 1_714_557_600_000i64 + i * 60_000;
        total += rate(i as f64) * 60.0;
        s.push_str(&format!(
            "http_requests_total{{service=\"checkout\",code=\"200\"}} {total} {ts}\n"
        ));
        s.push_str(&format!(
            "db_pool_wait_seconds{{pool=\"main\"}} {} {ts}\n",
            wait(i as f64)
        ));
    }
    s
}

#[test]
fn leak_like_pair() {
    let text = prom_scrapes(|_| 120.0, |i| 0.05 + 0.4 * i);
    let e = extract(EvidenceKind::Metrics, &text);
    assert_eq!((e.format.as_str(), e.templates), ("prometheus-text", 2));
    let top = &e.observations[0];
    assert_eq!(top.failure_modes, vec!["connection_leak".to_string()]);
    assert!(
        top.statement
            .starts_with("Leak-like: db_pool_wait_seconds{pool=\"main\"} climbs"),
        "{}",
        top.statement
    );
    assert!(
        !e.observations
            .iter()
            .any(|o| o.failure_modes.contains(&"traffic_surge".to_string()))
    );
    let rate = e
        .observations
        .iter()
        .find(|o| o.statement.starts_with("http_requests_total"))
        .unwrap();
    assert!(
        rate.statement.contains("rate flat at ~120/s"),
        "{}",
        rate.statement
    );
    assert_eq!(
        rate.first_seen,
        Some("2024-05-01T10:00:00Z".parse().unwrap())
    );
    let wait = e
        .observations
        .iter()
        .find(|o| o.statement.starts_with("db_pool_wait_seconds"))
        .unwrap();
    assert!(
        wait.statement.contains("value climbing from 0.05 to 4.45"),
        "{}",
        wait.statement
    );
    assert_eq!(wait.line_ranges.len(), 12);
}

#[test]
fn load_driven_pair() {
    let text = prom_scrapes(|i| 100.0 + 40.0 * i, |i| 0.05 + 0.4 * i);
    let e = extract(EvidenceKind::Metrics, &text);
    let top = &e.observations[0];
    assert_eq!(top.failure_modes, vec!["traffic_surge".to_string()]);
    assert!(
        top.statement.starts_with("Load-driven:"),
        "{}",
        top.statement
    );
    assert!(
        !e.observations
            .iter()
            .any(|o| o.failure_modes.contains(&"connection_leak".to_string()))
    );
}

#[test]
fn flat_wait_gives_no_pair() {
    let e = extract(
        EvidenceKind::Metrics,
        &prom_scrapes(|_| 120.0, |i| 0.05 + 0.001 * (i % 2.0)),
    );
    assert!(e.observations.iter().all(|o| o.failure_modes.is_empty()));
}

#[test]
fn prometheus_json_and_csv() {
    let json = r#"{"status":"success","data":{"resultType":"matrix","result":[
        {"metric":{"__name__":"hikaricp_connections_active","pool":"orders"},"values":[[1714557600,"2"],[1714557660,"4"],[1714557720,"6"],[1714557780,"8"],[1714557840,"10"]]},
        {"metric":{"__name__":"rps","service":"orders"},"values":[[1714557600,"50"],[1714557660,"50"],[1714557720,"51"],[1714557780,"50"],[1714557840,"50"]]}]}}"#;
    let e = extract(EvidenceKind::Metrics, json);
    assert_eq!((e.format.as_str(), e.templates), ("prometheus-json", 2));
    assert_eq!(
        e.observations[0].failure_modes,
        vec!["connection_leak".to_string()]
    );

    let long = "timestamp,series,value\n2024-05-01T10:00:00Z,latency_p99_ms,100\n2024-05-01T10:01:00Z,latency_p99_ms,101\n2024-05-01T10:02:00Z,latency_p99_ms,99\n2024-05-01T10:03:00Z,latency_p99_ms,100\n2024-05-01T10:04:00Z,latency_p99_ms,100\n2024-05-01T10:05:00Z,latency_p99_ms,1500\n2024-05-01T10:06:00Z,latency_p99_ms,100\n";
    let e = extract(EvidenceKind::Metrics, long);
    assert_eq!((e.format.as_str(), e.templates), ("csv-long", 1));
    assert!(
        e.observations[0].statement.contains("spiked to 1500"),
        "{}",
        e.observations[0].statement
    );

    let wide = "time,qps,queue_depth\n1714557600,10,5\n1714557660,10,5\n1714557720,10,5\n1714557780,10,50\n1714557840,10,50\n1714557900,10,50\n";
    let e = extract(EvidenceKind::Metrics, wide);
    assert_eq!((e.format.as_str(), e.templates), ("csv-wide", 2));
    let q = e
        .observations
        .iter()
        .find(|o| o.statement.starts_with("queue_depth"))
        .unwrap();
    assert!(
        q.statement.contains("stepped up from ~5 to ~50"),
        "{}",
        q.statement
    );
    assert!(
        e.observations
            .iter()
            .any(|o| o.failure_modes == vec!["connection_leak".to_string()])
    );
    assert_eq!(
        metrics::role("http_request_duration_seconds"),
        metrics::Role::Pressure
    );
    assert_eq!(
        metrics::role("http_requests_total"),
        metrics::Role::RequestRate
    );
    assert_eq!(
        metrics::role("node_cpu_seconds_total"),
        metrics::Role::Other
    );

    let e = extract(EvidenceKind::Metrics, "nothing numeric here\n");
    assert_eq!(e.observations.len(), 1);
    assert!(e.observations[0].statement.starts_with("No metric samples"));
}

// ---------- alerts ----------

#[test]
fn alert_samples() {
    let cases: &[(&str, &str, usize, &[&str])] = &[
        (
            "alertmanager_v4_firing.captured.json",
            "alertmanager",
            2,
            &["firing", "firing"],
        ),
        (
            "alertmanager_v4_resolved.captured.json",
            "alertmanager",
            2,
            &["resolved", "resolved"],
        ),
        (
            "grafana_alerting_webhook.official.json",
            "grafana",
            2,
            &["firing", "firing"],
        ),
        (
            "pagerduty_v3_incident_priority_updated.official.json",
            "pagerduty-v3",
            1,
            &["triggered"],
        ),
        (
            "pagerduty_v3_service_updated.official.json",
            "pagerduty-v3",
            1,
            &["updated"],
        ),
        (
            "opsgenie_webhook_create.official.json",
            "opsgenie",
            1,
            &["open"],
        ),
        (
            "alertmanager_capture_input_alerts.json",
            "alertmanager-api",
            2,
            &["firing", "firing"],
        ),
    ];
    for (file, format, n, statuses) in cases {
        let Some(text) = shared(&format!("alerts/{file}")) else {
            continue;
        };
        let (f, alerts) = alerts::parse_alerts(&text);
        assert_eq!(f, *format, "{file}");
        assert_eq!(alerts.len(), *n, "{file}");
        let got: Vec<&str> = alerts.iter().map(|a| a.status.as_str()).collect();
        assert_eq!(got, *statuses, "{file}");
        let e = extract(EvidenceKind::Alert, &text);
        assert_eq!(e.observations.len(), *n, "{file}");
        assert_eq!(e.format, *format);
    }
}

#[test]
fn alert_details() {
    let Some(text) = shared("alerts/alertmanager_v4_firing.captured.json") else {
        return;
    };
    let e = extract(EvidenceKind::Alert, &text);
    let o = &e.observations[0];
    assert!(o.statement.starts_with("Alert HighErrorRate firing (critical) since 2026-11-29 14:46 UTC: checkout 5xx ratio above 5% for 5m"), "{}", o.statement);
    assert_eq!(o.last_seen, None, "zero endsAt means still firing");
    assert_eq!(o.first_seen, Some("2026-11-29T14:46:36Z".parse().unwrap()));
    assert!(
        o.failure_modes.contains(&"error_rate_high".to_string()),
        "{:?}",
        o.failure_modes
    );
    assert_eq!(o.line_ranges, vec![LineRange { start: 5, end: 24 }]);
    assert_eq!(
        e.observations[1].line_ranges,
        vec![LineRange { start: 25, end: 44 }]
    );

    if let Some(text) = shared("alerts/alertmanager_v4_resolved.captured.json") {
        let e = extract(EvidenceKind::Alert, &text);
        assert_eq!(
            e.observations[0].last_seen,
            Some("2026-11-29T14:49:42Z".parse().unwrap())
        );
    }
    if let Some(text) = shared("alerts/opsgenie_webhook_create.official.json") {
        let (_, a) = alerts::parse_alerts(&text);
        assert_eq!(a[0].name, "test alert");
        assert_eq!(a[0].starts_at, Some(1_420_452_191_104_000_000));
    }
    if let Some(text) = shared("alerts/grafana_alerting_webhook.official.json") {
        let e = extract(EvidenceKind::Alert, &text);
        let mem = e
            .observations
            .iter()
            .find(|o| o.statement.contains("High memory usage"))
            .unwrap();
        assert_eq!(
            mem.first_seen,
            Some("2021-10-12T07:51:03.157076Z".parse().unwrap())
        );
        assert!(mem.failure_modes.contains(&"memory_pressure".to_string()));
    }
    if let Some(text) = shared("alerts/pagerduty_v3_incident_priority_updated.official.json") {
        let (_, a) = alerts::parse_alerts(&text);
        assert_eq!(a[0].name, "A little bump in the road");
        assert_eq!(a[0].severity.as_deref(), Some("P1"));
    }
    let e = extract(
        EvidenceKind::Alert,
        "DiskFull on db-1: no space left on device",
    );
    assert_eq!(
        e.observations[0].failure_modes,
        vec!["disk_full".to_string()]
    );
}

#[test]
fn a_short_hand_picked_paste_keeps_every_line_without_a_level() {
    let paste = "partner API says HTTP 429 with Retry-After: 45\n\
                 we send ~140 calls/s to the geocoder, quota is 40/s\n\
                 importer threads bumped 2 -> 12 at 07:15 for the backlog\n";
    let e = extract(EvidenceKind::Logs, paste);
    assert_eq!(e.observations[0].salience, SUMMARY_SALIENCE);
    let lines: Vec<&str> = e.observations[1..]
        .iter()
        .filter_map(|o| o.example.as_deref())
        .collect();
    assert_eq!(lines.len(), 3, "{:#?}", e.observations);
    assert!(lines.contains(&"we send ~140 calls/s to the geocoder, quota is 40/s"));
    let throttled = e.observations[1..]
        .iter()
        .find(|o| o.example.as_deref().is_some_and(|x| x.contains("429")))
        .expect("the 429 line");
    assert_eq!(throttled.failure_modes, vec!["rate_limited".to_string()]);

    // The same lines in a long log are not all surfaced: only what matters is.
    let long: String = paste.to_string()
        + &(0..40)
            .map(|i| format!("routine line number {i} ok\n"))
            .collect::<String>();
    let e = extract(EvidenceKind::Logs, &long);
    assert!(
        e.observations.iter().all(|o| o
            .example
            .as_deref()
            .is_none_or(|x| !x.contains("calls/s to the geocoder"))),
        "{:#?}",
        e.observations
    );
}

/// (event ids, templates) of a `LineId,EventId,EventTemplate` file.
fn labels(csv_text: &str) -> (Vec<String>, Vec<String>) {
    let recs = csv::records(csv_text);
    let id = recs[0].1.iter().position(|h| h == "EventId").unwrap();
    let tpl = recs[0].1.iter().position(|h| h == "EventTemplate").unwrap();
    recs[1..]
        .iter()
        .map(|(_, f)| (f[id].clone(), f[tpl].clone()))
        .unzip()
}

#[test]
fn our_own_samples_without_a_known_layout_are_grouped_like_the_labels() {
    for name in [
        "nginx_error",
        "spring_boot",
        "go_zap",
        "openstack_nova",
        "spark_executor",
    ] {
        let log = own(&format!("{name}.log"));
        let (truth, _) = labels(&own(&format!("{name}.templates.csv")));
        assert!(truth.len() >= 300, "{name}: {} labelled lines", truth.len());
        let mut x = LogExtractor::new().record_template_ids(true);
        for l in log.lines() {
            x.push_line(l);
        }
        let ga = grouping_accuracy(&x.template_ids(), &truth);
        let e = x.finish();
        assert!(ga >= 0.95, "{name}: GA {ga} < 0.95");
        assert_ne!(e.format, "plain", "{name}");
    }
}

#[test]
fn an_unknown_header_is_learned_and_its_time_and_level_kept() {
    let mut text = String::new();
    for i in 0..60u32 {
        let level = if i % 10 == 7 { "ERROR" } else { "INFO" };
        let msg = if i % 10 == 7 {
            format!("flush of segment {} failed: disk quota exceeded", 900 + i)
        } else {
            format!("segment {} sealed after {} writes", 900 + i, 3 * i)
        };
        text.push_str(&format!(
            "- {} 2026.03.{:02} store-{}.rack{} {level} {msg}\n",
            1_773_000_000 + i * 60,
            1 + i / 30,
            i % 4,
            i % 2
        ));
    }
    let mut x = LogExtractor::new();
    for l in text.lines() {
        x.push_line(l);
    }
    let t: Vec<(String, u64)> = x.templates().into_iter().map(|(_, t, c)| (t, c)).collect();
    assert_eq!(
        t,
        vec![
            ("segment <*> sealed after <*> writes".to_string(), 54),
            (
                "flush of segment <*> failed: disk quota exceeded".to_string(),
                6
            ),
        ]
    );
    let e = x.finish();
    assert_eq!(e.format, "learned");
    let err = e
        .observations
        .iter()
        .find(|o| o.statement.contains("disk quota"))
        .expect("the error template");
    assert_eq!(err.level.as_deref(), Some("error"));
    assert_eq!(
        err.first_seen,
        Some(jiff::Timestamp::from_second(1_773_000_000 + 7 * 60).unwrap())
    );
}

#[test]
fn two_interleaved_unknown_formats_are_both_learned() {
    let mut text = String::new();
    for i in 0..50u32 {
        text.push_str(&format!(
            "[03.{:02} 09:{:02}:11] sync-agent.exe - uploaded {} files to bucket-{}\n",
            1 + i % 28,
            i,
            i * 3,
            i % 5
        ));
        text.push_str(&format!(
            "20260317-09:{:02}:11:{:03}|Queue_Mgr|{}|drained queue after {} ms\n",
            i,
            i * 7,
            5000 + i,
            i * 11
        ));
    }
    let mut x = LogExtractor::new().record_template_ids(true);
    for l in text.lines() {
        x.push_line(l);
    }
    let ids = x.template_ids();
    let truth: Vec<String> = (0..ids.len()).map(|i| (i % 2).to_string()).collect();
    assert_eq!(grouping_accuracy(&ids, &truth), 1.0);
    let t: Vec<String> = x.templates().into_iter().map(|(_, t, _)| t).collect();
    assert_eq!(
        t,
        vec![
            "uploaded <*> files to <*>".to_string(),
            "drained queue after <*> ms".to_string()
        ]
    );
    assert_eq!(x.finish().format, "learned");
}

#[test]
fn a_known_layout_mixed_with_an_unknown_one_keeps_both() {
    let mut text = String::new();
    for i in 0..40u32 {
        text.push_str(&format!(
            "Mar 17 09:{:02}:01 web-{} cron[{}]: job {} started\n",
            i % 60,
            i % 3,
            100 + i,
            i
        ));
        text.push_str(&format!(
            "17/03/26 09:{:02}:02 WARN pool.Monitor: pool {} has {} idle workers\n",
            i % 60,
            i % 4,
            i
        ));
    }
    let e = extract(EvidenceKind::Logs, &text);
    assert_eq!(e.templates, 2, "{:#?}", e.observations);
    assert_eq!(e.format, "mixed");
    let warn = e
        .observations
        .iter()
        .find(|o| o.statement.contains("idle workers"))
        .expect("the warn template");
    assert_eq!(warn.level.as_deref(), Some("warn"));
    assert!(
        warn.statement.ends_with(": pool <*> has <*> idle workers"),
        "{}",
        warn.statement
    );
}

#[test]
fn odd_bytes_in_headers_and_messages_never_panic() {
    let parts = [
        "[",
        "]",
        "\"",
        "'",
        "=\"",
        "é",
        "日本",
        "2026-11-29",
        "10:00:00",
        "|",
        "::",
        "[::1]:",
        "(",
        ")",
        "<*>",
        "Jun",
        "17",
        "2026.11.29",
        "17/11/29",
        "-",
        "ERROR",
        "x=",
        "\u{feff}",
        "\t",
        "{\"k\":",
        "0x1f",
        "/a/b/",
        "ü:",
        "I",
        "[ 1.000000]",
    ];
    let mut seed = 7u64;
    let mut next = || {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        (seed >> 33) as usize
    };
    let mut text = String::new();
    for _ in 0..600 {
        let n = 1 + next() % 12;
        for k in 0..n {
            if k > 0 && next() % 3 > 0 {
                text.push(' ');
            }
            text.push_str(parts[next() % parts.len()]);
        }
        text.push('\n');
    }
    let e = extract(EvidenceKind::Logs, &text);
    assert_eq!(e.lines, 600);
    let lines: Vec<&str> = text.lines().collect();
    for l in header::learn(&lines, false) {
        for line in &lines {
            if let Some(a) = l.apply(line) {
                assert!(line.is_char_boundary(a.content));
            }
        }
    }
}

#[test]
fn observations_left_out_by_the_cap_are_counted_in_the_summary() {
    let mut text = String::new();
    for n in 1..=40 {
        let words: Vec<String> = (0..n).map(|i| format!("step{i}")).collect();
        text.push_str(&format!(
            "2026-12-01T10:00:00Z ERROR payment failed at {}\n",
            words.join(" ")
        ));
    }
    let x = extract(EvidenceKind::Logs, &text);
    assert_eq!(x.observations.len(), MAX_OBSERVATIONS);
    let summary = &x.observations[0].statement;
    assert!(
        summary.contains("16 more flagged templates not shown (the 24 most salient are kept)"),
        "{summary}"
    );
}

#[test]
fn the_shape_cache_changes_no_grouping() {
    // digits of other lengths, embedded dates, hex ids and ports: every grouping decision that
    // reads digits, with the shape cache on and off
    let mut text = String::new();
    for i in 0..300u32 {
        let line = match i % 5 {
            0 => format!(
                "1{} run-{} flushed {} pages to disk{}",
                i,
                i % 7,
                i * 13,
                i % 3
            ),
            1 => format!(
                "2026-03-{:02} 10:{:02}:00 lease {:x} renewed until Mar {} 2027",
                1 + i % 28,
                i % 60,
                i * 977,
                1 + i % 28
            ),
            2 => format!(
                "peer 10.{}.0.{}:{} closed after {} ms",
                i % 200,
                i % 250,
                1000 + i,
                i
            ),
            3 => format!("ssh{} session {} opened by uid={}", i % 3, i, i % 2),
            _ => format!(
                "task {} state {} at 1{}:{}:{}",
                i,
                ["queued", "running"][i as usize % 2],
                i % 10,
                10 + i % 50,
                10 + i % 49
            ),
        };
        text.push_str(&line);
        text.push('\n');
    }
    let ids = |on: bool| {
        let mut x = LogExtractor::with_year(2026)
            .shape_cache(on)
            .record_template_ids(true);
        for l in text.lines() {
            x.push_line(l);
        }
        let ids = x.template_ids();
        let names: std::collections::HashMap<u32, String> =
            x.templates().into_iter().map(|(i, t, _)| (i, t)).collect();
        ids.iter().map(|i| names[i].clone()).collect::<Vec<_>>()
    };
    assert_eq!(ids(true), ids(false));
}

#[test]
fn a_series_that_starts_at_zero_says_from_zero_not_plus_zero_percent() {
    let text = prom_scrapes(|_| 120.0, |i| 1.1 * i);
    let e = extract(EvidenceKind::Metrics, &text);
    let wait = e
        .observations
        .iter()
        .find(|o| o.statement.starts_with("db_pool_wait_seconds"))
        .expect("the climbing series is read");
    assert!(
        wait.statement.contains("climbing from 0 to") && wait.statement.contains("(from zero, "),
        "{}",
        wait.statement
    );
    for o in &e.observations {
        assert!(!o.statement.contains("+0%"), "{}", o.statement);
    }
}
