//! Accounts that can be closed (issue #54): named API tokens with an expiry and a last use,
//! revoked from the profile or the admin page (and then refused at once, MCP included); a
//! password change and a disable ending sessions; the authenticating proxy honoured only from a
//! trusted address.

use incidentmind::Settings;
use incidentmind::domain::identity::RoleMapping;
use incidentmind::services::identity::{IdentitySettings, ProxySettings};
use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{PASSWORD, TestApp, spawn_app, spawn_app_with};

/// The token shown once on the profile page after making one named `name`.
async fn make_token(app: &TestApp, b: &reqwest::Client, name: &str, days: &str) -> String {
    let res = b
        .post(app.url("/profile/tokens"))
        .header("origin", &app.base)
        .form(&[("name", name), ("expires_in_days", days)])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let page = res.text().await.unwrap();
    let start = page.find("<code>im_").expect("the new token on the page") + 6;
    page[start..start + 67].to_string()
}

async fn me_status(app: &TestApp, token: &str) -> StatusCode {
    app.get(token, "/api/v1/me").await.status()
}

async fn mcp_status(app: &TestApp, token: &str) -> StatusCode {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "probe", "version": "1"}}});
    app.client
        .post(app.url("/mcp"))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .json(&init)
        .send()
        .await
        .unwrap()
        .status()
}

#[tokio::test]
async fn a_named_token_works_shows_its_last_use_and_stops_at_once_when_revoked_mcp_included() {
    let app = spawn_app().await;
    let rita = app.browser("rita").await;
    let token = make_token(&app, &rita, "laptop agent", "30").await;
    assert_eq!(me_status(&app, &token).await, StatusCode::OK);
    assert_eq!(mcp_status(&app, &token).await, StatusCode::OK);
    // Its last use is recorded (written beside the request).
    let mut last_used: Option<String> = None;
    for _ in 0..50 {
        last_used =
            sqlx::query_scalar("SELECT last_used_at FROM api_tokens WHERE name = 'laptop agent'")
                .fetch_one(&app.pool)
                .await
                .unwrap();
        if last_used.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(last_used.is_some(), "last use recorded");
    let expires: Option<String> =
        sqlx::query_scalar("SELECT expires_at FROM api_tokens WHERE name = 'laptop agent'")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    let days = (expires.unwrap().parse::<jiff::Timestamp>().unwrap() - jiff::Timestamp::now())
        .as_secs_f64()
        / 86_400.0;
    assert!((29.9..=30.0).contains(&days), "expires in 30 days: {days}");
    let profile = app.page(&rita, "/profile").await;
    assert!(
        profile.contains("laptop agent") && !profile.contains(&token),
        "the token is shown once"
    );

    // Another user cannot revoke it; its owner can.
    let id: i64 = sqlx::query_scalar("SELECT id FROM api_tokens WHERE name = 'laptop agent'")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    let victor = app.browser("victor").await;
    let res = victor
        .post(app.url(&format!("/profile/tokens/{id}/revoke")))
        .header("origin", &app.base)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    assert_eq!(me_status(&app, &token).await, StatusCode::OK);
    let res = rita
        .post(app.url(&format!("/profile/tokens/{id}/revoke")))
        .header("origin", &app.base)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    assert_eq!(me_status(&app, &token).await, StatusCode::UNAUTHORIZED);
    assert_eq!(mcp_status(&app, &token).await, StatusCode::UNAUTHORIZED);
    let audit: Vec<String> = sqlx::query_scalar(
        "SELECT action || ' ' || actor || ' ' || subject FROM audit_log WHERE action LIKE 'token.%' ORDER BY seq",
    )
    .fetch_all(&app.pool)
    .await
    .unwrap();
    assert!(
        audit.contains(&"token.create rita rita".to_string()),
        "{audit:?}"
    );
    assert!(
        audit.contains(&"token.revoke rita rita".to_string()),
        "{audit:?}"
    );
}

#[tokio::test]
async fn an_expired_token_is_refused_and_a_bad_lifetime_is_a_422_in_words() {
    let app = spawn_app().await;
    let rita = app.browser("rita").await;
    let token = make_token(&app, &rita, "short", "1").await;
    assert_eq!(me_status(&app, &token).await, StatusCode::OK);
    sqlx::query(
        "UPDATE api_tokens SET expires_at = '2020-01-01T00:00:00.000000Z' WHERE name = 'short'",
    )
    .execute(&app.pool)
    .await
    .unwrap();
    // A check of the token answers for `CHECK_FRESH` (issue #56): an expiry is honoured within
    // that long of it, here written straight into the database.
    let expired = std::time::Instant::now();
    while me_status(&app, &token).await == StatusCode::OK {
        assert!(
            expired.elapsed()
                < incidentmind::web::auth::CHECK_FRESH + std::time::Duration::from_millis(500),
            "an expired token still accepted"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(me_status(&app, &token).await, StatusCode::UNAUTHORIZED);
    assert_eq!(mcp_status(&app, &token).await, StatusCode::UNAUTHORIZED);
    let res = rita
        .post(app.url("/profile/tokens"))
        .header("origin", &app.base)
        .form(&[("name", "x"), ("expires_in_days", "soon")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        res.text()
            .await
            .unwrap()
            .contains("is not a number of days")
    );
}

#[tokio::test]
async fn a_password_change_ends_the_other_sessions_and_keeps_this_one() {
    let app = spawn_app().await;
    let desk = app.browser("rita").await;
    let phone = app.browser("rita").await;
    let res = desk
        .post(app.url("/profile/password"))
        .header("origin", &app.base)
        .form(&[
            ("current_password", "not it"),
            ("new_password", "a new long secret"),
            ("repeat_password", "a new long secret"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        res.text()
            .await
            .unwrap()
            .contains("is not your current password")
    );
    let res = desk
        .post(app.url("/profile/password"))
        .header("origin", &app.base)
        .form(&[
            ("current_password", PASSWORD),
            ("new_password", "a new long secret"),
            ("repeat_password", "a new long secret"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(
        desk.get(app.url("/profile")).send().await.unwrap().status(),
        StatusCode::OK
    );
    let res = phone.get(app.url("/api/v1/me")).send().await.unwrap();
    assert_eq!(
        res.status(),
        StatusCode::UNAUTHORIZED,
        "the other session ended"
    );
    assert_eq!(
        me_status(&app, &app.responder).await,
        StatusCode::OK,
        "tokens keep working"
    );
}

#[tokio::test]
async fn a_disabled_user_loses_sessions_and_tokens_at_once_and_comes_back_when_enabled() {
    let app = spawn_app().await;
    let rita = app.browser("rita").await;
    let ada = app.browser("ada").await;
    let disable = |who: &'static str, c: &reqwest::Client, what: &'static str| {
        c.post(app.url(&format!("/admin/users/{who}/{what}")))
            .header("origin", &app.base)
            .send()
    };
    // A responder may not; an admin may not disable themself.
    assert_eq!(
        disable("victor", &rita, "disable").await.unwrap().status(),
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        disable("ada", &ada, "disable").await.unwrap().status(),
        StatusCode::CONFLICT
    );
    assert_eq!(
        disable("rita", &ada, "disable").await.unwrap().status(),
        StatusCode::SEE_OTHER
    );
    assert_eq!(
        rita.get(app.url("/api/v1/me"))
            .send()
            .await
            .unwrap()
            .status(),
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        me_status(&app, &app.responder).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        mcp_status(&app, &app.responder).await,
        StatusCode::UNAUTHORIZED
    );
    let page = app.page(&ada, "/admin/users").await;
    assert!(
        page.contains("Enable rita"),
        "the admin page offers to enable her"
    );
    // She cannot sign in again until enabled.
    let res = app
        .client
        .post(app.url("/signin"))
        .header("origin", &app.base)
        .form(&[
            ("name", "rita"),
            ("password", PASSWORD),
            ("next", "/incidents"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        disable("rita", &ada, "enable").await.unwrap().status(),
        StatusCode::SEE_OTHER
    );
    assert_eq!(me_status(&app, &app.responder).await, StatusCode::OK);
    let audit: Vec<String> = sqlx::query_scalar(
        "SELECT action FROM audit_log WHERE action LIKE 'user.%able' ORDER BY seq",
    )
    .fetch_all(&app.pool)
    .await
    .unwrap();
    assert_eq!(audit, ["user.disable", "user.enable"]);
}

#[tokio::test]
async fn an_admin_revokes_anyones_token_from_the_users_page() {
    let app = spawn_app().await;
    let ada = app.browser("ada").await;
    let page = app.page(&ada, "/admin/users").await;
    assert!(page.contains("first token"), "{page}");
    let id: i64 = sqlx::query_scalar(
        "SELECT t.id FROM api_tokens t JOIN users u ON u.id = t.user_id WHERE u.name = 'victor'",
    )
    .fetch_one(&app.pool)
    .await
    .unwrap();
    let res = ada
        .post(app.url(&format!("/admin/tokens/{id}/revoke")))
        .header("origin", &app.base)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        me_status(&app, &app.reviewer).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(me_status(&app, &app.responder).await, StatusCode::OK);
}

fn proxy_settings(trusted: &str) -> Settings {
    let mut s = Settings::default();
    s.rate_limits.trusted_proxies = vec![trusted.parse().unwrap()];
    s.identity = IdentitySettings {
        proxy: Some(ProxySettings {
            user_header: "x-forwarded-email".parse().unwrap(),
            groups_header: Some("x-forwarded-groups".parse().unwrap()),
        }),
        roles: RoleMapping::parse("sre-reviewers=reviewer,sre-oncall=responder", "").unwrap(),
        ..Default::default()
    };
    s
}

#[tokio::test]
async fn the_proxy_headers_count_from_a_trusted_address_and_are_ignored_from_another() {
    // The test's requests come from 127.0.0.1: trusted here.
    let app = spawn_app_with(proxy_settings("127.0.0.1")).await;
    let c = crate::oidc_provider::browser_client();
    let res = c
        .get(app.url("/api/v1/me"))
        .header("x-forwarded-email", "pia@example.test")
        .header("x-forwarded-groups", "staff, sre-reviewers")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let me: serde_json::Value = res.json().await.unwrap();
    assert_eq!(
        (me["name"].as_str(), me["role"].as_str()),
        (Some("pia@example.test"), Some("reviewer"))
    );
    let source: String =
        sqlx::query_scalar("SELECT source FROM users WHERE name = 'pia@example.test'")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(source, "proxy");
    // Unmapped groups: refused with the reason.
    let res = c
        .get(app.url("/incidents"))
        .header("x-forwarded-email", "max@example.test")
        .header("x-forwarded-groups", "marketing")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    assert!(res.text().await.unwrap().contains("in none of the groups"));

    // From an address that is not a trusted proxy the same headers are ignored.
    let app = spawn_app_with(proxy_settings("10.9.9.9")).await;
    let res = crate::oidc_provider::browser_client()
        .get(app.url("/api/v1/me"))
        .header("x-forwarded-email", "pia@example.test")
        .header("x-forwarded-groups", "sre-reviewers")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM users WHERE name = 'pia@example.test'")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(n, 0, "nobody made from an untrusted header");
}

/// A token revoked elsewhere (another instance, the CLI: here, straight in the database) is
/// refused within `CHECK_FRESH` of the revocation, though this instance reuses a check of the
/// token for that long (issue #56: no database read on every request).
#[tokio::test]
async fn a_token_revoked_on_another_instance_is_refused_within_a_second() {
    let app = spawn_app().await;
    assert_eq!(me_status(&app, &app.responder).await, StatusCode::OK);
    sqlx::query("UPDATE api_tokens SET revoked_at = $1 WHERE revoked_at IS NULL")
        .bind(incidentmind::store::db_time(incidentmind::store::now()))
        .execute(&app.pool)
        .await
        .unwrap();
    let revoked = std::time::Instant::now();
    let bound = incidentmind::web::auth::CHECK_FRESH + std::time::Duration::from_millis(500);
    loop {
        let status = me_status(&app, &app.responder).await;
        if status == StatusCode::UNAUTHORIZED {
            break;
        }
        assert_eq!(status, StatusCode::OK);
        assert!(
            revoked.elapsed() < bound,
            "still accepted {:?} after the revocation",
            revoked.elapsed()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
