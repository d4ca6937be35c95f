//! The learnings preview (exactly what Learn will write) and Learn itself, as JSON and as the
//! learnings page with the reviewer's grade of the copilot's top hypothesis.

use askama::Template;
use askama_web::WebTemplate;
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::api::{BaseVersion, optional_json};
use super::auth::CurrentUser;
use super::errors::{ApiError, PageError};
use super::examples;
use super::layout::Layout;
use super::postmortem::Done;
use super::schema::IncidentPath;
use super::{AppState, incident_id};
use crate::domain::IncidentId;
use crate::error::AppError;
use crate::services::postmortem as pm;

#[utoipa::path(
    get,
    path = "/api/v1/incidents/{id}/learnings/preview",
    operation_id = "previewLearnings",
    summary = "Preview what Learn will write",
    tag = "postmortem",
    params(IncidentPath),
    responses(
        (status = 200, description = "Exactly what Learn will write", body = pm::LearningsPreview,
         example = json!(examples::learnings_preview())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn api_preview(
    State(s): State<AppState>,
    _u: CurrentUser,
    Path(id): Path<String>,
) -> Result<Json<pm::LearningsPreview>, ApiError> {
    Ok(Json(pm::plan(&s.pool, &incident_id(&id)?).await?))
}

#[utoipa::path(
    post,
    path = "/api/v1/incidents/{id}/learn",
    operation_id = "learn",
    summary = "Learn: write the confirmed knowledge to memory",
    tag = "postmortem",
    params(IncidentPath),
    request_body(content = Option<LearnBody>, description = "Optional: the incident version the caller saw and the reviewer's answer to the preview's grading question",
                 example = json!(examples::learn_body())),
    responses(
        (status = 200, description = "What Learn wrote (confirmed → learned; a repeat returns the same)",
         body = pm::LearnResult, example = json!(examples::learn_result())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn api_learn(
    State(s): State<AppState>,
    user: CurrentUser,
    Path(id): Path<String>,
    version: BaseVersion,
    body: axum::body::Bytes,
) -> Result<Json<pm::LearnResult>, ApiError> {
    let id = incident_id(&id)?;
    let expected = version.or_body(&body)?;
    let grade = optional_json::<LearnBody>(&body)?.top_hypothesis_matched;
    Ok(Json(
        pm::learn_graded(&s.pool, &user.0, &id, grade, expected).await?,
    ))
}

/// Optional JSON body of `POST …/learn`: `{"version": 7, "top_hypothesis_matched": true}`.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
pub struct LearnBody {
    /// The incident version the request is based on.
    #[serde(default)]
    pub version: Option<i64>,
    /// The reviewer's answer to the learnings preview's `grading` question: did the copilot's
    /// top hypothesis match the confirmed root cause. Absent: the incident is not graded.
    #[serde(default)]
    pub top_hypothesis_matched: Option<bool>,
}

/// The Learn form: the incident version and the answer to the grading question (`yes`/`no`).
#[derive(Debug, Default, Deserialize)]
pub(super) struct LearnForm {
    #[serde(default)]
    version: Option<i64>,
    #[serde(default)]
    top_hypothesis_matched: Option<String>,
}

impl axum::extract::FromRequest<AppState> for LearnForm {
    type Rejection = PageError;

    async fn from_request(
        req: axum::extract::Request,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        super::forms::optional_form(req, state).await
    }
}

// ---- pages ----

#[derive(Template, WebTemplate)]
#[template(path = "incidents/learnings.html")]
struct PreviewPage {
    layout: Layout,
    incident: crate::domain::Incident,
    preview: Option<pm::LearningsPreview>,
    learned: Option<pm::LearnResult>,
    /// The records Learn wrote, with their kinds and texts.
    written: Vec<crate::domain::memory::MemoryRecord>,
    /// Confirmation of the last step (after its redirect).
    flash: Option<&'static str>,
    /// The reviewer's grade of the top hypothesis, once Learn recorded it.
    grade: Option<crate::store::proposals::Grade>,
    /// Why the last Learn was refused (the page is re-rendered with it, status 4xx).
    error: Option<String>,
    /// The grading answer the reviewer sent (`yes`/`no`), kept after an error.
    answer: Option<bool>,
}

impl PreviewPage {
    /// Whether "yes" is checked: the answer sent before an error, else the suggestion.
    fn answered_yes(&self, suggested: &bool) -> bool {
        self.answer.unwrap_or(*suggested)
    }
}

/// Renders the learnings page of `id` with `status`; after a refused Learn, with its `error`
/// and the reviewer's `answer` kept.
async fn render_learnings(
    s: &AppState,
    user: &crate::store::users::User,
    id: &IncidentId,
    status: StatusCode,
    flash: Option<&'static str>,
    refused: Option<(String, Option<bool>)>,
) -> Result<Response, PageError> {
    let crate::services::review::Learnings {
        incident,
        preview,
        learned,
        written,
        grade,
    } = crate::services::review::learnings(&s.pool, id).await?;
    let (error, answer) = refused.map_or((None, None), |(e, a)| (Some(e), a));
    Ok((
        status,
        PreviewPage {
            layout: Layout::new(Some(user), format!("Learnings {id}")),
            incident,
            preview,
            learned,
            written,
            flash,
            grade,
            error,
            answer,
        },
    )
        .into_response())
}

pub(super) async fn page_preview(
    State(s): State<AppState>,
    user: CurrentUser,
    Path(id): Path<String>,
    Query(done): Query<Done>,
) -> Result<Response, PageError> {
    let id = incident_id(&id)?;
    render_learnings(&s, &user.0, &id, StatusCode::OK, done.message(), None).await
}

/// `POST /incidents/{id}/learn`. An unreadable grading answer (or one for an incident with
/// nothing to grade) re-renders the learnings page with 422, the message and the answer kept.
pub(super) async fn page_learn(
    State(s): State<AppState>,
    user: CurrentUser,
    Path(id): Path<String>,
    f: LearnForm,
) -> Result<Response, PageError> {
    let id = incident_id(&id)?;
    let grade = match f
        .top_hypothesis_matched
        .as_deref()
        .map(crate::domain::proposals::parse_grade)
        .transpose()
    {
        Ok(g) => g,
        Err(e) => {
            let e = AppError::from(e);
            let refused = Some((e.to_string(), None));
            return render_learnings(&s, &user.0, &id, e.status(), None, refused).await;
        }
    };
    match pm::learn_graded(&s.pool, &user.0, &id, grade, f.version).await {
        Ok(_) => {
            Ok(Redirect::to(&format!("/incidents/{id}/learnings?done=learned")).into_response())
        }
        Err(e @ AppError::Validation(_)) => {
            let refused = Some((e.to_string(), grade));
            render_learnings(&s, &user.0, &id, e.status(), None, refused).await
        }
        Err(e) => Err(e.into()),
    }
}
