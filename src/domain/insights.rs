//! Insights: the organization-wide views over a window of past incidents — recurring
//! failure modes by service, dead ends by time lost, MTTR and time to detect by service and
//! severity, and incidents whose memory is thin. Pure aggregation over facts the service reads
//! from the store; nothing here does I/O or writes memory.
//!
//! One rule picks what a window holds: the incidents **opened** at or after its start
//! ([`Window::since`]), and everything recorded on them (their actions, verdicts, resolutions),
//! whenever it happened.
//!
//! Time to detect is bounded by the incident's own window ([`first_signal`], in
//! `insights/trend.rs` with the charts' inputs): a pasted log whose
//! lines are far older than the incident (or dated after it ended) is flagged as a stale paste,
//! listed, and not counted.
//!
//! The copilot's accuracy is in `insights/accuracy_view.rs`, the tests in `insights/tests.rs`.

use std::collections::{BTreeMap, BTreeSet};

use jiff::{SignedDuration, Timestamp};
use serde::Serialize;

use super::{IncidentState, Severity, ValidationError};

/// How far back the insights look: 30 or 90 days (`?days=30|90`, default 30).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Window {
    /// The last 30 days.
    #[default]
    Days30,
    /// The last 90 days.
    Days90,
}

impl Window {
    /// Parses `?days=`: absent or empty is 30; `30` and `90` are the windows.
    ///
    /// # Errors
    /// A [`ValidationError`] on `days` for anything else (a 422 through the app's error type).
    pub fn parse(days: Option<&str>) -> Result<Self, ValidationError> {
        match days.map(str::trim) {
            None | Some("") | Some("30") => Ok(Self::Days30),
            Some("90") => Ok(Self::Days90),
            Some(other) => Err(ValidationError::new(
                "days",
                format!("'{other}' is not a window; use days=30 or days=90"),
            )),
        }
    }

    /// Length in days.
    pub fn days(self) -> i64 {
        match self {
            Self::Days30 => 30,
            Self::Days90 => 90,
        }
    }

    /// The window's start for a window ending at `now`: `now` minus [`Window::days`] × 24 h.
    pub fn since(self, now: Timestamp) -> Timestamp {
        now - SignedDuration::from_hours(24 * self.days())
    }

    /// Number of week buckets of the sparklines: the window in 7-day steps from its start, the
    /// last one shorter (30 days → 5, 90 days → 13).
    pub fn weeks(self) -> usize {
        (self.days() as usize).div_ceil(7)
    }
}

/// One incident opened in the window, as the insights read it.
#[derive(Debug, Clone)]
pub struct IncidentFacts {
    /// `INC-YYYY-NNNN`.
    pub id: String,
    /// Headline.
    pub title: String,
    /// Affected service.
    pub service: String,
    /// SEV1…SEV4.
    pub severity: Severity,
    /// Workflow state now.
    pub state: IncidentState,
    /// When it was opened.
    pub opened_at: Timestamp,
    /// When it was last resolved; only read when `state` is not investigating (a reopened
    /// incident is not resolved).
    pub resolved_at: Option<Timestamp>,
    /// Its failure-mode tags (`services::investigation::incident_tags`: observations' tags plus
    /// those derived from title, description and evidence lines).
    pub failure_modes: Vec<String>,
    /// Its first signal inside its own window ([`first_signal`]): the earliest of its
    /// evidence's first-seen line instants (the observations' `first_seen`) and its alerts'
    /// `starts_at` that is not stale, if it has any.
    pub first_signal_at: Option<Timestamp>,
    /// The earliest of those instants outside its window (a stale paste), if any: flagged, not
    /// counted.
    pub stale_signal_at: Option<Timestamp>,
    /// Whether a lesson (rule) not retracted names it as its incident.
    pub has_lesson: bool,
}

impl IncidentFacts {
    /// Seconds from opened to (last) resolved, when it is resolved (any state after
    /// investigating); never negative.
    pub fn resolve_seconds(&self) -> Option<i64> {
        if self.state == IncidentState::Investigating {
            return None;
        }
        self.resolved_at
            .map(|r| (r - self.opened_at).as_secs().max(0))
    }

    /// Seconds from the first signal to opened. `None` ("not recorded") when the incident has
    /// no timestamped evidence and no alert start inside its window, or its first signal came
    /// after it was opened (a person opened it first: there is no detection delay to measure).
    /// Never more than [`MAX_DETECTION_LEAD`]: an older signal is stale and not counted.
    pub fn detect_seconds(&self) -> Option<i64> {
        let first = self.first_signal_at?;
        (first <= self.opened_at && first >= self.opened_at - MAX_DETECTION_LEAD)
            .then(|| (self.opened_at - first).as_secs())
    }
}

/// An approved action whose verdict was `did_not_resolve` or `made_worse`.
#[derive(Debug, Clone)]
pub struct FailedAction {
    /// Its incident.
    pub incident_id: String,
    /// Its incident's service.
    pub service: String,
    /// ActionKind name, e.g. `raise_pool_limit`.
    pub action_kind: String,
    /// When it was approved.
    pub approved_at: Timestamp,
    /// When the failing verdict was given.
    pub verdict_at: Timestamp,
    /// The failure modes it failed on (the tags its remediation-failure record carries).
    pub failure_modes: Vec<String>,
}

/// Failure mode recorded for a failed action whose incident had no tag.
pub const UNTAGGED: &str = "untagged";

/// All four views over one window: `GET /api/v1/insights`.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Insights {
    /// Window length in days (30 or 90).
    pub days: i64,
    /// Window start (UTC): incidents opened at or after it are counted.
    #[schema(value_type = String, format = DateTime)]
    pub since: Timestamp,
    /// Window end (UTC): when this was computed.
    #[schema(value_type = String, format = DateTime)]
    pub until: Timestamp,
    /// Incidents opened in the window.
    pub incidents: usize,
    /// Failure mode × service → incidents, most incidents first.
    pub failure_modes: Vec<FailureModeCount>,
    /// Failed actions grouped by action kind × failure mode, most time lost first.
    pub dead_ends: Vec<DeadEnd>,
    /// MTTR and time to detect per service (services by name).
    pub response_times: Vec<ServiceTimes>,
    /// Resolved (or later) incidents no lesson was learned from, oldest first.
    pub thin_memory: Vec<ThinIncident>,
    /// How often the copilot's top hypothesis was right, as reviewers graded it at Learn.
    pub accuracy: Accuracy,
    /// Mean MTTR per 7-day bucket over every service (the trend chart).
    pub weekly_mttr: Vec<WeekPoint>,
    /// Failure modes over every service, most incidents first (the recurring-modes chart).
    pub recurring_modes: Vec<ModeTotal>,
    /// Incidents whose evidence holds a stale first signal (flagged, not counted in time to
    /// detect), oldest opened first.
    pub stale_signals: Vec<StaleSignal>,
}

/// How many incidents of one service carried one failure mode.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct FailureModeCount {
    /// Failure-mode tag, e.g. `connection_pool_exhausted`.
    pub failure_mode: String,
    /// Service.
    pub service: String,
    /// Incidents of `service` opened in the window tagged `failure_mode`.
    pub incidents: usize,
    /// Their ids, oldest first.
    pub incident_ids: Vec<String>,
}

/// One action kind that failed on one failure mode.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct DeadEnd {
    /// ActionKind name.
    pub action_kind: String,
    /// Failure-mode tag (`untagged` when the incident had none).
    pub failure_mode: String,
    /// Failing verdicts (`did_not_resolve` or `made_worse`).
    pub failures: usize,
    /// Distinct incidents they were given on.
    pub incidents: usize,
    /// Distinct services of those incidents.
    pub services: usize,
    /// Time lost: the sum over the failures of approval → failing verdict, seconds.
    pub seconds_lost: i64,
    /// `seconds_lost` in human units, e.g. `41 min`.
    pub time_lost: String,
    /// The same action kind failed on the same failure mode in two or more incidents.
    pub recurring: bool,
    /// One line, e.g. "raise_pool_limit on connection_pool_exhausted: 4 incidents, 3 services,
    /// 41 min lost".
    pub summary: String,
    /// The incidents, by id.
    pub incident_ids: Vec<String>,
    /// The services, by name.
    pub service_names: Vec<String>,
}

/// MTTR and time to detect of one service, overall, per severity and per week.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ServiceTimes {
    /// Service.
    pub service: String,
    /// All severities together.
    pub overall: Times,
    /// One row per severity with incidents in the window, SEV1 first.
    pub by_severity: Vec<SeverityTimes>,
    /// Mean MTTR per 7-day bucket from the window's start (by opened instant), for the
    /// sparkline; `mttr_seconds` is null in a week with no resolved incident.
    pub weekly_mttr: Vec<WeekPoint>,
}

/// [`Times`] of one severity.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct SeverityTimes {
    /// SEV1…SEV4.
    pub severity: Severity,
    /// The figures.
    #[serde(flatten)]
    pub times: Times,
}

/// Counts and means of a set of incidents. MTTR: opened → (last) resolved, over the resolved
/// ones. Time to detect: first signal (earliest evidence line or alert start) → opened, over
/// those whose first signal came before they were opened; the others have it "not recorded".
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Times {
    /// Incidents opened in the window.
    pub incidents: usize,
    /// Of them, resolved (any state after investigating).
    pub resolved: usize,
    /// Mean opened → resolved of the resolved ones, seconds (floor); null when none.
    pub mttr_seconds: Option<i64>,
    /// `mttr_seconds` in human units, or "no resolved incident".
    pub mttr: String,
    /// Incidents with a measured time to detect.
    pub detected: usize,
    /// Incidents whose evidence held a stale first signal (flagged, not counted).
    pub stale: usize,
    /// Mean first signal → opened, seconds (floor); null when not recorded.
    pub ttd_seconds: Option<i64>,
    /// `ttd_seconds` in human units, or "not recorded".
    pub ttd: String,
}

/// One week of a sparkline.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct WeekPoint {
    /// Bucket start (UTC).
    #[schema(value_type = String, format = DateTime)]
    pub week_start: Timestamp,
    /// Resolved incidents opened in the bucket.
    pub resolved: usize,
    /// Their mean MTTR, seconds; null when none.
    pub mttr_seconds: Option<i64>,
}

/// A resolved (or later) incident with no lesson.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ThinIncident {
    /// `INC-YYYY-NNNN`.
    pub id: String,
    /// Headline.
    pub title: String,
    /// Service.
    pub service: String,
    /// SEV1…SEV4.
    pub severity: Severity,
    /// State now (resolved, postmortem_draft, confirmed or learned).
    pub state: IncidentState,
    /// The incident's page.
    pub href: String,
}

/// `seconds` in human units: `under 1 min`, `41 min`, `2 h 5 min`, `3 d 4 h` (minutes rounded
/// to the nearest).
pub fn human(seconds: i64) -> String {
    let minutes = (seconds.max(0) + 30) / 60;
    let (d, h, m) = (minutes / 1440, (minutes % 1440) / 60, minutes % 60);
    if minutes == 0 {
        "under 1 min".into()
    } else if d > 0 {
        format!("{d} d {h} h")
    } else if h > 0 {
        format!("{h} h {m} min")
    } else {
        format!("{m} min")
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn mean(values: &[i64]) -> Option<i64> {
    (!values.is_empty()).then(|| values.iter().sum::<i64>() / values.len() as i64)
}

fn times<'a>(incidents: impl IntoIterator<Item = &'a IncidentFacts>) -> Times {
    let list: Vec<&IncidentFacts> = incidents.into_iter().collect();
    let resolved: Vec<i64> = list.iter().filter_map(|i| i.resolve_seconds()).collect();
    let detected: Vec<i64> = list.iter().filter_map(|i| i.detect_seconds()).collect();
    let mttr_seconds = mean(&resolved);
    let ttd_seconds = mean(&detected);
    Times {
        incidents: list.len(),
        resolved: resolved.len(),
        mttr_seconds,
        mttr: mttr_seconds.map_or_else(|| "no resolved incident".into(), human),
        detected: detected.len(),
        stale: list.iter().filter(|i| i.stale_signal_at.is_some()).count(),
        ttd_seconds,
        ttd: ttd_seconds.map_or_else(|| "not recorded".into(), human),
    }
}

/// View 1: incidents per failure mode × service, most first.
fn failure_mode_counts(in_window: &[&IncidentFacts]) -> Vec<FailureModeCount> {
    let mut modes: BTreeMap<(&str, &str), Vec<&IncidentFacts>> = BTreeMap::new();
    for i in in_window {
        let tags: BTreeSet<&str> = i.failure_modes.iter().map(String::as_str).collect();
        for t in tags {
            modes.entry((t, i.service.as_str())).or_default().push(i);
        }
    }
    let mut failure_modes: Vec<FailureModeCount> = modes
        .into_iter()
        .map(|((mode, service), mut list)| {
            list.sort_by_key(|i| (i.opened_at, i.id.clone()));
            FailureModeCount {
                failure_mode: mode.into(),
                service: service.into(),
                incidents: list.len(),
                incident_ids: list.iter().map(|i| i.id.clone()).collect(),
            }
        })
        .collect();
    failure_modes.sort_by_key(|f| std::cmp::Reverse(f.incidents));
    failure_modes
}

/// View 2: failed actions per action kind × failure mode on the window's incidents (`known`),
/// most time lost first.
fn dead_ends(failed: &[FailedAction], known: &BTreeSet<&str>) -> Vec<DeadEnd> {
    #[derive(Default)]
    struct Acc<'a> {
        failures: usize,
        incidents: BTreeSet<&'a str>,
        services: BTreeSet<&'a str>,
        seconds: i64,
    }
    let mut ends: BTreeMap<(&str, &str), Acc> = BTreeMap::new();
    for f in failed
        .iter()
        .filter(|f| known.contains(f.incident_id.as_str()))
    {
        let tags: BTreeSet<&str> = if f.failure_modes.is_empty() {
            BTreeSet::from([UNTAGGED])
        } else {
            f.failure_modes.iter().map(String::as_str).collect()
        };
        let lost = (f.verdict_at - f.approved_at).as_secs().max(0);
        for t in tags {
            let a = ends.entry((f.action_kind.as_str(), t)).or_default();
            a.failures += 1;
            a.incidents.insert(&f.incident_id);
            a.services.insert(&f.service);
            a.seconds += lost;
        }
    }
    let mut dead_ends: Vec<DeadEnd> = ends
        .into_iter()
        .map(|((kind, mode), a)| DeadEnd {
            summary: format!(
                "{kind} on {mode}: {}, {}, {} lost",
                plural(a.incidents.len(), "incident", "incidents"),
                plural(a.services.len(), "service", "services"),
                human(a.seconds)
            ),
            action_kind: kind.into(),
            failure_mode: mode.into(),
            failures: a.failures,
            incidents: a.incidents.len(),
            services: a.services.len(),
            seconds_lost: a.seconds,
            time_lost: human(a.seconds),
            recurring: a.incidents.len() >= 2,
            incident_ids: a.incidents.iter().map(|s| s.to_string()).collect(),
            service_names: a.services.iter().map(|s| s.to_string()).collect(),
        })
        .collect();
    dead_ends.sort_by_key(|d| std::cmp::Reverse(d.seconds_lost));
    dead_ends
}

/// View 3: MTTR and time to detect per service, overall and by severity, with the weekly MTTR
/// from `since`.
fn response_times(
    in_window: &[&IncidentFacts],
    window: Window,
    since: Timestamp,
) -> Vec<ServiceTimes> {
    let mut by_service: BTreeMap<&str, Vec<&IncidentFacts>> = BTreeMap::new();
    for i in in_window {
        by_service.entry(i.service.as_str()).or_default().push(i);
    }
    by_service
        .into_iter()
        .map(|(service, list)| {
            let by_severity = Severity::ALL
                .iter()
                .filter_map(|&sev| {
                    let of: Vec<&IncidentFacts> =
                        list.iter().copied().filter(|i| i.severity == sev).collect();
                    (!of.is_empty()).then(|| SeverityTimes {
                        severity: sev,
                        times: times(of),
                    })
                })
                .collect();
            let weekly_mttr = weekly_mttr(&list, window, since);
            ServiceTimes {
                service: service.into(),
                overall: times(list.iter().copied()),
                by_severity,
                weekly_mttr,
            }
        })
        .collect()
}

/// View 4: the window's incidents past investigating that taught no lesson, oldest first.
fn thin_memory(in_window: &[&IncidentFacts]) -> Vec<ThinIncident> {
    let mut thin: Vec<&IncidentFacts> = in_window
        .iter()
        .copied()
        .filter(|i| i.state != IncidentState::Investigating && !i.has_lesson)
        .collect();
    thin.sort_by_key(|i| (i.opened_at, i.id.clone()));
    thin.into_iter()
        .map(|i| ThinIncident {
            id: i.id.clone(),
            title: i.title.clone(),
            service: i.service.clone(),
            severity: i.severity,
            state: i.state,
            href: format!("/incidents/{}", i.id),
        })
        .collect()
}

/// Computes the views from the incidents opened in the window (`incidents`), the failed actions
/// on them (`failed`) and the reviewers' grades of the learned ones (`grades`), for a window
/// ending at `now`.
pub fn compute(
    window: Window,
    now: Timestamp,
    incidents: &[IncidentFacts],
    failed: &[FailedAction],
    grades: &[GradeFacts],
) -> Insights {
    let since = window.since(now);
    let in_window: Vec<&IncidentFacts> =
        incidents.iter().filter(|i| i.opened_at >= since).collect();
    let known: BTreeSet<&str> = in_window.iter().map(|i| i.id.as_str()).collect();

    // 1. Failure mode × service.
    let failure_modes = failure_mode_counts(&in_window);

    // 2. Dead ends: action kind × failure mode.
    let dead_ends = dead_ends(failed, &known);

    // 3. MTTR and time to detect by service and severity, with the weekly MTTR.
    let response_times = response_times(&in_window, window, since);

    // 4. Thin memory.
    let thin_memory = thin_memory(&in_window);

    Insights {
        weekly_mttr: weekly_mttr(&in_window, window, since),
        recurring_modes: recurring_modes(&in_window),
        stale_signals: stale_signals(&in_window),
        days: window.days(),
        since,
        until: now,
        incidents: in_window.len(),
        failure_modes,
        dead_ends,
        response_times,
        thin_memory,
        accuracy: accuracy(
            window,
            now,
            in_window
                .iter()
                .filter(|i| i.state == IncidentState::Learned)
                .count(),
            grades,
        ),
    }
}

mod trend;
pub use trend::{MAX_DETECTION_LEAD, ModeTotal, StaleSignal, first_signal};
use trend::{recurring_modes, stale_signals, weekly_mttr};

mod accuracy_view;
pub use accuracy_view::{Accuracy, AccuracyWeek, GradeFacts, accuracy};

#[cfg(test)]
mod tests;
