//! The JSON schemas sent with the structured-output rungs and their bounds ([`limits`]): every
//! string has a `maxLength` (or an `enum`) and every array a `maxItems`.

use serde_json::{Value, json};

/// `schema` without its `maxLength` keywords (for servers that reject them).
pub(super) fn without_max_length_keyword(schema: &Value) -> Value {
    match schema {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, v)| !(k.as_str() == "maxLength" && v.is_number()))
                .map(|(k, v)| (k.clone(), without_max_length_keyword(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_max_length_keyword).collect()),
        other => other.clone(),
    }
}

/// Bounds of a model's answer; the schemas send them and the parsers truncate to them, so an
/// answer stays within them whether or not the server enforced the schema. String bounds are
/// in characters: JSON Schema's `maxLength` counts Unicode code points (JSON Schema Validation,
/// draft 2020-12, §6.3.1), and the parsers cut at a character boundary
/// ([`crate::evidence::truncate_chars`]). Strings with an `enum` (confidence, action kind,
/// severity) are bounded by it.
pub mod limits {
    /// A hypothesis statement (one sentence), characters.
    pub const STATEMENT: usize = 200;
    /// A cited record reference (`OBS-12`, `MEM-40`), characters.
    pub const CITE: usize = 16;
    /// A prior incident id (`INC-2026-0001`), characters.
    pub const INCIDENT_ID: usize = 16;
    /// Why a prior incident is relevant, characters.
    pub const WHY: usize = 200;
    /// An action kind as read on the rungs without a schema (before coercion), characters.
    pub const KIND: usize = 40;
    /// What an action acts on (a service, node, flag: title-sized), characters.
    pub const TARGET: usize = 120;
    /// Why an action, for people, characters.
    pub const RATIONALE: usize = 400;
    /// A post-mortem summary (one paragraph), characters.
    pub const SUMMARY: usize = 300;
    /// A post-mortem trigger, characters.
    pub const TRIGGER: usize = 150;
    /// One item of a post-mortem list (contributing factor, misleading hypothesis, action item,
    /// detection gap), characters.
    pub const LIST_ITEM: usize = 80;
    /// A lesson's ALWAYS or BECAUSE part, characters.
    pub const LESSON_PART: usize = 120;
    /// A lesson's SCOPE, characters.
    pub const SCOPE: usize = 60;
    /// Hypotheses in an investigation answer.
    pub const HYPOTHESES: usize = 3;
    /// Citations per hypothesis.
    pub const CITES: usize = 5;
    /// Prior incidents per hypothesis.
    pub const PRIOR_INCIDENTS: usize = 2;
    /// Actions in an investigation answer.
    pub const ACTIONS: usize = 5;
    /// Items of each post-mortem list. Two, with the bounds above, keep the whole post-mortem
    /// answer under ≈ 2,000 tokens even at one token per character (≈ 1,700 characters of
    /// strings): a small local model under a grammar fills strings and lists to their bounds,
    /// with digits and dots that are a token each, and SmolLM2-135M on 2 cores writes ≈ 25
    /// tokens/s, so the whole answer fits the 90 s timeout. With four items of 160 characters
    /// it ran into `max_tokens` instead of closing the object.
    pub const LIST_ITEMS: usize = 2;
    /// Lessons in a post-mortem answer.
    pub const LESSONS: usize = 2;
}

/// A JSON-schema string of at most `max` characters.
fn bounded_string(max: usize) -> Value {
    json!({"type": "string", "maxLength": max})
}

/// JSON schema of the investigation answer (strict mode: every property required, no options).
/// Every array has a `maxItems` and every string a `maxLength` or an `enum` ([`limits`];
/// OpenAI strict mode, vLLM, Ollama and llama.cpp's grammar accept both, and a server that
/// rejects `maxLength` gets the schema without it): a small local model under a grammar
/// otherwise repeats array items, or stays inside one string, until the reply is cut off at the
/// token limit.
pub fn investigation_schema() -> Value {
    use limits as l;
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["hypotheses", "actions"],
        "properties": {
            "hypotheses": {"type": "array", "maxItems": l::HYPOTHESES, "items": {
                "type": "object", "additionalProperties": false,
                "required": ["statement", "confidence", "cites", "prior_incidents"],
                "properties": {
                    "statement": bounded_string(l::STATEMENT),
                    "confidence": {"type": "string", "enum": ["low", "medium", "high"]},
                    "cites": {"type": "array", "maxItems": l::CITES, "items": bounded_string(l::CITE)},
                    "prior_incidents": {"type": "array", "maxItems": l::PRIOR_INCIDENTS, "items": {
                        "type": "object", "additionalProperties": false, "required": ["id", "why"],
                        "properties": {"id": bounded_string(l::INCIDENT_ID), "why": bounded_string(l::WHY)}}}
                }}},
            "actions": {"type": "array", "maxItems": l::ACTIONS, "items": {
                "type": "object", "additionalProperties": false,
                "required": ["kind", "target", "rationale", "hypothesis"],
                "properties": {
                    "kind": {"type": "string", "enum": crate::domain::ActionKind::ALL.iter().map(|k| k.as_str()).collect::<Vec<_>>()},
                    "target": bounded_string(l::TARGET),
                    "rationale": bounded_string(l::RATIONALE),
                    "hypothesis": {"type": "integer"}
                }}}
        }
    })
}

/// JSON schema of the post-mortem answer (strict mode: every property required, no options;
/// every string bounded by a `maxLength` or an `enum`, every array by `maxItems`, as in
/// [`investigation_schema`] — see [`limits`]). Only the prose the model may write; facts
/// (impact, actions and their outcomes, root cause) are not asked for.
pub fn postmortem_schema() -> Value {
    use limits as l;
    let strings =
        json!({"type": "array", "maxItems": l::LIST_ITEMS, "items": bounded_string(l::LIST_ITEM)});
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["summary", "trigger", "contributing_factors", "misleading_hypotheses",
                     "lessons", "action_items", "detection_gaps"],
        "properties": {
            "summary": bounded_string(l::SUMMARY),
            "trigger": bounded_string(l::TRIGGER),
            "contributing_factors": strings,
            "misleading_hypotheses": strings,
            "lessons": {"type": "array", "maxItems": l::LESSONS, "items": {
                "type": "object", "additionalProperties": false,
                "required": ["always", "because", "scope", "severity"],
                "properties": {
                    "always": bounded_string(l::LESSON_PART),
                    "because": bounded_string(l::LESSON_PART),
                    "scope": bounded_string(l::SCOPE),
                    "severity": {"type": "string", "enum": ["critical", "high", "medium", "low"]}
                }}},
            "action_items": strings,
            "detection_gaps": strings
        }
    })
}
