//! A responder's Prometheus query, `POST /api/v1/incidents/{id}/evidence/prometheus` and its form
//! on the evidence panel: the result is kept as metrics evidence with the query and the window.

use axum::Json;
use axum::extract::{FromRequest, Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::auth::CurrentUser;
use super::errors::{ApiError, PageError, rejection};
use super::evidence::{number_or_text, parse_version};
use super::examples;
use super::forms::KeptInput;
use super::incident::incident_error;
use super::schema::IncidentPath;
use super::{AppState, incident_id};
use crate::domain::{Role, ValidationError};
use crate::error::AppError;

/// A responder's Prometheus query (JSON, or the evidence panel's form).
#[derive(Debug, Deserialize, Default, utoipa::ToSchema)]
#[schema(as = PrometheusQuery)]
struct PromQuery {
    /// PromQL, run with the app's Prometheus credentials.
    #[serde(default)]
    query: String,
    /// Window start: RFC 3339 or Unix seconds; default 15 minutes before the incident opened.
    #[serde(default, deserialize_with = "number_or_text")]
    #[schema(value_type = Option<String>)]
    start: String,
    /// Window end: RFC 3339 or Unix seconds; default now.
    #[serde(default, deserialize_with = "number_or_text")]
    #[schema(value_type = Option<String>)]
    end: String,
    /// Step in seconds; default the smallest that keeps the points within the server's cap.
    #[serde(default, deserialize_with = "number_or_text")]
    #[schema(value_type = Option<i64>)]
    step: String,
    /// The incident version the page or client based it on (empty: no check).
    #[serde(default, deserialize_with = "number_or_text")]
    #[schema(value_type = Option<i64>)]
    version: String,
}

/// An instant typed as RFC 3339 or whole Unix seconds; empty: `None`.
fn parse_instant(field: &'static str, v: &str) -> Result<Option<jiff::Timestamp>, AppError> {
    let v = v.trim();
    if v.is_empty() {
        return Ok(None);
    }
    let parsed = match v.parse::<i64>() {
        Ok(secs) => jiff::Timestamp::from_second(secs).ok(),
        Err(_) => v.parse::<jiff::Timestamp>().ok(),
    };
    parsed.map(Some).ok_or_else(|| {
        ValidationError::new(
            field,
            format!("'{v}' is not an RFC 3339 instant (2026-11-29T14:05:00Z) or Unix seconds"),
        )
        .into()
    })
}

impl PromQuery {
    fn kept(&self) -> [String; 4] {
        [
            self.query.clone(),
            self.start.clone(),
            self.end.clone(),
            self.step.clone(),
        ]
    }

    fn to_request(&self) -> Result<crate::services::prometheus::QueryRequest, AppError> {
        let step = self.step.trim().trim_end_matches('s');
        let step = if step.is_empty() {
            None
        } else {
            Some(step.parse::<i64>().map_err(|_| {
                ValidationError::new("step", format!("'{}' is not whole seconds", self.step))
            })?)
        };
        Ok(crate::services::prometheus::QueryRequest {
            query: self.query.clone(),
            start: parse_instant("start", &self.start)?,
            end: parse_instant("end", &self.end)?,
            step,
            expected_version: parse_version(&self.version)?,
        })
    }
}

#[utoipa::path(
    post,
    path = "/api/v1/incidents/{id}/evidence/prometheus",
    operation_id = "queryPrometheus",
    summary = "Run a PromQL range query and keep the result as metrics evidence",
    description = "Runs `query_range` on the server's Prometheus (`--prometheus-url`) with the app's                    credentials (responders and above). The result is stored like a pasted metrics                    answer, with the query, the window and a link to Prometheus's graph. 404 when no                    Prometheus is configured or responder queries are turned off; 400 naming                    Prometheus's error for a query it rejects; 422 for a query that matched nothing;                    502 when Prometheus is down or slow.",
    tag = "evidence",
    params(IncidentPath),
    request_body(content = PromQuery, example = json!(examples::prometheus_query())),
    responses(
        (status = 201, description = "The result as evidence, with its observations, the window and the link",
         body = crate::services::prometheus::QueryStored, example = json!(examples::prometheus_stored())),
        (status = 200, description = "The same query over the same window was already evidence: nothing added, `notice` says which",
         body = crate::services::prometheus::QueryStored, example = json!(examples::prometheus_stored())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn api_prometheus(
    State(s): State<AppState>,
    user: CurrentUser,
    Path(id): Path<String>,
    req: Request,
) -> Result<Response, ApiError> {
    user.require(Role::Responder, "querying Prometheus")?;
    let id = incident_id(&id)?;
    let limit = s.settings.max_body_bytes;
    let axum::Json(q) = axum::Json::<PromQuery>::from_request(req, &s)
        .await
        .map_err(|e| rejection(e.status(), e.body_text(), limit))?;
    let request = q.to_request()?;
    let stored = crate::services::prometheus::run_query(
        &s.pool,
        s.prometheus.as_deref(),
        &user.0.name,
        &id,
        request,
    )
    .await?;
    let status = if stored.added.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(stored)).into_response())
}

/// The evidence panel's Prometheus form: 303 to the incident's observations, or the page again
/// with the input kept (422 for a query Prometheus rejects or that matched nothing).
pub(super) async fn page_prometheus(
    State(s): State<AppState>,
    user: CurrentUser,
    headers: axum::http::HeaderMap,
    Path(id): Path<String>,
    req: Request,
) -> Result<Response, PageError> {
    let id = incident_id(&id)?;
    let limit = s.settings.max_body_bytes;
    let axum::Form(q) = axum::Form::<PromQuery>::from_request(req, &s)
        .await
        .map_err(|e| rejection(e.status(), e.body_text(), limit))?;
    let kept = KeptInput {
        prometheus: q.kept(),
        based_on: parse_version(&q.version).ok().flatten(),
        ..Default::default()
    };
    let result = async {
        user.require(Role::Responder, "querying Prometheus")?;
        let request = q.to_request()?;
        crate::services::prometheus::run_query(
            &s.pool,
            s.prometheus.as_deref(),
            &user.0.name,
            &id,
            request,
        )
        .await
    }
    .await;
    match result {
        Ok(stored) if !stored.added.created => Ok(Redirect::to(&format!(
            "/incidents/{id}?duplicate={}#observations",
            stored.added.evidence.id
        ))
        .into_response()),
        Ok(_) => Ok(Redirect::to(&format!("/incidents/{id}#observations")).into_response()),
        // The query is the input: a query Prometheus rejects re-renders as invalid input.
        Err(AppError::BadRequest(m)) => {
            let e = ValidationError::new("query", m).into();
            incident_error(&s, &user.0, &headers, &id, e, kept).await
        }
        Err(e) => incident_error(&s, &user.0, &headers, &id, e, kept).await,
    }
}
