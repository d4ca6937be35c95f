//! Consolidation after an import (issue #57, 8): `consolidate` on a database whose memory was
//! imported from another one, without its incidents, ends without a foreign-key error and says
//! what it could not propose; the consolidation lifecycle survives export and import, and a
//! rerun proposes nothing new.

use incidentmind::services::consolidation::consolidate;
use incidentmind::services::memory as msvc;
use reqwest::StatusCode;

use crate::consolidation::{consolidations, replay_follow_ups};
use crate::helpers::{TestApp, spawn_app};

/// A fresh database holding `from`'s exported memory.
async fn imported(from: &TestApp) -> TestApp {
    let other = spawn_app().await;
    let jsonl = msvc::export(&from.pool).await.expect("export");
    msvc::import(&other.pool, "test", &jsonl, false)
        .await
        .expect("import");
    other
}

#[tokio::test]
async fn consolidate_after_an_import_does_not_fail_and_a_rerun_proposes_nothing_new() {
    let app = spawn_app().await;
    replay_follow_ups(&app).await;

    // Imported before any consolidation: its groups' incidents are not there.
    let other = imported(&app).await;
    let report = consolidate(&other.memory, 20)
        .await
        .expect("no foreign-key error");
    assert!(report.proposed.is_empty(), "{report}");
    assert!(report.without_incident >= 1, "{report}");
    assert!(
        report
            .to_string()
            .contains("none of their incidents is in this database"),
        "{report}"
    );

    // The original: consolidate, accept, run again.
    let first = consolidate(&app.memory, 20).await.expect("consolidate");
    assert!(!first.proposed.is_empty(), "{first}");
    for p in consolidations(&app).await {
        let res = app
            .accept_proposal(
                &app.reviewer,
                p["id"].as_i64().unwrap(),
                p["version"].clone(),
            )
            .await;
        assert_eq!(res.status(), StatusCode::OK);
    }
    let again = consolidate(&app.memory, 20).await.expect("rerun");
    assert!(again.proposed.is_empty(), "{again}");

    // Imported after: the merged rule and its marked sources came along; nothing to propose.
    let third = imported(&app).await;
    let report = consolidate(&third.memory, 20).await.expect("consolidate");
    assert!(report.proposed.is_empty(), "{report}");
    assert_eq!(report.groups, 0, "{report}");
}
