//! The lexical floor of recall for questions: when the word search over incident documents
//! answers a question confidently (its first leads the second by [`CONFIDENT_GAP`] of the
//! second's score), the fusion does not move that incident off first place unless the meaning
//! lists are surer by [`MEANING_MARGIN`] of cosine that another one is first.
//!
//! Why: a question names the few words that matter ("pool", "replica", "certificate"), and when
//! exactly one past incident holds them the words are the strongest evidence there is; the
//! meaning lists, which see the whole question as one sentence, can prefer a look-alike written
//! in the same tone. The gap and the margin are measured on the shared sets (docs/benchmarks.md:
//! how often the meaning lists rescue a BM25 miss, and how often they overturn a confident BM25
//! first rightly and wrongly).

use super::IncidentMatch;

/// How far (a share of the second's score) the document search's first must lead to count as
/// confident.
pub const CONFIDENT_GAP: f64 = 0.25;

/// How much higher (cosine of the documents with the question) the fused first must be than the
/// confident word-search first for the fusion's choice to stand.
pub const MEANING_MARGIN: f64 = 0.05;

/// Whether `bm25` (incident id and score, best first) is a confident first at `gap`.
pub fn confident(bm25: &[(String, f64)], gap: f64) -> Option<&str> {
    let (first, s1) = bm25.first()?;
    let s2 = bm25.get(1).map_or(0.0, |b| b.1);
    (*s1 > 0.0 && *s1 >= (1.0 + gap) * s2).then_some(first.as_str())
}

/// Holds the floor on `incidents` (best first): when `bm25` is confident at `gap` about an
/// incident that the fusion put below the first, and the fused first's document cosine does not
/// exceed that incident's by `margin`, that incident is put first (with the first's score, a
/// hair above). Returns whether it moved.
pub fn hold(
    incidents: &mut [IncidentMatch],
    bm25: &[(String, f64)],
    gap: f64,
    margin: f64,
) -> bool {
    let Some(lexical) = confident(bm25, gap) else {
        return false;
    };
    let Some(p) = incidents.iter().position(|m| m.incident_id == lexical) else {
        return false;
    };
    if p == 0 {
        return false;
    }
    let stronger = match (incidents[0].cosine, incidents[p].cosine) {
        (Some(first), Some(theirs)) => f64::from(first) - f64::from(theirs) >= margin,
        // No vector for the words' first: nothing to weigh against; no vector for the fused
        // first: its place comes from words and keys, which the document search outweighs.
        (Some(_), None) => true,
        (None, _) => false,
    };
    if stronger {
        return false;
    }
    let top = incidents[0].score;
    incidents[p].score = top * (1.0 + 1e-6);
    incidents[..=p].rotate_right(1);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_cosine(id: &str, score: f64, cosine: f32) -> IncidentMatch {
        IncidentMatch {
            cosine: Some(cosine),
            ..IncidentMatch::for_test(id, score)
        }
    }

    fn bm25(v: &[(&str, f64)]) -> Vec<(String, f64)> {
        v.iter().map(|(i, s)| (i.to_string(), *s)).collect()
    }

    #[test]
    fn a_confident_word_first_is_put_back_first_unless_meaning_is_surer() {
        let mut inc = vec![with_cosine("a", 1.0, 0.60), with_cosine("b", 0.9, 0.58)];
        assert!(hold(&mut inc, &bm25(&[("b", 9.0), ("a", 3.0)]), 0.25, 0.05));
        assert_eq!(inc[0].incident_id, "b");
        assert!(inc[0].score > inc[1].score);

        let mut inc = vec![with_cosine("a", 1.0, 0.70), with_cosine("b", 0.9, 0.58)];
        assert!(!hold(
            &mut inc,
            &bm25(&[("b", 9.0), ("a", 3.0)]),
            0.25,
            0.05
        ));
        assert_eq!(inc[0].incident_id, "a");
    }

    #[test]
    fn a_close_word_first_is_no_floor() {
        let mut inc = vec![with_cosine("a", 1.0, 0.60), with_cosine("b", 0.9, 0.58)];
        assert!(!hold(
            &mut inc,
            &bm25(&[("b", 9.0), ("a", 8.0)]),
            0.25,
            0.05
        ));
        assert_eq!(inc[0].incident_id, "a");
    }
}
