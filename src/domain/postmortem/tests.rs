use super::*;
use crate::domain::IncidentId;

#[test]
fn durations_are_never_negative_even_with_skewed_clocks() {
    let t = |s: &str| Some(s.parse::<jiff::Timestamp>().unwrap());
    let i = Impact {
        started_at: t("2026-11-29T10:30:00Z"),
        detected_at: t("2026-11-29T10:00:00Z"),
        resolved_at: t("2026-11-29T09:00:00Z"),
        ..Default::default()
    }
    .with_durations();
    assert_eq!((i.time_to_detect_secs, i.time_to_resolve_secs), (0, 0));
    let i = Impact {
        started_at: t("2026-11-29T10:00:00Z"),
        detected_at: t("2026-11-29T10:12:00Z"),
        resolved_at: t("2026-11-29T11:00:00Z"),
        ..Default::default()
    }
    .with_durations();
    assert_eq!((i.time_to_detect_secs, i.time_to_resolve_secs), (720, 3600));
}

#[test]
fn the_draft_turns_a_failed_action_into_a_rule_and_the_markdown_has_every_section() {
    let now: jiff::Timestamp = "2026-11-29T10:00:00Z".parse().unwrap();
    let incident = Incident {
        summary: Some("Rolled back".into()),
        root_cause: Some("A connection leak in the retry path. More text.".into()),
        ..Incident::resolved_example(
            IncidentId::new(2026, 7),
            "Checkout errors",
            "payments-api",
            Severity::Sev2,
            now,
        )
    };
    let facts = DraftFacts {
        incident: incident.clone(),
        failure_modes: vec!["connection_pool_exhausted".into()],
        observations: vec!["ERROR template seen 12 times".into()],
        evidence_first_seen: vec![("OBS-1".into(), "2026-11-29T09:40:00Z".parse().unwrap())],
        actions: vec![(
            ActionOutcome {
                kind: ActionKind::RaisePoolLimit,
                target: "payments-api".into(),
                outcome: "did_not_resolve".into(),
                note: "maxed again".into(),
                dead_end_reason: String::new(),
            },
            None,
        )],
        misleading: vec!["Pool too small".into()],
    };
    let pm = draft(&facts);
    assert_eq!(pm.impact.time_to_detect_secs, 1200);
    assert_eq!(
        pm.lessons[0].always,
        "Before you raise the connection-pool limit on payments-api, rule out the root cause \
             found in INC-2026-0007: A connection leak in the retry path. More text"
    );
    assert!(
        pm.lessons[0].because.contains("INC-2026-0007")
            && pm.lessons[0].because.contains("maxed again")
    );
    assert_eq!(pm.lessons[0].severity, RuleSeverity::High);
    // Nothing in the evidence says what set it off: the trigger is left for a person to write
    // (no prompt text that would be saved as the trigger if nobody edits it).
    assert_eq!(pm.trigger, "");
    assert!(!pm.has_trigger());
    let deploy = draft(&DraftFacts {
        failure_modes: vec!["deploy_change".into()],
        ..facts.clone()
    });
    assert!(deploy.has_trigger(), "{}", deploy.trigger);
    assert_eq!(deploy.known_trigger(), Some(deploy.trigger.as_str()));
    let unknown = Postmortem {
        trigger: "unknown, nothing changed that day".into(),
        ..pm.clone()
    };
    assert!(
        unknown.has_trigger(),
        "a person may confirm that it is unknown"
    );
    assert_eq!(
        unknown.known_trigger(),
        None,
        "but memory learns nothing from it"
    );
    let md = pm.to_markdown(&incident);
    // Every table header cell names its column (an empty one is an accessibility error).
    assert!(md.contains("| moment | instant |"), "{md}");
    assert!(!md.contains("| |"), "{md}");
    for section in [
        "## Summary",
        "## Impact",
        "## Root cause",
        "## Trigger",
        "## Contributing factors",
        "## What worked",
        "## What did NOT work",
        "## Misleading hypotheses",
        "## Lessons",
        "## Action items",
        "**ALWAYS:**",
        "**BECAUSE:**",
        "**SCOPE:**",
        "**SEVERITY:**",
    ] {
        assert!(md.contains(section), "{section}");
    }
}

#[test]
fn log_template_placeholders_keep_their_stars_in_the_markdown() {
    let facts = facts_with_root_cause("Pool <*> was full");
    let mut pm = draft(&facts);
    pm.symptoms = vec!["lease <*> expired after <*> ms".into()];
    let md = pm.to_markdown(&facts.incident);
    assert!(
        md.contains("- lease &lt;\\*&gt; expired after &lt;\\*&gt; ms"),
        "{md}"
    );
    assert!(md.contains("Pool &lt;\\*&gt; was full"), "{md}");
}

#[test]
fn whole_sentences_keep_version_numbers_and_host_names_whole() {
    assert_eq!(
        whole_sentences(
            "Build 7.3.12 shipped a bad route table to edge.lb-2. It was reverted.",
            300
        ),
        "Build 7.3.12 shipped a bad route table to edge.lb-2. It was reverted"
    );
    assert_eq!(
        whole_sentences(
            "Disk quota hit on the\r\nqueue host! Nothing else here.",
            30
        ),
        "Disk quota hit on the queue host!"
    );
}

fn facts_with_root_cause(root_cause: &str) -> DraftFacts {
    let now: jiff::Timestamp = "2026-10-02T08:00:00Z".parse().unwrap();
    DraftFacts {
        incident: Incident {
            summary: Some("Reverted the index build".into()),
            root_cause: Some(root_cause.into()),
            ..Incident::resolved_example(
                IncidentId::new(2026, 31),
                "Search results time out",
                "search-api",
                Severity::Sev3,
                now,
            )
        },
        failure_modes: vec!["slow_query".into()],
        observations: Vec::new(),
        evidence_first_seen: Vec::new(),
        actions: vec![(
            ActionOutcome {
                kind: ActionKind::ScaleOut,
                target: "search-api".into(),
                outcome: "did_not_resolve".into(),
                note: "latency\r\nunchanged".into(),
                dead_end_reason: String::new(),
            },
            None,
        )],
        misleading: vec![
            "Search nodes are overloaded by a traffic spike".into(),
            "Index build 5.0.3 dropped the composite index on tenant_id".into(),
        ],
    }
}

#[test]
fn lessons_and_action_items_keep_negations_clauses_and_version_strings_whole() {
    let pm = draft(&facts_with_root_cause(
        "A traffic spike was NOT the cause; index build 5.0.3 dropped the composite index \
             on tenant_id, so every query scanned the table.",
    ));
    let whole = "A traffic spike was NOT the cause; index build 5.0.3 dropped the composite \
                     index on tenant_id, so every query scanned the table";
    let texts: Vec<&str> = pm
        .lessons
        .iter()
        .flat_map(|l| [l.always.as_str(), l.because.as_str()])
        .chain(pm.action_items.iter().map(String::as_str))
        .collect();
    for t in &texts {
        assert!(!t.contains(" 5\n") && !t.ends_with(" 5"), "{t}");
    }
    assert!(
        pm.lessons[0].always.ends_with(whole),
        "{}",
        pm.lessons[0].always
    );
    // One rule quotes it, once (issue #49): not a second rule and its BECAUSE again.
    assert_eq!(pm.lessons.len(), 1, "{:?}", pm.lessons);
    assert!(
        !pm.lessons[0].because.contains(whole),
        "{}",
        pm.lessons[0].because
    );
    assert!(
        pm.action_items[0].ends_with(whole),
        "{}",
        pm.action_items[0]
    );
    // A negated finding is never spliced into a template as if it were a finding.
    for t in &texts {
        assert!(!t.contains("check for a traffic spike"), "{t}");
        assert!(!t.contains("cause is not a traffic spike was"), "{t}");
    }
    assert!(
        pm.lessons[0].because.ends_with(": latency unchanged"),
        "{}",
        pm.lessons[0].because
    );
}

#[test]
fn a_hypothesis_that_names_the_confirmed_root_cause_is_not_misleading() {
    let pm = draft(&facts_with_root_cause(
        "A traffic spike was NOT the cause; index build 5.0.3 dropped the composite index \
             on tenant_id.",
    ));
    assert_eq!(
        pm.misleading_hypotheses,
        vec!["Search nodes are overloaded by a traffic spike".to_string()],
        "the denied clause does not make the spike hypothesis right"
    );
    assert!(names_root_cause(
        "Connection pool exhausted: callers wait for database connections (pool too small, \
             a leak, or slow queries holding connections)",
        "Release 2.14.1 leaked a DB connection per retry, exhausting the pool"
    ));
    assert!(!names_root_cause(
        "Load-driven pool exhaustion: the pool is too small for the current request rate",
        "Release 2.14.1 leaked a DB connection per retry, exhausting the pool"
    ));
    assert!(!names_root_cause(
        "Pool too small",
        "The pool size was not the cause"
    ));
}

#[test]
fn every_text_field_of_a_post_mortem_gets_unix_line_endings() {
    let mut pm = draft(&facts_with_root_cause("Index dropped.\r\nSecond line."));
    pm.summary = "one\r\ntwo\rthree".into();
    pm.trigger = "a\r\nb".into();
    pm.impact.description = "x\r\ny".into();
    pm.symptoms = vec!["s\r\nt".into()];
    pm.lessons[0].scope = "search-api\r\n".into();
    let pm = pm.with_unix_newlines();
    let json = serde_json::to_string(&pm).unwrap();
    assert!(!json.contains("\\r"), "{json}");
    assert_eq!(pm.summary, "one\ntwo\nthree");
    assert_eq!(pm.root_cause, "Index dropped.\nSecond line.");
}

#[test]
fn lessons_quote_the_root_cause_once_and_render_on_separate_lines() {
    let cause = "Index build 5.0.3 dropped the composite index on tenant_id";
    let mut facts = facts_with_root_cause(cause);
    facts.actions.push((
        ActionOutcome {
            kind: ActionKind::RestartService,
            target: "search-api".into(),
            outcome: "made_worse".into(),
            note: String::new(),
            dead_end_reason: String::new(),
        },
        None,
    ));
    let pm = draft(&facts);
    let all: String = pm
        .lessons
        .iter()
        .map(|l| format!("{} {}", l.always, l.because))
        .collect();
    assert_eq!(all.matches(cause).count(), 1, "{:?}", pm.lessons);
    assert_eq!(pm.lessons.len(), 1, "{:?}", pm.lessons);
    assert!(
        pm.lessons[0].always.starts_with(
            "Before you scale out (add instances) or restart the service on search-api"
        ),
        "{}",
        pm.lessons[0].always
    );
    assert!(
        pm.lessons[0]
            .because
            .contains("restart the service made it worse"),
        "{}",
        pm.lessons[0].because
    );
    // Without a failed action: one rule to check for the cause, its BECAUSE not repeating it.
    let mut worked = facts_with_root_cause(cause);
    worked.actions.clear();
    let pm = draft(&worked);
    assert_eq!(pm.lessons.len(), 1);
    assert!(pm.lessons[0].always.ends_with(cause));
    assert_eq!(
        pm.lessons[0].because,
        "It was the confirmed root cause of INC-2026-0031"
    );

    // The export: each part of a lesson ends in a hard line break, so a renderer does not run
    // them together into one line.
    let md = pm.to_markdown(&worked.incident);
    let lesson = md.split("## Lessons\n\n").nth(1).unwrap();
    let lines: Vec<&str> = lesson.lines().take(4).collect();
    assert!(
        lines[0].starts_with("- **ALWAYS:** ") && lines[0].ends_with('\\'),
        "{lesson}"
    );
    assert!(
        lines[1].starts_with("  **BECAUSE:** ") && lines[1].ends_with('\\'),
        "{lesson}"
    );
    assert!(
        lines[2].starts_with("  **SCOPE:** ") && lines[2].ends_with('\\'),
        "{lesson}"
    );
    assert!(lines[3].starts_with("  **SEVERITY:** "), "{lesson}");
}
