//! Opening incidents and moving them through the state machine (DESIGN.md §1).

use sqlx::AnyPool;

use crate::domain::incident::required_role;
use crate::domain::{Incident, IncidentId, NewIncident, Resolution, Transition};
use crate::error::{AppError, AppResult};
use crate::store::users::User;
use crate::store::{self, audit, incidents};

/// Opens an incident in `investigating` on behalf of `actor` (a user name or an integration).
///
/// # Errors
/// Database errors.
pub async fn open_incident(pool: &AnyPool, actor: &str, new: &NewIncident) -> AppResult<Incident> {
    let mut tx = store::begin_write(pool).await?;
    let incident = open_in(&mut tx, new, actor, store::now()).await?;
    let detail = serde_json::json!({
        "title": incident.title, "service": incident.service, "severity": incident.severity,
    });
    audit::append(
        &mut tx,
        actor,
        "incident.open",
        incident.id.as_str(),
        &detail.to_string(),
    )
    .await?;
    tx.commit().await?;
    tracing::info!(incident.id = %incident.id, "incident opened");
    Ok(incident)
}

/// Allocates the incident's id, redacts its title and description with the incident's
/// placeholder map (the one redaction policy, `services::memory::redact_for`) and inserts it,
/// inside the caller's write transaction. Every way of opening an incident goes through here.
///
/// # Errors
/// Database errors.
pub async fn open_in(
    tx: &mut store::Tx,
    new: &NewIncident,
    actor: &str,
    at: jiff::Timestamp,
) -> AppResult<Incident> {
    let id = incidents::next_id(tx, at).await?;
    let mut redacted = new.clone();
    crate::services::memory::redact_for(
        tx,
        Some(id.as_str()),
        &mut [&mut redacted.title, &mut redacted.description],
    )
    .await?;
    incidents::insert(tx, id, &redacted, actor, at).await
}

/// What a transition request carries besides its name.
#[derive(Debug, Clone, Default)]
pub struct TransitionInput {
    /// Required for [`Transition::Resolve`].
    pub resolution: Option<Resolution>,
}

/// Applies `transition` to incident `id` on behalf of `user`. Resolve and reopen come through
/// here; drafting, confirming and learning go through `services::postmortem`, which add their
/// own rules around the same compare-and-set.
///
/// # Errors
/// - [`AppError::Forbidden`] when the user's role is not enough (confirm needs a reviewer);
/// - [`AppError::NotFound`] for an unknown incident;
/// - [`AppError::InvalidTransition`] (409) when the state does not allow it, including when a
///   concurrent request moved it first;
/// - [`AppError::Validation`] when resolve comes without a resolution.
pub async fn transition(
    pool: &AnyPool,
    user: &User,
    id: &IncidentId,
    transition: Transition,
    input: TransitionInput,
) -> AppResult<Incident> {
    transition_from(pool, user, id, transition, input, None).await
}

/// Incident `id` read inside the write transaction `tx`, refused when `expected_version` (what
/// the page or client saw) is not current ([`Incident::check_version`]).
///
/// # Errors
/// [`AppError::NotFound`]; [`AppError::Conflict`] on a stale version; database errors.
pub async fn current_in(
    tx: &mut crate::store::Tx,
    id: &IncidentId,
    expected_version: Option<i64>,
) -> AppResult<Incident> {
    let current = incidents::get_in(tx, id).await?;
    current.check_version(expected_version)?;
    Ok(current)
}

/// [`transition`] based on the incident version `expected_version` (what the page or client
/// saw): a stale version is a 409 that changes nothing, checked inside the write transaction.
///
/// # Errors
/// As [`transition`], plus [`AppError::Conflict`] when `expected_version` is not current.
pub async fn transition_from(
    pool: &AnyPool,
    user: &User,
    id: &IncidentId,
    transition: Transition,
    input: TransitionInput,
    expected_version: Option<i64>,
) -> AppResult<Incident> {
    let needed = required_role(transition);
    if !user.role.includes(needed) {
        return Err(AppError::needs_role(
            needed,
            &format!("{} an incident", transition.as_str().replace('_', " ")),
        ));
    }
    if transition == Transition::Resolve && input.resolution.is_none() {
        return Err(crate::domain::ValidationError::new(
            "summary",
            "resolving needs a summary and a root cause",
        )
        .into());
    }
    let mut tx = store::begin_write(pool).await?;
    let current = current_in(&mut tx, id, expected_version).await?;
    let to = current.state.apply(transition)?;
    let at = store::now();
    let detail = match transition {
        Transition::Resolve => "resolved".to_string(),
        _ => format!("{} → {}", current.state.label(), to.label()),
    };
    let mut resolution = input.resolution;
    if let Some(r) = resolution.as_mut() {
        crate::services::memory::redact_for(
            &mut tx,
            Some(id.as_str()),
            &mut [&mut r.summary, &mut r.root_cause],
        )
        .await?;
    }
    let patch = incidents::TransitionPatch { resolution };
    let applied = incidents::apply_transition(
        &mut tx,
        id,
        current.state,
        to,
        transition,
        &patch,
        &user.name,
        at,
        &detail,
    )
    .await?;
    if !applied {
        // The write lock makes this unreachable in one process; keep the guard for several.
        return Err(AppError::Conflict(format!(
            "incident {id} changed while this request ran; reload and try again"
        )));
    }
    let audit_detail = serde_json::json!({"from": current.state, "to": to});
    audit::append(
        &mut tx,
        &user.name,
        &format!("incident.{}", transition.as_str()),
        id.as_str(),
        &audit_detail.to_string(),
    )
    .await?;
    if transition == Transition::Reopen && current.state == crate::domain::IncidentState::Confirmed
    {
        // Reopening a confirmed post-mortem clears its confirmation.
        crate::store::postmortems::set_confirmation(&mut tx, id.as_str(), None, at).await?;
    }
    let incident = incidents::get_in(&mut tx, id).await?;
    if transition == Transition::Resolve {
        // A runbook draft for the review queue when approved actions resolved it.
        crate::services::proposals::suggest_runbook_in(&mut tx, pool, &incident, &user.name)
            .await?;
    }
    tx.commit().await?;
    tracing::info!(incident.id = %id, from = %current.state, to = %to, "transition");
    Ok(incident)
}
