//! One retrieval document per past incident (DESIGN.md §4, "the incident level"): what people
//! remember of an incident — its title, description and evidence lines, the root cause, what did
//! NOT work, what worked and the lessons — as one text for BM25, and its most telling part for
//! the embedding model. New incidents are described the way past ones were reported (symptoms
//! first), so the embedded part leads with the report and the evidence.
//!
//! Documents are derived data: [`refresh`] rebuilds those whose durable records changed (by a
//! signature of record ids and validation states), deletes those whose records were all
//! retracted, and is run by the memory worker after every write and by [`super::embeddings::catch_up`].
//! Only learned incidents (and incidents known only from imported memories) get one: an open
//! incident's verdicts are still found through their records.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use super::Memory;
use crate::domain::MemoryKind;
use crate::domain::memory::MemoryRecord;
use crate::error::AppResult;
use crate::store::incident_documents::{self as dstore, DocumentRow};
use crate::store::memory as mstore;

/// Evidence lines taken into a document.
const EVIDENCE_LINES: usize = 12;

/// Longest evidence line kept, in characters.
const LINE_CHARS: usize = 300;

/// What a document is built from.
#[derive(Debug, Clone, Default)]
pub struct Parts<'a> {
    /// The incident's title, when the database holds the incident.
    pub title: Option<&'a str>,
    /// Its description.
    pub description: Option<&'a str>,
    /// Evidence lines (observations' example lines), most telling first.
    pub evidence: Vec<&'a str>,
    /// Its durable, non-retracted records.
    pub records: &'a [MemoryRecord],
}

/// The text of a record as it reads in a document: a rule in its ALWAYS / BECAUSE form.
fn record_text(r: &MemoryRecord) -> String {
    match &r.rule {
        Some(rule) => format!("{} Because {}", rule.always, rule.because),
        None => r.text.clone(),
    }
}

/// The document of one incident: `(text, embed_text, passages)`. Sections in a fixed order (report,
/// evidence, root cause and factors, what did not work, what worked, lessons, the rest), so the
/// embedded part, cut at the model's window, keeps the report and the evidence.
pub fn build(parts: &Parts<'_>) -> (String, String, Vec<String>) {
    let by_kind = |kinds: &[MemoryKind]| -> Vec<String> {
        parts
            .records
            .iter()
            .filter(|r| kinds.contains(&r.kind))
            .map(record_text)
            .collect()
    };
    let mut report: Vec<String> = Vec::new();
    report.extend(parts.title.map(str::to_string));
    report.extend(parts.description.map(str::to_string));
    if report.is_empty() {
        report.extend(by_kind(&[MemoryKind::IncidentSummary]));
    }
    let evidence: Vec<String> = parts
        .evidence
        .iter()
        .take(EVIDENCE_LINES)
        .map(|l| crate::evidence::truncate_chars(l, LINE_CHARS).to_string())
        .collect();
    let symptoms = by_kind(&[MemoryKind::Symptom, MemoryKind::Trigger]);
    let causes = by_kind(&[MemoryKind::RootCause, MemoryKind::ContributingFactor]);
    let failed = by_kind(&[
        MemoryKind::RemediationFailure,
        MemoryKind::FalseHypothesis,
        MemoryKind::RejectedRecommendation,
    ]);
    let worked = by_kind(&[MemoryKind::RemediationSuccess]);
    let lessons = by_kind(&[MemoryKind::Lesson]);
    let known = [
        MemoryKind::IncidentSummary,
        MemoryKind::Symptom,
        MemoryKind::Trigger,
        MemoryKind::RootCause,
        MemoryKind::ContributingFactor,
        MemoryKind::RemediationFailure,
        MemoryKind::FalseHypothesis,
        MemoryKind::RejectedRecommendation,
        MemoryKind::RemediationSuccess,
        MemoryKind::Lesson,
    ];
    let rest: Vec<String> = parts
        .records
        .iter()
        .filter(|r| !known.contains(&r.kind))
        .map(record_text)
        .collect();
    let mut text = Vec::new();
    for section in [
        &report, &evidence, &symptoms, &causes, &failed, &worked, &lessons, &rest,
    ] {
        text.extend(section.iter().cloned());
    }
    let mut embed = Vec::new();
    embed.extend(report.iter().cloned());
    embed.extend(evidence.iter().cloned());
    let passages = passages_of(&embed.join("\n"));
    embed.extend(causes.iter().cloned());
    (text.join("\n"), embed.join("\n"), passages)
}

/// Passages of a report, embedded one by one: its lines, each cut into sentences (a `.`, `!`
/// or `?` before white space ends one; a dot inside a token such as `2.14.1` does not), trimmed,
/// without fragments under [`PASSAGE_MIN`] characters, each at most [`LINE_CHARS`] characters,
/// at most [`MAX_PASSAGES`], in order, without duplicates.
pub fn passages_of(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        let mut start = 0;
        let mut chars = line.char_indices().peekable();
        let push = |s: &str, out: &mut Vec<String>| {
            let s = s.trim();
            if s.chars().count() >= PASSAGE_MIN && !out.iter().any(|o| o == s) {
                out.push(crate::evidence::truncate_chars(s, LINE_CHARS).to_string());
            }
        };
        while let Some((i, c)) = chars.next() {
            if matches!(c, '.' | '!' | '?') && chars.peek().is_none_or(|(_, n)| n.is_whitespace()) {
                push(&line[start..i + c.len_utf8()], &mut out);
                start = i + c.len_utf8();
            }
        }
        push(&line[start..], &mut out);
        if out.len() >= MAX_PASSAGES {
            out.truncate(MAX_PASSAGES);
            break;
        }
    }
    out
}

/// Shortest passage kept, in characters.
const PASSAGE_MIN: usize = 12;

/// Most passages of one report.
pub const MAX_PASSAGES: usize = 24;

/// Signature of a document's sources: a digest of its record ids with their validation state.
fn signature(records: &[(i64, &str)]) -> String {
    let mut h = Sha256::new();
    for (id, v) in records {
        h.update(format!("{id}:{v};"));
    }
    hex::encode(&h.finalize()[..12])
}

/// Rebuilds every document whose durable records changed since it was built, writes missing
/// ones and deletes those with no record left. Returns how many were written or deleted.
///
/// # Errors
/// Database errors.
pub async fn refresh(memory: &Memory) -> AppResult<usize> {
    let pool = memory.pool();
    let index = memory.index().await?;
    let mut by_incident: BTreeMap<&str, Vec<(i64, &str)>> = BTreeMap::new();
    for e in index.entries() {
        if let Some(i) = e.incident_id.as_deref() {
            by_incident
                .entry(i)
                .or_default()
                .push((e.candidate.id, e.candidate.validation.as_str()));
        }
    }
    let stored = dstore::signatures(pool).await?;
    let mut changed: Vec<(String, String)> = Vec::new();
    for (inc, ids) in &mut by_incident {
        ids.sort_unstable();
        let sig = signature(ids);
        if stored.get(*inc) != Some(&sig) {
            changed.push(((*inc).to_string(), sig));
        }
    }
    let mut n = 0;
    for gone in stored
        .keys()
        .filter(|i| !by_incident.contains_key(i.as_str()))
    {
        dstore::delete(pool, gone).await?;
        n += 1;
    }
    if changed.is_empty() {
        return Ok(n);
    }
    let ids: Vec<String> = changed.iter().map(|(i, _)| i.clone()).collect();
    let states = dstore::incident_states(pool, &ids).await?;
    for (inc, sig) in changed {
        // Open incidents are found through their records; their document waits for Learn.
        if states.get(&inc).is_some_and(|s| s != "learned") {
            continue;
        }
        let record_ids: Vec<i64> = by_incident
            .get(inc.as_str())
            .map(|v| v.iter().map(|(id, _)| *id).collect())
            .unwrap_or_default();
        let doc = document_of(memory, &inc, &record_ids, sig).await?;
        dstore::upsert(pool, &doc).await?;
        n += 1;
    }
    Ok(n)
}

/// Reads what the document of `incident_id` is built from and builds it.
async fn document_of(
    memory: &Memory,
    incident_id: &str,
    record_ids: &[i64],
    signature: String,
) -> AppResult<DocumentRow> {
    let pool = memory.pool();
    let mut records = mstore::get_many(pool, record_ids).await?;
    records.sort_by_key(|r| r.id);
    let incident = match crate::domain::IncidentId::parse(incident_id) {
        Ok(id) => crate::store::incidents::get(pool, &id).await.ok(),
        Err(_) => None,
    };
    let observations = if incident.is_some() {
        let filter = mstore::MemoryFilter {
            incident: Some(incident_id.to_string()),
            kind: Some(MemoryKind::Observation),
            include_working: true,
            limit: Some(200),
            ..Default::default()
        };
        let mut obs = mstore::list(pool, &filter).await?;
        obs.sort_by_key(|o| {
            std::cmp::Reverse(o.data.get("salience").and_then(|s| s.as_i64()).unwrap_or(0))
        });
        obs
    } else {
        Vec::new()
    };
    let evidence: Vec<&str> = observations
        .iter()
        .filter(|o| !crate::domain::memory::is_summary(o))
        .filter_map(|o| o.data.get("example").and_then(|e| e.as_str()))
        .collect();
    let service = incident
        .as_ref()
        .map(|i| i.service.clone())
        .or_else(|| records.iter().find_map(|r| r.services.first().cloned()))
        .unwrap_or_default();
    let parts = Parts {
        title: incident.as_ref().map(|i| i.title.as_str()),
        description: incident.as_ref().map(|i| i.description.as_str()),
        evidence,
        records: &records,
    };
    let (text, embed_text, passages) = build(&parts);
    Ok(DocumentRow {
        incident_id: incident_id.to_string(),
        service,
        text,
        embed_text,
        signature,
        passages,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passages_are_lines_cut_into_sentences_keeping_version_numbers_whole() {
        let p = passages_of(
            "Checkout froze after release 3.2.1 went out. Queue depth doubled!\n\
             ok\nworker-7: job 991 retried 40 times\nworker-7: job 991 retried 40 times",
        );
        assert_eq!(
            p,
            vec![
                "Checkout froze after release 3.2.1 went out.",
                "Queue depth doubled!",
                "worker-7: job 991 retried 40 times",
            ]
        );
    }

    #[test]
    fn the_signature_changes_with_ids_and_validation() {
        let a = signature(&[(1, "confirmed"), (2, "confirmed")]);
        assert_eq!(a, signature(&[(1, "confirmed"), (2, "confirmed")]));
        assert_ne!(a, signature(&[(1, "confirmed"), (2, "superseded")]));
        assert_ne!(a, signature(&[(1, "confirmed")]));
    }

    #[test]
    fn a_document_leads_with_the_report_and_keeps_every_section() {
        let parts = Parts {
            title: Some("Search results empty after index swap"),
            description: Some("Users saw no results for about ten minutes."),
            evidence: vec!["alias points at an index with 0 documents"],
            records: &[],
        };
        let (text, embed, passages) = build(&parts);
        assert_eq!(passages[0], "Search results empty after index swap");
        assert!(text.starts_with("Search results empty after index swap\nUsers saw"));
        assert!(text.contains("alias points at an index with 0 documents"));
        assert!(embed.starts_with("Search results empty"));
    }
}
