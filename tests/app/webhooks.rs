//! Alert ingest: every sample in `shared/data/alerts` through its endpoint, grouping
//! and per-alert status, PagerDuty signatures, authentication, idempotency under 50 concurrent
//! duplicates, clock skew, hostile input, and the integrations admin API.

use futures::future::join_all;
use incidentmind::Settings;
use incidentmind::services::ingest::pagerduty_signature;
use reqwest::{Response, StatusCode};
use serde_json::{Value, json};

use crate::helpers::{TestApp, error_of, spawn_app, spawn_app_with};

const SAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/data/alerts");

pub(crate) fn sample(name: &str) -> Vec<u8> {
    std::fs::read(format!("{SAMPLES}/{name}")).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn sample_json(name: &str) -> Value {
    serde_json::from_slice(&sample(name)).expect("sample is JSON")
}

/// Creates an integration as the admin; returns (id, secret).
pub(crate) async fn integration(
    app: &TestApp,
    name: &str,
    source: &str,
    extra: Value,
) -> (i64, String) {
    let mut body = json!({"name": name, "source": source});
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    let res = app
        .post_json(&app.admin, "/api/v1/integrations", body)
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let v: Value = res.json().await.unwrap();
    assert_eq!(v["webhook_path"], format!("/api/v1/webhooks/{source}"));
    (
        v["id"].as_i64().unwrap(),
        v["secret"].as_str().unwrap().to_string(),
    )
}

async fn deliver(app: &TestApp, source: &str, secret: &str, body: Vec<u8>) -> Response {
    app.client
        .post(app.url(&format!("/api/v1/webhooks/{source}")))
        .bearer_auth(secret)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("request")
}

async fn accepted(res: Response) -> Value {
    let status = res.status();
    let v: Value = res.json().await.expect("json");
    assert_eq!(status, StatusCode::ACCEPTED, "{v}");
    v
}

async fn incident(app: &TestApp, id: &str) -> Value {
    app.get(&app.responder, &format!("/api/v1/incidents/{id}"))
        .await
        .json()
        .await
        .unwrap()
}

async fn alerts_of(app: &TestApp, id: &str) -> Value {
    let res = app
        .get(&app.responder, &format!("/api/v1/incidents/{id}/alerts"))
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    res.json().await.unwrap()
}

fn timeline_details(inc: &Value, kind: &str) -> Vec<String> {
    inc["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == kind)
        .map(|e| e["detail"].as_str().unwrap().to_string())
        .collect()
}

async fn evidence_count(app: &TestApp, incident: &str) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM evidence WHERE incident_id = $1 AND kind = 'alert'")
        .bind(incident)
        .fetch_one(&app.pool)
        .await
        .unwrap()
}

fn only_incident(v: &Value) -> String {
    let list = v["incidents"].as_array().unwrap();
    assert_eq!(list.len(), 1, "{v}");
    list[0].as_str().unwrap().to_string()
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one match arm per sample file, each with what its delivery must produce"
)]
async fn every_sample_file_goes_through_its_endpoint() {
    let app = spawn_app().await;
    let (_, am) = integration(&app, "prod-am", "alertmanager", json!({})).await;
    let (_, gf) = integration(
        &app,
        "grafana",
        "grafana",
        json!({"default_service": "play-grafana"}),
    )
    .await;
    let (_, og) = integration(&app, "opsgenie", "opsgenie", json!({})).await;
    let (_, pd) = integration(&app, "pagerduty", "pagerduty", json!({})).await;

    let mut files: Vec<String> = std::fs::read_dir(SAMPLES)
        .expect("samples dir")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    // The resolved capture must follow the firing one.
    files.sort_by_key(|f| f.contains("resolved"));
    let mut checkout = None;
    for f in &files {
        let body = sample(f);
        match f.as_str() {
            "alertmanager_v4_firing.captured.json" => {
                let v = accepted(deliver(&app, "alertmanager", &am, body).await).await;
                let id = only_incident(&v);
                assert_eq!(v["opened"], json!([id]));
                assert_eq!(v["alerts"], json!({"firing": 2, "resolved": 0}));
                let inc = incident(&app, &id).await;
                assert_eq!(inc["title"], "checkout 5xx ratio above 5% for 5m");
                assert_eq!(inc["service"], "checkout");
                assert_eq!(inc["severity"], "SEV1");
                assert_eq!(inc["state"], "investigating");
                assert_eq!(inc["opened_by"], "integration:prod-am");
                assert_eq!(evidence_count(&app, &id).await, 2);
                let observations: i64 = sqlx::query_scalar(
                    "SELECT COUNT(*) FROM records WHERE incident_id = $1 AND epistemic_type = 'observation'",
                )
                .bind(&id)
                .fetch_one(&app.pool)
                .await
                .unwrap();
                assert_eq!(observations, 2);
                let a = alerts_of(&app, &id).await;
                assert_eq!(a["summary"], "2 of 2 firing");
                let fps: Vec<&str> = a["alerts"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x["fingerprint"].as_str().unwrap())
                    .collect();
                assert_eq!(fps, ["072433add87a2912", "f949e2bfe1a464db"]);
                assert_eq!(a["alerts"][0]["starts_at"], "2026-11-29T14:46:36Z");
                assert_eq!(
                    a["alerts"][0]["ends_at"],
                    Value::Null,
                    "zero endsAt = firing"
                );
                checkout = Some(id);
            }
            "alertmanager_v4_resolved.captured.json" => {
                let id = checkout.clone().expect("firing capture first");
                let v = accepted(deliver(&app, "alertmanager", &am, body).await).await;
                assert_eq!(only_incident(&v), id);
                assert_eq!(v["opened"], json!([]));
                assert_eq!(v["alerts"], json!({"firing": 0, "resolved": 2}));
                let inc = incident(&app, &id).await;
                assert_eq!(inc["state"], "investigating", "alerts never resolve it");
                let details = timeline_details(&inc, "alerts");
                assert!(
                    details.last().unwrap().contains("0 of 2 firing"),
                    "{details:?}"
                );
                let a = alerts_of(&app, &id).await;
                for x in a["alerts"].as_array().unwrap() {
                    assert_eq!(x["status"], "resolved");
                    assert_eq!(x["ends_at"], "2026-11-29T14:49:42Z");
                    assert_eq!(x["duration_seconds"], 186);
                }
                assert_eq!(evidence_count(&app, &id).await, 4);
            }
            "alertmanager_capture_input_alerts.json" => {
                // Alertmanager API v2 input (a bare array): accepted, grouped by alertname+service.
                let v = accepted(deliver(&app, "alertmanager", &am, body).await).await;
                let id = only_incident(&v);
                assert_eq!(v["alerts"]["firing"], 2);
                assert_eq!(incident(&app, &id).await["service"], "checkout");
            }
            "grafana_alerting_webhook.official.json" => {
                let v = accepted(deliver(&app, "grafana", &gf, body).await).await;
                let id = only_incident(&v);
                assert_eq!(v["alerts"], json!({"firing": 2, "resolved": 0}));
                let inc = incident(&app, &id).await;
                assert_eq!(inc["title"], "High memory usage, High CPU usage");
                assert_eq!(inc["service"], "play-grafana", "integration default");
                assert_eq!(inc["severity"], "SEV3", "default severity");
                let a = alerts_of(&app, &id).await;
                assert_eq!(
                    a["alerts"][0]["starts_at"], "2021-10-12T07:51:03.157076Z",
                    "+02:00 offset stored in UTC"
                );
                assert_eq!(evidence_count(&app, &id).await, 2);
            }
            "opsgenie_webhook_create.official.json" => {
                let v = accepted(deliver(&app, "opsgenie", &og, body).await).await;
                let id = only_incident(&v);
                let inc = incident(&app, &id).await;
                assert_eq!(inc["title"], "test alert", "leading whitespace trimmed");
                let a = alerts_of(&app, &id).await;
                // Identified by its alias, Opsgenie's de-duplication key.
                assert_eq!(a["alerts"][0]["fingerprint"], "aliastest");
                assert_eq!(a["alerts"][0]["starts_at"], "2015-01-05T10:03:11.104Z");
                // Close resolves (updatedAt is epoch nanoseconds), also when it names the alert
                // by its alias with another alertId: one alert, closed, none added.
                let mut close = sample_json(f);
                close["action"] = json!("Close");
                close["alert"]["alertId"] = json!("7f1c2d9e-0000-4000-8000-000000000001");
                close["alert"]["updatedAt"] = json!(1_420_452_400_000_000_000_i64);
                let v = accepted(
                    deliver(&app, "opsgenie", &og, serde_json::to_vec(&close).unwrap()).await,
                )
                .await;
                assert_eq!(only_incident(&v), id);
                assert_eq!(v["alerts"], json!({"firing": 0, "resolved": 1}));
                let a = alerts_of(&app, &id).await;
                assert_eq!(a["alerts"].as_array().map(Vec::len), Some(1), "{a}");
                assert_eq!(a["alerts"][0]["ends_at"], "2015-01-05T10:06:40Z");
                // Other actions are acknowledged and ignored.
                close["action"] = json!("AddNote");
                let v = accepted(
                    deliver(&app, "opsgenie", &og, serde_json::to_vec(&close).unwrap()).await,
                )
                .await;
                assert_eq!(v["incidents"], json!([]));
                assert!(v["ignored"].as_str().unwrap().contains("AddNote"));
            }
            "pagerduty_v3_incident_priority_updated.official.json"
            | "pagerduty_v3_service_updated.official.json" => {
                let before = app.count("incidents").await;
                let v = accepted(deliver(&app, "pagerduty", &pd, body).await).await;
                assert_eq!(v["incidents"], json!([]));
                assert!(
                    v["ignored"].as_str().unwrap().contains("not acted on"),
                    "{v}"
                );
                assert_eq!(app.count("incidents").await, before);
            }
            "NOTES.md"
            | "alertmanager_v4_schema_official.md"
            | "alertmanager_capture_config.yml" => {
                let before = app.count("incidents").await;
                let (status, code, message) =
                    error_of(deliver(&app, "alertmanager", &am, body).await).await;
                assert_eq!(status, StatusCode::BAD_REQUEST, "{f}: {message}");
                assert_eq!(code, "bad_request");
                assert!(message.contains("not valid JSON"), "{message}");
                assert_eq!(app.count("incidents").await, before);
            }
            other => panic!("new sample {other}: decide which endpoint it belongs to"),
        }
    }
    assert!(checkout.is_some());
    assert_eq!(app.count("incidents").await, 4);
}

/// The firing capture with a third alert that has already resolved.
fn three_alerts_one_resolved() -> Value {
    let mut v = sample_json("alertmanager_v4_firing.captured.json");
    let mut third = v["alerts"][0].clone();
    third["fingerprint"] = json!("aaaabbbbccccdddd");
    third["labels"]["instance"] = json!("10.2.3.16:8080");
    third["status"] = json!("resolved");
    third["endsAt"] = json!("2026-11-29T14:48:00Z");
    v["alerts"].as_array_mut().unwrap().push(third);
    v
}

#[tokio::test]
async fn a_group_with_one_resolved_alert_shows_2_of_3_firing() {
    let app = spawn_app().await;
    let (_, am) = integration(&app, "am", "alertmanager", json!({})).await;
    let body = serde_json::to_vec(&three_alerts_one_resolved()).unwrap();
    let v = accepted(deliver(&app, "alertmanager", &am, body).await).await;
    let id = only_incident(&v);
    assert_eq!(v["alerts"], json!({"firing": 2, "resolved": 1}));
    assert_eq!(v["groups"][0]["summary"], "2 of 3 firing");
    let inc = incident(&app, &id).await;
    assert_eq!(inc["state"], "investigating");
    let details = timeline_details(&inc, "alerts");
    assert!(details[0].contains("2 of 3 firing"), "{details:?}");
    let a = alerts_of(&app, &id).await;
    let statuses: Vec<&str> = a["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["firing", "firing", "resolved"]);
    assert_eq!(evidence_count(&app, &id).await, 3);

    // Per-alert status wins over the top-level one.
    let mut v2 = three_alerts_one_resolved();
    v2["status"] = json!("resolved");
    let v =
        accepted(deliver(&app, "alertmanager", &am, serde_json::to_vec(&v2).unwrap()).await).await;
    assert_eq!(v["alerts"], json!({"firing": 2, "resolved": 1}));
    assert_eq!(evidence_count(&app, &id).await, 3, "a repeat adds nothing");
}

#[tokio::test]
async fn pagerduty_signatures_are_verified_on_the_raw_body() {
    let app = spawn_app().await;
    let (_, secret) = integration(
        &app,
        "pd",
        "pagerduty",
        json!({"signing_secret": "pd-signing-secret"}),
    )
    .await;
    let mut triggered = sample_json("pagerduty_v3_incident_priority_updated.official.json");
    triggered["event"]["event_type"] = json!("incident.triggered");
    let body = serde_json::to_vec_pretty(&triggered).unwrap();
    let post = |sig: Option<String>, bearer: Option<&str>, body: Vec<u8>| {
        let mut req = app
            .client
            .post(app.url("/api/v1/webhooks/pagerduty"))
            .header("content-type", "application/json")
            .body(body);
        if let Some(s) = sig {
            req = req.header("X-PagerDuty-Signature", s);
        }
        if let Some(b) = bearer {
            req = req.bearer_auth(b);
        }
        req.send()
    };

    // A bad signature, a signature over other bytes, a bearer without the signature: 401.
    for (sig, bearer) in [
        (Some("v1=00ff".to_string()), None),
        (Some(pagerduty_signature("pd-signing-secret", b"{}")), None),
        (
            Some(pagerduty_signature("wrong-secret", &body)),
            Some(secret.as_str()),
        ),
        (None, Some(secret.as_str())),
    ] {
        let (status, code, _) = error_of(post(sig, bearer, body.clone()).await.unwrap()).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert_eq!(code, "unauthenticated");
    }
    assert_eq!(app.count("incidents").await, 0);
    assert_eq!(app.count("alerts").await, 0);

    // A rotation list with one valid signature, without a bearer: accepted.
    let sig = format!(
        "v1=deadbeef,{}",
        pagerduty_signature("pd-signing-secret", &body)
    );
    let v = accepted(post(Some(sig), None, body.clone()).await.unwrap()).await;
    let id = only_incident(&v);
    let inc = incident(&app, &id).await;
    assert_eq!(inc["title"], "A little bump in the road");
    assert_eq!(inc["service"], "api-service");
    assert_eq!(inc["severity"], "SEV1", "priority P1");

    // incident.resolved marks the alert resolved; the incident stays open.
    let mut resolved = triggered.clone();
    resolved["event"]["event_type"] = json!("incident.resolved");
    resolved["event"]["occurred_at"] = json!("2020-10-02T19:00:00Z");
    resolved["event"]["data"]["status"] = json!("resolved");
    let body = serde_json::to_vec(&resolved).unwrap();
    let sig = pagerduty_signature("pd-signing-secret", &body);
    let v = accepted(post(Some(sig), Some(&secret), body).await.unwrap()).await;
    assert_eq!(only_incident(&v), id);
    assert_eq!(v["alerts"], json!({"firing": 0, "resolved": 1}));
    assert_eq!(incident(&app, &id).await["state"], "investigating");

    // Missing optional fields do not fail the request.
    let minimal = br#"{"event":{"event_type":"incident.triggered","data":{"id":"Q1"}}}"#.to_vec();
    let sig = pagerduty_signature("pd-signing-secret", &minimal);
    let v = accepted(post(Some(sig), None, minimal).await.unwrap()).await;
    let id2 = only_incident(&v);
    let inc = incident(&app, &id2).await;
    assert_eq!(inc["title"], "PagerDuty incident Q1");
    assert_eq!(inc["service"], "unassigned");
}

#[tokio::test]
async fn unauthenticated_posts_get_401_and_change_nothing() {
    let app = spawn_app().await;
    let (_, am) = integration(&app, "am", "alertmanager", json!({})).await;
    let (_, gf) = integration(&app, "gf", "grafana", json!({})).await;
    let body = sample("alertmanager_v4_firing.captured.json");
    let audit_before = app.count("audit_log").await;
    for token in ["", "whk_0000", app.responder.as_str(), app.admin.as_str()] {
        let mut req = app
            .client
            .post(app.url("/api/v1/webhooks/alertmanager"))
            .body(body.clone());
        if !token.is_empty() {
            req = req.bearer_auth(token);
        }
        let (status, _, _) = error_of(req.send().await.unwrap()).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "token {token:?}");
    }
    let res = app
        .client
        .post(app.url("/api/v1/webhooks/alertmanager?token=nope"))
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    // A secret of another source's integration.
    let (status, _, message) =
        error_of(deliver(&app, "alertmanager", &gf, body.clone()).await).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(message.contains("/api/v1/webhooks/grafana"), "{message}");
    assert_eq!(app.count("incidents").await, 0);
    assert_eq!(app.count("evidence").await, 0);
    assert_eq!(app.count("audit_log").await, audit_before);

    // `?token=` works like the header.
    let res = app
        .client
        .post(app.url(&format!("/api/v1/webhooks/alertmanager?token={am}")))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::ACCEPTED);
}

/// A second app instance (own pool, own router, own port) on the same database file.
async fn second_instance(app: &TestApp) -> String {
    let url = app.pool.connect_options().database_url.to_string();
    let pool = incidentmind::store::connect(&url)
        .await
        .expect("second pool");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let router = incidentmind::router(incidentmind::AppState::new(pool, Settings::default()));
    tokio::spawn(async move {
        axum::serve(listener, router).await.expect("serve");
    });
    format!("http://{addr}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_concurrent_duplicate_deliveries_open_one_incident() {
    let app = spawn_app().await;
    let (_, am) = integration(&app, "am", "alertmanager", json!({})).await;
    let body = sample("alertmanager_v4_firing.captured.json");
    let other = second_instance(&app).await;
    // Half of the copies go to each of two app instances sharing the database.
    let results = join_all((0..50).map(|i| {
        let base = if i % 2 == 0 {
            app.base.clone()
        } else {
            other.clone()
        };
        app.client
            .post(format!("{base}/api/v1/webhooks/alertmanager"))
            .bearer_auth(&am)
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
    }))
    .await;
    let results: Vec<Response> = results.into_iter().map(|r| r.expect("request")).collect();
    let mut ids = Vec::new();
    let mut opened = 0;
    for r in results {
        let v = accepted(r).await;
        ids.push(only_incident(&v));
        opened += v["opened"].as_array().unwrap().len();
    }
    ids.dedup();
    assert_eq!(ids.len(), 1, "every response names the same incident");
    assert_eq!(opened, 1, "exactly one delivery opened it");
    assert_eq!(app.count("incidents").await, 1);
    assert_eq!(app.count("alert_groups").await, 1);
    assert_eq!(app.count("alerts").await, 2);
    assert_eq!(evidence_count(&app, &ids[0]).await, 2);
    let inc = incident(&app, &ids[0]).await;
    assert_eq!(timeline_details(&inc, "opened").len(), 1);
    assert_eq!(timeline_details(&inc, "alerts").len(), 1);
}

#[tokio::test]
async fn skewed_timestamps_are_flagged_and_durations_stay_non_negative() {
    let app = spawn_app().await;
    let (_, am) = integration(&app, "am", "alertmanager", json!({})).await;
    let future = jiff::Timestamp::from_second(jiff::Timestamp::now().as_second() + 7200).unwrap();
    let body = json!({
        "version": "4", "groupKey": "skew", "status": "firing",
        "commonAnnotations": {"summary": "clock skew"},
        "alerts": [
            {"status": "firing", "labels": {"alertname": "Ahead", "severity": "warning"},
             "startsAt": future.to_string(), "endsAt": "0001-01-01T00:00:00Z", "fingerprint": "ahead"},
            {"status": "resolved", "labels": {"alertname": "Backwards"},
             "startsAt": "2020-11-29T15:00:00+01:00", "endsAt": "2020-11-29T13:00:00Z",
             "fingerprint": "backwards"}
        ]
    });
    let v = accepted(
        deliver(
            &app,
            "alertmanager",
            &am,
            serde_json::to_vec(&body).unwrap(),
        )
        .await,
    )
    .await;
    let id = only_incident(&v);
    assert_eq!(v["alerts"], json!({"firing": 1, "resolved": 1}));
    let inc = incident(&app, &id).await;
    assert_eq!(inc["severity"], "SEV3", "warning maps to SEV3");
    let flagged = timeline_details(&inc, "alert_flagged");
    assert_eq!(flagged.len(), 2, "{flagged:?}");
    assert!(flagged.iter().any(|d| d.contains("ahead of receipt")));
    assert!(flagged.iter().any(|d| d.contains("before startsAt")));
    let a = alerts_of(&app, &id).await;
    let alerts = a["alerts"].as_array().unwrap();
    let ahead = alerts.iter().find(|x| x["fingerprint"] == "ahead").unwrap();
    assert_eq!(ahead["flags"], json!(["starts_in_future"]));
    assert_eq!(
        ahead["starts_at"],
        json!(future.to_string()),
        "kept as sent"
    );
    let back = alerts
        .iter()
        .find(|x| x["fingerprint"] == "backwards")
        .unwrap();
    assert_eq!(back["flags"], json!(["ends_before_start"]));
    assert_eq!(back["starts_at"], "2020-11-29T14:00:00Z", "offset applied");
    assert!(back["duration_seconds"].as_i64().unwrap() >= 0);
    // Timeline order is received order.
    let ats: Vec<&str> = inc["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["at"].as_str().unwrap())
        .collect();
    let mut sorted = ats.clone();
    sorted.sort();
    assert_eq!(ats, sorted);
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "a table of cases sent in turn to one app, each next to the answer it expects"
)]
async fn hostile_input_is_a_clean_400_or_stored_safely() {
    let app = spawn_app_with(Settings {
        max_body_bytes: 256 * 1024,
        max_webhook_bytes: 256 * 1024,
        ..Settings::default()
    })
    .await;
    let (_, am) = integration(&app, "am", "alertmanager", json!({})).await;
    let (_, og) = integration(&app, "og", "opsgenie", json!({})).await;

    // Lone surrogate escapes, malformed JSON, invalid UTF-8, deep nesting: 400.
    let surrogate =
        br#"{"groupKey":"x","alerts":[{"labels":{"alertname":"\ud800"},"fingerprint":"f"}]}"#;
    let deep = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
    for body in [
        surrogate.to_vec(),
        b"{\"alerts\": [".to_vec(),
        vec![0xff, 0xfe, b'{', b'}'],
        deep.into_bytes(),
        Vec::new(),
    ] {
        let (status, code, _) = error_of(deliver(&app, "alertmanager", &am, body).await).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(code, "bad_request");
    }
    // Wrong shapes: 400 naming the field.
    for (source, secret, body, field) in [
        ("alertmanager", &am, json!({"status": "firing"}), "alerts"),
        ("alertmanager", &am, json!({"alerts": "x"}), "alerts"),
        (
            "alertmanager",
            &am,
            json!({"alerts": [{"labels": {"a": 1}, "startsAt": "yesterday"}]}),
            "alerts[0].startsAt",
        ),
        (
            "alertmanager",
            &am,
            json!({"alerts": [{"labels": {"a": {"b": 1}}}]}),
            "alerts[0].labels.a",
        ),
        (
            "alertmanager",
            &am,
            json!({"alerts": [{"status": "maybe"}]}),
            "alerts[0].status",
        ),
        (
            "opsgenie",
            &og,
            json!({"action": "Create", "alert": {"alias": "a", "createdAt": "soon"}}),
            "alert.createdAt",
        ),
        (
            "opsgenie",
            &og,
            json!({"action": "Create", "alert": {"alias": "a", "createdAt": 1e300}}),
            "alert.createdAt",
        ),
        (
            "opsgenie",
            &og,
            json!({"action": "Create", "alert": {}}),
            "alert.alias",
        ),
    ] {
        let (status, _, message) =
            error_of(deliver(&app, source, secret, serde_json::to_vec(&body).unwrap()).await).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert!(
            message.starts_with(&format!("{field}:")),
            "{message:?} should name {field}"
        );
    }
    assert_eq!(app.count("incidents").await, 0);

    // Over the body limit: 413.
    let big = json!({"alerts": [{"labels": {"alertname": "x".repeat(300_000)}}]});
    let (status, code, _) =
        error_of(deliver(&app, "alertmanager", &am, serde_json::to_vec(&big).unwrap()).await).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(code, "payload_too_large");

    // 10k-character labels: stored safely, title and service within their limits.
    let long = "Ä".repeat(10_000);
    let body = json!({
        "groupKey": long, "status": "firing",
        "alerts": [{"labels": {"alertname": long, "service": long, "severity": long, "job": "\u{0}\u{7}"},
                    "annotations": {"summary": long}, "fingerprint": long,
                    "startsAt": "2026-11-29T14:46:36Z"}]
    });
    let v = accepted(
        deliver(
            &app,
            "alertmanager",
            &am,
            serde_json::to_vec(&body).unwrap(),
        )
        .await,
    )
    .await;
    let id = only_incident(&v);
    let inc = incident(&app, &id).await;
    assert_eq!(inc["title"].as_str().unwrap().chars().count(), 200);
    assert_eq!(inc["service"].as_str().unwrap().chars().count(), 100);
    assert_eq!(inc["severity"], "SEV3");
    assert_eq!(evidence_count(&app, &id).await, 1);
    // The same delivery again is a no-op.
    let v = accepted(
        deliver(
            &app,
            "alertmanager",
            &am,
            serde_json::to_vec(&body).unwrap(),
        )
        .await,
    )
    .await;
    assert_eq!(only_incident(&v), id);
    assert_eq!(app.count("incidents").await, 1);
    assert_eq!(evidence_count(&app, &id).await, 1);
}

#[tokio::test]
async fn a_group_firing_again_after_learning_opens_a_follow_up() {
    let app = spawn_app().await;
    let (_, am) = integration(&app, "am", "alertmanager", json!({})).await;
    let v = accepted(
        deliver(
            &app,
            "alertmanager",
            &am,
            sample("alertmanager_v4_firing.captured.json"),
        )
        .await,
    )
    .await;
    let first = only_incident(&v);
    assert_eq!(app.resolve(&first).await.status(), StatusCode::OK);
    // The responder drafts; a reviewer who is not the author confirms and learns.
    for (actor, step, status) in [
        (&app.responder, "postmortem", StatusCode::CREATED),
        (&app.reviewer, "postmortem/confirm", StatusCode::OK),
        (&app.reviewer, "learn", StatusCode::OK),
    ] {
        let res = app
            .post_json(
                actor,
                &format!("/api/v1/incidents/{first}/{step}"),
                json!({}),
            )
            .await;
        assert_eq!(res.status(), status, "{step}");
        if step == "postmortem" {
            app.write_trigger(&first).await;
        }
    }
    // A late resolution of the learned incident changes nothing.
    let v = accepted(
        deliver(
            &app,
            "alertmanager",
            &am,
            sample("alertmanager_v4_resolved.captured.json"),
        )
        .await,
    )
    .await;
    assert_eq!(v["opened"], json!([]));
    assert_eq!(app.count("incidents").await, 1);
    // The group fires again.
    let mut again = sample_json("alertmanager_v4_firing.captured.json");
    for a in again["alerts"].as_array_mut().unwrap() {
        a["startsAt"] = json!("2026-11-29T15:30:00Z");
    }
    let v = accepted(
        deliver(
            &app,
            "alertmanager",
            &am,
            serde_json::to_vec(&again).unwrap(),
        )
        .await,
    )
    .await;
    let second = only_incident(&v);
    assert_ne!(second, first);
    assert_eq!(v["groups"][0]["follows"], json!(first));
    let inc = incident(&app, &second).await;
    let follows = timeline_details(&inc, "follows");
    assert!(
        follows[0].contains(&format!("follows {first}")),
        "{follows:?}"
    );
    assert_eq!(
        alerts_of(&app, &second).await["group"]["follows"],
        json!(first)
    );
    assert_eq!(evidence_count(&app, &second).await, 2);
    assert_eq!(incident(&app, &first).await["state"], "learned");
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one end-to-end scenario: each step acts on what the steps before it left, so it reads top to bottom"
)]
async fn integrations_are_admin_only_and_show_the_secret_once() {
    let app = spawn_app().await;
    for token in [&app.responder, &app.reviewer] {
        let res = app
            .post_json(
                token,
                "/api/v1/integrations",
                json!({"name": "x", "source": "grafana"}),
            )
            .await;
        let (status, code, _) = error_of(res).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        assert_eq!(code, "forbidden");
        assert_eq!(
            app.get(token, "/api/v1/integrations").await.status(),
            StatusCode::FORBIDDEN
        );
    }
    let res = app
        .post_json(
            &app.admin,
            "/api/v1/integrations",
            json!({"name": "prod", "source": "alertmanager",
                   "severity_map": {"Critical": "SEV2", "disaster": "SEV1"}}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let created: Value = res.json().await.unwrap();
    let secret = created["secret"].as_str().unwrap();
    assert!(secret.starts_with("whk_") && secret.len() == 68);
    assert_eq!(created["severity_map"]["critical"], "SEV2");
    assert_eq!(created["severity_map"]["disaster"], "SEV1");
    assert_eq!(created["severity_map"]["warning"], "SEV3", "defaults kept");
    let stored: String = sqlx::query_scalar("SELECT secret_sha256 FROM integrations")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_ne!(stored, secret);
    assert_eq!(stored.len(), 64);
    let list: Value = app
        .get(&app.admin, "/api/v1/integrations")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(list["integrations"].as_array().unwrap().len(), 1);
    assert!(
        !list.to_string().contains(secret),
        "the secret is shown once"
    );

    for (body, status) in [
        (
            json!({"name": "prod", "source": "grafana"}),
            StatusCode::CONFLICT,
        ),
        (
            json!({"name": "y", "source": "nagios"}),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            json!({"name": "", "source": "grafana"}),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            json!({"name": "z", "source": "grafana", "signing_secret": "s"}),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            json!({"name": "z", "source": "grafana", "severity_map": {"x": "SEV9"}}),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (json!({"name": 5}), StatusCode::BAD_REQUEST),
    ] {
        let res = app
            .post_json(&app.admin, "/api/v1/integrations", body.clone())
            .await;
        assert_eq!(res.status(), status, "{body}");
    }

    // A PagerDuty signing secret can be set later (it comes from the subscription).
    let (pd_id, _) = integration(&app, "pd", "pagerduty", json!({})).await;
    let res = app
        .client
        .patch(app.url(&format!("/api/v1/integrations/{pd_id}")))
        .bearer_auth(&app.admin)
        .json(&json!({"signing_secret": "from-pagerduty", "default_service": "Payments"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let v: Value = res.json().await.unwrap();
    assert_eq!(v["has_signing_secret"], true);
    assert_eq!(v["default_service"], "payments");
    assert!(v.get("signing_secret").is_none());

    // The admin page lists them; other roles get a 403.
    let admin = app.browser("ada").await;
    let page = admin.get(app.url("/integrations")).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let html = page.text().await.unwrap();
    assert!(html.contains("prod") && html.contains("/api/v1/webhooks/alertmanager"));
    let res = admin
        .post(app.url("/integrations"))
        .header("origin", &app.base)
        .form(&[
            ("name", "from-page"),
            ("source", "opsgenie"),
            ("default_service", ""),
            ("default_severity", "SEV2"),
            ("severity_map", "p1=SEV1\np2=SEV2"),
            ("signing_secret", ""),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    assert!(res.text().await.unwrap().contains("whk_"));
    let rita = app.browser("rita").await;
    assert_eq!(
        rita.get(app.url("/integrations"))
            .send()
            .await
            .unwrap()
            .status(),
        StatusCode::FORBIDDEN
    );
}
