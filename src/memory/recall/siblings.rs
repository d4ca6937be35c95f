//! The sibling stage of recall: the first few past incidents of the incident-level ranking are
//! re-ranked on the operational conditions ([`super::conditions`]) they share with the query.
//!
//! Two past incidents with the same symptom and another cause rank close together by words and by
//! meaning: the text that describes the symptom is most of both. What tells them apart is a fact
//! such as "traffic was flat" against "traffic doubled", or "one node" against "every node" —
//! words a vector barely moves on and a lexical match counts once among hundreds. Here each of
//! the first [`SIBLING_TOP`] candidates is scored by how many condition dimensions it agrees on
//! with the query minus how many it contradicts, and its fused score is scaled by
//! `1 + weight · agreement` (clamped to [`MIN_FACTOR`]); the ranking is then sorted again. The
//! weight is chosen on the union of the development sets
//! and is stable at ±20 % (docs/benchmarks.md).

use std::collections::HashMap;

use super::IncidentMatch;
use super::conditions::{Conditions, conditions_of};

/// Candidates at the top of the incident-level ranking that are re-ranked.
pub const SIBLING_TOP: usize = 3;

/// Share of its score a candidate gains per agreeing dimension and loses per contradicting one.
pub const SIBLING_WEIGHT: f64 = 0.08;

/// Share of the first candidate's score a candidate needs to be re-ranked: only candidates that
/// recall can barely tell apart (siblings) are compared on conditions; a clear first stays first
/// whatever a misread condition says.
pub const SIBLING_BAND: f64 = 0.85;

/// Lowest factor a candidate's score is scaled by (many contradictions never zero a candidate:
/// warn, never hide).
pub const MIN_FACTOR: f64 = 0.5;

/// Re-ranks the siblings among `incidents` (best first) — the first [`SIBLING_TOP`] whose score
/// is at least `band` times the first's, when there are two or more — by condition agreement
/// between `query` and each one's report in `reports` (incident id → text); candidates without
/// a report keep their score. Records each candidate's agreeing and contradicting dimensions in
/// [`IncidentMatch::conditions`]. Returns each re-ranked candidate's factor (incident id →
/// factor), which recall applies to the candidate's records too.
pub fn rerank(
    incidents: &mut [IncidentMatch],
    query: &Conditions,
    reports: &HashMap<String, String>,
    weight: f64,
    band: f64,
) -> HashMap<String, f64> {
    let mut factors = HashMap::new();
    if query.is_empty() {
        return factors;
    }
    for i in close(incidents, band) {
        let m = &mut incidents[i];
        m.sibling = true;
        let Some(report) = reports.get(&m.incident_id) else {
            continue;
        };
        let a = query.agreement(&conditions_of(report));
        let factor = (1.0 + weight * a.score).max(MIN_FACTOR);
        m.score *= factor;
        factors.insert(m.incident_id.clone(), factor);
        m.conditions = a
            .agree
            .iter()
            .map(|d| format!("{} agrees", d.as_str()))
            .chain(a.disagree.iter().map(|d| format!("{} differs", d.as_str())))
            .collect();
    }
    incidents.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.incident_id.cmp(&b.incident_id))
    });
    factors
}

/// Scales by `1 + weight` the score of each of `close` (sibling ids, see [`candidates`]) in
/// `favoured`, records the factor in `factors` (multiplied into one already there) and sorts
/// `incidents` again: a question naming an action favours the siblings where that action failed.
pub fn favour(
    incidents: &mut [IncidentMatch],
    close: &[String],
    favoured: &std::collections::HashSet<&str>,
    weight: f64,
    factors: &mut HashMap<String, f64>,
) {
    let mut moved = false;
    for m in incidents.iter_mut() {
        if close.contains(&m.incident_id) && favoured.contains(m.incident_id.as_str()) {
            m.score *= 1.0 + weight;
            *factors.entry(m.incident_id.clone()).or_insert(1.0) *= 1.0 + weight;
            m.conditions
                .push("dead end of the named action".to_string());
            moved = true;
        }
    }
    if moved {
        incidents.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| a.incident_id.cmp(&b.incident_id))
        });
    }
}

/// Positions of the siblings among `incidents` (best first): the first [`SIBLING_TOP`] whose
/// score is at least `band` times the first's; none when fewer than two are.
fn close(incidents: &[IncidentMatch], band: f64) -> Vec<usize> {
    let Some(first) = incidents.first().map(|m| m.score) else {
        return Vec::new();
    };
    let close: Vec<usize> = (0..incidents.len().min(SIBLING_TOP))
        .filter(|&i| incidents[i].score >= band * first)
        .collect();
    if close.len() < 2 { Vec::new() } else { close }
}

/// Ids of the first [`SIBLING_TOP`] of `incidents` (best first) whose score is at least `band`
/// times the first's, the first always among them: the candidates whose symptom matches the
/// query well enough for a warning of theirs to answer a question ([`favour`]).
pub fn leading(incidents: &[IncidentMatch], band: f64) -> Vec<String> {
    let Some(first) = incidents.first().map(|m| m.score) else {
        return Vec::new();
    };
    incidents
        .iter()
        .take(SIBLING_TOP)
        .filter(|m| m.score >= band * first)
        .map(|m| m.incident_id.clone())
        .collect()
}

/// Ids of the siblings [`rerank`] compares (see [`close`]), whose reports it needs; empty when
/// recall's first candidate is clear.
pub fn candidates(incidents: &[IncidentMatch], band: f64) -> Vec<String> {
    close(incidents, band)
        .into_iter()
        .map(|i| incidents[i].incident_id.clone())
        .collect()
}
