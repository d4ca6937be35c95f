//! Recall's structured index in process memory: the ranking fields and structured keys of every
//! durable, non-retracted record, and the service graph, as of one generation of the database
//! (migration 0006, `recall_generation`).
//!
//! Recall ranks up to a few thousand candidates per query on these fields. Looked up in SQLite
//! per query they cost several times the full-text search itself (B-tree seeks per candidate,
//! per key); held here they cost microseconds. They are small (about 100 bytes a record) and
//! change only when durable memory is written — a learn, a verdict, a note, a supersede, a
//! retract, an evidence-count bump, an import, a new service dependency — which moves the
//! database's generation counter in the same transaction (triggers).
//! Every recall reads that counter ([`generation`], one indexed row) and reloads the index
//! ([`load`]) when it moved, so a record retracted or written by any process is seen by the
//! next recall; the counter's `epoch` tells databases apart, even a file re-created at the same
//! path.

use std::collections::{HashMap, HashSet};

use rustc_hash::FxHashMap;
use sqlx::AnyPool;

use super::memory::{Candidate, corrupt, durable_kinds_json, parse_candidate};
use super::{Backend, dialect};
use crate::domain::MemoryKind;
use crate::error::AppResult;

/// One durable, non-retracted record as recall ranks it.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Ranking fields.
    pub candidate: Candidate,
    /// The incident it was learned from, if any.
    pub incident_id: Option<String>,
}

/// The index of one database generation. Built by [`load`]; read-only afterwards.
#[derive(Debug, Default)]
pub struct RecallIndex {
    /// `(epoch, value)` of `recall_generation` this was loaded at.
    generation: (String, i64),
    /// Record id → entry. Hashed with FxHash (ids are the database's own row ids, never chosen
    /// by a client): recall looks up thousands per query, and SipHash was most of that cost.
    entries: FxHashMap<i64, Entry>,
    /// `(key, value)` (`service`, `failure_mode`, `action_kind`) → `(record id, incident)`,
    /// newest first. The incident is an index into `incidents` ([`NO_INCIDENT`]: none), so that
    /// walking a key needs no lookup in `entries` (a cache miss each at 100,000 records).
    keys: HashMap<(String, String), Vec<(i64, u32)>>,
    /// Incident id → its number in `keys`.
    incidents: HashMap<String, u32>,
    /// Service → services it depends on and that depend on it (one hop), sorted.
    neighbours: HashMap<String, Vec<String>>,
}

/// The incident number of a record learned from no incident.
const NO_INCIDENT: u32 = u32::MAX;

/// The database's recall generation: `(epoch, value)` of `recall_generation` (one indexed row).
///
/// # Errors
/// Database errors.
pub async fn generation(pool: &AnyPool) -> AppResult<(String, i64)> {
    Ok(
        sqlx::query_as("SELECT epoch, value FROM recall_generation WHERE id = 1")
            .fetch_one(pool)
            .await?,
    )
}

/// Loads the index of the current generation in one read transaction, so the entries, keys and
/// graph agree with the generation they are labelled with. The cache that keeps it between
/// recalls is [`crate::memory::Memory`]'s.
///
/// # Errors
/// Database errors; [`crate::error::AppError::Internal`] for rows this program did not write.
pub async fn load(pool: &AnyPool) -> AppResult<RecallIndex> {
    let backend = Backend::of(pool);
    let mut tx = pool.begin().await?;
    if backend == Backend::Postgres {
        // One snapshot for the whole transaction, as SQLite's read transaction gives.
        sqlx::query(dialect::POSTGRES_SNAPSHOT_READ)
            .execute(&mut *tx)
            .await?;
    }
    let generation: (String, i64) =
        sqlx::query_as("SELECT epoch, value FROM recall_generation WHERE id = 1")
            .fetch_one(&mut *tx)
            .await?;
    // One row each (JSON arrays): rows cross a thread boundary one by one, arrays do not.
    let (entries, keys, graph): (String, String, String) =
        sqlx::query_as(dialect::RECALL_INDEX.on(backend))
            .bind(durable_kinds_json())
            .fetch_one(&mut *tx)
            .await?;
    tx.commit().await?;
    type EntryJson = (super::memory::CandidateJson, Option<String>);
    let entries: Vec<EntryJson> = serde_json::from_str(&entries).map_err(corrupt)?;
    let keys: Vec<(String, String, i64)> = serde_json::from_str(&keys).map_err(corrupt)?;
    let graph: Vec<(String, String)> = serde_json::from_str(&graph).map_err(corrupt)?;
    let mut index = RecallIndex {
        generation,
        entries: FxHashMap::with_capacity_and_hasher(entries.len(), Default::default()),
        ..RecallIndex::default()
    };
    for (c, incident_id) in entries {
        let candidate = parse_candidate(c)?;
        index.entries.insert(
            candidate.id,
            Entry {
                candidate,
                incident_id,
            },
        );
    }
    for (key, value, id) in keys {
        let incident = match index.entries.get(&id).and_then(|e| e.incident_id.as_ref()) {
            Some(i) => {
                // More than 4 billion incidents share the last number: exclusion is then coarser.
                let next = u32::try_from(index.incidents.len()).unwrap_or(NO_INCIDENT - 1);
                *index.incidents.entry(i.clone()).or_insert(next)
            }
            None => NO_INCIDENT,
        };
        index
            .keys
            .entry((key, value))
            .or_default()
            .push((id, incident));
    }
    for ids in index.keys.values_mut() {
        ids.sort_unstable_by_key(|&(id, _)| std::cmp::Reverse(id));
    }
    for (a, b) in graph {
        index
            .neighbours
            .entry(a.clone())
            .or_default()
            .push(b.clone());
        index.neighbours.entry(b).or_default().push(a);
    }
    for ns in index.neighbours.values_mut() {
        ns.sort();
        ns.dedup();
    }
    Ok(index)
}

impl RecallIndex {
    /// The entry of a durable, non-retracted record; `None` for working, retracted or unknown ids.
    pub fn get(&self, id: i64) -> Option<&Entry> {
        self.entries.get(&id)
    }

    /// The database's epoch: random, written when its schema was created, so two databases
    /// (even at the same path, one after the other) never share it.
    pub fn epoch(&self) -> &str {
        &self.generation.0
    }

    /// `(epoch, value)` of the generation this index was loaded at.
    pub fn generation(&self) -> &(String, i64) {
        &self.generation
    }

    /// Every entry (durable, non-retracted records), in no particular order.
    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.entries.values()
    }

    /// Whether any durable, non-retracted record is about `service`.
    pub fn has_service(&self, service: &str) -> bool {
        self.keys
            .get(&("service".to_string(), service.to_string()))
            .is_some_and(|ids| !ids.is_empty())
    }

    /// Records about `service` learned from no incident (service facts, dependencies, runbooks
    /// and other notes people wrote), newest first.
    pub fn notes_about(&self, service: &str) -> impl Iterator<Item = i64> + '_ {
        self.keys
            .get(&("service".to_string(), service.to_string()))
            .into_iter()
            .flatten()
            .filter(|(_, incident)| *incident == NO_INCIDENT)
            .map(|(id, _)| *id)
    }

    /// Whether the index holds no record at all.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Services that `service` depends on and that depend on it (the entity graph, one hop),
    /// sorted.
    pub fn neighbours(&self, service: &str) -> &[String] {
        self.neighbours.get(service).map_or(&[], Vec::as_slice)
    }

    /// Incidents that hold a record of `kind` under the structured key `(key, value)` (e.g. the
    /// incidents with a dead end of one action kind: `("action_kind", "rollback_deploy")`,
    /// [`MemoryKind::RemediationFailure`]). Walks that key's records once.
    pub fn incidents_with(&self, key: &str, value: &str, kind: MemoryKind) -> HashSet<&str> {
        self.keys
            .get(&(key.to_string(), value.to_string()))
            .into_iter()
            .flatten()
            .filter_map(|(id, _)| self.entries.get(id))
            .filter(|e| e.candidate.kind == kind)
            .filter_map(|e| e.incident_id.as_deref())
            .collect()
    }

    /// Structured candidates: records matching any of `keys` ([`ScopeKeys`]: failure modes, the
    /// service in scope and its neighbours, action kinds, each with its weight), best summed
    /// weight first, newest first among equals, at most `limit`, without `exclude_incident`'s
    /// own records; and the service's neighbours.
    ///
    /// Each key contributes its newest `window` records, so the cost follows the window, not the
    /// memory: a failure mode shared by a tenth of 100,000 records costs as much as a rare one.
    /// Where no key has more than `window` eligible records this is the exact ranking.
    pub fn key_candidates(
        &self,
        keys: &ScopeKeys,
        exclude_incident: Option<&str>,
        window: usize,
        limit: usize,
    ) -> (Vec<Candidate>, Vec<String>) {
        let mut all: Vec<(&str, &str, f64)> = keys
            .failure_modes
            .iter()
            .map(|(t, w)| ("failure_mode", t.as_str(), *w))
            .collect();
        let mut neighbours = Vec::new();
        if let Some((service, weight, neighbour_weight)) = &keys.service {
            all.push(("service", service, *weight));
            neighbours = self.neighbours(service).to_vec();
            all.extend(
                neighbours
                    .iter()
                    .map(|n| ("service", n.as_str(), *neighbour_weight)),
            );
        }
        all.extend(
            keys.action_kinds
                .iter()
                .map(|(a, w)| ("action_kind", a.as_str(), *w)),
        );
        // An excluded incident unknown here excludes nothing.
        let excluded = exclude_incident.and_then(|i| self.incidents.get(i).copied());
        let mut weights: HashMap<i64, f64> = HashMap::new();
        for (key, value, weight) in all {
            let Some(ids) = self.keys.get(&(key.to_string(), value.to_string())) else {
                continue;
            };
            let eligible = ids
                .iter()
                .filter(|(_, incident)| Some(*incident) != excluded);
            for (id, _) in eligible.take(window) {
                *weights.entry(*id).or_default() += weight;
            }
        }
        let mut ranked: Vec<(f64, i64)> = weights.into_iter().map(|(id, w)| (w, id)).collect();
        ranked.sort_by(|(wa, a), (wb, b)| wb.total_cmp(wa).then(b.cmp(a)));
        let candidates = ranked
            .into_iter()
            .take(limit)
            .filter_map(|(_, id)| self.entries.get(&id).map(|e| e.candidate.clone()))
            .collect();
        (candidates, neighbours)
    }
}

/// A query's structured keys, each with its weight: what [`RecallIndex::key_candidates`] looks
/// up.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScopeKeys {
    /// `failure_mode` keys: `(tag, weight)`.
    pub failure_modes: Vec<(String, f64)>,
    /// The service in scope (a `service` key): `(service, weight, weight of each of its
    /// neighbours)`.
    pub service: Option<(String, f64, f64)>,
    /// `action_kind` keys: `(kind, weight)`.
    pub action_kinds: Vec<(String, f64)>,
}
