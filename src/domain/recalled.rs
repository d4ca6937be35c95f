//! How recalled memory is grouped for the incident page: what a responder reads beside the
//! incident is a few similar past incidents, the dead ends to avoid and the rules that apply,
//! each list short. The rule is here so the page and anything else that shows recall group it
//! the same way; the page only renders the groups.

use super::MemoryKind;

/// Similar past incidents the page shows at the most (one record each).
pub const SIMILAR_MAX: usize = 5;
/// Dead ends (failed remediations, rejected recommendations) the page shows at the most.
pub const DEAD_ENDS_MAX: usize = 8;
/// Rules (lessons, runbooks) the page shows at the most.
pub const RULES_MAX: usize = 6;

/// Recalled items in the page's three groups, each in recall's order and within its cap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecalledGroups<T> {
    /// One item per past incident, the best-ranked of that incident, at most [`SIMILAR_MAX`].
    pub similar: Vec<T>,
    /// Remediation failures and rejected recommendations, at most [`DEAD_ENDS_MAX`].
    pub dead_ends: Vec<T>,
    /// Lessons and runbooks, at most [`RULES_MAX`].
    pub rules: Vec<T>,
}

/// Groups `recalled` (best first) for the page. `about` tells an item's memory kind and the
/// past incident it came from (`None`, or empty, when it names none).
///
/// - Remediation failures and rejected recommendations are dead ends; lessons and runbooks are
///   rules; both whatever incident they came from.
/// - Service facts and dependencies are not shown in any group.
/// - Every other kind stands for its incident: the first item of each incident is kept as a
///   similar incident, later ones of the same incident and items without one are dropped.
///
/// Each group keeps recall's order and is cut to its cap after grouping.
pub fn group_recalled<T>(
    recalled: impl IntoIterator<Item = T>,
    about: impl Fn(&T) -> (MemoryKind, Option<&str>),
) -> RecalledGroups<T> {
    let mut groups = RecalledGroups {
        similar: Vec::new(),
        dead_ends: Vec::new(),
        rules: Vec::new(),
    };
    let mut seen_incidents = std::collections::BTreeSet::new();
    for item in recalled {
        let (kind, incident) = about(&item);
        match kind {
            MemoryKind::RemediationFailure | MemoryKind::RejectedRecommendation => {
                groups.dead_ends.push(item);
            }
            MemoryKind::Lesson | MemoryKind::Runbook => groups.rules.push(item),
            MemoryKind::ServiceFact | MemoryKind::Dependency => {}
            _ => {
                let first_of_incident = incident
                    .filter(|i| !i.is_empty())
                    .is_some_and(|i| seen_incidents.insert(i.to_string()));
                if first_of_incident {
                    groups.similar.push(item);
                }
            }
        }
    }
    groups.similar.truncate(SIMILAR_MAX);
    groups.dead_ends.truncate(DEAD_ENDS_MAX);
    groups.rules.truncate(RULES_MAX);
    groups
}

/// What a recalled record shares with the incident, as the page's weak-match rule reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Shared {
    /// Failure-mode tags in common.
    pub failure_modes: usize,
    /// Services in common (directly or through a dependency).
    pub services: usize,
    /// Action kinds in common.
    pub action_kinds: usize,
    /// Query words found in the record.
    pub words: usize,
    /// Found by meaning (its vector list) above the query's chance level.
    pub meaning: bool,
    /// Recall marked it a weak match (by meaning alone, under chance).
    pub marked_weak: bool,
}

/// Most shared words a match may rest on alone and still be weak: one or two common words
/// ("end", "seconds", "stalls") pull unrelated records.
pub const WEAK_MATCH_WORDS: usize = 2;

/// Whether a recalled record is a weak match for the incident page (issue #49): recall marked
/// it so, or it shares no failure mode, service or action kind, was not found by meaning, and
/// rests on at most [`WEAK_MATCH_WORDS`] words. The page marks such records and lists them
/// after the strong ones (DESIGN.md §4: never silently dropped).
pub fn is_weak_match(s: &Shared) -> bool {
    s.marked_weak
        || (s.failure_modes == 0
            && s.services == 0
            && s.action_kinds == 0
            && !s.meaning
            && s.words <= WEAK_MATCH_WORDS)
}

/// `text` without the incident id it starts with (and a root cause's `root cause on SERVICE:`
/// after it), for where the id is already shown beside it as a link or in the sentence: no
/// "INC-2026-0004 INC-2026-0004 (SEV2, …)" (issue #49). Text that does not start with
/// `incident` is returned whole.
pub fn after_incident_id<'a>(text: &'a str, incident: &str) -> &'a str {
    if incident.is_empty() {
        return text;
    }
    let Some(rest) = text.strip_prefix(incident) else {
        return text;
    };
    let rest = rest.trim_start();
    let rest = rest
        .strip_prefix("root cause on ")
        .and_then(|r| r.split_once(": "))
        .map_or(rest, |(_, cause)| cause);
    if rest.is_empty() { text } else { rest }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_match_on_a_couple_of_words_alone_is_weak() {
        let words = |n| Shared {
            words: n,
            ..Shared::default()
        };
        assert!(is_weak_match(&words(1)));
        assert!(is_weak_match(&words(2)));
        assert!(!is_weak_match(&words(3)));
        for strong in [
            Shared {
                failure_modes: 1,
                ..words(1)
            },
            Shared {
                services: 1,
                ..words(1)
            },
            Shared {
                action_kinds: 1,
                ..words(0)
            },
            Shared {
                meaning: true,
                ..words(1)
            },
        ] {
            assert!(!is_weak_match(&strong), "{strong:?}");
        }
        assert!(is_weak_match(&Shared {
            marked_weak: true,
            ..words(5)
        }));
    }

    #[test]
    fn the_id_shown_beside_a_text_is_not_repeated_in_it() {
        let id = "INC-2026-0004";
        assert_eq!(
            after_incident_id("INC-2026-0004 (SEV2, billing-api): Stalls. Rolled back", id),
            "(SEV2, billing-api): Stalls. Rolled back"
        );
        assert_eq!(
            after_incident_id("INC-2026-0004 root cause on billing-api: a leak", id),
            "a leak"
        );
        assert_eq!(
            after_incident_id("Raise the limit during INC-2026-0004", id),
            "Raise the limit during INC-2026-0004"
        );
        assert_eq!(after_incident_id("INC-2026-0004", id), "INC-2026-0004");
        assert_eq!(after_incident_id("anything", ""), "anything");
    }

    /// A recalled item for the tests: a label, its kind and its incident.
    type Item = (&'static str, MemoryKind, Option<&'static str>);

    fn grouped(items: Vec<Item>) -> RecalledGroups<&'static str> {
        let g = group_recalled(items, |(_, kind, incident)| (*kind, *incident));
        RecalledGroups {
            similar: g.similar.into_iter().map(|i| i.0).collect(),
            dead_ends: g.dead_ends.into_iter().map(|i| i.0).collect(),
            rules: g.rules.into_iter().map(|i| i.0).collect(),
        }
    }

    #[test]
    fn failures_and_rejections_are_dead_ends_and_lessons_and_runbooks_are_rules() {
        let g = grouped(vec![
            ("lesson", MemoryKind::Lesson, Some("INC-2026-0001")),
            (
                "failure",
                MemoryKind::RemediationFailure,
                Some("INC-2026-0001"),
            ),
            ("runbook", MemoryKind::Runbook, None),
            ("rejected", MemoryKind::RejectedRecommendation, None),
        ]);
        assert_eq!(g.dead_ends, ["failure", "rejected"]);
        assert_eq!(g.rules, ["lesson", "runbook"]);
        assert!(g.similar.is_empty(), "{:?}", g.similar);
    }

    #[test]
    fn a_past_incident_is_shown_once_by_its_best_ranked_record() {
        let g = grouped(vec![
            ("first of 7", MemoryKind::Observation, Some("INC-2026-0007")),
            ("first of 9", MemoryKind::RootCause, Some("INC-2026-0009")),
            ("second of 7", MemoryKind::RootCause, Some("INC-2026-0007")),
        ]);
        assert_eq!(g.similar, ["first of 7", "first of 9"]);
    }

    #[test]
    fn facts_dependencies_and_records_without_an_incident_are_left_out() {
        let g = grouped(vec![
            ("fact", MemoryKind::ServiceFact, Some("INC-2026-0002")),
            ("dependency", MemoryKind::Dependency, Some("INC-2026-0003")),
            ("no incident", MemoryKind::Observation, None),
            ("empty incident", MemoryKind::Observation, Some("")),
        ]);
        assert_eq!(g, grouped(Vec::new()));
    }

    #[test]
    fn a_dead_end_does_not_use_up_its_incident_for_the_similar_list() {
        let g = grouped(vec![
            (
                "failure",
                MemoryKind::RemediationFailure,
                Some("INC-2026-0004"),
            ),
            ("root cause", MemoryKind::RootCause, Some("INC-2026-0004")),
        ]);
        assert_eq!(g.similar, ["root cause"]);
    }

    #[test]
    fn each_group_is_cut_to_its_cap_keeping_recall_order() {
        let incidents = [
            "INC-2026-0010",
            "INC-2026-0011",
            "INC-2026-0012",
            "INC-2026-0013",
            "INC-2026-0014",
            "INC-2026-0015",
            "INC-2026-0016",
        ];
        let mut items: Vec<Item> = incidents
            .iter()
            .map(|i| (*i, MemoryKind::Observation, Some(*i)))
            .collect();
        items.extend((0..10).map(|_| ("failure", MemoryKind::RemediationFailure, None)));
        items.extend((0..10).map(|_| ("lesson", MemoryKind::Lesson, None)));
        let g = grouped(items);
        assert_eq!(g.similar, incidents[..SIMILAR_MAX]);
        assert_eq!(g.dead_ends.len(), DEAD_ENDS_MAX);
        assert_eq!(g.rules.len(), RULES_MAX);
    }
}
