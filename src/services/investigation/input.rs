//! What an investigation reads about its incident: its failure-mode tags, the recall an incident
//! page and the analyst use (with the page's cached copy), recall results ordered by past
//! incident, and the analyst's whole input.

use std::collections::BTreeSet;

use sqlx::AnyPool;

use super::warnings::{SIMILAR_INCIDENTS, similar_incidents};
use crate::analyst::InvestigationInput;
use crate::domain::MemoryKind;
use crate::domain::memory::MemoryRecord;
use crate::error::AppResult;
use crate::memory::Memory;
use crate::memory::recall::{self, IncidentMatch, RecallQuery, Recalled};
use crate::store::memory as mstore;

/// Failure-mode tags of an incident: its observations' tags plus tags derived from its title and
/// description.
///
/// # Errors
/// Database errors.
pub async fn incident_tags(
    pool: &AnyPool,
    incident: &crate::domain::Incident,
) -> AppResult<(Vec<MemoryRecord>, Vec<String>)> {
    let filter = mstore::MemoryFilter {
        incident: Some(incident.id.to_string()),
        kind: Some(MemoryKind::Observation),
        limit: Some(1000),
        ..Default::default()
    };
    let mut observations = mstore::list(pool, &filter).await?;
    observations.sort_by_key(|o| {
        std::cmp::Reverse(o.data.get("salience").and_then(|s| s.as_i64()).unwrap_or(0))
    });
    let mut tags: BTreeSet<String> = observations
        .iter()
        .flat_map(|o| o.failure_modes.iter().cloned())
        .collect();
    // A line break between them: a negation in the title must not reach into the description.
    tags.extend(recall::derive_tags(&format!(
        "{}\n{}",
        incident.title, incident.description
    )));
    // The synonym table and the load shape read the evidence lines too, not only the catalogue.
    for o in &observations {
        if let Some(line) = o.data.get("example").and_then(|e| e.as_str()) {
            tags.extend(recall::derive_tags(line));
        }
    }
    Ok((observations, tags.into_iter().collect()))
}

/// The recall an incident page and the analyst use: descriptive text of the incident, its
/// service and failure modes, excluding its own records.
///
/// # Errors
/// Database errors.
pub async fn recall_for_incident(
    memory: &Memory,
    incident: &crate::domain::Incident,
    observations: &[MemoryRecord],
    tags: &[String],
    k: usize,
) -> AppResult<recall::RecallResult> {
    let mut text = format!("{}\n{}", incident.title, incident.description);
    for o in observations
        .iter()
        .filter(|o| !crate::domain::memory::is_summary(o))
        .take(10)
    {
        // The line itself, not the statement around it ("ERROR template seen 12 times …").
        let line = o
            .data
            .get("example")
            .and_then(|e| e.as_str())
            .unwrap_or(&o.text);
        text.push('\n');
        text.push_str(crate::evidence::truncate_chars(line, 300));
    }
    // Redacted with the incident's map: an address is the placeholder its records carry.
    let text = crate::store::redaction::peek(memory.pool(), incident.id.as_str())
        .await?
        .redact(&text);
    let q = RecallQuery {
        text,
        service: Some(incident.service.clone()),
        failure_modes: tags.to_vec(),
        exclude_incident: Some(incident.id.to_string()),
        // A wider pool than shown, so each past incident's similarity sums its best records.
        k: k.max(INCIDENT_POOL),
        ..Default::default()
    };
    let mut result = recall::recall(memory, &q).await?;
    incidents_first(&mut result.results, &result.incidents);
    // At most PER_INCIDENT records of one past incident are shown, so rules and dead ends of
    // the next incidents still fit.
    let mut shown: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    result.results.retain(|r| match &r.memory.incident_id {
        Some(i) => {
            let n = shown.entry(i.clone()).or_default();
            *n += 1;
            *n <= PER_INCIDENT
        }
        None => true,
    });
    result.results.truncate(k);
    Ok(result)
}

/// [`recall_for_incident`] for an incident page: recall runs when the memory, the incident or
/// its evidence changed since the page last showed it, and is read from [`Memory`]'s cache
/// otherwise (a page view costs one generation read, not a recall).
///
/// # Errors
/// Database errors.
pub async fn page_recall(
    memory: &Memory,
    incident: &crate::domain::Incident,
    observations: &[MemoryRecord],
    tags: &[String],
    k: usize,
) -> AppResult<std::sync::Arc<recall::RecallResult>> {
    let index = memory.index().await?;
    let (epoch, generation) = index.generation();
    let key = format!(
        "{epoch}:{generation}:{}:{}:{}:{k}",
        incident.version,
        observations.len(),
        observations.iter().map(|o| o.id).max().unwrap_or(0)
    );
    if let Some(hit) = memory.page_recall(incident.id.as_str(), &key) {
        return Ok(hit);
    }
    let result =
        std::sync::Arc::new(recall_for_incident(memory, incident, observations, tags, k).await?);
    memory.keep_page_recall(incident.id.as_str(), key, std::sync::Arc::clone(&result));
    Ok(result)
}

/// Records recalled for an incident page before they are grouped by past incident and cut to
/// what is shown.
const INCIDENT_POOL: usize = 40;

/// Records of one past incident shown at most on an incident page.
const PER_INCIDENT: usize = 4;

/// Orders recall results for an incident page by past incident, most similar first: the
/// incident-level ranking of recall ([`IncidentMatch`]: documents, passages and parts fused by
/// rank). Records of one incident keep their order; records of no incident (notes, runbooks)
/// come after the [`SIMILAR_INCIDENTS`] most similar incidents, and records of incidents the
/// ranking does not hold last. Stable, and only reorders.
///
/// (An earlier boost per shared failure-mode tag was removed: on `recall-dev-hard.json` it moved
/// hit@1 from 0.944 down to 0.889.)
pub fn incidents_first(results: &mut [Recalled], incidents: &[IncidentMatch]) {
    let position: std::collections::HashMap<&str, f64> = incidents
        .iter()
        .enumerate()
        .map(|(p, m)| (m.incident_id.as_str(), p as f64))
        .collect();
    let key = |r: &Recalled| match r.memory.incident_id.as_deref() {
        Some(i) => position.get(i).copied().unwrap_or(f64::MAX),
        None => SIMILAR_INCIDENTS as f64 - 0.5,
    };
    results.sort_by(|a, b| key(a).total_cmp(&key(b)));
}

/// What an analyst is given for `incident`: its observations and failure-mode tags (from
/// [`incident_tags`]), what recall returns for it (k = 12, see [`recall_for_incident`]) and the
/// remediations tried during its [`SIMILAR_INCIDENTS`] most similar past incidents.
///
/// # Errors
/// Database errors.
pub async fn analyst_input(
    memory: &Memory,
    incident: crate::domain::Incident,
    observations: Vec<MemoryRecord>,
    failure_modes: Vec<String>,
) -> AppResult<InvestigationInput> {
    let pool = memory.pool();
    let result = recall_for_incident(memory, &incident, &observations, &failure_modes, 12).await?;
    let similar = similar_incidents(&result.results, &result.incidents);
    let recalled = result.results;
    let mut tried = mstore::remediations_of_incidents(pool, &similar).await?;
    // Most similar incident first; within one incident, in the order they were recorded.
    tried.sort_by_key(|r| {
        similar
            .iter()
            .position(|s| r.incident_id.as_ref() == Some(s))
            .unwrap_or(usize::MAX)
    });
    let redactor = crate::store::redaction::peek(pool, incident.id.as_str()).await?;
    Ok(InvestigationInput {
        redactor,
        incident,
        observations,
        recalled,
        failure_modes,
        tried,
        similar,
    })
}
