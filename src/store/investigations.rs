//! A whole investigation, written in one transaction and read back in one call: its row, its
//! hypothesis and recommendation records, the recommendations, the incident's timeline event
//! and the audit line; and, to show it, the records it cites and recalled.

use sqlx::AnyPool;

use super::recommendations::{self as rstore, Investigation, NewRecommendation, Recommendation};
use super::{Db, Event, IncidentWrite, Tx, memory, now};
use crate::domain::memory::{MemoryRecord, NewRecord};
use crate::domain::{ActionKind, Incident, IncidentId, MemoryKind};
use crate::error::AppResult;
use crate::evidence::redact::Redactor;

/// A checked investigation, ready to write.
#[derive(Debug, Clone)]
pub struct NewInvestigation {
    /// The incident.
    pub incident_id: IncidentId,
    /// Who ran it.
    pub actor: String,
    /// `built-in` or `llm:<model>`.
    pub analyst: String,
    /// Why the model's answer was not used, when it was not.
    pub fallback: Option<String>,
    /// Notice shown with it.
    pub notice: Option<String>,
    /// What validation dropped.
    pub dropped: Vec<String>,
    /// Ids of the records recall returned.
    pub recalled: Vec<i64>,
    /// When it ran.
    pub at: jiff::Timestamp,
    /// Hypothesis records with their place in the analyst's answer; `data.investigation_id`
    /// is set when written.
    pub hypotheses: Vec<(usize, NewRecord)>,
    /// Recommendations in display order.
    pub recommendations: Vec<NewAction>,
    /// The detail of the incident's `investigated` timeline event.
    pub event: String,
}

/// A recommendation of a [`NewInvestigation`].
#[derive(Debug, Clone)]
pub struct NewAction {
    /// Its decision record; `data.investigation_id` and the citation of its hypothesis are set
    /// when written.
    pub record: NewRecord,
    /// The place of the hypothesis it follows from in the analyst's answer.
    pub hypothesis: Option<usize>,
    /// Kind.
    pub kind: ActionKind,
    /// Target.
    pub target: String,
    /// Rationale.
    pub rationale: String,
    /// Dead-end warning as JSON.
    pub warning: Option<String>,
}

/// Writes an investigation of incident `id` by `actor` in one incident write
/// ([`super::IncidentWrite`]) and returns it as stored ([`stored`]). `build` is given the
/// incident as read inside the write (and may refuse it: nothing is written) and makes the
/// investigation with the incident's redaction map, so what it redacts gets the placeholders
/// the incident's other texts have. The `investigated` event carries the
/// `incident.investigate` audit entry and reaches live pages.
///
/// # Errors
/// [`crate::error::AppError::NotFound`]; what `build` returns; database errors (a cited record
/// that does not exist among them).
pub async fn save(
    db: &Db,
    id: &IncidentId,
    actor: &str,
    build: impl FnOnce(&Incident, &mut Redactor) -> AppResult<NewInvestigation>,
) -> AppResult<StoredInvestigation> {
    let mut write = IncidentWrite::open(db, id, actor, None).await?;
    let mut redactor = write.redactor().clone();
    let new = build(write.incident(), &mut redactor)?;
    write.set_redactor(redactor);
    let inv_id = rstore::insert_investigation(
        write.tx(),
        new.incident_id.as_str(),
        &new.actor,
        &new.analyst,
        new.notice.as_deref(),
        &new.dropped,
        &new.recalled,
        new.at,
    )
    .await?;
    let audit = serde_json::json!({
        "investigation": inv_id, "analyst": new.analyst, "fallback": new.fallback,
    });
    write
        .record_event(
            Event::new("investigated", new.event.clone())
                .by(&new.actor)
                .audited("incident.investigate", audit),
        )
        .await?;
    write_records(write.tx(), inv_id, &new).await?;
    write.commit().await?;
    stored(db, inv_id).await
}

/// Writes the hypothesis and recommendation records of investigation `inv_id` and its
/// recommendations, in `tx`.
async fn write_records(tx: &mut Tx, inv_id: i64, new: &NewInvestigation) -> AppResult<()> {
    let mut hyp_ids = Vec::new();
    for (i, r) in &new.hypotheses {
        let mut r = r.clone();
        of_investigation(&mut r, inv_id);
        let (hid, _) = memory::insert(tx, &r, now()).await?;
        hyp_ids.push((*i, hid));
    }
    for (pos, a) in new.recommendations.iter().enumerate() {
        let hypothesis_id = a
            .hypothesis
            .and_then(|h| hyp_ids.iter().find(|(i, _)| *i == h).map(|(_, id)| *id));
        let mut r = a.record.clone();
        r.cites = hypothesis_id.into_iter().collect();
        of_investigation(&mut r, inv_id);
        let (rid, _) = memory::insert(tx, &r, now()).await?;
        rstore::insert(
            tx,
            &NewRecommendation {
                investigation_id: inv_id,
                incident_id: new.incident_id.as_str(),
                record_id: rid,
                hypothesis_id,
                action_kind: a.kind.as_str(),
                target: &a.target,
                rationale: &a.rationale,
                warning: a.warning.clone(),
                position: pos as i64,
            },
        )
        .await?;
    }
    Ok(())
}

/// Sets `data.investigation_id` of `r` (its data an object, as the investigation service
/// builds it).
fn of_investigation(r: &mut NewRecord, inv_id: i64) {
    if let Some(data) = r.data.as_object_mut() {
        data.insert("investigation_id".into(), serde_json::json!(inv_id));
    }
}

/// A stored investigation with everything it shows: its hypotheses (oldest first), the
/// records they cite, its recommendations in display order, their transcripts and the records
/// recall returned for it (in recall's order).
#[derive(Debug, Clone)]
pub struct StoredInvestigation {
    /// The investigation row.
    pub investigation: Investigation,
    /// Its hypothesis records, oldest first.
    pub hypotheses: Vec<MemoryRecord>,
    /// The records its hypotheses cite.
    pub cited: Vec<MemoryRecord>,
    /// Its recommendations in display order.
    pub recommendations: Vec<Recommendation>,
    /// The transcripts of approved recommendations.
    pub transcripts: Vec<MemoryRecord>,
    /// What recall returned for it, in recall's order (records since gone skipped).
    pub recalled: Vec<MemoryRecord>,
}

/// Loads investigation `inv_id` with everything it shows.
///
/// # Errors
/// Database errors; [`crate::error::AppError::NotFound`].
pub async fn stored(pool: &AnyPool, inv_id: i64) -> AppResult<StoredInvestigation> {
    let investigation = rstore::get_investigation(pool, inv_id).await?;
    let recommendations = rstore::of_investigation(pool, inv_id).await?;
    let filter = memory::MemoryFilter {
        incident: Some(investigation.incident_id.clone()),
        kind: Some(MemoryKind::Hypothesis),
        limit: Some(1000),
        ..Default::default()
    };
    let mut hypotheses: Vec<MemoryRecord> = memory::list(pool, &filter)
        .await?
        .into_iter()
        .filter(|h| h.data.get("investigation_id").and_then(|v| v.as_i64()) == Some(inv_id))
        .collect();
    hypotheses.sort_by_key(|h| h.id);
    let all_cited: Vec<i64> = hypotheses
        .iter()
        .flat_map(|h| h.sources.iter().copied())
        .collect();
    let cited = memory::get_many(pool, &all_cited).await?;
    let transcript_ids: Vec<i64> = recommendations
        .iter()
        .filter_map(|r| r.transcript_id)
        .collect();
    let transcripts = memory::get_many(pool, &transcript_ids).await?;
    let recalled_ids: Vec<i64> = serde_json::from_str(&investigation.recalled).unwrap_or_default();
    let recalled = memory::get_many(pool, &recalled_ids).await?;
    Ok(StoredInvestigation {
        investigation,
        hypotheses,
        cited,
        recommendations,
        transcripts,
        recalled,
    })
}
