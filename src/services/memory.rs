//! Writing organizational memory: redaction first, the epistemic rules of DESIGN.md §2, the
//! audit log for every write, supersede and retract (never a hard delete).

use sqlx::SqlitePool;

use crate::domain::memory::{MemoryRecord, NewRecord, check_citations};
use crate::domain::{EpistemicType, Validation};
use crate::error::{AppError, AppResult};
use crate::store::{self, Tx, audit, memory};

/// Redacts `text` with the incident's stable placeholder map (or a fresh one without an
/// incident), persisting the map, inside the caller's transaction.
///
/// # Errors
/// Database errors.
pub async fn redact_for(
    tx: &mut Tx,
    incident_id: Option<&str>,
    texts: &mut [&mut String],
) -> AppResult<()> {
    let Some(incident) = incident_id else {
        let mut r = crate::redact::Redactor::default();
        for t in texts.iter_mut() {
            **t = r.redact(t);
        }
        return Ok(());
    };
    let mut redactor = store::redaction::load(tx, incident).await?;
    for t in texts.iter_mut() {
        **t = redactor.redact(t);
    }
    store::redaction::save(tx, incident, &redactor).await
}

/// Redacts every string of `value` (a whole document, e.g. a post-mortem) with the incident's
/// placeholder map, persisting the map, inside the caller's transaction: the same policy as
/// [`redact_for`].
///
/// # Errors
/// Database errors; a value that does not round-trip through JSON.
pub async fn redact_value_for<T: serde::Serialize + serde::de::DeserializeOwned>(
    tx: &mut Tx,
    incident_id: &str,
    value: &T,
) -> AppResult<T> {
    let mut redactor = store::redaction::load(tx, incident_id).await?;
    let out = redactor
        .redact_value(value)
        .map_err(|e| AppError::Internal(e.into()))?;
    store::redaction::save(tx, incident_id, &redactor).await?;
    Ok(out)
}

/// Writes one record inside the caller's transaction: redacts its text, checks its citations
/// exist and obey the rules, inserts it and appends `memory.write` to the audit log. Idempotent
/// on `origin`. Returns the id and whether it was newly written.
///
/// # Errors
/// [`AppError::Validation`] when a citation is missing or breaks a rule.
pub async fn write_in(tx: &mut Tx, mut r: NewRecord) -> AppResult<(i64, bool)> {
    let incident = r.incident_id.clone();
    {
        let mut texts: Vec<&mut String> = vec![&mut r.text];
        if let Some(rule) = r.rule.as_mut() {
            texts.push(&mut rule.always);
            texts.push(&mut rule.because);
        }
        if let Some(t) = r.target.as_mut() {
            texts.push(t);
        }
        redact_for(tx, incident.as_deref(), &mut texts).await?;
    }
    let mut cited: Vec<EpistemicType> = Vec::with_capacity(r.cites.len());
    for id in &r.cites {
        match memory::get_in(tx, *id).await {
            Ok(rec) => cited.push(rec.epistemic_type),
            Err(AppError::NotFound(_)) => {
                return Err(crate::domain::ValidationError::new(
                    "cites",
                    format!("record {id} does not exist"),
                )
                .into());
            }
            Err(e) => return Err(e),
        }
    }
    check_citations(r.epistemic_type, &cited)?;
    if r.kind.is_durable() {
        // Tags derived from the text on the memory side too, so a paraphrase matches by concept.
        let mut tags: std::collections::BTreeSet<String> = r.failure_modes.drain(..).collect();
        tags.extend(crate::memory::recall::derive_tags(&r.text));
        r.failure_modes = tags.into_iter().collect();
    }
    let (id, created) = memory::insert(tx, &r, store::now()).await?;
    if created && r.kind.is_durable() {
        let detail = serde_json::json!({
            "id": id, "kind": r.kind, "epistemic_type": r.epistemic_type,
            "incident": r.incident_id, "validation": r.validation,
        });
        audit::append(
            tx,
            &r.author,
            "memory.write",
            &format!("MEM-{id}"),
            &detail.to_string(),
        )
        .await?;
        if let Some(inc) = &r.incident_id
            && let Ok(iid) = crate::domain::IncidentId::parse(inc)
        {
            store::incidents::add_event(
                tx,
                &iid,
                store::now(),
                &r.author,
                "memory_written",
                &format!("{} MEM-{id}", r.kind),
            )
            .await?;
        }
    }
    Ok((id, created))
}

/// Writes one record in its own transaction. See [`write_in`].
///
/// # Errors
/// As [`write_in`].
pub async fn write(pool: &SqlitePool, r: NewRecord) -> AppResult<MemoryRecord> {
    let mut tx = store::begin_write(pool).await?;
    let (id, _) = write_in(&mut tx, r).await?;
    tx.commit().await?;
    memory::get(pool, id).await
}

/// Marks `old` superseded by `new` (both must exist; a record cannot supersede itself).
///
/// # Errors
/// [`AppError::NotFound`], or [`AppError::Conflict`] when `old` is retracted or already
/// superseded.
pub async fn supersede(
    pool: &SqlitePool,
    actor: &str,
    old: i64,
    new: i64,
    reason: &str,
) -> AppResult<MemoryRecord> {
    if old == new {
        return Err(crate::domain::ValidationError::new(
            "superseded_by",
            "a record cannot supersede itself",
        )
        .into());
    }
    let mut tx = store::begin_write(pool).await?;
    let o = memory::get_in(&mut tx, old).await?;
    let n = memory::get_in(&mut tx, new).await?;
    if o.validation != Validation::Confirmed {
        return Err(AppError::Conflict(format!(
            "MEM-{old} is {} and cannot be superseded",
            o.validation
        )));
    }
    if n.validation == Validation::Retracted {
        return Err(AppError::Conflict(format!(
            "MEM-{new} is retracted and cannot replace anything"
        )));
    }
    memory::set_validation(
        &mut tx,
        old,
        Validation::Superseded,
        Some(new),
        actor,
        reason,
    )
    .await?;
    let detail = serde_json::json!({"superseded_by": new, "reason": reason});
    audit::append(
        &mut tx,
        actor,
        "memory.supersede",
        &format!("MEM-{old}"),
        &detail.to_string(),
    )
    .await?;
    tx.commit().await?;
    memory::get(pool, old).await
}

/// Retracts a record: hidden from recall on every path, kept (with its history) for audit.
///
/// # Errors
/// [`AppError::NotFound`]; [`AppError::Conflict`] when already retracted.
pub async fn retract(
    pool: &SqlitePool,
    actor: &str,
    id: i64,
    reason: &str,
) -> AppResult<MemoryRecord> {
    let mut tx = store::begin_write(pool).await?;
    let r = memory::get_in(&mut tx, id).await?;
    if r.validation == Validation::Retracted {
        return Err(AppError::Conflict(format!("MEM-{id} is already retracted")));
    }
    memory::set_validation(&mut tx, id, Validation::Retracted, None, actor, reason).await?;
    let detail = serde_json::json!({"reason": reason});
    audit::append(
        &mut tx,
        actor,
        "memory.retract",
        &format!("MEM-{id}"),
        &detail.to_string(),
    )
    .await?;
    tx.commit().await?;
    memory::get(pool, id).await
}

/// Exports every record as JSON lines (one [`MemoryRecord`] per line, ids ascending).
///
/// # Errors
/// Database errors.
pub async fn export(pool: &SqlitePool) -> AppResult<String> {
    let mut out = String::new();
    for r in memory::all(pool).await? {
        out.push_str(&serde_json::to_string(&r).map_err(|e| AppError::Internal(e.into()))?);
        out.push('\n');
    }
    Ok(out)
}

/// A line of an import file that could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadLine {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong with it.
    pub message: String,
}

/// Imports JSON lines written by [`export`]. Every line is validated first; if any is bad,
/// nothing is imported and the bad lines are returned by number. Otherwise all records are
/// written in one transaction with their ids, links and instants; returns how many.
///
/// # Errors
/// `Ok(Err(bad_lines))` for invalid input; `Err` for database errors or an id that exists.
pub async fn import(
    pool: &SqlitePool,
    actor: &str,
    jsonl: &str,
) -> AppResult<Result<usize, Vec<BadLine>>> {
    let mut records = Vec::new();
    let mut bad = Vec::new();
    for (i, line) in jsonl.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<MemoryRecord>(line) {
            Ok(r) if r.text.trim().is_empty() => bad.push(BadLine {
                line: i + 1,
                message: "text is empty".into(),
            }),
            Ok(r) => records.push(r),
            Err(e) => bad.push(BadLine {
                line: i + 1,
                message: e.to_string(),
            }),
        }
    }
    let ids: std::collections::HashSet<i64> = records.iter().map(|r| r.id).collect();
    if ids.len() != records.len() {
        bad.push(BadLine {
            line: 0,
            message: "the file repeats a record id".into(),
        });
    }
    if !bad.is_empty() {
        return Ok(Err(bad));
    }
    let mut tx = store::begin_write(pool).await?;
    for r in &records {
        memory::restore(&mut tx, r).await?;
    }
    for r in &records {
        memory::restore_links(&mut tx, r.id, &r.sources).await?;
    }
    let detail = serde_json::json!({"records": records.len()});
    audit::append(
        &mut tx,
        actor,
        "memory.import",
        "memories",
        &detail.to_string(),
    )
    .await?;
    tx.commit().await?;
    Ok(Ok(records.len()))
}

/// Writes a note or runbook written by a person (confirmed at once: notes are human knowledge)
/// and, for a dependency, adds the edge to the service graph.
///
/// # Errors
/// As [`write_in`].
pub async fn write_note(pool: &SqlitePool, r: NewRecord) -> AppResult<MemoryRecord> {
    let mut tx = store::begin_write(pool).await?;
    if r.kind == crate::domain::MemoryKind::Dependency
        && let (Some(svc), Some(on)) = (
            r.services.first(),
            r.data.get("depends_on").and_then(|v| v.as_str()),
        )
    {
        memory::add_dependency(&mut tx, svc, on).await?;
    }
    let (id, _) = write_in(&mut tx, r).await?;
    tx.commit().await?;
    memory::get(pool, id).await
}
