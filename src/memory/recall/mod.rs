//! Recall (DESIGN.md §4): the one function the UI, the API and the analyst use to find what the
//! organization learned before.
//!
//! The pipeline, one stage per file:
//! - [`query`]: negated findings left out of the query ([`super::negation`]), failure-mode tags
//!   (catalogue signatures, the load shape), content words and action kinds;
//! - [`lists`]: candidate lists at two levels. The incident level: each learned incident's
//!   retrieval document ([`super::documents`]) by BM25 and by vector, passage by passage, plus its
//!   best parts (records) by vector, by BM25 and by structured keys. The record level ("parts"):
//!   FTS5 BM25 over the expanded text (descriptive), over rules and runbooks (prescriptive), exact
//!   structured keys — failure mode, service and its graph neighbours, action kind (scope) — and
//!   nearest by vector (semantic);
//! - [`fusion`]: the lists fused by rank (and, at the incident level, by score), records then
//!   weighted by kind, recency (per-kind half-life), importance and validation;
//! - [`floor`]: for a question, a confident first of the word search over incident documents
//!   kept first unless the meaning lists are surer by a margin;
//! - [`siblings`]: the first few past incidents re-ranked on the operational conditions
//!   ([`conditions`]) that tell look-alike incidents apart; for a question ([`question`]), the
//!   conditions of the situation it asks about, and the dead ends of the action it names;
//! - [`explain`]: why each result was recalled (lists, matched words, shared tags, cosine), its
//!   marks (stale, superseded, contradicted, weak) and the notices of an empty or thin result.
//!
//! Fusion is reciprocal rank fusion (Cormack, Clarke & Büttcher, "Reciprocal Rank Fusion
//! outperforms Condorcet and individual rank learning methods", SIGIR 2009). Nothing is cut by a
//! similarity threshold: when no list has a candidate the result says so. Mechanisms can be
//! turned off one by one ([`RecallTuning`]).

pub mod conditions;
mod explain;
pub mod floor;
mod fusion;
mod lists;
mod query;
pub mod question;
pub mod siblings;
#[cfg(test)]
mod tests;

use std::collections::HashMap;

use serde::Serialize;

pub use super::negation::strip_negated;
use super::{Memory, RecallTuning};
use crate::domain::memory::MemoryRecord;
use crate::domain::{ActionKind, MemoryKind, Validation};
use crate::error::AppResult;
use crate::store::memory::Candidate;
use crate::store::{self, memory as mstore};
use explain::{Explain, empty_notice, mark_contradictions, thin_notice};
pub(in crate::memory) use explain::{add_replacements, below_replacements, missing_replacements};
use fusion::{SCORE_SHARE, fuse_incidents, fuse_records, rank};
pub use lists::{FtsSearch, TermStats, fts_search};
use lists::{
    IncidentInputs, KEY_WINDOW, PER_LIST, bounded_search, incident_lists, text_lists, vector_lists,
};
pub(in crate::memory) use lists::{TermStatsCache, term_stats_cache};
pub(in crate::memory) use query::tags_of;
use query::{Expanded, expand, query_stems, scope_keys};
pub use query::{content_words, derive_tags, is_displayable_word, load_shape};

/// What to recall for.
#[derive(Debug, Clone, Default)]
pub struct RecallQuery {
    /// Free text: an incident's title, description and observations, or a question.
    pub text: String,
    /// The service in scope.
    pub service: Option<String>,
    /// Failure-mode tags already known (e.g. from evidence); more are derived from `text`.
    pub failure_modes: Vec<String>,
    /// Action kinds in scope (e.g. a recommendation being checked).
    pub action_kinds: Vec<ActionKind>,
    /// Leave out this incident's own records.
    pub exclude_incident: Option<String>,
    /// Only these kinds (empty = every durable kind).
    pub kinds: Vec<MemoryKind>,
    /// How many results (default 10, at most 100).
    pub k: usize,
    /// Use only query vectors already computed, and compute missing ones in the background
    /// ([`Memory::embed_later`]): for a page view, which must not wait on the embedder. The
    /// result then says so ([`RecallResult::vectors_pending`]).
    pub cached_vectors_only: bool,
}

/// Why a record was recalled.
#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Why {
    /// Query words found in the record (after stemming-insensitive comparison).
    pub matched_terms: Vec<String>,
    /// Failure-mode tags shared with the query.
    pub tags: Vec<String>,
    /// Service shared with the query (directly or through a dependency).
    pub services: Vec<String>,
    /// Action kind shared with the query.
    pub action_kinds: Vec<String>,
    /// Which candidate lists found it: `text`, `rules` (BM25), `scope` (structured keys),
    /// `semantic` (nearest by vector), `incident` (its past incident's rank), `service_note` (a
    /// note about the query's service that matched on its own), `replaces` (not matched itself:
    /// it superseded or contradicted a recalled record, and is shown with it).
    #[schema(value_type = Vec<String>)]
    pub lists: Vec<&'static str>,
    /// Cosine similarity of its vector with the query's, when the vector list found it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cosine: Option<f32>,
}

/// One recalled record.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Recalled {
    /// The record (all fields of `GET /api/v1/memories`).
    #[serde(flatten)]
    pub memory: MemoryRecord,
    /// Fused, weighted score (higher is better; only comparable within one result).
    pub score: f64,
    /// Why it was recalled.
    pub why: Why,
    /// `stale` (older than its half-life), `superseded`, `contradicted` (the same action is
    /// recorded both as failing and as working, or a later record denies it), `consolidated`
    /// (merged into a rule that ranks above it).
    #[schema(value_type = Vec<String>)]
    pub marks: Vec<&'static str>,
}

/// The answer of [`recall`].
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct RecallResult {
    /// Best first; a superseded or contradicted record right below the record that replaced it
    /// when both are returned.
    pub results: Vec<Recalled>,
    /// Past incidents ranked for the query at the incident level, best first (see
    /// [`IncidentMatch`]).
    pub incidents: Vec<IncidentMatch>,
    /// Tags derived from the query (shown to people; used as structured keys).
    pub derived_tags: Vec<String>,
    /// Set when nothing matched: "No relevant organizational memory found".
    pub notice: Option<String>,
    /// The matches by meaning are missing because the query's vectors were still being
    /// computed ([`RecallQuery::cached_vectors_only`]); a later recall has them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub vectors_pending: bool,
    /// The records that replaced results ([`MemoryRecord::replaced_by`]) and are not among
    /// them, read with the results: an incident's recall shows them beside what they replaced
    /// (not part of the API's answer).
    #[serde(skip)]
    pub replacements: Vec<MemoryRecord>,
    /// The query's chance level (the cosine an unrelated text reaches), when vectors ran: a
    /// result's meaning counts only at or above it. Read by the incident page's weak-match rule
    /// (not part of the API's answer).
    #[serde(skip)]
    pub chance: Option<f32>,
}

#[cfg(test)]
impl IncidentMatch {
    /// A past incident ranked by the document vector list alone with `score`, for unit tests.
    pub(crate) fn for_test(id: &str, score: f64) -> Self {
        Self {
            incident_id: id.into(),
            score,
            lists: vec!["doc_vector"],
            ranks: vec![1],
            cosine: None,
            conditions: Vec::new(),
            sibling: false,
        }
    }
}

/// Message when recall finds nothing.
pub const NOTHING_FOUND: &str = "No relevant organizational memory found";

/// A past incident as recall ranks it for a new one ("the incident level"): fused by rank over
/// its document's BM25 and vector lists and its best parts' (records') lists.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct IncidentMatch {
    /// The past incident.
    pub incident_id: String,
    /// Fused score (higher is better; comparable within one result only).
    pub score: f64,
    /// Lists that ranked it: `passages`, `doc_bm25`, `doc_vector`, `part_vector`, `part_bm25`,
    /// `keys`.
    #[schema(value_type = Vec<String>)]
    pub lists: Vec<&'static str>,
    /// Its 1-based rank in each of `lists`, in the same order.
    pub ranks: Vec<usize>,
    /// Cosine of its document with the query, when embedded.
    pub cosine: Option<f32>,
    /// Operational conditions it shares with the query or contradicts (`load agrees`,
    /// `scope differs`, …), when the sibling stage compared them ([`siblings`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<String>,
    /// Whether it was too close to the first to call, so the sibling stage compared it on
    /// conditions ([`siblings`]): its dead ends are warned whatever its final rank.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sibling: bool,
}

/// Candidates each incident-level list contributes.
const INCIDENT_LIST: usize = 30;

/// The query vectors a recall waits for, being computed in the background: asking
/// [`PendingVectors::ready`] again is a read of the memory's caches, no database read and no
/// model call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingVectors {
    /// The query's text as recall reads it ([`expand`]).
    text: String,
}

impl PendingVectors {
    /// Whether the vectors are computed now (when a job was dropped, it is started again).
    pub fn ready(&self, memory: &Memory) -> bool {
        lists::vectors_ready(memory, &self.text)
    }
}

/// What recall of `q` still waits for (`None`: nothing, or no embedder): the text as recall
/// reads it ([`expand`]), then a read of the memory's caches, no model call. When the vectors are
/// not computed, their computation starts in the background.
pub(crate) fn query_vectors_pending(memory: &Memory, q: &RecallQuery) -> Option<PendingVectors> {
    let text = expand(q, memory.tuning()).text;
    (!lists::vectors_ready(memory, &text)).then_some(PendingVectors { text })
}

/// Runs the recall pipeline.
///
/// # Errors
/// Database errors.
///
/// Long on purpose: the pipeline's stages in their order (query, lists, fusion, siblings,
/// explanation), each one call, read top to bottom.
pub async fn recall(memory: &Memory, q: &RecallQuery) -> AppResult<RecallResult> {
    let pool = memory.pool();
    let tuning = memory.tuning();
    let k = if q.k == 0 { 10 } else { q.k.min(100) };
    let Expanded {
        text,
        tags,
        words,
        terms,
        doc_terms,
        actions,
    } = expand(q, tuning);
    let kinds = &q.kinds;
    let keys = scope_keys(q, &tags, &actions);
    let index = memory.index().await?;
    let exclude = q.exclude_incident.as_deref();
    let (scope_list, neighbours) = index.key_candidates(&keys, exclude, KEY_WINDOW, PER_LIST);
    // The documents' search needs no term budget; it runs beside the records' lists below.
    let doc_expr = mstore::fts_or_terms(&doc_terms);
    let documents =
        crate::store::incident_documents::search(pool, &doc_expr, exclude, INCIDENT_LIST as i64);
    let search = bounded_search(memory, index.epoch(), &terms).await?;
    let (lists, vectors, doc_bm25) = tokio::join!(
        text_lists(pool, &index, &search, kinds, exclude),
        vector_lists(memory, &index, &text, exclude, !q.cached_vectors_only),
        documents,
    );
    let (text_list, rules_list) = lists?;
    let doc_bm25 = doc_bm25?;
    // A question asked of memory, not an incident's recall (see [`question`]).
    let asked = (q.exclude_incident.is_none() && question::looks_like_question(&q.text))
        .then(|| question::read(&q.text));
    let lexical: Vec<(String, f64)> = doc_bm25.iter().take(2).cloned().collect();
    let lists::VectorLists {
        nearest,
        doc_vector,
        by_passages,
        pending: vectors_pending,
    } = vectors;
    let (semantic, chance) = (nearest.hits, nearest.floor);
    let semantic_list: Vec<(Candidate, f32)> = semantic
        .iter()
        .filter_map(|(id, c)| index.get(*id).map(|e| (e.candidate.clone(), *c)))
        .collect();

    // The incident level: which past incidents this query is about.
    let incident_lists = incident_lists(
        tuning,
        &index,
        IncidentInputs {
            doc_bm25,
            doc_vector,
            by_passages,
            semantic: &semantic,
            text_list: &text_list,
            scope_list: &scope_list,
        },
    );
    let score_share = if tuning.on("score_fusion") {
        SCORE_SHARE
    } else {
        0.0
    };
    let mut incidents = fuse_incidents(incident_lists, score_share);
    if asked.is_some() && tuning.on("lexical_floor") {
        floor::hold(
            &mut incidents,
            &lexical,
            tuning.value("floor_gap", floor::CONFIDENT_GAP),
            tuning.value("floor_margin", floor::MEANING_MARGIN),
        );
    }
    let mut factors = HashMap::new();
    if tuning.on("siblings") {
        // Only when recall cannot tell its first candidates apart, and the query reports a
        // condition, are their reports read and compared.
        let band = tuning.value("sibling_band", siblings::SIBLING_BAND);
        let close = siblings::candidates(&incidents, band);
        let query_conditions = match &asked {
            _ if close.is_empty() => conditions::Conditions::default(),
            Some(a) if tuning.on("question_conditions") => a.conditions.clone(),
            _ => conditions::conditions_of(&q.text),
        };
        if !query_conditions.is_empty() {
            let reports = crate::store::incident_documents::reports(pool, &close).await?;
            let weight = tuning.value("sibling_weight", siblings::SIBLING_WEIGHT);
            factors = siblings::rerank(&mut incidents, &query_conditions, &reports, weight, band);
        }
        // A question naming an action is after the lesson learned where that action failed.
        if let Some(a) = asked.as_ref().filter(|a| !a.actions.is_empty())
            && tuning.on("question_actions")
        {
            let dead_ends: std::collections::HashSet<&str> = a
                .actions
                .iter()
                .flat_map(|k| {
                    index.incidents_with("action_kind", k.as_str(), MemoryKind::RemediationFailure)
                })
                .collect();
            let weight = tuning.value("action_weight", question::ACTION_WEIGHT);
            // The warning is the answer wherever the symptom matches: the first candidates
            // within the action band, not only the siblings recall could not tell apart.
            let reach = if tuning.on("action_reach") {
                let band = tuning.value("action_band", question::ACTION_BAND);
                siblings::leading(&incidents, band)
            } else {
                close
            };
            siblings::favour(&mut incidents, &reach, &dead_ends, weight, &mut factors);
        }
    }

    // Notes about the service on call that match the query on their own (shown among the
    // first results below).
    let mut notes = match &q.service {
        Some(service) if tuning.on("service_notes") => {
            let about = index.notes_about(service).collect();
            fusion::service_notes(&about, [&text_list, &rules_list], &semantic_list, chance)
        }
        _ => Vec::new(),
    };
    // And, on any service, a free-standing record that is much the strongest match by meaning.
    let strongest = if tuning.on("service_notes") {
        fusion::strongest_note(&index, &semantic_list, chance)
    } else {
        None
    };
    notes.retain(|n| Some(*n) != strongest);

    // The record level ("parts").
    let mut fused = fuse_records(
        tuning,
        asked.is_some(),
        &index,
        &incidents,
        [text_list, rules_list, scope_list],
        semantic_list,
    );
    // A record weighs as its incident's conditions do (a lesson whose incident ran at flat
    // traffic answers a question about flat traffic).
    if tuning.on("sibling_records") {
        for f in fused.values_mut() {
            let inc = index
                .get(f.candidate.id)
                .and_then(|e| e.incident_id.as_deref());
            if let Some(factor) = inc.and_then(|i| factors.get(i)) {
                f.rrf *= factor;
            }
        }
    }
    // A question is answered by rules: each lesson stands for its incident's best match.
    if asked.is_some() && tuning.on("question_rules") {
        question::lessons_answer(&index, &mut fused);
    }
    // Rank on the candidates' own fields; load only the k records that are returned.
    let now = store::now();
    let nothing = fused.is_empty();
    let mut ranked = rank(fused, kinds, now);
    fusion::show_service_notes(&mut ranked, &notes);
    if let Some(id) = strongest {
        fusion::show_strongest_note(&mut ranked, id);
    }
    ranked.truncate(k);
    let ids: Vec<i64> = ranked.iter().map(|(_, f)| f.candidate.id).collect();
    // No candidate, no read (and the result says why).
    let (records, replacements) = mstore::get_many_with_replacements(pool, &ids).await?;
    if nothing {
        return Ok(RecallResult {
            results: Vec::new(),
            incidents,
            derived_tags: tags.into_iter().collect(),
            notice: Some(empty_notice(&index, q.service.as_deref())),
            vectors_pending,
            replacements,
            chance,
        });
    }
    let mut records: HashMap<i64, MemoryRecord> = records.into_iter().map(|r| (r.id, r)).collect();
    let stemmer = rust_stemmers::Stemmer::create(rust_stemmers::Algorithm::English);
    let explain = Explain {
        query_stems: query_stems(&stemmer, &words),
        stemmer,
        tags: &tags,
        service: q.service.as_ref(),
        neighbours: &neighbours,
        actions: &actions,
        chance,
        now,
    };
    let mut results: Vec<Recalled> = ranked
        .into_iter()
        .filter_map(|(score, f)| Some((score, f.lists, f.cosine, records.remove(&f.candidate.id)?)))
        // Retracted since the index was read: never returned.
        .filter(|(_, _, _, r)| r.validation != Validation::Retracted)
        .map(|(score, lists, cosine, r)| explain.recalled(score, lists, cosine, r))
        .collect();
    mark_contradictions(&mut results);
    below_replacements(&mut results);
    let notice = thin_notice(&results, q.service.as_deref(), chance);
    Ok(RecallResult {
        results,
        incidents,
        derived_tags: tags.into_iter().collect(),
        notice,
        vectors_pending,
        replacements,
        chance,
    })
}
