//! Unit tests of the LLM analyst: the tolerant parser, error dialects, post-mortem replies,
//! references.

use async_openai::error::OpenAIError;
use serde_json::json;

use super::parse::*;
use super::reply::*;
use super::schema::*;
use super::*;
use crate::domain::RuleSeverity;

#[test]
fn the_tolerant_parser_reads_fenced_and_prose_wrapped_json_and_repairs_escapes() {
    let v = tolerant_json("Sure! ```json\n{\"hypotheses\": [], \"actions\": [{\"kind\": \"restart\"}]}\n``` hope it helps").unwrap();
    assert_eq!(v["actions"][0]["kind"], "restart");
    let v = tolerant_json(
        r#"{"hypotheses": [{"statement": "path C:\data\q is full"}], "actions": []}"#,
    )
    .unwrap();
    assert_eq!(v["hypotheses"][0]["statement"], r"path C:\data\q is full");
    assert!(matches!(
        tolerant_json(r#"{"hypotheses": [{"statement": "cut"#),
        Err(AnalystError::InvalidOutput(_))
    ));
    assert!(tolerant_json("no json here").is_err());
}

#[test]
fn the_tolerant_parser_skips_think_blocks_and_braces_in_prose() {
    let v = tolerant_json(
        "<think>the answer needs {hypotheses}</think>\nUse {braces} like so: {\"actions\": []}",
    )
    .unwrap();
    assert_eq!(v, json!({"actions": []}));
    assert!(matches!(
        tolerant_json("{not json} and then {\"cut\": "),
        Err(AnalystError::InvalidOutput(_))
    ));
}

#[test]
fn error_bodies_are_read_in_each_servers_dialect() {
    let body = |b: &str| {
        // What async-openai leaves when the body does not match its error type.
        let dummy = serde_json::from_str::<()>("x").unwrap_err();
        let e = OpenAIError::JSONDeserialize(dummy, b.to_string());
        Rejection::of(&e).map(|r| (r.status, r.message))
    };
    // llama.cpp: numeric code.
    assert_eq!(
        body(
            r#"{"error": {"code": 400, "message": "bad format", "type": "invalid_request_error"}}"#
        ),
        Some((Some(400), "bad format".to_string()))
    );
    // vLLM: unwrapped.
    assert_eq!(
        body(
            r#"{"object": "error", "message": "too long", "type": "BadRequestError", "code": 400}"#
        ),
        Some((Some(400), "too long".to_string()))
    );
    // Not an error body at all.
    assert_eq!(body("<html>502</html>"), None);
}

#[test]
fn a_post_mortem_reply_keeps_the_facts_and_reads_lessons_in_either_form() {
    use crate::domain::postmortem::{ActionOutcome, draft};
    use crate::domain::{ActionKind, Incident, IncidentId, Severity};
    let now = jiff::Timestamp::UNIX_EPOCH;
    let facts = DraftFacts {
        incident: Incident {
            summary: Some("Rolled back".into()),
            root_cause: Some("A leak".into()),
            ..Incident::resolved_example(
                IncidentId::new(2026, 3),
                "Checkout errors",
                "payments-api",
                Severity::Sev1,
                now,
            )
        },
        failure_modes: vec!["connection_leak".into()],
        observations: vec!["pool exhausted".into()],
        evidence_first_seen: Vec::new(),
        actions: vec![(
            ActionOutcome {
                kind: ActionKind::RaisePoolLimit,
                target: "payments-api".into(),
                outcome: "did_not_resolve".into(),
                note: String::new(),
                dead_end_reason: String::new(),
            },
            None,
        )],
        misleading: vec!["Pool too small".into()],
    };
    let builtin = draft(&facts);
    let v = json!({
        "summary": "It leaked.", "trigger": "", "root_cause": "aliens",
        "what_did_not_work": [{"kind": "reboot_cluster"}],
        "misleading_hypotheses": ["pool too small", "DNS"],
        "lessons": [
            {"always": "ALWAYS: check for leaks", "because": "it leaked", "scope": "", "severity": "CRITICAL"},
            "ALWAYS: alert on pool wait BECAUSE: found late SEVERITY: bogus"
        ]
    });
    let pm = postmortem_from_json(&v, &facts, &builtin).unwrap();
    assert_eq!(pm.summary, "It leaked.");
    assert_eq!(
        pm.trigger, builtin.trigger,
        "empty prose keeps the built-in text"
    );
    assert_eq!(pm.root_cause, "A leak");
    assert_eq!(pm.what_did_not_work, builtin.what_did_not_work);
    assert_eq!(pm.misleading_hypotheses, ["Pool too small", "DNS"]);
    assert_eq!(pm.lessons[0].always, "check for leaks");
    assert_eq!(pm.lessons[0].severity, RuleSeverity::Critical);
    assert_eq!(pm.lessons[0].scope, "payments-api; connection_leak");
    assert_eq!(pm.lessons[1].always, "alert on pool wait");
    assert_eq!(pm.lessons[1].because, "found late");
    assert_eq!(
        pm.lessons[1].severity,
        RuleSeverity::Critical,
        "SEV1 default"
    );
    assert!(postmortem_from_json(&json!({"foo": 1}), &facts, &builtin).is_err());
    let schema = postmortem_schema();
    assert_eq!(
        schema["required"].as_array().unwrap().len(),
        schema["properties"].as_object().unwrap().len(),
        "strict: every property required"
    );
}

#[test]
fn references_parse_and_incident_ids_are_not_record_ids() {
    assert_eq!(parse_ref("OBS-12"), Some(12));
    assert_eq!(parse_ref("MEM-40"), Some(40));
    assert_eq!(parse_ref("7"), Some(7));
    assert_eq!(parse_ref("INC-2026-0001"), None);
    assert_eq!(parse_ref("nonsense"), None);
}
