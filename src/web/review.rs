//! The reviewers' queue, `GET /review` and `GET /api/v1/review`: post-mortem drafts to confirm,
//! rules without grounding, learned incidents without rules, contradictions to resolve, and the
//! proposals (reflections, runbook drafts, consolidations) to accept or reject on the page.

use askama::Template;
use askama_web::WebTemplate;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};

use super::AppState;
use super::auth::CurrentUser;
use super::errors::{ApiError, PageError, PageForm};
use super::examples;
use super::layout::Layout;
use super::proposals::{ProposalForm, ProposalItem, pending_items, proposal_id};
use crate::error::AppError;
use crate::services::proposals as svc;
use crate::store::proposals::StoredProposal;

/// `GET /api/v1/review`: what waits for a reviewer.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub(super) struct ReviewQueue {
    /// Post-mortem drafts to confirm, oldest first.
    pub(super) drafts_waiting_for_confirmation: Vec<ReviewItem>,
    /// Lessons that name no grounding incident.
    pub(super) rules_without_grounding: Vec<ReviewItem>,
    /// Learned incidents that gave no lesson.
    pub(super) learned_incidents_without_rules: Vec<ReviewItem>,
    /// Confirmed records a later one contradicts.
    pub(super) contradictions_to_resolve: Vec<ReviewItem>,
    /// Reflections and runbook drafts waiting for a reviewer to accept or reject them.
    pub(super) proposals_to_decide: Vec<ProposalItem>,
}

/// One entry of the [`ReviewQueue`].
#[derive(serde::Serialize, utoipa::ToSchema)]
pub(super) struct ReviewItem {
    /// `INC-…` or `MEM-…`.
    pub(super) id: String,
    /// What it is.
    pub(super) text: String,
    /// What to do about it.
    pub(super) fix: String,
    /// Where to do it (a page of the app).
    pub(super) href: String,
}

/// What waits for a reviewer, for the API and the page.
pub(super) async fn review(s: &AppState) -> Result<ReviewQueue, AppError> {
    let crate::services::review::ReviewWork {
        drafts,
        ungrounded,
        ruleless,
        contradicted,
    } = crate::services::review::work(&s.pool).await?;
    Ok(ReviewQueue {
        proposals_to_decide: pending_items(s).await?,
        drafts_waiting_for_confirmation: drafts
            .into_iter()
            .map(|i| ReviewItem {
                href: format!("/incidents/{}/postmortem", i.id),
                id: i.id.to_string(),
                text: format!("{} ({}, {})", i.title, i.severity, i.service),
                fix: "Read the draft and confirm it (a reviewer who did not edit it last)".into(),
            })
            .collect(),
        rules_without_grounding: ungrounded
            .into_iter()
            .map(|(id, text)| ReviewItem {
                id: format!("MEM-{id}"),
                text,
                fix:
                    "Name the incident it comes from (write a new version citing it) or retract it"
                        .into(),
                href: format!("/memories/{id}"),
            })
            .collect(),
        learned_incidents_without_rules: ruleless
            .into_iter()
            .map(|(id, title)| ReviewItem {
                href: format!("/incidents/{id}/postmortem"),
                id,
                text: title,
                fix: "Add a lesson (ALWAYS / BECAUSE / SCOPE / SEVERITY) for this incident".into(),
            })
            .collect(),
        contradictions_to_resolve: contradicted
            .into_iter()
            .map(|(id, text, by)| ReviewItem {
                id: format!("MEM-{id}"),
                text,
                fix: format!(
                    "MEM-{by} says otherwise: supersede MEM-{id} with MEM-{by}, or retract MEM-{by} if it is wrong"
                ),
                href: format!("/memories/{id}"),
            })
            .collect(),
    })
}

#[utoipa::path(
    get,
    path = "/api/v1/review",
    operation_id = "reviewQueue",
    summary = "The reviewers' queue",
    tag = "postmortem",
    responses(
        (status = 200, description = "The reviewers' queue", body = ReviewQueue,
         example = json!(examples::review())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn api_review(
    State(s): State<AppState>,
    _u: CurrentUser,
) -> Result<Json<ReviewQueue>, ApiError> {
    Ok(Json(review(&s).await?))
}

// ---- the page ----

/// Proposals shown on one page of `/review`.
const PROPOSALS_PER_PAGE: usize = 10;

/// Proposals of one kind on the page, under its heading.
pub(super) struct ProposalGroup {
    pub(super) heading: &'static str,
    pub(super) items: Vec<ProposalItem>,
}

/// `/review` as a page: what blocks an incident first (drafts to confirm, contradictions), then
/// the proposals grouped by kind and paged, then the rules to tidy.
#[derive(Template, WebTemplate)]
#[template(path = "review.html")]
pub(super) struct ReviewPage {
    pub(super) layout: Layout,
    pub(super) q: ReviewQueue,
    /// This page's proposals, grouped by kind in review order.
    pub(super) groups: Vec<ProposalGroup>,
    /// How many proposals wait in all.
    pub(super) proposals_total: usize,
    /// This page (from 1) and the number of pages of proposals.
    pub(super) page: usize,
    pub(super) pages: usize,
    /// Whether the viewer may accept or reject (reviewers); others see the drafts read-only.
    pub(super) can_decide: bool,
    /// Confirmation of the last decision (after its redirect).
    pub(super) flash: Option<&'static str>,
}

/// Query of `GET /review`.
#[derive(serde::Deserialize, Default)]
pub(super) struct ReviewQuery {
    /// Confirmation of the last decision (`accepted`, `rejected`).
    #[serde(default)]
    done: Option<String>,
    /// Page of proposals, from 1 (anything else: the first).
    #[serde(default)]
    page: String,
}

/// Renders `/review` with `status`; when a decision on `failed` failed, that proposal shows the
/// error and keeps what the reviewer typed (on the page that holds it).
async fn render(
    s: &AppState,
    user: &crate::store::users::User,
    status: StatusCode,
    flash: Option<&'static str>,
    page: Option<usize>,
    failed: Option<(i64, ProposalForm, String)>,
) -> Result<Response, PageError> {
    let mut q = review(s).await?;
    let mut proposals = std::mem::take(&mut q.proposals_to_decide);
    proposals.sort_by_key(|p| (p.kind.review_rank(), p.id));
    let total = proposals.len();
    let pages = total.div_ceil(PROPOSALS_PER_PAGE).max(1);
    let page = match (&failed, page) {
        (Some((id, ..)), _) => proposals
            .iter()
            .position(|p| p.id == *id)
            .map_or(1, |i| i / PROPOSALS_PER_PAGE + 1),
        (None, Some(p)) => p.clamp(1, pages),
        (None, None) => 1,
    };
    let mut shown: Vec<ProposalItem> = proposals
        .into_iter()
        .skip((page - 1) * PROPOSALS_PER_PAGE)
        .take(PROPOSALS_PER_PAGE)
        .collect();
    if let Some((id, form, error)) = failed
        && let Some(p) = shown.iter_mut().find(|p| p.id == id)
    {
        p.form = ProposalForm {
            version: p.form.version,
            ..form
        };
        p.error = Some(error);
    }
    let mut groups: Vec<ProposalGroup> = Vec::new();
    for p in shown {
        let heading = p.kind.review_heading();
        match groups.last_mut() {
            Some(g) if g.heading == heading => g.items.push(p),
            _ => groups.push(ProposalGroup {
                heading,
                items: vec![p],
            }),
        }
    }
    Ok((
        status,
        ReviewPage {
            layout: Layout::new(Some(user), "Review queue").with_current("review"),
            q,
            groups,
            proposals_total: total,
            page,
            pages,
            can_decide: user.role.includes(crate::domain::Role::Reviewer),
            flash,
        },
    )
        .into_response())
}

/// `GET /review`.
pub(super) async fn page_review(
    State(s): State<AppState>,
    user: CurrentUser,
    axum::extract::Query(rq): axum::extract::Query<ReviewQuery>,
) -> Result<Response, PageError> {
    let flash = super::postmortem::Done { done: rq.done }.message();
    render(
        &s,
        &user.0,
        StatusCode::OK,
        flash,
        rq.page.parse().ok(),
        None,
    )
    .await
}

async fn decided(
    s: &AppState,
    user: &crate::store::users::User,
    id: i64,
    form: ProposalForm,
    result: Result<StoredProposal, AppError>,
    done: &str,
) -> Result<Response, PageError> {
    match result {
        Ok(_) => {
            // Back to the page the reviewer decided on (clamped there if it is now past the end).
            let page = form
                .page
                .as_deref()
                .and_then(|p| p.parse::<usize>().ok())
                .filter(|p| *p > 1)
                .map_or(String::new(), |p| format!("&page={p}"));
            Ok(Redirect::to(&format!("/review?done={done}{page}")).into_response())
        }
        Err(AppError::Internal(e)) => Err(AppError::Internal(e).into()),
        Err(e) => {
            render(
                s,
                user,
                e.status(),
                None,
                None,
                Some((id, form, e.to_string())),
            )
            .await
        }
    }
}

/// `POST /review/proposals/{id}/accept`.
pub(super) async fn page_accept(
    State(s): State<AppState>,
    user: CurrentUser,
    Path(id): Path<String>,
    PageForm(f): PageForm<ProposalForm>,
) -> Result<Response, PageError> {
    let id = proposal_id(&id)?;
    let result = svc::accept(&s.pool, &user.0, id, f.version, f.runbook.clone()).await;
    decided(&s, &user.0, id, f, result, "accepted").await
}

/// `POST /review/proposals/{id}/reject`.
pub(super) async fn page_reject(
    State(s): State<AppState>,
    user: CurrentUser,
    Path(id): Path<String>,
    PageForm(f): PageForm<ProposalForm>,
) -> Result<Response, PageError> {
    let id = proposal_id(&id)?;
    let reason = f.reason.clone().unwrap_or_default();
    let result = svc::reject(&s.pool, &user.0, id, f.version, &reason).await;
    decided(&s, &user.0, id, f, result, "rejected").await
}
