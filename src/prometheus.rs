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

/// Default request timeout of one query.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default cap on the series kept from one query.
pub const DEFAULT_MAX_SERIES: usize = 20;
/// Default cap on the points kept per series (the step is chosen so a window fits in it).
pub const DEFAULT_MAX_POINTS: usize = 500;
/// How far before an alert's `startsAt` its window starts.
pub const ALERT_LOOKBACK: jiff::SignedDuration = jiff::SignedDuration::from_secs(15 * 60);
/// Largest response body read from Prometheus, bytes; a bigger one is an error.
pub const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;

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
}

impl PrometheusConfig {
    /// Settings for `url` with the defaults: no credentials, [`DEFAULT_TIMEOUT`],
    /// [`DEFAULT_MAX_SERIES`], [`DEFAULT_MAX_POINTS`], responder queries on, no request or
    /// error rate templates.
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
            .finish()
    }
}

/// Why a query gave no series to store.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
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

#[derive(Debug, Deserialize)]
struct ApiData {
    #[serde(rename = "resultType")]
    result_type: String,
    #[serde(default)]
    result: Vec<RangeSeries>,
}

/// A Prometheus API envelope (`{status, data, errorType, error}`).
#[derive(Debug, Deserialize)]
struct ApiResponse {
    status: String,
    #[serde(default)]
    data: Option<ApiData>,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
    #[serde(default)]
    error: Option<String>,
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

/// The expression an alert's `generatorURL` carries, URL-decoded; `None` when it carries none.
///
/// Two shapes carry one:
/// - Prometheus's graph link, `…/graph?g0.expr=<PromQL>` (Prometheus and Mimir/Cortex rulers,
///   whether Alertmanager or Grafana delivers their alerts);
/// - a Grafana Explore link (a ruler set to link to Grafana, or a rule whose source is an Explore
///   view): `…/explore?schemaVersion=1&panes={"<pane>":{"queries":[{"expr":…}]…}}`, or the older
///   `…/explore?left={"queries":[{"expr":…}]…}` and `left=["now-1h","now","<source>",{"expr":…}]`.
///   The first query with an `expr` is taken, unless its data source names a type other than
///   Prometheus (a Loki query is LogQL, not PromQL).
///
/// A Grafana-managed rule's own link (`…/alerting/grafana/<uid>/view`) carries no query: Grafana
/// sends the rule's evaluated values, not its expression, so nothing is pulled for it.
pub fn expr_from_generator_url(generator_url: &str) -> Option<String> {
    let url = url::Url::parse(generator_url.trim()).ok()?;
    let pairs: Vec<(String, String)> = url.query_pairs().into_owned().collect();
    let param = |name: &str| pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.trim());
    let expr = match param("g0.expr") {
        Some(e) => Some(e.to_string()),
        None if url.path().trim_end_matches('/').ends_with("/explore") => {
            let state = param("panes").or_else(|| param("left"))?;
            explore_expr(&serde_json::from_str(state).ok()?)
        }
        None => None,
    };
    expr.filter(|v| !v.is_empty())
}

/// The first PromQL `expr` of a Grafana Explore state: panes (`{"<pane>": {queries…}}`), one
/// pane (`{queries…}`) or the compact array (`[from, to, source, {expr…}, …]`).
fn explore_expr(state: &serde_json::Value) -> Option<String> {
    use serde_json::Value;
    let promql = |q: &Value| -> Option<String> {
        let kind = q
            .pointer("/datasource/type")
            .and_then(Value::as_str)
            .unwrap_or("prometheus");
        let expr = q.get("expr")?.as_str()?.trim();
        (kind == "prometheus" && !expr.is_empty()).then(|| expr.to_string())
    };
    let pane =
        |p: &Value| -> Option<String> { p.get("queries")?.as_array()?.iter().find_map(promql) };
    match state {
        Value::Array(items) => items.iter().filter(|i| i.is_object()).find_map(promql),
        Value::Object(map) if map.contains_key("queries") => pane(state),
        Value::Object(map) => map.values().find_map(pane),
        _ => None,
    }
}

/// `template` with `$service` (or `${service}`) replaced by `service` escaped for the inside of
/// a double-quoted PromQL string (`\\`, `\"`, control characters as `\n`, `\t`, `\xNN`), so a
/// label value cannot end the string or change the query: the template writes the quotes,
/// `{service="$service"}`. `None` when the template names `$service` and there is no service;
/// a template without `$service` is returned as written.
pub fn fill_service(template: &str, service: Option<&str>) -> Option<String> {
    let template = template.replace("${service}", "$service");
    let mut out = String::with_capacity(template.len() + 16);
    let mut rest = template.as_str();
    while let Some(at) = rest.find("$service") {
        let after = &rest[at + "$service".len()..];
        out.push_str(&rest[..at]);
        if after.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
            // `$services`, `$service_name`: not the placeholder.
            out.push_str("$service");
        } else {
            out.push_str(&promql_escape(service?));
        }
        rest = after;
    }
    out.push_str(rest);
    Some(out)
}

/// `s` escaped for the inside of a double-quoted PromQL string (Go's escapes, which PromQL
/// follows).
pub fn promql_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out
}

/// The Prometheus source of one app: its settings, an HTTP client, and the alerts whose series
/// are being pulled now (so one alert is queried once even when deliveries overlap). `Debug`
/// shows no credentials.
pub struct Prometheus {
    config: PrometheusConfig,
    base: url::Url,
    http: reqwest::Client,
    in_flight: Mutex<HashSet<String>>,
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
        let body = read_capped(res)
            .await
            .map_err(|e| self.transport(e))?
            .ok_or_else(|| PromError::Answered {
                status,
                message: format!("the answer is larger than {MAX_RESPONSE_BYTES} bytes"),
            })?;
        let parsed: Option<ApiResponse> = serde_json::from_slice(&body).ok();
        let Some(api) = parsed else {
            let text = String::from_utf8_lossy(&body);
            return Err(PromError::Answered {
                status,
                message: crate::evidence::truncate_chars(text.trim(), 200).to_string(),
            });
        };
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
        let data = api.data.ok_or_else(|| PromError::Answered {
            status,
            message: "a success without data".into(),
        })?;
        if data.result_type != "matrix" {
            return Err(PromError::Answered {
                status,
                message: format!(
                    "resultType {} where a matrix was expected",
                    data.result_type
                ),
            });
        }
        let result = cap(data.result, self.config.max_series, self.config.max_points);
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

/// Reads a body of at most [`MAX_RESPONSE_BYTES`]; `None` over it.
async fn read_capped(mut res: reqwest::Response) -> Result<Option<Vec<u8>>, reqwest::Error> {
    let mut buf = Vec::new();
    while let Some(chunk) = res.chunk().await? {
        if buf.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(Some(buf))
}

/// Keeps the first `max_series` series and the latest `max_points` points of each, saying what
/// was left out.
fn cap(mut series: Vec<RangeSeries>, max_series: usize, max_points: usize) -> RangeResult {
    let mut notes = Vec::new();
    let total = series.len();
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
    fn the_generator_url_expression_is_url_decoded() {
        let u = "http://prom:9090/graph?g0.expr=rate%28http_requests_total%7Bjob%3D%22api%22%7D%5B5m%5D%29+%3E+1&g0.tab=1";
        assert_eq!(
            expr_from_generator_url(u).as_deref(),
            Some(r#"rate(http_requests_total{job="api"}[5m]) > 1"#)
        );
        assert_eq!(
            expr_from_generator_url("http://prom:9090/graph?g0.tab=1"),
            None
        );
        assert_eq!(expr_from_generator_url("not a url"), None);
        assert_eq!(expr_from_generator_url("http://p/graph?g0.expr=+"), None);
    }

    #[test]
    fn a_grafana_explore_link_gives_its_promql_and_a_rule_link_gives_none() {
        let explore = |param: &str, state: serde_json::Value| {
            let mut u = url::Url::parse("https://grafana.example/explore").unwrap();
            u.query_pairs_mut()
                .append_pair("schemaVersion", "1")
                .append_pair(param, &state.to_string());
            u.to_string()
        };
        let q = r#"sum(rate(http_requests_total{service="checkout"}[5m]))"#;
        let panes = serde_json::json!({"x1": {"datasource": "prom-uid", "queries": [
            {"refId": "A", "expr": q, "datasource": {"type": "prometheus", "uid": "prom-uid"}}],
            "range": {"from": "now-1h", "to": "now"}}});
        assert_eq!(
            expr_from_generator_url(&explore("panes", panes)).as_deref(),
            Some(q)
        );
        let left =
            serde_json::json!({"datasource": "Prometheus", "queries": [{"refId": "A", "expr": q}]});
        assert_eq!(
            expr_from_generator_url(&explore("left", left)).as_deref(),
            Some(q)
        );
        let compact =
            serde_json::json!(["now-1h", "now", "Prometheus", {"expr": q}, {"ui": [true]}]);
        assert_eq!(
            expr_from_generator_url(&explore("left", compact)).as_deref(),
            Some(q)
        );
        let loki = serde_json::json!({"a": {"queries": [
            {"expr": "{app=\"checkout\"} |= \"error\"", "datasource": {"type": "loki"}}]}});
        assert_eq!(
            expr_from_generator_url(&explore("panes", loki)),
            None,
            "LogQL is not PromQL"
        );
        for none in [
            "https://play.grafana.org/alerting/1afz29v7z/edit",
            "https://grafana.example/alerting/grafana/abc123/view?orgId=1",
            "https://grafana.example/explore?panes=not-json",
            "https://grafana.example/d/uid/dash?panes=%7B%7D",
        ] {
            assert_eq!(expr_from_generator_url(none), None, "{none}");
        }
    }

    #[test]
    fn the_service_fills_a_template_as_an_escaped_promql_string() {
        let t = r#"sum(rate(http_requests_total{service="$service"}[5m]))"#;
        assert_eq!(
            fill_service(t, Some("checkout")).as_deref(),
            Some(r#"sum(rate(http_requests_total{service="checkout"}[5m]))"#)
        );
        assert_eq!(
            fill_service(t, Some("a\"}) or vector(1) or x{y=\"\\")).as_deref(),
            Some(r#"sum(rate(http_requests_total{service="a\"}) or vector(1) or x{y=\"\\"}[5m]))"#),
            "a label value cannot end the string"
        );
        assert_eq!(
            fill_service(r#"up{job="${service}",x="$services"}"#, Some("api\n")).as_deref(),
            Some(r#"up{job="api\n",x="$services"}"#)
        );
        assert_eq!(fill_service(t, None), None, "no service, no query");
        assert_eq!(fill_service("sum(up)", None).as_deref(), Some("sum(up)"));
        assert_eq!(promql_escape("\u{1}"), "\\x01");
    }

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
        let r = cap(vec![s(5), s(3), s(2)], 2, 4);
        assert_eq!(r.series.len(), 2);
        assert_eq!(r.series[0].values.len(), 4);
        assert_eq!(r.series[0].values[0].0, 1.0, "the latest points are kept");
        let n = r.notice.unwrap();
        assert!(
            n.contains("3 series matched") && n.contains("more than 4 points"),
            "{n}"
        );
        assert_eq!(cap(vec![s(2)], 2, 4).notice, None);
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
