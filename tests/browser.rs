//! The main job in a real browser: headless Chromium driven over WebDriver (fantoccini +
//! Debian's chromium-driver), at desktop width (1366×900) and at phone width (390×844). Signs in,
//! works an incident from pasted logs to a learned memory through forms and buttons only (with a
//! multi-lesson post-mortem edit, which the browser sends with CRLF line endings), then opens a
//! second incident in other words and checks that it recalls and cites the first and warns on its
//! dead end. On every page it visits (the API docs included): no horizontal scroll, no word broken
//! mid-word in a table cell at desktop width, and axe-core (vendored under
//! `tests/vendor/axe-core/`) finds no serious or critical WCAG A/AA violation. Saves screenshots
//! of each page at both widths under `target/artifacts/`.
//!
//! `alert_page.rs` (beside this file) opens an incident from an Alertmanager webhook and a real
//! Prometheus and checks its page; `oidc_signin.rs` signs in through a real OpenID provider. The browser and the checks are in `support/browser.rs`.
//!
//! Skipped with a loud message when no chromedriver is installed, unless
//! `INCIDENTMIND_REQUIRE_BROWSER=1` (CI sets it, after `.ci/run` installs the browser).

#[path = "browser/alert_page.rs"]
mod alert_page;
#[path = "browser/live_page.rs"]
mod live_page;
#[path = "support/oidc.rs"]
mod oidc_provider;
#[path = "browser/oidc_signin.rs"]
mod oidc_signin;
#[path = "support/peer.rs"]
mod peer;
#[path = "support/prometheus.rs"]
mod prometheus_real;
#[path = "support/skip.rs"]
mod skip;
#[path = "support/browser.rs"]
mod ui;

use fantoccini::Locator;
use incidentmind::{AppState, Settings, router, services::users::add_user, store};
use ui::{
    Checks, DESKTOP, PASSWORD, PHONE, Tools, click, current_incident, scroll_to, settle, sign_in,
    sign_out, submit_form, text_of, wait_for_text,
};

const LOG_A: &str = "2026-11-29T14:05:12Z ERROR HikariPool-1 - Connection is not available, request timed out after 30000ms.
2026-11-29T14:06:40Z ERROR HikariPool-1 - Connection is not available, request timed out after 30000ms.
2026-11-29T14:07:02Z WARN pool stats: active=50 idle=0 waiting=180
2026-11-29T14:07:30Z INFO request rate 290/s (flat)";

const LOG_B: &str = "2026-11-29T16:20:03Z ERROR checkout: timeout waiting for an idle connection from the database pool (30000 ms)
2026-11-29T16:21:10Z ERROR checkout: timeout waiting for an idle connection from the database pool (30000 ms)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engineer_works_an_incident_and_the_next_one_benefits() {
    let Some(tools) = ui::tools("the real-browser test") else {
        return;
    };
    for vp in [DESKTOP, PHONE] {
        walkthrough(&tools, &tools.checks(vp)).await;
    }
}

/// The whole workflow through the forms at one screen size, on a fresh app.
#[allow(
    clippy::too_many_lines,
    reason = "the whole workflow through the forms in one browser session, each page reached from the one before"
)]
async fn walkthrough(tools: &Tools, checks: &Checks) {
    let vp = checks.vp;
    // The app, with the sample history loaded through the normal workflow.
    let dir = tempfile::tempdir().expect("tempdir");
    let pool = store::connect(dir.path().join("browser.db").to_str().expect("utf-8"))
        .await
        .expect("db");
    add_user(&pool, "rita", "responder", Some(PASSWORD))
        .await
        .expect("rita");
    add_user(&pool, "victor", "reviewer", Some(PASSWORD))
        .await
        .expect("victor");
    add_user(&pool, "ada", "admin", Some(PASSWORD))
        .await
        .expect("ada");
    incidentmind::services::sample::load_history(&incidentmind::memory::Memory::new(
        pool.clone(),
        None,
    ))
    .await
    .expect("history");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    // Evidence bodies up to 1 MiB, so the over-limit paste below stays quick to type.
    let settings = Settings {
        max_evidence_bytes: 1024 * 1024,
        ..Settings::default()
    };
    let app = router(AppState::new(pool.clone(), settings));
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });

    // The browser.
    let session = tools.session(vp).await;
    let c = session.client.clone();

    // 0. The sign-in page.
    c.goto(&format!("{base}/signin")).await.expect("signin");
    let width = c
        .execute("return window.innerWidth", vec![])
        .await
        .expect("width");
    assert_eq!(width.as_u64(), Some(u64::from(vp.width)), "viewport width");
    checks.page(&c, "00-signin").await;

    // 1. Sign in and open incident A.
    sign_in(&c, &base, "rita").await;
    checks.page(&c, "01-incident-list").await;
    c.goto(&format!("{base}/incidents/new")).await.expect("new");
    checks.page(&c, "02-new-incident").await;
    submit_form(
        &c,
        "form[action='/incidents']",
        &[
            ("title", "Checkout API returns 503s"),
            ("service", "payments-api"),
            ("severity", "SEV2"),
            (
                "description",
                "Checkout failing since 14:05; the database looks idle.",
            ),
        ],
    )
    .await;
    let a = current_incident(&c).await;
    assert!(a.starts_with("INC-"), "{a}");
    assert!(
        text_of(&c, ".step.current .step-label")
            .await
            .contains("Investigate")
    );
    // The next step is adding evidence, and its form is the first thing after the header.
    wait_for_text(&c, "#next-step", "Add evidence").await;
    c.find(Locator::Css("#next-step form.evidence-form"))
        .await
        .expect("the evidence form is in the next-step card");
    checks.page(&c, "03-incident-opened").await;

    // 2. Paste logs → observations grouped by failure mode; then Investigate is next.
    submit_form(
        &c,
        "form.evidence-form",
        &[
            ("kind", "logs"),
            ("source", "kubectl logs payments-api"),
            ("content", LOG_A),
        ],
    )
    .await;
    wait_for_text(&c, "#observations", "connection_pool_exhausted").await;
    wait_for_text(&c, "#observations", "Connection is not available").await;
    wait_for_text(&c, "#next-step", "Investigate").await;
    scroll_to(&c, "#observations").await;
    checks.page(&c, "04-observations").await;

    // The raw lines, paged: those of the pool's error template (the pool-stats line, with no
    // idle connection and requests waiting, is pool exhaustion too, in the same group).
    c.wait()
        .at_most(std::time::Duration::from_secs(10))
        .for_element(Locator::XPath(
            "//*[@id='observations']//li[contains(., 'Connection is not available')]//a[@class='lines']",
        ))
        .await
        .expect("the pool error's line link")
        .click()
        .await
        .expect("click the pool error's line link");
    settle(&c).await;
    wait_for_text(&c, "#evidence-lines", "HikariPool-1").await;
    checks.page(&c, "05-evidence-lines").await;
    c.back().await.expect("back");
    settle(&c).await;

    // 3. Investigate; approve raising the pool (simulated) → did not resolve; rollback → resolved.
    click(&c, "#investigate").await;
    text_of(&c, "ol.hypotheses").await;
    wait_for_text(&c, "#next-step", "Act on the recommendations").await;
    // The strongest hypothesis first (issue #49): confidence never rises down the list.
    let first_hypothesis = strongest_first(&c).await;
    checks.page(&c, "06-investigation").await;
    approve(
        &c,
        "raise_pool_limit",
        "The sample's pool was smaller; this one has room at the database",
    )
    .await;
    submit_form(
        &c,
        "li.recommendation[data-kind='raise_pool_limit'] form.verdict-form",
        &[
            ("verdict", "did_not_resolve"),
            ("note", "pool filled again within minutes"),
        ],
    )
    .await;
    approve(&c, "rollback_deploy", "The last deploy is the new suspect").await;
    submit_form(
        &c,
        "li.recommendation[data-kind='rollback_deploy'] form.verdict-form",
        &[
            ("verdict", "resolved"),
            ("note", "pool usage back to normal"),
        ],
    )
    .await;
    wait_for_text(&c, "ol.recommendations", "Verdict: did not resolve").await;
    wait_for_text(&c, "ol.recommendations", "Verdict: resolved").await;
    // The two verdicts look different at a glance; once one resolved it, nothing is "waiting".
    let looks = c
        .execute(
            "var s = function (q) { var e = document.querySelector(q); var c = getComputedStyle(e);
                                    return [c.backgroundColor, c.borderLeftColor, e.textContent.trim()[0]]; };
             return [s('.verdict.resolved'), s('.verdict.did_not_resolve')];",
            vec![],
        )
        .await
        .expect("verdict styles");
    assert_ne!(looks[0][0], looks[1][0], "backgrounds differ: {looks}");
    assert_ne!(looks[0][1], looks[1][1], "borders differ: {looks}");
    assert_eq!(
        (looks[0][2].as_str(), looks[1][2].as_str()),
        (Some("✓"), Some("✗"))
    );
    let next = wait_for_text(&c, "#next-step", "Resolve the incident").await;
    assert!(!next.contains("waiting"), "{next}");
    scroll_to(&c, ".verdict.resolved").await;
    checks.page(&c, "06b-verdicts").await;

    // 4. Resolve from the next-step card; the post-mortem is then the current step.
    submit_form(
        &c,
        "#next-step form.resolve",
        &[
            ("summary", "Rolled back payments-api 2.15.0."),
            ("root_cause", "A connection leak in the new refund path."),
        ],
    )
    .await;
    wait_for_text(&c, "#state", "Resolved").await;
    wait_for_text(&c, ".step.current .step-label", "Post-mortem").await;
    // The age stops counting: it reads how long the incident took.
    let age = c
        .execute(
            "return document.querySelector('#age').previousElementSibling.textContent",
            vec![],
        )
        .await
        .expect("age label");
    assert_eq!(age, "Resolved after");
    checks.page(&c, "07-resolved").await;
    click(&c, "#step-postmortem").await;
    let pm = wait_for_text(&c, "#postmortem", "What did NOT work").await;
    assert!(pm.contains("raise_pool_limit"), "{pm}");
    checks.page(&c, "08-postmortem-draft").await;

    // The draft is edited in the browser with two lessons: the textarea is sent with CRLF.
    let lessons = "ALWAYS: check the pool's active count against the database's session count before raising the pool limit\n\
                   BECAUSE: the pool filled again within minutes during this incident\n\
                   SCOPE: payments-api\n\
                   SEVERITY: high\n\
                   \n\
                   ALWAYS: roll back the last deploy first when connections leak after a release\n\
                   BECAUSE: the rollback of 2.15.0 ended it\n\
                   SCOPE: all\n\
                   SEVERITY: medium";
    // The trigger is a person's to write: the field offers an example, never a value that
    // would be saved unread; a reviewer confirms only once it is written.
    let placeholder = c
        .find(Locator::Css("#trigger"))
        .await
        .expect("trigger field")
        .attr("placeholder")
        .await
        .expect("placeholder");
    assert!(placeholder.is_some_and(|p| p.starts_with("e.g.")));
    submit_form(
        &c,
        "form[action$='/postmortem/edit']",
        &[
            ("lessons", lessons),
            ("trigger", "The payments-api 2.15.0 deploy"),
        ],
    )
    .await;
    assert!(
        c.find(Locator::Css(".flash.error")).await.is_err(),
        "a two-lesson edit from the browser saves"
    );
    let pm = wait_for_text(&c, "#postmortem", "database's session count").await;
    assert!(pm.contains("rollback of 2.15.0 ended it"), "{pm}");
    sign_out(&c).await;

    // 5. A reviewer finds the draft in the review queue, confirms, previews and learns.
    sign_in(&c, &base, "victor").await;
    click(&c, "#nav-review").await;
    wait_for_text(&c, "#review-drafts", &a).await;
    checks.page(&c, "09-review-queue").await;
    c.goto(&format!("{base}/incidents/{a}/postmortem"))
        .await
        .expect("pm page");
    click(&c, "#confirm").await;
    let preview = text_of(&c, "#preview-count").await;
    let planned: usize = preview
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("count in {preview}"));
    let rows = c
        .find_all(Locator::Css("#planned tbody tr"))
        .await
        .expect("rows")
        .len();
    assert_eq!(rows, planned, "the preview lists exactly what it counts");
    // The hypothesis graded is the one the incident page showed first.
    let graded = text_of(&c, "#grading-hypothesis").await;
    assert!(
        first_hypothesis.contains(&graded),
        "graded {graded:?}, shown first {first_hypothesis:?}"
    );
    checks.page(&c, "10-learnings-preview").await;
    checks.shot_as(&c, &format!("learnings-{}", vp.name)).await;
    click(&c, "#learn").await;
    wait_for_text(
        &c,
        "#learned-count",
        &format!("{planned} durable memories written"),
    )
    .await;
    wait_for_text(&c, "#state", "Learned").await;
    checks.page(&c, "11-learned").await;
    c.goto(&format!("{base}/incidents/{a}")).await.expect("a");
    wait_for_text(&c, "#next-step", "Learned").await;
    assert!(
        c.find(Locator::Css(".step.current")).await.is_err(),
        "nothing is current once learned"
    );

    // 6. Incident B in other words on the same service: recall cites A and warns on the dead end.
    c.goto(&format!("{base}/incidents/new")).await.expect("new");
    submit_form(
        &c,
        "form[action='/incidents']",
        &[
            ("title", "Card payments hang at the last step"),
            ("service", "payments-api"),
            ("severity", "SEV2"),
            (
                "description",
                "Customers wait forever on pay; requests time out waiting on the db.",
            ),
        ],
    )
    .await;
    let b = current_incident(&c).await;
    // The first screen of a new incident shows what to do: the next-step card starts inside
    // it, and the stepper stays compact (at most a quarter of the screen), at either width.
    let layout = c
        .execute(
            "window.scrollTo(0, 0);
             var h = window.innerHeight;
             return [document.querySelector('#next-step').getBoundingClientRect().top < h * 0.6,
                     document.querySelector('ol.stepper').getBoundingClientRect().height <= h / 4,
                     h];",
            vec![],
        )
        .await
        .expect("layout");
    assert_eq!(
        layout[0], true,
        "the next step starts on the first screen: {layout}"
    );
    assert_eq!(layout[1], true, "the stepper stays compact: {layout}");
    // A paste over the evidence limit is not sent: the form says so and keeps the input (a 413
    // page would have lost it).
    let kept = c
        .execute(
            "var f = document.querySelector('form.evidence-form');
             f.querySelector('textarea').value = 'y'.repeat(1100 * 1024);
             f.querySelector('#add-evidence').click();
             return [f.getAttribute('data-max-bytes'),
                     f.querySelector('.busy-status').textContent,
                     f.querySelector('textarea').value.length,
                     f.querySelector('#add-evidence').disabled];",
            vec![],
        )
        .await
        .expect("over-limit paste");
    assert_eq!(
        kept[0], "1048576",
        "the form carries the server's limit: {kept}"
    );
    let said = kept[1].as_str().unwrap_or_default();
    assert!(
        said.contains("Too large: 1.1 MiB against the limit of 1 MiB") && said.contains("kept"),
        "{said}"
    );
    assert_eq!(kept[2], 1100 * 1024, "the paste is still in the form");
    assert_eq!(kept[3], false, "the button still works");
    assert_eq!(current_incident(&c).await, b, "still on the incident page");
    // A large paste (over 256 KiB) goes through static/app.js: the button is disabled, upload
    // progress is shown, then the browser follows the server's answer.
    let big = format!("{LOG_B}\n").repeat(1300);
    let form = c
        .form(Locator::Css("form.evidence-form"))
        .await
        .expect("evidence form");
    form.set_by_name("content", &big).await.expect("content");
    // What the form shows while it works is recorded as it happens, in sessionStorage, which
    // outlives the navigation to the server's answer (on loopback the upload may be over before
    // a check after the click could look).
    c.execute(
        "sessionStorage.removeItem('seen-disabled');
         sessionStorage.removeItem('seen-status');
         sessionStorage.removeItem('seen-progress');
         var form = document.querySelector('form.evidence-form');
         new MutationObserver(function () {
           if (document.querySelector('#add-evidence').disabled) {
             sessionStorage.setItem('seen-disabled', '1');
           }
           var bar = form.querySelector('progress.busy-progress');
           if (bar && !bar.hidden) { sessionStorage.setItem('seen-progress', '1'); }
           var s = form.querySelector('.busy-status');
           if (s && s.textContent) {
             sessionStorage.setItem('seen-status',
               (sessionStorage.getItem('seen-status') || '') + '|' + s.textContent);
           }
         }).observe(form, {attributes: true, childList: true, characterData: true, subtree: true});",
        vec![],
    )
    .await
    .expect("observer");
    c.find(Locator::Css("#add-evidence"))
        .await
        .expect("button")
        .click()
        .await
        .expect("click");
    wait_for_text(
        &c,
        "#observations",
        "timeout waiting for an idle connection",
    )
    .await;
    wait_for_text(&c, "#next-step", "Investigate").await;
    assert_eq!(current_incident(&c).await, b, "back on the incident page");
    let seen = c
        .execute(
            "return [sessionStorage.getItem('seen-disabled'),
                     sessionStorage.getItem('seen-progress'),
                     sessionStorage.getItem('seen-status')]",
            vec![],
        )
        .await
        .expect("what the form showed");
    assert_eq!(
        seen[0], "1",
        "the button was disabled while it worked: {seen}"
    );
    assert_eq!(seen[1], "1", "the upload progress bar was shown: {seen}");
    let status = seen[2].as_str().unwrap_or_default();
    assert!(
        status.contains("% sent") || status.contains("Sent; extracting observations"),
        "the status said how far the upload was: {status}"
    );
    click(&c, "#investigate").await;
    let banner = wait_for_text(
        &c,
        "li.recommendation[data-kind='raise_pool_limit'] .warning.dead-end",
        &format!("tried during {a}"),
    )
    .await;
    assert!(
        banner.contains("Confirm why this time is different"),
        "{banner}"
    );
    let cited = c
        .find_all(Locator::Css(&format!(
            "ol.hypotheses a.prior[href='/incidents/{a}']"
        )))
        .await
        .expect("prior links");
    assert!(!cited.is_empty(), "a hypothesis of {b} cites {a}");
    wait_for_text(&c, "#similar", &a).await;
    // The flagged recommendation sorts last and can still be approved.
    let kinds: Vec<String> = {
        let mut out = Vec::new();
        for e in c
            .find_all(Locator::Css("ol.recommendations > li"))
            .await
            .expect("recs")
        {
            out.push(e.attr("data-kind").await.ok().flatten().unwrap_or_default());
        }
        out
    };
    let first_flagged = c
        .find_all(Locator::Css("ol.recommendations > li.flagged"))
        .await
        .expect("flagged")
        .len();
    assert!(first_flagged >= 1);
    assert!(
        kinds
            .iter()
            .rev()
            .take(first_flagged)
            .any(|k| k == "raise_pool_limit"),
        "{kinds:?}"
    );
    assert!(
        c.find(Locator::Css(
            "li.recommendation[data-kind='raise_pool_limit'] button.approve"
        ))
        .await
        .is_ok(),
        "still approvable"
    );
    scroll_to(&c, "li.recommendation.flagged").await;
    checks.page(&c, "12-second-incident-warned").await;
    checks.shot_as(&c, &format!("incident-{}", vp.name)).await;
    // Approving the dead end asks, in the same form, what is different this time (required).
    let warned = "li.recommendation[data-kind='raise_pool_limit']";
    let asked = text_of(&c, &format!("{warned} form.approve-dead-end label")).await;
    assert_eq!(asked, "What is different this time?");
    let refused = c
        .execute(
            "return document.querySelector(arguments[0]).checkValidity()",
            vec![serde_json::json!(format!(
                "{warned} form.approve-dead-end input[name=reason]"
            ))],
        )
        .await
        .expect("validity");
    assert_eq!(refused, false, "an empty reason does not submit");
    let why = "The database's session limit was raised to 400 first";
    approve(&c, "raise_pool_limit", why).await;
    let kept = wait_for_text(
        &c,
        &format!("{warned} .warning.dead-end .dead-end-reason"),
        why,
    )
    .await;
    assert!(kept.starts_with("Approved anyway"), "{kept}");
    scroll_to(&c, "li.recommendation.flagged").await;
    checks.page(&c, "12b-dead-end-approved").await;

    // The memory browser shows the sample history; the incident list pages and filters.
    c.goto(&format!("{base}/memories?kind=lesson"))
        .await
        .expect("memories");
    wait_for_text(&c, "#memories", "ALWAYS").await;
    checks.page(&c, "13-memory-browser").await;
    c.goto(&format!("{base}/incidents?state=all"))
        .await
        .expect("all incidents");
    wait_for_text(&c, "#incident-list", &a).await;
    checks.page(&c, "14-incident-list-all").await;
    // Insights: the first incident's failed raise_pool_limit is a dead end; the questions are
    // answered by charts that fit the screen (no sideways scroll at 390 px), a sparkline per
    // service; the sample history's MTTR is its incidents' own, not "under 1 min".
    c.goto(&format!("{base}/insights")).await.expect("insights");
    wait_for_text(&c, "#insights-dead-ends", "raise_pool_limit").await;
    for chart in [
        "svg.chart#chart-mttr-trend",
        "svg.chart#chart-failure-modes",
        "svg.chart#chart-dead-ends",
        "svg.chart#chart-services",
        "#insights-times svg.sparkline",
        "#insights-times svg.sparkline line.base",
    ] {
        assert!(c.find(Locator::Css(chart)).await.is_ok(), "{chart}");
    }
    let services = text_of(&c, "#insights-times ul.service-trends").await;
    assert!(
        services.contains("service-discovery: MTTR 3 d 1 h"),
        "{services}"
    );
    // Each line says what it is where nothing hovers (the phone card): a visible caption.
    assert!(services.contains("MTTR per week, latest"), "{services}");
    let width = c
        .execute(
            "return document.querySelector('#chart-failure-modes').getBoundingClientRect().width",
            vec![],
        )
        .await
        .expect("chart width")
        .as_f64()
        .unwrap_or(0.0);
    assert!(
        width >= 280.0 && width <= f64::from(vp.width),
        "{}: chart {width} px wide",
        vp.name
    );
    checks.page(&c, "14b-insights").await;
    checks.shot_as(&c, &format!("insights-{}", vp.name)).await;
    scroll_to(&c, "#insights-dead-ends").await;
    checks
        .shot_as(&c, &format!("insights-{}-dead-ends", vp.name))
        .await;
    c.goto(&format!("{base}/incidents/INC-2020-0001"))
        .await
        .expect("404");
    wait_for_text(&c, "#error-message", "not found").await;
    wait_for_text(&c, "header.top", "Sign out").await;
    checks.page(&c, "15-not-found").await;

    // An admin's pages: Integrations (a table with forms in its rows) and the profile.
    sign_out(&c).await;
    sign_in(&c, &base, "ada").await;
    c.goto(&format!("{base}/integrations"))
        .await
        .expect("integrations");
    submit_form(
        &c,
        "form[action='/integrations']",
        &[
            ("name", "prod-alertmanager-with-a-rather-long-name"),
            ("default_service", "payments-api"),
        ],
    )
    .await;
    c.goto(&format!("{base}/integrations"))
        .await
        .expect("integrations");
    wait_for_text(&c, "main", "prod-alertmanager-with-a-rather-long-name").await;
    checks.page(&c, "16-integrations").await;
    c.goto(&format!("{base}/profile")).await.expect("profile");
    checks.page(&c, "17-profile").await;
    c.goto(&format!("{base}/api/docs")).await.expect("API docs");
    wait_for_text(&c, "main", "incidents").await;
    checks.page(&c, "18-api-docs").await;
    c.close().await.expect("close");
}

/// Approves the recommendation of `kind`: with `reason` in its form when it carries the dead-end
/// banner (the form asks what is different this time), with the button alone otherwise.
async fn approve(c: &fantoccini::Client, kind: &str, reason: &str) {
    let li = format!("li.recommendation[data-kind='{kind}']");
    let dead_end = format!("{li} form.approve-dead-end");
    if c.find(Locator::Css(&dead_end)).await.is_ok() {
        submit_form(c, &dead_end, &[("reason", reason)]).await;
    } else {
        click(c, &format!("{li} button.approve")).await;
    }
}

/// Checks that the hypotheses are listed strongest first (confidence never rises down the
/// list) and returns the text of the first.
async fn strongest_first(c: &fantoccini::Client) -> String {
    let v = c
        .execute(
            "return Array.from(document.querySelectorAll('ol.hypotheses > li'))
               .map(function (li) { return [li.querySelector('.confidence').textContent.trim(),
                                            li.textContent]; });",
            vec![],
        )
        .await
        .expect("hypotheses");
    let rank = |c: &str| ["low", "medium", "high"].iter().position(|x| *x == c);
    let list: Vec<(usize, String)> = v
        .as_array()
        .expect("a list")
        .iter()
        .map(|h| {
            (
                rank(h[0].as_str().unwrap_or_default()).expect("a confidence"),
                h[1].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert!(!list.is_empty());
    assert!(
        list.windows(2).all(|w| w[0].0 >= w[1].0),
        "strongest first: {list:?}"
    );
    list[0].1.clone()
}
