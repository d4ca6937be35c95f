//! Issue #49, item 7: small things a new user sees — the new incident form says where the
//! evidence goes, the profile links to the API docs, the integration page shows the whole
//! webhook URL to paste.

use reqwest::StatusCode;

use crate::helpers::spawn_app;

#[tokio::test]
async fn the_new_incident_form_and_the_profile_say_where_to_go_next() {
    let app = spawn_app().await;
    let b = app.browser("rita").await;
    let html = app.page(&b, "/incidents/new").await;
    assert!(
        html.contains("id=\"evidence-hint\">Evidence comes next"),
        "{html}"
    );
    let html = app.page(&b, "/profile").await;
    assert!(
        html.contains("<a href=\"/api/docs\">the API documentation</a>"),
        "{html}"
    );
}

#[tokio::test]
async fn the_integration_page_shows_the_whole_webhook_url() {
    let app = spawn_app().await;
    let b = app.browser("ada").await;
    let (status, html) = app
        .post_form(
            &b,
            "/integrations",
            &[
                ("name", "prod-alertmanager"),
                ("source", "alertmanager"),
                ("default_service", "checkout"),
                ("default_severity", "SEV3"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{html}");
    let url = format!("{}/api/v1/webhooks/alertmanager", app.base);
    assert!(
        html.contains(&format!("<code id=\"webhook-url\">{url}</code>")),
        "{html}"
    );
    let html = app.page(&b, "/integrations").await;
    assert!(html.contains(&format!("<code>{url}</code>")), "{html}");
}
