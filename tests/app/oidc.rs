//! OpenID Connect sign-in against the real `oidc-provider` (issue #54): the code flow walked
//! over HTTP as a browser does, roles from the groups claim, re-read at each sign-in, the
//! refused sign-in, sign-out at the provider, and every failure case (wrong state, a replayed
//! code, an ID token for another audience or issuer, an expired one, one signed with an unknown
//! key, a rotated key, a provider down or slow): a page that says what failed, no session, only
//! the audit entry written.

use std::time::{Duration, Instant};

use incidentmind::Settings;
use incidentmind::domain::identity::RoleMapping;
use incidentmind::identity::{NameClaim, OidcConfig};
use incidentmind::services::identity::IdentitySettings;
use reqwest::StatusCode;

use crate::helpers::{TestApp, spawn_app_on};
use crate::oidc_provider::{CLIENT_ID, CLIENT_SECRET, Provider, browser_client, walk_to_callback};

/// The settings of an app signing in through `issuer` with the test mapping.
fn settings(issuer: &str, app_base: &str, timeout: Duration) -> Settings {
    Settings {
        identity: IdentitySettings {
            oidc: Some(OidcConfig {
                issuer_url: issuer.to_string(),
                client_id: CLIENT_ID.into(),
                client_secret: CLIENT_SECRET.into(),
                redirect_url: format!("{app_base}/signin/oidc/callback"),
                scopes: vec!["profile".into(), "email".into(), "groups".into()],
                name_claim: NameClaim::PreferredUsername,
                groups_claim: "groups".into(),
                timeout,
                label: "the test provider".into(),
            }),
            roles: RoleMapping::parse("sre-reviewers=reviewer,sre-oncall=responder", "")
                .expect("mapping"),
            ..Default::default()
        },
        ..Settings::default()
    }
}

/// An app and a provider that know each other (the app's port is bound first).
async fn app_and_provider(test: &str) -> Option<(TestApp, Provider)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let provider = Provider::start(test, &base)?;
    let app = spawn_app_on(
        listener,
        settings(&provider.issuer, &base, Duration::from_secs(5)),
    )
    .await;
    Some((app, provider))
}

/// The signed-in user of `client` (`/api/v1/me`), or the status when none.
async fn me(app: &TestApp, client: &reqwest::Client) -> Result<(String, String), StatusCode> {
    let res = client.get(app.url("/api/v1/me")).send().await.expect("me");
    if res.status() != StatusCode::OK {
        return Err(res.status());
    }
    let v: serde_json::Value = res.json().await.expect("me JSON");
    Ok((
        v["name"].as_str().unwrap_or_default().to_string(),
        v["role"].as_str().unwrap_or_default().to_string(),
    ))
}

/// Signs `user` in through the provider; the app's answer to the callback.
async fn sign_in(app: &TestApp, client: &reqwest::Client, user: &str) -> reqwest::Response {
    let callback = walk_to_callback(client, &app.base, user)
        .await
        .unwrap_or_else(|(s, body)| panic!("the flow stopped at {s}: {body}"));
    client.get(callback).send().await.expect("callback")
}

async fn audit(app: &TestApp, action: &str) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT actor || ' | ' || subject || ' | ' || detail FROM audit_log WHERE action = $1 ORDER BY seq",
    )
    .bind(action)
    .fetch_all(&app.pool)
    .await
    .expect("audit")
}

async fn users(app: &TestApp) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM users")
        .fetch_one(&app.pool)
        .await
        .expect("count")
}

#[tokio::test]
async fn a_reviewer_and_a_responder_sign_in_through_the_real_provider_with_roles_from_their_groups()
{
    let Some((app, provider)) = app_and_provider("oidc sign-in").await else {
        return;
    };
    let vera = browser_client();
    let started = Instant::now();
    let res = sign_in(&app, &vera, "vera").await;
    let first = started.elapsed();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    assert_eq!(res.headers()["location"], "/incidents");
    assert_eq!(
        me(&app, &vera).await,
        Ok(("vera".into(), "reviewer".into()))
    );

    let ravi = browser_client();
    let started = Instant::now();
    let res = sign_in(&app, &ravi, "ravi").await;
    let warm = started.elapsed();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        me(&app, &ravi).await,
        Ok(("ravi".into(), "responder".into()))
    );
    eprintln!(
        "OIDC sign-in round trip through the real provider (login and consent forms included): \
         first {} ms (discovery and keys fetched), next {} ms",
        first.as_millis(),
        warm.as_millis()
    );
    assert!(warm <= Duration::from_secs(1), "round trip {warm:?} > 1 s");

    // The session carries the result: ordinary page views ask the provider nothing.
    let before = provider.requests().await;
    for path in ["/incidents", "/profile", "/incidents/new"] {
        let res = vera.get(app.url(path)).send().await.expect("page");
        assert_eq!(res.status(), StatusCode::OK, "{path}");
    }
    assert_eq!(
        provider.requests().await,
        before,
        "no provider request on page views"
    );

    let created = audit(&app, "user.create").await;
    assert!(
        created
            .iter()
            .any(|e| e.starts_with("vera | vera | first sign-in through oidc: reviewer")),
        "{created:?}"
    );
    let signins = audit(&app, "user.sign_in").await;
    assert!(
        signins.iter().any(|e| e.contains("oidc as responder")),
        "{signins:?}"
    );

    // Someone in no mapped group is refused, with a page that says why, and no session.
    let olga = browser_client();
    let count = users(&app).await;
    let res = sign_in(&app, &olga, "olga").await;
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    let page = res.text().await.expect("page");
    assert!(
        page.contains("in none of the groups that give access")
            && page.contains("sre-reviewers, sre-oncall")
            && page.contains("marketing"),
        "{page}"
    );
    assert_eq!(me(&app, &olga).await, Err(StatusCode::UNAUTHORIZED));
    assert_eq!(users(&app).await, count, "no user made");
    let refused = audit(&app, "user.sign_in_refused").await;
    assert!(
        refused
            .iter()
            .any(|e| e.starts_with("olga | oidc | your account (olga)")),
        "{refused:?}"
    );

    // Sign-out ends our session and sends the browser to end the provider's.
    let res = vera
        .post(app.url("/signout"))
        .header("origin", &app.base)
        .send()
        .await
        .expect("signout");
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    let location = res.headers()["location"]
        .to_str()
        .expect("location")
        .to_string();
    assert!(
        location.starts_with(&format!("{}/session/end?", provider.issuer))
            && location.contains("id_token_hint=")
            && location.contains("post_logout_redirect_uri="),
        "{location}"
    );
    let csp = res.headers()["content-security-policy"]
        .to_str()
        .expect("csp");
    assert!(
        csp.contains(&format!("form-action 'self' {}", provider.issuer)),
        "{csp}"
    );
    assert_eq!(me(&app, &vera).await, Err(StatusCode::UNAUTHORIZED));
}

#[tokio::test]
async fn the_role_is_read_again_at_every_sign_in_and_a_demotion_ends_the_other_sessions() {
    let Some((app, provider)) = app_and_provider("oidc role re-read").await else {
        return;
    };
    let desk = browser_client();
    sign_in(&app, &desk, "vera").await;
    assert_eq!(
        me(&app, &desk).await,
        Ok(("vera".into(), "reviewer".into()))
    );
    provider.set_groups("vera", "sre-oncall").await;
    let phone = browser_client();
    sign_in(&app, &phone, "vera").await;
    assert_eq!(
        me(&app, &phone).await,
        Ok(("vera".into(), "responder".into()))
    );
    assert_eq!(
        me(&app, &desk).await,
        Err(StatusCode::UNAUTHORIZED),
        "the session made as a reviewer ended"
    );
    let changes = audit(&app, "user.role_from_claims").await;
    assert_eq!(
        changes,
        ["vera | vera | reviewer → responder (groups: sre-oncall)"]
    );
    // Removed from every group: refused at the next sign-in.
    provider.set_groups("vera", "").await;
    let res = sign_in(&app, &browser_client(), "vera").await;
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
}

/// Asserts a failed sign-in: `status`, the page saying `words`, no session, no user made, and
/// one more `user.sign_in_refused` audit entry.
async fn assert_failed(
    app: &TestApp,
    client: &reqwest::Client,
    res: reqwest::Response,
    status: StatusCode,
    words: &str,
    refused_before: usize,
) {
    assert_eq!(res.status(), status);
    let page = res.text().await.expect("page");
    assert!(
        page.contains("Sign-in failed") && page.contains(words),
        "{words}: {page}"
    );
    assert_eq!(
        me(app, client).await,
        Err(StatusCode::UNAUTHORIZED),
        "{words}"
    );
    assert!(users(app).await <= 4, "{words}: no user made beyond vera");
    assert_eq!(
        audit(app, "user.sign_in_refused").await.len(),
        refused_before + 1,
        "{words}"
    );
    eprintln!("failure case -> {status}: {words}");
}

#[tokio::test]
async fn every_bad_answer_gives_a_page_in_words_and_no_session() {
    let Some((app, provider)) = app_and_provider("oidc failures").await else {
        return;
    };
    let mut refused = 0;

    // A wrong state.
    let c = browser_client();
    let callback = walk_to_callback(&c, &app.base, "vera").await.expect("flow");
    let forged = regex_replace_state(&callback, "forged-state");
    let res = c.get(forged).send().await.expect("callback");
    assert_failed(
        &app,
        &c,
        res,
        StatusCode::BAD_REQUEST,
        "the state does not match",
        refused,
    )
    .await;
    refused += 1;

    // A replayed code: used once by one browser, then sent again in another's sign-in.
    let first = browser_client();
    let used = walk_to_callback(&first, &app.base, "vera")
        .await
        .expect("flow");
    assert_eq!(
        first.get(&used).send().await.expect("callback").status(),
        StatusCode::SEE_OTHER
    );
    let second = browser_client();
    let fresh = walk_to_callback(&second, &app.base, "vera")
        .await
        .expect("flow");
    let replay = with_code_of(&fresh, &used);
    let res = second.get(replay).send().await.expect("callback");
    assert_failed(
        &app,
        &second,
        res,
        StatusCode::BAD_REQUEST,
        "refused the sign-in code",
        refused,
    )
    .await;
    refused += 1;

    // ID tokens the provider's own key signs after a change.
    for (mode, status, words) in [
        (
            "wrong_audience",
            StatusCode::UNAUTHORIZED,
            "issued for another application",
        ),
        (
            "wrong_issuer",
            StatusCode::UNAUTHORIZED,
            "issued by another provider",
        ),
        ("expired", StatusCode::UNAUTHORIZED, "it has expired"),
        (
            "unknown_kid",
            StatusCode::UNAUTHORIZED,
            "a key the provider does not publish",
        ),
    ] {
        provider.tamper(mode).await;
        let c = browser_client();
        let callback = walk_to_callback(&c, &app.base, "vera").await.expect("flow");
        let res = c.get(callback).send().await.expect("callback");
        assert_failed(&app, &c, res, status, words, refused).await;
        refused += 1;
    }

    // A rotated key is fetched again and the sign-in goes through.
    provider.tamper("rotate").await;
    let c = browser_client();
    let res = sign_in(&app, &c, "vera").await;
    assert_eq!(res.status(), StatusCode::SEE_OTHER, "rotated key");
    assert_eq!(me(&app, &c).await, Ok(("vera".into(), "reviewer".into())));
    provider.tamper("none").await;

    // A callback nobody started, and the person declining at the provider.
    let c = browser_client();
    let res = c
        .get(app.url("/signin/oidc/callback?code=x&state=y"))
        .send()
        .await
        .expect("callback");
    assert_failed(
        &app,
        &c,
        res,
        StatusCode::BAD_REQUEST,
        "no sign-in was started",
        refused,
    )
    .await;
}

/// `url` with its `state` query parameter set to `state`.
fn regex_replace_state(url: &str, state: &str) -> String {
    let mut u = reqwest::Url::parse(url).expect("url");
    let pairs: Vec<(String, String)> = u
        .query_pairs()
        .map(|(k, v)| {
            let v = if k == "state" {
                state.to_string()
            } else {
                v.into_owned()
            };
            (k.into_owned(), v)
        })
        .collect();
    u.query_pairs_mut().clear().extend_pairs(pairs);
    u.to_string()
}

/// `url` with the `code` of `other`.
fn with_code_of(url: &str, other: &str) -> String {
    let code = reqwest::Url::parse(other)
        .expect("url")
        .query_pairs()
        .find(|(k, _)| k == "code")
        .map(|(_, v)| v.into_owned())
        .expect("code");
    let mut u = reqwest::Url::parse(url).expect("url");
    let pairs: Vec<(String, String)> = u
        .query_pairs()
        .map(|(k, v)| {
            let v = if k == "code" {
                code.clone()
            } else {
                v.into_owned()
            };
            (k.into_owned(), v)
        })
        .collect();
    u.query_pairs_mut().clear().extend_pairs(pairs);
    u.to_string()
}

#[tokio::test]
async fn a_provider_that_is_down_or_slow_gives_a_page_in_words() {
    // Down: an address nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let dead = format!("http://{}", closed.local_addr().expect("addr"));
    drop(closed);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let app = spawn_app_on(listener, settings(&dead, &base, Duration::from_secs(2))).await;
    let c = browser_client();
    let res = c.get(app.url("/signin/oidc")).send().await.expect("start");
    assert_failed(
        &app,
        &c,
        res,
        StatusCode::BAD_GATEWAY,
        "could not be reached",
        0,
    )
    .await;

    // Slow: answers after the app's timeout.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let Some(provider) = Provider::start("oidc slow provider", &base) else {
        return;
    };
    provider.slow(3000).await;
    let app = spawn_app_on(
        listener,
        settings(&provider.issuer, &base, Duration::from_secs(1)),
    )
    .await;
    let c = browser_client();
    let started = Instant::now();
    let res = c.get(app.url("/signin/oidc")).send().await.expect("start");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "gave up at the timeout"
    );
    assert_failed(
        &app,
        &c,
        res,
        StatusCode::GATEWAY_TIMEOUT,
        "did not answer within 1 s",
        0,
    )
    .await;
}
