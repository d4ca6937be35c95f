//! An answer over 16 MiB is read as a stream (issue #57, 7): the first series up to the cap are
//! kept and stored, and the note says how many were left out, where such an answer was once a
//! 502 that stored nothing.

use std::time::Duration;

use serde_json::json;

use crate::helpers::spawn_app_with;
use crate::prometheus::{content_of, deliver, delivery, evidence_of, notes_of, pulled};
use crate::prometheus_stub::{start_stub, stub_settings};
use crate::webhooks::integration;

#[tokio::test]
async fn an_answer_over_sixteen_mebibytes_keeps_the_first_series_and_says_how_many_were_left_out() {
    let stub = start_stub().await;
    let mut settings = stub_settings(&stub);
    if let Some(p) = settings.prometheus.as_mut() {
        // Reading 18 MB in a debug build takes a moment.
        p.timeout = Duration::from_secs(30);
    }
    let app = spawn_app_with(settings).await;
    let (_, secret) = integration(&app, "am", "alertmanager", json!({})).await;
    let body = delivery(
        "g-huge",
        "2026-12-04T10:00:00Z",
        &[("fp-huge", "Huge", "huge")],
    );
    let (id, _) = deliver(&app, &secret, &body).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let kept = loop {
        let kept = pulled(&evidence_of(&app, &id).await);
        if !kept.is_empty() {
            break kept;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no pulled evidence: {:?}",
            notes_of(&app, &id).await
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let doc = content_of(&app, kept[0]["id"].as_i64().unwrap()).await;
    assert_eq!(doc["data"]["result"].as_array().unwrap().len(), 5);
    assert_eq!(
        doc["data"]["result"][0]["values"].as_array().unwrap().len(),
        100
    );
    let notice = doc["notice"].as_str().unwrap();
    assert!(
        notice.contains("3000 series matched; only the first 5 are kept"),
        "{notice}"
    );
}
