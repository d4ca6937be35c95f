//! The review side: a reviewer edits, accepts or rejects a pending proposal; the queue and the
//! marking of a consolidation's sources.

use super::Draft;
use crate::domain::consolidation::Consolidation;
use crate::domain::proposals::ProposalStatus;
use crate::domain::{IncidentId, Role, Validation};
use crate::error::{AppError, AppResult};
use crate::store::proposals::{self as pstore, StoredProposal};
use crate::store::users::User;
use crate::store::{self, Db, Event, IncidentWrite, Tx, consolidation as cstore, memory as mstore};
use serde::Deserialize;
use sqlx::AnyPool;

/// A reviewer's edit of a runbook draft before accepting it (the form's textareas: one step or
/// cause per line).
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
pub struct RunbookEdit {
    /// Title.
    #[serde(default)]
    pub title: Option<String>,
    /// Summary.
    #[serde(default)]
    pub summary: Option<String>,
    /// Steps, one per line.
    #[serde(default)]
    pub steps: Option<String>,
    /// Common causes, one per line.
    #[serde(default)]
    pub common_causes: Option<String>,
}

fn require_reviewer(user: &User, what: &str) -> AppResult<()> {
    if user.role.includes(Role::Reviewer) {
        Ok(())
    } else {
        Err(AppError::needs_role(Role::Reviewer, what))
    }
}

async fn pending_in(tx: &mut Tx, id: i64, version: Option<i64>) -> AppResult<StoredProposal> {
    let p = pstore::get_in(tx, id).await?;
    if p.status != ProposalStatus::Pending {
        return Err(AppError::Conflict(format!(
            "PRO-{id} is already {} by {}; nothing was changed",
            p.status.as_str(),
            p.decided_by.as_deref().unwrap_or("someone")
        )));
    }
    if let Some(v) = version.filter(|v| *v != p.version) {
        return Err(AppError::Conflict(format!(
            "PRO-{id} changed since this page was loaded (version {}, the page showed {v}); \
             nothing was changed",
            p.version
        )));
    }
    Ok(p)
}

fn draft_of(p: &StoredProposal) -> AppResult<Draft> {
    serde_json::from_value(p.draft.clone())
        .map_err(|e| AppError::Internal(anyhow::anyhow!("stored draft PRO-{}: {e}", p.id)))
}

/// Applies a reviewer's edit to a runbook draft (a no-op for other drafts) and checks it.
fn apply_edit(draft: &mut Draft, edit: RunbookEdit) -> AppResult<()> {
    let (Some(rb), Some(record)) = (draft.runbook.as_mut(), draft.record.as_mut()) else {
        return Ok(());
    };
    if let Some(t) = edit.title {
        rb.title = t.trim().to_string();
    }
    if let Some(s) = edit.summary {
        rb.summary = crate::domain::text::unix_newlines(s.trim());
    }
    if let Some(s) = edit.steps {
        rb.steps = crate::domain::proposals::lines_of(&s);
    }
    if let Some(c) = edit.common_causes {
        rb.common_causes = crate::domain::proposals::lines_of(&c);
    }
    rb.validate()?;
    rb.apply_to(record);
    Ok(())
}

/// Writes what accepting proposal `id` writes, in the incident write `write`: its record
/// (confirmed, by the reviewer), then what follows from it — a runbook's new version supersedes
/// the old one, a consolidation marks its sources — or, for a supersession, the mark on the
/// older record. Returns the record written, if any.
async fn write_accepted(
    write: &mut IncidentWrite,
    user: &User,
    id: i64,
    draft: &Draft,
) -> AppResult<Option<i64>> {
    if let Some(s) = &draft.supersession {
        let reason = format!("contradicted by MEM-{} (PRO-{id})", s.new);
        crate::services::memory::supersede_in(write, &user.name, s.old, s.new, &reason).await?;
        return Ok(None);
    }
    let Some(mut record) = draft.record.clone() else {
        return Err(AppError::Internal(anyhow::anyhow!(
            "PRO-{id} writes nothing"
        )));
    };
    record.author = user.name.clone();
    record.validation = Validation::Confirmed;
    record.origin = Some(format!("proposal:{id}"));
    let (rid, _) = write
        .write_memory(record, crate::memory::recall::derive_tags)
        .await?;
    if let Some(old) = draft.runbook.as_ref().and_then(|r| r.replaces) {
        let reason = format!("new version (PRO-{id})");
        crate::services::memory::supersede_in(write, &user.name, old, rid, &reason).await?;
    }
    if let Some(c) = &draft.consolidation {
        mark_sources_in(write, &user.name, id, c, rid).await?;
    }
    Ok(Some(rid))
}

/// Accepts a pending proposal (reviewers): writes its record — for a runbook after applying the
/// reviewer's `edit` — through the incident write's `write_memory`, confirmed and authored by the
/// reviewer; a runbook's new version supersedes the one it replaces; a consolidation marks each
/// source `consolidated_into` the merged rule; a supersession marks the older record superseded
/// by the newer. One transaction, on the audit log and the incident timeline. `version` is the
/// proposal version the page showed.
///
/// # Errors
/// [`AppError::Forbidden`] without the reviewer role; [`AppError::NotFound`];
/// [`AppError::Conflict`] when already decided or stale, or when a record it marks changed
/// since it was drafted; validation errors for a bad edit.
pub async fn accept(
    db: &Db,
    user: &User,
    id: i64,
    version: Option<i64>,
    edit: RunbookEdit,
) -> AppResult<StoredProposal> {
    require_reviewer(user, "accepting a proposal")?;
    let (mut write, p) = open_pending(db, user, id, version).await?;
    let mut draft = draft_of(&p)?;
    apply_edit(&mut draft, edit)?;
    let rid = write_accepted(&mut write, user, id, &draft).await?;
    let json = serde_json::to_value(&draft).map_err(|e| AppError::Internal(e.into()))?;
    let event = match (rid, &draft.supersession) {
        (Some(rid), _) => format!("{} PRO-{id} accepted: MEM-{rid}", p.kind.as_str()),
        (None, Some(s)) => format!(
            "{} PRO-{id} accepted: MEM-{} superseded by MEM-{}",
            p.kind.as_str(),
            s.old,
            s.new
        ),
        (None, None) => format!("{} PRO-{id} accepted", p.kind.as_str()),
    };
    let decision = Decision {
        status: ProposalStatus::Accepted,
        reason: None,
        record_id: rid,
        draft: &json,
        event,
        audit: serde_json::json!({"kind": p.kind, "incident": p.incident_id, "record": rid}),
    };
    record_decision(&mut write, &p, user, decision).await?;
    write.commit().await?;
    pstore::get(db, id).await
}

/// Opens the incident write of proposal `id`'s incident on behalf of `user` and reads the
/// proposal inside it, pending and at `version`.
///
/// # Errors
/// [`AppError::NotFound`]; [`AppError::Conflict`] as [`pending_in`].
async fn open_pending(
    db: &Db,
    user: &User,
    id: i64,
    version: Option<i64>,
) -> AppResult<(IncidentWrite, StoredProposal)> {
    let incident = IncidentId::parse(&pstore::get(db, id).await?.incident_id)?;
    let mut write = IncidentWrite::open(db, &incident, &user.name, None).await?;
    let p = pending_in(write.tx(), id, version).await?;
    Ok((write, p))
}

/// Rejects a pending proposal with a reason (reviewers); nothing is written to memory, the
/// proposal stays with its reason, on the audit log and the incident timeline.
///
/// # Errors
/// As [`accept`]; a validation error for an empty reason.
pub async fn reject(
    db: &Db,
    user: &User,
    id: i64,
    version: Option<i64>,
    reason: &str,
) -> AppResult<StoredProposal> {
    require_reviewer(user, "rejecting a proposal")?;
    let reason = crate::domain::required_text("reason", reason, 2000)?;
    let (mut write, p) = open_pending(db, user, id, version).await?;
    let mut reason_r = reason;
    write.redact(&mut [&mut reason_r]);
    let decision = Decision {
        status: ProposalStatus::Rejected,
        reason: Some(&reason_r),
        record_id: None,
        draft: &p.draft,
        event: format!("{} PRO-{id} rejected: {reason_r}", p.kind.as_str()),
        audit: serde_json::json!({"kind": p.kind, "incident": p.incident_id, "reason": reason_r}),
    };
    record_decision(&mut write, &p, user, decision).await?;
    write.commit().await?;
    pstore::get(db, id).await
}

/// A reviewer's decision on a proposal, as [`record_decision`] writes it.
struct Decision<'a> {
    status: ProposalStatus,
    reason: Option<&'a str>,
    record_id: Option<i64>,
    draft: &'a serde_json::Value,
    /// The incident timeline's text.
    event: String,
    /// The audit entry's details.
    audit: serde_json::Value,
}

/// Writes `d` on pending proposal `p` in `write`: the compare-and-set on its version (a 409
/// when someone decided first), the incident timeline event and the audit entry.
async fn record_decision(
    write: &mut IncidentWrite,
    p: &StoredProposal,
    user: &User,
    d: Decision<'_>,
) -> AppResult<()> {
    let id = p.id;
    let at = write.at();
    let decided = pstore::decide(
        write.tx(),
        id,
        p.version,
        d.status,
        &user.name,
        at,
        d.reason,
        d.record_id,
        d.draft,
    )
    .await?;
    if !decided {
        return Err(AppError::Conflict(format!(
            "PRO-{id} was decided by someone else"
        )));
    }
    let (event, action) = match d.status {
        ProposalStatus::Accepted => ("proposal_accepted", "proposal.accept"),
        _ => ("proposal_rejected", "proposal.reject"),
    };
    write.record_event(Event::new(event, d.event)).await?;
    write
        .audit(action, &format!("PRO-{id}"), &d.audit.to_string())
        .await?;
    Ok(())
}

/// The pending proposals for the review queue: consolidations of a service over the rule cap
/// first (they keep its standing rules bounded), then the rest, oldest first.
///
/// # Errors
/// Database errors.
pub async fn pending(pool: &AnyPool) -> AppResult<Vec<StoredProposal>> {
    let mut all = pstore::list(pool, ProposalStatus::Pending).await?;
    all.sort_by_key(|p| p.draft["consolidation"]["over_cap"].is_null());
    Ok(all)
}

/// On accepting consolidation proposal `proposal` (inside its transaction, after the merged
/// rule `into` was written): marks each source `consolidated_into` it, with a history entry
/// and a `memory.consolidate` audit entry. Nothing is deleted; the merged rule cites them.
///
/// # Errors
/// [`AppError::Conflict`] when a source is no longer confirmed or was consolidated meanwhile
/// (nothing is changed: the caller's transaction is dropped).
pub async fn mark_sources_in(
    w: &mut impl store::UnitOfWork,
    actor: &str,
    proposal: i64,
    c: &Consolidation,
    into: i64,
) -> AppResult<()> {
    for s in &c.sources {
        let r = mstore::get_in(w.tx(), s.id).await?;
        if r.validation != Validation::Confirmed || r.consolidated_into().is_some() {
            return Err(AppError::Conflict(format!(
                "MEM-{} is {}{} since PRO-{proposal} was drafted; nothing was changed",
                s.id,
                r.validation,
                r.consolidated_into()
                    .map(|i| format!(" and consolidated into MEM-{i}"))
                    .unwrap_or_default()
            )));
        }
        let detail = format!("consolidated into MEM-{into} (PRO-{proposal})");
        cstore::mark_consolidated(w.tx(), s.id, into, actor, &detail).await?;
        w.audit_by(
            actor,
            "memory.consolidate",
            &format!("MEM-{}", s.id),
            &serde_json::json!({"id": s.id, "consolidated_into": into, "proposal": proposal})
                .to_string(),
        )
        .await?;
    }
    Ok(())
}
