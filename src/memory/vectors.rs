//! Record vectors in memory, compactly: each unit vector is stored as one signed byte per
//! dimension with one scale (symmetric scalar quantisation, as in FAISS's `SQ8` and
//! Qdrant's scalar quantisation), in contiguous blocks that a query scans front to back.
//!
//! At 384 dimensions a vector takes 388 bytes instead of 1,536 (+ a heap allocation each in a
//! map), so 100,000 records hold in ~40 MB, and a scan reads a quarter of the memory it did.
//! The error on a cosine of two unit vectors is below 0.005 (each component is off by at most
//! half a step, `max |x| / 254`), far below the gaps recall acts on.
//!
//! A large set is not scored row by row in full: a first pass compares one sign bit per
//! dimension (binary quantisation with rescoring, as in Qdrant's binary quantisation and
//! sentence-transformers' `quantize_embeddings`: a Hamming distance over 48 bytes at 384
//! dimensions, a few popcounts per row) and keeps a generous shortlist, which is then scored
//! from the byte codes. Sets of at most [`EXACT_ROWS`] rows are always scored in full.
//!
//! Blocks are immutable once shared: adding vectors copies at most the last, partly filled
//! block, and replacing a record's vector copies the block that held the old one; a reader
//! holding the previous set keeps scanning it, without a lock.

use std::collections::HashMap;
use std::sync::Arc;

/// Rows per block: the last, partly filled block is copied when rows are added, so this bounds
/// that copy (5,000 × 384 bytes ≈ 2 MB).
pub const BLOCK_ROWS: usize = 5_000;

/// Sets with at most this many rows are scored in full by [`QuantizedSet::scan_nearest`]; above
/// it, the sign-bit pass picks the shortlist first.
pub const EXACT_ROWS: usize = 20_000;

/// One row in this many of a large set is scored in full for the sample of
/// [`QuantizedSet::scan_nearest`] (the distribution a chance level is taken from).
pub const SAMPLE_STRIDE: usize = 16;

/// Id of a row whose vector was replaced by a later one (never scored).
const DEAD: i64 = i64::MIN;

/// One block of quantised vectors of the same dimension.
#[derive(Debug, Clone, Default)]
struct Block {
    /// Owner of each row (record id), or [`DEAD`].
    ids: Vec<i64>,
    /// Per row: the factor that turns the row's codes back into the unit vector.
    scales: Vec<f32>,
    /// `ids.len() × dim` codes, row after row.
    codes: Vec<i8>,
    /// `ids.len() × words` sign bits (bit `i` of a row: component `i` > 0), row after row.
    signs: Vec<u64>,
}

/// Quantised unit vectors, by owner id (a record), in scan order. With `unique`, a later vector
/// of the same owner replaces the earlier one; otherwise an owner may hold several (a rule's
/// parts).
#[derive(Debug, Clone, Default)]
pub struct QuantizedSet {
    dim: usize,
    unique: bool,
    blocks: Vec<Arc<Block>>,
    /// Owner → `(block, row)` of its vector (only with `unique`).
    slots: HashMap<i64, (u32, u32)>,
    rows: usize,
}

/// Scale and codes of `v` (any length): `codes[i] = round(v[i] / scale)` with
/// `scale = max |v| / 127`. A zero vector has scale 0.
fn quantize(v: &[f32], codes: &mut Vec<i8>) -> f32 {
    let max = v.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    if max == 0.0 || !max.is_finite() {
        codes.extend(std::iter::repeat_n(0i8, v.len()));
        return 0.0;
    }
    let scale = max / 127.0;
    codes.extend(
        v.iter()
            .map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8),
    );
    scale
}

/// Appends the sign bits of `v` (bit `i % 64` of word `i / 64`: `v[i] > 0`), `v.len()` rounded
/// up to whole 64-bit words.
fn push_signs(v: &[f32], signs: &mut Vec<u64>) {
    for chunk in v.chunks(64) {
        signs.push(
            chunk
                .iter()
                .enumerate()
                .fold(0u64, |w, (i, x)| if *x > 0.0 { w | 1 << i } else { w }),
        );
    }
}

/// Appends, for each row of `signs` (`words` 64-bit words a row), its Hamming distance to
/// `query` (the number of differing sign bits). Compiled also with the `popcnt` instruction and
/// chosen at run time when the CPU has it; the x86-64 baseline counts bits in software.
#[multiversion::multiversion(targets("x86_64+popcnt+avx+avx2", "x86_64+popcnt"))]
fn distances(query: &[u64], signs: &[u64], words: usize, out: &mut Vec<u16>) {
    out.extend(signs.chunks_exact(words).map(|row| {
        row.iter()
            .zip(query)
            .map(|(x, y)| (x ^ y).count_ones() as u16)
            .sum::<u16>()
    }));
}

/// `Σ q[i] · c[i]` of two `f32` vectors (over the shorter length) in eight independent lanes,
/// so the compiler vectorises it: a single running sum is one long dependency chain it may not
/// reorder. Compiled also for AVX2 and chosen at run time when the CPU has it
/// (`multiversion`); the same sum in the same order either way.
#[multiversion::multiversion(targets("x86_64+avx+avx2+fma"))]
pub(super) fn dot(q: &[f32], c: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 8];
    let (cq, cc) = (q.chunks_exact(8), c.chunks_exact(8));
    let tail: f32 = cq
        .remainder()
        .iter()
        .zip(cc.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in cq.zip(cc) {
        for i in 0..8 {
            lanes[i] += x[i] * y[i];
        }
    }
    lanes.iter().sum::<f32>() + tail
}

impl QuantizedSet {
    /// An empty set; with `unique`, one vector per owner (the latest).
    pub fn new(unique: bool) -> Self {
        Self {
            unique,
            ..Self::default()
        }
    }

    /// Live vectors held.
    pub fn len(&self) -> usize {
        if self.unique {
            self.slots.len()
        } else {
            self.rows
        }
    }

    /// Whether no vector is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Dimension of the vectors (0 while empty).
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Adds `(owner, unit vector)` rows in order. Empty vectors are skipped; so is a vector of
    /// another dimension than the set's (the first vector fixes it), since it could never be
    /// compared with the same query. With `unique`, an owner's earlier vector stops being
    /// scored.
    pub fn extend(&mut self, rows: impl IntoIterator<Item = (i64, Vec<f32>)>) {
        for (id, v) in rows {
            if v.is_empty() {
                continue;
            }
            if self.dim == 0 {
                self.dim = v.len();
            }
            if v.len() != self.dim {
                continue;
            }
            if self.unique
                && let Some((b, r)) = self.slots.get(&id).copied()
            {
                Arc::make_mut(&mut self.blocks[b as usize]).ids[r as usize] = DEAD;
            }
            let full = self.blocks.last().is_none_or(|b| b.ids.len() >= BLOCK_ROWS);
            if full {
                self.blocks.push(Arc::new(Block::default()));
            }
            let at = self.blocks.len() - 1;
            let block = Arc::make_mut(&mut self.blocks[at]);
            let scale = quantize(&v, &mut block.codes);
            push_signs(&v, &mut block.signs);
            block.scales.push(scale);
            block.ids.push(id);
            if self.unique {
                self.slots
                    .insert(id, (at as u32, (block.ids.len() - 1) as u32));
            }
            self.rows += 1;
        }
    }

    /// Calls `each(owner, cosine)` for every live vector, with `query` a unit vector of the
    /// set's dimension (nothing is called for another dimension).
    ///
    /// The query is itself turned into 16-bit integers ([`query_codes`]), so each row costs one
    /// integer dot product, which the CPU does 16 products at a time; the query's own rounding
    /// error (≤ 1/22,000 of its largest component at 1,536 dimensions, ≤ 1/65,000 at 384) is
    /// far below that of the stored codes.
    pub fn scan(&self, query: &[f32], mut each: impl FnMut(i64, f32)) {
        if query.len() != self.dim || self.dim == 0 {
            return;
        }
        let Some((q, q_scale)) = query_codes(query) else {
            for block in &self.blocks {
                block
                    .ids
                    .iter()
                    .filter(|id| **id != DEAD)
                    .for_each(|id| each(*id, 0.0));
            }
            return;
        };
        for block in &self.blocks {
            for ((id, scale), codes) in block
                .ids
                .iter()
                .zip(&block.scales)
                .zip(block.codes.chunks_exact(self.dim))
            {
                if *id != DEAD {
                    each(*id, dot_codes(&q, codes) as f32 * q_scale * scale);
                }
            }
        }
    }
}

impl QuantizedSet {
    /// Like [`QuantizedSet::scan`], but for a large set only the rows likely to be nearest:
    /// calls `each(owner, cosine)` for the `shortlist` live rows whose sign bits differ least
    /// from the query's (and any at the same distance as the last of them) (all rows when the set has at most [`EXACT_ROWS`], or at most
    /// `shortlist`), and `sampled(cosine)` for a sample of the live rows (the first
    /// 1/[`SAMPLE_STRIDE`] of each block of a large set; every row otherwise, with the same cosines as
    /// `each`). Returns whether every row was scored.
    ///
    /// The shortlist is ordered by Hamming distance, then scored from the byte codes, so the
    /// cosines are those of [`QuantizedSet::scan`]; only which rows are scored differs.
    pub fn scan_nearest(
        &self,
        query: &[f32],
        shortlist: usize,
        mut each: impl FnMut(i64, f32),
        mut sampled: impl FnMut(f32),
    ) -> bool {
        if self.rows <= EXACT_ROWS.max(shortlist) {
            self.scan(query, |id, c| {
                each(id, c);
                sampled(c);
            });
            return true;
        }
        if query.len() != self.dim || self.dim == 0 {
            return true;
        }
        let Some((q, q_scale)) = query_codes(query) else {
            self.scan(query, |id, c| {
                each(id, c);
                sampled(c);
            });
            return true;
        };
        let words = self.dim.div_ceil(64);
        let mut q_signs = Vec::with_capacity(words);
        push_signs(query, &mut q_signs);
        let cosine = |b: &Block, r: usize| {
            let codes = &b.codes[r * self.dim..(r + 1) * self.dim];
            dot_codes(&q, codes) as f32 * q_scale * b.scales[r]
        };
        // Every row's distance (dead rows too: they are skipped below), and how many rows are
        // at each distance; the sample on the way.
        let mut dist: Vec<u16> = Vec::with_capacity(self.blocks.len() * BLOCK_ROWS);
        let mut counts = vec![0usize; words * 64 + 1];
        for b in &self.blocks {
            let from = dist.len();
            distances(&q_signs, &b.signs, words, &mut dist);
            // The sample is the first rows of each block, read front to back: rows spread over
            // the whole memory's history, and a stride would miss the cache on every row.
            let sample = b.ids.len().div_ceil(SAMPLE_STRIDE);
            for (r, (id, d)) in b.ids.iter().zip(&dist[from..]).enumerate() {
                if *id == DEAD {
                    continue;
                }
                counts[usize::from(*d)] += 1;
                if r < sample {
                    sampled(cosine(b, r));
                }
            }
        }
        // The smallest distance that lets at least `shortlist` rows in: every row at most that
        // far is scored (a few more than `shortlist` when rows tie at the edge).
        let mut within = 0usize;
        let edge = counts
            .iter()
            .position(|c| {
                within += c;
                within >= shortlist
            })
            .unwrap_or(counts.len() - 1);
        let mut near: Vec<(u32, u32)> = Vec::with_capacity(within);
        let mut at = 0usize;
        for (bi, b) in self.blocks.iter().enumerate() {
            for (r, (id, d)) in b.ids.iter().zip(&dist[at..at + b.ids.len()]).enumerate() {
                if *id != DEAD && usize::from(*d) <= edge {
                    near.push((bi as u32, r as u32));
                }
            }
            at += b.ids.len();
        }
        for (bi, r) in near {
            let b = &self.blocks[bi as usize];
            each(b.ids[r as usize], cosine(b, r as usize));
        }
        false
    }
}

/// `query` as 16-bit integers and the factor that turns them back: the largest component maps
/// to the largest magnitude for which a dot product with `i8` codes cannot overflow an `i32`
/// (`dim · m · 127 < 2³¹`, capped at `i16::MAX`). `None` for a zero or non-finite query.
fn query_codes(query: &[f32]) -> Option<(Vec<i16>, f32)> {
    let max = query.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    if max == 0.0 || !max.is_finite() {
        return None;
    }
    let room = (i32::MAX as f64 / (query.len().max(1) as f64 * 127.0)).floor();
    let top = room.min(f64::from(i16::MAX)) as f32;
    if top < 1.0 {
        return None;
    }
    let scale = max / top;
    let codes = query
        .iter()
        .map(|x| (x / scale).round().clamp(-top, top) as i16)
        .collect();
    Some((codes, scale))
}

/// `Σ q[i] · c[i]` in exact integer arithmetic. Integer addition is associative, so the
/// compiler may reorder this sum freely: it becomes packed multiply-adds of 16-bit pairs
/// (`vpmaddwd` with AVX2, compiled also for AVX2 and chosen at run time). No overflow for the
/// magnitudes [`query_codes`] produces.
#[multiversion::multiversion(targets("x86_64+avx+avx2+fma"))]
fn dot_codes(q: &[i16], c: &[i8]) -> i32 {
    q.iter()
        .zip(c)
        .map(|(x, y)| i32::from(*x) * i32::from(i16::from(*y)))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(seed: f32, dim: usize) -> Vec<f32> {
        let v: Vec<f32> = (0..dim).map(|i| (i as f32 * seed).sin()).collect();
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.into_iter().map(|x| x / n).collect()
    }

    fn exact(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[test]
    fn quantised_cosines_stay_within_half_a_percent_of_the_exact_ones() {
        let mut set = QuantizedSet::new(true);
        let vs: Vec<Vec<f32>> = (1..=40).map(|s| unit(s as f32 * 0.173, 384)).collect();
        set.extend(vs.iter().cloned().enumerate().map(|(i, v)| (i as i64, v)));
        let q = unit(0.611, 384);
        let mut seen = 0;
        set.scan(&q, |id, c| {
            seen += 1;
            let want = exact(&vs[id as usize], &q);
            assert!((c - want).abs() < 0.005, "{id}: {c} vs {want}");
        });
        assert_eq!(seen, 40);
    }

    #[test]
    fn a_later_vector_replaces_the_earlier_one_of_the_same_record() {
        let mut set = QuantizedSet::new(true);
        set.extend([(7, unit(0.3, 16)), (8, unit(0.5, 16))]);
        let q = unit(0.9, 16);
        set.extend([(7, q.clone())]);
        let mut got = Vec::new();
        set.scan(&q, |id, c| got.push((id, c)));
        assert_eq!(got.len(), 2);
        assert_eq!(set.len(), 2);
        let seven = got.iter().find(|(id, _)| *id == 7).map(|(_, c)| *c);
        assert!(seven.is_some_and(|c| c > 0.99), "{got:?}");
    }

    #[test]
    fn without_unique_an_owner_keeps_every_vector() {
        let mut set = QuantizedSet::new(false);
        set.extend([(3, unit(0.3, 8)), (3, unit(0.7, 8)), (4, unit(0.2, 8))]);
        let mut n = 0;
        set.scan(&unit(0.1, 8), |_, _| n += 1);
        assert_eq!((n, set.len()), (3, 3));
    }

    #[test]
    fn vectors_of_another_dimension_and_empty_ones_are_skipped() {
        let mut set = QuantizedSet::new(true);
        set.extend([(1, unit(0.3, 8)), (2, Vec::new()), (3, unit(0.3, 4))]);
        assert_eq!((set.len(), set.dim()), (1, 8));
        let mut n = 0;
        set.scan(&unit(0.3, 4), |_, _| n += 1);
        assert_eq!(n, 0, "a query of another dimension compares nothing");
    }

    #[test]
    fn blocks_fill_up_before_a_new_one_starts_and_a_shared_copy_is_untouched() {
        let mut set = QuantizedSet::new(true);
        set.extend((0..BLOCK_ROWS as i64 + 3).map(|i| (i, unit(0.01 * i as f32 + 0.1, 8))));
        assert_eq!(set.blocks.len(), 2);
        let before = set.clone();
        set.extend([(0, unit(0.77, 8))]);
        let mut old = 0;
        before.scan(&unit(0.5, 8), |_, _| old += 1);
        assert_eq!(
            old,
            BLOCK_ROWS + 3,
            "the shared copy still scores every row"
        );
        assert_eq!(set.len(), BLOCK_ROWS + 3);
    }

    #[test]
    fn wide_vectors_score_without_overflow() {
        // 1,536 dimensions (an OpenAI-size endpoint): the integer dot product must not wrap.
        let mut set = QuantizedSet::new(true);
        let flat = vec![1.0 / (1536.0f32).sqrt(); 1536];
        let v = unit(0.37, 1536);
        set.extend([(1, flat.clone()), (2, v.clone())]);
        let mut got = Vec::new();
        set.scan(&flat, |id, c| got.push((id, c)));
        assert_eq!(got.len(), 2);
        assert!((got[0].1 - 1.0).abs() < 0.005, "{got:?}");
        assert!((got[1].1 - exact(&v, &flat)).abs() < 0.005, "{got:?}");
    }

    #[test]
    fn a_zero_vector_scores_zero() {
        let mut set = QuantizedSet::new(true);
        set.extend([(1, vec![0.0; 8])]);
        let mut got = Vec::new();
        set.scan(&unit(0.4, 8), |id, c| got.push((id, c)));
        assert_eq!(got, vec![(1, 0.0)]);
    }

    /// A deterministic pseudo-random unit vector (xorshift64*; roughly Gaussian components as
    /// the sum of four uniforms).
    fn random_unit(state: &mut u64, dim: usize) -> Vec<f32> {
        let mut next = || {
            *state ^= *state >> 12;
            *state ^= *state << 25;
            *state ^= *state >> 27;
            (state.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        };
        let v: Vec<f32> = (0..dim)
            .map(|_| next() + next() + next() + next())
            .collect();
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.into_iter().map(|x| x / n).collect()
    }

    #[test]
    fn a_large_set_scores_a_sign_bit_shortlist_that_holds_the_nearest_rows() {
        let dim = 384;
        let mut state = 0x9e37_79b9_7f4a_7c15;
        let mut rows: Vec<Vec<f32>> = (0..EXACT_ROWS + 5_000)
            .map(|_| random_unit(&mut state, dim))
            .collect();
        let near = |state: &mut u64, base: &[f32], noise: f32| -> Vec<f32> {
            let e = random_unit(state, base.len());
            let v: Vec<f32> = base.iter().zip(&e).map(|(a, b)| a + noise * b).collect();
            let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.into_iter().map(|x| x / n).collect()
        };
        // Three topics, each with ten stored rows about it scattered through the set (cosines
        // with a query on the topic around 0.4–0.6, as a real match; unrelated rows ≈ 0 ± 0.05).
        let topics: Vec<Vec<f32>> = (0..3).map(|_| random_unit(&mut state, dim)).collect();
        for (t, base) in topics.iter().enumerate() {
            for k in 0..10 {
                rows[t * 7_919 + k * 811] = near(&mut state, base, 1.0);
            }
        }
        let mut set = QuantizedSet::new(true);
        set.extend(rows.iter().cloned().enumerate().map(|(i, v)| (i as i64, v)));
        for (t, base) in topics.iter().enumerate() {
            let q = near(&mut state, base, 1.0);
            let mut all = Vec::new();
            set.scan(&q, |id, c| all.push((c, id)));
            all.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            let mut expected: Vec<i64> = (0..10).map(|k| (t * 7_919 + k * 811) as i64).collect();
            let mut top: Vec<i64> = all[..10].iter().map(|(_, id)| *id).collect();
            expected.sort();
            top.sort();
            assert_eq!(top, expected, "the topic's rows are its ten nearest");
            let (mut short, mut sample) = (Vec::new(), Vec::new());
            let full = set.scan_nearest(&q, 1_024, |id, c| short.push((c, id)), |c| sample.push(c));
            assert!(!full);
            assert!((1_024..1_536).contains(&short.len()), "{}", short.len());
            assert_eq!(
                sample.len(),
                5 * BLOCK_ROWS.div_ceil(SAMPLE_STRIDE),
                "five full blocks"
            );
            for best in &all[..10] {
                assert!(short.contains(best), "{best:?} missing from the shortlist");
            }
        }
        // At most EXACT_ROWS rows: every row, and every cosine in the sample.
        let mut small = QuantizedSet::new(true);
        small.extend(
            rows.iter()
                .take(100)
                .cloned()
                .enumerate()
                .map(|(i, v)| (i as i64, v)),
        );
        let (mut got, mut sample) = (Vec::new(), Vec::new());
        assert!(small.scan_nearest(&rows[0], 10, |id, c| got.push((c, id)), |c| sample.push(c)));
        assert_eq!(got.len(), 100);
        assert_eq!(sample, got.iter().map(|(c, _)| *c).collect::<Vec<_>>());
    }
}
