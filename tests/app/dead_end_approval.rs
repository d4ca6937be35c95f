//! Issue #49, item 5: approving a recommendation that carries the dead-end banner asks what is
//! different this time (one line, required on the page and in the API); the reason is kept on
//! the action, shown beside the banner, written to the timeline and the audit log, and carried
//! into the post-mortem.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestApp, error_of, spawn_app};

const QUEUE_LOG: &str = "2026-11-30T08:00:00Z ERROR db pool exhausted: no free connection after waiting 30000 ms\n\
2026-11-30T08:01:00Z ERROR db pool exhausted: no free connection after waiting 30000 ms\n";

fn rec_of<'a>(inv: &'a Value, kind: &str) -> &'a Value {
    inv["recommendations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == kind)
        .unwrap_or_else(|| panic!("{kind} recommended in {inv}"))
}

/// Incident A on `billing-api` where raising the pool limit did not resolve it, then incident B
/// on the same service whose raise_pool_limit carries the dead-end banner. Returns A, B and the
/// id of B's flagged recommendation.
pub async fn warned_second_incident(app: &TestApp) -> (String, String, i64) {
    let (a, inv_a) = app
        .investigated("Billing API stalls on checkout", "billing-api", QUEUE_LOG)
        .await;
    let rid = rec_of(&inv_a, "raise_pool_limit")["id"].as_i64().unwrap();
    for (step, body) in [
        ("approve", json!({})),
        (
            "verdict",
            json!({"verdict": "did_not_resolve", "note": "the pool filled again at once"}),
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
    let (b, inv_b) = app
        .investigated(
            "Billing requests wait on the database",
            "billing-api",
            QUEUE_LOG,
        )
        .await;
    let raise = rec_of(&inv_b, "raise_pool_limit");
    assert_eq!(raise["warning"]["incident_ids"], json!([a]), "{inv_b}");
    (a, b, raise["id"].as_i64().unwrap())
}

#[tokio::test]
async fn a_dead_end_is_approved_only_with_what_is_different_this_time() {
    let app = spawn_app().await;
    let (a, b, rid) = warned_second_incident(&app).await;
    let approve = format!("/api/v1/incidents/{b}/recommendations/{rid}/approve");

    // API: no body, an empty reason and a two-line one are refused with a clear 422.
    for body in [
        json!({}),
        json!({"reason": "  "}),
        json!({"reason": "one\ntwo"}),
    ] {
        let (status, code, message) =
            error_of(app.post_json(&app.responder, &approve, body.clone()).await).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        assert_eq!(code, "validation", "{body}");
        assert!(message.contains("reason"), "{message}");
    }
    let (_, _, message) = error_of(app.post_json(&app.responder, &approve, json!({})).await).await;
    assert!(
        message.contains("known dead end") && message.contains("different this time"),
        "{message}"
    );
    let status: Value = app
        .get(
            &app.responder,
            &format!("/api/v1/incidents/{b}/investigation"),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(rec_of(&status, "raise_pool_limit")["status"], "proposed");

    // The page: the approve form asks the question; submitting it empty is a 422 that keeps the
    // form, and nothing is approved.
    let browser = app.browser("rita").await;
    let html = app.page(&browser, &format!("/incidents/{b}")).await;
    assert!(
        html.contains(&format!(
            "for=\"approve-reason-{rid}\">What is different this time?</label>"
        )),
        "{html}"
    );
    assert!(html.contains(&format!("id=\"approve-reason-{rid}\" name=\"reason\"")));
    let version = app.version_of(&b).await.to_string();
    let page_approve = format!("/incidents/{b}/recommendations/{rid}/approve");
    let (status, html) = app
        .post_form(
            &browser,
            &page_approve,
            &[("version", &version), ("reason", "")],
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(html.contains("different this time"), "{html}");

    // With a reason: approved, the reason kept on the action and shown beside the banner.
    let why = "This time the database was given 200 more connections first";
    let (status, _) = app
        .post_form(
            &browser,
            &page_approve,
            &[("version", &version), ("reason", why)],
        )
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let inv: Value = app
        .get(
            &app.responder,
            &format!("/api/v1/incidents/{b}/investigation"),
        )
        .await
        .json()
        .await
        .unwrap();
    let raise = rec_of(&inv, "raise_pool_limit");
    assert_eq!(raise["status"], "approved");
    assert_eq!(raise["approve_reason"], why);
    let html = app.page(&browser, &format!("/incidents/{b}")).await;
    let banner = html
        .split("class=\"warning dead-end\"")
        .nth(1)
        .and_then(|s| s.split("</div>").next())
        .expect("the banner");
    assert!(
        banner.contains(&format!("Approved anyway — different this time: {why}")),
        "{banner}"
    );
    assert!(banner.contains(&a));

    // Timeline and audit log.
    let incident: Value = app
        .get(&app.responder, &format!("/api/v1/incidents/{b}"))
        .await
        .json()
        .await
        .unwrap();
    let approved = incident["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "action_approved")
        .expect("an action_approved event");
    assert_eq!(
        approved["detail"],
        format!(
            "raise_pool_limit on billing-api (simulated) despite the known dead end; different this time: {why}"
        )
    );
    let audit: Vec<String> = sqlx::query_scalar(
        "SELECT detail FROM audit_log WHERE action = 'recommendation.approve' AND subject = $1",
    )
    .bind(&b)
    .fetch_all(&app.pool)
    .await
    .unwrap();
    let detail: Value = serde_json::from_str(&audit[0]).unwrap();
    assert_eq!(detail["reason"], why);
    assert_eq!(detail["dead_end"], true);

    // The post-mortem carries it.
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{b}/recommendations/{rid}/verdict"),
            json!({"verdict": "resolved", "note": "waits gone"}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(app.resolve(&b).await.status(), StatusCode::OK);
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{b}/postmortem"),
            json!({}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let pm: Value = res.json().await.unwrap();
    let worked = &pm["postmortem"]["what_worked"][0];
    assert_eq!(worked["kind"], "raise_pool_limit", "{pm}");
    assert_eq!(worked["dead_end_reason"], why);
    let md = app
        .get(
            &app.responder,
            &format!("/api/v1/incidents/{b}/postmortem.md"),
        )
        .await
        .text()
        .await
        .unwrap();
    assert!(
        md.contains(&format!(
            "- `raise_pool_limit` on billing-api — resolved: waits gone (approved despite a known dead end; different this time: {why})"
        )),
        "{md}"
    );
}

#[tokio::test]
async fn an_action_without_the_banner_is_approved_without_a_reason() {
    let app = spawn_app().await;
    let (id, inv) = app
        .investigated("Billing API stalls on checkout", "billing-api", QUEUE_LOG)
        .await;
    let rid = rec_of(&inv, "raise_pool_limit")["id"].as_i64().unwrap();
    let browser = app.browser("rita").await;
    let html = app.page(&browser, &format!("/incidents/{id}")).await;
    assert!(!html.contains(&format!("approve-reason-{rid}")));
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/recommendations/{rid}/approve"),
            json!({}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let v: Value = res.json().await.unwrap();
    assert!(v["approve_reason"].is_null(), "{v}");
}
