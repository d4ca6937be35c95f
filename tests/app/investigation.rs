//! The copilot: investigation, simulated approvals, verdicts, dead-end warnings, the model path
//! against a stub OpenAI-compatible server on loopback.

use futures::future::join_all;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestApp, error_of, spawn_app};

const POOL_LOG: &str = "2026-11-29T10:00:00Z INFO request served path=/checkout status=200\n\
2026-11-29T10:01:00Z ERROR HikariPool-1 - Connection is not available, request timed out after 30000ms.\n\
2026-11-29T10:02:00Z ERROR HikariPool-1 - Connection is not available, request timed out after 30000ms.\n\
2026-11-29T10:03:00Z ERROR HikariPool-1 - Connection is not available, request timed out after 30000ms.\n";

async fn add_evidence(app: &TestApp, id: &str, content: &str) {
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/evidence"),
            json!({"kind": "logs", "content": content}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
}

async fn investigate(app: &TestApp, id: &str) -> Value {
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/investigate"),
            json!({}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    res.json().await.unwrap()
}

fn rec_of<'a>(inv: &'a Value, kind: &str) -> &'a Value {
    inv["recommendations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == kind)
        .unwrap_or_else(|| panic!("{kind} recommended in {inv}"))
}

#[tokio::test]
async fn a_failed_remediation_warns_a_parallel_incident_at_once() {
    let app = spawn_app().await;
    let a = app
        .open_incident("Payments API errors", "payments-api")
        .await;
    add_evidence(&app, &a, POOL_LOG).await;
    let inv_a = investigate(&app, &a).await;
    let raise = rec_of(&inv_a, "raise_pool_limit");
    assert!(raise["warning"].is_null());
    let rid = raise["id"].as_i64().unwrap();
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{a}/recommendations/{rid}/approve"),
            json!({}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let approved: Value = res.json().await.unwrap();
    assert!(
        approved["transcript"]
            .as_str()
            .unwrap()
            .starts_with("[SIMULATED")
    );
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{a}/recommendations/{rid}/verdict"),
            json!({"verdict": "did_not_resolve", "note": "pool maxed again within minutes"}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);

    // While A is still open, B on the same service, in other words.
    let b = app
        .open_incident(
            "Checkout requests hang waiting for database connections",
            "payments-api",
        )
        .await;
    add_evidence(
        &app,
        &b,
        "2026-11-29T11:00:00Z ERROR pool exhausted (waited 5000 ms) for a connection\n",
    )
    .await;
    let inv_b = investigate(&app, &b).await;
    let recs = inv_b["recommendations"].as_array().unwrap();
    let raise_b = rec_of(&inv_b, "raise_pool_limit");
    let warning = &raise_b["warning"];
    assert!(!warning.is_null(), "{inv_b}");
    assert_eq!(warning["incident_ids"], json!([a]));
    let message = warning["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("tried during {a} and did not resolve")),
        "{message}"
    );
    assert!(message.contains("pool maxed again within minutes"));
    assert!(message.contains("Confirm why this time is different before approving"));
    assert_eq!(
        recs.last().unwrap()["kind"],
        "raise_pool_limit",
        "flagged sorts last"
    );
    assert!(
        recs.iter().rev().skip(1).all(|r| r["warning"].is_null()),
        "only the dead end is flagged"
    );
    // Still approvable.
    let rid_b = raise_b["id"].as_i64().unwrap();
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{b}/recommendations/{rid_b}/approve"),
            json!({}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    // The page shows the banner and the known dead end.
    let html = app
        .get(&app.responder, &format!("/incidents/{b}"))
        .await
        .text()
        .await
        .unwrap();
    assert!(html.contains("Known dead end."));
    assert!(html.contains(&format!("tried during {a}")));
    let dead_ends: Value = app
        .get(&app.responder, "/api/v1/memories?kind=remediation_failure")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(dead_ends["memories"].as_array().unwrap().len(), 1);
    assert_eq!(dead_ends["memories"][0]["incident_id"], a);
    assert_eq!(dead_ends["memories"][0]["validation"], "confirmed");
}

#[tokio::test]
async fn with_nothing_in_memory_the_copilot_says_so_and_stays_low() {
    let app = spawn_app().await;
    let id = app.open_incident("Checkout slow", "payments-api").await;
    add_evidence(&app, &id, POOL_LOG).await;
    let inv = investigate(&app, &id).await;
    assert_eq!(inv["notice"], "No relevant organizational memory found");
    let hyps = inv["hypotheses"].as_array().unwrap();
    assert!(!hyps.is_empty());
    assert!(hyps.iter().all(|h| h["confidence"] == "low"), "{hyps:?}");
    assert!(
        hyps[0]["cites"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c.as_str().unwrap().starts_with("OBS-"))
    );
    for field in ["id", "statement", "confidence", "cites"] {
        assert!(hyps[0].get(field).is_some());
    }
    for field in ["id", "kind", "target", "rationale", "warning"] {
        assert!(inv["recommendations"][0].get(field).is_some());
    }
    assert!(inv.get("recalled").is_some());
}

#[tokio::test]
async fn double_approval_writes_one_transcript_and_verdicts_need_an_approval() {
    let app = spawn_app().await;
    let id = app.open_incident("Checkout slow", "payments-api").await;
    add_evidence(&app, &id, POOL_LOG).await;
    let inv = investigate(&app, &id).await;
    let rid = inv["recommendations"][0]["id"].as_i64().unwrap();
    let verdict_path = format!("/api/v1/incidents/{id}/recommendations/{rid}/verdict");
    let (status, _, message) = error_of(
        app.post_json(
            &app.responder,
            &verdict_path,
            json!({"verdict": "resolved"}),
        )
        .await,
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(message.contains("approve it"), "{message}");
    let path = format!("/api/v1/incidents/{id}/recommendations/{rid}/approve");
    let results = join_all((0..10).map(|_| app.post_json(&app.responder, &path, json!({})))).await;
    assert_eq!(
        results
            .iter()
            .filter(|r| r.status() == StatusCode::OK)
            .count(),
        1
    );
    assert_eq!(
        results
            .iter()
            .filter(|r| r.status() == StatusCode::CONFLICT)
            .count(),
        9
    );
    let transcripts: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM records WHERE kind = 'action_transcript'")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(transcripts, 1);
    let (status, _, _) = error_of(
        app.post_json(
            &app.responder,
            &verdict_path,
            json!({"verdict": "fixed-ish"}),
        )
        .await,
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let results = join_all((0..5).map(|_| {
        app.post_json(
            &app.responder,
            &verdict_path,
            json!({"verdict": "made_worse", "note": "latency doubled"}),
        )
    }))
    .await;
    assert_eq!(
        results
            .iter()
            .filter(|r| r.status() == StatusCode::OK)
            .count(),
        1
    );
    let failures: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM records WHERE kind = 'remediation_failure'")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(failures, 1);
    // Reject needs a reason; a decided one cannot be rejected.
    let other = inv["recommendations"][1]["id"].as_i64().unwrap();
    let reject = format!("/api/v1/incidents/{id}/recommendations/{other}/reject");
    assert_eq!(
        app.post_json(&app.responder, &reject, json!({"reason": ""}))
            .await
            .status(),
        StatusCode::UNPROCESSABLE_ENTITY
    );
    assert_eq!(
        app.post_json(
            &app.responder,
            &reject,
            json!({"reason": "too risky at peak"})
        )
        .await
        .status(),
        StatusCode::OK
    );
    assert_eq!(
        app.post_json(&app.responder, &reject, json!({"reason": "again"}))
            .await
            .status(),
        StatusCode::CONFLICT
    );
    let kinds: Vec<String> = sqlx::query_scalar("SELECT kind FROM timeline_events ORDER BY id")
        .fetch_all(&app.pool)
        .await
        .unwrap();
    assert!(
        kinds.contains(&"action_approved".to_string())
            && kinds.contains(&"verdict".to_string())
            && kinds.contains(&"action_rejected".to_string())
    );
}

#[tokio::test]
async fn the_incident_page_investigates_and_approves_through_forms() {
    let app = spawn_app().await;
    let id = app.open_incident("Checkout slow", "payments-api").await;
    add_evidence(&app, &id, POOL_LOG).await;
    let b = app.browser("rita").await;
    let res = b
        .post(app.url(&format!("/incidents/{id}/investigate")))
        .header("origin", &app.base)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    let html = b
        .get(app.url(&format!("/incidents/{id}")))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(html.contains("Approve (simulate)"));
    assert!(html.contains("No relevant organizational memory found"));
}

#[tokio::test]
async fn a_dead_end_of_the_most_similar_incident_is_warned_on_another_service() {
    let app = spawn_app().await;
    let a = app
        .open_incident("Payments API errors", "payments-api")
        .await;
    add_evidence(&app, &a, POOL_LOG).await;
    let inv_a = investigate(&app, &a).await;
    let rid = rec_of(&inv_a, "raise_pool_limit")["id"].as_i64().unwrap();
    for (step, body) in [
        ("approve", json!({})),
        (
            "verdict",
            json!({"verdict": "did_not_resolve", "note": "the quarterly ledger export still crawled"}),
        ),
    ] {
        let res = app
            .post_json(
                &app.responder,
                &format!("/api/v1/incidents/{a}/recommendations/{rid}/{step}"),
                body,
            )
            .await;
        assert_eq!(res.status(), StatusCode::OK, "{step}");
    }
    // B: another service, no evidence, no failure mode in common; only its words match A's.
    let b = app
        .open_incident("Quarterly ledger export crawls", "ledger-export")
        .await;
    let inv_b = investigate(&app, &b).await;
    let raise_b = rec_of(&inv_b, "raise_pool_limit");
    assert!(
        raise_b["rationale"].as_str().unwrap().starts_with(&format!(
            "Tried during the similar incident {a} and did not resolve it"
        )),
        "{raise_b}"
    );
    assert_eq!(raise_b["warning"]["incident_ids"], json!([a]), "{inv_b}");
    assert_eq!(
        inv_b["recommendations"].as_array().unwrap().last().unwrap()["kind"],
        "raise_pool_limit",
        "flagged sorts last"
    );
}
