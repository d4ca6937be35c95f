//! Typed reads of one JSON field, named by its path (`alerts[0].labels.severity`), in either
//! [`Mode`]; and the one instant parser of alert bodies.

use serde_json::{Map, Value};

use crate::evidence::{time, truncate_chars};

/// How a field of the wrong shape is taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// A [`FieldError`] naming its path (webhook deliveries).
    Strict,
    /// As if it were absent (pasted evidence).
    Lenient,
}

/// A field of the wrong shape, or a required one missing; displays as `{path}: {message}`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct FieldError {
    /// JSON path of the field (`alerts[1].startsAt`, `event.data`, `body` for the root).
    pub path: String,
    /// What is wrong with it (`must be an object, got an array`).
    pub message: String,
}

/// A [`FieldError`] at `path`.
pub(super) fn bad(path: &str, msg: impl std::fmt::Display) -> FieldError {
    FieldError {
        path: path.to_string(),
        message: msg.to_string(),
    }
}

/// `a string`, `an array`, … for messages.
pub(super) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// An object; strict: anything else is an error; lenient: `None`.
pub(super) fn object<'a>(
    v: &'a Value,
    path: &str,
    mode: Mode,
) -> Result<Option<&'a Map<String, Value>>, FieldError> {
    match (v.as_object(), mode) {
        (Some(m), _) => Ok(Some(m)),
        (None, Mode::Lenient) => Ok(None),
        (None, Mode::Strict) => Err(bad(
            path,
            format!("must be an object, got {}", type_name(v)),
        )),
    }
}

/// A required object field (`{path}: is required{why}` when missing).
pub(super) fn required_object<'a>(
    v: Option<&'a Value>,
    path: &str,
    why: &str,
    mode: Mode,
) -> Result<Option<&'a Map<String, Value>>, FieldError> {
    match v {
        Some(v) => object(v, path, mode),
        None if mode == Mode::Strict => Err(bad(path, format!("is required{why}"))),
        None => Ok(None),
    }
}

/// An optional scalar as text: missing/null/blank → `None`; strings trimmed; numbers and
/// booleans as text; arrays and objects an error (strict) or `None` (lenient).
pub(super) fn text(
    v: Option<&Value>,
    path: &str,
    mode: Mode,
) -> Result<Option<String>, FieldError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.trim().to_string()).filter(|s| !s.is_empty())),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(Value::Bool(b)) => Ok(Some(b.to_string())),
        Some(_) if mode == Mode::Lenient => Ok(None),
        Some(other) => Err(bad(
            path,
            format!("must be a string, got {}", type_name(other)),
        )),
    }
}

/// [`text`] read leniently: for fields whose shape is never an error.
pub(super) fn loose(v: Option<&Value>) -> Option<String> {
    text(v, "", Mode::Lenient).ok().flatten()
}

/// Labels or annotations: an object of scalars (nulls and blanks skipped), in input order.
pub(super) fn labels(
    v: Option<&Value>,
    path: &str,
    mode: Mode,
) -> Result<Vec<(String, String)>, FieldError> {
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return Ok(Vec::new());
    };
    let Some(map) = object(v, path, mode)? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::with_capacity(map.len());
    for (k, x) in map {
        let field = || format!("{path}.{}", truncate_chars(k, 60));
        let value = match mode {
            Mode::Lenient => loose(Some(x)),
            Mode::Strict => text(Some(x), &field(), mode)?,
        };
        if let Some(s) = value {
            out.push((k.clone(), s));
        }
    }
    Ok(out)
}

/// The Go zero time (`0001-01-01T00:00:00Z`): Alertmanager's "not set".
fn go_zero(s: &str) -> bool {
    s.starts_with("0001-01-01")
}

/// An optional instant → epoch ns (UTC); the Go zero time is `None`. Strict: an RFC 3339
/// instant with any offset (as senders write them), else an error naming `path`. Lenient: a
/// string in any layout `evidence::time::parse_any` reads, else `None`.
pub(super) fn instant(
    v: Option<&Value>,
    path: &str,
    mode: Mode,
) -> Result<Option<i128>, FieldError> {
    if mode == Mode::Lenient {
        let Some(t) = v.and_then(Value::as_str).filter(|t| !go_zero(t)) else {
            return Ok(None);
        };
        return Ok(time::parse_any(t).map(i128::from));
    }
    let Some(s) = text(v, path, mode)? else {
        return Ok(None);
    };
    if go_zero(&s) {
        return Ok(None);
    }
    s.parse::<jiff::Timestamp>()
        .map(|t| Some(t.as_nanosecond()))
        .map_err(|_| {
            bad(
                path,
                format!(
                    "'{}' is not an RFC 3339 instant like 2026-11-29T14:46:36Z",
                    truncate_chars(&s, 60)
                ),
            )
        })
}

/// Unit of an epoch number field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Unit {
    /// Milliseconds (Opsgenie `createdAt`).
    Milliseconds,
    /// Nanoseconds (Opsgenie `updatedAt`).
    Nanoseconds,
}

impl Unit {
    fn name(self) -> &'static str {
        match self {
            Self::Milliseconds => "milliseconds",
            Self::Nanoseconds => "nanoseconds",
        }
    }

    fn per_unit(self) -> i64 {
        match self {
            Self::Milliseconds => 1_000_000,
            Self::Nanoseconds => 1,
        }
    }
}

/// An optional epoch number in `unit` → epoch ns (UTC). Strict: a number (integer or float)
/// within `jiff::Timestamp`'s range, else an error naming `path`. Lenient: an `i64`, scaled
/// with saturation, else `None`.
pub(super) fn epoch(
    v: Option<&Value>,
    path: &str,
    unit: Unit,
    mode: Mode,
) -> Result<Option<i128>, FieldError> {
    if mode == Mode::Lenient {
        let ns = v
            .and_then(Value::as_i64)
            .map(|x| x.saturating_mul(unit.per_unit()));
        return Ok(ns.map(i128::from));
    }
    let n = match v {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(n)) => n,
        Some(other) => {
            return Err(bad(
                path,
                format!(
                    "must be epoch {} (a number), got {}",
                    unit.name(),
                    type_name(other)
                ),
            ));
        }
    };
    let as_i128 = n
        .as_i64()
        .map(i128::from)
        .or_else(|| n.as_u64().map(i128::from))
        .or_else(|| n.as_f64().filter(|f| f.is_finite()).map(|f| f as i128));
    let ts = as_i128.and_then(|x| {
        let ns = x.checked_mul(i128::from(unit.per_unit()))?;
        jiff::Timestamp::from_nanosecond(ns).ok()
    });
    ts.map(|t| Some(t.as_nanosecond())).ok_or_else(|| {
        bad(
            path,
            format!("{n} is out of range for epoch {}", unit.name()),
        )
    })
}
