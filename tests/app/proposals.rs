//! Proposals through the human gate: a failing verdict drafts a reflection, a resolved incident
//! drafts a runbook (or the next version of the nearest one), a reviewer accepts or rejects each
//! from the review queue; Learn records the reviewer's grade of the copilot's top hypothesis and
//! the insights show the hit rates.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestApp, error_of, spawn_app};

const LEAK_LOG: &str = "2031-03-04T08:00:00Z INFO order placed id=991 status=201\n\
2031-03-04T08:01:00Z ERROR HikariPool-7 - Connection is not available, request timed out after 30000ms.\n\
2031-03-04T08:02:00Z ERROR HikariPool-7 - Connection is not available, request timed out after 30000ms.\n";

/// Opens an incident on `service`, adds the pool log and investigates; returns the id and the
/// investigation.
async fn investigated(app: &TestApp, title: &str, service: &str) -> (String, Value) {
    app.investigated(title, service, LEAK_LOG).await
}

fn rid(inv: &Value, kind: &str) -> i64 {
    inv["recommendations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {inv}"))["id"]
        .as_i64()
        .unwrap()
}

/// Approves recommendation `r` of `id` and gives it `verdict` with `note` (asserting 200s).
async fn judge(app: &TestApp, id: &str, r: i64, verdict: &str, note: &str) {
    let base = format!("/api/v1/incidents/{id}/recommendations/{r}");
    let res = app
        .post_json(&app.responder, &format!("{base}/approve"), json!({}))
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let res = app
        .post_json(
            &app.responder,
            &format!("{base}/verdict"),
            json!({"verdict": verdict, "note": note}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
}

async fn queue(app: &TestApp) -> Vec<Value> {
    app.proposals_to_decide().await
}

async fn audit_actions(app: &TestApp) -> Vec<String> {
    sqlx::query_scalar("SELECT action || ' ' || subject FROM audit_log ORDER BY seq")
        .fetch_all(&app.pool)
        .await
        .unwrap()
}

async fn resolve_with(app: &TestApp, id: &str, root_cause: &str) {
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/resolve"),
            json!({"summary": "Recovered after the actions below", "root_cause": root_cause}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one end-to-end scenario: each step acts on what the steps before it left, so it reads top to bottom"
)]
async fn a_did_not_resolve_verdict_queues_a_reflection_that_a_reviewer_accepts_as_a_lesson() {
    let app = spawn_app().await;
    let (id, inv) = investigated(&app, "Orders time out at checkout", "orders-api").await;
    let raise = rid(&inv, "raise_pool_limit");
    judge(
        &app,
        &id,
        raise,
        "did_not_resolve",
        "the pool filled up again within minutes",
    )
    .await;

    // Queued, with what was tried, what happened and what might be tried instead.
    let q = queue(&app).await;
    assert_eq!(q.len(), 1);
    let p = &q[0];
    assert_eq!(p["kind"], "reflection");
    assert_eq!(
        p["title"],
        format!("Reflection: raise_pool_limit on orders-api did not resolve it during {id}")
    );
    assert_eq!(
        p["happened"],
        "did not resolve — the pool filled up again within minutes"
    );
    let r = &p["draft"]["reflection"];
    assert_eq!(
        (
            &r["action_kind"],
            &r["target"],
            &r["incident_id"],
            &r["verdict"]
        ),
        (
            &json!("raise_pool_limit"),
            &json!("orders-api"),
            &json!(id),
            &json!("did_not_resolve")
        )
    );
    assert_eq!(
        r["instead"],
        json!([{"kind": "restart_service",
                "source": "the analyst's next recommendation (on orders-api)"}])
    );
    let always = "On orders-api with connection_pool_exhausted, consider restart_service before raise_pool_limit";
    let because = format!(
        "During {id} raise_pool_limit on orders-api did not resolve it (the pool filled up again \
         within minutes); restart_service: the analyst's next recommendation (on orders-api)"
    );
    assert_eq!(p["draft"]["record"]["rule"]["always"], always);
    assert_eq!(p["draft"]["record"]["rule"]["because"], because.as_str());
    // Nothing durable yet beyond the verdict's own remediation failure.
    let lessons = || async {
        sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM records WHERE kind = 'lesson'")
            .fetch_one(&app.pool)
            .await
            .unwrap()
    };
    assert_eq!(lessons().await, 0);

    // A responder may not accept it.
    let pid = p["id"].as_i64().unwrap();
    let res = app.accept_proposal(&app.responder, pid, json!(1)).await;
    assert_eq!(res.status(), StatusCode::FORBIDDEN);

    // The page shows the preview and the three parts.
    let b = app.browser("victor").await;
    let html = app.page(&b, "/review").await;
    assert!(html.contains("What might be tried instead"), "{html}");
    assert!(html.contains(&format!("ALWAYS: {always}")), "{html}");

    // A reviewer accepts it: exactly the previewed lesson is written, confirmed, by the reviewer.
    let res = app.accept_proposal(&app.reviewer, pid, json!(1)).await;
    assert_eq!(res.status(), StatusCode::OK);
    let accepted: Value = res.json().await.unwrap();
    assert_eq!(
        (
            &accepted["status"],
            &accepted["decided_by"],
            &accepted["version"]
        ),
        (&json!("accepted"), &json!("victor"), &json!(2))
    );
    let mem = accepted["record_id"].as_i64().unwrap();
    let m: Value = app
        .get(&app.responder, &format!("/api/v1/memories/{mem}"))
        .await
        .json()
        .await
        .unwrap();
    let m = if m.get("record").is_some() {
        m["record"].clone()
    } else {
        m
    };
    assert_eq!(
        (
            &m["kind"],
            &m["validation"],
            &m["author"],
            &m["incident_id"]
        ),
        (
            &json!("lesson"),
            &json!("confirmed"),
            &json!("victor"),
            &json!(id)
        )
    );
    assert_eq!(m["rule"]["always"], always);
    assert_eq!(m["rule"]["because"], because.as_str());
    assert_eq!(m["action_kind"], "raise_pool_limit");
    assert_eq!(lessons().await, 1);
    assert!(queue(&app).await.is_empty());
    let audit = audit_actions(&app).await;
    assert!(
        audit.contains(&format!("proposal.draft PRO-{pid}")),
        "{audit:?}"
    );
    assert!(
        audit.contains(&format!("proposal.accept PRO-{pid}")),
        "{audit:?}"
    );
    assert!(
        audit.contains(&format!("memory.write MEM-{mem}")),
        "{audit:?}"
    );

    // A second accept changes nothing.
    let res = app.accept_proposal(&app.reviewer, pid, json!(2)).await;
    let (status, _, message) = error_of(res).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(
        message,
        format!("PRO-{pid} is already accepted by victor; nothing was changed")
    );
    assert_eq!(lessons().await, 1);
}

#[tokio::test]
async fn rejecting_a_reflection_needs_a_reason_keeps_it_and_writes_no_memory() {
    let app = spawn_app().await;
    let (id, inv) = investigated(&app, "Orders stall under load", "orders-api").await;
    judge(
        &app,
        &id,
        rid(&inv, "raise_pool_limit"),
        "made_worse",
        "latency doubled",
    )
    .await;
    let q = queue(&app).await;
    let pid = q[0]["id"].as_i64().unwrap();
    assert_eq!(q[0]["draft"]["record"]["rule"]["severity"], "high");

    // The page form without a reason: 422, the queue again with the error, nothing decided.
    let b = app.browser("victor").await;
    let res = b
        .post(app.url(&format!("/review/proposals/{pid}/reject")))
        .header("origin", &app.base)
        .form(&[("version", "1"), ("reason", "  ")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let html = res.text().await.unwrap();
    assert!(html.contains("id=\"proposal-error\""), "{html}");
    assert_eq!(queue(&app).await.len(), 1);

    // A stale version is a 409.
    let res = app
        .post_json(
            &app.reviewer,
            &format!("/api/v1/proposals/{pid}/reject"),
            json!({"version": 7, "reason": "not a lesson"}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CONFLICT);

    let res = b
        .post(app.url(&format!("/review/proposals/{pid}/reject")))
        .header("origin", &app.base)
        .form(&[
            ("version", "1"),
            ("reason", "load test traffic, not a real dead end"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    assert_eq!(res.headers()["location"], "/review?done=rejected");
    let (status, reason, decided_by): (String, String, String) =
        sqlx::query_as("SELECT status, reason, decided_by FROM proposals WHERE id = $1")
            .bind(pid)
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str(), decided_by.as_str()),
        (
            "rejected",
            "load test traffic, not a real dead end",
            "victor"
        )
    );
    let lessons: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM records WHERE kind = 'lesson'")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(lessons, 0);
    assert!(
        audit_actions(&app)
            .await
            .contains(&format!("proposal.reject PRO-{pid}"))
    );
    let html = app.page(&b, "/review?done=rejected").await;
    assert!(html.contains("Proposal rejected: nothing was written; the reason is kept."));
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one end-to-end scenario: each step acts on what the steps before it left, so it reads top to bottom"
)]
async fn a_resolved_incident_gets_a_runbook_draft_and_a_later_one_a_new_version_of_it() {
    let app = spawn_app().await;
    let (a, inv) = investigated(&app, "Orders time out at checkout", "orders-api").await;
    judge(
        &app,
        &a,
        rid(&inv, "gather_more_evidence"),
        "resolved",
        "found the leak",
    )
    .await;
    // No proposal before the incident is resolved.
    assert!(queue(&app).await.is_empty());
    resolve_with(
        &app,
        &a,
        "A leaked transaction held connections. Retries piled up.",
    )
    .await;

    let q = queue(&app).await;
    assert_eq!(q.len(), 1);
    let p = &q[0];
    assert_eq!(p["kind"], "runbook");
    let rb = &p["draft"]["runbook"];
    assert_eq!(rb["title"], "orders-api: gather_more_evidence");
    assert_eq!(
        rb["steps"],
        json!(["Gather more evidence on orders-api (gather_more_evidence)"])
    );
    assert_eq!(
        rb["common_causes"],
        json!(["A leaked transaction held connections", "Retries piled up"])
    );
    assert_eq!((&rb["version"], &rb["replaces"]), (&json!(1), &Value::Null));

    // The reviewer edits it on the page and accepts.
    let pid = p["id"].as_i64().unwrap();
    let b = app.browser("victor").await;
    let res = b
        .post(app.url(&format!("/review/proposals/{pid}/accept")))
        .header("origin", &app.base)
        .form(&[
            ("version", "1"),
            ("title", "orders-api connection pool exhausted"),
            ("summary", "When checkout requests wait for connections."),
            (
                "steps",
                "Gather more evidence on orders-api\r\nCheck which transaction holds connections",
            ),
            ("common_causes", "A leaked transaction held connections"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    assert_eq!(res.headers()["location"], "/review?done=accepted");
    let first: i64 = sqlx::query_scalar("SELECT record_id FROM proposals WHERE id = $1")
        .bind(pid)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    let (text, data, author): (String, String, String) =
        sqlx::query_as("SELECT text, data, author FROM records WHERE id = $1")
            .bind(first)
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(
        text,
        "Runbook: orders-api connection pool exhausted. When checkout requests wait for connections.\n\
         Steps: Gather more evidence on orders-api; Check which transaction holds connections\n\
         Common causes: A leaked transaction held connections"
    );
    let data: Value = serde_json::from_str(&data).unwrap();
    assert_eq!(data["version"], 1);
    assert_eq!(author, "victor");

    // A later incident resolved by that step and one more: a new version of the runbook.
    let (c, inv) = investigated(&app, "Checkout hangs on order submit", "orders-api").await;
    judge(
        &app,
        &c,
        rid(&inv, "gather_more_evidence"),
        "partially_resolved",
        "",
    )
    .await;
    judge(&app, &c, rid(&inv, "restart_service"), "resolved", "").await;
    resolve_with(&app, &c, "Connections leaked again").await;
    let q = queue(&app).await;
    assert_eq!(q.len(), 1);
    let rb = &q[0]["draft"]["runbook"];
    assert_eq!(
        (&rb["version"], &rb["replaces"], &rb["covered"]),
        (&json!(2), &json!(first), &json!(1))
    );
    assert_eq!(
        rb["steps"],
        json!([
            "Gather more evidence on orders-api",
            "Check which transaction holds connections",
            "Restart the service on orders-api (restart_service)"
        ])
    );
    assert_eq!(
        rb["common_causes"],
        json!([
            "A leaked transaction held connections",
            "Connections leaked again"
        ])
    );
    let pid = q[0]["id"].as_i64().unwrap();
    let res = app.accept_proposal(&app.reviewer, pid, json!(1)).await;
    assert_eq!(res.status(), StatusCode::OK);
    let second = res.json::<Value>().await.unwrap()["record_id"]
        .as_i64()
        .unwrap();
    // The first version stays, superseded by the second; nothing is deleted.
    let (validation, by): (String, Option<i64>) =
        sqlx::query_as("SELECT validation, superseded_by FROM records WHERE id = $1")
            .bind(first)
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!((validation.as_str(), by), ("superseded", Some(second)));
    let data: String = sqlx::query_scalar("SELECT data FROM records WHERE id = $1")
        .bind(second)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    let data: Value = serde_json::from_str(&data).unwrap();
    assert_eq!(
        (&data["version"], &data["previous"]),
        (&json!(2), &json!(first))
    );
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one end-to-end scenario: each step acts on what the steps before it left, so it reads top to bottom"
)]
async fn learn_records_the_reviewers_grade_and_insights_show_the_hit_rate() {
    let app = spawn_app().await;
    let (id, inv) = investigated(&app, "Orders time out at checkout", "orders-api").await;
    judge(
        &app,
        &id,
        rid(&inv, "gather_more_evidence"),
        "resolved",
        "found it",
    )
    .await;
    resolve_with(
        &app,
        &id,
        "A leaked transaction in the retry path held connections.",
    )
    .await;
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/postmortem"),
            json!({}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    app.write_trigger(&id).await;
    let res = app
        .post_json(
            &app.reviewer,
            &format!("/api/v1/incidents/{id}/postmortem/confirm"),
            json!({}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let preview: Value = app
        .get(
            &app.responder,
            &format!("/api/v1/incidents/{id}/learnings/preview"),
        )
        .await
        .json()
        .await
        .unwrap();
    let g = &preview["grading"];
    assert_eq!(g["hypothesis"], inv["hypotheses"][0]["statement"]);
    assert_eq!(g["hypothesis_id"], inv["hypotheses"][0]["id"]);
    assert_eq!(
        g["root_cause"],
        "A leaked transaction in the retry path held connections."
    );
    // The pool hypothesis does not name the leak: the suggestion is "no", pre-filled, not recorded.
    assert_eq!(
        (&g["suggested"], &g["memory_recalled"]),
        (&json!(false), &json!(false))
    );
    // Nothing is graded until the reviewer answers.
    assert_eq!(app.count("hypothesis_grades").await, 0);

    let b = app.browser("victor").await;
    let html = app.page(&b, &format!("/incidents/{id}/learnings")).await;
    assert!(
        html.contains("Was the copilot's top hypothesis right?"),
        "{html}"
    );
    let version: i64 = sqlx::query_scalar("SELECT version FROM incidents WHERE id = $1")
        .bind(&id)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    // An answer that is neither yes nor no: the page again, 422, with the message and the form.
    let res = b
        .post(app.url(&format!("/incidents/{id}/learn")))
        .header("origin", &app.base)
        .form(&[
            ("version", version.to_string()),
            ("top_hypothesis_matched", "maybe".into()),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let html = res.text().await.unwrap();
    assert!(html.contains("id=\"learn-error\""), "{html}");
    assert!(
        html.contains("&#39;maybe&#39; is not an answer")
            || html.contains("'maybe' is not an answer"),
        "{html}"
    );
    assert!(
        html.contains("Was the copilot's top hypothesis right?"),
        "{html}"
    );
    assert!(
        html.contains("value=\"no\" checked"),
        "the suggestion stays checked: {html}"
    );
    assert_eq!(app.count("hypothesis_grades").await, 0);
    let res = b
        .post(app.url(&format!("/incidents/{id}/learn")))
        .header("origin", &app.base)
        .form(&[
            ("version", version.to_string()),
            ("top_hypothesis_matched", "no".into()),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    let (matched, graded_by): (i64, String) =
        sqlx::query_as("SELECT matched, graded_by FROM hypothesis_grades WHERE incident_id = $1")
            .bind(&id)
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!((matched, graded_by.as_str()), (0, "victor"));
    let html = app.page(&b, &format!("/incidents/{id}/learnings")).await;
    assert!(html.contains("Top hypothesis graded by victor: it did not match the root cause."));

    let insights: Value = app
        .get(&app.responder, "/api/v1/insights")
        .await
        .json()
        .await
        .unwrap();
    let a = &insights["accuracy"];
    assert_eq!(
        (
            &a["learned"],
            &a["graded"],
            &a["hits"],
            &a["percent"],
            &a["with_memory_percent"]
        ),
        (&json!(1), &json!(1), &json!(0), &json!(0), &Value::Null)
    );
    let summary = "top hypothesis right in 0 % of learned incidents (0 of 1 graded), no graded \
                   incident recalled a prior one";
    assert_eq!(a["summary"], summary);
    let weeks: Vec<i64> = a["weekly"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["graded"].as_i64().unwrap())
        .collect();
    assert_eq!(weeks, vec![0, 0, 0, 0, 1]);
    let html = app.page(&b, "/insights").await;
    assert!(html.contains(summary), "{html}");
    assert!(
        html.contains("Top hypothesis hit rate per week, last 30 days:"),
        "{html}"
    );
    assert!(html.contains(": 0 %\""), "{html}");
}
