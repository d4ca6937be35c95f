use super::*;
use crate::domain::{Incident, IncidentId, IncidentState, Severity};

fn input(tags: &[&str]) -> InvestigationInput {
    let now = jiff::Timestamp::UNIX_EPOCH;
    InvestigationInput {
        incident: Incident {
            id: IncidentId::new(2026, 1),
            title: "t".into(),
            service: "payments-api".into(),
            severity: Severity::Sev2,
            description: String::new(),
            state: IncidentState::Investigating,
            opened_by: "rita".into(),
            opened_at: now,
            updated_at: now,
            resolved_at: None,
            summary: None,
            root_cause: None,
            version: 1,
        },
        observations: Vec::new(),
        recalled: Vec::new(),
        failure_modes: tags.iter().map(|t| t.to_string()).collect(),
        tried: Vec::new(),
        similar: Vec::new(),
        redactor: Default::default(),
    }
}

#[test]
fn a_flat_rate_with_climbing_pool_wait_reads_as_a_leak_not_a_small_pool() {
    let out = BuiltinAnalyst::analyse(&input(&["connection_pool_exhausted", "connection_leak"]));
    assert!(
        out.hypotheses[0].statement.starts_with("Connection leak"),
        "{:?}",
        out.hypotheses
    );
    assert_eq!(out.hypotheses[0].confidence, Confidence::High);
    assert!(
        out.hypotheses
            .iter()
            .all(|h| !h.statement.contains("too small for the current"))
    );
    assert_eq!(out.actions[0].kind, "rollback_deploy");
    let out = BuiltinAnalyst::analyse(&input(&["connection_pool_exhausted", "traffic_surge"]));
    assert!(out.hypotheses[0].statement.starts_with("Load-driven"));
    assert_eq!(out.actions[0].kind, "raise_pool_limit");
}

#[test]
fn every_playbook_action_is_in_the_closed_vocabulary_and_no_kind_repeats() {
    for p in PLAYBOOK {
        assert!(!p.when.is_empty());
        for t in p.when.iter().chain(p.unless) {
            assert!(
                crate::evidence::failure_mode_description(t).is_some(),
                "unknown tag {t}"
            );
        }
    }
    let out = BuiltinAnalyst::analyse(&input(&[
        "connection_pool_exhausted",
        "deploy_change",
        "timeout",
    ]));
    let kinds: Vec<&str> = out.actions.iter().map(|a| a.kind.as_str()).collect();
    let unique: BTreeSet<&&str> = kinds.iter().collect();
    assert_eq!(unique.len(), kinds.len(), "{kinds:?}");
    assert_eq!(
        kinds
            .iter()
            .filter(|k| **k == "gather_more_evidence")
            .count(),
        1
    );
}

/// A recalled root cause of `incident`, with `marks`.
fn root_cause(incident: &str, marks: Vec<&'static str>) -> crate::memory::recall::Recalled {
    let mut memory =
        crate::domain::memory::MemoryRecord::for_test(7, Some(incident), &["disk_full"]);
    memory.text = "A cron job filled the spool partition".into();
    crate::memory::recall::Recalled {
        memory,
        score: 0.1,
        why: Default::default(),
        marks,
    }
}

#[test]
fn a_weak_match_is_no_precedent_and_lends_no_cause() {
    let mut weak = input(&[]);
    weak.recalled = vec![root_cause("INC-2026-0009", vec!["weak match"])];
    let out = BuiltinAnalyst::analyse(&weak);
    assert!(
        out.hypotheses
            .iter()
            .all(|h| !h.statement.starts_with("Same cause")),
        "{:?}",
        out.hypotheses
    );
    assert!(
        out.hypotheses[0]
            .statement
            .starts_with("No precedent in organizational memory"),
        "{:?}",
        out.hypotheses
    );
    let mut strong = input(&[]);
    strong.recalled = vec![root_cause("INC-2026-0009", Vec::new())];
    let out = BuiltinAnalyst::analyse(&strong);
    assert!(
        out.hypotheses[0]
            .statement
            .starts_with("Same cause as INC-2026-0009")
    );
    assert!(
        out.hypotheses
            .iter()
            .all(|h| !h.statement.starts_with("No precedent"))
    );
}

/// A recalled root cause of `incident` on `service`, sharing `tags` with the query.
fn root_cause_on(incident: &str, service: &str, tags: &[&str]) -> crate::memory::recall::Recalled {
    let mut r = root_cause(incident, Vec::new());
    r.memory.services = vec![service.to_string()];
    r.memory.text = format!("Cause recorded during {incident}");
    r.why.tags = tags.iter().map(|t| t.to_string()).collect();
    r
}

#[test]
fn a_same_service_precedent_comes_before_another_services_cause() {
    // Recall ranked two other services' root causes first: one on wording alone, one sharing a
    // failure mode; this service's own precedent third.
    let mut i = input(&["disk_full"]);
    i.recalled = vec![
        root_cause_on("INC-2026-0003", "search-indexer", &[]),
        root_cause_on("INC-2026-0004", "mail-relay", &["disk_full"]),
        root_cause_on("INC-2026-0005", "payments-api", &["disk_full"]),
    ];
    let out = BuiltinAnalyst::analyse(&i);
    let same: Vec<(&str, Confidence)> = out
        .hypotheses
        .iter()
        .filter(|h| h.statement.starts_with("Same cause as"))
        .map(|h| (&h.statement[..27], h.confidence))
        .collect();
    assert_eq!(
        same,
        vec![
            ("Same cause as INC-2026-0005", Confidence::Medium),
            ("Same cause as INC-2026-0004", Confidence::Low),
        ],
        "{:?}",
        out.hypotheses
    );
}
