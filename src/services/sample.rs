//! Replaying past incidents through the product's own workflow: open → evidence → actions and
//! verdicts → resolve → post-mortem → confirmation by another reviewer → Learn. Used to load the
//! sample history (`examples/history.json`, embedded), by `incidentmind demo`, and by the recall
//! evaluation — so every memory they create went through the same gate as a real incident's.
//!
//! The input shape is the `past[]` schema of `../shared/data/recall-dev.json`.

use serde::Deserialize;
use sqlx::AnyPool;

use crate::domain::memory::{Rule, RuleSeverity};
use crate::domain::{IncidentId, NewIncident, Resolution, Role, Transition, UserName};
use crate::error::{AppError, AppResult};
use crate::evidence::EvidenceKind;
use crate::memory::Memory;
use crate::services::{evidence, investigation, postmortem, workflow};
use crate::store::users::{self, User};

/// The sample history shipped with the app (our own words, facts from public post-mortems).
pub const HISTORY_JSON: &str = include_str!("../../examples/history.json");

/// An action and its note.
#[derive(Debug, Clone, Deserialize)]
pub struct PastAction {
    /// ActionKind name (aliases accepted).
    pub kind: String,
    /// Target.
    pub target: String,
    /// What happened.
    pub note: String,
}

/// A lesson as written in the source file.
#[derive(Debug, Clone, Deserialize)]
pub struct PastLesson {
    /// ALWAYS …
    pub always: String,
    /// BECAUSE …
    pub because: String,
    /// SCOPE …
    pub scope: String,
    /// critical / high / medium / low.
    pub severity: String,
}

/// A past incident to replay.
#[derive(Debug, Clone, Deserialize)]
pub struct PastIncident {
    /// Source id (`D01`, `H03`).
    pub id: String,
    /// Service.
    pub service: String,
    /// One-line title.
    pub title: String,
    /// As written by the on-call engineer.
    pub description: String,
    /// Log lines, command output, metric notes.
    pub evidence: Vec<String>,
    /// The confirmed root cause.
    pub root_cause: String,
    /// The action that did not help, if any.
    pub failed_action: Option<PastAction>,
    /// The action that resolved it.
    pub worked_action: PastAction,
    /// The lesson.
    pub lesson: PastLesson,
    /// SEV1…SEV4 (default SEV2).
    #[serde(default)]
    pub severity: Option<String>,
    /// What set it off.
    #[serde(default)]
    pub trigger: Option<String>,
    /// First explanations that were wrong.
    #[serde(default)]
    pub misleading_hypotheses: Vec<String>,
    /// Where the facts come from (public post-mortem URL).
    #[serde(default)]
    pub source: Option<String>,
    /// How long it took from opened to resolved, in minutes, as its post-mortem reports it
    /// (approximately). The replay happens in seconds; the incident keeps this duration (it is
    /// opened this long before its replayed resolution), so MTTR reads as the incident's own.
    #[serde(default)]
    pub minutes_to_resolve: Option<i64>,
}

/// The sample history file: `{"incidents": [...]}`.
#[derive(Debug, Clone, Deserialize)]
pub struct HistoryFile {
    /// Past incidents in the order they happened.
    pub incidents: Vec<PastIncident>,
}

/// The two accounts history is replayed as (no password: they cannot sign in).
///
/// # Errors
/// Database errors.
pub async fn history_users(pool: &AnyPool) -> AppResult<(User, User)> {
    let mut out = Vec::new();
    for (name, role) in [
        ("history-responder", Role::Responder),
        ("history-reviewer", Role::Reviewer),
    ] {
        let user = match users::find_with_password(pool, name).await? {
            Some((u, _)) => u,
            None => users::create(pool, &UserName::parse(name)?, role, None).await?,
        };
        out.push(user);
    }
    let reviewer = out
        .pop()
        .ok_or_else(|| AppError::Internal(anyhow::anyhow!("no reviewer")))?;
    let responder = out
        .pop()
        .ok_or_else(|| AppError::Internal(anyhow::anyhow!("no responder")))?;
    Ok((responder, reviewer))
}

/// Replays one past incident to `learned`; returns its new incident id.
///
/// # Errors
/// Validation errors in the input (unknown action kind, bad severity); database errors.
///
/// Long on purpose: one past incident replayed through the workflow in the order a responder works
/// it (open, evidence, actions and verdicts, resolve, post-mortem, confirm, Learn).
pub async fn replay(
    memory: &Memory,
    p: &PastIncident,
    responder: &User,
    reviewer: &User,
) -> AppResult<IncidentId> {
    let pool = memory.pool();
    let new = NewIncident::parse(
        &p.title,
        &p.service,
        p.severity.as_deref().unwrap_or("SEV2"),
        &p.description,
    )?;
    let inc = workflow::open_incident(pool, &responder.name, &new).await?;
    let id = inc.id.clone();
    if !p.evidence.is_empty() {
        evidence::add(
            pool,
            &responder.name,
            &id,
            EvidenceKind::Logs,
            p.evidence.join("\n"),
            &format!("history {}", p.id),
            None,
        )
        .await?;
    }
    if let Some(f) = &p.failed_action {
        let r = investigation::propose(
            memory,
            &responder.name,
            &id,
            &f.kind,
            &f.target,
            "tried during the incident",
            None,
        )
        .await?;
        investigation::approve(pool, &responder.name, &id, r.id, replayed(&r), None).await?;
        investigation::verdict(
            pool,
            &responder.name,
            &id,
            r.id,
            "did_not_resolve",
            &f.note,
            None,
        )
        .await?;
    }
    let w = &p.worked_action;
    let r = investigation::propose(
        memory,
        &responder.name,
        &id,
        &w.kind,
        &w.target,
        "tried during the incident",
        None,
    )
    .await?;
    investigation::approve(pool, &responder.name, &id, r.id, replayed(&r), None).await?;
    investigation::verdict(pool, &responder.name, &id, r.id, "resolved", &w.note, None).await?;
    let resolution =
        Resolution::parse(&format!("{} Resolved: {}", p.title, w.note), &p.root_cause)?;
    workflow::transition(
        pool,
        responder,
        &id,
        Transition::Resolve,
        workflow::TransitionInput {
            resolution: Some(resolution),
        },
    )
    .await?;
    if let Some(minutes) = p.minutes_to_resolve.filter(|m| *m > 0) {
        keep_duration(pool, &id, minutes).await?;
    }
    let drafted = postmortem::draft_postmortem(
        pool,
        &crate::analyst::builtin::BuiltinAnalyst,
        responder,
        &id,
        None,
    )
    .await?;
    let mut pm = drafted.postmortem;
    // The evidence carries the past incident's own times; opening, mitigation and resolution
    // happened just now, during the replay. Measured against each other they would say the
    // incident was detected months after it began: keep only the instants that are the
    // incident's own, and no detection gap computed from the replay's clock.
    pm.impact.detected_at = None;
    pm.impact.mitigated_at = None;
    pm.impact.resolved_at = None;
    pm.detection_gaps.clear();
    // A reviewer confirms only a draft that names its trigger; history that did not record one
    // says so (and memory keeps no trigger for it, see `Postmortem::known_trigger`).
    pm.trigger = p
        .trigger
        .clone()
        .unwrap_or_else(|| "Unknown: the imported history does not record it".to_string());
    pm.misleading_hypotheses
        .extend(p.misleading_hypotheses.iter().cloned());
    pm.lessons = vec![Rule {
        always: p.lesson.always.clone(),
        because: format!("{} (learned in {id})", p.lesson.because),
        scope: p.lesson.scope.clone(),
        severity: RuleSeverity::parse(&p.lesson.severity.to_lowercase())?,
    }];
    postmortem::edit(pool, responder, &id, pm, None).await?;
    postmortem::confirm(
        pool,
        reviewer,
        &id,
        postmortem::ConfirmPolicy::default(),
        None,
        None,
    )
    .await?;
    postmortem::learn(pool, reviewer, &id).await?;
    Ok(id)
}

/// Moves the replayed incident `id`'s opening `minutes` before its resolution, so it lasted as
/// long as the incident it replays.
///
/// # Errors
/// Database errors; [`AppError::NotFound`].
async fn keep_duration(pool: &AnyPool, id: &IncidentId, minutes: i64) -> AppResult<()> {
    let inc = crate::store::incidents::get(pool, id).await?;
    let resolved = inc.resolved_at.unwrap_or_else(crate::store::now);
    let opened = resolved - jiff::SignedDuration::from_mins(minutes);
    crate::store::incidents::set_opened_at(pool, id, opened).await
}

/// Loads the embedded sample history through [`replay`]; returns `(source id, incident id)`.
///
/// # Errors
/// [`AppError::Conflict`] when it was loaded before; otherwise as [`replay`].
pub async fn load_history(memory: &Memory) -> AppResult<Vec<(String, IncidentId)>> {
    let pool = memory.pool();
    let file: HistoryFile = serde_json::from_str(HISTORY_JSON)
        .map_err(|e| AppError::Internal(anyhow::anyhow!("examples/history.json: {e}")))?;
    if users::find_with_password(pool, "history-responder")
        .await?
        .is_some()
    {
        return Err(AppError::Conflict(
            "the sample history is already loaded".into(),
        ));
    }
    let (responder, reviewer) = history_users(pool).await?;
    let mut out = Vec::new();
    for p in &file.incidents {
        let id = replay(memory, p, &responder, &reviewer).await?;
        out.push((p.id.clone(), id));
    }
    close_sample_proposals(pool, &reviewer, &out).await?;
    Ok(out)
}

/// Why the sample history's own proposals are closed as it loads.
pub const SAMPLE_PROPOSALS_CLOSED: &str =
    "sample history: replayed as it happened, nothing for a reviewer to decide";

/// Closes (rejects, with [`SAMPLE_PROPOSALS_CLOSED`]) the proposals the replay of `loaded`
/// drafted (reflections on its failed actions, runbook suggestions): the sample is not the
/// team's, and its 29 proposals would bury the review queue (issue #49). Written to the audit log
/// once, with the count.
///
/// # Errors
/// Database errors.
async fn close_sample_proposals(
    pool: &AnyPool,
    reviewer: &User,
    loaded: &[(String, IncidentId)],
) -> AppResult<usize> {
    use crate::store::proposals as pstore;
    let ids: Vec<&str> = loaded.iter().map(|(_, id)| id.as_str()).collect();
    let pending = pstore::list(pool, crate::domain::proposals::ProposalStatus::Pending).await?;
    let mut w = crate::store::Write::begin(pool).await?;
    let at = crate::store::now();
    let mut closed = 0;
    for p in pending
        .iter()
        .filter(|p| ids.contains(&p.incident_id.as_str()))
    {
        if pstore::decide(
            w.tx(),
            p.id,
            p.version,
            crate::domain::proposals::ProposalStatus::Rejected,
            &reviewer.name,
            at,
            Some(SAMPLE_PROPOSALS_CLOSED),
            None,
            &p.draft,
        )
        .await?
        {
            closed += 1;
        }
    }
    w.audit_by(
        &reviewer.name,
        "sample.load",
        "sample-history",
        &serde_json::json!({"incidents": loaded.len(), "proposals_closed": closed}).to_string(),
    )
    .await?;
    w.commit().await?;
    Ok(closed)
}

/// The reason a sample approval gives when its action repeats a dead end of an earlier sample
/// incident (a warned approval needs one): the history is replayed as it happened.
fn replayed(r: &investigation::RecommendationView) -> &'static str {
    if r.warning.is_some() {
        "the sample history replays what was tried"
    } else {
        ""
    }
}
