//! The HTTP layer: the one route table ([`routes`], every URL of the app, top to bottom), the
//! middleware stack around it ([`router`]), [`AppState`] and the health checks. The handlers live
//! in one module per resource; they parse, authorize, call a service and render, and hold no
//! business rules (DESIGN.md §7).

pub mod accounts;
pub mod api;
pub mod assets;
pub mod auth;
pub mod chat;
pub mod docs;
pub mod errors;
pub mod evidence;
pub mod examples;
pub mod forms;
pub mod incident;
pub mod insights;
pub mod integrations;
pub mod investigation;
pub mod layout;
pub mod learnings;
pub mod limits;
pub mod live;
pub mod memory;
pub mod memory_pages;
pub mod openapi;
pub mod ops;
pub mod page_cache;
pub mod pages;
pub mod postmortem;
pub mod prometheus;
pub mod proposals;
pub mod proxy;
pub mod review;
pub mod schema;
pub mod sessions;
pub mod signin;
pub mod view;
pub mod webhooks;

use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, State};
use axum::http::{HeaderName, HeaderValue, Request, StatusCode, header};
use axum::response::Redirect;
use axum::routing::{get, post};
use tower::ServiceBuilder;
use tower_http::csrf::CsrfLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::trace::TraceLayer;
use tower_sessions::{Expiry, SessionManagerLayer, cookie::SameSite};

/// Every request is answered within this time, 408 Request Timeout after it.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

// The model call must give up first, so a page shows the built-in result with "model
// unavailable" instead of a 408.
const _: () = assert!(crate::analyst::llm::MAX_TIMEOUT.as_secs() < REQUEST_TIMEOUT.as_secs());

/// The default of [`Settings::max_webhook_bytes`]: 16 MiB, some 40,000 Alertmanager alerts.
pub const DEFAULT_MAX_WEBHOOK_BYTES: usize = 16 * 1024 * 1024;

/// Runtime settings the handlers need.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Largest accepted request body, bytes (413 above it).
    pub max_body_bytes: usize,
    /// Mark the session cookie `Secure`.
    pub secure_cookies: bool,
    /// Largest accepted evidence upload, bytes (413 above it).
    pub max_evidence_bytes: usize,
    /// Largest accepted alert webhook body, bytes (413 above it): read as it streams in and cut
    /// off past the limit, never buffered whole first. An Alertmanager group of 3,000 alerts is
    /// about 1.2 MB; Alertmanager does not retry a 413, so this is well above any group its
    /// `max_alerts` lets through.
    pub max_webhook_bytes: usize,
    /// Let the last editor of a post-mortem draft confirm it (small teams).
    pub allow_self_confirm: bool,
    /// SHA-256 (hex) of the bearer token `GET /metrics` requires; `None`: `/metrics` is not
    /// served (404). Only the digest is kept, so `Debug` cannot print the token.
    pub metrics_token_sha256: Option<String>,
    /// Rate limits and the proxies trusted for `X-Forwarded-For`.
    pub rate_limits: limits::RateLimitSettings,
    /// Standing rules (confirmed lessons) per service above which consolidation proposals for
    /// that service are queued first and say so.
    pub rule_cap: usize,
    /// How often `serve` runs consolidation; `None`: only on demand (`incidentmind
    /// consolidate`).
    pub consolidate_every: Option<std::time::Duration>,
    /// The Prometheus source (`--prometheus-url`); `None`: no series are pulled and the
    /// Prometheus query of the evidence panel answers 404.
    pub prometheus: Option<crate::prometheus::PrometheusConfig>,
    /// Chat delivery: the public URL messages link to, the worker's waits
    /// ([`crate::services::chat::ChatSettings`]).
    pub chat: crate::services::chat::ChatSettings,
    /// How people sign in: OpenID Connect, the authenticating proxy, passwords, the groups →
    /// role mapping (issue #54).
    pub identity: crate::services::identity::IdentitySettings,
    /// The live incident page's streams: per-user limit, idle limit, heartbeat
    /// ([`live::LiveSettings`]).
    pub live: live::LiveSettings,
}

impl Settings {
    /// Who may confirm a post-mortem under these settings (the one rule:
    /// [`crate::domain::ConfirmPolicy::check`]).
    pub fn confirm_policy(&self) -> crate::domain::ConfirmPolicy {
        crate::domain::ConfirmPolicy {
            allow_self_confirm: self.allow_self_confirm,
        }
    }
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            max_body_bytes: 1024 * 1024,
            secure_cookies: false,
            max_evidence_bytes: 50 * 1024 * 1024,
            max_webhook_bytes: DEFAULT_MAX_WEBHOOK_BYTES,
            allow_self_confirm: false,
            metrics_token_sha256: None,
            rate_limits: limits::RateLimitSettings::default(),
            rule_cap: crate::domain::consolidation::DEFAULT_RULE_CAP,
            consolidate_every: None,
            prometheus: None,
            chat: crate::services::chat::ChatSettings::default(),
            identity: crate::services::identity::IdentitySettings::default(),
            live: live::LiveSettings::default(),
        }
    }
}

/// Shared state of every handler: a handle on one [`SharedState`] (the database pool,
/// organizational memory with its embedder and caches, the settings, the optional model…), whose
/// fields it gives access to (`state.pool`). axum clones the state for every request at every
/// layer that takes it and at the handler; a clone is one reference count here (issue #56: the
/// 17 fields cloned and dropped one by one were a tenth of `/healthz`'s CPU at 200 connections).
#[derive(Debug, Clone)]
pub struct AppState(std::sync::Arc<SharedState>);

impl std::ops::Deref for AppState {
    type Target = SharedState;

    fn deref(&self) -> &SharedState {
        &self.0
    }
}

/// What [`AppState`] holds, built once at start ([`AppState::new`] and its `with_…` methods).
#[derive(Debug, Clone)]
pub struct SharedState {
    /// The one database (SQLite or PostgreSQL, see [`crate::store::Backend`]): its pool, and the
    /// change notices of its incident writes (`pool.changes()`, [`crate::store::changes`]).
    pub pool: crate::store::Db,
    /// Recall, its caches and the embedder, over the same pool.
    pub memory: crate::memory::Memory,
    /// Settings.
    pub settings: std::sync::Arc<Settings>,
    /// The analyst investigations ask: the model with the built-in analyst behind it
    /// ([`crate::analyst::fallback::WithFallback`]), or the built-in analyst alone.
    pub analyst: std::sync::Arc<dyn crate::analyst::Analyst>,
    /// Incident pages as last rendered.
    pub pages: std::sync::Arc<page_cache::RenderedPages>,
    /// This app's Prometheus recorder (`GET /metrics`).
    pub metrics: crate::metrics::Metrics,
    /// The rate limiters of [`Settings::rate_limits`].
    pub limits: std::sync::Arc<limits::RateLimiters>,
    /// Users recently authenticated ([`auth::KnownUsers`]).
    pub users: std::sync::Arc<auth::KnownUsers>,
    /// The Prometheus source when one is configured ([`Settings::prometheus`]).
    pub prometheus: Option<std::sync::Arc<crate::prometheus::Prometheus>>,
    /// The MCP endpoint `/mcp` and its sessions ([`crate::mcp::Endpoint`]).
    pub mcp: crate::mcp::Endpoint,
    /// The OpenID Connect relying party when `Settings::identity` configures one.
    pub oidc: Option<std::sync::Arc<crate::identity::Oidc>>,
    /// Who follows which incident live ([`live::Live`]).
    pub live: std::sync::Arc<live::Live>,
    /// Write requests in flight, which the chat outbox yields to ([`crate::load::Foreground`]).
    pub foreground: std::sync::Arc<crate::load::Foreground>,
}

impl AppState {
    /// Builds the state with the built-in analyst only and a memory without embeddings.
    pub fn new(pool: impl Into<crate::store::Db>, settings: Settings) -> Self {
        let pool = pool.into();
        Self(std::sync::Arc::new(SharedState {
            limits: std::sync::Arc::new(limits::RateLimiters::new(&settings.rate_limits)),
            memory: crate::memory::Memory::new(pool.clone(), None),
            pool,
            analyst: std::sync::Arc::new(crate::analyst::fallback::WithFallback::default()),
            pages: std::sync::Arc::default(),
            metrics: crate::metrics::Metrics::new(),
            users: std::sync::Arc::default(),
            prometheus: None,
            mcp: crate::mcp::Endpoint::default(),
            oidc: settings.identity.oidc.clone().and_then(|c| {
                crate::identity::Oidc::new(c)
                    .inspect_err(|e| tracing::error!(error = %e, "OpenID Connect sign-in is off"))
                    .ok()
                    .map(std::sync::Arc::new)
            }),
            settings: std::sync::Arc::new(settings),
            live: std::sync::Arc::default(),
            foreground: std::sync::Arc::default(),
        }))
    }

    /// The fields, to change while the state is still being built (a copy of them if the state
    /// was already shared, which the `with_…` methods are not called after).
    fn parts(&mut self) -> &mut SharedState {
        std::sync::Arc::make_mut(&mut self.0)
    }

    /// Uses `prometheus` as the Prometheus source.
    pub fn with_prometheus(mut self, prometheus: crate::prometheus::Prometheus) -> Self {
        self.parts().prometheus = Some(std::sync::Arc::new(prometheus));
        self
    }

    /// Uses `memory` (built over the same pool, typically with an embedder).
    pub fn with_memory(mut self, memory: crate::memory::Memory) -> Self {
        self.parts().memory = memory;
        self
    }

    /// Adds an LLM analyst (investigations fall back to the built-in analyst when it fails).
    pub fn with_llm(mut self, llm: std::sync::Arc<dyn crate::analyst::Analyst>) -> Self {
        self.parts().analyst =
            std::sync::Arc::new(crate::analyst::fallback::WithFallback { model: Some(llm) });
        self
    }
}

/// Content-Security-Policy of every response: no inline script, no framing, no `<base>`.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                       object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The route table: every URL of the app, grouped by resource, each pointing at a handler in that
/// resource's module. Pages and JSON API of a resource sit together. `evidence_limit` is the
/// largest evidence body: the evidence routes and the forms that take long text accept bodies up
/// to it (so an over-long field comes back as a 422 naming it, with the input kept, rather than a
/// 413 that loses it); `webhook_limit` is the alert webhooks' own ([`Settings::max_webhook_bytes`]);
/// everything else has the app-wide body limit of [`router`].
///
/// Long on purpose: the one route table, read top to bottom; split, a URL would no longer be
/// found in one place.
#[allow(clippy::too_many_lines)]
pub fn routes(evidence_limit: usize, webhook_limit: usize) -> Router<AppState> {
    let long = || DefaultBodyLimit::max(evidence_limit);
    let webhook = || DefaultBodyLimit::max(webhook_limit);
    Router::new()
        // Health checks.
        .route("/healthz", get(healthz))
        .route("/readyz", get(ops::readyz))
        .route("/metrics", get(ops::metrics))
        // Static assets.
        .route("/static/{*path}", get(assets::serve))
        // Session and profile (web/pages.rs, web/api.rs).
        .route("/", get(|| async { Redirect::to("/incidents") }))
        .route(
            "/signin",
            get(pages::signin_page).post(pages::signin_submit),
        )
        .route("/signout", post(signin::signout))
        .route("/signin/oidc", get(signin::start))
        .route("/signin/oidc/callback", get(signin::callback))
        .route(
            "/profile",
            get(accounts::profile_page).post(accounts::profile_submit),
        )
        // Accounts: one's password and API tokens, the admins' users page (web/accounts.rs).
        .route("/profile/password", post(accounts::password_submit))
        .route("/profile/tokens", post(accounts::token_create))
        .route(
            "/profile/tokens/{id}/revoke",
            post(accounts::token_revoke_own),
        )
        .route("/admin/users", get(accounts::admin_page))
        .route("/admin/users/{name}/disable", post(accounts::admin_disable))
        .route("/admin/users/{name}/enable", post(accounts::admin_enable))
        .route("/admin/tokens/{id}/revoke", post(accounts::admin_revoke))
        .route("/api/v1/me", get(api::me))
        .route("/api/v1/openapi.json", get(openapi::openapi_json))
        .route("/api/docs", get(docs::page))
        // Agents: the MCP server, Streamable HTTP, API tokens only (src/mcp/).
        .route("/mcp", axum::routing::any(crate::mcp::endpoint))
        // Incidents: list, create, show, resolve, reopen (pages in web/pages.rs and
        // web/incident.rs, JSON in web/api.rs).
        .route(
            "/incidents",
            get(pages::list_page).merge(post(pages::create_submit).layer(long())),
        )
        .route("/incidents/new", get(pages::new_page))
        .route("/incidents/{id}", get(incident::show_page))
        // The live page: the change stream and the panels it re-renders (web/live/).
        .route("/incidents/{id}/events", get(live::events))
        .route("/incidents/{id}/panels", get(live::panels::panels))
        .route(
            "/incidents/{id}/resolve",
            post(incident::resolve_submit).layer(long()),
        )
        .route("/incidents/{id}/reopen", post(incident::reopen_submit))
        .route("/api/v1/incidents", post(api::create).get(api::list))
        .route("/api/v1/incidents/{id}", get(api::show))
        .route("/api/v1/incidents/{id}/resolve", post(api::resolve))
        .route("/api/v1/incidents/{id}/reopen", post(api::reopen))
        // Evidence of an incident: paste/upload and the lines an observation points at
        // (web/evidence.rs), and a responder's Prometheus query (web/prometheus.rs).
        .route(
            "/api/v1/incidents/{id}/evidence",
            get(evidence::api_list)
                .post(evidence::api_add)
                .layer(long()),
        )
        .route(
            "/incidents/{id}/evidence",
            post(evidence::page_add).layer(long()),
        )
        .route("/incidents/{id}/evidence/{eid}", get(evidence::lines_page))
        .route(
            "/api/v1/incidents/{id}/evidence/prometheus",
            post(prometheus::api_prometheus),
        )
        .route(
            "/incidents/{id}/evidence/prometheus",
            post(prometheus::page_prometheus),
        )
        // Investigation: recall + analyst, recommendations, simulated approvals, verdicts
        // (web/investigation.rs).
        .route(
            "/api/v1/incidents/{id}/investigate",
            post(investigation::api_investigate),
        )
        .route(
            "/api/v1/incidents/{id}/investigation",
            get(investigation::api_latest),
        )
        .route(
            "/api/v1/incidents/{id}/recommendations",
            post(investigation::api_propose),
        )
        .route(
            "/api/v1/incidents/{id}/recommendations/{rid}/approve",
            post(investigation::api_approve),
        )
        .route(
            "/api/v1/incidents/{id}/recommendations/{rid}/reject",
            post(investigation::api_reject),
        )
        .route(
            "/api/v1/incidents/{id}/recommendations/{rid}/verdict",
            post(investigation::api_verdict),
        )
        .route(
            "/incidents/{id}/investigate",
            post(investigation::page_investigate),
        )
        .route(
            "/incidents/{id}/recommendations",
            post(investigation::page_propose),
        )
        .route(
            "/incidents/{id}/recommendations/{rid}/approve",
            post(investigation::page_approve),
        )
        .route(
            "/incidents/{id}/recommendations/{rid}/reject",
            post(investigation::page_reject),
        )
        .route(
            "/incidents/{id}/recommendations/{rid}/verdict",
            post(investigation::page_verdict),
        )
        // Post-mortem: draft, edit, confirm, Markdown export (web/postmortem.rs), learnings
        // preview and Learn (web/learnings.rs), and the reviewers' queue (web/review.rs) with its
        // proposals to accept or reject.
        .route(
            "/api/v1/incidents/{id}/postmortem",
            post(postmortem::api_draft)
                .get(postmortem::api_get)
                .put(postmortem::api_put),
        )
        .route(
            "/api/v1/incidents/{id}/postmortem/confirm",
            post(postmortem::api_confirm),
        )
        .route(
            "/api/v1/incidents/{id}/postmortem.md",
            get(postmortem::api_markdown),
        )
        .route(
            "/api/v1/incidents/{id}/learnings/preview",
            get(learnings::api_preview),
        )
        .route("/api/v1/incidents/{id}/learn", post(learnings::api_learn))
        .route("/api/v1/review", get(review::api_review))
        .route("/api/v1/proposals/{id}/accept", post(proposals::api_accept))
        .route("/api/v1/proposals/{id}/reject", post(proposals::api_reject))
        .route(
            "/incidents/{id}/postmortem",
            post(postmortem::page_draft).get(postmortem::page_show),
        )
        .route(
            "/incidents/{id}/postmortem/edit",
            post(postmortem::page_edit).layer(long()),
        )
        .route(
            "/incidents/{id}/postmortem/confirm",
            post(postmortem::page_confirm),
        )
        .route("/incidents/{id}/learnings", get(learnings::page_preview))
        .route("/incidents/{id}/learn", post(learnings::page_learn))
        .route("/review", get(review::page_review))
        .route("/review/proposals/{id}/accept", post(review::page_accept))
        .route("/review/proposals/{id}/reject", post(review::page_reject))
        // Insights: recurring failure modes, dead ends by time lost, MTTR and time to detect,
        // thin memory (web/insights.rs).
        .route("/insights", get(insights::page_insights))
        .route("/api/v1/insights", get(insights::api_insights))
        // Organizational memory: browser, notes and runbooks, supersede/retract, recall
        // (web/memory.rs).
        .route(
            "/api/v1/memories",
            get(memory::api_list).post(memory::api_create),
        )
        .route("/api/v1/memories/{id}", get(memory::api_show))
        .route(
            "/api/v1/memories/{id}/supersede",
            post(memory::api_supersede),
        )
        .route("/api/v1/memories/{id}/retract", post(memory::api_retract))
        .route("/api/v1/recall", get(memory::api_recall))
        .route("/memories", get(memory_pages::browser_page))
        .route(
            "/memories/new",
            get(memory_pages::new_page).post(memory_pages::new_submit),
        )
        .route("/memories/sample", post(memory_pages::load_sample))
        .route("/memories/{id}", get(memory_pages::show_page))
        .route(
            "/memories/{id}/supersede",
            post(memory_pages::supersede_submit),
        )
        .route("/memories/{id}/retract", post(memory_pages::retract_submit))
        // Alert webhooks, authenticated by an integration's secret, and the alerts of an
        // incident (web/webhooks.rs).
        .route(
            "/api/v1/webhooks/alertmanager",
            post(webhooks::alertmanager).layer(webhook()),
        )
        .route(
            "/api/v1/webhooks/pagerduty",
            post(webhooks::pagerduty).layer(webhook()),
        )
        .route(
            "/api/v1/webhooks/grafana",
            post(webhooks::grafana).layer(webhook()),
        )
        .route(
            "/api/v1/webhooks/opsgenie",
            post(webhooks::opsgenie).layer(webhook()),
        )
        .route(
            "/api/v1/incidents/{id}/alerts",
            get(webhooks::incident_alerts),
        )
        // Integrations, admin only: the sources whose secrets authenticate the webhooks
        // (web/integrations.rs).
        .route(
            "/api/v1/integrations",
            post(integrations::api_create).get(integrations::api_list),
        )
        .route(
            "/api/v1/integrations/{id}",
            get(integrations::api_show).patch(integrations::api_update),
        )
        .route(
            "/integrations",
            get(integrations::page_list).post(integrations::page_create),
        )
        .route("/integrations/{id}", post(integrations::page_update))
        // Chat channels, admin only: where incident messages are posted (web/chat.rs).
        .route(
            "/api/v1/chat/channels",
            post(chat::api_create).get(chat::api_list),
        )
        .route(
            "/api/v1/chat/channels/{id}",
            get(chat::api_show).patch(chat::api_update),
        )
        .route("/api/v1/chat/channels/{id}/test", post(chat::api_test))
        .route("/chat", get(chat::page_list).post(chat::page_create))
        .route("/chat/{id}", get(chat::page_show).post(chat::page_update))
        .route("/chat/{id}/test", post(chat::page_test))
        .route("/chat/{id}/delete", post(chat::page_delete))
        .route(
            "/chat/{id}/messages/{message}/retry",
            post(chat::page_retry),
        )
}

/// The whole application: the route table ([`routes`]) inside the middleware stack (request ids,
/// tracing, security headers, CSRF check, sessions, body limit, timeout).
pub fn router(state: AppState) -> Router {
    let sessions = SessionManagerLayer::new(sessions::store(state.pool.pool().clone()))
        .with_name("incidentmind_session")
        .with_secure(state.settings.secure_cookies)
        .with_http_only(true)
        .with_same_site(SameSite::Lax)
        .with_expiry(Expiry::OnInactivity(
            tower_sessions::cookie::time::Duration::hours(12),
        ));
    let request_id = HeaderName::from_static("x-request-id");
    let trace = TraceLayer::new_for_http()
        .make_span_with(|req: &Request<_>| {
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
            let span = tracing::info_span!(
                "request",
                http.method = %req.method(),
                http.route = %route,
                request.id = %id,
                incident.id = tracing::field::Empty,
            );
            if let Some(incident) = incident_of_path(&route, req.uri().path()) {
                span.record("incident.id", incident.as_str());
            }
            span
        })
        // One access-log line per request (status, latency) at info, inside the request span.
        .on_response(tower_http::trace::DefaultOnResponse::new().level(tracing::Level::INFO));
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
        // Pages and API answers hold incident data: never kept by a browser or a proxy (after
        // sign-out, Back must not show a cached post-mortem). Static assets set their own.
        .layer(SetResponseHeaderLayer::if_not_present(
            header::CACHE_CONTROL,
            HeaderValue::from_static("no-store"),
        ))
        .layer(sessions)
        .layer(axum::middleware::from_fn_with_state(
            std::sync::Arc::clone(&state.foreground),
            count_writes,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::error_page_layout,
        ))
        .layer(axum::middleware::from_fn(errors::csrf_rejection_message))
        .layer(CsrfLayer::new())
        .layer(DefaultBodyLimit::max(state.settings.max_body_bytes))
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            REQUEST_TIMEOUT,
        ));
    routes(
        state.settings.max_evidence_bytes,
        state.settings.max_webhook_bytes,
    )
    .fallback(errors::not_found)
    .layer(axum::middleware::from_fn_with_state(
        state.clone(),
        wake_memory_after_writes,
    ))
    .layer(middleware)
    // Outermost, so timeouts and refused requests are counted too.
    .layer(axum::middleware::from_fn_with_state(
        state.clone(),
        ops::count_requests,
    ))
    .with_state(state)
}

/// Counts each write request (any method but `GET`, `HEAD` and `OPTIONS`) while it runs, for
/// background work that yields to writes ([`crate::load::Foreground`]).
async fn count_writes(
    axum::extract::State(foreground): axum::extract::State<std::sync::Arc<crate::load::Foreground>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let reads = [
        axum::http::Method::GET,
        axum::http::Method::HEAD,
        axum::http::Method::OPTIONS,
    ];
    if reads.contains(req.method()) {
        return next.run(req).await;
    }
    let _counted = foreground.enter();
    next.run(req).await
}

/// The incident a request is about, for its log span: the path segment the route names
/// `/incidents/{id}` (page and API routes alike), when it is a well-formed incident id.
fn incident_of_path(route: &str, path: &str) -> Option<crate::domain::IncidentId> {
    let mut segments = route.split('/').zip(path.split('/'));
    let mut previous = "";
    segments.find_map(|(pattern, actual)| {
        let hit = previous == "incidents" && pattern == "{id}";
        previous = pattern;
        hit.then(|| crate::domain::IncidentId::parse(actual).ok())
            .flatten()
    })
}

/// The incident a URL path names (`/incidents/{id}…`, `/api/v1/incidents/{id}…`): an id that
/// is not `INC-YYYY-NNNN` is a 404, as an unknown incident is. Every handler reads its path
/// through this one.
fn incident_id(id: &str) -> Result<crate::domain::IncidentId, crate::error::AppError> {
    crate::domain::IncidentId::parse(id)
        .map_err(|_| crate::error::AppError::NotFound(format!("incident {id}")))
}

/// Names `incident` in the current request's log span (`incident.id`), for handlers that learn
/// the incident only from the body or the outcome (a new incident, a webhook delivery).
pub(crate) fn log_incident(incident: &str) {
    tracing::Span::current().record("incident.id", incident);
}

/// After every request that may have written (any method but GET, HEAD and OPTIONS, whatever
/// its status: a write may commit before its answer fails), tells the incident pages' cache to
/// read each incident's state again ([`page_cache::RenderedPages::wrote`]) before the answer
/// leaves, so a page fetched after a write's answer shows the write; after a successful one
/// (2xx/3xx: a learn, a verdict, an import, a note edit…), wakes the memory worker, so incident
/// documents and embeddings are written with the record rather than at the worker's next round.
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
    if write {
        state.pages.wrote();
        if response.status().is_success() || response.status().is_redirection() {
            state.memory.wake();
        }
    }
    response
}

/// `GET /healthz`: 200 while the process runs.
async fn healthz() -> &'static str {
    "ok"
}

#[cfg(test)]
mod tests {
    use super::{AppState, incident_of_path};

    /// axum clones the state for every request at every layer that takes it: it stays one
    /// pointer, and its clones share one `SharedState` (issue #56: cloned field by field it was
    /// a tenth of `/healthz`'s CPU).
    #[tokio::test]
    async fn the_state_is_one_pointer_and_its_clones_share_what_it_holds() {
        assert_eq!(
            std::mem::size_of::<AppState>(),
            std::mem::size_of::<usize>()
        );
        let pool = sqlx::AnyPool::connect_lazy("sqlite::memory:").expect("lazy pool");
        let state = AppState::new(pool, super::Settings::default());
        let copy = state.clone();
        assert!(std::sync::Arc::ptr_eq(&state.0, &copy.0));
        assert!(std::sync::Arc::ptr_eq(&state.pages, &copy.pages));
    }

    #[test]
    fn the_log_span_names_the_incident_of_page_and_api_routes_only_when_well_formed() {
        let id = |route, path| incident_of_path(route, path).map(|i| i.as_str().to_string());
        assert_eq!(
            id(
                "/api/v1/incidents/{id}/evidence",
                "/api/v1/incidents/INC-2026-0042/evidence"
            ),
            Some("INC-2026-0042".into())
        );
        assert_eq!(
            id(
                "/incidents/{id}/recommendations/{rid}/approve",
                "/incidents/INC-2026-0007/recommendations/3/approve"
            ),
            Some("INC-2026-0007".into())
        );
        assert_eq!(id("/api/v1/memories/{id}", "/api/v1/memories/12"), None);
        assert_eq!(id("/incidents/{id}", "/incidents/not-an-id"), None);
        assert_eq!(id("", "/incidents/INC-2026-0001"), None);
    }
}
