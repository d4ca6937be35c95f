//! The stateless line shapes: ISO-8601/Log4j, epoch, HDFS, Apache, JSON, logfmt and plain,
//! and the header pieces the stateful shapes of [`super::LineParser`] share.

use std::borrow::Cow;

use super::{Level, LineParser, LogFormat, ParsedLine, time};

pub(super) fn num2(b: &[u8]) -> Option<u32> {
    if b.len() == 2 && b[0].is_ascii_digit() && b[1].is_ascii_digit() {
        Some((b[0] - b'0') as u32 * 10 + (b[1] - b'0') as u32)
    } else {
        None
    }
}

/// Skip one balanced `[...]` group (nested brackets allowed) and following spaces.
pub(super) fn skip_brackets(s: &str) -> &str {
    let mut depth = 0usize;
    for (i, c) in s.bytes().enumerate() {
        match c {
            b'[' => depth += 1,
            b']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return s[i + 1..].trim_start();
                }
            }
            _ => {}
        }
    }
    s
}

/// Parse the header that follows a timestamp: separators (`-`, `|`), an optional level word,
/// bracketed thread/context groups, a numeric pid, and a Log4j logger name followed by ` - ` or a
/// dotted component ending in `:` (HDFS). Returns (level, content, looked_like_log4j).
pub(super) fn after_timestamp(rest: &str) -> (Option<Level>, &str, bool) {
    let orig = rest.trim_start();
    let mut s = orig;
    let mut level = None;
    let mut log4j = false;
    for _ in 0..6 {
        if let Some(r) = s.strip_prefix("- ").or_else(|| s.strip_prefix("| ")) {
            s = r.trim_start();
            log4j = true;
            continue;
        }
        if s.starts_with('[') {
            let close = s.find(']').unwrap_or(0);
            let inner = &s[1..close.max(1)];
            if level.is_none()
                && let Some(l) = Level::parse(inner.rsplit(':').next().unwrap_or(inner))
            {
                level = Some(l);
                s = s[close + 1..].trim_start();
                continue;
            }
            s = skip_brackets(s);
            log4j = true;
            continue;
        }
        let (word, r) = s.split_once(' ').unwrap_or((s, ""));
        if level.is_none()
            && let Some(l) = Level::parse(word)
        {
            level = Some(l);
            s = r.trim_start();
            continue;
        }
        if level.is_none() && !word.is_empty() && word.bytes().all(|c| c.is_ascii_digit()) {
            s = r.trim_start();
            continue;
        }
        break;
    }
    if level.is_none() {
        // `- ` prefixes dropped byte-wise (a pattern searcher per line costs more than the line)
        let mut rest = orig;
        while let Some(r) = rest.strip_prefix("- ") {
            rest = r;
        }
        return (None, rest, false);
    }
    // logger name then " - "
    if let Some((word, r)) = s.split_once(' ')
        && !word.is_empty()
    {
        if let Some(r2) = r.strip_prefix("- ") {
            if !word.contains(' ') && word.len() < 120 {
                return (level, r2, true);
            }
        } else if word.ends_with(':') && (word.contains('.') || word.contains('$')) {
            return (level, r, log4j);
        }
    }
    (level, s, log4j)
}

pub(super) fn iso(line: &str) -> Option<ParsedLine<'_>> {
    let (ns, used) = time::parse_iso(line.as_bytes())?;
    let (level, content, log4j) = after_timestamp(&line[used..]);
    Some(ParsedLine {
        ts: Some(ns),
        level,
        content: Cow::Borrowed(content),
        format: if log4j {
            LogFormat::Log4j
        } else {
            LogFormat::Iso8601
        },
    })
}

pub(super) fn epoch(line: &str) -> Option<ParsedLine<'_>> {
    let (ns, used) = time::parse_epoch_prefix(line.as_bytes())?;
    let (level, content, _) = after_timestamp(&line[used..]);
    Some(ParsedLine {
        ts: Some(ns),
        level,
        content: Cow::Borrowed(content),
        format: LogFormat::Epoch,
    })
}

pub(super) fn hdfs(line: &str) -> Option<ParsedLine<'_>> {
    let (ns, used) = time::parse_yymmdd(line.as_bytes())?;
    let (level, content, _) = after_timestamp(&line[used..]);
    Some(ParsedLine {
        ts: Some(ns),
        level,
        content: Cow::Borrowed(content),
        format: LogFormat::Hdfs,
    })
}

pub(super) fn apache(line: &str) -> Option<ParsedLine<'_>> {
    let b = line.as_bytes();
    if b.first() != Some(&b'[') {
        return None;
    }
    let (ns, used) = time::parse_ctime(&b[1..])?;
    let rest = line[1 + used..].strip_prefix(']')?.trim_start();
    let mut level = None;
    let mut s = rest;
    if s.starts_with('[') {
        let close = s.find(']')?;
        let inner = &s[1..close];
        level = Level::parse(inner.rsplit(':').next().unwrap_or(inner));
        if level.is_some() {
            s = s[close + 1..].trim_start();
        }
    }
    // Apache 2.4: [pid N:tid M]
    if s.starts_with("[pid ") {
        s = skip_brackets(s);
    }
    Some(ParsedLine {
        ts: Some(ns),
        level,
        content: Cow::Borrowed(s),
        format: LogFormat::Apache,
    })
}

pub(super) const MSG_KEYS: &[&str] =
    &["msg", "message", "log", "text", "event", "@message", "body"];
pub(super) const LEVEL_KEYS: &[&str] = &[
    "level",
    "lvl",
    "severity",
    "levelname",
    "log.level",
    "loglevel",
    "@level",
];
pub(super) const TIME_KEYS: &[&str] = &[
    "time",
    "ts",
    "timestamp",
    "@timestamp",
    "t",
    "datetime",
    "date",
    "eventTime",
];

pub(super) fn json(line: &str) -> Option<ParsedLine<'_>> {
    let v: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(line.trim_end()).ok()?;
    let get = |keys: &[&str]| keys.iter().find_map(|k| v.get(*k));
    let mut level = get(LEVEL_KEYS).and_then(|l| match l {
        serde_json::Value::String(s) => Level::parse(s),
        // pino/bunyan numeric levels: 10 trace .. 60 fatal
        serde_json::Value::Number(n) => n.as_u64().map(|n| match n {
            0..=19 => Level::Trace,
            20..=29 => Level::Debug,
            30..=39 => Level::Info,
            40..=49 => Level::Warn,
            50..=59 => Level::Error,
            _ => Level::Fatal,
        }),
        _ => None,
    });
    let ts = get(TIME_KEYS).and_then(|t| match t {
        serde_json::Value::String(s) => time::parse_any(s),
        serde_json::Value::Number(n) => n.as_f64().and_then(time::epoch_number_to_ns),
        _ => None,
    });
    let content: Cow<'_, str> = match get(MSG_KEYS) {
        Some(serde_json::Value::String(s)) => {
            let s = s.trim_end_matches('\n');
            if level.is_none() {
                // docker json-file: {"log": "...", "stream": "stderr"}; re-parse the inner text.
                let mut p = LineParser::new(Some(1970));
                let inner = p.parse_any(s);
                level = inner.level;
                Cow::Owned(inner.content.into_owned())
            } else {
                Cow::Owned(s.to_string())
            }
        }
        Some(other) => Cow::Owned(other.to_string()),
        None => {
            // No message field: use the remaining fields as "k=v" text.
            let mut out = String::new();
            for (k, val) in &v {
                if LEVEL_KEYS.contains(&k.as_str()) || TIME_KEYS.contains(&k.as_str()) {
                    continue;
                }
                if !out.is_empty() {
                    out.push(' ');
                }
                out.push_str(k);
                out.push('=');
                match val {
                    serde_json::Value::String(s) => out.push_str(s),
                    o => out.push_str(&o.to_string()),
                }
            }
            Cow::Owned(out)
        }
    };
    // Append an error field so "error": "connection refused" reaches the signatures.
    let content = match v.get("error").or_else(|| v.get("err")) {
        Some(serde_json::Value::String(e)) if !content.contains(e.as_str()) => {
            Cow::Owned(format!("{content} error={e}"))
        }
        _ => content,
    };
    Some(ParsedLine {
        ts,
        level,
        content,
        format: LogFormat::Json,
    })
}

/// Split a logfmt line into (key, value) pairs; quoted values are unescaped (`\"`, `\\`).
pub fn logfmt_pairs(line: &str) -> Vec<(&str, Cow<'_, str>)> {
    let b = line.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        while i < b.len() && b[i] == b' ' {
            i += 1;
        }
        let ks = i;
        while i < b.len() && b[i] != b'=' && b[i] != b' ' {
            i += 1;
        }
        let key = &line[ks..i];
        if i >= b.len() || b[i] != b'=' {
            if !key.is_empty() {
                out.push((key, Cow::Borrowed("")));
            }
            continue;
        }
        i += 1;
        if i < b.len() && b[i] == b'"' {
            i += 1;
            let vs = i;
            let mut esc = false;
            let mut owned: Option<String> = None;
            while i < b.len() {
                let c = b[i];
                if esc {
                    esc = false;
                } else if c == b'\\' {
                    esc = true;
                    owned.get_or_insert_with(String::new);
                } else if c == b'"' {
                    break;
                }
                i += 1;
            }
            let raw = &line[vs..i.min(b.len())];
            let val = if owned.is_some() {
                let mut s = String::with_capacity(raw.len());
                let mut chars = raw.chars();
                while let Some(c) = chars.next() {
                    if c == '\\' {
                        match chars.next() {
                            Some('n') => s.push('\n'),
                            Some('t') => s.push('\t'),
                            Some(o) => s.push(o),
                            None => {}
                        }
                    } else {
                        s.push(c);
                    }
                }
                Cow::Owned(s)
            } else {
                Cow::Borrowed(raw)
            };
            out.push((key, val));
            i += 1;
        } else {
            let vs = i;
            while i < b.len() && b[i] != b' ' {
                i += 1;
            }
            out.push((key, Cow::Borrowed(&line[vs..i])));
        }
    }
    out
}

pub(super) fn logfmt(line: &str) -> Option<ParsedLine<'_>> {
    if !(line.contains("level=") || line.contains("msg=") || line.contains("lvl=")) {
        return None;
    }
    let pairs = logfmt_pairs(line);
    if pairs.len() < 2 || pairs.iter().filter(|(_, v)| !v.is_empty()).count() < 2 {
        return None;
    }
    let mut level = None;
    let mut ts = None;
    let mut msg: Option<Cow<'_, str>> = None;
    let mut extra = String::new();
    for (k, v) in pairs {
        match k {
            "level" | "lvl" | "severity" => level = Level::parse(&v),
            "ts" | "time" | "t" | "timestamp" => ts = time::parse_any(&v),
            "msg" | "message" => msg = Some(v),
            "err" | "error" => {
                extra.push_str(" error=");
                extra.push_str(&v);
            }
            _ => {}
        }
    }
    let content = match msg {
        Some(m) if extra.is_empty() => m,
        Some(m) => Cow::Owned(format!("{m}{extra}")),
        None => Cow::Borrowed(line),
    };
    Some(ParsedLine {
        ts,
        level,
        content,
        format: LogFormat::Logfmt,
    })
}

pub(super) fn plain(line: &str) -> ParsedLine<'_> {
    // A leading level word ("ERROR: x", "[WARN] x", "warning: y").
    let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
    if let Some(l) = Level::parse(word)
        && (word.ends_with(':')
            || word.starts_with('[')
            || word.bytes().all(|c| c.is_ascii_uppercase()))
    {
        return ParsedLine {
            ts: None,
            level: Some(l),
            content: Cow::Borrowed(rest.trim_start()),
            format: LogFormat::Plain,
        };
    }
    ParsedLine {
        ts: None,
        level: None,
        content: Cow::Borrowed(line),
        format: LogFormat::Plain,
    }
}
