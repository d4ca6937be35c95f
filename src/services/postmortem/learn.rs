//! Learn: writes exactly the plan, in one transaction, once; a repeat returns the stored result.

use super::{LearningsPreview, PlannedMemory, plan};
use crate::domain::memory::MemoryRecord;
use crate::domain::{IncidentId, IncidentState, Transition};
use crate::error::{AppError, AppResult};
use crate::store::users::User;
use crate::store::{self, Db, IncidentWrite, incidents, memory as mstore, postmortems as pstore};
use serde::Serialize;
use sqlx::AnyPool;

/// What Learn returns (also stored, so a repeat returns the same).
#[derive(Debug, Clone, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct LearnResult {
    /// Incident.
    pub incident_id: String,
    /// Ids of the records written, in plan order.
    pub written: Vec<i64>,
    /// Existing records whose evidence count was bumped instead of writing duplicates.
    pub linked: Vec<i64>,
    /// "N durable memories written".
    pub message: String,
}

/// The records a Learn wrote, in the order it wrote them (for the page after Learn).
///
/// # Errors
/// Database errors.
pub async fn written_records(pool: &AnyPool, result: &LearnResult) -> AppResult<Vec<MemoryRecord>> {
    let mut records = mstore::get_many(pool, &result.written).await?;
    records.sort_by_key(|r| result.written.iter().position(|w| *w == r.id));
    Ok(records)
}

/// Learn: confirmed → learned, writing exactly the preview in one transaction. A repeated or
/// concurrent call writes nothing more and returns the stored result.
///
/// # Errors
/// [`AppError::InvalidTransition`] unless confirmed (or already learned).
pub async fn learn(pool: &Db, user: &User, id: &IncidentId) -> AppResult<LearnResult> {
    learn_inner(pool, user, id, None, None, None).await
}

/// [`learn`] with the reviewer's answer to the preview's grading question (did the copilot's
/// top hypothesis match the confirmed root cause), recorded with the incident in the same
/// transaction. `None` records no grade (the incident stays ungraded).
///
/// # Errors
/// As [`learn`]; a validation error on `top_hypothesis_matched` when there is no hypothesis to
/// grade.
pub async fn learn_graded(
    pool: &Db,
    user: &User,
    id: &IncidentId,
    top_hypothesis_matched: Option<bool>,
    expected_version: Option<i64>,
) -> AppResult<LearnResult> {
    learn_inner(
        pool,
        user,
        id,
        None,
        top_hypothesis_matched,
        expected_version,
    )
    .await
}

/// [`learn`] that fails after writing `fail_after` records when set — for the test that shows an
/// interrupted Learn leaves all or nothing.
///
/// # Errors
/// As [`learn`]; [`AppError::Internal`] at the failpoint.
#[doc(hidden)]
pub async fn learn_with_failpoint(
    pool: &Db,
    user: &User,
    id: &IncidentId,
    fail_after: Option<usize>,
) -> AppResult<LearnResult> {
    learn_inner(pool, user, id, fail_after, None, None).await
}

async fn learn_inner(
    pool: &Db,
    user: &User,
    id: &IncidentId,
    fail_after: Option<usize>,
    grade: Option<bool>,
    expected_version: Option<i64>,
) -> AppResult<LearnResult> {
    if expected_version.is_some() {
        // A repeat from a stale page is refused like any stale form, before the stored answer.
        let incident = incidents::get(pool, id).await?;
        incident.check_version(expected_version)?;
    }
    if let Some(done) = stored_result(pool, id).await? {
        return Ok(done);
    }
    let preview = match plan(pool, id).await {
        Ok(p) => p,
        Err(e @ AppError::InvalidTransition(_)) => return stored_result(pool, id).await?.ok_or(e),
        Err(e) => return Err(e),
    };
    let mut w = IncidentWrite::open(pool, id, &user.name, expected_version).await?;
    let from = w.incident().state;
    if from == IncidentState::Learned {
        drop(w);
        return stored_result(pool, id)
            .await?
            .ok_or_else(|| AppError::Conflict(format!("{id} is learned")));
    }
    let to = from.apply(Transition::Learn)?;
    match (grade, &preview.grading) {
        (Some(answer), Some(q)) => crate::services::grading::record_in(&mut w, q, answer).await?,
        (Some(_), None) => {
            return Err(crate::domain::ValidationError::new(
                "top_hypothesis_matched",
                "the copilot proposed no hypothesis for this incident: there is nothing to grade",
            )
            .into());
        }
        (None, _) => {}
    }
    let (written, linked) = write_plan(&mut w, &preview, fail_after).await?;
    check_written_citations(w.tx(), &written).await?;
    let message = format!("{} durable memories written", written.len());
    let audit = serde_json::json!({"written": written.len(), "linked": linked.len()});
    let audit = Some(("incident.learn".to_string(), audit.to_string()));
    let patch = Default::default();
    if !w
        .transition(Transition::Learn, to, &patch, &message, audit)
        .await?
    {
        return Err(AppError::Conflict(format!("{id} changed; reload")));
    }
    let result = LearnResult {
        incident_id: id.to_string(),
        message,
        written,
        linked,
    };
    let json = serde_json::to_string(&result).map_err(|e| AppError::Internal(e.into()))?;
    let at = w.at();
    pstore::save_learning(w.tx(), id.as_str(), &user.name, &json, at).await?;
    w.commit().await?;
    Ok(result)
}

/// Writes Learn's plan in order inside `tx`: links the duplicates, inserts the rest with their
/// planned citations resolved and marks what they contradict. Returns (written, linked).
async fn write_plan(
    w: &mut IncidentWrite,
    preview: &LearningsPreview,
    fail_after: Option<usize>,
) -> AppResult<(Vec<i64>, Vec<i64>)> {
    let (id, actor, at) = (w.incident().id.clone(), w.actor().to_string(), w.at());
    let mut written: Vec<i64> = Vec::new();
    // Indexes in the full plan → ids (duplicates map to the existing record).
    let mut ids_by_plan: std::collections::HashMap<usize, i64> = std::collections::HashMap::new();
    let mut all: Vec<&PlannedMemory> = preview
        .memories
        .iter()
        .chain(preview.duplicates.iter())
        .collect();
    all.sort_by_key(|p| {
        p.record
            .origin
            .clone()
            .and_then(|o| o.rsplit(':').next().and_then(|n| n.parse::<usize>().ok()))
            .unwrap_or(0)
    });
    let mut linked = Vec::new();
    for p in all {
        let idx = p
            .record
            .origin
            .as_deref()
            .and_then(|o| o.rsplit(':').next())
            .and_then(|n| n.parse::<usize>().ok())
            .unwrap_or(0);
        if let Some(existing) = p.duplicate_of {
            mstore::bump_evidence(
                w.tx(),
                existing,
                &actor,
                &format!("confirmed again by {id}"),
            )
            .await?;
            ids_by_plan.insert(idx, existing);
            linked.push(existing);
            continue;
        }
        if fail_after.is_some_and(|n| written.len() >= n) {
            return Err(AppError::Internal(anyhow::anyhow!(
                "failpoint: learn interrupted after {} records",
                written.len()
            )));
        }
        let mut r = p.record.clone();
        r.cites
            .extend(p.cites_planned.iter().filter_map(|i| ids_by_plan.get(i)));
        // The text was redacted for the preview; write it as is.
        let (rid, _) = mstore::insert(w.tx(), &r, at).await?;
        let audit = serde_json::json!({"id": rid, "kind": r.kind, "epistemic_type": r.epistemic_type, "incident": id.as_str(), "validation": r.validation});
        w.audit("memory.write", &format!("MEM-{rid}"), &audit.to_string())
            .await?;
        for c in &p.contradicts {
            let detail = format!(
                "{id}'s root cause MEM-{rid} says it was not {}",
                c.claim.join(" ")
            );
            mstore::mark_contradicted(w.tx(), c.id, rid, &actor, &detail).await?;
            let audit = serde_json::json!({"id": c.id, "contradicted_by": rid, "claim": c.claim, "incident": id.as_str()});
            w.audit(
                "memory.contradict",
                &format!("MEM-{}", c.id),
                &audit.to_string(),
            )
            .await?;
            let supersession = crate::domain::proposals::Supersession {
                old: c.id,
                old_text: c.text.clone(),
                new: rid,
                new_text: r.text.clone(),
                claim: c.claim.clone(),
            };
            crate::services::proposals::draft_supersession_in(w, supersession).await?;
        }
        ids_by_plan.insert(idx, rid);
        written.push(rid);
    }
    Ok((written, linked))
}

/// Every inference written must cite something, and no decision may cite only decisions
/// (DESIGN.md §2) — checked on what was actually written before committing.
async fn check_written_citations(tx: &mut store::Tx, ids: &[i64]) -> AppResult<()> {
    for id in ids {
        let r = mstore::get_in(tx, *id).await?;
        let mut types = Vec::new();
        for s in &r.sources {
            types.push(mstore::get_in(tx, *s).await?.epistemic_type);
        }
        crate::domain::memory::check_citations(r.epistemic_type, &types).map_err(|e| {
            AppError::Internal(anyhow::anyhow!(
                "learn plan broke a citation rule on MEM-{id}: {e}"
            ))
        })?;
    }
    Ok(())
}

async fn stored_result(pool: &AnyPool, id: &IncidentId) -> AppResult<Option<LearnResult>> {
    match pstore::learning(pool, id.as_str()).await? {
        Some(s) => Ok(Some(
            serde_json::from_str(&s).map_err(|e| AppError::Internal(e.into()))?,
        )),
        None => Ok(None),
    }
}
