use super::*;

#[test]
fn lessons_typed_in_a_browser_textarea_parse_with_crlf_line_endings() {
    let text = "ALWAYS: drain the queue before a schema change\r\nBECAUSE: writes piled up\r\n\
                    SCOPE: billing\r\nSEVERITY: high\r\n\r\nALWAYS: page the owner\r\n\
                    BECAUSE: nobody knew\r\nSCOPE: all\r\nSEVERITY: low";
    let rules = Rule::parse_blocks(text).expect("two lessons");
    assert_eq!(rules.len(), 2);
    assert_eq!(rules[0].always, "drain the queue before a schema change");
    assert_eq!(rules[0].severity, RuleSeverity::High);
    assert_eq!(rules[1].because, "nobody knew");
    assert_eq!(super::super::text::unix_newlines("a\r\nb\rc"), "a\nb\nc");
}

#[test]
fn there_are_at_least_15_durable_kinds_and_each_has_a_lifetime() {
    let durable: Vec<_> = MemoryKind::ALL.iter().filter(|k| k.is_durable()).collect();
    assert!(durable.len() >= 15, "{durable:?}");
    assert_eq!(
        MemoryKind::parse("remediation_failure").unwrap(),
        MemoryKind::RemediationFailure
    );
    assert!(MemoryKind::parse("gossip").is_err());
}

#[test]
fn notes_rules_runbooks_and_remediation_failures_never_decay() {
    for k in [
        MemoryKind::ServiceFact,
        MemoryKind::Dependency,
        MemoryKind::Lesson,
        MemoryKind::Runbook,
        MemoryKind::RemediationFailure,
        MemoryKind::RejectedRecommendation,
    ] {
        assert_eq!(k.recency_weight(10_000.0), 1.0, "{k}");
        assert!(!k.is_stale(10_000.0), "{k}");
    }
    let w = MemoryKind::IncidentSummary.recency_weight(180.0);
    assert!((w - 0.5).abs() < 1e-9, "{w}");
    assert_eq!(MemoryKind::IncidentSummary.recency_weight(100_000.0), 0.25);
}

#[test]
fn confidence_is_capped_by_sources() {
    let obs = SourceInfo {
        epistemic_type: EpistemicType::Observation,
        kind: MemoryKind::Observation,
        age_days: 0.0,
        contradicted_by: None,
    };
    let old_cause = SourceInfo {
        epistemic_type: EpistemicType::Inference,
        kind: MemoryKind::RootCause,
        age_days: 400.0,
        contradicted_by: None,
    };
    let fresh_cause = SourceInfo {
        age_days: 10.0,
        ..old_cause
    };
    assert_eq!(
        confidence_ceiling(Confidence::High, &[obs]),
        Confidence::High
    );
    assert_eq!(
        confidence_ceiling(Confidence::High, &[fresh_cause]),
        Confidence::Low,
        "no observation ⇒ low"
    );
    assert_eq!(
        confidence_ceiling(Confidence::High, &[obs, old_cause]),
        Confidence::Medium,
        "stale ⇒ one down"
    );
    assert_eq!(
        confidence_ceiling(Confidence::Medium, &[obs, old_cause]),
        Confidence::Low
    );
    let denied_cause = SourceInfo {
        contradicted_by: Some(7),
        ..fresh_cause
    };
    assert_eq!(
        confidence_ceiling(Confidence::High, &[obs, denied_cause]),
        Confidence::Medium,
        "contradicted ⇒ one down"
    );
}

#[test]
fn citation_rules_refuse_unsourced_inferences_and_decision_only_decisions() {
    use EpistemicType::*;
    assert!(check_citations(Inference, &[]).is_err());
    assert!(check_citations(Inference, &[Observation]).is_ok());
    assert!(check_citations(Decision, &[Decision, Decision]).is_err());
    assert!(check_citations(Decision, &[Decision, Inference]).is_ok());
    assert!(check_citations(Observation, &[]).is_ok());
}

#[test]
fn a_rule_renders_in_always_because_scope_severity_form() {
    let r = Rule {
        always: "check for a leak".into(),
        because: "INC-2026-0001".into(),
        scope: "payments-api".into(),
        severity: RuleSeverity::High,
    };
    assert_eq!(
        r.text(),
        "ALWAYS: check for a leak\nBECAUSE: INC-2026-0001\nSCOPE: payments-api\nSEVERITY: high"
    );
}
