//! Big alert groups are not dropped (issue #57, 6): a webhook body over the app-wide body limit
//! but under the webhooks' own is accepted, and Alertmanager's `truncatedAlerts` is read and
//! said ("2 shown, 3 more not sent by Alertmanager").

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::spawn_app;
use crate::webhooks::integration;

/// An Alertmanager v4 body of `alerts` firing alerts, each with `pad` characters of
/// description, and `truncated` alerts said to be left out.
fn group(key: &str, alerts: usize, pad: usize, truncated: usize) -> Value {
    let alerts: Vec<Value> = (0..alerts)
        .map(|i| {
            json!({
                "status": "firing",
                "labels": {"alertname": "DiskPressure", "service": "object-store", "instance": format!("store-{i}")},
                "annotations": {"summary": "disk pressure", "description": "d".repeat(pad)},
                "startsAt": "2026-12-01T10:00:00Z",
                "endsAt": "0001-01-01T00:00:00Z",
                "fingerprint": format!("{i:016x}"),
            })
        })
        .collect();
    json!({
        "version": "4", "groupKey": key, "status": "firing", "receiver": "incidentmind",
        "groupLabels": {"alertname": "DiskPressure"},
        "commonLabels": {"alertname": "DiskPressure", "service": "object-store"},
        "commonAnnotations": {"summary": "disk pressure"},
        "externalURL": "http://alertmanager.test", "truncatedAlerts": truncated,
        "alerts": alerts,
    })
}

#[tokio::test]
async fn a_group_over_the_body_limit_is_accepted_and_truncated_alerts_are_said() {
    let app = spawn_app().await;
    let (_, secret) = integration(&app, "am", "alertmanager", json!({})).await;
    let deliver = |body: Value| {
        app.client
            .post(app.url("/api/v1/webhooks/alertmanager"))
            .bearer_auth(&secret)
            .json(&body)
            .send()
    };

    // About 1.2 MB, over the app-wide 1 MiB body limit: accepted, every alert recorded.
    let big = group("{}:{alertname=\"DiskPressure\"}", 500, 2_300, 0);
    assert!(serde_json::to_vec(&big).unwrap().len() > 1_150_000);
    let res = deliver(big).await.unwrap();
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    let v: Value = res.json().await.unwrap();
    assert_eq!(v["alerts"]["firing"], 500, "{v}");

    // A group of 5 of which Alertmanager sent 2.
    let res = deliver(group("{}:{alertname=\"Other\"}", 2, 10, 3))
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    let v: Value = res.json().await.unwrap();
    let g = &v["groups"][0];
    assert_eq!(g["not_sent"], 3, "{v}");
    assert_eq!(g["summary"], "2 shown, 3 more not sent by Alertmanager");
    let id = g["incident"].as_str().unwrap();
    let inc: Value = app
        .get(&app.responder, &format!("/api/v1/incidents/{id}"))
        .await
        .json()
        .await
        .unwrap();
    assert!(
        inc["timeline"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["detail"]
                .as_str()
                .is_some_and(|d| d.ends_with("2 shown, 3 more not sent by Alertmanager"))),
        "{inc}"
    );

    // A `truncatedAlerts` that is not a whole number is a 400 naming it.
    let mut bad = group("{}:{alertname=\"Bad\"}", 1, 10, 0);
    bad["truncatedAlerts"] = json!("three");
    let res = deliver(bad).await.unwrap();
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    let v: Value = res.json().await.unwrap();
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("truncatedAlerts:"),
        "{v}"
    );
}
