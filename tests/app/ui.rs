//! The incident page as a command center, stale forms (every state-changing form carries the
//! version its page showed), error pages that keep the layout, lists that page and search, and
//! the reviewer queue — all through the real router with a cookie-carrying client.

use reqwest::{Client, StatusCode};
use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app, spawn_app_with};

const LOG: &str = "2026-11-29T14:05:12Z ERROR HikariPool-1 - Connection is not available, request timed out after 30000ms.
2026-11-29T14:06:40Z ERROR HikariPool-1 - Connection is not available, request timed out after 30000ms.
2026-11-29T14:07:02Z WARN pool stats: active=50 idle=0 waiting=180";

const STALE: &str = "changed since this page was loaded";

async fn version_of(app: &TestApp, id: &str) -> i64 {
    app.version_of(id).await
}

async fn state_of(app: &TestApp, id: &str) -> String {
    let v: Value = app
        .get(&app.responder, &format!("/api/v1/incidents/{id}"))
        .await
        .json()
        .await
        .unwrap();
    v["state"].as_str().unwrap_or_default().to_string()
}

async fn api(app: &TestApp, token: &str, id: &str, path: &str, body: Value) -> Value {
    let res = app
        .post_json(token, &format!("/api/v1/incidents/{id}/{path}"), body)
        .await;
    assert!(
        res.status().is_success(),
        "{path}: {}",
        res.text().await.unwrap()
    );
    res.json().await.unwrap()
}

/// The responder drafts the post-mortem of `id` and writes its trigger (what a reviewer needs
/// before confirming).
async fn draft(app: &TestApp, id: &str) {
    api(app, &app.responder, id, "postmortem", json!({})).await;
    app.write_trigger(id).await;
}

async fn form(
    app: &TestApp,
    b: &Client,
    path: &str,
    fields: &[(&str, &str)],
) -> (StatusCode, String) {
    app.post_form(b, path, fields).await
}

async fn page(app: &TestApp, b: &Client, path: &str) -> String {
    app.page(b, path).await
}

async fn paste(app: &TestApp, id: &str) {
    api(
        app,
        &app.responder,
        id,
        "evidence",
        json!({"kind": "logs", "content": LOG}),
    )
    .await;
}

/// Resolve then reopen through the API: the incident is back where it was, two versions later.
async fn bump(app: &TestApp, id: &str) {
    assert!(app.resolve(id).await.status().is_success());
    api(app, &app.responder, id, "reopen", json!({})).await;
}

#[tokio::test]
async fn a_reopen_from_a_page_loaded_before_the_draft_is_refused_and_keeps_the_draft() {
    let app = spawn_app().await;
    let id = app.open_incident("Checkout 503s", "payments-api").await;
    assert!(app.resolve(&id).await.status().is_success());
    let b = app.browser("rita").await;
    let html = page(&app, &b, &format!("/incidents/{id}")).await;
    let seen = version_of(&app, &id).await;
    assert!(
        html.contains(&format!(r#"name="version" value="{seen}""#)),
        "the reopen form carries the version the page showed"
    );
    // Someone drafts the post-mortem meanwhile.
    draft(&app, &id).await;
    let (status, html) = form(
        &app,
        &b,
        &format!("/incidents/{id}/reopen"),
        &[("version", &seen.to_string())],
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(html.contains(STALE), "{html}");
    assert!(html.contains("it is now Post-mortem draft"), "{html}");
    assert_eq!(state_of(&app, &id).await, "postmortem_draft");
    // With the current version it goes through.
    let now = version_of(&app, &id).await.to_string();
    let (status, _) = form(
        &app,
        &b,
        &format!("/incidents/{id}/reopen"),
        &[("version", now.as_str())],
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(state_of(&app, &id).await, "investigating");
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "a table of cases sent in turn to one app, each next to the answer it expects"
)]
async fn every_incident_form_from_a_stale_page_is_a_409_that_keeps_the_input() {
    let app = spawn_app().await;
    let id = app.open_incident("Checkout 503s", "payments-api").await;
    paste(&app, &id).await;
    let inv = api(&app, &app.responder, &id, "investigate", json!({})).await;
    let recs: Vec<i64> = inv["recommendations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    assert!(recs.len() >= 2, "{inv}");
    let approved = recs[1];
    api(
        &app,
        &app.responder,
        &id,
        &format!("recommendations/{approved}/approve"),
        json!({}),
    )
    .await;
    let stale = version_of(&app, &id).await.to_string();
    bump(&app, &id).await;
    let b = app.browser("rita").await;
    let evidence_before = app.count("evidence").await;
    // (path under the incident, form fields, text the re-rendered page must keep)
    type Case<'a> = (String, Vec<(&'a str, &'a str)>, &'a str);
    let cases: Vec<Case> = vec![
        (
            "resolve".into(),
            vec![
                ("summary", "Rolled back build 2.14.1"),
                ("root_cause", "A leak in the retry path"),
            ],
            "Rolled back build 2.14.1",
        ),
        ("investigate".into(), vec![], ""),
        (format!("recommendations/{}/approve", recs[0]), vec![], ""),
        (
            format!("recommendations/{}/reject", recs[0]),
            vec![("reason", "the pool is not the bottleneck here")],
            "the pool is not the bottleneck here",
        ),
        (
            format!("recommendations/{approved}/verdict"),
            vec![
                ("verdict", "did_not_resolve"),
                ("note", "errors came back within minutes"),
            ],
            "errors came back within minutes",
        ),
        (
            "recommendations".into(),
            vec![("kind", "restart_service"), ("rationale", "clear the pool")],
            "",
        ),
    ];
    for (path, mut fields, kept) in cases {
        fields.push(("version", stale.as_str()));
        let (status, html) = form(&app, &b, &format!("/incidents/{id}/{path}"), &fields).await;
        assert_eq!(status, StatusCode::CONFLICT, "{path}: {html}");
        assert!(html.contains(STALE), "{path}: {html}");
        assert!(html.contains(r#"href="/memories""#), "{path}: layout kept");
        if !kept.is_empty() {
            assert!(html.contains(kept), "{path} keeps the input: {html}");
        }
    }
    // The paste comes back too (multipart, as the page sends it).
    let mp = reqwest::multipart::Form::new()
        .text("kind", "logs")
        .text(
            "content",
            "2026-11-29T15:00:00Z ERROR a line typed on a stale page",
        )
        .text("version", stale.clone());
    let res = b
        .post(app.url(&format!("/incidents/{id}/evidence")))
        .header("origin", &app.base)
        .multipart(mp)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::CONFLICT);
    let html = res.text().await.unwrap();
    assert!(html.contains("a line typed on a stale page"), "{html}");
    // Nothing changed.
    assert_eq!(app.count("evidence").await, evidence_before);
    assert_eq!(state_of(&app, &id).await, "investigating");
    let latest: Value = app
        .get(
            &app.responder,
            &format!("/api/v1/incidents/{id}/investigation"),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(latest["investigation_id"], inv["investigation_id"]);
    let statuses: Vec<&str> = latest["recommendations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == "proposed").count(),
        recs.len() - 1
    );
}

#[tokio::test]
async fn the_post_mortem_steps_from_a_stale_page_are_refused() {
    let app = spawn_app().await;
    let id = app.open_incident("Checkout 503s", "payments-api").await;
    assert!(app.resolve(&id).await.status().is_success());
    let rita = app.browser("rita").await;
    let victor = app.browser("victor").await;

    // Draft from a page loaded before a reopen and a new resolution.
    let stale = version_of(&app, &id).await.to_string();
    api(&app, &app.responder, &id, "reopen", json!({})).await;
    assert!(app.resolve(&id).await.status().is_success());
    let (status, html) = form(
        &app,
        &rita,
        &format!("/incidents/{id}/postmortem"),
        &[("version", &stale)],
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{html}");
    assert!(html.contains(STALE));
    assert_eq!(state_of(&app, &id).await, "resolved");

    // Confirm from a page loaded before the draft was reopened and drafted again.
    draft(&app, &id).await;
    let stale = version_of(&app, &id).await.to_string();
    api(&app, &app.responder, &id, "reopen", json!({})).await;
    assert!(app.resolve(&id).await.status().is_success());
    draft(&app, &id).await;
    let (status, html) = form(
        &app,
        &victor,
        &format!("/incidents/{id}/postmortem/confirm"),
        &[("version", &stale)],
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{html}");
    assert!(html.contains(STALE), "{html}");
    assert_eq!(state_of(&app, &id).await, "postmortem_draft");

    // Learn from a page loaded before the confirmation was reopened and given again.
    api(&app, &app.reviewer, &id, "postmortem/confirm", json!({})).await;
    let stale = version_of(&app, &id).await.to_string();
    api(&app, &app.responder, &id, "reopen", json!({})).await;
    api(&app, &app.reviewer, &id, "postmortem/confirm", json!({})).await;
    let (status, html) = form(
        &app,
        &rita,
        &format!("/incidents/{id}/learn"),
        &[("version", &stale)],
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{html}");
    assert!(html.contains(STALE), "{html}");
    assert!(
        html.contains(r#"href="/memories""#),
        "the error page keeps the nav"
    );
    assert_eq!(state_of(&app, &id).await, "confirmed");
    let now = version_of(&app, &id).await.to_string();
    let (status, _) = form(
        &app,
        &rita,
        &format!("/incidents/{id}/learn"),
        &[("version", &now)],
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(state_of(&app, &id).await, "learned");
}

#[tokio::test]
async fn api_calls_with_a_stale_version_are_409_and_change_nothing() {
    let app = spawn_app().await;
    let id = app.open_incident("Checkout 503s", "payments-api").await;
    assert!(app.resolve(&id).await.status().is_success());
    let seen = version_of(&app, &id).await;
    draft(&app, &id).await;
    // Body, If-Match and query string all carry it.
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/reopen"),
            json!({"version": seen}),
        )
        .await;
    let (status, code, message) = crate::helpers::error_of(res).await;
    assert_eq!((status, code.as_str()), (StatusCode::CONFLICT, "conflict"));
    assert!(message.contains(STALE), "{message}");
    let res = app
        .client
        .post(app.url(&format!("/api/v1/incidents/{id}/reopen")))
        .bearer_auth(&app.responder)
        .header("if-match", format!("\"{seen}\""))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::CONFLICT);
    let res = app
        .client
        .post(app.url(&format!(
            "/api/v1/incidents/{id}/postmortem/confirm?version={seen}"
        )))
        .bearer_auth(&app.reviewer)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::CONFLICT);
    assert_eq!(state_of(&app, &id).await, "postmortem_draft");
    // A version that is not a number is a 400 naming it.
    let res = app
        .client
        .post(app.url(&format!("/api/v1/incidents/{id}/reopen?version=abc")))
        .bearer_auth(&app.responder)
        .send()
        .await
        .unwrap();
    let (status, _, message) = crate::helpers::error_of(res).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(message.contains("version"), "{message}");
    // The current version passes.
    let now = version_of(&app, &id).await;
    let v = api(&app, &app.responder, &id, "reopen", json!({"version": now})).await;
    assert_eq!(v["state"], "investigating");
    assert_eq!(v["version"], now + 1);
    // Resolve with a stale version in the body.
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/resolve"),
            json!({"summary": "s", "root_cause": "r", "version": now}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CONFLICT);
    assert_eq!(state_of(&app, &id).await, "investigating");
}

#[tokio::test]
async fn the_incident_page_puts_the_next_step_first_at_every_stage() {
    let app = spawn_app().await;
    let id = app.open_incident("Checkout 503s", "payments-api").await;
    let rita = app.browser("rita").await;
    let next_card = |html: &str| -> String {
        let start = html
            .find(r#"<section class="card next-step"#)
            .expect("next-step card");
        let end = html[start..].find("</section>").unwrap() + start;
        html[start..end].to_string()
    };
    let before = |html: &str, a: &str, b: &str| {
        html.find(a).unwrap_or(usize::MAX) < html.find(b).unwrap_or(usize::MAX)
    };

    // New: add evidence first; its form comes before anything else.
    let html = page(&app, &rita, &format!("/incidents/{id}")).await;
    let card = next_card(&html);
    assert!(card.contains("next-evidence"), "{card}");
    assert!(card.contains(r#"class="evidence-form""#), "{card}");
    let first_form = &html[html
        .find(r#"<form method="post" action="/incidents/"#)
        .unwrap()..];
    assert!(
        first_form.starts_with(&format!(
            r#"<form method="post" action="/incidents/{id}/evidence""#
        )),
        "the first form on the page is Add evidence"
    );
    assert!(before(&html, r#"id="next-step""#, "<h2>Description</h2>"));
    assert!(html.contains(r#"id="service">payments-api<"#));
    assert!(
        html.contains(r#"id="participants">rita<"#),
        "who worked on it"
    );
    assert!(html.contains(r#"<dd id="age">"#));
    assert!(html.contains(r#"class="step current" aria-current="step""#));

    // Evidence: investigate next.
    paste(&app, &id).await;
    let html = page(&app, &rita, &format!("/incidents/{id}")).await;
    let card = next_card(&html);
    assert!(card.contains("next-investigate") && card.contains(r#"id="investigate""#));

    // Investigated: act on recommendations, record verdicts, resolve — the resolve form in the card.
    api(&app, &app.responder, &id, "investigate", json!({})).await;
    let html = page(&app, &rita, &format!("/incidents/{id}")).await;
    let card = next_card(&html);
    assert!(card.contains("next-act"), "{card}");
    assert!(card.contains("recommendations are waiting"), "{card}");
    assert!(card.contains(r#"class="resolve""#), "{card}");

    // Resolved: the post-mortem is next and the stepper highlights it, not Resolve.
    assert!(app.resolve(&id).await.status().is_success());
    let html = page(&app, &rita, &format!("/incidents/{id}")).await;
    let card = next_card(&html);
    assert!(card.contains(r#"id="step-postmortem""#), "{card}");
    let current = html
        .split(r#"aria-current="step""#)
        .nth(1)
        .expect("a current step");
    assert!(
        current
            .trim_start()
            .starts_with(">\n    <span class=\"step-label\">Post-mortem"),
        "{current}"
    );

    // Draft: the responder edits; the reviewer is asked to confirm.
    draft(&app, &id).await;
    let html = page(&app, &rita, &format!("/incidents/{id}")).await;
    assert!(next_card(&html).contains("next-edit"));
    let victor = app.browser("victor").await;
    let html = page(&app, &victor, &format!("/incidents/{id}")).await;
    assert!(next_card(&html).contains("next-confirm"));

    // Confirmed: preview and learn.
    api(&app, &app.reviewer, &id, "postmortem/confirm", json!({})).await;
    let html = page(&app, &rita, &format!("/incidents/{id}")).await;
    assert!(next_card(&html).contains(r#"id="step-learn""#));
    let html = page(&app, &rita, &format!("/incidents/{id}/learnings")).await;
    assert!(
        html.contains(r#"data-label="Kind""#),
        "preview rows stack on phones"
    );
}

#[tokio::test]
async fn error_pages_keep_the_navigation_and_long_input_comes_back_with_a_422() {
    let app = spawn_app().await;
    let rita = app.browser("rita").await;
    // 404 for a signed-in user: the nav and the user are there.
    let res = rita
        .get(app.url("/incidents/INC-2020-0009"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    let html = res.text().await.unwrap();
    assert!(
        html.contains(r#"href="/memories""#) && html.contains(">rita</a>"),
        "{html}"
    );
    let html = rita
        .get(app.url("/no/such/page"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(html.contains("Sign out"), "{html}");

    // 403: a responder cannot confirm.
    let id = app.open_incident("Checkout 503s", "payments-api").await;
    assert!(app.resolve(&id).await.status().is_success());
    draft(&app, &id).await;
    let (status, html) = form(
        &app,
        &rita,
        &format!("/incidents/{id}/postmortem/confirm"),
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(
        html.contains("Sign out") && html.contains("reviewer"),
        "{html}"
    );

    // The CSRF refusal on a page is an HTML page with the nav.
    let res = rita
        .post(app.url("/incidents"))
        .header("origin", "https://evil.example")
        .form(&[("title", "x"), ("service", "a"), ("severity", "SEV1")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    let html = res.text().await.unwrap();
    assert!(html.contains("CSRF") && html.contains("Sign out"), "{html}");

    // A 2 MB description (over the 1 MiB body limit) is a 422 naming the field, input kept.
    let long = format!("{} END-OF-TEXT", "the checkout page spins. ".repeat(84_000));
    let (status, html) = form(
        &app,
        &rita,
        "/incidents",
        &[
            ("title", "A title worth keeping"),
            ("service", "payments-api"),
            ("severity", "SEV2"),
            ("description", &long),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(html.contains("description"), "names the field");
    assert!(html.contains("A title worth keeping") && html.contains("END-OF-TEXT"));
    assert!(html.contains("Sign out"));
    // The form says the limits up front, and the cursor starts in the title.
    let html = page(&app, &rita, "/incidents/new").await;
    assert!(
        html.contains(r#"<input name="title" value="" maxlength="200" required autofocus"#),
        "the title field has autofocus"
    );
    for (field, max) in [("title", 200), ("service", 100), ("description", 20000)] {
        assert!(
            html.contains(&format!(r#"name="{field}""#))
                && html.contains(&format!(r#"maxlength="{max}""#)),
            "{field} has maxlength {max}"
        );
    }
}

#[tokio::test]
async fn a_body_over_every_limit_is_a_413_page_with_the_navigation() {
    let app = spawn_app_with(incidentmind::Settings {
        max_body_bytes: 2048,
        max_evidence_bytes: 4096,
        ..Default::default()
    })
    .await;
    let rita = app.browser("rita").await;
    let id = app.open_incident("Checkout 503s", "payments-api").await;
    let (status, html) = form(
        &app,
        &rita,
        &format!("/incidents/{id}/resolve"),
        &[("summary", &"x".repeat(10_000)), ("root_cause", "y")],
    )
    .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(
        html.contains("Sign out") && html.contains(r#"href="/memories""#),
        "{html}"
    );
    assert!(html.contains("it keeps what you typed"), "{html}");
    // The evidence form carries the evidence limit, so the browser refuses an over-limit paste
    // before sending it and keeps the input (static/app.js; walked in tests/browser.rs).
    let html = page(&app, &rita, &format!("/incidents/{id}")).await;
    assert!(
        html.contains(
            r#"class="evidence-form" data-busy="Adding evidence…" data-max-bytes="4096""#
        ),
        "{html}"
    );
    assert!(html.contains("up to 4 KiB in all"), "{html}");
}

/// Every `<script` tag of `html` loads a file from `/static/` and has no body (CSP
/// `script-src 'self'` forbids inline script; an inline one would be blocked, not run).
fn scripts_are_static_files_only(html: &str, path: &str) {
    let tags: Vec<&str> = html.split("<script").skip(1).collect();
    assert!(!tags.is_empty(), "{path}: the layout loads its scripts");
    for tag in tags {
        let (open, rest) = tag.split_once('>').expect("a closed tag");
        assert!(open.contains(r#" src="/static/"#), "{path}: <script{open}>");
        assert!(
            rest.starts_with("</script>"),
            "{path}: a script with a body"
        );
    }
}

#[tokio::test]
async fn pages_that_load_the_app_script_carry_no_inline_script() {
    let app = spawn_app().await;
    let rita = app.browser("rita").await;
    let id = app.open_incident("Ledger replicas lag", "ledger").await;
    paste(&app, &id).await;
    for path in [
        "/incidents".to_string(),
        format!("/incidents/{id}"),
        "/memories".to_string(),
        "/memories/new".to_string(),
        "/insights".to_string(),
    ] {
        let html = page(&app, &rita, &path).await;
        assert!(html.contains("/static/app.js"), "{path}");
        scripts_are_static_files_only(&html, &path);
    }
}

#[tokio::test]
async fn the_layout_has_a_skip_link_marks_the_current_page_and_labels_every_control() {
    let app = spawn_app().await;
    let rita = app.browser("rita").await;
    let html = page(&app, &rita, "/incidents").await;
    assert!(html.contains(r##"<a class="skip-link" href="#main">"##));
    assert!(html.contains(r#"<main id="main""#));
    assert!(html.contains(r#"<a href="/incidents" aria-current="page">Incidents</a>"#));
    assert!(html.contains(r#"<a href="/memories" aria-current="false">Memory</a>"#));
    assert!(!html.contains("/review"), "no review queue for a responder");
    let html = page(&app, &rita, "/memories").await;
    assert!(html.contains(r#"<a href="/memories" aria-current="page">Memory</a>"#));

    // The reject reason has a real label.
    let id = app.open_incident("Checkout 503s", "payments-api").await;
    paste(&app, &id).await;
    let inv = api(&app, &app.responder, &id, "investigate", json!({})).await;
    let rid = inv["recommendations"][0]["id"].as_i64().unwrap();
    let html = page(&app, &rita, &format!("/incidents/{id}")).await;
    assert!(html.contains(&format!(
        r#"<label for="reject-reason-{rid}">Reason for rejecting</label>"#
    )));
    assert!(html.contains(&format!(
        r#"<input id="reject-reason-{rid}" name="reason" maxlength="2000""#
    )));

    // The SEV2 badge meets WCAG AA (white on #c2410c is 5.2:1; a lighter orange such as
    // #f97316 gives 2.8:1).
    let css = app
        .client
        .get(app.url("/static/app.css"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(css.contains(".sev.SEV2 { background: #c2410c; color: #fff; }"));
    assert!(contrast("#c2410c", "#ffffff") >= 4.5);
    assert!(contrast("#f97316", "#ffffff") < 3.0);
}

/// WCAG 2 contrast ratio of two `#rrggbb` colours.
fn contrast(a: &str, b: &str) -> f64 {
    let lum = |hex: &str| {
        let c = |i: usize| {
            let v = f64::from(u8::from_str_radix(&hex[i..i + 2], 16).unwrap()) / 255.0;
            if v <= 0.03928 {
                v / 12.92
            } else {
                ((v + 0.055) / 1.055).powf(2.4)
            }
        };
        0.2126 * c(1) + 0.7152 * c(3) + 0.0722 * c(5)
    };
    let (x, y) = (lum(a), lum(b));
    (x.max(y) + 0.05) / (x.min(y) + 0.05)
}

#[tokio::test]
async fn reviewers_find_drafts_waiting_for_confirmation_from_the_nav() {
    let app = spawn_app().await;
    let id = app.open_incident("Checkout 503s", "payments-api").await;
    assert!(app.resolve(&id).await.status().is_success());
    draft(&app, &id).await;
    let victor = app.browser("victor").await;
    let html = page(&app, &victor, "/incidents").await;
    assert!(
        html.contains(r#"<a href="/review" id="nav-review" aria-current="false">Review queue</a>"#)
    );
    let html = page(&app, &victor, "/review").await;
    let drafts = &html[html.find(r#"id="review-drafts""#).unwrap()..];
    let drafts = &drafts[..drafts.find("</section>").unwrap()];
    assert!(
        drafts.contains(&format!(r#"<a href="/incidents/{id}/postmortem">{id}</a>"#)),
        "{drafts}"
    );
    assert!(html.contains(r#"aria-current="page">Review queue"#));
    let v: Value = app
        .get(&app.reviewer, "/api/v1/review")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(v["drafts_waiting_for_confirmation"][0]["id"], id.as_str());
}

#[tokio::test]
async fn the_incident_list_opens_on_active_incidents_and_pages_searches_and_sorts() {
    let app = spawn_app().await;
    // One learned incident.
    let done = app.open_incident("An old database outage", "billing").await;
    assert!(app.resolve(&done).await.status().is_success());
    draft(&app, &done).await;
    api(&app, &app.reviewer, &done, "postmortem/confirm", json!({})).await;
    api(&app, &app.responder, &done, "learn", json!({})).await;
    // 29 active ones, the last a SEV1.
    let mut ids = Vec::new();
    for n in 0..29 {
        ids.push(
            app.open_incident(&format!("Queue backlog number {n}"), "queue")
                .await,
        );
    }
    let sev1 = app
        .post_json(
            &app.responder,
            "/api/v1/incidents",
            json!({"title": "Checkout totally down", "service": "payments-api", "severity": "SEV1"}),
        )
        .await
        .json::<Value>()
        .await
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let rita = app.browser("rita").await;
    let rows = |html: &str| -> Vec<String> {
        html.split(r#"<td data-label="Id"><a href="/incidents/"#)
            .skip(1)
            .map(|s| s[..s.find('"').unwrap()].to_string())
            .collect()
    };
    let html = page(&app, &rita, "/incidents").await;
    assert!(html.contains("Showing active incidents (not learned)"));
    assert!(html.contains(r#"<option value="active" selected>"#));
    let first = rows(&html);
    assert_eq!(first.len(), 25);
    assert_eq!(first[0], sev1, "newest first");
    assert!(!first.contains(&done));
    let next = html
        .split(r#"<a href="/incidents?"#)
        .find_map(|s| {
            s.split_once(r#"" id="next-page""#)
                .map(|(q, _)| q.replace("&amp;", "&").replace("&#38;", "&"))
        })
        .expect("a next page");
    let html = page(&app, &rita, &format!("/incidents?{next}")).await;
    let second = rows(&html);
    assert_eq!(second.len(), 5);
    assert!(second.iter().all(|i| !first.contains(i)), "no overlap");
    assert!(!html.contains(r#"id="next-page""#), "last page");
    assert!(!second.contains(&done));
    // Every state, oldest first: the learned one leads.
    let html = page(&app, &rita, "/incidents?state=all&sort=oldest").await;
    assert_eq!(rows(&html)[0], done);
    // Severity: the SEV1 first.
    let html = page(&app, &rita, "/incidents?sort=severity").await;
    assert_eq!(rows(&html)[0], sev1);
    // Search by title text, case-insensitive; LIKE wildcards are literal.
    let html = page(&app, &rita, "/incidents?q=TOTALLY").await;
    assert_eq!(rows(&html), vec![sev1.clone()]);
    let html = page(&app, &rita, "/incidents?q=%25").await;
    assert!(rows(&html).is_empty());
    let html = page(&app, &rita, "/incidents?state=all&q=database").await;
    assert_eq!(rows(&html), vec![done.clone()]);
    // The API pages the same way.
    let v: Value = app
        .get(&app.responder, "/api/v1/incidents?state=active&limit=10")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(v["incidents"].as_array().unwrap().len(), 10);
    let after = v["next"].as_str().expect("next cursor");
    let v: Value = app
        .get(
            &app.responder,
            &format!(
                "/api/v1/incidents?state=active&limit=10&after={}",
                urlencode(after)
            ),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(v["incidents"][0]["id"], ids[19].as_str());
    let res = app
        .get(&app.responder, "/api/v1/incidents?after=nonsense")
        .await;
    assert_eq!(res.status(), StatusCode::UNPROCESSABLE_ENTITY);
}

fn urlencode(s: &str) -> String {
    s.replace(':', "%3A").replace('~', "%7E")
}

#[tokio::test]
async fn the_raw_evidence_viewer_pages_through_lines() {
    let app = spawn_app().await;
    let id = app.open_incident("Checkout 503s", "payments-api").await;
    let text: String = (1..=250)
        .map(|n| format!("2026-11-29T14:05:{:02}Z INFO line number {n}\n", n % 60))
        .collect();
    let v = api(
        &app,
        &app.responder,
        &id,
        "evidence",
        json!({"kind": "logs", "content": text}),
    )
    .await;
    let eid = v["evidence"]["id"].as_i64().unwrap();
    let rita = app.browser("rita").await;
    let html = page(&app, &rita, &format!("/incidents/{id}/evidence/{eid}")).await;
    assert!(html.contains("line number 100\n") && !html.contains("line number 101\n"));
    assert!(html.contains(&format!(
        r#"href="/incidents/{id}/evidence/{eid}?from=101&amp;to=200" rel="next""#
    )));
    assert!(!html.contains(r#"rel="prev""#));
    let html = page(
        &app,
        &rita,
        &format!("/incidents/{id}/evidence/{eid}?from=201&to=300"),
    )
    .await;
    assert!(html.contains("line number 250") && !html.contains(r#"rel="next""#));
    assert!(html.contains("?from=101&amp;to=200\" rel=\"prev\""));
}

#[tokio::test]
async fn pasting_the_same_content_twice_says_so_instead_of_adding_it_again() {
    let app = spawn_app().await;
    let id = app.open_incident("Checkout 503s", "payments-api").await;
    let rita = app.browser("rita").await;
    let version = version_of(&app, &id).await.to_string();
    let post = || {
        let mp = reqwest::multipart::Form::new()
            .text("kind", "logs")
            .text("source", "kubectl logs")
            .text("content", LOG)
            .text("version", version.clone());
        rita.post(app.url(&format!("/incidents/{id}/evidence")))
            .header("origin", &app.base)
            .multipart(mp)
            .send()
    };
    let res = post().await.unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    let observations = app.count("records").await;
    let res = post().await.unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    let location = res.headers()["location"].to_str().unwrap().to_string();
    assert!(location.contains("?duplicate="), "{location}");
    let html = page(&app, &rita, &location).await;
    assert!(html.contains("already evidence #"), "{html}");
    assert_eq!(app.count("evidence").await, 1);
    assert_eq!(app.count("records").await, observations);
    // The API says the same, with 200 instead of 201.
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/evidence"),
            json!({"kind": "logs", "content": LOG}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let v: Value = res.json().await.unwrap();
    assert_eq!(v["created"], false);
    assert!(v["notice"].as_str().unwrap().contains("already evidence #"));
    // Other content is added as usual.
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/evidence"),
            json!({"kind": "logs", "content": format!("{LOG}\n2026-11-29T14:09:00Z ERROR one more")}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    assert_eq!(app.count("evidence").await, 2);
}

#[tokio::test]
async fn the_memory_browser_pages_through_records_and_sorts() {
    let app = spawn_app().await;
    incidentmind::services::sample::load_history(&app.memory)
        .await
        .expect("history");
    let rita = app.browser("rita").await;
    let ids = |html: &str| -> Vec<i64> {
        html.split(r#"<td data-label="Id"><a href="/memories/"#)
            .skip(1)
            .map(|s| s[..s.find('"').unwrap()].parse().unwrap())
            .collect()
    };
    let html = page(&app, &rita, "/memories").await;
    let first = ids(&html);
    assert_eq!(first.len(), 50);
    assert!(first.windows(2).all(|w| w[0] > w[1]), "newest first");
    let next = html
        .split(r#"<a href="/memories?"#)
        .find_map(|s| {
            s.split_once(r#"" id="next-page""#)
                .map(|(q, _)| q.replace("&amp;", "&").replace("&#38;", "&"))
        })
        .expect("a next page");
    let html = page(&app, &rita, &format!("/memories?{next}")).await;
    let second = ids(&html);
    assert!(!second.is_empty());
    assert!(
        second[0] < *first.last().unwrap(),
        "continues where the first page ended"
    );
    // The page says how many match, and pages backwards to exactly the page before.
    let durable: Vec<String> = incidentmind::domain::MemoryKind::ALL
        .iter()
        .filter(|k| k.is_durable())
        .map(|k| format!("'{}'", k.as_str()))
        .collect();
    let (total,): (i64,) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT COUNT(*) FROM records WHERE kind IN ({})",
        durable.join(", ")
    )))
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert!(
        html.contains(&format!("{total} records match; showing newest")),
        "the count of every durable record"
    );
    let link = |html: &str, id: &str| -> Option<String> {
        html.split(r#"<a href="/memories?"#).find_map(|s| {
            s.split_once(&format!(r#"" id="{id}""#))
                .map(|(q, _)| q.replace("&amp;", "&").replace("&#38;", "&"))
        })
    };
    assert!(link(&page(&app, &rita, "/memories").await, "previous-page").is_none());
    let back = link(&html, "previous-page").expect("a previous page from the second");
    assert!(back.contains("before="), "{back}");
    assert_eq!(
        ids(&page(&app, &rita, &format!("/memories?{back}")).await),
        first
    );
    let html = page(&app, &rita, "/memories?sort=oldest").await;
    let oldest = ids(&html);
    assert!(oldest.windows(2).all(|w| w[0] < w[1]), "oldest first");
    assert!(html.contains("showing oldest"));
    // A search honours a date order: the same matches, oldest first.
    let html = page(&app, &rita, "/memories?q=the+to+of+and&sort=oldest").await;
    let by_date = ids(&html);
    assert_eq!(by_date.len(), 50);
    assert!(
        by_date.windows(2).all(|w| w[0] < w[1]),
        "matches oldest first"
    );
    assert!(html.contains(r#"<option value="oldest" selected>"#));
    // A search is ranked by relevance and pages by position: page 2 holds other matches.
    let html = page(&app, &rita, "/memories?q=the+to+of+and").await;
    let best = ids(&html);
    assert_eq!(best.len(), 50);
    let next = html
        .split(r#"<a href="/memories?"#)
        .find_map(|s| {
            s.split_once(r#"" id="next-page""#)
                .map(|(q, _)| q.replace("&amp;", "&").replace("&#38;", "&"))
        })
        .expect("a search's next page");
    assert!(next.contains("page=2"), "{next}");
    let html = page(&app, &rita, &format!("/memories?{next}")).await;
    let more = ids(&html);
    assert!(!more.is_empty());
    assert!(more.iter().all(|i| !best.contains(i)), "no overlap");
    assert!(html.contains("First page"));
    assert!(
        html.contains("; showing 51–"),
        "a search's later page says where it is"
    );
    let back = link(&html, "previous-page").expect("a search's previous page");
    assert!(back.contains("page=1"), "{back}");
    assert!(
        page(&app, &rita, "/memories?q=the+to+of+and")
            .await
            .contains("(relevance)")
    );
    for bad in ["0", "21", "two"] {
        let res = rita
            .get(app.url(&format!("/memories?q=the&page={bad}")))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::UNPROCESSABLE_ENTITY, "page={bad}");
    }
    let res = rita
        .get(app.url("/memories?after=xyz"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        res.text().await.unwrap().contains("Sign out"),
        "422 keeps the layout"
    );
}

/// The incident page is served from its rendered copy while nothing it shows has changed, and
/// every kind of change made through the app shows at once: evidence added through the API, an
/// investigation, a state change, and another viewer (the cache is per viewer). A write
/// straight to the database (another process: the triggers bump the revision) shows within
/// the page state's time to live (`web::page_cache::STAMP_TTL`, 1 s; issue #56: a cached view
/// reads nothing from the database); one announced on the change hub shows at once.
#[tokio::test]
async fn a_cached_incident_page_shows_every_change_at_once() {
    let app = spawn_app().await;
    let id = app
        .open_incident("Search results come back empty", "search-api")
        .await;
    let b = app.browser("rita").await;
    let first = page(&app, &b, &format!("/incidents/{id}")).await;
    assert_eq!(first, page(&app, &b, &format!("/incidents/{id}")).await);
    assert!(!first.contains("Connection is not available"));

    paste(&app, &id).await;
    let after_paste = page(&app, &b, &format!("/incidents/{id}")).await;
    assert!(
        after_paste.contains("Connection is not available"),
        "the new evidence is on the page"
    );

    api(&app, &app.responder, &id, "investigate", json!({})).await;
    let after_investigate = page(&app, &b, &format!("/incidents/{id}")).await;
    assert_ne!(
        after_paste, after_investigate,
        "the investigation is on the page"
    );

    rename_behind_the_app(&app, &id, "Search answers nothing at all", "15:00").await;
    let renamed = page_showing(
        &app,
        &b,
        &format!("/incidents/{id}"),
        "Search answers nothing at all",
        incidentmind::web::page_cache::STAMP_TTL * 3,
        "a write from elsewhere shows within the stamp's time to live",
    )
    .await;

    // A write that announces itself on the change hub (a background task's incident write, or
    // on PostgreSQL another instance's, heard through LISTEN) shows on the very next view.
    rename_behind_the_app(&app, &id, "Search is back to empty answers", "15:01").await;
    app.db
        .changes()
        .publish(incidentmind::store::changes::Change {
            incident: incidentmind::domain::IncidentId::parse(&id).unwrap(),
            event_id: i64::MAX,
            kind: "note".into(),
            actor: "rita".into(),
            origin: "elsewhere".into(),
        });
    // The notice reaches the pages' cache on its own task: give it a moment, not a TTL.
    page_showing(
        &app,
        &b,
        &format!("/incidents/{id}"),
        "Search is back to empty answers",
        std::time::Duration::from_millis(500),
        "an announced write shows at once, not after the stamp's time to live",
    )
    .await;

    let other = app.browser("victor").await;
    let as_reviewer = page(&app, &other, &format!("/incidents/{id}")).await;
    assert!(
        as_reviewer.contains("victor"),
        "the other viewer sees their own header"
    );
    assert!(renamed.contains("rita"));
}

/// Renames incident `id` to `title` straight in the database, as another process would, with a
/// timeline row at `hh_mm` (a title change alone bumps no counter; the row beside it does).
async fn rename_behind_the_app(app: &TestApp, id: &str, title: &str, hh_mm: &str) {
    sqlx::query("UPDATE incidents SET title = $1 WHERE id = $2")
        .bind(title)
        .bind(id)
        .execute(&app.pool)
        .await
        .unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO timeline_events (incident_id, at, actor, kind, detail) \
         VALUES ($1, '2026-11-29T{hh_mm}:00Z', 'rita', 'note', 'renamed')"
    )))
    .bind(id)
    .execute(&app.pool)
    .await
    .unwrap();
}

/// The page at `path` once it contains `needle`, asked again every 10 ms; fails with `why`
/// when that takes longer than `within`.
async fn page_showing(
    app: &TestApp,
    client: &Client,
    path: &str,
    needle: &str,
    within: std::time::Duration,
    why: &str,
) -> String {
    let started = std::time::Instant::now();
    loop {
        let html = page(app, client, path).await;
        if html.contains(needle) {
            return html;
        }
        assert!(started.elapsed() < within, "{why}");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// Every `<input …>` / `<textarea …>` opening tag of `html` named `name`.
fn controls_named<'a>(html: &'a str, name: &str) -> Vec<&'a str> {
    let attr = format!(r#" name="{name}""#);
    html.match_indices('<')
        .map(|(i, _)| &html[i..])
        .filter(|rest| rest.starts_with("<input ") || rest.starts_with("<textarea "))
        .map(|rest| &rest[..=rest.find('>').unwrap()])
        .filter(|tag| tag.contains(&attr))
        .collect()
}

/// Each control named `name` on `html` (at least one) says the server's limit `max`.
fn assert_maxlength(html: &str, name: &str, max: usize, count: usize) {
    let tags = controls_named(html, name);
    assert_eq!(tags.len(), count, "{name}: {tags:?}");
    for tag in tags {
        assert!(
            tag.contains(&format!(r#" maxlength="{max}""#)),
            "{name} has maxlength {max}: {tag}"
        );
    }
}

#[tokio::test]
async fn every_field_the_server_limits_says_its_limit_in_the_form() {
    let app = spawn_app().await;
    let rita = app.browser("rita").await;
    // Acting on recommendations: evidence source, verdict note and the resolve form.
    let id = app
        .open_incident("Ledger writes stall", "ledger-writer")
        .await;
    paste(&app, &id).await;
    let inv = api(&app, &app.responder, &id, "investigate", json!({})).await;
    let rid = inv["recommendations"][0]["id"].as_i64().unwrap();
    api(
        &app,
        &app.responder,
        &id,
        &format!("recommendations/{rid}/approve"),
        json!({}),
    )
    .await;
    let html = page(&app, &rita, &format!("/incidents/{id}")).await;
    assert_maxlength(&html, "source", 200, 1); // SOURCE_MAX
    assert_maxlength(&html, "note", 4000, 1); // verdict note
    assert_maxlength(&html, "summary", 20000, 1); // TEXT_MAX
    assert_maxlength(&html, "root_cause", 20000, 1); // TEXT_MAX
    // The post-mortem draft: summary, root cause and trigger are limited, the rest is not.
    assert!(app.resolve(&id).await.status().is_success());
    draft(&app, &id).await;
    let html = page(&app, &rita, &format!("/incidents/{id}/postmortem")).await;
    assert_maxlength(&html, "summary", 20000, 1);
    assert_maxlength(&html, "root_cause", 20000, 1);
    assert_maxlength(&html, "trigger", 5000, 1);
    // Integrations: the new form and the row of a PagerDuty integration.
    let res = app
        .post_json(
            &app.admin,
            "/api/v1/integrations",
            json!({"name": "ledger-pager", "source": "pagerduty"}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let ada = app.browser("ada").await;
    let html = page(&app, &ada, "/integrations").await;
    assert_maxlength(&html, "name", 100, 1); // NAME_MAX
    assert_maxlength(&html, "default_service", 100, 2); // SERVICE_MAX
    assert_maxlength(&html, "signing_secret", 500, 2); // SIGNING_SECRET_MAX
    // The memory forms: a new record (service, runbook title, text) and retracting one.
    let html = page(&app, &rita, "/memories/new").await;
    assert_maxlength(&html, "service", 100, 1);
    assert_maxlength(&html, "title", 200, 1);
    assert_maxlength(&html, "text", 5000, 1);
    let res = app
        .post_json(
            &app.responder,
            "/api/v1/memories",
            json!({"kind": "service_fact", "service": "ledger", "text": "The ledger batches writes every five seconds."}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let created: serde_json::Value = res.json().await.expect("json");
    let mem = created["id"].as_i64().expect("a record id");
    let victor = app.browser("victor").await; // a reviewer: only reviewers curate
    let html = page(&app, &victor, &format!("/memories/{mem}")).await;
    assert!(
        html.contains(r#"<input name="reason" maxlength="2000" required>"#),
        "{html}"
    );
}
