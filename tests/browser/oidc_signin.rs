//! Signing in through the company's identity in a real browser (issue #54): the real
//! `oidc-provider` (`tests/support/oidc.rs`) with a reviewer (vera, `sre-reviewers`), a responder
//! (ravi, `sre-oncall`) and someone in no mapped group (olga). At desktop (1366 px) and phone
//! (390 px) width: the sign-in page with its "Sign in with…" button and a refused sign-in
//! saying why pass the page checks (no sideways scroll, axe-core) and are saved as screenshots
//! (`target/artifacts/{desktop,phone}-signin-oidc.png`, `…-signin-refused.png`). At desktop
//! width, a post-mortem draft can be confirmed by vera and not by ravi, each signed in through
//! the provider's login and consent forms.

use std::time::Duration;

use fantoccini::{Client, Locator};
use incidentmind::domain::identity::RoleMapping;
use incidentmind::identity::{NameClaim, OidcConfig};
use incidentmind::services::identity::IdentitySettings;
use incidentmind::{App, Settings, services::users::add_user};
use serde_json::json;

use crate::oidc_provider::{CLIENT_ID, CLIENT_SECRET, Provider};
use crate::ui::{DESKTOP, PHONE, settle};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn people_sign_in_through_the_provider_and_only_the_reviewer_confirms() {
    let Some(tools) = crate::ui::tools("the OIDC browser test") else {
        return;
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let Some(provider) = Provider::start("the OIDC browser test", &base) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config =
        incidentmind::app::Config::new(dir.path().join("oidc.db").to_str().expect("utf-8"));
    config.settings = Settings {
        identity: IdentitySettings {
            oidc: Some(OidcConfig {
                issuer_url: provider.issuer.clone(),
                client_id: CLIENT_ID.into(),
                client_secret: CLIENT_SECRET.into(),
                redirect_url: format!("{base}/signin/oidc/callback"),
                scopes: vec!["profile".into(), "email".into(), "groups".into()],
                name_claim: NameClaim::PreferredUsername,
                groups_claim: "groups".into(),
                timeout: Duration::from_secs(5),
                label: "Example SSO".into(),
            }),
            roles: RoleMapping::parse("sre-reviewers=reviewer,sre-oncall=responder", "")
                .expect("mapping"),
            password_signin: false,
            ..Default::default()
        },
        ..Settings::default()
    };
    let app = App::build(config).await.expect("app");
    let token = add_user(app.pool(), "bot", "responder", None)
        .await
        .expect("bot");
    let router = app
        .router
        .clone()
        .into_make_service_with_connect_info::<std::net::SocketAddr>();
    tokio::spawn(async move {
        axum::serve(listener, router).await.expect("serve");
    });
    let incident = drafted_incident(&base, &token).await;

    for vp in [DESKTOP, PHONE] {
        let checks = tools.checks(vp);
        let session = tools.session(vp).await;
        let c = &session.client;
        c.goto(&format!("{base}/signin"))
            .await
            .expect("signin page");
        let button = c
            .find(Locator::Css("#signin-oidc"))
            .await
            .expect("the Sign in with button")
            .text()
            .await
            .expect("text");
        assert_eq!(button, "Sign in with Example SSO");
        assert!(
            c.find(Locator::Css("input[name=password]")).await.is_err(),
            "no password form when password sign-in is off"
        );
        checks.page(c, "signin-oidc").await;

        through_provider(c, &base, "olga").await;
        let error = c
            .find(Locator::Css("#signin-error"))
            .await
            .expect("the refusal")
            .text()
            .await
            .expect("text");
        assert!(
            error.contains("in none of the groups") && error.contains("marketing"),
            "{error}"
        );
        checks.page(c, "signin-refused").await;
        drop(session);

        if vp.mobile {
            continue;
        }
        // The responder sees the draft but cannot confirm it (each person in their own browser).
        let session = tools.session(vp).await;
        let c = &session.client;
        through_provider(c, &base, "ravi").await;
        c.goto(&format!("{base}/incidents/{incident}/postmortem"))
            .await
            .expect("post-mortem");
        assert!(
            c.find(Locator::Css("#confirm")).await.is_err(),
            "a responder has no Confirm button"
        );
        let page = c.source().await.expect("source");
        assert!(
            page.contains("ravi") && page.contains("responder"),
            "signed in as ravi"
        );

        // The reviewer confirms it.
        let session = tools.session(vp).await;
        let c = &session.client;
        through_provider(c, &base, "vera").await;
        c.goto(&format!("{base}/incidents/{incident}/postmortem"))
            .await
            .expect("post-mortem");
        c.find(Locator::Css("#confirm"))
            .await
            .expect("a reviewer has the Confirm button")
            .click()
            .await
            .expect("confirm");
        settle(c).await;
        let state: serde_json::Value = reqwest::Client::new()
            .get(format!("{base}/api/v1/incidents/{incident}"))
            .bearer_auth(&token)
            .send()
            .await
            .expect("incident")
            .json()
            .await
            .expect("json");
        assert_eq!(state["state"], "confirmed", "{state}");
    }
}

/// Clicks "Sign in with…" and goes through the provider's login and consent forms as `user`.
async fn through_provider(c: &Client, base: &str, user: &str) {
    c.goto(&format!("{base}/signin"))
        .await
        .expect("signin page");
    c.find(Locator::Css("#signin-oidc"))
        .await
        .expect("button")
        .click()
        .await
        .expect("click");
    settle(c).await;
    let Ok(login) = c.find(Locator::Css("input[name=login]")).await else {
        let url = c.current_url().await.expect("url");
        let page = c.source().await.unwrap_or_default();
        panic!(
            "no login form for {user} at {url}: {}",
            &page[..page.len().min(1500)]
        );
    };
    login.send_keys(user).await.expect("login");
    c.find(Locator::Css("input[name=password]"))
        .await
        .expect("password")
        .send_keys("any password")
        .await
        .expect("password");
    c.find(Locator::Css("button[type=submit]"))
        .await
        .expect("submit")
        .click()
        .await
        .expect("submit");
    settle(c).await;
    // The consent form (first time this user meets the client).
    if let Ok(b) = c.find(Locator::Css("button[type=submit]")).await
        && c.current_url()
            .await
            .expect("url")
            .as_str()
            .contains("/interaction/")
    {
        b.click().await.expect("consent");
        settle(c).await;
    }
}

/// An incident whose post-mortem draft is ready to confirm (resolved, drafted, a trigger
/// written), made through the API as `token`'s user.
async fn drafted_incident(base: &str, token: &str) -> String {
    let http = reqwest::Client::new();
    let post = |path: String, body: serde_json::Value| {
        http.post(format!("{base}{path}"))
            .bearer_auth(token)
            .json(&body)
            .send()
    };
    let res = post(
        "/api/v1/incidents".into(),
        json!({"title": "Checkout answers slowly", "service": "checkout", "severity": "SEV2",
               "description": "customers wait for the payment step"}),
    )
    .await
    .expect("open");
    let id = res.json::<serde_json::Value>().await.expect("json")["id"]
        .as_str()
        .expect("id")
        .to_string();
    let res = post(
        format!("/api/v1/incidents/{id}/resolve"),
        json!({"summary": "rolled back", "root_cause": "a pool size cut in a config push"}),
    )
    .await
    .expect("resolve");
    assert!(res.status().is_success(), "resolve {}", res.status());
    let res = post(format!("/api/v1/incidents/{id}/postmortem"), json!({}))
        .await
        .expect("draft");
    assert!(res.status().is_success(), "draft {}", res.status());
    let path = format!("{base}/api/v1/incidents/{id}/postmortem");
    let stored: serde_json::Value = http
        .get(&path)
        .bearer_auth(token)
        .send()
        .await
        .expect("get")
        .json()
        .await
        .expect("json");
    let mut pm = stored["postmortem"].clone();
    pm["trigger"] = json!("A configuration push that cut the pool size on every node");
    let res = http
        .put(&path)
        .bearer_auth(token)
        .json(&pm)
        .send()
        .await
        .expect("put");
    assert!(res.status().is_success(), "trigger {}", res.status());
    id
}
