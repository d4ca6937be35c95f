//! The state machine over the JSON API: legal and illegal transitions, concurrency, roles,
//! bad input.

use futures::future::join_all;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{error_of, spawn_app};

/// Drives a new incident into `state` through the API and returns its id.
pub(crate) async fn incident_in(app: &crate::helpers::TestApp, state: &str) -> String {
    let id = app.open_incident("Checkout failing", "payments-api").await;
    let steps: &[(&str, &str)] = match state {
        "investigating" => &[],
        "resolved" => &[("resolve", "")],
        "postmortem_draft" => &[("resolve", ""), ("postmortem", "")],
        "confirmed" => &[
            ("resolve", ""),
            ("postmortem", ""),
            ("postmortem/confirm", ""),
        ],
        "learned" => &[
            ("resolve", ""),
            ("postmortem", ""),
            ("postmortem/confirm", ""),
            ("learn", ""),
        ],
        other => panic!("unknown state {other}"),
    };
    for (step, _) in steps {
        // The responder drafts; a different person (the reviewer) confirms and learns.
        let who = if *step == "postmortem" {
            &app.responder
        } else {
            &app.reviewer
        };
        let res = if *step == "resolve" {
            app.resolve(&id).await
        } else {
            app.post_json(who, &format!("/api/v1/incidents/{id}/{step}"), json!({}))
                .await
        };
        assert!(
            res.status().is_success(),
            "step {step} towards {state}: {}",
            res.status()
        );
        if *step == "postmortem" {
            // The responder writes what set it off: a reviewer confirms only a draft that says.
            app.write_trigger(&id).await;
        }
    }
    let got: Value = app
        .get(&app.responder, &format!("/api/v1/incidents/{id}"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(got["state"], state);
    id
}

#[tokio::test]
async fn an_incident_walks_every_state_and_its_timeline_records_each_step() {
    let app = spawn_app().await;
    let id = incident_in(&app, "learned").await;
    let v: Value = app
        .get(&app.responder, &format!("/api/v1/incidents/{id}"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(v["title"], "Checkout failing");
    assert_eq!(v["service"], "payments-api");
    assert_eq!(v["severity"], "SEV2");
    assert_eq!(v["summary"], "rolled back");
    assert_eq!(v["root_cause"], "bad deploy");
    let kinds: Vec<&str> = v["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "opened",
            "resolve",
            "draft_postmortem",
            "postmortem_edited",
            "confirm",
            "learn"
        ]
    );
    assert_eq!(v["timeline"][0]["actor"], "rita");
    assert_eq!(v["timeline"][4]["actor"], "victor");
    assert!(v["timeline"][0]["at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(v["version"], 5);
}

#[tokio::test]
async fn incident_ids_follow_the_year_and_a_per_year_sequence() {
    let app = spawn_app().await;
    let year = jiff::Timestamp::now()
        .to_zoned_datetime(jiff::tz::TimeZone::UTC)
        .year();
    let a = app.open_incident("a", "svc").await;
    let b = app.open_incident("b", "svc").await;
    assert_eq!(a, format!("INC-{year}-0001"));
    assert_eq!(b, format!("INC-{year}-0002"));
}

#[tokio::test]
async fn every_reopen_goes_where_the_design_says() {
    let app = spawn_app().await;
    for (from, to) in [
        ("resolved", "investigating"),
        ("postmortem_draft", "investigating"),
        ("confirmed", "postmortem_draft"),
    ] {
        let id = incident_in(&app, from).await;
        let res = app
            .post_json(
                &app.responder,
                &format!("/api/v1/incidents/{id}/reopen"),
                json!({}),
            )
            .await;
        assert_eq!(res.status(), StatusCode::OK, "reopen from {from}");
        let v: Value = res.json().await.unwrap();
        assert_eq!(v["state"], to, "reopen from {from}");
    }
}

#[tokio::test]
async fn every_illegal_transition_is_a_409_naming_the_state_and_changes_nothing() {
    let app = spawn_app().await;
    let legal = [
        ("investigating", "resolve"),
        ("resolved", "reopen"),
        ("resolved", "postmortem"),
        ("postmortem_draft", "reopen"),
        ("postmortem_draft", "postmortem/confirm"),
        ("confirmed", "reopen"),
        ("confirmed", "learn"),
        // Learn is idempotent: a repeat returns the stored result (tests/app/postmortem.rs).
        ("learned", "learn"),
    ];
    let label = |s: &str| {
        match s {
            "postmortem_draft" => "post-mortem draft",
            other => other,
        }
        .to_string()
    };
    for state in [
        "investigating",
        "resolved",
        "postmortem_draft",
        "confirmed",
        "learned",
    ] {
        let id = incident_in(&app, state).await;
        for action in [
            "resolve",
            "reopen",
            "postmortem",
            "postmortem/confirm",
            "learn",
        ] {
            if legal.contains(&(state, action)) {
                continue;
            }
            let path = format!("/api/v1/incidents/{id}/{action}");
            let res = if action == "resolve" {
                app.post_json(
                    &app.reviewer,
                    &path,
                    json!({"summary": "s", "root_cause": "r"}),
                )
                .await
            } else {
                app.post_json(&app.reviewer, &path, json!({})).await
            };
            let (status, code, message) = error_of(res).await;
            assert_eq!(status, StatusCode::CONFLICT, "{action} from {state}");
            assert_eq!(code, "invalid_transition");
            assert!(
                message.contains(&label(state)),
                "{message:?} should name {state}"
            );
            let v: Value = app
                .get(&app.responder, &format!("/api/v1/incidents/{id}"))
                .await
                .json()
                .await
                .unwrap();
            assert_eq!(
                v["state"], state,
                "{action} from {state} must not change the state"
            );
        }
    }
    // The message says what must happen first.
    let id = incident_in(&app, "investigating").await;
    let (_, _, message) = error_of(
        app.post_json(
            &app.reviewer,
            &format!("/api/v1/incidents/{id}/learn"),
            json!({}),
        )
        .await,
    )
    .await;
    assert_eq!(
        message,
        "cannot learn an incident that is investigating: a reviewer must confirm the post-mortem first"
    );
}

#[tokio::test]
async fn of_50_concurrent_resolves_exactly_one_wins() {
    let app = spawn_app().await;
    let id = app.open_incident("race", "payments-api").await;
    let results = join_all((0..50).map(|_| app.resolve(&id))).await;
    let ok = results
        .iter()
        .filter(|r| r.status() == StatusCode::OK)
        .count();
    let conflict = results
        .iter()
        .filter(|r| r.status() == StatusCode::CONFLICT)
        .count();
    assert_eq!((ok, conflict), (1, 49));
    let v: Value = app
        .get(&app.responder, &format!("/api/v1/incidents/{id}"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        v["timeline"].as_array().unwrap().len(),
        2,
        "opened + one resolve"
    );
    assert_eq!(v["version"], 2);
}

#[tokio::test]
async fn of_50_concurrent_conflicting_transitions_exactly_one_wins() {
    let app = spawn_app().await;
    let id = incident_in(&app, "resolved").await;
    // Half try to reopen, half to draft the post-mortem: both legal from resolved, only one can win.
    let paths: Vec<String> = (0..50)
        .map(|i| {
            let step = if i % 2 == 0 { "reopen" } else { "postmortem" };
            format!("/api/v1/incidents/{id}/{step}")
        })
        .collect();
    let results = join_all(
        paths
            .iter()
            .map(|p| app.post_json(&app.responder, p, json!({}))),
    )
    .await;
    let ok = results
        .iter()
        .filter(|r| r.status() == StatusCode::OK)
        .count();
    assert_eq!(ok, 1);
    assert!(
        results
            .iter()
            .all(|r| r.status() == StatusCode::OK || r.status() == StatusCode::CONFLICT)
    );
}

#[tokio::test]
async fn credentials_and_roles_are_checked() {
    let app = spawn_app().await;
    let res = app
        .client
        .get(app.url("/api/v1/incidents"))
        .send()
        .await
        .unwrap();
    let (status, code, _) = error_of(res).await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::UNAUTHORIZED, "unauthenticated")
    );
    let res = app.get("im_not-a-real-token", "/api/v1/incidents").await;
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    let res = app
        .client
        .get(app.url("/api/v1/incidents"))
        .header("authorization", "Basic abc")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);

    let id = incident_in(&app, "postmortem_draft").await;
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/postmortem/confirm"),
            json!({}),
        )
        .await;
    let (status, code, message) = error_of(res).await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::FORBIDDEN, "forbidden")
    );
    assert!(message.contains("reviewer"), "{message}");
    let res = app
        .post_json(
            &app.admin,
            &format!("/api/v1/incidents/{id}/postmortem/confirm"),
            json!({}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK, "admin includes reviewer");

    let me: Value = app
        .get(&app.reviewer, "/api/v1/me")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        (me["name"].as_str(), me["role"].as_str()),
        (Some("victor"), Some("reviewer"))
    );
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "a table of cases sent in turn to one app, each next to the answer it expects"
)]
async fn bad_input_gets_a_clear_4xx_and_writes_nothing() {
    let app = spawn_app().await;
    let post = |body: Vec<u8>| {
        app.client
            .post(app.url("/api/v1/incidents"))
            .bearer_auth(&app.responder)
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let cases: Vec<(Vec<u8>, StatusCode, &str)> = vec![
        (
            br#"{"service":"a","severity":"SEV1"}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "title",
        ),
        (
            br#"{"title":"t","service":"a","severity":"SEV9"}"#.to_vec(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "severity",
        ),
        (
            format!(
                r#"{{"title":"{}","service":"a","severity":"SEV1"}}"#,
                "x".repeat(201)
            )
            .into_bytes(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "200",
        ),
        (
            b"{\"title\":\"\xff\xfe\",\"service\":\"a\",\"severity\":\"SEV1\"}".to_vec(),
            StatusCode::BAD_REQUEST,
            "unicode",
        ),
        (b"{not json".to_vec(), StatusCode::BAD_REQUEST, "line 1"),
        (
            br#"{"title":"  ","service":"a","severity":"SEV1"}"#.to_vec(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "title",
        ),
        (
            br#"{"title":"t","service":"has space","severity":"SEV1"}"#.to_vec(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "service",
        ),
        (
            format!(
                r#"{{"title":"t","service":"a","severity":"SEV1","description":"{}"}}"#,
                "d".repeat(2 * 1024 * 1024)
            )
            .into_bytes(),
            StatusCode::PAYLOAD_TOO_LARGE,
            "limit",
        ),
    ];
    for (body, want, needle) in cases {
        let res = post(body).await.unwrap();
        let (status, _, message) = error_of(res).await;
        assert_eq!(status, want, "{message}");
        assert!(
            message.contains(needle),
            "{message:?} should mention {needle}"
        );
    }
    let res = app
        .client
        .post(app.url("/api/v1/incidents"))
        .bearer_auth(&app.responder)
        .header("content-type", "text/plain")
        .body("title=t")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    assert_eq!(app.count("incidents").await, 0);
    assert_eq!(app.count("timeline_events").await, 0);

    // Resolve without a root cause: 422, state unchanged.
    let id = app.open_incident("t", "a").await;
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/resolve"),
            json!({"summary": "s", "root_cause": ""}),
        )
        .await;
    let (status, _, message) = error_of(res).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(message.contains("root_cause"), "{message}");
    let v: Value = app
        .get(&app.responder, &format!("/api/v1/incidents/{id}"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(v["state"], "investigating");

    // Unknown ids and filters.
    assert_eq!(
        app.get(&app.responder, "/api/v1/incidents/INC-2020-9999")
            .await
            .status(),
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.get(&app.responder, "/api/v1/incidents/nonsense")
            .await
            .status(),
        StatusCode::NOT_FOUND
    );
    let res = app
        .get(&app.responder, "/api/v1/incidents?severity=SEV7")
        .await;
    assert_eq!(res.status(), StatusCode::UNPROCESSABLE_ENTITY);
}

#[tokio::test]
async fn the_list_filters_by_state_service_and_severity() {
    let app = spawn_app().await;
    let a = app.open_incident("a", "payments-api").await;
    let _b = app.open_incident("b", "search").await;
    assert_eq!(app.resolve(&a).await.status(), StatusCode::OK);
    let ids = |v: Value| -> Vec<String> {
        v["incidents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["id"].as_str().unwrap().to_string())
            .collect()
    };
    let all = ids(app
        .get(&app.responder, "/api/v1/incidents")
        .await
        .json()
        .await
        .unwrap());
    assert_eq!(all.len(), 2);
    let resolved = ids(app
        .get(&app.responder, "/api/v1/incidents?state=resolved")
        .await
        .json()
        .await
        .unwrap());
    assert_eq!(resolved, vec![a.clone()]);
    let pay = ids(app
        .get(
            &app.responder,
            "/api/v1/incidents?service=payments-api&severity=SEV2",
        )
        .await
        .json()
        .await
        .unwrap());
    assert_eq!(pay, vec![a]);
    let none = ids(app
        .get(&app.responder, "/api/v1/incidents?severity=SEV1")
        .await
        .json()
        .await
        .unwrap());
    assert!(none.is_empty());
}

#[tokio::test]
async fn the_audit_chain_verifies_and_breaks_when_a_row_is_edited() {
    use incidentmind::store::audit::{Verification, verify};
    let app = spawn_app().await;
    let id = incident_in(&app, "learned").await;
    let Verification::Intact { entries } = verify(&app.pool).await.unwrap() else {
        panic!("chain broken before any edit");
    };
    let expected: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM audit_log")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(entries, expected);
    assert!(entries > 5, "transitions and memory writes are audited");
    let res = sqlx::query("UPDATE audit_log SET actor = 'mallory' WHERE seq = 2")
        .execute(&app.pool)
        .await;
    assert!(res.is_err(), "the table refuses updates");
    crate::helpers::drop_audit_update_guard(&app.pool).await;
    sqlx::query("UPDATE audit_log SET actor = 'mallory' WHERE seq = 2")
        .execute(&app.pool)
        .await
        .unwrap();
    match verify(&app.pool).await.unwrap() {
        Verification::Broken { seq, .. } => assert_eq!(seq, 2),
        other => panic!("expected a break, got {other:?} for {id}"),
    }
}
