//! What Learn wrote is recalled by the very next investigation (issue #57, 1): an incident
//! learned a moment ago, matching only by meaning, is found although no memory worker has built
//! its document or embedded its records yet.

use std::sync::Arc;

use incidentmind::memory::Embedder;
use incidentmind::memory::embeddings::EmbedError;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app_with_embedder};

/// Words that mean the same thing to the stand-in model: one dimension each.
const CONCEPTS: &[&[&str]] = &[&["marmot", "badger"], &["teal", "cyan"]];

/// An in-process embedder: one dimension per concept present, plus a constant one.
#[derive(Debug)]
struct Concepts;

#[async_trait::async_trait]
impl Embedder for Concepts {
    fn model(&self) -> &str {
        "concepts-test"
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts
            .iter()
            .map(|t| {
                let lower = t.to_lowercase();
                let words: Vec<&str> = lower.split(|c: char| !c.is_alphanumeric()).collect();
                let mut v: Vec<f32> = CONCEPTS
                    .iter()
                    .map(|c| f32::from(u8::from(c.iter().any(|w| words.contains(w)))))
                    .collect();
                v.push(0.1);
                v
            })
            .collect())
    }
}

async fn ok(app: &TestApp, token: &str, path: &str, body: Value) -> Value {
    let res = app.post_json(token, path, body).await;
    assert!(res.status().is_success(), "{path}: {}", res.status());
    res.json().await.unwrap()
}

async fn open(app: &TestApp, title: &str, service: &str, description: &str) -> String {
    let v = ok(
        app,
        &app.responder,
        "/api/v1/incidents",
        json!({"title": title, "service": service, "severity": "SEV2", "description": description}),
    )
    .await;
    v["id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn the_investigation_right_after_a_learn_recalls_what_it_wrote() {
    let app = spawn_app_with_embedder(Arc::new(Concepts)).await;
    let learned = open(&app, "Nightly jobs idle", "archive-node", "uploads hang").await;
    let base = format!("/api/v1/incidents/{learned}");
    ok(
        &app,
        &app.responder,
        &format!("{base}/resolve"),
        json!({"summary": "Moved old segments away.", "root_cause": "The marmot index turned teal."}),
    )
    .await;
    let res = app
        .post_json(&app.responder, &format!("{base}/postmortem"), json!({}))
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    app.write_trigger(&learned).await;
    ok(
        &app,
        &app.reviewer,
        &format!("{base}/postmortem/confirm"),
        json!({}),
    )
    .await;
    ok(&app, &app.reviewer, &format!("{base}/learn"), json!({})).await;

    // At once, a new incident in other words (no word in common with the learned one).
    let id = open(
        &app,
        "Badger shards cyan",
        "metrics-ingest",
        "lookups refused",
    )
    .await;
    let inv = ok(
        &app,
        &app.responder,
        &format!("/api/v1/incidents/{id}/investigate"),
        json!({}),
    )
    .await;
    let recalled: Vec<&Value> = inv["recalled"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["incident_id"] == learned.as_str())
        .collect();
    assert!(
        !recalled.is_empty(),
        "the incident learned a moment ago is recalled: {inv}"
    );
    assert!(
        !inv["notice"]
            .as_str()
            .unwrap_or_default()
            .contains("still being indexed"),
        "{inv}"
    );
}
