//! A fact that matches best is not buried (issue #57, 9): a free-standing note whose meaning
//! match is much the strongest is recalled among the first results, with or without a service,
//! although every record of every learned incident inherits its incident's rank.

use std::sync::Arc;

use incidentmind::domain::MemoryKind;
use incidentmind::domain::memory::NewRecord;
use incidentmind::memory::Embedder;
use incidentmind::memory::embeddings::EmbedError;
use incidentmind::memory::recall::{RecallQuery, recall};
use incidentmind::services::memory as msvc;

use crate::helpers::spawn_app_with_embedder;

/// Words that mean the same thing to the stand-in model: one dimension each.
const CONCEPTS: &[&[&str]] = &[
    &["database", "postgres", "pg"],
    &["storage", "disk", "space"],
    &["journal", "wal", "archiving"],
];

/// An in-process embedder: one dimension per concept present, plus a constant one.
#[derive(Debug)]
struct Concepts;

#[async_trait::async_trait]
impl Embedder for Concepts {
    fn model(&self) -> &str {
        "concepts-notes-test"
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

#[tokio::test]
async fn a_note_with_much_the_strongest_meaning_match_is_among_the_first_results() {
    let app = spawn_app_with_embedder(Arc::new(Concepts)).await;
    let mut note = NewRecord::new(
        MemoryKind::ServiceFact,
        "The primary database host ran out of storage and journal archiving stopped.",
        "victor",
    );
    note.services = vec!["ledger-db".into()];
    let note = msvc::write(&app.db, note).await.unwrap();
    // Four past incidents, each with three records that match the question weakly.
    for n in 1..=4 {
        let incident = app
            .open_incident(&format!("Shop {n} slow"), &format!("shop-{n}"))
            .await;
        for text in [
            "Database failover took four minutes",
            "Replica lag grew during the nightly database backup",
            "Checkout errors followed the database restart",
        ] {
            let mut r = NewRecord::new(MemoryKind::Symptom, format!("{text} ({n})"), "victor");
            r.incident_id = Some(incident.clone());
            r.services = vec![format!("shop-{n}")];
            msvc::write(&app.db, r).await.unwrap();
        }
    }
    incidentmind::memory::embeddings::catch_up(&app.memory)
        .await
        .unwrap();
    for service in [None, Some("shop-1".to_string())] {
        let res = recall(
            &app.memory,
            &RecallQuery {
                text: "pg disk".into(),
                service: service.clone(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
        let ids: Vec<i64> = res.results.iter().map(|r| r.memory.id).collect();
        let at = ids.iter().position(|id| *id == note.id);
        assert!(
            at.is_some_and(|p| p <= 1),
            "service {service:?}: the note at {at:?} of {ids:?}"
        );
    }
}
