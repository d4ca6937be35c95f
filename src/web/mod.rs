//! The HTTP layer: one router for pages (`/incidents…`), the JSON API (`/api/v1/…`), static
//! assets and health checks. Handlers parse, authorize, call a service and render; they hold no
//! business rules (DESIGN.md §7).

pub mod api;
pub mod assets;
pub mod auth;
pub mod errors;
pub mod evidence;
pub mod investigation;
pub mod memory;
pub mod pages;
pub mod postmortem;
pub mod view;
pub mod webhooks;

use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, State};
use axum::http::{HeaderName, HeaderValue, Request, StatusCode, header};
use axum::routing::get;
use sqlx::SqlitePool;
use tower::ServiceBuilder;
use tower_http::csrf::CsrfLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::trace::TraceLayer;
use tower_sessions::{Expiry, SessionManagerLayer, cookie::SameSite};

use crate::store::sessions::SqliteSessionStore;

/// Every request is answered within this time, 408 Request Timeout after it.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

// The model call must give up first, so a page shows the built-in result with "model
// unavailable" instead of a 408.
const _: () = assert!(crate::analyst::llm::MAX_TIMEOUT.as_secs() < REQUEST_TIMEOUT.as_secs());

/// Runtime settings the handlers need.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Largest accepted request body, bytes (413 above it).
    pub max_body_bytes: usize,
    /// Mark the session cookie `Secure`.
    pub secure_cookies: bool,
    /// Largest accepted evidence upload, bytes (413 above it).
    pub max_evidence_bytes: usize,
    /// Let the last editor of a post-mortem draft confirm it (small teams).
    pub allow_self_confirm: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            max_body_bytes: 1024 * 1024,
            secure_cookies: false,
            max_evidence_bytes: 50 * 1024 * 1024,
            allow_self_confirm: false,
        }
    }
}

/// Shared state of every handler: the database pool, organizational memory (with its embedder
/// and caches), the settings and the optional model.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The one SQLite pool.
    pub pool: SqlitePool,
    /// Recall, its caches and the embedder, over the same pool.
    pub memory: crate::memory::Memory,
    /// Settings.
    pub settings: std::sync::Arc<Settings>,
    /// The LLM analyst when a model server is configured; the built-in analyst is always there.
    pub llm: Option<std::sync::Arc<dyn crate::analyst::Analyst>>,
}

impl AppState {
    /// Builds the state with the built-in analyst only and a memory without embeddings.
    pub fn new(pool: SqlitePool, settings: Settings) -> Self {
        Self {
            memory: crate::memory::Memory::new(pool.clone(), None),
            pool,
            settings: std::sync::Arc::new(settings),
            llm: None,
        }
    }

    /// Uses `memory` (built over the same pool, typically with an embedder).
    pub fn with_memory(mut self, memory: crate::memory::Memory) -> Self {
        self.memory = memory;
        self
    }

    /// Adds an LLM analyst.
    pub fn with_llm(mut self, llm: std::sync::Arc<dyn crate::analyst::Analyst>) -> Self {
        self.llm = Some(llm);
        self
    }
}

/// Content-Security-Policy of every response: no inline script, no framing, no `<base>`.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                       object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The whole application: pages, API, assets, health checks and the middleware stack (request
/// ids, tracing, security headers, CSRF check, sessions, body limit).
pub fn router(state: AppState) -> Router {
    let sessions = SessionManagerLayer::new(SqliteSessionStore::new(state.pool.clone()))
        .with_name("incidentmind_session")
        .with_secure(state.settings.secure_cookies)
        .with_http_only(true)
        .with_same_site(SameSite::Lax)
        .with_expiry(Expiry::OnInactivity(
            tower_sessions::cookie::time::Duration::hours(12),
        ));
    let request_id = HeaderName::from_static("x-request-id");
    let trace = TraceLayer::new_for_http().make_span_with(|req: &Request<_>| {
        let route = req
            .extensions()
            .get::<MatchedPath>()
            .map(|p| p.as_str().to_string())
            .unwrap_or_default();
        let id = req
            .headers()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        tracing::info_span!("request", http.method = %req.method(), http.route = %route, request.id = %id)
    });
    let middleware = ServiceBuilder::new()
        .layer(SetRequestIdLayer::new(request_id.clone(), MakeRequestUuid))
        .layer(trace)
        .layer(PropagateRequestIdLayer::new(request_id))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CSP),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::X_FRAME_OPTIONS,
            HeaderValue::from_static("DENY"),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::REFERRER_POLICY,
            HeaderValue::from_static("same-origin"),
        ))
        .layer(sessions)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            errors::error_page_layout,
        ))
        .layer(axum::middleware::from_fn(errors::csrf_rejection_message))
        .layer(CsrfLayer::new())
        .layer(DefaultBodyLimit::max(state.settings.max_body_bytes))
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            REQUEST_TIMEOUT,
        ));
    Router::new()
        .merge(pages::router(state.settings.max_evidence_bytes))
        .merge(api::router())
        .merge(memory::router())
        .merge(investigation::router())
        .merge(postmortem::router(state.settings.max_evidence_bytes))
        .merge(evidence::router(state.settings.max_evidence_bytes))
        .merge(webhooks::router())
        .merge(assets::router())
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .fallback(errors::not_found)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            wake_memory_after_writes,
        ))
        .layer(middleware)
        .with_state(state)
}

/// After every successful write (a non-GET request answered 2xx/3xx: a learn, a verdict, an
/// import, a note edit…), wakes the memory worker, so incident documents and embeddings are
/// written with the record rather than at the worker's next round.
async fn wake_memory_after_writes(
    State(state): State<AppState>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let write = !matches!(
        *req.method(),
        axum::http::Method::GET | axum::http::Method::HEAD | axum::http::Method::OPTIONS
    );
    let response = next.run(req).await;
    if write && (response.status().is_success() || response.status().is_redirection()) {
        state.memory.wake();
    }
    response
}

/// `GET /healthz`: 200 while the process runs.
async fn healthz() -> &'static str {
    "ok"
}

/// `GET /readyz`: 200 when the database answers, 503 otherwise.
async fn readyz(State(state): State<AppState>) -> (StatusCode, &'static str) {
    match sqlx::query("SELECT 1").execute(&state.pool).await {
        Ok(_) => (StatusCode::OK, "ready"),
        Err(e) => {
            tracing::warn!(error = %e, "database not ready");
            (StatusCode::SERVICE_UNAVAILABLE, "database unavailable")
        }
    }
}
