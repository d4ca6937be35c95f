//! What people do with a recommendation: approve it (a simulated transcript, never a command),
//! reject it with a reason, give the verdict on an approved one (a failure becomes memory at
//! once), or propose an action of their own.

use super::view::{RecommendationView, recommendation_view};
use super::warnings::dead_end_warning;
use crate::domain::memory::NewRecord;
use crate::domain::{ActionKind, EpistemicType, IncidentId, MemoryKind, ValidationError};
use crate::error::{AppError, AppResult};
use crate::memory::Memory;
use crate::memory::incident::incident_tags;
use crate::memory::recall::derive_tags;
use crate::store::{Db, Event, IncidentWrite, incidents, recommendations as rstore};

/// Deterministic simulated transcript of an action (no command is ever run).
pub fn simulate(kind: ActionKind, target: &str, incident: &str) -> String {
    // No counts, sizes, durations or limits: nothing ran, so any number here would be invented
    // (and read as a fact next to the evidence). What the action would change is named in words.
    let body = match kind {
        ActionKind::RestartService => format!(
            "rolling restart of {target}: every instance restarted one at a time, each back \
             behind the load balancer once its health check passed"
        ),
        ActionKind::RollbackDeploy => {
            format!("rolled back {target} to the previous release on every instance")
        }
        ActionKind::ScaleOut => {
            format!("added instances of {target}; new instances join the load balancer once ready")
        }
        ActionKind::ScaleIn => format!("removed instances of {target} after draining them"),
        ActionKind::RaisePoolLimit => format!(
            "raised the connection-pool limit of {target}; config reloaded on every instance \
             (check the database's connection limit has room for it)"
        ),
        ActionKind::LowerPoolLimit => format!(
            "lowered the connection-pool limit of {target}; config reloaded on every instance"
        ),
        ActionKind::FailoverDatabase => {
            format!("promoted the replica of {target}; writes go to the new primary")
        }
        ActionKind::FlushCache => {
            format!("flushed the cache of {target}: entries are rebuilt on the next reads")
        }
        ActionKind::DisableFeatureFlag => {
            format!("disabled the newest feature flag on {target} for all traffic")
        }
        ActionKind::DrainNode => {
            format!("cordoned and drained the node running {target}; its pods were rescheduled")
        }
        ActionKind::RotateCredentials => {
            format!("issued new credentials / certificate for {target} and reloaded its instances")
        }
        ActionKind::BlockTrafficSource => {
            format!("added a deny rule for the offending source in front of {target}")
        }
        ActionKind::IncreaseTimeout => format!("raised the request timeout of {target}"),
        ActionKind::RollForwardFix => {
            format!("deployed a fix to {target} on every instance")
        }
        ActionKind::PageOwnerTeam => format!("paged the team owning {target}"),
        ActionKind::GatherMoreEvidence => format!(
            "collected logs, metrics and recent changes for {target}; attach them as evidence"
        ),
        ActionKind::FreeDiskSpace => {
            format!("removed rotated logs and temporary files on {target}")
        }
        ActionKind::ThrottleClients => {
            format!("applied a rate limit to the heaviest clients of {target}")
        }
    };
    format!(
        "[SIMULATED — no command was run] {incident}\n$ simulate {} --target {target}\n{body}\nstatus: completed (simulation)",
        kind.as_str()
    )
}

/// Longest reason for approving a known dead end: one line.
pub const APPROVE_REASON_MAX: usize = 500;

/// What a person is asked before approving a recommendation that carries the dead-end banner.
pub const APPROVE_REASON_QUESTION: &str = "What is different this time?";

/// Checks the reason given for approving recommendation `rid`: required (one line, at most
/// [`APPROVE_REASON_MAX`] characters) when it carries the dead-end banner (`warned`), optional
/// otherwise. DESIGN.md §5 and issue #49: a recorded failure is never hidden, and approving it
/// again says why this time should differ.
///
/// # Errors
/// [`ValidationError`] on `reason` when a warned one has none, or when it is too long or holds
/// more than one line.
pub fn approve_reason(warned: bool, rid: i64, reason: &str) -> Result<String, ValidationError> {
    let reason = reason.trim();
    if reason.contains(['\n', '\r']) {
        return Err(ValidationError::new("reason", "must be one line"));
    }
    if warned && reason.is_empty() {
        return Err(ValidationError::new(
            "reason",
            format!(
                "recommendation {rid} repeats a known dead end: say what is different this time \
                 (one line) to approve it"
            ),
        ));
    }
    crate::domain::optional_text("reason", reason, APPROVE_REASON_MAX)
}

/// Approves a proposed recommendation: writes the simulated transcript (an `action_result`
/// record) and puts it on the timeline. One that carries the dead-end banner needs `reason`
/// (what is different this time, see [`approve_reason`]); it is kept on the recommendation and
/// written to the timeline and the audit log. A second approval, or approving a rejected one,
/// is a 409.
///
/// # Errors
/// [`ValidationError`] (422) for a missing reason on a dead end; [`AppError::NotFound`],
/// [`AppError::Conflict`].
pub async fn approve(
    pool: &Db,
    actor: &str,
    id: &IncidentId,
    rid: i64,
    reason: &str,
    expected_version: Option<i64>,
) -> AppResult<RecommendationView> {
    let mut w = IncidentWrite::open(pool, id, actor, expected_version).await?;
    let incident = w.incident().clone();
    incident.check_open()?;
    let rec = rstore::get_in(w.tx(), id.as_str(), rid).await?;
    if rec.status != crate::domain::action::RecommendationStatus::Proposed {
        return Err(AppError::Conflict(format!(
            "recommendation {rid} is already {}",
            rec.status
        )));
    }
    let mut reason = approve_reason(rec.warning.is_some(), rid, reason)?;
    w.redact(&mut [&mut reason]);
    let kind = ActionKind::parse(&rec.action_kind)?;
    let mut t = NewRecord::new(
        MemoryKind::ActionTranscript,
        simulate(kind, &rec.target, id.as_str()),
        actor,
    );
    t.epistemic_type = EpistemicType::ActionResult;
    t.incident_id = Some(id.to_string());
    t.services = vec![incident.service.clone()];
    t.action_kind = Some(kind);
    t.target = Some(rec.target.clone());
    t.cites = vec![rec.record_id];
    t.origin = Some(format!("approve:{rid}"));
    t.data = serde_json::json!({"simulated": true, "recommendation_id": rid});
    if !reason.is_empty() {
        t.data["approve_reason"] = serde_json::json!(reason);
    }
    let (tid, _) = w.write_memory(t, derive_tags).await?;
    let at = w.at();
    let kept = (!reason.is_empty()).then_some(reason.as_str());
    if !rstore::decide(w.tx(), rid, true, actor, kept, Some(tid), at).await? {
        return Err(AppError::Conflict(format!(
            "recommendation {rid} was decided by someone else"
        )));
    }
    let event = match (&rec.warning, kept) {
        (Some(_), Some(r)) => format!(
            "{} on {} (simulated) despite the known dead end; different this time: {r}",
            kind.as_str(),
            rec.target
        ),
        (None, Some(r)) => format!("{} on {} (simulated): {r}", kind.as_str(), rec.target),
        (_, None) => format!("{} on {} (simulated)", kind.as_str(), rec.target),
    };
    let mut detail = serde_json::json!({"recommendation": rid, "kind": kind});
    if let Some(r) = kept {
        detail["reason"] = serde_json::json!(r);
        detail["dead_end"] = serde_json::json!(rec.warning.is_some());
    }
    w.record_event(Event::new("action_approved", event).audited("recommendation.approve", detail))
        .await?;
    w.commit().await?;
    recommendation_view(pool, rec.investigation_id, rid).await
}

/// Rejects a proposed recommendation with a reason (kept for Learn as a rejected
/// recommendation).
///
/// # Errors
/// Validation error for an empty reason; [`AppError::NotFound`]; [`AppError::Conflict`].
pub async fn reject(
    pool: &Db,
    actor: &str,
    id: &IncidentId,
    rid: i64,
    reason: &str,
    expected_version: Option<i64>,
) -> AppResult<RecommendationView> {
    let reason = crate::domain::required_text("reason", reason, 2000)?;
    let mut w = IncidentWrite::open(pool, id, actor, expected_version).await?;
    let rec = rstore::get_in(w.tx(), id.as_str(), rid).await?;
    if rec.status != crate::domain::action::RecommendationStatus::Proposed {
        return Err(AppError::Conflict(format!(
            "recommendation {rid} is already {}",
            rec.status
        )));
    }
    let mut reason_r = reason.clone();
    w.redact(&mut [&mut reason_r]);
    let at = w.at();
    rstore::decide(w.tx(), rid, false, actor, Some(&reason_r), None, at).await?;
    let event = format!("{} on {}: {reason_r}", rec.action_kind, rec.target);
    let audit = serde_json::json!({"recommendation": rid});
    w.record_event(Event::new("action_rejected", event).audited("recommendation.reject", audit))
        .await?;
    w.commit().await?;
    recommendation_view(pool, rec.investigation_id, rid).await
}

pub use crate::domain::action::VERDICTS;

/// Records the verdict on an approved recommendation; `did_not_resolve` and `made_worse` write a
/// confirmed remediation_failure memory in the same transaction, visible to recall at once.
///
/// # Errors
/// Validation error for an unknown verdict; [`AppError::Conflict`] when not approved or already
/// judged.
pub async fn verdict(
    pool: &Db,
    actor: &str,
    id: &IncidentId,
    rid: i64,
    verdict: &str,
    note: &str,
    expected_version: Option<i64>,
) -> AppResult<RecommendationView> {
    let verdict = crate::domain::action::parse_verdict(verdict)?;
    let note = crate::domain::optional_text("note", note, 4000)?;
    let mut w = IncidentWrite::open(pool, id, actor, expected_version).await?;
    let incident = w.incident().clone();
    let rec = rstore::get_in(w.tx(), id.as_str(), rid).await?;
    if rec.status != crate::domain::action::RecommendationStatus::Approved {
        return Err(AppError::Conflict(format!(
            "recommendation {rid} is {}: approve it before giving a verdict",
            rec.status
        )));
    }
    if let Some(v) = &rec.verdict {
        return Err(AppError::Conflict(format!(
            "recommendation {rid} already has the verdict {v}"
        )));
    }
    let mut note_r = note.clone();
    w.redact(&mut [&mut note_r]);
    let at = w.at();
    if !rstore::set_verdict(w.tx(), rid, verdict, &note_r, actor, at).await? {
        return Err(AppError::Conflict(format!(
            "recommendation {rid} already has a verdict"
        )));
    }
    let kind = ActionKind::parse(&rec.action_kind)?;
    if verdict == "did_not_resolve" || verdict == "made_worse" {
        let (_, tags) = incident_tags(pool, &incident).await?;
        let outcome = if verdict == "made_worse" {
            "made it worse"
        } else {
            "did not resolve it"
        };
        let mut text = format!(
            "{} on {} during {} ({}) {outcome}",
            kind.label(),
            rec.target,
            id,
            incident.title
        );
        if !note_r.is_empty() {
            text.push_str(&format!(": {note_r}"));
        }
        let mut m = NewRecord::new(MemoryKind::RemediationFailure, text, actor);
        m.incident_id = Some(id.to_string());
        m.services = vec![incident.service.clone()];
        m.failure_modes = tags;
        m.action_kind = Some(kind);
        m.target = Some(rec.target.clone());
        m.importance = 3;
        m.cites = rec.transcript_id.into_iter().collect();
        m.origin = Some(format!("verdict:{rid}"));
        m.data = serde_json::json!({"verdict": verdict, "note": note_r, "recommendation_id": rid});
        let (failure, _) = w.write_memory(m, derive_tags).await?;
        crate::services::proposals::draft_reflection_in(&mut w, &rec, verdict, &note_r, failure)
            .await?;
    }
    let event = format!(
        "{} on {}: {}{}",
        kind.label(),
        rec.target,
        crate::domain::action::verdict_label(verdict),
        if note_r.is_empty() {
            String::new()
        } else {
            format!(" — {note_r}")
        }
    );
    let audit = serde_json::json!({"recommendation": rid, "verdict": verdict});
    w.record_event(Event::new("verdict", event).audited("recommendation.verdict", audit))
        .await?;
    w.commit().await?;
    recommendation_view(pool, rec.investigation_id, rid).await
}

/// A person adds an action of their own (from the closed vocabulary) to the incident's latest
/// investigation — or to a new one when none ran yet. It gets the same dead-end check as the
/// analyst's proposals.
///
/// # Errors
/// Validation errors for an unknown kind or empty target; [`AppError::Conflict`] when learned.
///
/// Long on purpose: a person's proposal goes through the same checks as the copilot's (closed
/// vocabulary, target, dead-end warning) before its one write transaction.
pub async fn propose(
    memory: &Memory,
    actor: &str,
    id: &IncidentId,
    kind: &str,
    target: &str,
    rationale: &str,
    expected_version: Option<i64>,
) -> AppResult<RecommendationView> {
    let pool = memory.pool();
    let kind = ActionKind::coerce(kind).ok_or_else(|| {
        ValidationError::new(
            "kind",
            format!(
                "'{kind}' is not an action kind; use one of: {}",
                ActionKind::ALL
                    .iter()
                    .map(|k| k.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
    })?;
    let incident = incidents::get(pool, id).await?;
    incident.check_open()?;
    let target = if target.trim().is_empty() {
        incident.service.clone()
    } else {
        crate::domain::optional_text("target", target, 200)?
    };
    let mut rationale = crate::domain::optional_text("rationale", rationale, 2000)?;
    let mut target = target;
    let past = memory.recall_for_incident(&incident, 12).await?;
    let warning =
        dead_end_warning(pool, kind, &incident.service, &past.tags, &past.similar).await?;
    let mut w = IncidentWrite::open(pool, id, actor, expected_version).await?;
    let now = w.at();
    w.redact(&mut [&mut target, &mut rationale]);
    let latest = rstore::latest_investigation(pool, id.as_str()).await?;
    let inv_id = match latest {
        Some(i) => i.id,
        None => {
            rstore::insert_investigation(w.tx(), id.as_str(), actor, "person", None, &[], &[], now)
                .await?
        }
    };
    let position: i64 = rstore::of_investigation(pool, inv_id).await?.len() as i64
        + if warning.is_some() { 1000 } else { 0 };
    let mut r = NewRecord::new(
        MemoryKind::Recommendation,
        format!("{} on {target}: {rationale}", kind.label()),
        actor,
    );
    r.epistemic_type = EpistemicType::Decision;
    r.incident_id = Some(id.to_string());
    r.services = vec![incident.service.clone()];
    r.failure_modes = past.tags.clone();
    r.action_kind = Some(kind);
    r.target = Some(target.clone());
    r.validation = crate::domain::Validation::Pending;
    r.data =
        serde_json::json!({"investigation_id": inv_id, "warning": warning, "proposed_by": actor});
    let (rid, _) = w.write_memory(r, derive_tags).await?;
    let warning_json = warning
        .as_ref()
        .map(|w| serde_json::to_string(w).unwrap_or_default());
    let rec_id = rstore::insert(
        w.tx(),
        &rstore::NewRecommendation {
            investigation_id: inv_id,
            incident_id: id.as_str(),
            record_id: rid,
            hypothesis_id: None,
            action_kind: kind.as_str(),
            target: &target,
            rationale: &rationale,
            warning: warning_json,
            position,
        },
    )
    .await?;
    let event = format!("{} on {target}", kind.as_str());
    w.record_event(Event::new("action_proposed", event)).await?;
    w.commit().await?;
    recommendation_view(pool, inv_id, rec_id).await
}
