//! The semantic leg's model (feature `semantic`): all-MiniLM-L6-v2 sentence embeddings
//! computed in-process with candle (pure Rust, CPU), read from a directory the operator names.
//! Nothing is ever downloaded: the directory holds `config.json`, `model.safetensors` and
//! `tokenizer.json` (what the model's sentence-transformers release ships).
//!
//! An embedding is what sentence-transformers computes for this model: the BERT encoder's last
//! hidden states of at most [`MAX_TOKENS`] tokens, averaged over the real tokens (mean
//! pooling), scaled to unit length, [`DIMENSIONS`] floats.

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use crate::error::{Error, Result};
use crate::vector::DIMENSIONS;

/// Tokens of a text the model reads (the model's `max_seq_length`); the rest is cut.
pub const MAX_TOKENS: usize = 256;

/// The files a model directory must hold.
pub const MODEL_FILES: [&str; 3] = ["config.json", "model.safetensors", "tokenizer.json"];

/// A loaded sentence-embedding model. Cheap to share (`Arc`); embedding takes `&self`.
pub struct Embedder {
    model: BertModel,
    tokenizer: Tokenizer,
    dir: PathBuf,
    fingerprint: String,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("dir", &self.dir)
            .field("fingerprint", &self.fingerprint)
            .finish_non_exhaustive()
    }
}

impl Embedder {
    /// Loads the model in `dir` (see [`MODEL_FILES`]).
    ///
    /// # Errors
    /// [`Error::Embeddings`] naming the directory and what is wrong with it: a missing or
    /// unreadable file, a configuration that is not a BERT model of [`DIMENSIONS`] dimensions,
    /// weights that do not fit it.
    pub fn load(dir: impl AsRef<Path>) -> Result<Embedder> {
        let dir = dir.as_ref();
        let bad = |reason: String| Error::Embeddings {
            path: dir.to_path_buf(),
            reason,
        };
        let mut files = Vec::with_capacity(MODEL_FILES.len());
        for name in MODEL_FILES {
            let path = dir.join(name);
            let bytes = std::fs::read(&path).map_err(|e| bad(format!("{name}: {e}")))?;
            files.push(bytes);
        }
        let fingerprint = files
            .iter()
            .map(|b| format!("{:08x}:{}", crc32c::crc32c(b), b.len()))
            .collect::<Vec<_>>()
            .join(",");
        let [config, weights, tokenizer] = <[Vec<u8>; 3]>::try_from(files)
            .map_err(|_| bad("the model files could not be read".into()))?;
        let config: Config = serde_json::from_slice(&config)
            .map_err(|e| bad(format!("config.json is not a BERT configuration: {e}")))?;
        if config.hidden_size != DIMENSIONS {
            return Err(bad(format!(
                "config.json describes {} dimensions; all-MiniLM-L6-v2 has {DIMENSIONS}",
                config.hidden_size
            )));
        }
        let device = Device::Cpu;
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &device)
            .map_err(|e| bad(format!("model.safetensors: {e}")))?;
        let model = BertModel::load(vb, &config)
            .map_err(|e| bad(format!("model.safetensors does not fit config.json: {e}")))?;
        let mut tokenizer =
            Tokenizer::from_bytes(&tokenizer).map_err(|e| bad(format!("tokenizer.json: {e}")))?;
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS,
                ..TruncationParams::default()
            }))
            .map_err(|e| bad(format!("tokenizer.json: {e}")))?;
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            ..PaddingParams::default()
        }));
        Ok(Embedder {
            model,
            tokenizer,
            dir: dir.to_path_buf(),
            fingerprint,
        })
    }

    /// The model directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What identifies the model's files (CRC32C and length of each): vectors in an index
    /// computed by another model are discarded and computed again.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// The unit-length embedding of each text, in order.
    ///
    /// # Errors
    /// [`Error::Embeddings`] when the tokenizer or the model fails (not expected for any
    /// text once the model loaded).
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        self.embed_batch(texts).map_err(|reason| Error::Embeddings {
            path: self.dir.clone(),
            reason,
        })
    }

    fn embed_batch(&self, texts: &[&str]) -> std::result::Result<Vec<Vec<f32>>, String> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| format!("tokenizing: {e}"))?;
        let device = Device::Cpu;
        let rows = |get: &dyn Fn(&tokenizers::Encoding) -> &[u32]| -> candle_core::Result<Tensor> {
            let rows = encodings
                .iter()
                .map(|e| Tensor::new(get(e), &device))
                .collect::<candle_core::Result<Vec<_>>>()?;
            Tensor::stack(&rows, 0)
        };
        let run = || -> candle_core::Result<Vec<Vec<f32>>> {
            let ids = rows(&|e| e.get_ids())?;
            let types = rows(&|e| e.get_type_ids())?;
            let mask = rows(&|e| e.get_attention_mask())?;
            let hidden = self.model.forward(&ids, &types, Some(&mask))?;
            // Mean over the real tokens: padding is masked out of the sum and the count.
            let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
            let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
            let counts = mask.sum(1)?.clamp(1e-9, f64::MAX)?;
            let mean = summed.broadcast_div(&counts)?;
            let norms = mean.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f64::MAX)?;
            mean.broadcast_div(&norms)?.to_vec2::<f32>()
        };
        run().map_err(|e| format!("running the model: {e}"))
    }
}
