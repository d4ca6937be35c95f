//! Reading a model's reply: the tolerant JSON reader (fences, prose, `<think>` blocks, bad
//! escapes), field-name synonyms, coercion into an investigation answer or a post-mortem over
//! the built-in draft, every string cut again to its bound in [`limits`].

use serde_json::Value;

use super::schema::limits;
use crate::analyst::{
    AnalystError, AnalystOutput, PriorIncident, ProposedAction, ProposedHypothesis,
};
use crate::domain::postmortem::{DraftFacts, Postmortem};
use crate::domain::{Confidence, Rule, RuleSeverity};
use crate::evidence::truncate_chars;

/// Extracts the first balanced JSON object from a reply that may be fenced, wrapped in prose or
/// preceded by a `<think>…</think>` block, repairing invalid escape sequences (`\q` → `\\q`).
/// A complete `{…}` that does not parse (prose such as "use {braces}") is skipped for the next.
///
/// # Errors
/// [`AnalystError::InvalidOutput`] when no complete object is found or it does not parse.
pub fn tolerant_json(reply: &str) -> Result<Value, AnalystError> {
    let reply = match reply.rfind("</think>") {
        Some(k) => &reply[k + "</think>".len()..],
        None => reply,
    };
    let mut from = 0;
    let mut first_error = None;
    while let Some(off) = reply[from..].find('{') {
        let start = from + off;
        let Some(end) = balanced_end(reply, start) else {
            return Err(first_error.unwrap_or_else(|| {
                AnalystError::InvalidOutput("the JSON object is incomplete (truncated?)".into())
            }));
        };
        match parse_repaired(&reply[start..=end]) {
            Ok(v) => return Ok(v),
            Err(e) => {
                first_error.get_or_insert(e);
                from = end + 1;
            }
        }
    }
    Err(first_error
        .unwrap_or_else(|| AnalystError::InvalidOutput("no JSON object in the reply".into())))
}

/// Index of the `}` closing the object that opens at `start`, if the text holds all of it.
fn balanced_end(text: &str, start: usize) -> Option<usize> {
    let (mut depth, mut in_str, mut esc) = (0i32, false, false);
    for (k, &b) in text.as_bytes().iter().enumerate().skip(start) {
        if in_str {
            match (esc, b) {
                (true, _) => esc = false,
                (false, b'\\') => esc = true,
                (false, b'"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(k);
                }
            }
            _ => {}
        }
    }
    None
}

fn parse_repaired(raw: &str) -> Result<Value, AnalystError> {
    if let Ok(v) = serde_json::from_str(raw) {
        return Ok(v);
    }
    // Repair backslashes that do not start a valid JSON escape.
    let mut fixed = String::with_capacity(raw.len() + 8);
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.peek() {
                Some('"' | '\\' | '/' | 'b' | 'f' | 'n' | 'r' | 't' | 'u') => {
                    fixed.push(c);
                    if let Some(n) = chars.next() {
                        fixed.push(n);
                    }
                }
                _ => fixed.push_str("\\\\"),
            }
        } else {
            fixed.push(c);
        }
    }
    serde_json::from_str(&fixed)
        .map_err(|e| AnalystError::InvalidOutput(format!("the reply is not valid JSON: {e}")))
}

/// Parses a record reference (`OBS-12`, `MEM-40`, `12`) to its id.
pub fn parse_ref(s: &str) -> Option<i64> {
    let t = s.trim();
    let digits = t.rsplit('-').next().unwrap_or(t);
    if t.starts_with("INC-") {
        return None;
    }
    digits.parse().ok()
}

/// Names a model uses for each schema field, the schema's own first. Models that ignore the
/// schema (plain rung, small local models) write `action` for `kind`, `reason` for `rationale`,
/// `title` for `statement`, …: each is read as the schema field, never passed through.
mod synonyms {
    pub const HYPOTHESES: &[&str] = &[
        "hypotheses",
        "hypothesis",
        "root_causes",
        "possible_causes",
        "causes",
        "findings",
        "theories",
    ];
    pub const ACTIONS: &[&str] = &[
        "actions",
        "recommendations",
        "recommended_actions",
        "remediations",
        "remediation",
        "next_steps",
        "steps",
        "mitigations",
    ];
    pub const STATEMENT: &[&str] = &[
        "statement",
        "hypothesis",
        "text",
        "description",
        "summary",
        "title",
        "name",
        "claim",
        "cause",
    ];
    pub const CONFIDENCE: &[&str] = &["confidence", "likelihood", "certainty", "probability"];
    pub const CITES: &[&str] = &[
        "cites",
        "citations",
        "evidence",
        "sources",
        "observations",
        "references",
        "refs",
    ];
    pub const PRIOR: &[&str] = &[
        "prior_incidents",
        "similar_incidents",
        "past_incidents",
        "related_incidents",
        "incidents",
    ];
    pub const PRIOR_ID: &[&str] = &["id", "incident", "incident_id"];
    pub const WHY: &[&str] = &["why", "reason", "rationale", "relevance"];
    pub const KIND: &[&str] = &["kind", "action", "action_kind", "type", "name", "title"];
    pub const TARGET: &[&str] = &["target", "service", "component", "resource"];
    pub const RATIONALE: &[&str] = &[
        "rationale",
        "reason",
        "why",
        "justification",
        "explanation",
        "description",
    ];
    pub const HYPOTHESIS_REF: &[&str] = &[
        "hypothesis",
        "hypothesis_index",
        "hypothesis_id",
        "for_hypothesis",
    ];
}

/// The first of `names` present on `v` (keys compared case-insensitively, `-`/space as `_`).
fn field<'a>(v: &'a Value, names: &[&str]) -> Option<&'a Value> {
    let obj = v.as_object()?;
    for n in names {
        if let Some(x) = obj.get(*n) {
            return Some(x);
        }
    }
    obj.iter().find_map(|(k, x)| {
        let k = k.to_ascii_lowercase().replace(['-', ' '], "_");
        names.contains(&k.as_str()).then_some(x)
    })
}

/// A field as text (numbers are written out), trimmed, non-empty.
fn field_text<'a>(v: &'a Value, names: &[&str]) -> Option<std::borrow::Cow<'a, str>> {
    match field(v, names)? {
        Value::String(s) if !s.trim().is_empty() => Some(std::borrow::Cow::Borrowed(s.trim())),
        Value::Number(n) => Some(std::borrow::Cow::Owned(n.to_string())),
        _ => None,
    }
}

/// A confidence as a word, or as a number in 0–1 or 0–100.
fn confidence_of(v: Option<&Value>) -> Confidence {
    match v {
        Some(Value::String(s)) => {
            let s = s.trim().to_lowercase();
            Confidence::parse(&s)
                .ok()
                .or_else(|| s.trim_end_matches('%').parse::<f64>().ok().map(level))
                .unwrap_or(Confidence::Low)
        }
        Some(Value::Number(n)) => n.as_f64().map(level).unwrap_or(Confidence::Low),
        _ => Confidence::Low,
    }
}

fn level(x: f64) -> Confidence {
    let x = if x > 1.0 { x / 100.0 } else { x };
    if x >= 0.7 {
        Confidence::High
    } else if x >= 0.4 {
        Confidence::Medium
    } else {
        Confidence::Low
    }
}

/// The object holding the answer: the reply itself, or the one object it wraps
/// (`{"analysis": {...}}`, `{"result": {...}}`).
fn answer_root(v: &Value) -> &Value {
    if field(v, synonyms::HYPOTHESES).is_some() || field(v, synonyms::ACTIONS).is_some() {
        return v;
    }
    match v.as_object() {
        Some(o) if o.len() == 1 => o.values().next().filter(|x| x.is_object()).unwrap_or(v),
        _ => v,
    }
}

/// Items of a list field; a single object or string is read as a list of one.
fn items(v: Option<&Value>) -> Vec<&Value> {
    match v {
        Some(Value::Array(a)) => a.iter().collect(),
        Some(x @ (Value::Object(_) | Value::String(_))) => vec![x],
        _ => Vec::new(),
    }
}

/// Reads the model's JSON into [`AnalystOutput`], mapping known synonyms of the schema's field
/// names ([`synonyms`]), keeping every valid item and dropping (and reporting) malformed ones.
///
/// # Errors
/// [`AnalystError::InvalidOutput`] when the top level has no hypotheses or actions under any
/// known name.
pub fn output_from_json(v: &Value) -> Result<AnalystOutput, AnalystError> {
    let v = answer_root(v);
    let hyps = field(v, synonyms::HYPOTHESES);
    let acts = field(v, synonyms::ACTIONS);
    if hyps.is_none() && acts.is_none() {
        return Err(AnalystError::InvalidOutput(
            "no hypotheses or actions in the reply".into(),
        ));
    }
    let mut out = AnalystOutput::default();
    for h in items(hyps) {
        let statement = match h {
            Value::String(s) if !s.trim().is_empty() => Some(std::borrow::Cow::Borrowed(s.trim())),
            _ => field_text(h, synonyms::STATEMENT),
        };
        let Some(statement) = statement else {
            out.dropped.push("a hypothesis without a statement".into());
            continue;
        };
        let confidence = confidence_of(field(h, synonyms::CONFIDENCE));
        let cites = items(field(h, synonyms::CITES))
            .into_iter()
            .chain(field(h, synonyms::CITES).filter(|c| c.is_number()))
            .filter_map(|c| {
                c.as_str()
                    .map(str::to_string)
                    .or_else(|| c.as_i64().map(|n| n.to_string()))
            })
            .flat_map(|s| {
                s.split([',', ' '])
                    .filter_map(parse_ref)
                    .collect::<Vec<_>>()
            })
            .collect();
        let prior_incidents = items(field(h, synonyms::PRIOR))
            .into_iter()
            .filter_map(|p| match p {
                Value::String(s) => Some(PriorIncident {
                    id: bounded(s, limits::INCIDENT_ID),
                    why: String::new(),
                }),
                _ => Some(PriorIncident {
                    id: bounded(&field_text(p, synonyms::PRIOR_ID)?, limits::INCIDENT_ID),
                    why: field_text(p, synonyms::WHY)
                        .map(|w| bounded(&w, limits::WHY))
                        .unwrap_or_default(),
                }),
            })
            .collect();
        out.hypotheses.push(ProposedHypothesis {
            statement: bounded(&statement, limits::STATEMENT),
            confidence,
            cites,
            prior_incidents,
        });
    }
    for a in items(acts) {
        let kind = match a {
            Value::String(s) if !s.trim().is_empty() => Some(std::borrow::Cow::Borrowed(s.trim())),
            _ => field_text(a, synonyms::KIND),
        };
        let Some(kind) = kind else {
            out.dropped.push("an action without a kind".into());
            continue;
        };
        let hypothesis = field(a, synonyms::HYPOTHESIS_REF).and_then(|h| match h {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => s
                .trim()
                .trim_start_matches(|c: char| !c.is_ascii_digit())
                .parse()
                .ok(),
            _ => None,
        });
        out.actions.push(ProposedAction {
            kind: bounded(&kind, limits::KIND),
            target: field_text(a, synonyms::TARGET)
                .map(|t| bounded(&t, limits::TARGET))
                .unwrap_or_default(),
            rationale: bounded(
                &field_text(a, synonyms::RATIONALE).unwrap_or_default(),
                limits::RATIONALE,
            ),
            hypothesis: hypothesis.map(|n| n as usize),
        });
    }
    Ok(out)
}

/// `true` when `out` holds something validation can keep: a hypothesis with a statement or an
/// action whose kind maps to the closed vocabulary.
pub fn has_usable_items(out: &AnalystOutput) -> bool {
    !out.hypotheses.is_empty()
        || out
            .actions
            .iter()
            .any(|a| crate::domain::ActionKind::coerce(&a.kind).is_some())
}

/// A string list of the reply, each item trimmed, non-empty and at most [`limits::LIST_ITEM`]
/// characters.
fn text_list(v: &Value, key: &str) -> Option<Vec<String>> {
    let items = v.get(key)?.as_array()?;
    Some(
        items
            .iter()
            .filter_map(|x| x.as_str().map(str::trim).filter(|x| !x.is_empty()))
            .take(12)
            .map(|x| bounded(x, limits::LIST_ITEM))
            .collect(),
    )
}

/// `s` trimmed and cut to at most `max` characters, at a character boundary (a server that
/// rejected `maxLength` did not enforce it; the lower rungs never do).
fn bounded(s: &str, max: usize) -> String {
    truncate_chars(s.trim(), max).trim_end().to_string()
}

/// Strips a repeated label the model may have kept (`ALWAYS: …`, `because - …`).
fn strip_label<'a>(text: &'a str, label: &str) -> &'a str {
    let t = text.trim();
    match t.get(..label.len()) {
        Some(head) if head.eq_ignore_ascii_case(label) => {
            t[label.len()..].trim_start_matches([':', '-', ' ']).trim()
        }
        _ => t,
    }
}

/// Reads a lesson given as an object `{always, because, scope, severity}` or as one text
/// `ALWAYS: … BECAUSE: … SCOPE: … SEVERITY: …`. Missing parts stay empty (the service drops
/// such lessons and says so); an unknown severity becomes `default_severity`.
pub(super) fn lesson_from_json(
    v: &Value,
    default_severity: RuleSeverity,
    default_scope: &str,
) -> Rule {
    let (always, because, scope, severity) = match v {
        Value::String(text) => {
            let upper = text.to_ascii_uppercase();
            let part = |label: &str| -> String {
                let Some(k) = upper.find(&format!("{label}:")) else {
                    return String::new();
                };
                let rest = &text[k + label.len() + 1..];
                let rest_up = &upper[k + label.len() + 1..];
                let end = ["ALWAYS:", "BECAUSE:", "SCOPE:", "SEVERITY:"]
                    .iter()
                    .filter_map(|l| rest_up.find(l))
                    .min()
                    .unwrap_or(rest.len());
                rest[..end].trim().to_string()
            };
            (
                part("ALWAYS"),
                part("BECAUSE"),
                part("SCOPE"),
                part("SEVERITY"),
            )
        }
        _ => {
            let field = |k: &str| {
                v.get(k)
                    .and_then(Value::as_str)
                    .map(|x| strip_label(x, k).to_string())
                    .unwrap_or_default()
            };
            (
                field("always"),
                field("because"),
                field("scope"),
                field("severity"),
            )
        }
    };
    Rule {
        always: bounded(&always, limits::LESSON_PART),
        because: bounded(&because, limits::LESSON_PART),
        scope: if scope.trim().is_empty() {
            default_scope.to_string()
        } else {
            bounded(&scope, limits::SCOPE)
        },
        severity: RuleSeverity::parse(&severity.trim().to_ascii_lowercase())
            .unwrap_or(default_severity),
    }
}

/// Reads the model's post-mortem JSON over the built-in draft: the model's summary, trigger,
/// contributing factors, misleading hypotheses (added after the facts' ones), lessons, action
/// items and detection gaps; everything else — impact, symptoms, root cause, what worked, what
/// did not work, rejected recommendations — stays the built-in draft's (the facts). Missing or
/// empty prose fields keep the built-in text.
///
/// # Errors
/// [`AnalystError::InvalidOutput`] when the reply has neither a summary nor lessons.
pub fn postmortem_from_json(
    v: &Value,
    facts: &DraftFacts,
    builtin: &Postmortem,
) -> Result<Postmortem, AnalystError> {
    let text = |k: &str, max: usize| {
        v.get(k)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|x| !x.is_empty())
            .map(|x| bounded(x, max))
    };
    let lessons = v.get("lessons").and_then(Value::as_array);
    let summary = text("summary", limits::SUMMARY);
    if summary.is_none() && lessons.is_none() {
        return Err(AnalystError::InvalidOutput(
            "no summary or lessons in the post-mortem reply".into(),
        ));
    }
    let i = &facts.incident;
    let default_scope = if facts.failure_modes.is_empty() {
        i.service.clone()
    } else {
        format!("{}; {}", i.service, facts.failure_modes.join(", "))
    };
    let default_severity = crate::domain::postmortem::rule_severity(i.severity);
    let mut pm = builtin.clone();
    if let Some(s) = summary {
        pm.summary = s;
    }
    // A model that does not know says so; that is no trigger, and the built-in one (or the
    // empty field a person fills in) stays.
    if let Some(t) = text("trigger", limits::TRIGGER)
        && !t.trim_end_matches('.').eq_ignore_ascii_case("unknown")
    {
        pm.trigger = t;
    }
    if let Some(c) = text_list(v, "contributing_factors") {
        pm.contributing_factors = c;
    }
    if let Some(m) = text_list(v, "misleading_hypotheses") {
        let mut all = facts.misleading.clone();
        for h in m {
            if !all.iter().any(|x| x.eq_ignore_ascii_case(&h)) {
                all.push(h);
            }
        }
        pm.misleading_hypotheses = all;
    }
    if let Some(ls) = lessons {
        pm.lessons = ls
            .iter()
            .take(12)
            .map(|l| lesson_from_json(l, default_severity, &default_scope))
            .collect();
    }
    if let Some(a) = text_list(v, "action_items") {
        pm.action_items = a;
    }
    if let Some(d) = text_list(v, "detection_gaps") {
        pm.detection_gaps = d;
    }
    Ok(pm)
}
