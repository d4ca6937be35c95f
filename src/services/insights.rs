//! Insights: reads the window's incidents, their failure-mode tags, alerts, lessons,
//! failed actions and the reviewers' grades of the top hypothesis from the store and hands them
//! to `domain::insights::compute`. Read-only: nothing here writes memory, the timeline or the
//! audit log.

use sqlx::AnyPool;

use crate::domain::IncidentState;
use crate::domain::insights::{
    FailedAction, GradeFacts, IncidentFacts, Insights, Window, compute, first_signal,
};
use crate::error::AppResult;
use crate::services::investigation::incident_tags;
use crate::store::{incidents, insights as istore, proposals as pstore};

/// The four views over `window`, ending at `now`: see [`crate::domain::insights`] for what each
/// one measures. A failed action's failure modes are those its remediation-failure record
/// carries, else its incident's tags now.
///
/// # Errors
/// Database errors.
pub async fn insights(pool: &AnyPool, window: Window, now: jiff::Timestamp) -> AppResult<Insights> {
    let since = window.since(now);
    let opened = incidents::opened_since(pool, since).await?;
    let alerts = istore::first_alert_starts(pool, since).await?;
    let lessons = istore::incidents_with_lessons(pool, since).await?;
    let mut facts = Vec::with_capacity(opened.len());
    for i in opened {
        let (observations, tags) = incident_tags(pool, &i).await?;
        let id = i.id.to_string();
        // The same first-seen instants the post-mortem's impact starts from, and the alerts'
        // starts; only those inside the incident's own window count.
        let mut candidates: Vec<jiff::Timestamp> = observations
            .iter()
            .filter_map(|o| o.data.get("first_seen").and_then(|v| v.as_str()))
            .filter_map(|s| s.parse::<jiff::Timestamp>().ok())
            .collect();
        candidates.extend(alerts.get(&id).copied());
        let end = match (i.state, i.resolved_at) {
            (IncidentState::Investigating, _) | (_, None) => now,
            (_, Some(r)) => r,
        };
        let (first_signal_at, stale_signal_at) = first_signal(i.opened_at, end, &candidates);
        facts.push(IncidentFacts {
            first_signal_at,
            stale_signal_at,
            has_lesson: lessons.contains(&id),
            id,
            title: i.title,
            service: i.service,
            severity: i.severity,
            state: i.state,
            opened_at: i.opened_at,
            resolved_at: i.resolved_at,
            failure_modes: tags,
        });
    }
    let failed: Vec<FailedAction> = istore::failed_actions(pool, since)
        .await?
        .into_iter()
        .map(|f| FailedAction {
            failure_modes: f.failure_modes.unwrap_or_else(|| {
                facts
                    .iter()
                    .find(|i| i.id == f.incident_id)
                    .map(|i| i.failure_modes.clone())
                    .unwrap_or_default()
            }),
            incident_id: f.incident_id,
            service: f.service,
            action_kind: f.action_kind,
            approved_at: f.approved_at,
            verdict_at: f.verdict_at,
        })
        .collect();
    let grades: Vec<GradeFacts> = pstore::grades_since(pool, since)
        .await?
        .into_iter()
        .map(|(g, opened_at)| GradeFacts {
            incident_id: g.incident_id,
            opened_at,
            matched: g.matched,
            memory_recalled: g.memory_recalled,
        })
        .collect();
    Ok(compute(window, now, &facts, &failed, &grades))
}
