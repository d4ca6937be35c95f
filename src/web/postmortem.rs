//! The post-mortem over HTTP (JSON and pages): draft, edit, confirm, and the Markdown export.
//! The learnings preview and Learn are in [`super::learnings`], the reviewers' queue in
//! [`super::review`].

use askama::Template;
use askama_web::WebTemplate;
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::api::{ActionVersion, BaseVersion, VersionBody, optional_json};
use super::auth::CurrentUser;
use super::errors::{ApiError, ApiJson, PageError, PageForm, form_outcome};
use super::examples;
use super::forms::{ConfirmForm, KeptInput, VersionForm};
use super::incident::IncidentPost;
use super::layout::Layout;
use super::schema::IncidentPath;
use super::view::{Clock, SafeHtml, render_markdown};
use super::{AppState, incident_id};
use crate::domain::memory::Rule;
use crate::domain::postmortem::Postmortem;
use crate::domain::text::unix_newlines;
use crate::domain::{ConfirmRefusal, IncidentId, IncidentState};
use crate::error::AppError;
use crate::services::postmortem as pm;
use crate::store::postmortems as pstore;

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
    ActionVersion(expected): ActionVersion,
) -> Result<Response, ApiError> {
    let id = incident_id(&id)?;
    let stored = pm::draft_postmortem(&s.pool, &*s.analyst, &user.0, &id, expected).await?;
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
        crate::services::incidents::postmortem(&s.pool, &incident_id(&id)?).await?,
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

/// Optional JSON body of `POST …/postmortem/confirm`: `{"version": 7, "postmortem_version": 3}`.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
pub struct ConfirmBody {
    /// The incident version the request is based on.
    #[serde(default)]
    pub version: Option<i64>,
    /// The post-mortem `version` the reviewer read (`GET …/postmortem`): an edit since makes the
    /// confirm a 409, so a reviewer confirms only the text they read.
    #[serde(default)]
    pub postmortem_version: Option<i64>,
}

#[utoipa::path(
    post,
    path = "/api/v1/incidents/{id}/postmortem/confirm",
    operation_id = "confirmPostmortem",
    summary = "Confirm the post-mortem (reviewers)",
    tag = "postmortem",
    params(IncidentPath),
    request_body(content = Option<ConfirmBody>, description = "Optional: the incident version the caller saw and the post-mortem version the reviewer read (409 when either is stale)",
                 example = json!(examples::confirm_body())),
    responses(
        (status = 200, description = "The post-mortem, confirmed (postmortem_draft → confirmed); needs a reviewer who did not edit it last, and a draft that names its trigger (422 `validation` on field `trigger` otherwise)",
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
    let expected = version.or_body(&body)?;
    let draft = optional_json::<ConfirmBody>(&body)?.postmortem_version;
    let policy = s.settings.confirm_policy();
    Ok(Json(
        pm::confirm(&s.pool, &user.0, &id, policy, expected, draft).await?,
    ))
}

async fn markdown_of(s: &AppState, id: &IncidentId) -> Result<String, AppError> {
    let (incident, stored) = crate::services::incidents::with_postmortem(&s.pool, id).await?;
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

pub(super) async fn page_draft(
    State(s): State<AppState>,
    user: CurrentUser,
    headers: HeaderMap,
    Path(id): Path<String>,
    f: VersionForm,
) -> Result<Response, PageError> {
    let post = IncidentPost::new(&s, &user.0, &headers, &id)?;
    let write = pm::draft_postmortem(&s.pool, &*s.analyst, &user.0, &post.id, f.version);
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
    pub(super) done: Option<String>,
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
    let (incident, stored) = crate::services::incidents::with_postmortem(&s.pool, id).await?;
    let clock = Clock::for_viewer(Some(user), headers);
    let html = render_markdown(
        &stored
            .postmortem
            .to_markdown_with(&incident, |t| clock.fmt(t)),
    );
    let confirm_blocked = match s.settings.confirm_policy().check_draft(
        user.role,
        &user.name,
        &stored.postmortem,
        &stored.edited_by,
    ) {
        Ok(()) => None,
        Err(ConfirmRefusal::NeedsReviewer) => Some("Needs the reviewer role".to_string()),
        Err(ConfirmRefusal::OwnEdit) => {
            Some("You edited this draft last: another reviewer must confirm it".to_string())
        }
        Err(ConfirmRefusal::NoTrigger) => Some(
            "Write the trigger (what set the incident off) and save the draft first".to_string(),
        ),
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
        let current = crate::services::incidents::postmortem(&s.pool, &id).await?;
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
    f: ConfirmForm,
) -> Result<Response, PageError> {
    let id = incident_id(&id)?;
    let result = async {
        pm::confirm(
            &s.pool,
            &user.0,
            &id,
            s.settings.confirm_policy(),
            f.version,
            f.postmortem_version,
        )
        .await
    }
    .await;
    form_outcome(
        result,
        |_| format!("/incidents/{id}/learnings?done=confirmed"),
        |error| render(&s, &user.0, &id, None, Some(error), None, &headers),
    )
    .await
}
