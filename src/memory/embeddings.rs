//! Embeddings (DESIGN.md §4): every durable record and every incident document gets a vector
//! of the memory's [`Embedder`] — the built-in all-MiniLM-L6-v2 ([`BuiltinEmbedder`], the
//! default, in process) or an OpenAI-compatible `/v1/embeddings` endpoint ([`OpenAiEmbedder`]).
//! Vectors are stored under the model's name, so another model's vectors (another dimension)
//! never mix with them. The memory worker ([`run_worker`]) embeds what is missing right after a
//! write wakes it, and backfills an old database in the background; recall compares the query's
//! vector with them ([`nearest_records`], [`nearest_documents`]). Never required: without an
//! embedder, or when it fails or is slow, recall runs on its other lists.
//!
//! The two embedders and the stored vector sets are here; the worker that keeps vectors current
//! is in `worker`, the nearest-vector searches in `nearest`.

use std::sync::Arc;

use super::vectors::{QuantizedSet, dot};
use std::time::Duration;

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_trait::async_trait;

use super::minilm::{self, MiniLm};
use super::{Memory, lock};
use crate::error::AppResult;
use crate::evidence::redact::redact_once;
use crate::store::embeddings as estore;
use crate::store::recall_index::RecallIndex;

mod nearest;
mod worker;

pub use nearest::{
    CHANCE_SAMPLE, Nearest, cached_query_vector, cached_text_vectors, chance_level, mean_direction,
    nearest_by_passages, nearest_documents, nearest_records, query_vector, text_vectors,
};
pub use worker::{backfill, catch_up, progress, run_worker};

/// Why an embedding call produced no vectors.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The server did not answer within the timeout.
    #[error("embeddings endpoint timed out after {0:?}")]
    Timeout(Duration),
    /// Transport error or an error status.
    #[error("embeddings endpoint failed: {0}")]
    Transport(String),
    /// The reply was not one vector per input, all of one dimension.
    #[error("embeddings endpoint answered with an unusable body: {0}")]
    Invalid(String),
}

/// Why [`backfill`] stored nothing.
#[derive(Debug, thiserror::Error)]
pub enum BackfillError {
    /// The endpoint failed.
    #[error(transparent)]
    Embed(#[from] EmbedError),
    /// The database failed.
    #[error(transparent)]
    Store(#[from] crate::error::AppError),
}

/// Something that turns texts into vectors of one model.
#[async_trait]
pub trait Embedder: Send + Sync + std::fmt::Debug {
    /// The model name the vectors are stored under.
    fn model(&self) -> &str;

    /// One vector per text, in order, all of the same dimension.
    ///
    /// # Errors
    /// [`EmbedError`] when the endpoint fails, is slow or answers with something else.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError>;

    /// As [`Self::embed`], for work nobody waits on (the backfill of stored records and
    /// documents): the built-in model runs it on threads of lower priority
    /// ([`crate::startup::BACKGROUND_NICE`]), so requests that arrive meanwhile are not queued
    /// behind it. An endpoint has no such lane: the default is [`Self::embed`].
    ///
    /// # Errors
    /// As [`Self::embed`].
    async fn embed_background(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed(texts).await
    }

    /// The built-in model behind this embedder, if it is the built-in one: what the failure-mode
    /// fallback ([`crate::memory::failure_modes`]) runs on, its rule being tuned on that model.
    fn builtin_model(&self) -> Option<Arc<MiniLm>> {
        None
    }
}

/// The threads the built-in model's background lane runs on: as many as rayon's global pool
/// (the model's matrix products split over `rayon::join`, which stays on the pool it is called
/// in), each at [`crate::startup::BACKGROUND_NICE`]. Built on first use; `None` if the threads
/// could not be started (the lane then runs on the blocking pool).
fn background_threads() -> Option<&'static rayon::ThreadPool> {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(rayon::current_num_threads())
            .thread_name(|i| format!("embed-background-{i}"))
            .start_handler(|_| {
                crate::startup::lower_this_thread();
            })
            // rayon aborts the process on a panic in `spawn` unless a handler takes it; the
            // caller then gets a dropped reply (an embedding error), as from `spawn_blocking`.
            .panic_handler(|_| tracing::error!("a background embedding panicked"))
            .build()
            .map_err(|e| tracing::warn!(error = %e, "background model threads not started"))
            .ok()
    })
    .as_ref()
}

/// Connection settings of an OpenAI-compatible embeddings endpoint.
#[derive(Debug, Clone)]
pub struct EmbeddingConfig {
    /// Base URL ending in `/v1` (e.g. `http://127.0.0.1:11434/v1` for Ollama).
    pub base_url: String,
    /// Model name (e.g. `text-embedding-3-small`, `nomic-embed-text`).
    pub model: String,
    /// API key (empty for local servers).
    pub api_key: String,
    /// Whole-call timeout.
    pub timeout: Duration,
}

/// [`Embedder`] over `POST {base_url}/embeddings` (OpenAI's embeddings API, which Azure OpenAI,
/// Ollama, vLLM and llama.cpp's server also speak), with no automatic retries.
#[derive(Debug)]
pub struct OpenAiEmbedder {
    client: Client<OpenAIConfig>,
    config: EmbeddingConfig,
}

impl OpenAiEmbedder {
    /// Builds the client.
    ///
    /// # Errors
    /// When the HTTP client cannot be built.
    pub fn new(config: EmbeddingConfig) -> anyhow::Result<Self> {
        let client = crate::openai::client(&config.base_url, &config.api_key, config.timeout)?;
        Ok(Self { client, config })
    }
}

/// The reply shape of the embeddings API that is used: `data[].embedding` and `data[].index`.
#[derive(serde::Deserialize)]
struct Reply {
    data: Vec<ReplyItem>,
}

#[derive(serde::Deserialize)]
struct ReplyItem {
    embedding: Vec<f32>,
    #[serde(default)]
    index: Option<usize>,
}

#[async_trait]
impl Embedder for OpenAiEmbedder {
    fn model(&self) -> &str {
        &self.config.model
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let request = serde_json::json!({
            "model": self.config.model,
            "input": texts,
            "encoding_format": "float",
        });
        let embeddings = self.client.embeddings();
        let call = embeddings.create_byot::<_, Reply>(request);
        let reply = tokio::time::timeout(self.config.timeout, call)
            .await
            .map_err(|_| EmbedError::Timeout(self.config.timeout))?
            .map_err(|e| EmbedError::Transport(e.to_string()))?;
        let mut items = reply.data;
        items.sort_by_key(|i| i.index.unwrap_or(usize::MAX));
        let vectors: Vec<Vec<f32>> = items.into_iter().map(|i| i.embedding).collect();
        check_shape(texts.len(), &vectors)?;
        Ok(vectors)
    }
}

/// One non-empty, finite vector per input, all of one dimension.
fn check_shape(inputs: usize, vectors: &[Vec<f32>]) -> Result<(), EmbedError> {
    if vectors.len() != inputs {
        return Err(EmbedError::Invalid(format!(
            "{} vectors for {inputs} inputs",
            vectors.len()
        )));
    }
    let dim = vectors.first().map_or(0, Vec::len);
    if vectors
        .iter()
        .any(|v| v.is_empty() || v.len() != dim || v.iter().any(|x| !x.is_finite()))
    {
        return Err(EmbedError::Invalid(
            "vectors of different dimensions, empty or not finite".into(),
        ));
    }
    Ok(())
}

/// [`Embedder`] over the built-in model ([`MiniLm`]), run on tokio's blocking pool so the async
/// runtime never waits on a forward pass; background work on threads of lower priority
/// ([`Embedder::embed_background`]).
#[derive(Debug, Clone)]
pub struct BuiltinEmbedder {
    model: Arc<MiniLm>,
}

impl BuiltinEmbedder {
    /// Loads the model from `dir` (≈ 0.3 s, ≈ 90 MB of f32 weights).
    ///
    /// # Errors
    /// [`minilm::ModelError`] for a missing or malformed model file.
    pub fn load(dir: &std::path::Path) -> Result<Self, minilm::ModelError> {
        Ok(Self {
            model: Arc::new(MiniLm::load(dir)?),
        })
    }

    /// The loaded model, for blocking callers (tests, benchmarks).
    pub fn model_ref(&self) -> &MiniLm {
        &self.model
    }
}

#[async_trait]
impl Embedder for BuiltinEmbedder {
    fn model(&self) -> &str {
        minilm::MODEL_NAME
    }

    fn builtin_model(&self) -> Option<Arc<MiniLm>> {
        Some(Arc::clone(&self.model))
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let model = Arc::clone(&self.model);
        let texts = texts.to_vec();
        tokio::task::spawn_blocking(move || {
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            model.embed(&refs)
        })
        .await
        .map_err(|e| EmbedError::Transport(format!("embedding task failed: {e}")))?
        .map_err(|e| EmbedError::Invalid(e.to_string()))
    }

    async fn embed_background(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let Some(threads) = background_threads() else {
            return self.embed(texts).await;
        };
        let model = Arc::clone(&self.model);
        let texts = texts.to_vec();
        let (tx, rx) = tokio::sync::oneshot::channel();
        threads.spawn(move || {
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            // The receiver is gone only when the caller gave up (a timeout): nothing to tell.
            let _ = tx.send(model.embed(&refs));
        });
        rx.await
            .map_err(|e| EmbedError::Transport(format!("embedding task failed: {e}")))?
            .map_err(|e| EmbedError::Invalid(e.to_string()))
    }
}

/// Longest text embedded for one record, document or query, in characters. The built-in model
/// reads at most 256 word pieces (≈ 1,000–1,500 characters of English) anyway; endpoints take
/// more, but a record's first few sentences say what it is about.
pub const MAX_CHARS: usize = 2_000;

/// Texts embedded per call of the backfill. An endpoint may pad a batch to its longest text (the
/// built-in model runs each text on its own), so the texts are sorted by length first.
const BATCH: usize = 16;

/// Record vectors read so far for one model, quantised ([`QuantizedSet`]): one per record, and
/// rules' part vectors (ALWAYS, BECAUSE, SCOPE), with the last rowid read of each table. Shared
/// by reference: scoring never holds a lock.
#[derive(Debug, Clone)]
pub struct VectorSet {
    epoch: String,
    vectors: QuantizedSet,
    last: i64,
    parts: QuantizedSet,
    last_part: i64,
}

impl Default for VectorSet {
    fn default() -> Self {
        Self {
            epoch: String::new(),
            vectors: QuantizedSet::new(true),
            last: 0,
            parts: QuantizedSet::new(false),
            last_part: 0,
        }
    }
}

/// Incident-document vectors for one model: `(incident id, unit vector)`, at one state of the
/// table (`(epoch, rows, max rowid, generation)`).
#[derive(Debug, Default, Clone)]
pub struct DocVectors {
    state: (String, i64, i64, i64),
    vectors: Vec<(String, Vec<f32>)>,
}

/// Passage vectors for one model, grouped by incident: `(incident id, unit vectors)`, at one
/// state of the table (`(epoch, rows, max rowid)`).
#[derive(Debug, Default, Clone)]
pub struct PassageVectors {
    state: (String, i64, i64),
    incidents: Vec<(String, Vec<Vec<f32>>)>,
}

/// After a failed query embedding, recall runs without vectors this long before asking again,
/// so a hung endpoint costs one wait, not one per page.
pub(super) const FAILURE_COOLDOWN: Duration = Duration::from_secs(30);
/// How long recall waits for the query's embedding before it goes on without the lists.
const QUERY_TIMEOUT: Duration = Duration::from_secs(5);
/// Rows read per query of new vectors.
const READ_BATCH: i64 = 5_000;

fn normalized(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        for x in &mut v {
            *x /= norm;
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lane_dot_product_equals_the_plain_one_at_any_length() {
        for n in [0usize, 3, 8, 13, 384] {
            let a: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
            let b: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).cos()).collect();
            let plain: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
            assert!((dot(&a, &b) - plain).abs() < 1e-4, "n = {n}");
        }
    }

    #[test]
    fn a_reply_of_the_wrong_shape_is_refused() {
        assert!(check_shape(2, &[vec![1.0, 0.0], vec![0.0, 1.0]]).is_ok());
        assert!(check_shape(2, &[vec![1.0, 0.0]]).is_err());
        assert!(check_shape(2, &[vec![1.0, 0.0], vec![1.0]]).is_err());
        assert!(check_shape(1, &[vec![f32::NAN]]).is_err());
        assert!(check_shape(1, &[vec![]]).is_err());
    }

    /// The background lane's threads run at the background niceness (field 19 of
    /// `/proc/thread-self/stat`, proc(5)), so a request thread is not queued behind them.
    #[test]
    #[cfg(target_os = "linux")]
    fn the_background_lane_runs_at_lower_priority() {
        let nice_here = || {
            let stat = std::fs::read_to_string("/proc/thread-self/stat").expect("proc");
            // The command name (field 2) is in parentheses and may hold spaces: count after it.
            let after = &stat[stat.rfind(')').expect("stat") + 2..];
            after
                .split(' ')
                .nth(16)
                .expect("field 19")
                .parse::<i32>()
                .expect("nice")
        };
        let threads = background_threads().expect("background threads start");
        assert_eq!(threads.install(nice_here), crate::startup::BACKGROUND_NICE);
        assert_eq!(nice_here(), 0, "the caller's thread keeps its priority");
    }

    #[test]
    fn vectors_are_scaled_to_unit_length() {
        assert_eq!(normalized(vec![3.0, 4.0]), vec![0.6, 0.8]);
        assert_eq!(normalized(vec![0.0, 0.0]), vec![0.0, 0.0]);
    }
}
