//! Sentence embeddings for the hybrid ranking stage (feature `semantic`).
//!
//! Lexical BM25F only finds a tool whose words the query shares (up to stemming and a few
//! synonyms). A task such as "what time is it in Tokyo" never names `get_current_time`. This
//! module turns texts into dense vectors with a sentence-transformers model so that the
//! [`crate::hybrid::HybridIndex`] can rank by meaning as well as by words.
//!
//! [`Embedder::load`] reads a BERT-family sentence-transformers model (built and tested with
//! `all-MiniLM-L6-v2`) from a directory holding `config.json`, `tokenizer.json` and
//! `model.safetensors` (or `pytorch_model.bin`), runs it on the CPU with candle, mean-pools the
//! last hidden states over the real tokens and L2-normalises the result, as the
//! sentence-transformers `Pooling` + `Normalize` modules do. Nothing is downloaded: point
//! [`MODEL_ENV`] (or [`Embedder::load`]) at the files. Errors are [`SemanticError`]s that name
//! the file that is missing or malformed.

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::Tokenizer;

/// Environment variable naming a model directory (used by the retrieval bench and tests).
pub const MODEL_ENV: &str = "TOOLSHED_SEARCH_MODEL";

/// Texts embedded in one forward pass. Texts are sorted by length first, so a batch pads
/// little.
const BATCH: usize = 32;

/// Longest input in tokens when the model directory does not say (`sentence_bert_config.json`).
const DEFAULT_MAX_TOKENS: usize = 256;

/// Why a model could not be loaded or a text not embedded.
#[derive(Debug, thiserror::Error)]
pub enum SemanticError {
    /// A file the model needs is not in the directory.
    #[error("model file {} is missing", path.display())]
    MissingFile { path: PathBuf },
    /// A model file exists but could not be read.
    #[error("cannot read model file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A model file was read but its content is not what a BERT sentence model needs.
    #[error("model file {} is malformed: {reason}", path.display())]
    Malformed { path: PathBuf, reason: String },
    /// The tokenizer rejected a text.
    #[error("cannot tokenize text: {0}")]
    Tokenize(String),
    /// The forward pass failed.
    #[error("embedding failed: {0}")]
    Inference(#[from] candle_core::Error),
}

/// A loaded sentence-embedding model. Cheap to share behind an `Arc`; `Send + Sync`.
pub struct Embedder {
    model: BertModel,
    tokenizer: Tokenizer,
    device: Device,
    dim: usize,
    max_tokens: usize,
    dir: PathBuf,
    /// The directory, the dimension and the size of the weights.
    id: String,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("dir", &self.dir)
            .field("dim", &self.dim)
            .field("max_tokens", &self.max_tokens)
            .finish()
    }
}

fn read(path: &Path) -> Result<Vec<u8>, SemanticError> {
    std::fs::read(path).map_err(|source| {
        if source.kind() == std::io::ErrorKind::NotFound {
            SemanticError::MissingFile {
                path: path.to_path_buf(),
            }
        } else {
            SemanticError::Read {
                path: path.to_path_buf(),
                source,
            }
        }
    })
}

fn malformed(path: &Path, reason: impl std::fmt::Display) -> SemanticError {
    SemanticError::Malformed {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}

impl Embedder {
    /// Loads the model in `dir`: `config.json` (a BERT config), `tokenizer.json`, and the
    /// weights as `model.safetensors` or, failing that, `pytorch_model.bin`. Optional
    /// sentence-transformers files are honoured: `sentence_bert_config.json`
    /// (`max_seq_length`) and `1_Pooling/config.json` (only mean pooling is supported).
    pub fn load(dir: impl AsRef<Path>) -> Result<Self, SemanticError> {
        let dir = dir.as_ref();
        let device = Device::Cpu;

        let config_path = dir.join("config.json");
        let config: Config =
            serde_json::from_slice(&read(&config_path)?).map_err(|e| malformed(&config_path, e))?;

        let tokenizer_path = dir.join("tokenizer.json");
        let mut tokenizer = Tokenizer::from_bytes(read(&tokenizer_path)?)
            .map_err(|e| malformed(&tokenizer_path, e))?;

        let mut max_tokens = DEFAULT_MAX_TOKENS;
        let st_path = dir.join("sentence_bert_config.json");
        if st_path.exists() {
            let v: serde_json::Value =
                serde_json::from_slice(&read(&st_path)?).map_err(|e| malformed(&st_path, e))?;
            if let Some(n) = v.get("max_seq_length").and_then(serde_json::Value::as_u64) {
                max_tokens = n as usize;
            }
        }
        max_tokens = max_tokens.min(config.max_position_embeddings).max(2);

        let pooling_path = dir.join("1_Pooling").join("config.json");
        if pooling_path.exists() {
            let v: serde_json::Value = serde_json::from_slice(&read(&pooling_path)?)
                .map_err(|e| malformed(&pooling_path, e))?;
            if v.get("pooling_mode_mean_tokens")
                .and_then(serde_json::Value::as_bool)
                != Some(true)
            {
                return Err(malformed(
                    &pooling_path,
                    "only mean pooling (pooling_mode_mean_tokens) is supported",
                ));
            }
        }

        // Padding is done per batch below; truncation keeps [CLS] … [SEP] within the limit.
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(tokenizers::TruncationParams {
                max_length: max_tokens,
                ..Default::default()
            }))
            .map_err(|e| malformed(&tokenizer_path, e))?;

        let safetensors = dir.join("model.safetensors");
        let pickle = dir.join("pytorch_model.bin");
        let (weights_path, vb) = if safetensors.exists() || !pickle.exists() {
            let bytes = read(&safetensors)?;
            let vb = VarBuilder::from_buffered_safetensors(bytes, DType::F32, &device)
                .map_err(|e| malformed(&safetensors, e))?;
            (safetensors, vb)
        } else {
            let vb = VarBuilder::from_pth(&pickle, DType::F32, &device)
                .map_err(|e| malformed(&pickle, e))?;
            (pickle, vb)
        };
        let model = BertModel::load(vb, &config).map_err(|e| malformed(&weights_path, e))?;
        let weights_len = std::fs::metadata(&weights_path).map_or(0, |m| m.len());
        let id = format!(
            "{} dim={} weights={weights_len}",
            dir.display(),
            config.hidden_size
        );

        Ok(Self {
            model,
            tokenizer,
            device,
            dim: config.hidden_size,
            max_tokens,
            dir: dir.to_path_buf(),
            id,
        })
    }

    /// Loads the model named by [`MODEL_ENV`]; `None` when the variable is unset or empty.
    pub fn from_env() -> Option<Result<Self, SemanticError>> {
        let dir = std::env::var_os(MODEL_ENV).filter(|v| !v.is_empty())?;
        Some(Self::load(PathBuf::from(dir)))
    }

    /// Length of every embedding.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Longest input in tokens; longer texts are truncated.
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// The directory the model was loaded from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The unit-length embedding of one text.
    pub fn embed(&self, text: &str) -> Result<Vec<f32>, SemanticError> {
        self.embed_batch(&[text])
    }

    /// The unit-length embeddings of `texts`, concatenated: text `i` is
    /// `out[i * dim .. (i + 1) * dim]`. Texts are run in length-sorted batches.
    pub fn embed_batch(&self, texts: &[&str]) -> Result<Vec<f32>, SemanticError> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| SemanticError::Tokenize(e.to_string()))?;
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| encodings[i].get_ids().len());

        let mut out = vec![0f32; texts.len() * self.dim];
        for chunk in order.chunks(BATCH) {
            let width = chunk
                .iter()
                .map(|&i| encodings[i].get_ids().len())
                .max()
                .unwrap_or(0)
                .max(1);
            let mut ids = vec![0u32; chunk.len() * width];
            let mut mask = vec![0u32; chunk.len() * width];
            for (row, &i) in chunk.iter().enumerate() {
                let e = &encodings[i];
                let start = row * width;
                ids[start..start + e.get_ids().len()].copy_from_slice(e.get_ids());
                for m in &mut mask[start..start + e.get_ids().len()] {
                    *m = 1;
                }
            }
            let pooled = self.forward(&ids, &mask, chunk.len(), width)?;
            for (row, &i) in chunk.iter().enumerate() {
                out[i * self.dim..(i + 1) * self.dim]
                    .copy_from_slice(&pooled[row * self.dim..(row + 1) * self.dim]);
            }
        }
        Ok(out)
    }

    /// One forward pass over a padded batch; returns `rows × dim` mean-pooled, normalised values.
    fn forward(
        &self,
        ids: &[u32],
        mask: &[u32],
        rows: usize,
        width: usize,
    ) -> Result<Vec<f32>, SemanticError> {
        let input_ids = Tensor::from_slice(ids, (rows, width), &self.device)?;
        let attention = Tensor::from_slice(mask, (rows, width), &self.device)?;
        let token_types = input_ids.zeros_like()?;
        let hidden = self
            .model
            .forward(&input_ids, &token_types, Some(&attention))?;
        // Mean over real tokens: sum(hidden × mask) / count(mask).
        let mask = attention.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
        let counts = mask.sum(1)?.clamp(1e-9f32, f32::MAX)?;
        let mean = summed.broadcast_div(&counts)?;
        let norm = mean
            .sqr()?
            .sum_keepdim(1)?
            .sqrt()?
            .clamp(1e-12f32, f32::MAX)?;
        let unit = mean.broadcast_div(&norm)?;
        Ok(unit.flatten_all()?.to_vec1::<f32>()?)
    }
}

impl crate::hybrid::TextEmbedder for Embedder {
    fn dim(&self) -> usize {
        self.dim
    }

    fn model_id(&self) -> String {
        self.id.clone()
    }

    fn embed_texts(&self, texts: &[&str]) -> Result<Vec<f32>, crate::hybrid::EmbedError> {
        self.embed_batch(texts)
            .map_err(|e| crate::hybrid::EmbedError(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hybrid::{dot, HybridIndex};
    use crate::{Query, SearchDoc, SearchIndex};
    use std::sync::{Arc, OnceLock};

    /// The model named by [`MODEL_ENV`], loaded once for all tests; `None` (with a note) when unset.
    fn model() -> Option<Arc<Embedder>> {
        static MODEL: OnceLock<Option<Arc<Embedder>>> = OnceLock::new();
        let m = MODEL.get_or_init(|| match Embedder::from_env() {
            None => None,
            Some(r) => Some(Arc::new(
                r.expect("the model in TOOLSHED_SEARCH_MODEL loads"),
            )),
        });
        if m.is_none() {
            eprintln!(
                "note: {MODEL_ENV} is unset: skipping this test (point it at an all-MiniLM-L6-v2 directory)"
            );
        }
        m.clone()
    }

    fn doc(path: &str, name: &str, description: &str) -> SearchDoc {
        SearchDoc {
            path: path.into(),
            name: name.into(),
            description: description.into(),
            params: Vec::new(),
        }
    }

    #[test]
    fn embeddings_are_unit_length_and_match_the_reference_model() {
        let Some(m) = model() else { return };
        assert_eq!(m.dim(), 384);
        let texts = [
            "Create a new issue in a GitHub repository",
            "What will the weather be like tomorrow?",
            "hello",
        ];
        let all = m.embed_batch(&texts).unwrap();
        assert_eq!(all.len(), 3 * m.dim());
        for v in all.chunks(m.dim()) {
            let norm = dot(v, v).sqrt();
            assert!((norm - 1.0).abs() < 1e-4, "norm {norm}");
        }
        // First values from sentence-transformers 6.2 (PyTorch) on the same files.
        let reference = [
            [-0.025008f32, -0.055082, -0.059556, 0.053654],
            [-0.089468, 0.041151, 0.1132, 0.084508],
            [-0.062772, 0.054959, 0.052165, 0.08579],
        ];
        for (v, r) in all.chunks(m.dim()).zip(reference) {
            for (x, y) in v.iter().zip(r) {
                assert!((x - y).abs() < 1e-4, "{x} vs {y}");
            }
        }
        // A batch gives the same vectors as one text at a time (padding is masked out).
        let one = m.embed(texts[2]).unwrap();
        assert!(dot(&one, &all[2 * m.dim()..]) > 0.9999);
    }

    #[test]
    fn paraphrases_are_closer_than_unrelated_texts() {
        let Some(m) = model() else { return };
        let a = m.embed("What time is it in Tokyo right now?").unwrap();
        let b = m.embed("Get the current local time in a timezone").unwrap();
        let c = m.embed("Send an email to a contact").unwrap();
        assert!(dot(&a, &b) > dot(&a, &c) + 0.2);
    }

    #[test]
    fn a_paraphrase_query_finds_the_tool_that_lexical_ranking_misses() {
        let Some(m) = model() else { return };
        let docs = [
            doc(
                "time.get_current_time",
                "get_current_time",
                "Return the current date and time in a timezone.",
            ),
            doc("mail.send_email", "send_email", "Send an email message."),
            doc(
                "calendar.create_event",
                "create_event",
                "Schedule an event on a calendar.",
            ),
            doc(
                "weather.forecast",
                "forecast",
                "Weather forecast for a city: rain, wind, temperature.",
            ),
        ];
        let query = "how late is it in Tokyo at the moment";
        let lexical = SearchIndex::build(&docs);
        let lex = lexical.search(&Query::new(query, 5));
        assert!(
            lex.hits.first().is_none_or(|h| h.doc != 0),
            "lexical ranking already finds it: {lex:?}"
        );
        let hybrid = HybridIndex::build(&docs, Arc::new(SearchIndex::build(&docs)), m).unwrap();
        let r = hybrid.search(&Query::new(query, 5)).unwrap();
        assert_eq!(r.hits[0].doc, 0, "{r:?}");
        let r = hybrid
            .search(&Query::new("will it rain in Paris", 5))
            .unwrap();
        assert_eq!(r.hits[0].doc, 3, "{r:?}");
    }

    #[test]
    fn a_missing_file_is_named() {
        let dir = std::env::temp_dir().join(format!("toolshed-semantic-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let err = Embedder::load(&dir).unwrap_err();
        match &err {
            SemanticError::MissingFile { path } => assert_eq!(path, &dir.join("config.json")),
            other => panic!("unexpected {other:?}"),
        }
        assert!(err.to_string().contains("config.json"), "{err}");

        // A present but malformed file is named too, and a missing tokenizer after a good config.
        std::fs::write(dir.join("config.json"), "{not json").unwrap();
        let err = Embedder::load(&dir).unwrap_err();
        assert!(
            matches!(&err, SemanticError::Malformed { path, .. } if path.ends_with("config.json")),
            "{err:?}"
        );
        if let Some(m) = std::env::var_os(MODEL_ENV).filter(|v| !v.is_empty()) {
            let m = PathBuf::from(m);
            std::fs::copy(m.join("config.json"), dir.join("config.json")).unwrap();
            let err = Embedder::load(&dir).unwrap_err();
            assert!(
                matches!(&err, SemanticError::MissingFile { path } if path.ends_with("tokenizer.json")),
                "{err:?}"
            );
            std::fs::copy(m.join("tokenizer.json"), dir.join("tokenizer.json")).unwrap();
            let err = Embedder::load(&dir).unwrap_err();
            assert!(
                matches!(&err, SemanticError::MissingFile { path } if path.ends_with("model.safetensors")),
                "{err:?}"
            );
            std::fs::write(dir.join("model.safetensors"), b"garbage").unwrap();
            let err = Embedder::load(&dir).unwrap_err();
            assert!(
                matches!(&err, SemanticError::Malformed { path, .. } if path.ends_with("model.safetensors")),
                "{err:?}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
