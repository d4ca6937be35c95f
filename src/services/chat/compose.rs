//! What a chat message about an incident says, composed when it is delivered from what the
//! incident write recorded (its timeline entry, its outbox row) and what is stored now.
//!
//! "Incident opened" carries the memory's first read, read through the same door as the incident
//! page (`Memory::recall_for_page`): the most similar past incident with its confirmed root cause
//! and why it was recalled, and every known dead end in the words of the page's banner
//! ([`crate::services::investigation::dead_end_warnings`], the function that writes the banner
//! on a recommendation) — or, for a rejected recommendation, the record's text as the page's
//! "Known dead ends" list shows it. Every text was redacted with its incident's map before it was
//! stored, and is passed through [`redact_once`] again here.

use sqlx::AnyPool;

use super::ChatSettings;
use crate::chat::{Message, Section};
use crate::domain::chat::ChatEvent;
use crate::domain::memory::MemoryRecord;
use crate::domain::{ActionKind, Incident, IncidentId, MemoryKind};
use crate::error::{AppError, AppResult};
use crate::evidence::redact::redact_once;
use crate::memory::Memory;
use crate::memory::recall::{PendingVectors, Why};
use crate::services::investigation::{Warning, dead_end_warnings, incident_tags};
use crate::store::chat::{self as cstore, OutboxRow};
use crate::store::{self, incidents, memory as mstore, recommendations as rstore};

/// Records the first read asks recall for (as many as the incident page).
const FIRST_READ_K: usize = 30;

/// Longest root cause line.
const ROOT_CAUSE_MAX: usize = 240;

/// A message, or not yet: an "opened" message waits for its incident's whole first recall.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Composed {
    /// Ready to post.
    Ready(Message),
    /// The first read is still being computed; ask again shortly: when the query's vectors
    /// are what it waits for, once they are ready ([`PendingVectors::ready`], a cache read).
    NotYet(Option<PendingVectors>),
}

/// Composes the message of outbox `row` at `now`.
///
/// # Errors
/// Database and recall errors; a row naming an unknown event (written by a newer version).
pub async fn compose(
    pool: &AnyPool,
    memory: &Memory,
    settings: &ChatSettings,
    row: &OutboxRow,
    now: jiff::Timestamp,
) -> AppResult<Composed> {
    let id = IncidentId::parse(&row.incident_id).map_err(|e| AppError::Internal(e.into()))?;
    let incident = incidents::get(pool, &id).await?;
    let (actor, _kind, detail) = cstore::timeline_entry(pool, row.timeline_event_id).await?;
    let event = ChatEvent::parse(&row.event).map_err(|e| AppError::Internal(e.into()))?;
    let link = format!(
        "{}/incidents/{}",
        settings.public_url.trim_end_matches('/'),
        id
    );
    let line = |s: &str| Section {
        label: String::new(),
        lines: vec![clean(s)],
    };
    let labelled = |label: &str, lines: Vec<String>| Section {
        label: label.to_string(),
        lines: lines.iter().map(|l| clean(l)).collect(),
    };
    let (headline, sections) = match event {
        ChatEvent::Opened => {
            let created = store::parse_db_time(&row.created_at)?;
            let waited = now.duration_since(created).unsigned_abs();
            let read = match first_read(pool, memory, &incident, waited < settings.first_read_wait)
                .await?
            {
                Ok(read) => read,
                Err(pending) => return Ok(Composed::NotYet(pending)),
            };
            let mut sections = vec![line(&format!(
                "{} on {}, opened by {actor}",
                incident.severity, incident.service
            ))];
            sections.extend(read);
            ("Incident opened", sections)
        }
        ChatEvent::DeadEndApproved => {
            let rid: i64 = row
                .subject
                .as_deref()
                .and_then(|s| s.parse().ok())
                .unwrap_or(-1);
            let rec = rstore::of_incident(pool, id.as_str())
                .await?
                .into_iter()
                .find(|r| r.id == rid);
            let (who, what, warning, reason) = match rec {
                Some(r) => {
                    let what = ActionKind::parse(&r.action_kind)
                        .map_or(r.action_kind.clone(), |k| k.label().to_string());
                    let warning = r
                        .warning
                        .as_deref()
                        .and_then(|w| serde_json::from_str::<Warning>(w).ok())
                        .map_or_else(String::new, |w| w.message);
                    (
                        r.decided_by.unwrap_or(actor),
                        format!("{what} on {}", r.target),
                        warning,
                        r.approve_reason.unwrap_or_default(),
                    )
                }
                None => (actor, detail.clone(), String::new(), String::new()),
            };
            let mut sections = vec![
                line(&format!("{who} approved {what}")),
                labelled("The warning it carried", vec![warning]),
            ];
            if !reason.trim().is_empty() {
                sections.push(labelled("What is different this time", vec![reason]));
            }
            ("A known dead end was approved anyway", sections)
        }
        ChatEvent::Resolved => (
            "Resolved",
            vec![
                line(&format!("Resolved by {actor}")),
                labelled(
                    "Root cause",
                    vec![
                        incident
                            .root_cause
                            .clone()
                            .unwrap_or_else(|| "not given".into()),
                    ],
                ),
            ],
        ),
        ChatEvent::PostmortemReady => {
            let last_editor = store::postmortems::get(pool, id.as_str())
                .await
                .map(|p| p.edited_by)
                .unwrap_or(actor.clone());
            let may: Vec<String> = cstore::reviewer_names(pool)
                .await?
                .into_iter()
                .filter(|n| *n != last_editor)
                .collect();
            let who = if may.is_empty() {
                "no reviewer yet besides its last editor: add one".to_string()
            } else {
                may.join(", ")
            };
            (
                "Post-mortem ready for review",
                vec![
                    line(&format!("Drafted by {actor}; last edited by {last_editor}")),
                    labelled(
                        "May confirm (reviewers who did not edit it last)",
                        vec![who],
                    ),
                ],
            )
        }
        ChatEvent::Confirmed => (
            "Post-mortem confirmed",
            vec![line(&format!("Confirmed by {actor}; next: Learn"))],
        ),
        ChatEvent::Learned => (
            "Learned",
            vec![
                line(&format!("Learned by {actor}: {detail}")),
                labelled("What memory took", vec![format!("{link}/learnings")]),
            ],
        ),
        ChatEvent::AlertsResolved => (
            "Every alert resolved; the incident is still open",
            vec![line(&detail)],
        ),
    };
    Ok(Composed::Ready(Message {
        headline: headline.to_string(),
        incident_id: id.to_string(),
        title: clean(&incident.title),
        link,
        sections,
    }))
}

/// Stored text redacted once more, on one line of at most 2,000 characters.
fn clean(s: &str) -> String {
    crate::evidence::truncate_chars(&redact_once(s), 2000).to_string()
}

/// The memory's first read of `incident`: its most similar past incident and the known dead
/// ends. While recall's matches by meaning are still computed and `may_wait`, what it waits
/// for instead.
async fn first_read(
    pool: &AnyPool,
    memory: &Memory,
    incident: &Incident,
    may_wait: bool,
) -> AppResult<Result<Vec<Section>, Option<PendingVectors>>> {
    let (sorted, tags) = incident_tags(pool, incident).await?;
    // Waiting for the query's vectors costs a cache read, not a recall per poll (issue #50:
    // a burst of alert-opened incidents must not slow the webhooks).
    if may_wait && let Some(pending) = memory.page_recall_pending(incident, &sorted).await? {
        return Ok(Err(Some(pending)));
    }
    let recalled = memory
        .recall_for_page(incident, &sorted, &tags, FIRST_READ_K)
        .await?;
    if recalled.recall.vectors_pending && may_wait {
        return Ok(Err(None));
    }
    let mut sections = Vec::new();
    match recalled.similar.first() {
        Some(past) => {
            let why = recalled
                .recall
                .results
                .iter()
                .find(|r| r.memory.incident_id.as_ref() == Some(past))
                .map(|r| why_line(&r.why))
                .unwrap_or_default();
            let past_id = IncidentId::parse(past).map_err(|e| AppError::Internal(e.into()))?;
            let (title, root_cause) = match incidents::get(pool, &past_id).await {
                Ok(p) => {
                    let confirmed = root_cause_record(pool, past).await?;
                    (p.title, confirmed.or(p.root_cause))
                }
                Err(_) => (String::new(), None),
            };
            let mut lines = vec![format!("{past} {title}")];
            if let Some(rc) = root_cause {
                lines.push(format!("Root cause: {}", one_line(&rc)));
            }
            if !why.is_empty() {
                lines.push(format!("Recalled for {why}"));
            }
            sections.push(Section {
                label: "Memory's first read: the most similar past incident".into(),
                lines: lines.iter().map(|l| clean(l)).collect(),
            });
        }
        None => sections.push(Section {
            label: "Memory's first read".into(),
            lines: vec![clean(
                recalled
                    .recall
                    .notice
                    .as_deref()
                    .unwrap_or("no similar past incident in memory"),
            )],
        }),
    }
    let dead_ends = dead_end_lines(
        pool,
        incident,
        &tags,
        &recalled.similar,
        &recalled.dead_ends,
    )
    .await?;
    if !dead_ends.is_empty() {
        sections.push(Section {
            label: "Known dead ends".into(),
            lines: dead_ends.iter().map(|l| clean(l)).collect(),
        });
    }
    Ok(Ok(sections))
}

/// Every known dead end of the page, in its words: for each action that failed, the banner the
/// page puts on that action ([`dead_end_warnings`]); for a rejected recommendation, the record
/// as the page's list shows it.
pub async fn dead_end_lines(
    pool: &AnyPool,
    incident: &Incident,
    tags: &[String],
    similar: &[String],
    dead_ends: &[MemoryRecord],
) -> AppResult<Vec<String>> {
    let mut kinds: Vec<ActionKind> = Vec::new();
    for d in dead_ends
        .iter()
        .filter(|d| d.kind == MemoryKind::RemediationFailure)
    {
        if let Some(k) = d.action_kind
            && !kinds.contains(&k)
        {
            kinds.push(k);
        }
    }
    let warnings = dead_end_warnings(pool, &kinds, &incident.service, tags, similar).await?;
    let mut lines: Vec<String> = warnings.into_iter().flatten().map(|w| w.message).collect();
    for d in dead_ends {
        let banner = d.kind == MemoryKind::RemediationFailure
            && d.action_kind.is_some_and(|k| kinds.contains(&k));
        if !banner {
            lines.push(d.text.clone());
        }
    }
    Ok(lines)
}

/// The confirmed root cause of past incident `id` as Learn wrote it, if any.
async fn root_cause_record(pool: &AnyPool, id: &str) -> AppResult<Option<String>> {
    let filter = mstore::MemoryFilter {
        incident: Some(id.to_string()),
        kind: Some(MemoryKind::RootCause),
        limit: Some(1),
        ..Default::default()
    };
    Ok(mstore::list(pool, &filter)
        .await?
        .into_iter()
        .next()
        .map(|r| r.text))
}

/// `s` on one line, at most [`ROOT_CAUSE_MAX`] characters.
fn one_line(s: &str) -> String {
    let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
    crate::chat::text::cut(&flat, ROOT_CAUSE_MAX, "")
}

/// Why recall found a record, in a few words: shared failure modes, service, words, meaning.
pub fn why_line(w: &Why) -> String {
    let mut parts = Vec::new();
    if !w.tags.is_empty() {
        parts.push(format!("failure modes {}", w.tags.join(", ")));
    }
    if !w.services.is_empty() {
        parts.push(format!("service {}", w.services.join(", ")));
    }
    if !w.matched_terms.is_empty() {
        let words: Vec<&str> = w.matched_terms.iter().take(6).map(String::as_str).collect();
        parts.push(format!("words {}", words.join(", ")));
    }
    if let Some(c) = w.cosine {
        parts.push(format!("meaning (cosine {c:.2})"));
    }
    parts.join("; ")
}
