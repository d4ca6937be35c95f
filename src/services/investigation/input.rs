//! What an investigation reads about its incident, through the one door into memory
//! ([`Memory::recall_for_incident`]): the analyst's input, and the incident page's recall with
//! the page's cached copy.

use std::sync::Arc;

use crate::analyst::InvestigationInput;
use crate::domain::memory::MemoryRecord;
use crate::error::AppResult;
use crate::memory::Memory;
use crate::memory::incident::IncidentRecall;

/// The analyst's input from what memory holds for `incident`: its observations and tags, the
/// recalled records, the similar incidents and the remediations tried during them.
pub fn input_of(incident: crate::domain::Incident, past: IncidentRecall) -> InvestigationInput {
    InvestigationInput {
        redactor: past.redactor,
        incident,
        observations: past.observations,
        recalled: past.recall.results,
        failure_modes: past.tags,
        tried: past.tried,
        similar: past.similar,
    }
}

/// What an analyst is given for `incident` with its `observations` and `failure_modes` read
/// already: recall with k = 12 and the remediations tried during its
/// [`crate::memory::incident::SIMILAR_INCIDENTS`] most similar past incidents.
///
/// # Errors
/// Database errors.
pub async fn analyst_input(
    memory: &Memory,
    incident: crate::domain::Incident,
    observations: Vec<MemoryRecord>,
    failure_modes: Vec<String>,
) -> AppResult<InvestigationInput> {
    let past = memory
        .recall_with(&incident, observations, failure_modes, 12)
        .await?;
    Ok(input_of(incident, past))
}

/// The recall an incident page shows (see [`Memory::recall_for_page`]).
///
/// # Errors
/// Database errors.
pub async fn page_recall(
    memory: &Memory,
    incident: &crate::domain::Incident,
    observations: &[MemoryRecord],
    tags: &[String],
    k: usize,
) -> AppResult<Arc<IncidentRecall>> {
    memory
        .recall_for_page(incident, observations, tags, k)
        .await
}
