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
