//! Tokenizing and masking a message for [`super::Drain`] (the masks are described in the
//! [`super`] module doc). One table lookup per byte finds token ends and the kinds of byte a
//! token holds; most tokens (letters and plain punctuation) are copied as they are.
//!
//! Long (about 700 lines) because it is one pass over a line that must stay one pass: the
//! tokenizer, the quoted-string and bracketed-host rules and the per-token masks decide together
//! where a token ends and what of it is a variable, and share the byte-class table and the
//! reusable buffers of [`Tokens`]. Split apart, each piece would need the others' positions and
//! buffers passed back and forth on the hot path; its tests live with the Drain tests in
//! [`super`], which exercise the masks through whole lines.

use super::request::mask_request_line;

/// Which of the optional masks are on: all by default, turned off one at a time for ablation
/// (`evidence-bench --ablate`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaskOptions {
    /// A quoted HTTP request line that is the message's own text (not the value of a `key:` or
    /// `key=` field) keeps its method and route (see [`super::request`]); off, it is `"<*>"` like
    /// any quoted value.
    pub request_line: bool,
    /// In such a request line, path segments that are ids by shape are masked one by one and the
    /// route's words stay; off, the whole path is one `<*>`.
    pub path_ids: bool,
    /// A compound identifier glued from word and digit runs by `_` or `-` (`broadcast_5_piece0`,
    /// `worker-04`) inside a longer token is one `<*>`; off, each run holding a digit is masked
    /// alone, so `piece0` stays and `piece12` goes.
    pub compound_ids: bool,
}

impl Default for MaskOptions {
    fn default() -> Self {
        MaskOptions {
            request_line: true,
            path_ids: true,
            compound_ids: true,
        }
    }
}

/// Token flags.
pub const F_MASKED: u8 = 1; // contains a masked variable
pub(super) const F_WILD: u8 = 2; // the whole token is `<*>`

/// A tokenized, masked message (reusable buffers; no allocation per line once warm).
#[derive(Default, Debug)]
pub struct Tokens {
    buf: String,
    spans: Vec<(u32, u32, u8)>,
    /// Second text buffer and per-token bits for rewrites (kept to avoid allocation).
    alt: String,
    scratch: Vec<u8>,
    opts: MaskOptions,
}

impl Tokens {
    /// Choose the optional masks (all on by default).
    pub fn set_options(&mut self, opts: MaskOptions) {
        self.opts = opts;
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.spans.len()
    }
    /// True when no tokens.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }
    /// Token text.
    pub fn tok(&self, i: usize) -> &str {
        let (s, e, _) = self.spans[i];
        &self.buf[s as usize..e as usize]
    }
    pub(super) fn flags(&self, i: usize) -> u8 {
        self.spans[i].2
    }

    /// Whether a digit that does not follow a letter survived masking: the shape cache keeps
    /// only digits right after a letter (`ssh2`, `eth0`), so such a message must not enter it
    /// (see [`super::super::shape`]).
    pub fn keeps_loose_digits(&self) -> bool {
        let b = self.buf.as_bytes();
        b.iter()
            .enumerate()
            .any(|(i, c)| c.is_ascii_digit() && (i == 0 || !b[i - 1].is_ascii_alphabetic()))
    }

    /// 64-bit hash of the masked tokens (text and boundaries), for the exact-match cache: two
    /// messages with the same hash have the same masked form (up to hash collisions, about
    /// 2^-64 per pair).
    pub fn hash(&self) -> u64 {
        const K: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut h: u64 = self.spans.len() as u64;
        let b = self.buf.as_bytes();
        let mut chunks = b.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            h = (h ^ u64::from_le_bytes(w)).wrapping_mul(K).rotate_left(29);
        }
        let mut w = [0u8; 8];
        let rest = chunks.remainder();
        w[..rest.len()].copy_from_slice(rest);
        h = (h ^ u64::from_le_bytes(w) ^ ((rest.len() as u64) << 59))
            .wrapping_mul(K)
            .rotate_left(29);
        for &(_, e, f) in &self.spans {
            h = (h ^ (e as u64) ^ ((f as u64) << 40))
                .wrapping_mul(K)
                .rotate_left(23);
        }
        h ^ (h >> 32)
    }

    /// Tokenize `text` on ASCII whitespace (at most `max_tokens`) and mask variables.
    pub fn fill(&mut self, text: &str, max_tokens: usize) {
        self.buf.clear();
        self.spans.clear();
        let b = text.as_bytes();
        let mut i = 0;
        let mut dates = false;
        // the previous token was a `key:` (its value is a parameter, even a request line)
        let mut keyed = false;
        while i < b.len() && self.spans.len() < max_tokens {
            if CLASS[b[i] as usize] & C_SPACE != 0 {
                i += 1;
                continue;
            }
            // one scan finds the token's end and which kinds of byte it holds
            let s = i;
            let mut cls = 0u8;
            while i < b.len() {
                let c = CLASS[b[i] as usize];
                if c & C_SPACE != 0 {
                    break;
                }
                cls |= c;
                i += 1;
            }
            if cls & C_QUOTE != 0 {
                let e = quoted_end(b, s, i);
                if e != i {
                    for &c in &b[i..e] {
                        cls |= CLASS[c as usize];
                    }
                    i = e;
                }
            }
            let start = self.buf.len() as u32;
            // A timestamp inside the message (`at Fri Jun 17 07:07:00 2005`) is one variable,
            // however many words its layout takes.
            if (cls & C_DIGIT != 0 && b[s].is_ascii_digit()
                || (i - s == 3 && is_date_name(&text[s..i])))
                && let Some((_, used)) = super::super::time::scan_stamp(&b[s..])
                && s + used > i
            {
                let se = s + used;
                i = se;
                while i < b.len() && CLASS[b[i] as usize] & C_SPACE == 0 {
                    i += 1;
                }
                self.buf.push_str("<*>");
                self.buf.push_str(&text[se..i]);
                let f = if se == i { F_MASKED | F_WILD } else { F_MASKED };
                self.spans.push((start, self.buf.len() as u32, f));
                keyed = false;
                continue;
            }
            let tok = &text[s..i];
            let flags = if cls & C_SPECIAL == 0 && b[s] != b'[' {
                // letters and plain punctuation only: a constant
                self.buf.push_str(tok);
                0
            } else {
                mask_token(tok, cls, &mut self.buf, self.opts, keyed)
            };
            keyed = is_key(tok.as_bytes());
            dates |= flags == 0 && i - s <= 4 && is_date_name(tok);
            self.spans.push((start, self.buf.len() as u32, flags));
        }
        if dates {
            self.mask_dates();
        }
    }

    /// Weekday/month names next to a masked number or another date name (an embedded
    /// `Fri Jun 17 07:07:00 2005`) are variables too.
    fn mask_dates(&mut self) {
        const DATE: u8 = 1;
        const WILD: u8 = 2;
        const MARK: u8 = 4;
        let n = self.spans.len();
        // per-token bits in a buffer kept across lines: no allocation once warm
        let mut bits = std::mem::take(&mut self.scratch);
        bits.clear();
        for i in 0..n {
            let f = self.spans[i].2;
            let mut b = 0;
            if f == 0 && is_date_name(self.tok(i)) {
                b |= DATE;
            }
            if f & F_WILD != 0 {
                b |= WILD;
            }
            bits.push(b);
        }
        fn has(bits: &[u8], j: usize, bit: u8) -> bool {
            bits.get(j).is_some_and(|b| b & bit != 0)
        }
        let mut changed = false;
        for i in 0..n {
            if bits[i] & DATE == 0 {
                continue;
            }
            let has = |j: usize, bit: u8| has(&bits, j, bit);
            let anchored = has(i + 1, WILD)
                || (has(i + 1, DATE) && has(i + 2, WILD))
                || (i > 0 && has(i - 1, WILD) && (has(i + 1, WILD) || has(i + 1, DATE)));
            if anchored {
                bits[i] |= MARK;
                changed = true;
            }
        }
        if changed {
            let mut out = std::mem::take(&mut self.alt);
            out.clear();
            for (i, span) in self.spans.iter_mut().enumerate() {
                let start = out.len() as u32;
                if bits[i] & MARK != 0 {
                    out.push_str("<*>");
                    *span = (start, out.len() as u32, F_MASKED | F_WILD);
                } else {
                    out.push_str(&self.buf[span.0 as usize..span.1 as usize]);
                    *span = (start, out.len() as u32, span.2);
                }
            }
            self.alt = std::mem::replace(&mut self.buf, out);
        }
        self.scratch = bits;
    }
}

/// A `key:` token: a word (letters, `_`, `-`) ending with one `:`.
#[inline]
fn is_key(b: &[u8]) -> bool {
    b.len() >= 3
        && b[b.len() - 1] == b':'
        && b[..b.len() - 1]
            .iter()
            .all(|&c| c.is_ascii_alphabetic() || c == b'_' || c == b'-')
}

fn is_date_name(t: &str) -> bool {
    const fn k(n: &[u8; 3]) -> u32 {
        (n[0] as u32) << 16 | (n[1] as u32) << 8 | n[2] as u32
    }
    let b = t.as_bytes();
    let b = match b {
        [x, y, z] | [x, y, z, b','] => [*x, *y, *z],
        _ => return false,
    };
    if !b[0].is_ascii_uppercase() {
        return false;
    }
    const NAMES: [u32; 19] = [
        k(b"Mon"),
        k(b"Tue"),
        k(b"Wed"),
        k(b"Thu"),
        k(b"Fri"),
        k(b"Sat"),
        k(b"Sun"),
        k(b"Jan"),
        k(b"Feb"),
        k(b"Mar"),
        k(b"Apr"),
        k(b"May"),
        k(b"Jun"),
        k(b"Jul"),
        k(b"Aug"),
        k(b"Sep"),
        k(b"Oct"),
        k(b"Nov"),
        k(b"Dec"),
    ];
    NAMES.contains(&k(&b))
}

const C_SPACE: u8 = 1;
const C_DIGIT: u8 = 2;
const C_DOT: u8 = 4;
const C_QUOTE: u8 = 8;
const C_SLASH: u8 = 16;
/// Bytes that can make a token (part of) a variable.
const C_SPECIAL: u8 = C_DIGIT | C_DOT | C_QUOTE | C_SLASH;

/// Byte classes for the tokenizer (one table lookup per byte).
static CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    t[b' ' as usize] = C_SPACE;
    t[b'\t' as usize] = C_SPACE;
    t[b'\n' as usize] = C_SPACE;
    t[b'\r' as usize] = C_SPACE;
    t[0x0c] = C_SPACE;
    let mut d = b'0';
    while d <= b'9' {
        t[d as usize] = C_DIGIT;
        d += 1;
    }
    t[b'.' as usize] = C_DOT;
    t[b'"' as usize] = C_QUOTE;
    t[b'\'' as usize] = C_QUOTE;
    t[b'/' as usize] = C_SLASH;
    t
};

/// Index of the opening quote of a quoted value in the token `b[s..e]`: at the start (after
/// opening brackets) or right after `key=`.
fn quote_open(b: &[u8], s: usize, e: usize) -> Option<usize> {
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
fn after_quote_ok(b: &[u8], j: usize) -> bool {
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
fn quoted_end(b: &[u8], s: usize, e: usize) -> usize {
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
fn mask_quoted(tok: &str, out: &mut String, opts: MaskOptions, keyed: bool) -> Option<u8> {
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
fn bracket_host(b: &[u8]) -> Option<usize> {
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
fn path_like(core: &[u8]) -> bool {
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
fn core_char(c: u8) -> bool {
    c.is_ascii_alphanumeric()
        || matches!(
            c,
            b'.' | b':' | b'/' | b'-' | b'_' | b'+' | b'#' | b',' | b'%'
        )
}

/// Is `core` (already stripped of outer punctuation) a variable as a whole?
fn whole_variable(core: &[u8]) -> bool {
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
fn mask_token(tok: &str, cls: u8, out: &mut String, opts: MaskOptions, keyed: bool) -> u8 {
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
        return F_MASKED;
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
        return F_MASKED;
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
            return F_MASKED;
        }
    }
    if !b.iter().any(u8::is_ascii_digit) {
        out.push_str(tok);
        return 0;
    }
    mask_skeleton(tok, out, opts.compound_ids)
}

/// Masks every alphanumeric run of `tok` that holds a digit (the token's skeleton stays); with
/// `compound`, a compound identifier (runs joined by `_` or `-`, one of them masked) is one
/// `<*>`. Returns flags.
fn mask_skeleton(tok: &str, out: &mut String, compound: bool) -> u8 {
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
fn compound_end(b: &[u8], i: usize) -> Option<usize> {
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
fn utf8_len(first: u8) -> usize {
    match first {
        0..=0x7f => 1,
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        _ => 4,
    }
}
