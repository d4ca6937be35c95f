//! Negated findings (DESIGN.md §4): the parts of an incident's text that report what is *not*
//! happening ("0 idle in transaction", "no deserialization errors"), left out of recall's query
//! so they do not pull in incidents where it was. Pure.

use super::recall::tags_of;

/// Words that report the absence of what follows them in their clause. "not" is not one: in
/// incident text it mostly states a failure ("not responding", "did not resolve it").
const NEGATION_CUES: &[&str] = &["no", "without", "none", "zero", "0"];

/// Words that end a negation's scope inside a clause (NegEx's termination terms): in "no errors
/// but the pool is exhausted" the pool is exhausted.
const SCOPE_END: &[&str] = &["but", "however", "although", "though", "except", "yet"];

/// Characters that end a clause, the scope of a negation cue; `,`, `.` and `:` only before white
/// space or the end (not inside `1,000`, `0.2` or `10:42`).
const CLAUSE_END: &[char] = &[',', ';', '.', ':', '!', '?', '\n', '(', ')', '|'];

/// The clauses of `text`, each with its closing character(s) as a separate slice.
fn clauses(text: &str) -> Vec<(&str, &str)> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if !CLAUSE_END.contains(&c) {
            continue;
        }
        let next = chars.peek().map(|(_, n)| *n);
        if matches!(c, ',' | '.' | ':') && next.is_some_and(|n| !n.is_whitespace()) {
            continue;
        }
        let end = i + c.len_utf8();
        out.push((&text[start..i], &text[i..end]));
        start = end;
    }
    if start < text.len() {
        out.push((&text[start..], ""));
    }
    out
}

/// `text` without its negated findings: from a negation cue ("no", "without", "none", "zero", a
/// bare "0") to the end of its clause or the next [`SCOPE_END`] word, as in
/// `workers: 12 busy, 0 stuck on locks` or `queue depth rising; no parse failures`, where the
/// words after the cue say what is *not* happening and must
/// not pull in incidents where it was. This is the clause-scoped negation of NegEx (Chapman et
/// al., "A Simple Algorithm for Identifying Negated Findings and Diseases in Discharge
/// Summaries", J. Biomed. Inform. 34, 2001), with one addition: a cue that is itself part of a failure phrase (`no space left on device`, `no such host`) is
/// kept, because dropping it changes which failure modes the clause names.
pub fn strip_negated(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (mut body, end) in clauses(text) {
        while let Some((from, to)) = negated_span(body) {
            out.push_str(&body[..from]);
            body = &body[to..];
        }
        out.push_str(body);
        out.push_str(end);
    }
    out
}

/// Phrases after which a root cause says that what came before it in the clause was *not* the
/// cause: "the pool size was not the cause", "a bad deploy wasn't to blame".
const DENIED_BEFORE: &[&str] = &[
    " was not the cause",
    " was not the root cause",
    " wasn't the cause",
    " wasn't the root cause",
    " is not the cause",
    " was not to blame",
    " wasn't to blame",
    " was a red herring",
    " did not cause",
    " didn't cause",
    " was ruled out",
];

/// Phrases after which what follows in the clause is denied: "it was not the pool size",
/// "rather than the pool size". A bare "not" is not one: "not enough connections in the pool"
/// affirms a pool problem.
const DENIED_AFTER: &[&str] = &["it was not ", "it wasn't ", "rather than ", "instead of "];

/// What a record's text denies, each claim as its content words
/// ([`super::recall::content_words`], plurals folded): the words before a [`DENIED_BEFORE`]
/// phrase or after a [`DENIED_AFTER`] one, within their clause. "Pool size was NOT the cause;
/// stale DNS TTL was" denies `{pool, size}`. Claims of fewer than two content words are left
/// out: one word is too little to say what an older record claimed.
pub fn denied_claims(text: &str) -> Vec<std::collections::BTreeSet<String>> {
    let mut out = Vec::new();
    for (clause, _) in clauses(text) {
        let lower = clause.to_lowercase();
        let mut claim = None;
        for p in DENIED_BEFORE {
            if let Some(at) = lower.find(p) {
                claim = Some(lower[..at].to_string());
                break;
            }
        }
        if claim.is_none() {
            for p in DENIED_AFTER {
                let found = lower
                    .match_indices(p)
                    .find(|(at, _)| *at == 0 || lower[..*at].ends_with(' '));
                if let Some((at, _)) = found {
                    claim = Some(lower[at + p.len()..].to_string());
                    break;
                }
            }
        }
        if let Some(words) = claim.map(|c| folded_words(&c))
            && words.len() >= 2
        {
            out.push(words);
        }
    }
    out
}

/// Content words of `text` with a plural `s` folded (`pools` → `pool`), for comparing claims.
fn folded_words(text: &str) -> std::collections::BTreeSet<String> {
    super::recall::content_words(text)
        .into_iter()
        .map(|w| match w.strip_suffix('s') {
            Some(stem) if stem.chars().count() >= 3 && !stem.ends_with('s') => stem.to_string(),
            _ => w,
        })
        .collect()
}

/// Whether `newer` contradicts `older`: a claim `newer` denies ([`denied_claims`]) is affirmed
/// in `older`, which has at least two of the claim's content words, and at least two thirds of
/// them, outside its own denials ("connection pool size was not the cause" against "the
/// connection pools were too small"). Returns the shared words (sorted), or `None`.
///
/// A negation cue plus shared terms; it is meant for records of one
/// kind on one service (two root causes), where shared words name the same thing.
pub fn contradiction(newer: &str, older: &str) -> Option<Vec<String>> {
    let denied_in_older: std::collections::BTreeSet<String> =
        denied_claims(older).into_iter().flatten().collect();
    let affirmed: std::collections::BTreeSet<String> = folded_words(older)
        .into_iter()
        .filter(|w| !denied_in_older.contains(w))
        .collect();
    denied_claims(newer).into_iter().find_map(|claim| {
        let shared: Vec<String> = claim.intersection(&affirmed).cloned().collect();
        (shared.len() >= 2 && shared.len() * 3 >= claim.len() * 2).then_some(shared)
    })
}

/// Byte range in `clause` of the first negated scope (cue included), if any: from the cue to the
/// next [`SCOPE_END`] word or the end of the clause. Both ends fall on ASCII bytes, so they are
/// character boundaries of `clause`.
fn negated_span(clause: &str) -> Option<(usize, usize)> {
    // ASCII folding keeps every byte offset; the cues and scope ends are ASCII.
    let lower = clause.to_ascii_lowercase();
    let lower = lower.as_str();
    let words = |from: usize| {
        let mut at = from;
        std::iter::from_fn(move || {
            let off = lower[at..].find(|c: char| c.is_ascii_alphanumeric())?;
            let w0 = at + off;
            let w1 = lower[w0..]
                .find(|c: char| !c.is_ascii_alphanumeric())
                .map_or(lower.len(), |e| w0 + e);
            at = w1;
            Some((w0, w1))
        })
    };
    let bytes = lower.as_bytes();
    for (w0, w1) in words(0) {
        let word = &lower[w0..w1];
        let boundary_before = w0 == 0 || !matches!(bytes[w0 - 1], b'.' | b'/' | b'-' | b'_');
        let boundary_after = w1 == lower.len() || matches!(bytes[w1], b' ' | b'\t' | b'\'' | b'"');
        let has_scope = lower[w1..].contains(|c: char| c.is_alphanumeric());
        if boundary_before && boundary_after && has_scope && NEGATION_CUES.contains(&word) {
            let with_cue = tags_of(lower);
            let without_cue = tags_of(&format!("{}{}", &lower[..w0], &lower[w1..]));
            if with_cue.is_subset(&without_cue) {
                let to = words(w1)
                    .find(|&(a, b)| SCOPE_END.contains(&&lower[a..b]))
                    .map_or(lower.len(), |(a, _)| a);
                return Some((w0, to));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_later_root_cause_that_denies_an_earlier_one_contradicts_it() {
        let older = "The connection pools were too small for the holiday traffic.";
        let newer = "Connection pool size was NOT the cause; a stale DNS TTL sent writes to the old primary.";
        assert_eq!(
            contradiction(newer, older),
            Some(vec!["connection".to_string(), "pool".to_string()])
        );
        // Other phrasings of the denial.
        for newer in [
            "It was not the connection pool: the DNS TTL was stale.",
            "A stale DNS TTL, rather than connection pools, sent writes to the old primary.",
            "The connection pool was a red herring; the DNS TTL was stale.",
        ] {
            assert!(contradiction(newer, older).is_some(), "{newer}");
        }
        // No denial, a denial of something the older one never said, or one word only.
        assert_eq!(
            contradiction("A stale DNS TTL sent writes to the old primary.", older),
            None
        );
        assert_eq!(
            contradiction("The load balancer health check was not the cause.", older),
            None
        );
        assert_eq!(contradiction("Traffic was not the cause.", older), None);
        assert_eq!(
            contradiction("There were not enough connections in the pool.", older),
            None,
            "a bare not affirms"
        );
        // The older record denied it too: no contradiction.
        assert_eq!(
            contradiction(
                newer,
                "Connection pool size was not the cause; the disk filled up."
            ),
            None
        );
    }
}
