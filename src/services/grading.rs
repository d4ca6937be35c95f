//! Accuracy grading at Learn: the learnings preview asks the reviewer whether the
//! copilot's top hypothesis matched the confirmed root cause, pre-filled with a suggestion
//! ([`crate::domain::proposals::suggest_grade`]); the answer is recorded with the incident by
//! Learn, only when the reviewer gives one — never guessed silently. The insights page reads
//! the grades (`store::proposals::grades_since`).

use serde::Serialize;
use sqlx::AnyPool;

use crate::domain::Incident;
use crate::error::{AppError, AppResult};
use crate::store::{self, Event, IncidentWrite, memory as mstore, proposals as pstore};

/// The question the learnings preview asks.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct GradeQuestion {
    /// The top hypothesis of the latest investigation (`INF-…`).
    pub hypothesis_id: i64,
    /// Its statement.
    pub hypothesis: String,
    /// The confirmed root cause (the post-mortem's).
    pub root_cause: String,
    /// The suggested answer (whether the hypothesis names the root cause); the reviewer
    /// confirms or changes it.
    pub suggested: bool,
    /// Whether that investigation recalled memory of a prior incident.
    pub memory_recalled: bool,
}

/// The grade question of `incident` with the confirmed `root_cause`; `None` when no
/// investigation proposed a hypothesis.
///
/// # Errors
/// Database errors.
pub async fn question(
    pool: &AnyPool,
    incident: &Incident,
    root_cause: &str,
) -> AppResult<Option<GradeQuestion>> {
    let id = incident.id.as_str();
    let Some(inv) = store::recommendations::latest_investigation(pool, id).await? else {
        return Ok(None);
    };
    let view = crate::services::investigation::view_investigation(pool, inv.id).await?;
    let Some(top) = view.hypotheses.first() else {
        return Ok(None);
    };
    let recalled: Vec<i64> = serde_json::from_str(&inv.recalled)
        .map_err(|e| AppError::Internal(anyhow::anyhow!("stored recall list: {e}")))?;
    let memory_recalled = mstore::get_many(pool, &recalled)
        .await?
        .iter()
        .any(|r| r.incident_id.as_deref().is_some_and(|i| i != id));
    Ok(Some(GradeQuestion {
        hypothesis_id: top.id,
        hypothesis: top.statement.clone(),
        root_cause: root_cause.to_string(),
        suggested: crate::domain::proposals::suggest_grade(&top.statement, root_cause),
        memory_recalled,
    }))
}

/// Records the reviewer's `answer` to `q` for `incident` inside Learn's transaction, with the
/// suggestion beside it; on the timeline and the audit log.
///
/// # Errors
/// Database errors (a second grade of the same incident is refused by the database).
pub async fn record_in(w: &mut IncidentWrite, q: &GradeQuestion, answer: bool) -> AppResult<()> {
    let (incident, actor, at) = (w.incident().id.clone(), w.actor().to_string(), w.at());
    pstore::insert_grade(
        w.tx(),
        &pstore::Grade {
            incident_id: incident.to_string(),
            hypothesis_id: Some(q.hypothesis_id),
            hypothesis: q.hypothesis.clone(),
            matched: answer,
            suggested: q.suggested,
            memory_recalled: q.memory_recalled,
            graded_by: actor,
            graded_at: at,
        },
    )
    .await?;
    let event = if answer {
        "the copilot's top hypothesis matched the root cause"
    } else {
        "the copilot's top hypothesis did not match the root cause"
    };
    let audit = serde_json::json!({"hypothesis": q.hypothesis_id, "matched": answer,
                                   "suggested": q.suggested, "memory_recalled": q.memory_recalled});
    w.record_event(Event::new("hypothesis_graded", event).audited("incident.grade", audit))
        .await?;
    Ok(())
}
