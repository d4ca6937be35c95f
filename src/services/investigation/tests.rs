//! Unit tests of the investigation service: simulated transcripts, similar incidents, the
//! incident page's order.

use super::*;
use crate::domain::ActionKind;
use crate::domain::memory::MemoryRecord;
use crate::memory::recall::{IncidentMatch, Recalled, Why};

#[test]
fn simulated_transcripts_invent_no_numbers() {
    for kind in ActionKind::ALL {
        let t = simulate(*kind, "orders-api", "INC-2026-0001");
        let body: String = t.lines().skip(1).collect::<Vec<_>>().join("\n");
        assert!(
            !body.chars().any(|c| c.is_ascii_digit()),
            "{kind:?} invents a number: {body}"
        );
        assert!(t.starts_with("[SIMULATED"), "{t}");
    }
}

/// A recalled record of `incident` (or of none) with `score`, its failure modes and `why`.
fn recalled(id: i64, incident: Option<&str>, score: f64, tags: &[&str], why: Why) -> Recalled {
    Recalled {
        memory: MemoryRecord::for_test(id, incident, tags),
        score,
        why,
        marks: Vec::new(),
    }
}

fn ids(results: &[Recalled]) -> Vec<i64> {
    results.iter().map(|r| r.memory.id).collect()
}

fn matched(id: &str, score: f64) -> IncidentMatch {
    IncidentMatch::for_test(id, score)
}

#[test]
fn records_follow_the_incident_ranking_and_notes_come_after_the_most_similar() {
    let (a, b, c) = ("INC-2026-0001", "INC-2026-0002", "INC-2026-0003");
    let mut results = vec![
        recalled(1, Some(b), 0.9, &[], Why::default()),
        recalled(2, None, 1.0, &[], Why::default()),
        recalled(3, Some(a), 0.5, &[], Why::default()),
        recalled(4, Some(c), 0.4, &[], Why::default()),
        recalled(5, Some(a), 0.3, &[], Why::default()),
    ];
    let ranking = [matched(a, 0.3), matched(b, 0.2), matched(c, 0.1)];
    incidents_first(&mut results, &ranking);
    // A's records in their own order, then B, then the note, then C.
    assert_eq!(ids(&results), vec![3, 5, 1, 2, 4]);
}

#[test]
fn a_runner_up_found_by_words_alone_is_not_similar_enough() {
    let words = Why {
        matched_terms: vec!["pool".into()],
        tags: vec!["timeout".into()],
        ..Why::default()
    };
    let specific = Why {
        tags: vec!["connection_leak".into()],
        ..Why::default()
    };
    let most = recalled(1, Some("INC-2026-0001"), 0.9, &[], words.clone());
    let words_only = recalled(2, Some("INC-2026-0002"), 0.8, &[], words);
    let sharing = recalled(3, Some("INC-2026-0003"), 0.7, &[], specific);
    // The most similar always counts; the runner-up only when it shares a specific tag or
    // the service.
    assert_eq!(
        similar_incidents(&[most.clone(), words_only.clone()], &[]),
        vec!["INC-2026-0001".to_string()]
    );
    assert_eq!(
        similar_incidents(&[most.clone(), sharing], &[]),
        vec!["INC-2026-0001".to_string(), "INC-2026-0003".to_string()]
    );
    // A runner-up by words alone counts when recall's incident ranking cannot tell it from
    // the first; not when it trails clearly.
    let close = [
        matched("INC-2026-0001", 0.40),
        matched("INC-2026-0002", 0.38),
    ];
    assert_eq!(
        similar_incidents(&[most.clone(), words_only.clone()], &close),
        vec!["INC-2026-0001".to_string(), "INC-2026-0002".to_string()]
    );
    let distant = [
        matched("INC-2026-0001", 0.40),
        matched("INC-2026-0002", 0.30),
    ];
    assert_eq!(
        similar_incidents(&[most, words_only], &distant),
        vec!["INC-2026-0001".to_string()]
    );
}

#[test]
fn a_weak_match_lends_no_dead_ends() {
    let mut weak = recalled(1, Some("INC-2026-0001"), 0.9, &[], Why::default());
    weak.marks.push("weak match");
    let strong = recalled(2, Some("INC-2026-0002"), 0.5, &[], Why::default());
    assert_eq!(similar_incidents(&[weak, strong], &[]), ["INC-2026-0002"]);
}

#[test]
fn every_sibling_recall_compared_lends_its_dead_ends_whatever_its_rank() {
    let first = recalled(1, Some("INC-2026-0001"), 0.9, &[], Why::default());
    let other = recalled(2, Some("INC-2026-0002"), 0.5, &[], Why::default());
    let mut ranking = vec![matched("INC-2026-0001", 1.0), matched("INC-2026-0002", 0.5)];
    ranking.push(IncidentMatch {
        sibling: true,
        ..matched("INC-2026-0003", 0.45)
    });
    ranking[0].sibling = true;
    assert_eq!(
        similar_incidents(&[first, other], &ranking),
        ["INC-2026-0001", "INC-2026-0003"]
    );
}
