//! The shared pieces of the OpenAPI document that handlers name in their `#[utoipa::path]`: the
//! error body and responses every operation lists, the path parameters and the verdict codes. A
//! leaf of `web/`: handlers and `openapi.rs` use it, it uses nothing of theirs.

/// The error body of every `/api/v1` response with a 4xx or 5xx status, as
/// `web::errors::ApiError` renders an [`crate::error::AppError`]:
/// `{"error": {"code": "…", "message": "…"}}`. A 429 also carries `Retry-After` (seconds).
#[derive(utoipa::ToSchema)]
#[schema(example = json!({"error": {"code": "invalid_transition", "message":
    "cannot learn an incident that is investigating: a reviewer must confirm the post-mortem first"}}))]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// The `error` object of an [`ErrorBody`].
#[derive(utoipa::ToSchema)]
pub struct ErrorDetail {
    /// Stable machine-readable code ([`crate::error::AppError::code`]).
    pub code: ErrorCode,
    /// Human-readable text: the reason for a 4xx, a generic text for a 5xx (whose cause is
    /// logged, never shown).
    #[schema(example = "incident INC-2026-0042")]
    pub message: String,
}

/// The codes of [`crate::error::AppError::code`], with their statuses: `validation` 422,
/// `bad_request` 400, `payload_too_large` 413, `unauthenticated` 401, `forbidden` 403,
/// `not_found` 404, `invalid_transition` 409, `conflict` 409, `rate_limited` 429, `internal`
/// 500, `upstream` 502, `busy` 503, `storage_full` 503.
#[derive(utoipa::ToSchema)]
#[schema(rename_all = "snake_case")]
pub enum ErrorCode {
    /// 422: a field is invalid (the message names it).
    Validation,
    /// 400: the body or a parameter is malformed.
    BadRequest,
    /// 413: the body is over the limit.
    PayloadTooLarge,
    /// 401: no or an unknown credential.
    Unauthenticated,
    /// 403: the credential may not do this.
    Forbidden,
    /// 404: no such resource.
    NotFound,
    /// 409: the workflow does not allow this move from the current state.
    InvalidTransition,
    /// 409: a stale version or a conflicting write.
    Conflict,
    /// 429: over a rate limit (`Retry-After` says when to try again).
    RateLimited,
    /// 503: an alert sender over its delivery limit (`Retry-After` says when to retry; senders
    /// retry a 5xx).
    Busy,
    /// 503: the database's disk is full; nothing was written (`Retry-After` says when to retry).
    StorageFull,
    /// 500: an internal error.
    Internal,
    /// 502: a server the app queries for the request (Prometheus) is down, slow or answered an
    /// error that is not about the request's input.
    Upstream,
}

/// The error responses every `/api/v1` operation lists (`responses(…, ApiErrors)` on each
/// handler's `#[utoipa::path]`): 4XX and 5XX, both with an [`ErrorBody`].
#[derive(utoipa::IntoResponses)]
pub enum ApiErrors {
    /// A client error: the message says what to change.
    #[response(
        status = "4XX",
        description = "Client error: `{\"error\": {\"code\", \"message\"}}`"
    )]
    Client(ErrorBody),
    /// A server error: the cause is logged, the message is generic.
    #[response(
        status = "5XX",
        description = "Server error: `{\"error\": {\"code\": \"internal\", \"message\"}}`"
    )]
    Server(ErrorBody),
}

/// The `{id}` of an incident's routes.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct IncidentPath {
    /// Incident id, `INC-YYYY-NNNN`.
    #[param(example = "INC-2026-0042")]
    pub id: String,
}

/// The `{id}` and `{rid}` of a recommendation's routes.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct RecommendationPath {
    /// Incident id, `INC-YYYY-NNNN`.
    #[param(example = "INC-2026-0042")]
    pub id: String,
    /// Recommendation id (`id` of a recommendation in the investigation).
    #[param(example = 9)]
    pub rid: i64,
}

/// The `{id}` of a memory record's routes.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct MemoryPath {
    /// Record id, with or without its `MEM-` prefix.
    #[param(example = "MEM-62")]
    pub id: String,
}

/// The `{id}` of an integration's routes.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct IntegrationPath {
    /// Integration id.
    #[param(example = 1)]
    pub id: i64,
}

/// The `{id}` of a chat channel's routes.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ChannelPath {
    /// Chat channel id.
    #[param(example = 1)]
    pub id: i64,
}

/// A verdict on an approved action, as `POST …/verdict` takes it.
#[derive(utoipa::ToSchema)]
#[schema(rename_all = "snake_case")]
pub enum VerdictCode {
    /// The action resolved the incident.
    Resolved,
    /// It helped, not fully.
    PartiallyResolved,
    /// It did not help: a remediation failure is written to memory at once.
    DidNotResolve,
    /// It made things worse: also a remediation failure.
    MadeWorse,
}
