//! The JSON schemas sent with the structured-output rungs and their bounds ([`limits`]): every
//! string has a `maxLength` (or an `enum`) and every array a `maxItems`. Derived (schemars) from
//! the reply types below, which say what a reply holds; `parse.rs` reads replies leniently.

use schemars::generate::SchemaSettings;
use schemars::transform::RecursiveTransform;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde_json::Value;

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

/// The schema of `T` as the model servers take it: inlined (no `$ref`), without `$schema`,
/// titles, descriptions or integer formats (strict mode accepts only the keywords it knows).
fn schema_of<T: JsonSchema>() -> Value {
    let settings = SchemaSettings::draft2020_12().with(|s| {
        s.inline_subschemas = true;
        s.meta_schema = None;
        s.transforms
            .push(Box::new(RecursiveTransform(|schema: &mut Schema| {
                for keyword in ["title", "description", "format"] {
                    schema.remove(keyword);
                }
            })));
    });
    SchemaGenerator::new(settings)
        .into_root_schema_for::<T>()
        .to_value()
}

// The reply types exist for their schemas: replies are read leniently (`parse.rs`), never into
// these. Strict mode: every property required, no `Option`, no other properties.

/// The investigation answer.
#[derive(JsonSchema)]
#[schemars(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema's shape: replies are read by parse.rs")]
struct InvestigationReply {
    #[schemars(length(max = limits::HYPOTHESES))]
    hypotheses: Vec<Hypothesis>,
    #[schemars(length(max = limits::ACTIONS))]
    actions: Vec<Action>,
}

/// One hypothesis of [`InvestigationReply`].
#[derive(JsonSchema)]
#[schemars(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema's shape: replies are read by parse.rs")]
struct Hypothesis {
    #[schemars(length(max = limits::STATEMENT))]
    statement: String,
    confidence: Confidence,
    #[schemars(length(max = limits::CITES), inner(length(max = limits::CITE)))]
    cites: Vec<String>,
    #[schemars(length(max = limits::PRIOR_INCIDENTS))]
    prior_incidents: Vec<PriorIncident>,
}

/// How sure a [`Hypothesis`] is.
#[derive(JsonSchema)]
#[schemars(rename_all = "lowercase")]
#[expect(dead_code, reason = "a schema's shape: replies are read by parse.rs")]
enum Confidence {
    Low,
    Medium,
    High,
}

/// A prior incident a [`Hypothesis`] leans on.
#[derive(JsonSchema)]
#[schemars(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema's shape: replies are read by parse.rs")]
struct PriorIncident {
    #[schemars(length(max = limits::INCIDENT_ID))]
    id: String,
    #[schemars(length(max = limits::WHY))]
    why: String,
}

/// A recommended action of [`InvestigationReply`].
#[derive(JsonSchema)]
#[schemars(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema's shape: replies are read by parse.rs")]
struct Action {
    #[schemars(schema_with = "action_kind")]
    kind: String,
    #[schemars(length(max = limits::TARGET))]
    target: String,
    #[schemars(length(max = limits::RATIONALE))]
    rationale: String,
    hypothesis: i64,
}

/// An action kind: one of [`crate::domain::ActionKind::ALL`].
fn action_kind(_: &mut SchemaGenerator) -> Schema {
    let kinds: Vec<&str> = crate::domain::ActionKind::ALL
        .iter()
        .map(|k| k.as_str())
        .collect();
    json_schema!({"type": "string", "enum": kinds})
}

/// The post-mortem answer: only the prose the model may write.
#[derive(JsonSchema)]
#[schemars(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema's shape: replies are read by parse.rs")]
struct PostmortemReply {
    #[schemars(length(max = limits::SUMMARY))]
    summary: String,
    #[schemars(length(max = limits::TRIGGER))]
    trigger: String,
    #[schemars(length(max = limits::LIST_ITEMS), inner(length(max = limits::LIST_ITEM)))]
    contributing_factors: Vec<String>,
    #[schemars(length(max = limits::LIST_ITEMS), inner(length(max = limits::LIST_ITEM)))]
    misleading_hypotheses: Vec<String>,
    #[schemars(length(max = limits::LESSONS))]
    lessons: Vec<Lesson>,
    #[schemars(length(max = limits::LIST_ITEMS), inner(length(max = limits::LIST_ITEM)))]
    action_items: Vec<String>,
    #[schemars(length(max = limits::LIST_ITEMS), inner(length(max = limits::LIST_ITEM)))]
    detection_gaps: Vec<String>,
}

/// A lesson of [`PostmortemReply`].
#[derive(JsonSchema)]
#[schemars(deny_unknown_fields)]
#[expect(dead_code, reason = "a schema's shape: replies are read by parse.rs")]
struct Lesson {
    #[schemars(length(max = limits::LESSON_PART))]
    always: String,
    #[schemars(length(max = limits::LESSON_PART))]
    because: String,
    #[schemars(length(max = limits::SCOPE))]
    scope: String,
    severity: LessonSeverity,
}

/// How bad ignoring a [`Lesson`] is.
#[derive(JsonSchema)]
#[schemars(rename_all = "lowercase")]
#[expect(dead_code, reason = "a schema's shape: replies are read by parse.rs")]
enum LessonSeverity {
    Critical,
    High,
    Medium,
    Low,
}

/// JSON schema of the investigation answer (strict mode: every property required, no options).
/// Every array has a `maxItems` and every string a `maxLength` or an `enum` ([`limits`];
/// OpenAI strict mode, vLLM, Ollama and llama.cpp's grammar accept both, and a server that
/// rejects `maxLength` gets the schema without it): a small local model under a grammar
/// otherwise repeats array items, or stays inside one string, until the reply is cut off at the
/// token limit.
pub fn investigation_schema() -> Value {
    schema_of::<InvestigationReply>()
}

/// JSON schema of the post-mortem answer (strict mode: every property required, no options;
/// every string bounded by a `maxLength` or an `enum`, every array by `maxItems`, as in
/// [`investigation_schema`] — see [`limits`]). Only the prose the model may write; facts
/// (impact, actions and their outcomes, root cause) are not asked for.
pub fn postmortem_schema() -> Value {
    schema_of::<PostmortemReply>()
}
