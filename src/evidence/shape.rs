//! The shape of a message: its bytes with every ASCII digit blanked (except a digit right after
//! a letter), hashed eight bytes at a time. Feeds the shape cache of [`super::LogExtractor`]: a message whose shape was seen before
//! takes that message's template without being tokenized or masked.
//!
//! Why it is sound: the masks of [`super::drain`] decide from the *kind* of each byte (digit,
//! letter, punctuation), the letters and punctuation themselves, and the lengths of digit runs
//! (`ssh2` is a name, `ssh22` a variable), not from which digit it is. Two exceptions:
//! - a digit that survives masking (`ssh2`, `eth0`: one digit after letters) is part of the
//!   template, so digits right after a letter are kept in the shape, and a message whose masked
//!   form keeps any other digit never enters the cache
//!   ([`super::drain::Tokens::keeps_loose_digits`]);
//! - a run of digits that forms a date or time is checked for range (month 1–12, hour 0–23, a
//!   plausible year), and a valid multi-word timestamp is one variable while an out-of-range one
//!   is several. Two messages of one shape that differ only there share the template of the
//!   first one seen.
//!
//! Everything else in a line — its header, time and level — is still read per line. A test
//! (`the_shape_cache_changes_no_grouping`) and the benchmark (`--no-shape-cache`) check that the
//! cache changes no grouping.
//!
//! SWAR (SIMD within a register): each 8-byte word is loaded once, its digit and letter bytes are
//! found with a few arithmetic operations per mask, digits not after a letter are set to `0xFF` (a byte that never occurs in UTF-8, so a digit
//! can never look like another byte), and the word is mixed into the hash with one multiply. No
//! allocation, no per-byte branch.

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;
const K: u64 = 0x9E37_79B9_7F4A_7C15;

/// `w` with every ASCII digit whose previous byte is not an ASCII letter replaced by `0xFF`
/// (`prev_letter`: the byte before `w` was a letter). Digits right after a letter are kept: they
/// may survive masking (`ssh2`, `eth0`). Returns the word and whether its last byte is a letter.
#[inline]
fn blank_digits(w: u64, prev_letter: bool) -> (u64, bool) {
    let x = w ^ (0x30 * ONES); // a digit byte becomes 0..=9
    // high bit set where the low seven bits are >= 10 (no carry: at most 0x7F + 0x76)
    let ge10 = (x & !HIGH) + (0x76 * ONES);
    let digit = !((ge10 | x) & HIGH) & HIGH;
    // letters: lower-cased byte in 0x61..=0x7A (again no carry between lanes)
    let v = w | (0x20 * ONES);
    let ge_a = (v & !HIGH) + ((0x80 - 0x61) * ONES);
    let gt_z = (v & !HIGH) + ((0x80 - 0x7B) * ONES);
    let letter = ge_a & !gt_z & !v & HIGH;
    let after_letter = (letter << 8) | if prev_letter { 0x80 } else { 0 };
    let blank = digit & !after_letter;
    (w | ((blank >> 7) * 0xFF), letter >> 63 != 0)
}

#[inline]
fn mix(h: u64, w: u64) -> u64 {
    (h ^ w).wrapping_mul(K).rotate_left(29)
}

/// 64-bit hash of the shape of `b` (see the module doc): equal for two byte strings of the same
/// length that differ only in the values of ASCII digits that do not follow a letter; different
/// otherwise, up to hash collisions (about 2^-64 per pair).
pub fn shape_hash(b: &[u8]) -> u64 {
    let mut h = mix(0x5151_7A9E_u64, b.len() as u64);
    let mut letter = false;
    let mut chunks = b.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        let (x, l) = blank_digits(u64::from_le_bytes(w), letter);
        h = mix(h, x);
        letter = l;
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut w = [0u8; 8];
        w[..rest.len()].copy_from_slice(rest);
        h = mix(h, blank_digits(u64::from_le_bytes(w), letter).0);
    }
    h ^ (h >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_are_blanked_and_nothing_else() {
        for b in 0u8..=255 {
            let w = u64::from_le_bytes([b, b' ', b'7', 0, 0xFF, b'/', b':', b'9']);
            let (got, last) = blank_digits(w, false);
            let got = got.to_le_bytes();
            let want = if b.is_ascii_digit() { 0xFF } else { b };
            assert_eq!(got[0], want, "byte {b:#x}");
            assert_eq!(&got[1..], &[b' ', 0xFF, 0, 0xFF, b'/', b':', 0xFF]);
            assert!(!last);
            // after a letter (in the word, or the last byte of the word before) a digit stays
            let w = u64::from_le_bytes([b, b'7', b'x', b'7', b'Q', b'9', b'_', b'9']);
            let (got, _) = blank_digits(w, true);
            let got = got.to_le_bytes();
            assert_eq!(got[0], b, "byte {b:#x}");
            let second = if b.is_ascii_alphabetic() { b'7' } else { 0xFF };
            assert_eq!(&got[1..], &[second, b'x', b'7', b'Q', b'9', b'_', 0xFF]);
        }
        assert!(blank_digits(u64::from_le_bytes(*b"1234567z"), false).1);
    }

    #[test]
    fn one_shape_whatever_the_digits() {
        let a = shape_hash(b"queue 17 drained after 402 ms on shard-3");
        assert_eq!(a, shape_hash(b"queue 95 drained after 117 ms on shard-8"));
        // another digit-run length, another word, another length: other shapes
        assert_ne!(a, shape_hash(b"queue 5 drained after 402 ms on shard-3"));
        assert_ne!(a, shape_hash(b"queue 17 drained after 402 us on shard-3"));
        assert_ne!(a, shape_hash(b"queue 17 drained after 402 ms on shard-3 "));
        assert_ne!(shape_hash(b"ab"), shape_hash(b"ab\0"));
        // a digit after a letter is part of the shape, also across the 8-byte boundary
        assert_ne!(shape_hash(b"via ssh2 ok"), shape_hash(b"via ssh1 ok"));
        assert_ne!(shape_hash(b"abcdefg1 ok"), shape_hash(b"abcdefg2 ok"));
        assert_eq!(shape_hash(b"abcdefg 1 ok"), shape_hash(b"abcdefg 2 ok"));
        assert_eq!(shape_hash(b""), shape_hash(b""));
    }
}
