//! The real browser the browser tests drive: headless Chromium over WebDriver (fantoccini and
//! Debian's chromium-driver) at desktop width (1366×900) or phone width (390×844), and what they
//! check on every page they visit: no horizontal scroll, no word broken mid-word in a table cell
//! at desktop width, no serious or critical WCAG A/AA violation found by axe-core (vendored under
//! `tests/vendor/axe-core/`), and a screenshot under `target/artifacts/`. Also the steps they
//! share: sign in and out, click, fill a form, wait for text.
//!
//! [`tools`] finds the browser or reports the skip (`tests/support/skip.rs`, required with
//! `INCIDENTMIND_REQUIRE_BROWSER=1`); needs `mod skip` at the crate root.
#![allow(dead_code, reason = "each browser test uses the parts it needs")]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};

/// The password of every user the browser tests create.
pub(crate) const PASSWORD: &str = "correct horse battery";

/// The first of `candidates` that exists.
pub(crate) fn find_binary(candidates: &[&str]) -> Option<PathBuf> {
    candidates.iter().map(PathBuf::from).find(|p| p.exists())
}

/// A free loopback port (bound, read, released).
pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// chromedriver, killed (and waited for) when dropped.
pub(crate) struct Driver(std::process::Child);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One screen size the walkthrough runs at.
#[derive(Clone, Copy)]
pub(crate) struct Viewport {
    /// `desktop` or `phone`, the screenshots' prefix.
    pub name: &'static str,
    /// Width, CSS pixels.
    pub width: u32,
    /// Height, CSS pixels.
    pub height: u32,
    /// Phone: emulated with Chromium's device metrics (a real 390 px viewport).
    pub mobile: bool,
}

pub(crate) const DESKTOP: Viewport = Viewport {
    name: "desktop",
    width: 1366,
    height: 900,
    mobile: false,
};
pub(crate) const PHONE: Viewport = Viewport {
    name: "phone",
    width: 390,
    height: 844,
    mobile: true,
};

/// What the walkthrough checks on a page.
pub(crate) struct Checks {
    /// Where the screenshots go.
    pub dir: PathBuf,
    /// The screen size.
    pub vp: Viewport,
    /// axe-core's source.
    pub axe: String,
}

impl Checks {
    /// Saves a screenshot as `target/artifacts/{viewport}-{name}.png`.
    pub(crate) async fn shot(&self, c: &Client, name: &str) {
        if let Ok(png) = c.screenshot().await {
            let _ = std::fs::write(self.dir.join(format!("{}-{name}.png", self.vp.name)), png);
        }
    }

    /// Saves a screenshot as `target/artifacts/{file}.png`.
    pub(crate) async fn shot_as(&self, c: &Client, file: &str) {
        if let Ok(png) = c.screenshot().await {
            let _ = std::fs::write(self.dir.join(format!("{file}.png")), png);
        }
    }

    /// The page does not scroll sideways: nothing is wider than the viewport.
    pub(crate) async fn no_horizontal_scroll(&self, c: &Client, page: &str) {
        let v = c
            .execute(
                "return [document.scrollingElement.scrollWidth, window.innerWidth,
                         Array.from(document.querySelectorAll('body *'))
                           .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
                           .slice(0, 5).map(e => e.tagName + '.' + e.className).join(' ')]",
                vec![],
            )
            .await
            .expect("scroll width");
        let (scroll, inner) = (v[0].as_f64().unwrap_or(0.0), v[1].as_f64().unwrap_or(0.0));
        assert!(
            inner > 0.0 && scroll <= inner,
            "{} {page}: horizontal scroll ({scroll} > {inner}); too wide: {}",
            self.vp.name,
            v[2]
        );
    }

    /// axe-core on the current page: no serious or critical violation of WCAG 2.x A/AA
    /// (2.2 included).
    pub(crate) async fn accessible(&self, c: &Client, page: &str) {
        c.execute(&format!("{};return true;", self.axe), vec![])
            .await
            .expect("inject axe-core");
        let out = c
            .execute_async(
                "const done = arguments[arguments.length - 1];
                 axe.run(document, {resultTypes: ['violations'], runOnly: {type: 'tag',
                   values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa']}})
                   .then(r => done({passes: r.passes.length, violations: r.violations
                     .filter(v => v.impact === 'serious' || v.impact === 'critical')
                     .map(v => v.id + ' (' + v.impact + '): ' + v.help + ' at ' +
                          v.nodes.slice(0, 3).map(n => n.target.join(' ')).join(', '))}))
                   .catch(e => done({passes: 0, violations: ['axe failed: ' + e]}));",
                vec![],
            )
            .await
            .expect("axe.run");
        let found: Vec<String> = serde_json::from_value(out["violations"].clone())
            .unwrap_or_else(|e| panic!("axe answer on {page}: {e}: {out}"));
        assert!(
            out["passes"].as_u64().unwrap_or(0) > 0,
            "{page}: axe ran no rule: {out}"
        );
        assert!(
            found.is_empty(),
            "{} {page}: accessibility violations:\n{}",
            self.vp.name,
            found.join("\n")
        );
    }

    /// At desktop width a table cell holding one short word ("observation", a host name, a
    /// record id) is not broken between two letters or digits: columns are not squeezed until
    /// words break mid-word (a wrap after a hyphen is a normal line break).
    pub(crate) async fn words_whole(&self, c: &Client, page: &str) {
        if self.vp.mobile {
            return;
        }
        let broken = c
            .execute(
                "return Array.from(document.querySelectorAll('table td, table th')).filter(td => {
                   const t = td.textContent.trim();
                   if (!t || /\\s/.test(t) || t.length > 24) return false;
                   const w = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
                   const word = /[A-Za-z0-9]/;
                   for (let n = w.nextNode(); n; n = w.nextNode()) {
                     const at = i => { const r = document.createRange();
                       r.setStart(n, i); r.setEnd(n, i + 1); return r.getBoundingClientRect(); };
                     for (let i = 0; i + 1 < n.length; i++) {
                       if (word.test(n.data[i]) && word.test(n.data[i + 1])
                           && Math.abs(at(i).bottom - at(i + 1).bottom) > 3) return true;
                     }
                   }
                   return false;
                 }).slice(0, 5).map(td => td.textContent.trim())",
                vec![],
            )
            .await
            .expect("table cells");
        assert_eq!(
            broken,
            serde_json::json!([]),
            "{} {page}: words broken mid-word in table cells",
            self.vp.name
        );
    }

    /// Every check and a screenshot: no sideways scroll, whole words in tables, and axe-core.
    pub(crate) async fn page(&self, c: &Client, name: &str) {
        self.no_horizontal_scroll(c, name).await;
        self.words_whole(c, name).await;
        self.accessible(c, name).await;
        self.shot(c, name).await;
    }
}

/// Waits for the page that a click or submit started to finish loading.
pub(crate) async fn settle(c: &Client) {
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
pub(crate) async fn text_of(c: &Client, css: &str) -> String {
    wait_for_text(c, css, "").await
}

/// Polls until the element's text contains `needle` (10 s at most); panics with what it saw.
pub(crate) async fn wait_for_text(c: &Client, css: &str, needle: &str) -> String {
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
        // An incident page whose recall was still being computed when it was served (the
        // first view after a change, issue #56) says "reload in a moment": as a person does.
        if let Ok(notice) = c.find(Locator::Css("#memory-notice")).await
            && notice
                .text()
                .await
                .is_ok_and(|t| t.contains("reload in a moment"))
        {
            let _ = c.refresh().await;
        }
    }
    panic!("{css} never contained {needle:?}; last text: {last:?}");
}

pub(crate) async fn submit_form(c: &Client, form_css: &str, fields: &[(&str, &str)]) {
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

pub(crate) async fn click(c: &Client, css: &str) {
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

/// Scrolls the first element matching `css` to the top of the viewport (for screenshots).
pub(crate) async fn scroll_to(c: &Client, css: &str) {
    let _ = c
        .execute(
            "const e = document.querySelector(arguments[0]); if (e) { e.scrollIntoView(); } return true;",
            vec![serde_json::json!(css)],
        )
        .await;
}

pub(crate) async fn sign_in(c: &Client, base: &str, name: &str) {
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

pub(crate) async fn sign_out(c: &Client) {
    click(c, "form[action='/signout'] button").await;
}

pub(crate) async fn current_incident(c: &Client) -> String {
    let url = c.current_url().await.expect("url");
    url.path()
        .trim_start_matches("/incidents/")
        .split('/')
        .next()
        .unwrap_or_default()
        .to_string()
}

/// What a browser test needs: chromedriver, Chromium, the screenshot folder and axe-core.
pub(crate) struct Tools {
    driver: PathBuf,
    chromium: PathBuf,
    artifacts: PathBuf,
    axe: String,
}

/// The browser and its helpers, or `None` after the skip notice for `test` when Chromium or
/// chromedriver is not installed.
pub(crate) fn tools(test: &str) -> Option<Tools> {
    let (Some(driver), Some(chromium)) = (
        find_binary(&["/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver"]),
        find_binary(&["/usr/bin/chromium", "/usr/bin/chromium-browser"]),
    ) else {
        crate::skip::skip(
            test,
            "no chromium / chromedriver (install Debian's chromium and chromium-driver, as \
             .ci/run does)",
            crate::skip::Required::InCi(Some("INCIDENTMIND_REQUIRE_BROWSER")),
        );
        return None;
    };
    let artifacts = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/artifacts");
    std::fs::create_dir_all(&artifacts).expect("artifacts dir");
    let axe = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vendor/axe-core/axe.min.js"),
    )
    .expect("tests/vendor/axe-core/axe.min.js");
    Some(Tools {
        driver,
        chromium,
        artifacts,
        axe,
    })
}

/// A browser session: the WebDriver client, with chromedriver and the profile it runs on (both
/// gone when this is dropped).
pub(crate) struct Session {
    /// The WebDriver client.
    pub client: Client,
    _driver: Driver,
    _profile: tempfile::TempDir,
}

impl Tools {
    /// The checks at screen size `vp`.
    pub(crate) fn checks(&self, vp: Viewport) -> Checks {
        Checks {
            dir: self.artifacts.clone(),
            vp,
            axe: self.axe.clone(),
        }
    }

    /// Starts chromedriver and a headless Chromium at screen size `vp` (a phone is emulated
    /// with Chromium's device metrics: a real 390 px viewport).
    pub(crate) async fn session(&self, vp: Viewport) -> Session {
        let (driver, chromium) = (&self.driver, &self.chromium);
        let port = free_port();
        let _driver = Driver(
            std::process::Command::new(driver)
                .arg(format!("--port={port}"))
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("chromedriver"),
        );
        let profile = tempfile::tempdir().expect("profile");
        let mut options = serde_json::json!({
            "binary": chromium,
            "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                     "--disable-background-networking", "--disable-component-update", "--disable-sync",
                     "--disable-dev-shm-usage", "--hide-scrollbars",
                     format!("--window-size={},{}", vp.width, vp.height),
                     format!("--user-data-dir={}", profile.path().display())]
        });
        if vp.mobile {
            options["mobileEmulation"] = serde_json::json!({
                "deviceMetrics": {"width": vp.width, "height": vp.height, "pixelRatio": 1.0, "touch": true},
                "userAgent": "Mozilla/5.0 (Linux; Android 14) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120 Mobile Safari/537.36"
            });
        }
        let mut caps = serde_json::Map::new();
        caps.insert("goog:chromeOptions".into(), options);
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
        Session {
            client: c,
            _driver,
            _profile: profile,
        }
    }
}
