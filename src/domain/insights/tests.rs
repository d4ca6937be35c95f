//! Unit tests of the insights' aggregation, on incidents written out by hand.

use super::*;

fn at(s: &str) -> Timestamp {
    s.parse().expect("instant")
}

fn incident(id: &str, service: &str, opened: &str, resolved: Option<&str>) -> IncidentFacts {
    IncidentFacts {
        id: id.into(),
        title: format!("{service} is slow"),
        service: service.into(),
        severity: Severity::Sev2,
        state: if resolved.is_some() {
            IncidentState::Resolved
        } else {
            IncidentState::Investigating
        },
        opened_at: at(opened),
        resolved_at: resolved.map(at),
        failure_modes: vec!["connection_pool_exhausted".into()],
        first_signal_at: None,
        stale_signal_at: None,
        has_lesson: false,
    }
}

#[test]
fn the_window_is_thirty_or_ninety_days_and_anything_else_names_the_field() {
    assert_eq!(Window::parse(None).unwrap(), Window::Days30);
    assert_eq!(Window::parse(Some("90")).unwrap().days(), 90);
    assert_eq!(Window::parse(Some("90")).unwrap().weeks(), 13);
    assert_eq!(Window::Days30.weeks(), 5);
    let e = Window::parse(Some("7")).unwrap_err();
    assert_eq!(e.field, "days");
    assert!(e.message.contains("days=30 or days=90"), "{}", e.message);
}

#[test]
fn durations_read_in_minutes_hours_and_days() {
    assert_eq!(human(20), "under 1 min");
    assert_eq!(human(41 * 60), "41 min");
    assert_eq!(human(2 * 3600 + 5 * 60 + 10), "2 h 5 min");
    assert_eq!(human(3 * 86_400 + 4 * 3600), "3 d 4 h");
}

#[test]
fn two_incidents_failing_the_same_way_make_a_recurring_dead_end_with_summed_minutes() {
    let now = at("2026-11-30T12:00:00Z");
    let a = incident(
        "INC-2026-0001",
        "payments",
        "2026-11-20T10:00:00Z",
        Some("2026-11-20T11:00:00Z"),
    );
    let b = incident("INC-2026-0002", "ledger", "2026-11-21T10:00:00Z", None);
    let failed = |id: &str, service: &str, minutes: i64| FailedAction {
        incident_id: id.into(),
        service: service.into(),
        action_kind: "raise_pool_limit".into(),
        approved_at: at("2026-11-20T10:10:00Z"),
        verdict_at: at("2026-11-20T10:10:00Z") + SignedDuration::from_mins(minutes),
        failure_modes: vec!["connection_pool_exhausted".into()],
    };
    let out = compute(
        Window::Days30,
        now,
        &[a, b],
        &[
            failed("INC-2026-0001", "payments", 12),
            failed("INC-2026-0002", "ledger", 29),
        ],
        &[],
    );
    assert_eq!(out.dead_ends.len(), 1);
    let d = &out.dead_ends[0];
    assert_eq!((d.incidents, d.services, d.seconds_lost), (2, 2, 41 * 60));
    assert!(d.recurring);
    assert_eq!(
        d.summary,
        "raise_pool_limit on connection_pool_exhausted: 2 incidents, 2 services, 41 min lost"
    );
    // MTTR only over the resolved one; no alert, so time to detect is not recorded.
    let payments = &out
        .response_times
        .iter()
        .find(|s| s.service == "payments")
        .unwrap();
    assert_eq!(payments.overall.mttr_seconds, Some(3600));
    assert_eq!(payments.overall.ttd, "not recorded");
    assert_eq!(out.thin_memory.len(), 1);
    assert_eq!(out.thin_memory[0].id, "INC-2026-0001");
}

#[test]
fn incidents_opened_before_the_window_are_left_out() {
    let now = at("2026-11-30T12:00:00Z");
    let old = incident(
        "INC-2026-0001",
        "payments",
        "2026-09-10T10:00:00Z",
        Some("2026-09-10T11:00:00Z"),
    );
    let out = compute(Window::Days30, now, std::slice::from_ref(&old), &[], &[]);
    assert_eq!(out.incidents, 0);
    assert!(out.response_times.is_empty() && out.thin_memory.is_empty());
    assert_eq!(compute(Window::Days90, now, &[old], &[], &[]).incidents, 1);
}

#[test]
fn time_to_detect_runs_from_the_first_signal_and_not_from_a_later_one() {
    let mut i = incident("INC-2026-0003", "search", "2026-11-25T10:00:00Z", None);
    i.first_signal_at = Some(at("2026-11-25T09:52:00Z"));
    assert_eq!(i.detect_seconds(), Some(8 * 60));
    i.first_signal_at = Some(at("2026-11-25T10:05:00Z"));
    assert_eq!(i.detect_seconds(), None);
}

#[test]
fn hit_rates_count_graded_incidents_overall_and_with_recalled_memory_per_week() {
    let now = at("2026-11-30T12:00:00Z");
    let grade = |id: &str, opened: &str, matched: bool, memory: bool| GradeFacts {
        incident_id: id.into(),
        opened_at: at(opened),
        matched,
        memory_recalled: memory,
    };
    let grades = [
        grade("INC-2026-0011", "2026-11-02T09:00:00Z", true, true),
        grade("INC-2026-0012", "2026-11-03T09:00:00Z", false, false),
        grade("INC-2026-0013", "2026-11-25T09:00:00Z", true, false),
        // Opened before the window: not counted.
        grade("INC-2026-0001", "2026-09-01T09:00:00Z", false, true),
    ];
    let a = accuracy(Window::Days30, now, 4, &grades);
    assert_eq!((a.learned, a.graded, a.hits), (4, 3, 2));
    assert_eq!((a.percent, a.with_memory_percent), (Some(67), Some(100)));
    assert_eq!(
        a.summary,
        "top hypothesis right in 67 % of learned incidents (2 of 3 graded), 100 % when memory \
         recalled a prior incident (1 of 1)"
    );
    let weeks: Vec<(usize, Option<u32>)> = a.weekly.iter().map(|w| (w.graded, w.percent)).collect();
    assert_eq!(
        weeks,
        vec![
            (2, Some(50)),
            (0, None),
            (0, None),
            (1, Some(100)),
            (0, None)
        ]
    );
    let none = accuracy(Window::Days30, now, 0, &[]);
    assert_eq!(none.percent, None);
    assert!(none.summary.starts_with("no learned incident graded yet"));
}

#[test]
fn time_to_detect_counts_only_signals_inside_the_incidents_own_window() {
    let opened = at("2026-11-25T10:00:00Z");
    let resolved = at("2026-11-25T12:00:00Z");
    let old = at("2008-11-09T20:55:00Z");
    let fresh = at("2026-11-25T09:52:00Z");
    // A paste of 2008 logs beside a fresh line: the fresh one counts, the old one is stale.
    assert_eq!(
        first_signal(opened, resolved, &[old, fresh]),
        (Some(fresh), Some(old))
    );
    assert_eq!(first_signal(opened, resolved, &[old]), (None, Some(old)));
    // The bound: seven days before the opening counts, a second more does not.
    let edge = opened - MAX_DETECTION_LEAD;
    assert_eq!(first_signal(opened, resolved, &[edge]), (Some(edge), None));
    let past = edge - SignedDuration::from_secs(1);
    assert_eq!(first_signal(opened, resolved, &[past]), (None, Some(past)));
    // Lines dated after the incident ended are outside it too; lines while it ran are inside.
    let later = at("2027-01-01T00:00:00Z");
    assert_eq!(
        first_signal(opened, resolved, &[later]),
        (None, Some(later))
    );
    let during = at("2026-11-25T11:00:00Z");
    assert_eq!(
        first_signal(opened, resolved, &[during]),
        (Some(during), None)
    );

    // In the views: the stale paste is listed, counted as stale, and not in time to detect.
    let now = at("2026-11-30T12:00:00Z");
    let mut a = incident(
        "INC-2026-0001",
        "payments",
        "2026-11-25T10:00:00Z",
        Some("2026-11-25T12:00:00Z"),
    );
    a.stale_signal_at = Some(old);
    let mut b = incident(
        "INC-2026-0002",
        "payments",
        "2026-11-26T10:00:00Z",
        Some("2026-11-26T10:30:00Z"),
    );
    b.first_signal_at = Some(at("2026-11-26T09:50:00Z"));
    let out = compute(Window::Days30, now, &[a.clone(), b], &[], &[]);
    let t = &out.response_times[0].overall;
    assert_eq!((t.detected, t.stale), (1, 1));
    assert_eq!(t.ttd, "10 min", "only the fresh signal is counted");
    assert_eq!(out.stale_signals.len(), 1);
    assert_eq!(out.stale_signals[0].id, "INC-2026-0001");
    assert!(
        out.stale_signals[0]
            .distance
            .ends_with(" d 13 h before it was opened"),
        "{}",
        out.stale_signals[0].distance
    );
    // Even a first signal set beyond the bound is not measured.
    a.first_signal_at = Some(old);
    assert_eq!(a.detect_seconds(), None);
}

#[test]
fn the_charts_get_the_weekly_mttr_over_every_service_and_the_modes_over_every_service() {
    let now = at("2026-11-30T12:00:00Z");
    let a = incident(
        "INC-2026-0001",
        "payments",
        "2026-11-25T10:00:00Z",
        Some("2026-11-25T11:00:00Z"),
    );
    let b = incident(
        "INC-2026-0002",
        "ledger",
        "2026-11-26T10:00:00Z",
        Some("2026-11-26T13:00:00Z"),
    );
    let out = compute(Window::Days30, now, &[a, b], &[], &[]);
    assert_eq!(out.weekly_mttr.len(), 5);
    // Both opened in the week from 2026-11-21 12:00: one hour and three hours, two on average.
    let week = &out.weekly_mttr[3];
    assert_eq!(week.week_start, at("2026-11-21T12:00:00Z"));
    assert_eq!((week.resolved, week.mttr_seconds), (2, Some(2 * 3600)));
    assert_eq!(out.recurring_modes.len(), 1);
    assert_eq!(out.recurring_modes[0].incidents, 2);
    assert_eq!(out.recurring_modes[0].service_names, ["ledger", "payments"]);
}
