//! The insights page (`GET /insights`) and its JSON (`GET /api/v1/insights`): one service call
//! ([`crate::services::insights::insights`]) rendered as JSON or as a page that answers its
//! questions with server-drawn SVG charts ([`chart`]): is MTTR getting better (weekly MTTR over
//! every service), which failure modes recur, which actions are dead ends (by time lost), MTTR
//! and time to detect by service; a sparkline per service and one of the copilot's weekly hit
//! rate; the detail by severity folded away. No script, no chart library. Any signed-in user
//! may read them.

use askama::Template;
use askama_web::WebTemplate;
use axum::Json;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::AppState;
use super::auth::CurrentUser;
use super::errors::{ApiError, PageError};
use super::examples;
use super::layout::Layout;
use crate::domain::insights::{Accuracy, Insights, ServiceTimes, Window, human};
use crate::error::AppError;

mod chart;
use chart::{Chart, Item, bars};

/// `?days=` of both routes.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct InsightsQuery {
    /// Window in days: `30` (default) or `90`; anything else is a 422 naming `days`.
    #[serde(default)]
    #[param(example = "30")]
    pub days: Option<String>,
}

async fn load(s: &AppState, q: &InsightsQuery) -> Result<Insights, AppError> {
    let window = Window::parse(q.days.as_deref())?;
    crate::services::insights::insights(&s.pool, window, crate::store::now()).await
}

/// `GET /api/v1/insights`: the four views and the copilot's accuracy over the window.
#[utoipa::path(
    get,
    path = "/api/v1/insights",
    operation_id = "insights",
    summary = "Recurring failure modes, dead ends, MTTR and time to detect, thin memory",
    tag = "insights",
    params(InsightsQuery),
    responses(
        (status = 200, description = "The insights over the last 30 or 90 days (incidents opened in the window)",
         body = Insights, example = json!(examples::insights())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn api_insights(
    State(s): State<AppState>,
    _u: CurrentUser,
    Query(q): Query<InsightsQuery>,
) -> Result<Json<Insights>, ApiError> {
    Ok(Json(load(&s, &q).await?))
}

/// Width and height of a sparkline, px.
const SPARK_W: f64 = 120.0;
const SPARK_H: f64 = 28.0;

/// One service's sparkline: the polyline's points, a dot per week with a value, and the text a
/// screen reader reads.
struct Sparkline {
    points: String,
    dots: Vec<(String, String)>,
    /// The whole series in words (the SVG's accessible name and tooltip).
    label: String,
    /// A short visible caption beside the line (what it is and its latest value), so a phone
    /// card, where nothing hovers, still says what the line shows.
    caption: String,
}

/// The caption of a weekly line: `what`, and the latest week's value in words when one exists.
fn caption<T: Copy>(
    what: &str,
    weeks: &[(jiff::Timestamp, Option<T>)],
    word: impl Fn(T) -> String,
) -> String {
    match weeks.iter().rev().find_map(|(_, v)| *v) {
        Some(v) => format!("{what}, latest {}", word(v)),
        None => format!("{what}: none yet"),
    }
}

/// Draws weekly values (`None`: a week without one, its word given) scaled to `max` (at least
/// the largest value); returns the points, the dots and the words per week.
fn draw(
    weeks: &[(jiff::Timestamp, Option<i64>)],
    max: i64,
    word: impl Fn(i64) -> String,
    none: &str,
) -> (String, Vec<(String, String)>, Vec<String>) {
    let n = weeks.len().max(1);
    let max = weeks
        .iter()
        .filter_map(|w| w.1)
        .max()
        .unwrap_or(0)
        .max(max)
        .max(1) as f64;
    let step = if n > 1 {
        (SPARK_W - 4.0) / (n - 1) as f64
    } else {
        0.0
    };
    let mut dots = Vec::new();
    let mut words = Vec::new();
    for (i, (start, value)) in weeks.iter().enumerate() {
        let week = start.strftime("%Y-%m-%d").to_string();
        match value {
            Some(v) => {
                let x = 2.0 + step * i as f64;
                let y = SPARK_H - 2.0 - (*v as f64 / max) * (SPARK_H - 4.0);
                dots.push((format!("{x:.1}"), format!("{y:.1}")));
                words.push(format!("week of {week}: {}", word(*v)));
            }
            None => words.push(format!("week of {week}: {none}")),
        }
    }
    let points = dots
        .iter()
        .map(|(x, y)| format!("{x},{y}"))
        .collect::<Vec<_>>()
        .join(" ");
    (points, dots, words)
}

fn sparkline(t: &ServiceTimes, days: i64) -> Sparkline {
    let weeks: Vec<_> = t
        .weekly_mttr
        .iter()
        .map(|w| (w.week_start, w.mttr_seconds))
        .collect();
    let (points, dots, words) = draw(&weeks, 0, human, "no resolved incident");
    Sparkline {
        points,
        dots,
        caption: caption("MTTR per week", &weeks, human),
        label: format!(
            "MTTR per week for {}, last {days} days: {}",
            t.service,
            words.join("; ")
        ),
    }
}

/// The accuracy sparkline: the weekly hit rate on a 0–100 % scale.
fn accuracy_sparkline(a: &Accuracy, days: i64) -> Sparkline {
    let weeks: Vec<_> = a
        .weekly
        .iter()
        .map(|w| (w.week_start, w.percent.map(i64::from)))
        .collect();
    let (points, dots, words) = draw(&weeks, 100, |p| format!("{p} %"), "no graded incident");
    Sparkline {
        points,
        dots,
        caption: caption("Hit rate per week", &weeks, |p| format!("{p} %")),
        label: format!(
            "Top hypothesis hit rate per week, last {days} days: {}",
            words.join("; ")
        ),
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "insights.html")]
struct InsightsPage {
    layout: Layout,
    i: Insights,
    sparks: Vec<Sparkline>,
    accuracy_spark: Sparkline,
    trend_chart: Chart,
    modes_chart: Chart,
    dead_chart: Chart,
    services_chart: Chart,
}

/// Rows a chart shows at most (the rest stay in the lists below it).
const CHART_ROWS: usize = 8;

/// The four charts of the page.
///
/// Long on purpose: the four charts' data, one block each in the order the page shows them.
fn charts(i: &Insights) -> [Chart; 4] {
    let days = i.days;
    let trend: Vec<Item> = i
        .weekly_mttr
        .iter()
        .map(|w| Item {
            label: format!(
                "week of {} ({} resolved)",
                w.week_start.strftime("%b %d"),
                w.resolved
            ),
            value: w.mttr_seconds.map_or_else(|| "none resolved".into(), human),
            magnitude: w.mttr_seconds.map(|s| s as f64),
            marked: false,
        })
        .collect();
    let trend_words: Vec<String> = trend
        .iter()
        .map(|t| format!("{}: {}", t.label, t.value))
        .collect();
    let modes: Vec<Item> = i
        .recurring_modes
        .iter()
        .map(|m| Item {
            label: format!("{} · {}", m.failure_mode, m.service_names.join(", ")),
            value: format!(
                "{} incident{}",
                m.incidents,
                if m.incidents == 1 { "" } else { "s" }
            ),
            magnitude: Some(m.incidents as f64),
            marked: m.incidents >= 2,
        })
        .collect();
    // By time lost; when no dead end lost a minute (verdicts given at once, as in a replayed
    // history), by the incidents it failed in.
    let timed = i.dead_ends.iter().any(|d| d.seconds_lost >= 60);
    let mut ends: Vec<&crate::domain::insights::DeadEnd> = i.dead_ends.iter().collect();
    if !timed {
        ends.sort_by_key(|d| std::cmp::Reverse(d.incidents));
    }
    let dead: Vec<Item> = ends
        .into_iter()
        .map(|d| Item {
            label: format!("{} on {}", d.action_kind, d.failure_mode),
            value: if timed {
                format!("{} lost", d.time_lost)
            } else {
                format!(
                    "{} incident{}",
                    d.incidents,
                    if d.incidents == 1 { "" } else { "s" }
                )
            },
            magnitude: Some(if timed {
                d.seconds_lost as f64
            } else {
                d.incidents as f64
            }),
            marked: d.recurring,
        })
        .collect();
    let services: Vec<Item> = i
        .response_times
        .iter()
        .map(|t| Item {
            label: format!("{} · time to detect {}", t.service, t.overall.ttd),
            value: t.overall.mttr.clone(),
            magnitude: t.overall.mttr_seconds.map(|s| s as f64),
            marked: false,
        })
        .collect();
    let words = |items: &[Item]| {
        items
            .iter()
            .take(CHART_ROWS)
            .map(|t| format!("{}: {}", t.label, t.value))
            .collect::<Vec<_>>()
            .join("; ")
    };
    let modes_title = format!("Failure modes, last {days} days: {}", words(&modes));
    let dead_title = format!(
        "Dead ends by {}, last {days} days: {}",
        if timed { "time lost" } else { "incidents" },
        words(&dead)
    );
    let services_title = format!("MTTR by service, last {days} days: {}", words(&services));
    [
        bars(
            "chart-mttr-trend",
            format!(
                "MTTR per week over every service, last {days} days: {}",
                trend_words.join("; ")
            ),
            trend,
            14,
        ),
        bars("chart-failure-modes", modes_title, modes, CHART_ROWS),
        bars("chart-dead-ends", dead_title, dead, CHART_ROWS),
        bars("chart-services", services_title, services, CHART_ROWS),
    ]
}

/// `GET /insights`: the same figures as a page.
pub(super) async fn page_insights(
    State(s): State<AppState>,
    user: CurrentUser,
    Query(q): Query<InsightsQuery>,
) -> Result<Response, PageError> {
    let i = load(&s, &q).await?;
    let sparks = i
        .response_times
        .iter()
        .map(|t| sparkline(t, i.days))
        .collect();
    let accuracy_spark = accuracy_sparkline(&i.accuracy, i.days);
    let [trend_chart, modes_chart, dead_chart, services_chart] = charts(&i);
    Ok(InsightsPage {
        trend_chart,
        modes_chart,
        dead_chart,
        services_chart,
        layout: Layout::new(Some(&user.0), "Insights").with_current("insights"),
        i,
        sparks,
        accuracy_spark,
    }
    .into_response())
}
