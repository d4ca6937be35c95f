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
    // Still approvable, with what is different this time (issue #49; without it, a 422).
    let rid_b = raise_b["id"].as_i64().unwrap();
    let approve_b = format!("/api/v1/incidents/{b}/recommendations/{rid_b}/approve");
    let res = app.post_json(&app.responder, &approve_b, json!({})).await;
    assert_eq!(res.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let res = app
        .post_json(
            &app.responder,
            &approve_b,
            json!({"reason": "the database now has room for more connections"}),
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
#[allow(
    clippy::too_many_lines,
    reason = "one end-to-end scenario: each step acts on what the steps before it left, so it reads top to bottom"
)]
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
    // A verdict is never assumed: none chosen is a 422 that says so, and nothing is recorded.
    let (status, _, message) = error_of(
        app.post_json(&app.responder, &verdict_path, json!({}))
            .await,
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(message.contains("choose a verdict"), "{message}");
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

async fn act(app: &TestApp, id: &str, rid: i64, step: &str, body: Value) {
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/recommendations/{rid}/{step}"),
            body,
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK, "{step} {rid}");
}

fn kinds(inv: &Value) -> Vec<String> {
    inv["recommendations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["kind"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn what_resolved_a_similar_incident_ranks_first_and_what_was_rejected_ranks_lower() {
    let app = spawn_app().await;
    // A: the restart resolved it; the pool raise was rejected; then A is learned.
    let a = app
        .open_incident("Payments API errors", "payments-api")
        .await;
    add_evidence(&app, &a, POOL_LOG).await;
    let inv_a = investigate(&app, &a).await;
    assert_eq!(kinds(&inv_a)[0], "raise_pool_limit", "{inv_a}");
    let raise = rec_of(&inv_a, "raise_pool_limit")["id"].as_i64().unwrap();
    act(
        &app,
        &a,
        raise,
        "reject",
        json!({"reason": "the primary database is at its connection cap"}),
    )
    .await;
    let restart = rec_of(&inv_a, "restart_service")["id"].as_i64().unwrap();
    act(&app, &a, restart, "approve", json!({})).await;
    act(
        &app,
        &a,
        restart,
        "verdict",
        json!({"verdict": "resolved", "note": "waits dropped to zero"}),
    )
    .await;
    let res = app.post_json(&app.responder, &format!("/api/v1/incidents/{a}/resolve"), json!({"summary": "Restarted the API", "root_cause": "Stuck connections after a network blip held the whole pool."})).await;
    assert_eq!(res.status(), StatusCode::OK);
    for (who, step) in [
        (&app.responder, "postmortem"),
        (&app.reviewer, "postmortem/confirm"),
        (&app.reviewer, "learn"),
    ] {
        let res = app
            .post_json(who, &format!("/api/v1/incidents/{a}/{step}"), json!({}))
            .await;
        assert!(res.status().is_success(), "{step}: {}", res.status());
        if step == "postmortem" {
            app.write_trigger(&a).await;
        }
    }

    // B: the same failure on the same service.
    let b = app
        .open_incident("Payments API errors again", "payments-api")
        .await;
    add_evidence(&app, &b, POOL_LOG).await;
    let inv_b = investigate(&app, &b).await;
    let order = kinds(&inv_b);
    assert_eq!(order[0], "restart_service", "{order:?}");
    let first = rec_of(&inv_b, "restart_service")["rationale"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        first.contains(&a),
        "cites the incident it resolved: {first}"
    );
    assert_eq!(order.last().unwrap(), "raise_pool_limit", "{order:?}");
    let raise_b = rec_of(&inv_b, "raise_pool_limit")["rationale"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        raise_b.starts_with(&format!(
            "Rejected during the similar past incident {a}: the primary database is at its \
             connection cap"
        )),
        "{raise_b}"
    );

    // Rejected in this incident: lower on the next investigation, with the reason.
    let rid = rec_of(&inv_b, "restart_service")["id"].as_i64().unwrap();
    act(
        &app,
        &b,
        rid,
        "reject",
        json!({"reason": "a restart drops the batch in flight"}),
    )
    .await;
    let again = investigate(&app, &b).await;
    let order = kinds(&again);
    assert_ne!(order[0], "restart_service", "{order:?}");
    let restart_b = rec_of(&again, "restart_service")["rationale"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        restart_b
            .starts_with("Rejected earlier in this incident: a restart drops the batch in flight"),
        "{restart_b}"
    );
}

#[tokio::test]
async fn verdicts_read_as_words_on_the_page_and_the_timeline() {
    let app = spawn_app().await;
    let id = app.open_incident("Orders API slow", "orders-api").await;
    add_evidence(&app, &id, POOL_LOG).await;
    let inv = investigate(&app, &id).await;
    let rid = rec_of(&inv, "raise_pool_limit")["id"].as_i64().unwrap();
    act(&app, &id, rid, "approve", json!({})).await;
    act(
        &app,
        &id,
        rid,
        "verdict",
        json!({"verdict": "did_not_resolve", "note": "still waiting"}),
    )
    .await;
    let html = app
        .get(&app.responder, &format!("/incidents/{id}"))
        .await
        .text()
        .await
        .unwrap();
    assert!(html.contains("Verdict: did not resolve"), "{html}");
    assert!(
        !html.contains("did_not_resolve —"),
        "no raw code in the timeline"
    );
    assert!(!html.contains("Verdict: did_not_resolve"));
}

/// Writes a durable record of `incident` on `service` straight into memory.
async fn remember(
    app: &TestApp,
    incident: &str,
    kind: incidentmind::domain::MemoryKind,
    service: &str,
    text: &str,
) -> i64 {
    let mut r = incidentmind::domain::memory::NewRecord::new(kind, text, "victor");
    r.incident_id = Some(incident.to_string());
    r.services = vec![service.to_string()];
    if kind == incidentmind::domain::MemoryKind::RemediationFailure {
        r.action_kind = Some(incidentmind::domain::ActionKind::ScaleOut);
    }
    incidentmind::services::memory::write(&app.db, r)
        .await
        .unwrap()
        .id
}

/// The memory ids listed under "Known dead ends" on a page.
fn dead_end_ids(html: &str) -> Vec<i64> {
    let start = html.find("id=\"dead-ends\"").expect("the dead-end panel");
    let end = start + html[start..].find("</ul>").expect("its end");
    html[start..end]
        .split("href=\"/memories/")
        .skip(1)
        .filter_map(|s| s.split('"').next()?.parse().ok())
        .collect()
}

#[tokio::test]
async fn the_dead_end_panel_shows_the_recalled_incidents_own_dead_end_not_weak_matches_elsewhere() {
    use incidentmind::domain::MemoryKind::{RemediationFailure, Symptom};
    let app = spawn_app().await;
    let service = "tile-cache";
    let first = app
        .open_incident(
            "Tile cache shards evicted during the nightly compaction",
            service,
        )
        .await;
    // The recalled incident: many records that match the new one well, and its dead end
    // worded apart from them, so recall ranks it below its incident's first records.
    for text in [
        "Tile cache shards evicted during the nightly compaction, render latency tripled",
        "Nightly compaction evicted the hot tile cache shards on every render node",
        "Render latency climbed while tile cache shards were evicted by compaction",
        "Tile cache hit ratio fell to a third during the nightly compaction window",
        "Compaction of the tile cache store evicted shards faster than renders refilled them",
    ] {
        remember(&app, &first, Symptom, service, text).await;
    }
    let own = remember(
        &app,
        &first,
        RemediationFailure,
        service,
        "Adding nodes did not help: the new ones started cold as well",
    )
    .await;
    // Dead ends of incidents on other services that share only a word or two.
    let mut elsewhere = Vec::new();
    for (title, other) in [
        ("Invoice export stalled overnight", "invoice-export"),
        ("Chat gateway dropped sockets", "chat-gateway"),
    ] {
        let id = app.open_incident(title, other).await;
        elsewhere.push(
            remember(
                &app,
                &id,
                RemediationFailure,
                other,
                &format!("{title}: adding nodes during the nightly window did not help"),
            )
            .await,
        );
    }
    let second = app
        .open_incident(
            "Tile cache shards evicted again by the nightly compaction",
            service,
        )
        .await;
    let html = app
        .whole_page(&app.responder, &format!("/incidents/{second}"))
        .await;
    let shown = dead_end_ids(&html);
    assert_eq!(shown.first(), Some(&own), "{shown:?} (own {own})");
    for id in elsewhere {
        assert!(!shown.contains(&id), "weak match {id} in {shown:?}");
    }
}
