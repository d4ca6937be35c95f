//! Questions put to organizational memory from outside an incident: what an agent asks through
//! MCP (`src/mcp/`) before it acts. "Which past incidents look like this, and what was tried
//! during them?" ([`similar_incidents`]), "was this action tried here, and did it fail?"
//! ([`check_remediation`]), "which rules apply?" ([`lessons`]) and "which runbook?"
//! ([`runbooks`]).
//!
//! Read only: nothing here writes memory, records a verdict or bumps a record's recall count.
//! The ranking is the incident page's: the same recall pipeline, ordered by past incident
//! ([`incidents_first`]), the same most similar incidents ([`similar_incidents_of`]) and the same
//! dead-end rule ([`dead_end_warning`]), so an agent hears what a responder would see.

use std::collections::BTreeSet;

use sqlx::AnyPool;

use crate::domain::memory::MemoryRecord;
use crate::domain::{ActionKind, IncidentId, MemoryKind, Validation};
use crate::error::AppResult;
use crate::evidence::redact::redact_once;
use crate::evidence::truncate_chars;
use crate::memory::Memory;
use crate::memory::incident::{dead_ends_of, incidents_first};
use crate::memory::recall::{self, IncidentMatch, RecallQuery, Recalled, derive_tags};
use crate::services::investigation::{Warning, dead_end_warning};
use crate::store::{incidents as istore, memory as mstore};

use crate::services::investigation::similar_incidents as similar_incidents_of;

/// Past incidents a [`similar_incidents`] answer describes at most.
pub const PAST_INCIDENTS_MAX: usize = 5;

/// Evidence lines read from a question at most, each cut to [`LINE_CHARS`].
pub const EVIDENCE_LINES_MAX: usize = 20;

/// Characters kept of one evidence line (as the incident recall keeps of an observation).
const LINE_CHARS: usize = 300;

/// Characters of a question read at most (the rest is ignored, as a recall API query is capped).
pub const QUESTION_CHARS: usize = 10_000;

/// Records recalled before they are grouped by past incident (the incident recall's pool).
const RECALL_POOL: usize = 40;

/// Records of one past incident read to describe it.
const RECORDS_PER_INCIDENT: i64 = 200;

/// What an agent describes: what it sees now, in its own words.
#[derive(Debug, Clone, Default)]
pub struct Situation {
    /// What is happening (a sentence or a report).
    pub description: String,
    /// The service in scope, lower-case; `None` when the agent does not know it.
    pub service: Option<String>,
    /// Log lines, alert text or metric readings it saw, one per item.
    pub evidence_lines: Vec<String>,
}

impl Situation {
    /// The recall query of the situation: the description and the first
    /// [`EVIDENCE_LINES_MAX`] lines (each cut to 300 characters), redacted as any text that
    /// leaves the process is ([`redact_once`]), its failure-mode tags derived from that text
    /// ([`derive_tags`]).
    fn query(&self, k: usize, kinds: Vec<MemoryKind>) -> RecallQuery {
        let mut text = truncate_chars(&self.description, QUESTION_CHARS).to_string();
        for line in self.evidence_lines.iter().take(EVIDENCE_LINES_MAX) {
            text.push('\n');
            text.push_str(truncate_chars(line, LINE_CHARS));
        }
        let text = redact_once(&text);
        RecallQuery {
            failure_modes: derive_tags(&text),
            text,
            service: self.service.clone(),
            kinds,
            k,
            ..Default::default()
        }
    }
}

/// One past incident as an answer describes it.
#[derive(Debug, Clone)]
pub struct PastIncident {
    /// `INC-YYYY-NNNN`.
    pub incident_id: String,
    /// Its title, when the incident is in this database (an imported memory may come without).
    pub title: Option<String>,
    /// Its service, when known.
    pub service: Option<String>,
    /// How recall ranked it at the incident level.
    pub ranked: IncidentMatch,
    /// Words, failure-mode tags and services its recalled records share with the question.
    pub shared: Vec<String>,
    /// Its confirmed root cause (and summary) records.
    pub root_cause: Vec<MemoryRecord>,
    /// Actions that resolved it.
    pub worked: Vec<MemoryRecord>,
    /// Actions that did not resolve it or made it worse, with the verdict notes.
    pub did_not_work: Vec<MemoryRecord>,
    /// Recommendations people rejected during it, with the reason.
    pub rejected: Vec<MemoryRecord>,
    /// Its lessons (ALWAYS / BECAUSE / SCOPE / SEVERITY).
    pub lessons: Vec<MemoryRecord>,
}

/// The answer of [`similar_incidents`].
#[derive(Debug, Clone)]
pub struct SimilarIncidents {
    /// Past incidents, most similar first (the incident page's order).
    pub incidents: Vec<PastIncident>,
    /// The most similar incidents whose dead ends the page would warn about.
    pub similar: Vec<String>,
    /// The dead ends the incident page would show beside this situation.
    pub dead_ends: Vec<MemoryRecord>,
    /// Failure-mode tags read from the question.
    pub derived_tags: Vec<String>,
    /// Set when nothing (or little) matched: recall's notice.
    pub notice: Option<String>,
}

/// Past incidents like `situation`, ranked as the incident page ranks them, each with why it was
/// recalled, its root cause, what worked, what did not (with the verdict notes), what was
/// rejected and its lessons; at most [`PAST_INCIDENTS_MAX`].
///
/// # Errors
/// Database errors.
pub async fn similar_incidents(
    memory: &Memory,
    situation: &Situation,
) -> AppResult<SimilarIncidents> {
    let q = situation.query(RECALL_POOL, Vec::new());
    let mut result = recall::recall(memory, &q).await?;
    incidents_first(&mut result.results, &result.incidents);
    let similar = similar_incidents_of(&result.results, &result.incidents);
    let outcomes = mstore::outcomes_of_incidents(memory.pool(), &similar).await?;
    let (tried, rejected): (Vec<MemoryRecord>, Vec<MemoryRecord>) = outcomes
        .into_iter()
        .partition(|r| r.kind != MemoryKind::RejectedRecommendation);
    let dead_ends = dead_ends_of(&tried, &rejected, &result.results, &similar);
    let mut incidents = Vec::new();
    for ranked in result.incidents.iter().take(PAST_INCIDENTS_MAX) {
        incidents.push(describe(memory.pool(), ranked.clone(), &result.results).await?);
    }
    Ok(SimilarIncidents {
        incidents,
        similar,
        dead_ends,
        derived_tags: result.derived_tags,
        notice: result.notice,
    })
}

/// Past incident `ranked` described from its durable records (retracted ones left out) and the
/// `recalled` records that matched the question.
async fn describe(
    pool: &AnyPool,
    ranked: IncidentMatch,
    recalled: &[Recalled],
) -> AppResult<PastIncident> {
    let id = ranked.incident_id.clone();
    let filter = mstore::MemoryFilter {
        incident: Some(id.clone()),
        limit: Some(RECORDS_PER_INCIDENT),
        oldest_first: true,
        ..Default::default()
    };
    let records: Vec<MemoryRecord> = mstore::list(pool, &filter)
        .await?
        .into_iter()
        .filter(|r| r.validation != Validation::Retracted)
        .collect();
    let of = |kinds: &[MemoryKind]| -> Vec<MemoryRecord> {
        records
            .iter()
            .filter(|r| kinds.contains(&r.kind))
            .cloned()
            .collect()
    };
    let mut shared: BTreeSet<String> = BTreeSet::new();
    for r in recalled
        .iter()
        .filter(|r| r.memory.incident_id.as_deref() == Some(id.as_str()))
    {
        shared.extend(r.why.tags.iter().map(|t| format!("tag {t}")));
        shared.extend(r.why.services.iter().map(|s| format!("service {s}")));
        shared.extend(r.why.matched_terms.iter().map(|w| format!("word {w}")));
    }
    let known = match IncidentId::parse(&id) {
        Ok(parsed) => istore::get(pool, &parsed).await.ok(),
        Err(_) => None,
    };
    let service = known
        .as_ref()
        .map(|i| i.service.clone())
        .or_else(|| records.iter().find_map(|r| r.services.first().cloned()));
    Ok(PastIncident {
        incident_id: id,
        title: known.map(|i| i.title),
        service,
        ranked,
        shared: shared.into_iter().collect(),
        root_cause: of(&[MemoryKind::RootCause, MemoryKind::IncidentSummary]),
        worked: of(&[MemoryKind::RemediationSuccess]),
        did_not_work: of(&[MemoryKind::RemediationFailure]),
        rejected: of(&[MemoryKind::RejectedRecommendation]),
        lessons: of(&[MemoryKind::Lesson]),
    })
}

/// An action an agent is about to take.
#[derive(Debug, Clone)]
pub struct Remediation {
    /// The action, from the closed vocabulary.
    pub action: ActionKind,
    /// Its target (a service, a node, a flag), when the agent names one.
    pub target: Option<String>,
    /// The service it is about, lower-case.
    pub service: String,
    /// What the agent sees, in its own words; empty when it says nothing.
    pub symptoms: String,
}

/// The answer of [`check_remediation`].
#[derive(Debug, Clone)]
pub struct RemediationCheck {
    /// The dead-end warning a recommendation of this action would carry on the incident page;
    /// `None`: no recorded failure matches.
    pub warning: Option<Warning>,
    /// The remediation failures behind the warning (what was tried, the verdict, the note,
    /// when), in the warning's order.
    pub failures: Vec<MemoryRecord>,
    /// What worked: the same action where it resolved an incident under another failure mode
    /// (the warning's `worked_in`), then the actions that resolved the most similar incidents.
    pub worked: Vec<MemoryRecord>,
    /// Runbooks for the service and the symptoms, best first.
    pub runbooks: Vec<Recalled>,
    /// The most similar past incidents of the symptoms (empty without symptoms).
    pub similar: Vec<String>,
    /// Failure-mode tags read from the symptoms.
    pub tags: Vec<String>,
}

/// Runbooks a [`check_remediation`] answer names at most.
const RUNBOOKS_MAX: usize = 3;

/// What worked a [`check_remediation`] answer names at most.
const WORKED_MAX: usize = 6;

/// Whether `remediation` was tried before and failed: the dead-end warning the incident page
/// would show on a recommendation of this action for an incident on `service` with these
/// symptoms ([`dead_end_warning`]: same action and same service, a shared specific failure mode,
/// or a failure during one of the most similar past incidents), the records behind it, what
/// worked instead and the runbooks that apply.
///
/// # Errors
/// Database errors.
pub async fn check_remediation(
    memory: &Memory,
    remediation: &Remediation,
) -> AppResult<RemediationCheck> {
    let pool = memory.pool();
    let situation = Situation {
        description: remediation.symptoms.clone(),
        service: Some(remediation.service.clone()),
        evidence_lines: Vec::new(),
    };
    let (similar, tags) = if remediation.symptoms.trim().is_empty() {
        (Vec::new(), Vec::new())
    } else {
        let q = situation.query(RECALL_POOL, Vec::new());
        let mut result = recall::recall(memory, &q).await?;
        incidents_first(&mut result.results, &result.incidents);
        (
            similar_incidents_of(&result.results, &result.incidents),
            result.derived_tags,
        )
    };
    let warning = dead_end_warning(
        pool,
        remediation.action,
        &remediation.service,
        &tags,
        &similar,
    )
    .await?;
    let failures = match &warning {
        Some(w) => mstore::get_many(pool, &w.memory_ids).await?,
        None => Vec::new(),
    };
    let mut worked_in: Vec<String> = warning
        .as_ref()
        .map(|w| w.worked_in.clone())
        .unwrap_or_default();
    worked_in.extend(similar.iter().cloned());
    let mut worked: Vec<MemoryRecord> = Vec::new();
    for r in mstore::outcomes_of_incidents(pool, &worked_in).await? {
        let same_action_elsewhere = r.action_kind == Some(remediation.action)
            && warning.as_ref().is_some_and(|w| {
                r.incident_id
                    .as_ref()
                    .is_some_and(|i| w.worked_in.contains(i))
            });
        let resolved_similar = r.incident_id.as_ref().is_some_and(|i| similar.contains(i));
        if r.kind == MemoryKind::RemediationSuccess
            && (same_action_elsewhere || resolved_similar)
            && !worked.iter().any(|w| w.id == r.id)
        {
            worked.push(r);
        }
    }
    worked.truncate(WORKED_MAX);
    let mut runbook_ask = situation;
    if runbook_ask.description.trim().is_empty() {
        runbook_ask.description = remediation.action.label().to_string();
    }
    let runbooks = runbooks(memory, &runbook_ask, RUNBOOKS_MAX).await?;
    Ok(RemediationCheck {
        warning,
        failures,
        worked,
        runbooks,
        similar,
        tags,
    })
}

/// Lessons (prescriptive rules) recalled for `question` on `service`, best first, at most `k`.
///
/// # Errors
/// Database errors.
pub async fn lessons(
    memory: &Memory,
    question: &str,
    service: Option<&str>,
    k: usize,
) -> AppResult<(Vec<Recalled>, Option<String>)> {
    let ask = Situation {
        description: question.to_string(),
        service: service.map(str::to_string),
        evidence_lines: Vec::new(),
    };
    let result = recall::recall(memory, &ask.query(k, vec![MemoryKind::Lesson])).await?;
    Ok((only(result.results, MemoryKind::Lesson, k), result.notice))
}

/// Runbooks recalled for `situation` (its service and symptoms), best first, at most `k`.
///
/// # Errors
/// Database errors.
pub async fn runbooks(
    memory: &Memory,
    situation: &Situation,
    k: usize,
) -> AppResult<Vec<Recalled>> {
    let result = recall::recall(memory, &situation.query(k, vec![MemoryKind::Runbook])).await?;
    Ok(only(result.results, MemoryKind::Runbook, k))
}

/// The `k` first of `results` of `kind` that are not retracted (recall may add the records
/// that replaced a result, of any kind).
fn only(results: Vec<Recalled>, kind: MemoryKind, k: usize) -> Vec<Recalled> {
    results
        .into_iter()
        .filter(|r| r.memory.kind == kind && r.memory.validation != Validation::Retracted)
        .take(k)
        .collect()
}

/// One incident as an agent reads it: [`incident`].
#[derive(Debug, Clone)]
pub struct IncidentRead {
    /// The incident.
    pub incident: crate::domain::Incident,
    /// Its timeline, oldest first.
    pub timeline: Vec<crate::domain::TimelineEvent>,
    /// Observations extracted from its evidence, most salient first.
    pub observations: Vec<MemoryRecord>,
    /// How many pieces of evidence it has.
    pub evidence_count: usize,
    /// Its latest investigation (hypotheses, actions with their verdicts), if one ran.
    pub investigation: Option<crate::services::investigation::InvestigationView>,
    /// Its post-mortem once a reviewer confirmed it (`None` before, and while a draft).
    pub postmortem: Option<crate::store::postmortems::StoredPostmortem>,
}

/// Incident `id` with its timeline, observations, latest investigation and confirmed
/// post-mortem.
///
/// # Errors
/// [`crate::AppError::NotFound`] for an unknown incident; database errors.
pub async fn incident(pool: &AnyPool, id: &IncidentId) -> AppResult<IncidentRead> {
    use crate::services::incidents as isvc;
    let (incident, timeline) = isvc::with_timeline(pool, id).await?;
    let (evidence, mut observations) = isvc::evidence(pool, id).await?;
    observations.sort_by_key(|o| {
        std::cmp::Reverse(o.data.get("salience").and_then(|s| s.as_i64()).unwrap_or(0))
    });
    let investigation = isvc::latest_investigation(pool, id).await?;
    let postmortem = match isvc::postmortem(pool, id).await {
        Ok(p) if p.confirmed_by.is_some() => Some(p),
        Ok(_) | Err(crate::AppError::NotFound(_)) => None,
        Err(e) => return Err(e),
    };
    Ok(IncidentRead {
        incident,
        timeline,
        observations,
        evidence_count: evidence.len(),
        investigation,
        postmortem,
    })
}
