//! What a new user meets in the browser, through the real router with a cookie-carrying client:
//! proposing an action of one's own from the incident page, a stale form that says what changed
//! and offers a reload, recalled records shown with their marks, and a review queue that puts
//! what blocks an incident first, groups and pages its proposals, and shows them read-only to
//! responders.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app};

async fn post_ok(app: &TestApp, path: &str, body: Value) -> Value {
    let res = app.post_json(&app.responder, path, body).await;
    assert!(res.status().is_success(), "{path}");
    res.json().await.unwrap()
}

#[tokio::test]
async fn a_responder_proposes_an_action_of_their_own_from_the_incident_page() {
    let app = spawn_app().await;
    let id = app
        .open_incident("Search answers slowly", "search-api")
        .await;
    let rita = app.browser("rita").await;
    let html = app.page(&rita, &format!("/incidents/{id}")).await;
    assert!(html.contains(r#"id="propose""#), "the form is on the page");
    assert!(
        html.contains(r#"<option value="restart_service">"#),
        "{html}"
    );
    let version = app.version_of(&id).await.to_string();
    let (status, _) = app
        .post_form(
            &rita,
            &format!("/incidents/{id}/recommendations"),
            &[
                ("version", version.as_str()),
                ("kind", "restart_service"),
                ("target", "search-api"),
                ("rationale", "the heap has grown since the morning"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let inv: Value = app
        .get(
            &app.responder,
            &format!("/api/v1/incidents/{id}/investigation"),
        )
        .await
        .json()
        .await
        .unwrap();
    let rec = &inv["recommendations"][0];
    assert_eq!(
        (&rec["kind"], &rec["target"], &rec["status"]),
        (
            &json!("restart_service"),
            &json!("search-api"),
            &json!("proposed")
        )
    );
    // A refused proposal keeps what was typed.
    let (status, html) = app
        .post_form(
            &rita,
            &format!("/incidents/{id}/recommendations"),
            &[
                ("kind", "summon_a_wizard"),
                ("rationale", "nothing else worked"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{html}");
    assert!(html.contains("nothing else worked"), "{html}");
}

#[tokio::test]
async fn a_stale_form_says_what_changed_since_and_offers_a_reload() {
    let app = spawn_app().await;
    let id = app.open_incident("Checkout 503s", "payments-api").await;
    let stale = app.version_of(&id).await.to_string();
    assert!(app.resolve(&id).await.status().is_success());
    post_ok(&app, &format!("/api/v1/incidents/{id}/reopen"), json!({})).await;
    let rita = app.browser("rita").await;
    let (status, html) = app
        .post_form(
            &rita,
            &format!("/incidents/{id}/resolve"),
            &[
                ("version", stale.as_str()),
                ("summary", "Rolled back the release"),
                ("root_cause", "A leak in the retry path"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(html.contains("Rolled back the release"), "input kept");
    assert!(
        html.contains(&format!(r#"<a href="/incidents/{id}" id="reload-page">"#)),
        "{html}"
    );
    let changed = &html[html.find(r#"class="changed-since""#).expect("what changed")..];
    let changed = &changed[..changed.find("</ul>").unwrap()];
    assert_eq!(changed.matches("<li>").count(), 2, "{changed}");
    assert!(changed.contains("resolved"), "{changed}");
    assert!(changed.contains("Resolved → Investigating"), "{changed}");
}

#[tokio::test]
async fn a_superseded_runbook_is_shown_marked_on_the_incident_page() {
    let app = spawn_app().await;
    let v1 = post_ok(
        &app,
        "/api/v1/memories",
        json!({"kind": "runbook", "service": "ledger-api", "title": "Ledger writes stall",
               "steps": "Check the lock wait on the ledger table\nFind the long transaction",
               "failure_modes": ["lock_contention"]}),
    )
    .await;
    post_ok(
        &app,
        "/api/v1/memories",
        json!({"kind": "runbook", "service": "ledger-api", "title": "Ledger writes stall",
               "steps": "Find the long transaction holding the ledger lock\nKill it after a dump",
               "failure_modes": ["lock_contention"], "replaces": v1["id"]}),
    )
    .await;
    let id = app.open_incident("Ledger writes stall", "ledger-api").await;
    let rita = app.browser("rita").await;
    let html = app.page(&rita, &format!("/incidents/{id}")).await;
    let rules = &html[html.find(r#"id="rules""#).expect("rules")..];
    let rules = &rules[..rules.find("</ul>").unwrap()];
    let old = format!(r#"<a href="/memories/{}">"#, v1["id"]);
    let item = rules
        .split("<li")
        .find(|li| li.contains(&old))
        .unwrap_or_else(|| panic!("the old version is recalled: {rules}"));
    assert!(item.contains(r#"<span class="mark">superseded"#), "{item}");
}

#[tokio::test]
async fn the_review_queue_puts_drafts_first_pages_proposals_and_is_read_only_for_responders() {
    let app = spawn_app().await;
    // A draft waiting for confirmation.
    let draft = app.open_incident("Orders time out", "orders-api").await;
    assert!(app.resolve(&draft).await.status().is_success());
    post_ok(
        &app,
        &format!("/api/v1/incidents/{draft}/postmortem"),
        json!({}),
    )
    .await;
    // Twelve failed actions: twelve reflections to decide.
    let id = app
        .open_incident("Queue consumers lag", "queue-workers")
        .await;
    for n in 0..12 {
        let rec = post_ok(
            &app,
            &format!("/api/v1/incidents/{id}/recommendations"),
            json!({"kind": "restart_service", "target": format!("worker-{n}"),
                   "rationale": "clear the stuck consumer"}),
        )
        .await;
        let base = format!("/api/v1/incidents/{id}/recommendations/{}", rec["id"]);
        post_ok(
            &app,
            &format!("{base}/approve"),
            json!({"reason": "a different worker this time"}),
        )
        .await;
        post_ok(
            &app,
            &format!("{base}/verdict"),
            json!({"verdict": "did_not_resolve", "note": "still lagging"}),
        )
        .await;
    }
    assert_eq!(app.proposals_to_decide().await.len(), 12);
    let victor = app.browser("victor").await;
    let html = app.page(&victor, "/review").await;
    let at = |needle: &str| html.find(needle).unwrap_or_else(|| panic!("{needle}"));
    assert!(at(r#"id="review-drafts""#) < at(r#"id="review-proposals""#));
    assert!(html.contains(&format!(r#"<a href="/incidents/{draft}/postmortem">"#)));
    assert_eq!(html.matches(r#"<article class="proposal""#).count(), 10);
    assert!(html.contains("Reflections on failed actions"));
    assert!(html.contains("Page 1 of 2 (12 proposals)"), "{html}");
    assert!(
        html.contains(r#"action="/review/proposals/"#),
        "reviewers decide"
    );
    let second = app.page(&victor, "/review?page=2").await;
    assert_eq!(second.matches(r#"<article class="proposal""#).count(), 2);
    // Deciding on page 2 comes back to page 2.
    let pid = second
        .split(r#"<article class="proposal" id="proposal-"#)
        .nth(1)
        .and_then(|s| s.split('"').next())
        .expect("a proposal on page 2")
        .to_string();
    let version = second
        .split(&format!(r#"action="/review/proposals/{pid}/reject""#))
        .nth(1)
        .and_then(|s| s.split(r#"name="version" value=""#).nth(1))
        .and_then(|s| s.split('"').next())
        .expect("the proposal's version")
        .to_string();
    let res = victor
        .post(app.url(&format!("/review/proposals/{pid}/reject")))
        .header("origin", &app.base)
        .form(&[
            ("version", version.as_str()),
            ("page", "2"),
            ("reason", "the consumer restarts were a guess"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    assert_eq!(res.headers()["location"], "/review?done=rejected&page=2");
    let res = victor
        .post(app.url(&format!("/review/proposals/{pid}/reject")))
        .header("origin", &app.base)
        .form(&[
            ("version", version.as_str()),
            ("page", "2"),
            ("reason", "again"),
        ])
        .send()
        .await
        .unwrap();
    assert_ne!(
        res.status(),
        StatusCode::SEE_OTHER,
        "a decided proposal is not decided twice"
    );
    // A responder sees the same queue without the forms the server would refuse.
    let rita = app.browser("rita").await;
    let html = app.page(&rita, "/review").await;
    assert!(html.contains(r#"id="review-read-only""#));
    assert!(!html.contains(r#"action="/review/proposals/"#), "{html}");
    assert_eq!(html.matches(r#"<article class="proposal""#).count(), 10);
}
