//! The nearest-vector searches recall runs: the query's vector (and its passages'), the
//! nearest records, documents and incidents by passage, and the chance level of a cosine.

use super::*;

/// The query's unit vector (redacted, capped), from the memory's cache by text, else from the
/// embedder within [`QUERY_TIMEOUT`]. `None` without an embedder, for empty text, or when the
/// embedder failed (logged; the embedder is then left alone for [`FAILURE_COOLDOWN`]).
pub async fn query_vector(memory: &Memory, text: &str) -> Option<Arc<Vec<f32>>> {
    let embedder = memory.embedder_ready()?;
    if text.trim().is_empty() {
        return None;
    }
    let input = embedding_input(text);
    if let Some(v) = memory.inner.query_vectors.get(&input) {
        return Some(v);
    }
    let answer = tokio::time::timeout(QUERY_TIMEOUT, embedder.embed(std::slice::from_ref(&input)))
        .await
        .unwrap_or(Err(EmbedError::Timeout(QUERY_TIMEOUT)));
    match answer {
        Ok(v) if v.len() == 1 && !v[0].is_empty() && v[0].iter().all(|x| x.is_finite()) => {
            let v = Arc::new(normalized(v.into_iter().next().unwrap_or_default()));
            memory.inner.query_vectors.insert(input, Arc::clone(&v));
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

/// What is embedded for `text`: redacted, capped at [`MAX_CHARS`] (the caches' key).
fn embedding_input(text: &str) -> String {
    crate::evidence::truncate_chars(&redact_once(text), MAX_CHARS).to_string()
}

/// [`query_vector`] from the memory's cache only: `None` when it was not computed yet (or there
/// is no usable embedder), without waiting on the embedder.
pub fn cached_query_vector(memory: &Memory, text: &str) -> Option<Arc<Vec<f32>>> {
    memory.embedder_ready()?;
    memory.inner.query_vectors.get(&embedding_input(text))
}

/// [`text_vectors`] from the memory's cache only: `None` unless every one of `texts` was
/// computed already, without waiting on the embedder.
pub fn cached_text_vectors(memory: &Memory, texts: &[String]) -> Option<Vec<Arc<Vec<f32>>>> {
    memory.embedder_ready()?;
    let cache = &memory.inner.query_passage_vectors;
    texts
        .iter()
        .map(|t| cache.get(&embedding_input(t)))
        .collect()
}

/// Unit vectors of `texts` (redacted, capped), each from the memory's passage cache by text (apart
/// from [`query_vector`]'s) or embedded in one batch within [`QUERY_TIMEOUT`]. `None` as for
/// [`query_vector`].
pub async fn text_vectors(memory: &Memory, texts: &[String]) -> Option<Vec<Arc<Vec<f32>>>> {
    let embedder = memory.embedder_ready()?;
    let inputs: Vec<String> = texts.iter().map(|t| embedding_input(t)).collect();
    let cache = &memory.inner.query_passage_vectors;
    let mut out: Vec<Option<Arc<Vec<f32>>>> = inputs.iter().map(|t| cache.get(t)).collect();
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
        for slot in out.iter_mut().filter(|v| v.is_none()) {
            if let Some((text, v)) = fresh.next() {
                let v = Arc::new(normalized(v));
                cache.insert(text, Arc::clone(&v));
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
