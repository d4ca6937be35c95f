//! Tests of metric and alert evidence through the public API.

use super::*;

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

/// A pressure series and the request rate that decides it, both on the answer's one line:
/// the derived observation cites that line once.
#[test]
fn a_pair_read_from_one_line_cites_it_once() {
    let json = r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"__name__":"queue_wait_seconds","pool":"jobs"},"values":[[1714557600,"1"],[1714557660,"2"],[1714557720,"3"],[1714557780,"4"],[1714557840,"5"]]},{"metric":{"__name__":"request_rate","service":"jobs"},"values":[[1714557600,"30"],[1714557660,"30"],[1714557720,"30"],[1714557780,"30"],[1714557840,"30"]]}]}}"#;
    let e = extract(EvidenceKind::Metrics, json);
    let derived = e
        .observations
        .iter()
        .find(|o| o.failure_modes == vec!["connection_leak".to_string()])
        .expect("a leak-like observation");
    assert_eq!(
        derived.line_ranges,
        vec![crate::evidence::LineRange { start: 1, end: 1 }]
    );
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

/// A Prometheus API matrix of one series named `name` with `values` (as Prometheus writes them).
fn matrix(name: &str, values: &[&str]) -> String {
    let pairs: Vec<serde_json::Value> = values
        .iter()
        .enumerate()
        .map(|(i, v)| serde_json::json!([1_764_000_000 + 60 * i as i64, v]))
        .collect();
    serde_json::json!({"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"__name__": name}, "values": pairs}
    ]}})
    .to_string()
}

/// NaN and ±Inf points are counted and said, not dropped without a word (issue #57, 7): a p99
/// alternating 1 and +Inf is above the largest bucket half the time, not "flat at ~1"; an
/// all-NaN series has no value, not "flat at ~0 (0 points)".
#[test]
fn nan_and_infinite_points_are_counted_and_said() {
    let p99 =
        "histogram_quantile(0.99, sum by (le) (rate(http_request_duration_seconds_bucket[5m])))";
    let alternating: Vec<&str> = (0..10)
        .map(|i| if i % 2 == 0 { "1" } else { "+Inf" })
        .collect();
    let e = extract(EvidenceKind::Metrics, &matrix(p99, &alternating));
    let s = &e.observations[0].statement;
    assert!(
        s.contains("5 of 10 points +Inf: the quantile was above the largest bucket"),
        "{s}"
    );
    assert!(s.contains("over its finite points"), "{s}");

    let e = extract(EvidenceKind::Metrics, &matrix("queue_ratio", &["NaN"; 6]));
    let s = &e.observations[0].statement;
    assert!(
        s.contains("no finite value: 6 of 6 points NaN (no value)"),
        "{s}"
    );
    assert!(!s.contains("flat at"), "{s}");

    let e = extract(
        EvidenceKind::Metrics,
        &matrix("error_ratio", &["0.5", "NaN", "0.5", "-Inf", "0.5"]),
    );
    let s = &e.observations[0].statement;
    assert!(
        s.contains("1 of 5 points -Inf; 1 of 5 points NaN (no value)"),
        "{s}"
    );
    // A series without odd points reads as before.
    let e = extract(EvidenceKind::Metrics, &matrix("error_ratio", &["0.5"; 5]));
    assert!(!e.observations[0].statement.contains("points NaN"));
}
