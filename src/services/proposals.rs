//! Proposals through the human gate. Four triggers draft them, never writing durable
//! memory themselves:
//! - a `did_not_resolve` / `made_worse` verdict drafts a **reflection** ([`draft_reflection_in`],
//!   called in the verdict's transaction): what was tried, what happened, what might be tried
//!   instead, as a lesson;
//! - resolving an incident whose approved actions resolved it drafts a **runbook**, or a new
//!   version of the nearest one when that covers the worked actions only partly
//!   ([`suggest_runbook_in`], called in the resolve transaction);
//! - consolidation (`services::consolidation`, on demand or on a schedule) drafts a
//!   **consolidation**: one rule merged from near-duplicates of several incidents;
//! - Learn marking an earlier record contradicted drafts a **supersession**
//!   ([`draft_supersession_in`], in Learn's transaction).
//!
//! A reviewer accepts ([`accept`]: the draft's record goes through the incident write's
//! `write_memory`, the one write path — redaction, citation rules, audit, then embeddings by the
//! memory worker; a consolidation then marks its sources `consolidated_into` the new rule, a
//! supersession marks the older record superseded) or rejects with a reason ([`reject`]). Both
//! are on the audit log and the incident timeline.
//!
//! The four kinds share one [`Draft`] and one queue, here; the review side (edit, accept,
//! reject) is in `review`.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use sqlx::AnyPool;

use crate::domain::consolidation::Consolidation;
use crate::domain::memory::NewRecord;
use crate::domain::proposals::{
    Alternative, KnownRunbook, MAX_ALTERNATIVES, ProposalKind, Reflection, RunbookDraft,
    Supersession, draft_runbook, is_failing_verdict, match_runbooks,
};
use crate::domain::{ActionKind, IncidentId, MemoryKind};
use crate::error::{AppError, AppResult};
use crate::services::investigation::GENERIC_TAGS;
use crate::store::proposals::{self as pstore};
use crate::store::recommendations::Recommendation;
use crate::store::{self, Event, IncidentWrite, memory as mstore};

mod review;

pub use review::{RunbookEdit, accept, mark_sources_in, pending, reject};

/// What a proposal holds: exactly the record accepting it writes (`record`; its author becomes
/// the accepting reviewer), with the reflection, runbook or consolidation it was built from; a
/// supersession writes no record, it names the two records instead.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Draft {
    /// For a reflection: what was tried, what happened, what might be tried instead.
    #[serde(default)]
    pub reflection: Option<Reflection>,
    /// For a runbook: the draft a reviewer may edit before accepting.
    #[serde(default)]
    pub runbook: Option<RunbookDraft>,
    /// For a consolidation: the records merged (marked `consolidated_into` the new rule on
    /// accept) and whether a service is over the rule cap.
    #[serde(default)]
    pub consolidation: Option<Consolidation>,
    /// For a supersession: the older record and the newer one that contradicts it.
    #[serde(default)]
    pub supersession: Option<Supersession>,
    /// The record accepting it writes (none for a supersession).
    #[serde(default)]
    pub record: Option<NewRecord>,
}

impl Draft {
    /// A draft writing `record`, with nothing else set.
    pub fn of(record: NewRecord) -> Self {
        Self {
            reflection: None,
            runbook: None,
            consolidation: None,
            supersession: None,
            record: Some(record),
        }
    }
}

fn specific(tags: &[String]) -> Vec<String> {
    tags.iter()
        .filter(|t| !GENERIC_TAGS.contains(&t.as_str()))
        .cloned()
        .collect()
}

/// The failure modes a record will carry once written: its own plus those derived from its text
/// (what `IncidentWrite::write_memory` adds), so the preview shows what is written.
fn written_tags(tags: &[String], text: &str) -> Vec<String> {
    let mut all: BTreeSet<String> = tags.iter().cloned().collect();
    all.extend(crate::memory::recall::derive_tags(text));
    all.into_iter().collect()
}

fn source_of(success: &pstore::Success, how: &str) -> String {
    match &success.1 {
        Some(i) => format!("resolved {i} (MEM-{}), {how}", success.0),
        None => format!("resolved MEM-{}, {how}", success.0),
    }
}

/// Drafts the reflection on a failed approved action (inside the verdict's transaction) and
/// puts it in the review queue. `failure_id` is the remediation-failure record the verdict
/// wrote; the lesson cites it. What might be tried instead comes, in this order, from recorded
/// successes recall returned for this incident, recorded successes of other action kinds on the
/// same service or a specific failure mode, and the analyst's next open recommendation — never
/// invented; at most [`MAX_ALTERNATIVES`], one per kind. Returns the proposal id (`None` for a
/// verdict that is not a failure, or when this recommendation already has one).
///
/// # Errors
/// Database errors.
pub async fn draft_reflection_in(
    w: &mut IncidentWrite,
    rec: &Recommendation,
    verdict: &str,
    note: &str,
    failure_id: i64,
) -> AppResult<Option<i64>> {
    if !is_failing_verdict(verdict) {
        return Ok(None);
    }
    let incident = w.incident().clone();
    let actor = w.actor().to_string();
    let tx = w.tx();
    let kind = ActionKind::parse(&rec.action_kind)?;
    let id = incident.id.as_str();
    let failure = mstore::get_in(tx, failure_id).await?;
    let modes = specific(&failure.failure_modes);
    let mut instead: Vec<Alternative> = Vec::new();
    let add = |instead: &mut Vec<Alternative>, k: ActionKind, source: String| {
        if k != kind && instead.len() < MAX_ALTERNATIVES && !instead.iter().any(|a| a.kind == k) {
            instead.push(Alternative { kind: k, source });
        }
    };
    let recalled = pstore::latest_recalled_in(tx, id).await?;
    for s in pstore::recalled_successes_in(tx, &recalled, kind.as_str()).await? {
        if let Ok(k) = ActionKind::parse(&s.2) {
            add(&mut instead, k, source_of(&s, "recalled for this incident"));
        }
    }
    for s in pstore::successes_in(tx, id, kind.as_str(), &incident.service, &modes).await? {
        if let Ok(k) = ActionKind::parse(&s.2) {
            add(
                &mut instead,
                k,
                source_of(&s, "on the same service or failure mode"),
            );
        }
    }
    if let Some((k, target)) = pstore::open_recommendations_in(tx, rec.investigation_id)
        .await?
        .into_iter()
        .find_map(|(k, t)| {
            ActionKind::parse(&k)
                .ok()
                .filter(|k| *k != kind)
                .map(|k| (k, t))
        })
    {
        add(
            &mut instead,
            k,
            format!("the analyst's next recommendation (on {target})"),
        );
    }
    let mut target = rec.target.clone();
    w.redact(&mut [&mut target]);
    let reflection = Reflection {
        incident_id: id.to_string(),
        service: incident.service.clone(),
        action_kind: kind,
        target: target.clone(),
        verdict: verdict.to_string(),
        note: note.to_string(),
        failure_modes: modes.clone(),
        instead,
    };
    let rule = reflection.rule();
    let text = rule.text();
    let mut record = NewRecord::new(MemoryKind::Lesson, text.clone(), &actor);
    record.incident_id = Some(id.to_string());
    record.services = vec![incident.service.clone()];
    record.failure_modes = written_tags(&modes, &text);
    record.action_kind = Some(kind);
    record.target = Some(target.clone());
    record.importance = rule.severity.importance();
    record.rule = Some(rule);
    record.cites = vec![failure_id];
    let outcome = if verdict == "made_worse" {
        "made it worse"
    } else {
        "did not resolve it"
    };
    let title = format!("Reflection: {kind} on {target} {outcome} during {id}");
    let draft = Draft {
        reflection: Some(reflection),
        ..Draft::of(record)
    };
    queue_on(
        w,
        ProposalKind::Reflection,
        &format!("reflection:{}", rec.id),
        &title,
        &draft,
    )
    .await
}

/// Puts a draft about `incident` in the review queue in `w` (an incident write, or a `Write`
/// when the step is not that incident's: a consolidation spans several): inserts the proposal
/// (nothing when one with the same `origin` exists), with an incident timeline event and a
/// `proposal.draft` audit entry, by the write's actor. Returns the new proposal's id.
///
/// # Errors
/// Database errors.
pub(crate) async fn queue(
    w: &mut impl store::UnitOfWork,
    kind: ProposalKind,
    incident: &IncidentId,
    origin: &str,
    title: &str,
    draft: &Draft,
) -> AppResult<Option<i64>> {
    let json = serde_json::to_value(draft).map_err(|e| AppError::Internal(e.into()))?;
    let (actor, at) = (w.actor().to_string(), w.at());
    let Some(pid) = pstore::insert(
        w.tx(),
        kind,
        incident.as_str(),
        origin,
        title,
        &json,
        &actor,
        at,
    )
    .await?
    else {
        return Ok(None);
    };
    let detail = format!("{} PRO-{pid} drafted for the review queue", kind.as_str());
    w.record_event_on(incident, Event::new("proposal_drafted", detail))
        .await?;
    let audit = serde_json::json!({"kind": kind, "incident": incident.as_str(), "origin": origin});
    w.audit_by(
        &actor,
        "proposal.draft",
        &format!("PRO-{pid}"),
        &audit.to_string(),
    )
    .await?;
    Ok(Some(pid))
}

/// [`queue`] on the incident of the incident write `w`.
///
/// # Errors
/// Database errors.
pub(crate) async fn queue_on(
    w: &mut IncidentWrite,
    kind: ProposalKind,
    origin: &str,
    title: &str,
    draft: &Draft,
) -> AppResult<Option<i64>> {
    let incident = w.incident().id.clone();
    queue(w, kind, &incident, origin, title, draft).await
}

fn known_runbook(r: &crate::domain::memory::MemoryRecord) -> KnownRunbook {
    let strings = |key: &str| -> Vec<String> {
        r.data
            .get(key)
            .and_then(|v| v.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let title = r
        .data
        .get("title")
        .and_then(|v| v.as_str())
        .unwrap_or_default()
        .to_string();
    // The summary sits between "Runbook: {title}. " and "\nSteps:" (domain::proposals::runbook_text).
    let summary = r
        .text
        .strip_prefix(&format!("Runbook: {title}. "))
        .and_then(|rest| rest.split("\nSteps:").next())
        .unwrap_or_default()
        .trim()
        .to_string();
    KnownRunbook {
        id: r.id,
        summary,
        steps: strings("steps"),
        common_causes: strings("common_causes"),
        version: r.data.get("version").and_then(|v| v.as_i64()).unwrap_or(1),
        title,
    }
}

/// Drafts a runbook after `incident` was resolved (inside the resolve transaction): when an
/// approved action got the verdict `resolved`, the worked actions (resolved or partially
/// resolved, in approval order) are matched against the confirmed runbooks of the same service
/// or a shared specific failure mode. None covering them drafts a new runbook; one covering
/// them partly drafts its next version; one covering all of them drafts nothing. Common causes
/// come from the root cause given at resolution. Returns the proposal id.
///
/// # Errors
/// Database errors.
pub async fn suggest_runbook_in(w: &mut IncidentWrite, pool: &AnyPool) -> AppResult<Option<i64>> {
    let incident = w.incident().clone();
    let actor = w.actor().to_string();
    let actor = actor.as_str();
    let id = incident.id.as_str();
    let tx = w.tx();
    let worked = pstore::worked_in(tx, id).await?;
    if !worked.iter().any(|w| w.verdict == "resolved") {
        return Ok(None);
    }
    let actions: Vec<(ActionKind, String)> = worked
        .iter()
        .filter_map(|w| {
            ActionKind::parse(&w.action_kind)
                .ok()
                .map(|k| (k, w.target.clone()))
        })
        .collect();
    let (_, tags) = crate::services::investigation::incident_tags(pool, &incident).await?;
    let modes = specific(&tags);
    let mut runbooks = Vec::new();
    for rid in pstore::runbook_ids_in(tx).await? {
        let r = mstore::get_in(tx, rid).await?;
        if r.services.contains(&incident.service)
            || r.failure_modes.iter().any(|m| modes.contains(m))
        {
            runbooks.push(known_runbook(&r));
        }
    }
    let kinds: Vec<ActionKind> = actions.iter().map(|a| a.0).collect();
    let found = match_runbooks(&kinds, &runbooks);
    let root_cause = incident.root_cause.clone().unwrap_or_default();
    let Some(mut runbook) = draft_runbook(id, &incident.service, &root_cause, &actions, found)
    else {
        return Ok(None);
    };
    {
        let mut texts: Vec<&mut String> = vec![&mut runbook.title, &mut runbook.summary];
        texts.extend(runbook.steps.iter_mut());
        texts.extend(runbook.common_causes.iter_mut());
        texts.extend(runbook.worked.iter_mut());
        w.redact(&mut texts);
    }
    let mut record = NewRecord::new(MemoryKind::Runbook, String::new(), actor);
    runbook.apply_to(&mut record);
    record.incident_id = Some(id.to_string());
    record.services = vec![incident.service.clone()];
    record.failure_modes = written_tags(&modes, &record.text);
    record.cites = worked.iter().filter_map(|w| w.transcript_id).collect();
    let title = match runbook.replaces {
        Some(old) => format!(
            "Runbook: version {} of MEM-{old} \"{}\" from {id}",
            runbook.version, runbook.title
        ),
        None => format!("Runbook: new \"{}\" from {id}", runbook.title),
    };
    let steps = runbook.worked.join("\n");
    let draft = Draft {
        runbook: Some(runbook),
        ..Draft::of(record)
    };
    queue_on(
        w,
        ProposalKind::Runbook,
        &format!(
            "runbook:{id}:{}",
            crate::digest::sha256_hex(steps.as_bytes())
        ),
        &title,
        &draft,
    )
    .await
}

/// Drafts a supersession after Learn marked record `old` contradicted by the newly written
/// `new` (inside Learn's transaction, for the learned incident `incident`): a reviewer who
/// accepts it marks `old` superseded by `new` through `services::memory::supersede_in`. Once per
/// pair of records. Returns the proposal id.
///
/// # Errors
/// Database errors.
pub async fn draft_supersession_in(
    w: &mut IncidentWrite,
    s: Supersession,
) -> AppResult<Option<i64>> {
    let incident = w.incident().id.clone();
    let title = format!(
        "Supersession: MEM-{} is contradicted by MEM-{} from {incident}",
        s.old, s.new
    );
    let origin = format!("supersession:{}:{}", s.old, s.new);
    let draft = Draft {
        reflection: None,
        runbook: None,
        consolidation: None,
        supersession: Some(s),
        record: None,
    };
    queue_on(w, ProposalKind::Supersession, &origin, &title, &draft).await
}
