//! Embeddings (DESIGN.md §4): every durable record and every incident document gets a vector
//! of the memory's [`Embedder`] — the built-in all-MiniLM-L6-v2 ([`BuiltinEmbedder`], the
//! default, in process) or an OpenAI-compatible `/v1/embeddings` endpoint ([`OpenAiEmbedder`]).
//! Vectors are stored under the model's name, so another model's vectors (another dimension)
//! never mix with them. The memory worker ([`run_worker`]) embeds what is missing right after a
//! write wakes it, and backfills an old database in the background; recall compares the query's
//! vector with them ([`nearest_records`], [`nearest_documents`]). Never required: without an
//! embedder, or when it fails or is slow, recall runs on its other lists.
//!
//! Long because the two embedders, the worker that keeps vectors current and the nearest-vector
//! searches are kept together around the stored vectors of one model.

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

/// [`Embedder`] over the built-in model ([`MiniLm`]), run on tokio's blocking pool so the async
/// runtime never waits on a forward pass.
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
const FAILURE_COOLDOWN: Duration = Duration::from_secs(30);
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

/// Embeds `texts`, stored records and documents (redacted again as stored text with
/// [`crate::evidence::redact::redact_stored`], so the quads their incident's map decided stay
/// as written, and capped first; nothing unredacted leaves the process), in
/// batches sorted by length. A batch the embedder refuses is retried text by text; a text
/// refused on its own gets an empty vector (never compared, never asked again), unless every
/// text fails, which means the embedder is down.
async fn embed_all(
    embedder: &dyn Embedder,
    texts: Vec<String>,
) -> Result<Vec<Vec<f32>>, EmbedError> {
    let prepared: Vec<String> = texts
        .iter()
        .map(|t| {
            crate::evidence::truncate_chars(&crate::evidence::redact::redact_stored(t), MAX_CHARS)
                .to_string()
        })
        .collect();
    let mut order: Vec<usize> = (0..prepared.len()).collect();
    order.sort_by_key(|&i| prepared[i].len());
    let mut out = vec![Vec::new(); prepared.len()];
    let mut any_ok = false;
    let mut last_err = None;
    for chunk in order.chunks(BATCH) {
        let batch: Vec<String> = chunk.iter().map(|&i| prepared[i].clone()).collect();
        match embedder.embed(&batch).await.and_then(|v| {
            check_shape(batch.len(), &v)?;
            Ok(v)
        }) {
            Ok(vectors) => {
                any_ok = true;
                for (&i, v) in chunk.iter().zip(vectors) {
                    out[i] = normalized(v);
                }
            }
            Err(e) if batch.len() == 1 => last_err = Some(e),
            Err(e) => {
                for &i in chunk {
                    match embedder.embed(std::slice::from_ref(&prepared[i])).await {
                        Ok(mut v) if v.len() == 1 && !v[0].is_empty() => {
                            any_ok = true;
                            out[i] = normalized(v.remove(0));
                        }
                        _ => {}
                    }
                }
                last_err = Some(e);
            }
        }
    }
    match last_err {
        Some(e) if !any_ok => Err(e),
        Some(e) => {
            tracing::warn!(error = %e, "the embedder refused some texts; they are skipped");
            Ok(out)
        }
        None => Ok(out),
    }
}

/// Embeds up to `limit` durable, non-retracted records and incident documents that have no
/// vector for the memory's model yet (oldest first) and stores the vectors. Returns how many
/// were stored (0: none left, or no embedder).
///
/// # Errors
/// [`BackfillError`]: the embedder's failure, or a database error.
pub async fn backfill(memory: &Memory, limit: i64) -> Result<usize, BackfillError> {
    let Some(embedder) = memory.embedder() else {
        return Ok(0);
    };
    let pool = memory.pool();
    let model = embedder.model().to_string();
    let mut stored = 0;
    let docs = estore::missing_documents(pool, &model, limit).await?;
    if !docs.is_empty() {
        let (ids, texts): (Vec<i64>, Vec<String>) = docs.into_iter().unzip();
        let vectors = embed_all(embedder.as_ref(), texts).await?;
        let rows: Vec<(i64, Vec<f32>)> = ids.into_iter().zip(vectors).collect();
        estore::store_documents(pool, &model, &rows).await?;
        stored += rows.len();
    }
    let passages = estore::missing_passages(pool, &model, limit * 4).await?;
    if !passages.is_empty() {
        let (ids, texts): (Vec<i64>, Vec<String>) = passages.into_iter().unzip();
        let vectors = embed_all(embedder.as_ref(), texts).await?;
        let rows: Vec<(i64, Vec<f32>)> = ids.into_iter().zip(vectors).collect();
        estore::store_passages(pool, &model, &rows).await?;
        stored += rows.len();
    }
    let parts = estore::missing_parts(pool, &model, limit).await?;
    if !parts.is_empty() {
        let mut keys = Vec::new();
        let mut texts = Vec::new();
        for (id, fields) in parts {
            for (n, f) in fields.into_iter().enumerate() {
                // An empty part still gets a row (an empty vector), so the rule is done.
                keys.push((id, n as i64));
                texts.push(f);
            }
        }
        let vectors = embed_all(embedder.as_ref(), texts).await?;
        let rows: Vec<(i64, i64, Vec<f32>)> = keys
            .into_iter()
            .zip(vectors)
            .map(|((id, n), v)| (id, n, v))
            .collect();
        estore::store_parts(pool, &model, &rows).await?;
        stored += rows.len();
    }
    let todo = estore::missing(pool, &model, limit).await?;
    if !todo.is_empty() {
        let (ids, texts): (Vec<i64>, Vec<String>) = todo.into_iter().unzip();
        let vectors = embed_all(embedder.as_ref(), texts).await?;
        let rows: Vec<(i64, Vec<f32>)> = ids.into_iter().zip(vectors).collect();
        estore::store(pool, &model, &rows).await?;
        stored += rows.len();
    }
    Ok(stored)
}

/// Brings memory's derived data up to date: rebuilds the incident documents whose records
/// changed ([`super::documents::refresh`]), then embeds everything missing. Returns how many
/// documents were rebuilt and vectors stored.
///
/// # Errors
/// [`BackfillError`].
pub async fn catch_up(memory: &Memory) -> Result<(usize, usize), BackfillError> {
    let rebuilt = super::documents::refresh(memory).await?;
    let mut stored = 0;
    loop {
        let n = backfill(memory, 64).await?;
        stored += n;
        if n == 0 {
            break;
        }
    }
    Ok((rebuilt, stored))
}

/// The memory worker of `serve`: [`catch_up`] whenever a write wakes it ([`Memory::wake`]) and
/// at least every `idle` (a write by another process moves only the database), in batches, with
/// progress in the log. After a failure it logs a warning and waits `idle`. Stops when
/// `shutdown` fires, between batches.
pub async fn run_worker(
    memory: Memory,
    idle: Duration,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let mut logged_backlog = false;
    loop {
        if *shutdown.borrow() {
            return;
        }
        let result = async {
            let rebuilt = super::documents::refresh(&memory).await?;
            let n = backfill(&memory, 64).await?;
            Ok::<_, BackfillError>((rebuilt, n))
        }
        .await;
        match result {
            Ok((rebuilt, n)) if rebuilt > 0 || n > 0 => {
                if let Ok((done, total)) = progress(&memory).await {
                    if total > 0 && done < total {
                        logged_backlog = true;
                        tracing::info!(done, total, rebuilt, "embedding backfill in progress");
                    } else if logged_backlog {
                        logged_backlog = false;
                        tracing::info!(total, "embedding backfill done");
                    }
                }
                // More may be missing: go on at once, unless asked to stop.
                continue;
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "memory worker failed; recall runs without it"),
        }
        tokio::select! {
            () = memory.woken_or(idle) => {}
            _ = shutdown.changed() => return,
        }
    }
}

/// Embedding progress: `(records with a vector of the memory's model, durable records)`;
/// `(0, 0)` without an embedder.
///
/// # Errors
/// Database errors.
pub async fn progress(memory: &Memory) -> AppResult<(i64, i64)> {
    match memory.embedder() {
        Some(e) => estore::progress(memory.pool(), e.model()).await,
        None => Ok((0, 0)),
    }
}

/// The query's unit vector (redacted, capped), from the memory's cache by text, else from the
/// embedder within [`QUERY_TIMEOUT`]. `None` without an embedder, for empty text, or when the
/// embedder failed (logged; the embedder is then left alone for [`FAILURE_COOLDOWN`]).
pub async fn query_vector(memory: &Memory, text: &str) -> Option<Arc<Vec<f32>>> {
    let embedder = memory.embedder_ready()?;
    if text.trim().is_empty() {
        return None;
    }
    let input = crate::evidence::truncate_chars(&redact_once(text), MAX_CHARS).to_string();
    if let Some(v) = lock(&memory.inner.query_vectors).get(&input) {
        return Some(Arc::clone(v));
    }
    let answer = tokio::time::timeout(QUERY_TIMEOUT, embedder.embed(std::slice::from_ref(&input)))
        .await
        .unwrap_or(Err(EmbedError::Timeout(QUERY_TIMEOUT)));
    match answer {
        Ok(v) if v.len() == 1 && !v[0].is_empty() && v[0].iter().all(|x| x.is_finite()) => {
            let v = Arc::new(normalized(v.into_iter().next().unwrap_or_default()));
            lock(&memory.inner.query_vectors).put(input, Arc::clone(&v));
            Some(v)
        }
        Ok(_) => None,
        Err(e) => {
            tracing::warn!(error = %e, "semantic recall skipped");
            memory.cool_down(FAILURE_COOLDOWN);
            None
        }
    }
}

/// Unit vectors of `texts` (redacted, capped), each from the memory's passage cache by text (apart
/// from [`query_vector`]'s) or embedded in one batch within [`QUERY_TIMEOUT`]. `None` as for
/// [`query_vector`].
pub async fn text_vectors(memory: &Memory, texts: &[String]) -> Option<Vec<Arc<Vec<f32>>>> {
    let embedder = memory.embedder_ready()?;
    let inputs: Vec<String> = texts
        .iter()
        .map(|t| crate::evidence::truncate_chars(&redact_once(t), MAX_CHARS).to_string())
        .collect();
    let mut out: Vec<Option<Arc<Vec<f32>>>> = {
        let mut cache = lock(&memory.inner.query_passage_vectors);
        inputs.iter().map(|t| cache.get(t).cloned()).collect()
    };
    let missing: Vec<String> = inputs
        .iter()
        .zip(&out)
        .filter(|(_, v)| v.is_none())
        .map(|(t, _)| t.clone())
        .collect();
    if !missing.is_empty() {
        let answer = tokio::time::timeout(QUERY_TIMEOUT, embedder.embed(&missing))
            .await
            .unwrap_or(Err(EmbedError::Timeout(QUERY_TIMEOUT)))
            .and_then(|v| {
                check_shape(missing.len(), &v)?;
                Ok(v)
            });
        let vectors = match answer {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(error = %e, "semantic recall of passages skipped");
                memory.cool_down(FAILURE_COOLDOWN);
                return None;
            }
        };
        let mut fresh = missing.into_iter().zip(vectors);
        let mut cache = lock(&memory.inner.query_passage_vectors);
        for slot in out.iter_mut().filter(|v| v.is_none()) {
            if let Some((text, v)) = fresh.next() {
                let v = Arc::new(normalized(v));
                cache.put(text, Arc::clone(&v));
                *slot = Some(v);
            }
        }
    }
    out.into_iter().collect()
}

/// The unit vector of the mean of unit vectors `vs` (their common direction, as mean pooling
/// does over tokens); `None` for no vectors, vectors of different lengths or a zero mean.
pub fn mean_direction(vs: &[Arc<Vec<f32>>]) -> Option<Arc<Vec<f32>>> {
    let dim = vs.first()?.len();
    if dim == 0 || vs.iter().any(|v| v.len() != dim) {
        return None;
    }
    let mut sum = vec![0.0f32; dim];
    for v in vs {
        for (s, x) in sum.iter_mut().zip(v.iter()) {
            *s += x;
        }
    }
    let v = normalized(sum);
    v.iter().any(|x| *x != 0.0).then(|| Arc::new(v))
}

/// Past incidents ranked by how well their passages cover the query's (MaxSim, as in late
/// interaction retrieval — Khattab & Zaharia, "ColBERT", SIGIR 2020 — at the level of
/// sentences): each query passage counts its best cosine among an incident's passages, and the
/// incident scores the mean. Best first, with the score, without `exclude_incident`; empty
/// without an embedder or on a database error (logged).
pub async fn nearest_by_passages(
    memory: &Memory,
    epoch: &str,
    query: &[Arc<Vec<f32>>],
    exclude_incident: Option<&str>,
    limit: usize,
) -> Vec<(String, f32)> {
    let Some(embedder) = memory.embedder() else {
        return Vec::new();
    };
    if query.is_empty() {
        return Vec::new();
    }
    let model = embedder.model();
    let loaded = async {
        let state = estore::passages_state(memory.pool(), model).await?;
        let state = (epoch.to_string(), state.0, state.1);
        let cached = lock(&memory.inner.passage_vectors).clone();
        if cached.state == state {
            return Ok::<_, crate::error::AppError>(cached);
        }
        let mut incidents: Vec<(String, Vec<Vec<f32>>)> = Vec::new();
        for (inc, v) in estore::passages(memory.pool(), model).await? {
            if v.is_empty() {
                continue;
            }
            match incidents.last_mut() {
                Some((last, vs)) if *last == inc => vs.push(normalized(v)),
                _ => incidents.push((inc, vec![normalized(v)])),
            }
        }
        let fresh = Arc::new(PassageVectors { state, incidents });
        *lock(&memory.inner.passage_vectors) = Arc::clone(&fresh);
        Ok(fresh)
    }
    .await;
    let loaded = match loaded {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(error = %e, "passage recall skipped");
            return Vec::new();
        }
    };
    let scored: Vec<(f32, &String)> = loaded
        .incidents
        .iter()
        .filter(|(i, _)| Some(i.as_str()) != exclude_incident)
        .map(|(i, passages)| {
            let sum: f32 = query
                .iter()
                .map(|q| {
                    passages
                        .iter()
                        .filter(|p| p.len() == q.len())
                        .map(|p| dot(p, q))
                        .fold(f32::MIN, f32::max)
                        .max(0.0)
                })
                .sum();
            (sum / query.len() as f32, i)
        })
        .collect();
    best_incidents(scored, limit)
}

/// The `limit` best `(score, incident id)` pairs as `(incident id, score)`, best first, ties by
/// id (the tail of both incident-level vector lists).
fn best_incidents(mut scored: Vec<(f32, &String)>, limit: usize) -> Vec<(String, f32)> {
    scored.sort_by(|(a, ia), (b, ib)| b.total_cmp(a).then(ia.cmp(ib)));
    scored
        .into_iter()
        .take(limit)
        .map(|(c, i)| (i.clone(), c))
        .collect()
}

/// The record vectors of the memory's model with every row stored so far.
async fn record_vectors(memory: &Memory, epoch: &str, model: &str) -> AppResult<Arc<VectorSet>> {
    let current = || {
        let set = lock(&memory.inner.vectors).clone();
        if set.epoch == epoch {
            set
        } else {
            Arc::new(VectorSet {
                epoch: epoch.to_string(),
                ..VectorSet::default()
            })
        }
    };
    let _refreshing = memory.inner.vectors_refresh.lock().await;
    let mut set = current();
    loop {
        let rows = estore::since(memory.pool(), model, set.last, READ_BATCH).await?;
        let Some(&(last, _, _)) = rows.last() else {
            break;
        };
        let full = rows.len() as i64 == READ_BATCH;
        let s = Arc::make_mut(&mut set);
        s.vectors
            .extend(rows.into_iter().map(|(_, id, v)| (id, normalized(v))));
        s.last = last;
        if !full {
            break;
        }
    }
    loop {
        let rows = estore::parts_since(memory.pool(), model, set.last_part, READ_BATCH).await?;
        let Some(&(last, _, _)) = rows.last() else {
            break;
        };
        let full = rows.len() as i64 == READ_BATCH;
        let s = Arc::make_mut(&mut set);
        s.parts
            .extend(rows.into_iter().map(|(_, id, v)| (id, normalized(v))));
        s.last_part = last;
        if !full {
            break;
        }
    }
    *lock(&memory.inner.vectors) = Arc::clone(&set);
    Ok(set)
}

/// Shortlist of a large memory's vector scan per wanted hit (see
/// [`QuantizedSet::scan_nearest`]): sign bits order rows only roughly, so the shortlist is
/// generous: at 60 hits, about 2,000 of 100,000 rows are scored from their codes (≈ 1.5 ms
/// instead of ≈ 5 ms for all of them, `cargo run --release --example vector-scan`).
const SHORTLIST_PER_HIT: usize = 32;

/// Smallest shortlist of a large memory's vector scan.
const MIN_SHORTLIST: usize = 1_024;

/// The records nearest a query by cosine, and the query's chance level.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Nearest {
    /// `(record id, cosine)`, best first.
    pub hits: Vec<(i64, f32)>,
    /// Cosine below which a hit is no better than chance for this query: the mean of its cosines
    /// with every record vector plus two standard deviations ([`chance_level`]); `None` with
    /// fewer than [`CHANCE_SAMPLE`] vectors.
    pub floor: Option<f32>,
}

/// Fewest record vectors from which a query's chance level is estimated.
pub const CHANCE_SAMPLE: usize = 20;

/// The chance level of a query's cosines with the whole memory: mean + 2 standard deviations
/// (population), so that about 2–3 % of unrelated records score above it when the cosines of
/// unrelated texts are roughly normal, as they are for sentence-embedding models. `None` for
/// fewer than [`CHANCE_SAMPLE`] values.
pub fn chance_level(cosines: impl IntoIterator<Item = f32>) -> Option<f32> {
    // One pass, no buffer: this runs over every record vector on every recall.
    let (mut n, mut sum, mut squares) = (0usize, 0.0f64, 0.0f64);
    for c in cosines {
        n += 1;
        sum += f64::from(c);
        squares += f64::from(c) * f64::from(c);
    }
    if n < CHANCE_SAMPLE {
        return None;
    }
    let mean = sum / n as f64;
    let var = (squares / n as f64 - mean * mean).max(0.0);
    Some((mean + 2.0 * var.sqrt()) as f32)
}

/// Record ids of `index` whose vectors are nearest `query` by cosine, best first, with the
/// cosine, at most `limit`, without `exclude_incident`'s own records, and the query's chance
/// level over every record vector held. Records absent from `index` (working, retracted) never
/// appear. Empty without an embedder; a database error is logged and gives an empty list (the
/// list is optional and never fails recall).
pub async fn nearest_records(
    memory: &Memory,
    index: &RecallIndex,
    query: &[f32],
    exclude_incident: Option<&str>,
    limit: usize,
) -> Nearest {
    let Some(embedder) = memory.embedder() else {
        return Nearest::default();
    };
    let set = match record_vectors(memory, index.epoch(), embedder.model()).await {
        Ok(set) => set,
        Err(e) => {
            tracing::warn!(error = %e, "semantic recall skipped");
            return Nearest::default();
        }
    };
    let keep = |&(_, id): &(f32, i64)| {
        index.get(id).is_some_and(|e| {
            exclude_incident.is_none() || e.incident_id.as_deref() != exclude_incident
        })
    };
    // The chance level is taken over (an even sample of) every vector; a large memory is
    // scored on a shortlist picked by sign bits. Only the best are then looked up in the index,
    // which drops records it does not hold (working, retracted) and the excluded incident's own;
    // when too few of a shortlist are left, every vector is scored.
    let shortlist = limit.saturating_mul(SHORTLIST_PER_HIT).max(MIN_SHORTLIST);
    let mut scored: Vec<(f32, i64)> = Vec::new();
    let mut sample: Vec<f32> = Vec::new();
    let full = set.vectors.scan_nearest(
        query,
        shortlist,
        |id, c| scored.push((c, id)),
        |c| sample.push(c),
    );
    if !full && scored.iter().filter(|s| keep(s)).count() < limit {
        scored.clear();
        set.vectors.scan(query, |id, c| scored.push((c, id)));
    }
    let floor = chance_level(sample);
    // A rule is as close as its closest part (the whole, or its ALWAYS, BECAUSE or SCOPE line
    // on its own): parts join as more rows of their record, and each record keeps its best.
    set.parts.scan(query, |id, c| scored.push((c, id)));
    let by_cosine = |(a, ia): &(f32, i64), (b, ib): &(f32, i64)| b.total_cmp(a).then(ib.cmp(ia));
    // Only the best few are ordered and looked up: the rest is never sorted. If too many of
    // those are dropped, every scored vector is looked up.
    let head = limit.saturating_mul(4).saturating_add(32);
    if scored.len() > head {
        scored.select_nth_unstable_by(head, by_cosine);
        let kept = scored[..head].iter().filter(|s| keep(s)).count();
        if kept >= limit {
            scored.truncate(head);
        }
    }
    scored.retain(keep);
    // Best row of each record first, then one per record.
    scored.sort_unstable_by(|(a, ia), (b, ib)| ia.cmp(ib).then(b.total_cmp(a)));
    scored.dedup_by_key(|(_, id)| *id);
    if scored.len() > limit {
        scored.select_nth_unstable_by(limit, by_cosine);
        scored.truncate(limit);
    }
    scored.sort_by(by_cosine);
    Nearest {
        hits: scored.into_iter().map(|(c, id)| (id, c)).collect(),
        floor,
    }
}

/// Incident ids whose documents' vectors are nearest `query` by cosine, best first, with the
/// cosine, without `exclude_incident`. Empty without an embedder or on a database error
/// (logged).
pub async fn nearest_documents(
    memory: &Memory,
    epoch: &str,
    query: &[f32],
    exclude_incident: Option<&str>,
    limit: usize,
) -> Vec<(String, f32)> {
    let Some(embedder) = memory.embedder() else {
        return Vec::new();
    };
    let model = embedder.model();
    let docs = async {
        let state = estore::documents_state(memory.pool(), model).await?;
        let state = (epoch.to_string(), state.0, state.1, state.2);
        let cached = lock(&memory.inner.doc_vectors).clone();
        if cached.state == state {
            return Ok::<_, crate::error::AppError>(cached);
        }
        let rows = estore::documents(memory.pool(), model).await?;
        let fresh = Arc::new(DocVectors {
            state,
            vectors: rows
                .into_iter()
                .filter(|(_, v)| !v.is_empty())
                .map(|(i, v)| (i, normalized(v)))
                .collect(),
        });
        *lock(&memory.inner.doc_vectors) = Arc::clone(&fresh);
        Ok(fresh)
    }
    .await;
    let docs = match docs {
        Ok(d) => d,
        Err(e) => {
            tracing::warn!(error = %e, "semantic recall of incidents skipped");
            return Vec::new();
        }
    };
    let scored: Vec<(f32, &String)> = docs
        .vectors
        .iter()
        .filter(|(i, v)| v.len() == query.len() && Some(i.as_str()) != exclude_incident)
        .map(|(i, v)| (dot(v, query), i))
        .collect();
    best_incidents(scored, limit)
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

    #[test]
    fn vectors_are_scaled_to_unit_length() {
        assert_eq!(normalized(vec![3.0, 4.0]), vec![0.6, 0.8]);
        assert_eq!(normalized(vec![0.0, 0.0]), vec![0.0, 0.0]);
    }
}
