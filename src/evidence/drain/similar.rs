//! How a message and a template (or two templates) compare, token by token: similarity,
//! compatibility and the token a differing position becomes.

use super::mask::{F_MASKED, F_WILD};
use super::{Cluster, TTok, Tokens};

/// Two templates of one length are compatible when every position is equal or `<*>` on one side
/// and the equal constants are at least `st` of the positions where either side is constant.
pub(super) fn compatible(a: &[TTok], b: &[TTok], st: f64) -> bool {
    let mut equal = 0usize;
    let mut constant = 0usize;
    for (x, y) in a.iter().zip(b) {
        match (x, y) {
            (TTok::Wild, TTok::Wild) => {}
            (TTok::Wild, _) | (_, TTok::Wild) => constant += 1,
            (TTok::Lit(p), TTok::Lit(q)) if p == q => {
                equal += 1;
                constant += 1;
            }
            (TTok::Cat(p), TTok::Cat(q)) if p == q => {
                equal += 1;
                constant += 1;
            }
            _ => return false,
        }
    }
    constant > 0 && equal as f64 >= st * constant as f64
}

/// Two unmasked `key=value` tokens with the same key (`user=root` vs `user=guest`): a candidate
/// categorical position. Other differing tokens become `<*>` at once, as in Drain.
pub(super) fn same_key(a: &str, b: &str) -> bool {
    match (a.split_once('='), b.split_once('=')) {
        (Some((ka, va)), Some((kb, vb))) => {
            ka == kb && !ka.is_empty() && !va.is_empty() && !vb.is_empty() && !a.contains("<*>")
        }
        _ => false,
    }
}

/// Two plain words (ASCII letters only, two or more each): the values of a categorical position
/// (see [`DrainConfig::categorical_words`]).
pub(super) fn plain_words(a: &str, b: &str) -> bool {
    let word = |s: &str| s.len() >= 2 && s.bytes().all(|c| c.is_ascii_alphabetic());
    word(a) && word(b)
}

/// Generalise a position where two tokens differ: keep what they share around the variable part,
/// a `key=` of `key=value` fields and the punctuation before and after (`(a.net)` / `(b.org)` →
/// `(<*>)`, `alice:` / `bob:` → `<*>:`, `id=7]` / `id=9]` → `id=<*>]`); `<*>` when nothing is
/// shared.
pub(super) fn key_wild(a: &str, b: &str) -> TTok {
    if a[glued_word_len(a)..].contains("<*>") && glued_word_differs(a, b) {
        return TTok::Lit(format!("<*>{}", &a[glued_word_len(a)..]).into());
    }
    let pre = match (a.split_once('='), b.split_once('=')) {
        (Some((ka, va)), Some((kb, vb)))
            if ka == kb && !ka.is_empty() && !va.is_empty() && !vb.is_empty() =>
        {
            ka.len() + 1
        }
        _ => 0,
    };
    let (x, y) = (a.as_bytes(), b.as_bytes());
    // ASCII only, so the cut is always on a char boundary
    let punct = |c: u8| c.is_ascii_punctuation() && c != b'<' && c != b'>' && c != b'*';
    let mut p = pre;
    while p < x.len() && p < y.len() && x[p] == y[p] && punct(x[p]) {
        p += 1;
    }
    let mut q = 0;
    while q + p < x.len()
        && q + p < y.len()
        && x[x.len() - 1 - q] == y[y.len() - 1 - q]
        && punct(x[x.len() - 1 - q])
    {
        q += 1;
    }
    // Something must vary between the shared parts; an empty middle (`()`, `""`) is allowed
    // only inside a closing part, never for `key=` (an absent field is another format).
    let empty_ok = q > 0;
    let room = |len: usize| p + q < len || (empty_ok && p + q == len);
    if p + q == 0 || !room(x.len()) || !room(y.len()) || (p + q == x.len() && p + q == y.len()) {
        return TTok::Wild;
    }
    TTok::Lit(format!("{}<*>{}", &a[..p], &a[a.len() - q..]).into())
}

/// A template token with one `<*>` hole and constant text around it (`key=<*>`, `(<*>)`)
/// against a message token that has that text around something non-empty; `<*>rest` (a glued
/// word, see [`glued_word_differs`]) against a word followed by `rest`.
pub(super) fn matches_key_wild(l: &str, t: &str) -> bool {
    let Some(i) = l.find("<*>") else {
        return false;
    };
    if i == 0 && l.len() > 3 && l[3..].contains("<*>") {
        // `<*>(uid=<*>)`: a glued word before a masked rest (see [`glued_word_differs`])
        let w = glued_word_len(t);
        return w > 0 && t[w..] == l[3..];
    }
    let (pre, suf) = (&l[..i], &l[i + 3..]);
    !suf.contains("<*>")
        && pre.len() + suf.len() > 0
        && (t.len() > pre.len() + suf.len()
            || (!suf.is_empty() && t.len() == pre.len() + suf.len()))
        && t.starts_with(pre)
        && t.ends_with(suf)
}

/// Two partially masked tokens that differ only in a word glued to the front of the same masked
/// rest (`alice(uid=<*>)` / `bob(uid=<*>)`): the word is a variable like any other differing
/// token. With the word missing on one side (`SSH(uid=<*>)` / `(uid=<*>)`) they stay two
/// formats.
pub(super) fn glued_word_differs(a: &str, b: &str) -> bool {
    let (wa, wb) = (glued_word_len(a), glued_word_len(b));
    wa > 0
        && wb > 0
        && a[wa..] == b[wb..]
        && a[wa..].starts_with(|c: char| c.is_ascii_punctuation() && c != '-' && c != '_')
}

/// Length of the leading word (`[A-Za-z0-9_-]`) of a token.
pub(super) fn glued_word_len(s: &str) -> usize {
    s.bytes()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-'))
        .count()
}

/// `key=` (empty field) against `key=<value>`: the field is absent in one message, a different
/// format, never merged.
pub(super) fn empty_vs_value(a: &str, b: &str) -> bool {
    let (short, long) = if a.len() < b.len() { (a, b) } else { (b, a) };
    short.len() >= 2 && short.ends_with('=') && long.len() > short.len() && long.starts_with(short)
}

/// Drain's sequence similarity (equal tokens / length; a `<*>` position counts as equal when the
/// message holds a masked variable there) with our hard constraints; `None` = never merge.
pub(super) fn similarity(c: &Cluster, toks: &Tokens) -> Option<(f64, usize)> {
    let n = toks.len();
    if n == 0 {
        return Some((1.0, 0));
    }
    let mut eq = 0usize;
    let mut wild = 0usize;
    for i in 0..n {
        let f = toks.flags(i);
        match &c.tokens[i] {
            TTok::Wild => {
                wild += 1;
                if f & F_MASKED != 0 {
                    eq += 1;
                }
            }
            TTok::Lit(l) => {
                let t = toks.tok(i);
                if **l == *t || matches_key_wild(l, t) {
                    eq += 1;
                } else if (f & F_MASKED != 0
                    && f & F_WILD == 0
                    && l.contains("<*>")
                    && !glued_word_differs(l, t))
                    || empty_vs_value(l, t)
                {
                    return None;
                }
            }
            TTok::Cat(vals) => {
                let t = toks.tok(i);
                if vals.iter().any(|v| **v == *t) {
                    eq += 1;
                }
            }
        }
    }
    Some((eq as f64 / n as f64, wild))
}
