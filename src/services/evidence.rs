//! Adding evidence to an incident: extract observations (DESIGN.md §2), redact, store the raw
//! text and one `observation` record per finding, all in one transaction.

use std::sync::Arc;

use sqlx::AnyPool;

use crate::domain::memory::{MemoryRecord, NewRecord};
use crate::domain::{IncidentId, IncidentState, MemoryKind, ValidationError};
use crate::error::{AppError, AppResult};
use crate::evidence::{EvidenceKind, Extraction, extract};
use crate::memory::failure_modes::FailureModeMeanings;
use crate::memory::recall::derive_tags;
use crate::store::{self, Db, Event, IncidentWrite, evidence as estore, memory as mstore};

/// Longest accepted `source` label, characters.
pub const SOURCE_MAX: usize = 200;

/// What the service stored.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct EvidenceAdded {
    /// The evidence row (without content).
    pub evidence: estore::EvidenceMeta,
    /// The extracted observations as stored records.
    pub observations: Vec<MemoryRecord>,
    /// `false` when this exact delivery was stored before (dedup key) and nothing was written.
    pub created: bool,
}

/// Runs extraction off the async runtime (it is CPU-bound on big inputs).
///
/// # Errors
/// [`AppError::Internal`] if the worker panicked.
pub async fn extract_blocking(kind: EvidenceKind, text: String) -> AppResult<(Extraction, String)> {
    tokio::task::spawn_blocking(move || (extract(kind, &text), text))
        .await
        .map_err(|e| AppError::Internal(e.into()))
}

/// Where the result of a query the app ran itself can be seen at its source: the query and a
/// link to it (Prometheus's graph page of the query over its window). Only a source the app
/// queries sets it, never a paste; each observation of the evidence keeps it
/// (`data.query_link`, redacted like the rest: a link the redaction would change is left out,
/// the query kept), and the incident page shows it beside them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryLink {
    /// The query as run.
    pub query: String,
    /// An `http(s)` link to its result at the source.
    pub url: String,
    /// Series pulled by other queries into the same document, by the name their observations
    /// start with (`request_rate`, `error_rate`): such an observation shows its own query and
    /// link, not the document's (issue #49).
    pub related: Vec<(String, QueryLink)>,
}

impl QueryLink {
    /// The link of an observation stating `statement`: the related query whose series name it
    /// starts with (`request_rate{service="checkout"}: value flat …`), else this one.
    pub fn for_statement(&self, statement: &str) -> &QueryLink {
        self.related
            .iter()
            .find(|(name, _)| {
                statement
                    .strip_prefix(name.as_str())
                    .is_some_and(|rest| rest.starts_with(['{', ':']))
            })
            .map_or(self, |(_, l)| l)
    }
}

/// `link` as an observation keeps it: the query and the URL redacted with the incident's map;
/// the URL left out when redaction would change it (a link with a placeholder in it leads
/// nowhere, and one with a secret must not be shown).
fn query_link_data(w: &mut IncidentWrite, link: &QueryLink) -> serde_json::Value {
    let (mut query, mut url) = (link.query.clone(), link.url.clone());
    w.redact(&mut [&mut query, &mut url]);
    let url = (url == link.url).then_some(url);
    serde_json::json!({"query": query, "url": url})
}

/// Writes one observation record per extracted observation of evidence `evidence_id` (examples
/// redacted, each with the evidence's query link when it has one); returns their ids in order.
async fn write_observations(
    w: &mut IncidentWrite,
    kind: EvidenceKind,
    evidence_id: i64,
    observations: &[crate::evidence::Observation],
    link: Option<&QueryLink>,
) -> AppResult<Vec<i64>> {
    let incident = w.incident().clone();
    let actor = w.actor().to_string();
    let mut ids = Vec::with_capacity(observations.len());
    // Each link an observation may carry, redacted once: the document's and its related ones'.
    let mut links: Vec<(&QueryLink, serde_json::Value)> = Vec::new();
    if let Some(l) = link.filter(|_| !observations.is_empty()) {
        for q in std::iter::once(l).chain(l.related.iter().map(|(_, r)| r)) {
            links.push((q, query_link_data(w, q)));
        }
    }
    for o in observations {
        let link = link.and_then(|l| {
            let chosen = l.for_statement(&o.statement);
            links
                .iter()
                .find(|(q, _)| std::ptr::eq(*q, chosen))
                .map(|(_, data)| data)
        });
        let mut example = o.example.clone().unwrap_or_default();
        w.redact(&mut [&mut example]);
        let mut r = NewRecord::new(MemoryKind::Observation, o.statement.clone(), &actor);
        r.incident_id = Some(incident.id.to_string());
        r.services = vec![incident.service.clone()];
        r.failure_modes = o.failure_modes.clone();
        r.data = serde_json::json!({
            "evidence_id": evidence_id,
            "evidence_kind": kind.as_str(),
            "line_ranges": o.line_ranges,
            "count": o.count,
            "first_seen": o.first_seen,
            "last_seen": o.last_seen,
            "level": o.level,
            "example": if example.is_empty() { None } else { Some(example) },
            "salience": o.salience,
        });
        if let Some(l) = link {
            r.data["query_link"] = l.clone();
        }
        let (rid, _) = w.write_memory(r, derive_tags).await?;
        ids.push(rid);
    }
    Ok(ids)
}

/// Stores `content` of `kind` as evidence on incident `id` with its extracted observations.
/// `dedup_key` makes a repeated delivery a no-op (alerts).
///
/// # Errors
/// [`AppError::NotFound`]; [`AppError::Conflict`] on a learned incident; validation errors for
/// empty content or an over-long source.
pub async fn add(
    pool: &Db,
    actor: &str,
    id: &IncidentId,
    kind: EvidenceKind,
    content: String,
    source: &str,
    dedup_key: Option<&str>,
) -> AppResult<EvidenceAdded> {
    let submission = Submission {
        kind,
        content,
        source,
        dedup_key,
        expected_version: None,
        link: None,
        write_line: None,
        meaning: None,
    };
    submit(pool, actor, id, submission).await
}

/// Key under which a paste is stored once per incident: its kind and the SHA-256 of its
/// content, so the same paste twice (through the page, the API or an agent) says so instead of
/// doubling the observations.
pub fn paste_key(id: &IncidentId, kind: EvidenceKind, content: &str) -> String {
    let digest = crate::digest::sha256_hex(content.as_bytes());
    format!("paste:{id}:{}:{digest}", kind.as_str())
}

/// What a responder or an integration submits as evidence.
#[derive(Debug)]
pub struct Submission<'a> {
    /// Logs, metrics, an alert body or a note.
    pub kind: EvidenceKind,
    /// The text as sent (redacted before it is stored).
    pub content: String,
    /// Where it came from, in words (at most 200 characters); may be empty.
    pub source: &'a str,
    /// Makes a repeated delivery a no-op (a paste's or an alert's key).
    pub dedup_key: Option<&'a str>,
    /// The incident version the submitter saw; a stale one is refused (409), `None` skips it.
    pub expected_version: Option<i64>,
    /// The query the app ran to get `content`, and where its result can be seen; `None` for
    /// everything people and senders submit.
    pub link: Option<QueryLink>,
    /// A line to wait in, first come first served, right before the write transaction and
    /// until it ends (the Prometheus source's: [`crate::prometheus::Prometheus::write_line`]);
    /// `None`: the transaction queues on the database alone.
    pub write_line: Option<&'a tokio::sync::Semaphore>,
    /// The failure-mode fallback ([`crate::memory::Memory::failure_mode_meanings`]): observations
    /// no pattern tags are compared with the failure modes' meanings; `None`: patterns only.
    pub meaning: Option<Arc<FailureModeMeanings>>,
}

/// Waits for the turn in `line` (first come first served); the turn ends when the permit is
/// dropped. `None` without a line, or if the line is closed (never: nothing closes it).
pub(crate) async fn wait_in_line(
    line: Option<&tokio::sync::Semaphore>,
) -> Option<tokio::sync::SemaphorePermit<'_>> {
    match line {
        Some(l) => l.acquire().await.ok(),
        None => None,
    }
}

/// [`add`] with the incident version the submitter saw, checked inside the write transaction.
///
/// # Errors
/// As [`add`], plus [`AppError::Conflict`] when `expected_version` is not current.
///
/// Long on purpose: the steps of one incident write in order (check, redact, extract, insert,
/// observations, the event), so the transaction's extent is visible.
pub async fn submit(
    pool: &Db,
    actor: &str,
    id: &IncidentId,
    submission: Submission<'_>,
) -> AppResult<EvidenceAdded> {
    let Submission {
        kind,
        content,
        source,
        dedup_key,
        expected_version,
        link,
        write_line,
        meaning,
    } = submission;
    if content.trim().is_empty() {
        return Err(ValidationError::new(
            "content",
            "is empty: paste logs, metrics, an alert body or a note",
        )
        .into());
    }
    let source = crate::domain::optional_text("source", source, SOURCE_MAX)?;
    // The digest of what was sent, before redaction: deliveries can be matched by it without
    // the stored text holding what was redacted.
    let sha256 = crate::digest::sha256_hex(content.as_bytes());
    let submitted_bytes = content.len();
    // Redact first, then extract from the redacted text: observations, their examples and line
    // references all come from what is stored, so a secret that is recognised only in its
    // context (a Kubernetes Secret, a `.env` file) never reaches a single-line example.
    // That work is done before the write transaction, on the incident's map as it stands (a
    // fresh one for its first evidence), so the write lock is held for the inserts only; inside,
    // the map is read again and the work redone only when another write changed it meanwhile.
    // The failure-mode fallback's model work is done here too, never inside the transaction.
    let seen = store::redaction::stored(pool, id.as_str()).await?;
    let base = match &seen {
        Some(r) => r.clone(),
        None => store::redaction::peek(pool, id.as_str()).await?,
    };
    let early = redact_and_extract(base, kind, content.clone(), submitted_bytes).await?;
    let by_meaning = FailureModeMeanings::recognise_off_runtime(meaning, kind, &early.1).await;
    let turn = wait_in_line(write_line).await;
    let mut w = IncidentWrite::open(pool, id, actor, expected_version).await?;
    // Checked inside the write transaction, so a Learn that commits meanwhile cannot be followed
    // by evidence on the learned incident.
    if w.incident().state == IncidentState::Learned {
        return Err(AppError::Conflict(format!(
            "{id} is learned and closed; open a new incident for new evidence"
        )));
    }
    let current = w.redactor().clone();
    let (redactor, mut extraction, redacted) = match &seen {
        Some(r) if *r == current => early,
        // No map then and now: the early one is as fresh (only its random salt differs).
        None if current.is_fresh() => early,
        _ => redact_and_extract(current, kind, content, submitted_bytes).await?,
    };
    if let Some(found) = &by_meaning {
        found.apply(&mut extraction);
    }
    if seen.as_ref() != Some(&redactor) {
        w.set_redactor(redactor);
    }
    let new = estore::NewEvidence {
        incident_id: id.as_str(),
        kind: kind.as_str(),
        source: &source,
        content: &redacted,
        bytes: extraction.bytes as i64,
        lines: extraction.lines as i64,
        format: &extraction.format,
        author: actor,
        dedup_key,
    };
    let at = w.at();
    let Some(evidence_id) = estore::insert(w.tx(), &new, at).await? else {
        drop(w);
        drop(turn);
        let existing = match dedup_key {
            Some(k) => estore::find_by_key(pool, k).await?,
            None => None,
        };
        return Ok(EvidenceAdded {
            evidence: existing.ok_or_else(|| AppError::Conflict("duplicate delivery".into()))?,
            observations: Vec::new(),
            created: false,
        });
    };
    let ids = write_observations(
        &mut w,
        kind,
        evidence_id,
        &extraction.observations,
        link.as_ref(),
    )
    .await?;
    let from = if source.is_empty() {
        String::new()
    } else {
        format!(" from {source}")
    };
    let (format, lines) = (&extraction.format, extraction.lines);
    let detail = format!(
        "{} {format} ({lines} lines, {} observations){from}",
        kind.as_str(),
        ids.len()
    );
    // The source says how it arrived when a door names it (`MCP: <client>` for an agent's).
    let mut audit = serde_json::json!({"evidence": evidence_id, "kind": kind, "bytes": submitted_bytes as i64, "observations": ids.len(), "sha256": sha256});
    if !source.is_empty() {
        audit["source"] = serde_json::Value::String(source.clone());
    }
    w.record_event(Event::new("evidence_added", detail).audited("evidence.add", audit))
        .await?;
    w.commit().await?;
    drop(turn);
    added(pool, id, evidence_id, &ids).await
}

/// `content` redacted with `redactor` and what extraction finds in the redacted text (with the
/// submitted size), off the async runtime; returns the redactor with any new placeholders.
///
/// # Errors
/// [`AppError::Internal`] if the worker panicked.
async fn redact_and_extract(
    redactor: crate::evidence::redact::Redactor,
    kind: EvidenceKind,
    content: String,
    submitted_bytes: usize,
) -> AppResult<(crate::evidence::redact::Redactor, Extraction, String)> {
    tokio::task::spawn_blocking(move || {
        let mut redactor = redactor;
        let redacted = redactor.redact_large(content);
        let mut extraction = extract(kind, &redacted);
        extraction.bytes = submitted_bytes as u64;
        (redactor, extraction, redacted)
    })
    .await
    .map_err(|e| AppError::Internal(e.into()))
}

/// What a committed submission stored: evidence `evidence_id` of incident `id` (without
/// content) and its observations `ids`.
///
/// # Errors
/// Database errors; [`AppError::Internal`] if the evidence is gone.
async fn added(
    pool: &AnyPool,
    id: &IncidentId,
    evidence_id: i64,
    ids: &[i64],
) -> AppResult<EvidenceAdded> {
    let observations = mstore::get_many(pool, ids).await?;
    let evidence = estore::list(pool, id.as_str())
        .await?
        .into_iter()
        .find(|e| e.id == evidence_id)
        .ok_or_else(|| AppError::Internal(anyhow::anyhow!("evidence {evidence_id} vanished")))?;
    Ok(EvidenceAdded {
        evidence,
        observations,
        created: true,
    })
}

/// Lines `from..=to` (1-based, at most `max`) of evidence `evidence_id` on incident `id`, with its
/// metadata.
///
/// # Errors
/// [`AppError::NotFound`] when the evidence is not on that incident; database errors.
pub async fn lines(
    pool: &AnyPool,
    id: &IncidentId,
    evidence_id: i64,
    from: u64,
    to: u64,
    max: u64,
) -> AppResult<(estore::EvidenceMeta, Vec<(u64, String)>)> {
    estore::lines(pool, id.as_str(), evidence_id, from, to, max).await
}
