//! The query stage of recall: what a query asks for, read once from its text — negated findings
//! left out, failure-mode tags (catalogue signatures and the load shape), content words, the
//! terms of the word searches and the action kinds it names.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use super::{RecallQuery, RecallTuning, strip_negated};
use crate::domain::ActionKind;
use crate::store::memory as mstore;
use crate::store::recall_index::ScopeKeys;

pub(super) const STOPWORDS: &[&str] = &[
    "the", "and", "for", "with", "that", "this", "from", "was", "were", "are", "is", "be", "been",
    "to", "of", "in", "on", "at", "it", "its", "as", "by", "or", "an", "a", "we", "our", "not",
    "but", "all", "any", "can", "has", "have", "had", "after", "before", "when", "what", "which",
    "who", "should", "would", "could", "do", "does", "did", "i", "you", "they", "them", "there",
    "their", "about", "into", "over", "than", "then", "so", "if", "up", "out", "no", "yes", "how",
    "why", "will", "just", "also", "some", "more", "most", "very", "since", "while", "again",
    "being", "seeing", "seen", "see", "because", "always", "check", "first",
];

/// Whether a matched query word is worth showing in "why recalled": numbers, years and the
/// pieces of timestamps or durations (`2026`, `29t14`, `12z`, `30000ms`) are not words; a token
/// with at least as many letters as digits (`5xx`, `http2`, `sha256`) is. Display only: ranking
/// never looks at this.
pub fn is_displayable_word(w: &str) -> bool {
    let letters = w.chars().filter(|c| c.is_alphabetic()).count();
    let digits = w.chars().filter(char::is_ascii_digit).count();
    letters > 0 && letters >= digits
}

/// Lower-case content words of `text` (≥ 2 chars, no stopwords), deduplicated, in order.
pub fn content_words(text: &str) -> Vec<String> {
    let mut seen = BTreeSet::new();
    text.split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .filter(|w| w.chars().count() >= 2 && !STOPWORDS.contains(&w.as_str()))
        .filter(|w| seen.insert(w.clone()))
        .collect()
}

/// Failure-mode tags of `text` (negated findings left out, see [`strip_negated`]): catalogue
/// signatures plus the load shape.
pub fn derive_tags(text: &str) -> Vec<String> {
    tags_of(&strip_negated(text)).into_iter().collect()
}

/// Failure-mode tags of `text` as it stands (no negation handling): catalogue signatures and the
/// load shape.
pub(in crate::memory) fn tags_of(text: &str) -> BTreeSet<String> {
    tags_with(text, true)
}

/// [`tags_of`] with the load shape on or off (ablation).
pub(super) fn tags_with(text: &str, load_shape_on: bool) -> BTreeSet<String> {
    let mut tags: BTreeSet<String> = crate::evidence::signatures::match_tags(text)
        .into_iter()
        .map(str::to_string)
        .collect();
    if load_shape_on {
        tags.extend(load_shape(text).map(str::to_string));
    }
    tags
}

/// A request-rate reading going from a number to another (`qps 40 -> 900`, `throughput went
/// from 2.5k to 9k`, `request rate 2k → 14k`).
pub(super) static RATE_CHANGE: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(
        r"(?i)\b(?:rps|qps|req/s|requests?/s|requests? per second|request rate|traffic|throughput)\b[^\n;]{0,30}?(?:from\s+)?~?(\d[\d,]*(?:\.\d+)?k?)\s*(?:rps|qps|req/s|/s)?\s*(?:->|→|=>|\bto\b)\s*~?(\d[\d,]*(?:\.\d+)?k?)",
    )
    .expect("static regex")
});

/// A request rate described as unchanged (`throughput unchanged at ~310 req/s`, `traffic is
/// normal`, `rps steady, same as yesterday`).
pub(super) static RATE_STEADY: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(
        r"(?i)\b(?:rps|qps|req/s|request rate|traffic|throughput)\b[^\n;.]{0,30}?\b(?:steady|flat|unchanged|normal|same as|as usual)\b",
    )
    .expect("static regex")
});

/// `1,050` → 1050, `1.5k` → 1500.
pub(super) fn reading(s: &str) -> Option<f64> {
    let s = s.replace(',', "");
    match s.strip_suffix(['k', 'K']) {
        Some(n) => n.parse::<f64>().ok().map(|v| v * 1000.0),
        None => s.parse().ok(),
    }
}

/// The load shape a text reports, which tells look-alike failure modes apart (a pool exhausted
/// by a traffic surge against one exhausted by a leak under steady load): `traffic_surge` when a
/// request rate at least doubles (`rps 250 -> 900`), `steady_load` when it is described as
/// steady, flat, normal or unchanged; `None` otherwise.
pub fn load_shape(text: &str) -> Option<&'static str> {
    // A reading is a number on its own, not part of a date, a time or a path
    // (`2024-05-01 to 2024-05-02`, `10:00 to 12:00`).
    let alone = |before: Option<char>, after: Option<char>| {
        let joins = |c: Option<char>| c.is_some_and(|c| matches!(c, '-' | ':' | '/'));
        !joins(before) && before != Some('.') && !joins(after)
    };
    for c in RATE_CHANGE.captures_iter(text) {
        let (Some(m1), Some(m2)) = (c.get(1), c.get(2)) else {
            continue;
        };
        let first_alone = alone(
            text[..m1.start()].chars().next_back(),
            text[m1.end()..].chars().next(),
        );
        let second_alone = alone(
            text[..m2.start()].chars().next_back(),
            text[m2.end()..].chars().next(),
        );
        if let (Some(a), Some(b)) = (reading(m1.as_str()), reading(m2.as_str()))
            && first_alone
            && second_alone
            && a > 0.0
            && b >= 2.0 * a
        {
            return Some("traffic_surge");
        }
    }
    RATE_STEADY.is_match(text).then_some("steady_load")
}

/// The Snowball English (Porter2) stem of a lower-cased word, for matching terms in "why"
/// (<https://snowballstem.org/algorithms/english/stemmer.html>).
pub(super) fn stem(stemmer: &rust_stemmers::Stemmer, w: &str) -> String {
    stemmer.stem(&w.to_lowercase()).into_owned()
}

/// What a query asks for, read once from its text with negated findings left out.
pub(super) struct Expanded {
    /// The query text with negated findings left out ([`strip_negated`]).
    pub(super) text: String,
    /// Failure-mode tags, given and derived.
    pub(super) tags: BTreeSet<String>,
    /// Content words of the text.
    pub(super) words: Vec<String>,
    /// Terms of the descriptive and prescriptive lists: the words plus the words of every tag.
    pub(super) terms: Vec<String>,
    /// Terms of the incident-document search: every content word of the text, up to
    /// [`DOC_TERMS`].
    pub(super) doc_terms: Vec<String>,
    /// Action kinds, given and named in free words ([`ActionKind::mentioned_in`]).
    pub(super) actions: Vec<ActionKind>,
}

/// Most terms OR-ed in the incident-document search (there are few documents, one per
/// incident, so a long query costs little there).
pub(super) const DOC_TERMS: usize = 80;

pub(super) fn expand(q: &RecallQuery, tuning: &RecallTuning) -> Expanded {
    let mut tags: BTreeSet<String> = q.failure_modes.iter().cloned().collect();
    let text = if tuning.on("negation") {
        strip_negated(&q.text)
    } else {
        q.text.clone()
    };
    tags.extend(tags_with(&text, tuning.on("load_shape")));
    let mut actions = q.action_kinds.clone();
    for a in ActionKind::mentioned_in(&text) {
        if !actions.contains(&a) {
            actions.push(a);
        }
    }
    let words = content_words(&text);
    let mut expanded = words.join(" ");
    for t in &tags {
        expanded.push(' ');
        expanded.push_str(&t.replace('_', " "));
    }
    let terms = mstore::fts_terms(&expanded);
    let doc_terms: Vec<String> = words
        .iter()
        .filter(|w| w.chars().any(char::is_alphabetic))
        .take(DOC_TERMS)
        .cloned()
        .collect();
    Expanded {
        text,
        tags,
        words,
        terms,
        doc_terms,
        actions,
    }
}

/// The query's displayable words with their stems: `(stem, word)`.
pub(super) fn query_stems(
    stemmer: &rust_stemmers::Stemmer,
    words: &[String],
) -> Vec<(String, String)> {
    words
        .iter()
        .filter(|w| is_displayable_word(w))
        .map(|w| (stem(stemmer, w), w.clone()))
        .collect()
}

/// The structured keys of `q` with its `tags` and `actions`: each failure mode at weight 2, the
/// service in scope at 1 (its graph neighbours at 0.5), each action kind at 1.5.
pub(super) fn scope_keys(
    q: &RecallQuery,
    tags: &BTreeSet<String>,
    actions: &[ActionKind],
) -> ScopeKeys {
    ScopeKeys {
        failure_modes: tags.iter().map(|t| (t.clone(), 2.0)).collect(),
        service: q.service.as_ref().map(|s| (s.clone(), 1.0, 0.5)),
        action_kinds: actions
            .iter()
            .map(|a| (a.as_str().to_string(), 1.5))
            .collect(),
    }
}
