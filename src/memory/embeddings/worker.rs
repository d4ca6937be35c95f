//! Keeping vectors current: embedding in batches, the backfill of what is missing and the
//! memory worker that runs it after writes.

use super::*;

/// Embeds `texts`, stored records and documents (redacted again as stored text with
/// [`crate::evidence::redact::redact_stored`], so the quads their incident's map decided stay
/// as written, and capped first; nothing unredacted leaves the process), in batches sorted by
/// length. A batch the embedder refuses is retried text by text; a text
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
        match embedder.embed_background(&batch).await.and_then(|v| {
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
                    match embedder
                        .embed_background(std::slice::from_ref(&prepared[i]))
                        .await
                    {
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
/// changed ([`crate::memory::documents::refresh`]), then embeds everything missing. Returns how many
/// documents were rebuilt and vectors stored.
///
/// # Errors
/// [`BackfillError`].
pub async fn catch_up(memory: &Memory) -> Result<(usize, usize), BackfillError> {
    let rebuilt = super::super::documents::refresh(memory).await?;
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
            // The same turn a recall waiting for memory takes (`Memory::catch_up`).
            let _turn = memory.inner.catching_up.lock().await;
            let rebuilt = super::super::documents::refresh(&memory).await?;
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
