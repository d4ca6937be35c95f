//! Opening incidents and moving them through the state machine (DESIGN.md §1).

use crate::domain::incident::required_role;
use crate::domain::{Incident, IncidentId, NewIncident, Resolution, Transition};
use crate::error::{AppError, AppResult};
use crate::store::users::User;
use crate::store::{Db, IncidentWrite, incidents};

/// Opens an incident in `investigating` on behalf of `actor` (a user name or an integration):
/// its title and description redacted with its new placeholder map, `opened` on its timeline
/// and `incident.open` in the audit log ([`IncidentWrite::create`]).
///
/// # Errors
/// Database errors.
pub async fn open_incident(db: &Db, actor: &str, new: &NewIncident) -> AppResult<Incident> {
    let incident = IncidentWrite::create(db, new, actor)
        .await?
        .commit()
        .await?;
    tracing::info!(incident.id = %incident.id, "incident opened");
    Ok(incident)
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
    pool: &Db,
    user: &User,
    id: &IncidentId,
    transition: Transition,
    input: TransitionInput,
) -> AppResult<Incident> {
    transition_from(pool, user, id, transition, input, None).await
}

/// [`transition`] based on the incident version `expected_version` (what the page or client
/// saw): a stale version is a 409 that changes nothing, checked inside the write transaction.
///
/// # Errors
/// As [`transition`], plus [`AppError::Conflict`] when `expected_version` is not current.
pub async fn transition_from(
    pool: &Db,
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
    let mut write = IncidentWrite::open(pool, id, &user.name, expected_version).await?;
    let from = write.incident().state;
    let to = from.apply(transition)?;
    let detail = match transition {
        Transition::Resolve => "resolved".to_string(),
        _ => format!("{} → {}", from.label(), to.label()),
    };
    let mut resolution = input.resolution;
    if let Some(r) = resolution.as_mut() {
        write.redact(&mut [&mut r.summary, &mut r.root_cause]);
    }
    let patch = incidents::TransitionPatch { resolution };
    let audit = (
        format!("incident.{}", transition.as_str()),
        serde_json::json!({"from": from, "to": to}).to_string(),
    );
    if !write
        .transition(transition, to, &patch, &detail, Some(audit))
        .await?
    {
        // The write lock makes this unreachable in one process; keep the guard for several.
        return Err(AppError::Conflict(format!(
            "incident {id} changed while this request ran; reload and try again"
        )));
    }
    if transition == Transition::Reopen && from == crate::domain::IncidentState::Confirmed {
        // Reopening a confirmed post-mortem clears its confirmation.
        let at = write.at();
        crate::store::postmortems::set_confirmation(write.tx(), id.as_str(), None, at).await?;
    }
    if transition == Transition::Resolve {
        // A runbook draft for the review queue when approved actions resolved it.
        crate::services::proposals::suggest_runbook_in(&mut write, pool).await?;
    }
    let incident = write.commit().await?;
    tracing::info!(incident.id = %id, from = %from, to = %to, "transition");
    Ok(incident)
}
