//! The copilot's accuracy over a window: how often the top hypothesis matched the confirmed
//! root cause, as reviewers graded it at Learn, overall, when memory recalled a prior incident,
//! and per week.

use jiff::{SignedDuration, Timestamp};
use serde::Serialize;

use super::Window;

/// The reviewer's grade of one learned incident of the window.
#[derive(Debug, Clone)]
pub struct GradeFacts {
    /// Its incident.
    pub incident_id: String,
    /// When that incident was opened (buckets the sparkline).
    pub opened_at: Timestamp,
    /// The top hypothesis matched the confirmed root cause.
    pub matched: bool,
    /// Its investigation recalled memory of a prior incident.
    pub memory_recalled: bool,
}

/// Hit rates of the copilot's top hypothesis over the graded learned incidents of the window.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Accuracy {
    /// Learned incidents opened in the window.
    pub learned: usize,
    /// Of them, graded by a reviewer at Learn.
    pub graded: usize,
    /// Graded ones whose top hypothesis matched.
    pub hits: usize,
    /// `hits` / `graded` in whole percent (rounded half up); null when none is graded.
    pub percent: Option<u32>,
    /// Graded ones whose investigation recalled a prior incident.
    pub with_memory_graded: usize,
    /// Of those, hits.
    pub with_memory_hits: usize,
    /// `with_memory_hits` / `with_memory_graded` in whole percent; null when none.
    pub with_memory_percent: Option<u32>,
    /// One line, e.g. "top hypothesis right in 62 % of learned incidents (5 of 8 graded), 80 %
    /// when memory recalled a prior incident (4 of 5)".
    pub summary: String,
    /// Hit rate per 7-day bucket from the window's start (by opened instant), for the sparkline.
    pub weekly: Vec<AccuracyWeek>,
}

/// One week of the accuracy sparkline.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct AccuracyWeek {
    /// Bucket start (UTC).
    #[schema(value_type = String, format = DateTime)]
    pub week_start: Timestamp,
    /// Graded incidents opened in the bucket.
    pub graded: usize,
    /// Of them, hits.
    pub hits: usize,
    /// Hit rate in whole percent; null in a week with no graded incident.
    pub percent: Option<u32>,
}

fn percent(hits: usize, of: usize) -> Option<u32> {
    (of > 0).then(|| ((hits * 100 + of / 2) / of) as u32)
}

/// The accuracy view: `learned` learned incidents in the window, `grades` of those graded.
pub fn accuracy(window: Window, now: Timestamp, learned: usize, grades: &[GradeFacts]) -> Accuracy {
    let since = window.since(now);
    let grades: Vec<&GradeFacts> = grades.iter().filter(|g| g.opened_at >= since).collect();
    let hits = grades.iter().filter(|g| g.matched).count();
    let with: Vec<&&GradeFacts> = grades.iter().filter(|g| g.memory_recalled).collect();
    let with_hits = with.iter().filter(|g| g.matched).count();
    let (p, wp) = (percent(hits, grades.len()), percent(with_hits, with.len()));
    let summary = match p {
        None => "no learned incident graded yet: answer the question in the learnings preview \
                 at Learn"
            .to_string(),
        Some(p) => {
            let memory = match wp {
                Some(wp) => format!(
                    "{wp} % when memory recalled a prior incident ({with_hits} of {})",
                    with.len()
                ),
                None => "no graded incident recalled a prior one".to_string(),
            };
            format!(
                "top hypothesis right in {p} % of learned incidents ({hits} of {} graded), {memory}",
                grades.len()
            )
        }
    };
    let week = SignedDuration::from_hours(24 * 7);
    let weekly = (0..window.weeks())
        .map(|w| {
            let start = since + week * w as i32;
            let end = start + week;
            let of: Vec<&&GradeFacts> = grades
                .iter()
                .filter(|g| g.opened_at >= start && g.opened_at < end)
                .collect();
            let h = of.iter().filter(|g| g.matched).count();
            AccuracyWeek {
                week_start: start,
                graded: of.len(),
                hits: h,
                percent: percent(h, of.len()),
            }
        })
        .collect();
    Accuracy {
        learned,
        graded: grades.len(),
        hits,
        percent: p,
        with_memory_graded: with.len(),
        with_memory_hits: with_hits,
        with_memory_percent: wp,
        summary,
        weekly,
    }
}
