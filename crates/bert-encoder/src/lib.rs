//! A BERT encoder's forward pass for one sequence at a time, on weights laid out for it once at
//! load: the hot path of IncidentMind's built-in embedding model (issue #14).
//!
//! The architecture is BERT's (Devlin et al., "BERT: Pre-training of Deep Bidirectional
//! Transformers for Language Understanding", NAACL 2019; the post-LayerNorm encoder of Vaswani
//! et al., "Attention Is All You Need", 2017), with the tensor names and conventions of Hugging
//! Face's `BertModel`: word + position + token-type embeddings, LayerNorm; then per layer
//! self-attention (query, key and value projections, scaled dot-product attention per head,
//! output projection, residual, LayerNorm) and the feed-forward block (dense, GELU with `erf`,
//! dense, residual, LayerNorm).
//!
//! Why not a general tensor library here: a query is 10–60 word pieces, so every matrix product
//! has few rows and a large weight matrix. A general matrix product repacks that weight matrix on
//! every call, and each of the ≈ 120 operations of a pass pays its own dispatch; at this size
//! that was most of the time. Here each weight matrix is repacked once, at load, into panels of
//! [`NR`] output columns (each panel: input-major, `NR` contiguous floats per input), which the
//! kernel streams while it keeps a block of [`MR`] rows × `NR` columns of output in registers.
//! One sequence per pass also means no padding and no attention mask: a text costs its own
//! length, whatever it is embedded with.
//!
//! Everything is blocking and CPU-bound. Matrix products of at least `2 × MR` rows split their
//! rows over rayon's pool (two halves, `rayon::join`).

use multiversion::multiversion;

/// Output columns per weight panel: two AVX registers of f32.
pub const NR: usize = 16;
/// Rows of output the kernel computes together (each panel row is loaded once for all of them):
/// `MR × NR / 8` = 12 accumulator registers of the 16 AVX2 has.
pub const MR: usize = 6;

/// Shape of the encoder, from the model's `config.json` (Hugging Face's `BertConfig` names).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shape {
    /// Width of every hidden state (384 for MiniLM-L6).
    pub hidden: usize,
    /// Width of the feed-forward block (1536 for MiniLM-L6).
    pub intermediate: usize,
    /// Attention heads; `hidden` must be a multiple (12 for MiniLM-L6).
    pub heads: usize,
    /// LayerNorm epsilon (1e-12 for BERT).
    pub eps: f32,
}

/// Why weights cannot form an encoder.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ShapeError {
    /// A matrix or vector has another size than the shape requires.
    #[error("weight {name}: {got} values, the model's shape needs {want}")]
    Size {
        /// The weight's role.
        name: &'static str,
        /// Values found.
        got: usize,
        /// Values the shape requires.
        want: usize,
    },
    /// A width is zero, not a multiple of [`NR`] or of the head count.
    #[error("unsupported model shape: {0}")]
    Unsupported(String),
}

/// A dense (fully connected) layer `y = x·Wᵀ + b` with `W` repacked into panels (see the module
/// doc).
#[derive(Debug, Clone)]
pub struct Dense {
    inputs: usize,
    outputs: usize,
    /// The weights, panel by panel.
    panels: Vec<f32>,
    bias: Vec<f32>,
}

impl Dense {
    /// From a weight in PyTorch's `nn.Linear` layout (`outputs` rows of `inputs`, row-major)
    /// and its bias (`outputs`).
    ///
    /// # Errors
    /// [`ShapeError`] when the sizes disagree or `outputs` is not a multiple of [`NR`].
    pub fn new(
        name: &'static str,
        weight: &[f32],
        bias: &[f32],
        outputs: usize,
        inputs: usize,
    ) -> Result<Self, ShapeError> {
        check(name, weight.len(), outputs * inputs)?;
        check(name, bias.len(), outputs)?;
        if outputs == 0 || inputs == 0 || !outputs.is_multiple_of(NR) {
            return Err(ShapeError::Unsupported(format!(
                "{name} has {outputs} outputs, not a positive multiple of {NR}"
            )));
        }
        let mut panels = Vec::with_capacity(outputs * inputs);
        for p in 0..outputs / NR {
            for k in 0..inputs {
                panels.extend((0..NR).map(|c| weight[(p * NR + c) * inputs + k]));
            }
        }
        Ok(Self {
            inputs,
            outputs,
            panels,
            bias: bias.to_vec(),
        })
    }

    /// Several layers over the same input as one (outputs side by side, in order): the query,
    /// key and value projections become one pass over the input.
    ///
    /// # Errors
    /// [`ShapeError::Unsupported`] when the layers' inputs differ or none is given.
    pub fn fused(parts: &[Dense]) -> Result<Self, ShapeError> {
        let inputs = parts.first().map_or(0, |d| d.inputs);
        if inputs == 0 || parts.iter().any(|d| d.inputs != inputs) {
            return Err(ShapeError::Unsupported(
                "fused layers must share one input width".into(),
            ));
        }
        Ok(Self {
            inputs,
            outputs: parts.iter().map(|d| d.outputs).sum(),
            panels: parts
                .iter()
                .flat_map(|d| d.panels.iter().copied())
                .collect(),
            bias: parts.iter().flat_map(|d| d.bias.iter().copied()).collect(),
        })
    }

    /// Output width.
    pub fn outputs(&self) -> usize {
        self.outputs
    }

    /// `y = x·Wᵀ + b` for `rows` rows of `x` (row-major, `inputs` wide), into `y` (row-major,
    /// `outputs` wide), then `then` on each output row. Splits the rows over two threads when
    /// there are at least `2 × MR`.
    fn apply(&self, x: &[f32], rows: usize, y: &mut [f32], then: &(impl Fn(&mut [f32]) + Sync)) {
        debug_assert_eq!(x.len(), rows * self.inputs);
        debug_assert_eq!(y.len(), rows * self.outputs);
        if rows >= 2 * MR {
            let top = (rows / 2).div_ceil(MR) * MR;
            let (x_top, x_bottom) = x.split_at(top * self.inputs);
            let (y_top, y_bottom) = y.split_at_mut(top * self.outputs);
            rayon::join(
                || self.apply_rows(x_top, top, y_top, then),
                || self.apply_rows(x_bottom, rows - top, y_bottom, then),
            );
        } else {
            self.apply_rows(x, rows, y, then);
        }
    }

    fn apply_rows(&self, x: &[f32], rows: usize, y: &mut [f32], then: &impl Fn(&mut [f32])) {
        dense_kernel(x, rows, self.inputs, &self.panels, &self.bias, y);
        for row in y.chunks_exact_mut(self.outputs) {
            then(row);
        }
    }
}

fn check(name: &'static str, got: usize, want: usize) -> Result<(), ShapeError> {
    if got == want {
        Ok(())
    } else {
        Err(ShapeError::Size { name, got, want })
    }
}

/// The panel kernel: every panel, every block of [`MR`] rows, then the last 1 to `MR − 1`.
#[multiversion(targets("x86_64+avx2+fma"))]
fn dense_kernel(
    x: &[f32],
    rows: usize,
    inputs: usize,
    panels: &[f32],
    bias: &[f32],
    y: &mut [f32],
) {
    let outputs = bias.len();
    for (p, panel) in panels.chunks_exact(inputs * NR).enumerate() {
        let col = p * NR;
        let b = &bias[col..col + NR];
        let mut r = 0;
        while r + MR <= rows {
            block::<MR>(x, r, inputs, panel, b, y, outputs, col);
            r += MR;
        }
        match rows - r {
            1 => block::<1>(x, r, inputs, panel, b, y, outputs, col),
            2 => block::<2>(x, r, inputs, panel, b, y, outputs, col),
            3 => block::<3>(x, r, inputs, panel, b, y, outputs, col),
            4 => block::<4>(x, r, inputs, panel, b, y, outputs, col),
            5 => block::<5>(x, r, inputs, panel, b, y, outputs, col),
            _ => {}
        }
    }
}

/// `R` rows × [`NR`] columns of output from one panel, accumulated in registers.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn block<const R: usize>(
    x: &[f32],
    r0: usize,
    inputs: usize,
    panel: &[f32],
    bias: &[f32],
    y: &mut [f32],
    outputs: usize,
    col: usize,
) {
    let rows: [&[f32]; R] = std::array::from_fn(|i| &x[(r0 + i) * inputs..(r0 + i + 1) * inputs]);
    let mut acc = [[0f32; NR]; R];
    for a in &mut acc {
        a.copy_from_slice(bias);
    }
    for (k, w) in panel.chunks_exact(NR).enumerate() {
        for (a, row) in acc.iter_mut().zip(&rows) {
            let xv = row[k];
            for (o, wv) in a.iter_mut().zip(w) {
                *o = xv.mul_add(*wv, *o);
            }
        }
    }
    for (i, a) in acc.iter().enumerate() {
        let at = (r0 + i) * outputs + col;
        y[at..at + NR].copy_from_slice(a);
    }
}

/// Dot product of two equally long slices.
#[multiversion(targets("x86_64+avx2+fma"))]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (xa, xb) in ca.zip(cb) {
        for ((l, x), y) in lanes.iter_mut().zip(xa).zip(xb) {
            *l = x.mul_add(*y, *l);
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// `acc += scale · v`, element-wise.
#[multiversion(targets("x86_64+avx2+fma"))]
fn axpy(acc: &mut [f32], scale: f32, v: &[f32]) {
    for (a, x) in acc.iter_mut().zip(v) {
        *a = scale.mul_add(*x, *a);
    }
}

/// LayerNorm over one row (Ba et al., 2016), in place: `(x − mean) / √(var + eps) · g + b`, with
/// the biased variance, as PyTorch's `nn.LayerNorm`.
fn layer_norm(row: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32) {
    let n = row.len() as f32;
    let mean = row.iter().sum::<f32>() / n;
    let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n;
    let inv = 1.0 / (var + eps).sqrt();
    for ((v, g), b) in row.iter_mut().zip(gamma).zip(beta) {
        *v = (*v - mean) * inv * g + b;
    }
}

/// The residual connection and LayerNorm after a sub-layer, row by row (`width` wide):
/// `rows = LayerNorm(rows + residual)`.
fn add_and_norm(
    rows: &mut [f32],
    residual: &[f32],
    width: usize,
    (gamma, beta): &(Vec<f32>, Vec<f32>),
    eps: f32,
) {
    for (row, res) in rows
        .chunks_exact_mut(width)
        .zip(residual.chunks_exact(width))
    {
        for (v, r) in row.iter_mut().zip(res) {
            *v += r;
        }
        layer_norm(row, gamma, beta, eps);
    }
}

/// `erf(x)` by Abramowitz & Stegun, "Handbook of Mathematical Functions", formula 7.1.26
/// (absolute error ≤ 1.5 × 10⁻⁷), evaluated in f64.
fn erf(x: f32) -> f32 {
    const P: f64 = 0.327_591_1;
    const A: [f64; 5] = [
        0.254_829_592,
        -0.284_496_736,
        1.421_413_741,
        -1.453_152_027,
        1.061_405_429,
    ];
    let v = f64::from(x.abs());
    let t = 1.0 / (1.0 + P * v);
    let poly = t * (A[0] + t * (A[1] + t * (A[2] + t * (A[3] + t * A[4]))));
    let e = 1.0 - poly * (-v * v).exp();
    (e as f32).copysign(x)
}

/// GELU as BERT defines it (Hendrycks & Gimpel, 2016): `x · Φ(x) = x/2 · (1 + erf(x/√2))`.
fn gelu(row: &mut [f32]) {
    for v in row {
        *v = 0.5 * *v * (1.0 + erf(*v * std::f32::consts::FRAC_1_SQRT_2));
    }
}

/// One encoder layer's weights.
#[derive(Debug, Clone)]
pub struct Layer {
    /// Query, key and value projections, fused (outputs `3 × hidden`, in that order).
    pub qkv: Dense,
    /// The attention output projection.
    pub attention_out: Dense,
    /// LayerNorm after attention: `(gamma, beta)`.
    pub attention_norm: (Vec<f32>, Vec<f32>),
    /// The feed-forward block's first layer (`hidden → intermediate`).
    pub intermediate: Dense,
    /// Its second layer (`intermediate → hidden`).
    pub output: Dense,
    /// LayerNorm after the feed-forward block: `(gamma, beta)`.
    pub output_norm: (Vec<f32>, Vec<f32>),
}

/// A BERT encoder, ready to run.
#[derive(Debug, Clone)]
pub struct Encoder {
    shape: Shape,
    /// Word-piece embeddings, `vocab × hidden` (f16, as the model file stores them: only the
    /// rows of a text's pieces are ever read, each widened to f32).
    words: Vec<half::f16>,
    positions: Vec<f32>,
    token_types: Vec<f32>,
    embedding_norm: (Vec<f32>, Vec<f32>),
    layers: Vec<Layer>,
}

impl Encoder {
    /// An encoder of `shape` from its embedding tables (row-major, `hidden` wide: word pieces,
    /// positions, token types), the embeddings' LayerNorm and its layers.
    ///
    /// # Errors
    /// [`ShapeError`] when a table or layer disagrees with `shape`.
    pub fn new(
        shape: Shape,
        words: Vec<half::f16>,
        positions: Vec<f32>,
        token_types: Vec<f32>,
        embedding_norm: (Vec<f32>, Vec<f32>),
        layers: Vec<Layer>,
    ) -> Result<Self, ShapeError> {
        let h = shape.hidden;
        if h == 0 || shape.heads == 0 || !h.is_multiple_of(shape.heads) || layers.is_empty() {
            return Err(ShapeError::Unsupported(format!(
                "hidden {h}, {} heads, {} layers",
                shape.heads,
                layers.len()
            )));
        }
        for (name, len) in [
            ("word embeddings", words.len()),
            ("position embeddings", positions.len()),
            ("token type embeddings", token_types.len()),
        ] {
            if len == 0 || !len.is_multiple_of(h) {
                return Err(ShapeError::Size {
                    name,
                    got: len,
                    want: h,
                });
            }
        }
        check("embedding norm", embedding_norm.0.len(), h)?;
        check("embedding norm", embedding_norm.1.len(), h)?;
        for l in &layers {
            check("qkv", l.qkv.outputs, 3 * h)?;
            check("qkv", l.qkv.inputs, h)?;
            check("attention output", l.attention_out.outputs, h)?;
            check("attention output", l.attention_out.inputs, h)?;
            check("intermediate", l.intermediate.outputs, shape.intermediate)?;
            check("intermediate", l.intermediate.inputs, h)?;
            check("output", l.output.outputs, h)?;
            check("output", l.output.inputs, shape.intermediate)?;
            for v in [
                &l.attention_norm.0,
                &l.attention_norm.1,
                &l.output_norm.0,
                &l.output_norm.1,
            ] {
                check("layer norm", v.len(), h)?;
            }
        }
        Ok(Self {
            shape,
            words,
            positions,
            token_types,
            embedding_norm,
            layers,
        })
    }

    /// Longest sequence the position table allows.
    pub fn max_positions(&self) -> usize {
        self.positions.len() / self.shape.hidden
    }

    /// The last hidden layer for one sequence of word-piece `ids` with their token-type ids:
    /// `ids.len()` rows of `hidden`, row-major. Ids outside the vocabulary read as id 0
    /// (`[PAD]`); positions beyond [`Encoder::max_positions`] are not read (the caller cuts).
    pub fn forward(&self, ids: &[u32], types: &[u32]) -> Vec<f32> {
        let h = self.shape.hidden;
        let len = ids.len().min(self.max_positions());
        let vocab = self.words.len() / h;
        let type_rows = self.token_types.len() / h;
        let mut x = vec![0f32; len * h];
        for (t, row) in x.chunks_exact_mut(h).enumerate() {
            let id = ids[t] as usize;
            let id = if id < vocab { id } else { 0 };
            let ty = types.get(t).map_or(0, |&v| v as usize);
            let ty = if ty < type_rows { ty } else { 0 };
            let word = &self.words[id * h..(id + 1) * h];
            let pos = &self.positions[t * h..(t + 1) * h];
            let typ = &self.token_types[ty * h..(ty + 1) * h];
            for (i, v) in row.iter_mut().enumerate() {
                *v = word[i].to_f32() + pos[i] + typ[i];
            }
            layer_norm(
                row,
                &self.embedding_norm.0,
                &self.embedding_norm.1,
                self.shape.eps,
            );
        }
        let mut qkv = vec![0f32; len * 3 * h];
        let mut context = vec![0f32; len * h];
        let mut attended = vec![0f32; len * h];
        let mut inner = vec![0f32; len * self.shape.intermediate];
        let mut out = vec![0f32; len * h];
        for layer in &self.layers {
            layer.qkv.apply(&x, len, &mut qkv, &|_| {});
            self.attention(&qkv, len, &mut context);
            layer
                .attention_out
                .apply(&context, len, &mut attended, &|_| {});
            add_and_norm(&mut attended, &x, h, &layer.attention_norm, self.shape.eps);
            layer.intermediate.apply(&attended, len, &mut inner, &gelu);
            layer.output.apply(&inner, len, &mut out, &|_| {});
            add_and_norm(&mut out, &attended, h, &layer.output_norm, self.shape.eps);
            std::mem::swap(&mut x, &mut out);
        }
        x
    }

    /// Scaled dot-product attention per head over the fused `qkv` rows (`[Q | K | V]`, each
    /// `hidden` wide), into `context` (`len × hidden`, heads side by side).
    fn attention(&self, qkv: &[f32], len: usize, context: &mut [f32]) {
        let h = self.shape.hidden;
        let width = h / self.shape.heads;
        let scale = 1.0 / (width as f32).sqrt();
        let mut scores = vec![0f32; len];
        context.fill(0.0);
        for head in 0..self.shape.heads {
            let at = head * width;
            for i in 0..len {
                let q = &qkv[i * 3 * h + at..i * 3 * h + at + width];
                for (j, s) in scores.iter_mut().enumerate() {
                    let k = &qkv[j * 3 * h + h + at..j * 3 * h + h + at + width];
                    *s = dot(q, k) * scale;
                }
                let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let mut sum = 0.0;
                for s in &mut scores {
                    *s = (*s - max).exp();
                    sum += *s;
                }
                let out = &mut context[i * h + at..i * h + at + width];
                for (j, s) in scores.iter().enumerate() {
                    let v = &qkv[j * 3 * h + 2 * h + at..j * 3 * h + 2 * h + at + width];
                    axpy(out, s / sum, v);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(x: &[f32], rows: usize, w: &[f32], b: &[f32], outputs: usize) -> Vec<f32> {
        let inputs = x.len() / rows;
        let mut y = vec![0f32; rows * outputs];
        for r in 0..rows {
            for o in 0..outputs {
                let s: f64 = (0..inputs)
                    .map(|k| f64::from(x[r * inputs + k]) * f64::from(w[o * inputs + k]))
                    .sum();
                y[r * outputs + o] = s as f32 + b[o];
            }
        }
        y
    }

    /// Pseudo-random multiples of 1/64 in [−1, 1]: exact in f16, as the model's weights are.
    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| (((i as u32).wrapping_mul(2_654_435_761) ^ seed) % 129) as f32 / 64.0 - 1.0)
            .collect()
    }

    #[test]
    fn the_panel_kernel_matches_a_plain_matrix_product_for_every_row_count() {
        let (inputs, outputs) = (40, 48);
        let w = values(inputs * outputs, 7);
        let b = values(outputs, 11);
        let dense = Dense::new("test", &w, &b, outputs, inputs).expect("shape");
        for rows in [1, 2, 3, 4, 5, 6, 7, 11, 12, 13, 37] {
            let x = values(rows * inputs, rows as u32);
            let mut y = vec![0f32; rows * outputs];
            dense.apply(&x, rows, &mut y, &|_| {});
            let want = naive(&x, rows, &w, &b, outputs);
            for (got, want) in y.iter().zip(&want) {
                assert!((got - want).abs() < 1e-4, "{rows} rows: {got} vs {want}");
            }
        }
    }

    #[test]
    fn fused_layers_put_their_outputs_side_by_side() {
        let (inputs, outputs) = (8, 16);
        let (w1, b1) = (values(inputs * outputs, 1), values(outputs, 2));
        let (w2, b2) = (values(inputs * outputs, 3), values(outputs, 4));
        let fused = Dense::fused(&[
            Dense::new("a", &w1, &b1, outputs, inputs).expect("shape"),
            Dense::new("b", &w2, &b2, outputs, inputs).expect("shape"),
        ])
        .expect("same input");
        let x = values(3 * inputs, 5);
        let mut y = vec![0f32; 3 * 2 * outputs];
        fused.apply(&x, 3, &mut y, &|_| {});
        let (y1, y2) = (
            naive(&x, 3, &w1, &b1, outputs),
            naive(&x, 3, &w2, &b2, outputs),
        );
        for r in 0..3 {
            let row = &y[r * 2 * outputs..(r + 1) * 2 * outputs];
            for o in 0..outputs {
                assert!((row[o] - y1[r * outputs + o]).abs() < 1e-4);
                assert!((row[outputs + o] - y2[r * outputs + o]).abs() < 1e-4);
            }
        }
    }

    #[test]
    fn shapes_that_do_not_fit_are_refused_with_the_weight_named() {
        assert_eq!(
            Dense::new("query", &[0.0; 10], &[0.0; 16], 16, 1).unwrap_err(),
            ShapeError::Size {
                name: "query",
                got: 10,
                want: 16
            }
        );
        assert!(matches!(
            Dense::new("odd", &[0.0; 10], &[0.0; 10], 10, 1),
            Err(ShapeError::Unsupported(_))
        ));
    }

    #[test]
    fn erf_and_gelu_match_known_values() {
        // erf(0.5) = 0.520499877…, erf(1) = 0.842700792…, erf(2) = 0.995322265… (A&S table 7.1).
        for (x, want) in [
            (0.0f32, 0.0f32),
            (0.5, 0.520_499_9),
            (1.0, 0.842_700_8),
            (2.0, 0.995_322_3),
            (-1.0, -0.842_700_8),
        ] {
            assert!((erf(x) - want).abs() < 3e-7, "erf({x}) = {}", erf(x));
        }
        let mut row = [1.0f32, -1.0, 0.0];
        gelu(&mut row);
        // GELU(1) = Φ(1) = 0.841344746…; GELU(−1) = −(1 − Φ(1)).
        assert!((row[0] - 0.841_344_7).abs() < 1e-6);
        assert!((row[1] + 0.158_655_25).abs() < 1e-6);
        assert_eq!(row[2], 0.0);
    }
}
