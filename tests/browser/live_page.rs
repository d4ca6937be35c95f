//! The live incident page (issue #55) in two real browser sessions: rita (A) has the incident
//! open and is typing more evidence when bob (B) adds evidence, records a verdict and resolves
//! the incident from his own browser. A's page shows each change within 2 s without a reload,
//! says who did it, shows bob among who is here, never touches what rita is typing (her text and
//! the focus stay), keeps her form's incident version current, and her submit then succeeds
//! (no 409). Screenshots of A's page before and after B's changes land in `target/artifacts/`
//! (`live-before.png`, `live-after.png`).

use std::time::{Duration, Instant};

use fantoccini::{Client, Locator};
use incidentmind::app::{App, Config};
use incidentmind::services::users::add_user;

use crate::ui::{
    self, DESKTOP, PASSWORD, Tools, click, current_incident, settle, sign_in, submit_form,
    wait_for_text,
};

const BOB_LOG: &str = "2026-12-07T02:11:04Z ERROR orders-db pool: no connection free after 30000 ms (active=40 idle=0 waiting=212)
2026-12-07T02:11:39Z ERROR orders-db pool: no connection free after 30000 ms (active=40 idle=0 waiting=260)
2026-12-07T02:12:02Z WARN orders-db pool at its limit of 40 connections";

const RITA_TYPES: &str = "Replica lag on orders-db-2 reached 41 s at 02:09, before the pool filled";

/// Polls `script` (a function body returning a boolean) until it is true; the time it took, at
/// most `within` (panics after it with `what`).
async fn within(c: &Client, within: Duration, what: &str, script: &str) -> Duration {
    let started = Instant::now();
    loop {
        let ok = c
            .execute(script, vec![])
            .await
            .map(|v| v == true)
            .unwrap_or(false);
        if ok {
            return started.elapsed();
        }
        assert!(started.elapsed() < within, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_teammate_s_changes_appear_live_without_touching_what_you_type() {
    let Some(tools) = ui::tools("the live-page browser test") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("live.db");
    let app = App::build(Config::new(db.to_str().expect("utf-8")))
        .await
        .expect("app");
    for (name, role) in [("rita", "responder"), ("bob", "responder")] {
        add_user(app.pool(), name, role, Some(PASSWORD))
            .await
            .expect("user");
    }
    let base = serve(&app).await;
    live_page(&tools, "live", &base, &base).await;
}

/// Serves `app` on a loopback port: its base URL.
async fn serve(app: &App) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let router = app.router.clone();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    base
}

/// The same over two instances sharing one PostgreSQL database: rita's page is served by
/// instance A, bob works on instance B (skipped without `INCIDENTMIND_TEST_DATABASE_URL`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_teammate_s_changes_on_another_instance_appear_live_over_postgres() {
    let Some(tools) = ui::tools("the live-page browser test over two instances") else {
        return;
    };
    let server = match std::env::var("INCIDENTMIND_TEST_DATABASE_URL") {
        Ok(url) if !url.trim().is_empty() => url,
        _ => {
            crate::skip::skip(
                "the live-page browser test over two instances",
                "no PostgreSQL (set INCIDENTMIND_TEST_DATABASE_URL; scripts/pg-test-cluster start prints one)",
                crate::skip::Required::InCi(None),
            );
            return;
        }
    };
    use sqlx::Connection as _;
    sqlx::any::install_default_drivers();
    let name = format!("im_live_{}", uuid::Uuid::now_v7().simple());
    let mut admin = sqlx::AnyConnection::connect(&server)
        .await
        .expect("connect to the PostgreSQL test server");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut admin)
        .await
        .expect("create a test database");
    admin.close().await.ok();
    let mut url = url::Url::parse(&server).expect("server URL");
    url.set_path(&name);
    let a = App::build(Config::new(url.as_str()))
        .await
        .expect("instance A");
    let b = App::build(Config::new(url.as_str()))
        .await
        .expect("instance B");
    for (name, role) in [("rita", "responder"), ("bob", "responder")] {
        add_user(a.pool(), name, role, Some(PASSWORD))
            .await
            .expect("user");
    }
    let (base_a, base_b) = (serve(&a).await, serve(&b).await);
    live_page(&tools, "live-pg", &base_a, &base_b).await;
}

/// The two sessions: A on `base_a`, B on `base_b` (one instance, or two over one database).
/// Screenshots are `target/artifacts/{shots}-before.png` and `…-after.png`.
pub(crate) async fn live_page(tools: &Tools, shots: &str, base_a: &str, base_b: &str) {
    let checks = tools.checks(DESKTOP);
    let bob_session = tools.session(DESKTOP).await;
    let bob = bob_session.client.clone();
    let rita_session = tools.session(DESKTOP).await;
    let rita = rita_session.client.clone();
    // Tall enough that the screenshots show the header, the next step, the evidence and the
    // copilot at once.
    rita.set_window_size(DESKTOP.width, 2000)
        .await
        .expect("window size");

    // B opens the incident, pastes logs, investigates and approves the first recommendation.
    sign_in(&bob, base_b, "bob").await;
    bob.goto(&format!("{base_b}/incidents/new"))
        .await
        .expect("new");
    submit_form(
        &bob,
        "form[action='/incidents']",
        &[
            ("title", "Orders API times out"),
            ("service", "orders-api"),
            ("severity", "SEV2"),
            ("description", "Order submissions time out since 02:11."),
        ],
    )
    .await;
    let id = current_incident(&bob).await;
    submit_form(
        &bob,
        "#next-step form[action$='/evidence']",
        &[("content", BOB_LOG)],
    )
    .await;
    click(&bob, "#investigate").await;
    click(
        &bob,
        "ol.recommendations > li.recommendation button.approve",
    )
    .await;
    wait_for_text(&bob, "ol.recommendations", "Verdict").await;

    // A opens it and starts typing more evidence.
    sign_in(&rita, base_a, "rita").await;
    rita.goto(&format!("{base_a}/incidents/{id}"))
        .await
        .expect("page");
    settle(&rita).await;
    wait_for_text(&rita, "#presence", "bob").await;
    click(&rita, "details.more-evidence > summary").await;
    let area = rita
        .find(Locator::Css(
            "details.more-evidence form[action$='/evidence'] textarea[name=content]",
        ))
        .await
        .expect("rita's evidence box");
    area.click().await.expect("focus");
    area.send_keys(RITA_TYPES).await.expect("type");
    let version_before = rita
        .execute("return document.querySelector(\"details.more-evidence form input[name=version]\").value", vec![])
        .await
        .expect("version");
    assert_eq!(version_before, "1");
    crate::ui::scroll_to(&rita, "#incident-head").await;
    checks.shot_as(&rita, &format!("{shots}-before")).await;

    // B adds evidence: A sees it, and who did it, within 2 s.
    bob.goto(&format!("{base_b}/incidents/{id}"))
        .await
        .expect("page");
    settle(&bob).await;
    click(&bob, "details.more-evidence > summary").await;
    submit_form(
        &bob,
        "details.more-evidence form[action$='/evidence']",
        &[(
            "content",
            "2026-12-07T02:14:40Z WARN orders-db-2 replica slot retained 3.1 GB of WAL",
        )],
    )
    .await;
    let evidence_in = within(
        &rita,
        Duration::from_secs(2),
        "bob's evidence on rita's page",
        "return document.querySelector('#observations').textContent.includes('replica slot retained')
               && document.querySelector('#live-line').textContent.includes('bob added evidence');",
    )
    .await;

    // B records a verdict on the approved action: A sees it within 2 s.
    submit_form(
        &bob,
        "li.recommendation form.verdict-form",
        &[
            ("verdict", "did_not_resolve"),
            ("note", "timeouts went on after it"),
        ],
    )
    .await;
    let verdict_in = within(
        &rita,
        Duration::from_secs(2),
        "bob's verdict on rita's page",
        "return document.querySelector('#copilot').textContent.includes('Verdict: did not resolve')
               && document.querySelector('#live-line').textContent.includes('bob recorded a verdict');",
    )
    .await;

    // B resolves it (a state change: the incident's version moves on): A's page follows.
    submit_form(
        &bob,
        "form.resolve",
        &[
            (
                "summary",
                "Failed over to the other replica; timeouts stopped at 02:31.",
            ),
            (
                "root_cause",
                "A stuck replication slot slowed every write until the pool filled.",
            ),
        ],
    )
    .await;
    let resolved_in = within(
        &rita,
        Duration::from_secs(2),
        "the resolution on rita's page",
        "return document.querySelector('#state').textContent.includes('Resolved');",
    )
    .await;
    println!(
        "live page: bob's evidence after {evidence_in:?}, verdict after {verdict_in:?}, resolution after {resolved_in:?}"
    );

    // What rita typed is untouched, with the focus, and her form carries the new version.
    let kept = rita
        .execute(
            "var t = document.querySelector(\"details.more-evidence form[action$='/evidence'] textarea[name=content]\");
             var v = document.querySelector(\"details.more-evidence form[action$='/evidence'] input[name=version]\");
             return [t ? t.value : null, document.activeElement === t, v ? v.value : null,
                     document.querySelector('details.more-evidence').open];",
            vec![],
        )
        .await
        .expect("rita's form");
    assert_eq!(kept[0], RITA_TYPES, "what rita typed is kept");
    assert_eq!(kept[1], true, "the focus stays in rita's text");
    assert_eq!(kept[2], "2", "the form follows the incident's version");
    assert_eq!(kept[3], true, "the open form stays open");
    assert_eq!(
        rita.current_url().await.expect("url").path(),
        format!("/incidents/{id}"),
        "no reload"
    );
    crate::ui::scroll_to(&rita, "#incident-head").await;
    checks.shot_as(&rita, &format!("{shots}-after")).await;
    checks.accessible(&rita, &format!("{shots}-after")).await;

    // Her submit, unrelated to bob's changes, succeeds.
    rita.form(Locator::Css(
        "details.more-evidence form[action$='/evidence']",
    ))
    .await
    .expect("rita's form")
    .submit()
    .await
    .expect("submit");
    settle(&rita).await;
    assert!(
        rita.find(Locator::Css("#page-error")).await.is_err(),
        "no 409: {}",
        wait_for_text(&rita, "main", "").await
    );
    wait_for_text(&rita, "#observations", "before the pool filled").await;

    rita.close().await.expect("close");
    bob.close().await.expect("close");
}
