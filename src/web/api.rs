//! The JSON API of incidents (`/api/v1/incidents…`: open, list, show, resolve, reopen) and of
//! the caller (`/api/v1/me`), with the same rules as their pages in `web::pages`; the other
//! resources' API handlers sit in their own modules. Errors are `{"error": {"code", "message"}}`
//! with the matching 4xx (see `web::errors`).

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::{Deserialize, Serialize};

use super::auth::CurrentUser;
use super::errors::{ApiError, ApiJson};
use super::examples;
use super::schema::IncidentPath;
use super::{AppState, incident_id};
use crate::domain::{
    Incident, IncidentState, NewIncident, Resolution, Severity, TimelineEvent, Transition,
};
use crate::services::workflow::{self, TransitionInput};
use crate::store::incidents::{self, IncidentFilter};

type ApiResult<T> = Result<T, ApiError>;

/// The incident version an `If-Match` value names: `"3"`, `W/"3"` or `3`, or the incident's
/// JSON validator `W/"3.17"` (its `ETag`: version 3, revision 17; only the version is checked,
/// as for the other forms); `None` when it names none.
pub(super) fn if_match_version(raw: &str) -> Option<i64> {
    let tag = raw.trim().trim_start_matches("W/").trim_matches('"');
    let version = tag.split_once('.').map_or(tag, |(v, revision)| {
        if revision.bytes().all(|b| b.is_ascii_digit()) && !revision.is_empty() {
            v
        } else {
            tag
        }
    });
    version.parse().ok()
}

/// The incident version an API request is based on: `If-Match: "3"` (or `3`, or the JSON's
/// `ETag` `W/"3.17"`, [`if_match_version`]) or `?version=3`.
/// Absent means "no check". A stale version makes the request a 409 that changes nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct BaseVersion(pub Option<i64>);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for BaseVersion {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _state: &S,
    ) -> Result<Self, Self::Rejection> {
        let bad = |v: &str| {
            ApiError(crate::AppError::BadRequest(format!(
                "version: '{v}' is not an incident version (a whole number, as in the incident's `version`)"
            )))
        };
        if let Some(v) = parts.headers.get(axum::http::header::IF_MATCH) {
            let raw = v.to_str().unwrap_or("").trim();
            return if_match_version(raw)
                .map(|n| Self(Some(n)))
                .ok_or_else(|| bad(raw));
        }
        let query = parts.uri.query().unwrap_or("");
        for (k, v) in form_urlencoded_pairs(query) {
            if k == "version" {
                return v.trim().parse().map(|n| Self(Some(n))).map_err(|_| bad(&v));
            }
        }
        Ok(Self(None))
    }
}

impl BaseVersion {
    /// The version of a body-less action: the header's or query's, else the optional JSON
    /// body's `{"version": n}`. The body is read either way, so a malformed one is a 400 even
    /// when a header names the version.
    ///
    /// # Errors
    /// 400 when the body is not empty and not such JSON.
    pub fn or_body(self, body: &[u8]) -> Result<Option<i64>, ApiError> {
        let from_body = VersionBody::parse(body)?.version;
        Ok(self.0.or(from_body))
    }
}

/// The incident version of a body-less action (reopen, investigate, approve, draft, confirm):
/// [`BaseVersion`]'s header or query, else the optional JSON body's `{"version": n}`
/// ([`BaseVersion::or_body`]). Rejections: [`BaseVersion`]'s 400s, a body that cannot be read,
/// a malformed body (400).
#[derive(Debug, Clone, Copy, Default)]
pub struct ActionVersion(pub Option<i64>);

impl<S: Send + Sync> axum::extract::FromRequest<S> for ActionVersion {
    type Rejection = axum::response::Response;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, Self::Rejection> {
        use axum::extract::FromRequestParts as _;
        let (mut parts, body) = req.into_parts();
        let version = BaseVersion::from_request_parts(&mut parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let req = axum::extract::Request::from_parts(parts, body);
        let body = axum::body::Bytes::from_request(req, state)
            .await
            .map_err(IntoResponse::into_response)?;
        version
            .or_body(&body)
            .map(Self)
            .map_err(IntoResponse::into_response)
    }
}

/// Reads an optional JSON body: empty (or only white space) is `T::default()`.
///
/// # Errors
/// 400 naming the problem when the body is not JSON of `T`'s shape.
pub fn optional_json<T: serde::de::DeserializeOwned + Default>(body: &[u8]) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(body)
        .map_err(|e| ApiError(crate::AppError::BadRequest(format!("body: {e}"))))
}

fn form_urlencoded_pairs(q: &str) -> Vec<(String, String)> {
    serde_urlencoded::from_str::<Vec<(String, String)>>(q).unwrap_or_default()
}

#[utoipa::path(
    get,
    path = "/api/v1/me",
    operation_id = "me",
    summary = "Who the token belongs to",
    tag = "incidents",
    responses(
        (status = 200, description = "The user the token belongs to", body = crate::store::users::User,
         example = json!(examples::me())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn me(CurrentUser(user): CurrentUser) -> Json<crate::store::users::User> {
    Json(user)
}

/// Body of `POST /api/v1/incidents`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct CreateIncident {
    /// 1–200 characters.
    pub title: String,
    /// Service name.
    pub service: String,
    /// `SEV1`…`SEV4`.
    #[schema(value_type = Severity)]
    pub severity: String,
    /// Optional free text.
    #[serde(default)]
    pub description: String,
}

#[utoipa::path(
    post,
    path = "/api/v1/incidents",
    operation_id = "openIncident",
    summary = "Open an incident",
    tag = "incidents",
    request_body(content = CreateIncident, description = "The new incident",
                 example = json!(examples::create_incident())),
    responses(
        (status = 201, description = "The incident, opened (state `investigating`, version 1)",
         body = Incident, example = json!(examples::incident())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn create(
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
    super::log_incident(incident.id.as_str());
    Ok((StatusCode::CREATED, Json(incident)))
}

/// Query of `GET /api/v1/incidents` (and the list page): empty values mean "any".
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// State name, `active` (not learned) or `all`.
    #[serde(default)]
    pub state: String,
    /// Service name.
    #[serde(default)]
    pub service: String,
    /// `SEV1`…`SEV4`.
    #[serde(default)]
    pub severity: String,
    /// Text in the id, title or description.
    #[serde(default)]
    pub q: String,
    /// `newest` (default), `oldest` or `severity`.
    #[serde(default)]
    pub sort: String,
    /// Page cursor (`next` of the previous page).
    #[serde(default)]
    pub after: String,
    /// Page size (1–1000; default 200 on the API).
    #[serde(default)]
    pub limit: Option<i64>,
}

/// Longest accepted search text, characters.
pub const SEARCH_MAX: usize = 200;

impl ListQuery {
    /// Validates into a store filter.
    ///
    /// # Errors
    /// A validation error naming the bad parameter.
    pub fn to_filter(&self) -> Result<IncidentFilter, crate::domain::ValidationError> {
        let nonempty = |s: &str| Some(s.trim()).filter(|s| !s.is_empty()).map(str::to_string);
        let state = nonempty(&self.state);
        let active_only = state.as_deref() == Some("active");
        let state = state.filter(|s| s != "active" && s != "all");
        let text = crate::domain::optional_text("q", &self.q, SEARCH_MAX)?;
        Ok(IncidentFilter {
            state: state.map(|s| IncidentState::parse(&s)).transpose()?,
            active_only,
            service: nonempty(&self.service).map(|s| s.to_lowercase()),
            severity: nonempty(&self.severity)
                .map(|s| Severity::parse(&s))
                .transpose()?,
            text: Some(text).filter(|t| !t.is_empty()),
            sort: incidents::IncidentSort::parse(&self.sort)?,
            after: nonempty(&self.after)
                .map(|a| incidents::IncidentCursor::parse(&a))
                .transpose()?,
            limit: self.limit,
        })
    }
}

/// `GET /api/v1/incidents`: one page of incidents.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct IncidentList {
    /// The incidents of this page.
    incidents: Vec<Incident>,
    /// Cursor of the next page (`?after=`), absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    next: Option<String>,
}

#[utoipa::path(
    get,
    path = "/api/v1/incidents",
    operation_id = "listIncidents",
    summary = "List incidents, newest first, filtered and paged",
    tag = "incidents",
    params(ListQuery),
    responses(
        (status = 200, description = "One page of incidents, newest first (`next`: the cursor of the following page)",
         body = IncidentList, example = json!(examples::incident_list())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn list(
    State(state): State<AppState>,
    _user: CurrentUser,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<IncidentList>> {
    let filter = q.to_filter()?;
    let size = filter.limit.unwrap_or(200);
    let (incidents, next) = crate::services::incidents::page_of(&state.pool, filter, size).await?;
    Ok(Json(IncidentList { incidents, next }))
}

/// `GET /api/v1/incidents/{id}`: the incident's fields and its timeline.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct IncidentWithTimeline {
    #[serde(flatten)]
    incident: Incident,
    /// Every event, oldest first.
    timeline: Vec<TimelineEvent>,
}

#[utoipa::path(
    get,
    path = "/api/v1/incidents/{id}",
    operation_id = "getIncident",
    summary = "Show an incident with its timeline",
    tag = "incidents",
    params(IncidentPath),
    responses(
        (status = 200, description = "The incident with its timeline; `ETag` `W/\"<version>.<revision>\"` \
         (usable as `If-Match`: it names the version), `Cache-Control: private, no-cache`",
         body = IncidentWithTimeline, example = json!(examples::incident_with_timeline())),
        (status = 304, description = "Not modified: `If-None-Match` names the current `ETag`; no body"),
        super::schema::ApiErrors
    )
)]
pub(super) async fn show(
    State(state): State<AppState>,
    _user: CurrentUser,
    headers: axum::http::HeaderMap,
    Path(id): Path<String>,
) -> ApiResult<axum::response::Response> {
    use super::page_cache::{not_modified, not_modified_response, with_validator};
    let id = incident_id(&id)?;
    // The validator first, from the incident's state in memory: an unchanged incident is a
    // 304 without a database read.
    let etag = state.pages.stamp(&state.pool, &id).await?.json_etag();
    if not_modified(&headers, &etag) {
        return Ok(not_modified_response(etag));
    }
    let (incident, timeline) = crate::services::incidents::with_timeline(&state.pool, &id).await?;
    // Read after the stamp: the body is as new as its tag or newer, never older. A body
    // newer than its tag only costs the client one more 200 later.
    let response = Json(IncidentWithTimeline { incident, timeline }).into_response();
    Ok(with_validator(response, etag))
}

/// Body of `POST /api/v1/incidents/{id}/resolve`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct ResolveBody {
    /// What happened and how it was mitigated.
    pub summary: String,
    /// The root cause as understood now.
    pub root_cause: String,
    /// The incident version the request is based on (409 when stale); optional.
    #[serde(default)]
    pub version: Option<i64>,
}

#[utoipa::path(
    post,
    path = "/api/v1/incidents/{id}/resolve",
    operation_id = "resolveIncident",
    summary = "Resolve an incident",
    tag = "incidents",
    params(IncidentPath),
    request_body(content = ResolveBody, description = "What happened and why",
                 example = json!(examples::resolve())),
    responses(
        (status = 200, description = "The incident, resolved", body = Incident,
         example = json!(examples::resolved_incident())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn resolve(
    State(state): State<AppState>,
    CurrentUser(user): CurrentUser,
    Path(id): Path<String>,
    BaseVersion(version): BaseVersion,
    ApiJson(body): ApiJson<ResolveBody>,
) -> ApiResult<Json<Incident>> {
    let id = incident_id(&id)?;
    let resolution = Resolution::parse(&body.summary, &body.root_cause)?;
    let input = TransitionInput {
        resolution: Some(resolution),
    };
    let version = version.or(body.version);
    Ok(Json(
        workflow::transition_from(&state.pool, &user, &id, Transition::Resolve, input, version)
            .await?,
    ))
}

/// Optional JSON body of body-less actions (reopen, draft, confirm, learn…): `{"version": 3}`.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
pub struct VersionBody {
    /// The incident version the request is based on.
    #[serde(default)]
    pub version: Option<i64>,
}

impl VersionBody {
    /// Reads an optional body: empty is no version; otherwise JSON `{"version": n}`.
    ///
    /// # Errors
    /// 400 naming the problem when the body is not such JSON.
    pub fn parse(body: &[u8]) -> Result<Self, ApiError> {
        optional_json(body)
    }
}

#[utoipa::path(
    post,
    path = "/api/v1/incidents/{id}/reopen",
    operation_id = "reopenIncident",
    summary = "Reopen an incident",
    tag = "incidents",
    params(IncidentPath),
    request_body(content = Option<VersionBody>, description = "Optional: the incident version the caller saw",
                 example = json!(examples::version())),
    responses(
        (status = 200, description = "The incident, back to `investigating` (a confirmed one: back to `postmortem_draft`)",
         body = Incident, example = json!(examples::reopened_incident())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn reopen(
    State(state): State<AppState>,
    user: CurrentUser,
    Path(id): Path<String>,
    ActionVersion(version): ActionVersion,
) -> ApiResult<Json<Incident>> {
    let id = incident_id(&id)?;
    Ok(Json(
        workflow::transition_from(
            &state.pool,
            &user.0,
            &id,
            Transition::Reopen,
            TransitionInput::default(),
            version,
        )
        .await?,
    ))
}
