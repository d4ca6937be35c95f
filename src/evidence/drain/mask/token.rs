//! The per-token masks: quoted values, bracketed hosts, whole variables, `key:value` and
//! `key=value` pairs, and the digit-run skeleton of what is left.

use super::super::request::mask_request_line;
use super::{C_DIGIT, C_DOT, C_QUOTE, C_SLASH, F_MASKED, F_WILD, MaskOptions};

/// Index of the opening quote of a quoted value in the token `b[s..e]`: at the start (after
/// opening brackets) or right after `key=`.
pub(super) fn quote_open(b: &[u8], s: usize, e: usize) -> Option<usize> {
    let mut p = s;
    while p < e && matches!(b[p], b'(' | b'[' | b'{' | b'<') {
        p += 1;
    }
    if p < e && (b[p] == b'"' || b[p] == b'\'') {
        return Some(p);
    }
    let eq = s + b[s..e].iter().position(|&c| c == b'=')?;
    (eq + 1 < e && b[eq + 1] == b'"').then_some(eq + 1)
}

#[inline]
pub(super) fn after_quote_ok(b: &[u8], j: usize) -> bool {
    match b.get(j) {
        None => true,
        Some(&c) => {
            c.is_ascii_whitespace() || CLOSE.contains(&c) || matches!(c, b')' | b']' | b'}')
        }
    }
}

/// A quoted value that spans several whitespace-separated words (`request: "GET /a HTTP/1.1",`,
/// `msg="slow query"`) is one token: returns the end of the word holding the closing quote, or
/// `e` when the token is not an unclosed quote (at most 512 bytes are searched).
pub(super) fn quoted_end(b: &[u8], s: usize, e: usize) -> usize {
    let Some(p) = quote_open(b, s, e) else {
        return e;
    };
    let q = b[p];
    let limit = b.len().min(p + 512);
    let mut j = p + 1;
    while j < limit {
        if b[j] == q && after_quote_ok(b, j + 1) {
            if j < e {
                return e;
            }
            let mut k = j + 1;
            while k < b.len() && !b[k].is_ascii_whitespace() {
                k += 1;
            }
            return k;
        }
        j += 1;
    }
    e
}

/// Mask a quoted value: `"anything"` → `"<*>"` (keeping brackets, `key=` and trailing
/// punctuation), unless it is a key (`"method":`) or empty. A request line that is not the value
/// of a key keeps its route (see [`MaskOptions::request_line`]). Returns flags, or `None` when the
/// token holds no such quote.
pub(super) fn mask_quoted(
    tok: &str,
    out: &mut String,
    opts: MaskOptions,
    keyed: bool,
) -> Option<u8> {
    let b = tok.as_bytes();
    let p = quote_open(b, 0, b.len())?;
    let q = b[p];
    let c = p + 1 + b[p + 1..].iter().rposition(|&x| x == q)?;
    if c <= p + 1
        || !b[c + 1..]
            .iter()
            .all(|x| CLOSE.contains(x) || b")]}".contains(x))
    {
        return None;
    }
    if b.get(c + 1) == Some(&b':') {
        return None; // a quoted key (`"method":`, `{"id":`)
    }
    out.push_str(&tok[..p + 1]);
    let own_text = !keyed && b[..p].iter().all(|c| OPEN.contains(c));
    if !(opts.request_line && own_text && mask_request_line(&tok[p + 1..c], opts.path_ids, out)) {
        out.push_str("<*>");
    }
    out.push_str(&tok[c..]);
    Some(F_MASKED)
}

/// `[v6 or v4 address]` with an optional `:port` and trailing punctuation (`[2001:db8::1]:443,`).
pub(super) fn bracket_host(b: &[u8]) -> Option<usize> {
    if b.first() != Some(&b'[') {
        return None;
    }
    let close = b.iter().position(|&c| c == b']')?;
    let inner = &b[1..close];
    if inner.len() < 2
        || !inner.contains(&b':') && !inner.contains(&b'.')
        || !inner
            .iter()
            .all(|c| c.is_ascii_hexdigit() || matches!(c, b':' | b'.' | b'%'))
        || !inner.iter().any(u8::is_ascii_digit) && !inner.windows(2).any(|w| w == b"::")
    {
        return None;
    }
    let mut i = close + 1;
    if b.get(i) == Some(&b':') && b.get(i + 1).is_some_and(u8::is_ascii_digit) {
        i += 1;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
    }
    b[i..].iter().all(|c| CLOSE.contains(c)).then_some(i)
}

/// A URL (`scheme://…`) or an absolute path with at least two separators (`/var/lib/x`): a
/// parameter even without digits.
pub(super) fn path_like(core: &[u8]) -> bool {
    if core.len() < 4
        || !core
            .iter()
            .all(|&c| core_char(c) || matches!(c, b'?' | b'&' | b'=' | b'~' | b'%'))
    {
        return false;
    }
    if core.windows(3).any(|w| w == b"://") {
        return true;
    }
    core[0] == b'/' && core.iter().filter(|&&c| c == b'/').count() >= 2 && core[1] != b'/'
}

#[inline]
pub(super) fn core_char(c: u8) -> bool {
    c.is_ascii_alphanumeric()
        || matches!(
            c,
            b'.' | b':' | b'/' | b'-' | b'_' | b'+' | b'#' | b',' | b'%'
        )
}

/// Is `core` (already stripped of outer punctuation) a variable as a whole?
pub(super) fn whole_variable(core: &[u8]) -> bool {
    if core.is_empty() {
        return false;
    }
    // protocol/device-style names: letters then one digit (`ssh2`, `tty2`, `http2`)
    if core.len() >= 3
        && core[core.len() - 1].is_ascii_digit()
        && core[..core.len() - 1].iter().all(u8::is_ascii_alphabetic)
    {
        return false;
    }
    let mut digit = false;
    for &c in core {
        if c.is_ascii_digit() {
            digit = true;
        } else if !core_char(c) {
            return false;
        }
    }
    if digit {
        return true;
    }
    // dotted host name without digits: >= 2 dots, lower-case/hyphen labels, no empty label
    let mut dots = 0;
    let mut label = 0;
    for &c in core {
        if c == b'.' {
            if label == 0 {
                return false;
            }
            dots += 1;
            label = 0;
        } else if c.is_ascii_lowercase() || c == b'-' {
            label += 1;
        } else {
            return false;
        }
    }
    dots >= 2 && label >= 2
}

const OPEN: &[u8] = b"([{<'\"";
const CLOSE: &[u8] = b")]}>'\",;:.!?";

/// Mask one token into `out`; returns flags.
pub(super) fn mask_token(
    tok: &str,
    cls: u8,
    out: &mut String,
    opts: MaskOptions,
    keyed: bool,
) -> u8 {
    let b = tok.as_bytes();
    let digit = cls & C_DIGIT != 0;
    let dot = cls & C_DOT != 0;
    let quote = cls & C_QUOTE != 0;
    let slash = cls & C_SLASH != 0;
    if quote && let Some(f) = mask_quoted(tok, out, opts, keyed) {
        return f;
    }
    // fast path: no digit, dot, slash or `[` → literal (host names need dots, paths slashes)
    if !digit && !dot && !slash && b.first() != Some(&b'[') {
        out.push_str(tok);
        return 0;
    }
    if let Some(end) = bracket_host(b) {
        // `[addr]:port` is one socket address; a bare `[addr]` keeps its brackets
        let port = b[..end].last() != Some(&b']');
        out.push_str(if port { "<*>" } else { "[<*>]" });
        out.push_str(&tok[end..]);
        return if port && end == b.len() {
            F_MASKED | F_WILD
        } else {
            F_MASKED
        };
    }
    let mut s = 0;
    while s < b.len() && OPEN.contains(&b[s]) {
        s += 1;
    }
    let mut e = b.len();
    while e > s && CLOSE.contains(&b[e - 1]) {
        e -= 1;
    }
    let core = &b[s..e];
    if let Some(f) = mask_colon(tok, core, s, e, out) {
        return f;
    }
    if whole_variable(core) || (slash && path_like(core)) {
        out.push_str(&tok[..s]);
        out.push_str("<*>");
        out.push_str(&tok[e..]);
        return if s == 0 && e == b.len() {
            F_MASKED | F_WILD
        } else {
            F_MASKED
        };
    }
    if let Some(f) = mask_key_value(tok, core, s, out) {
        return f;
    }
    if !b.iter().any(u8::is_ascii_digit) {
        out.push_str(tok);
        return 0;
    }
    mask_skeleton(tok, out, opts.compound_ids)
}

/// A token with a `:` in its core (`core` is `tok[s..e]`): a variable glued to a word, or a
/// `key:value` with a word key. Returns flags, `None` when neither applies.
pub(super) fn mask_colon(
    tok: &str,
    core: &[u8],
    s: usize,
    e: usize,
    out: &mut String,
) -> Option<u8> {
    // a variable glued to a word by `:` (`10.0.0.1:50010:Got`, `error:0A00010B:SSL`): the word
    // stays (it is not a hex group of an IPv6 address: it needs a letter beyond `a`-`f`)
    if let Some(colon) = core.iter().rposition(|&c| c == b':')
        && colon > 0
        && core.len() - colon > 3
        && core[colon + 1..].iter().all(u8::is_ascii_alphabetic)
        && core[colon + 1..].iter().any(|c| !c.is_ascii_hexdigit())
        && whole_variable(&core[..colon])
        && core[..colon].iter().any(u8::is_ascii_digit)
    {
        out.push_str(&tok[..s]);
        out.push_str("<*>");
        out.push_str(&tok[s + colon..]);
        return Some(F_MASKED);
    }
    // `key:value` with a word key (`total-vm:1024kB`, `zxid:0x1f`): the key stays, as in
    // `key=value`. The key needs a letter beyond `a`-`f`, so an IPv6 group is never a key.
    if let Some(colon) = core.iter().position(|&c| c == b':')
        && colon >= 2
        && core[..colon]
            .iter()
            .all(|&c| c.is_ascii_alphabetic() || matches!(c, b'-' | b'_'))
        && core[..colon]
            .iter()
            .any(|c| c.is_ascii_alphabetic() && !c.is_ascii_hexdigit())
        && !core[colon + 1..].starts_with(b"//")
        && core[colon + 1..].iter().any(u8::is_ascii_digit)
        && whole_variable(&core[colon + 1..])
    {
        out.push_str(&tok[..s + colon + 1]);
        out.push_str("<*>");
        out.push_str(&tok[e..]);
        return Some(F_MASKED);
    }
    None
}

/// `key=value` (`core` starts at byte `s` of `tok`): the key is kept and the value masked when it
/// is a whole variable. Returns flags, `None` when the token is no such pair.
pub(super) fn mask_key_value(tok: &str, core: &[u8], s: usize, out: &mut String) -> Option<u8> {
    // key=value
    if let Some(eq) = core.iter().position(|&c| c == b'=')
        && eq > 0
        && core[..eq]
            .iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
    {
        let val = &core[eq + 1..];
        let mut vs = 0;
        while vs < val.len() && OPEN.contains(&val[vs]) {
            vs += 1;
        }
        let mut ve = val.len();
        while ve > vs && CLOSE.contains(&val[ve - 1]) {
            ve -= 1;
        }
        if whole_variable(&val[vs..ve]) {
            let v0 = s + eq + 1;
            out.push_str(&tok[..v0 + vs]);
            out.push_str("<*>");
            out.push_str(&tok[v0 + ve..]);
            return Some(F_MASKED);
        }
    }
    None
}

/// Masks every alphanumeric run of `tok` that holds a digit (the token's skeleton stays); with
/// `compound`, a compound identifier (runs joined by `_` or `-`, one of them masked) is one
/// `<*>`. Returns flags.
pub(super) fn mask_skeleton(tok: &str, out: &mut String, compound: bool) -> u8 {
    let b = tok.as_bytes();
    // skeleton: mask every alphanumeric run holding a digit; a '-' sign before a digit run that
    // follows a non-alphanumeric byte is part of the number.
    let start = out.len();
    let mut i = 0;
    let mut masked = false;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_alphanumeric() {
            if compound && let Some(end) = compound_end(b, i) {
                if !out[start..].ends_with("<*>") {
                    out.push_str("<*>");
                }
                masked = true;
                i = end;
                continue;
            }
            let rs = i;
            let mut has_digit = false;
            while i < b.len() && b[i].is_ascii_alphanumeric() {
                has_digit |= b[i].is_ascii_digit();
                i += 1;
            }
            let run = &b[rs..i];
            // letters then one digit inside a token are a name too (`jk2_init`, `md5sum`)
            let name = run.len() >= 3
                && run[run.len() - 1].is_ascii_digit()
                && run[..run.len() - 1].iter().all(u8::is_ascii_alphabetic);
            if has_digit && !name {
                if !out[start..].ends_with("<*>") {
                    out.push_str("<*>");
                }
                masked = true;
            } else {
                out.push_str(&tok[rs..i]);
            }
        } else if c == b'-'
            && i + 1 < b.len()
            && b[i + 1].is_ascii_digit()
            && (i == 0 || !b[i - 1].is_ascii_alphanumeric())
        {
            i += 1;
        } else {
            // collapse "<*>.<*>" style joins into one "<*>"
            if out[start..].ends_with("<*>")
                && matches!(c, b'.' | b':' | b'-' | b'_')
                && i + 1 < b.len()
                && b[i + 1].is_ascii_digit()
            {
                i += 1;
                continue;
            }
            let ch_len = utf8_len(c);
            out.push_str(&tok[i..(i + ch_len).min(b.len())]);
            i += ch_len;
        }
    }
    if masked { F_MASKED } else { 0 }
}

/// When the alphanumeric run at `i` starts a compound identifier (two or more runs joined by
/// single `_` or `-`, at least one holding a digit and not a letters-then-one-digit name), the
/// index just past it.
pub(super) fn compound_end(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i;
    let mut runs = 0;
    let mut variable = false;
    loop {
        let rs = j;
        while j < b.len() && b[j].is_ascii_alphanumeric() {
            j += 1;
        }
        let run = &b[rs..j];
        let name = run.len() >= 3
            && run[run.len() - 1].is_ascii_digit()
            && run[..run.len() - 1].iter().all(u8::is_ascii_alphabetic);
        variable |= !name && run.iter().any(u8::is_ascii_digit);
        runs += 1;
        if j + 1 < b.len() && matches!(b[j], b'_' | b'-') && b[j + 1].is_ascii_alphanumeric() {
            j += 1;
        } else {
            break;
        }
    }
    (runs >= 2 && variable).then_some(j)
}

#[inline]
pub(super) fn utf8_len(first: u8) -> usize {
    match first {
        0..=0x7f => 1,
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        _ => 4,
    }
}
