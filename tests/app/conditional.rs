//! Conditional requests on the incident page and its JSON (issue #56): each carries an `ETag`
//! naming what it shows (the incident's version and revision, and for the page the viewer,
//! role and zone), `If-None-Match` with a current tag is a 304 without a body, any change to
//! the incident changes the tag, and a page fetched after a write's answer shows the write.

use reqwest::{Client, StatusCode};
use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app};

const LOG: &str = "2026-06-02T09:00:00Z ERROR search index shard 3 unreachable: connect timed out after 2000 ms\n\
2026-06-02T09:00:05Z ERROR search index shard 3 unreachable: connect timed out after 2000 ms";

/// The incident page as `b` sees it once it is whole (its recall computed in the background
/// after the first view): status, `ETag`, `Cache-Control`, body.
async fn whole_page(app: &TestApp, b: &Client, id: &str) -> (String, String, String) {
    let body = app.page(b, &format!("/incidents/{id}")).await;
    let res = b
        .get(app.url(&format!("/incidents/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let etag = header(&res, "etag");
    let cache = header(&res, "cache-control");
    assert!(!etag.is_empty(), "a whole page carries an ETag");
    let again = res.text().await.unwrap();
    assert_eq!(body, again, "the same page both times");
    (etag, cache, again)
}

fn header(res: &reqwest::Response, name: &str) -> String {
    res.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

/// `GET path` by `b` with `If-None-Match: etag`.
async fn revalidate(app: &TestApp, b: &Client, path: &str, etag: &str) -> reqwest::Response {
    b.get(app.url(path))
        .header("if-none-match", etag)
        .send()
        .await
        .unwrap()
}

/// `GET path` with the responder's token and `If-None-Match: etag`.
async fn revalidate_api(app: &TestApp, path: &str, etag: &str) -> reqwest::Response {
    app.client
        .get(app.url(path))
        .bearer_auth(&app.responder)
        .header("if-none-match", etag)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn an_unchanged_incident_page_is_answered_304_without_a_body() {
    let app = spawn_app().await;
    let id = app
        .open_incident("Search answers slowly", "search-api")
        .await;
    let rita = app.browser("rita").await;
    let (etag, cache, _) = whole_page(&app, &rita, &id).await;
    assert!(etag.starts_with("W/\""), "{etag}");
    assert_eq!(
        cache, "private, no-cache",
        "kept by the browser, revalidated"
    );
    let res = revalidate(&app, &rita, &format!("/incidents/{id}"), &etag).await;
    assert_eq!(res.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(header(&res, "etag"), etag);
    assert_eq!(header(&res, "cache-control"), "private, no-cache");
    assert!(res.bytes().await.unwrap().is_empty(), "a 304 has no body");
    // Another tag, or none, is a full answer.
    let res = revalidate(&app, &rita, &format!("/incidents/{id}"), "W/\"pother\"").await;
    assert_eq!(res.status(), StatusCode::OK);
    assert!(res.text().await.unwrap().contains("Search answers slowly"));
}

#[tokio::test]
async fn evidence_added_or_a_state_change_changes_the_page_tag_and_the_page() {
    let app = spawn_app().await;
    let id = app
        .open_incident("Search answers slowly", "search-api")
        .await;
    let rita = app.browser("rita").await;
    let path = format!("/incidents/{id}");
    let (before, _, page) = whole_page(&app, &rita, &id).await;
    assert!(!page.contains("shard-3-probe"));

    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/evidence"),
            json!({"kind": "logs", "content": LOG, "source": "shard-3-probe"}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    // The browser's copy is stale at once: a full answer with the evidence, under a new tag.
    let res = revalidate(&app, &rita, &path, &before).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert!(res.text().await.unwrap().contains("shard-3-probe"));
    let (with_evidence, _, _) = whole_page(&app, &rita, &id).await;
    assert_ne!(with_evidence, before);

    assert_eq!(app.resolve(&id).await.status(), StatusCode::OK);
    let res = revalidate(&app, &rita, &path, &with_evidence).await;
    assert_eq!(res.status(), StatusCode::OK, "a state change is a new page");
    let (resolved, _, page) = whole_page(&app, &rita, &id).await;
    assert_ne!(resolved, with_evidence);
    assert!(
        page.contains("Resolved after"),
        "the page shows the new state"
    );
}

#[tokio::test]
async fn another_viewer_role_or_zone_gets_another_tag() {
    let app = spawn_app().await;
    let id = app
        .open_incident("Search answers slowly", "search-api")
        .await;
    let path = format!("/incidents/{id}");
    let rita = app.browser("rita").await;
    let victor = app.browser("victor").await;
    let (as_rita, _, _) = whole_page(&app, &rita, &id).await;
    let (as_victor, _, page) = whole_page(&app, &victor, &id).await;
    assert_ne!(as_rita, as_victor, "another viewer and role, another tag");
    assert!(page.contains("victor"));
    // Rita's tag is no copy of Victor's page.
    let res = revalidate(&app, &victor, &path, &as_rita).await;
    assert_eq!(res.status(), StatusCode::OK);

    // The same viewer in another zone (the browser's `tz` cookie): another page, another tag.
    let in_zone = |zone: &'static str| {
        app.client
            .get(app.url(&path))
            .bearer_auth(&app.responder)
            .header("cookie", format!("tz={zone}"))
    };
    let utc = in_zone("UTC").send().await.unwrap();
    let utc_tag = header(&utc, "etag");
    let tokyo = in_zone("Asia%2FTokyo").send().await.unwrap();
    let tokyo_tag = header(&tokyo, "etag");
    assert!(!utc_tag.is_empty() && !tokyo_tag.is_empty());
    assert_ne!(utc_tag, tokyo_tag);
    assert!(tokyo.text().await.unwrap().contains("+09:00"));
    let res = in_zone("Asia%2FTokyo")
        .header("if-none-match", &utc_tag)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK, "a UTC copy is stale in Tokyo");
    let res = in_zone("Asia%2FTokyo")
        .header("if-none-match", &tokyo_tag)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::NOT_MODIFIED);
}

/// A form write through the page and the next view agree: the cached page and its tag are never
/// served after the write's answer.
#[tokio::test]
async fn a_page_fetched_after_a_write_shows_the_write() {
    let app = spawn_app().await;
    let id = app
        .open_incident("Search answers slowly", "search-api")
        .await;
    let rita = app.browser("rita").await;
    let path = format!("/incidents/{id}");
    for n in 0..5 {
        let (etag, _, page) = whole_page(&app, &rita, &id).await;
        let line = format!("2026-06-02T09:0{n}:00Z ERROR replica {n} fell behind by 9000 ms");
        let source = format!("replica-{n}-log");
        assert!(!page.contains(&source));
        let (status, _) = app
            .post_form(
                &rita,
                &format!("/incidents/{id}/evidence"),
                &[("kind", "logs"), ("content", &line), ("source", &source)],
            )
            .await;
        assert_eq!(status, StatusCode::SEE_OTHER, "write {n}");
        let res = revalidate(&app, &rita, &path, &etag).await;
        assert_eq!(res.status(), StatusCode::OK, "write {n}: not the old copy");
        let page = res.text().await.unwrap();
        assert!(page.contains(&source), "write {n} is on the next view");
    }
}

#[tokio::test]
async fn the_incident_json_is_revalidated_and_its_tag_names_the_version_for_if_match() {
    let app = spawn_app().await;
    let id = app
        .open_incident("Search answers slowly", "search-api")
        .await;
    let path = format!("/api/v1/incidents/{id}");
    let res = app.get(&app.responder, &path).await;
    assert_eq!(res.status(), StatusCode::OK);
    let etag = header(&res, "etag");
    assert_eq!(header(&res, "cache-control"), "private, no-cache");
    let body: Value = res.json().await.unwrap();
    assert_eq!(
        etag.trim_start_matches("W/\"").split('.').next(),
        Some(body["version"].to_string().as_str()),
        "{etag}"
    );
    let res = revalidate_api(&app, &path, &etag).await;
    assert_eq!(res.status(), StatusCode::NOT_MODIFIED);
    assert!(res.bytes().await.unwrap().is_empty());

    // Evidence moves the tag (the timeline grew), not the version.
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/evidence"),
            json!({"kind": "logs", "content": LOG, "source": "shard-3-probe"}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let res = revalidate_api(&app, &path, &etag).await;
    assert_eq!(res.status(), StatusCode::OK);
    let after_paste = header(&res, "etag");
    assert_ne!(after_paste, etag);
    let body: Value = res.json().await.unwrap();
    assert!(
        body["timeline"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "evidence_added"),
        "{body}"
    );

    // The tag sent back as If-Match: the write goes ahead on the current version, and the
    // write's answer and the next read agree.
    let res = app
        .client
        .post(app.url(&format!("/api/v1/incidents/{id}/resolve")))
        .bearer_auth(&app.responder)
        .header("if-match", &after_paste)
        .json(&json!({"summary": "rolled back", "root_cause": "bad deploy"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let resolved: Value = res.json().await.unwrap();
    let res = revalidate_api(&app, &path, &after_paste).await;
    assert_eq!(res.status(), StatusCode::OK);
    let read: Value = res.json().await.unwrap();
    assert_eq!(read["state"], resolved["state"]);
    assert_eq!(read["version"], resolved["version"]);
    // A stale tag as If-Match is a 409.
    let res = app
        .client
        .post(app.url(&format!("/api/v1/incidents/{id}/reopen")))
        .bearer_auth(&app.responder)
        .header("if-match", &after_paste)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::CONFLICT);
}

/// The first view of a new incident runs no recall: it shows what exists and says recall is
/// coming; the recall arrives on a later view, which alone carries a validator.
#[tokio::test]
async fn a_new_incidents_first_view_waits_for_no_recall() {
    let app = spawn_app().await;
    let id = app
        .open_incident("Search answers slowly", "search-api")
        .await;
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/evidence"),
            json!({"kind": "logs", "content": LOG, "source": "shard-3-probe"}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let res = app.get(&app.responder, &format!("/incidents/{id}")).await;
    assert_eq!(res.status(), StatusCode::OK);
    let first_tag = header(&res, "etag");
    let first = res.text().await.unwrap();
    assert!(first.contains("shard-3-probe"), "the evidence is shown");
    if first.contains(incidentmind::web::incident::RECALL_PENDING) {
        assert!(
            first_tag.is_empty(),
            "a page still waiting for recall is not revalidated"
        );
    }
    let rita = app.browser("rita").await;
    let (_, _, whole) = whole_page(&app, &rita, &id).await;
    assert!(!whole.contains(incidentmind::web::incident::RECALL_PENDING));
}
