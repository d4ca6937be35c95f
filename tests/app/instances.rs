//! Two app instances on one PostgreSQL database: what a load balancer in front of
//! them needs to hold. Each test builds instance A (the usual test app) and instance B (built and
//! served as `serve` does, sharing only the database) on a fresh database of the server named by
//! `INCIDENTMIND_TEST_DATABASE_URL`; without one they print SKIPPED (and fail under `CI=true`).

use futures::future::join_all;
use incidentmind::store::audit::{Verification, verify};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{
    TestApp, fresh_postgres_database, postgres_server, serve_instance, spawn_app_at,
};
use crate::webhooks::{integration, sample};
use crate::workflow::incident_in;

/// Instance A (with users and tokens) and instance B's base URL, on one fresh PostgreSQL
/// database; `None` (test skipped) without a server.
async fn two_instances(test: &str) -> Option<(TestApp, String)> {
    let server = postgres_server(test)?;
    let url = fresh_postgres_database(&server).await;
    let a = spawn_app_at(&url).await;
    let b = serve_instance(&url).await;
    Some((a, b))
}

/// `base` of A for even `i`, of B for odd: requests alternate between the instances.
fn either<'a>(a: &'a TestApp, b: &'a str, i: usize) -> &'a str {
    if i.is_multiple_of(2) { &a.base } else { b }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn of_100_conflicting_transitions_over_two_instances_exactly_one_wins() {
    let Some((a, b)) = two_instances("instances::conflicting_transitions").await else {
        return;
    };
    let id = a
        .open_incident("Queue consumers stuck", "billing-worker")
        .await;
    assert_eq!(a.resolve(&id).await.status(), StatusCode::OK);
    // From resolved both reopen and drafting the post-mortem are legal, and each request is
    // based on the resolved incident (version 2): only one may win. (Without the version a
    // reopen after a winning draft is legal too: post-mortem draft → investigating.)
    let results = join_all((0..100).map(|i| {
        let step = if i % 4 < 2 { "reopen" } else { "postmortem" };
        a.client
            .post(format!(
                "{}/api/v1/incidents/{id}/{step}",
                either(&a, &b, i)
            ))
            .bearer_auth(&a.responder)
            .header("If-Match", "\"2\"")
            .json(&json!({}))
            .send()
    }))
    .await;
    let statuses: Vec<StatusCode> = results
        .into_iter()
        .map(|r| r.expect("request").status())
        .collect();
    // A reopen answers 200, a drafted post-mortem 201.
    let ok = statuses.iter().filter(|s| s.is_success()).count();
    let conflict = statuses
        .iter()
        .filter(|s| **s == StatusCode::CONFLICT)
        .count();
    assert_eq!((ok, conflict), (1, 99), "{statuses:?}");
    let v: Value = a
        .get(&a.responder, &format!("/api/v1/incidents/{id}"))
        .await
        .json()
        .await
        .expect("incident");
    assert_eq!(v["version"], 3, "opened, resolved, then one winner: {v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_same_delivery_50_times_over_two_instances_opens_one_incident() {
    let Some((a, b)) = two_instances("instances::duplicate_deliveries").await else {
        return;
    };
    let (_, am) = integration(&a, "am", "alertmanager", json!({})).await;
    let body = sample("alertmanager_v4_firing.captured.json");
    let results = join_all((0..50).map(|i| {
        a.client
            .post(format!(
                "{}/api/v1/webhooks/alertmanager",
                either(&a, &b, i)
            ))
            .bearer_auth(&am)
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
    }))
    .await;
    for r in results {
        assert_eq!(r.expect("request").status(), StatusCode::ACCEPTED);
    }
    assert_eq!(a.count("incidents").await, 1);
    assert_eq!(a.count("alert_groups").await, 1);
    let evidence: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM evidence WHERE kind = 'alert'")
        .fetch_one(&a.pool)
        .await
        .expect("count");
    let alerts = a.count("alerts").await;
    assert_eq!(
        evidence, alerts,
        "one evidence item per alert, none repeated"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_on_two_instances_keep_one_audit_chain() {
    let Some((a, b)) = two_instances("instances::audit_chain").await else {
        return;
    };
    // 40 incidents opened at once, half through each instance, then evidence on each.
    let opened = join_all((0..40).map(|i| {
        a.client
            .post(format!("{}/api/v1/incidents", either(&a, &b, i)))
            .bearer_auth(&a.responder)
            .json(&json!({
                "title": format!("Disk pressure on node {i}"),
                "service": "storage-node",
                "severity": "SEV3"
            }))
            .send()
    }))
    .await;
    let mut ids = Vec::new();
    for r in opened {
        let r = r.expect("request");
        assert_eq!(r.status(), StatusCode::CREATED);
        let v: Value = r.json().await.expect("json");
        ids.push(v["id"].as_str().expect("id").to_string());
    }
    let added = join_all(ids.iter().enumerate().map(|(i, id)| {
        a.client
            .post(format!(
                "{}/api/v1/incidents/{id}/evidence",
                either(&a, &b, i + 1)
            ))
            .bearer_auth(&a.responder)
            .json(&json!({"kind": "note", "content": format!("kubelet evicted pods on node {i}")}))
            .send()
    }))
    .await;
    for r in added {
        assert_eq!(r.expect("request").status(), StatusCode::CREATED);
    }
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 40, "every incident got its own id");
    let rows = a.count("audit_log").await;
    assert!(
        rows >= 80,
        "each opening and each evidence item is audited: {rows}"
    );
    assert_eq!(
        verify(&a.pool).await.expect("verify"),
        Verification::Intact { entries: rows }
    );
}

#[tokio::test]
async fn a_session_signed_in_on_one_instance_works_on_the_other() {
    let Some((a, b)) = two_instances("instances::sessions").await else {
        return;
    };
    let browser = a.browser("rita").await;
    let res = browser
        .get(format!("{b}/incidents"))
        .send()
        .await
        .expect("page");
    assert_eq!(res.status(), StatusCode::OK, "B knows A's session");
    let html = res.text().await.expect("html");
    assert!(html.contains("rita"), "signed in as rita on B");
    // Signing out on B ends the session on A too.
    let res = browser
        .post(format!("{b}/signout"))
        .header("origin", &b)
        .send()
        .await
        .expect("sign out");
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    let res = browser.get(a.url("/incidents")).send().await.expect("page");
    assert_eq!(
        res.status(),
        StatusCode::SEE_OTHER,
        "signed out on A as well"
    );
}

#[tokio::test]
async fn a_memory_written_through_one_instance_is_recalled_through_the_other_at_once() {
    let Some((a, b)) = two_instances("instances::recall").await else {
        return;
    };
    let recall = |base: String| {
        let client = a.client.clone();
        let token = a.responder.clone();
        async move {
            let v: Value = client
                .get(format!(
                    "{base}/api/v1/recall?q=replica+lag+read+traffic&k=5"
                ))
                .bearer_auth(token)
                .send()
                .await
                .expect("recall")
                .json()
                .await
                .expect("json");
            v["results"].as_array().map(Vec::len).unwrap_or(0)
        }
    };
    // B recalls first, so it holds a (still empty) index of its own.
    assert_eq!(recall(b.clone()).await, 0);
    let res = a
        .post_json(
            &a.responder,
            "/api/v1/memories",
            json!({
                "kind": "runbook",
                "service": "orders-db",
                "title": "Replica lag on orders",
                "steps": "Move read traffic to the primary\nRestart the lagging replica",
                "common_causes": "long-running analytics query"
            }),
        )
        .await;
    assert_eq!(
        res.status(),
        StatusCode::CREATED,
        "{}",
        res.text().await.unwrap_or_default()
    );
    assert!(
        recall(b).await >= 1,
        "B recalls what A wrote, without a restart"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn learn_sent_20_times_over_two_instances_writes_memory_once() {
    let Some((a, b)) = two_instances("instances::learn").await else {
        return;
    };
    // The same incident in a separate app, learned by one request: what one Learn writes.
    let solo = crate::helpers::spawn_app().await;
    let control = incident_in(&solo, "confirmed").await;
    let before = solo.count("records").await;
    let res = solo
        .post_json(
            &solo.reviewer,
            &format!("/api/v1/incidents/{control}/learn"),
            json!({}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let once = solo.count("records").await - before;
    assert!(once > 0, "Learn writes memory");
    let raced = incident_in(&a, "confirmed").await;
    let before = a.count("records").await;
    let results = join_all((0..20).map(|i| {
        a.client
            .post(format!(
                "{}/api/v1/incidents/{raced}/learn",
                either(&a, &b, i)
            ))
            .bearer_auth(&a.reviewer)
            .json(&json!({}))
            .send()
    }))
    .await;
    // Learn is idempotent: every request succeeds, and the memory is written once.
    for r in results {
        assert_eq!(r.expect("request").status(), StatusCode::OK);
    }
    assert_eq!(a.count("records").await - before, once);
    let v: Value = a
        .get(&a.responder, &format!("/api/v1/incidents/{raced}"))
        .await
        .json()
        .await
        .expect("incident");
    assert_eq!(v["state"], "learned");
    let learned = v["timeline"]
        .as_array()
        .expect("timeline")
        .iter()
        .filter(|e| e["kind"] == "learn")
        .count();
    assert_eq!(learned, 1, "one Learn on the timeline: {v}");
    assert!(matches!(
        verify(&a.pool).await.expect("verify"),
        Verification::Intact { .. }
    ));
}

#[tokio::test]
async fn a_nul_character_in_a_filter_or_an_alert_key_is_a_4xx_never_a_500() {
    let Some(server) = postgres_server("instances::nul") else {
        return;
    };
    let a = spawn_app_at(&fresh_postgres_database(&server).await).await;
    let res = a
        .get(&a.responder, "/api/v1/incidents?service=pay%00ments")
        .await;
    assert!(res.status().is_client_error(), "{}", res.status());
    let (_, am) = integration(&a, "am", "alertmanager", json!({})).await;
    let body = json!({
        "version": "4", "groupKey": "{}:{alertname=\"Nul\u{0}Key\"}", "status": "firing",
        "receiver": "incidentmind", "groupLabels": {}, "commonLabels": {}, "commonAnnotations": {},
        "externalURL": "http://am", "truncatedAlerts": 0,
        "alerts": [{"status": "firing", "labels": {"alertname": "NulKey", "service": "ledger"},
                    "annotations": {}, "startsAt": "2026-12-02T10:00:00Z",
                    "endsAt": "0001-01-01T00:00:00Z", "generatorURL": "", "fingerprint": "ab\u{0}cd"}]
    });
    let res = a
        .client
        .post(a.url("/api/v1/webhooks/alertmanager"))
        .bearer_auth(&am)
        .json(&body)
        .send()
        .await
        .expect("delivery");
    assert!(
        res.status().is_success() || res.status().is_client_error(),
        "{}",
        res.status()
    );
}
