//! The post-mortem: its sections, how a draft is built from what happened (templates, no model),
//! lessons as prescriptive rules, impact times whose durations are never negative, and the
//! Markdown export. Pure: the facts come in, the document goes out.
//!
//! The Markdown export is in `markdown`; the tests are in `postmortem/tests.rs`.

use serde::{Deserialize, Serialize};

use super::memory::{Rule, RuleSeverity};
use super::text::unix_newlines;
use super::{ActionKind, Incident, Severity};

mod markdown;

pub use markdown::md_text;

/// Impact timing. Instants are UTC; durations are whole seconds, never negative (a clock skew
/// that would make one negative gives 0).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Impact {
    /// When impact began (earliest evidence, else when the incident was opened).
    #[schema(value_type = Option<String>, format = DateTime)]
    pub started_at: Option<jiff::Timestamp>,
    /// When it was detected (incident opened).
    #[schema(value_type = Option<String>, format = DateTime)]
    pub detected_at: Option<jiff::Timestamp>,
    /// When it was mitigated (first action judged resolved / partially, else resolution).
    #[schema(value_type = Option<String>, format = DateTime)]
    pub mitigated_at: Option<jiff::Timestamp>,
    /// When the incident was resolved.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub resolved_at: Option<jiff::Timestamp>,
    /// detected − started, seconds, ≥ 0.
    pub time_to_detect_secs: i64,
    /// resolved − started, seconds, ≥ 0.
    pub time_to_resolve_secs: i64,
    /// Who or what was affected, in words.
    pub description: String,
    /// Evidence whose first line lies outside the incident's window (a paste of old logs, or
    /// lines dated after it ended), left out of these times: one line each, e.g. `OBS-12: first
    /// line 2008-05-14 10:00 UTC, 6601 d 2 h before the incident was opened`. Issue #49.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<String>,
}

impl Impact {
    /// Computes the durations from the instants (0 when an instant is missing or out of order).
    pub fn with_durations(mut self) -> Self {
        let secs = |a: Option<jiff::Timestamp>, b: Option<jiff::Timestamp>| match (a, b) {
            (Some(a), Some(b)) => (b.as_second() - a.as_second()).max(0),
            _ => 0,
        };
        self.time_to_detect_secs = secs(self.started_at, self.detected_at);
        self.time_to_resolve_secs = secs(self.started_at, self.resolved_at);
        self
    }
}

/// An action and what came of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ActionOutcome {
    /// The action.
    pub kind: ActionKind,
    /// Its target.
    pub target: String,
    /// The verdict (`resolved`, `did_not_resolve`, …) or `rejected`.
    pub outcome: String,
    /// The engineer's note or the rejection reason.
    pub note: String,
    /// Why it was approved although it repeated a known dead end (what was different this
    /// time); empty when it carried no dead-end banner.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub dead_end_reason: String,
}

/// A post-mortem document.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Postmortem {
    /// What happened, in a paragraph (Markdown).
    pub summary: String,
    /// Timing and who was affected.
    pub impact: Impact,
    /// Symptoms people and monitors saw.
    #[serde(default)]
    pub symptoms: Vec<String>,
    /// The confirmed root cause.
    pub root_cause: String,
    /// What set it off.
    pub trigger: String,
    /// What made it possible or worse.
    #[serde(default)]
    pub contributing_factors: Vec<String>,
    /// Actions that helped.
    #[serde(default)]
    pub what_worked: Vec<ActionOutcome>,
    /// Actions that did NOT help or made it worse.
    #[serde(default)]
    pub what_did_not_work: Vec<ActionOutcome>,
    /// Recommendations rejected, with the reason.
    #[serde(default)]
    pub rejected: Vec<ActionOutcome>,
    /// First explanations that turned out wrong.
    #[serde(default)]
    pub misleading_hypotheses: Vec<String>,
    /// Lessons as rules.
    #[serde(default)]
    pub lessons: Vec<Rule>,
    /// Follow-ups.
    #[serde(default)]
    pub action_items: Vec<String>,
    /// How detection fell short.
    #[serde(default)]
    pub detection_gaps: Vec<String>,
}

/// What the draft is built from.
#[derive(Debug, Clone)]
pub struct DraftFacts {
    /// The incident (with summary and root cause from resolution).
    pub incident: Incident,
    /// Failure-mode tags of the incident.
    pub failure_modes: Vec<String>,
    /// Observation statements, most salient first.
    pub observations: Vec<String>,
    /// The first-seen instant of each observation with one, by its reference (`OBS-12`): the
    /// earliest inside the incident's window starts the impact
    /// ([`super::insights::first_signal`]); the others are left out and named.
    pub evidence_first_seen: Vec<(String, jiff::Timestamp)>,
    /// Approved actions with verdicts (and when the verdict was given), rejected ones with reasons.
    pub actions: Vec<(ActionOutcome, Option<jiff::Timestamp>)>,
    /// Hypotheses behind actions that failed (misleading) — statements.
    pub misleading: Vec<String>,
}

/// Rule severity for an incident severity: SEV1 → critical … SEV4 → low.
pub fn rule_severity(s: Severity) -> RuleSeverity {
    match s {
        Severity::Sev1 => RuleSeverity::Critical,
        Severity::Sev2 => RuleSeverity::High,
        Severity::Sev3 => RuleSeverity::Medium,
        Severity::Sev4 => RuleSeverity::Low,
    }
}

/// Builds the draft from the facts (the built-in analyst's templates).
pub fn draft(f: &DraftFacts) -> Postmortem {
    let i = &f.incident;
    let scope = if f.failure_modes.is_empty() {
        i.service.clone()
    } else {
        format!("{}; {}", i.service, f.failure_modes.join(", "))
    };
    let root_cause = i.root_cause.clone().unwrap_or_default();
    let impact = impact_of(f);
    let outcome = |o: &str| {
        f.actions
            .iter()
            .map(|(a, _)| a)
            .filter(|a| a.outcome == o)
            .cloned()
            .collect::<Vec<_>>()
    };
    let mut what_worked = outcome("resolved");
    what_worked.extend(outcome("partially_resolved"));
    let mut what_did_not_work = outcome("did_not_resolve");
    what_did_not_work.extend(outcome("made_worse"));
    let rejected = outcome("rejected");
    let severity = rule_severity(i.severity);
    // The root cause goes into rules and action items whole: every sentence (up to a length),
    // quoted after a colon, never spliced into a template phrase where a negation or a second
    // clause would turn it into another statement.
    let cause = whole_sentences(&root_cause, 300);
    let lessons = draft_lessons(f, &what_did_not_work, &cause, &scope, severity);
    let trigger = draft_trigger(&f.failure_modes);
    let mut detection_gaps = Vec::new();
    if impact.time_to_detect_secs > 600 {
        detection_gaps.push(format!(
            "Detected {} after impact began: alert earlier on the first symptom",
            duration(impact.time_to_detect_secs)
        ));
    }
    let action_items = draft_action_items(f, &what_did_not_work, &cause);
    let misleading_hypotheses = f
        .misleading
        .iter()
        .filter(|h| !names_root_cause(h, &root_cause))
        .cloned()
        .collect();
    Postmortem {
        summary: i.summary.clone().unwrap_or_else(|| i.title.clone()),
        impact,
        symptoms: f.observations.iter().take(5).cloned().collect(),
        root_cause,
        trigger,
        contributing_factors: Vec::new(),
        what_worked,
        what_did_not_work,
        rejected,
        misleading_hypotheses,
        lessons,
        action_items,
        detection_gaps,
    }
}

/// The draft's impact: started at the earliest evidence inside the incident's window (or the
/// opening), mitigated by the first resolving verdict (or the resolution), with its durations;
/// evidence outside the window is left out and named (issue #49: a paste of logs from 2008 is
/// not "Time to detect: 6601 d").
fn impact_of(f: &DraftFacts) -> Impact {
    let i = &f.incident;
    let mitigated = f
        .actions
        .iter()
        .filter(|(a, _)| a.outcome == "resolved" || a.outcome == "partially_resolved")
        .filter_map(|(_, at)| *at)
        .min()
        .or(i.resolved_at);
    let end = i.resolved_at.unwrap_or(i.opened_at);
    let instants: Vec<jiff::Timestamp> = f.evidence_first_seen.iter().map(|(_, t)| *t).collect();
    let (first, _) = super::insights::first_signal(i.opened_at, end, &instants);
    let from = i.opened_at - super::insights::MAX_DETECTION_LEAD;
    let mut left_out: Vec<(&String, jiff::Timestamp)> = f
        .evidence_first_seen
        .iter()
        .filter(|(_, t)| *t < from || *t > end.max(i.opened_at))
        .map(|(r, t)| (r, *t))
        .collect();
    left_out.sort_by_key(|(_, t)| *t);
    let left_out = left_out
        .into_iter()
        .map(|(r, t)| {
            let (secs, side) = if t < i.opened_at {
                (
                    i.opened_at.as_second() - t.as_second(),
                    "before the incident was opened",
                )
            } else {
                (t.as_second() - end.as_second(), "after it was resolved")
            };
            format!(
                "{r}: first line {}, {} {side}",
                t.strftime("%Y-%m-%d %H:%M UTC"),
                duration(secs)
            )
        })
        .collect();
    Impact {
        started_at: Some(first.map_or(i.opened_at, |e| e.min(i.opened_at))),
        detected_at: Some(i.opened_at),
        mitigated_at: mitigated,
        resolved_at: i.resolved_at,
        time_to_detect_secs: 0,
        time_to_resolve_secs: 0,
        description: format!("{} on {}: {}", i.severity, i.service, i.title),
        left_out,
    }
    .with_durations()
}

/// The draft's lessons, the root cause quoted once (issue #49: not once per rule and again in
/// its BECAUSE): with actions that did not work, one rule to rule the root cause out before
/// them; without, one rule to check for the root cause first. None without either.
fn draft_lessons(
    f: &DraftFacts,
    what_did_not_work: &[ActionOutcome],
    cause: &str,
    scope: &str,
    severity: RuleSeverity,
) -> Vec<Rule> {
    let i = &f.incident;
    let cause_tail = if cause.is_empty() {
        String::new()
    } else {
        format!(": {cause}")
    };
    let tags = if f.failure_modes.is_empty() {
        String::new()
    } else {
        format!(" ({})", f.failure_modes.join(", "))
    };
    if !what_did_not_work.is_empty() {
        let mut kinds: Vec<String> = Vec::new();
        for a in what_did_not_work {
            let label = a.kind.label().to_lowercase();
            if !kinds.contains(&label) {
                kinds.push(label);
            }
        }
        let what = what_did_not_work
            .iter()
            .map(|a| {
                format!(
                    "{} {}{}",
                    a.kind.label().to_lowercase(),
                    if a.outcome == "made_worse" {
                        "made it worse"
                    } else {
                        "did not resolve it"
                    },
                    if a.note.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", one_line(&a.note))
                    }
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        return vec![Rule {
            always: format!(
                "Before you {} on {}, rule out the root cause found in {}{cause_tail}",
                or_list(&kinds),
                i.service,
                i.id
            ),
            because: format!("During {}{tags} {what}", i.id),
            scope: scope.to_string(),
            severity,
        }];
    }
    if cause.is_empty() {
        return Vec::new();
    }
    vec![Rule {
        always: format!(
            "When {} shows {}, first check whether the root cause of {} is back{cause_tail}",
            i.service,
            if f.failure_modes.is_empty() {
                "these symptoms".to_string()
            } else {
                f.failure_modes.join(" / ").replace('_', " ")
            },
            i.id
        ),
        because: format!("It was the confirmed root cause of {}", i.id),
        scope: scope.to_string(),
        severity,
    }]
}

/// `a`, `a or b`, `a, b or c`.
fn or_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

/// The draft's trigger, from the failure modes (a deploy or a config change), else empty: the
/// form shows a placeholder and confirm waits until a person writes one
/// ([`Postmortem::has_trigger`]).
fn draft_trigger(failure_modes: &[String]) -> String {
    if failure_modes.iter().any(|t| t == "deploy_change") {
        "A deploy shortly before the impact began".to_string()
    } else if failure_modes.iter().any(|t| t == "config_change") {
        "A configuration or feature-flag change shortly before the impact began".to_string()
    } else {
        String::new()
    }
}

/// The draft's action items: a regression test or alert for the root cause, and a runbook
/// update per action that did not work.
fn draft_action_items(
    f: &DraftFacts,
    what_did_not_work: &[ActionOutcome],
    cause: &str,
) -> Vec<String> {
    let i = &f.incident;
    let mut action_items = vec![if cause.is_empty() {
        format!(
            "Add a regression test or an alert for the root cause of {}",
            i.id
        )
    } else {
        format!(
            "Add a regression test or an alert for the root cause of {}: {cause}",
            i.id
        )
    }];
    for a in what_did_not_work {
        action_items.push(format!(
            "Update the {} runbook: {} does not fix this failure mode",
            i.service,
            a.kind.label().to_lowercase()
        ));
    }
    action_items
}

/// Byte offset of the end of the first sentence of `t`: the first line break, or the first `.`,
/// `!` or `?` followed by white space or the end. A dot inside a token (`2.14.1`, `db.internal`,
/// `e.g.x`) ends nothing.
fn sentence_end(t: &str) -> usize {
    let mut chars = t.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c == '\n' {
            return i;
        }
        if matches!(c, '.' | '!' | '?') && chars.peek().is_none_or(|(_, n)| n.is_whitespace()) {
            return i;
        }
    }
    t.len()
}

/// The whole sentences of `s` that fit in `max` characters (at least the first, whole), on one
/// line, without the final full stop. Sentence ends as in [`sentence_end`], so version numbers
/// and host names stay whole; negations and second clauses stay in.
fn whole_sentences(s: &str, max: usize) -> String {
    let mut rest = one_line(s);
    let mut out = String::new();
    while !rest.is_empty() {
        let end = sentence_end(&rest);
        let stop = rest[end..].chars().next().map_or(0, char::len_utf8);
        let sentence = rest[..end + stop].trim().to_string();
        if !out.is_empty() && out.chars().count() + 1 + sentence.chars().count() > max {
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&sentence);
        rest = rest[end + stop..].trim_start().to_string();
    }
    out.trim_end_matches('.').trim_end().to_string()
}

/// `s` on one line: line breaks (any style) become spaces, runs of white space one space.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Lower-case word stems (first four letters) of the content words of `s`: enough to see that
/// "pool exhausted" and "exhausting the pool" speak of the same thing. Numbers are not words.
fn stems(s: &str) -> std::collections::BTreeSet<String> {
    const STOP: &[&str] = &[
        "the", "and", "for", "was", "were", "are", "not", "but", "with", "from", "that", "this",
        "into", "than", "then", "its", "too", "one", "all", "any", "out", "per", "same", "cause",
        "caused", "because", "while", "when", "which", "there", "their", "they", "has", "had",
        "have", "been", "being", "does", "did", "can", "could", "would", "should", "our",
    ];
    s.split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .filter(|w| w.chars().count() >= 3 && !STOP.contains(&w.as_str()))
        .filter(|w| !w.chars().all(|c| c.is_ascii_digit()))
        .map(|w| w.chars().take(4).collect())
        .collect()
}

/// The clauses of `s` (split at `.`, `;`, `,`, `:` and line breaks) that deny nothing: "the
/// pool size was NOT the cause; a leak was" keeps only "a leak was".
fn affirmed_clauses(s: &str) -> String {
    const NEGATIONS: &[&str] = &["not", "no", "never", "neither", "nor", "without", "ruled"];
    s.split(['.', ';', ',', ':', '\n'])
        .filter(|clause| {
            !clause
                .split(|c: char| !c.is_alphanumeric() && c != '\'')
                .any(|w| {
                    let w = w.to_lowercase();
                    NEGATIONS.contains(&w.as_str()) || w.ends_with("n't")
                })
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether the hypothesis `h` names the confirmed root cause: the content words (by stem) they
/// share are at least half of the shorter one's, or at least four. Clauses of the root cause
/// that deny something ("X was not the cause") do not count. Such a hypothesis was right even
/// if an action taken on it failed, so it is not "misleading".
pub fn names_root_cause(h: &str, root_cause: &str) -> bool {
    let (h, rc) = (stems(h), stems(&affirmed_clauses(root_cause)));
    if h.is_empty() || rc.is_empty() {
        return false;
    }
    let shared = h.intersection(&rc).count();
    shared >= 4 || shared * 2 >= h.len().min(rc.len())
}

fn duration(secs: i64) -> String {
    let (d, h, m, s) = (
        secs / 86_400,
        (secs % 86_400) / 3600,
        (secs % 3600) / 60,
        secs % 60,
    );
    if d > 0 {
        format!("{d} d {h} h")
    } else if h > 0 {
        format!("{h} h {m} min")
    } else if m > 0 {
        format!("{m} min {s} s")
    } else {
        format!("{s} s")
    }
}

/// The prompt older stored drafts carry in place of a trigger; it counts as no trigger.
const TRIGGER_PROMPT: &str = "Unknown — fill in what set it off";

impl Postmortem {
    /// Whether the document says what set the incident off: a trigger that is not blank and not
    /// the prompt older drafts were stored with. A reviewer confirms only a draft that has one
    /// ([`crate::domain::ConfirmPolicy::check_draft`]).
    pub fn has_trigger(&self) -> bool {
        let t = self.trigger.trim();
        !t.is_empty() && t != TRIGGER_PROMPT
    }

    /// The trigger worth remembering: [`Postmortem::has_trigger`], and not a statement that it
    /// is unknown (text starting with "unknown", any case), which a reviewer may confirm but
    /// which teaches recall nothing.
    pub fn known_trigger(&self) -> Option<&str> {
        let t = self.trigger.trim();
        let unknown = t
            .get(..7)
            .is_some_and(|head| head.eq_ignore_ascii_case("unknown"));
        (self.has_trigger() && !unknown).then_some(t)
    }

    /// The same document with every text field's line endings as `\n` ([`unix_newlines`]):
    /// what a browser or an API client sent with CRLF is stored like what was typed with LF.
    pub fn with_unix_newlines(mut self) -> Self {
        let fix = |s: &mut String| *s = unix_newlines(s);
        let fix_all = |v: &mut Vec<String>| v.iter_mut().for_each(|s| *s = unix_newlines(s));
        fix(&mut self.summary);
        fix(&mut self.impact.description);
        fix_all(&mut self.symptoms);
        fix(&mut self.root_cause);
        fix(&mut self.trigger);
        fix_all(&mut self.contributing_factors);
        for a in self
            .what_worked
            .iter_mut()
            .chain(&mut self.what_did_not_work)
            .chain(&mut self.rejected)
        {
            fix(&mut a.target);
            fix(&mut a.note);
        }
        fix_all(&mut self.misleading_hypotheses);
        for l in &mut self.lessons {
            fix(&mut l.always);
            fix(&mut l.because);
            fix(&mut l.scope);
        }
        fix_all(&mut self.action_items);
        fix_all(&mut self.detection_gaps);
        self
    }
}

#[cfg(test)]
mod tests;
