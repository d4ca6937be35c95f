//! Operator endpoints beside the app: `GET /readyz`, the readiness report a load
//! balancer or orchestrator polls; `GET /metrics`, on the app's address behind
//! `--metrics-token` and/or on the separate `--metrics-listen` address ([`metrics_router`]).
//! (`GET /healthz`, liveness, stays a plain `ok` in `web/mod.rs`.)

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::AppState;

/// `GET /readyz`: whether this process should get traffic, as JSON:
///
/// ```json
/// {"status": "ready",
///  "checks": {"database":   {"status": "ok"},
///             "migrations": {"status": "ok", "applied": 13, "expected": 13},
///             "embeddings": {"status": "loaded", "model": "all-MiniLM-L6-v2"}}}
/// ```
///
/// - `database`: `ok` when `SELECT 1` answers, else `error` with `"error"`: the driver's text.
/// - `migrations`: `ok` when the applied migrations equal the ones built into the binary, else
///   `pending` (or `error` when the table cannot be read).
/// - `embeddings`: `loaded` (the built-in model is in memory), `endpoint` (an OpenAI-compatible
///   endpoint, with its `model`), or `disabled` (`--embeddings off`: recall on words and keys).
///   `serve` refuses to start when the built-in model cannot be loaded, so a running server has
///   no "not loaded" state; embeddings never make the server unready.
///
/// `status` is `ready` (HTTP 200) when database and migrations are `ok`, else `not_ready` with
/// HTTP 503 Service Unavailable (RFC 9110 §15.6.4).
pub async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Value>) {
    let database = match crate::services::health::ping(&state.pool).await {
        Ok(()) => json!({"status": "ok"}),
        Err(e) => {
            tracing::warn!(error = ?e, "readiness: database does not answer");
            json!({"status": "error", "error": "the database does not answer a query"})
        }
    };
    let migrations = match crate::services::health::migration_status(&state.pool).await {
        Ok((applied, expected)) => json!({
            "status": if applied == expected { "ok" } else { "pending" },
            "applied": applied,
            "expected": expected,
        }),
        Err(_) => json!({"status": "error"}),
    };
    let embeddings = match state.memory.embedder() {
        None => json!({"status": "disabled"}),
        Some(e) if e.model() == crate::memory::minilm::MODEL_NAME => {
            json!({"status": "loaded", "model": e.model()})
        }
        Some(e) => json!({"status": "endpoint", "model": e.model()}),
    };
    let ready = database["status"] == "ok" && migrations["status"] == "ok";
    let body = json!({
        "status": if ready { "ready" } else { "not_ready" },
        "checks": {"database": database, "migrations": migrations, "embeddings": embeddings},
    });
    let code = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, Json(body))
}

/// Counts every request in [`crate::metrics::Metrics::http_request`] by method, matched route
/// pattern (`unmatched` for the 404 fallback) and status, with its latency.
pub async fn count_requests(
    State(state): State<AppState>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let started = std::time::Instant::now();
    let method = req.method().as_str().to_string();
    let route = req
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |p| p.as_str().to_string());
    let response = next.run(req).await;
    state.metrics.http_request(
        &method,
        &route,
        response.status().as_u16(),
        started.elapsed(),
    );
    response
}

/// `GET /metrics`: every metric family in the Prometheus text exposition format (version 0.0.4,
/// `text/plain; version=0.0.4`), with the gauges computed from the database at the scrape
/// (incidents not yet learned by state and severity, memory records by kind, audit log entries,
/// embedding backlog). Served on the app's address only when `--metrics-token` is set (404
/// otherwise), and only to `Authorization: Bearer <that token>` (401 otherwise), so the counts
/// never reach the public. `--metrics-listen` serves the same text on a separate address
/// ([`metrics_router`]).
///
/// # Errors
/// 404, 401 as above; 500 when the database does not answer.
pub async fn metrics(
    State(state): State<AppState>,
    headers: axum::http::HeaderMap,
) -> Result<axum::response::Response, super::errors::ApiError> {
    use crate::error::AppError;
    let Some(expected) = state.settings.metrics_token_sha256.as_deref() else {
        return Err(AppError::NotFound(
            "/metrics (set --metrics-token to serve it here, or --metrics-listen)".into(),
        )
        .into());
    };
    let presented =
        super::auth::bearer_token(&headers).map(|t| crate::digest::sha256_hex(t.as_bytes()));
    if presented.as_deref() != Some(expected) {
        return Err(AppError::Unauthenticated.into());
    }
    scrape(&state).await
}

/// The scrape itself: the scrape-time gauges ([`gauges`]) and every family rendered.
async fn scrape(state: &AppState) -> Result<axum::response::Response, super::errors::ApiError> {
    use axum::response::IntoResponse as _;
    let gauges = crate::services::health::gauges(&state.pool, &state.memory).await?;
    let body = state.metrics.render(&gauges);
    Ok((
        [(
            axum::http::header::CONTENT_TYPE,
            crate::metrics::CONTENT_TYPE,
        )],
        body,
    )
        .into_response())
}

/// The router of the `--metrics-listen` address: `GET /metrics` as [`metrics`] renders it but
/// without a token (who can reach that address is the operator's access control: a loopback or
/// an internal interface only Prometheus reaches), whatever `--metrics-token` says; every other
/// path is a 404 with the JSON error body, so nothing else of the app is reachable there. The
/// scrapes are not counted in `incidentmind_http_requests_total` (that family is the app's
/// traffic).
pub fn metrics_router(state: AppState) -> axum::Router {
    use crate::error::AppError;
    async fn open_metrics(
        State(state): State<AppState>,
    ) -> Result<axum::response::Response, super::errors::ApiError> {
        scrape(&state).await
    }
    async fn nothing_else(uri: axum::http::Uri) -> super::errors::ApiError {
        super::errors::ApiError(AppError::NotFound(format!(
            "{} (this address serves only /metrics)",
            uri.path()
        )))
    }
    axum::Router::new()
        .route("/metrics", axum::routing::get(open_metrics))
        .fallback(nothing_else)
        .with_state(state)
}

/// Serves [`metrics_router`] on `listener` in a task of its own until `stopped` turns true (the
/// same shutdown signal as the app's listener; a scrape in flight finishes).
pub fn spawn_metrics_listener(
    listener: tokio::net::TcpListener,
    state: AppState,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let served = axum::serve(listener, metrics_router(state))
            .with_graceful_shutdown(async move {
                let _ = stopped.wait_for(|s| *s).await;
            })
            .await;
        if let Err(e) = served {
            tracing::error!(error = %e, "the metrics listener stopped");
        }
    })
}
