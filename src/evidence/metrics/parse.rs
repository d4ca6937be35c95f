//! The three input formats: Prometheus text exposition, Prometheus HTTP API JSON and CSV (long
//! or wide), each read into [`Series`].

use std::collections::HashMap;

use super::super::{LineRange, csv, time};
use super::{MAX_POINTS, MAX_SERIES, Series, is_counter_name};

#[derive(Default)]
struct Builder {
    series: Vec<Series>,
    index: HashMap<String, usize>,
    counters: Vec<String>,
}

impl Builder {
    fn push(
        &mut self,
        name: &str,
        labels: Vec<(String, String)>,
        x: Option<f64>,
        v: f64,
        line: u64,
    ) {
        let key = {
            let mut k = name.to_string();
            for (a, b) in &labels {
                k.push('\u{1}');
                k.push_str(a);
                k.push('=');
                k.push_str(b);
            }
            k
        };
        let idx = match self.index.get(&key) {
            Some(&i) => i,
            None => {
                if self.series.len() >= MAX_SERIES {
                    return;
                }
                self.series.push(Series {
                    name: name.to_string(),
                    labels,
                    points: Vec::new(),
                    has_time: x.is_some(),
                    counter: is_counter_name(name) || self.counters.iter().any(|c| c == name),
                    lines: Vec::new(),
                });
                self.index.insert(key, self.series.len() - 1);
                self.series.len() - 1
            }
        };
        let s = &mut self.series[idx];
        if s.points.len() >= MAX_POINTS {
            return;
        }
        let xi = match x {
            Some(t) if s.has_time => t,
            _ => {
                s.has_time = false;
                s.points.len() as f64
            }
        };
        s.points.push((xi, v));
        if line > 0 {
            let full = s.lines.len() >= super::super::MAX_RANGES;
            match s.lines.last_mut() {
                Some(r) if r.end + 1 >= line => r.end = r.end.max(line),
                _ if full => {}
                _ => s.lines.push(LineRange {
                    start: line,
                    end: line,
                }),
            }
        }
    }
}

fn parse_value(s: &str) -> Option<f64> {
    match s.trim() {
        "NaN" => Some(f64::NAN),
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        t => t.parse().ok(),
    }
}

/// Parse Prometheus text exposition; `None` when no sample line parses.
pub fn parse_prometheus_text(text: &str) -> Option<Vec<Series>> {
    let mut b = Builder::default();
    let mut samples = 0;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix('#') {
            let mut it = rest.split_whitespace();
            if it.next() == Some("TYPE")
                && let (Some(name), Some("counter")) = (it.next(), it.next())
            {
                b.counters.push(name.to_string());
            }
            continue;
        }
        let (name, labels, rest) = if let Some(open) = line.find('{') {
            let name = &line[..open];
            let close = find_label_end(line, open)?;
            (
                name,
                parse_labels(&line[open + 1..close]),
                &line[close + 1..],
            )
        } else {
            let sp = line.find(char::is_whitespace)?;
            (&line[..sp], Vec::new(), &line[sp..])
        };
        if name.is_empty()
            || !name
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b':')
        {
            return None;
        }
        let mut it = rest.split_whitespace();
        let v = parse_value(it.next()?)?;
        let ts = it
            .next()
            .and_then(|t| t.parse::<f64>().ok())
            .map(|ms| ms / 1000.0);
        b.push(name, labels, ts, v, i as u64 + 1);
        samples += 1;
    }
    (samples > 0).then_some(b.series)
}

fn find_label_end(line: &str, open: usize) -> Option<usize> {
    let bytes = line.as_bytes();
    let mut in_q = false;
    let mut esc = false;
    for (i, &c) in bytes.iter().enumerate().skip(open + 1) {
        if esc {
            esc = false;
        } else if c == b'\\' {
            esc = true;
        } else if c == b'"' {
            in_q = !in_q;
        } else if c == b'}' && !in_q {
            return Some(i);
        }
    }
    None
}

fn parse_labels(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = s.trim();
    while !rest.is_empty() {
        let Some(eq) = rest.find('=') else { break };
        let key = rest[..eq].trim().trim_start_matches(',').trim().to_string();
        let after = rest[eq + 1..].trim_start();
        let Some(after) = after.strip_prefix('"') else {
            break;
        };
        let mut val = String::new();
        let mut end = after.len();
        let mut chars = after.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    if let Some((_, n)) = chars.next() {
                        val.push(if n == 'n' { '\n' } else { n });
                    }
                }
                '"' => {
                    end = i + 1;
                    break;
                }
                _ => val.push(c),
            }
        }
        out.push((key, val));
        rest = after[end..]
            .trim_start()
            .trim_start_matches(',')
            .trim_start();
    }
    out
}

/// Parse Prometheus HTTP API JSON (`matrix` or `vector`); `None` if not that shape.
pub fn parse_prometheus_json(text: &str) -> Option<Vec<Series>> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let data = v.get("data").unwrap_or(&v);
    let result = data.get("result")?.as_array()?;
    let lines = text.lines().count() as u64;
    let mut b = Builder::default();
    for r in result {
        let metric = r.get("metric").and_then(|m| m.as_object());
        let mut name = String::from("series");
        let mut labels = Vec::new();
        if let Some(m) = metric {
            for (k, val) in m {
                let val = val.as_str().unwrap_or_default().to_string();
                if k == "__name__" {
                    name = val;
                } else {
                    labels.push((k.clone(), val));
                }
            }
        }
        let pairs: Vec<&serde_json::Value> = match (r.get("values"), r.get("value")) {
            (Some(serde_json::Value::Array(vs)), _) => vs.iter().collect(),
            (_, Some(one)) => vec![one],
            _ => continue,
        };
        for p in pairs {
            let Some(arr) = p.as_array() else { continue };
            if arr.len() != 2 {
                continue;
            }
            let t = arr[0]
                .as_f64()
                .or_else(|| arr[0].as_str().and_then(|s| s.parse().ok()));
            let val = match &arr[1] {
                serde_json::Value::String(s) => parse_value(s),
                o => o.as_f64(),
            };
            if let Some(val) = val {
                b.push(&name, labels.clone(), t, val, 0);
            }
        }
    }
    for s in &mut b.series {
        s.lines = vec![LineRange {
            start: 1,
            end: lines.max(1),
        }];
    }
    Some(b.series)
}

/// Parse CSV (long `timestamp,series,value` or wide `timestamp,a,b,...`); returns (series, shape
/// name) or `None`.
pub fn parse_csv(text: &str) -> Option<(Vec<Series>, &'static str)> {
    let recs = csv::records(text);
    let mut it = recs
        .iter()
        .filter(|(_, f)| !(f.len() == 1 && f[0].trim().is_empty()));
    let (_, header) = it.next()?;
    if header.len() < 2 {
        return None;
    }
    let header_is_names = header[1..].iter().any(|h| parse_value(h).is_none());
    let rows: Vec<&(u64, Vec<String>)> = if header_is_names {
        it.collect()
    } else {
        recs.iter().collect()
    };
    if rows.is_empty() {
        return None;
    }
    let names: Vec<String> = if header_is_names {
        header.iter().map(|h| h.trim().to_string()).collect()
    } else {
        (0..header.len())
            .map(|i| {
                if i == 0 {
                    "time".into()
                } else {
                    format!("col{i}")
                }
            })
            .collect()
    };
    let lower: Vec<String> = names.iter().map(|n| n.to_ascii_lowercase()).collect();
    let long = names.len() == 3
        && matches!(lower[1].as_str(), "series" | "metric" | "name" | "key")
        && matches!(lower[2].as_str(), "value" | "val" | "v");
    let mut b = Builder::default();
    for (line, f) in rows {
        if f.is_empty() {
            continue;
        }
        let t = time::parse_any(&f[0]).map(|ns| ns as f64 / 1e9);
        if long {
            if f.len() < 3 {
                continue;
            }
            if let Some(v) = parse_value(&f[2]) {
                b.push(f[1].trim(), Vec::new(), t, v, *line);
            }
        } else {
            for (i, cell) in f.iter().enumerate().skip(1) {
                if let (Some(v), Some(n)) = (parse_value(cell), names.get(i)) {
                    b.push(n, Vec::new(), t, v, *line);
                }
            }
        }
    }
    if b.series.is_empty() {
        return None;
    }
    Some((b.series, if long { "csv-long" } else { "csv-wide" }))
}

/// Parse any supported metrics input: (series, format name).
pub fn parse(text: &str) -> (Vec<Series>, &'static str) {
    let t = text.trim_start();
    if t.starts_with('{') {
        if let Some(s) = parse_prometheus_json(text) {
            return (s, "prometheus-json");
        }
    } else if let Some(s) = parse_prometheus_text(text) {
        return (s, "prometheus-text");
    }
    if let Some((s, f)) = parse_csv(text) {
        return (s, f);
    }
    (Vec::new(), "unknown")
}
