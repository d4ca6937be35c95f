//! The Prometheus source: a small client of the Prometheus HTTP API (`GET /api/v1/query_range`,
//! prometheus.io/docs/prometheus/latest/querying/api/), its settings, the window and step a
//! query runs over, the expression an alert's `generatorURL` carries (`g0.expr`) and the graph
//! link back to Prometheus. No storage and no incident logic: `services::prometheus` turns a
//! result into evidence.
//!
//! Every failure is a [`PromError`] that says what happened in words a responder can act on:
//! unreachable, timed out, bad PromQL (Prometheus's own `bad_data` message), another error
//! Prometheus answered, an empty result. A result over the configured caps is truncated and
//! carries a notice saying so ([`RangeResult::notice`]).

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};

mod answer;
mod expr;
mod pulls;

pub use expr::{expr_from_generator_url, fill_service, promql_escape};

/// Default request timeout of one query.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default cap on the series kept from one query.
pub const DEFAULT_MAX_SERIES: usize = 20;
/// Default cap on the points kept per series (the step is chosen so a window fits in it).
pub const DEFAULT_MAX_POINTS: usize = 500;
/// How far before an alert's `startsAt` its window starts.
pub const ALERT_LOOKBACK: jiff::SignedDuration = jiff::SignedDuration::from_secs(15 * 60);
/// Largest answer read from Prometheus, bytes: answers are parsed as they stream in, keeping
/// the first series up to the cap, so a large one costs the series kept; a bigger one is an
/// error.
pub const MAX_RESPONSE_BYTES: usize = answer::MAX_STREAMED_BYTES;
/// Default number of times a failed query of an alert's pull is tried again.
pub const DEFAULT_RETRIES: u32 = 2;
/// Default wait before the first retry; each further retry waits twice as long.
pub const DEFAULT_RETRY_BACKOFF: Duration = Duration::from_millis(250);
/// Default number of an alert's queries sent to Prometheus at once.
pub const DEFAULT_PULL_CONCURRENCY: usize = 4;

/// How the app authenticates to Prometheus.
#[derive(Clone, Default, PartialEq, Eq)]
pub enum PrometheusAuth {
    /// No credentials.
    #[default]
    None,
    /// `Authorization: Bearer <token>`.
    Bearer(String),
    /// HTTP basic authentication.
    Basic {
        /// User name.
        user: String,
        /// Password.
        password: String,
    },
}

impl std::fmt::Debug for PrometheusAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::None => f.write_str("None"),
            Self::Bearer(_) => f.write_str("Bearer(<redacted>)"),
            Self::Basic { user, .. } => f
                .debug_struct("Basic")
                .field("user", user)
                .field("password", &"<redacted>")
                .finish(),
        }
    }
}

/// The Prometheus source's settings (`serve --prometheus-url …`).
#[derive(Clone, PartialEq, Eq)]
pub struct PrometheusConfig {
    /// Base URL of the Prometheus server (`http://prometheus:9090`), without `/api/v1`.
    pub url: String,
    /// Credentials sent with every query.
    pub auth: PrometheusAuth,
    /// Whole-request timeout of one query.
    pub timeout: Duration,
    /// Series kept from one query; the rest are dropped with a notice.
    pub max_series: usize,
    /// Points kept per series; the step is chosen so a window fits, a responder's own step is
    /// truncated with a notice.
    pub max_points: usize,
    /// Whether responders may run their own queries (the alert's own series are pulled either
    /// way).
    pub responder_queries: bool,
    /// The request rate of a service: a PromQL template where `$service` stands for the alert's
    /// service label value ([`fill_service`]); pulled beside each alert's own series. `None`:
    /// not pulled.
    pub request_rate: Option<String>,
    /// The error rate of a service, a template like [`Self::request_rate`].
    pub error_rate: Option<String>,
    /// How many times a failed query of an alert's pull is tried again (unreachable, timed out,
    /// HTTP 5xx or 429); a rejected query (4xx) never is. A responder's query is not retried.
    pub retries: u32,
    /// Wait before the first retry; each further one waits twice as long.
    pub retry_backoff: Duration,
    /// Alerts' queries in flight to Prometheus at once (at least 1); more wait their turn.
    pub pull_concurrency: usize,
}

impl PrometheusConfig {
    /// Settings for `url` with the defaults: no credentials, [`DEFAULT_TIMEOUT`],
    /// [`DEFAULT_MAX_SERIES`], [`DEFAULT_MAX_POINTS`], responder queries on, no request or
    /// error rate templates, [`DEFAULT_RETRIES`] after [`DEFAULT_RETRY_BACKOFF`],
    /// [`DEFAULT_PULL_CONCURRENCY`].
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            auth: PrometheusAuth::None,
            timeout: DEFAULT_TIMEOUT,
            max_series: DEFAULT_MAX_SERIES,
            max_points: DEFAULT_MAX_POINTS,
            responder_queries: true,
            request_rate: None,
            error_rate: None,
            retries: DEFAULT_RETRIES,
            retry_backoff: DEFAULT_RETRY_BACKOFF,
            pull_concurrency: DEFAULT_PULL_CONCURRENCY,
        }
    }
}

impl std::fmt::Debug for PrometheusConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrometheusConfig")
            .field("url", &crate::store::redacted_url(&self.url))
            .field("auth", &self.auth)
            .field("timeout", &self.timeout)
            .field("max_series", &self.max_series)
            .field("max_points", &self.max_points)
            .field("responder_queries", &self.responder_queries)
            .field("request_rate", &self.request_rate)
            .field("error_rate", &self.error_rate)
            .field("retries", &self.retries)
            .field("retry_backoff", &self.retry_backoff)
            .field("pull_concurrency", &self.pull_concurrency)
            .finish()
    }
}

/// Why a query gave no series to store.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum PromError {
    /// The configured URL is not a URL.
    #[error("the Prometheus URL '{0}' is not a valid http(s) URL")]
    BadUrl(String),
    /// No connection (refused, DNS, reset).
    #[error("Prometheus is unreachable: {0}")]
    Unreachable(String),
    /// No answer within the timeout.
    #[error("Prometheus did not answer within {0} s")]
    Timeout(u64),
    /// The query was rejected (HTTP 400, `errorType: bad_data`): Prometheus's message.
    #[error("Prometheus rejected the query: {0}")]
    BadData(String),
    /// Another error answer (execution error, timeout inside Prometheus, 5xx, a non-API body).
    #[error("Prometheus answered HTTP {status}: {message}")]
    Answered {
        /// HTTP status.
        status: u16,
        /// `errorType: error` from the body, or the start of a non-JSON body.
        message: String,
    },
    /// The query matched no series in the window.
    #[error("the query matched no series between {start} and {end}")]
    Empty {
        /// Window start (RFC 3339).
        start: String,
        /// Window end (RFC 3339).
        end: String,
    },
}

impl PromError {
    /// Whether trying the same query again a moment later may succeed: no connection, no answer
    /// in time, or an answer saying Prometheus is overloaded or failing (HTTP 5xx, 429). A
    /// rejected query, an empty result or an oversized answer would come back the same.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Unreachable(_) | Self::Timeout(_) => true,
            Self::Answered { status, .. } => *status >= 500 || *status == 429,
            Self::BadUrl(_) | Self::BadData(_) | Self::Empty { .. } => false,
        }
    }
}

/// One series of a range query as Prometheus returns it: labels and `[unix seconds, "value"]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RangeSeries {
    /// Labels (with `__name__` when the expression keeps it).
    #[serde(default)]
    pub metric: BTreeMap<String, String>,
    /// Samples, oldest first.
    #[serde(default)]
    pub values: Vec<(f64, String)>,
}

/// The window and resolution of a range query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// First instant.
    pub start: jiff::Timestamp,
    /// Last instant.
    pub end: jiff::Timestamp,
    /// Resolution step, whole seconds (at least 1).
    pub step_secs: i64,
}

impl Window {
    /// `[start, end]` with the smallest whole-second step that keeps at most `max_points`
    /// points per series (an end before the start is moved to the start).
    pub fn fit(start: jiff::Timestamp, end: jiff::Timestamp, max_points: usize) -> Self {
        let end = end.max(start);
        let span = end.as_second() - start.as_second();
        let intervals = (max_points.max(2) - 1) as i64;
        let step_secs = ((span + intervals - 1) / intervals).max(1);
        Self {
            start,
            end,
            step_secs,
        }
    }

    /// Points per series this window gives.
    pub fn points(&self) -> i64 {
        (self.end.as_second() - self.start.as_second()) / self.step_secs + 1
    }

    /// The window as `{start, end, step}` (RFC 3339, seconds), as evidence keeps it.
    pub fn describe(&self) -> serde_json::Value {
        serde_json::json!({
            "start": rfc3339(self.start),
            "end": rfc3339(self.end),
            "step_seconds": self.step_secs,
        })
    }
}

/// An instant as RFC 3339 UTC to the second.
pub fn rfc3339(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// What a query returned, within the caps.
#[derive(Debug, Clone, PartialEq)]
pub struct RangeResult {
    /// The series kept (at most `max_series`, each at most `max_points` points: the latest).
    pub series: Vec<RangeSeries>,
    /// What the caps left out, for people; `None` when nothing was.
    pub notice: Option<String>,
}

/// The Prometheus source of one app: its settings, an HTTP client, and the alerts whose series
/// are being pulled now (so one alert is queried once even when deliveries overlap). `Debug`
/// shows no credentials.
pub struct Prometheus {
    config: PrometheusConfig,
    base: url::Url,
    http: reqwest::Client,
    in_flight: Mutex<HashSet<String>>,
    pulls: pulls::Pulls,
}

impl std::fmt::Debug for Prometheus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prometheus")
            .field("config", &self.config)
            .field("base", &crate::store::redacted_url(self.base.as_str()))
            .finish_non_exhaustive()
    }
}

/// Removes its key from [`Prometheus`]'s in-flight set when dropped.
#[derive(Debug)]
pub struct InFlight<'a> {
    owner: &'a Prometheus,
    key: String,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if let Ok(mut set) = self.owner.in_flight.lock() {
            set.remove(&self.key);
        }
    }
}

impl Prometheus {
    /// A source over `config`.
    ///
    /// # Errors
    /// [`PromError::BadUrl`] when the URL is not http(s); [`PromError::Unreachable`] when the
    /// HTTP client cannot be built.
    pub fn new(config: PrometheusConfig) -> Result<Self, PromError> {
        let mut base = url::Url::parse(config.url.trim())
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https"))
            .ok_or_else(|| PromError::BadUrl(crate::store::redacted_url(&config.url)))?;
        if !base.path().ends_with('/') {
            let path = format!("{}/", base.path());
            base.set_path(&path);
        }
        let http = reqwest::Client::builder()
            .timeout(config.timeout)
            .build()
            .map_err(|e| PromError::Unreachable(e.to_string()))?;
        Ok(Self {
            pulls: pulls::Pulls::new(config.pull_concurrency),
            config,
            base,
            http,
            in_flight: Mutex::default(),
        })
    }

    /// The settings.
    pub fn config(&self) -> &PrometheusConfig {
        &self.config
    }

    /// Marks `key` as being pulled; `None` when it already is.
    pub fn claim(&self, key: &str) -> Option<InFlight<'_>> {
        let mut set = self.in_flight.lock().ok()?;
        set.insert(key.to_string()).then(|| InFlight {
            owner: self,
            key: key.to_string(),
        })
    }

    /// The Prometheus graph page of `query` over `window` (the link kept with the evidence).
    pub fn graph_url(&self, query: &str, window: &Window) -> String {
        let mut url = self
            .base
            .join("graph")
            .unwrap_or_else(|_| self.base.clone());
        url.set_username("").ok();
        url.set_password(None).ok();
        let span = (window.end.as_second() - window.start.as_second()).max(1);
        url.query_pairs_mut()
            .append_pair("g0.expr", query)
            .append_pair("g0.tab", "0")
            .append_pair("g0.range_input", &format!("{span}s"))
            .append_pair(
                "g0.end_input",
                &window.end.strftime("%Y-%m-%d %H:%M:%S").to_string(),
            )
            .append_pair("g0.step_input", &window.step_secs.to_string());
        url.to_string()
    }

    /// Runs `query` over `window` (`GET /api/v1/query_range`) and applies the caps.
    ///
    /// # Errors
    /// See [`PromError`]; an empty matrix is [`PromError::Empty`].
    pub async fn query_range(
        &self,
        query: &str,
        window: &Window,
    ) -> Result<RangeResult, PromError> {
        let mut url = self
            .base
            .join("api/v1/query_range")
            .map_err(|e| PromError::BadUrl(e.to_string()))?;
        url.query_pairs_mut()
            .append_pair("query", query)
            .append_pair("start", &window.start.as_second().to_string())
            .append_pair("end", &window.end.as_second().to_string())
            .append_pair("step", &window.step_secs.to_string());
        let mut req = self.http.get(url);
        req = match &self.config.auth {
            PrometheusAuth::None => req,
            PrometheusAuth::Bearer(t) => req.bearer_auth(t),
            PrometheusAuth::Basic { user, password } => req.basic_auth(user, Some(password)),
        };
        let res = req.send().await.map_err(|e| self.transport(e))?;
        let status = res.status().as_u16();
        let api = answer::read(res, self.config.max_series)
            .await
            .map_err(|e| match e {
                answer::ReadError::Transport(e) => self.transport(e),
                answer::ReadError::TooLarge => PromError::Answered {
                    status,
                    message: format!("the answer is larger than {MAX_RESPONSE_BYTES} bytes"),
                },
                answer::ReadError::NotJson(start) => PromError::Answered {
                    status,
                    message: crate::evidence::truncate_chars(start.trim(), 200).to_string(),
                },
            })?;
        if api.status != "success" {
            let message = api
                .error
                .unwrap_or_else(|| "an error without a message".to_string());
            return Err(if api.error_type.as_deref() == Some("bad_data") {
                PromError::BadData(message)
            } else {
                PromError::Answered {
                    status,
                    message: format!(
                        "{}: {message}",
                        api.error_type.as_deref().unwrap_or("error")
                    ),
                }
            });
        }
        let Some(result_type) = api.result_type else {
            return Err(PromError::Answered {
                status,
                message: "a success without data".into(),
            });
        };
        if result_type != "matrix" {
            return Err(PromError::Answered {
                status,
                message: format!("resultType {result_type} where a matrix was expected"),
            });
        }
        let result = cap(
            api.series,
            api.total,
            self.config.max_series,
            self.config.max_points,
        );
        if result.series.iter().all(|s| s.values.is_empty()) {
            return Err(PromError::Empty {
                start: rfc3339(window.start),
                end: rfc3339(window.end),
            });
        }
        Ok(result)
    }

    fn transport(&self, e: reqwest::Error) -> PromError {
        if e.is_timeout() {
            PromError::Timeout(self.config.timeout.as_secs().max(1))
        } else {
            // The error's URL may carry credentials: name the server without them.
            let e = e.without_url();
            let mut msg = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                msg.push_str(": ");
                msg.push_str(&s.to_string());
                source = s.source();
            }
            PromError::Unreachable(format!(
                "{} ({msg})",
                crate::store::redacted_url(self.base.as_str())
            ))
        }
    }
}

/// Keeps the first `max_series` series (of `total` the answer held) and the latest `max_points`
/// points of each, saying what was left out.
fn cap(
    mut series: Vec<RangeSeries>,
    total: usize,
    max_series: usize,
    max_points: usize,
) -> RangeResult {
    let mut notes = Vec::new();
    let total = total.max(series.len());
    if total > max_series {
        series.truncate(max_series);
        notes.push(format!(
            "{total} series matched; only the first {max_series} are kept"
        ));
    }
    let mut cut = 0usize;
    for s in &mut series {
        if s.values.len() > max_points {
            let drop = s.values.len() - max_points;
            s.values.drain(..drop);
            cut += 1;
        }
    }
    if cut > 0 {
        notes.push(format!(
            "{cut} series had more than {max_points} points; only the latest {max_points} of each are kept"
        ));
    }
    RangeResult {
        series,
        notice: (!notes.is_empty()).then(|| format!("Truncated: {}", notes.join("; "))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_step_keeps_a_window_within_the_point_cap() {
        let start: jiff::Timestamp = "2026-12-04T10:00:00Z".parse().unwrap();
        let end: jiff::Timestamp = "2026-12-04T10:20:00Z".parse().unwrap();
        let w = Window::fit(start, end, 500);
        assert_eq!(w.step_secs, 3);
        assert!(w.points() <= 500, "{}", w.points());
        assert_eq!(Window::fit(start, start, 500).step_secs, 1);
        let w = Window::fit(start, end, 1000);
        assert_eq!(w.step_secs, 2);
    }

    #[test]
    fn results_over_the_caps_are_truncated_with_a_notice() {
        let s = |n: usize| RangeSeries {
            metric: BTreeMap::new(),
            values: (0..n).map(|i| (i as f64, i.to_string())).collect(),
        };
        let r = cap(vec![s(5), s(3), s(2)], 3, 2, 4);
        assert_eq!(r.series.len(), 2);
        assert_eq!(r.series[0].values.len(), 4);
        assert_eq!(r.series[0].values[0].0, 1.0, "the latest points are kept");
        let n = r.notice.unwrap();
        assert!(
            n.contains("3 series matched") && n.contains("more than 4 points"),
            "{n}"
        );
        assert_eq!(cap(vec![s(2)], 1, 2, 4).notice, None);
        // Series the streamed read only counted are said too.
        let r = cap(vec![s(2), s(2)], 50_000, 2, 4);
        assert!(r.notice.unwrap().contains("50000 series matched"));
    }

    #[test]
    fn secrets_do_not_show_in_debug() {
        let mut c = PrometheusConfig::new("http://u:pw-in-url@prom:9090");
        c.auth = PrometheusAuth::Basic {
            user: "ops".into(),
            password: "hunter2-basic".into(),
        };
        let shown = format!("{c:?}");
        assert!(
            !shown.contains("hunter2-basic") && !shown.contains("pw-in-url"),
            "{shown}"
        );
        c.auth = PrometheusAuth::Bearer("tok-secret-1".into());
        let shown = format!("{c:?}");
        assert!(!shown.contains("tok-secret-1"), "{shown}");
        let source = Prometheus::new(c).unwrap();
        let shown = format!("{source:?}");
        assert!(
            !shown.contains("tok-secret-1") && !shown.contains("pw-in-url"),
            "{shown}"
        );
        let w = Window::fit(jiff::Timestamp::UNIX_EPOCH, jiff::Timestamp::UNIX_EPOCH, 10);
        let link = source.graph_url("up", &w);
        assert!(
            link.starts_with("http://prom:9090/graph?g0.expr=up&"),
            "{link}"
        );
    }
}
