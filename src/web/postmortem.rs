//! Post-mortem, confirmation, learnings preview and Learn over HTTP (JSON and pages) and the
//! Markdown export. The reviewers' queue is in `web/review.rs`.
//!
//! Long because it is one resource's module (as every resource in `web/` has one): its JSON
//! handlers, its pages and its Markdown export all read the same stored post-mortem.

use askama::Template;
use askama_web::WebTemplate;
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::api::{BaseVersion, VersionBody, optional_json};
use super::auth::CurrentUser;
use super::errors::{ApiError, ApiJson, PageError, PageForm, form_outcome};
use super::examples;
use super::layout::Layout;
use super::pages::{IncidentPost, KeptInput, VersionForm};
use super::schema::IncidentPath;
use super::view::{Clock, SafeHtml, render_markdown};
use super::{AppState, incident_id};
use crate::domain::memory::Rule;
use crate::domain::postmortem::Postmortem;
use crate::domain::text::unix_newlines;
use crate::domain::{ConfirmRefusal, IncidentId, IncidentState};
use crate::error::AppError;
use crate::services::postmortem as pm;
use crate::services::workflow;
use crate::store::{incidents, postmortems as pstore};

#[utoipa::path(
    post,
    path = "/api/v1/incidents/{id}/postmortem",
    operation_id = "draftPostmortem",
    summary = "Draft the post-mortem of a resolved incident",
    tag = "postmortem",
    params(IncidentPath),
    request_body(content = Option<VersionBody>, description = "Optional: the incident version the caller saw",
                 example = json!(examples::version())),
    responses(
        (status = 201, description = "The draft (resolved → postmortem_draft)", body = pstore::StoredPostmortem,
         example = json!(examples::draft())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn api_draft(
    State(s): State<AppState>,
    user: CurrentUser,
    Path(id): Path<String>,
    version: BaseVersion,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let id = incident_id(&id)?;
    workflow::ensure_version(&s.pool, &id, version.or_body(&body)?).await?;
    let stored = pm::draft_postmortem(&s.pool, s.llm.as_deref(), &user.0, &id).await?;
    Ok((StatusCode::CREATED, Json(stored)).into_response())
}

#[utoipa::path(
    get,
    path = "/api/v1/incidents/{id}/postmortem",
    operation_id = "getPostmortem",
    summary = "Show the post-mortem",
    tag = "postmortem",
    params(IncidentPath),
    responses(
        (status = 200, description = "The post-mortem", body = pstore::StoredPostmortem,
         example = json!(examples::draft())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn api_get(
    State(s): State<AppState>,
    _u: CurrentUser,
    Path(id): Path<String>,
) -> Result<Json<pstore::StoredPostmortem>, ApiError> {
    Ok(Json(
        pstore::get(&s.pool, incident_id(&id)?.as_str()).await?,
    ))
}

/// Body of `PUT …/postmortem`: the whole document, optionally with the version it was loaded at.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct PutPostmortem {
    /// The document.
    #[serde(flatten)]
    pub postmortem: Postmortem,
    /// Compare-and-set: the `version` the editor loaded.
    #[serde(default)]
    pub version: Option<i64>,
}

#[utoipa::path(
    put,
    path = "/api/v1/incidents/{id}/postmortem",
    operation_id = "editPostmortem",
    summary = "Edit the post-mortem draft",
    tag = "postmortem",
    params(IncidentPath),
    request_body(content = PutPostmortem, description = "The whole document; `version`: the post-mortem version the editor loaded (409 when stale)",
                 example = json!(examples::postmortem())),
    responses(
        (status = 200, description = "The post-mortem as saved (its version incremented)",
         body = pstore::StoredPostmortem, example = json!(examples::draft())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn api_put(
    State(s): State<AppState>,
    user: CurrentUser,
    Path(id): Path<String>,
    ApiJson(b): ApiJson<PutPostmortem>,
) -> Result<Json<pstore::StoredPostmortem>, ApiError> {
    Ok(Json(
        pm::edit(
            &s.pool,
            &user.0,
            &incident_id(&id)?,
            b.postmortem,
            b.version,
        )
        .await?,
    ))
}

#[utoipa::path(
    post,
    path = "/api/v1/incidents/{id}/postmortem/confirm",
    operation_id = "confirmPostmortem",
    summary = "Confirm the post-mortem (reviewers)",
    tag = "postmortem",
    params(IncidentPath),
    request_body(content = Option<VersionBody>, description = "Optional: the incident version the caller saw",
                 example = json!(examples::version())),
    responses(
        (status = 200, description = "The post-mortem, confirmed (postmortem_draft → confirmed); needs a reviewer who did not edit it last",
         body = pstore::StoredPostmortem, example = json!(examples::confirmed())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn api_confirm(
    State(s): State<AppState>,
    user: CurrentUser,
    Path(id): Path<String>,
    version: BaseVersion,
    body: axum::body::Bytes,
) -> Result<Json<pstore::StoredPostmortem>, ApiError> {
    let id = incident_id(&id)?;
    workflow::ensure_version(&s.pool, &id, version.or_body(&body)?).await?;
    Ok(Json(
        pm::confirm(&s.pool, &user.0, &id, s.settings.confirm_policy()).await?,
    ))
}

async fn markdown_of(s: &AppState, id: &IncidentId) -> Result<String, AppError> {
    let incident = incidents::get(&s.pool, id).await?;
    let stored = pstore::get(&s.pool, id.as_str()).await?;
    Ok(stored.postmortem.to_markdown(&incident))
}

#[utoipa::path(
    get,
    path = "/api/v1/incidents/{id}/postmortem.md",
    operation_id = "exportPostmortem",
    summary = "Export the post-mortem as Markdown",
    tag = "postmortem",
    params(IncidentPath),
    responses(
        (status = 200, description = "The post-mortem as Markdown (an attachment)", body = String,
         content_type = "text/markdown", example = json!(examples::markdown())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn api_markdown(
    State(s): State<AppState>,
    _u: CurrentUser,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let id = incident_id(&id)?;
    let md = markdown_of(&s, &id).await?;
    Ok((
        [
            (
                header::CONTENT_TYPE,
                "text/markdown; charset=utf-8".to_string(),
            ),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{id}-postmortem.md\""),
            ),
        ],
        md,
    )
        .into_response())
}

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
    workflow::ensure_version(&s.pool, &id, version.or_body(&body)?).await?;
    let grade = optional_json::<LearnBody>(&body)?.top_hypothesis_matched;
    Ok(Json(pm::learn_graded(&s.pool, &user.0, &id, grade).await?))
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
        super::pages::optional_form(req, state).await
    }
}

// ---- pages ----

pub(super) async fn page_draft(
    State(s): State<AppState>,
    user: CurrentUser,
    headers: HeaderMap,
    Path(id): Path<String>,
    f: VersionForm,
) -> Result<Response, PageError> {
    let post = IncidentPost::new(&s, &user.0, &headers, &id)?;
    let write = pm::draft_postmortem(&s.pool, s.llm.as_deref(), &user.0, &post.id);
    post.write(f.version, KeptInput::default(), "/postmortem", write)
        .await
}

#[derive(Template, WebTemplate)]
#[template(path = "incidents/postmortem.html")]
struct PostmortemPage {
    layout: Layout,
    incident: crate::domain::Incident,
    stored: pstore::StoredPostmortem,
    html: SafeHtml,
    form: EditForm,
    editable: bool,
    can_confirm: bool,
    confirm_blocked: Option<String>,
    error: Option<String>,
    /// Confirmation of the last save (after its redirect).
    flash: Option<&'static str>,
}

/// `?done=…` on the page a form redirects to after a save: a closed list of codes, so the page
/// never echoes text from the URL.
#[derive(Debug, Deserialize, Default)]
pub(super) struct Done {
    #[serde(default)]
    done: Option<String>,
}

impl Done {
    pub(super) fn message(&self) -> Option<&'static str> {
        match self.done.as_deref()? {
            "accepted" => Some("Proposal accepted: its record is in the organization's memory."),
            "rejected" => Some("Proposal rejected: nothing was written; the reason is kept."),
            "saved" => Some("Draft saved."),
            "confirmed" => Some("Post-mortem confirmed: preview the learnings, then Learn."),
            "learned" => Some("Learned: the records below are in the organization's memory."),
            _ => None,
        }
    }
}

/// The edit form: lists one item per line; lessons as blocks of `ALWAYS:` / `BECAUSE:` /
/// `SCOPE:` / `SEVERITY:` lines separated by a blank line.
#[derive(Debug, Deserialize, Default)]
pub(super) struct EditForm {
    #[serde(default)]
    summary: String,
    #[serde(default)]
    impact: String,
    #[serde(default)]
    symptoms: String,
    #[serde(default)]
    root_cause: String,
    #[serde(default)]
    trigger: String,
    #[serde(default)]
    contributing_factors: String,
    #[serde(default)]
    misleading_hypotheses: String,
    #[serde(default)]
    lessons: String,
    #[serde(default)]
    action_items: String,
    #[serde(default)]
    detection_gaps: String,
    #[serde(default)]
    version: Option<i64>,
}

fn lines(v: &[String]) -> String {
    v.join("\n")
}

fn parse_lines(s: &str) -> Vec<String> {
    s.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| l.trim_start_matches("- ").to_string())
        .collect()
}

fn form_of(p: &Postmortem, version: i64) -> EditForm {
    EditForm {
        summary: p.summary.clone(),
        impact: p.impact.description.clone(),
        symptoms: lines(&p.symptoms),
        root_cause: p.root_cause.clone(),
        trigger: p.trigger.clone(),
        contributing_factors: lines(&p.contributing_factors),
        misleading_hypotheses: lines(&p.misleading_hypotheses),
        lessons: Rule::blocks_text(&p.lessons),
        action_items: lines(&p.action_items),
        detection_gaps: lines(&p.detection_gaps),
        version: Some(version),
    }
}

async fn render(
    s: &AppState,
    user: &crate::store::users::User,
    id: &IncidentId,
    form: Option<EditForm>,
    error: Option<(StatusCode, String)>,
    flash: Option<&'static str>,
    headers: &HeaderMap,
) -> Result<Response, PageError> {
    let incident = incidents::get(&s.pool, id).await?;
    let stored = pstore::get(&s.pool, id.as_str()).await?;
    let clock = Clock::for_viewer(Some(user), headers);
    let html = render_markdown(
        &stored
            .postmortem
            .to_markdown_with(&incident, |t| clock.fmt(t)),
    );
    let confirm_blocked =
        match s
            .settings
            .confirm_policy()
            .check(user.role, &user.name, Some(&stored.edited_by))
        {
            Ok(()) => None,
            Err(ConfirmRefusal::NeedsReviewer) => Some("Needs the reviewer role".to_string()),
            Err(ConfirmRefusal::OwnEdit) => {
                Some("You edited this draft last: another reviewer must confirm it".to_string())
            }
        };
    let (status, error) = error.map_or((StatusCode::OK, None), |(st, m)| (st, Some(m)));
    let page = PostmortemPage {
        layout: Layout::new(Some(user), format!("Post-mortem {id}")),
        editable: incident.state == IncidentState::PostmortemDraft,
        can_confirm: incident.state == IncidentState::PostmortemDraft && confirm_blocked.is_none(),
        form: form.unwrap_or_else(|| form_of(&stored.postmortem, stored.version)),
        incident,
        html,
        stored,
        confirm_blocked,
        error,
        flash,
    };
    Ok((status, page).into_response())
}

pub(super) async fn page_show(
    State(s): State<AppState>,
    user: CurrentUser,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(done): Query<Done>,
) -> Result<Response, PageError> {
    render(
        &s,
        &user.0,
        &incident_id(&id)?,
        None,
        None,
        done.message(),
        &headers,
    )
    .await
}

pub(super) async fn page_edit(
    State(s): State<AppState>,
    user: CurrentUser,
    headers: HeaderMap,
    Path(id): Path<String>,
    PageForm(f): PageForm<EditForm>,
) -> Result<Response, PageError> {
    let id = incident_id(&id)?;
    let result: Result<(), AppError> = async {
        let current = pstore::get(&s.pool, id.as_str()).await?;
        let mut p = current.postmortem.clone();
        p.summary = unix_newlines(&f.summary);
        p.impact.description = unix_newlines(&f.impact);
        p.symptoms = parse_lines(&f.symptoms);
        p.root_cause = unix_newlines(&f.root_cause);
        p.trigger = f.trigger.trim().to_string();
        p.contributing_factors = parse_lines(&f.contributing_factors);
        p.misleading_hypotheses = parse_lines(&f.misleading_hypotheses);
        p.lessons = Rule::parse_blocks(&f.lessons)?;
        p.action_items = parse_lines(&f.action_items);
        p.detection_gaps = parse_lines(&f.detection_gaps);
        pm::edit(&s.pool, &user.0, &id, p, f.version).await?;
        Ok(())
    }
    .await;
    form_outcome(
        result,
        |()| format!("/incidents/{id}/postmortem?done=saved"),
        |error| render(&s, &user.0, &id, Some(f), Some(error), None, &headers),
    )
    .await
}

pub(super) async fn page_confirm(
    State(s): State<AppState>,
    user: CurrentUser,
    headers: HeaderMap,
    Path(id): Path<String>,
    f: VersionForm,
) -> Result<Response, PageError> {
    let id = incident_id(&id)?;
    let result = async {
        workflow::ensure_version(&s.pool, &id, f.version).await?;
        pm::confirm(&s.pool, &user.0, &id, s.settings.confirm_policy()).await
    }
    .await;
    form_outcome(
        result,
        |_| format!("/incidents/{id}/learnings?done=confirmed"),
        |error| render(&s, &user.0, &id, None, Some(error), None, &headers),
    )
    .await
}

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
    let incident = incidents::get(&s.pool, id).await?;
    let learned: Option<pm::LearnResult> = match pstore::learning(&s.pool, id.as_str()).await? {
        Some(r) => serde_json::from_str(&r).ok(),
        None => None,
    };
    let written = match &learned {
        Some(l) => pm::written_records(&s.pool, l).await?,
        None => Vec::new(),
    };
    let preview = if learned.is_none() {
        Some(pm::plan(&s.pool, id).await?)
    } else {
        None
    };
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
            grade: crate::store::proposals::grade(&s.pool, id.as_str()).await?,
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
    workflow::ensure_version(&s.pool, &id, f.version).await?;
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
    match pm::learn_graded(&s.pool, &user.0, &id, grade).await {
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
