//! What a log line says, read apart from how it is framed: the text a sentence-embedding model
//! is given to recognise a failure mode by meaning (issue #52).
//!
//! A structured line (a JSON object, logfmt or `key=value` pairs) is reduced to its message and
//! error fields (`msg`, `message`, `error`, `exception`, `reason`, …), never its timestamps,
//! ids, hosts or callers; when it has no such field, its other fields are read as `key value`
//! words. In every line, timestamps, addresses, UUIDs, long hex ids and long numbers are
//! dropped, Drain's `<*>` placeholders too, and exception type names are split into words
//! (`java.net.SocketTimeoutException` → `Socket Timeout Exception`, `System.Data.SqlClient.
//! SqlException (0x80131904)` → `Sql Exception`): the type name is a strong, general signal
//! the model reads better as words. A stack frame (`at a.b.C.m(C.java:42)`) says nothing of the
//! failure and reads as empty, as does a lone `key = value` (a setting or a counter).
//!
//! Pure: no I/O, no model. [`meaning_text`] is the one entry point.

use std::sync::LazyLock;

use regex::Regex;

/// Longest text returned by [`meaning_text`], in characters (the model reads ≈ 256 word pieces;
/// a line's first sentences say what it is about).
pub const MEANING_MAX_CHARS: usize = 400;

/// Field names whose values are a line's message or error (compared lower-cased, on the last
/// segment of a dotted or nested key, e.g. `error.message` → `message`).
const MESSAGE_KEYS: &[&str] = &[
    "msg",
    "message",
    "error",
    "err",
    "errors",
    "error_message",
    "errormessage",
    "exception",
    "exc",
    "exc_info",
    "reason",
    "cause",
    "detail",
    "details",
    "description",
    "summary",
    "status_message",
    "status_text",
    "fault",
    "failure",
    "problem",
    "event",
    "title",
    "text",
    "log",
    "@m",
    "@mt",
    "@x",
];

/// Field names that are framing, not content: when a line has no message field, these are
/// still left out of the words read.
const FRAMING_KEYS: &[&str] = &[
    "time",
    "ts",
    "t",
    "timestamp",
    "@timestamp",
    "@t",
    "date",
    "datetime",
    "level",
    "lvl",
    "severity",
    "@l",
    "id",
    "uuid",
    "request_id",
    "trace_id",
    "span_id",
    "traceid",
    "spanid",
    "correlation_id",
    "host",
    "hostname",
    "ip",
    "addr",
    "address",
    "remote_addr",
    "pod",
    "node",
    "instance",
    "caller",
    "logger",
    "source",
    "file",
    "line",
    "thread",
    "pid",
    "tid",
    "version",
    "app",
    "service",
    "namespace",
    "container",
    "region",
    "zone",
];

fn is_message_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    let leaf = k.rsplit(['.', '/']).next().unwrap_or(&k);
    MESSAGE_KEYS.contains(&leaf)
        || leaf.ends_with("_error")
        || leaf.ends_with("_reason")
        || leaf.ends_with("_message")
        || leaf.ends_with("exception")
}

fn is_framing_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    let leaf = k.rsplit(['.', '/']).next().unwrap_or(&k);
    FRAMING_KEYS.contains(&leaf)
        || leaf.ends_with("_id")
        || leaf.ends_with("_at")
        || leaf.ends_with("_ts")
        || leaf.ends_with("_time")
        || leaf.ends_with("host")
        || leaf.ends_with("_ip")
}

/// The text a model should read of `line` (a log line, a template or an alert's text): its
/// message and error fields with the framing left out (see the module doc); empty when nothing
/// is left (a stack frame, a line of numbers), which callers do not classify.
pub fn meaning_text(line: &str) -> String {
    let line = line.trim();
    if STACK_FRAME.is_match(line) || LONE_SETTING.is_match(line) {
        return String::new();
    }
    let raw = structured(line).unwrap_or_else(|| line.to_string());
    clean(&raw)
}

/// The message of a structured line: a JSON object (possibly after a plain prefix) or at least
/// two `key=value` pairs; `None` for anything else.
fn structured(line: &str) -> Option<String> {
    if let Some(start) = line.find('{')
        && let Ok(serde_json::Value::Object(map)) =
            serde_json::from_str::<serde_json::Value>(&line[start..])
    {
        let mut message = Vec::new();
        let mut other = Vec::new();
        walk_json(
            "",
            &serde_json::Value::Object(map),
            &mut message,
            &mut other,
        );
        let prefix = line[..start].trim();
        return Some(pick(prefix, message, other));
    }
    let pairs = logfmt(line);
    if pairs.len() >= 2 {
        let first = pairs.first().map_or(0, |p| p.0);
        let prefix = line[..first].trim();
        let mut message = Vec::new();
        let mut other = Vec::new();
        for (_, k, v) in pairs {
            if is_message_key(k) {
                message.push(v.to_string());
            } else if !is_framing_key(k) {
                other.push(format!("{} {v}", k.replace(['_', '.', '-'], " ")));
            }
        }
        return Some(pick(prefix, message, other));
    }
    None
}

/// The message fields when there are any, else the other fields; after a plain prefix that
/// says more than framing.
fn pick(prefix: &str, message: Vec<String>, other: Vec<String>) -> String {
    let body = if message.is_empty() { other } else { message };
    let mut out = String::new();
    if prefix.chars().any(char::is_alphabetic) {
        out.push_str(prefix);
        out.push(' ');
    }
    out.push_str(&body.join(". "));
    out
}

fn walk_json(key: &str, v: &serde_json::Value, message: &mut Vec<String>, other: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                let path = if key.is_empty() {
                    k.clone()
                } else {
                    format!("{key}.{k}")
                };
                // An `error` object's fields are all error fields.
                if is_message_key(k) && v.is_object() {
                    let mut inner = Vec::new();
                    walk_json(&path, v, &mut inner, &mut Vec::new());
                    if let serde_json::Value::Object(m) = v {
                        for (ik, iv) in m {
                            if let Some(s) = iv.as_str()
                                && !is_message_key(ik)
                                && !is_framing_key(ik)
                            {
                                inner.push(s.to_string());
                            }
                        }
                    }
                    message.extend(inner);
                } else {
                    walk_json(&path, v, message, other);
                }
            }
        }
        serde_json::Value::Array(items) => {
            for i in items.iter().take(8) {
                walk_json(key, i, message, other);
            }
        }
        serde_json::Value::String(s) => {
            if is_message_key(key) {
                message.push(first_line(s).to_string());
            } else if !is_framing_key(key) {
                let k = key.rsplit('.').next().unwrap_or(key);
                other.push(format!("{} {s}", k.replace(['_', '-'], " ")));
            }
        }
        serde_json::Value::Number(n) if !is_framing_key(key) && !key.is_empty() => {
            let k = key.rsplit('.').next().unwrap_or(key);
            other.push(format!("{} {n}", k.replace(['_', '-'], " ")));
        }
        _ => {}
    }
}

/// A multi-line value (a stack trace in a field) is read by its head.
fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

/// `key=value` and `key="quoted value"` pairs of a line, with the byte offset of each key.
fn logfmt(line: &str) -> Vec<(usize, &str, &str)> {
    LOGFMT
        .captures_iter(line)
        .filter_map(|c| {
            let k = c.get(1)?;
            let v = c.get(2).or_else(|| c.get(3))?;
            Some((k.start(), k.as_str(), v.as_str()))
        })
        .collect()
}

static LOGFMT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?:^|\s)([A-Za-z_@][\w.@/-]{0,40})=(?:"((?:[^"\\]|\\.)*)"|([^\s"]+))"#)
        .expect("logfmt pattern compiles")
});

static STACK_FRAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(at\s+[\w.$<>`\[\]]+\(.*\)|File .+, line \d+, in .+|\.\.\. \d+ more|goroutine \d+ \[)",
    )
    .expect("stack frame pattern compiles")
});

/// A lone `key = value` or `"key": value` (a setting or a counter, e.g. a config dump's line):
/// it states a value, not an event, and a model cannot judge a value without its bound.
static LONE_SETTING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"^"?[\w.\-]+"?\s*[:=]\s*"?[^\s"]*"?\s*,?$"#).expect("setting pattern compiles")
});

/// Noise: timestamps, addresses, UUIDs, hex ids, long numbers, placeholders, bracketed pids.
static NOISE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"\d{4}[-/]\d{2}[-/]\d{2}[T ]?(\d{2}:\d{2}(:\d{2})?([.,]\d+)?)?(Z|[+-]\d{2}:?\d{2}| ?UTC)?",
        r"|\b\d{1,2}:\d{2}:\d{2}([.,]\d+)?\b",
        r"|\b(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +\d{1,2}\b",
        r"|\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b",
        r"|\b\d{1,3}(\.\d{1,3}){3}(:\d+)?\b",
        r"|\b0x[0-9a-fA-F]+\b",
        r"|\b[0-9a-f]{12,}\b",
        r"|\b\d{5,}(\.\d+)?\b",
        r"|<\*>",
        r"|\[\d+\]",
        r"|\b[\w-]+(\.[\w-]+)*\.(example\.invalid|local|internal)\b",
    ))
    .expect("noise pattern compiles")
});

/// Brackets left empty once the noise inside is gone.
static EMPTY_BRACKETS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\(\s*\)|\[\s*\]").expect("bracket pattern compiles"));

/// A dotted type name (`java.net.SocketTimeoutException`, `System.IO.IOException`): its last
/// segment.
static DOTTED_TYPE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b(?:[A-Za-z_][\w$]*\.)+([A-Z][\w$]*)\b").expect("dotted type pattern compiles")
});

/// A CamelCase word of at least two humps (`OutOfMemoryError`, `CrashLoopBackOff`).
static CAMEL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b[A-Za-z][a-z0-9]*(?:[A-Z]+[a-z0-9]*)+\b").expect("camel pattern compiles")
});

fn clean(raw: &str) -> String {
    let no_noise = NOISE.replace_all(raw, " ");
    let no_noise = EMPTY_BRACKETS.replace_all(&no_noise, " ");
    let types = DOTTED_TYPE.replace_all(&no_noise, "$1");
    let words = CAMEL.replace_all(&types, |c: &regex::Captures| split_camel(&c[0]));
    let spaced = words.replace(['_', '"', '\'', '`', '|'], " ");
    let mut out = String::with_capacity(spaced.len());
    for w in spaced.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(w);
    }
    super::truncate_chars(&out, MEANING_MAX_CHARS).to_string()
}

/// `OutOfMemoryError` → `Out Of Memory Error`; `HTTPServerError` → `HTTP Server Error`.
fn split_camel(w: &str) -> String {
    let chars: Vec<char> = w.chars().collect();
    let mut out = String::with_capacity(w.len() + 8);
    for (i, &c) in chars.iter().enumerate() {
        if i > 0 && c.is_uppercase() {
            let prev = chars[i - 1];
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            if prev.is_lowercase() || prev.is_ascii_digit() || (prev.is_uppercase() && next_lower) {
                out.push(' ');
            }
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_json_line_is_read_by_its_message_and_error_fields() {
        let line = r#"{"ts":"2024-01-02T03:04:05Z","level":"error","host":"db-7","request_id":"ab12","msg":"could not write batch","error":{"type":"IOException","message":"disk quota reached"}}"#;
        let t = meaning_text(line);
        for part in [
            "could not write batch",
            "IO Exception",
            "disk quota reached",
        ] {
            assert!(t.contains(part), "{t}");
        }
        for framing in ["db-7", "ab12", "error", "2024"] {
            assert!(!t.contains(framing), "{t}");
        }
    }

    #[test]
    fn a_logfmt_line_keeps_msg_and_err_and_drops_framing() {
        let line = r#"ts=2024-01-02T03:04:05Z level=warn caller=queue.go:88 host=w-3 msg="worker gave up" err="read deadline passed" attempt=4"#;
        assert_eq!(meaning_text(line), "worker gave up. read deadline passed");
    }

    #[test]
    fn a_structured_line_without_message_fields_reads_its_other_fields_as_words() {
        let line = "ts=2024-01-02T03:04:05Z queue_depth=912 oldest_age_s=340 host=w-3";
        assert_eq!(meaning_text(line), "queue depth 912. oldest age s 340");
    }

    #[test]
    fn exception_type_names_become_words() {
        assert_eq!(
            meaning_text("Caused by: java.net.SocketTimeoutException: read stalled"),
            "Caused by: Socket Timeout Exception: read stalled"
        );
        assert_eq!(
            meaning_text("System.Data.SqlClient.SqlException (0x80131904): the wait ran out"),
            "Sql Exception : the wait ran out"
        );
    }

    #[test]
    fn frames_and_framing_read_as_nothing() {
        assert_eq!(meaning_text("    at com.acme.Cart.total(Cart.java:42)"), "");
        assert_eq!(meaning_text("  render.retry.max_ms = 1500"), "");
        assert_eq!(meaning_text(r#""cache.ttl_seconds": "90","#), "");
        assert_eq!(
            meaning_text("2024-01-02 03:04:05,123 <*> 10.1.2.3:8080 [4411]"),
            ""
        );
    }
}
