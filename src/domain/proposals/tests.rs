use super::*;

fn reflection(verdict: &str, instead: Vec<Alternative>) -> Reflection {
    Reflection {
        incident_id: "INC-2031-0042".into(),
        service: "orders".into(),
        action_kind: ActionKind::ScaleOut,
        target: "orders".into(),
        verdict: verdict.into(),
        note: "queue kept growing".into(),
        failure_modes: vec!["queue_backlog".into()],
        instead,
    }
}

#[test]
fn a_reflection_with_alternatives_becomes_a_rule_naming_them_and_the_incident() {
    let r = reflection(
        "did_not_resolve",
        vec![Alternative {
            kind: ActionKind::RollbackDeploy,
            source: "resolved INC-2031-0007 (MEM-9)".into(),
        }],
    )
    .rule();
    assert_eq!(
        r.always,
        "On orders with queue_backlog, consider rollback_deploy before scale_out"
    );
    assert_eq!(
        r.because,
        "During INC-2031-0042 scale_out on orders did not resolve it (queue kept growing); \
             rollback_deploy: resolved INC-2031-0007 (MEM-9)"
    );
    assert_eq!(r.scope, "orders, queue_backlog");
    assert_eq!(r.severity, RuleSeverity::Medium);
}

#[test]
fn a_reflection_without_alternatives_says_to_confirm_the_cause_and_made_worse_is_high() {
    let r = reflection("made_worse", vec![]).rule();
    assert_eq!(
        r.always,
        "Confirm the cause before scale_out on orders with queue_backlog; it is a recorded dead end"
    );
    assert_eq!(
        r.because,
        "During INC-2031-0042 scale_out on orders made it worse (queue kept growing)"
    );
    assert_eq!(r.severity, RuleSeverity::High);
}

fn known(id: i64, steps: &[&str], version: i64) -> KnownRunbook {
    KnownRunbook {
        id,
        title: format!("runbook {id}"),
        summary: String::new(),
        steps: steps.iter().map(|s| s.to_string()).collect(),
        common_causes: vec!["a stuck consumer".into()],
        version,
    }
}

#[test]
fn steps_name_action_kinds_by_name_label_or_phrase() {
    assert_eq!(
        step_kinds("First roll back the release"),
        vec![ActionKind::RollbackDeploy]
    );
    assert_eq!(
        step_kinds("flush_cache on edge"),
        vec![ActionKind::FlushCache]
    );
    assert!(step_kinds("look at the dashboards").is_empty());
}

#[test]
fn a_runbook_covering_every_worked_action_needs_no_draft() {
    let worked = [ActionKind::FlushCache];
    let found = match_runbooks(&worked, &[known(5, &["Flush the cache"], 1)]);
    assert_eq!(found, RunbookMatch::Covered(5));
    assert_eq!(
        draft_runbook(
            "INC-1",
            "edge",
            "x",
            &[(ActionKind::FlushCache, "edge".into())],
            found
        ),
        None
    );
}

#[test]
fn a_partly_matching_runbook_gets_a_new_version_with_the_missing_steps_appended() {
    let worked = vec![
        (ActionKind::FlushCache, "edge".to_string()),
        (ActionKind::DrainNode, "edge-3".to_string()),
    ];
    let kinds: Vec<ActionKind> = worked.iter().map(|w| w.0).collect();
    let found = match_runbooks(
        &kinds,
        &[
            known(5, &["Flush the cache"], 2),
            known(6, &["Page the owner"], 1),
        ],
    );
    let d = draft_runbook(
        "INC-2031-0050",
        "edge",
        "Stale entries piled up. The node was wedged.",
        &worked,
        found,
    )
    .expect("a new version");
    assert_eq!(d.replaces, Some(5));
    assert_eq!(d.version, 3);
    assert_eq!(d.covered, 1);
    assert_eq!(
        d.steps,
        vec![
            "Flush the cache".to_string(),
            "Drain the node on edge-3 (drain_node)".to_string()
        ]
    );
    assert_eq!(
        d.common_causes,
        vec![
            "a stuck consumer".to_string(),
            "Stale entries piled up".to_string(),
            "The node was wedged".to_string()
        ]
    );
}

#[test]
fn no_matching_runbook_gives_a_new_one_with_the_worked_steps_in_order() {
    let worked = vec![
        (ActionKind::GatherMoreEvidence, "billing".to_string()),
        (ActionKind::RollbackDeploy, "billing".to_string()),
    ];
    let d = draft_runbook(
        "INC-9",
        "billing",
        "A bad migration.",
        &worked,
        RunbookMatch::None,
    )
    .expect("a new runbook");
    assert_eq!(
        d.title,
        "billing: gather_more_evidence, then rollback_deploy"
    );
    assert_eq!(d.version, 1);
    assert_eq!(d.replaces, None);
    assert_eq!(
        d.steps,
        vec![
            "Gather more evidence on billing (gather_more_evidence)".to_string(),
            "Roll back the last deploy on billing (rollback_deploy)".to_string()
        ]
    );
    assert_eq!(d.common_causes, vec!["A bad migration".to_string()]);
}

#[test]
fn answers_to_the_grade_question_are_yes_or_no() {
    assert!(parse_grade("Yes").unwrap());
    assert!(!parse_grade("false").unwrap());
    assert_eq!(
        parse_grade("maybe").unwrap_err().field,
        "top_hypothesis_matched"
    );
}

#[test]
fn common_causes_keep_a_version_number_in_one_cause() {
    assert_eq!(
        common_causes("The 2.14.1 config dropped the pool to 5. Nobody noticed for 40 min."),
        [
            "The 2.14.1 config dropped the pool to 5",
            "Nobody noticed for 40 min"
        ]
    );
}
