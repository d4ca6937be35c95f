//! A reviewer confirms the draft they read: an edit after their page (or API read) loaded moves
//! the post-mortem's version and not the incident's, and the confirm is refused (issue #57, 2).

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestApp, error_of, spawn_app};

/// A resolved incident with a drafted post-mortem that names its trigger; returns its id.
async fn drafted(app: &TestApp) -> String {
    let id = app
        .open_incident("Card payments declined", "payments-api")
        .await;
    assert!(app.resolve(&id).await.status().is_success());
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/postmortem"),
            json!({}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    app.write_trigger(&id).await;
    id
}

async fn postmortem(app: &TestApp, id: &str) -> Value {
    app.get(&app.reviewer, &format!("/api/v1/incidents/{id}/postmortem"))
        .await
        .json()
        .await
        .unwrap()
}

/// The responder changes the draft's summary (a new post-mortem version, same incident version).
async fn edit_summary(app: &TestApp, id: &str, summary: &str) {
    let path = format!("/api/v1/incidents/{id}/postmortem");
    let mut pm = postmortem(app, id).await["postmortem"].clone();
    pm["summary"] = json!(summary);
    let res = app
        .client
        .put(app.url(&path))
        .bearer_auth(&app.responder)
        .json(&pm)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
}

#[tokio::test]
async fn a_confirm_of_a_draft_edited_since_the_reviewer_read_it_is_refused() {
    let app = spawn_app().await;
    let id = drafted(&app).await;

    // The page: the reviewer loads the draft, then the responder edits it.
    let victor = app.browser("victor").await;
    let html = app
        .page(&victor, &format!("/incidents/{id}/postmortem"))
        .await;
    let read = postmortem(&app, &id).await["version"].as_i64().unwrap();
    assert!(
        html.contains(&format!(r#"name="postmortem_version" value="{read}""#)),
        "the confirm form carries the draft's version"
    );
    let incident_version = app.version_of(&id).await;
    edit_summary(
        &app,
        &id,
        "Declines came from an expired signing key, not the bank",
    )
    .await;
    assert_eq!(
        app.version_of(&id).await,
        incident_version,
        "an edit leaves the incident's version as it was"
    );
    let (status, html) = app
        .post_form(
            &victor,
            &format!("/incidents/{id}/postmortem/confirm"),
            &[
                ("version", &incident_version.to_string()),
                ("postmortem_version", &read.to_string()),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{html}");
    assert!(html.contains("changed since you read it"), "{html}");
    assert!(
        html.contains("expired signing key"),
        "the refused page shows the draft as it is now"
    );
    assert!(postmortem(&app, &id).await["confirmed_by"].is_null());

    // The API: the same, with the version in the body.
    let path = format!("/api/v1/incidents/{id}/postmortem/confirm");
    let res = app
        .post_json(&app.reviewer, &path, json!({"postmortem_version": read}))
        .await;
    let (status, code, message) = error_of(res).await;
    assert_eq!((status, code.as_str()), (StatusCode::CONFLICT, "conflict"));
    assert!(
        message.contains(&format!("you read version {read}")),
        "{message}"
    );
    assert!(message.contains("edited by rita"), "{message}");

    // Read again, then the confirm of what was read succeeds.
    let now = postmortem(&app, &id).await["version"].as_i64().unwrap();
    assert!(now > read);
    let res = app
        .post_json(
            &app.reviewer,
            &path,
            json!({"version": incident_version, "postmortem_version": now}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let confirmed: Value = res.json().await.unwrap();
    assert_eq!(confirmed["confirmed_by"], "victor");
}
