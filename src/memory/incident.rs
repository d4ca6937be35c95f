//! The one door into memory for an incident: [`Memory::recall_for_incident`] reads the
//! incident's observations and failure-mode tags, recalls for them, orders the result by past
//! incident, names the most similar past incidents and reads what was tried during them. The
//! investigation, the incident page and a proposed action all go through it, so they see the
//! same past.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use sqlx::AnyPool;

use super::Memory;
use super::recall::{self, IncidentMatch, RecallQuery, RecallResult, Recalled};
use crate::domain::memory::{MemoryRecord, is_summary};
use crate::domain::recalled::DEAD_ENDS_MAX;
use crate::domain::{Incident, IncidentId, MemoryKind};
use crate::error::AppResult;
use crate::evidence::redact::Redactor;
use crate::store::{memory as mstore, redaction};

/// Failure-mode tags too generic to tie two incidents together on their own (almost every
/// incident times out somewhere); they never make a dead-end match by themselves.
pub const GENERIC_TAGS: &[&str] = &[
    "timeout",
    "upstream_5xx",
    "error_rate_high",
    "health_check_failed",
    "deploy_change",
    "config_change",
    "process_restart",
    "steady_load",
    "traffic_surge",
];

/// How many of the most similar past incidents (distinct incidents, in recall order) count as
/// "similar" for dead-end warnings and lend the actions tried during them to the analyst.
pub const SIMILAR_INCIDENTS: usize = 2;

/// A runner-up whose incident-level score is at least this share of the top one's is too close
/// to call: recall cannot tell the two apart, so both lend their dead ends (warn, never hide).
pub const CLOSE_CALL: f64 = 0.9;

/// What a page's recall says while the matches by meaning are still being computed.
pub const VECTORS_PENDING: &str = "Matches by meaning are still being computed: these are matches by words and keys; reload in a moment for the full recall";

/// Records recalled for an incident before they are grouped by past incident and cut to what
/// is shown.
const INCIDENT_POOL: usize = 40;

/// Records of one past incident shown at most.
const PER_INCIDENT: usize = 4;

/// What memory holds for one incident: everything an investigation, the incident page and a
/// proposed action read about the past.
#[derive(Debug, Clone)]
pub struct IncidentRecall {
    /// The incident.
    pub incident: Incident,
    /// The incident's observations, most salient first.
    pub observations: Vec<MemoryRecord>,
    /// Its failure-mode tags (see [`incident_tags`]).
    pub tags: Vec<String>,
    /// The recall: records ordered by past incident ([`incidents_first`]), at most
    /// `PER_INCIDENT` of one incident, cut to the `k` asked for.
    pub recall: RecallResult,
    /// The most similar past incidents ([`similar_incidents`]), most similar first.
    pub similar: Vec<String>,
    /// Remediations (`remediation_success`, `remediation_failure`; confirmed or superseded)
    /// recorded during the `similar` incidents: most similar incident first, each in the order
    /// recorded.
    pub tried: Vec<MemoryRecord>,
    /// Rejected recommendations (confirmed or superseded) of the `similar` incidents, in the
    /// same order.
    pub rejected: Vec<MemoryRecord>,
    /// The known dead ends to show beside the incident, at most [`DEAD_ENDS_MAX`]: the
    /// remediation failures and rejected recommendations of the `similar` incidents (the
    /// incidents recall ranks first and their close siblings) in that order, then recalled dead
    /// ends that are no weak match and share the service or a specific failure mode.
    pub dead_ends: Vec<MemoryRecord>,
    /// The incident's redaction map (a copy): the recall query was redacted with it, and a
    /// prompt redacts with it, so an address is the placeholder its stored records carry.
    pub redactor: Redactor,
    /// Whether recall went ahead before memory's derived data caught up with the latest writes
    /// ([`super::Memory::recall_for_incident`]; the caller says [`super::STILL_INDEXING`]).
    pub still_indexing: bool,
}

/// Everything memory holds for `incident` ([`IncidentRecall`]) with its `observations` (as
/// read: [`observations_of`]) and its redaction map, with the `k` best recalled records: see
/// [`Memory::recall_for_incident`].
///
/// # Errors
/// Database errors.
pub(super) async fn recall_past(
    memory: &Memory,
    incident: Incident,
    observations: Vec<MemoryRecord>,
    redactor: Redactor,
    k: usize,
) -> AppResult<IncidentRecall> {
    let (observations, tags) = tagged(&incident, observations);
    recall_read(memory, incident, observations, tags, redactor, k, false).await
}

/// [`recall_past`] with the incident's observations (most salient first) and tags
/// already read.
///
/// # Errors
/// Database errors.
pub(super) async fn recall_past_with(
    memory: &Memory,
    incident: &Incident,
    observations: Vec<MemoryRecord>,
    tags: Vec<String>,
    k: usize,
) -> AppResult<IncidentRecall> {
    let redactor = redaction::peek(memory.pool(), incident.id.as_str()).await?;
    recall_read(
        memory,
        incident.clone(),
        observations,
        tags,
        redactor,
        k,
        false,
    )
    .await
}

/// The recall of `incident` with its `observations` (most salient first), its `tags` and its
/// redaction map, waiting for the query's vectors or (`cached_vectors_only`, a page view) using
/// only those already computed ([`RecallQuery::cached_vectors_only`]).
async fn recall_read(
    memory: &Memory,
    incident: Incident,
    observations: Vec<MemoryRecord>,
    tags: Vec<String>,
    redactor: Redactor,
    k: usize,
    cached_vectors_only: bool,
) -> AppResult<IncidentRecall> {
    let recall = ranked_recall(
        memory,
        &incident,
        &observations,
        &tags,
        &redactor,
        k,
        cached_vectors_only,
    )
    .await?;
    let similar = similar_incidents(&recall.results, &recall.incidents);
    let outcomes = mstore::outcomes_of_incidents(memory.pool(), &similar).await?;
    let (mut tried, mut rejected): (Vec<MemoryRecord>, Vec<MemoryRecord>) = outcomes
        .into_iter()
        .partition(|r| r.kind != MemoryKind::RejectedRecommendation);
    // Most similar incident first; within one incident, in the order they were recorded.
    let by_similarity = |r: &MemoryRecord| {
        similar
            .iter()
            .position(|s| r.incident_id.as_ref() == Some(s))
            .unwrap_or(usize::MAX)
    };
    tried.sort_by_key(by_similarity);
    rejected.sort_by_key(by_similarity);
    let dead_ends = dead_ends_of(&tried, &rejected, &recall.results, &similar);
    Ok(IncidentRecall {
        incident,
        observations,
        tags,
        recall,
        similar,
        tried,
        rejected,
        dead_ends,
        redactor,
        still_indexing: false,
    })
}

/// The key a page recall of `incident` is kept under: what it was computed from (the memory's
/// recall generation, the incident's version, its observations) and how many records it holds.
pub(super) fn page_recall_key(
    epoch: &str,
    generation: i64,
    incident: &Incident,
    observations: &[MemoryRecord],
    k: usize,
) -> String {
    format!(
        "{epoch}:{generation}:{}:{}:{}:{k}",
        incident.version,
        observations.len(),
        observations.iter().map(|o| o.id).max().unwrap_or(0)
    )
}

/// [`recall_past_with`] for an incident page: recall runs when the memory, the incident or its
/// evidence changed since the page last showed it, and is read from the memory's cache
/// otherwise (a page view costs one generation read, not a recall).
///
/// # Errors
/// Database errors.
pub(super) async fn recall_past_for_page(
    memory: &Memory,
    incident: &Incident,
    observations: &[MemoryRecord],
    tags: &[String],
    k: usize,
) -> AppResult<Arc<IncidentRecall>> {
    let index = memory.index().await?;
    let (epoch, generation) = index.generation();
    let key = page_recall_key(epoch, *generation, incident, observations, k);
    if let Some(hit) = memory.page_recall(incident.id.as_str(), &key) {
        return Ok(hit);
    }
    // A page never waits on the embedder: without the query's vectors yet, it shows the word
    // and key matches with a notice, and is not kept, so the next view recalls with them.
    let redactor = redaction::peek(memory.pool(), incident.id.as_str()).await?;
    let mut result = recall_read(
        memory,
        incident.clone(),
        observations.to_vec(),
        tags.to_vec(),
        redactor,
        k,
        true,
    )
    .await?;
    if result.recall.vectors_pending {
        result.recall.notice = Some(match result.recall.notice.take() {
            Some(n) => format!("{n}. {VECTORS_PENDING}"),
            None => VECTORS_PENDING.to_string(),
        });
        return Ok(Arc::new(result));
    }
    let result = Arc::new(result);
    memory.keep_page_recall(incident.id.as_str(), key, Arc::clone(&result));
    Ok(result)
}

/// The incident's observations (most salient first) and its failure-mode tags: the
/// observations' tags plus tags derived from its title, description and evidence lines.
///
/// # Errors
/// Database errors.
pub async fn incident_tags(
    pool: &AnyPool,
    incident: &Incident,
) -> AppResult<(Vec<MemoryRecord>, Vec<String>)> {
    let observations = mstore::list(pool, &observations_of(&incident.id)).await?;
    Ok(tagged(incident, observations))
}

/// The filter of incident `id`'s observations (at most 1,000).
pub(super) fn observations_of(id: &IncidentId) -> mstore::MemoryFilter {
    mstore::MemoryFilter {
        incident: Some(id.to_string()),
        kind: Some(MemoryKind::Observation),
        limit: Some(1000),
        ..Default::default()
    }
}

/// `observations` most salient first, and the failure-mode tags of `incident` with them.
fn tagged(
    incident: &Incident,
    mut observations: Vec<MemoryRecord>,
) -> (Vec<MemoryRecord>, Vec<String>) {
    observations.sort_by_key(|o| {
        std::cmp::Reverse(o.data.get("salience").and_then(|s| s.as_i64()).unwrap_or(0))
    });
    let tags = tags_of_incident(incident, &observations);
    (observations, tags)
}

/// Failure-mode tags of `incident` with its `observations`.
fn tags_of_incident(incident: &Incident, observations: &[MemoryRecord]) -> Vec<String> {
    let mut tags: BTreeSet<String> = observations
        .iter()
        .flat_map(|o| o.failure_modes.iter().cloned())
        .collect();
    // A line break between them: a negation in the title must not reach into the description.
    tags.extend(recall::derive_tags(&format!(
        "{}\n{}",
        incident.title, incident.description
    )));
    // The synonym table and the load shape read the evidence lines too, not only the catalogue.
    for o in observations {
        if let Some(line) = o.data.get("example").and_then(|e| e.as_str()) {
            tags.extend(recall::derive_tags(line));
        }
    }
    tags.into_iter().collect()
}

/// The text an incident's recall asks with: its title, description and up to ten evidence
/// lines (the line itself, not the statement around it: "ERROR template seen 12 times …"), each
/// cut at 300 characters, redacted with the incident's map `redactor`: an address is the
/// placeholder its records carry (the texts are stored redacted with it; an imported record may
/// not be).
fn query_text(incident: &Incident, observations: &[MemoryRecord], redactor: &Redactor) -> String {
    let mut text = format!("{}\n{}", incident.title, incident.description);
    for o in observations.iter().filter(|o| !is_summary(o)).take(10) {
        let line = o
            .data
            .get("example")
            .and_then(|e| e.as_str())
            .unwrap_or(&o.text);
        text.push('\n');
        text.push_str(crate::evidence::truncate_chars(line, 300));
    }
    redactor.clone().redact(&text)
}

/// The query of an incident's recall ([`query_text`], its service and failure-mode `tags`, its
/// own records excluded) for the `k` best records, read from a wider pool.
fn incident_query(
    incident: &Incident,
    observations: &[MemoryRecord],
    tags: &[String],
    redactor: &Redactor,
    k: usize,
    cached_vectors_only: bool,
) -> RecallQuery {
    RecallQuery {
        text: query_text(incident, observations, redactor),
        service: Some(incident.service.clone()),
        failure_modes: tags.to_vec(),
        exclude_incident: Some(incident.id.to_string()),
        // A wider pool than shown, so each past incident's similarity sums its best records.
        k: k.max(INCIDENT_POOL),
        cached_vectors_only,
        ..Default::default()
    }
}

/// What the page recall of `incident` with its `observations` (most salient first) still waits
/// for: `None` when its query's vectors are computed (or there is no embedder). A read of the
/// redaction map and of the memory's caches, no recall and no model call; when they are not
/// computed, their computation starts in the background. A caller that may wait for the full
/// recall (the chat's first read) asks this before recalling, and then asks the
/// [`recall::PendingVectors`] alone.
///
/// # Errors
/// Database errors.
pub(super) async fn page_recall_pending(
    memory: &Memory,
    incident: &Incident,
    observations: &[MemoryRecord],
) -> AppResult<Option<recall::PendingVectors>> {
    if memory.embedder_ready().is_none() {
        return Ok(None);
    }
    let redactor = redaction::peek(memory.pool(), incident.id.as_str()).await?;
    let q = incident_query(incident, observations, &[], &redactor, 0, true);
    Ok(recall::query_vectors_pending(memory, &q))
}

/// The recall of an incident: descriptive text of the incident and its evidence lines (redacted
/// with the incident's map `redactor`, so an address is the placeholder its records carry), its
/// service and failure modes, excluding its own records; ordered by past incident
/// ([`incidents_first`]; a superseded or contradicted record right below the record that
/// replaced it), at most `PER_INCIDENT` records of one past incident, cut to `k`. With
/// `cached_vectors_only`, see [`RecallQuery::cached_vectors_only`].
///
/// # Errors
/// Database errors.
pub async fn ranked_recall(
    memory: &Memory,
    incident: &Incident,
    observations: &[MemoryRecord],
    tags: &[String],
    redactor: &Redactor,
    k: usize,
    cached_vectors_only: bool,
) -> AppResult<RecallResult> {
    let q = incident_query(
        incident,
        observations,
        tags,
        redactor,
        k,
        cached_vectors_only,
    );
    let mut result = recall::recall(memory, &q).await?;
    incidents_first(&mut result.results, &result.incidents);
    // A record another incident superseded or contradicted stays below what replaced it, and
    // what replaced it is shown (read with the results when recall did not find it).
    recall::below_replacements(&mut result.results);
    let replacements: Vec<MemoryRecord> = recall::missing_replacements(&result.results)
        .iter()
        .filter_map(|id| result.replacements.iter().find(|r| r.id == *id).cloned())
        .collect();
    recall::add_replacements(
        &mut result.results,
        replacements,
        Some(incident.id.as_str()),
    );
    // At most PER_INCIDENT records of one past incident are shown, so rules and dead ends of
    // the next incidents still fit.
    let mut shown: HashMap<String, usize> = HashMap::new();
    result.results.retain(|r| match &r.memory.incident_id {
        Some(i) => {
            let n = shown.entry(i.clone()).or_default();
            *n += 1;
            *n <= PER_INCIDENT
        }
        None => true,
    });
    result.results.truncate(k);
    Ok(result)
}

/// Orders recall results by past incident, most similar first: the incident-level ranking of
/// recall ([`IncidentMatch`]: documents, passages and parts fused by rank). Records of one
/// incident keep their order; records of no incident (notes, runbooks) come after the
/// [`SIMILAR_INCIDENTS`] most similar incidents, and records of incidents the ranking does not
/// hold last. Stable, and only reorders.
///
/// (A boost per shared failure-mode tag does not belong here: on `recall-dev-hard.json` it
/// moves hit@1 from 0.944 down to 0.889.)
pub fn incidents_first(results: &mut [Recalled], incidents: &[IncidentMatch]) {
    let position: HashMap<&str, f64> = incidents
        .iter()
        .enumerate()
        .map(|(p, m)| (m.incident_id.as_str(), p as f64))
        .collect();
    let key = |r: &Recalled| match r.memory.incident_id.as_deref() {
        Some(i) => position.get(i).copied().unwrap_or(f64::MAX),
        None => SIMILAR_INCIDENTS as f64 - 0.5,
    };
    results.sort_by(|a, b| key(a).total_cmp(&key(b)));
}

/// Whether recall marked `r` a weak match (found by meaning alone, under chance).
fn is_weak(r: &Recalled) -> bool {
    r.marks.contains(&"weak match")
}

/// Whether `r` shares the service (or a neighbour) or a specific failure mode (not in
/// [`GENERIC_TAGS`]) with the query.
fn shares_scope(r: &Recalled) -> bool {
    !r.why.services.is_empty()
        || r.why
            .tags
            .iter()
            .any(|t| !GENERIC_TAGS.contains(&t.as_str()))
}

/// The first [`SIMILAR_INCIDENTS`] distinct incident ids among `recalled` (weak matches left
/// out), in recall order: the most similar incident always, the next ones only with a record
/// that shares the service (or a neighbour) or a specific failure mode (not in
/// [`GENERIC_TAGS`]) with this incident, or when `incidents` (recall's incident-level ranking)
/// scores it within [`CLOSE_CALL`] of the first — a distant runner-up found by words alone is
/// not similar enough to lend its dead ends. Every incident the sibling stage compared
/// ([`IncidentMatch::sibling`]) is added after them.
pub fn similar_incidents(recalled: &[Recalled], incidents: &[IncidentMatch]) -> Vec<String> {
    let close_call = |inc: &str| match incidents {
        [first, second, ..] => {
            second.incident_id == inc
                && first.score > 0.0
                && second.score >= CLOSE_CALL * first.score
        }
        _ => false,
    };
    let mut out: Vec<String> = Vec::new();
    // A weak match (by meaning alone, under chance) is shown as weak but lends nothing.
    for r in recalled.iter().filter(|r| !is_weak(r)) {
        let Some(inc) = r.memory.incident_id.as_ref() else {
            continue;
        };
        if out.len() >= SIMILAR_INCIDENTS {
            break;
        }
        if !out.contains(inc) && (out.is_empty() || shares_scope(r) || close_call(inc)) {
            out.push(inc.clone());
        }
    }
    // Siblings recall could not tell apart on its lists (it ranked them on conditions read from
    // text, which may be misread): each lends its dead ends, whatever its final rank.
    for m in incidents.iter().filter(|m| m.sibling) {
        if !out.contains(&m.incident_id) {
            out.push(m.incident_id.clone());
        }
    }
    out
}

/// The dead ends shown beside an incident (see [`IncidentRecall::dead_ends`]): those of the
/// `similar` incidents from `tried` (failures only) and `rejected`, most similar first, then
/// those `recalled` that are no weak match and share the service or a specific failure mode;
/// each once, at most [`DEAD_ENDS_MAX`].
pub fn dead_ends_of(
    tried: &[MemoryRecord],
    rejected: &[MemoryRecord],
    recalled: &[Recalled],
    similar: &[String],
) -> Vec<MemoryRecord> {
    let rank = |r: &MemoryRecord| {
        similar
            .iter()
            .position(|s| r.incident_id.as_ref() == Some(s))
            .unwrap_or(usize::MAX)
    };
    let mut of_similar: Vec<&MemoryRecord> = tried
        .iter()
        .filter(|r| r.kind == MemoryKind::RemediationFailure)
        .chain(rejected)
        .collect();
    // Stable: within one incident, failures before rejections, each in the order recorded.
    of_similar.sort_by_key(|r| rank(r));
    let recalled_dead_ends = recalled
        .iter()
        .filter(|r| {
            matches!(
                r.memory.kind,
                MemoryKind::RemediationFailure | MemoryKind::RejectedRecommendation
            ) && !is_weak(r)
                && shares_scope(r)
        })
        .map(|r| &r.memory);
    let mut out: Vec<MemoryRecord> = Vec::new();
    for r in of_similar.into_iter().chain(recalled_dead_ends) {
        if out.len() >= DEAD_ENDS_MAX {
            break;
        }
        if !out.iter().any(|o| o.id == r.id) {
            out.push(r.clone());
        }
    }
    out
}
