//! The built-in embedding model computes what sentence-transformers computes: every reference
//! vector of `../shared/data/minilm-reference.json` (all-MiniLM-L6-v2 through
//! sentence-transformers, normalised) is reproduced at cosine ≥ 0.99999, with the same number of
//! word pieces, including the emoji/CJK text and the one cut at 256 pieces. A missing reference
//! file is a loud skip locally and a failure under `CI=true`.

#[path = "support/skip.rs"]
mod skip;

use std::path::Path;

use incidentmind::memory::embeddings::BuiltinEmbedder;
use incidentmind::memory::minilm::{DIMENSIONS, MAX_WORD_PIECES};
use serde::Deserialize;

#[derive(Deserialize)]
struct Reference {
    items: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    text: String,
    token_count: usize,
    embedding: Vec<f32>,
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (na * nb)
}

#[test]
fn the_built_in_model_reproduces_the_sentence_transformers_reference_vectors() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/minilm-reference.json");
    if !path.exists() {
        skip::skip(
            "the reference-vector test",
            &format!("{} is missing", path.display()),
            skip::Required::InCi(None),
        );
        return;
    }
    let reference: Reference =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("readable")).expect("json");
    let embedder = BuiltinEmbedder::load(&incidentmind::memory::minilm::default_dir())
        .expect("the model under models/ loads");
    let model = embedder.model_ref();
    let texts: Vec<&str> = reference.items.iter().map(|i| i.text.as_str()).collect();
    // One batch (padded to the longest) and one by one must agree with the reference alike.
    let batch = model.embed(&texts).expect("embeds");
    assert!(
        reference
            .items
            .iter()
            .any(|i| i.token_count == MAX_WORD_PIECES)
    );
    for (item, got) in reference.items.iter().zip(&batch) {
        assert_eq!(got.len(), DIMENSIONS);
        assert_eq!(item.embedding.len(), DIMENSIONS);
        let alone = model.embed(&[item.text.as_str()]).expect("embeds");
        let c_batch = cosine(got, &item.embedding);
        let c_alone = cosine(&alone[0], &item.embedding);
        assert!(
            c_batch >= 0.99999 && c_alone >= 0.99999,
            "{:?}: cosine {c_batch:.5} (batch) {c_alone:.5} (alone)",
            item.text
        );
        assert_eq!(
            model.word_pieces(&item.text).expect("tokenizes"),
            item.token_count,
            "{:?}",
            item.text
        );
        let norm = got.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "unit length, got {norm}");
    }
}

/// The background lane (the backfill, vectors a page view asks for later) computes what the
/// request lane computes, on its own lower-priority threads.
#[tokio::test]
async fn the_background_lane_computes_the_same_vectors() {
    use incidentmind::memory::embeddings::Embedder;
    let embedder = BuiltinEmbedder::load(&incidentmind::memory::minilm::default_dir())
        .expect("the model under models/ loads");
    let texts = vec![
        "checkout latency rose after the deploy".to_string(),
        "disk almost full on the log volume".to_string(),
    ];
    let now = embedder.embed(&texts).await.expect("embeds");
    let later = embedder.embed_background(&texts).await.expect("embeds");
    assert_eq!(now, later);
}
