//! The real OpenID provider of the sign-in tests (issue #54): `tests/oidc/provider.mjs` on Node
//! with the npm package `oidc-provider` (`.ci/run` installs it and sets
//! `INCIDENTMIND_OIDC_PROVIDER_MODULES`), on a loopback ephemeral port; and a client that walks
//! the authorization code flow as a browser does: following redirects and posting the
//! provider's login and consent forms. Without Node or the package the test prints SKIPPED, and
//! fails under `CI=true` or `INCIDENTMIND_REQUIRE_OIDC=1`.
//!
//! Included by path (`#[path = "../support/oidc.rs"] mod oidc_provider;`) next to `skip.rs`.

#![allow(dead_code, reason = "each test binary uses the parts it needs")]

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The client id registered at the provider.
pub const CLIENT_ID: &str = "incidentmind-test";
/// Its secret.
pub const CLIENT_SECRET: &str = "a-test-client-secret-of-some-length";

/// The folder holding `oidc-provider` (a `node_modules`), when installed.
pub fn modules() -> Option<std::path::PathBuf> {
    let dir = std::env::var_os("INCIDENTMIND_OIDC_PROVIDER_MODULES")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            let cache = std::env::var_os("XDG_CACHE_HOME")
                .map(std::path::PathBuf::from)
                .or_else(|| {
                    std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".cache"))
                })?;
            Some(cache.join("incidentmind-ci/oidc-provider/node_modules"))
        })?;
    dir.join("oidc-provider/package.json")
        .exists()
        .then_some(dir)
}

/// A running provider; killed on drop.
pub struct Provider {
    /// Its issuer URL (`http://127.0.0.1:PORT`).
    pub issuer: String,
    child: Child,
    control: reqwest::Client,
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Provider {
    /// Starts the provider for a client whose callback is `{app_base}/signin/oidc/callback`;
    /// `None` (after printing SKIPPED) when Node or the package is missing and the run does
    /// not require the test.
    pub fn start(test: &str, app_base: &str) -> Option<Self> {
        let required = crate::skip::Required::InCi(Some("INCIDENTMIND_REQUIRE_OIDC"));
        let Some(modules) = modules() else {
            crate::skip::skip(
                test,
                "the npm package oidc-provider is not installed (.ci/run installs it; or set \
                 INCIDENTMIND_OIDC_PROVIDER_MODULES to a node_modules folder holding it)",
                required,
            );
            return None;
        };
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/oidc/provider.mjs");
        let spawned = Command::new("node")
            .arg(script)
            .env("OIDC_PROVIDER_MODULES", &modules)
            .env("CLIENT_ID", CLIENT_ID)
            .env("CLIENT_SECRET", CLIENT_SECRET)
            .env("REDIRECT_URI", format!("{app_base}/signin/oidc/callback"))
            .env(
                "POST_LOGOUT_REDIRECT_URI",
                format!("{app_base}/signin?signed_out=1"),
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn();
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                crate::skip::skip(test, &format!("node could not be started: {e}"), required);
                return None;
            }
        };
        let stdout = child.stdout.take().expect("piped stdout");
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        reader
            .read_line(&mut line)
            .expect("the provider's first line");
        // The provider prints notices on stdout later: keep reading, or its next write would
        // fail on a closed pipe and end it.
        std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
        let issuer = serde_json::from_str::<serde_json::Value>(&line)
            .ok()
            .and_then(|v| v["issuer"].as_str().map(str::to_string))
            .unwrap_or_else(|| panic!("the provider did not start: {line:?}"));
        Some(Self {
            issuer,
            child,
            control: reqwest::Client::new(),
        })
    }

    /// Re-signs later ID tokens after a change (`expired`, `wrong_audience`, `wrong_issuer`,
    /// `unknown_kid`, `rotate`, `none`): see provider.mjs.
    pub async fn tamper(&self, mode: &str) {
        self.post(&format!("/test/mode?tamper={mode}")).await;
    }

    /// Makes every provider answer wait `ms` first.
    pub async fn slow(&self, ms: u64) {
        self.post(&format!("/test/mode?slow_ms={ms}")).await;
    }

    /// Sets `user`'s groups at the provider.
    pub async fn set_groups(&self, user: &str, groups: &str) {
        self.post(&format!("/test/groups?user={user}&groups={groups}"))
            .await;
    }

    /// Provider requests served so far.
    pub async fn requests(&self) -> u64 {
        let v: serde_json::Value = self
            .control
            .get(format!("{}/test/stats", self.issuer))
            .send()
            .await
            .expect("stats")
            .json()
            .await
            .expect("stats JSON");
        v["requests"].as_u64().expect("requests")
    }

    async fn post(&self, path: &str) {
        let res = self
            .control
            .post(format!("{}{path}", self.issuer))
            .send()
            .await
            .expect("provider control");
        assert!(res.status().is_success(), "{path}: {}", res.status());
    }
}

/// A client with a cookie jar that does not follow redirects (the flow follows them itself).
pub fn browser_client() -> reqwest::Client {
    reqwest::Client::builder()
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client")
}

/// Walks the flow from `{app_base}/signin/oidc` as `user` (any password: the provider's
/// development login) up to the app's callback, and returns the callback URL the provider sent
/// the browser to (not yet requested), or the app's answer when the app stopped the flow first
/// (an `Err` with its status and page).
pub async fn walk_to_callback(
    client: &reqwest::Client,
    app_base: &str,
    user: &str,
) -> Result<String, (reqwest::StatusCode, String)> {
    let callback = format!("{app_base}/signin/oidc/callback");
    let mut url = format!("{app_base}/signin/oidc?next=/incidents");
    let mut form: Option<Vec<(String, String)>> = None;
    for _ in 0..20 {
        let res = match form.take() {
            Some(fields) => client.post(&url).form(&fields).send().await,
            None => client.get(&url).send().await,
        }
        .expect("request in the flow");
        let status = res.status();
        if status.is_redirection() {
            let location = res.headers()["location"]
                .to_str()
                .expect("location")
                .to_string();
            let next = reqwest::Url::parse(&url)
                .expect("url")
                .join(&location)
                .expect("location URL")
                .to_string();
            if next.starts_with(&callback) {
                return Ok(next);
            }
            url = next;
            continue;
        }
        let body = res.text().await.unwrap_or_default();
        if !url.starts_with(app_base) && status.is_success() && body.contains("<form") {
            let (action, fields) = form_of(&body, user);
            url = reqwest::Url::parse(&url)
                .expect("url")
                .join(&action)
                .expect("form action")
                .to_string();
            form = Some(fields);
            continue;
        }
        return Err((status, body));
    }
    panic!("the sign-in flow did not reach the callback in 20 steps");
}

/// The action and fields of the provider's login or consent form, with `login` and
/// `password` filled in.
fn form_of(html: &str, user: &str) -> (String, Vec<(String, String)>) {
    let attr = |tag: &str, name: &str| -> Option<String> {
        let start = tag.find(&format!("{name}=\""))? + name.len() + 2;
        let end = tag[start..].find('"')? + start;
        Some(tag[start..end].replace("&amp;", "&"))
    };
    let form_start = html.find("<form").expect("a form");
    let form_tag = &html[form_start..form_start + html[form_start..].find('>').expect("tag end")];
    let action = attr(form_tag, "action").expect("form action");
    let mut fields = Vec::new();
    for input in html[form_start..].split("<input").skip(1) {
        let tag = &input[..input.find('>').unwrap_or(input.len())];
        let Some(name) = attr(tag, "name") else {
            continue;
        };
        let value = match name.as_str() {
            "login" => user.to_string(),
            "password" => "any password".to_string(),
            _ => attr(tag, "value").unwrap_or_default(),
        };
        fields.push((name, value));
    }
    (action, fields)
}
