//! The learnings plan: what Learn will write for a confirmed post-mortem, shown first as a
//! preview (duplicates of records already in memory linked, contradictions named).

use crate::domain::memory::{MemoryRecord, NewRecord, Rule};
use crate::domain::postmortem::{ActionOutcome, Postmortem};
use crate::domain::{IncidentId, IncidentState, MemoryKind, Transition};
use crate::error::AppResult;
use crate::store::{self, incidents, memory as mstore, postmortems as pstore};
use serde::Serialize;
use sqlx::AnyPool;
use std::collections::BTreeSet;

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
    let mut redactor = store::redaction::peek(pool, id.as_str()).await?;
    // Every text Learn writes holds to one decision per quad: a quad any of them (or the
    // post-mortem, the incident's title and description) calls a version is a version in all.
    if let Ok(doc) = serde_json::to_value(pm) {
        redactor.decide_versions_in(&doc);
    }
    redactor.decide_versions([incident.title.as_str(), incident.description.as_str()]);
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
        if let Some(trigger) = pm.known_trigger() {
            let r = self.base(MemoryKind::Trigger, format!("{id} trigger: {trigger}"));
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
