//! Post-mortem, confirmation and Learn (DESIGN.md §1, §3): memory accepts only human-confirmed
//! knowledge. Draft (resolved → postmortem_draft) builds the document from what happened; a
//! reviewer other than the last editor confirms it; the learnings plan is shown as a preview and
//! Learn writes exactly that plan in one transaction, once.
//!
//! Long because draft, confirm, the learnings plan and Learn are one workflow over the same
//! post-mortem and plan types, and Learn writes exactly what the plan built.

use std::collections::BTreeSet;

use serde::Serialize;
use sqlx::AnyPool;

use crate::domain::memory::{MemoryRecord, NewRecord, Rule};
use crate::domain::postmortem::{ActionOutcome, DraftFacts, Postmortem, draft};
use crate::domain::{
    ActionKind, ConfirmRefusal, IncidentId, IncidentState, MemoryKind, Role, Transition,
};
use crate::error::{AppError, AppResult};
use crate::store::users::User;
use crate::store::{
    self, audit, incidents, memory as mstore, postmortems as pstore, recommendations as rstore,
};

pub use crate::domain::ConfirmPolicy;

async fn facts(pool: &AnyPool, incident: &crate::domain::Incident) -> AppResult<DraftFacts> {
    let (observations, tags) =
        crate::services::investigation::incident_tags(pool, incident).await?;
    let earliest = observations
        .iter()
        .filter_map(|o| {
            o.data
                .get("first_seen")
                .and_then(|v| v.as_str())
                .and_then(|s| s.parse::<jiff::Timestamp>().ok())
        })
        .min();
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
        earliest_evidence: earliest,
        actions,
        misleading,
    })
}

/// Drafts the post-mortem: resolved → postmortem_draft. With `llm` configured the model drafts
/// it (over the built-in draft, see [`crate::analyst::Analyst::draft_postmortem`]) and the result
/// is re-checked: the facts (impact, symptoms, root cause, what worked / did not work, rejected)
/// stay the built-in ones, lessons without an ALWAYS or BECAUSE line are dropped and reported,
/// every BECAUSE names the incident. On a timeout, a transport error or invalid output the
/// built-in draft is stored with "model unavailable: …" in `postmortems.notice`.
///
/// # Errors
/// [`AppError::InvalidTransition`] unless resolved; [`AppError::NotFound`].
pub async fn draft_postmortem(
    pool: &AnyPool,
    llm: Option<&dyn crate::analyst::Analyst>,
    user: &User,
    id: &IncidentId,
) -> AppResult<pstore::StoredPostmortem> {
    let incident = incidents::get(pool, id).await?;
    incident.state.apply(Transition::DraftPostmortem)?;
    let facts = facts(pool, &incident).await?;
    let builtin = draft(&facts);
    // The model is asked before the write transaction: a slow model never holds the lock.
    let (pm, analyst, notice) = match llm {
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
    let mut tx = store::begin_write(pool).await?;
    let pm = crate::services::memory::redact_value_for(&mut tx, id.as_str(), &pm).await?;
    let mut notice = notice;
    if let Some(n) = notice.as_mut() {
        crate::services::memory::redact_for(&mut tx, Some(id.as_str()), &mut [n]).await?;
    }
    let current = incidents::get_in(&mut tx, id).await?;
    let to = current.state.apply(Transition::DraftPostmortem)?;
    let at = store::now();
    let event = match &notice {
        Some(n) if analyst == "built-in" => {
            format!("post-mortem drafted (built-in analyst; {n})")
        }
        _ if analyst == "built-in" => "post-mortem drafted (built-in analyst)".to_string(),
        _ => format!("post-mortem drafted ({analyst})"),
    };
    if !incidents::apply_transition(
        &mut tx,
        id,
        current.state,
        to,
        Transition::DraftPostmortem,
        &Default::default(),
        &user.name,
        at,
        &event,
    )
    .await?
    {
        return Err(AppError::Conflict(format!(
            "{id} changed while drafting; reload"
        )));
    }
    pstore::upsert_draft(
        &mut tx,
        id.as_str(),
        &pm,
        &user.name,
        &analyst,
        notice.as_deref(),
        at,
    )
    .await?;
    audit::append(
        &mut tx,
        &user.name,
        "incident.draft_postmortem",
        id.as_str(),
        &serde_json::json!({"from": current.state, "to": to, "analyst": analyst}).to_string(),
    )
    .await?;
    tx.commit().await?;
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
    pool: &AnyPool,
    user: &User,
    id: &IncidentId,
    pm: Postmortem,
    expected_version: Option<i64>,
) -> AppResult<pstore::StoredPostmortem> {
    let pm = pm.with_unix_newlines();
    validate(&pm)?;
    let mut tx = store::begin_write(pool).await?;
    let incident = incidents::get_in(&mut tx, id).await?;
    if incident.state != IncidentState::PostmortemDraft {
        return Err(AppError::Conflict(format!(
            "the post-mortem of {id} can be edited only as a draft (it is {}){}",
            incident.state.label().to_lowercase(),
            if incident.state == IncidentState::Confirmed {
                ": reopen the draft first, which clears the confirmation"
            } else {
                ""
            }
        )));
    }
    let pm = pm_with_durations(pm);
    let pm = crate::services::memory::redact_value_for(&mut tx, id.as_str(), &pm).await?;
    if !pstore::save_edit(
        &mut tx,
        id.as_str(),
        &pm,
        &user.name,
        store::now(),
        expected_version,
    )
    .await?
    {
        return Err(AppError::Conflict(
            "the draft changed since you loaded it; reload and apply your edit again".into(),
        ));
    }
    incidents::add_event(
        &mut tx,
        id,
        store::now(),
        &user.name,
        "postmortem_edited",
        "post-mortem edited",
    )
    .await?;
    audit::append(&mut tx, &user.name, "postmortem.edit", id.as_str(), "{}").await?;
    tx.commit().await?;
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
/// # Errors
/// [`AppError::Forbidden`] without the reviewer role or when confirming one's own edit;
/// [`AppError::InvalidTransition`] when not a draft.
pub async fn confirm(
    pool: &AnyPool,
    user: &User,
    id: &IncidentId,
    policy: ConfirmPolicy,
) -> AppResult<pstore::StoredPostmortem> {
    let refused = |r: ConfirmRefusal| match r {
        ConfirmRefusal::NeedsReviewer => {
            AppError::needs_role(Role::Reviewer, "confirming a post-mortem")
        }
        ConfirmRefusal::OwnEdit => AppError::Forbidden(format!(
            "{} edited this draft last: another reviewer must confirm it (or set INCIDENTMIND_ALLOW_SELF_CONFIRM for small teams)",
            user.name
        )),
    };
    policy.check(user.role, &user.name, None).map_err(refused)?;
    let mut tx = store::begin_write(pool).await?;
    let current = incidents::get_in(&mut tx, id).await?;
    let to = current.state.apply(Transition::Confirm)?;
    let pm = pstore::get_in(&mut tx, id.as_str()).await?;
    policy
        .check(user.role, &user.name, Some(&pm.edited_by))
        .map_err(refused)?;
    let at = store::now();
    if !incidents::apply_transition(
        &mut tx,
        id,
        current.state,
        to,
        Transition::Confirm,
        &Default::default(),
        &user.name,
        at,
        "post-mortem confirmed",
    )
    .await?
    {
        return Err(AppError::Conflict(format!("{id} changed; reload")));
    }
    pstore::set_confirmation(&mut tx, id.as_str(), Some(&user.name), at).await?;
    audit::append(
        &mut tx,
        &user.name,
        "incident.confirm",
        id.as_str(),
        &serde_json::json!({"from": current.state, "to": to}).to_string(),
    )
    .await?;
    tx.commit().await?;
    pstore::get(pool, id.as_str()).await
}

/// One record Learn will write (or link to, when it duplicates one already in memory).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct PlannedMemory {
    /// The record as it will be written (text already redacted).
    #[serde(flatten)]
    pub record: NewRecord,
    /// Sources among the planned records (indexes into the plan).
    #[serde(skip)]
    pub cites_planned: Vec<usize>,
    /// Readable sources: `OBS-3`, `row 2 (root cause)` (a row of the preview),
    /// `MEM-40 (symptom, already known)`.
    pub source_refs: Vec<String>,
    /// An existing record it duplicates (linked and its evidence count bumped instead).
    pub duplicate_of: Option<i64>,
    /// Earlier confirmed records this one contradicts: Learn marks each `contradicted_by` the
    /// new record (see [`Contradicted`]).
    pub contradicts: Vec<Contradicted>,
}

/// An earlier confirmed root cause on the same service that a planned root cause denies
/// ([`crate::memory::negation::contradiction`]): "pool size was NOT the cause" against "the
/// pool was too small". Learn marks it and drafts a supersession proposal; the
/// reviewer queue lists it until a reviewer supersedes it; recall marks it `contradicted`;
/// hypotheses citing it are capped one level lower.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Contradicted {
    /// The earlier record.
    pub id: i64,
    /// Its text.
    pub text: String,
    /// The words of the claim the new record denies and the earlier one affirmed.
    pub claim: Vec<String>,
}

/// The learnings preview (`GET …/learnings/preview`).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct LearningsPreview {
    /// Exactly the records Learn will write, in order (same shape as `GET /api/v1/memories`
    /// without ids).
    pub memories: Vec<PlannedMemory>,
    /// Planned records that duplicate existing memory: not written, linked instead.
    pub duplicates: Vec<PlannedMemory>,
    /// Already in memory from earlier in the incident (remediation failures recorded by verdicts).
    pub already_in_memory: Vec<i64>,
    /// "N durable memories would be written".
    pub message: String,
    /// The question Learn asks the reviewer: did the copilot's top hypothesis match the
    /// confirmed root cause (with a suggested answer); null when no hypothesis was proposed.
    pub grading: Option<crate::services::grading::GradeQuestion>,
}

fn norm_words(s: &str) -> BTreeSet<String> {
    crate::memory::recall::content_words(s)
        .into_iter()
        .collect()
}

/// Builds the learnings plan of a confirmed incident. Deterministic for the same stored state:
/// the preview and Learn call it and get the same records.
///
/// # Errors
/// [`AppError::InvalidTransition`] unless confirmed; database errors.
pub async fn plan(pool: &AnyPool, id: &IncidentId) -> AppResult<LearningsPreview> {
    let incident = incidents::get(pool, id).await?;
    if incident.state != IncidentState::Confirmed {
        incident.state.apply(Transition::Learn)?;
    }
    let stored = pstore::get(pool, id.as_str()).await?;
    let pm = &stored.postmortem;
    let author = stored
        .confirmed_by
        .clone()
        .unwrap_or_else(|| stored.edited_by.clone());
    let (observations, tags) =
        crate::services::investigation::incident_tags(pool, &incident).await?;
    let obs_ids: Vec<i64> = observations.iter().take(3).map(|o| o.id).collect();
    let verdict_failures: Vec<MemoryRecord> = mstore::list(
        pool,
        &mstore::MemoryFilter {
            incident: Some(id.to_string()),
            kind: Some(MemoryKind::RemediationFailure),
            limit: Some(1000),
            ..Default::default()
        },
    )
    .await?
    .into_iter()
    .filter(|r| r.validation != crate::domain::Validation::Retracted)
    .collect();
    let redactor = store::redaction::peek(pool, id.as_str()).await?;
    let mut planner = Planner {
        id,
        incident: &incident,
        author,
        tags,
        redactor,
        plan: Vec::new(),
    };
    let root = planner.observations(pm, &obs_ids);
    let (already, failures) = planner.actions(pm, &verdict_failures, root);
    planner.lessons(pm, root, &failures);
    let mut plan = planner.plan;
    mark_duplicates(pool, id, &mut plan).await?;
    mark_contradictions(pool, id, &incident, &mut plan).await?;
    name_sources(&mut plan);
    let (duplicates, memories): (Vec<PlannedMemory>, Vec<PlannedMemory>) =
        plan.into_iter().partition(|p| p.duplicate_of.is_some());
    let message = format!("{} durable memories would be written", memories.len());
    let grading = crate::services::grading::question(pool, &incident, &pm.root_cause).await?;
    Ok(LearningsPreview {
        memories,
        duplicates,
        already_in_memory: already,
        message,
        grading,
    })
}

/// The learnings plan of one incident as it is built, in order: the fields every record shares
/// and the incident's redactor, applied to each record as it is planned.
struct Planner<'a> {
    id: &'a IncidentId,
    incident: &'a crate::domain::Incident,
    author: String,
    tags: Vec<String>,
    redactor: crate::evidence::redact::Redactor,
    plan: Vec<PlannedMemory>,
}

/// `": note"` for an action with an engineer's note, nothing without one.
fn note_suffix(a: &ActionOutcome) -> String {
    if a.note.is_empty() {
        String::new()
    } else {
        format!(": {}", a.note)
    }
}

impl Planner<'_> {
    /// A record of the incident with the fields every planned record shares.
    fn base(&self, kind: MemoryKind, text: String) -> NewRecord {
        let mut r = NewRecord::new(kind, text, self.author.clone());
        r.incident_id = Some(self.id.to_string());
        r.services = vec![self.incident.service.clone()];
        r.failure_modes = self.tags.clone();
        r.importance =
            crate::domain::postmortem::rule_severity(self.incident.severity).importance();
        r
    }

    /// [`Self::base`] for a record about action `a`: its kind and target set.
    fn action_record(&self, kind: MemoryKind, a: &ActionOutcome, text: String) -> NewRecord {
        let mut r = self.base(kind, text);
        r.action_kind = Some(a.kind);
        r.target = Some(a.target.clone());
        r
    }

    /// Redacts and appends one record; returns its row in the plan.
    fn push(
        &mut self,
        mut r: NewRecord,
        cites_existing: Vec<i64>,
        cites_planned: Vec<usize>,
    ) -> usize {
        let id = self.id;
        let plan = &mut self.plan;
        let redactor = &mut self.redactor;
        r.text = redactor.redact(&r.text);
        if let Some(rule) = r.rule.as_mut() {
            rule.always = redactor.redact(&rule.always);
            rule.because = redactor.redact(&rule.because);
            r.text = rule.text();
        }
        r.cites = cites_existing;
        r.origin = Some(format!("learn:{id}:{}", plan.len()));
        plan.push(PlannedMemory {
            record: r,
            cites_planned,
            // Named once the duplicates are known (below).
            source_refs: Vec::new(),
            duplicate_of: None,
            contradicts: Vec::new(),
        });
        plan.len() - 1
    }

    /// Plans what people saw and concluded: symptoms, summary, root cause, trigger, contributing
    /// factors and misleading hypotheses. Returns the root cause's row.
    fn observations(&mut self, pm: &Postmortem, obs_ids: &[i64]) -> usize {
        let id = self.id;
        let incident = self.incident;
        let title = incident.title.replace('\n', " ");
        // Observations first: what people saw.
        let mut symptoms = Vec::new();
        let symptom_texts: Vec<String> = if pm.symptoms.is_empty() {
            vec![format!("Reported: {title}")]
        } else {
            pm.symptoms.clone()
        };
        for s in symptom_texts {
            let r = self.base(
                MemoryKind::Symptom,
                format!("{id} symptom on {}: {s}", incident.service),
            );
            symptoms.push(self.push(r, vec![], vec![]));
        }
        let r = self.base(
            MemoryKind::IncidentSummary,
            format!(
                "{id} ({}, {}): {title}. {}",
                incident.severity, incident.service, pm.summary
            ),
        );
        self.push(r, obs_ids.to_vec(), symptoms.clone());
        let r = self.base(
            MemoryKind::RootCause,
            format!("{id} root cause on {}: {}", incident.service, pm.root_cause),
        );
        let root = self.push(r, obs_ids.to_vec(), symptoms.clone());
        if !pm.trigger.trim().is_empty() && !pm.trigger.starts_with("Unknown") {
            let r = self.base(MemoryKind::Trigger, format!("{id} trigger: {}", pm.trigger));
            self.push(r, vec![], symptoms.clone());
        }
        for c in &pm.contributing_factors {
            let r = self.base(
                MemoryKind::ContributingFactor,
                format!("{id} contributing factor: {c}"),
            );
            self.push(r, vec![], symptoms.clone());
        }
        for h in &pm.misleading_hypotheses {
            let r = self.base(
                MemoryKind::FalseHypothesis,
                format!("Misleading first hypothesis during {id}: {h}"),
            );
            self.push(r, vec![], vec![root]);
        }
        root
    }

    /// Plans the actions: what did not work (unless a verdict already recorded it), what was
    /// rejected and what worked. Returns the ids already in memory and the failures' rows.
    fn actions(
        &mut self,
        pm: &Postmortem,
        verdict_failures: &[MemoryRecord],
        root: usize,
    ) -> (Vec<i64>, Vec<usize>) {
        let id = self.id;
        let mut already = Vec::new();
        let mut failures = Vec::new();
        for a in &pm.what_did_not_work {
            if let Some(existing) = verdict_failures.iter().find(|f| {
                f.action_kind == Some(a.kind) && f.target.as_deref() == Some(a.target.as_str())
            }) {
                already.push(existing.id);
                continue;
            }
            let worse = if a.outcome == "made_worse" {
                "made it worse"
            } else {
                "did not resolve it"
            };
            let mut r = self.action_record(
                MemoryKind::RemediationFailure,
                a,
                format!(
                    "{} on {} during {id} {worse}{}",
                    a.kind.label(),
                    a.target,
                    note_suffix(a)
                ),
            );
            r.data = serde_json::json!({"verdict": a.outcome, "note": a.note});
            failures.push(self.push(r, vec![], vec![]));
        }
        for a in &pm.rejected {
            let r = self.action_record(
                MemoryKind::RejectedRecommendation,
                a,
                format!(
                    "{} on {} was rejected during {id}: {}",
                    a.kind.label(),
                    a.target,
                    a.note
                ),
            );
            self.push(r, vec![], vec![root]);
        }
        for a in &pm.what_worked {
            let how = if a.outcome == "resolved" {
                "resolved"
            } else {
                "partially resolved"
            };
            let r = self.action_record(
                MemoryKind::RemediationSuccess,
                a,
                format!(
                    "{} on {} {how} {id}{}",
                    a.kind.label(),
                    a.target,
                    note_suffix(a)
                ),
            );
            self.push(r, vec![], vec![]);
        }
        (already, failures)
    }

    /// Plans the lessons, action items and detection gaps.
    fn lessons(&mut self, pm: &Postmortem, root: usize, failures: &[usize]) {
        let id = self.id;
        // A lesson from an incident with one failed action is about that action ("before raising
        // the pool limit, check…"): it carries the action kind, so a question naming the action
        // finds it through the structured keys.
        let lesson_action = match pm.what_did_not_work.split_first() {
            Some((a, rest)) if rest.iter().all(|b| b.kind == a.kind) => Some(a.kind),
            _ => None,
        };
        for l in &pm.lessons {
            let mut r = self.base(MemoryKind::Lesson, String::new());
            r.action_kind = lesson_action;
            r.rule = Some(Rule {
                always: l.always.clone(),
                because: l.because.clone(),
                scope: l.scope.clone(),
                severity: l.severity,
            });
            r.importance = l.severity.importance();
            let mut cites = vec![root];
            cites.extend(failures.iter().copied());
            self.push(r, vec![], cites);
        }
        for a in &pm.action_items {
            let r = self.base(MemoryKind::ActionItem, format!("{id} action item: {a}"));
            self.push(r, vec![], vec![root]);
        }
        for g in &pm.detection_gaps {
            let r = self.base(MemoryKind::DetectionGap, format!("{id} detection gap: {g}"));
            self.push(r, vec![], vec![]);
        }
    }
}

/// Links planned records that duplicate existing memory instead of copying them.
async fn mark_duplicates(
    pool: &AnyPool,
    id: &IncidentId,
    plan: &mut [PlannedMemory],
) -> AppResult<()> {
    // Exact or near duplicates of existing memory are linked instead of copied.
    for p in plan.iter_mut() {
        let expr = mstore::fts_or_query(&p.record.text);
        let candidates = mstore::fts_candidates(pool, &expr, &[p.record.kind], None, 5).await?;
        let mine = norm_words(&p.record.text);
        for c in mstore::get_many(pool, &candidates).await? {
            if c.incident_id.as_deref() == Some(id.as_str())
                || !c.services.iter().any(|s| p.record.services.contains(s))
            {
                continue;
            }
            let theirs = norm_words(&c.text);
            let inter = mine.intersection(&theirs).count() as f64;
            let union = mine.union(&theirs).count().max(1) as f64;
            if inter / union >= 0.85 {
                p.duplicate_of = Some(c.id);
                break;
            }
        }
    }
    Ok(())
}

/// Marks the earlier confirmed root causes on the service that a planned root cause denies.
async fn mark_contradictions(
    pool: &AnyPool,
    id: &IncidentId,
    incident: &crate::domain::Incident,
    plan: &mut [PlannedMemory],
) -> AppResult<()> {
    // A root cause that denies what an earlier confirmed root cause on the service affirmed
    // contradicts it: the preview shows it, Learn marks the earlier one.
    if plan.iter().any(|p| p.record.kind == MemoryKind::RootCause) {
        let earlier = mstore::list(
            pool,
            &mstore::MemoryFilter {
                kind: Some(MemoryKind::RootCause),
                service: Some(incident.service.clone()),
                validation: Some(crate::domain::Validation::Confirmed),
                limit: Some(500),
                ..Default::default()
            },
        )
        .await?;
        for p in plan
            .iter_mut()
            .filter(|p| p.record.kind == MemoryKind::RootCause && p.duplicate_of.is_none())
        {
            for e in earlier
                .iter()
                .filter(|e| e.incident_id.as_deref() != Some(id.as_str()))
            {
                if let Some(claim) = crate::memory::negation::contradiction(&p.record.text, &e.text)
                {
                    p.contradicts.push(Contradicted {
                        id: e.id,
                        text: e.text.clone(),
                        claim,
                    });
                }
            }
        }
    }
    Ok(())
}

/// Names each planned record's sources in the words of the preview table.
fn name_sources(plan: &mut [PlannedMemory]) {
    // Sources in the words of the preview table: its row (and kind) when the source will be
    // written, the existing memory it links to when it duplicates one.
    let mut row = 0;
    let named: Vec<String> = plan
        .iter()
        .map(|p| {
            let kind = p.record.kind.as_str().replace('_', " ");
            match p.duplicate_of {
                Some(d) => format!("MEM-{d} ({kind}, already known)"),
                None => {
                    row += 1;
                    format!("row {row} ({kind})")
                }
            }
        })
        .collect();
    for p in plan.iter_mut() {
        p.source_refs = p
            .record
            .cites
            .iter()
            .map(|c| format!("OBS-{c}"))
            .chain(
                p.cites_planned
                    .iter()
                    .filter_map(|i| named.get(*i).cloned()),
            )
            .collect();
    }
}

/// What Learn returns (also stored, so a repeat returns the same).
#[derive(Debug, Clone, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct LearnResult {
    /// Incident.
    pub incident_id: String,
    /// Ids of the records written, in plan order.
    pub written: Vec<i64>,
    /// Existing records whose evidence count was bumped instead of writing duplicates.
    pub linked: Vec<i64>,
    /// "N durable memories written".
    pub message: String,
}

/// The records a Learn wrote, in the order it wrote them (for the page after Learn).
///
/// # Errors
/// Database errors.
pub async fn written_records(pool: &AnyPool, result: &LearnResult) -> AppResult<Vec<MemoryRecord>> {
    let mut records = mstore::get_many(pool, &result.written).await?;
    records.sort_by_key(|r| result.written.iter().position(|w| *w == r.id));
    Ok(records)
}

/// Learn: confirmed → learned, writing exactly the preview in one transaction. A repeated or
/// concurrent call writes nothing more and returns the stored result.
///
/// # Errors
/// [`AppError::InvalidTransition`] unless confirmed (or already learned).
pub async fn learn(pool: &AnyPool, user: &User, id: &IncidentId) -> AppResult<LearnResult> {
    learn_inner(pool, user, id, None, None).await
}

/// [`learn`] with the reviewer's answer to the preview's grading question (did the copilot's
/// top hypothesis match the confirmed root cause), recorded with the incident in the same
/// transaction. `None` records no grade (the incident stays ungraded).
///
/// # Errors
/// As [`learn`]; a validation error on `top_hypothesis_matched` when there is no hypothesis to
/// grade.
pub async fn learn_graded(
    pool: &AnyPool,
    user: &User,
    id: &IncidentId,
    top_hypothesis_matched: Option<bool>,
) -> AppResult<LearnResult> {
    learn_inner(pool, user, id, None, top_hypothesis_matched).await
}

/// [`learn`] that fails after writing `fail_after` records when set — for the test that shows an
/// interrupted Learn leaves all or nothing.
///
/// # Errors
/// As [`learn`]; [`AppError::Internal`] at the failpoint.
#[doc(hidden)]
pub async fn learn_with_failpoint(
    pool: &AnyPool,
    user: &User,
    id: &IncidentId,
    fail_after: Option<usize>,
) -> AppResult<LearnResult> {
    learn_inner(pool, user, id, fail_after, None).await
}

async fn learn_inner(
    pool: &AnyPool,
    user: &User,
    id: &IncidentId,
    fail_after: Option<usize>,
    grade: Option<bool>,
) -> AppResult<LearnResult> {
    if let Some(done) = stored_result(pool, id).await? {
        return Ok(done);
    }
    let preview = match plan(pool, id).await {
        Ok(p) => p,
        Err(e @ AppError::InvalidTransition(_)) => return stored_result(pool, id).await?.ok_or(e),
        Err(e) => return Err(e),
    };
    let mut tx = store::begin_write(pool).await?;
    let current = incidents::get_in(&mut tx, id).await?;
    if current.state == IncidentState::Learned {
        drop(tx);
        return stored_result(pool, id)
            .await?
            .ok_or_else(|| AppError::Conflict(format!("{id} is learned")));
    }
    let to = current.state.apply(Transition::Learn)?;
    let at = store::now();
    match (grade, &preview.grading) {
        (Some(answer), Some(q)) => {
            crate::services::grading::record_in(&mut tx, id, q, answer, &user.name, at).await?
        }
        (Some(_), None) => {
            return Err(crate::domain::ValidationError::new(
                "top_hypothesis_matched",
                "the copilot proposed no hypothesis for this incident: there is nothing to grade",
            )
            .into());
        }
        (None, _) => {}
    }
    let (written, linked) = write_plan(&mut tx, user, id, &preview, fail_after, at).await?;
    check_written_citations(&mut tx, &written).await?;
    if !incidents::apply_transition(
        &mut tx,
        id,
        current.state,
        to,
        Transition::Learn,
        &Default::default(),
        &user.name,
        at,
        &format!("{} durable memories written", written.len()),
    )
    .await?
    {
        return Err(AppError::Conflict(format!("{id} changed; reload")));
    }
    let result = LearnResult {
        incident_id: id.to_string(),
        message: format!("{} durable memories written", written.len()),
        written,
        linked,
    };
    pstore::save_learning(
        &mut tx,
        id.as_str(),
        &user.name,
        &serde_json::to_string(&result).map_err(|e| AppError::Internal(e.into()))?,
        at,
    )
    .await?;
    audit::append(
        &mut tx,
        &user.name,
        "incident.learn",
        id.as_str(),
        &serde_json::json!({"written": result.written.len(), "linked": result.linked.len()})
            .to_string(),
    )
    .await?;
    tx.commit().await?;
    Ok(result)
}

/// Writes Learn's plan in order inside `tx`: links the duplicates, inserts the rest with their
/// planned citations resolved and marks what they contradict. Returns (written, linked).
async fn write_plan(
    tx: &mut store::Tx,
    user: &User,
    id: &IncidentId,
    preview: &LearningsPreview,
    fail_after: Option<usize>,
    at: jiff::Timestamp,
) -> AppResult<(Vec<i64>, Vec<i64>)> {
    let mut written: Vec<i64> = Vec::new();
    // Indexes in the full plan → ids (duplicates map to the existing record).
    let mut ids_by_plan: std::collections::HashMap<usize, i64> = std::collections::HashMap::new();
    let mut all: Vec<&PlannedMemory> = preview
        .memories
        .iter()
        .chain(preview.duplicates.iter())
        .collect();
    all.sort_by_key(|p| {
        p.record
            .origin
            .clone()
            .and_then(|o| o.rsplit(':').next().and_then(|n| n.parse::<usize>().ok()))
            .unwrap_or(0)
    });
    let mut linked = Vec::new();
    for p in all {
        let idx = p
            .record
            .origin
            .as_deref()
            .and_then(|o| o.rsplit(':').next())
            .and_then(|n| n.parse::<usize>().ok())
            .unwrap_or(0);
        if let Some(existing) = p.duplicate_of {
            mstore::bump_evidence(
                tx,
                existing,
                &user.name,
                &format!("confirmed again by {id}"),
            )
            .await?;
            ids_by_plan.insert(idx, existing);
            linked.push(existing);
            continue;
        }
        if fail_after.is_some_and(|n| written.len() >= n) {
            return Err(AppError::Internal(anyhow::anyhow!(
                "failpoint: learn interrupted after {} records",
                written.len()
            )));
        }
        let mut r = p.record.clone();
        r.cites
            .extend(p.cites_planned.iter().filter_map(|i| ids_by_plan.get(i)));
        // The text was redacted for the preview; write it as is.
        let (rid, _) = mstore::insert(tx, &r, at).await?;
        audit::append(tx, &user.name, "memory.write", &format!("MEM-{rid}"), &serde_json::json!({"id": rid, "kind": r.kind, "epistemic_type": r.epistemic_type, "incident": id.as_str(), "validation": r.validation}).to_string()).await?;
        for c in &p.contradicts {
            let detail = format!(
                "{id}'s root cause MEM-{rid} says it was not {}",
                c.claim.join(" ")
            );
            mstore::mark_contradicted(tx, c.id, rid, &user.name, &detail).await?;
            audit::append(
                tx,
                &user.name,
                "memory.contradict",
                &format!("MEM-{}", c.id),
                &serde_json::json!({"id": c.id, "contradicted_by": rid, "claim": c.claim, "incident": id.as_str()}).to_string(),
            )
            .await?;
            let supersession = crate::domain::proposals::Supersession {
                old: c.id,
                old_text: c.text.clone(),
                new: rid,
                new_text: r.text.clone(),
                claim: c.claim.clone(),
            };
            crate::services::proposals::draft_supersession_in(tx, id, supersession, &user.name)
                .await?;
        }
        ids_by_plan.insert(idx, rid);
        written.push(rid);
    }
    Ok((written, linked))
}

/// Every inference written must cite something, and no decision may cite only decisions
/// (DESIGN.md §2) — checked on what was actually written before committing.
async fn check_written_citations(tx: &mut store::Tx, ids: &[i64]) -> AppResult<()> {
    for id in ids {
        let r = mstore::get_in(tx, *id).await?;
        let mut types = Vec::new();
        for s in &r.sources {
            types.push(mstore::get_in(tx, *s).await?.epistemic_type);
        }
        crate::domain::memory::check_citations(r.epistemic_type, &types).map_err(|e| {
            AppError::Internal(anyhow::anyhow!(
                "learn plan broke a citation rule on MEM-{id}: {e}"
            ))
        })?;
    }
    Ok(())
}

async fn stored_result(pool: &AnyPool, id: &IncidentId) -> AppResult<Option<LearnResult>> {
    match pstore::learning(pool, id.as_str()).await? {
        Some(s) => Ok(Some(
            serde_json::from_str(&s).map_err(|e| AppError::Internal(e.into()))?,
        )),
        None => Ok(None),
    }
}
