//! What an incident write announces (DESIGN.md §8, the seam of the live page, issue #55): every
//! timeline event it recorded, handed to the app's change hub after its commit, and nothing for
//! a write that was refused or rolled back; on PostgreSQL the same notices are sent with
//! `NOTIFY` inside the transaction.

use std::time::Duration;

use incidentmind::domain::IncidentId;
use incidentmind::store::changes::{CHANNEL, Change};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::spawn_app;

/// The next change of `sub`, or `None` when nothing arrives within `wait`.
async fn next_within(
    sub: &mut incidentmind::store::changes::Subscription,
    wait: Duration,
) -> Option<Change> {
    match tokio::time::timeout(wait, sub.next()).await {
        Ok(got) => got.expect("no missed notices").map(|c| (*c).clone()),
        Err(_) => None,
    }
}

#[tokio::test]
async fn a_committed_write_announces_its_event_and_a_refused_one_nothing() {
    let app = spawn_app().await;
    let id = app.open_incident("Checkout queue grows", "checkout").await;
    let iid = IncidentId::parse(&id).unwrap();
    let other = app.open_incident("Search index stale", "search").await;
    let mut sub = app.memory.pool().changes().subscribe(&iid);

    // Based on a version that is not current: a 409 that changes and announces nothing.
    let stale = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/resolve"),
            json!({"summary": "rolled back", "root_cause": "bad deploy", "version": 99}),
        )
        .await;
    assert_eq!(stale.status(), StatusCode::CONFLICT);
    // Another incident's change is not this subscriber's.
    assert_eq!(app.resolve(&other).await.status(), StatusCode::OK);
    assert_eq!(
        next_within(&mut sub, Duration::from_millis(300)).await,
        None
    );

    assert_eq!(app.resolve(&id).await.status(), StatusCode::OK);
    let change = next_within(&mut sub, Duration::from_secs(2))
        .await
        .expect("the resolve is announced");
    let v: Value = app
        .get(&app.responder, &format!("/api/v1/incidents/{id}"))
        .await
        .json()
        .await
        .unwrap();
    let last = v["timeline"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(change.incident, iid);
    assert_eq!(change.kind, "resolve");
    assert_eq!(change.actor, "rita", "the responder");
    assert_eq!(
        json!(change.event_id),
        last["id"],
        "the timeline event's id"
    );
    assert_eq!(change.origin, app.memory.pool().changes().origin());
    assert_eq!(
        next_within(&mut sub, Duration::from_millis(200)).await,
        None
    );
}

#[tokio::test]
async fn on_postgresql_a_committed_write_notifies_listeners_and_a_refused_one_does_not() {
    let Some(_) = crate::helpers::suite_on_postgres() else {
        eprintln!(
            "SKIPPED: the suite runs on SQLite (INCIDENTMIND_TEST_BACKEND=postgres for this)"
        );
        return;
    };
    let app = spawn_app().await;
    let id = app.open_incident("Checkout queue grows", "checkout").await;
    let mut listener = sqlx::postgres::PgListener::connect(&app.database_url)
        .await
        .expect("listen connection");
    listener.listen(CHANNEL).await.expect("LISTEN");
    let stale = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/resolve"),
            json!({"summary": "rolled back", "root_cause": "bad deploy", "version": 99}),
        )
        .await;
    assert_eq!(stale.status(), StatusCode::CONFLICT);
    assert_eq!(app.resolve(&id).await.status(), StatusCode::OK);
    let n = tokio::time::timeout(Duration::from_secs(5), listener.recv())
        .await
        .expect("a notice within 5 s")
        .expect("notification");
    let change: Change = serde_json::from_str(n.payload()).expect("a change notice");
    assert_eq!(change.incident.as_str(), id);
    assert_eq!(
        change.kind, "resolve",
        "the refused write sent nothing first"
    );
    assert_eq!(change.actor, "rita", "the responder");
}
