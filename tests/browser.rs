//! The main job in a real browser: headless Chromium driven over WebDriver (fantoccini +
//! Debian's chromium-driver). Signs in, works an incident from pasted logs to a learned memory
//! through forms and buttons only, then opens a second incident in other words and checks that it
//! recalls and cites the first and warns on its dead end. Saves screenshots under
//! `target/artifacts/`.
//!
//! Skipped with a loud message when no chromedriver is installed, unless
//! `INCIDENTMIND_REQUIRE_BROWSER=1` (CI sets it, after `.ci/run` installs the browser).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use incidentmind::{AppState, Settings, cli::add_user, router, store};

const PASSWORD: &str = "correct horse battery";

const LOG_A: &str = "2026-11-29T14:05:12Z ERROR HikariPool-1 - Connection is not available, request timed out after 30000ms.
2026-11-29T14:06:40Z ERROR HikariPool-1 - Connection is not available, request timed out after 30000ms.
2026-11-29T14:07:02Z WARN pool stats: active=50 idle=0 waiting=180
2026-11-29T14:07:30Z INFO request rate 290/s (flat)";

const LOG_B: &str = "2026-11-29T16:20:03Z ERROR checkout: timed out waiting for a database connection from the pool (30000 ms)
2026-11-29T16:21:10Z ERROR checkout: timed out waiting for a database connection from the pool (30000 ms)";

fn find_binary(candidates: &[&str]) -> Option<PathBuf> {
    candidates.iter().map(PathBuf::from).find(|p| p.exists())
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

struct Driver(std::process::Child);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn shot(c: &Client, dir: &Path, name: &str) {
    if let Ok(png) = c.screenshot().await {
        let _ = std::fs::write(dir.join(format!("{name}.png")), png);
    }
}

/// Waits for the page that a click or submit started to finish loading.
async fn settle(c: &Client) {
    tokio::time::sleep(Duration::from_millis(150)).await;
    for _ in 0..100 {
        if let Ok(v) = c.execute("return document.readyState", vec![]).await
            && v == "complete"
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The text of the first element matching `css`, once it is non-empty (10 s at most).
async fn text_of(c: &Client, css: &str) -> String {
    wait_for_text(c, css, "").await
}

/// Polls until the element's text contains `needle` (10 s at most); panics with what it saw.
async fn wait_for_text(c: &Client, css: &str, needle: &str) -> String {
    let mut last = String::new();
    for _ in 0..50 {
        if let Ok(e) = c.find(Locator::Css(css)).await
            && let Ok(t) = e.text().await
        {
            if !t.is_empty() && t.contains(needle) {
                return t;
            }
            last = t;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("{css} never contained {needle:?}; last text: {last:?}");
}

async fn submit_form(c: &Client, form_css: &str, fields: &[(&str, &str)]) {
    let form = c
        .form(Locator::Css(form_css))
        .await
        .unwrap_or_else(|e| panic!("form {form_css}: {e}"));
    for (k, v) in fields {
        form.set_by_name(k, v)
            .await
            .unwrap_or_else(|e| panic!("field {k} in {form_css}: {e}"));
    }
    form.submit()
        .await
        .unwrap_or_else(|e| panic!("submit {form_css}: {e}"));
    settle(c).await;
}

async fn click(c: &Client, css: &str) {
    let e = c
        .wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"));
    e.click()
        .await
        .unwrap_or_else(|e| panic!("click {css}: {e}"));
    settle(c).await;
}

async fn sign_in(c: &Client, base: &str, name: &str) {
    c.goto(&format!("{base}/signin"))
        .await
        .expect("signin page");
    submit_form(
        c,
        "form[action='/signin']",
        &[("name", name), ("password", PASSWORD)],
    )
    .await;
    let who = text_of(c, ".who").await;
    assert!(who.contains(name), "signed in as {name}: {who}");
}

async fn sign_out(c: &Client) {
    click(c, "form[action='/signout'] button").await;
}

async fn current_incident(c: &Client) -> String {
    let url = c.current_url().await.expect("url");
    url.path()
        .trim_start_matches("/incidents/")
        .split('/')
        .next()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engineer_works_an_incident_and_the_next_one_benefits() {
    let required = std::env::var("INCIDENTMIND_REQUIRE_BROWSER").is_ok_and(|v| v == "1");
    let (Some(driver), Some(chromium)) = (
        find_binary(&["/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver"]),
        find_binary(&["/usr/bin/chromium", "/usr/bin/chromium-browser"]),
    ) else {
        assert!(
            !required,
            "INCIDENTMIND_REQUIRE_BROWSER=1 but chromium/chromedriver are not installed"
        );
        eprintln!(
            "\n==== SKIPPED: real-browser test — install Debian's chromium and chromium-driver (CI does) ====\n"
        );
        return;
    };
    let artifacts = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/artifacts");
    std::fs::create_dir_all(&artifacts).expect("artifacts dir");

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
    incidentmind::sample::load_history(&incidentmind::memory::Memory::new(pool.clone(), None))
        .await
        .expect("history");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let app = router(AppState::new(pool.clone(), Settings::default()));
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });

    // The browser.
    let port = free_port();
    let _driver = Driver(
        std::process::Command::new(&driver)
            .arg(format!("--port={port}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("chromedriver"),
    );
    let profile = tempfile::tempdir().expect("profile");
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        serde_json::json!({
            "binary": chromium,
            "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                     "--disable-background-networking", "--disable-component-update", "--disable-sync",
                     "--disable-dev-shm-usage", "--window-size=1280,1600", format!("--user-data-dir={}", profile.path().display())]
        }),
    );
    let mut client = None;
    for _ in 0..50 {
        match ClientBuilder::rustls()
            .expect("tls")
            .capabilities(caps.clone())
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
        {
            Ok(c) => {
                client = Some(c);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    let c = client.expect("chromedriver session");

    // 1. Sign in and open incident A.
    sign_in(&c, &base, "rita").await;
    c.goto(&format!("{base}/incidents/new")).await.expect("new");
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
    shot(&c, &artifacts, "01-incident-opened").await;

    // 2. Paste logs → observations grouped by failure mode.
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
    shot(&c, &artifacts, "02-observations").await;

    // 3. Investigate; approve raising the pool (simulated) → did not resolve; rollback → resolved.
    click(&c, "#investigate").await;
    text_of(&c, "ol.hypotheses").await;
    shot(&c, &artifacts, "03-investigation").await;
    click(
        &c,
        "li.recommendation[data-kind='raise_pool_limit'] button.approve",
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
    click(
        &c,
        "li.recommendation[data-kind='rollback_deploy'] button.approve",
    )
    .await;
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

    // 4. Resolve, draft the post-mortem.
    submit_form(
        &c,
        "form.resolve",
        &[
            ("summary", "Rolled back payments-api 2.15.0."),
            ("root_cause", "A connection leak in the new refund path."),
        ],
    )
    .await;
    wait_for_text(&c, "#state", "Resolved").await;
    click(&c, "#step-postmortem").await;
    let pm = wait_for_text(&c, "#postmortem", "What did NOT work").await;
    assert!(pm.contains("raise_pool_limit"), "{pm}");
    shot(&c, &artifacts, "04-postmortem-draft").await;
    sign_out(&c).await;

    // 5. A reviewer confirms, previews and learns.
    sign_in(&c, &base, "victor").await;
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
    shot(&c, &artifacts, "05-learnings-preview").await;
    click(&c, "#learn").await;
    wait_for_text(
        &c,
        "#learned-count",
        &format!("{planned} durable memories written"),
    )
    .await;
    wait_for_text(&c, "#state", "Learned").await;
    shot(&c, &artifacts, "06-learned").await;

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
    submit_form(
        &c,
        "form.evidence-form",
        &[("kind", "logs"), ("content", LOG_B)],
    )
    .await;
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
    shot(&c, &artifacts, "07-second-incident-warned").await;

    // The memory browser shows the sample history.
    c.goto(&format!("{base}/memories?kind=lesson"))
        .await
        .expect("memories");
    wait_for_text(&c, "#memories", "ALWAYS").await;
    shot(&c, &artifacts, "08-memory-browser").await;
    c.close().await.expect("close");
}
