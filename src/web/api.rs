//! The JSON API under `/api/v1`, mirroring every page action with the same rules. Errors are
//! `{"error": {"code", "message"}}` with the matching 4xx (see `web::errors`).

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

use super::AppState;
use super::auth::CurrentUser;
use super::errors::{ApiError, ApiJson};
use crate::domain::{
    Incident, IncidentId, IncidentState, NewIncident, Resolution, Severity, TimelineEvent,
    Transition,
};
use crate::services::workflow::{self, TransitionInput};
use crate::store::incidents::{self, IncidentFilter};

/// Routes of the incident API.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/me", get(me))
        .route("/api/v1/incidents", post(create).get(list))
        .route("/api/v1/incidents/{id}", get(show))
        .route("/api/v1/incidents/{id}/resolve", post(resolve))
        .route("/api/v1/incidents/{id}/reopen", post(reopen))
}

type ApiResult<T> = Result<T, ApiError>;

async fn me(CurrentUser(user): CurrentUser) -> Json<crate::store::users::User> {
    Json(user)
}

/// Body of `POST /api/v1/incidents`.
#[derive(Debug, Deserialize)]
pub struct CreateIncident {
    /// 1–200 characters.
    pub title: String,
    /// Service name.
    pub service: String,
    /// `SEV1`…`SEV4`.
    pub severity: String,
    /// Optional free text.
    #[serde(default)]
    pub description: String,
}

async fn create(
    State(state): State<AppState>,
    CurrentUser(user): CurrentUser,
    ApiJson(body): ApiJson<CreateIncident>,
) -> ApiResult<impl IntoResponse> {
    let new = NewIncident::parse(
        &body.title,
        &body.service,
        &body.severity,
        &body.description,
    )?;
    let incident = workflow::open_incident(&state.pool, &user.name, &new).await?;
    Ok((StatusCode::CREATED, Json(incident)))
}

/// Query of `GET /api/v1/incidents` (and the list page): empty values mean "any".
#[derive(Debug, Default, Deserialize)]
pub struct ListQuery {
    /// State name.
    #[serde(default)]
    pub state: String,
    /// Service name.
    #[serde(default)]
    pub service: String,
    /// `SEV1`…`SEV4`.
    #[serde(default)]
    pub severity: String,
}

impl ListQuery {
    /// Validates into a store filter.
    ///
    /// # Errors
    /// A validation error naming the bad parameter.
    pub fn to_filter(&self) -> Result<IncidentFilter, crate::domain::ValidationError> {
        let nonempty = |s: &str| Some(s.trim()).filter(|s| !s.is_empty()).map(str::to_string);
        Ok(IncidentFilter {
            state: nonempty(&self.state)
                .map(|s| IncidentState::parse(&s))
                .transpose()?,
            service: nonempty(&self.service).map(|s| s.to_lowercase()),
            severity: nonempty(&self.severity)
                .map(|s| Severity::parse(&s))
                .transpose()?,
            limit: None,
        })
    }
}

#[derive(Serialize)]
struct IncidentList {
    incidents: Vec<Incident>,
}

async fn list(
    State(state): State<AppState>,
    _user: CurrentUser,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<IncidentList>> {
    let incidents = incidents::list(&state.pool, &q.to_filter()?).await?;
    Ok(Json(IncidentList { incidents }))
}

#[derive(Serialize)]
struct IncidentWithTimeline {
    #[serde(flatten)]
    incident: Incident,
    timeline: Vec<TimelineEvent>,
}

fn parse_id(id: &str) -> Result<IncidentId, ApiError> {
    IncidentId::parse(id).map_err(|_| ApiError(crate::AppError::NotFound(format!("incident {id}"))))
}

async fn show(
    State(state): State<AppState>,
    _user: CurrentUser,
    Path(id): Path<String>,
) -> ApiResult<Json<IncidentWithTimeline>> {
    let id = parse_id(&id)?;
    let incident = incidents::get(&state.pool, &id).await?;
    let timeline = incidents::timeline(&state.pool, &id).await?;
    Ok(Json(IncidentWithTimeline { incident, timeline }))
}

/// Body of `POST /api/v1/incidents/{id}/resolve`.
#[derive(Debug, Deserialize)]
pub struct ResolveBody {
    /// What happened and how it was mitigated.
    pub summary: String,
    /// The root cause as understood now.
    pub root_cause: String,
}

async fn resolve(
    State(state): State<AppState>,
    CurrentUser(user): CurrentUser,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<ResolveBody>,
) -> ApiResult<Json<Incident>> {
    let id = parse_id(&id)?;
    let resolution = Resolution::parse(&body.summary, &body.root_cause)?;
    let input = TransitionInput {
        resolution: Some(resolution),
    };
    Ok(Json(
        workflow::transition(&state.pool, &user, &id, Transition::Resolve, input).await?,
    ))
}

async fn simple(
    state: &AppState,
    user: &CurrentUser,
    id: &str,
    t: Transition,
) -> ApiResult<Json<Incident>> {
    let id = parse_id(id)?;
    Ok(Json(
        workflow::transition(&state.pool, &user.0, &id, t, TransitionInput::default()).await?,
    ))
}

async fn reopen(
    State(state): State<AppState>,
    user: CurrentUser,
    Path(id): Path<String>,
) -> ApiResult<Json<Incident>> {
    simple(&state, &user, &id, Transition::Reopen).await
}
