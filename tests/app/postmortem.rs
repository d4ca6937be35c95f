//! Post-mortem, confirmation, learnings preview and Learn: the gate of organizational memory.

use futures::future::join_all;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestApp, error_of, spawn_app, spawn_app_with};

const POOL_LOG: &str = "2026-11-29T10:00:00Z INFO request served path=/checkout status=200\n\
2026-11-29T10:01:00Z ERROR HikariPool-1 - Connection is not available, request timed out after 30000ms.\n\
2026-11-29T10:02:00Z ERROR HikariPool-1 - Connection is not available, request timed out after 30000ms.\n";

/// An incident taken to `resolved` with a failed and a successful action and a rejection.
pub(crate) async fn worked_incident(app: &TestApp) -> String {
    let (id, inv) = app
        .investigated("Payments API errors", "payments-api", POOL_LOG)
        .await;
    let rid = |kind: &str| {
        inv["recommendations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["kind"] == kind)
            .unwrap()["id"]
            .as_i64()
            .unwrap()
    };
    let base = format!("/api/v1/incidents/{id}/recommendations");
    let raise = rid("raise_pool_limit");
    assert_eq!(
        app.post_json(
            &app.responder,
            &format!("{base}/{raise}/approve"),
            json!({})
        )
        .await
        .status(),
        StatusCode::OK
    );
    assert_eq!(
        app.post_json(
            &app.responder,
            &format!("{base}/{raise}/verdict"),
            json!({"verdict": "did_not_resolve", "note": "maxed again in minutes"})
        )
        .await
        .status(),
        StatusCode::OK
    );
    let restart = rid("restart_service");
    assert_eq!(
        app.post_json(
            &app.responder,
            &format!("{base}/{restart}/reject"),
            json!({"reason": "would drop in-flight payments"})
        )
        .await
        .status(),
        StatusCode::OK
    );
    let gather = rid("gather_more_evidence");
    assert_eq!(
        app.post_json(
            &app.responder,
            &format!("{base}/{gather}/approve"),
            json!({})
        )
        .await
        .status(),
        StatusCode::OK
    );
    assert_eq!(
        app.post_json(
            &app.responder,
            &format!("{base}/{gather}/verdict"),
            json!({"verdict": "resolved", "note": "found the leak"})
        )
        .await
        .status(),
        StatusCode::OK
    );
    let res = app.post_json(&app.responder, &format!("/api/v1/incidents/{id}/resolve"), json!({"summary": "Rolled back 2.14.1", "root_cause": "A connection leak in the payment retry path. It kept connections checked out."})).await;
    assert_eq!(res.status(), StatusCode::OK);
    id
}

/// The responder drafts the post-mortem of `id` (asserting 201) and returns the stored draft
/// as the analyst wrote it.
async fn bare_draft(app: &TestApp, id: &str) -> Value {
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/postmortem"),
            json!({}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    res.json().await.unwrap()
}

/// [`bare_draft`], then the responder writes its trigger (a reviewer confirms only a draft that
/// names one); returns the stored draft after that edit.
pub(crate) async fn draft(app: &TestApp, id: &str) -> Value {
    bare_draft(app, id).await;
    app.write_trigger(id).await;
    app.get(
        &app.responder,
        &format!("/api/v1/incidents/{id}/postmortem"),
    )
    .await
    .json()
    .await
    .unwrap()
}

/// A reviewer confirms the drafted post-mortem of `id` (asserting 200); returns the learnings
/// preview.
pub(crate) async fn confirm_and_preview(app: &TestApp, id: &str) -> Value {
    let res = app
        .post_json(
            &app.reviewer,
            &format!("/api/v1/incidents/{id}/postmortem/confirm"),
            json!({}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    app.get(
        &app.responder,
        &format!("/api/v1/incidents/{id}/learnings/preview"),
    )
    .await
    .json()
    .await
    .unwrap()
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one end-to-end scenario: each step acts on what the steps before it left, so it reads top to bottom"
)]
async fn the_draft_reflects_what_happened_and_preview_equals_what_learn_writes() {
    let app = spawn_app().await;
    let id = worked_incident(&app).await;
    let pm = draft(&app, &id).await;
    let p = &pm["postmortem"];
    assert_eq!(
        p["root_cause"],
        "A connection leak in the payment retry path. It kept connections checked out."
    );
    assert_eq!(p["what_did_not_work"][0]["kind"], "raise_pool_limit");
    assert_eq!(p["what_did_not_work"][0]["note"], "maxed again in minutes");
    assert_eq!(p["what_worked"][0]["kind"], "gather_more_evidence");
    assert_eq!(p["rejected"][0]["note"], "would drop in-flight payments");
    assert!(p["impact"]["time_to_detect_secs"].as_i64().unwrap() >= 0);
    let lesson = &p["lessons"][0];
    assert!(
        lesson["always"]
            .as_str()
            .unwrap()
            .starts_with("Before you raise the connection-pool limit on payments-api"),
        "{lesson}"
    );
    assert!(lesson["because"].as_str().unwrap().contains(&id));
    assert_eq!(lesson["severity"], "high", "SEV2 → high");

    // Markdown export has every section.
    let md = app
        .get(
            &app.responder,
            &format!("/api/v1/incidents/{id}/postmortem.md"),
        )
        .await
        .text()
        .await
        .unwrap();
    for section in [
        "## Summary",
        "## Impact",
        "## Symptoms",
        "## Root cause",
        "## Trigger",
        "## Contributing factors",
        "## What worked",
        "## What did NOT work",
        "## Rejected recommendations",
        "## Misleading hypotheses",
        "## Lessons",
        "## Action items",
        "## Detection gaps",
        "**ALWAYS:**",
    ] {
        assert!(md.contains(section), "{section} missing from\n{md}");
    }

    // No preview or learn before confirm.
    let (status, _, message) = error_of(
        app.get(
            &app.responder,
            &format!("/api/v1/incidents/{id}/learnings/preview"),
        )
        .await,
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(message.contains("confirm"), "{message}");
    assert_eq!(
        app.post_json(
            &app.reviewer,
            &format!("/api/v1/incidents/{id}/learn"),
            json!({})
        )
        .await
        .status(),
        StatusCode::CONFLICT
    );
    // A responder cannot confirm; the reviewer (not the editor) can.
    assert_eq!(
        app.post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/postmortem/confirm"),
            json!({})
        )
        .await
        .status(),
        StatusCode::FORBIDDEN
    );
    let res = app
        .post_json(
            &app.reviewer,
            &format!("/api/v1/incidents/{id}/postmortem/confirm"),
            json!({}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    // Editing after confirmation needs a reopen.
    let mut edited = p.clone();
    edited["summary"] = json!("changed after the fact");
    let res = app
        .client
        .put(app.url(&format!("/api/v1/incidents/{id}/postmortem")))
        .bearer_auth(&app.responder)
        .json(&edited)
        .send()
        .await
        .unwrap();
    let (status, _, message) = error_of(res).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(message.contains("reopen the draft first"), "{message}");

    let preview: Value = app
        .get(
            &app.responder,
            &format!("/api/v1/incidents/{id}/learnings/preview"),
        )
        .await
        .json()
        .await
        .unwrap();
    let planned = preview["memories"].as_array().unwrap();
    let kinds: Vec<&str> = planned
        .iter()
        .map(|m| m["kind"].as_str().unwrap())
        .collect();
    for k in [
        "symptom",
        "incident_summary",
        "root_cause",
        "rejected_recommendation",
        "remediation_success",
        "lesson",
        "action_item",
    ] {
        assert!(kinds.contains(&k), "{k} planned: {kinds:?}");
    }
    // The pool hypothesis behind the failed raise also backed the action that resolved it, and
    // it names the leak the root cause confirms: a right diagnosis, not a false hypothesis.
    assert!(!kinds.contains(&"false_hypothesis"), "{kinds:?}");
    assert!(
        !kinds.contains(&"remediation_failure"),
        "already written by the verdict, no duplicate"
    );
    assert_eq!(preview["already_in_memory"].as_array().unwrap().len(), 1);
    assert_eq!(
        preview["message"],
        format!("{} durable memories would be written", planned.len())
    );

    let learned: Value = app
        .post_json(
            &app.reviewer,
            &format!("/api/v1/incidents/{id}/learn"),
            json!({}),
        )
        .await
        .json()
        .await
        .unwrap();
    let written = learned["written"].as_array().unwrap();
    assert_eq!(written.len(), planned.len());
    for (w, p) in written.iter().zip(planned) {
        let m: Value = app
            .get(
                &app.responder,
                &format!("/api/v1/memories/{}", w.as_i64().unwrap()),
            )
            .await
            .json()
            .await
            .unwrap();
        for field in [
            "kind",
            "epistemic_type",
            "text",
            "services",
            "failure_modes",
            "rule",
            "action_kind",
            "validation",
            "incident_id",
        ] {
            assert_eq!(m[field], p[field], "{field} of MEM-{w}");
        }
        if m["epistemic_type"] == "inference" {
            assert!(
                !m["sources"].as_array().unwrap().is_empty(),
                "inference MEM-{w} has sources"
            );
        }
    }
    // The incident's one failed action (raise_pool_limit) makes its lesson a rule about that
    // action: a question naming it in free words recalls the lesson through the action key.
    let lesson = planned.iter().find(|m| m["kind"] == "lesson").unwrap();
    assert_eq!(lesson["action_kind"], "raise_pool_limit", "{lesson}");
    let rec: Value = app
        .get(
            &app.responder,
            "/api/v1/recall?q=someone%20wants%20to%20bump%20the%20pool%20size%2C%20what%20first%3F&k=20",
        )
        .await
        .json()
        .await
        .unwrap();
    let found = rec["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == "lesson" && r["incident_id"] == json!(id))
        .unwrap_or_else(|| panic!("lesson recalled: {rec}"));
    assert_eq!(found["why"]["action_kinds"], json!(["raise_pool_limit"]));
    // Learn again: the same answer, nothing more written.
    let count = app.count("records").await;
    let again: Value = app
        .post_json(
            &app.reviewer,
            &format!("/api/v1/incidents/{id}/learn"),
            json!({}),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(again, learned);
    assert_eq!(app.count("records").await, count);
    let v: Value = app
        .get(&app.responder, &format!("/api/v1/incidents/{id}"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(v["state"], "learned");
}

#[tokio::test]
async fn ten_concurrent_learns_write_once() {
    let app = spawn_app().await;
    let id = worked_incident(&app).await;
    draft(&app, &id).await;
    assert_eq!(
        app.post_json(
            &app.reviewer,
            &format!("/api/v1/incidents/{id}/postmortem/confirm"),
            json!({})
        )
        .await
        .status(),
        StatusCode::OK
    );
    let before = app.count("records").await;
    let path = format!("/api/v1/incidents/{id}/learn");
    let results = join_all((0..10).map(|_| app.post_json(&app.reviewer, &path, json!({})))).await;
    let mut bodies = Vec::new();
    for r in results {
        assert_eq!(r.status(), StatusCode::OK);
        bodies.push(r.json::<Value>().await.unwrap());
    }
    assert!(
        bodies.windows(2).all(|w| w[0] == w[1]),
        "every call returns the same result"
    );
    let n = bodies[0]["written"].as_array().unwrap().len() as i64;
    assert_eq!(app.count("records").await, before + n);
}

#[tokio::test]
async fn an_interrupted_learn_leaves_nothing_and_a_later_one_writes_everything() {
    let app = spawn_app().await;
    let id = worked_incident(&app).await;
    draft(&app, &id).await;
    assert_eq!(
        app.post_json(
            &app.reviewer,
            &format!("/api/v1/incidents/{id}/postmortem/confirm"),
            json!({})
        )
        .await
        .status(),
        StatusCode::OK
    );
    let before = app.count("records").await;
    let audit_before = app.count("audit_log").await;
    let user = incidentmind::store::users::find(&app.pool, 2)
        .await
        .unwrap()
        .unwrap();
    let iid = incidentmind::domain::IncidentId::parse(&id).unwrap();
    let err = incidentmind::services::postmortem::learn_with_failpoint(
        app.memory.pool(),
        &user,
        &iid,
        Some(3),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("internal"), "{err}");
    assert_eq!(app.count("records").await, before, "none of the records");
    assert_eq!(app.count("audit_log").await, audit_before);
    let v: Value = app
        .get(&app.responder, &format!("/api/v1/incidents/{id}"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(v["state"], "confirmed");
    let done = incidentmind::services::postmortem::learn(app.memory.pool(), &user, &iid)
        .await
        .unwrap();
    assert_eq!(
        app.count("records").await,
        before + done.written.len() as i64
    );
}

#[tokio::test]
async fn the_last_editor_cannot_confirm_their_own_draft_unless_the_team_allows_it() {
    for allow in [false, true] {
        let app = spawn_app_with(incidentmind::Settings {
            allow_self_confirm: allow,
            ..Default::default()
        })
        .await;
        let id = worked_incident(&app).await;
        // The reviewer drafts, so the reviewer is the last editor.
        let res = app
            .post_json(
                &app.reviewer,
                &format!("/api/v1/incidents/{id}/postmortem"),
                json!({}),
            )
            .await;
        assert_eq!(res.status(), StatusCode::CREATED);
        app.write_trigger_as(&app.reviewer, &id).await;
        let res = app
            .post_json(
                &app.reviewer,
                &format!("/api/v1/incidents/{id}/postmortem/confirm"),
                json!({}),
            )
            .await;
        if allow {
            assert_eq!(res.status(), StatusCode::OK);
        } else {
            let (status, _, message) = error_of(res).await;
            assert_eq!(status, StatusCode::FORBIDDEN);
            assert!(
                message.contains("another reviewer must confirm"),
                "{message}"
            );
            assert_eq!(
                app.post_json(
                    &app.admin,
                    &format!("/api/v1/incidents/{id}/postmortem/confirm"),
                    json!({})
                )
                .await
                .status(),
                StatusCode::OK
            );
        }
    }
}

#[tokio::test]
async fn reopening_a_confirmed_post_mortem_clears_the_confirmation() {
    let app = spawn_app().await;
    let id = worked_incident(&app).await;
    draft(&app, &id).await;
    app.post_json(
        &app.reviewer,
        &format!("/api/v1/incidents/{id}/postmortem/confirm"),
        json!({}),
    )
    .await;
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/reopen"),
            json!({}),
        )
        .await;
    assert_eq!(
        res.json::<Value>().await.unwrap()["state"],
        "postmortem_draft"
    );
    let pm: Value = app
        .get(
            &app.responder,
            &format!("/api/v1/incidents/{id}/postmortem"),
        )
        .await
        .json()
        .await
        .unwrap();
    assert!(pm["confirmed_by"].is_null());
    let v: Value = app
        .get(&app.responder, &format!("/api/v1/incidents/{id}"))
        .await
        .json()
        .await
        .unwrap();
    assert!(
        v["timeline"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "reopen")
    );
    // Editable again, and the edit is validated.
    let mut p = pm["postmortem"].clone();
    p["lessons"][0]["always"] = json!("");
    let res = app
        .client
        .put(app.url(&format!("/api/v1/incidents/{id}/postmortem")))
        .bearer_auth(&app.responder)
        .json(&p)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNPROCESSABLE_ENTITY);
}

#[tokio::test]
async fn a_learned_incident_without_a_rule_is_queued_for_review() {
    let app = spawn_app().await;
    let id = app.open_incident("Search stale", "search").await;
    app.resolve(&id).await;
    let pm = draft(&app, &id).await;
    let mut p = pm["postmortem"].clone();
    p["lessons"] = json!([]);
    let res = app
        .client
        .put(app.url(&format!("/api/v1/incidents/{id}/postmortem")))
        .bearer_auth(&app.responder)
        .json(&p)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    app.post_json(
        &app.reviewer,
        &format!("/api/v1/incidents/{id}/postmortem/confirm"),
        json!({}),
    )
    .await;
    assert_eq!(
        app.post_json(
            &app.reviewer,
            &format!("/api/v1/incidents/{id}/learn"),
            json!({})
        )
        .await
        .status(),
        StatusCode::OK
    );
    let q: Value = app
        .get(&app.reviewer, "/api/v1/review")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(q["learned_incidents_without_rules"][0]["id"], id);
    assert!(
        q["learned_incidents_without_rules"][0]["fix"]
            .as_str()
            .unwrap()
            .contains("Add a lesson")
    );
}

#[tokio::test]
async fn durations_are_never_negative_with_skewed_evidence_clocks() {
    let app = spawn_app().await;
    let id = app.open_incident("Clock skew", "svc").await;
    let future = "2031-01-01T00:00:00Z ERROR upstream returned 503 Service Unavailable\n";
    app.post_json(
        &app.responder,
        &format!("/api/v1/incidents/{id}/evidence"),
        json!({"kind": "logs", "content": future}),
    )
    .await;
    app.resolve(&id).await;
    let pm = draft(&app, &id).await;
    assert!(
        pm["postmortem"]["impact"]["time_to_detect_secs"]
            .as_i64()
            .unwrap()
            >= 0
    );
    assert!(
        pm["postmortem"]["impact"]["time_to_resolve_secs"]
            .as_i64()
            .unwrap()
            >= 0
    );
}

#[tokio::test]
async fn an_xss_corpus_renders_inert_everywhere() {
    let app = spawn_app().await;
    let corpus = [
        "<script>alert(1)</script>",
        "<img src=x onerror=alert(2)>",
        "<base href=\"https://evil.example/\">",
        "[click](javascript:alert(3))",
        "<a href=\"javascript:alert(4)\">x</a>",
        "<svg onload=alert(5)>",
    ];
    let payload = corpus.join(" ");
    let res = app.post_json(&app.responder, "/api/v1/incidents", json!({"title": &corpus[0], "service": "svc", "severity": "SEV3", "description": payload})).await;
    let id = res.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    app.post_json(
        &app.responder,
        &format!("/api/v1/incidents/{id}/evidence"),
        json!({"kind": "note", "content": payload}),
    )
    .await;
    app.post_json(
        &app.responder,
        &format!("/api/v1/incidents/{id}/resolve"),
        json!({"summary": payload, "root_cause": payload}),
    )
    .await;
    let pm = draft(&app, &id).await;
    let mut p = pm["postmortem"].clone();
    p["summary"] = json!(format!("Summary with markdown {payload}"));
    p["contributing_factors"] = json!([payload]);
    let res = app
        .client
        .put(app.url(&format!("/api/v1/incidents/{id}/postmortem")))
        .bearer_auth(&app.responder)
        .json(&p)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    for page in [
        format!("/incidents/{id}"),
        format!("/incidents/{id}/postmortem"),
        "/incidents".to_string(),
    ] {
        let html = app.get(&app.responder, &page).await.text().await.unwrap();
        let lower = html.to_lowercase();
        assert!(!lower.contains("<script>alert"), "{page}: script tag");
        assert!(
            !lower.contains("onerror=alert")
                || lower.contains("onerror=alert(2)&#62;")
                || !lower.contains("<img"),
            "{page}"
        );
        assert!(
            !lower.contains("<img src=x onerror"),
            "{page}: event handler"
        );
        assert!(!lower.contains("<svg onload"), "{page}: svg handler");
        assert!(!lower.contains("<base href"), "{page}: base tag");
        assert!(
            !lower.contains("href=\"javascript:"),
            "{page}: javascript link"
        );
    }
    let html = app
        .get(&app.responder, &format!("/incidents/{id}/postmortem"))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        html.contains("Summary with markdown"),
        "the markdown renders"
    );
}

#[tokio::test]
async fn symptoms_keep_hand_picked_lines_and_leave_out_the_log_summary() {
    let app = spawn_app().await;
    let id = app.open_incident("CRM sync failing", "crm-sync").await;
    let paste = "partner API says HTTP 429 with Retry-After: 45\n\
                 we send ~140 calls/s to the geocoder, quota is 40/s\n\
                 2024-05-01T10:00:00Z INFO sync batch 17 done\n";
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/evidence"),
            json!({"kind": "logs", "content": paste}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    assert_eq!(app.resolve(&id).await.status(), StatusCode::OK);
    let pm = draft(&app, &id).await;
    let symptoms: Vec<&str> = pm["postmortem"]["symptoms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert!(
        symptoms
            .iter()
            .any(|s| s.contains("calls/s to the geocoder")),
        "a typed-in reading is a symptom: {symptoms:?}"
    );
    assert!(
        symptoms.iter().any(|s| s.contains("Retry-After")),
        "{symptoms:?}"
    );
    assert!(
        symptoms
            .iter()
            .all(|s| !s.contains("templates") && !s.contains("sync batch")),
        "neither the summary nor a routine INFO line: {symptoms:?}"
    );
}

/// An incident whose pool-limit raise failed and whose root cause, written with a negation and
/// a version number, names pool exhaustion.
async fn pool_incident_with_negated_root_cause(app: &TestApp) -> String {
    let id = app
        .open_incident("Basket checkout stalls", "payments-api")
        .await;
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/evidence"),
            json!({"kind": "logs", "content": POOL_LOG}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let inv: Value = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/investigate"),
            json!({}),
        )
        .await
        .json()
        .await
        .unwrap();
    let raise = inv["recommendations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == "raise_pool_limit")
        .expect("the pool raise is proposed")["id"]
        .as_i64()
        .unwrap();
    assert!(
        inv["recommendations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["id"] == raise && !r["hypothesis_id"].is_null()),
        "the raise rests on a hypothesis: {inv}"
    );
    let base = format!("/api/v1/incidents/{id}/recommendations/{raise}");
    app.post_json(&app.responder, &format!("{base}/approve"), json!({}))
        .await;
    app.post_json(
        &app.responder,
        &format!("{base}/verdict"),
        json!({"verdict": "did_not_resolve", "note": "waits came back"}),
    )
    .await;
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/resolve"),
            json!({
                "summary": "Reverted the basket service",
                "root_cause": "The pool size was not the problem; release 3.8.12 leaked one \
                               database connection per retry, exhausting the pool."
            }),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    id
}

#[tokio::test]
async fn drafted_lessons_keep_the_whole_root_cause_and_the_right_diagnosis_is_not_misleading() {
    let app = spawn_app().await;
    let id = pool_incident_with_negated_root_cause(&app).await;
    let pm = draft(&app, &id).await;
    let p = &pm["postmortem"];
    assert_eq!(
        p["misleading_hypotheses"],
        json!([]),
        "pool exhaustion was the right diagnosis, only the remedy failed: {p}"
    );
    let whole = "The pool size was not the problem; release 3.8.12 leaked one database \
                 connection per retry, exhausting the pool";
    for lesson in p["lessons"].as_array().unwrap() {
        let always = lesson["always"].as_str().unwrap();
        assert!(always.ends_with(whole), "{always}");
    }
    let item = p["action_items"][0].as_str().unwrap();
    assert!(item.ends_with(whole), "{item}");
}

#[tokio::test]
async fn every_post_mortem_field_saved_with_crlf_is_stored_with_unix_line_endings() {
    let app = spawn_app().await;
    let id = worked_incident(&app).await;
    let mut p = draft(&app, &id).await["postmortem"].clone();
    p["summary"] = json!("First line\r\nsecond line");
    p["root_cause"] = json!("A leak\r\nin the retry path");
    p["trigger"] = json!("Deploy 2.14.1\r\nat 09:55");
    p["impact"]["description"] = json!("Checkout\r\nfailed");
    p["symptoms"] = json!(["timeouts\r\nand 503s"]);
    p["action_items"] = json!(["fix\r\nit"]);
    p["lessons"][0]["scope"] = json!("payments-api\r\n");
    let res = app
        .client
        .put(app.url(&format!("/api/v1/incidents/{id}/postmortem")))
        .bearer_auth(&app.responder)
        .json(&p)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let stored: Value = res.json().await.unwrap();
    let text = stored["postmortem"].to_string();
    assert!(!text.contains("\\r"), "{text}");
    assert_eq!(stored["postmortem"]["summary"], "First line\nsecond line");
    assert_eq!(stored["postmortem"]["trigger"], "Deploy 2.14.1\nat 09:55");
}

#[tokio::test]
async fn the_learnings_preview_names_each_source_by_its_row_and_kind() {
    let app = spawn_app().await;
    let id = worked_incident(&app).await;
    draft(&app, &id).await;
    let preview = confirm_and_preview(&app, &id).await;
    let rows = preview["memories"].as_array().unwrap();
    let kinds: Vec<&str> = rows.iter().map(|m| m["kind"].as_str().unwrap()).collect();
    let refs: Vec<String> = rows
        .iter()
        .flat_map(|m| m["source_refs"].as_array().unwrap().clone())
        .map(|r| r.as_str().unwrap().to_string())
        .collect();
    assert!(!refs.is_empty());
    for r in &refs {
        assert!(!r.contains("planned"), "{r}");
        if let Some(rest) = r.strip_prefix("row ") {
            let (n, kind) = rest.split_once(" (").unwrap();
            let n: usize = n.parse().unwrap();
            assert_eq!(
                kind.trim_end_matches(')').replace(' ', "_"),
                kinds[n - 1],
                "{r} names the kind of row {n}"
            );
        } else {
            assert!(r.starts_with("OBS-") || r.starts_with("MEM-"), "{r}");
        }
    }
    let html = app
        .get(&app.responder, &format!("/incidents/{id}/learnings"))
        .await
        .text()
        .await
        .unwrap();
    assert!(html.contains("row 1 (symptom)"), "{html}");

    // After Learn the page lists what was written by kind and text, not bare ids.
    let res = app
        .post_json(
            &app.reviewer,
            &format!("/api/v1/incidents/{id}/learn"),
            json!({}),
        )
        .await;
    assert!(res.status().is_success());
    let html = app
        .get(&app.responder, &format!("/incidents/{id}/learnings"))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        html.contains("<span class=\"kind\">root cause</span>"),
        "{html}"
    );
    assert!(
        html.contains("A connection leak in the payment retry path"),
        "{html}"
    );
}

#[tokio::test]
async fn saving_the_draft_form_with_crlf_confirms_the_save_after_the_redirect() {
    let app = spawn_app().await;
    let id = worked_incident(&app).await;
    draft(&app, &id).await;
    let b = app.browser("rita").await;
    let lessons = "ALWAYS: Check pool wait against the request rate\r\nBECAUSE: a leak looked like load\r\nSCOPE: payments-api\r\nSEVERITY: high\r\n\r\nALWAYS: Roll back first when a leak follows a deploy\r\nBECAUSE: the rollback ended it\r\nSCOPE: payments-api\r\nSEVERITY: medium";
    let res = b
        .post(app.url(&format!("/incidents/{id}/postmortem/edit")))
        .header("origin", &app.base)
        .form(&[
            ("summary", "Rolled back 2.14.1.\r\nPayments recovered."),
            ("root_cause", "A connection leak\r\nin the retry path"),
            ("trigger", "Deploy 2.14.1"),
            ("impact", "Checkout failed"),
            ("lessons", lessons),
            ("action_items", "Add a leak alert\r\nTest the retry path"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    let location = res.headers()["location"].to_str().unwrap().to_string();
    assert_eq!(location, format!("/incidents/{id}/postmortem?done=saved"));
    let html = app.page(&b, &location).await;
    assert!(html.contains("Draft saved."), "{html}");
    let stored: Value = app
        .get(
            &app.responder,
            &format!("/api/v1/incidents/{id}/postmortem"),
        )
        .await
        .json()
        .await
        .unwrap();
    let p = &stored["postmortem"];
    assert_eq!(p["lessons"].as_array().unwrap().len(), 2);
    assert_eq!(p["summary"], "Rolled back 2.14.1.\nPayments recovered.");
    assert_eq!(
        p["action_items"],
        json!(["Add a leak alert", "Test the retry path"])
    );
    // An unknown code shows nothing (the page never echoes the URL).
    let html = app
        .page(&b, &format!("/incidents/{id}/postmortem?done=<b>hi</b>"))
        .await;
    assert!(!html.contains("id=\"flash\""));
}

#[tokio::test]
async fn html_in_alerts_and_root_causes_shows_as_written_text_and_the_export_is_inert() {
    let app = spawn_app().await;
    let id = app.open_incident("Queue backlog", "billing").await;
    // An alert whose text carries HTML, a root cause with an image tag, a trigger with a script.
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/evidence"),
            json!({"kind": "note", "content": "ERROR queue <b>billing-jobs</b> backlog above <threshold> for 10 minutes"}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/resolve"),
            json!({"summary": "Drained the queue", "root_cause": "The worker crashed on <img src=\"x\"> in an invoice note"}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let pm = draft(&app, &id).await;
    let mut p = pm["postmortem"].clone();
    p["trigger"] = json!("A note with <script>alert(7)</script> and [a link](javascript:alert(8))");
    let res = app
        .client
        .put(app.url(&format!("/api/v1/incidents/{id}/postmortem")))
        .bearer_auth(&app.responder)
        .json(&p)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let html = app
        .get(&app.responder, &format!("/incidents/{id}/postmortem"))
        .await
        .text()
        .await
        .unwrap();
    let article = html
        .split("id=\"postmortem\"")
        .nth(1)
        .and_then(|s| s.split("</article>").next())
        .unwrap();
    assert!(
        article.contains("&lt;b&gt;billing-jobs&lt;/b&gt;")
            && article.contains("&lt;threshold&gt;"),
        "alert HTML shows escaped: {article}"
    );
    assert!(
        article.contains("&lt;img src=\"x\"&gt;")
            || article.contains("&lt;img src=&quot;x&quot;&gt;"),
        "the image tag shows as text: {article}"
    );
    assert!(!article.contains("<img"), "{article}");
    assert!(!article.contains("<script"), "{article}");
    assert!(!article.to_lowercase().contains("javascript:"), "{article}");
    let md = app
        .get(
            &app.responder,
            &format!("/api/v1/incidents/{id}/postmortem.md"),
        )
        .await
        .text()
        .await
        .unwrap();
    assert!(!md.contains("<script"), "{md}");
    assert!(!md.contains("<img"), "{md}");
    assert!(!md.to_lowercase().contains("javascript:"), "{md}");
    assert!(md.contains("&lt;script&gt;alert(7)&lt;/script&gt;"), "{md}");
}

/// Resolves `id` with `root_cause`, drafts, confirms and learns its post-mortem; returns the
/// preview Learn wrote and Learn's result.
async fn learn_with_root_cause(app: &TestApp, id: &str, root_cause: &str) -> (Value, Value) {
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/resolve"),
            json!({"summary": "Service restored.", "root_cause": root_cause}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    draft(app, id).await;
    let preview = confirm_and_preview(app, id).await;
    let res = app
        .post_json(
            &app.reviewer,
            &format!("/api/v1/incidents/{id}/learn"),
            json!({}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    (preview, res.json().await.unwrap())
}

/// The root-cause record Learn wrote, from its result.
async fn root_cause_of(app: &TestApp, learned: &Value) -> Value {
    for id in learned["written"].as_array().unwrap() {
        let m: Value = app
            .get(&app.responder, &format!("/api/v1/memories/{id}"))
            .await
            .json()
            .await
            .unwrap();
        if m["kind"] == "root_cause" {
            return m;
        }
    }
    panic!("Learn wrote no root cause: {learned}");
}

/// A later confirmed root cause that says an earlier one was wrong marks it
/// contradicted (shown in the preview first), recall marks it, the reviewer queue lists it, and
/// the audit log has the mark.
#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one end-to-end scenario: each step acts on what the steps before it left, so it reads top to bottom"
)]
async fn a_later_root_cause_that_denies_an_earlier_one_marks_it_contradicted() {
    let app = spawn_app().await;
    let first = app
        .open_incident("Orders time out at checkout", "orders-api")
        .await;
    let (_, learned) = learn_with_root_cause(
        &app,
        &first,
        "The connection pools were too small for the evening traffic.",
    )
    .await;
    let earlier = root_cause_of(&app, &learned).await;
    let earlier_id = earlier["id"].as_i64().unwrap();
    assert!(earlier["data"].get("contradicted_by").is_none());

    let second = app
        .open_incident("Orders fail again at checkout", "orders-api")
        .await;
    let (preview, learned) = learn_with_root_cause(
        &app,
        &second,
        "Connection pool size was NOT the cause; a stale DNS TTL kept writes on the old primary.",
    )
    .await;
    let planned: Vec<&Value> = preview["memories"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| !m["contradicts"].as_array().unwrap().is_empty())
        .collect();
    assert_eq!(
        planned.len(),
        1,
        "one planned record contradicts: {preview}"
    );
    assert_eq!(planned[0]["kind"], "root_cause");
    assert_eq!(planned[0]["contradicts"][0]["id"], earlier_id);
    assert_eq!(
        planned[0]["contradicts"][0]["claim"],
        json!(["connection", "pool"])
    );
    let later_id = root_cause_of(&app, &learned).await["id"].as_i64().unwrap();

    let marked: Value = app
        .get(&app.responder, &format!("/api/v1/memories/{earlier_id}"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(marked["data"]["contradicted_by"], later_id, "{marked}");
    assert_eq!(
        marked["validation"], "confirmed",
        "marked, not hidden or changed"
    );

    let recalled: Value = app
        .get(
            &app.responder,
            "/api/v1/recall?q=connection+pools+too+small+for+the+evening+traffic&service=orders-api&k=50",
        )
        .await
        .json()
        .await
        .unwrap();
    let hit = recalled["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == earlier_id)
        .unwrap_or_else(|| panic!("the earlier root cause is still recalled: {recalled}"));
    assert!(
        hit["marks"]
            .as_array()
            .unwrap()
            .contains(&json!("contradicted")),
        "{hit}"
    );

    let q: Value = app
        .get(&app.reviewer, "/api/v1/review")
        .await
        .json()
        .await
        .unwrap();
    let item = &q["contradictions_to_resolve"][0];
    assert_eq!(item["id"], format!("MEM-{earlier_id}"), "{q}");
    assert!(
        item["fix"]
            .as_str()
            .unwrap()
            .contains(&format!("supersede MEM-{earlier_id} with MEM-{later_id}")),
        "{item}"
    );
    let audited: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM audit_log WHERE action = 'memory.contradict' AND subject = $1",
    )
    .bind(format!("MEM-{earlier_id}"))
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(audited, 1);

    // A root cause that agrees marks nothing.
    let third = app
        .open_incident("Orders slow at checkout", "orders-api")
        .await;
    let (preview, _) = learn_with_root_cause(
        &app,
        &third,
        "A stale DNS TTL kept writes on the old primary after the failover.",
    )
    .await;
    assert!(
        preview["memories"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["contradicts"].as_array().unwrap().is_empty()),
        "{preview}"
    );
}

/// The contradiction Learn marks also drafts a supersession for the review queue; a
/// reviewer accepting it marks the earlier record superseded by the later one (kept, marked).
#[tokio::test]
async fn a_contradiction_at_learn_queues_a_supersession_that_a_reviewer_accepts() {
    let app = spawn_app().await;
    let first = app
        .open_incident("Search results go stale", "search-api")
        .await;
    let (_, learned) = learn_with_root_cause(
        &app,
        &first,
        "The index refresh interval was too long for the write volume.",
    )
    .await;
    let earlier = root_cause_of(&app, &learned).await["id"].as_i64().unwrap();
    let second = app
        .open_incident("Search results stale again", "search-api")
        .await;
    let (_, learned) = learn_with_root_cause(
        &app,
        &second,
        "The index refresh interval was NOT the cause; a stuck replica served old shards.",
    )
    .await;
    let later = root_cause_of(&app, &learned).await["id"].as_i64().unwrap();

    let q = app.proposals_to_decide().await;
    let p = q
        .iter()
        .find(|p| p["kind"] == "supersession")
        .unwrap_or_else(|| panic!("a supersession is queued: {q:?}"))
        .clone();
    assert_eq!(p["incident_id"], second);
    assert_eq!(p["draft"]["supersession"]["old"], earlier);
    assert_eq!(p["draft"]["supersession"]["new"], later);
    assert!(p["draft"]["record"].is_null(), "it writes no record: {p}");
    let b = app.browser("victor").await;
    let html = app.page(&b, "/review").await;
    assert!(html.contains("Accept: mark it superseded"), "{html}");

    let pid = p["id"].as_i64().unwrap();
    let res = app
        .accept_proposal(&app.reviewer, pid, json!(p["version"]))
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let accepted: Value = res.json().await.unwrap();
    assert_eq!(accepted["status"], "accepted");
    let old: Value = app
        .get(&app.responder, &format!("/api/v1/memories/{earlier}"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        (&old["validation"], &old["superseded_by"]),
        (&json!("superseded"), &json!(later)),
        "{old}"
    );
    let audited: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM audit_log WHERE action = 'memory.supersede' AND subject = $1",
    )
    .bind(format!("MEM-{earlier}"))
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(audited, 1);
    // Resolved: no longer a contradiction to resolve.
    let q: Value = app
        .get(&app.reviewer, "/api/v1/review")
        .await
        .json()
        .await
        .unwrap();
    assert!(
        q["contradictions_to_resolve"]
            .as_array()
            .unwrap()
            .is_empty(),
        "{q}"
    );
}

#[tokio::test]
async fn a_lesson_naming_no_incident_is_queued_for_review_and_a_learned_one_is_not() {
    use incidentmind::domain::MemoryKind;
    use incidentmind::domain::memory::NewRecord;
    let app = spawn_app().await;
    // A lesson learned from an incident (grounded).
    let id = worked_incident(&app).await;
    draft(&app, &id).await;
    confirm_and_preview(&app, &id).await;
    let res = app
        .post_json(
            &app.reviewer,
            &format!("/api/v1/incidents/{id}/learn"),
            json!({}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let grounded: Vec<i64> =
        sqlx::query_scalar("SELECT id FROM records WHERE kind = 'lesson' AND incident_id = $1")
            .bind(&id)
            .fetch_all(&app.pool)
            .await
            .unwrap();
    assert!(!grounded.is_empty(), "Learn wrote a grounded lesson");
    // A lesson that names no incident (people cannot write lessons over the API, so the
    // memory service writes it as an import would).
    let mut r = NewRecord::new(
        MemoryKind::Lesson,
        "ALWAYS: drain the ledger queue before resizing it\nBECAUSE: resizing dropped messages\nSCOPE: ledger-writer\nSEVERITY: medium",
        "victor",
    );
    r.services = vec!["ledger-writer".into()];
    let orphan = incidentmind::services::memory::write(&app.db, r)
        .await
        .unwrap();
    let q: Value = app
        .get(&app.reviewer, "/api/v1/review")
        .await
        .json()
        .await
        .unwrap();
    let ungrounded = q["rules_without_grounding"].as_array().unwrap();
    assert_eq!(ungrounded.len(), 1, "{q}");
    assert_eq!(ungrounded[0]["id"], format!("MEM-{}", orphan.id));
    assert_eq!(ungrounded[0]["href"], format!("/memories/{}", orphan.id));
    assert_eq!(ungrounded[0]["text"], orphan.text);
    assert_eq!(
        ungrounded[0]["fix"],
        "Name the incident it comes from (write a new version citing it) or retract it"
    );
    // The page lists it in its section, linked, and none of the grounded lessons.
    let html = app
        .get(&app.reviewer, "/review")
        .await
        .text()
        .await
        .unwrap();
    let section = html
        .split("<section class=\"card\" id=\"review-ungrounded\">")
        .nth(1)
        .unwrap()
        .split("</section>")
        .next()
        .unwrap();
    assert!(
        section.contains(&format!("<a href=\"/memories/{0}\">MEM-{0}</a>", orphan.id)),
        "{section}"
    );
    assert!(!section.contains("None."), "{section}");
    for g in &grounded {
        assert!(
            !section.contains(&format!("/memories/{g}\"")),
            "grounded MEM-{g} not queued: {section}"
        );
        assert!(!ungrounded.iter().any(|i| i["id"] == format!("MEM-{g}")));
    }
}

#[tokio::test]
async fn the_post_mortem_page_shows_its_instants_in_the_viewers_zone() {
    let app = spawn_app().await;
    let id = worked_incident(&app).await;
    // The log lines are of a fixed day: the incident was opened five minutes after the first,
    // so it lies inside the incident's window (older evidence is left out of the times).
    incidentmind::store::incidents::set_opened_at(
        &app.pool,
        &incidentmind::domain::IncidentId::parse(&id).unwrap(),
        "2026-11-29T10:05:00Z".parse().unwrap(),
    )
    .await
    .unwrap();
    let pm = draft(&app, &id).await;
    // The impact starts with the first log line, 10:00 UTC: 15:30 in Kolkata.
    assert_eq!(
        pm["postmortem"]["impact"]["started_at"],
        "2026-11-29T10:00:00Z"
    );
    let local = "2026-11-29 15:30:00 +05:30";
    let utc = "2026-11-29 10:00:00 UTC";
    let html = app
        .client
        .get(app.url(&format!("/incidents/{id}/postmortem")))
        .bearer_auth(&app.responder)
        .header("cookie", "tz=Asia%2FKolkata")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        html.contains(&format!("<td>started</td><td>{local}</td>")),
        "started at {local} in the impact table: {html}"
    );
    assert!(!html.contains(utc), "no UTC instant on the page");
    assert!(!html.contains(" UTC</td>"), "no UTC instant on the page");
    // The export keeps UTC.
    let md = app
        .get(
            &app.responder,
            &format!("/api/v1/incidents/{id}/postmortem.md"),
        )
        .await
        .text()
        .await
        .unwrap();
    assert!(md.contains(&format!("| started | {utc} |")), "{md}");
}

#[tokio::test]
async fn confirming_and_learning_from_the_pages_confirm_each_step_after_the_redirect() {
    let app = spawn_app().await;
    let id = worked_incident(&app).await;
    draft(&app, &id).await;
    let b = app.browser("victor").await;
    let res = b
        .post(app.url(&format!("/incidents/{id}/postmortem/confirm")))
        .header("origin", &app.base)
        .form(&Vec::<(String, String)>::new())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    let location = res.headers()["location"].to_str().unwrap().to_string();
    assert_eq!(
        location,
        format!("/incidents/{id}/learnings?done=confirmed")
    );
    let html = app.page(&b, &location).await;
    assert!(
        html.contains("<p class=\"flash info\" role=\"status\" id=\"flash\">Post-mortem confirmed: preview the learnings, then Learn.</p>"),
        "{html}"
    );
    let res = b
        .post(app.url(&format!("/incidents/{id}/learn")))
        .header("origin", &app.base)
        .form(&Vec::<(String, String)>::new())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    let location = res.headers()["location"].to_str().unwrap().to_string();
    assert_eq!(location, format!("/incidents/{id}/learnings?done=learned"));
    let html = app.page(&b, &location).await;
    assert!(
        html.contains("<p class=\"flash info\" role=\"status\" id=\"flash\">Learned: the records below are in the organization&#39;s memory.</p>"),
        "{html}"
    );
    // Without the code the page shows no confirmation.
    let html = app.page(&b, &format!("/incidents/{id}/learnings")).await;
    assert!(!html.contains("id=\"flash\""));
}

#[tokio::test]
async fn a_draft_that_does_not_say_what_set_the_incident_off_is_not_confirmed() {
    let app = spawn_app().await;
    let id = worked_incident(&app).await;
    let pm = bare_draft(&app, &id).await;
    // Nothing in the evidence names a trigger: the field is empty, not a prompt that would be
    // saved as the trigger if nobody edits it.
    assert_eq!(pm["postmortem"]["trigger"], "", "{pm}");
    let html = app
        .get(&app.reviewer, &format!("/incidents/{id}/postmortem"))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        html.contains(r#"name="trigger" id="trigger" value="""#),
        "{html}"
    );
    assert!(html.contains(r#"placeholder="e.g. "#), "{html}");
    assert!(
        !html.contains(r#"id="confirm""#),
        "confirm is not offered: {html}"
    );
    assert!(html.contains("Write the trigger"), "{html}");
    let incident_page = app
        .get(&app.reviewer, &format!("/incidents/{id}"))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        incident_page.contains("write its trigger first"),
        "the stepper says why: {incident_page}"
    );

    let confirm = format!("/api/v1/incidents/{id}/postmortem/confirm");
    let (status, code, message) =
        error_of(app.post_json(&app.reviewer, &confirm, json!({})).await).await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, "validation")
    );
    assert!(message.contains("trigger"), "{message}");
    let state: Value = app
        .get(&app.reviewer, &format!("/api/v1/incidents/{id}"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(state["state"], "postmortem_draft", "{state}");

    // A blank one is no trigger either.
    let mut blank = pm["postmortem"].clone();
    blank["trigger"] = json!("   ");
    let res = app
        .client
        .put(app.url(&format!("/api/v1/incidents/{id}/postmortem")))
        .bearer_auth(&app.responder)
        .json(&blank)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let res = app.post_json(&app.reviewer, &confirm, json!({})).await;
    assert_eq!(res.status(), StatusCode::UNPROCESSABLE_ENTITY);

    app.write_trigger(&id).await;
    let res = app.post_json(&app.reviewer, &confirm, json!({})).await;
    assert_eq!(res.status(), StatusCode::OK);
    let md = app
        .get(
            &app.reviewer,
            &format!("/api/v1/incidents/{id}/postmortem.md"),
        )
        .await
        .text()
        .await
        .unwrap();
    assert!(
        md.contains("## Trigger\n\nA configuration push to every node at once"),
        "{md}"
    );
}

/// After a later incident contradicted an earlier root cause, a new incident told in the earlier
/// one's words gets its first precedent from the later incident; the earlier cause comes after
/// it, with its confidence lowered and the reason given.
#[tokio::test]
async fn the_incident_that_contradicted_an_earlier_cause_is_the_first_precedent() {
    let app = spawn_app().await;
    let first = app
        .open_incident("Orders time out at checkout", "orders-api")
        .await;
    learn_with_root_cause(
        &app,
        &first,
        "The connection pools were too small for the evening traffic.",
    )
    .await;
    let second = app
        .open_incident("Orders fail again at checkout", "orders-api")
        .await;
    learn_with_root_cause(
        &app,
        &second,
        "Connection pool size was NOT the cause; a stale DNS TTL kept writes on the old primary.",
    )
    .await;
    let (_, inv) = app
        .investigated(
            "Checkout orders time out, connection pools look too small for the evening",
            "orders-api",
            POOL_LOG,
        )
        .await;
    let hyps = inv["hypotheses"].as_array().unwrap();
    let from = |inc: &str| {
        hyps.iter().position(|h| {
            h["statement"]
                .as_str()
                .unwrap()
                .starts_with(&format!("Same cause as {inc}"))
        })
    };
    let later = from(&second).unwrap_or_else(|| panic!("no hypothesis from {second}: {inv}"));
    if let Some(earlier) = from(&first) {
        assert!(later < earlier, "{inv}");
        assert!(
            hyps[earlier]["statement"]
                .as_str()
                .unwrap()
                .contains("is contradicted by the later"),
            "{inv}"
        );
    }
}

/// A model analyst that, once armed, says it started and answers (with the built-in analysis)
/// only after the test has let it go: a stand-in for a model call during which people work on.
#[derive(Debug, Default)]
struct HeldAnalyst {
    armed: std::sync::atomic::AtomicBool,
    started: tokio::sync::Notify,
    go: tokio::sync::Notify,
}

#[async_trait::async_trait]
impl incidentmind::analyst::Analyst for HeldAnalyst {
    fn name(&self) -> String {
        "llm:held".into()
    }

    async fn investigate(
        &self,
        input: &incidentmind::analyst::InvestigationInput,
    ) -> Result<incidentmind::analyst::AnalystOutput, incidentmind::analyst::AnalystError> {
        if self.armed.load(std::sync::atomic::Ordering::SeqCst) {
            self.started.notify_one();
            self.go.notified().await;
        }
        Ok(incidentmind::analyst::builtin::BuiltinAnalyst::analyse(
            input,
        ))
    }
}

#[tokio::test]
async fn an_investigation_whose_incident_is_learned_meanwhile_writes_nothing() {
    let held = std::sync::Arc::new(HeldAnalyst::default());
    let app = crate::helpers::spawn_app_full(
        incidentmind::Settings::default(),
        Some(held.clone() as std::sync::Arc<dyn incidentmind::analyst::Analyst>),
    )
    .await;
    let id = worked_incident(&app).await;
    draft(&app, &id).await;
    confirm_and_preview(&app, &id).await;
    let investigations = app.count("investigations").await;
    let records = app.count("records").await;

    held.armed.store(true, std::sync::atomic::Ordering::SeqCst);
    let started = held.started.notified();
    let path = format!("/api/v1/incidents/{id}/investigate");
    let investigation = app.post_json(&app.responder, &path, json!({}));
    let learn = async {
        started.await;
        let learned = app
            .post_json(
                &app.reviewer,
                &format!("/api/v1/incidents/{id}/learn"),
                json!({}),
            )
            .await;
        assert_eq!(learned.status(), StatusCode::OK);
        held.go.notify_one();
        app.count("records").await
    };
    let (res, after_learn) = tokio::join!(investigation, learn);
    let (status, code, message) = error_of(res).await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::CONFLICT, "conflict"),
        "{message}"
    );
    assert!(message.contains("is learned and closed"), "{message}");
    assert_eq!(app.count("investigations").await, investigations);
    assert!(after_learn > records, "Learn wrote its records");
    assert_eq!(
        app.count("records").await,
        after_learn,
        "the investigation wrote none"
    );
}
