//! The prompts and their budgets: the investigation and post-mortem prompts, each built within
//! a budget in characters, and the token arithmetic that fits prompt and reply into the
//! server's context ([`fit_budget`], [`reply_token_bound`]).

use serde_json::Value;

use super::untrusted::{neutralize, wrap};
use crate::analyst::InvestigationInput;
use crate::domain::postmortem::{DraftFacts, Postmortem};
use crate::evidence::truncate_chars;

/// Characters per token when a prompt is measured against a known context: log lines, ids and
/// JSON tokenize densely (≈ 3 characters per token), so this errs on the side of fitting.
pub(super) const FIT_CHARS_PER_TOKEN: usize = 3;
/// Tokens a chat template adds around the two messages and the start of the reply.
pub(super) const TEMPLATE_TOKENS: u32 = 48;
/// The least a fitted user prompt gets (the incident itself), unless that leaves the reply less
/// than half the room.
pub(super) const MIN_USER_PROMPT_TOKENS: u32 = 256;
/// Tokens allowed outside the JSON of a reply (a code fence, a line of prose on the plain rung).
pub(super) const REPLY_SLACK_TOKENS: u64 = 32;

/// The tokens `chars` characters of prompt take, as [`fit_budget`] counts them.
pub fn estimate_tokens(chars: usize) -> u32 {
    u32::try_from(chars.div_ceil(FIT_CHARS_PER_TOKEN)).unwrap_or(u32::MAX)
}

/// The size of one request: the reply budget (`max_tokens`) and the user prompt's budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// `max_tokens`.
    pub reply_tokens: u32,
    /// The user message's budget, in characters.
    pub user_prompt_chars: usize,
}

/// Fits one request into the server's `context` (tokens; `None`: unknown). `fixed_prompt_chars`
/// is the system message (with the schema on the lower rungs), `reply_bound` the reply's bound
/// ([`reply_token_bound`]), `reply_worst` its bound at one token per character
/// ([`reply_token_worst`]), `token_budget` the configured prompt budget.
///
/// Unknown context: the reply gets its bound and the user prompt `token_budget` at ≈ 4
/// characters per token, as configured. Known context: the prompt is measured at
/// [`FIT_CHARS_PER_TOKEN`], a margin of 5 % (at least 32 tokens) and the chat template are set
/// aside, the reply gets its bound (but leaves the user prompt at least 256 tokens, or half the
/// room), and room the configured prompt budget does not need goes to the reply too, up to
/// `reply_worst`: a small model may write digits and dots, one token each, and a reply cut at
/// `max_tokens` is lost. The user prompt gets the rest, at most `token_budget`. So prompt +
/// reply ≤ context.
pub fn fit_budget(
    context: Option<u32>,
    fixed_prompt_chars: usize,
    reply_bound: u32,
    reply_worst: u32,
    token_budget: usize,
) -> Budget {
    let Some(ctx) = context else {
        return Budget {
            reply_tokens: reply_bound,
            user_prompt_chars: token_budget.saturating_mul(4),
        };
    };
    let fixed = estimate_tokens(fixed_prompt_chars).saturating_add(TEMPLATE_TOKENS);
    let margin = (ctx / 20).max(32);
    let room = ctx.saturating_sub(fixed).saturating_sub(margin);
    let spare = room.saturating_sub(u32::try_from(token_budget).unwrap_or(u32::MAX));
    let reply = reply_bound
        .min(room.saturating_sub(MIN_USER_PROMPT_TOKENS).max(room / 2))
        .max(reply_worst.min(spare))
        .max(1);
    let user_tokens = (room.saturating_sub(reply) as usize).min(token_budget);
    Budget {
        reply_tokens: reply,
        user_prompt_chars: user_tokens.saturating_mul(FIT_CHARS_PER_TOKEN),
    }
}

/// The most tokens a reply valid under `schema` can take, or `None` when a string or an array
/// of it is unbounded. Strings count their `maxLength` (or longest `enum` value) at
/// [`FIT_CHARS_PER_TOKEN`] characters per token plus the quotes; integers and numbers 8 tokens;
/// every key, separator and the whitespace a grammar allows around it 2 tokens; arrays their
/// `maxItems` items. Plus [`REPLY_SLACK_TOKENS`] for a fence or a line of prose.
pub fn reply_token_bound(schema: &Value) -> Option<u32> {
    bound_at(schema, FIT_CHARS_PER_TOKEN)
}

/// [`reply_token_bound`] at one token per character: the most a reply can take when the model
/// fills its strings with characters that are a token each (SmolLM2-135M under llama.cpp's
/// grammar filled a lesson with `1.1.1.1…`, 1,261 characters in 1,080 tokens).
pub fn reply_token_worst(schema: &Value) -> Option<u32> {
    bound_at(schema, 1)
}

/// The reply bound of `schema` with strings at `chars_per_token`.
fn bound_at(schema: &Value, chars_per_token: usize) -> Option<u32> {
    let text = |chars: usize| chars.div_ceil(chars_per_token) as u64;
    walk(schema, &text).and_then(|t| u32::try_from(t + REPLY_SLACK_TOKENS).ok())
}

/// Tokens of a reply valid under `s`, strings counted by `text`.
fn walk(s: &Value, text: &dyn Fn(usize) -> u64) -> Option<u64> {
    const SEP: u64 = 2;
    match s.get("type").and_then(Value::as_str)? {
        "object" => {
            let mut t = 2;
            for (k, v) in s.get("properties")?.as_object()? {
                // Keys are the schema's, written by the grammar: counted at the usual rate.
                t += k.chars().count().div_ceil(FIT_CHARS_PER_TOKEN) as u64
                    + 3
                    + SEP
                    + walk(v, text)?;
            }
            Some(t)
        }
        "array" => {
            let n = s.get("maxItems")?.as_u64()?;
            Some(2 + n * (walk(s.get("items")?, text)? + SEP))
        }
        "string" => match s.get("enum").and_then(Value::as_array) {
            Some(e) => {
                let longest = e
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|x| x.chars().count())
                    .max()?;
                Some(2 + longest.div_ceil(FIT_CHARS_PER_TOKEN) as u64)
            }
            None => Some(2 + text(usize::try_from(s.get("maxLength")?.as_u64()?).ok()?)),
        },
        "integer" | "number" => Some(8),
        "boolean" | "null" => Some(2),
        _ => None,
    }
}

/// What the system prompt tells the model, including how to use memory.
pub const SYSTEM_PROMPT: &str = "You are an incident-response analyst. From the incident, its observations (OBS-n) and \
the organization's memory (MEM-n, with the incident INC-… each came from), propose root-cause hypotheses and actions.\n\
Rules:\n- Cite the OBS-n and MEM-n ids each hypothesis rests on; cite prior incident ids (INC-…) and say why each is relevant.\n\
- Do NOT recommend an action recorded in memory as not working (remediation_failure) unless you say why this time differs.\n\
- Follow the rules (lessons, ALWAYS/BECAUSE) that apply.\n- Use only these action kinds: {kinds}.\n\
- Confidence: low, medium or high. Never invent ids.";

/// Builds the user prompt within `budget_chars`: the incident first, then observations and
/// memories by rank until the budget is spent, with a note of what was left out. Every text of
/// the incident is placed, neutralised, inside the untrusted block ([`super::untrusted`]) and
/// redacted with the incident's own map ([`InvestigationInput::redactor`]), so an address has the
/// placeholder it has in the stored records.
pub fn user_prompt(input: &InvestigationInput, budget_chars: usize) -> String {
    let i = &input.incident;
    let n = neutralize;
    let head = format!("Incident {} ({}).\n", i.id, i.severity);
    let room = budget_chars.saturating_sub(head.len() + FRAME_CHARS);
    let mut out = format!(
        "Service: {}\nTitle: {}\nDescription: {}\nFailure modes: {}\n\nObservations:\n",
        n(&i.service),
        n(&i.title),
        n(truncate_chars(&i.description, 1000)),
        n(&input.failure_modes.join(", "))
    );
    let mut left_obs = 0;
    for o in &input.observations {
        let line = format!("- {}: {}\n", o.reference(), n(truncate_chars(&o.text, 400)));
        if out.len() + line.len() > room * 2 / 3 {
            left_obs += 1;
            continue;
        }
        out.push_str(&line);
    }
    out.push_str("\nOrganizational memory:\n");
    let mut left_mem = 0;
    for r in &input.recalled {
        let m = &r.memory;
        // Marks (superseded, contradicted, stale, weak match) travel with the record, so a
        // replaced record is never read as a plain fact.
        let marks = if r.marks.is_empty() {
            String::new()
        } else {
            format!("; {}", r.marks.join(", "))
        };
        let line = format!(
            "- MEM-{} [{}{}{marks}]: {}\n",
            m.id,
            m.kind,
            m.incident_id
                .as_deref()
                .map(|x| format!(", from {}", n(x)))
                .unwrap_or_default(),
            n(truncate_chars(&m.text, 400))
        );
        if out.len() + line.len() > room {
            left_mem += 1;
            continue;
        }
        out.push_str(&line);
    }
    if input.recalled.is_empty() {
        out.push_str("(none relevant)\n");
    }
    if left_obs + left_mem > 0 {
        out.push_str(&format!(
            "\n(Left out for length: {left_obs} observations, {left_mem} memories.)\n"
        ));
    }
    let body = input.redactor.clone().redact(&out);
    wrap(&head, &body, budget_chars)
}

/// Characters the untrusted block's frame (preamble, delimiters, reminder) takes.
const FRAME_CHARS: usize = 900;

/// What the system prompt tells the model when it drafts a post-mortem.
pub const POSTMORTEM_PROMPT: &str = "You draft blameless incident post-mortems from the facts given. \
Use only those facts: never invent actions, outcomes, times or incident ids.\n\
Write:\n- summary: one paragraph on what happened and how it was resolved.\n\
- trigger: what set it off, or \"\" when the facts do not say.\n- contributing_factors: what made it possible or worse.\n\
- misleading_hypotheses: first explanations that turned out wrong.\n\
- lessons: rules, each with always (an imperative starting with a verb), because (why, naming \
the incident {id}), scope (the service and/or failure modes it applies to) and severity \
(critical, high, medium or low). An action that did not resolve the incident must become a \
lesson warning against relying on it.\n- action_items: concrete follow-ups.\n\
- detection_gaps: how detection fell short.";

/// Builds the post-mortem prompt within `budget_chars`: the incident, its resolution and the
/// actions with their outcomes first, then observations by rank until the budget is spent, with
/// a note of what was left out, inside the untrusted block. Redacted again as stored text.
pub fn postmortem_prompt(f: &DraftFacts, builtin: &Postmortem, budget_chars: usize) -> String {
    let i = &f.incident;
    let t = |ts: Option<jiff::Timestamp>| {
        ts.map_or_else(
            || "unknown".to_string(),
            |t| t.strftime("%Y-%m-%d %H:%M UTC").to_string(),
        )
    };
    let n = neutralize;
    let head = format!("Incident {} ({}).\n", i.id, i.severity);
    let room = budget_chars.saturating_sub(head.len() + FRAME_CHARS);
    let mut out = format!(
        "Service: {}\nTitle: {}\nDescription: {}\nResolution summary: {}\nRoot cause (confirmed by the responders): {}\nFailure modes: {}\n",
        n(&i.service),
        n(&i.title),
        n(truncate_chars(&i.description, 1000)),
        n(truncate_chars(
            i.summary.as_deref().unwrap_or("not given"),
            1000
        )),
        n(truncate_chars(
            i.root_cause.as_deref().unwrap_or("not given"),
            1000
        )),
        if f.failure_modes.is_empty() {
            "none tagged".to_string()
        } else {
            n(&f.failure_modes.join(", "))
        },
    );
    let im = &builtin.impact;
    out.push_str(&format!(
        "Impact: started {}, detected {}, mitigated {}, resolved {} (time to detect {} min, to resolve {} min)\n\nActions taken and their outcomes:\n",
        t(im.started_at),
        t(im.detected_at),
        t(im.mitigated_at),
        t(im.resolved_at),
        im.time_to_detect_secs / 60,
        im.time_to_resolve_secs / 60
    ));
    if f.actions.is_empty() {
        out.push_str("(none recorded)\n");
    }
    for (a, _) in &f.actions {
        out.push_str(&format!(
            "- {} on {}: {}{}\n",
            a.kind,
            n(&a.target),
            a.outcome.replace('_', " "),
            if a.note.is_empty() {
                String::new()
            } else {
                format!(" — {}", n(truncate_chars(&a.note, 300)))
            }
        ));
    }
    if !f.misleading.is_empty() {
        out.push_str("\nHypotheses behind actions that failed (misleading):\n");
        for m in &f.misleading {
            out.push_str(&format!("- {}\n", n(truncate_chars(m, 300))));
        }
    }
    out.push_str("\nObservations, most salient first:\n");
    let mut left = 0;
    for o in &f.observations {
        let line = format!("- {}\n", n(truncate_chars(o, 400)));
        if out.len() + line.len() > room {
            left += 1;
            continue;
        }
        out.push_str(&line);
    }
    if f.observations.is_empty() {
        out.push_str("(none)\n");
    }
    if left > 0 {
        out.push_str(&format!("\n(Left out for length: {left} observations.)\n"));
    }
    wrap(
        &head,
        // Every text here was read back from the store, redacted with the incident's map: its
        // quads stay as that map decided them.
        &crate::evidence::redact::redact_stored(&out),
        budget_chars,
    )
}
