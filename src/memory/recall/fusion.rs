//! The fusion stage of recall: incident-level lists fused by rank and score into one ranking of
//! past incidents, record-level lists fused by rank (each record also at its incident's rank),
//! then each record weighted on its own fields (kind, age, importance, validation, evidence).

use std::collections::HashMap;

use super::{INCIDENT_LIST, IncidentMatch, RecallTuning};
use crate::domain::{MemoryKind, Validation};
use crate::store::memory::Candidate;
use crate::store::recall_index::RecallIndex;

/// RRF constant.
pub(super) const RRF_K: f64 = 60.0;

/// Weight of a kind in ranking: root causes, failures and rules over narrative.
pub(super) fn kind_weight(k: MemoryKind) -> f64 {
    use MemoryKind::*;
    match k {
        RootCause | RemediationFailure | Lesson => 1.3,
        Symptom | FalseHypothesis | RemediationSuccess | Runbook | Trigger => 1.15,
        ContributingFactor | RejectedRecommendation | ServiceFact | Dependency => 1.0,
        IncidentSummary => 1.1,
        _ => 0.9,
    }
}

/// A fused candidate: its ranking fields, RRF score, the lists that found it and its cosine
/// with the query (when the vector list found it).
pub(super) struct Fused {
    pub(super) candidate: Candidate,
    pub(super) rrf: f64,
    pub(super) lists: Vec<&'static str>,
    pub(super) cosine: Option<f32>,
}

/// Weight of the incident-level ranking as a list at the record level (see [`recall`]).
pub(super) const INCIDENT_PRIOR: f64 = 1.0;

/// Per-list weights of the incident-level fusion (see [`fuse_incidents`]). The word lists weigh
/// less than the meaning lists: a new incident is usually written in other words than the past
/// one, and the words already enter twice (the incident document and its parts). Ablation in
/// `docs/benchmarks.md`.
pub(super) const INCIDENT_LISTS: &[(&str, f64)] = &[
    ("passages", 1.0),
    ("doc_bm25", 0.4),
    ("doc_vector", 1.0),
    ("part_vector", 1.0),
    ("part_bm25", 0.4),
    ("keys", 0.5),
];

/// RRF constant of the incident-level fusion: lists are short (one entry per incident), so a
/// smaller constant than the record level's keeps their first ranks decisive.
pub(super) const INCIDENT_RRF_K: f64 = 10.0;

/// Share of the incident-level score that comes from the lists' own scores (min-max normalized)
/// rather than their ranks: `λ` of the convex combination in [`fuse_incidents`].
pub(super) const SCORE_SHARE: f64 = 0.5;

/// One incident-level list: its name and incident ids best first, each with its score when the
/// list has one (a cosine for the vector lists, `-bm25` for the document search).
pub(super) type IncidentList = (&'static str, Vec<(String, Option<f32>)>);

/// Fuses incident-level lists (incident ids best first, with an optional score) into one
/// ranking, best first, ties by id. Each list `l` with weight `w` adds, for an incident at
/// 1-based rank `r`,
///
/// `w · ((1 − λ) / (k + r) + λ · n / (k + 1))`
///
/// where `n` is its score min-max normalized over the list (1 for the best, 0 for the worst;
/// `1 − (r − 1) / INCIDENT_LIST` for a list without scores), `k` = [`INCIDENT_RRF_K`] and
/// `λ` = `score_share`. The rank part is reciprocal rank fusion (Cormack, Clarke and Büttcher,
/// SIGIR 2009); the score part is the convex combination of normalized scores that Bruch, Gai
/// and Ingber found stronger than RRF for hybrid lexical + dense retrieval ("An Analysis of
/// Fusion Functions for Hybrid Retrieval", ACM TOIS 2023): it keeps how far ahead the best
/// candidate is, which ranks alone throw away. With `λ = 0` this is plain weighted RRF.
pub(super) fn fuse_incidents(lists: Vec<IncidentList>, score_share: f64) -> Vec<IncidentMatch> {
    let mut by_id: HashMap<String, IncidentMatch> = HashMap::new();
    for (name, list) in lists {
        let weight = INCIDENT_LISTS
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(1.0, |(_, w)| *w);
        let (lo, hi) = list
            .iter()
            .filter_map(|(_, s)| *s)
            .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), s| {
                (lo.min(s), hi.max(s))
            });
        for (rank, (id, score)) in list.into_iter().enumerate() {
            let normalized = match score {
                Some(s) if hi > lo => f64::from((s - lo) / (hi - lo)),
                Some(_) => 1.0,
                None => 1.0 - rank as f64 / INCIDENT_LIST as f64,
            };
            let e = by_id.entry(id.clone()).or_insert_with(|| IncidentMatch {
                incident_id: id,
                score: 0.0,
                lists: Vec::new(),
                ranks: Vec::new(),
                cosine: None,
                conditions: Vec::new(),
                sibling: false,
            });
            e.score += weight
                * ((1.0 - score_share) / (INCIDENT_RRF_K + rank as f64 + 1.0)
                    + score_share * normalized / (INCIDENT_RRF_K + 1.0));
            e.lists.push(name);
            e.ranks.push(rank + 1);
            if name == "doc_vector" {
                e.cosine = score;
            }
        }
    }
    let mut out: Vec<IncidentMatch> = by_id.into_values().collect();
    out.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.incident_id.cmp(&b.incident_id))
    });
    out
}

/// Fuses the record-level lists (`[text, rules, scope]` and the semantic one) by rank, then adds
/// each record's incident's rank as one more list (weighted [`INCIDENT_PRIOR`], or for a question,
/// `asked`, [`super::question::QUESTION_PRIOR`]).
pub(super) fn fuse_records(
    tuning: &RecallTuning,
    asked: bool,
    index: &RecallIndex,
    incidents: &[IncidentMatch],
    [text_list, rules_list, scope_list]: [Vec<Candidate>; 3],
    semantic_list: Vec<(Candidate, f32)>,
) -> HashMap<i64, Fused> {
    let mut fused: HashMap<i64, Fused> = HashMap::new();
    let mut add = |name: &'static str, list: Vec<(Candidate, Option<f32>)>, weight: f64| {
        for (rank, (c, cosine)) in list.into_iter().enumerate() {
            let e = fused.entry(c.id).or_insert_with(|| Fused {
                candidate: c,
                rrf: 0.0,
                lists: Vec::new(),
                cosine: None,
            });
            e.rrf += weight / (RRF_K + rank as f64 + 1.0);
            e.lists.push(name);
            if cosine.is_some() {
                e.cosine = cosine;
            }
        }
    };
    let plain = |l: Vec<Candidate>| l.into_iter().map(|c| (c, None)).collect::<Vec<_>>();
    if tuning.on("part_bm25") {
        add("text", plain(text_list), 1.0);
        add("rules", plain(rules_list), 0.8);
    }
    if tuning.on("keys") {
        add("scope", plain(scope_list), 1.0);
    }
    if tuning.on("part_vector") {
        add(
            "semantic",
            semantic_list
                .into_iter()
                .map(|(c, cos)| (c, Some(cos)))
                .collect(),
            1.0,
        );
    }
    // A record inherits its incident's relevance: the incident-level ranking is one more list at
    // the record level, each record at its incident's rank.
    if tuning.on("incident_prior") && !fused.is_empty() {
        let prior = match asked {
            true if tuning.on("question_prior") => {
                tuning.value("question_prior", super::question::QUESTION_PRIOR)
            }
            _ => tuning.value("incident_prior", INCIDENT_PRIOR),
        };
        let rank_of: HashMap<&str, usize> = incidents
            .iter()
            .enumerate()
            .map(|(r, m)| (m.incident_id.as_str(), r))
            .collect();
        for f in fused.values_mut() {
            let inc = index
                .get(f.candidate.id)
                .and_then(|e| e.incident_id.as_deref());
            if let Some(r) = inc.and_then(|i| rank_of.get(i)) {
                f.rrf += prior / (INCIDENT_RRF_K + *r as f64 + 1.0);
                f.lists.push("incident");
            }
        }
    }
    fused
}

/// How high a note must rank in one of its own lists (a word list, or the meaning list at or
/// above the chance cosine) to count as matching the query on its own ([`service_notes`]).
pub(super) const NOTE_OWN_RANK: usize = 5;

/// Where the notes that [`service_notes`] returns are shown: after this many results (the best
/// record of the best-ranked past incident first).
pub(super) const NOTES_AT: usize = 1;

/// Notes shown there at most.
pub(super) const NOTES_SHOWN: usize = 2;

/// The notes about the query's own service (`notes`: records learned from no incident, see
/// [`RecallIndex::notes_about`]) that match the query on their own: within [`NOTE_OWN_RANK`] of
/// the word lists (`text`, `rules`) or of the meaning list with a cosine at or above `chance`.
/// Best own rank first. A note that only shares the service key (or the service's name) is not
/// among them.
pub(super) fn service_notes(
    notes: &std::collections::HashSet<i64>,
    words: [&[Candidate]; 2],
    meaning: &[(Candidate, f32)],
    chance: Option<f32>,
) -> Vec<i64> {
    let mut best: HashMap<i64, usize> = HashMap::new();
    let mut seen = |id: i64, rank: usize| {
        if notes.contains(&id) && rank < NOTE_OWN_RANK {
            let b = best.entry(id).or_insert(rank);
            *b = (*b).min(rank);
        }
    };
    for list in words {
        for (rank, c) in list.iter().enumerate() {
            seen(c.id, rank);
        }
    }
    for (rank, (c, cosine)) in meaning.iter().enumerate() {
        if chance.is_none_or(|floor| *cosine >= floor) {
            seen(c.id, rank);
        }
    }
    let mut out: Vec<(usize, i64)> = best.into_iter().map(|(id, r)| (r, id)).collect();
    out.sort_unstable();
    out.into_iter().map(|(_, id)| id).collect()
}

/// How far a free-standing record's cosine must lead the best record of any past incident for it
/// to count as much the strongest meaning match ([`strongest_note`]).
pub(super) const STRONGEST_MARGIN: f32 = 0.05;

/// A record of no incident (a note, a fact, a runbook), about any service or none, that is much
/// the strongest meaning match of the query: first in the meaning list (`meaning`, best first),
/// at or above `chance`, and ahead of the best record of any past incident by at least
/// [`STRONGEST_MARGIN`]. Such a record has no incident to inherit relevance from, so without
/// this every record of every ranked past incident outranks it (the incident prior), with or
/// without a service in the query; [`service_notes`] covers only notes on the query's service.
pub(super) fn strongest_note(
    index: &RecallIndex,
    meaning: &[(Candidate, f32)],
    chance: Option<f32>,
) -> Option<i64> {
    let (first, cosine) = meaning.first()?;
    let free = index.get(first.id).is_some_and(|e| e.incident_id.is_none());
    if !free || chance.is_some_and(|floor| *cosine < floor) {
        return None;
    }
    let best_of_incidents = meaning
        .iter()
        .skip(1)
        .find(|(c, _)| index.get(c.id).is_some_and(|e| e.incident_id.is_some()))
        .map(|(_, c)| *c);
    best_of_incidents
        .is_none_or(|best| *cosine >= best + STRONGEST_MARGIN)
        .then_some(first.id)
}

/// Shows the [`strongest_note`] `id` in `ranked` (best first) among the first [`NOTES_AT`] + 1
/// results, with the score of the result it now precedes and the list `strongest_note`; left
/// where it is when already there (or not ranked at all).
pub(super) fn show_strongest_note(ranked: &mut Vec<(f64, Fused)>, id: i64) {
    let Some(p) = ranked.iter().position(|(_, f)| f.candidate.id == id) else {
        return;
    };
    if p <= NOTES_AT {
        return;
    }
    let (mut score, mut f) = ranked.remove(p);
    f.lists.push("strongest_note");
    score = score.max(ranked[NOTES_AT].0);
    ranked.insert(NOTES_AT, (score, f));
}

/// Shows the first [`NOTES_SHOWN`] of `notes` ([`service_notes`]) in `ranked` (best first) right
/// after its first [`NOTES_AT`] results, unless already there or higher, with the score of the
/// result they now precede and the list `service_note`. A note has no past incident to inherit
/// relevance from: without this, every record of every ranked past incident, however weakly it
/// matches, outranks a fact about the very service on call that matches the question best (the
/// incident prior dwarfs the record's own match). Incident recall places notes the same way
/// ([`crate::memory::incident::incidents_first`]).
pub(super) fn show_service_notes(ranked: &mut Vec<(f64, Fused)>, notes: &[i64]) {
    for (i, id) in notes.iter().take(NOTES_SHOWN).enumerate() {
        let at = NOTES_AT + i;
        let Some(p) = ranked.iter().position(|(_, f)| f.candidate.id == *id) else {
            continue;
        };
        let (mut score, mut f) = ranked.remove(p);
        f.lists.push("service_note");
        if p > at && at < ranked.len() {
            score = score.max(ranked[at].0);
        }
        ranked.insert(p.min(at), (score, f));
    }
}

/// Scores the fused candidates on their own fields (kind, age, importance, validation,
/// evidence), best first, ties by id.
pub(super) fn rank(
    fused: HashMap<i64, Fused>,
    kinds: &[MemoryKind],
    now: jiff::Timestamp,
) -> Vec<(f64, Fused)> {
    let mut ranked: Vec<(f64, Fused)> = fused
        .into_values()
        .filter(|f| kinds.is_empty() || kinds.contains(&f.candidate.kind))
        .filter(|f| f.candidate.validation != Validation::Retracted)
        .map(|f| {
            let c = &f.candidate;
            let age = crate::domain::memory::age_days(c.created_at, now);
            let importance = 1.0 + 0.05 * (c.importance.clamp(1, 4) - 2) as f64;
            let consolidated = if c.consolidated_into.is_some() {
                crate::domain::memory::CONSOLIDATED_WEIGHT
            } else {
                1.0
            };
            let score = f.rrf
                * consolidated
                * kind_weight(c.kind)
                * c.kind.recency_weight(age)
                * importance
                * c.validation.weight()
                * (1.0 + 0.02 * (c.evidence_count.clamp(1, 10) - 1) as f64);
            (score, f)
        })
        .collect();
    ranked.sort_by(|(a, fa), (b, fb)| b.total_cmp(a).then(fb.candidate.id.cmp(&fa.candidate.id)));
    ranked
}
