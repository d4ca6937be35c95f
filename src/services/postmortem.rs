//! Post-mortem, confirmation and Learn (DESIGN.md §1, §3): memory accepts only human-confirmed
//! knowledge. Draft (resolved → postmortem_draft) builds the document from what happened; a
//! reviewer other than the last editor confirms it; the learnings plan is shown as a preview and
//! Learn writes exactly that plan in one transaction, once.
//!
//! Draft, edit and confirm are here; the learnings plan is in [`plan`], Learn (which writes
//! exactly what the plan built) in [`learn`].

use std::collections::BTreeSet;

use sqlx::AnyPool;

use crate::domain::postmortem::{ActionOutcome, DraftFacts, Postmortem, draft};
use crate::domain::{ActionKind, ConfirmRefusal, IncidentId, IncidentState, Role, Transition};
use crate::error::{AppError, AppResult};
use crate::store::users::User;
use crate::store::{
    Db, Event, IncidentWrite, incidents, memory as mstore, postmortems as pstore,
    recommendations as rstore,
};

pub use crate::domain::ConfirmPolicy;

mod learn;
mod plan;

pub use learn::{LearnResult, learn, learn_graded, learn_with_failpoint, written_records};
pub use plan::{Contradicted, LearningsPreview, PlannedMemory, plan};

async fn facts(pool: &AnyPool, incident: &crate::domain::Incident) -> AppResult<DraftFacts> {
    let (observations, tags) =
        crate::services::investigation::incident_tags(pool, incident).await?;
    let first_seen: Vec<(String, jiff::Timestamp)> = observations
        .iter()
        .filter_map(|o| {
            o.data
                .get("first_seen")
                .and_then(|v| v.as_str())
                .and_then(|s| s.parse::<jiff::Timestamp>().ok())
                .map(|t| (o.reference(), t))
        })
        .collect();
    let recs = rstore::of_incident(pool, incident.id.as_str()).await?;
    let mut actions = Vec::new();
    let mut failed_hypotheses = BTreeSet::new();
    let mut helpful_hypotheses = BTreeSet::new();
    for r in &recs {
        let Ok(kind) = ActionKind::parse(&r.action_kind) else {
            continue;
        };
        let (outcome, note, at) = match (r.status.as_str(), &r.verdict) {
            ("approved", Some(v)) => (
                v.clone(),
                r.verdict_note.clone().unwrap_or_default(),
                r.verdict_at.as_deref().and_then(|t| t.parse().ok()),
            ),
            ("rejected", _) => (
                "rejected".to_string(),
                r.reject_reason.clone().unwrap_or_default(),
                None,
            ),
            _ => continue,
        };
        if (outcome == "did_not_resolve" || outcome == "made_worse")
            && let Some(h) = r.hypothesis_id
        {
            failed_hypotheses.insert(h);
        }
        if (outcome == "resolved" || outcome == "partially_resolved")
            && let Some(h) = r.hypothesis_id
        {
            helpful_hypotheses.insert(h);
        }
        actions.push((
            ActionOutcome {
                kind,
                target: r.target.clone(),
                outcome,
                note,
                dead_end_reason: if r.warning.is_some() {
                    r.approve_reason.clone().unwrap_or_default()
                } else {
                    String::new()
                },
            },
            at,
        ));
    }
    // Misleading: behind an action that failed, behind none that helped, and not naming the
    // confirmed root cause (a right diagnosis with a wrong first remedy is not misleading).
    let root_cause = incident.root_cause.clone().unwrap_or_default();
    let misleading = mstore::get_many(
        pool,
        &failed_hypotheses
            .difference(&helpful_hypotheses)
            .copied()
            .collect::<Vec<_>>(),
    )
    .await?
    .into_iter()
    .map(|h| h.text)
    .filter(|h| !crate::domain::postmortem::names_root_cause(h, &root_cause))
    .collect();
    Ok(DraftFacts {
        incident: incident.clone(),
        failure_modes: tags,
        observations: observations
            .iter()
            .filter(|o| !crate::domain::memory::is_summary(o))
            // Routine log levels are not symptoms unless a failure signature matched; lines
            // with no level (hand-picked notes, metric and alert findings) are.
            .filter(|o| {
                !o.data
                    .get("level")
                    .and_then(|l| l.as_str())
                    .is_some_and(|l| matches!(l, "trace" | "debug" | "info" | "notice"))
                    || !o.failure_modes.is_empty()
            })
            .map(|o| o.text.clone())
            .collect(),
        evidence_first_seen: first_seen,
        actions,
        misleading,
    })
}

/// Drafts the post-mortem: resolved → postmortem_draft. When `analyst` calls a model server
/// ([`crate::analyst::Analyst::calls_a_server`]) the model drafts it (over the built-in draft, see [`crate::analyst::Analyst::draft_postmortem`]) and the result
/// is re-checked: the facts (impact, symptoms, root cause, what worked / did not work, rejected)
/// stay the built-in ones, lessons without an ALWAYS or BECAUSE line are dropped and reported,
/// every BECAUSE names the incident. On a timeout, a transport error or invalid output the
/// built-in draft is stored with "model unavailable: …" in `postmortems.notice`.
///
/// # Errors
/// [`AppError::InvalidTransition`] unless resolved; [`AppError::NotFound`].
pub async fn draft_postmortem(
    pool: &Db,
    analyst: &dyn crate::analyst::Analyst,
    user: &User,
    id: &IncidentId,
    expected_version: Option<i64>,
) -> AppResult<pstore::StoredPostmortem> {
    let incident = incidents::get(pool, id).await?;
    // Checked before the model is asked, and again in the write transaction.
    incident.check_version(expected_version)?;
    incident.state.apply(Transition::DraftPostmortem)?;
    let facts = facts(pool, &incident).await?;
    let builtin = draft(&facts);
    // The model is asked before the write transaction: a slow model never holds the lock.
    let model = Some(analyst).filter(|a| a.calls_a_server());
    let (pm, analyst, notice) = match model {
        None => (builtin, "built-in".to_string(), None),
        Some(a) => match a.draft_postmortem(&facts, &builtin).await.and_then(|m| {
            checked_model_draft(m, &builtin, &facts)
                .map_err(|e| crate::analyst::AnalystError::InvalidOutput(e.to_string()))
        }) {
            Ok((pm, notes)) => {
                let notice = (!notes.is_empty()).then(|| notes.join(". "));
                (pm, a.name(), notice)
            }
            Err(e) => {
                tracing::warn!(error = %e, "model unavailable; using the built-in post-mortem draft");
                (
                    builtin,
                    "built-in".to_string(),
                    Some(format!(
                        "model unavailable: {e}; showing the built-in draft"
                    )),
                )
            }
        },
    };
    let mut w = IncidentWrite::open(pool, id, &user.name, expected_version).await?;
    let pm = w.redact_value(&pm)?;
    let mut notice = notice;
    if let Some(n) = notice.as_mut() {
        w.redact(&mut [n]);
    }
    let from = w.incident().state;
    let to = from.apply(Transition::DraftPostmortem)?;
    let event = match &notice {
        Some(n) if analyst == "built-in" => {
            format!("post-mortem drafted (built-in analyst; {n})")
        }
        _ if analyst == "built-in" => "post-mortem drafted (built-in analyst)".to_string(),
        _ => format!("post-mortem drafted ({analyst})"),
    };
    let audit = serde_json::json!({"from": from, "to": to, "analyst": analyst});
    let audit = Some(("incident.draft_postmortem".to_string(), audit.to_string()));
    let patch = Default::default();
    if !w
        .transition(Transition::DraftPostmortem, to, &patch, &event, audit)
        .await?
    {
        return Err(AppError::Conflict(format!(
            "{id} changed while drafting; reload"
        )));
    }
    let (at, name) = (w.at(), user.name.clone());
    pstore::upsert_draft(
        w.tx(),
        id.as_str(),
        &pm,
        &name,
        &analyst,
        notice.as_deref(),
        at,
    )
    .await?;
    w.commit().await?;
    pstore::get(pool, id.as_str()).await
}

/// Re-checks a model's draft against the built-in one: the facts are never taken from the model
/// (impact, symptoms, root cause, what worked / did not work, rejected keep the built-in
/// values, so action kinds stay the facts' ones); lessons lacking an ALWAYS or BECAUSE line are
/// dropped (and reported in the returned notes); a BECAUSE that does not name the incident is
/// prefixed with it; empty prose keeps the built-in text; when no lesson survives, the built-in
/// lessons are kept.
///
/// # Errors
/// The validation error when the result is still not a valid post-mortem.
fn checked_model_draft(
    mut pm: Postmortem,
    builtin: &Postmortem,
    facts: &DraftFacts,
) -> Result<(Postmortem, Vec<String>), crate::domain::ValidationError> {
    let id = facts.incident.id.as_str();
    pm.impact = builtin.impact.clone();
    pm.symptoms = builtin.symptoms.clone();
    pm.root_cause = builtin.root_cause.clone();
    pm.what_worked = builtin.what_worked.clone();
    pm.what_did_not_work = builtin.what_did_not_work.clone();
    pm.rejected = builtin.rejected.clone();
    if pm.summary.trim().is_empty() {
        pm.summary = builtin.summary.clone();
    }
    if pm.trigger.trim().is_empty() {
        pm.trigger = builtin.trigger.clone();
    }
    for m in &facts.misleading {
        if !pm.misleading_hypotheses.contains(m) {
            pm.misleading_hypotheses.insert(0, m.clone());
        }
    }
    pm.misleading_hypotheses
        .retain(|h| !crate::domain::postmortem::names_root_cause(h, &builtin.root_cause));
    let mut dropped = Vec::new();
    let proposed = pm.lessons.len();
    let mut lessons = Vec::new();
    for (k, mut l) in std::mem::take(&mut pm.lessons).into_iter().enumerate() {
        if l.always.trim().is_empty() {
            dropped.push(format!("lesson {} has no ALWAYS line", k + 1));
            continue;
        }
        if l.because.trim().is_empty() {
            dropped.push(format!("lesson {} has no BECAUSE line", k + 1));
            continue;
        }
        if !l.because.contains(id) {
            l.because = format!("During {id}: {}", l.because.trim());
        }
        lessons.push(l);
    }
    let mut notes = Vec::new();
    if !dropped.is_empty() {
        notes.push(format!(
            "model proposed {proposed} lessons, {} dropped: {}",
            dropped.len(),
            dropped.join(", ")
        ));
    }
    if lessons.is_empty() && !builtin.lessons.is_empty() {
        notes.push("no usable lesson from the model: kept the built-in lessons".into());
        lessons = builtin.lessons.clone();
    }
    pm.lessons = lessons;
    // Checked like an edit, unless the facts themselves fail it (no root cause given at
    // resolution): the built-in draft would fail the same way, so that is not the model's fault.
    if validate(builtin).is_ok() {
        validate(&pm)?;
    }
    Ok((pm, notes))
}

/// Replaces the draft's content. Only while the post-mortem is a draft (a confirmed one must be
/// reopened first, which clears the confirmation).
///
/// # Errors
/// [`AppError::Conflict`] when not a draft (or on a stale `expected_version`); validation errors.
pub async fn edit(
    pool: &Db,
    user: &User,
    id: &IncidentId,
    pm: Postmortem,
    expected_version: Option<i64>,
) -> AppResult<pstore::StoredPostmortem> {
    let pm = pm.with_unix_newlines();
    validate(&pm)?;
    // The version checked is the draft's (`save_edit`), not the incident's.
    let mut w = IncidentWrite::open(pool, id, &user.name, None).await?;
    let state = w.incident().state;
    if state != IncidentState::PostmortemDraft {
        return Err(AppError::Conflict(format!(
            "the post-mortem of {id} can be edited only as a draft (it is {}){}",
            state.label().to_lowercase(),
            if state == IncidentState::Confirmed {
                ": reopen the draft first, which clears the confirmation"
            } else {
                ""
            }
        )));
    }
    let pm = w.redact_value(&pm_with_durations(pm))?;
    let at = w.at();
    if !pstore::save_edit(w.tx(), id.as_str(), &pm, &user.name, at, expected_version).await? {
        return Err(AppError::Conflict(
            "the draft changed since you loaded it; reload and apply your edit again".into(),
        ));
    }
    let event = Event::new("postmortem_edited", "post-mortem edited");
    w.record_event(event.audited("postmortem.edit", "{}"))
        .await?;
    w.commit().await?;
    pstore::get(pool, id.as_str()).await
}

fn pm_with_durations(mut pm: Postmortem) -> Postmortem {
    pm.impact = pm.impact.with_durations();
    pm
}

fn validate(pm: &Postmortem) -> Result<(), crate::domain::ValidationError> {
    use crate::domain::{ValidationError, optional_text, required_text};
    required_text("summary", &pm.summary, 20_000)?;
    required_text("root_cause", &pm.root_cause, 20_000)?;
    optional_text("trigger", &pm.trigger, 5_000)?;
    for (i, l) in pm.lessons.iter().enumerate() {
        if l.always.trim().is_empty() {
            return Err(ValidationError::new(
                "lessons",
                format!("lesson {} needs an ALWAYS line", i + 1),
            ));
        }
        if l.because.trim().is_empty() {
            return Err(ValidationError::new(
                "lessons",
                format!("lesson {} needs a BECAUSE line naming the incident", i + 1),
            ));
        }
    }
    Ok(())
}

/// Confirms the draft: postmortem_draft → confirmed.
///
/// `expected_version` is the incident version the reviewer's page showed; `expected_draft` the
/// post-mortem's own `version` (the draft they read). An edit moves the second and not the first,
/// so both are checked inside the write transaction: a reviewer confirms only the text they read.
///
/// # Errors
/// [`AppError::Forbidden`] without the reviewer role or when confirming one's own edit;
/// [`AppError::Validation`] (field `trigger`) when the draft does not name its trigger;
/// [`AppError::InvalidTransition`] when not a draft; [`AppError::Conflict`] when either version
/// is stale (the message says who edited the draft since).
pub async fn confirm(
    pool: &Db,
    user: &User,
    id: &IncidentId,
    policy: ConfirmPolicy,
    expected_version: Option<i64>,
    expected_draft: Option<i64>,
) -> AppResult<pstore::StoredPostmortem> {
    let refused = |r: ConfirmRefusal| match r {
        ConfirmRefusal::NeedsReviewer => {
            AppError::needs_role(Role::Reviewer, "confirming a post-mortem")
        }
        ConfirmRefusal::OwnEdit => AppError::Forbidden(format!(
            "{} edited this draft last: another reviewer must confirm it (or set INCIDENTMIND_ALLOW_SELF_CONFIRM for small teams)",
            user.name
        )),
        ConfirmRefusal::NoTrigger => AppError::Validation(crate::domain::ValidationError::new(
            "trigger",
            "the draft does not say what set the incident off: write its trigger (a deploy, a config change, a traffic surge, an expired certificate…) and save the draft, then confirm",
        )),
    };
    policy.check(user.role, &user.name, None).map_err(refused)?;
    let mut w = IncidentWrite::open(pool, id, &user.name, expected_version).await?;
    let from = w.incident().state;
    let to = from.apply(Transition::Confirm)?;
    let pm = pstore::get_in(w.tx(), id.as_str()).await?;
    if let Some(read) = expected_draft.filter(|&read| read != pm.version) {
        return Err(AppError::Conflict(format!(
            "the post-mortem draft of {id} changed since you read it (you read version {read}; it is now version {}, edited by {}): read the draft again, then confirm",
            pm.version, pm.edited_by
        )));
    }
    policy
        .check_draft(user.role, &user.name, &pm.postmortem, &pm.edited_by)
        .map_err(refused)?;
    let audit = serde_json::json!({"from": from, "to": to}).to_string();
    let audit = Some(("incident.confirm".to_string(), audit));
    let patch = Default::default();
    if !w
        .transition(
            Transition::Confirm,
            to,
            &patch,
            "post-mortem confirmed",
            audit,
        )
        .await?
    {
        return Err(AppError::Conflict(format!("{id} changed; reload")));
    }
    let at = w.at();
    pstore::set_confirmation(w.tx(), id.as_str(), Some(&user.name), at).await?;
    w.commit().await?;
    pstore::get(pool, id.as_str()).await
}
