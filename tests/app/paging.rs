//! Every incident is reachable at the documented largest page (issue #57, 5): `limit=1000`
//! answers with a `next` cursor when more incidents exist.

use incidentmind::domain::{NewIncident, Severity};
use serde_json::Value;

use crate::helpers::spawn_app;

#[tokio::test]
async fn the_largest_page_has_a_next_cursor_when_more_incidents_exist() {
    let app = spawn_app().await;
    for n in 0..1_001 {
        let new = NewIncident {
            title: format!("Queue backlog number {n}"),
            service: "billing-worker".into(),
            severity: Severity::Sev3,
            description: "jobs wait".into(),
        };
        incidentmind::store::IncidentWrite::create(&app.db, &new, "rita")
            .await
            .unwrap()
            .commit()
            .await
            .unwrap();
    }
    let first: Value = app
        .get(&app.responder, "/api/v1/incidents?limit=1000")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(first["incidents"].as_array().unwrap().len(), 1_000);
    let next = first["next"].as_str().expect("a next cursor at limit=1000");
    let second: Value = app
        .client
        .get(app.url("/api/v1/incidents"))
        .query(&[("limit", "1000"), ("after", next)])
        .bearer_auth(&app.responder)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(second["incidents"].as_array().unwrap().len(), 1);
    assert!(second.get("next").is_none(), "{second}");
    // Over the largest page is the largest page.
    let over: Value = app
        .get(&app.responder, "/api/v1/incidents?limit=5000")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(over["incidents"].as_array().unwrap().len(), 1_000);
}
