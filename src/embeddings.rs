//! Optional embeddings (DESIGN.md §4): when an OpenAI-compatible `/v1/embeddings` endpoint is
//! configured, durable records get a vector each (filled in by [`backfill`], in the background
//! of `serve`), and recall adds one more ranked list to its fusion: the records whose vectors are
//! nearest the query's by cosine similarity. Never required: without an endpoint, or when it
//! fails or is slow, recall runs on its other lists and says nothing is missing.
//!
//! The embedder is registered per database ([`register`]): the vectors stored in a database are
//! those of one model, and every recall on that database (UI, API, analyst) uses it.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_trait::async_trait;
use sqlx::SqlitePool;

use crate::error::AppResult;
use crate::redact::redact_once;
use crate::store::embeddings as estore;
use crate::store::recall_index::RecallIndex;

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
        let client =
            crate::analyst::llm::openai_client(&config.base_url, &config.api_key, config.timeout)?;
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

/// Per database file: its embedder.
static EMBEDDERS: LazyLock<Mutex<HashMap<PathBuf, Arc<dyn Embedder>>>> =
    LazyLock::new(Mutex::default);

/// Uses `embedder` for every recall on the database of `pool` (and for [`backfill`]).
pub fn register(pool: &SqlitePool, embedder: Arc<dyn Embedder>) {
    let db = pool.connect_options().get_filename().to_path_buf();
    EMBEDDERS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(db, embedder);
}

/// The embedder registered for the database of `pool`, if any.
pub fn registered(pool: &SqlitePool) -> Option<Arc<dyn Embedder>> {
    let db = pool.connect_options().get_filename().to_path_buf();
    EMBEDDERS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&db)
        .cloned()
}

/// Longest text sent for one record or query, in characters (models take ~8k tokens at most).
const MAX_CHARS: usize = 4_000;

/// Embeds up to `batch` durable, non-retracted records that have no vector for the embedder's
/// model yet (oldest first) and stores the vectors. Returns how many were stored (0: none left).
/// Record texts are stored redacted: nothing unredacted leaves the machine.
///
/// # Errors
/// [`BackfillError`]: the endpoint's failure, or a database error.
pub async fn backfill(
    pool: &SqlitePool,
    embedder: &dyn Embedder,
    batch: i64,
) -> Result<usize, BackfillError> {
    let todo = estore::missing(pool, embedder.model(), batch).await?;
    if todo.is_empty() {
        return Ok(0);
    }
    let texts: Vec<String> = todo
        .iter()
        .map(|(_, t)| crate::evidence::truncate_chars(t, MAX_CHARS).to_string())
        .collect();
    let ids: Vec<i64> = todo.iter().map(|(id, _)| *id).collect();
    let rows: Vec<(i64, Vec<f32>)> = match embedder.embed(&texts).await {
        Ok(vectors) => ids.into_iter().zip(vectors).collect(),
        Err(e) if texts.len() == 1 => return Err(e.into()),
        // One text the endpoint refuses for good must not stall every record after it: embed
        // them one by one. Those refused while others pass get an empty vector (never compared,
        // never asked again); when every one fails the endpoint is down and nothing is marked.
        Err(e) => {
            let mut rows = Vec::with_capacity(texts.len());
            let mut refused = Vec::new();
            for (id, text) in ids.into_iter().zip(texts) {
                match embedder.embed(std::slice::from_ref(&text)).await {
                    Ok(mut v) if v.len() == 1 => rows.push((id, v.remove(0))),
                    _ => refused.push(id),
                }
            }
            if rows.is_empty() {
                return Err(e.into());
            }
            tracing::warn!(?refused, error = %e, "embeddings endpoint refused some records; skipped");
            rows.extend(refused.into_iter().map(|id| (id, Vec::new())));
            rows
        }
    };
    estore::store(pool, embedder.model(), &rows).await?;
    Ok(rows.len())
}

/// Runs [`backfill`] for ever: batches of 32 while records are missing vectors, then every
/// `idle`; after an endpoint failure it logs a warning and waits `idle` before trying again.
pub async fn backfill_forever(pool: SqlitePool, embedder: Arc<dyn Embedder>, idle: Duration) {
    loop {
        match backfill(&pool, embedder.as_ref(), 32).await {
            Ok(0) => tokio::time::sleep(idle).await,
            Ok(n) => tracing::debug!(n, model = embedder.model(), "embedded records"),
            Err(e) => {
                tracing::warn!(error = %e, "embedding backfill failed; recall runs without it");
                tokio::time::sleep(idle).await;
            }
        }
    }
}

/// Vectors read so far of one database and model: record id → unit vector, and the last
/// `record_embeddings` rowid read. Shared by reference: scoring never holds a lock.
#[derive(Default, Clone)]
struct VectorSet {
    vectors: HashMap<i64, Vec<f32>>,
    last: i64,
}

/// Per database file, database epoch (see [`RecallIndex::epoch`]) and model.
type VectorKey = (PathBuf, String, String);
static VECTORS: LazyLock<Mutex<HashMap<VectorKey, Arc<VectorSet>>>> = LazyLock::new(Mutex::default);
/// Held while new vectors are read, so concurrent recalls read them once.
static REFRESH: LazyLock<tokio::sync::Mutex<()>> = LazyLock::new(tokio::sync::Mutex::default);
/// Per database file: until when the endpoint is left alone after a failure.
static COOLDOWN: LazyLock<Mutex<HashMap<PathBuf, Instant>>> = LazyLock::new(Mutex::default);

/// How long recall waits for the query's embedding before it goes on without the list: an
/// engineer is waiting for the page.
const QUERY_TIMEOUT: Duration = Duration::from_secs(2);
/// After a failed query embedding, recall runs without the list this long before asking again,
/// so a hung endpoint costs one wait, not one per page.
const FAILURE_COOLDOWN: Duration = Duration::from_secs(30);
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

/// The vectors of `key` with every row stored so far.
async fn refreshed(pool: &SqlitePool, key: &VectorKey) -> AppResult<Arc<VectorSet>> {
    let current = || {
        VECTORS
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
            .cloned()
            .unwrap_or_default()
    };
    let _refreshing = REFRESH.lock().await;
    let mut set = current();
    loop {
        let rows = estore::since(pool, &key.2, set.last, READ_BATCH).await?;
        let Some(&(last, _, _)) = rows.last() else {
            break;
        };
        let full = rows.len() as i64 == READ_BATCH;
        let s = Arc::make_mut(&mut set);
        for (_, id, v) in rows {
            s.vectors.insert(id, normalized(v));
        }
        s.last = last;
        if !full {
            break;
        }
    }
    let mut all = VECTORS.lock().unwrap_or_else(PoisonError::into_inner);
    if all.len() >= 16 && !all.contains_key(key) {
        all.clear();
    }
    all.insert(key.clone(), Arc::clone(&set));
    Ok(set)
}

/// The semantic list of recall: ids of the `limit` records of `index` whose vectors are nearest
/// (cosine) to the embedding of `text` (redacted first), best first, without
/// `exclude_incident`'s own records. `None` when no embedder is registered for the database, or
/// the endpoint or the stored vectors failed (logged, and the endpoint is left alone for
/// [`FAILURE_COOLDOWN`]): the list is optional and never fails recall. Records absent from
/// `index` (working, retracted) never appear.
pub async fn nearest(
    pool: &SqlitePool,
    index: &RecallIndex,
    text: &str,
    exclude_incident: Option<&str>,
    limit: usize,
) -> Option<Vec<i64>> {
    let embedder = registered(pool)?;
    if text.trim().is_empty() {
        return None;
    }
    let db = pool.connect_options().get_filename().to_path_buf();
    let cooling = COOLDOWN
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&db)
        .is_some_and(|until| Instant::now() < *until);
    if cooling {
        return None;
    }
    let fail = |what: &dyn std::fmt::Display| {
        tracing::warn!(error = %what, "semantic recall skipped");
        COOLDOWN
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(db.clone(), Instant::now() + FAILURE_COOLDOWN);
        None
    };
    let input = [crate::evidence::truncate_chars(&redact_once(text), MAX_CHARS).to_string()];
    let answer = tokio::time::timeout(QUERY_TIMEOUT, embedder.embed(&input))
        .await
        .unwrap_or(Err(EmbedError::Timeout(QUERY_TIMEOUT)));
    let query = match answer.map(|v| v.into_iter().next()) {
        Ok(Some(v)) => normalized(v),
        Ok(None) => return None,
        Err(e) => return fail(&e),
    };
    let key = (
        db.clone(),
        index.epoch().to_string(),
        embedder.model().to_string(),
    );
    let set = match refreshed(pool, &key).await {
        Ok(set) => set,
        Err(e) => return fail(&e),
    };
    let mut scored: Vec<(f32, i64)> = set
        .vectors
        .iter()
        .filter(|(_, v)| v.len() == query.len())
        .filter_map(|(id, v)| {
            let e = index.get(*id)?;
            if exclude_incident.is_some() && e.incident_id.as_deref() == exclude_incident {
                return None;
            }
            Some((v.iter().zip(&query).map(|(a, b)| a * b).sum(), *id))
        })
        .collect();
    scored.sort_by(|(a, ia), (b, ib)| b.total_cmp(a).then(ib.cmp(ia)));
    Some(scored.into_iter().take(limit).map(|(_, id)| id).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_of_the_wrong_shape_is_refused() {
        assert!(check_shape(2, &[vec![1.0, 0.0], vec![0.0, 1.0]]).is_ok());
        assert!(check_shape(2, &[vec![1.0, 0.0]]).is_err());
        assert!(check_shape(2, &[vec![1.0, 0.0], vec![1.0]]).is_err());
        assert!(check_shape(1, &[vec![f32::NAN]]).is_err());
        assert!(check_shape(1, &[vec![]]).is_err());
    }

    #[test]
    fn vectors_are_scaled_to_unit_length() {
        assert_eq!(normalized(vec![3.0, 4.0]), vec![0.6, 0.8]);
        assert_eq!(normalized(vec![0.0, 0.0]), vec![0.0, 0.0]);
    }
}
