//! Writing organizational memory: redaction first, the epistemic rules of DESIGN.md §2, the
//! audit log for every write, supersede and retract (never a hard delete).

use serde::{Deserialize, Serialize};
use sqlx::AnyPool;

use crate::domain::Validation;
use crate::domain::memory::{MemoryRecord, NewRecord};
use crate::error::{AppError, AppResult};
use crate::store::{self, memory};

/// Writes one record in its own write ([`store::Write::write_memory`]): its texts redacted
/// (with its incident's placeholder map when it has one), its citations checked to exist and
/// obey DESIGN.md §2, a durable one's failure modes completed with the tags of its text,
/// inserted (idempotent on `origin`), audited (`memory.write`) and, for an incident's record,
/// on that incident's timeline. Returns the record as stored.
///
/// # Errors
/// [`AppError::Validation`] when a citation is missing or breaks a rule; database errors.
pub async fn write(db: &store::Db, r: NewRecord) -> AppResult<MemoryRecord> {
    let mut w = store::Write::open(db, &r.author).await?;
    let (id, _) = w
        .write_memory(r, crate::memory::recall::derive_tags)
        .await?;
    w.commit().await?;
    memory::record(db, id).await
}

/// Marks `old` superseded by `new` (both must exist; a record cannot supersede itself).
///
/// # Errors
/// [`AppError::NotFound`], or [`AppError::Conflict`] when `old` is retracted or already
/// superseded.
pub async fn supersede(
    pool: &AnyPool,
    actor: &str,
    old: i64,
    new: i64,
    reason: &str,
) -> AppResult<MemoryRecord> {
    let mut w = store::Write::begin(pool).await?;
    supersede_in(&mut w, actor, old, new, reason).await?;
    w.commit().await?;
    memory::record(pool, old).await
}

/// [`supersede`] inside the caller's unit of work (with the write of `new`, e.g. a runbook's
/// next version accepted from the review queue): the same checks and the same audit entry.
///
/// # Errors
/// As [`supersede`].
pub async fn supersede_in(
    w: &mut impl store::UnitOfWork,
    actor: &str,
    old: i64,
    new: i64,
    reason: &str,
) -> AppResult<()> {
    if old == new {
        return Err(crate::domain::ValidationError::new(
            "superseded_by",
            "a record cannot supersede itself",
        )
        .into());
    }
    let o = memory::get_in(w.tx(), old).await?;
    let n = memory::get_in(w.tx(), new).await?;
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
        w.tx(),
        old,
        Validation::Superseded,
        Some(new),
        actor,
        reason,
    )
    .await?;
    let detail = serde_json::json!({"superseded_by": new, "reason": reason});
    w.audit_by(
        actor,
        "memory.supersede",
        &format!("MEM-{old}"),
        &detail.to_string(),
    )
    .await?;
    Ok(())
}

/// Retracts a record: hidden from recall on every path, kept (with its history) for audit.
///
/// # Errors
/// [`AppError::NotFound`]; [`AppError::Conflict`] when already retracted.
pub async fn retract(
    pool: &AnyPool,
    actor: &str,
    id: i64,
    reason: &str,
) -> AppResult<MemoryRecord> {
    let mut w = crate::store::Write::begin(pool).await?;
    let r = memory::get_in(w.tx(), id).await?;
    if r.validation == Validation::Retracted {
        return Err(AppError::Conflict(format!("MEM-{id} is already retracted")));
    }
    memory::set_validation(w.tx(), id, Validation::Retracted, None, actor, reason).await?;
    let detail = serde_json::json!({"reason": reason});
    w.audit_by(
        actor,
        "memory.retract",
        &format!("MEM-{id}"),
        &detail.to_string(),
    )
    .await?;
    w.commit().await?;
    memory::record(pool, id).await
}

/// One line of an export file: a [`MemoryRecord`] (its JSON shape, flattened) plus the record's
/// stored embedding vectors, so that an import does not embed again.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExportLine {
    /// The record.
    #[serde(flatten)]
    pub record: MemoryRecord,
    /// Its vectors, by model and part; absent in files written before vectors were exported.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vectors: Vec<ExportedVector>,
}

/// A vector in an export file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExportedVector {
    /// Model name (`all-MiniLM-L6-v2`, or an endpoint's model).
    pub model: String,
    /// Absent for the record's own vector; 0, 1, 2 for a rule's ALWAYS, BECAUSE, SCOPE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part: Option<i64>,
    /// The vector's little-endian f32s, hex-encoded (384 dimensions → 3,072 characters).
    pub f32le_hex: String,
}

impl ExportedVector {
    fn decode(&self) -> Result<Vec<f32>, String> {
        let bytes = hex::decode(&self.f32le_hex).map_err(|e| format!("vector: {e}"))?;
        if bytes.is_empty() || !bytes.len().is_multiple_of(4) {
            return Err(format!(
                "vector: {} bytes is not a whole number of f32s",
                bytes.len()
            ));
        }
        Ok(bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }
}

/// Exports every record as JSON lines (one [`ExportLine`] per line, ids ascending), each with its
/// stored vectors.
///
/// # Errors
/// Database errors.
pub async fn export(pool: &AnyPool) -> AppResult<String> {
    let mut vectors: std::collections::HashMap<i64, Vec<ExportedVector>> =
        std::collections::HashMap::new();
    for v in crate::store::embeddings::all_vectors(pool).await? {
        let bytes: Vec<u8> = v.vector.iter().flat_map(|x| x.to_le_bytes()).collect();
        vectors
            .entry(v.record_id)
            .or_default()
            .push(ExportedVector {
                model: v.model,
                part: v.part,
                f32le_hex: hex::encode(bytes),
            });
    }
    let mut out = String::new();
    for record in memory::all(pool).await? {
        let line = ExportLine {
            vectors: vectors.remove(&record.id).unwrap_or_default(),
            record,
        };
        out.push_str(&serde_json::to_string(&line).map_err(|e| AppError::Internal(e.into()))?);
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

/// Why an import wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// Lines that could not be read, by number.
    #[error("{} bad line(s)", .0.len())]
    BadLines(Vec<BadLine>),
    /// Records whose id is already in the database (without `skip_existing`), ascending.
    #[error("{} record(s) already exist", .0.len())]
    Existing(Vec<i64>),
    /// The database failed.
    #[error(transparent)]
    App(#[from] AppError),
}

impl From<sqlx::Error> for ImportError {
    fn from(e: sqlx::Error) -> Self {
        Self::App(e.into())
    }
}

/// What an import wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Imported {
    /// Records written.
    pub imported: usize,
    /// Records left out because their id was already in the database (`skip_existing`).
    pub skipped: usize,
}

/// Imports JSON lines written by [`export`]. Every line is validated first; if any is bad,
/// nothing is imported and the bad lines are returned by number. Records whose id already
/// exists stop the import (nothing written) unless `skip_existing`, which leaves those as they
/// are. The others are written in one transaction with their ids, links, instants and vectors
/// (records without vectors are embedded later by the backfill).
///
/// # Errors
/// [`ImportError::BadLines`], [`ImportError::Existing`], or database errors.
pub async fn import(
    pool: &AnyPool,
    actor: &str,
    jsonl: &str,
    skip_existing: bool,
) -> Result<Imported, ImportError> {
    let mut records = Vec::new();
    let mut vectors = Vec::new();
    let mut bad = Vec::new();
    for (i, line) in jsonl.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<ExportLine>(line) {
            Ok(l) if l.record.text.trim().is_empty() => bad.push(BadLine {
                line: i + 1,
                message: "text is empty".into(),
            }),
            Ok(l) => {
                for v in &l.vectors {
                    match v.decode() {
                        Ok(vector) => vectors.push(crate::store::embeddings::StoredVector {
                            record_id: l.record.id,
                            model: v.model.clone(),
                            part: v.part,
                            vector,
                        }),
                        Err(message) => bad.push(BadLine {
                            line: i + 1,
                            message,
                        }),
                    }
                }
                records.push(l.record);
            }
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
        return Err(ImportError::BadLines(bad));
    }
    let mut w = crate::store::Write::begin(pool).await?;
    let existing =
        memory::existing_ids(w.tx(), &records.iter().map(|r| r.id).collect::<Vec<_>>()).await?;
    if !existing.is_empty() && !skip_existing {
        return Err(ImportError::Existing(existing.into_iter().collect()));
    }
    let skipped = existing.len();
    records.retain(|r| !existing.contains(&r.id));
    for r in &records {
        memory::restore(w.tx(), r).await?;
    }
    for r in &records {
        memory::restore_links(w.tx(), r).await?;
    }
    crate::store::embeddings::restore_vectors(w.tx(), &vectors).await?;
    let detail = serde_json::json!({
        "records": records.len(), "skipped": skipped, "vectors": vectors.len(),
    });
    w.audit_by(actor, "memory.import", "memories", &detail.to_string())
        .await?;
    w.commit().await?;
    Ok(Imported {
        imported: records.len(),
        skipped,
    })
}

/// Writes a note or runbook `r` by a person (confirmed at once: notes are human knowledge);
/// for a dependency, also the edge in the service graph; with `replaces`, as the next version
/// of that record (same kind; `data.version` counts up from the old one's, `data.previous`
/// names it), superseding it in the same write. A first version gets `data.version = 1`.
///
/// # Errors
/// [`crate::domain::ValidationError`] (422) when `replaces` is of another kind;
/// [`AppError::NotFound`] for an unknown `replaces`; as [`write`] and [`supersede`] (a
/// conflict writes nothing: the note and the supersession are one write).
pub async fn write_version(
    db: &store::Db,
    actor: &str,
    mut r: NewRecord,
    replaces: Option<i64>,
) -> AppResult<MemoryRecord> {
    let version = match replaces {
        Some(old) => {
            let prev = memory::record(db, old).await?;
            if prev.kind != r.kind {
                return Err(crate::domain::ValidationError::new(
                    "replaces",
                    format!("MEM-{old} is a {}, not a {}", prev.kind, r.kind),
                )
                .into());
            }
            prev.data
                .get("version")
                .and_then(|v| v.as_i64())
                .unwrap_or(1)
                + 1
        }
        None => 1,
    };
    if let Some(obj) = r.data.as_object_mut() {
        obj.insert("version".into(), version.into());
        if let Some(old) = replaces {
            obj.insert("previous".into(), old.into());
        }
    }
    let mut w = store::Write::open(db, actor).await?;
    if r.kind == crate::domain::MemoryKind::Dependency
        && let (Some(svc), Some(on)) = (
            r.services.first(),
            r.data.get("depends_on").and_then(|v| v.as_str()),
        )
    {
        memory::add_dependency(w.tx(), svc, on).await?;
    }
    let (id, _) = w
        .write_memory(r, crate::memory::recall::derive_tags)
        .await?;
    if let Some(old) = replaces {
        supersede_in(&mut w, actor, old, id, "new version").await?;
    }
    w.commit().await?;
    memory::record(db, id).await
}

/// One memory record `id` with the records it cites (`sources`) and its history
/// (`(at RFC 3339, actor, change, detail)`, oldest first).
///
/// # Errors
/// [`AppError::NotFound`]; database errors.
pub async fn detail(
    pool: &AnyPool,
    id: i64,
) -> AppResult<(
    MemoryRecord,
    Vec<MemoryRecord>,
    Vec<(String, String, String, String)>,
)> {
    let record = memory::record(pool, id).await?;
    let sources = memory::get_many(pool, &record.sources).await?;
    let history = memory::history(pool, id).await?;
    Ok((record, sources, history))
}

/// Memory record `id`.
///
/// # Errors
/// [`AppError::NotFound`]; database errors.
pub async fn get(pool: &AnyPool, id: i64) -> AppResult<MemoryRecord> {
    memory::record(pool, id).await
}

/// The records matching `filter` (see [`memory::MemoryFilter`]), newest first.
///
/// # Errors
/// Database errors.
pub async fn list(pool: &AnyPool, filter: &memory::MemoryFilter) -> AppResult<Vec<MemoryRecord>> {
    memory::list(pool, filter).await
}

/// How many records match `filter` (its page and limit aside), counted up to `cap`.
///
/// # Errors
/// Database errors.
pub async fn count(pool: &AnyPool, filter: &memory::MemoryFilter, cap: i64) -> AppResult<i64> {
    memory::count(pool, filter, cap).await
}

/// Whether memory holds no record at all (the Memory page then offers the sample history).
///
/// # Errors
/// Database errors.
pub async fn is_empty(pool: &AnyPool) -> AppResult<bool> {
    let one = memory::MemoryFilter {
        limit: Some(1),
        ..Default::default()
    };
    Ok(memory::list(pool, &one).await?.is_empty())
}
