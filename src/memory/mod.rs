//! Organizational memory as recall sees it (DESIGN.md §4): the [`Memory`] handle that every
//! recall, the memory worker and the embedding backfill go through, and that owns every cache
//! they keep (the structured index, term counts, vectors, query vectors). It hangs off
//! [`crate::web::AppState`]; nothing here is process-wide.
//!
//! - [`incident`]: the one door services use for an incident ([`Memory::recall_for_incident`]):
//!   its tags, its recall ordered by past incident, the similar incidents and what was tried
//!   during them.
//! - [`recall`]: the pipeline (query expansion, candidate lists, rank fusion, marks, why).
//! - [`negation`]: negated findings left out of a query (NegEx).
//! - [`documents`]: one retrieval document per past incident, built from its durable records.
//! - [`embeddings`]: the [`embeddings::Embedder`]s (built-in MiniLM, or an OpenAI-compatible
//!   endpoint), the backfill and nearest-vector search.
//! - [`minilm`]: the built-in model.
//!
//! May call: `domain`, `store`, `redact`, `evidence` (catalogue signatures). Never the web layer.

pub mod documents;
pub mod embeddings;
pub mod failure_modes;
pub mod incident;
pub mod minilm;
pub mod negation;
pub mod recall;
pub mod vectors;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::error::AppResult;
use crate::store;
use crate::store::recall_index::{self, RecallIndex};

pub use embeddings::Embedder;
use incident::{recall_past, recall_past_for_page, recall_past_with};

/// Question vectors kept by text (most recently used; single-passage queries such as the recall
/// API's), ~1.7 KB each with its key: at most ~1.7 MB, which a `soak-bench` run does not
/// outgrow.
const QUERY_VECTORS: usize = 1_024;

/// Passage vectors kept by text (most recently used): the passages of the incidents being
/// worked, which each investigation and page recall embeds again. Apart from the questions, so
/// an investigation's passages (tens at a time) do not push the questions out (sharing one
/// cache, the soak's recall API re-embeds its questions behind them).
const PASSAGE_VECTORS: usize = 1_024;

/// Incident pages whose recall is kept (most recently viewed): the incidents being worked on
/// (each result holds its records in full, tens of kB), as many as the rendered pages kept
/// (`web::page_cache::RenderedPages`).
const PAGE_RECALLS: usize = 64;

/// How long an investigation's recall waits for memory's derived data (incident documents and
/// vectors) to catch up with what was just written ([`Memory::catch_up_within`]): Learn's
/// records of one incident embed in well under a second with the built-in model; a large
/// import may take longer, and recall then goes ahead and says so ([`STILL_INDEXING`]).
pub const CATCH_UP_WAIT: Duration = Duration::from_secs(10);

/// What an investigation says when recall went ahead before memory's derived data caught up.
pub const STILL_INDEXING: &str = "Memory written in the last seconds is still being indexed: this recall may miss it; investigate again in a moment";

/// Which candidate lists and mechanisms recall uses: all on by default; the evaluation turns
/// them off one at a time to measure what each is worth (`incidentmind eval recall --ablate`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecallTuning {
    /// Lists and mechanisms turned off, by name (see [`RecallTuning::NAMES`]).
    pub off: Vec<String>,
    /// Weights set to another value than their default, by name (see [`RecallTuning::WEIGHTS`]):
    /// for stability checks of a chosen weight.
    pub weights: Vec<(String, f64)>,
}

impl RecallTuning {
    /// Names that [`RecallTuning::off`] understands.
    pub const NAMES: &'static [&'static str] = &[
        "passages",
        "passage_mean",
        "doc_bm25",
        "doc_vector",
        "part_vector",
        "part_bm25",
        "keys",
        "negation",
        "load_shape",
        "incident_prior",
        "score_fusion",
        "siblings",
        "sibling_records",
        "service_notes",
        "lexical_floor",
        "question_conditions",
        "question_actions",
        "question_rules",
        "action_reach",
        "question_prior",
    ];

    /// Weights that [`RecallTuning::weights`] can set.
    pub const WEIGHTS: &'static [&'static str] = &[
        "sibling_weight",
        "sibling_band",
        "incident_prior",
        "floor_gap",
        "floor_margin",
        "action_weight",
        "action_band",
        "question_prior",
    ];

    /// Parses `name=value` pairs, comma-separated, into [`RecallTuning::weights`].
    ///
    /// # Errors
    /// A message naming an unknown weight or a value that is not a finite number.
    pub fn parse_weights(mut self, list: &str) -> Result<Self, String> {
        for pair in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let (name, value) = pair
                .split_once('=')
                .ok_or_else(|| format!("'{pair}' is not name=value"))?;
            let name = name.trim();
            if !Self::WEIGHTS.contains(&name) {
                return Err(format!(
                    "unknown recall weight '{name}'; known: {}",
                    Self::WEIGHTS.join(", ")
                ));
            }
            let value: f64 = value
                .trim()
                .parse()
                .ok()
                .filter(|v: &f64| v.is_finite())
                .ok_or_else(|| format!("weight {name}: '{value}' is not a number"))?;
            self.weights.push((name.to_string(), value));
        }
        Ok(self)
    }

    /// The value of weight `name`: as set, else `default`.
    pub fn value(&self, name: &str, default: f64) -> f64 {
        self.weights
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map_or(default, |(_, v)| *v)
    }

    /// Parses a comma-separated list of names to turn off.
    ///
    /// # Errors
    /// A message naming the unknown name and the known ones.
    pub fn parse_off(list: &str) -> Result<Self, String> {
        let mut off = Vec::new();
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            if !Self::NAMES.contains(&name) {
                return Err(format!(
                    "unknown recall mechanism '{name}'; known: {}",
                    Self::NAMES.join(", ")
                ));
            }
            off.push(name.to_string());
        }
        Ok(Self {
            off,
            weights: Vec::new(),
        })
    }

    /// Whether `name` is on.
    pub fn on(&self, name: &str) -> bool {
        !self.off.iter().any(|o| o == name)
    }
}

/// The memory of one database: its handle ([`store::Db`]), the embedder whose vectors recall
/// compares (if any) and the caches recall keeps. Cheap to clone (one `Arc`).
#[derive(Clone)]
pub struct Memory {
    pool: store::Db,
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Memory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memory")
            .field("embedder", &self.inner.embedder.as_ref().map(|e| e.model()))
            .finish_non_exhaustive()
    }
}

struct Inner {
    embedder: Option<Arc<dyn Embedder>>,
    tuning: RecallTuning,
    /// The newest structured index loaded.
    index: Mutex<Option<Arc<RecallIndex>>>,
    /// Held while the index reloads, so concurrent recalls load it once.
    reload: tokio::sync::Mutex<()>,
    /// Term → record count, per database epoch (see [`recall`]'s term budget).
    term_stats: recall::TermStatsCache,
    /// Record vectors read so far.
    vectors: Mutex<Arc<embeddings::VectorSet>>,
    /// Held while new record vectors are read.
    vectors_refresh: tokio::sync::Mutex<()>,
    /// Incident-document vectors at one state of their table.
    doc_vectors: Mutex<Arc<embeddings::DocVectors>>,
    /// Incident passage vectors at one state of their table.
    passage_vectors: Mutex<Arc<embeddings::PassageVectors>>,
    /// Until when a failing embedder is left alone.
    cooldown: Mutex<Option<Instant>>,
    /// Question text → unit vector ([`QUERY_VECTORS`]).
    query_vectors: moka::sync::Cache<String, Arc<Vec<f32>>>,
    /// Passage text → unit vector ([`PASSAGE_VECTORS`]).
    query_passage_vectors: moka::sync::Cache<String, Arc<Vec<f32>>>,
    /// Woken by writers; the memory worker refreshes documents and vectors.
    wake: tokio::sync::Notify,
    /// Incident id → the recall its page showed, under the key of what it was computed from.
    page_recalls: moka::sync::Cache<String, (String, Arc<incident::IncidentRecall>)>,
    /// Investigations allowed to run at once ([`Memory::investigation_slot`]).
    investigations: tokio::sync::Semaphore,
    /// Recall queries whose vectors are being computed in the background
    /// ([`Memory::embed_later`]), by their texts.
    embedding_later: Mutex<std::collections::HashSet<String>>,
    /// Turns of the queued background query embeddings ([`EMBED_LATER_RUNNING`]).
    embedding_turns: tokio::sync::Semaphore,
    /// Incidents whose page recall is being computed in the background
    /// ([`Memory::recall_page_later`]).
    page_recalls_later: Mutex<std::collections::HashSet<String>>,
    /// Held while documents are rebuilt and vectors stored ([`Memory::catch_up`]), by the
    /// memory worker or a recall waiting for it, so the two never embed the same rows at once.
    catching_up: tokio::sync::Mutex<()>,
    /// The failure-mode fallback, built once on first use (`None` inside: no built-in model,
    /// or it failed).
    failure_modes: std::sync::OnceLock<Option<Arc<failure_modes::FailureModeMeanings>>>,
}

/// Background query embeddings queued at once ([`Memory::embed_later`]): they run
/// [`EMBED_LATER_RUNNING`] at a time, in turn; a query over this many is left for a later view.
/// An alert storm of a hundred new incidents, each with a chat first read waiting for its
/// vectors, fits; dropping the ones over a handful made each wait for its reader's next look
/// (issue #50: a 100-incident storm's last first read came 8 s after its webhook).
const EMBED_LATER_MAX: usize = 256;

/// Background query embeddings computed at once: the model uses both cores for one text
/// already; more at once would only interleave them.
const EMBED_LATER_RUNNING: usize = 2;

/// Background page recalls at once ([`Memory::recall_page_later`]): about the cores, so a burst
/// of new incidents does not take the CPU from the pages being served; more wait for a later
/// view.
const PAGE_RECALLS_LATER_MAX: usize = 2;

impl Memory {
    /// The memory of `pool`, comparing vectors of `embedder` (none: recall runs on words and
    /// keys only).
    pub fn new(pool: impl Into<store::Db>, embedder: Option<Arc<dyn Embedder>>) -> Self {
        Self::with_tuning(pool, embedder, RecallTuning::default())
    }

    /// [`Memory::new`] with some recall mechanisms turned off (evaluation and ablation).
    pub fn with_tuning(
        pool: impl Into<store::Db>,
        embedder: Option<Arc<dyn Embedder>>,
        tuning: RecallTuning,
    ) -> Self {
        Self {
            pool: pool.into(),
            inner: Arc::new(Inner {
                embedder,
                tuning,
                index: Mutex::new(None),
                reload: tokio::sync::Mutex::new(()),
                term_stats: recall::term_stats_cache(),
                vectors: Mutex::default(),
                vectors_refresh: tokio::sync::Mutex::new(()),
                doc_vectors: Mutex::default(),
                passage_vectors: Mutex::default(),
                cooldown: Mutex::new(None),
                query_vectors: bounded_cache(QUERY_VECTORS),
                query_passage_vectors: bounded_cache(PASSAGE_VECTORS),
                wake: tokio::sync::Notify::new(),
                page_recalls: bounded_cache(PAGE_RECALLS),
                investigations: tokio::sync::Semaphore::new(investigation_slots()),
                embedding_later: Mutex::default(),
                embedding_turns: tokio::sync::Semaphore::new(EMBED_LATER_RUNNING),
                page_recalls_later: Mutex::default(),
                catching_up: tokio::sync::Mutex::new(()),
                failure_modes: std::sync::OnceLock::new(),
            }),
        }
    }

    /// The database (it reads as its pool).
    pub fn pool(&self) -> &store::Db {
        &self.pool
    }

    /// The embedder, if any.
    pub fn embedder(&self) -> Option<&Arc<dyn Embedder>> {
        self.inner.embedder.as_ref()
    }

    /// The recall mechanisms in use.
    pub fn tuning(&self) -> &RecallTuning {
        &self.inner.tuning
    }

    /// The structured index of the database's current generation: the cached one when the
    /// generation counter has not moved, otherwise loaded afresh.
    ///
    /// # Errors
    /// Database errors.
    pub async fn index(&self) -> AppResult<Arc<RecallIndex>> {
        let generation = recall_index::generation(&self.pool).await?;
        // At `generation` or newer (another task may have loaded a later one meanwhile).
        let cached = || {
            lock(&self.inner.index)
                .as_ref()
                .filter(|i| i.epoch() == generation.0 && i.generation().1 >= generation.1)
                .cloned()
        };
        if let Some(index) = cached() {
            return Ok(index);
        }
        let _reloading = self.inner.reload.lock().await;
        if let Some(index) = cached() {
            return Ok(index);
        }
        let index = Arc::new(recall_index::load(&self.pool).await?);
        *lock(&self.inner.index) = Some(Arc::clone(&index));
        Ok(index)
    }

    /// Tells the memory worker that durable memory changed (a learn, a verdict, an import, a
    /// note edit), so documents and vectors are brought up to date now rather than at its next
    /// round.
    pub fn wake(&self) {
        self.inner.wake.notify_one();
    }

    /// Waits until [`Memory::wake`] is called or `idle` passes.
    pub async fn woken_or(&self, idle: Duration) {
        let _ = tokio::time::timeout(idle, self.inner.wake.notified()).await;
    }

    /// The recall last computed for `incident_id` under `key` (what it was computed from: the
    /// memory generation, the incident's version, its evidence), if any. A page view reads it
    /// instead of running recall again.
    fn page_recall(&self, incident_id: &str, key: &str) -> Option<Arc<incident::IncidentRecall>> {
        self.inner
            .page_recalls
            .get(incident_id)
            .filter(|(k, _)| k == key)
            .map(|(_, r)| r)
    }

    /// Keeps `result` as the recall of `incident_id` under `key`.
    fn keep_page_recall(
        &self,
        incident_id: &str,
        key: String,
        result: Arc<incident::IncidentRecall>,
    ) {
        self.inner
            .page_recalls
            .insert(incident_id.to_string(), (key, result));
    }

    /// Brings memory's derived data up to date ([`embeddings::catch_up`]: the incident
    /// documents of records written since, then their vectors), one caller at a time (the memory
    /// worker takes the same turn). Without a usable embedder (none, or one cooling down after a
    /// failure) only the documents are rebuilt. Returns how many documents were rebuilt and
    /// vectors stored.
    ///
    /// # Errors
    /// [`embeddings::BackfillError`]: the embedder's failure (it is then left alone for a
    /// while) or a database error.
    pub async fn catch_up(&self) -> Result<(usize, usize), embeddings::BackfillError> {
        let _turn = self.inner.catching_up.lock().await;
        if self.embedder_ready().is_none() {
            return Ok((documents::refresh(self).await?, 0));
        }
        embeddings::catch_up(self).await.inspect_err(|e| {
            if matches!(e, embeddings::BackfillError::Embed(_)) {
                self.cool_down(embeddings::FAILURE_COOLDOWN);
            }
        })
    }

    /// [`Memory::catch_up`], waiting at most `bound`: what Learn (or a verdict, a note, an
    /// import) committed a moment ago is then found by the recall that follows, though the memory
    /// worker has not come round to it yet. The work goes on in its own task when the wait ends
    /// first. Returns whether memory was up to date when the wait ended (false also when the
    /// catch-up failed; recall then runs on what is there, as it does without the worker).
    pub async fn catch_up_within(&self, bound: Duration) -> bool {
        let memory = self.clone();
        let job = tokio::spawn(async move { memory.catch_up().await });
        match tokio::time::timeout(bound, job).await {
            Ok(Ok(Ok(_))) => true,
            Ok(Ok(Err(e))) => {
                tracing::warn!(error = %e, "memory did not catch up before recall");
                false
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "memory catch-up task failed");
                false
            }
            Err(_) => {
                tracing::info!(
                    bound_ms = bound.as_millis(),
                    "recall went ahead before memory caught up"
                );
                false
            }
        }
    }

    /// The one door into memory for an incident (as the caller read it): its observations and
    /// failure-mode tags, its recall (the `k` best records, ordered by past incident), the most similar past incidents
    /// and what was tried and decided during them ([`incident::IncidentRecall`]).
    ///
    /// Memory's derived data is first brought up to date, waiting at most [`CATCH_UP_WAIT`]
    /// ([`Memory::catch_up_within`]), so a record committed a moment ago (a Learn, a verdict on a
    /// parallel incident) is recalled; when the wait ends first,
    /// [`incident::IncidentRecall::still_indexing`] says so.
    ///
    /// # Errors
    /// Database errors.
    pub async fn recall_for_incident(
        &self,
        incident: &crate::domain::Incident,
        k: usize,
    ) -> AppResult<incident::IncidentRecall> {
        let caught_up = self.catch_up_within(CATCH_UP_WAIT).await;
        // The incident's rows first, one read after the other, before any work.
        let filter = incident::observations_of(&incident.id);
        let observations = store::memory::list(&self.pool, &filter).await?;
        let redactor = store::redaction::peek(&self.pool, incident.id.as_str()).await?;
        let mut past = recall_past(self, incident.clone(), observations, redactor, k).await?;
        past.still_indexing = !caught_up;
        Ok(past)
    }

    /// [`Memory::recall_for_incident`] with the incident's observations (most salient first)
    /// and tags already read.
    ///
    /// # Errors
    /// Database errors.
    pub async fn recall_with(
        &self,
        incident: &crate::domain::Incident,
        observations: Vec<crate::domain::memory::MemoryRecord>,
        tags: Vec<String>,
        k: usize,
    ) -> AppResult<incident::IncidentRecall> {
        recall_past_with(self, incident, observations, tags, k).await
    }

    /// [`Memory::recall_with`] for an incident page, kept until the memory, the incident or its
    /// evidence changes ([`incident::recall_past_for_page`]).
    ///
    /// # Errors
    /// Database errors.
    pub async fn recall_for_page(
        &self,
        incident: &crate::domain::Incident,
        observations: &[crate::domain::memory::MemoryRecord],
        tags: &[String],
        k: usize,
    ) -> AppResult<Arc<incident::IncidentRecall>> {
        recall_past_for_page(self, incident, observations, tags, k).await
    }

    /// What [`Memory::recall_for_page`] of `incident` with these `observations` still waits
    /// for: `None` when its query's vectors are computed; else a handle whose
    /// [`recall::PendingVectors::ready`] is a cache read. No recall and no model call; the
    /// computation starts in the background ([`incident::page_recall_pending`]).
    ///
    /// # Errors
    /// Database errors.
    pub async fn page_recall_pending(
        &self,
        incident: &crate::domain::Incident,
        observations: &[crate::domain::memory::MemoryRecord],
    ) -> AppResult<Option<recall::PendingVectors>> {
        incident::page_recall_pending(self, incident, observations).await
    }

    /// The page recall kept for `incident` with these `observations` (in any order) at
    /// the memory's recall generation `(epoch, generation)` (as the database says it,
    /// [`crate::store::incidents::page_state`]), without any other read: `None` when none is
    /// kept, and then [`Memory::recall_page_later`] computes it.
    pub fn kept_page_recall(
        &self,
        incident: &crate::domain::Incident,
        observations: &[crate::domain::memory::MemoryRecord],
        k: usize,
        (epoch, generation): (&str, i64),
    ) -> Option<Arc<incident::IncidentRecall>> {
        let key = incident::page_recall_key(epoch, generation, incident, observations, k);
        self.page_recall(incident.id.as_str(), &key)
    }

    /// Computes the page recall of `incident` in the background ([`Memory::recall_for_page`]),
    /// so that a page view never runs recall (issue #56: a new incident's first view under load
    /// stays within 100 ms): the view shows what exists, and the next one the recall. One job
    /// per incident, at most [`PAGE_RECALLS_LATER_MAX`] at once (a view beyond that leaves it to
    /// a later view). Must be called inside the tokio runtime. Returns whether the recall is
    /// coming.
    pub fn recall_page_later(&self, incident: crate::domain::Incident, k: usize) -> bool {
        let id = incident.id.to_string();
        {
            let mut later = lock(&self.inner.page_recalls_later);
            if later.contains(&id) {
                return true;
            }
            if later.len() >= PAGE_RECALLS_LATER_MAX {
                return false;
            }
            later.insert(id.clone());
        }
        /// Takes the incident off the running set however the job ends (a panic included).
        struct Running(Memory, String);
        impl Drop for Running {
            fn drop(&mut self) {
                lock(&self.0.inner.page_recalls_later).remove(&self.1);
            }
        }
        let running = Running(self.clone(), id);
        tokio::spawn(async move {
            let memory = &running.0;
            let recalled = async {
                let (observations, tags) = incident::incident_tags(&memory.pool, &incident).await?;
                memory
                    .recall_for_page(&incident, &observations, &tags, k)
                    .await
            };
            if let Err(e) = recalled.await {
                tracing::warn!(incident.id = %running.1, error = %e, "page recall failed");
            }
        });
        true
    }

    /// Waits for one of the [`investigation_slots`] and holds it until the permit is dropped.
    ///
    /// An investigation is CPU work (evidence tags, recall, the analyst) over up to a thousand
    /// observations, and most of what it allocates lives only while it runs. On two cores, ten
    /// at once finish no sooner than two at a time, but hold ten working sets: under the soak
    /// bench's load that high-water mark is what the resident set grows by. Waiting
    /// here keeps it at a few working sets; requests queue in order (tokio's semaphore is fair).
    /// The investigation service gives its slot back before it calls a model server.
    /// `None` only if the semaphore were closed, which nothing does (the run then goes ahead).
    pub async fn investigation_slot(&self) -> Option<tokio::sync::SemaphorePermit<'_>> {
        self.inner.investigations.acquire().await.ok()
    }

    /// Computes the vectors of a recall query in the background, into the caches a later recall
    /// reads, so that a page view never waits on the embedder: `texts` as
    /// [`embeddings::text_vectors`] does when `passages`, else the first as
    /// [`embeddings::query_vector`] does. One job per query, at most [`EMBED_LATER_MAX`] queued
    /// (a query over that is left for a later view), [`EMBED_LATER_RUNNING`] computed at once.
    /// Must be called inside the tokio runtime.
    /// Returns whether the vectors are coming (false without a usable embedder or texts).
    pub fn embed_later(&self, texts: Vec<String>, passages: bool) -> bool {
        if self.embedder_ready().is_none() || texts.is_empty() {
            return false;
        }
        let key = texts.join("\u{1f}");
        {
            let mut later = lock(&self.inner.embedding_later);
            if later.contains(&key) || later.len() >= EMBED_LATER_MAX {
                return true;
            }
            later.insert(key.clone());
        }
        let memory = self.clone();
        tokio::spawn(async move {
            // In turn (the semaphore is fair), at the requests' priority: somebody looks for
            // these soon (a page's next view, a chat first read), so they go before the
            // backfill. The semaphore is never closed.
            let _turn = memory.inner.embedding_turns.acquire().await.ok();
            if passages {
                embeddings::text_vectors(&memory, &texts).await;
            } else if let Some(text) = texts.first() {
                embeddings::query_vector(&memory, text).await;
            }
            lock(&memory.inner.embedding_later).remove(&key);
        });
        true
    }

    /// The failure-mode fallback ([`failure_modes`]): the catalogue's meanings, embedded with the
    /// built-in model on the first call (a few seconds, on the blocking pool; `App::start` makes
    /// that call at start) and kept. `None` when the embedder is not the built-in model (the
    /// rule is tuned on it), or the model failed (logged once).
    pub async fn failure_mode_meanings(&self) -> Option<Arc<failure_modes::FailureModeMeanings>> {
        if let Some(built) = self.inner.failure_modes.get() {
            return built.clone();
        }
        let model = self.inner.embedder.as_ref()?.builtin_model()?;
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || {
            inner
                .failure_modes
                .get_or_init(|| {
                    let started = Instant::now();
                    match failure_modes::FailureModeMeanings::build(model, Default::default()) {
                        Ok(m) => {
                            tracing::info!(
                                elapsed_ms = started.elapsed().as_millis() as u64,
                                "failure-mode meanings embedded"
                            );
                            Some(Arc::new(m))
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "failure-mode meanings not embedded: patterns only");
                            None
                        }
                    }
                })
                .clone()
        })
        .await
        .ok()
        .flatten()
    }

    /// The failure-mode fallback if its meanings are embedded already (never waits: a paste made
    /// while [`Self::failure_mode_meanings`] still runs at start is tagged by patterns only).
    pub fn failure_mode_meanings_ready(&self) -> Option<Arc<failure_modes::FailureModeMeanings>> {
        self.inner.failure_modes.get().cloned().flatten()
    }

    /// The embedder, unless it failed within the last cooldown.
    fn embedder_ready(&self) -> Option<&Arc<dyn Embedder>> {
        let cooling = lock(&self.inner.cooldown).is_some_and(|until| Instant::now() < until);
        if cooling {
            return None;
        }
        self.inner.embedder.as_ref()
    }

    /// Leaves the embedder alone for `d` after a failure.
    fn cool_down(&self, d: Duration) {
        *lock(&self.inner.cooldown) = Some(Instant::now() + d);
    }
}

/// Investigations run at once: the cores this process may use (at least 2).
pub fn investigation_slots() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().max(2))
}

/// Locks a cache mutex; a panic elsewhere while it was held leaves a usable cache.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// An empty `moka` cache holding up to `capacity` entries (TinyLFU admission, LRU eviction;
/// concurrent reads take no lock).
fn bounded_cache<K, V>(capacity: usize) -> moka::sync::Cache<K, V>
where
    K: std::hash::Hash + Eq + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
{
    moka::sync::Cache::new(capacity.max(1) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts the texts it is asked to embed; each gets a vector from its length.
    #[derive(Debug, Default)]
    struct CountingEmbedder(std::sync::atomic::AtomicUsize);

    #[async_trait::async_trait]
    impl Embedder for CountingEmbedder {
        fn model(&self) -> &str {
            "counting"
        }
        async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, embeddings::EmbedError> {
            self.0
                .fetch_add(texts.len(), std::sync::atomic::Ordering::SeqCst);
            Ok(texts.iter().map(|t| vec![t.len() as f32, 1.0]).collect())
        }
    }

    /// With one cache for both, an investigation's passages would push the recall questions out
    /// and they would be embedded again on every ask.
    #[tokio::test]
    async fn passages_do_not_push_questions_out_of_the_vector_cache() {
        let pool = sqlx::AnyPool::connect_lazy("sqlite::memory:").expect("lazy pool");
        let counter = Arc::new(CountingEmbedder::default());
        let memory = Memory::new(pool, Some(Arc::clone(&counter) as Arc<dyn Embedder>));
        let question = "which deploy made the checkout queue back up";
        assert!(embeddings::query_vector(&memory, question).await.is_some());
        let passages: Vec<String> = (0..2 * PASSAGE_VECTORS)
            .map(|i| format!("worker {i} logged a slow batch"))
            .collect();
        for batch in passages.chunks(64) {
            assert!(embeddings::text_vectors(&memory, batch).await.is_some());
        }
        let embedded = counter.0.load(std::sync::atomic::Ordering::SeqCst);
        assert_eq!(embedded, 1 + 2 * PASSAGE_VECTORS);
        assert!(embeddings::query_vector(&memory, question).await.is_some());
        assert_eq!(
            counter.0.load(std::sync::atomic::Ordering::SeqCst),
            embedded,
            "the question came from the cache"
        );
    }

    #[tokio::test]
    async fn investigations_past_the_slots_wait_for_one_to_finish() {
        let pool = sqlx::AnyPool::connect_lazy("sqlite::memory:").expect("lazy pool");
        let memory = Memory::new(pool, None);
        let slots = investigation_slots();
        assert!(slots >= 2);
        let mut held = Vec::new();
        for _ in 0..slots {
            held.push(memory.investigation_slot().await.expect("a slot"));
        }
        let waiting = tokio::time::timeout(Duration::from_millis(50), memory.investigation_slot());
        assert!(
            waiting.await.is_err(),
            "one more waits while every slot is held"
        );
        held.pop();
        let next = tokio::time::timeout(Duration::from_secs(5), memory.investigation_slot()).await;
        assert!(matches!(next, Ok(Some(_))), "a freed slot is taken at once");
    }
}
