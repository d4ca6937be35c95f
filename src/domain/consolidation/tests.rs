use super::*;

fn words(s: &str) -> BTreeSet<String> {
    s.split_whitespace().map(str::to_lowercase).collect()
}

fn lesson(id: i64, incident: &str, always: &str, scope: &str, severity: RuleSeverity) -> Item {
    Item {
        id,
        kind: MemoryKind::Lesson,
        incident_id: incident.into(),
        services: vec!["payments".into()],
        failure_modes: vec!["connection_pool_exhausted".into()],
        action_kind: ActionKind::RaisePoolLimit,
        rule: Some(Rule {
            always: always.into(),
            because: format!("During {incident} the limit was raised and it filled again"),
            scope: scope.into(),
            severity,
        }),
        text: always.into(),
        severity,
        vector: None,
        words: words(always),
        merged: false,
    }
}

const LEAK: &str = "look for leaked connections before raising the pool limit";
const LEAK2: &str = "look for leaked connections first before raising the pool limit again";

#[test]
fn near_duplicate_lessons_of_different_incidents_form_one_group() {
    let items = vec![
        lesson(3, "INC-1", LEAK, "payments", RuleSeverity::Medium),
        lesson(9, "INC-2", LEAK2, "payments, checkout", RuleSeverity::High),
        lesson(
            5,
            "INC-3",
            "page the database owner when replicas lag",
            "payments",
            RuleSeverity::Low,
        ),
    ];
    let g = groups(&items);
    assert_eq!(g, vec![vec![0, 1]]);
}

#[test]
fn the_same_incident_another_action_kind_or_no_shared_failure_mode_never_group() {
    let a = lesson(1, "INC-1", LEAK, "payments", RuleSeverity::Medium);
    let same_incident = lesson(2, "INC-1", LEAK2, "payments", RuleSeverity::Medium);
    assert!(groups(&[a.clone(), same_incident]).is_empty());
    let mut other_action = lesson(2, "INC-2", LEAK2, "payments", RuleSeverity::Medium);
    other_action.action_kind = ActionKind::RestartService;
    assert!(groups(&[a.clone(), other_action]).is_empty());
    let mut other_mode = lesson(2, "INC-2", LEAK2, "payments", RuleSeverity::Medium);
    other_mode.failure_modes = vec!["disk_full".into()];
    assert!(groups(&[a.clone(), other_mode]).is_empty());
    let mut failure = lesson(2, "INC-2", LEAK2, "payments", RuleSeverity::Medium);
    failure.kind = MemoryKind::RemediationFailure;
    assert!(
        groups(&[a, failure]).is_empty(),
        "lessons merge with lessons"
    );
}

#[test]
fn vectors_decide_when_both_have_them_and_the_threshold_is_inclusive() {
    let mut a = lesson(1, "INC-1", "alpha", "payments", RuleSeverity::Medium);
    let mut b = lesson(
        2,
        "INC-2",
        "entirely different words",
        "payments",
        RuleSeverity::Medium,
    );
    a.vector = Some(vec![1.0, 0.0]);
    // cos = 0.8 ≥ 0.60: near, though no word is shared.
    b.vector = Some(vec![0.8, 0.6]);
    assert_eq!(groups(&[a.clone(), b.clone()]), vec![vec![0, 1]]);
    // cos = 0.28: not near.
    b.vector = Some(vec![0.28, 0.96]);
    assert!(groups(&[a, b]).is_empty());
    assert!(Likeness::Cosine(SIMILARITY_THRESHOLD).is_near(MemoryKind::Lesson));
    assert!(!Likeness::Words(WORD_OVERLAP_THRESHOLD - 0.01).is_near(MemoryKind::Lesson));
    // Failures share their record's opening words: a cosine that groups lessons does not
    // group them.
    let failure = MemoryKind::RemediationFailure;
    assert!(!Likeness::Cosine(0.7).is_near(failure));
    assert!(Likeness::Cosine(0.7).is_near(MemoryKind::Lesson));
    assert!(Likeness::Cosine(FAILURE_SIMILARITY_THRESHOLD).is_near(failure));
}

#[test]
fn a_group_is_a_clique_not_a_chain() {
    let mut a = lesson(1, "INC-1", "a", "payments", RuleSeverity::Medium);
    let mut b = lesson(2, "INC-2", "b", "payments", RuleSeverity::Medium);
    let mut c = lesson(3, "INC-3", "c", "payments", RuleSeverity::Medium);
    a.vector = Some(vec![1.0, 0.0]);
    b.vector = Some(vec![0.8, 0.6]); // near a
    c.vector = Some(vec![0.28, 0.96]); // near b (0.8), not near a (0.28)
    let g = groups(&[a, b, c]);
    assert_eq!(g, vec![vec![0, 1]], "c is like b but not like a");
}

#[test]
fn the_merged_rule_cites_every_incident_unions_the_scope_and_takes_the_highest_severity() {
    let a = lesson(3, "INC-1", LEAK, "payments", RuleSeverity::Medium);
    let b = lesson(9, "INC-2", LEAK2, "payments; checkout", RuleSeverity::High);
    let m = merge(&[&b, &a]);
    assert_eq!(m.rule.always, LEAK2, "the most severe source's imperative");
    assert_eq!(m.rule.severity, RuleSeverity::High);
    assert_eq!(m.rule.scope, "payments, checkout");
    assert!(
        m.rule
            .because
            .starts_with("Learned in 2 incidents (INC-1, INC-2): INC-1 (MEM-3): ")
    );
    assert!(m.rule.because.contains("INC-2 (MEM-9): During INC-2"));
    assert_eq!(
        m.incident_id, "INC-2",
        "grounded in the newest source's incident"
    );
    assert_eq!(m.action_kind, ActionKind::RaisePoolLimit);
    assert_eq!(
        m.consolidation
            .sources
            .iter()
            .map(|s| s.id)
            .collect::<Vec<_>>(),
        vec![3, 9]
    );
    assert_eq!(m.consolidation.incidents, vec!["INC-1", "INC-2"]);
    // A scope for all wins the union.
    let c = lesson(11, "INC-3", LEAK, "all", RuleSeverity::Critical);
    let m = merge(&[&a, &c]);
    assert_eq!(m.rule.scope, "all");
    assert_eq!(m.rule.severity, RuleSeverity::Critical);
}

#[test]
fn failures_merge_into_a_rule_to_confirm_the_cause_and_long_statements_are_cut() {
    let failure = |id: i64, incident: &str, importance: i64| Item {
        id,
        kind: MemoryKind::RemediationFailure,
        incident_id: incident.into(),
        services: vec!["search".into()],
        failure_modes: vec!["memory_pressure".into()],
        action_kind: ActionKind::ScaleOut,
        rule: None,
        text: "x".repeat(MAX_CITED_CHARS + 50),
        severity: severity_of_importance(importance),
        vector: None,
        words: BTreeSet::new(),
        merged: false,
    };
    let m = merge(&[&failure(4, "INC-7", 2), &failure(8, "INC-9", 3)]);
    assert_eq!(
        m.rule.always,
        "Confirm the cause before scale_out on memory_pressure: it failed in 2 incidents"
    );
    assert_eq!(m.rule.scope, "search, memory_pressure");
    assert_eq!(m.rule.severity, RuleSeverity::High);
    assert!(
        m.rule
            .because
            .contains(&format!("{}…", "x".repeat(MAX_CITED_CHARS - 1)))
    );
}

#[test]
fn the_origin_is_the_sorted_source_ids() {
    assert_eq!(origin(&[9, 3, 12]), "consolidation:3,9,12");
    assert_eq!(origin(&[12, 9, 3]), origin(&[3, 9, 12]));
}

#[test]
fn services_over_the_cap_are_named_and_their_groups_queued_first() {
    let standing: BTreeMap<String, usize> = [("payments".to_string(), 23), ("search".into(), 4)]
        .into_iter()
        .collect();
    assert_eq!(over_cap(&["search".into()], &standing, 20), None);
    assert_eq!(
        over_cap(&["payments".into()], &standing, 23),
        None,
        "at the cap is not over"
    );
    assert_eq!(
        over_cap(&["search".into(), "payments".into()], &standing, 20),
        Some(OverCap {
            service: "payments".into(),
            standing: 23,
            cap: 20
        })
    );
    let a = lesson(1, "INC-1", LEAK, "payments", RuleSeverity::Medium);
    let mut under = merge(&[&a]);
    under.rule.always = "under".into();
    let mut over = merge(&[&a]);
    over.rule.always = "over".into();
    over.consolidation.over_cap = over_cap(&["payments".into()], &standing, 20);
    let mut queued = vec![under.clone(), over, under];
    queue_order(&mut queued);
    let order: Vec<&str> = queued.iter().map(|m| m.rule.always.as_str()).collect();
    assert_eq!(order, vec!["over", "under", "under"]);
}

/// A merged rule takes in only records newer than itself (issue #57, 8): the records it was
/// judged against when it was proposed do not make a new group with it on a rerun.
#[test]
fn a_merged_rule_groups_only_with_newer_records() {
    let merged = Item {
        merged: true,
        ..lesson(10, "INC-3", LEAK, "payments", RuleSeverity::High)
    };
    let older = lesson(5, "INC-1", LEAK, "payments", RuleSeverity::High);
    let newer = lesson(12, "INC-4", LEAK, "payments", RuleSeverity::High);
    assert!(groups(&[older, merged.clone()]).is_empty());
    assert_eq!(groups(&[newer, merged]), vec![vec![1, 0]]);
}
