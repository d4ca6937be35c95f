//! The copilot over HTTP: investigate, approve (simulated), reject, verdict — JSON under
//! `/api/v1/incidents/{id}/…` and form posts from the incident page. Any signed-in user may
//! (every role includes responder).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::api::{ActionVersion, BaseVersion, VersionBody};
use super::auth::CurrentUser;
use super::errors::{ApiError, ApiJson, PageError, PageForm};
use super::examples;
use super::forms::{KeptInput, VersionForm};
use super::incident::IncidentPost;
use super::schema::{IncidentPath, RecommendationPath};
use super::{AppState, incident_id};
use crate::error::AppError;
use crate::services::investigation as inv;

#[utoipa::path(
    post,
    path = "/api/v1/incidents/{id}/investigate",
    operation_id = "investigate",
    summary = "Investigate: recall, hypotheses and recommendations",
    tag = "investigation",
    params(IncidentPath),
    request_body(content = Option<VersionBody>, description = "Optional: the incident version the caller saw",
                 example = json!(examples::version())),
    responses(
        (status = 201, description = "Hypotheses, recommendations (flagged dead ends last), what recall returned",
         body = inv::InvestigationView, example = json!(examples::investigation())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn api_investigate(
    State(s): State<AppState>,
    user: CurrentUser,
    Path(id): Path<String>,
    ActionVersion(expected): ActionVersion,
) -> Result<Response, ApiError> {
    let id = incident_id(&id)?;
    let view = inv::investigate(&s.memory, s.analyst.as_ref(), &user.0.name, &id, expected).await?;
    s.metrics.recall("investigation", None, view.recalled.len());
    Ok((StatusCode::CREATED, Json(view)).into_response())
}

#[utoipa::path(
    get,
    path = "/api/v1/incidents/{id}/investigation",
    operation_id = "getInvestigation",
    summary = "Show the latest investigation",
    tag = "investigation",
    params(IncidentPath),
    responses(
        (status = 200, description = "The latest investigation (404 before the first)",
         body = inv::InvestigationView, example = json!(examples::investigation())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn api_latest(
    State(s): State<AppState>,
    _u: CurrentUser,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let id = incident_id(&id)?;
    match crate::services::incidents::latest_investigation(&s.pool, &id).await? {
        Some(view) => Ok(Json(view).into_response()),
        None => Err(AppError::NotFound(format!(
            "an investigation of {id} (run POST /api/v1/incidents/{id}/investigate)"
        ))
        .into()),
    }
}

/// Body of `POST …/recommendations`: an action a person proposes.
#[derive(Debug, Deserialize, Default, utoipa::ToSchema)]
pub struct ProposeBody {
    /// The incident version the request is based on (409 when stale); optional.
    #[serde(default)]
    pub version: Option<i64>,
    /// ActionKind name (aliases accepted: "bigger pool" → `raise_pool_limit`).
    #[serde(default)]
    pub kind: String,
    /// Target; the incident's service when empty.
    #[serde(default)]
    pub target: String,
    /// Why.
    #[serde(default)]
    pub rationale: String,
}

#[utoipa::path(
    post,
    path = "/api/v1/incidents/{id}/recommendations",
    operation_id = "proposeAction",
    summary = "Propose an action yourself",
    tag = "investigation",
    params(IncidentPath),
    request_body(content = ProposeBody, description = "An action from the closed vocabulary, its target and why",
                 example = json!(examples::propose())),
    responses(
        (status = 201, description = "The recommendation, proposed", body = inv::RecommendationView,
         example = json!(examples::recommendation("proposed"))),
        super::schema::ApiErrors
    )
)]
pub(super) async fn api_propose(
    State(s): State<AppState>,
    user: CurrentUser,
    Path(id): Path<String>,
    BaseVersion(version): BaseVersion,
    ApiJson(b): ApiJson<ProposeBody>,
) -> Result<Response, ApiError> {
    let id = incident_id(&id)?;
    let view = inv::propose(
        &s.memory,
        &user.0.name,
        &id,
        &b.kind,
        &b.target,
        &b.rationale,
        version.or(b.version),
    )
    .await?;
    Ok((StatusCode::CREATED, Json(view)).into_response())
}

pub(super) async fn page_propose(
    State(s): State<AppState>,
    user: CurrentUser,
    headers: HeaderMap,
    Path(id): Path<String>,
    PageForm(f): PageForm<ProposeBody>,
) -> Result<Response, PageError> {
    let post = IncidentPost::new(&s, &user.0, &headers, &id)?;
    let write = inv::propose(
        &s.memory,
        &user.0.name,
        &post.id,
        &f.kind,
        &f.target,
        &f.rationale,
        f.version,
    );
    let kept = KeptInput {
        propose: [f.kind.clone(), f.target.clone(), f.rationale.clone()],
        ..Default::default()
    };
    post.write(f.version, kept, COPILOT, write).await
}

/// Body of reject.
#[derive(Debug, Deserialize, Default, utoipa::ToSchema)]
pub struct RejectBody {
    /// The incident version the request is based on (409 when stale); optional.
    #[serde(default)]
    pub version: Option<i64>,
    /// Why (required).
    #[serde(default)]
    pub reason: String,
}

/// Body of verdict.
#[derive(Debug, Deserialize, Default, utoipa::ToSchema)]
pub struct VerdictBody {
    /// The incident version the request is based on (409 when stale); optional.
    #[serde(default)]
    pub version: Option<i64>,
    /// resolved / partially_resolved / did_not_resolve / made_worse.
    #[serde(default)]
    #[schema(value_type = super::schema::VerdictCode)]
    pub verdict: String,
    /// What happened.
    #[serde(default)]
    pub note: String,
}

/// Body of approve (optional; JSON from the API, a form from the incident page).
#[derive(Debug, Deserialize, Default, utoipa::ToSchema)]
pub struct ApproveBody {
    /// The incident version the request is based on (409 when stale); optional.
    #[serde(default)]
    pub version: Option<i64>,
    /// What is different this time: one line, at most 500 characters. Required (422 without it)
    /// when the recommendation carries the dead-end banner (`warning`); optional otherwise.
    #[serde(default)]
    pub reason: String,
}

impl axum::extract::FromRequest<AppState> for ApproveBody {
    type Rejection = PageError;

    /// The incident page's approve form; a post without a form body carries nothing.
    async fn from_request(
        req: axum::extract::Request,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        super::forms::optional_form(req, state).await
    }
}

#[utoipa::path(
    post,
    path = "/api/v1/incidents/{id}/recommendations/{rid}/approve",
    operation_id = "approveAction",
    summary = "Approve a recommendation (simulated, never executed)",
    tag = "investigation",
    params(RecommendationPath),
    request_body(content = Option<ApproveBody>,
                 description = "Optional: the incident version the caller saw, and what is different this time (required for a known dead end)",
                 example = json!(examples::approve())),
    responses(
        (status = 200, description = "The recommendation, approved, with its simulated transcript (422 when it carries the dead-end banner and no reason is given)",
         body = inv::RecommendationView, example = json!(examples::recommendation("approved"))),
        super::schema::ApiErrors
    )
)]
pub(super) async fn api_approve(
    State(s): State<AppState>,
    user: CurrentUser,
    Path((id, rid)): Path<(String, i64)>,
    BaseVersion(version): BaseVersion,
    body: axum::body::Bytes,
) -> Result<Json<inv::RecommendationView>, ApiError> {
    let id = incident_id(&id)?;
    let b: ApproveBody = super::api::optional_json(&body)?;
    let expected = version.or(b.version);
    Ok(Json(
        inv::approve(&s.pool, &user.0.name, &id, rid, &b.reason, expected).await?,
    ))
}

#[utoipa::path(
    post,
    path = "/api/v1/incidents/{id}/recommendations/{rid}/reject",
    operation_id = "rejectAction",
    summary = "Reject a recommendation",
    tag = "investigation",
    params(RecommendationPath),
    request_body(content = RejectBody, description = "Why (required)", example = json!(examples::reject())),
    responses(
        (status = 200, description = "The recommendation, rejected", body = inv::RecommendationView,
         example = json!(examples::recommendation("rejected"))),
        super::schema::ApiErrors
    )
)]
pub(super) async fn api_reject(
    State(s): State<AppState>,
    user: CurrentUser,
    Path((id, rid)): Path<(String, i64)>,
    BaseVersion(version): BaseVersion,
    ApiJson(b): ApiJson<RejectBody>,
) -> Result<Json<inv::RecommendationView>, ApiError> {
    let id = incident_id(&id)?;
    let expected = version.or(b.version);
    Ok(Json(
        inv::reject(&s.pool, &user.0.name, &id, rid, &b.reason, expected).await?,
    ))
}

#[utoipa::path(
    post,
    path = "/api/v1/incidents/{id}/recommendations/{rid}/verdict",
    operation_id = "recordVerdict",
    summary = "Record what an approved action did",
    tag = "investigation",
    params(RecommendationPath),
    request_body(content = VerdictBody, description = "What the approved action did",
                 example = json!(examples::verdict())),
    responses(
        (status = 200, description = "The approved recommendation with its verdict (`did_not_resolve` / `made_worse` also write a remediation failure to memory)",
         body = inv::RecommendationView, example = json!(examples::recommendation_with_verdict())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn api_verdict(
    State(s): State<AppState>,
    user: CurrentUser,
    Path((id, rid)): Path<(String, i64)>,
    BaseVersion(version): BaseVersion,
    ApiJson(b): ApiJson<VerdictBody>,
) -> Result<Json<inv::RecommendationView>, ApiError> {
    let id = incident_id(&id)?;
    let expected = version.or(b.version);
    Ok(Json(
        inv::verdict(
            &s.pool,
            &user.0.name,
            &id,
            rid,
            &b.verdict,
            &b.note,
            expected,
        )
        .await?,
    ))
}

/// Where the copilot's forms return to: the incident page's copilot section.
const COPILOT: &str = "#copilot";

pub(super) async fn page_investigate(
    State(s): State<AppState>,
    user: CurrentUser,
    headers: HeaderMap,
    Path(id): Path<String>,
    f: VersionForm,
) -> Result<Response, PageError> {
    let post = IncidentPost::new(&s, &user.0, &headers, &id)?;
    let write = async {
        let analyst = s.analyst.as_ref();
        let view = inv::investigate(&s.memory, analyst, &user.0.name, &post.id, f.version).await?;
        s.metrics.recall("investigation", None, view.recalled.len());
        Ok(view)
    };
    post.write(f.version, KeptInput::default(), COPILOT, write)
        .await
}

pub(super) async fn page_approve(
    State(s): State<AppState>,
    user: CurrentUser,
    headers: HeaderMap,
    Path((id, rid)): Path<(String, i64)>,
    f: ApproveBody,
) -> Result<Response, PageError> {
    let post = IncidentPost::new(&s, &user.0, &headers, &id)?;
    let kept = KeptInput {
        approve: Some((rid, f.reason.clone())),
        ..Default::default()
    };
    let write = inv::approve(&s.pool, &user.0.name, &post.id, rid, &f.reason, f.version);
    post.write(f.version, kept, COPILOT, write).await
}

pub(super) async fn page_reject(
    State(s): State<AppState>,
    user: CurrentUser,
    headers: HeaderMap,
    Path((id, rid)): Path<(String, i64)>,
    PageForm(f): PageForm<RejectBody>,
) -> Result<Response, PageError> {
    let post = IncidentPost::new(&s, &user.0, &headers, &id)?;
    let kept = KeptInput {
        reject: Some((rid, f.reason.clone())),
        ..Default::default()
    };
    let write = inv::reject(&s.pool, &user.0.name, &post.id, rid, &f.reason, f.version);
    post.write(f.version, kept, COPILOT, write).await
}

pub(super) async fn page_verdict(
    State(s): State<AppState>,
    user: CurrentUser,
    headers: HeaderMap,
    Path((id, rid)): Path<(String, i64)>,
    PageForm(f): PageForm<VerdictBody>,
) -> Result<Response, PageError> {
    let post = IncidentPost::new(&s, &user.0, &headers, &id)?;
    let kept = KeptInput {
        verdict: Some((rid, f.verdict.clone(), f.note.clone())),
        ..Default::default()
    };
    let write = inv::verdict(
        &s.pool,
        &user.0.name,
        &post.id,
        rid,
        &f.verdict,
        &f.note,
        f.version,
    );
    post.write(f.version, kept, COPILOT, write).await
}
