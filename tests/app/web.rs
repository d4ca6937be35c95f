//! Pages, sessions, CSRF, security headers, static assets, health checks and the CLI.

use reqwest::StatusCode;

use crate::helpers::{CapturingModel, PASSWORD, TestApp, spawn_app, spawn_app_with_embedder};

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one end-to-end scenario: each step acts on what the steps before it left, so it reads top to bottom"
)]
async fn a_responder_signs_in_opens_an_incident_and_resolves_it_through_the_forms() {
    let app = spawn_app().await;
    // Without a session a page redirects to sign-in, remembering where to come back.
    let res = app
        .client
        .get(app.url("/incidents/new"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    assert_eq!(res.headers()["location"], "/signin?next=%2Fincidents%2Fnew");

    let b = app.browser("rita").await;
    let res = b
        .post(app.url("/incidents"))
        .header("origin", &app.base)
        .form(&[
            ("title", "Checkout <b>slow</b>"),
            ("service", "payments-api"),
            ("severity", "SEV2"),
            ("description", "p99 up"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    let location = res.headers()["location"].to_str().unwrap().to_string();
    assert!(location.starts_with("/incidents/INC-"), "{location}");

    let html = b
        .get(app.url(&location))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        html.contains("Checkout &#60;b&#62;slow&#60;/b&#62;")
            || html.contains("Checkout &lt;b&gt;slow&lt;/b&gt;"),
        "title escaped"
    );
    assert!(!html.contains("<b>slow</b>"));
    assert!(
        html.contains("Resolve the incident first"),
        "later steps say why they are disabled"
    );
    assert!(html.contains("A reviewer must confirm the post-mortem first"));
    assert!(html.contains(r#"action="/incidents/"#));
    assert!(html.contains("+00:00"), "times show their offset");

    // Empty root cause: the page comes back with the input and a 422.
    let res = b
        .post(app.url(&format!("{location}/resolve")))
        .header("origin", &app.base)
        .form(&[("summary", "rolled back v2.3"), ("root_cause", "")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let html = res.text().await.unwrap();
    assert!(html.contains("root_cause: is required"), "{html}");
    assert!(html.contains("rolled back v2.3"), "input kept");

    let res = b
        .post(app.url(&format!("{location}/resolve")))
        .header("origin", &app.base)
        .form(&[
            ("summary", "rolled back v2.3"),
            ("root_cause", "connection leak"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    let html = b
        .get(app.url(&location))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(html.contains(r#"id="state">Resolved<"#), "{html}");
    assert!(html.contains("connection leak"));

    // The responder cannot confirm; the page says so instead of 500.
    let res = b
        .post(app.url(&format!("{location}/postmortem")))
        .header("origin", &app.base)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    let html = b
        .get(app.url(&location))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(html.contains("Needs the reviewer role"));
    let res = b
        .post(app.url(&format!("{location}/postmortem/confirm")))
        .header("origin", &app.base)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);

    // The list shows it, and filters work.
    let html = b
        .get(app.url("/incidents?state=postmortem_draft"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(html.contains(&location[11..]));
    let html = b
        .get(app.url("/incidents?state=learned"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(html.contains("No incidents match"));
}

#[tokio::test]
async fn a_wrong_password_is_refused_and_sign_out_ends_the_session() {
    let app = spawn_app().await;
    let res = app
        .client
        .post(app.url("/signin"))
        .form(&[
            ("name", "rita"),
            ("password", "nope"),
            ("next", "/incidents"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    let html = res.text().await.unwrap();
    assert!(html.contains("Unknown name or wrong password"));
    // The name is kept and the focus is on the password, the field to type again.
    assert!(
        html.contains("name=\"name\" value=\"rita\" autocomplete=\"username\" required>"),
        "{html}"
    );
    assert!(
        html.contains(
            "autocomplete=\"current-password\" required autofocus aria-invalid=\"true\">"
        ),
        "{html}"
    );
    let b = app.browser("rita").await;
    assert_eq!(
        b.get(app.url("/incidents")).send().await.unwrap().status(),
        StatusCode::OK
    );
    let res = b
        .post(app.url("/signout"))
        .header("origin", &app.base)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    let to = res.headers()["location"].to_str().unwrap().to_string();
    assert_eq!(to, "/signin?signed_out=1");
    let html = b
        .get(app.url(&to))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(html.contains("You are signed out."), "{html}");
    assert_eq!(
        b.get(app.url("/incidents")).send().await.unwrap().status(),
        StatusCode::SEE_OTHER
    );
}

#[tokio::test]
async fn signed_in_pages_and_api_answers_are_never_stored_by_the_browser() {
    let app = spawn_app().await;
    let b = app.browser("rita").await;
    let cache = |r: &reqwest::Response| {
        r.headers()
            .get("cache-control")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    // After sign-out, Back must not show a page from the browser's cache.
    for path in ["/incidents", "/review", "/api/v1/me"] {
        let res = b.get(app.url(path)).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{path}");
        assert_eq!(cache(&res), "no-store", "{path}");
    }
    // Static assets keep their own caching.
    let css = b.get(app.url("/static/app.css")).send().await.unwrap();
    assert_eq!(css.status(), StatusCode::OK);
    assert!(cache(&css).starts_with("public"), "{}", cache(&css));
}

#[tokio::test]
async fn sign_in_never_redirects_off_site() {
    let app = spawn_app().await;
    let c = reqwest::Client::builder()
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let res = c
        .post(app.url("/signin"))
        .form(&[
            ("name", "rita"),
            ("password", PASSWORD),
            ("next", "//evil.example/x"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()["location"], "/incidents");
}

#[tokio::test]
async fn cross_site_form_posts_are_refused_by_the_csrf_check() {
    let app = spawn_app().await;
    let b = app.browser("rita").await;
    let res = b
        .post(app.url("/incidents"))
        .header("origin", "https://evil.example")
        .header("sec-fetch-site", "cross-site")
        .form(&[("title", "x"), ("service", "a"), ("severity", "SEV1")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    assert!(res.text().await.unwrap().contains("CSRF"));
    let res = b
        .post(app.url("/incidents"))
        .header("origin", "https://evil.example")
        .form(&[("title", "x"), ("service", "a"), ("severity", "SEV1")])
        .send()
        .await
        .unwrap();
    assert_eq!(
        res.status(),
        StatusCode::FORBIDDEN,
        "a foreign Origin alone is enough to refuse"
    );
    assert_eq!(app.count("incidents").await, 0);
    // Same-origin posts pass.
    let res = b
        .post(app.url("/incidents"))
        .header("origin", &app.base)
        .header("sec-fetch-site", "same-origin")
        .form(&[("title", "x"), ("service", "a"), ("severity", "SEV1")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
}

#[tokio::test]
async fn a_bearer_token_is_accepted_on_pages() {
    let app = spawn_app().await;
    let res = app.get(&app.responder, "/incidents").await;
    assert_eq!(res.status(), StatusCode::OK);
    assert!(res.text().await.unwrap().contains("rita"));
}

#[tokio::test]
async fn responses_carry_security_headers_and_request_ids() {
    let app = spawn_app().await;
    let res = app.client.get(app.url("/signin")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let h = res.headers();
    let csp = h["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("frame-ancestors 'none'"));
    assert!(csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"));
    assert_eq!(h["x-content-type-options"], "nosniff");
    assert!(h.contains_key("x-request-id"));
    let html = res.text().await.unwrap();
    assert!(!html.contains("<script>"), "no inline script");
}

#[tokio::test]
async fn static_assets_have_content_types_and_cache_headers() {
    let app = spawn_app().await;
    let html = app
        .client
        .get(app.url("/signin"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let start = html.find("/static/app.css?v=").expect("css link");
    let href: String = html[start..].chars().take_while(|c| *c != '"').collect();
    let res = app.client.get(app.url(&href)).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.headers()["content-type"], "text/css");
    assert!(
        res.headers()["cache-control"]
            .to_str()
            .unwrap()
            .contains("immutable")
    );
    let etag = res.headers()["etag"].clone();
    let res = app
        .client
        .get(app.url("/static/app.css"))
        .header("if-none-match", etag)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::NOT_MODIFIED);
    let res = app
        .client
        .get(app.url("/static/tz.js"))
        .send()
        .await
        .unwrap();
    assert!(
        res.headers()["content-type"]
            .to_str()
            .unwrap()
            .contains("javascript")
    );
    assert_eq!(res.headers()["cache-control"], "public, max-age=300");
    assert_eq!(
        app.client
            .get(app.url("/static/nope.css"))
            .send()
            .await
            .unwrap()
            .status(),
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn health_and_readiness_answer() {
    let app = spawn_app().await;
    assert_eq!(
        app.client
            .get(app.url("/healthz"))
            .send()
            .await
            .unwrap()
            .status(),
        StatusCode::OK
    );
    let res = app.client.get(app.url("/readyz")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let v: serde_json::Value = res.json().await.unwrap();
    let folder = match incidentmind::store::Backend::of(&app.pool) {
        incidentmind::store::Backend::Sqlite => "sqlite",
        incidentmind::store::Backend::Postgres => "postgres",
    };
    let expected = std::fs::read_dir(format!(
        "{}/migrations/{folder}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
    .filter(|e| {
        let name = e.as_ref().unwrap().file_name();
        let name = name.to_string_lossy();
        name.ends_with(".sql") && !name.ends_with(".down.sql")
    })
    .count();
    assert_eq!(
        v,
        serde_json::json!({
            "status": "ready",
            "checks": {
                "database": {"status": "ok"},
                "migrations": {"status": "ok", "applied": expected, "expected": expected},
                "embeddings": {"status": "disabled"},
            }
        })
    );
    app.pool.close().await;
    let res = app.client.get(app.url("/readyz")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    let v: serde_json::Value = res.json().await.unwrap();
    assert_eq!(v["status"], "not_ready");
    assert_eq!(v["checks"]["database"]["status"], "error");
    assert_eq!(v["checks"]["migrations"]["status"], "error");
}

#[tokio::test]
async fn readiness_names_the_embedding_model_in_use() {
    let model = CapturingModel::start("{}").await;
    let embedder = incidentmind::memory::embeddings::OpenAiEmbedder::new(
        incidentmind::memory::embeddings::EmbeddingConfig {
            base_url: model.base.clone(),
            model: "nomic-embed-text".into(),
            api_key: String::new(),
            timeout: std::time::Duration::from_secs(5),
        },
    )
    .unwrap();
    let app = spawn_app_with_embedder(std::sync::Arc::new(embedder)).await;
    let res = app.client.get(app.url("/readyz")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let v: serde_json::Value = res.json().await.unwrap();
    assert_eq!(v["status"], "ready");
    assert_eq!(
        v["checks"]["embeddings"],
        serde_json::json!({"status": "endpoint", "model": "nomic-embed-text"})
    );
}

/// The incident page `id` as the responder's token sees it from a browser that reports
/// Asia/Kolkata (the `tz` cookie).
async fn kolkata_page(app: &TestApp, id: &str) -> String {
    app.client
        .get(app.url(&format!("/incidents/{id}")))
        .bearer_auth(&app.responder)
        .header("cookie", "tz=Asia%2FKolkata")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

#[tokio::test]
async fn pages_show_times_in_the_viewers_zone_with_the_offset() {
    let app = spawn_app().await;
    let id = app.open_incident("tz", "svc").await;
    let html = kolkata_page(&app, &id).await;
    assert!(html.contains("+05:30"), "browser-reported zone used");
    assert!(html.contains("Asia/Kolkata"));
    // Observation statements are stored with UTC windows and shown in the viewer's zone.
    let lines: Vec<String> = (0..30)
        .map(|n| format!("2026-06-02T09:{n:02}:00Z ERROR cache refill failed for shard {n}"))
        .collect();
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/evidence"),
            serde_json::json!({"kind": "logs", "content": lines.join("\n")}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let html = kolkata_page(&app, &id).await;
    assert!(
        html.contains("30 lines, 2026-06-02 14:30 → 14:59 +05:30, 1 template, 30 errors"),
        "observation window in the viewer's zone: {}",
        html.split("30 lines")
            .nth(1)
            .unwrap_or("")
            .chars()
            .take(80)
            .collect::<String>()
    );
    assert!(
        !html.contains("09:00 → 09:29 UTC"),
        "no UTC window left on the page"
    );
    // A profile setting wins over the browser.
    let b = app.browser("rita").await;
    let res = b
        .post(app.url("/profile"))
        .header("origin", &app.base)
        .form(&[("time_zone", "America/Nowhere")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let res = b
        .post(app.url("/profile"))
        .header("origin", &app.base)
        .form(&[("time_zone", "Pacific/Chatham")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    let html = kolkata_page(&app, &id).await;
    assert!(
        html.contains("+12:45") || html.contains("+13:45"),
        "Chatham offset shown"
    );
}

#[tokio::test]
async fn unknown_routes_are_404_in_the_right_format() {
    let app = spawn_app().await;
    let res = app.get(&app.responder, "/api/v1/nope").await;
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    assert_eq!(
        res.json::<serde_json::Value>().await.unwrap()["error"]["code"],
        "not_found"
    );
    let res = app.get(&app.responder, "/incidents/INC-2020-0001").await;
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    assert!(
        res.text()
            .await
            .unwrap()
            .contains("incident INC-2020-0001 not found")
    );
}

#[test]
fn the_cli_creates_a_user_and_prints_a_token_as_the_last_line() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cli.db");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_incidentmind"))
        .args([
            "user",
            "add",
            "--database-url",
            db.to_str().unwrap(),
            "alice",
            "--role",
            "reviewer",
            "--password-stdin",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"a-long-password\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    let last = stdout.lines().last().unwrap();
    assert!(last.starts_with("im_") && last.len() == 67, "{last}");
    // A second user with the same name is refused with a clear message.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_incidentmind"))
        .args([
            "user",
            "add",
            "--database-url",
            db.to_str().unwrap(),
            "alice",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("already exists"));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_incidentmind"))
        .args(["audit", "verify", "--database-url", db.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
}

#[test]
fn the_demo_command_tells_the_whole_story_and_exits_0() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_incidentmind"))
        .arg("demo")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("14 past incidents learned"), "{stdout}");
    assert!(stdout.contains("recalled prior incident INC-"), "{stdout}");
    assert!(
        stdout.contains(
            "warning on raise_pool_limit: Raise the connection-pool limit tried during INC-"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("demo OK"), "{stdout}");
}

#[tokio::test]
async fn an_admin_loads_the_sample_history_from_the_empty_memory_page() {
    let app = spawn_app().await;
    let html = app.get(&app.admin, "/memories").await.text().await.unwrap();
    assert!(html.contains("Load the sample history"));
    let html = app
        .get(&app.responder, "/memories")
        .await
        .text()
        .await
        .unwrap();
    assert!(
        !html.contains("id=\"load-sample\""),
        "only admins get the button"
    );
    let res = app
        .client
        .post(app.url("/memories/sample"))
        .bearer_auth(&app.responder)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    let res = app
        .client
        .post(app.url("/memories/sample"))
        .bearer_auth(&app.admin)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    // The page it returns to says what was loaded; the sample's proposals are closed, not left
    // in the review queue (issue #49).
    let to = res.headers()["location"].to_str().unwrap().to_string();
    assert_eq!(to, "/memories?loaded=14");
    let html = app.get(&app.admin, &to).await.text().await.unwrap();
    assert!(
        html.contains("Loaded the sample history: 14 past incidents"),
        "{html}"
    );
    assert_eq!(
        app.proposals_to_decide().await,
        Vec::<serde_json::Value>::new()
    );
    let left: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM proposals WHERE status = 'pending'")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(left, 0);
    let learned: serde_json::Value = app
        .get(&app.admin, "/api/v1/incidents?state=learned")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(learned["incidents"].as_array().unwrap().len(), 14);
    let lessons: serde_json::Value = app
        .get(&app.admin, "/api/v1/memories?kind=lesson")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(lessons["memories"].as_array().unwrap().len(), 14);
    assert!(
        lessons["memories"]
            .as_array()
            .unwrap()
            .iter()
            .all(|l| l["rule"]["always"].is_string() && l["incident_id"].is_string())
    );
    // The replay's clock is not the incident's: no detection gap measured between the two.
    let gaps: serde_json::Value = app
        .get(&app.admin, "/api/v1/memories?kind=detection_gap")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(gaps["memories"], serde_json::json!([]), "{gaps}");
    let first = learned["incidents"][0]["id"].as_str().unwrap().to_string();
    let md = app
        .get(
            &app.admin,
            &format!("/api/v1/incidents/{first}/postmortem.md"),
        )
        .await
        .text()
        .await
        .unwrap();
    assert!(!md.contains("after impact began"), "{md}");
    let res = app
        .client
        .post(app.url("/memories/sample"))
        .bearer_auth(&app.admin)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::CONFLICT, "loaded once");
}

#[tokio::test]
async fn the_shipped_history_jsonl_imports_into_an_empty_database() {
    let app = spawn_app().await;
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/history.jsonl"
    ))
    .unwrap();
    let done = incidentmind::services::memory::import(&app.pool, "test", &text, false)
        .await
        .unwrap();
    assert_eq!(done.imported, text.lines().count());
    let res = incidentmind::memory::recall::recall(
        &app.memory,
        &incidentmind::memory::recall::RecallQuery {
            text: "edge servers at 100% cpu after a rule release".into(),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert!(
        res.results
            .iter()
            .take(5)
            .any(|r| r.memory.services.contains(&"edge-waf".to_string())),
        "{:?}",
        res.results
            .iter()
            .map(|r| &r.memory.text)
            .collect::<Vec<_>>()
    );
}

/// Whether `html` holds an instant as raw stored text (`2026-12-01T12:00:00.000000Z`).
fn has_raw_iso_instant(html: &str) -> bool {
    regex::Regex::new(r"\d{4}-\d\d-\d\dT\d\d:\d\d")
        .unwrap()
        .is_match(html)
}

#[tokio::test]
async fn memory_history_and_integration_dates_use_the_viewer_zone_with_its_offset() {
    let app = spawn_app().await;
    let res = app
        .post_json(
            &app.admin,
            "/api/v1/integrations",
            serde_json::json!({"name": "prod-am", "source": "alertmanager"}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let v1: serde_json::Value = app
        .post_json(
            &app.responder,
            "/api/v1/memories",
            serde_json::json!({"kind": "runbook", "service": "orders-api", "title": "Queue backlog",
                "steps": "Check consumer lag\nScale the consumers"}),
        )
        .await
        .json()
        .await
        .unwrap();
    let res = app
        .post_json(
            &app.responder,
            "/api/v1/memories",
            serde_json::json!({"kind": "runbook", "service": "orders-api", "title": "Queue backlog",
                "steps": "Check consumer lag first\nThen scale the consumers", "replaces": v1["id"]}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let page = |path: String| {
        let app = &app;
        async move {
            app.client
                .get(app.url(&path))
                .bearer_auth(&app.admin)
                .header("cookie", "tz=Asia/Kolkata")
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap()
        }
    };
    let html = page("/integrations".into()).await;
    assert!(html.contains("+05:30 by ada"), "{html}");
    assert!(!has_raw_iso_instant(&html), "{html}");
    let html = page(format!("/memories/{}", v1["id"])).await;
    assert!(html.contains("superseded"), "the history is shown: {html}");
    assert!(!has_raw_iso_instant(&html), "{html}");
    assert!(html.matches("+05:30").count() >= 2, "{html}");
}
