//! The question stage of recall: a question asked of memory (no incident behind it, no
//! evidence; "is a failover worth it when only the reads are slow?", "what must I avoid when …?")
//! read for what decides its answer.
//!
//! A question carries two things an incident report does not:
//! - **the deciding detail inside the question sentence** ("… when traffic is flat?"): the part
//!   of a question sentence after its subordinator (`when`, `if`, `since`, `while`, …) reports
//!   conditions ([`super::conditions`]) as a statement would, while the rest of the sentence asks
//!   (and often names an action, which is no condition of the incident);
//! - **the tempting action** ("is raising the timeout enough?", "would a rollback help?"): the
//!   action kinds a question sentence names ([`named_actions`]). A lesson learned where that very
//!   action was tried and did not help (a dead end of that kind) is the warning the question is
//!   after, when its incident's symptom matches: the first candidates within [`ACTION_BAND`] of
//!   the first's score ([`super::siblings::leading`]), the first itself included. A lesson's own
//!   words often lose to a neighbour's at the record level even when its incident leads; the
//!   named action is what tells the question's answer from the neighbour's.
//!
//! Pure functions: no I/O. Recall applies them to the first candidates of the incident-level
//! ranking ([`super::siblings`]).

use std::sync::LazyLock;

use regex::Regex;

use super::conditions::{Conditions, conditions_of};
use crate::domain::ActionKind;

/// Share of its score a sibling gains when it holds a dead end of an action the question names
/// ([`super::siblings::favour`]).
pub const ACTION_WEIGHT: f64 = 0.15;

/// Share of the first candidate's score a candidate needs for a dead end of the action a
/// question names to favour it ([`super::siblings::leading`]): wider than the sibling band, since
/// a question shares fewer words with its answer's report than an incident does, so its right
/// answer ranks further from the first. Stable at ±20 % of its gap to the first
/// (docs/benchmarks.md).
pub const ACTION_BAND: f64 = 0.7;

/// Weight of the incident-level ranking as a list at the record level for a question (an
/// incident's recall uses [`super::fusion::INCIDENT_PRIOR`], 1.0): a question shares few words
/// with the record that answers it (its rule names the advice, the question the situation), so
/// which past incident the whole question matches, read over each incident's document and
/// passages, counts for more than the record's own word and meaning lists. Stable at ±20 %
/// (docs/benchmarks.md).
pub const QUESTION_PRIOR: f64 = 1.75;

/// Longest text read as a question (characters): a question is a sentence or three, a report
/// pasted into the search box is not.
pub const QUESTION_CHARS: usize = 800;

/// Words a question opens with.
static OPENER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(?:what|which|when|how|why|where|who|should|shall|would|will|could|can|is|are|was|does|do|did|must|may|might)\b")
        .expect("static regex")
});

/// The subordinators after which a question sentence states the situation it asks about.
static SUBORDINATOR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:when|whenever|if|while|whilst|since|after|once|given that|now that|though|although|even though|where|during)\b")
        .expect("static regex")
});

/// Whether `text`, asked with no incident behind it, is a question: at most
/// [`QUESTION_CHARS`], and it holds a sentence ending in `?` or opens with a question word.
pub fn looks_like_question(text: &str) -> bool {
    let t = text.trim();
    !t.is_empty() && t.chars().count() <= QUESTION_CHARS && (t.contains('?') || OPENER.is_match(t))
}

/// Sentences of `text` with whether each asks (ends in `?`); a text without `?` that opens with a
/// question word is one question.
fn sentences(text: &str) -> Vec<(&str, bool)> {
    let t = text.trim();
    if !t.contains('?') {
        return vec![(t, OPENER.is_match(t))];
    }
    let mut out = Vec::new();
    let mut start = 0;
    let mut chars = t.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let next = chars.peek().map(|(_, n)| *n);
        if c == '\n' || (matches!(c, '.' | '!' | '?') && next.is_none_or(char::is_whitespace)) {
            let s = t[start..i + c.len_utf8()].trim();
            if !s.is_empty() {
                out.push((s, c == '?'));
            }
            start = i + c.len_utf8();
        }
    }
    let rest = t[start..].trim();
    if !rest.is_empty() {
        out.push((rest, false));
    }
    out
}

/// What a question reports about its situation, as statements: its statements as they are and,
/// of each question sentence, the part after its first subordinator ("what should I not do
/// when the disk fills only on one node?" → "the disk fills only on one node.").
pub fn situation(text: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    for (s, asks) in sentences(text) {
        if !asks {
            out.push(s.to_string());
        } else if let Some(m) = SUBORDINATOR.find(s) {
            let part = s[m.end()..].trim().trim_end_matches('?').trim();
            if !part.is_empty() {
                out.push(format!("{part}."));
            }
        }
    }
    out.join(" ")
}

/// One way people name an action kind in a question: a verb family near an object family
/// (within four words), or a phrase on its own.
struct ActionCue {
    kind: ActionKind,
    pattern: Regex,
}

static ACTION_CUES: LazyLock<Vec<ActionCue>> = LazyLock::new(|| {
    use ActionKind::*;
    let near = |verbs: &str, objects: &str| {
        format!(r"(?i)\b(?:{verbs})\b(?:\W+\w+){{0,4}}?\W+(?:{objects})\b")
    };
    let cue = |kind, re: &str| ActionCue {
        kind,
        pattern: Regex::new(re).expect("static regex"),
    };
    const CAPACITY: &str = r"capacity|copies|instances?|replicas?|workers?|nodes?|servers?|pods?|hosts?|consumers?|senders?|handlers?|machines?|containers?|processes|fleet|cluster|boxes";
    const WAITS: &str = r"timeouts?|deadlines?|expiry|expiration|ttls?|time-?to-?live|validity|grace period|wait\w*|time limits?";
    const SECRETS: &str =
        r"secrets?|keys?|credentials?|tokens?|certificates?|certs?|passwords?|signing \w+";
    vec![
        cue(
            RollbackDeploy,
            r"(?i)\b(?:roll(?:ing)?[- ]?back|rollbacks?|revert\w*|undo\w*|back(?:ing)? out)\b",
        ),
        cue(
            RollbackDeploy,
            &near(
                r"go(?:ing)? back to|redeploy\w*",
                r"previous|prior|last|old\w*",
            ),
        ),
        cue(
            RollbackDeploy,
            &near(
                r"halt\w*|stop\w*|paus\w*|freez\w*|abort\w*",
                r"rollouts?|deploy\w*|releases?|updates?|upgrades?",
            ),
        ),
        cue(
            ScaleOut,
            r"(?i)\bscal\w* (?:up|out)\b|\bupscal\w*|\bautoscal\w*",
        ),
        cue(
            ScaleOut,
            &near(
                r"add\w*|more|extra|spin\w* up|double\w*|increas\w*|raising|raise|bump\w*",
                CAPACITY,
            ),
        ),
        cue(ScaleIn, r"(?i)\bscal\w* (?:down|in)\b"),
        cue(
            IncreaseTimeout,
            &near(
                r"extend\w*|rais\w*|increas\w*|lengthen\w*|bump\w*|longer|loosen\w*|relax\w*|doubl\w*|wait",
                WAITS,
            ),
        ),
        cue(
            IncreaseTimeout,
            r"(?i)\bwait\w*(?:\W+\w+){0,2}?\W+(?:longer|full|more)\b",
        ),
        cue(
            RotateCredentials,
            &near(
                r"rotat\w*|re-?issu\w*|issu\w*|regenerat\w*|renew\w*|replac\w*|reset\w*|roll(?:ing)?|new|fresh|swap\w*",
                SECRETS,
            ),
        ),
        cue(
            RotateCredentials,
            r"(?i)\b(?:issu\w*|generat\w*|mint\w*|creat\w*) a (?:new|fresh) one\b",
        ),
        cue(
            BlockTrafficSource,
            &near(
                r"block\w*|ban\w*|deny\w*|blacklist\w*|blocklist\w*|firewall\w*|cut\w* off|shut\w* off|drop\w*|throttl\w*|rate[- ]?limit\w*",
                r"traffic|sources?|ips?|address\w*|ranges?|requests?|clients?|senders?|destinations?|countr\w*|prefix\w*|bots?|callers?|domains?|sites?|referr\w*|networks?|them",
            ),
        ),
        cue(
            FlushCache,
            &near(
                r"flush\w*|clear\w*|purg\w*|invalidat\w*|wip\w*|empty\w*|bust\w*",
                r"cache\w*|cdn|edge",
            ),
        ),
        cue(
            RestartService,
            r"(?i)\b(?:restart\w*|bounc\w*|reboot\w*|recycl\w*)\b",
        ),
        cue(
            FailoverDatabase,
            r"(?i)\bfail(?:ing|ed)?[- ]?over\b|\bpromot\w* (?:the |a )?(?:replica|standby|secondary)",
        ),
        cue(
            RaisePoolLimit,
            &near(
                r"rais\w*|increas\w*|bump\w*|grow\w*|enlarg\w*|doubl\w*|bigger|larger|more",
                r"pool\w*|connections?|max_?conn\w*",
            ),
        ),
        cue(
            LowerPoolLimit,
            &near(
                r"lower\w*|reduc\w*|shrink\w*|decreas\w*|smaller|fewer|cut\w*",
                r"pool\w*|connections?",
            ),
        ),
        cue(
            DisableFeatureFlag,
            &near(
                r"disabl\w*|turn\w* off|switch\w* off|kill\w*|flip\w*|toggl\w*|stop\w*|paus\w*|end",
                r"flags?|features?|toggles?|switch\w*|experiments?|a/b tests?|tests?|trials?",
            ),
        ),
        cue(
            DisableFeatureFlag,
            r"(?i)\b(?:turn|switch)\w*(?:\W+\w+){0,2}?\W+off\b",
        ),
        cue(
            DrainNode,
            r"(?i)\b(?:drain\w*|cordon\w*|evict\w*)\b|\bout of (?:rotation|service|the pool|the load balancer)\b",
        ),
        cue(
            DrainNode,
            r"(?i)\b(?:pull\w*|tak\w*|took|remov\w*)\b(?:\W+\w+){0,4}?\W+out\b",
        ),
        cue(
            RollForwardFix,
            r"(?i)\b(?:hotfix\w*|roll(?:ing)? forward|patch\w*)\b",
        ),
        cue(
            RollForwardFix,
            &near(r"ship\w*|push\w*|deploy\w*", r"fix\w*|patch\w*"),
        ),
    ]
});

/// The action kinds the question sentences of `text` name (the whole text when none ends in
/// `?`), in [`ActionKind::mentioned_in`] order first, then in the order of the cue table.
pub fn named_actions(text: &str) -> Vec<ActionKind> {
    let asked: Vec<&str> = sentences(text)
        .into_iter()
        .filter(|(_, asks)| *asks)
        .map(|(s, _)| s)
        .collect();
    let asked = if asked.is_empty() {
        text.to_string()
    } else {
        asked.join(" ")
    };
    let mut out = ActionKind::mentioned_in(&asked);
    for c in ACTION_CUES.iter() {
        if !out.contains(&c.kind) && c.pattern.is_match(&asked) {
            out.push(c.kind);
        }
    }
    out
}

/// Lifts each lesson in `fused` to the fused score of its incident's best-matching record, when
/// that is higher: a question is answered by the rule of the past incident that matches it,
/// whichever of that incident's records (its symptom, its dead end, its cause) the question's
/// words and meaning found, and the rule's own text may share few words with a question that
/// names the situation rather than the advice.
pub(super) fn lessons_answer(
    index: &crate::store::recall_index::RecallIndex,
    fused: &mut std::collections::HashMap<i64, super::fusion::Fused>,
) {
    let incident_of = |id: i64| index.get(id).and_then(|e| e.incident_id.clone());
    let mut best: std::collections::HashMap<String, f64> = std::collections::HashMap::new();
    for f in fused.values() {
        if let Some(inc) = incident_of(f.candidate.id) {
            let b = best.entry(inc).or_insert(f.rrf);
            *b = b.max(f.rrf);
        }
    }
    for f in fused.values_mut() {
        if f.candidate.kind == crate::domain::MemoryKind::Lesson
            && let Some(b) = incident_of(f.candidate.id).and_then(|i| best.get(&i))
        {
            f.rrf = f.rrf.max(*b);
        }
    }
}

/// What a question says about its answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Question {
    /// The conditions of the situation it asks about ([`situation`]).
    pub conditions: Conditions,
    /// The actions it names ([`named_actions`]).
    pub actions: Vec<ActionKind>,
}

/// Reads `text` as a question.
pub fn read(text: &str) -> Question {
    Question {
        conditions: conditions_of(&situation(text)),
        actions: named_actions(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::recall::conditions::Dimension;

    #[test]
    fn a_question_is_short_and_asks() {
        assert!(looks_like_question("Should we fail over the primary?"));
        assert!(looks_like_question(
            "what to check before resizing a volume"
        ));
        assert!(!looks_like_question("disk full on the build host"));
        assert!(!looks_like_question(&"the queue is long. ".repeat(60)));
    }

    #[test]
    fn the_situation_is_the_statements_and_what_follows_the_subordinator() {
        assert_eq!(
            situation(
                "Latency doubled on the API. Should I add replicas when only one zone is slow?"
            ),
            "Latency doubled on the API. only one zone is slow."
        );
        assert_eq!(situation("Is a restart enough?"), "");
        let q = read("What must I avoid when the backlog climbs while the request rate is flat?");
        assert_eq!(q.conditions.get(Dimension::Load), vec!["flat"]);
    }

    #[test]
    fn the_named_action_is_read_from_the_question_not_from_the_report() {
        let q = read(
            "We restarted the workers twice already. Would reverting yesterday's upgrade help?",
        );
        assert_eq!(q.actions, vec![ActionKind::RollbackDeploy]);
        assert_eq!(
            named_actions("Is extending the session expiry enough?"),
            vec![ActionKind::IncreaseTimeout]
        );
        assert_eq!(
            named_actions("Should I spin up more consumers?"),
            vec![ActionKind::ScaleOut]
        );
        assert_eq!(
            named_actions("Do we need to issue a new signing key?"),
            vec![ActionKind::RotateCredentials]
        );
        assert_eq!(
            named_actions("Would rate-limiting the noisiest clients help?"),
            vec![ActionKind::BlockTrafficSource]
        );
        assert_eq!(
            named_actions("Can we throttle the callers from that range?"),
            vec![ActionKind::BlockTrafficSource]
        );
        assert!(named_actions("What should I check first?").is_empty());
    }
}
