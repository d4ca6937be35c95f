//! Versions stay versions in memory (issue #57, 3): a dotted quad that one text of the incident
//! calls a version is not masked as an address in another text of the same write (a
//! resolution's summary and root cause, a post-mortem's fields), and "back to 2.13.9.0" is a
//! release; every text Learn writes and the post-mortem keep them.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::spawn_app;

#[tokio::test]
async fn versions_named_without_the_word_version_stay_versions_in_what_learn_writes() {
    let app = spawn_app().await;
    let res = app
        .post_json(
            &app.responder,
            "/api/v1/incidents",
            json!({"title": "Checkout errors after the afternoon release", "service": "checkout",
                   "severity": "SEV2", "description": "customers see failed payments"}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let id = res.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let base = format!("/api/v1/incidents/{id}");
    // The summary names the quad before the root cause calls it a version.
    let res = app
        .post_json(
            &app.responder,
            &format!("{base}/resolve"),
            json!({"summary": "Traffic moved to 2.14.0.0 and the errors stopped.",
                   "root_cause": "Version 2.14.0.1 dropped a retry guard that version 2.14.0.0 kept."}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let res = app
        .post_json(&app.responder, &format!("{base}/postmortem"), json!({}))
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    // An edit that says "back to" an older release, named nowhere else.
    let stored: Value = app
        .get(&app.responder, &format!("{base}/postmortem"))
        .await
        .json()
        .await
        .unwrap();
    let mut pm = stored["postmortem"].clone();
    pm["trigger"] = json!("The afternoon release of 2.14.0.1");
    pm["contributing_factors"] = json!(["Back to 2.13.9.0 was the first plan and took too long."]);
    let res = app
        .client
        .put(app.url(&format!("{base}/postmortem")))
        .bearer_auth(&app.responder)
        .json(&pm)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let res = app
        .post_json(
            &app.reviewer,
            &format!("{base}/postmortem/confirm"),
            json!({}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let res = app
        .post_json(&app.reviewer, &format!("{base}/learn"), json!({}))
        .await;
    assert_eq!(res.status(), StatusCode::OK);

    let postmortem = app
        .get(&app.responder, &format!("{base}/postmortem"))
        .await
        .text()
        .await
        .unwrap();
    let records = app
        .get(&app.responder, &format!("/api/v1/memories?incident={id}"))
        .await
        .text()
        .await
        .unwrap();
    for (what, text) in [("post-mortem", &postmortem), ("records", &records)] {
        assert!(!text.contains("<ip-ext"), "{what}: {text}");
        assert!(text.contains("moved to 2.14.0.0"), "{what}: {text}");
    }
    assert!(postmortem.contains("Back to 2.13.9.0"), "{postmortem}");
    assert!(records.contains("Back to 2.13.9.0"), "{records}");
}
