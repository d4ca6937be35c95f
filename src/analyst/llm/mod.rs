//! The LLM analyst: any OpenAI-compatible chat-completions server (OpenAI, Azure, Ollama, vLLM,
//! llama.cpp) through async-openai, with our own tolerant response types (`byot`) so replies
//! lacking optional fields (`id`, `created`, `usage`) are accepted.
//!
//! Structured-output ladder: `response_format: json_schema` → on a rejection naming the format,
//! `json_object` with the schema in the prompt → a plain prompt read by the tolerant parser. The
//! rung that answered is remembered for later calls. One timeout bounds the whole call; there are
//! no automatic retries. Everything sent is redacted and bounded to a token budget.
//!
//! Bounded answers: every string of both schemas has a `maxLength` and every array a `maxItems`
//! ([`limits`]), so a grammar-constrained server (llama.cpp, vLLM) cannot stay inside one string
//! until the token limit; the parsers truncate to the same bounds at a character boundary, so
//! the bounds hold whether or not the server enforced them. `max_tokens` is sized from those
//! bounds ([`reply_token_bound`]), and the prompt is trimmed so prompt and reply fit the
//! server's context ([`fit_budget`]): llama.cpp's `GET /props` (`n_ctx`) when it answers, else
//! [`LlmConfig::context_tokens`].
//!
//! Request shapes differ between servers: a 400 naming `maxLength` sends the schema without it
//! (the parsers still truncate), one naming `max_tokens` switches to `max_completion_tokens`
//! (OpenAI's reasoning models), one naming `temperature` or `seed` leaves it out; each is
//! remembered like the rung, on the analyst (in `AppState`). Temperature is 0 and the seed fixed
//! ([`SEED`]) so the same request gets the same answer. Error bodies are read in each server's
//! dialect.
//!
//! The same ladder drafts post-mortems ([`postmortem_schema`]): the model writes the prose and
//! the lessons (as ALWAYS/BECAUSE/SCOPE/SEVERITY rules); the facts stay the built-in draft's.
//!
//! By concern: [`client`] the HTTP calls (the analyst, the ladder, request-shape adaptations,
//! `/props`, the timeout); [`reply`] what a server sends back (its refusals, in each server's
//! dialect, and the reply's content); [`prompt`] the prompts and their budgets; [`schema`] the
//! JSON schemas and their bounds; [`parse`] reading a reply into an answer (tolerant JSON, field
//! synonyms, the bounds enforced again); [`untrusted`] the block every prompt holds the evidence
//! in, as data; [`verify`] the checks of a reply against that evidence (broad scopes, actions no
//! evidence supports, hypotheses citing none), which cap confidence and add a notice. This file
//! joins them into the [`Analyst`].

mod client;
mod parse;
mod prompt;
mod reply;
mod schema;
mod stream;
pub mod untrusted;
mod verify;

#[cfg(test)]
mod bounds;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod trust_tests;

use async_trait::async_trait;

pub use client::{CallReport, LlmAnalyst, LlmConfig, MAX_TIMEOUT, Rung, SEED, props_url};
pub use parse::{
    has_usable_items, output_from_json, parse_ref, postmortem_from_json, tolerant_json,
};
pub use prompt::{
    Budget, POSTMORTEM_PROMPT, SYSTEM_PROMPT, estimate_tokens, fit_budget, postmortem_prompt,
    reply_token_bound, reply_token_worst, user_prompt,
};
pub use reply::REPLY_TAIL_CHARS;
pub use schema::{investigation_schema, limits, postmortem_schema};

use super::{Analyst, AnalystError, AnalystOutput, InvestigationInput};
use crate::domain::postmortem::{DraftFacts, Postmortem};

#[async_trait]
impl Analyst for LlmAnalyst {
    fn name(&self) -> String {
        format!("llm:{}", self.config.model)
    }

    fn calls_a_server(&self) -> bool {
        true
    }

    async fn investigate(&self, input: &InvestigationInput) -> Result<AnalystOutput, AnalystError> {
        let kinds: Vec<&str> = crate::domain::ActionKind::ALL
            .iter()
            .map(|k| k.as_str())
            .collect();
        let system = format!(
            "{}\n{}",
            SYSTEM_PROMPT.replace("{kinds}", &kinds.join(", ")),
            untrusted::SYSTEM_RULE
        );
        let user = |budget_chars: usize| user_prompt(input, budget_chars);
        let schema = investigation_schema();
        let (v, rung, cut) = self.ask_json(&system, &user, "analysis", &schema).await?;
        let mut out = output_from_json(&v)?;
        out.notices.extend(cut);
        verify::check_reply(input, &mut out);
        out.dropped
            .iter_mut()
            .for_each(|d| d.push_str(&format!(" (rung {})", rung.as_str())));
        Ok(out)
    }

    async fn draft_postmortem(
        &self,
        facts: &DraftFacts,
        builtin: &Postmortem,
    ) -> Result<Postmortem, AnalystError> {
        let system = format!(
            "{}\n{}",
            POSTMORTEM_PROMPT.replace("{id}", facts.incident.id.as_str()),
            untrusted::SYSTEM_RULE
        );
        let user = |budget_chars: usize| postmortem_prompt(facts, builtin, budget_chars);
        // A cut draft keeps its complete sections; the built-in draft fills the rest.
        let (v, rung, _cut) = self
            .ask_json(&system, &user, "postmortem", &postmortem_schema())
            .await?;
        tracing::info!(rung = rung.as_str(), "model drafted the post-mortem");
        postmortem_from_json(&v, facts, builtin)
    }
}
