//! Tokenizing and masking a message for [`super::Drain`] (the masks are described in the
//! [`super`] module doc). One table lookup per byte finds token ends and the kinds of byte a
//! token holds; most tokens (letters and plain punctuation) are copied as they are.
//!
//! It is one pass over a line: the tokenizer here finds where a token ends and the kinds of byte
//! it holds; the per-token masks in [`token`] decide what of it is a variable. Its tests live
//! with the Drain tests in [`super`], which exercise the masks through whole lines.

mod token;

use token::{mask_token, quoted_end};

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
