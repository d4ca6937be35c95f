//! The failure-mode fallback through the evidence door (issue #52): a pasted line no pattern
//! knows is stored tagged by meaning, its observation saying so with the similarity, on the
//! incident's first evidence (no redaction map yet) and on a later one (the map stored). The
//! lines are written here in our own words.

use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::spawn_app_with_embedder;

const HANDLES: &str = "2024-05-01T10:00:00Z ERROR billing: every pooled database handle is checked out, the caller gave up after 8s";
const VOLUME: &str = "2024-05-01T10:00:02Z ERROR uploads: cannot save the file, the volume mounted at /srv/data has zero bytes free";

/// The tags and text of the observation whose text holds `needle`.
fn observation<'a>(v: &'a Value, needle: &str) -> &'a Value {
    v["observations"]
        .as_array()
        .expect("observations")
        .iter()
        .find(|o| o["text"].as_str().is_some_and(|t| t.contains(needle)))
        .unwrap_or_else(|| panic!("no observation holding {needle}: {v}"))
}

#[tokio::test]
async fn a_pasted_line_in_new_words_is_stored_recognised_by_meaning_on_first_and_later_evidence() {
    let model = incidentmind::memory::embeddings::BuiltinEmbedder::load(
        &incidentmind::memory::minilm::default_dir(),
    )
    .expect("the built-in model loads");
    let app = spawn_app_with_embedder(Arc::new(model)).await;
    // Before the meanings are embedded a paste is tagged by patterns only, without waiting.
    assert!(app.memory.failure_mode_meanings_ready().is_none());
    assert!(app.memory.failure_mode_meanings().await.is_some());

    let id = app
        .open_incident("billing cannot reach its database", "billing")
        .await;
    for (line, tag, needle) in [
        (
            HANDLES,
            "connection_pool_exhausted",
            "pooled database handle",
        ),
        (VOLUME, "disk_full", "zero bytes free"),
    ] {
        let res = app
            .post_json(
                &app.responder,
                &format!("/api/v1/incidents/{id}/evidence"),
                json!({"kind": "logs", "content": format!("{line}\n")}),
            )
            .await;
        assert_eq!(res.status(), StatusCode::CREATED);
        let v: Value = res.json().await.expect("json");
        let o = observation(&v, needle);
        assert_eq!(o["failure_modes"], json!([tag]), "{o}");
        let text = o["text"].as_str().expect("text");
        assert!(
            text.contains(&format!(
                "failure mode {tag} recognised by meaning, similarity 0."
            )),
            "{text}"
        );
    }
}
