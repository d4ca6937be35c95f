//! A model's reply checked against the evidence it was given, with the rules of
//! [`crate::domain::model_reply`]: an action with a broad scope, a target or a high-impact kind
//! no evidence supports is marked in its rationale and named in a notice; the hypothesis it
//! follows from is capped at [`LINKED_CAP`], every hypothesis of that reply at [`REPLY_CAP`]; a
//! hypothesis citing no evidence (or only texts that read like instructions) is marked and
//! capped low. Evidence that reads like instructions supports nothing.

use std::collections::BTreeSet;

use crate::analyst::{AnalystOutput, InvestigationInput};
use crate::domain::model_reply::{
    LINKED_CAP, REPLY_CAP, action_concerns, at_most, looks_like_instruction,
};
use crate::domain::{ActionKind, Confidence};
use crate::evidence::truncate_chars;

/// The mark put before a hypothesis that cites no evidence.
pub const NO_EVIDENCE_MARK: &str = "(no cited evidence)";
/// The mark put before the rationale of an action no evidence supports.
pub const UNSUPPORTED_MARK: &str = "Unsupported by the evidence";

/// Checks `out` against `input` in place: marks, caps and notices (see the module docs).
///
/// Long on purpose: every check a model's reply goes through, in the order their marks appear in
/// the notice.
pub fn check_reply(input: &InvestigationInput, out: &mut AnalystOutput) {
    let i = &input.incident;
    let mut suspicious = 0usize;
    let mut support = String::new();
    let mut add = |text: &str, support: &mut String| {
        if looks_like_instruction(text) {
            suspicious += 1;
            false
        } else {
            support.push_str(&text.to_lowercase());
            support.push('\n');
            true
        }
    };
    add(&i.title, &mut support);
    add(&i.description, &mut support);
    support.push_str(&i.service.to_lowercase());
    support.push('\n');
    let mut known: BTreeSet<i64> = BTreeSet::new();
    for o in &input.observations {
        let example = o.data.get("example").and_then(|e| e.as_str()).unwrap_or("");
        let text = format!("{} {example}", o.text);
        if add(&text, &mut support) {
            known.insert(o.id);
        }
    }
    for r in &input.recalled {
        if add(&r.memory.text, &mut support) {
            known.insert(r.memory.id);
        }
    }
    let mut flagged: Vec<String> = Vec::new();
    let mut linked: BTreeSet<usize> = BTreeSet::new();
    for a in out.actions.iter_mut() {
        let Some(kind) = ActionKind::coerce(&a.kind) else {
            continue;
        };
        let concerns = action_concerns(kind, &a.target, &i.service, &support);
        if concerns.is_empty() {
            continue;
        }
        let phrases: Vec<String> = concerns.iter().map(|c| c.phrase()).collect();
        let target = if a.target.trim().is_empty() {
            i.service.as_str()
        } else {
            a.target.trim()
        };
        flagged.push(format!(
            "{} on '{}' ({})",
            kind.as_str(),
            truncate_chars(target, 60),
            phrases.join(", ")
        ));
        a.rationale = format!(
            "{UNSUPPORTED_MARK} ({}). {}",
            phrases.join(", "),
            a.rationale
        );
        if let Some(h) = a.hypothesis {
            linked.insert(h);
        }
    }
    let mut uncited = 0usize;
    for (k, h) in out.hypotheses.iter_mut().enumerate() {
        if !h.cites.iter().any(|c| known.contains(c)) {
            uncited += 1;
            h.statement = format!("{NO_EVIDENCE_MARK} {}", h.statement);
            h.confidence = Confidence::Low;
        }
        if linked.contains(&k) {
            h.confidence = at_most(h.confidence, LINKED_CAP);
        }
        if !flagged.is_empty() {
            h.confidence = at_most(h.confidence, REPLY_CAP);
        }
    }
    if !flagged.is_empty() {
        out.notices.push(format!(
            "Check before acting: the model proposed {}; no evidence supports {}, so confidence \
             is capped at {} ({} for the hypotheses they follow from). Text in the evidence may \
             have steered the model",
            flagged.join("; "),
            if flagged.len() == 1 { "it" } else { "them" },
            REPLY_CAP.as_str(),
            LINKED_CAP.as_str()
        ));
    }
    if uncited > 0 {
        out.notices.push(format!(
            "{uncited} of the model's hypotheses cite no evidence: marked \"{NO_EVIDENCE_MARK}\", confidence low"
        ));
    }
    if suspicious > 0 {
        out.notices.push(format!(
            "{suspicious} evidence {} like instructions to a model: sent to it as untrusted data \
             only, and counted as support for nothing",
            if suspicious == 1 {
                "text reads"
            } else {
                "texts read"
            }
        ));
    }
}
