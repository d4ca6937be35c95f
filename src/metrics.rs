//! Prometheus metrics: [`Metrics`], one recorder per [`crate::AppState`] (no global
//! recorder, so every app in a test process counts only its own requests), and what it records:
//! HTTP requests, webhook deliveries, recall, model calls (`analyst::metered::MeteredAnalyst`), and the gauges
//! computed from the database at each scrape ([`Gauges`]). Rendered in the Prometheus text
//! exposition format (version 0.0.4) by `GET /metrics` (`web::ops::metrics`).
//!
//! Metric names follow the Prometheus naming practices: `incidentmind_` prefix, base units
//! (seconds), `_total` on counters.

use std::sync::Arc;
use std::time::Duration;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle, PrometheusRecorder};

/// Histogram buckets of the latency families, in seconds (5 ms … 60 s).
pub const LATENCY_BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0,
];

/// Histogram buckets of `incidentmind_recall_results`, in records.
pub const RESULT_BUCKETS: [f64; 7] = [0.0, 1.0, 3.0, 5.0, 10.0, 20.0, 50.0];

/// `Content-Type` of the Prometheus text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The app's metrics: a local Prometheus recorder and the handle that renders it. Cloning
/// shares the same recorder.
#[derive(Clone)]
pub struct Metrics {
    recorder: Arc<PrometheusRecorder>,
    handle: PrometheusHandle,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// What the database says at a scrape, set as gauges before rendering.
#[derive(Debug, Clone, Default)]
pub struct Gauges {
    /// Incidents not yet learned: `(state, severity, count)`, every combination (0 included).
    pub open_incidents: Vec<(&'static str, &'static str, i64)>,
    /// Memory records by kind: `(kind, count)`, every kind (0 included).
    pub records_by_kind: Vec<(&'static str, i64)>,
    /// Entries in the append-only audit log.
    pub audit_entries: i64,
    /// Durable records without a vector of the current embedding model (0 without one).
    pub embedding_backlog: i64,
}

impl Metrics {
    /// A fresh recorder with histogram buckets [`LATENCY_BUCKETS`] for the latency families,
    /// [`RESULT_BUCKETS`] for recall results, and
    /// the help text of every family.
    pub fn new() -> Self {
        use metrics_exporter_prometheus::Matcher;
        // Only an empty bucket list is refused; ours are not.
        let builder = PrometheusBuilder::new()
            .set_buckets(&LATENCY_BUCKETS)
            .and_then(|b| {
                b.set_buckets_for_metric(
                    Matcher::Full("incidentmind_recall_results".into()),
                    &RESULT_BUCKETS,
                )
            })
            .unwrap_or_else(|_| PrometheusBuilder::new());
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        let metrics = Self {
            recorder: Arc::new(recorder),
            handle,
        };
        metrics.with(|| {
            use metrics_rs::{Unit, describe_counter, describe_gauge, describe_histogram};
            describe_counter!(
                "incidentmind_http_requests_total",
                "HTTP requests answered, by method, route pattern and status"
            );
            describe_histogram!(
                "incidentmind_http_request_duration_seconds",
                Unit::Seconds,
                "Time to answer an HTTP request, by method, route pattern and status"
            );
            describe_counter!(
                "incidentmind_webhook_deliveries_total",
                "Alert webhook deliveries by source and outcome (opened, updated, duplicate, \
                 ignored, rejected)"
            );
            describe_histogram!(
                "incidentmind_recall_duration_seconds",
                Unit::Seconds,
                "Time of a recall query (GET /api/v1/recall and the memory page search)"
            );
            describe_histogram!(
                "incidentmind_recall_results",
                Unit::Count,
                "Records a recall returned, by origin (search, investigation)"
            );
            describe_counter!(
                "incidentmind_model_calls_total",
                "Calls to the model analyst by operation and outcome (ok, fallback)"
            );
            describe_counter!(
                "incidentmind_metrics_upkeeps_total",
                "Folds of recorded histogram samples into their buckets by the upkeep task"
            );
            describe_counter!(
                "incidentmind_model_fallbacks_total",
                "Model calls whose result was replaced by the built-in one, by operation and \
                 reason (timeout, transport, invalid_output, unusable)"
            );
            describe_gauge!(
                "incidentmind_incidents_open",
                "Incidents not yet learned, by state and severity"
            );
            describe_gauge!(
                "incidentmind_memory_records",
                "Organizational memory records by kind"
            );
            describe_gauge!(
                "incidentmind_audit_log_entries",
                "Entries in the append-only audit log"
            );
            describe_gauge!(
                "incidentmind_embedding_backlog",
                "Durable memory records still waiting for an embedding"
            );
        });
        metrics
    }

    /// Every `period` until `stop` turns true, folds the histogram samples recorded since the
    /// last fold into their buckets ([`PrometheusHandle::run_upkeep`]).
    ///
    /// metrics-exporter-prometheus keeps each histogram's raw samples in a buffer until an
    /// upkeep or a render drains it, and a recorder made by `build_recorder` (ours: one per
    /// app, not global) gets no upkeep task of its own. Without this, a server nobody scrapes
    /// keeps every request's latency sample: its heap grows with the request count (seen in
    /// `soak-bench`; the same cause as metrics-rs/metrics#467).
    pub async fn upkeep(self, period: Duration, mut stop: tokio::sync::watch::Receiver<bool>) {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            if *stop.borrow() {
                return;
            }
            tokio::select! {
                _ = tick.tick() => {
                    self.handle.run_upkeep();
                    self.with(|| metrics_rs::counter!("incidentmind_metrics_upkeeps_total").increment(1));
                }
                changed = stop.changed() => if changed.is_err() { return },
            }
        }
    }

    fn with<T>(&self, f: impl FnOnce() -> T) -> T {
        metrics_rs::with_local_recorder(self.recorder.as_ref(), f)
    }

    /// One HTTP request answered: `route` is the matched route pattern (`/incidents/{id}`), or
    /// `unmatched` for the 404 fallback, so raw paths never become labels.
    pub fn http_request(&self, method: &str, route: &str, status: u16, took: Duration) {
        let labels = [
            ("method", method.to_string()),
            ("route", route.to_string()),
            ("status", status.to_string()),
        ];
        self.with(|| {
            metrics_rs::counter!("incidentmind_http_requests_total", &labels).increment(1);
            metrics_rs::histogram!("incidentmind_http_request_duration_seconds", &labels)
                .record(took.as_secs_f64());
        });
    }

    /// One webhook delivery of `source` (`alertmanager`, …) with its `outcome`.
    pub fn webhook_delivery(&self, source: &'static str, outcome: &'static str) {
        self.with(|| {
            metrics_rs::counter!("incidentmind_webhook_deliveries_total",
                "source" => source, "outcome" => outcome)
            .increment(1);
        });
    }

    /// One recall query that took `took` (when timed) and returned `results` records; `origin`
    /// is `search` (the recall API and page) or `investigation`.
    pub fn recall(&self, origin: &'static str, took: Option<Duration>, results: usize) {
        self.with(|| {
            if let Some(took) = took {
                metrics_rs::histogram!("incidentmind_recall_duration_seconds", "origin" => origin)
                    .record(took.as_secs_f64());
            }
            metrics_rs::histogram!("incidentmind_recall_results", "origin" => origin)
                .record(results as f64);
        });
    }

    /// One model call for `operation` (`investigate`, `postmortem`); `fallback` is the reason
    /// its result was not used, if so.
    pub fn model_call(&self, operation: &'static str, fallback: Option<&'static str>) {
        self.with(|| {
            let outcome = if fallback.is_some() { "fallback" } else { "ok" };
            metrics_rs::counter!("incidentmind_model_calls_total",
                "operation" => operation, "outcome" => outcome)
            .increment(1);
            if let Some(reason) = fallback {
                metrics_rs::counter!("incidentmind_model_fallbacks_total",
                    "operation" => operation, "reason" => reason)
                .increment(1);
            }
        });
    }

    /// Sets the scrape-time gauges from `g` and renders every family in the Prometheus text
    /// exposition format.
    pub fn render(&self, g: &Gauges) -> String {
        self.with(|| {
            for (state, severity, n) in &g.open_incidents {
                metrics_rs::gauge!("incidentmind_incidents_open",
                    "state" => *state, "severity" => *severity)
                .set(*n as f64);
            }
            for (kind, n) in &g.records_by_kind {
                metrics_rs::gauge!("incidentmind_memory_records", "kind" => *kind).set(*n as f64);
            }
            metrics_rs::gauge!("incidentmind_audit_log_entries").set(g.audit_entries as f64);
            metrics_rs::gauge!("incidentmind_embedding_backlog").set(g.embedding_backlog as f64);
        });
        self.handle.run_upkeep();
        self.handle.render()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn upkeep_folds_every_sample_into_the_buckets_and_stops_when_told() {
        let metrics = Metrics::new();
        for _ in 0..1_000 {
            metrics.http_request("GET", "/healthz", 200, Duration::from_millis(3));
        }
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(metrics.clone().upkeep(Duration::from_millis(10), stopped));
        // A render also folds samples (it would hide a dead upkeep task), so the task's own count
        // of folds is what proves it ran; wait for it rather than for a fixed time.
        let folds = |m: &Metrics| -> u64 {
            let text = m.handle.render();
            text.lines()
                .find_map(|l| l.strip_prefix("incidentmind_metrics_upkeeps_total "))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0)
        };
        let waited = tokio::time::timeout(Duration::from_secs(5), async {
            while folds(&metrics) < 2 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
        assert!(waited.is_ok(), "the upkeep task never folded");
        for _ in 0..500 {
            metrics.http_request("GET", "/healthz", 200, Duration::from_millis(30));
        }
        stop.send(true).expect("the upkeep task listens");
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("upkeep stops when told")
            .expect("upkeep does not panic");
        let after_stop = folds(&metrics);
        tokio::time::sleep(Duration::from_millis(40)).await;
        assert_eq!(
            folds(&metrics),
            after_stop,
            "upkeep went on after it was told to stop"
        );
        let text = metrics.handle.render();
        let series = r#"method="GET",route="/healthz",status="200""#;
        assert!(
            text.contains(&format!(
                "incidentmind_http_request_duration_seconds_count{{{series}}} 1500"
            )),
            "{text}"
        );
        // The 3 ms samples fall in the 5 ms bucket, the 30 ms ones from the 50 ms bucket on.
        assert!(
            text.contains(&format!(
                "incidentmind_http_request_duration_seconds_bucket{{{series},le=\"0.005\"}} 1000"
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "incidentmind_http_request_duration_seconds_bucket{{{series},le=\"0.05\"}} 1500"
            )),
            "{text}"
        );
    }
}
