//! Read models of incidents: what the incident list, the incident page and the incident API show,
//! read from the store in one place so handlers only render.

use std::sync::Arc;

use sqlx::AnyPool;

use crate::domain::memory::MemoryRecord;
use crate::domain::{Incident, IncidentId, IncidentState, MemoryKind, TimelineEvent};
use crate::error::AppResult;
use crate::memory::Memory;
use crate::memory::incident::IncidentRecall;
use crate::services::investigation::InvestigationView;
use crate::store::evidence::EvidenceMeta;
use crate::store::incidents::{self, IncidentCursor, IncidentFilter};
use crate::store::{self, evidence as estore, memory as mstore, recommendations as rstore};

/// How many recalled records the incident page asks recall for.
const PAGE_RECALL_K: usize = 30;

/// One page of incidents matching `filter`, `size` rows (clamped to 1..=1000), and the cursor of
/// the next page (`None` on the last page).
///
/// # Errors
/// Database errors.
pub async fn page_of(
    pool: &AnyPool,
    mut filter: IncidentFilter,
    size: i64,
) -> AppResult<(Vec<Incident>, Option<String>)> {
    // One row more than the page, to know whether another follows (the store returns up to
    // the largest page plus one, `LIST_MAX`).
    let size = size.clamp(1, incidents::LIST_MAX - 1);
    filter.limit = Some(size + 1);
    let mut rows = incidents::list(pool, &filter).await?;
    let next = if rows.len() as i64 > size {
        rows.truncate(size as usize);
        rows.last().map(|i| IncidentCursor::after(i).encode())
    } else {
        None
    };
    Ok((rows, next))
}

/// Every service name incidents were opened on, sorted (the list page's filter).
///
/// # Errors
/// Database errors.
pub async fn services(pool: &AnyPool) -> AppResult<Vec<String>> {
    incidents::services(pool).await
}

/// Incident `id` with its timeline, oldest event first.
///
/// # Errors
/// [`crate::AppError::NotFound`] for an unknown incident; database errors.
pub async fn with_timeline(
    pool: &AnyPool,
    id: &IncidentId,
) -> AppResult<(Incident, Vec<TimelineEvent>)> {
    let incident = incidents::get(pool, id).await?;
    let timeline = incidents::timeline(pool, id).await?;
    Ok((incident, timeline))
}

/// `(version, revision, recall epoch, recall generation)` of incident `id`: what a cached copy
/// of its page depends on (see [`incidents::page_state`]).
///
/// # Errors
/// Not found; database errors.
pub async fn page_state(pool: &AnyPool, id: &IncidentId) -> AppResult<(i64, i64, String, i64)> {
    incidents::page_state(pool, id).await
}

/// The observations extracted from incident `id`'s evidence (at most 1,000, as stored).
///
/// # Errors
/// Database errors.
async fn observations(pool: &AnyPool, id: &IncidentId) -> AppResult<Vec<MemoryRecord>> {
    let filter = mstore::MemoryFilter {
        incident: Some(id.to_string()),
        kind: Some(MemoryKind::Observation),
        limit: Some(1000),
        ..Default::default()
    };
    mstore::list(pool, &filter).await
}

/// Incident `id`'s evidence (without content) and the observations extracted from it.
///
/// # Errors
/// Not found; database errors.
pub async fn evidence(
    pool: &AnyPool,
    id: &IncidentId,
) -> AppResult<(Vec<EvidenceMeta>, Vec<MemoryRecord>)> {
    incidents::get(pool, id).await?;
    let evidence = estore::list(pool, id.as_str()).await?;
    Ok((evidence, observations(pool, id).await?))
}

/// The latest investigation of incident `id`, `None` before the first.
///
/// # Errors
/// Not found; database errors.
pub async fn latest_investigation(
    pool: &AnyPool,
    id: &IncidentId,
) -> AppResult<Option<InvestigationView>> {
    incidents::get(pool, id).await?;
    match rstore::latest_investigation(pool, id.as_str()).await? {
        Some(i) => Ok(Some(
            crate::services::investigation::view_investigation(pool, i.id).await?,
        )),
        None => Ok(None),
    }
}

/// Everything the incident page shows, read in one service call: the incident, its timeline,
/// observations, evidence, latest investigation, what memory recalls for it, and who edited its
/// post-mortem draft last (for the confirm rule).
pub struct IncidentPage {
    /// The incident.
    pub incident: Incident,
    /// Its timeline, oldest first.
    pub timeline: Vec<TimelineEvent>,
    /// Observations extracted from its evidence, as stored.
    pub observations: Vec<MemoryRecord>,
    /// Its evidence, without content.
    pub evidence: Vec<EvidenceMeta>,
    /// The latest investigation, if one ran.
    pub investigation: Option<InvestigationView>,
    /// What memory holds for the incident: its recall, similar incidents and their dead ends
    /// (shared with the page-recall cache); `None` while it is being computed in the
    /// background ([`crate::memory::Memory::recall_page_later`]): a page view never runs recall.
    pub recalled: Option<Arc<IncidentRecall>>,
    /// The post-mortem draft (with who edited it last), while the incident is in
    /// `postmortem_draft`.
    pub draft: Option<store::postmortems::StoredPostmortem>,
}

/// Reads the [`IncidentPage`] of incident `id`, with the recall kept for it at the memory's
/// recall `generation` (`(epoch, value)`, as [`page_state`] read it); without one, the recall
/// is started in the background and the page has none yet. Bounded work: a few indexed reads,
/// no recall, no embedding, no model.
///
/// # Errors
/// [`crate::AppError::NotFound`] for an unknown incident; database errors.
pub async fn page(
    pool: &AnyPool,
    memory: &Memory,
    id: &IncidentId,
    generation: (&str, i64),
) -> AppResult<IncidentPage> {
    // The reads go out together: under load each wait for the database is a turn in the
    // runtime's queue behind every other request, so one wait instead of eight keeps the first
    // view of a new incident quick while the page is saturated (issue #56).
    let investigation = async {
        match rstore::latest_investigation(pool, id.as_str()).await? {
            Some(i) => Ok(Some(
                crate::services::investigation::view_investigation(pool, i.id).await?,
            )),
            None => Ok(None),
        }
    };
    let (incident, timeline, evidence, investigation, mut observations, draft) = tokio::try_join!(
        incidents::get(pool, id),
        incidents::timeline(pool, id),
        estore::list(pool, id.as_str()),
        investigation,
        observations(pool, id),
        async { Ok(store::postmortems::get(pool, id.as_str()).await.ok()) },
    )?;
    // Newest first for the page; the recall (its tags, its salience order) is the background
    // job's work.
    observations.sort_by_key(|o| std::cmp::Reverse(o.id));
    let recalled = memory.kept_page_recall(&incident, &observations, PAGE_RECALL_K, generation);
    if recalled.is_none() {
        memory.recall_page_later(incident.clone(), PAGE_RECALL_K);
    }
    let draft = draft.filter(|_| incident.state == IncidentState::PostmortemDraft);
    Ok(IncidentPage {
        incident,
        timeline,
        observations,
        evidence,
        investigation,
        recalled,
        draft,
    })
}

/// Incident `id` and its post-mortem.
///
/// # Errors
/// [`crate::AppError::NotFound`] for an unknown incident or one without a post-mortem yet;
/// database errors.
pub async fn with_postmortem(
    pool: &AnyPool,
    id: &IncidentId,
) -> AppResult<(Incident, store::postmortems::StoredPostmortem)> {
    let incident = incidents::get(pool, id).await?;
    let stored = store::postmortems::get(pool, id.as_str()).await?;
    Ok((incident, stored))
}

/// Incident `id`'s post-mortem.
///
/// # Errors
/// [`crate::AppError::NotFound`] before a draft exists; database errors.
pub async fn postmortem(
    pool: &AnyPool,
    id: &IncidentId,
) -> AppResult<store::postmortems::StoredPostmortem> {
    store::postmortems::get(pool, id.as_str()).await
}

/// The most events [`events_after`] hands back in one read: a page that missed more reloads
/// whole instead of replaying them.
pub const REPLAY_MAX: i64 = 500;

/// What a live page of incident `id` that last saw timeline event `after` missed: the incident
/// (it must exist) and the events recorded since, oldest first, at most [`REPLAY_MAX`].
///
/// # Errors
/// [`crate::AppError::NotFound`] for an unknown incident; database errors.
pub async fn events_after(
    pool: &AnyPool,
    id: &IncidentId,
    after: i64,
) -> AppResult<(Incident, Vec<TimelineEvent>)> {
    let incident = incidents::get(pool, id).await?;
    let events = incidents::timeline_after(pool, id, after, REPLAY_MAX).await?;
    Ok((incident, events))
}
