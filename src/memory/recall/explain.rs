//! The explanation stage of recall: why each result came (matched words, shared tags, services,
//! action kinds, lists, cosine), its marks (stale, superseded, contradicted, consolidated, weak
//! match) and the notices of an empty or a thin result.

use std::collections::BTreeSet;

use super::query::{content_words, stem};
use super::{NOTHING_FOUND, Recalled, Why};
use crate::domain::memory::MemoryRecord;
use crate::domain::{ActionKind, MemoryKind, Validation};
use crate::store::recall_index::RecallIndex;

/// What a result's "why" and marks are read against: the query's stems, tags, services and
/// action kinds, its chance level and the time of the recall.
pub(super) struct Explain<'a> {
    pub(super) stemmer: rust_stemmers::Stemmer,
    pub(super) query_stems: Vec<(String, String)>,
    pub(super) tags: &'a BTreeSet<String>,
    pub(super) service: Option<&'a String>,
    pub(super) neighbours: &'a [String],
    pub(super) actions: &'a [ActionKind],
    pub(super) chance: Option<f32>,
    pub(super) now: jiff::Timestamp,
}

impl Explain<'_> {
    /// One returned record with why it came and its marks.
    pub(super) fn recalled(
        &self,
        score: f64,
        lists: Vec<&'static str>,
        cosine: Option<f32>,
        r: MemoryRecord,
    ) -> Recalled {
        let (stemmer, query_stems, tags) = (&self.stemmer, &self.query_stems, self.tags);
        let (neighbours, actions) = (self.neighbours, self.actions);
        let weak = is_weak(&lists, cosine, self.chance);
        let age = r.age_days(self.now);
        let text_stems: BTreeSet<String> = content_words(&r.text)
            .iter()
            .map(|w| stem(stemmer, w))
            .collect();
        let why = Why {
            matched_terms: query_stems
                .iter()
                .filter(|(s, _)| text_stems.contains(s))
                .map(|(_, w)| w.clone())
                .take(12)
                .collect(),
            tags: r
                .failure_modes
                .iter()
                .filter(|t| tags.contains(*t))
                .cloned()
                .collect(),
            services: r
                .services
                .iter()
                .filter(|s| self.service == Some(*s) || neighbours.contains(s))
                .cloned()
                .collect(),
            action_kinds: r
                .action_kind
                .filter(|a| actions.contains(a))
                .map(|a| vec![a.as_str().to_string()])
                .unwrap_or_default(),
            lists,
            cosine,
        };
        let mut marks = Vec::new();
        if r.kind.is_stale(age) {
            marks.push("stale");
        }
        if r.validation == Validation::Superseded {
            marks.push("superseded");
        }
        if r.data.get("contradicted_by").is_some() {
            marks.push("contradicted");
        }
        if r.consolidated_into().is_some() {
            marks.push("consolidated");
        }
        if weak {
            marks.push("weak match");
        }
        Recalled {
            memory: r,
            score,
            why,
            marks,
        }
    }
}

/// Whether a result came by meaning alone (the vector list, and its incident's rank, which only
/// adds to records some other list found) with a cosine under the query's chance level.
pub(super) fn is_weak(lists: &[&'static str], cosine: Option<f32>, chance: Option<f32>) -> bool {
    let by_meaning_only = lists.iter().all(|l| matches!(*l, "semantic" | "incident"));
    by_meaning_only && matches!((cosine, chance), (Some(c), Some(f)) if c < f)
}

/// What an empty recall says: that memory is empty, that nothing is stored for the query's
/// service (and nothing elsewhere matched), or that nothing matched at all.
pub(super) fn empty_notice(index: &RecallIndex, service: Option<&str>) -> String {
    if index.is_empty() {
        return format!("{NOTHING_FOUND}: organizational memory is empty (nothing learned yet)");
    }
    match service {
        Some(s) if !index.has_service(s) => format!(
            "{NOTHING_FOUND}: nothing is stored for {s}, and nothing stored elsewhere matched"
        ),
        _ => format!(
            "{NOTHING_FOUND}: no stored record shares words, failure modes or action kinds with \
             this text"
        ),
    }
}

/// What a non-empty recall says when its results are thin: every result came only through the
/// service (no shared word, failure mode, action kind or meaning), or only by weak meaning.
pub(super) fn thin_notice(
    results: &[Recalled],
    service: Option<&str>,
    chance: Option<f32>,
) -> Option<String> {
    if results.is_empty() {
        return None;
    }
    let through_service_only = results.iter().all(|r| {
        r.why.matched_terms.is_empty()
            && r.why.tags.is_empty()
            && r.why.action_kinds.is_empty()
            && !r.why.services.is_empty()
            && r.why.cosine.is_none_or(|c| chance.is_some_and(|f| c < f))
    });
    let weak = results
        .iter()
        .filter(|r| r.marks.contains(&"weak match"))
        .count();
    if through_service_only {
        Some(format!(
            "Matches exist only through the service{}: no stored record shares words, failure \
             modes or action kinds with this text",
            service.map(|s| format!(" ({s})")).unwrap_or_default()
        ))
    } else if weak == results.len() {
        Some(format!(
            "Only weak matches by meaning: each of the {weak} is under this query's chance level \
             (cosine {:.2}); treat them as unrelated",
            chance.unwrap_or_default()
        ))
    } else if weak > 0 {
        Some(format!(
            "{weak} of {} results are weak matches by meaning (cosine under {:.2}, this query's \
             chance level), marked",
            results.len(),
            chance.unwrap_or_default()
        ))
    } else {
        None
    }
}

/// Marks a remediation record `contradicted` when the result also holds the opposite verdict for
/// the same action on a shared service.
pub(super) fn mark_contradictions(results: &mut [Recalled]) {
    let outcomes: Vec<(ActionKind, MemoryKind, Vec<String>)> = results
        .iter()
        .filter_map(|r| {
            r.memory
                .action_kind
                .map(|a| (a, r.memory.kind, r.memory.services.clone()))
        })
        .collect();
    for r in results.iter_mut() {
        let Some(a) = r.memory.action_kind else {
            continue;
        };
        let opposite = match r.memory.kind {
            MemoryKind::RemediationFailure => MemoryKind::RemediationSuccess,
            MemoryKind::RemediationSuccess => MemoryKind::RemediationFailure,
            _ => continue,
        };
        if outcomes.iter().any(|(oa, ok, os)| {
            *oa == a && *ok == opposite && os.iter().any(|s| r.memory.services.contains(s))
        }) && !r.marks.contains(&"contradicted")
        {
            r.marks.push("contradicted");
        }
    }
}

/// Ids of the records that replaced results ([`MemoryRecord::replaced_by`]) but are not among
/// them, first seen first.
pub(in crate::memory) fn missing_replacements(results: &[Recalled]) -> Vec<i64> {
    let mut out: Vec<i64> = Vec::new();
    for by in results.iter().filter_map(|r| r.memory.replaced_by()) {
        if !out.contains(&by) && !results.iter().any(|x| x.memory.id == by) {
            out.push(by);
        }
    }
    out
}

/// Puts each of `replacements` (records read for [`missing_replacements`]) into `results` right
/// above the first result it replaced, with that result's score and the list `replaces`: what
/// replaced a recalled record is shown, and reaches the analyst, with it, whether or not it
/// matched the query itself (a later incident that contradicted an earlier root cause is the
/// precedent to weigh first). Retracted records and records of `exclude_incident` are left out.
pub(in crate::memory) fn add_replacements(
    results: &mut Vec<Recalled>,
    replacements: Vec<MemoryRecord>,
    exclude_incident: Option<&str>,
) {
    for r in replacements {
        if r.validation == Validation::Retracted
            || (r.incident_id.is_some() && r.incident_id.as_deref() == exclude_incident)
            || results.iter().any(|x| x.memory.id == r.id)
        {
            continue;
        }
        let Some(at) = results
            .iter()
            .position(|x| x.memory.replaced_by() == Some(r.id))
        else {
            continue;
        };
        let score = results[at].score;
        let mut marks = Vec::new();
        if r.validation == Validation::Superseded {
            marks.push("superseded");
        }
        if r.data.get("contradicted_by").is_some() {
            marks.push("contradicted");
        }
        results.insert(
            at,
            Recalled {
                memory: r,
                score,
                why: Why {
                    lists: vec!["replaces"],
                    ..Why::default()
                },
                marks,
            },
        );
    }
}

/// Moves each result that was superseded or contradicted right below the record that replaced
/// it, when that record is among the results and ranked lower: a replaced record is shown
/// (marked), never above what replaced it. Everything else keeps its order. Chains move along;
/// a cycle (each replacing the other) stops after as many moves as there are results squared.
pub(in crate::memory) fn below_replacements(results: &mut Vec<Recalled>) {
    let mut moves = 0;
    let mut i = 0;
    while i < results.len() && moves <= results.len() * results.len() {
        let newer = results[i]
            .memory
            .replaced_by()
            .and_then(|by| results.iter().position(|x| x.memory.id == by))
            .filter(|j| *j > i);
        match newer {
            Some(j) => {
                let replaced = results.remove(i);
                // The newer record is now at j - 1: insert right after it.
                results.insert(j, replaced);
                moves += 1;
            }
            None => i += 1,
        }
    }
}
