//! The MCP door (DESIGN.md §8, "Agents"): organizational memory for every agent a team already
//! uses, over the Model Context Protocol. Streamable HTTP at `/mcp` in the same process, on the
//! official Rust SDK (`rmcp`): version negotiation, the `Mcp-Session-Id` session and the
//! server-sent events of the transport are the SDK's. Like `web/`, it parses, authorizes, calls
//! a service and renders; the rules live in the services (`services::questions`,
//! `services::evidence`).
//!
//! - [`endpoint`]: the route. It checks the API token (`Authorization: Bearer im_…`, the
//!   extractor every API route uses) and answers 401 before any session exists; the checked
//!   [`Caller`] rides in the request to the tool.
//! - [`server`]: the handler (`initialize`, `tools/list`, `tools/call`).
//! - [`tools`]: the tools, their argument types and schemas, and their dispatch.
//! - [`answers`] and [`render`]: what a tool answers, bounded, with incident text fenced.
//! - [`bridge`]: `incidentmind mcp`, a stdio relay for clients that only start local processes.
//!
//! Agents read memory; the only write is evidence into an incident. No tool writes memory,
//! confirms, learns, approves or records a verdict (`tests/app/mcp.rs` holds the list to it).

pub mod answers;
pub mod bridge;
pub mod render;
pub mod server;
pub mod tools;

use axum::extract::{FromRequestParts, Request, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tower::ServiceExt;

use crate::error::AppError;
use crate::store::users::User;
use crate::web::AppState;
use crate::web::auth::{AuthRejection, CurrentUser, bearer_token};

/// Who is calling a tool: the user of the request's API token, with the app.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The token's user (their role limits what the tools do).
    pub user: User,
    /// The app the tools call services of.
    pub state: AppState,
}

/// The Streamable HTTP service of `/mcp` and its sessions (in this process's memory: behind a
/// load balancer, a client's requests must reach the instance that holds its session). Held in
/// [`AppState`].
#[derive(Clone)]
pub struct Endpoint {
    service: StreamableHttpService<server::McpServer, LocalSessionManager>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("mcp::Endpoint")
    }
}

impl Default for Endpoint {
    /// Sessions kept in memory. `Host` is not checked: the server is reached under whatever
    /// name the deployment gives it, and every request needs an API token, which a page that
    /// rebinds a name to this server cannot know (the SDK's default allows only loopback hosts,
    /// for servers without authentication).
    fn default() -> Self {
        let config = StreamableHttpServerConfig::default().disable_allowed_hosts();
        Self {
            service: StreamableHttpService::new(
                || Ok(server::McpServer),
                std::sync::Arc::new(LocalSessionManager::default()),
                config,
            ),
        }
    }
}

/// `GET|POST|DELETE /mcp`: the MCP endpoint. A request without a valid API token is refused
/// ([`refused`]: 401 with `WWW-Authenticate: Bearer`) before the SDK sees it, so no session
/// exists for it; a session cookie is not enough. Otherwise the request goes to the SDK with its
/// [`Caller`].
pub async fn endpoint(State(state): State<AppState>, req: Request) -> Response {
    let (mut parts, body) = req.into_parts();
    if bearer_token(&parts.headers).is_none() {
        return refused(&AppError::Unauthenticated);
    }
    // With an Authorization header the extractor checks the token only (never a session).
    let user = match CurrentUser::from_request_parts(&mut parts, &state).await {
        Ok(CurrentUser(user)) => user,
        Err(AuthRejection::Api(e) | AuthRejection::PageFailure(e)) => return refused(&e),
        Err(AuthRejection::Page { .. }) => return refused(&AppError::Unauthenticated),
    };
    parts.extensions.insert(Caller {
        user,
        state: state.clone(),
    });
    let req = Request::from_parts(parts, body);
    match state.mcp.service.clone().oneshot(req).await {
        Ok(res) => res.map(axum::body::Body::new),
        Err(never) => match never {},
    }
}

/// JSON-RPC error code of a refused token (the implementation-defined server-error range,
/// JSON-RPC 2.0 §5.1).
pub const UNAUTHORIZED_CODE: i32 = -32001;

/// The answer to a request whose token was refused: the error's status (401, or 429 over the
/// token's rate limit), `WWW-Authenticate: Bearer` on a 401 (RFC 6750 §3), `Retry-After` on a
/// 429, and a JSON-RPC error body, so an MCP client shows the agent what to fix.
fn refused(e: &AppError) -> Response {
    let message = match e {
        AppError::Unauthenticated => "missing, wrong or revoked API token: send \
            Authorization: Bearer im_… with a token of an IncidentMind user (incidentmind user \
            token NAME)"
            .to_string(),
        other => other.public_message(),
    };
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": UNAUTHORIZED_CODE, "message": message},
    });
    let mut res = (e.status(), axum::Json(body)).into_response();
    if res.status() == axum::http::StatusCode::UNAUTHORIZED {
        res.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"incidentmind\""),
        );
    }
    if let Some(secs) = e.retry_after_secs() {
        res.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    res
}
