//! What waits for a reviewer: post-mortem drafts to confirm, lessons without a grounding
//! incident, learned incidents without a lesson, and contradictions to resolve (the proposals to
//! decide come from [`crate::services::proposals::pending`]).

use sqlx::AnyPool;

use crate::domain::{Incident, IncidentState};
use crate::error::AppResult;
use crate::store::incidents::{self, IncidentFilter, IncidentSort};
use crate::store::postmortems;

/// At most this many post-mortem drafts are listed.
const MAX_DRAFTS: i64 = 200;

/// The reviewer's work, as stored.
pub struct ReviewWork {
    /// Incidents in `postmortem_draft`, oldest first (at most 200).
    pub drafts: Vec<Incident>,
    /// `(record id, text)` of lessons that name no grounding incident.
    pub ungrounded: Vec<(i64, String)>,
    /// `(incident id, title)` of learned incidents that gave no lesson.
    pub ruleless: Vec<(String, String)>,
    /// `(record id, text, contradicting record id)` of confirmed records a later one contradicts.
    pub contradicted: Vec<(i64, String, i64)>,
}

/// Reads the [`ReviewWork`].
///
/// # Errors
/// Database errors.
pub async fn work(pool: &AnyPool) -> AppResult<ReviewWork> {
    let (ungrounded, ruleless) = postmortems::review_queue(pool).await?;
    let contradicted = postmortems::contradictions(pool).await?;
    let drafts = incidents::list(
        pool,
        &IncidentFilter {
            state: Some(IncidentState::PostmortemDraft),
            sort: IncidentSort::Oldest,
            limit: Some(MAX_DRAFTS),
            ..Default::default()
        },
    )
    .await?;
    Ok(ReviewWork {
        drafts,
        ungrounded,
        ruleless,
        contradicted,
    })
}

/// The learnings page of an incident: before Learn, the preview of what it will write; after,
/// what it wrote and the reviewer's grade of the copilot's top hypothesis.
pub struct Learnings {
    /// The incident.
    pub incident: Incident,
    /// The preview, while nothing is learned yet.
    pub preview: Option<crate::services::postmortem::LearningsPreview>,
    /// What Learn wrote, once it ran.
    pub learned: Option<crate::services::postmortem::LearnResult>,
    /// The records Learn wrote, with their kinds and texts.
    pub written: Vec<crate::domain::memory::MemoryRecord>,
    /// The reviewer's grade of the top hypothesis, once Learn recorded it.
    pub grade: Option<crate::store::proposals::Grade>,
}

/// Reads the [`Learnings`] of incident `id`.
///
/// # Errors
/// [`crate::AppError::NotFound`] for an unknown incident; database errors.
pub async fn learnings(pool: &AnyPool, id: &crate::domain::IncidentId) -> AppResult<Learnings> {
    use crate::services::postmortem as pm;
    let incident = incidents::get(pool, id).await?;
    let learned: Option<pm::LearnResult> = match postmortems::learning(pool, id.as_str()).await? {
        Some(r) => serde_json::from_str(&r).ok(),
        None => None,
    };
    let written = match &learned {
        Some(l) => pm::written_records(pool, l).await?,
        None => Vec::new(),
    };
    let preview = match learned {
        None => Some(pm::plan(pool, id).await?),
        Some(_) => None,
    };
    Ok(Learnings {
        incident,
        preview,
        learned,
        written,
        grade: crate::store::proposals::grade(pool, id.as_str()).await?,
    })
}
