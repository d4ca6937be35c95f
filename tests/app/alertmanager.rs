//! The real Prometheus Alertmanager (Debian's `prometheus-alertmanager`, 0.25) delivering to the
//! app over loopback: an Alertmanager integration is created through the API, a
//! real `alertmanager` process is started with a webhook receiver that posts to the app with the
//! integration's secret as its bearer credentials, alerts go into Alertmanager through its API v2
//! (`POST /api/v2/alerts`), and the test asserts the incident the app opens from Alertmanager's
//! own delivery and, once the alerts are resolved, the app's resolved handling (alerts resolved,
//! the incident left open for a person: `services::ingest::apply`).
//!
//! The binary is `$INCIDENTMIND_ALERTMANAGER_BIN`, else `prometheus-alertmanager` (Debian's name)
//! or `alertmanager` on `PATH`. Without it the test prints SKIPPED and passes, except under
//! `CI=true` or `INCIDENTMIND_REQUIRE_ALERTMANAGER=1` (`.ci/run` installs the package and sets
//! it), where it fails. Spawning a process is fine here: `tests/no_exec.rs` scans `src/` only.

use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app};
use crate::peer::{Peer, find_binary};

/// The Alertmanager binary, or `None` when none is installed.
fn alertmanager_binary() -> Option<PathBuf> {
    find_binary(
        "INCIDENTMIND_ALERTMANAGER_BIN",
        &["prometheus-alertmanager", "alertmanager"],
    )
}

/// Writes `alertmanager.yml` into `dir`: one route to a webhook receiver posting to `webhook`
/// with `secret` as `Authorization: Bearer`, grouped by `alertname` and `service`, with waits of
/// one second so a delivery (and the resolved one, `send_resolved: true`) comes within seconds.
fn write_config(dir: &Path, webhook: &str, secret: &str) -> PathBuf {
    let config = format!(
        "route:
  receiver: incidentmind
  group_by: ['alertname', 'service']
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: incidentmind
    webhook_configs:
      - url: '{webhook}'
        send_resolved: true
        http_config:
          authorization:
            type: Bearer
            credentials: '{secret}'
"
    );
    let path = dir.join("alertmanager.yml");
    std::fs::write(&path, config).expect("write alertmanager.yml");
    path
}

/// Starts Alertmanager with `config` on a free loopback port (clustering off), data under `dir`.
async fn start(binary: &Path, dir: &Path, config: &Path, client: &reqwest::Client) -> Peer {
    let (config, data) = (config.display().to_string(), dir.join("data"));
    let args = |port: u16| {
        vec![
            format!("--config.file={config}"),
            format!("--storage.path={}", data.display()),
            format!("--web.listen-address=127.0.0.1:{port}"),
            "--cluster.listen-address=".to_string(),
            "--log.level=debug".to_string(),
        ]
    };
    Peer::start("alertmanager", binary, dir, args, client).await
}

/// Two alerts of one group (same `alertname` and `service`, two instances), as a Prometheus
/// server would post them to `POST /api/v2/alerts`; `ends_at` set resolves them.
fn alerts(starts_at: &str, ends_at: Option<&str>) -> Value {
    let alert = |instance: &str| {
        let mut a = json!({
            "labels": {"alertname": "PaymentsLatencyHigh", "service": "payments-api",
                       "severity": "page", "instance": instance, "job": "payments"},
            "annotations": {"summary": "payments-api p99 latency above 2s for 5m",
                            "description": "histogram_quantile(0.99, …) = 4.2 s"},
            "startsAt": starts_at,
            "generatorURL": "http://prometheus.internal:9090/graph?g0.expr=p99"
        });
        if let Some(e) = ends_at {
            a["endsAt"] = json!(e);
        }
        a
    };
    json!([alert("10.0.0.1:8080"), alert("10.0.0.2:8080")])
}

async fn post_alerts(client: &reqwest::Client, am: &Peer, body: &Value) {
    let res = client
        .post(format!("{}/api/v2/alerts", am.base))
        .json(body)
        .send()
        .await
        .expect("post to alertmanager");
    assert_eq!(res.status(), StatusCode::OK, "{:?}", res.text().await);
}

/// The incidents the app holds, newest first.
async fn incidents(app: &TestApp) -> Vec<Value> {
    let v: Value = app
        .get(&app.responder, "/api/v1/incidents")
        .await
        .json()
        .await
        .expect("json");
    v["incidents"].as_array().cloned().unwrap_or_default()
}

async fn alerts_of(app: &TestApp, id: &str) -> Value {
    let res = app
        .get(&app.responder, &format!("/api/v1/incidents/{id}/alerts"))
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    res.json().await.expect("json")
}

/// A second-precision RFC 3339 UTC instant `offset_secs` from now.
fn instant(offset_secs: i64) -> String {
    let t = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(offset_secs);
    t.round(jiff::Unit::Second).expect("round").to_string()
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one end-to-end scenario: each step acts on what the steps before it left, so it reads top to bottom"
)]
async fn a_real_alertmanager_opens_an_incident_and_its_resolution_resolves_the_alerts_only() {
    let Some(binary) = alertmanager_binary() else {
        crate::skip::skip(
            "the real-Alertmanager test",
            "no Alertmanager binary (install Debian's prometheus-alertmanager, as .ci/run does, \
             or set INCIDENTMIND_ALERTMANAGER_BIN)",
            crate::skip::Required::InCi(Some("INCIDENTMIND_REQUIRE_ALERTMANAGER")),
        );
        return;
    };
    let app = spawn_app().await;
    let res = app
        .post_json(
            &app.admin,
            "/api/v1/integrations",
            json!({"name": "real-alertmanager", "source": "alertmanager",
                   "default_service": "platform", "severity_map": {"page": "SEV1"}}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let integration: Value = res.json().await.expect("json");
    let secret = integration["secret"].as_str().expect("secret").to_string();
    let webhook = app.url(integration["webhook_path"].as_str().expect("webhook_path"));

    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path(), &webhook, &secret);
    let client = reqwest::Client::new();
    let am = start(&binary, dir.path(), &config, &client).await;

    // Firing: Alertmanager groups both alerts and delivers them to the webhook.
    let starts_at = instant(-60);
    post_alerts(&client, &am, &alerts(&starts_at, None)).await;
    let incident = am
        .eventually("the app opened no incident", || async {
            incidents(&app).await.into_iter().next()
        })
        .await;
    let id = incident["id"].as_str().expect("id").to_string();
    let firing = am
        .eventually("the incident does not show both alerts", || async {
            let a = alerts_of(&app, &id).await;
            (a["summary"] == "2 of 2 firing").then_some(a)
        })
        .await;
    assert_eq!(incidents(&app).await.len(), 1, "one group, one incident");
    let shown: Value = app
        .get(&app.responder, &format!("/api/v1/incidents/{id}"))
        .await
        .json()
        .await
        .expect("json");
    // The app's mapping: the group's common `summary` annotation is the title, the `service`
    // label the service, `severity: page` → SEV1 through the integration's map.
    assert_eq!(shown["title"], "payments-api p99 latency above 2s for 5m");
    assert_eq!(shown["service"], "payments-api");
    assert_eq!(shown["severity"], "SEV1");
    assert_eq!(shown["state"], "investigating");
    assert_eq!(shown["opened_by"], "integration:real-alertmanager");
    assert_eq!(firing["group"]["source"], "alertmanager");
    assert_eq!(firing["group"]["integration"], "real-alertmanager");
    assert!(
        firing["group"]["key"]
            .as_str()
            .is_some_and(|k| k.contains("alertname=\"PaymentsLatencyHigh\"")),
        "Alertmanager's groupKey: {}",
        firing["group"]
    );
    // The app keeps Alertmanager's own fingerprints.
    let am_alerts: Value = client
        .get(format!("{}/api/v2/alerts", am.base))
        .send()
        .await
        .expect("alertmanager alerts")
        .json()
        .await
        .expect("json");
    let mut am_fingerprints: Vec<String> = am_alerts
        .as_array()
        .expect("array")
        .iter()
        .map(|a| a["fingerprint"].as_str().expect("fingerprint").to_string())
        .collect();
    am_fingerprints.sort();
    let fingerprints = |a: &Value| {
        let mut f: Vec<String> = a["alerts"]
            .as_array()
            .expect("alerts")
            .iter()
            .map(|x| x["fingerprint"].as_str().expect("fingerprint").to_string())
            .collect();
        f.sort();
        f
    };
    assert_eq!(fingerprints(&firing), am_fingerprints);
    for a in firing["alerts"].as_array().expect("alerts") {
        assert_eq!(a["status"], "firing");
        assert_eq!(a["name"], "PaymentsLatencyHigh");
        assert_eq!(a["severity"], "SEV1");
        assert_eq!(a["service"], "payments-api");
        assert_eq!(a["starts_at"], json!(starts_at));
        assert_eq!(
            a["ends_at"],
            Value::Null,
            "Alertmanager sends the zero endsAt"
        );
    }

    // Resolved: the same alerts with `endsAt` in the past; Alertmanager sends the resolved
    // notification (`send_resolved: true`) at the next group interval.
    let ends_at = instant(-1);
    // The sender's instants: 59 s plus however long the firing phase took (whole seconds).
    let sent_duration = ends_at
        .parse::<jiff::Timestamp>()
        .expect("ends_at")
        .as_second()
        - starts_at
            .parse::<jiff::Timestamp>()
            .expect("starts_at")
            .as_second();
    assert!(sent_duration >= 59, "{starts_at} .. {ends_at}");
    post_alerts(&client, &am, &alerts(&starts_at, Some(&ends_at))).await;
    let resolved = am
        .eventually("the alerts were not resolved", || async {
            let a = alerts_of(&app, &id).await;
            (a["summary"] == "0 of 2 firing").then_some(a)
        })
        .await;
    assert_eq!(resolved["firing"], 0);
    assert_eq!(resolved["resolved"], 2);
    assert_eq!(fingerprints(&resolved), am_fingerprints, "same alerts");
    for a in resolved["alerts"].as_array().expect("alerts") {
        assert_eq!(a["status"], "resolved");
        assert_eq!(a["ends_at"], json!(ends_at));
        assert_eq!(a["duration_seconds"], sent_duration);
        assert!(a["resolved_received_at"].is_string(), "{a}");
    }
    // Resolved alerts never resolve the incident: a person does, with a summary and a root cause.
    let shown: Value = app
        .get(&app.responder, &format!("/api/v1/incidents/{id}"))
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(shown["state"], "investigating");
    let last_alerts_event = shown["timeline"]
        .as_array()
        .expect("timeline")
        .iter()
        .rev()
        .find(|e| e["kind"] == "alerts")
        .expect("an alerts event");
    assert_eq!(
        last_alerts_event["detail"],
        "payments-api p99 latency above 2s for 5m: 0 of 2 firing — every alert resolved; the \
         incident stays open until a person resolves it"
    );
    // The alerts' evidence is added after the delivery's transaction has committed the alert
    // states (services::ingest::apply), so the last record may land just after "0 of 2 firing"
    // shows: wait for it, then check that no more come.
    let alert_evidence = || async {
        sqlx::query_scalar::<_, i64>(
            "SELECT COUNT(*) FROM evidence WHERE incident_id = $1 AND kind = 'alert'",
        )
        .bind(&id)
        .fetch_one(&app.pool)
        .await
        .expect("count")
    };
    am.eventually("one evidence record per alert and status", || async {
        (alert_evidence().await >= 4).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        alert_evidence().await,
        4,
        "one evidence record per alert and status"
    );
    assert_eq!(incidents(&app).await.len(), 1, "no second incident");
}
