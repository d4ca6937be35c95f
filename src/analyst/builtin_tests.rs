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
