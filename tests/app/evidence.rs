//! Evidence: extraction over HTTP, line references, limits, redaction of stored rows.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{error_of, spawn_app, spawn_app_with};

fn shared(path: &str) -> Option<String> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/data")
        .join(path);
    match std::fs::read_to_string(&p) {
        Ok(s) => Some(s),
        Err(e) => {
            // CI always has ../shared: there a missing file is a failure, not a skip.
            crate::skip::skip(
                "a test over shared data",
                &format!("{} is missing ({e})", p.display()),
                crate::skip::Required::InCi(None),
            );
            None
        }
    }
}

#[tokio::test]
async fn pasted_logs_become_observations_pointing_at_their_lines() {
    let app = spawn_app().await;
    let id = app.open_incident("checkout slow", "payments-api").await;
    let mut log = String::new();
    for i in 0..40 {
        log.push_str(&format!(
            "2026-11-29T10:{:02}:00Z INFO request served path=/checkout status=200 ms={}\n",
            i,
            20 + i
        ));
    }
    for i in 0..12 {
        log.push_str(&format!("2026-11-29T10:{:02}:30Z ERROR HikariPool-1 - Connection is not available, request timed out after 30000ms.\n", 40 + i));
    }
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/evidence"),
            json!({"kind": "logs", "content": log, "source": "payments-api pod logs"}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let v: Value = res.json().await.unwrap();
    assert_eq!(v["evidence"]["lines"], 52);
    let obs = v["observations"].as_array().unwrap();
    let pool = obs
        .iter()
        .find(|o| {
            o["failure_modes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t == "connection_pool_exhausted")
                && o["data"]["level"] == "error"
        })
        .expect("pool exhaustion observation");
    assert_eq!(pool["epistemic_type"], "observation");
    assert_eq!(pool["data"]["count"], 12);
    assert_eq!(pool["data"]["line_ranges"][0]["start"], 41);
    assert_eq!(pool["data"]["line_ranges"][0]["end"], 52);
    assert_eq!(pool["data"]["first_seen"], "2026-11-29T10:40:30Z");
    // The incident page shows it grouped by failure mode, linking to the lines.
    let eid = v["evidence"]["id"].as_i64().unwrap();
    let html = app
        .get(&app.responder, &format!("/incidents/{id}"))
        .await
        .text()
        .await
        .unwrap()
        .replace("&#38;", "&amp;");
    assert!(
        html.contains("connection_pool_exhausted"),
        "grouped by failure mode"
    );
    let link = format!("/incidents/{id}/evidence/{eid}?from=41&amp;to=52");
    assert!(html.contains(&link), "line link {link}");
    let lines = app
        .get(
            &app.responder,
            &format!("/incidents/{id}/evidence/{eid}?from=41&to=42"),
        )
        .await
        .text()
        .await
        .unwrap();
    assert!(lines.contains("<span class=\"ln\">41</span>"));
    assert!(lines.contains("Connection is not available"));
    assert!(!lines.contains("<span class=\"ln\">43</span>"));
    let timeline: Value = app
        .get(&app.responder, &format!("/api/v1/incidents/{id}"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(timeline["timeline"][1]["kind"], "evidence_added");
}

#[tokio::test]
async fn raw_text_uploads_replace_invalid_utf8_and_multipart_files_are_read() {
    let app = spawn_app().await;
    let id = app.open_incident("disk", "logging").await;
    let mut body = b"Nov 29 10:00:01 host app[1]: write failed: No space left on device\n".to_vec();
    body.extend_from_slice(b"Nov 29 10:00:02 host app[1]: bad bytes \xff\xfe here\n");
    let res = app
        .client
        .post(app.url(&format!(
            "/api/v1/incidents/{id}/evidence?kind=logs&source=syslog"
        )))
        .bearer_auth(&app.responder)
        .header("content-type", "text/plain")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    let v: Value = res.json().await.unwrap();
    let tags: Vec<String> = v["observations"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|o| {
            o["failure_modes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_str().unwrap().to_string())
        })
        .collect();
    assert!(tags.contains(&"disk_full".to_string()), "{tags:?}");

    let form = reqwest::multipart::Form::new().text("kind", "note").part(
        "file",
        reqwest::multipart::Part::bytes(b"Customers report 502 Bad Gateway on checkout".to_vec())
            .file_name("report.txt"),
    );
    let res = app
        .client
        .post(app.url(&format!("/api/v1/incidents/{id}/evidence")))
        .bearer_auth(&app.responder)
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    let v: Value = res.json().await.unwrap();
    assert_eq!(v["evidence"]["source"], "report.txt");
    assert_eq!(v["evidence"]["kind"], "note");
}

#[tokio::test]
async fn a_body_over_the_evidence_limit_is_413_and_nothing_is_stored() {
    let app = spawn_app().await;
    let id = app.open_incident("big", "svc").await;
    let big = "x".repeat(60 * 1024 * 1024);
    let res = app
        .client
        .post(app.url(&format!("/api/v1/incidents/{id}/evidence?kind=logs")))
        .bearer_auth(&app.responder)
        .header("content-type", "text/plain")
        .body(big)
        .send()
        .await
        .unwrap();
    let (status, code, message) = error_of(res).await;
    assert_eq!(
        (status, code.as_str()),
        (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large")
    );
    assert!(message.contains("52428800"), "{message}");
    assert_eq!(app.count("evidence").await, 0);
    assert_eq!(app.count("records").await, 0);
}

#[tokio::test]
async fn a_small_configured_limit_applies_to_json_evidence_too() {
    let app = spawn_app_with(incidentmind::Settings {
        max_evidence_bytes: 1000,
        ..Default::default()
    })
    .await;
    let id = app.open_incident("big", "svc").await;
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/evidence"),
            json!({"kind": "logs", "content": "y".repeat(5000)}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/evidence"),
            json!({"kind": "gossip", "content": "z"}),
        )
        .await;
    let (status, _, message) = error_of(res).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(message.contains("logs, metrics, alert or note"));
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/evidence"),
            json!({"kind": "logs", "content": "   "}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(app.count("evidence").await, 0);
}

#[tokio::test]
async fn a_secret_corpus_leaves_no_secret_in_stored_rows() {
    let app = spawn_app().await;
    let id = app.open_incident("leak", "svc").await;
    let secrets = [
        "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c",
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "AKIAIOSFODNN7EXAMPLE",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "s3cr3tPassw0rd",
        "oncall.engineer@example.com",
        "xoxb-123456789012-abcdefghijklmnop",
    ];
    let log = format!(
        "2026-11-29T10:00:00Z ERROR auth failed api_key={}\n2026-11-29T10:00:01Z ERROR github token {}\n\
         2026-11-29T10:00:02Z WARN aws_access_key_id={} aws_secret_access_key={}\n\
         2026-11-29T10:00:03Z ERROR Authorization: Bearer {}\n2026-11-29T10:00:04Z ERROR db url postgres://app:{}@db.internal/pay\n\
         2026-11-29T10:00:05Z INFO paged {}\n2026-11-29T10:00:06Z ERROR slack {}\n",
        secrets[0],
        secrets[1],
        secrets[2],
        secrets[3],
        secrets[4],
        secrets[5],
        secrets[6],
        secrets[7]
    );
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/evidence"),
            json!({"kind": "logs", "content": log}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let stored: Vec<String> = sqlx::query_scalar("SELECT content FROM evidence UNION ALL SELECT text || data FROM records UNION ALL SELECT detail FROM timeline_events UNION ALL SELECT detail FROM audit_log")
        .fetch_all(&app.pool)
        .await
        .unwrap();
    for s in secrets {
        assert!(
            stored.iter().all(|row| !row.contains(s)),
            "secret {s} stored"
        );
    }
    assert!(stored[0].contains("<email-1>"), "{}", stored[0]);
}

#[tokio::test]
async fn each_alert_sample_becomes_observations() {
    let app = spawn_app().await;
    let id = app.open_incident("alerts", "svc").await;
    for file in [
        "alerts/alertmanager_v4_firing.captured.json",
        "alerts/grafana_alerting_webhook.official.json",
        "alerts/opsgenie_webhook_create.official.json",
        "alerts/pagerduty_v3_incident_priority_updated.official.json",
    ] {
        let Some(body) = shared(file) else { return };
        let res = app
            .post_json(
                &app.responder,
                &format!("/api/v1/incidents/{id}/evidence"),
                json!({"kind": "alert", "content": body, "source": file}),
            )
            .await;
        assert_eq!(res.status(), StatusCode::CREATED, "{file}");
        let v: Value = res.json().await.unwrap();
        assert!(!v["observations"].as_array().unwrap().is_empty(), "{file}");
    }
}

#[tokio::test]
async fn a_loghub_sample_is_grouped_into_templates() {
    let app = spawn_app().await;
    let id = app.open_incident("hdfs", "hdfs").await;
    let Some(log) = shared("loghub/HDFS/HDFS_2k.log") else {
        return;
    };
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/evidence"),
            json!({"kind": "logs", "content": log}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let v: Value = res.json().await.unwrap();
    assert_eq!(v["evidence"]["lines"], 2000);
    assert_eq!(v["evidence"]["format"], "hdfs");
    let obs = v["observations"].as_array().unwrap();
    assert!(obs.len() <= 25 && obs.len() >= 2, "{}", obs.len());
    assert!(
        obs[0]["text"].as_str().unwrap().contains("2,000 lines"),
        "{}",
        obs[0]["text"]
    );
}

#[tokio::test]
async fn a_json_paste_takes_its_incident_version_as_a_number_like_every_other_json_body() {
    let app = spawn_app().await;
    let id = app
        .open_incident("Checkout p99 latency above 2 s", "checkout")
        .await;
    let path = format!("/api/v1/incidents/{id}/evidence");
    let paste = |version: Value| json!({"kind": "note", "content": "p99 2.4 s since 14:02 UTC", "version": version});
    // Version 1 is the incident as opened: accepted.
    let res = app.post_json(&app.responder, &path, paste(json!(1))).await;
    assert_eq!(res.status(), StatusCode::CREATED);
    // Evidence leaves the incident at version 1, so a client that says 2 is out of step: a
    // 409 that adds nothing.
    let mut stale = paste(json!(2));
    stale["content"] = "another note".into();
    let (status, code, _) = error_of(app.post_json(&app.responder, &path, stale).await).await;
    assert_eq!((status, code.as_str()), (StatusCode::CONFLICT, "conflict"));
    assert_eq!(app.count("evidence").await, 1);
    // As text (what forms send) and null (no check) still work.
    let mut text = paste(json!("1"));
    text["content"] = "a third note".into();
    let res = app.post_json(&app.responder, &path, text).await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let mut none = paste(Value::Null);
    none["content"] = "a fourth note".into();
    let res = app.post_json(&app.responder, &path, none).await;
    assert_eq!(res.status(), StatusCode::CREATED);
    assert_eq!(app.count("evidence").await, 3);
}
