//! The live incident page (issue #55): the change stream `GET /incidents/{id}/events`
//! (server-sent events read off the wire), its replay after `Last-Event-ID`, presence, the
//! limits, the panels route, and a change on instance B reaching a stream on instance A over
//! PostgreSQL.

use std::time::Duration;

use reqwest::{Client, RequestBuilder, StatusCode};
use serde_json::{Value, json};

use crate::helpers::{
    TestApp, fresh_postgres_database, postgres_server, serve_instance, spawn_app, spawn_app_at,
    spawn_app_with,
};

/// One server-sent event as read off the wire (comments skipped).
#[derive(Debug, Clone)]
pub struct SseEvent {
    pub id: Option<String>,
    pub event: String,
    pub data: Value,
}

/// A server-sent event stream read from a live response, with its comments counted.
pub struct Sse {
    res: reqwest::Response,
    buf: String,
    pub comments: Vec<String>,
}

impl Sse {
    /// Opens `req`; panics unless it answers 200 `text/event-stream`.
    pub async fn open(req: RequestBuilder) -> Sse {
        let res = req.send().await.expect("stream request");
        assert_eq!(res.status(), StatusCode::OK);
        let ct = res
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        assert!(ct.starts_with("text/event-stream"), "{ct}");
        Sse {
            res,
            buf: String::new(),
            comments: Vec::new(),
        }
    }

    /// The next event within `within`; `None` when the stream ended or the time ran out.
    pub async fn next(&mut self, within: Duration) -> Option<SseEvent> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let (mut id, mut event, mut data) = (None, String::from("message"), String::new());
                let mut any = false;
                for line in block.lines() {
                    if let Some(c) = line.strip_prefix(':') {
                        self.comments.push(c.trim().to_string());
                    } else if let Some(v) = line.strip_prefix("id:") {
                        id = Some(v.trim().to_string());
                        any = true;
                    } else if let Some(v) = line.strip_prefix("event:") {
                        event = v.trim().to_string();
                        any = true;
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim_start());
                        any = true;
                    }
                }
                if !any || data.is_empty() {
                    continue;
                }
                let data = serde_json::from_str(&data).expect("event data is JSON");
                return Some(SseEvent { id, event, data });
            }
            let chunk = tokio::time::timeout_at(deadline, self.res.chunk()).await;
            match chunk {
                Ok(Ok(Some(bytes))) => self.buf.push_str(&String::from_utf8_lossy(&bytes)),
                _ => return None,
            }
        }
    }

    /// The next event named `name` within `within` (others skipped); panics without one.
    pub async fn next_of(&mut self, name: &str, within: Duration) -> SseEvent {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.next(left).await {
                Some(e) if e.event == name => return e,
                Some(_) => {}
                None => panic!("no {name} event within {within:?}"),
            }
        }
    }
}

fn events_url(base: &str, id: &str) -> String {
    format!("{base}/incidents/{id}/events")
}

async fn add_evidence(app: &TestApp, base: &str, id: &str, line: &str) {
    let res = app
        .client
        .post(format!("{base}/api/v1/incidents/{id}/evidence"))
        .bearer_auth(&app.responder)
        .json(&json!({"kind": "logs", "content": line}))
        .send()
        .await
        .expect("evidence");
    assert_eq!(res.status(), StatusCode::CREATED);
}

const SOON: Duration = Duration::from_secs(5);

#[tokio::test]
async fn a_change_reaches_an_open_stream_with_its_timeline_id_actor_and_panels() {
    let app = spawn_app().await;
    let id = app
        .open_incident("Checkout latency climbs", "checkout")
        .await;
    let mut sse = Sse::open(
        app.client
            .get(events_url(&app.base, &id))
            .bearer_auth(&app.reviewer),
    )
    .await;
    let here = sse.next_of("presence", SOON).await;
    assert_eq!(here.data["here"], json!(["victor"]));
    assert_eq!(app.resolve(&id).await.status(), StatusCode::OK);
    let change = sse.next_of("change", SOON).await;
    let timeline: Value = app
        .get(&app.responder, &format!("/api/v1/incidents/{id}"))
        .await
        .json()
        .await
        .unwrap();
    let last = timeline["timeline"]
        .as_array()
        .and_then(|t| t.last())
        .cloned()
        .expect("a timeline event");
    assert_eq!(change.id.as_deref(), Some(last["id"].to_string().as_str()));
    assert_eq!(change.data["kind"], "resolve");
    assert_eq!(change.data["actor"], "rita");
    assert_eq!(change.data["what"], "resolved the incident");
    let panels = change.data["panels"].as_array().unwrap();
    assert!(panels.contains(&json!("summary")), "{panels:?}");
    assert!(panels.contains(&json!("timeline")), "{panels:?}");
}

#[tokio::test]
async fn a_dropped_stream_resumes_after_its_last_event_id_and_misses_nothing() {
    let app = spawn_app().await;
    let id = app.open_incident("Search results empty", "search").await;
    let mut first = Sse::open(
        app.client
            .get(events_url(&app.base, &id))
            .bearer_auth(&app.responder),
    )
    .await;
    assert_eq!(app.resolve(&id).await.status(), StatusCode::OK);
    let seen = first.next_of("change", SOON).await;
    let last_seen = seen.id.clone().expect("an id");
    drop(first);
    // While the page is away: three changes.
    add_evidence(
        &app,
        &app.base,
        &id,
        "search shard 4 returned 0 hits for 390 queries",
    )
    .await;
    add_evidence(
        &app,
        &app.base,
        &id,
        "index alias points at an empty index since 02:10",
    )
    .await;
    let reopened = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/reopen"),
            json!({}),
        )
        .await;
    assert_eq!(reopened.status(), StatusCode::OK);
    let mut again = Sse::open(
        app.client
            .get(events_url(&app.base, &id))
            .bearer_auth(&app.responder)
            .header("Last-Event-ID", &last_seen),
    )
    .await;
    let mut replayed = Vec::new();
    for _ in 0..3 {
        let e = again.next_of("change", SOON).await;
        replayed.push((
            e.id.unwrap().parse::<i64>().unwrap(),
            e.data["kind"].as_str().unwrap().to_string(),
        ));
    }
    let kinds: Vec<&str> = replayed.iter().map(|(_, k)| k.as_str()).collect();
    assert_eq!(kinds, ["evidence_added", "evidence_added", "reopen"]);
    let ids: Vec<i64> = replayed.iter().map(|(i, _)| *i).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "in order: {ids:?}");
    assert!(ids[0] > last_seen.parse::<i64>().unwrap());
    // And it goes on live after the replay, without repeating one.
    assert_eq!(app.resolve(&id).await.status(), StatusCode::OK);
    let live = again.next_of("change", SOON).await;
    assert_eq!(live.data["kind"], "resolve");
    assert!(live.id.unwrap().parse::<i64>().unwrap() > ids[2]);
}

#[tokio::test]
async fn a_page_s_first_connection_replays_what_happened_after_the_page_was_rendered() {
    let app = spawn_app().await;
    let id = app.open_incident("Mail queue backs up", "mailer").await;
    let b = app.browser("rita").await;
    let html = app.page(&b, &format!("/incidents/{id}")).await;
    let after = html
        .split("data-live-after=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .expect("the page names its newest event")
        .to_string();
    assert!(
        html.contains("id=\"live-bar\" hidden"),
        "the live bar stays hidden without a script"
    );
    assert!(html.contains("/static/live.js?v="));
    add_evidence(
        &app,
        &app.base,
        &id,
        "smtp relay answered 421 for 20 minutes",
    )
    .await;
    let mut sse = Sse::open(b.get(format!("{}?after={after}", events_url(&app.base, &id)))).await;
    let e = sse.next_of("change", SOON).await;
    assert_eq!(e.data["kind"], "evidence_added");
}

#[tokio::test]
async fn the_stream_is_refused_without_credentials_for_an_unknown_incident_and_a_bad_last_event_id()
{
    let app = spawn_app().await;
    let id = app
        .open_incident("Cache hit rate falls", "edge-cache")
        .await;
    let anonymous = Client::new()
        .get(events_url(&app.base, &id))
        .send()
        .await
        .unwrap();
    assert_eq!(
        anonymous.status(),
        StatusCode::UNAUTHORIZED,
        "no sign-in redirect for a stream"
    );
    let unknown = app
        .get(&app.responder, "/incidents/INC-2026-9999/events")
        .await;
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);
    let bad = app
        .client
        .get(events_url(&app.base, &id))
        .bearer_auth(&app.responder)
        .header("Last-Event-ID", "yesterday")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    assert!(bad.text().await.unwrap().contains("Last-Event-ID"));
}

#[tokio::test]
async fn a_user_over_the_stream_limit_is_told_to_wait_and_presence_follows_who_is_here() {
    let mut settings = incidentmind::Settings::default();
    settings.live.streams_per_user = 2;
    let app = spawn_app_with(settings).await;
    let id = app.open_incident("Login fails for SSO users", "auth").await;
    let open = |token: &str| {
        app.client
            .get(events_url(&app.base, &id))
            .bearer_auth(token.to_string())
    };
    let mut rita1 = Sse::open(open(&app.responder)).await;
    assert_eq!(
        rita1.next_of("presence", SOON).await.data["here"],
        json!(["rita"])
    );
    let rita2 = Sse::open(open(&app.responder)).await;
    let third = open(&app.responder).send().await.unwrap();
    assert_eq!(third.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(third.headers().contains_key("retry-after"));
    let victor = Sse::open(open(&app.reviewer)).await;
    assert_eq!(
        rita1.next_of("presence", SOON).await.data["here"],
        json!(["rita", "victor"])
    );
    drop(victor);
    assert_eq!(
        rita1.next_of("presence", SOON).await.data["here"],
        json!(["rita"])
    );
    drop(rita2);
    let _again = Sse::open(open(&app.responder)).await;
}

#[tokio::test]
async fn an_idle_stream_ends_and_heartbeats_keep_it_open_until_then() {
    let mut settings = incidentmind::Settings::default();
    settings.live.heartbeat = Duration::from_millis(200);
    settings.live.idle_limit = Duration::from_millis(1200);
    let app = spawn_app_with(settings).await;
    let id = app
        .open_incident("Disk fills on the log host", "logging")
        .await;
    let started = std::time::Instant::now();
    let mut sse = Sse::open(
        app.client
            .get(events_url(&app.base, &id))
            .bearer_auth(&app.responder),
    )
    .await;
    sse.next_of("presence", SOON).await;
    assert!(sse.next(SOON).await.is_none(), "the stream ends when idle");
    let lasted = started.elapsed();
    assert!(
        lasted >= Duration::from_millis(1100) && lasted < Duration::from_secs(4),
        "{lasted:?}"
    );
    assert!(
        sse.comments.iter().filter(|c| *c == "heartbeat").count() >= 3,
        "{:?}",
        sse.comments
    );
}

#[tokio::test]
async fn the_panels_route_renders_the_page_s_panels_with_the_version_its_forms_carry() {
    let app = spawn_app().await;
    let id = app
        .open_incident("Payments retried twice", "payments")
        .await;
    add_evidence(
        &app,
        &app.base,
        &id,
        "payment 8812 captured twice 40 ms apart",
    )
    .await;
    let b = app.browser("victor").await;
    let res = b
        .get(app.url(&format!(
            "/incidents/{id}/panels?show=timeline,observations"
        )))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.headers()["x-incident-version"], "1");
    let html = res.text().await.unwrap();
    let obs = html
        .find("data-live-panel=\"observations\"")
        .expect("observations panel");
    let tl = html
        .find("data-live-panel=\"timeline\"")
        .expect("timeline panel");
    assert!(obs < tl, "in page order");
    assert!(
        !html.contains("data-live-panel=\"copilot\""),
        "only what was asked"
    );
    assert!(
        html.contains("captured twice"),
        "the new observation is in its panel"
    );
    assert!(html.contains("evidence_added"));
    let whole = app.page(&b, &format!("/incidents/{id}")).await;
    for panel in [
        "head",
        "next",
        "summary",
        "observations",
        "copilot",
        "resolve",
        "memory",
        "timeline",
    ] {
        assert!(
            whole.contains(&format!("data-live-panel=\"{panel}\"")),
            "{panel}"
        );
    }
    let bad = b
        .get(app.url(&format!("/incidents/{id}/panels?show=sidebar")))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), StatusCode::UNPROCESSABLE_ENTITY);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_change_made_on_instance_b_reaches_a_stream_on_instance_a_over_postgres() {
    let Some(server) = postgres_server("live::two_instances") else {
        return;
    };
    let url = fresh_postgres_database(&server).await;
    let a = spawn_app_at(&url).await;
    let b = serve_instance(&url).await;
    let id = a.open_incident("Orders stuck in pending", "orders").await;
    let mut on_a = Sse::open(
        a.client
            .get(events_url(&a.base, &id))
            .bearer_auth(&a.reviewer),
    )
    .await;
    assert_eq!(
        on_a.next_of("presence", SOON).await.data["here"],
        json!(["victor"])
    );
    // Who is here counts the viewers of both instances.
    let on_b = Sse::open(a.client.get(events_url(&b, &id)).bearer_auth(&a.responder)).await;
    assert_eq!(
        on_a.next_of("presence", SOON).await.data["here"],
        json!(["rita", "victor"])
    );
    // A resolution on B reaches A; a refused one (already resolved) announces nothing, and
    // the next real change (a reopen) is the next event.
    let resolve = |base: &str| {
        a.client
            .post(format!("{base}/api/v1/incidents/{id}/resolve"))
            .bearer_auth(&a.responder)
            .json(&json!({"summary": "consumer restarted", "root_cause": "stuck rebalance"}))
            .send()
    };
    let sent = std::time::Instant::now();
    assert_eq!(resolve(&b).await.unwrap().status(), StatusCode::OK);
    let e = on_a.next_of("change", SOON).await;
    println!("instance B → stream on A: {:?}", sent.elapsed());
    assert_eq!(e.data["kind"], "resolve");
    assert_eq!(e.data["actor"], "rita");
    assert_eq!(resolve(&b).await.unwrap().status(), StatusCode::CONFLICT);
    let reopen = a
        .client
        .post(format!("{b}/api/v1/incidents/{id}/reopen"))
        .bearer_auth(&a.responder)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(reopen.status(), StatusCode::OK);
    assert_eq!(on_a.next_of("change", SOON).await.data["kind"], "reopen");
    add_evidence(
        &a,
        &b,
        &id,
        "orders consumer lag 48000 messages on partition 7",
    )
    .await;
    let e = on_a.next_of("change", SOON).await;
    assert_eq!(
        (e.data["kind"].as_str(), e.data["what"].as_str()),
        (Some("evidence_added"), Some("added evidence"))
    );
    drop(on_b);
    assert_eq!(
        on_a.next_of("presence", SOON).await.data["here"],
        json!(["victor"])
    );
}
