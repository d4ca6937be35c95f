//! The inputs of the insights' charts and the detection bound: the rule that keeps time to
//! detect inside an incident's own window ([`first_signal`]), the stale pastes it flags, the
//! weekly MTTR over every service and the failure modes over every service.

use std::collections::{BTreeMap, BTreeSet};

use jiff::{SignedDuration, Timestamp};
use serde::Serialize;

use super::{IncidentFacts, WeekPoint, Window, human, mean};

/// How long before an incident was opened a signal may come and still count as its detection
/// delay (7 days): an older first line is a stale paste (logs kept from another time), not the
/// start of this incident.
pub const MAX_DETECTION_LEAD: SignedDuration = SignedDuration::from_hours(24 * 7);

/// The first signal of an incident opened at `opened_at` whose window ends at `end` (its
/// resolution, or now while it is open), among `candidates` (its evidence's first-seen line
/// instants and its alerts' starts): the earliest inside its window — from
/// [`MAX_DETECTION_LEAD`] before it was opened to `end` — and the earliest outside it (a paste of
/// older logs, or lines dated after the incident ended), if any.
pub fn first_signal(
    opened_at: Timestamp,
    end: Timestamp,
    candidates: &[Timestamp],
) -> (Option<Timestamp>, Option<Timestamp>) {
    let from = opened_at - MAX_DETECTION_LEAD;
    let end = end.max(opened_at);
    let inside = |t: &&Timestamp| **t >= from && **t <= end;
    let first = candidates.iter().filter(inside).min().copied();
    let stale = candidates.iter().filter(|t| !inside(t)).min().copied();
    (first, stale)
}

/// One failure mode over every service.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ModeTotal {
    /// Tag, e.g. `connection_pool_exhausted`.
    pub failure_mode: String,
    /// Incidents of the window that carried it.
    pub incidents: usize,
    /// Services they were on, by name.
    pub service_names: Vec<String>,
}

/// An incident whose pasted evidence starts outside its own window.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct StaleSignal {
    /// `INC-YYYY-NNNN`.
    pub id: String,
    /// Service.
    pub service: String,
    /// The stale instant (UTC).
    #[schema(value_type = String, format = DateTime)]
    pub signal_at: Timestamp,
    /// When the incident was opened (UTC).
    #[schema(value_type = String, format = DateTime)]
    pub opened_at: Timestamp,
    /// How far from the opening, in words: "6597 d 18 h before it was opened", "2 d 1 h after
    /// it ended".
    pub distance: String,
    /// The incident's page.
    pub href: String,
}

/// Mean MTTR of `list` per 7-day bucket from `since`, by opened instant.
pub(super) fn weekly_mttr(
    list: &[&IncidentFacts],
    window: Window,
    since: Timestamp,
) -> Vec<WeekPoint> {
    let week = SignedDuration::from_hours(24 * 7);
    (0..window.weeks())
        .map(|w| {
            let start = since + week * w as i32;
            let end = start + week;
            let values: Vec<i64> = list
                .iter()
                .filter(|i| i.opened_at >= start && i.opened_at < end)
                .filter_map(|i| i.resolve_seconds())
                .collect();
            WeekPoint {
                week_start: start,
                resolved: values.len(),
                mttr_seconds: mean(&values),
            }
        })
        .collect()
}

/// Failure modes over every service, most incidents first (ties by name).
pub(super) fn recurring_modes(in_window: &[&IncidentFacts]) -> Vec<ModeTotal> {
    let mut modes: BTreeMap<&str, (usize, BTreeSet<&str>)> = BTreeMap::new();
    for i in in_window {
        let tags: BTreeSet<&str> = i.failure_modes.iter().map(String::as_str).collect();
        for t in tags {
            let e = modes.entry(t).or_default();
            e.0 += 1;
            e.1.insert(&i.service);
        }
    }
    let mut out: Vec<ModeTotal> = modes
        .into_iter()
        .map(|(mode, (n, services))| ModeTotal {
            failure_mode: mode.into(),
            incidents: n,
            service_names: services.into_iter().map(str::to_string).collect(),
        })
        .collect();
    out.sort_by_key(|m| std::cmp::Reverse(m.incidents));
    out
}

/// The window's incidents with a stale first signal, oldest opened first.
pub(super) fn stale_signals(in_window: &[&IncidentFacts]) -> Vec<StaleSignal> {
    let mut out: Vec<StaleSignal> = in_window
        .iter()
        .filter_map(|i| {
            let at = i.stale_signal_at?;
            let distance = if at < i.opened_at {
                format!(
                    "{} before it was opened",
                    human((i.opened_at - at).as_secs())
                )
            } else {
                let end = i.resolved_at.unwrap_or(i.opened_at).max(i.opened_at);
                format!("{} after it ended", human((at - end).as_secs()))
            };
            Some(StaleSignal {
                id: i.id.clone(),
                service: i.service.clone(),
                signal_at: at,
                opened_at: i.opened_at,
                distance,
                href: format!("/incidents/{}", i.id),
            })
        })
        .collect();
    out.sort_by_key(|s| (s.opened_at, s.id.clone()));
    out
}
