//! Metric evidence pulled from Prometheus ([`crate::prometheus`]): the alert's own series,
//! pulled once per alert off the webhook's request path, and a responder's query from the
//! incident page or the API. Either result is stored through [`crate::services::evidence::add`]
//! as `metrics` evidence, like a pasted Prometheus API answer, so it is redacted the same way
//! and the same trend analysis (flat, climbing, …) reads it; the stored document keeps the
//! query, the window and the link back to Prometheus's graph page.
//!
//! An alert's pull runs in the source's line ([`crate::prometheus::Prometheus::pull`]): its
//! queries share the concurrency limit, identical queries are answered once, a transient
//! failure is tried again after a short backoff, and the documents are stored one at a time, in
//! line with the deliveries' writes ([`Prometheus::write_line`]).
//! A pull that fails for good leaves a `prometheus` note on the incident's timeline and nothing
//! else: the incident, its alerts and the webhook's answer never depend on Prometheus.

use std::sync::Arc;

use tokio::sync::Semaphore;

use crate::domain::{IncidentId, ValidationError};
use crate::error::{AppError, AppResult};
use crate::evidence::{EvidenceKind, truncate_chars};
use crate::prometheus::{ALERT_LOOKBACK, PromError, Prometheus, RangeResult, Window, fill_service};
use crate::services::evidence::{self as esvc, EvidenceAdded, QueryLink};
use crate::store::{self, Event, IncidentWrite, evidence as estore, incidents};

/// Who pulled an alert's series (the timeline and the evidence author).
pub const ACTOR: &str = "prometheus";
/// Longest accepted PromQL query, characters.
pub const QUERY_MAX: usize = 2_000;
/// Characters of a query used to name a series that has no `__name__`.
const NAME_CHARS: usize = 120;

/// An alert whose series to pull: its expression, its service and instants.
#[derive(Debug, Clone, PartialEq)]
pub struct AlertSeries {
    /// The alert's fingerprint (pulled once per fingerprint and incident).
    pub fingerprint: String,
    /// The alert's name, for the timeline.
    pub name: String,
    /// The PromQL expression of its `generatorURL`.
    pub expr: String,
    /// The alert's service label value (`service`, `job`, `app`), which fills the request and
    /// error rate templates; `None`: templates that name `$service` are not pulled.
    pub service: Option<String>,
    /// `startsAt`; `None`: now.
    pub starts_at: Option<jiff::Timestamp>,
    /// `endsAt` of a resolved alert; `None`: now.
    pub ends_at: Option<jiff::Timestamp>,
}

/// What one query of an alert's pull measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Measures {
    /// The alert's own expression.
    Alert,
    /// The service's request rate (`--prometheus-request-rate`).
    RequestRate,
    /// The service's error rate (`--prometheus-error-rate`).
    ErrorRate,
}

impl Measures {
    /// The metric name its series are stored under (the alert's keep their own): the trend
    /// analysis reads `request_rate` as a request-rate series, so a pressure series of the same
    /// document rising while it stays flat reads leak-like, and load-driven when it rises too.
    fn series_name(self) -> Option<&'static str> {
        match self {
            Self::Alert => None,
            Self::RequestRate => Some("request_rate"),
            Self::ErrorRate => Some("error_rate"),
        }
    }

    /// Its name in a note.
    fn words(self) -> &'static str {
        match self {
            Self::Alert => "series",
            Self::RequestRate => "request rate",
            Self::ErrorRate => "error rate",
        }
    }
}

/// The dedup key of an alert's pulled series on incident `id`.
fn alert_key(id: &IncidentId, fingerprint: &str) -> String {
    format!("prom:{id}:{fingerprint}")
}

/// Pulls the series of `alerts` for incident `id` in a task of its own (after the caller's
/// transaction committed): each alert once, all at once, skipped when its series is already
/// evidence or being pulled. Returns at once. The alerts wait in the source's line
/// ([`Prometheus::wait_in_line`]); when it is full they are not pulled and the incident gets a
/// note saying so.
pub fn spawn_alert_pulls(
    pool: crate::store::Db,
    prom: Arc<Prometheus>,
    id: IncidentId,
    alerts: Vec<AlertSeries>,
) {
    if alerts.is_empty() {
        return;
    }
    let Some(line) = prom.wait_in_line(alerts.len()) else {
        tokio::spawn(async move {
            let detail = format!(
                "The series of {} alert(s) were not pulled: {} alerts are already waiting for \
                 Prometheus",
                alerts.len(),
                prom.waiting()
            );
            if let Err(e) = note(&pool, prom.write_line(), &id, detail).await {
                tracing::warn!(incident.id = %id, error = %e, "the note was not written");
            }
        });
        return;
    };
    tokio::spawn(async move {
        // All at once: the source's line bounds the queries in flight, and the alerts of one
        // rule ask at the same moment, so one request answers them all.
        let pulls = alerts
            .iter()
            .map(|a| pull_alert(&pool, line.source(), &id, a));
        for outcome in futures::future::join_all(pulls).await {
            if let Err(e) = outcome {
                tracing::warn!(incident.id = %id, error = %e, "the alert's series was not stored");
            }
        }
    });
}

/// The queries of an alert's pull: its own expression, then the configured request and error
/// rate templates filled with its service (a template that needs a service the alert lacks is
/// left out).
fn queries_of(prom: &Prometheus, a: &AlertSeries) -> Vec<(Measures, String)> {
    let config = prom.config();
    let mut out = vec![(Measures::Alert, a.expr.clone())];
    for (m, template) in [
        (Measures::RequestRate, &config.request_rate),
        (Measures::ErrorRate, &config.error_rate),
    ] {
        if let Some(q) = template
            .as_deref()
            .and_then(|t| fill_service(t, a.service.as_deref()))
        {
            out.push((m, q));
        }
    }
    out
}

/// Pulls one alert's series, with its service's request and error rates when configured (all
/// over the same window, at once, each tried again after a transient failure), and stores what
/// came back as one evidence document; each query that failed for good leaves a note on the
/// timeline saying why. The document is built off the async runtime and stored in the source's
/// write line ([`Prometheus::write_line`]).
async fn pull_alert(
    pool: &crate::store::Db,
    prom: &Arc<Prometheus>,
    id: &IncidentId,
    a: &AlertSeries,
) -> AppResult<()> {
    let key = alert_key(id, &a.fingerprint);
    let Some(_claim) = prom.claim(&key) else {
        return Ok(());
    };
    if estore::find_by_key(pool, &key).await?.is_some() {
        return Ok(());
    }
    let now = store::now();
    let start = a.starts_at.unwrap_or(now).min(now);
    let start = start.checked_sub(ALERT_LOOKBACK).unwrap_or(start);
    let end = a.ends_at.unwrap_or(now).min(now);
    let window = Window::fit(start, end, prom.config().max_points);
    let started = std::time::Instant::now();
    let queries = queries_of(prom, a);
    let results =
        futures::future::join_all(queries.iter().map(|(_, q)| prom.pull(q, &window))).await;
    let mut pulled = Vec::new();
    let mut notes = Vec::new();
    for ((m, query), (result, attempts)) in queries.into_iter().zip(results) {
        match result {
            Ok(r) => pulled.push((m, query, r)),
            Err(e) => notes.push(failure_note(a, m, &query, &window, &e, attempts)),
        }
    }
    let stored = if pulled.is_empty() {
        None
    } else {
        let (prom2, a2) = (Arc::clone(prom), a.clone());
        let rendered = tokio::task::spawn_blocking(move || {
            // The request and error rates keep their own queries and links: their
            // observations show them, not the alert's expression.
            let related = pulled
                .iter()
                .filter_map(|(m, query, _)| {
                    let name = m.series_name()?;
                    let link = QueryLink {
                        query: query.clone(),
                        url: prom2.graph_url(query, &window),
                        related: Vec::new(),
                    };
                    Some((name.to_string(), link))
                })
                .collect();
            let link = QueryLink {
                query: a2.expr.clone(),
                url: prom2.graph_url(&a2.expr, &window),
                related,
            };
            render(alert_document(&prom2, &a2, &window, pulled)).map(|r| (r, link))
        })
        .await
        .map_err(|e| AppError::Internal(e.into()))??;
        Some(rendered)
    };
    let line = prom.write_line();
    for detail in notes {
        note(pool, line, id, detail).await?;
    }
    let Some((rendered, link)) = stored else {
        return Ok(());
    };
    match store_doc(
        pool,
        line,
        ACTOR,
        id,
        &a.expr,
        rendered,
        &key,
        None,
        Some(link),
    )
    .await
    {
        Ok(_) => {
            tracing::info!(incident.id = %id, ms = started.elapsed().as_millis() as u64,
                "the alert's series is evidence");
            Ok(())
        }
        // A learned incident takes no evidence: nothing to note.
        Err(AppError::Conflict(_)) => Ok(()),
        Err(e) => Err(e),
    }
}

/// The note of a query of alert `a` that failed for good after `attempts` requests.
fn failure_note(
    a: &AlertSeries,
    m: Measures,
    query: &str,
    window: &Window,
    e: &PromError,
    attempts: u32,
) -> String {
    let what = match (m, &a.service) {
        (Measures::Alert, _) | (_, None) => {
            format!(
                "The {} of alert '{}'",
                m.words(),
                truncate_chars(&a.name, 120)
            )
        }
        (_, Some(s)) => format!(
            "The {} of service '{}' (alert '{}')",
            m.words(),
            truncate_chars(s, 120),
            truncate_chars(&a.name, 120)
        ),
    };
    let tries = if attempts > 1 {
        format!(" (after {attempts} attempts)")
    } else {
        String::new()
    };
    format!(
        "{what} was not pulled{tries}: {e}. Query: {} over {} – {}",
        truncate_chars(query, 300),
        crate::prometheus::rfc3339(window.start),
        crate::prometheus::rfc3339(window.end),
    )
}

/// The document of an alert's pull: [`document`] of its own expression (its `query`, `link` and
/// `notice`; no series when that query failed), its series, and beside them the request and
/// error rate series pulled over the same window, named `request_rate` / `error_rate` with the
/// alert's `service` label, each listed under `related` with its own query, link and notice.
fn alert_document(
    prom: &Prometheus,
    a: &AlertSeries,
    window: &Window,
    pulled: Vec<(Measures, String, RangeResult)>,
) -> serde_json::Value {
    let mut own = RangeResult {
        series: Vec::new(),
        notice: Some("the alert's own series was not pulled (see the incident's timeline)".into()),
    };
    let mut related = Vec::new();
    let mut extra = Vec::new();
    for (m, query, mut result) in pulled {
        let Some(name) = m.series_name() else {
            own = result;
            continue;
        };
        for s in &mut result.series {
            s.metric.insert("__name__".into(), name.into());
            if let Some(service) = &a.service {
                s.metric
                    .entry("service".into())
                    .or_insert_with(|| service.clone());
            }
        }
        related.push(serde_json::json!({
            "measures": name,
            "query": query,
            "link": prom.graph_url(&query, window),
            "notice": result.notice,
        }));
        extra.append(&mut result.series);
    }
    let mut doc = document(&a.expr, window, &prom.graph_url(&a.expr, window), own);
    if let Some(rows) = doc
        .pointer_mut("/data/result")
        .and_then(serde_json::Value::as_array_mut)
    {
        rows.extend(
            extra
                .into_iter()
                .filter_map(|s| serde_json::to_value(s).ok()),
        );
    }
    if !related.is_empty() {
        doc["related"] = serde_json::Value::Array(related);
    }
    doc
}

/// The stored document: a Prometheus API answer (`data.result` in the matrix shape the metrics
/// parser reads) with the query, the window, the link and the caps' notice beside it. A series
/// without `__name__` is named by the query, so its observation says what was measured.
fn document(query: &str, window: &Window, link: &str, result: RangeResult) -> serde_json::Value {
    let series: Vec<_> = result
        .series
        .into_iter()
        .map(|mut s| {
            s.metric
                .entry("__name__".to_string())
                .or_insert_with(|| truncate_chars(query, NAME_CHARS).to_string());
            s
        })
        .collect();
    serde_json::json!({
        "status": "success",
        "source": "prometheus",
        "query": query,
        "window": window.describe(),
        "link": link,
        "notice": result.notice,
        "data": {"resultType": "matrix", "result": series},
    })
}

/// The caps' notices of a stored document: its own and its related queries', joined.
fn notices_of(doc: &serde_json::Value) -> Option<String> {
    let related = doc["related"].as_array().into_iter().flatten();
    let all: Vec<&str> = std::iter::once(&doc["notice"])
        .chain(related.map(|r| &r["notice"]))
        .filter_map(serde_json::Value::as_str)
        .filter(|n| n.starts_with("Truncated"))
        .collect();
    (!all.is_empty()).then(|| all.join(" "))
}

/// A document as stored: its pretty JSON text and the caps' notices.
struct Rendered {
    content: String,
    notice: Option<String>,
}

/// `doc` as stored ([`Rendered`]).
fn render(doc: serde_json::Value) -> AppResult<Rendered> {
    let notice = notices_of(&doc);
    let content = serde_json::to_string_pretty(&doc).map_err(|e| AppError::Internal(e.into()))?;
    Ok(Rendered { content, notice })
}

/// Stores a rendered document as metrics evidence of `id` under `key` (a repeat adds nothing),
/// its source named by `query`, its observations linked to the query at the source; a
/// truncated result also leaves a note on the timeline. Returns the evidence and the caps'
/// notice.
#[allow(
    clippy::too_many_arguments,
    reason = "one store of a pulled document: each argument is a different part of it"
)]
async fn store_doc(
    pool: &crate::store::Db,
    line: &Semaphore,
    actor: &str,
    id: &IncidentId,
    query: &str,
    rendered: Rendered,
    key: &str,
    expected_version: Option<i64>,
    link: Option<QueryLink>,
) -> AppResult<(EvidenceAdded, Option<String>)> {
    let Rendered { content, notice } = rendered;
    let source = format!("prometheus: {}", truncate_chars(query, 180));
    let submission = esvc::Submission {
        kind: EvidenceKind::Metrics,
        content,
        source: &source,
        dedup_key: Some(key),
        expected_version,
        link,
        write_line: Some(line),
        meaning: None,
    };
    let added = esvc::submit(pool, actor, id, submission).await?;
    if let (Some(n), true) = (&notice, added.created) {
        note(
            pool,
            line,
            id,
            format!(
                "Evidence #{} from Prometheus ({}): {n}",
                added.evidence.id,
                truncate_chars(query, 200)
            ),
        )
        .await?;
    }
    Ok((added, notice))
}

/// Writes a `prometheus` note on the incident's timeline (redacted like any incident text), in
/// the source's write line `line`.
async fn note(
    pool: &crate::store::Db,
    line: &Semaphore,
    id: &IncidentId,
    detail: String,
) -> AppResult<()> {
    let mut detail = detail;
    let _turn = esvc::wait_in_line(Some(line)).await;
    let mut w = IncidentWrite::open(pool, id, ACTOR, None).await?;
    w.redact(&mut [&mut detail]);
    w.record_event(Event::new("prometheus", detail)).await?;
    w.commit().await?;
    Ok(())
}

/// A responder's query: PromQL and an optional window (default: from 15 minutes before the
/// incident opened to now) and step (default: the smallest that fits the point cap).
#[derive(Debug, Clone, PartialEq)]
pub struct QueryRequest {
    /// PromQL.
    pub query: String,
    /// Window start.
    pub start: Option<jiff::Timestamp>,
    /// Window end.
    pub end: Option<jiff::Timestamp>,
    /// Step, seconds.
    pub step: Option<i64>,
    /// The incident version the responder saw; a stale one is refused (409) when the result is
    /// stored, `None` skips the check.
    pub expected_version: Option<i64>,
}

/// What a responder's query stored.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct QueryStored {
    /// The evidence and its observations, as a paste gives them.
    #[serde(flatten)]
    pub added: EvidenceAdded,
    /// The query as run.
    pub query: String,
    /// The window start (RFC 3339).
    pub start: String,
    /// The window end (RFC 3339).
    pub end: String,
    /// The step, seconds.
    pub step: i64,
    /// Prometheus's graph page of the query over the window.
    pub link: String,
    /// What the caps left out, or that the same query was already evidence.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
}

/// Runs a responder's query against the app's Prometheus and stores the result as evidence of
/// `id` (the same query over the same window twice adds nothing).
///
/// # Errors
/// [`AppError::NotFound`] when no Prometheus is configured, responder queries are turned off
/// or the incident does not exist; [`AppError::Validation`] for an empty or over-long query, a
/// bad window or step, or a query that matched nothing; [`AppError::BadRequest`] naming
/// Prometheus's error for a query it rejects; [`AppError::Upstream`] when Prometheus is down,
/// slow or answers another error; [`AppError::Conflict`] on a learned incident.
pub async fn run_query(
    pool: &crate::store::Db,
    prom: Option<&Prometheus>,
    actor: &str,
    id: &IncidentId,
    req: QueryRequest,
) -> AppResult<QueryStored> {
    let prom = prom.ok_or_else(|| {
        AppError::NotFound(
            "a Prometheus source (this server has none: start it with --prometheus-url or \
             INCIDENTMIND_PROMETHEUS_URL to query Prometheus from an incident)"
                .into(),
        )
    })?;
    if !prom.config().responder_queries {
        return Err(AppError::NotFound(
            "Prometheus queries from incidents (turned off on this server: \
             --prometheus-responder-queries=false)"
                .into(),
        ));
    }
    let incident = incidents::get(pool, id).await?;
    let query = req.query.trim().to_string();
    if query.is_empty() {
        return Err(ValidationError::new("query", "is empty: write a PromQL expression").into());
    }
    if query.chars().count() > QUERY_MAX {
        return Err(ValidationError::new(
            "query",
            format!("is longer than {QUERY_MAX} characters"),
        )
        .into());
    }
    let now = store::now();
    let end = req.end.unwrap_or(now);
    let opened = incident
        .opened_at
        .checked_sub(ALERT_LOOKBACK)
        .unwrap_or(incident.opened_at);
    let start = req.start.unwrap_or(opened.min(end));
    if start >= end {
        return Err(ValidationError::new("start", "must be before end").into());
    }
    let max_points = prom.config().max_points;
    let window = match req.step {
        None => Window::fit(start, end, max_points),
        Some(s) if s >= 1 => Window {
            start,
            end,
            step_secs: s,
        },
        Some(_) => {
            return Err(ValidationError::new("step", "must be at least 1 second").into());
        }
    };
    // Prometheus refuses more than 11,000 points per series; say so in our words first.
    if window.points() > 11_000 {
        return Err(ValidationError::new(
            "step",
            format!(
                "gives {} points per series; Prometheus answers at most 11000: use a larger step",
                window.points()
            ),
        )
        .into());
    }
    let result = prom
        .query_range(&query, &window)
        .await
        .map_err(|e| match e {
            PromError::BadData(_) => AppError::BadRequest(e.to_string()),
            PromError::Empty { .. } => ValidationError::new("query", e.to_string()).into(),
            other => AppError::Upstream(other.to_string()),
        })?;
    let digest = crate::digest::sha256_hex(
        format!(
            "{query}\n{}\n{}\n{}",
            window.start.as_second(),
            window.end.as_second(),
            window.step_secs
        )
        .as_bytes(),
    );
    let key = format!("promq:{id}:{digest}");
    let link = QueryLink {
        query: query.clone(),
        url: prom.graph_url(&query, &window),
        related: Vec::new(),
    };
    let doc = render(document(&query, &window, &link.url, result))?;
    let (added, notice) = store_doc(
        pool,
        prom.write_line(),
        actor,
        id,
        &query,
        doc,
        &key,
        req.expected_version,
        Some(link),
    )
    .await?;
    let notice = if added.created {
        notice
    } else {
        Some(format!(
            "the same query over the same window is already evidence #{}; nothing was added",
            added.evidence.id
        ))
    };
    Ok(QueryStored {
        link: prom.graph_url(&query, &window),
        start: crate::prometheus::rfc3339(window.start),
        end: crate::prometheus::rfc3339(window.end),
        step: window.step_secs,
        query,
        added,
        notice,
    })
}
