//! Metric samples → per-series trends and derived "leak-like" / "load-driven" observations.
//!
//! Accepted inputs:
//! - Prometheus text exposition (`name{labels} value [timestamp_ms]`, `# TYPE` lines honoured);
//!   several scrapes of the same series form a time series (without timestamps the sample index is
//!   the x axis and rates are "per sample");
//! - Prometheus HTTP API query JSON (`resultType` `matrix` with `values`, or `vector` with `value`);
//! - CSV, long form `timestamp,series,value` or wide form `timestamp,a,b,c` (header row required
//!   for names; timestamps as epoch s/ms or ISO-8601).
//!
//! Counters (`# TYPE x counter`, or names ending `_total` / `_count` / `_sum`) are turned into a
//! per-second rate (Δvalue/Δt, a decrease is a counter reset) before their trend is classified.
//!
//! Trend rule (see [`classify`]), over points (x = seconds, y = value):
//! 1. fewer than 3 points, or (max - min) < 5% of max(|mean|, tiny): **flat**;
//! 2. **spike**: one point deviates from the mean of the others by more than 3× the others' range
//!    and by more than half their |mean|;
//! 3. **step**: the best two-segment split (each ≥ 2 points) leaves a squared error below half the
//!    least-squares line's and explains ≥ 80% of the variance;
//! 4. **climbing / falling**: least-squares slope with R² ≥ 0.5 and a fitted change over the
//!    window ≥ 10% of max(|mean|, range/2);
//! 5. otherwise **flat** (noisy).
//!
//! Classic pairs (names recognised with the data word lists of [`super::signatures::metric_roles`]):
//! a pressure series (pool wait, latency, connections in use...) rising (climbing or step up)
//! while every request-rate series is flat ⇒ leak-like, tag `connection_leak`; rising while a
//! request-rate series also rises ⇒ load-driven, tag `traffic_surge`.
//!
//! The input formats' parsers are in `parse`; the tests are in `evidence/tests/`.

use serde::{Deserialize, Serialize};

use super::{
    Extraction, LineRange, Observation, match_tags, signatures::metric_roles, thousands, time,
};

mod parse;

pub use parse::{parse, parse_csv, parse_prometheus_json, parse_prometheus_text};

/// Maximum series kept.
pub const MAX_SERIES: usize = 2_000;
/// Maximum points kept per series (later points are ignored).
pub const MAX_POINTS: usize = 20_000;

/// Shape of a series over the window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trend {
    /// No meaningful change.
    Flat,
    /// Rising steadily.
    Climbing,
    /// Falling steadily.
    Falling,
    /// One point far outside the rest.
    Spike,
    /// A level shift between two plateaus.
    Step,
}

impl Trend {
    /// snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Trend::Flat => "flat",
            Trend::Climbing => "climbing",
            Trend::Falling => "falling",
            Trend::Spike => "spike",
            Trend::Step => "step",
        }
    }
}

/// One time series as parsed.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Metric name (e.g. `http_requests_total`, or a CSV column name).
    pub name: String,
    /// Labels in input order.
    pub labels: Vec<(String, String)>,
    /// (x, value): x is epoch seconds when `has_time`, else the sample index.
    pub points: Vec<(f64, f64)>,
    /// Whether x is a real time.
    pub has_time: bool,
    /// Declared or named as a counter.
    pub counter: bool,
    /// 1-based input lines the samples came from (merged, capped).
    pub lines: Vec<LineRange>,
}

impl Series {
    /// `name{k="v",...}` display key.
    pub fn key(&self) -> String {
        if self.labels.is_empty() {
            return self.name.clone();
        }
        let l: Vec<String> = self
            .labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{v}\""))
            .collect();
        format!("{}{{{}}}", self.name, l.join(","))
    }
}

/// Result of analysing one series.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SeriesAnalysis {
    /// `name{labels}`.
    pub key: String,
    /// Classified trend (of the per-second rate for counters).
    pub trend: Trend,
    /// Minimum value analysed.
    pub min: f64,
    /// Maximum value analysed.
    pub max: f64,
    /// Last value analysed.
    pub last: f64,
    /// First value analysed.
    pub first: f64,
    /// Mean value analysed.
    pub mean: f64,
    /// Least-squares slope in units per second (per sample when the series has no time).
    pub slope: f64,
    /// Whether the values are a per-second rate derived from a counter.
    pub rate_of_counter: bool,
    /// Number of points analysed.
    pub points: usize,
    /// Whether x is time (seconds) rather than sample index.
    pub has_time: bool,
    /// Points whose value is `NaN` (no value: a division by zero, a quantile of an empty
    /// histogram), left out of the analysis and counted.
    pub nan: usize,
    /// Points at `+Inf`, left out and counted (in a quantile: above the largest bucket).
    pub pos_inf: usize,
    /// Points at `-Inf`, left out and counted.
    pub neg_inf: usize,
}

/// Classify a series of (x, y) points with the rule in the module docs. Returns (trend, slope per
/// x unit).
pub fn classify(points: &[(f64, f64)]) -> (Trend, f64) {
    let n = points.len();
    if n < 2 {
        return (Trend::Flat, 0.0);
    }
    let nf = n as f64;
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / nf;
    let mean = points.iter().map(|p| p.1).sum::<f64>() / nf;
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean)).sum();
    let slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    let (min, max) = points
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
            (a.min(p.1), b.max(p.1))
        });
    let range = max - min;
    if n < 3 || range <= 0.05 * mean.abs().max(1e-12) {
        return (Trend::Flat, slope);
    }
    let sst: f64 = points.iter().map(|p| (p.1 - mean).powi(2)).sum();
    // spike
    let (k, _) = points
        .iter()
        .enumerate()
        .map(|(i, p)| (i, (p.1 - mean).abs()))
        .fold((0, -1.0), |acc, x| if x.1 > acc.1 { x } else { acc });
    if n >= 4 {
        let others = points
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != k)
            .map(|(_, p)| p.1);
        let (omin, omax, osum) = others
            .fold((f64::INFINITY, f64::NEG_INFINITY, 0.0), |(a, b, s), v| {
                (a.min(v), b.max(v), s + v)
            });
        let omean = osum / (nf - 1.0);
        let dev = (points[k].1 - omean).abs();
        if dev > 3.0 * (omax - omin) && dev > 0.5 * omean.abs() {
            return (Trend::Spike, slope);
        }
    }
    let intercept = mean - slope * mean_x;
    let sse_lin: f64 = points
        .iter()
        .map(|p| (p.1 - (intercept + slope * p.0)).powi(2))
        .sum();
    // step: prefix sums for O(n) best split
    if n >= 4 {
        let mut ps = vec![0.0; n + 1];
        let mut ps2 = vec![0.0; n + 1];
        for (i, p) in points.iter().enumerate() {
            ps[i + 1] = ps[i] + p.1;
            ps2[i + 1] = ps2[i] + p.1 * p.1;
        }
        let seg = |a: usize, b: usize| {
            let m = (b - a) as f64;
            let s = ps[b] - ps[a];
            (ps2[b] - ps2[a]) - s * s / m
        };
        let best = (2..=n - 2)
            .map(|k| seg(0, k) + seg(k, n))
            .fold(f64::INFINITY, f64::min);
        if best < 0.5 * sse_lin && sst > 0.0 && 1.0 - best / sst >= 0.8 {
            return (Trend::Step, slope);
        }
    }
    let r2 = if sst > 0.0 { 1.0 - sse_lin / sst } else { 0.0 };
    let span = points[n - 1].0 - points[0].0;
    let change = slope * span;
    if r2 >= 0.5 && change.abs() >= 0.1 * mean.abs().max(range / 2.0) {
        return (
            if change > 0.0 {
                Trend::Climbing
            } else {
                Trend::Falling
            },
            slope,
        );
    }
    (Trend::Flat, slope)
}

/// Analyse one series (counters become per-second rates first).
pub fn analyze(s: &Series) -> SeriesAnalysis {
    let nan = s.points.iter().filter(|p| p.1.is_nan()).count();
    let pos_inf = s.points.iter().filter(|p| p.1 == f64::INFINITY).count();
    let neg_inf = s.points.iter().filter(|p| p.1 == f64::NEG_INFINITY).count();
    let mut pts: Vec<(f64, f64)> = s
        .points
        .iter()
        .copied()
        .filter(|p| p.1.is_finite())
        .collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut rate_of_counter = false;
    if s.counter && pts.len() >= 3 {
        let mut r = Vec::with_capacity(pts.len() - 1);
        for w in pts.windows(2) {
            let dt = w[1].0 - w[0].0;
            if dt <= 0.0 {
                continue;
            }
            let dv = if w[1].1 >= w[0].1 {
                w[1].1 - w[0].1
            } else {
                w[1].1
            };
            r.push((w[1].0, dv / dt));
        }
        if r.len() >= 2 {
            pts = r;
            rate_of_counter = true;
        }
    }
    let (trend, slope) = classify(&pts);
    let vals = pts.iter().map(|p| p.1);
    let (min, max) = vals
        .clone()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        });
    let mean = if pts.is_empty() {
        0.0
    } else {
        vals.sum::<f64>() / pts.len() as f64
    };
    SeriesAnalysis {
        key: s.key(),
        trend,
        min: if pts.is_empty() { 0.0 } else { min },
        max: if pts.is_empty() { 0.0 } else { max },
        last: pts.last().map_or(0.0, |p| p.1),
        first: pts.first().map_or(0.0, |p| p.1),
        mean,
        slope,
        rate_of_counter,
        points: pts.len(),
        has_time: s.has_time,
        nan,
        pos_inf,
        neg_inf,
    }
}

/// Whether a series is a quantile (a `histogram_quantile(…)` named by its query, a summary's
/// `quantile` label): a `+Inf` in it means the quantile lies above the largest bucket.
fn is_quantile(s: &Series) -> bool {
    s.name.to_ascii_lowercase().contains("quantile")
        || s.labels.iter().any(|(k, _)| k == "quantile")
}

/// What the non-finite points of a series were, in words (`None` when there were none):
/// "3 of 20 points NaN (no value)", "+Inf at 4 points: above the largest bucket".
fn non_finite(s: &Series, a: &SeriesAnalysis) -> Option<String> {
    let total = s.points.len();
    let mut parts = Vec::new();
    if a.pos_inf > 0 {
        parts.push(if is_quantile(s) {
            format!(
                "{} of {total} points +Inf: the quantile was above the largest bucket",
                thousands(a.pos_inf as u64)
            )
        } else {
            format!("{} of {total} points +Inf", thousands(a.pos_inf as u64))
        });
    }
    if a.neg_inf > 0 {
        parts.push(format!(
            "{} of {total} points -Inf",
            thousands(a.neg_inf as u64)
        ));
    }
    if a.nan > 0 {
        parts.push(format!(
            "{} of {total} points NaN (no value)",
            thousands(a.nan as u64)
        ));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

fn is_counter_name(name: &str) -> bool {
    name.ends_with("_total") || name.ends_with("_count") || name.ends_with("_sum")
}

/// Role of a series from its name (data word lists).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Request rate / throughput.
    RequestRate,
    /// Pool wait, latency, connections in use, queue...
    Pressure,
    /// Anything else.
    Other,
}

/// Role by name heuristics: `_bucket` series are Other; a request word wins when the name is a
/// counter or holds no pressure word; otherwise a pressure word gives Pressure.
pub fn role(name: &str) -> Role {
    let n = name.to_ascii_lowercase();
    if n.ends_with("_bucket") {
        return Role::Other;
    }
    let roles = metric_roles();
    let req = roles.request_rate.iter().any(|w| n.contains(w.as_str()));
    let pres = roles.pressure.iter().any(|w| n.contains(w.as_str()));
    if req && (is_counter_name(&n) || !pres) {
        Role::RequestRate
    } else if pres {
        Role::Pressure
    } else {
        Role::Other
    }
}

fn num(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1000.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}").trim_end_matches(".0").to_string()
    } else if a >= 0.01 {
        format!("{v:.3}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    } else {
        format!("{v:.2e}")
    }
}

/// The relative change from the first to the last value, as shown: `+250%`, or `from zero` when
/// the series starts at 0 (no percentage exists; "+0%" would say it did not move).
fn pct_change(a: &SeriesAnalysis) -> String {
    if a.first.abs() > 1e-12 {
        format!("{:+.0}%", (a.last - a.first) / a.first.abs() * 100.0)
    } else {
        "from zero".to_string()
    }
}

fn rising(a: &SeriesAnalysis) -> bool {
    a.trend == Trend::Climbing || (a.trend == Trend::Step && a.last > a.first)
}

/// Extract observations from metrics text (see module docs).
pub fn extract(text: &str) -> Extraction {
    let lines = text.lines().count() as u64;
    let (series, format) = parse(text);
    let mut obs: Vec<Observation> = Vec::new();
    let mut analyses = Vec::new();
    for s in &series {
        let a = analyze(s);
        let r = role(&s.name);
        obs.push(series_observation(s, &a, r));
        analyses.push((a, r, s));
    }
    obs.extend(derived_observations(&analyses));
    obs.sort_by_key(|o| std::cmp::Reverse(o.salience));
    if obs.len() > super::MAX_OBSERVATIONS {
        // Say what was left out: the page and the API show this finding like any other.
        let kept = super::MAX_OBSERVATIONS - 1;
        let left = obs.len() - kept;
        obs.truncate(kept);
        obs.push(Observation {
            statement: format!(
                "{} more metric findings not shown: only the {kept} most salient are kept",
                thousands(left as u64)
            ),
            line_ranges: Vec::new(),
            count: left as u64,
            first_seen: None,
            last_seen: None,
            failure_modes: Vec::new(),
            level: None,
            example: None,
            salience: 0,
        });
    }
    if obs.is_empty() {
        obs.push(Observation {
            statement: format!("No metric samples recognised in {} lines", thousands(lines)),
            line_ranges: LineRange::whole(lines),
            count: 0,
            first_seen: None,
            last_seen: None,
            failure_modes: Vec::new(),
            level: None,
            example: None,
            salience: 1,
        });
    }
    Extraction {
        observations: obs,
        lines,
        bytes: text.len() as u64,
        templates: series.len(),
        format: format.to_string(),
    }
}

/// One series as an observation: its trend in words, its range and span, failure modes named
/// by its name, and its salience (trend, role, tags).
fn series_observation(s: &Series, a: &SeriesAnalysis, r: Role) -> Observation {
    let unit = if a.has_time { "/s" } else { " per sample" };
    let what = if a.rate_of_counter { "rate" } else { "value" };
    let desc = match a.trend {
        Trend::Flat => format!(
            "{what} flat at ~{}{}",
            num(a.mean),
            if a.rate_of_counter { "/s" } else { "" }
        ),
        Trend::Climbing | Trend::Falling => format!(
            "{what} {} from {} to {} ({}, {}{unit})",
            a.trend.as_str(),
            num(a.first),
            num(a.last),
            pct_change(a),
            num(a.slope)
        ),
        Trend::Spike => format!(
            "{what} spiked to {} (otherwise ~{})",
            num(a.max),
            num(a.mean)
        ),
        Trend::Step => format!(
            "{what} stepped {} from ~{} to ~{}",
            if a.last > a.first { "up" } else { "down" },
            num(a.first),
            num(a.last)
        ),
    };
    let span = series_span(s);
    let odd = non_finite(s, a);
    let window = span
        .map(|(f, l)| format!(", {}", time::fmt_window(f, Some(l))))
        .unwrap_or_default();
    let statement = match &odd {
        // Not one number to describe: say what the points were, not "flat at ~0".
        Some(odd) if a.points == 0 => format!("{}: no finite value: {odd}{window}", a.key),
        Some(odd) => format!(
            "{}: {desc} over its finite points (min {}, max {}, last {}; {} points; {odd}{window})",
            a.key,
            num(a.min),
            num(a.max),
            num(a.last),
            thousands(a.points as u64),
        ),
        None => format!(
            "{}: {desc} (min {}, max {}, last {}; {} points{window})",
            a.key,
            num(a.min),
            num(a.max),
            num(a.last),
            thousands(a.points as u64),
        ),
    };
    let tags: Vec<String> = if a.trend != Trend::Flat {
        match_tags(&s.name.replace(['_', ':'], " "))
            .iter()
            .map(|t| t.to_string())
            .collect()
    } else {
        Vec::new()
    };
    let mut salience = match a.trend {
        Trend::Flat => 10,
        Trend::Spike => 45,
        Trend::Step => 40,
        Trend::Climbing | Trend::Falling => 35,
    };
    if r != Role::Other {
        salience += 10;
    }
    if a.pos_inf > 0 && is_quantile(s) {
        // Latency beyond every bucket: worth reading, whatever the finite points did.
        salience += 25;
    }
    salience += 10 * tags.len().min(2) as u32;
    Observation {
        statement,
        line_ranges: s.lines.clone(),
        count: a.points as u64,
        first_seen: span.and_then(|(f, _)| time::to_timestamp(f)),
        last_seen: span.and_then(|(_, l)| time::to_timestamp(l)),
        failure_modes: tags,
        level: None,
        example: None,
        salience,
    }
}

/// Observations from pairs of series (at most 5): pressure rising with the request rate
/// (load-driven) or while it stays flat (leak-like).
fn derived_observations(analyses: &[(SeriesAnalysis, Role, &Series)]) -> Vec<Observation> {
    // derived pairs
    let mut obs = Vec::new();
    let rates: Vec<&(SeriesAnalysis, Role, &Series)> = analyses
        .iter()
        .filter(|x| x.1 == Role::RequestRate)
        .collect();
    if !rates.is_empty() {
        let any_rising = rates.iter().find(|x| rising(&x.0));
        let all_flat = rates.iter().all(|x| x.0.trend == Trend::Flat);
        let mut derived = 0;
        for (a, _, s) in analyses
            .iter()
            .filter(|x| x.1 == Role::Pressure && rising(&x.0))
        {
            if derived >= 5 {
                break;
            }
            let mut ranges = s.lines.clone();
            let (statement, tag) = if let Some((ra, _, rs)) = any_rising {
                ranges.extend(rs.lines.iter().copied());
                (
                    format!(
                        "Load-driven: {} rises ({}) together with request rate {} ({})",
                        a.key,
                        pct_change(a),
                        ra.key,
                        pct_change(ra)
                    ),
                    "traffic_surge",
                )
            } else if all_flat {
                let (ra, _, rs) = rates[0];
                ranges.extend(rs.lines.iter().copied());
                (
                    format!(
                        "Leak-like: {} climbs ({}) while request rate {} stays flat (~{}{})",
                        a.key,
                        pct_change(a),
                        ra.key,
                        num(ra.mean),
                        if ra.has_time && ra.rate_of_counter {
                            "/s"
                        } else {
                            ""
                        }
                    ),
                    "connection_leak",
                )
            } else {
                continue;
            };
            // Two series of one block (a pulled document, a one-line answer) share its lines.
            ranges.sort_by_key(|r| (r.start, r.end));
            ranges.dedup();
            ranges.truncate(super::MAX_RANGES);
            let span = series_span(s);
            obs.push(Observation {
                statement,
                line_ranges: ranges,
                count: a.points as u64,
                first_seen: span.and_then(|(f, _)| time::to_timestamp(f)),
                last_seen: span.and_then(|(_, l)| time::to_timestamp(l)),
                failure_modes: vec![tag.to_string()],
                level: None,
                example: None,
                salience: 80,
            });
            derived += 1;
        }
    }
    obs
}

fn series_span(s: &Series) -> Option<(i64, i64)> {
    if !s.has_time || s.points.is_empty() {
        return None;
    }
    let (a, b) = s
        .points
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
            (a.min(p.0), b.max(p.0))
        });
    Some(((a * 1e9) as i64, (b * 1e9) as i64))
}
