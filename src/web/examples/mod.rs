//! The examples of the OpenAPI document: one function per request or response body, written as
//! an on-call engineer would see them (a checkout latency incident, its evidence, a lesson).
//! `#[utoipa::path(…, example = json!(examples::incident()))]` refers to them, so a shape shared
//! by several operations (an incident, a memory record) is written once. A test sends every
//! request example to the running app and validates the answer against the documented schema.
//!
//! A catalogue: one short, independent function per example body, in the order of the API;
//! memory, integrations and alert webhooks are in [`memory_and_alerts`].

use serde_json::{Value, json};

mod chat;
mod memory_and_alerts;
pub use chat::{
    chat_channel, chat_channel_detail, chat_channel_list, chat_test_outcome, create_chat_channel,
    update_chat_channel,
};
pub use memory_and_alerts::{
    alertmanager, create_integration, create_memory, grafana, incident_alerts, integration,
    integration_created, integration_list, integration_updated, memory_detail, memory_list,
    memory_record, opsgenie, pagerduty, recall, retract, retracted_record, supersede,
    superseded_record, update_integration, webhook_accepted,
};

/// The incident every example is about.
pub const INCIDENT: &str = "INC-2026-0042";

/// `POST /api/v1/incidents`.
pub fn create_incident() -> Value {
    json!({
        "title": "Checkout p99 latency above 2 s",
        "service": "checkout",
        "severity": "SEV2",
        "description": "Since 14:02 UTC the checkout p99 is 2.4 s (normally 350 ms); \
                        card payments time out for about 8 % of customers."
    })
}

/// An incident as the API returns it, in `state`, at `version`.
pub fn incident_in(state: &str, version: i64) -> Value {
    let resolved = state != "investigating";
    json!({
        "id": INCIDENT,
        "title": "Checkout p99 latency above 2 s",
        "service": "checkout",
        "severity": "SEV2",
        "description": "Since 14:02 UTC the checkout p99 is 2.4 s (normally 350 ms); \
                        card payments time out for about 8 % of customers.",
        "state": state,
        "opened_by": "rita",
        "opened_at": "2026-11-29T14:06:10Z",
        "updated_at": "2026-11-29T15:12:44Z",
        "resolved_at": if resolved { json!("2026-11-29T15:12:44Z") } else { Value::Null },
        "summary": if resolved {
            json!("Connection pool of checkout-db exhausted by a leaked transaction; the deploy was rolled back.")
        } else { Value::Null },
        "root_cause": if resolved {
            json!("Release 2026.11.29-1 left a transaction open on the refund path, holding pool connections.")
        } else { Value::Null },
        "version": version
    })
}

/// A newly opened incident (`201` of `POST /api/v1/incidents`).
pub fn incident() -> Value {
    incident_in("investigating", 1)
}

/// A resolved incident (`POST …/resolve`).
pub fn resolved_incident() -> Value {
    incident_in("resolved", 6)
}

/// An incident back in investigation (`POST …/reopen`).
pub fn reopened_incident() -> Value {
    let mut v = incident_in("investigating", 7);
    v["resolved_at"] = json!("2026-11-29T15:12:44Z");
    v
}

/// `GET /api/v1/incidents`.
pub fn incident_list() -> Value {
    json!({"incidents": [incident()], "next": "MjAyNi0xMS0yOVQxNDowNjoxMFp8NDI"})
}

/// `GET /api/v1/incidents/{id}`.
pub fn incident_with_timeline() -> Value {
    let mut v = incident_in("investigating", 2);
    v["timeline"] = json!([
        {"id": 311, "at": "2026-11-29T14:06:10Z", "actor": "rita", "kind": "opened",
         "detail": "opened SEV2 on checkout"},
        {"id": 312, "at": "2026-11-29T14:08:31Z", "actor": "rita", "kind": "evidence_added",
         "detail": "logs from checkout-7f9c.log: 3 observations"}
    ]);
    v
}

/// `POST …/resolve`.
pub fn resolve() -> Value {
    json!({
        "summary": "Connection pool of checkout-db exhausted by a leaked transaction; the deploy was rolled back.",
        "root_cause": "Release 2026.11.29-1 left a transaction open on the refund path, holding pool connections."
    })
}

/// The optional body of reopen, investigate, approve, draft, confirm and learn: the incident
/// version the caller saw (a stale one is a 409).
pub fn version() -> Value {
    json!({"version": 6})
}

/// The body of `POST …/postmortem/confirm`.
pub fn confirm_body() -> Value {
    json!({"version": 6, "postmortem_version": 2})
}

/// `GET /api/v1/me`.
pub fn me() -> Value {
    json!({"id": 3, "name": "rita", "role": "responder", "time_zone": "Europe/Berlin"})
}

/// `POST …/evidence` as JSON.
pub fn evidence() -> Value {
    json!({
        "kind": "logs",
        "source": "checkout-7f9c.log",
        "content": "2026-11-29T14:05:12Z ERROR HikariPool-1 - Connection is not available, request timed out after 30000ms.\n\
                    2026-11-29T14:05:13Z ERROR HikariPool-1 - Connection is not available, request timed out after 30000ms.\n\
                    2026-11-29T14:05:15Z WARN  checkout POST /api/checkout took 2412 ms"
    })
}

/// `POST …/evidence` as raw text (`?kind=logs&source=…`).
pub fn evidence_text() -> Value {
    json!(
        "2026-11-29T14:07:40Z ERROR HikariPool-1 - Connection is not available, request timed out after 30000ms."
    )
}

/// An observation record extracted from the example logs.
pub fn observation() -> Value {
    json!({
        "id": 101, "kind": "observation", "epistemic_type": "observation",
        "text": "HikariPool-1 - Connection is not available, request timed out after <NUM>ms. (2 lines)",
        "services": ["checkout"], "failure_modes": ["connection_pool_exhausted", "timeout"],
        "action_kind": null, "target": null, "incident_id": INCIDENT,
        "validation": "confirmed", "confidence": null, "importance": 3, "rule": null,
        "author": "rita", "created_at": "2026-11-29T14:08:31Z", "last_recalled_at": null,
        "recall_count": 0, "evidence_count": 1, "superseded_by": null, "sources": [],
        "data": {"evidence_id": 17, "lines": [{"from": 1, "to": 2}], "count": 2, "salience": 3}
    })
}

/// Evidence metadata (no content).
pub fn evidence_meta() -> Value {
    json!({
        "id": 17, "incident_id": INCIDENT, "kind": "logs", "source": "checkout-7f9c.log",
        "bytes": 287, "lines": 3, "format": "plain", "author": "rita",
        "created_at": "2026-11-29T14:08:31Z"
    })
}

/// `201` of `POST …/evidence`.
pub fn evidence_added() -> Value {
    json!({"evidence": evidence_meta(), "observations": [observation()], "created": true})
}

/// `200` of `POST …/evidence`: the same paste again.
pub fn evidence_duplicate() -> Value {
    json!({
        "evidence": evidence_meta(), "observations": [], "created": false,
        "notice": "the same content is already evidence #17 (added by rita); nothing was added"
    })
}

/// `POST …/evidence/prometheus`.
pub fn prometheus_query() -> Value {
    json!({
        "query": "sum(rate(http_requests_total{service=\"checkout\"}[5m]))",
        "start": "2026-11-29T13:50:00Z",
        "end": "2026-11-29T14:20:00Z",
        "step": 15
    })
}

/// `201` of `POST …/evidence/prometheus`.
pub fn prometheus_stored() -> Value {
    let mut evidence = evidence_meta();
    evidence["kind"] = json!("metrics");
    evidence["format"] = json!("prometheus-json");
    evidence["source"] =
        json!("prometheus: sum(rate(http_requests_total{service=\"checkout\"}[5m]))");
    evidence["author"] = json!("rita");
    json!({
        "evidence": evidence,
        "observations": [],
        "created": true,
        "query": "sum(rate(http_requests_total{service=\"checkout\"}[5m]))",
        "start": "2026-11-29T13:50:00Z",
        "end": "2026-11-29T14:20:00Z",
        "step": 15,
        "link": "http://prometheus:9090/graph?g0.expr=sum%28rate%28http_requests_total%7Bservice%3D%22checkout%22%7D%5B5m%5D%29%29&g0.tab=0&g0.range_input=1800s&g0.end_input=2026-11-29+14%3A20%3A00&g0.step_input=15"
    })
}

/// `GET …/evidence`.
pub fn evidence_list() -> Value {
    json!({"evidence": [evidence_meta()], "observations": [observation()]})
}

/// A recommendation (approve, reject, verdict and propose answer with one).
pub fn recommendation(status: &str) -> Value {
    let approved = status == "approved";
    json!({
        "id": 9, "kind": "rollback_deploy", "label": "Roll back the last deploy",
        "target": "checkout",
        "rationale": "Pool exhaustion started two minutes after release 2026.11.29-1.",
        "warning": null, "status": status,
        "reject_reason": if status == "rejected" { json!("The release is already rolled back by the deploy bot.") } else { Value::Null },
        "approve_reason": Value::Null,
        "verdict": null, "verdict_note": null,
        "transcript": if approved { json!("[simulated] rollback_deploy checkout: 2026.11.29-1 → 2026.11.28-3 … done") } else { Value::Null },
        "hypothesis_id": 102
    })
}

/// A recommendation with a verdict.
pub fn recommendation_with_verdict() -> Value {
    let mut v = recommendation("approved");
    v["verdict"] = json!("resolved");
    v["verdict_note"] = json!("p99 back to 340 ms five minutes after the rollback.");
    v
}

/// `POST …/recommendations`.
pub fn propose() -> Value {
    json!({
        "kind": "rollback_deploy",
        "target": "checkout",
        "rationale": "Pool exhaustion started two minutes after release 2026.11.29-1."
    })
}

/// `POST …/reject`.
pub fn reject() -> Value {
    json!({"reason": "The release is already rolled back by the deploy bot."})
}

/// `POST …/approve`: the version seen and, for a known dead end, what is different this time.
pub fn approve() -> Value {
    json!({"version": 6, "reason": "The replica now has room for the extra connections."})
}

/// `POST …/verdict`.
pub fn verdict() -> Value {
    json!({"verdict": "resolved", "note": "p99 back to 340 ms five minutes after the rollback."})
}

/// `POST …/investigate` and `GET …/investigation`.
pub fn investigation() -> Value {
    let mut flagged = recommendation("proposed");
    flagged["id"] = json!(10);
    flagged["kind"] = json!("raise_pool_limit");
    flagged["label"] = json!("Raise the connection-pool limit");
    flagged["rationale"] = json!("Requests wait for a pool connection for 30 s.");
    flagged["warning"] = json!({
        "message": "Raising the pool limit did not resolve INC-2026-0007 (a connection leak): check for a leak first.",
        "incident_ids": ["INC-2026-0007"], "memory_ids": [40], "worked_in": []
    });
    json!({
        "investigation_id": 5,
        "analyst": "built-in",
        "hypotheses": [{
            "id": 102, "reference": "INF-102",
            "statement": "The checkout-db connection pool is exhausted by connections that are never returned.",
            "confidence": "medium", "cites": ["OBS-101", "MEM-40"],
            "prior_incidents": [{"id": "INC-2026-0007",
                                 "why": "same failure mode (connection_pool_exhausted) on checkout"}]
        }],
        "recommendations": [recommendation("proposed"), flagged],
        "recalled": [{"id": 40, "kind": "remediation_failure", "incident_id": "INC-2026-0007",
                      "text": "raise_pool_limit on checkout did not resolve: the pool filled again within minutes.",
                      "why": "service checkout; tag connection_pool_exhausted; lists: scope, semantic"}],
        "notice": null,
        "dropped": []
    })
}

/// A post-mortem document.
pub fn postmortem() -> Value {
    json!({
        "summary": "Checkout p99 rose to 2.4 s for 62 minutes; about 8 % of card payments timed out.",
        "impact": {
            "started_at": "2026-11-29T14:02:00Z", "detected_at": "2026-11-29T14:06:10Z",
            "mitigated_at": "2026-11-29T15:04:00Z", "resolved_at": "2026-11-29T15:12:44Z",
            "time_to_detect_secs": 250, "time_to_resolve_secs": 4244,
            "description": "Customers paying by card in the EU region."
        },
        "symptoms": ["checkout p99 above 2 s", "HikariPool-1 connection timeouts"],
        "root_cause": "Release 2026.11.29-1 left a transaction open on the refund path, holding pool connections.",
        "trigger": "Deploy of release 2026.11.29-1 at 14:00 UTC.",
        "contributing_factors": ["No alert on pool wait time"],
        "what_worked": [{"kind": "rollback_deploy", "target": "checkout", "outcome": "resolved",
                         "note": "p99 back to 340 ms five minutes after the rollback."}],
        "what_did_not_work": [],
        "rejected": [],
        "misleading_hypotheses": ["A slow payment provider (its latency was flat at 180 ms)"],
        "lessons": [{
            "always": "Check for a connection leak before raising the pool limit",
            "because": "During INC-2026-0042 the pool was full of connections a leaked transaction held",
            "scope": "checkout, connection_pool_exhausted",
            "severity": "high"
        }],
        "action_items": ["Alert when pool wait time exceeds 500 ms"],
        "detection_gaps": ["The latency alert fired 4 minutes after impact began"]
    })
}

/// A stored post-mortem, as drafted (`confirmed_by` empty) or confirmed.
pub fn stored_postmortem(confirmed: bool) -> Value {
    json!({
        "incident_id": INCIDENT,
        "postmortem": postmortem(),
        "drafted_by": "rita",
        "edited_by": "rita",
        "edited_at": "2026-11-29T15:30:02Z",
        "confirmed_by": if confirmed { json!("victor") } else { Value::Null },
        "confirmed_at": if confirmed { json!("2026-11-29T16:01:17Z") } else { Value::Null },
        "analyst": "built-in",
        "notice": null,
        "version": 2
    })
}

/// A stored post-mortem draft.
pub fn draft() -> Value {
    stored_postmortem(false)
}

/// A confirmed post-mortem.
pub fn confirmed() -> Value {
    stored_postmortem(true)
}

/// `GET …/postmortem.md`.
pub fn markdown() -> Value {
    json!(
        "# INC-2026-0042: Checkout p99 latency above 2 s\n\n**Severity:** SEV2 · **Service:** checkout\n\n## Summary\n\nCheckout p99 rose to 2.4 s for 62 minutes …\n"
    )
}

/// The lesson record Learn writes from [`postmortem`] (as planned: no id yet).
fn planned_lesson() -> Value {
    json!({
        "kind": "lesson", "epistemic_type": "inference",
        "text": "ALWAYS: Check for a connection leak before raising the pool limit\nBECAUSE: During INC-2026-0042 the pool was full of connections a leaked transaction held\nSCOPE: checkout, connection_pool_exhausted\nSEVERITY: high",
        "services": ["checkout"], "failure_modes": ["connection_pool_exhausted"],
        "action_kind": null, "target": null, "incident_id": INCIDENT,
        "validation": "confirmed", "confidence": null, "importance": 3,
        "rule": {"always": "Check for a connection leak before raising the pool limit",
                 "because": "During INC-2026-0042 the pool was full of connections a leaked transaction held",
                 "scope": "checkout, connection_pool_exhausted", "severity": "high"},
        "author": "victor", "cites": [], "origin": "learn:INC-2026-0042:0", "data": {},
        "source_refs": ["row 1 (root cause)"], "duplicate_of": null, "contradicts": []
    })
}

/// `GET …/learnings/preview`.
pub fn learnings_preview() -> Value {
    json!({
        "memories": [planned_lesson()],
        "duplicates": [],
        "already_in_memory": [],
        "message": "1 durable memory would be written",
        "grading": {
            "hypothesis_id": 18,
            "hypothesis": "The checkout connection pool is exhausted by a connection leak",
            "root_cause": "A leaked transaction held the pool's connections",
            "suggested": true, "memory_recalled": true
        }
    })
}

/// `POST …/learn` with the reviewer's grade.
pub fn learn_body() -> Value {
    json!({"version": 6, "top_hypothesis_matched": true})
}

fn reflection_record() -> Value {
    let rule = json!({
        "always": "On checkout with connection_pool_exhausted, consider rollback_deploy before raise_pool_limit",
        "because": "During INC-2026-0042 raise_pool_limit on checkout did not resolve it (maxed again in minutes); rollback_deploy: resolved INC-2026-0031 (MEM-40), recalled for this incident",
        "scope": "checkout, connection_pool_exhausted", "severity": "medium"
    });
    json!({
        "kind": "lesson", "epistemic_type": "decision",
        "text": format!("ALWAYS: {}\nBECAUSE: {}\nSCOPE: {}\nSEVERITY: medium",
                        rule["always"].as_str().unwrap_or_default(),
                        rule["because"].as_str().unwrap_or_default(),
                        rule["scope"].as_str().unwrap_or_default()),
        "services": ["checkout"], "failure_modes": ["connection_pool_exhausted"],
        "action_kind": "raise_pool_limit", "target": "checkout", "incident_id": INCIDENT,
        "validation": "confirmed", "confidence": null, "importance": 2, "rule": rule,
        "author": "rita", "cites": [57], "origin": null, "data": null
    })
}

fn reflection_draft() -> Value {
    json!({
        "reflection": {
            "incident_id": INCIDENT, "service": "checkout", "action_kind": "raise_pool_limit",
            "target": "checkout", "verdict": "did_not_resolve", "note": "maxed again in minutes",
            "failure_modes": ["connection_pool_exhausted"],
            "instead": [{"kind": "rollback_deploy",
                         "source": "resolved INC-2026-0031 (MEM-40), recalled for this incident"}]
        },
        "runbook": null,
        "record": reflection_record()
    })
}

/// One pending proposal in `GET /api/v1/review`.
fn proposal_item() -> Value {
    json!({
        "id": 3, "reference": "PRO-3", "kind": "reflection", "incident_id": INCIDENT,
        "title": "Reflection: raise_pool_limit on checkout did not resolve it during INC-2026-0042",
        "version": 1, "created_by": "rita",
        "happened": "Did not resolve — maxed again in minutes",
        "draft": reflection_draft(),
        "href": "/incidents/INC-2026-0042"
    })
}

fn stored_proposal(status: &str, reason: Option<&str>, record: Option<i64>) -> Value {
    json!({
        "id": 3, "kind": "reflection", "incident_id": INCIDENT,
        "origin": "reflection:12",
        "title": "Reflection: raise_pool_limit on checkout did not resolve it during INC-2026-0042",
        "draft": reflection_draft(), "status": status, "version": 2,
        "created_by": "rita", "created_at": "2026-11-30T14:20:00Z",
        "decided_by": "victor", "decided_at": "2026-11-30T16:05:00Z",
        "reason": reason, "record_id": record
    })
}

/// `POST /api/v1/proposals/{id}/accept`.
pub fn accept_proposal() -> Value {
    json!({"version": 1})
}

/// Its answer.
pub fn accepted_proposal() -> Value {
    stored_proposal("accepted", None, Some(64))
}

/// `POST /api/v1/proposals/{id}/reject`.
pub fn reject_proposal() -> Value {
    json!({"version": 1, "reason": "the pool limit was not the problem here; nothing to learn"})
}

/// Its answer.
pub fn rejected_proposal() -> Value {
    stored_proposal(
        "rejected",
        Some("the pool limit was not the problem here; nothing to learn"),
        None,
    )
}

/// `POST …/learn`.
pub fn learn_result() -> Value {
    json!({"incident_id": INCIDENT, "written": [61], "linked": [], "message": "1 durable memory written"})
}

/// `GET /api/v1/review`.
pub fn review() -> Value {
    json!({
        "drafts_waiting_for_confirmation": [{
            "id": INCIDENT, "text": "Checkout p99 latency above 2 s (SEV2, checkout)",
            "fix": "Read the draft and confirm it (a reviewer who did not edit it last)",
            "href": "/incidents/INC-2026-0042/postmortem"
        }],
        "rules_without_grounding": [],
        "learned_incidents_without_rules": [],
        "contradictions_to_resolve": [],
        "proposals_to_decide": [proposal_item()]
    })
}

/// `GET /api/v1/insights`.
pub fn insights() -> Value {
    let times = |incidents: i64,
                 resolved: i64,
                 mttr: Option<i64>,
                 detected: i64,
                 ttd: Option<i64>| {
        json!({
            "incidents": incidents, "resolved": resolved,
            "mttr_seconds": mttr,
            "mttr": mttr.map_or("no resolved incident".to_string(), crate::domain::insights::human),
            "detected": detected, "stale": 0, "ttd_seconds": ttd,
            "ttd": ttd.map_or("not recorded".to_string(), crate::domain::insights::human)
        })
    };
    let mut sev2 = times(3, 2, Some(3900), 1, Some(480));
    sev2["severity"] = json!("SEV2");
    let weeks = [
        "2026-10-31T15:00:00Z",
        "2026-11-07T15:00:00Z",
        "2026-11-14T15:00:00Z",
        "2026-11-21T15:00:00Z",
        "2026-11-28T15:00:00Z",
    ];
    let mttr = [None, Some(2700), None, Some(5100), None];
    let weekly: Vec<Value> = weeks
        .iter()
        .zip(mttr)
        .map(|(w, m)| json!({"week_start": w, "resolved": m.map_or(0, |_| 1), "mttr_seconds": m}))
        .collect();
    json!({
        "days": 30,
        "since": "2026-10-31T15:00:00Z",
        "until": "2026-11-30T15:00:00Z",
        "incidents": 3,
        "failure_modes": [{
            "failure_mode": "connection_pool_exhausted", "service": "checkout", "incidents": 3,
            "incident_ids": ["INC-2026-0031", "INC-2026-0038", INCIDENT]
        }],
        "dead_ends": [{
            "action_kind": "raise_pool_limit", "failure_mode": "connection_pool_exhausted",
            "failures": 2, "incidents": 2, "services": 1, "seconds_lost": 2460,
            "time_lost": "41 min", "recurring": true,
            "summary": "raise_pool_limit on connection_pool_exhausted: 2 incidents, 1 service, 41 min lost",
            "incident_ids": ["INC-2026-0038", INCIDENT], "service_names": ["checkout"]
        }],
        "response_times": [{
            "service": "checkout",
            "overall": times(3, 2, Some(3900), 1, Some(480)),
            "by_severity": [sev2],
            "weekly_mttr": weekly.clone()
        }],
        "weekly_mttr": weekly,
        "recurring_modes": [{
            "failure_mode": "connection_pool_exhausted", "incidents": 3,
            "service_names": ["checkout"]
        }],
        "stale_signals": [],
        "thin_memory": [{
            "id": "INC-2026-0038", "title": "Checkout requests hang waiting for connections",
            "service": "checkout", "severity": "SEV2", "state": "resolved",
            "href": "/incidents/INC-2026-0038"
        }],
        "accuracy": {
            "learned": 2, "graded": 2, "hits": 1, "percent": 50,
            "with_memory_graded": 1, "with_memory_hits": 1, "with_memory_percent": 100,
            "summary": "top hypothesis right in 50 % of learned incidents (1 of 2 graded), 100 % when memory recalled a prior incident (1 of 1)",
            "weekly": weeks.iter().zip([None, Some((1, 0)), None, Some((1, 1)), None]).map(|(w, g)| json!({
                "week_start": w, "graded": g.map_or(0, |(n, _)| n), "hits": g.map_or(0, |(_, h)| h),
                "percent": g.map(|(n, h)| if n == 0 { 0 } else { h * 100 / n })
            })).collect::<Vec<Value>>()
        }
    })
}
