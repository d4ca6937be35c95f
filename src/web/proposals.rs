//! Proposals over the JSON API: each pending reflection, runbook, consolidation or supersession
//! draft as the reviewers' queue shows it ([`ProposalItem`], [`pending_items`]), and accepting
//! or rejecting one (`POST /api/v1/proposals/{id}/accept|reject`). The `/review` page and its
//! forms are in `web/review.rs`.

use axum::Json;
use axum::extract::{Path, State};
use serde::Deserialize;

use super::AppState;
use super::auth::CurrentUser;
use super::errors::{ApiError, ApiJson};
use super::examples;
use crate::domain::proposals::ProposalKind;
use crate::error::AppError;
use crate::services::proposals::{self as svc, Draft, RunbookEdit};
use crate::store::proposals::StoredProposal;

/// One pending proposal in the reviewers' queue.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct ProposalItem {
    /// Id, for the accept / reject routes.
    pub id: i64,
    /// `PRO-{id}`.
    pub reference: String,
    /// reflection / runbook / consolidation / supersession.
    pub kind: ProposalKind,
    /// The incident it comes from.
    pub incident_id: String,
    /// One line.
    pub title: String,
    /// The version to send back with the decision (409 when stale).
    pub version: i64,
    /// Who drafted it (the responder whose verdict or resolution triggered it, the reviewer
    /// whose Learn found a contradiction, or the `consolidation` job).
    pub created_by: String,
    /// For a reflection: what happened, in words ("Did not resolve — the pool maxed again").
    pub happened: Option<String>,
    /// The draft: exactly the record accepting it writes (authored by the accepting reviewer),
    /// with the reflection or runbook it comes from.
    pub draft: Draft,
    /// The incident's page.
    pub href: String,
    /// The forms' values (the draft's, or what the reviewer typed before an error).
    #[serde(skip)]
    pub form: ProposalForm,
    /// The error of the last submit on this proposal.
    #[serde(skip)]
    pub error: Option<String>,
}

/// The accept and reject forms of a proposal on `/review` (runbook fields only for runbooks).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ProposalForm {
    /// The proposal version the page showed.
    #[serde(default)]
    pub version: Option<i64>,
    /// The runbook fields (title, summary, steps, common causes), as the reviewer edits them.
    #[serde(flatten)]
    pub runbook: RunbookEdit,
    /// Why it is rejected.
    #[serde(default)]
    pub reason: Option<String>,
    /// The page of the review queue the form was on (the redirect returns there).
    #[serde(default)]
    pub page: Option<String>,
}

/// The queue's view of a stored proposal.
///
/// # Errors
/// [`AppError::Internal`] for a draft this program did not write.
pub fn item(p: StoredProposal) -> Result<ProposalItem, AppError> {
    let draft: Draft = serde_json::from_value(p.draft)
        .map_err(|e| AppError::Internal(anyhow::anyhow!("stored draft PRO-{}: {e}", p.id)))?;
    let happened = draft.reflection.as_ref().map(|r| {
        let label = crate::domain::action::verdict_label(&r.verdict);
        if r.note.is_empty() {
            label
        } else {
            format!("{label} — {}", r.note)
        }
    });
    let form = match &draft.runbook {
        Some(rb) => ProposalForm {
            version: Some(p.version),
            runbook: RunbookEdit {
                title: Some(rb.title.clone()),
                summary: Some(rb.summary.clone()),
                steps: Some(rb.steps.join("\n")),
                common_causes: Some(rb.common_causes.join("\n")),
            },
            ..Default::default()
        },
        None => ProposalForm {
            version: Some(p.version),
            ..Default::default()
        },
    };
    Ok(ProposalItem {
        reference: format!("PRO-{}", p.id),
        href: format!("/incidents/{}", p.incident_id),
        id: p.id,
        kind: p.kind,
        incident_id: p.incident_id,
        title: p.title,
        version: p.version,
        created_by: p.created_by,
        happened,
        draft,
        form,
        error: None,
    })
}

/// The pending proposals as the queue shows them, oldest first.
///
/// # Errors
/// Database errors.
pub async fn pending_items(s: &AppState) -> Result<Vec<ProposalItem>, AppError> {
    svc::pending(&s.pool).await?.into_iter().map(item).collect()
}

pub(super) fn proposal_id(id: &str) -> Result<i64, AppError> {
    id.trim_start_matches("PRO-")
        .parse()
        .map_err(|_| AppError::NotFound(format!("proposal {id}")))
}

/// Path parameter of the proposal routes.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ProposalPath {
    /// The proposal's id (`12` or `PRO-12`).
    #[param(example = "12")]
    pub id: String,
}

/// Body of `POST /api/v1/proposals/{id}/accept`: the version the reviewer saw and, for a
/// runbook, the edits (each optional; steps and causes one per line).
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
pub struct AcceptBody {
    /// The proposal version the reviewer saw (409 when stale).
    #[serde(default)]
    pub version: Option<i64>,
    /// Runbook edits.
    #[serde(flatten)]
    pub edit: RunbookEdit,
}

/// Body of `POST /api/v1/proposals/{id}/reject`.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
pub struct RejectBody {
    /// The proposal version the reviewer saw (409 when stale).
    #[serde(default)]
    pub version: Option<i64>,
    /// Why (required).
    #[serde(default)]
    pub reason: String,
}

#[utoipa::path(
    post,
    path = "/api/v1/proposals/{id}/accept",
    operation_id = "acceptProposal",
    summary = "Accept a proposal from the review queue (reviewers)",
    tag = "postmortem",
    params(ProposalPath),
    request_body(content = AcceptBody, description = "The version seen; for a runbook, the reviewer's edits",
                 example = json!(examples::accept_proposal())),
    responses(
        (status = 200, description = "The proposal, accepted, naming the record it wrote", body = StoredProposal,
         example = json!(examples::accepted_proposal())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn api_accept(
    State(s): State<AppState>,
    user: CurrentUser,
    Path(id): Path<String>,
    ApiJson(b): ApiJson<AcceptBody>,
) -> Result<Json<StoredProposal>, ApiError> {
    Ok(Json(
        svc::accept(&s.pool, &user.0, proposal_id(&id)?, b.version, b.edit).await?,
    ))
}

#[utoipa::path(
    post,
    path = "/api/v1/proposals/{id}/reject",
    operation_id = "rejectProposal",
    summary = "Reject a proposal from the review queue, with a reason (reviewers)",
    tag = "postmortem",
    params(ProposalPath),
    request_body(content = RejectBody, description = "The version seen and why",
                 example = json!(examples::reject_proposal())),
    responses(
        (status = 200, description = "The proposal, rejected with its reason; nothing written to memory",
         body = StoredProposal, example = json!(examples::rejected_proposal())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn api_reject(
    State(s): State<AppState>,
    user: CurrentUser,
    Path(id): Path<String>,
    ApiJson(b): ApiJson<RejectBody>,
) -> Result<Json<StoredProposal>, ApiError> {
    Ok(Json(
        svc::reject(&s.pool, &user.0, proposal_id(&id)?, b.version, &b.reason).await?,
    ))
}
