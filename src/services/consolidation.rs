//! Consolidation: groups near-duplicate confirmed lessons and remediation failures of
//! different incidents and drafts one merged rule per group for the reviewer queue. The rules
//! (what is a near-duplicate, how a group merges, the rule cap) are in
//! `domain::consolidation`; this reads the records and their vectors, and queues proposals.
//!
//! Two triggers call [`consolidate`]: `incidentmind consolidate` and, when configured, the
//! schedule `serve` runs ([`run_schedule`]). Neither writes durable memory: a reviewer accepts
//! a proposal through `services::proposals::accept`, which writes the merged rule and then marks
//! its sources (`services::proposals::mark_sources_in`). Running it again proposes nothing new
//! (a proposal's origin is its sorted source ids; accepted sources are no longer candidates).

use std::collections::HashMap;
use std::time::Duration;

use serde::Serialize;

use crate::domain::consolidation::{self as rules, Item, Merged, OverCap, severity_of_importance};
use crate::domain::memory::{MemoryRecord, NewRecord};
use crate::domain::proposals::ProposalKind;
use crate::domain::{EpistemicType, IncidentId, MemoryKind};
use crate::error::AppResult;
use crate::memory::Memory;
use crate::services::investigation::GENERIC_TAGS;
use crate::services::proposals::Draft;
use crate::store::{self, Tx, consolidation as cstore, memory as mstore};

/// Who drafts consolidation proposals (the `created_by` of each and the audit actor).
pub const ACTOR: &str = "consolidation";

/// What one run of [`consolidate`] found and did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ConsolidationReport {
    /// Records it considered (confirmed lessons and failures, not consolidated).
    pub candidates: usize,
    /// Whether it compared vectors (else word overlap only: no embedder, or it failed).
    pub by_vector: bool,
    /// Groups of near-duplicates found.
    pub groups: usize,
    /// Proposals drafted by this run, in queue order (services over the cap first).
    pub proposed: Vec<i64>,
    /// Groups already proposed by an earlier run (same sources): nothing drafted.
    pub already_proposed: usize,
    /// Groups none of whose incidents is in this database (memory imported from another one):
    /// a proposal hangs off one of its incidents, so nothing is drafted for them.
    pub without_incident: usize,
    /// Services with more standing rules than the cap, most first.
    pub over_cap: Vec<OverCap>,
}

impl std::fmt::Display for ConsolidationReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "considered {} lessons and failure records ({})",
            self.candidates,
            if self.by_vector {
                "by embedding similarity"
            } else {
                "by word overlap: no embeddings"
            }
        )?;
        for o in &self.over_cap {
            writeln!(
                f,
                "{} has {} standing rules, over the cap of {}: its proposals are queued first",
                o.service, o.standing, o.cap
            )?;
        }
        let ids: Vec<String> = self.proposed.iter().map(|p| format!("PRO-{p}")).collect();
        write!(
            f,
            "{} groups of near-duplicates; proposed {} merged rules{}; {} already proposed",
            self.groups,
            self.proposed.len(),
            if ids.is_empty() {
                String::new()
            } else {
                format!(" ({})", ids.join(", "))
            },
            self.already_proposed
        )?;
        if self.without_incident > 0 {
            write!(
                f,
                "; {} groups of imported memory not proposed: none of their incidents is in this database",
                self.without_incident
            )?;
        }
        Ok(())
    }
}

/// Brings vectors up to date (derived data: embeddings and incident documents, what the memory
/// worker writes) and returns the model they are stored under; `None` without an embedder or
/// when it fails (logged: consolidation then compares words).
async fn vector_model(memory: &Memory) -> Option<String> {
    let model = memory.embedder()?.model().to_string();
    match crate::memory::embeddings::catch_up(memory).await {
        Ok(_) => Some(model),
        Err(e) => {
            tracing::warn!(error = %e, "consolidation compares words: embeddings unavailable");
            None
        }
    }
}

fn item_of(r: &MemoryRecord, vector: Option<Vec<f32>>) -> Option<Item> {
    let action_kind = r.action_kind?;
    let incident_id = r.incident_id.clone().filter(|i| !i.is_empty())?;
    let compared = r
        .rule
        .as_ref()
        .map_or(r.text.as_str(), |rule| rule.always.as_str());
    Some(Item {
        id: r.id,
        kind: r.kind,
        incident_id,
        services: r.services.clone(),
        failure_modes: r
            .failure_modes
            .iter()
            .filter(|t| !GENERIC_TAGS.contains(&t.as_str()))
            .cloned()
            .collect(),
        action_kind,
        severity: r
            .rule
            .as_ref()
            .map_or(severity_of_importance(r.importance), |rule| rule.severity),
        rule: r.rule.clone(),
        text: r.text.clone(),
        vector,
        words: crate::memory::recall::content_words(compared)
            .into_iter()
            .collect(),
        merged: r.data.get("consolidated_from").is_some(),
    })
}

/// Finds near-duplicate lessons and failure records of different incidents and drafts one
/// consolidation proposal per group (services with more than `cap` standing rules first,
/// saying so). Writes proposals only, in one transaction, each with its audit entry; a group
/// proposed before is not proposed again.
///
/// # Errors
/// Database errors.
pub async fn consolidate(memory: &Memory, cap: usize) -> AppResult<ConsolidationReport> {
    let pool = memory.pool();
    let model = vector_model(memory).await;
    let ids = cstore::candidate_ids(pool).await?;
    let mut vectors = match &model {
        Some(m) => cstore::vectors(pool, m, &ids).await?,
        None => HashMap::new(),
    };
    let records = mstore::get_many(pool, &ids).await?;
    let items: Vec<Item> = records
        .iter()
        .filter_map(|r| item_of(r, vectors.remove(&r.id)))
        .collect();
    let standing = cstore::standing_rules(pool).await?;
    let mut merged: Vec<Merged> = rules::groups(&items)
        .iter()
        .map(|g| {
            let members: Vec<&Item> = g.iter().map(|i| &items[*i]).collect();
            let mut m = rules::merge(&members);
            m.consolidation.over_cap = rules::over_cap(&m.services, &standing, cap);
            m
        })
        .collect();
    rules::queue_order(&mut merged);
    let mut over: Vec<OverCap> = standing
        .iter()
        .filter(|(_, n)| **n > cap)
        .map(|(s, n)| OverCap {
            service: s.clone(),
            standing: *n,
            cap,
        })
        .collect();
    over.sort_by(|a, b| b.standing.cmp(&a.standing).then(a.service.cmp(&b.service)));
    let mut report = ConsolidationReport {
        candidates: items.len(),
        by_vector: model.is_some(),
        groups: merged.len(),
        over_cap: over,
        ..Default::default()
    };
    let by_id: HashMap<i64, &MemoryRecord> = records.iter().map(|r| (r.id, r)).collect();
    // A proposal hangs off an incident of this database: after an import, the group's
    // incidents may all live in another one.
    let named: Vec<String> = merged
        .iter()
        .flat_map(|m| m.consolidation.incidents.iter().cloned())
        .collect();
    let here = store::incident_documents::incident_states(pool, &named).await?;
    let mut w = store::Write::open(pool, ACTOR).await?;
    for mut m in merged {
        if !here.contains_key(&m.incident_id) {
            match m
                .consolidation
                .incidents
                .iter()
                .find(|i| here.contains_key(*i))
            {
                Some(i) => m.incident_id = i.clone(),
                None => {
                    report.without_incident += 1;
                    continue;
                }
            }
        }
        match draft_in(&mut w, &by_id, m).await? {
            Some(pid) => report.proposed.push(pid),
            None => report.already_proposed += 1,
        }
    }
    w.commit().await?;
    Ok(report)
}

/// The records a merged rule cites: its sources and, so that the rule (a decision) rests on more
/// than decisions, the observations, inferences and action results its sources cite.
async fn cites_of(
    tx: &mut Tx,
    by_id: &HashMap<i64, &MemoryRecord>,
    m: &Merged,
) -> AppResult<Vec<i64>> {
    let mut cites: Vec<i64> = m.consolidation.sources.iter().map(|s| s.id).collect();
    for s in &m.consolidation.sources {
        let Some(r) = by_id.get(&s.id) else { continue };
        for c in &r.sources {
            if !cites.contains(c)
                && mstore::get_in(tx, *c).await?.epistemic_type != EpistemicType::Decision
            {
                cites.push(*c);
            }
        }
    }
    Ok(cites)
}

/// Queues the proposal of one merged group; `None` when the same group was proposed before.
async fn draft_in(
    w: &mut store::Write,
    by_id: &HashMap<i64, &MemoryRecord>,
    m: Merged,
) -> AppResult<Option<i64>> {
    let source_ids: Vec<i64> = m.consolidation.sources.iter().map(|s| s.id).collect();
    let origin = rules::origin(&source_ids);
    let text = m.rule.text();
    let mut record = NewRecord::new(MemoryKind::Lesson, text, ACTOR);
    record.incident_id = Some(m.incident_id.clone());
    record.services = m.services.clone();
    record.failure_modes = m.failure_modes.clone();
    record.action_kind = Some(m.action_kind);
    record.importance = m.rule.severity.importance();
    record.rule = Some(m.rule.clone());
    record.cites = cites_of(w.tx(), by_id, &m).await?;
    record.data = serde_json::json!({"consolidated_from": source_ids});
    let kinds = if m
        .consolidation
        .sources
        .first()
        .is_some_and(|s| s.kind == MemoryKind::Lesson)
    {
        "lessons"
    } else {
        "failure records"
    };
    let mut title = format!(
        "Consolidation: {} {kinds} on {} from {} merged into one rule",
        source_ids.len(),
        m.services.join(", "),
        m.consolidation.incidents.join(", ")
    );
    if let Some(o) = &m.consolidation.over_cap {
        title = format!(
            "{title} ({} has {} standing rules, over the cap of {})",
            o.service, o.standing, o.cap
        );
    }
    let incident = IncidentId::parse(&m.incident_id)?;
    let draft = Draft {
        consolidation: Some(m.consolidation),
        ..Draft::of(record)
    };
    crate::services::proposals::queue(
        w,
        ProposalKind::Consolidation,
        &incident,
        &origin,
        &title,
        &draft,
    )
    .await
}

/// The consolidation schedule of `serve`: every `every`, [`consolidate`] with `cap` (proposals
/// only; a failure is logged and tried again at the next tick). The first run is one interval
/// after start. Stops when `shutdown` fires.
pub async fn run_schedule(
    memory: Memory,
    every: Duration,
    cap: usize,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            _ = shutdown.changed() => return,
        }
        if *shutdown.borrow() {
            return;
        }
        match consolidate(&memory, cap).await {
            Ok(r) => tracing::info!(
                proposed = r.proposed.len(),
                groups = r.groups,
                over_cap = r.over_cap.len(),
                "consolidation run"
            ),
            Err(e) => tracing::warn!(error = %e, "consolidation run failed"),
        }
    }
}
