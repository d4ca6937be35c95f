//! Consolidation: the pure rules that group near-duplicate lessons and failure
//! records of different incidents, merge each group into one prescriptive rule, and keep the
//! standing rule set of a service bounded. No I/O: the service
//! (`services::consolidation`) reads the records and their vectors, calls [`groups`] and
//! [`merge`], and drafts one proposal per group for the reviewer queue.
//!
//! Two records are near-duplicates when they are of the same kind (lesson with lesson, failure
//! with failure), come from different incidents, name the same action kind, share a specific
//! failure mode, and say the same thing: the cosine of their vectors is at least
//! [`SIMILARITY_THRESHOLD`] (or, when one has no vector, the overlap of their content words is
//! at least [`WORD_OVERLAP_THRESHOLD`]). A group is built greedily in id order and every member
//! is a near-duplicate of every other (no chains), at most one record per incident.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::action::ActionKind;
use super::memory::{MemoryKind, Rule, RuleSeverity};

/// Cosine of two record vectors at or above which they say the same thing. Measured with the
/// built-in all-MiniLM-L6-v2 by `cargo run --release --example consolidation-threshold` on 40
/// hand-written triples (a rule, the same rule in other words, a different rule of the same topic
/// and action): one-sentence ALWAYS lines of one rule have a median cosine of 0.65 (p10 0.48),
/// different rules of the same topic 0.46 (p90 0.59); at 0.60 lessons merge with precision 0.91
/// and recall 0.70, the whole set with precision 0.72 and recall 0.78, the best F1 (0.75 kept
/// every lesson merge right but found under a quarter of them). Remediation failures are
/// compared by their whole record text, whose shared "{action} on {target} during …" prefix
/// puts same and different failures alike at 0.62–0.90: the vector barely tells them apart and
/// the shared action kind and failure mode that grouping also asks for do most of the work, and
/// they get their own, higher threshold ([`FAILURE_SIMILARITY_THRESHOLD`]).
pub const SIMILARITY_THRESHOLD: f32 = 0.60;

/// The cosine threshold for remediation failures. From the same measurement: at 0.60 failures
/// merge with precision 0.50 (every different failure of the same action passes), at 0.80 with
/// precision 0.75 and recall 0.90, the best precision before recall falls (0.60 at 0.85). A
/// false merge costs a reviewer's rejection; a missed one only leaves two records standing.
pub const FAILURE_SIMILARITY_THRESHOLD: f32 = 0.80;

/// Without a vector (no embedder, or not embedded yet): the Jaccard overlap of two records'
/// content words at or above which they say the same thing.
pub const WORD_OVERLAP_THRESHOLD: f64 = 0.5;

/// Standing rules per service above which consolidation of that service is urgent (the
/// default of `--rule-cap`).
pub const DEFAULT_RULE_CAP: usize = 20;

/// A source's statement is cut to this many characters in the merged rule's BECAUSE.
pub const MAX_CITED_CHARS: usize = 240;

/// A record consolidation may merge: a confirmed lesson or remediation failure, not yet
/// consolidated, with an action kind.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    /// Record id.
    pub id: i64,
    /// [`MemoryKind::Lesson`] or [`MemoryKind::RemediationFailure`].
    pub kind: MemoryKind,
    /// The incident it was learned from.
    pub incident_id: String,
    /// Services it is about.
    pub services: Vec<String>,
    /// Its specific failure modes (generic ones left out).
    pub failure_modes: Vec<String>,
    /// The action it is about.
    pub action_kind: ActionKind,
    /// For a lesson, its rule.
    pub rule: Option<Rule>,
    /// Its text.
    pub text: String,
    /// For a lesson its rule's severity; for a failure, from its importance.
    pub severity: RuleSeverity,
    /// Its unit vector (a lesson's ALWAYS, else the whole record), when embedded.
    pub vector: Option<Vec<f32>>,
    /// Its content words, for [`WORD_OVERLAP_THRESHOLD`].
    pub words: BTreeSet<String>,
    /// Whether it is a merged rule written by an accepted consolidation (`consolidated_from`):
    /// the records it was judged against are behind it, so it groups only with newer ones.
    pub merged: bool,
}

/// How alike two items are, and by which measure.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Likeness {
    /// Cosine of their vectors.
    Cosine(f32),
    /// Jaccard overlap of their content words (one of them has no vector).
    Words(f64),
}

impl Likeness {
    /// Whether it reaches its measure's threshold for records of `kind` (cosine:
    /// [`FAILURE_SIMILARITY_THRESHOLD`] for remediation failures, [`SIMILARITY_THRESHOLD`]
    /// otherwise).
    pub fn is_near(self, kind: MemoryKind) -> bool {
        match self {
            Self::Cosine(c) if kind == MemoryKind::RemediationFailure => {
                c >= FAILURE_SIMILARITY_THRESHOLD
            }
            Self::Cosine(c) => c >= SIMILARITY_THRESHOLD,
            Self::Words(j) => j >= WORD_OVERLAP_THRESHOLD,
        }
    }
}

/// How alike `a` and `b` are: cosine when both have vectors of one length, else word overlap.
pub fn likeness(a: &Item, b: &Item) -> Likeness {
    match (&a.vector, &b.vector) {
        (Some(x), Some(y)) if x.len() == y.len() && !x.is_empty() => Likeness::Cosine(cosine(x, y)),
        _ => {
            let inter = a.words.intersection(&b.words).count() as f64;
            let union = a.words.union(&b.words).count().max(1) as f64;
            Likeness::Words(inter / union)
        }
    }
}

fn cosine(x: &[f32], y: &[f32]) -> f32 {
    let dot: f32 = x.iter().zip(y).map(|(a, b)| a * b).sum();
    let nx: f32 = x.iter().map(|a| a * a).sum::<f32>().sqrt();
    let ny: f32 = y.iter().map(|a| a * a).sum::<f32>().sqrt();
    if nx == 0.0 || ny == 0.0 {
        0.0
    } else {
        dot / (nx * ny)
    }
}

/// Whether `item` may join the group `members` (indexes into `items`): same kind and action
/// kind, an incident the group does not have, a failure mode every member shares, and a
/// near-duplicate of every member.
fn fits(items: &[Item], members: &[usize], item: &Item) -> bool {
    let first = &items[members[0]];
    if first.kind != item.kind || first.action_kind != item.action_kind {
        return false;
    }
    // A merged rule was drafted from the records there were when it was proposed: it takes in
    // only records newer than itself, so a rerun with nothing new proposes nothing new.
    if members.iter().any(|m| {
        let m = &items[*m];
        (m.merged && item.id < m.id) || (item.merged && m.id < item.id)
    }) {
        return false;
    }
    if members
        .iter()
        .any(|m| items[*m].incident_id == item.incident_id)
    {
        return false;
    }
    let mut shared: BTreeSet<&String> = item.failure_modes.iter().collect();
    for m in members {
        let theirs: BTreeSet<&String> = items[*m].failure_modes.iter().collect();
        shared = shared.intersection(&theirs).copied().collect();
    }
    !shared.is_empty()
        && members
            .iter()
            .all(|m| likeness(&items[*m], item).is_near(item.kind))
}

/// Groups of near-duplicates (indexes into `items`, each group in id order), groups of two or
/// more only, ordered by their first member's id. Deterministic: items are visited in id order
/// and each joins the first group it [`fits`].
pub fn groups(items: &[Item]) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|i| items[*i].id);
    let mut out: Vec<Vec<usize>> = Vec::new();
    for i in order {
        match out.iter_mut().find(|g| fits(items, g, &items[i])) {
            Some(g) => g.push(i),
            None => out.push(vec![i]),
        }
    }
    out.retain(|g| g.len() >= 2);
    out
}

/// The idempotency key of a group's proposal: its sorted source ids. The same group proposes
/// once, however often consolidation runs.
pub fn origin(ids: &[i64]) -> String {
    let mut ids = ids.to_vec();
    ids.sort_unstable();
    let ids: Vec<String> = ids.iter().map(i64::to_string).collect();
    format!("consolidation:{}", ids.join(","))
}

/// A rule severity from a record's importance (4 critical … 1 low).
pub fn severity_of_importance(importance: i64) -> RuleSeverity {
    match importance {
        i if i >= 4 => RuleSeverity::Critical,
        3 => RuleSeverity::High,
        2 => RuleSeverity::Medium,
        _ => RuleSeverity::Low,
    }
}

/// One source of a merged rule, as the proposal shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SourceRef {
    /// Record id.
    pub id: i64,
    /// Its incident.
    pub incident_id: String,
    /// lesson / remediation_failure.
    pub kind: MemoryKind,
    /// Its text.
    pub text: String,
}

/// A service whose standing rules exceed the cap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct OverCap {
    /// The service.
    pub service: String,
    /// Its standing rules (confirmed lessons, not consolidated).
    pub standing: usize,
    /// The cap.
    pub cap: usize,
}

/// What a consolidation proposal merges (beside the record accepting it writes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Consolidation {
    /// The records merged, in id order; accepting marks each `consolidated_into` the new rule.
    pub sources: Vec<SourceRef>,
    /// Their incidents, in order of first appearance.
    pub incidents: Vec<String>,
    /// Set when a service of the group has more standing rules than the cap.
    pub over_cap: Option<OverCap>,
}

/// A group merged into one rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Merged {
    /// ALWAYS / BECAUSE / SCOPE / SEVERITY.
    pub rule: Rule,
    /// The union of the sources' services.
    pub services: Vec<String>,
    /// The union of the sources' specific failure modes.
    pub failure_modes: Vec<String>,
    /// The shared action kind.
    pub action_kind: ActionKind,
    /// The newest source's incident: the merged rule's grounding incident.
    pub incident_id: String,
    /// The sources.
    pub consolidation: Consolidation,
}

fn push_unique(out: &mut Vec<String>, v: &str) {
    let v = v.trim();
    if !v.is_empty() && !out.iter().any(|o| o.eq_ignore_ascii_case(v)) {
        out.push(v.to_string());
    }
}

fn cut(s: &str) -> String {
    let s = s.trim().replace('\n', " ");
    if s.chars().count() <= MAX_CITED_CHARS {
        s
    } else {
        let head: String = s.chars().take(MAX_CITED_CHARS - 1).collect();
        format!("{}…", head.trim_end())
    }
}

/// The scope parts of an item: a lesson's SCOPE split on `,` and `;`; a failure's services and
/// failure modes.
fn scope_parts(item: &Item) -> Vec<String> {
    match &item.rule {
        Some(r) => r.scope.split([',', ';']).map(str::to_string).collect(),
        None => item
            .services
            .iter()
            .chain(&item.failure_modes)
            .cloned()
            .collect(),
    }
}

/// Merges a group (at least one item) into one rule. ALWAYS: for lessons the imperative of the
/// most severe source (ties: the newest), for failures "confirm the cause before" the action.
/// BECAUSE: every source, with its incident and record id, in id order. SCOPE: the union of the
/// sources' scopes (`all` if any applies to all). SEVERITY: the highest.
pub fn merge(group: &[&Item]) -> Merged {
    let mut items: Vec<&Item> = group.to_vec();
    items.sort_by_key(|i| i.id);
    let severity = items
        .iter()
        .map(|i| i.severity)
        .max_by_key(|s| s.importance())
        .unwrap_or(RuleSeverity::Medium);
    let (mut services, mut modes, mut scope, mut incidents) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in &items {
        i.services
            .iter()
            .for_each(|s| push_unique(&mut services, s));
        i.failure_modes
            .iter()
            .for_each(|m| push_unique(&mut modes, m));
        scope_parts(i)
            .iter()
            .for_each(|p| push_unique(&mut scope, p));
        push_unique(&mut incidents, &i.incident_id);
    }
    let action_kind = items
        .first()
        .map_or(ActionKind::RestartService, |i| i.action_kind);
    let always = match items
        .iter()
        .filter_map(|i| i.rule.as_ref().map(|r| (i.id, r)))
        .max_by_key(|(id, r)| (r.severity.importance(), *id))
    {
        Some((_, r)) => r.always.clone(),
        None => format!(
            "Confirm the cause before {} on {}: it failed in {} incidents",
            action_kind.as_str(),
            if modes.is_empty() {
                services.join(", ")
            } else {
                modes.join(", ")
            },
            incidents.len()
        ),
    };
    let cited: Vec<String> = items
        .iter()
        .map(|i| {
            let said = i
                .rule
                .as_ref()
                .map_or(i.text.as_str(), |r| r.because.as_str());
            format!("{} (MEM-{}): {}", i.incident_id, i.id, cut(said))
        })
        .collect();
    let because = format!(
        "Learned in {} incidents ({}): {}",
        incidents.len(),
        incidents.join(", "),
        cited.join("; ")
    );
    let scope = if scope.iter().any(|s| s.eq_ignore_ascii_case("all")) {
        "all".to_string()
    } else {
        scope.join(", ")
    };
    let newest = items.iter().max_by_key(|i| i.id);
    Merged {
        rule: Rule {
            always,
            because,
            scope,
            severity,
        },
        services,
        failure_modes: modes,
        action_kind,
        incident_id: newest.map(|i| i.incident_id.clone()).unwrap_or_default(),
        consolidation: Consolidation {
            sources: items
                .iter()
                .map(|i| SourceRef {
                    id: i.id,
                    incident_id: i.incident_id.clone(),
                    kind: i.kind,
                    text: i.text.clone(),
                })
                .collect(),
            incidents,
            over_cap: None,
        },
    }
}

/// The service of `services` most over `cap` standing rules (`standing`: per service), if any.
pub fn over_cap(
    services: &[String],
    standing: &BTreeMap<String, usize>,
    cap: usize,
) -> Option<OverCap> {
    services
        .iter()
        .filter_map(|s| standing.get(s).map(|n| (s, *n)))
        .filter(|(_, n)| *n > cap)
        .max_by_key(|(s, n)| (*n, std::cmp::Reverse((*s).clone())))
        .map(|(s, n)| OverCap {
            service: s.clone(),
            standing: n,
            cap,
        })
}

/// Orders merged groups for the queue: those of a service over the cap first (most over first),
/// then the others, each part in its given order.
pub fn queue_order(merged: &mut [Merged]) {
    merged.sort_by_key(|m| {
        std::cmp::Reverse(
            m.consolidation
                .over_cap
                .as_ref()
                .map_or(0, |o| o.standing.saturating_sub(o.cap)),
        )
    });
}

#[cfg(test)]
mod tests;
