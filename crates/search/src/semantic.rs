//! Sentence embeddings for the hybrid ranking stage (feature `semantic`).
//!
//! Lexical BM25F only finds a tool whose words the query shares (up to stemming and a few
//! synonyms). A task such as "what time is it in Tokyo" never names `get_current_time`. This
//! module turns texts into dense vectors with a sentence-transformers model so that the
//! [`crate::hybrid::HybridIndex`] can rank by meaning as well as by words.
//!
//! [`Embedder::load`] reads a BERT-family sentence-transformers model (built and tested with
//! `all-MiniLM-L6-v2`) from a directory holding `config.json`, `tokenizer.json` and
//! `model.safetensors` (or `pytorch_model.bin`), runs it on the CPU, mean-pools the last hidden
//! states over the text's tokens and L2-normalises the result, as the sentence-transformers
//! `Pooling` + `Normalize` modules do. Nothing is downloaded: point [`MODEL_ENV`] (or
//! [`Embedder::load`]) at the files. Errors are [`SemanticError`]s that name the file that is
//! missing or malformed.
//!
//! The forward pass is this crate's own (`encoder`: weights packed once, by default as 8-bit
//! integers multiplied with 8-bit inputs, on AVX-512 VNNI, AVX-VNNI or AVX2 ([`Precision`]),
//! kernels chosen at run time, no padding, a small spinning thread pool);
//! candle only reads the weight files. A query reads at most [`QUERY_TOKENS`] tokens of its
//! first [`QUERY_BYTES`] ([`Embedder::embed_query`]). On two cores with VNNI a query of 16–26
//! tokens embeds in about 1.4 ms, of 64–128 tokens in about 6 ms (`benches/embed.rs`, figures
//! in docs/benchmarks.md).

mod encoder;
mod kernels;
mod pool;

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use candle_core::{Device, Tensor};
use tokenizers::Tokenizer;

use crate::hybrid::QueryVectors;
use encoder::{Config, Encoder};
pub use kernels::Precision;
use pool::Pool;

/// Environment variable naming a model directory (used by the retrieval bench and tests).
pub const MODEL_ENV: &str = "TOOLSHED_SEARCH_MODEL";

/// Environment variable choosing the products' precision ([`Precision`]: `f32`, `f16`, `i8`,
/// `q8`).
pub const PRECISION_ENV: &str = "TOOLSHED_SEARCH_PRECISION";

pub use crate::cpu::{AVX512_ENV, AVX_VNNI_ENV};

/// Tokens of a query the model reads at most (`[CLS]` and `[SEP]` included). A search
/// sentence is 10–40 tokens; past this the forward pass would cost more than the latency
/// target allows, and a query's first 64 tokens say what it looks for.
pub const QUERY_TOKENS: usize = 128;

/// Bytes of a query the tokenizer reads at most: 16 per token of [`QUERY_TOKENS`], three times
/// what English text needs (about 5 bytes a word piece), so the cut never shortens a real query.
pub const QUERY_BYTES: usize = QUERY_TOKENS * 16;

/// `text` as the model reads a query: its words that hold a letter
/// ([`crate::tokenize::naming_words`]), so the values a request carries (amounts, dates, phone
/// numbers) do not pull its vector and cost no word pieces. A text with no other word is kept
/// as it is.
fn words_with_letters(text: &str) -> Cow<'_, str> {
    let words: Vec<&str> = crate::tokenize::naming_words(text).collect();
    if words.len() == text.split_whitespace().count() {
        return Cow::Borrowed(text);
    }
    Cow::Owned(words.join(" "))
}

/// The start of `text` up to [`QUERY_BYTES`], cut at the last whitespace before the limit (or at
/// a character boundary when there is none), so no word is split.
fn query_prefix(text: &str) -> &str {
    if text.len() <= QUERY_BYTES {
        return text;
    }
    let mut end = QUERY_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let head = &text[..end];
    match head.rfind(char::is_whitespace) {
        Some(at) if at > 0 => &head[..at],
        _ => head,
    }
}

/// Texts embedded in one forward pass (texts are stacked, not padded).
const BATCH: usize = 32;
/// Tokens of one forward pass at most (bounds the activations' memory for long texts).
const BATCH_TOKENS: usize = 4096;
/// Threads of the forward pass by default: the cores, up to this many (a query's products are
/// too small to share among more).
const MAX_DEFAULT_THREADS: usize = 4;

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
    Inference(String),
    /// [`PRECISION_ENV`] names no precision.
    #[error("{PRECISION_ENV}={0:?} is not a precision (expected f32, f16, i8 or q8)")]
    Precision(String),
    /// [`AVX512_ENV`] or [`AVX_VNNI_ENV`] holds none of its values.
    #[error("{name}={value:?} is not a setting (expected auto, on or off)")]
    Setting { name: &'static str, value: String },
}

impl Precision {
    /// The precision [`PRECISION_ENV`] names (`f32`, `f16`, `i8` or `q8`, in any case, spaces
    /// around ignored); unset or empty, the default. Another value is an error that names it.
    pub fn from_env() -> Result<Self, SemanticError> {
        match std::env::var(PRECISION_ENV) {
            Ok(v) if !v.trim().is_empty() => v
                .trim()
                .to_ascii_lowercase()
                .parse()
                .map_err(|_| SemanticError::Precision(v)),
            _ => Ok(Precision::default()),
        }
    }
}

impl std::str::FromStr for Precision {
    type Err = SemanticError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "f32" => Ok(Precision::F32),
            "f16" => Ok(Precision::F16),
            "i8" => Ok(Precision::I8),
            "q8" => Ok(Precision::Q8),
            other => Err(SemanticError::Precision(other.to_string())),
        }
    }
}

/// A loaded sentence-embedding model. Cheap to share behind an `Arc`; `Send + Sync`.
pub struct Embedder {
    encoder: Encoder,
    /// Helpers of the forward pass; `None` runs on the caller's thread only.
    pool: Option<Pool>,
    tokenizer: Tokenizer,
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
            .field("threads", &self.threads())
            .field("simd", &self.encoder.simd)
            .field("precision", &self.encoder.precision())
            .field("kernels", &kernels::kernel_tag(self.encoder.precision()))
            .field(
                "instructions",
                &kernels::instructions(self.encoder.simd, self.encoder.precision()),
            )
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
        Self::load_with(dir, Precision::default())
    }

    /// [`Embedder::load`] with the weights kept in `precision` (where the CPU has the kernels
    /// for it; f32 otherwise). A value of [`AVX512_ENV`] or [`AVX_VNNI_ENV`] other than `auto`,
    /// `on` or `off` is an error.
    pub fn load_with(dir: impl AsRef<Path>, precision: Precision) -> Result<Self, SemanticError> {
        if let Some((name, value)) = crate::cpu::invalid_setting() {
            return Err(SemanticError::Setting { name, value });
        }
        let dir = dir.as_ref();

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
        let (weights_path, weights, tensors): (_, _, HashMap<String, Tensor>) =
            if safetensors.exists() || !pickle.exists() {
                let bytes = read(&safetensors)?;
                let tensors = candle_core::safetensors::load_buffer(&bytes, &Device::Cpu)
                    .map_err(|e| malformed(&safetensors, e))?;
                (safetensors, weights_fingerprint(&bytes), tensors)
            } else {
                let tensors = candle_core::pickle::read_all(&pickle)
                    .map_err(|e| malformed(&pickle, e))?
                    .into_iter()
                    .collect();
                (
                    pickle.clone(),
                    weights_fingerprint(&read(&pickle)?),
                    tensors,
                )
            };
        let encoder = Encoder::from_tensors(&tensors, &config, precision)
            .map_err(|e| malformed(&weights_path, e))?;
        drop(tensors);
        // The weights' fingerprint and the kernels' tag are part of the id: stored vectors are
        // reused only with the same weights (a model re-tuned into the same folder, at the same
        // size, is another model) and the same kernels.
        let id = format!(
            "{} dim={} weights={weights} precision={}",
            dir.display(),
            config.hidden_size,
            kernels::kernel_tag(encoder.precision())
        );
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(MAX_DEFAULT_THREADS);

        let mut embedder = Self {
            dim: encoder.hidden(),
            encoder,
            pool: None,
            tokenizer,
            max_tokens,
            dir: dir.to_path_buf(),
            id,
        };
        embedder.set_threads(threads);
        Ok(embedder)
    }

    /// Runs the forward pass on `threads` threads (the caller's and `threads − 1` helpers that
    /// spin briefly between products, then sleep); 1 runs it on the caller's thread alone.
    /// The default is the number of cores, at most 4.
    pub fn set_threads(&mut self, threads: usize) {
        self.pool = (threads > 1).then(|| Pool::new(threads));
    }

    /// Threads of the forward pass.
    pub fn threads(&self) -> usize {
        self.pool.as_ref().map_or(1, Pool::threads)
    }

    /// Loads the model named by [`MODEL_ENV`]; `None` when the variable is unset or empty.
    /// [`PRECISION_ENV`] chooses the products' precision ([`Precision::from_env`]).
    pub fn from_env() -> Option<Result<Self, SemanticError>> {
        let dir = std::env::var_os(MODEL_ENV).filter(|v| !v.is_empty())?;
        Some(Precision::from_env().and_then(|p| Self::load_with(PathBuf::from(dir), p)))
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

    /// Tokens the model sees for `text` (`[CLS]` and `[SEP]` included, after truncation).
    pub fn token_count(&self, text: &str) -> Result<usize, SemanticError> {
        Ok(self.ids(text)?.len())
    }

    fn ids(&self, text: &str) -> Result<Vec<u32>, SemanticError> {
        // `encode_fast`: the same ids without the offsets nobody here reads.
        let encoding = self
            .tokenizer
            .encode_fast(text, true)
            .map_err(|e| SemanticError::Tokenize(e.to_string()))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// The unit-length embedding of one text.
    pub fn embed(&self, text: &str) -> Result<Vec<f32>, SemanticError> {
        self.embed_ids(&self.ids(text)?)
    }

    /// The unit-length embedding of one sequence of token ids.
    fn embed_ids(&self, ids: &[u32]) -> Result<Vec<f32>, SemanticError> {
        let mut out = vec![0f32; self.dim];
        self.encoder
            .embed(&[ids], self.pool.as_ref(), &mut out)
            .map_err(SemanticError::Inference)?;
        Ok(out)
    }

    /// The unit-length embedding of a search query: [`Embedder::embed`] of the first
    /// [`QUERY_TOKENS`] tokens (the final `[SEP]` kept) of the query's words that hold a letter
    /// ([`crate::tokenize::naming_words`]), so a pasted paragraph costs no more than a
    /// sentence. Only the text's first [`QUERY_BYTES`] are tokenized: a query carrying a
    /// pasted file (an 18 KB base64 image, say) would spend 20–30 ms in the tokenizer alone.
    pub fn embed_query(&self, text: &str) -> Result<Vec<f32>, SemanticError> {
        let _search = self.pool.as_ref().map(Pool::foreground);
        self.embed_ids(&self.query_ids(query_prefix(text))?)
    }

    /// The vectors a search compares tools with. A request of several clauses
    /// ([`crate::clauses::clauses`]) gives each clause's vector, every clause embedded as a
    /// query of its own in one forward pass (stacked, not padded; the clauses that fit in
    /// [`QUERY_TOKENS`] tokens together), and as the whole the unit mean of those vectors:
    /// about the cost of [`Embedder::embed_query`], where embedding the sentence too would
    /// double it. A request of one clause (or whose second clause does not fit) is embedded
    /// whole, without clauses. Like [`Embedder::embed_query`], it has the forward pass's threads
    /// first: tools being embedded meanwhile on another thread wait for it.
    pub fn embed_query_clauses(&self, text: &str) -> Result<QueryVectors, SemanticError> {
        let _search = self.pool.as_ref().map(Pool::foreground);
        let seqs = self.query_sequences(text)?;
        if let [one] = seqs.as_slice() {
            return Ok(QueryVectors {
                whole: self.embed_ids(one)?,
                clauses: Vec::new(),
            });
        }
        let refs: Vec<&[u32]> = seqs.iter().map(Vec::as_slice).collect();
        let mut out = vec![0f32; refs.len() * self.dim];
        self.encoder
            .embed(&refs, self.pool.as_ref(), &mut out)
            .map_err(SemanticError::Inference)?;
        let mut whole = vec![0f32; self.dim];
        for v in out.chunks_exact(self.dim) {
            for (w, x) in whole.iter_mut().zip(v) {
                *w += x;
            }
        }
        let norm = crate::hybrid::dot(&whole, &whole).sqrt().max(1e-12);
        whole.iter_mut().for_each(|w| *w /= norm);
        Ok(QueryVectors {
            whole,
            clauses: out.chunks_exact(self.dim).map(<[f32]>::to_vec).collect(),
        })
    }

    /// Tokens the model reads for a search query: those of its clauses, or of the whole
    /// request when it has one clause ([`Embedder::embed_query_clauses`]).
    pub fn query_token_count(&self, text: &str) -> Result<usize, SemanticError> {
        Ok(self.query_sequences(text)?.iter().map(Vec::len).sum())
    }

    /// What decides a query's vectors ([`crate::hybrid::TextEmbedder::query_key`]): the words
    /// with a letter of its first [`QUERY_BYTES`], and of each of their clauses
    /// ([`Embedder::query_sequences`] reads nothing else). Each part is written with its length
    /// first, so no two different readings give one key.
    fn reading_key(text: &str) -> String {
        let text = query_prefix(text);
        let mut key = String::with_capacity(text.len() + 8);
        let mut part = |words: &str| {
            // Writing to a String cannot fail.
            let _ = write!(key, "{}:{words}", words.len());
        };
        part(&words_with_letters(text));
        for range in crate::clauses::clauses(text) {
            part(&words_with_letters(&text[range]));
        }
        key
    }

    /// The token ids [`Embedder::embed_query_clauses`] embeds: one sequence per clause when
    /// at least two clauses fit in [`QUERY_TOKENS`] together, else the request's own.
    fn query_sequences(&self, text: &str) -> Result<Vec<Vec<u32>>, SemanticError> {
        let text = query_prefix(text);
        let mut seqs = Vec::new();
        let mut budget = QUERY_TOKENS;
        for range in crate::clauses::clauses(text) {
            let ids = self.query_ids(&text[range])?;
            if ids.len() > budget {
                break;
            }
            budget -= ids.len();
            seqs.push(ids);
        }
        if seqs.len() < 2 {
            seqs = vec![self.query_ids(text)?];
        }
        Ok(seqs)
    }

    /// The ids of a query's first [`QUERY_TOKENS`] tokens (the final `[SEP]` kept), read
    /// from its words that carry a letter ([`words_with_letters`]).
    fn query_ids(&self, text: &str) -> Result<Vec<u32>, SemanticError> {
        let mut ids = self.ids(&words_with_letters(text))?;
        if ids.len() > QUERY_TOKENS {
            let sep = ids[ids.len() - 1];
            ids.truncate(QUERY_TOKENS - 1);
            ids.push(sep);
        }
        Ok(ids)
    }

    /// The unit-length embeddings of `texts`, concatenated: text `i` is
    /// `out[i * dim .. (i + 1) * dim]`. Each text's vector is the one [`Embedder::embed`]
    /// gives: texts are stacked in a batch, never padded.
    pub fn embed_batch(&self, texts: &[&str]) -> Result<Vec<f32>, SemanticError> {
        let encodings = self
            .tokenizer
            .encode_batch_fast(texts.to_vec(), true)
            .map_err(|e| SemanticError::Tokenize(e.to_string()))?;
        let mut out = vec![0f32; texts.len() * self.dim];
        let mut start = 0;
        while start < encodings.len() {
            let mut end = start;
            let mut tokens = 0;
            while end < encodings.len()
                && end - start < BATCH
                && (end == start || tokens + encodings[end].len() <= BATCH_TOKENS)
            {
                tokens += encodings[end].len();
                end += 1;
            }
            let ids: Vec<&[u32]> = encodings[start..end].iter().map(|e| e.get_ids()).collect();
            self.encoder
                .embed(
                    &ids,
                    self.pool.as_ref(),
                    &mut out[start * self.dim..end * self.dim],
                )
                .map_err(SemanticError::Inference)?;
            start = end;
        }
        Ok(out)
    }
}

/// Bytes of a weights file read for its fingerprint: one run in every [`FINGERPRINT_STRIDE`].
const FINGERPRINT_RUN: usize = 64;
const FINGERPRINT_STRIDE: usize = 4096;

/// Names a weights file's content for [`Embedder`]'s id: its length and a hash of its header
/// and of one run of bytes in every 4 KiB (about 1.5 % of the file). Tuning changes every
/// weight, so two models of one shape differ in every run; hashing the whole file would add
/// tens of milliseconds to every start. (Should the standard hasher change with a Rust release,
/// stored vectors are embedded again once: a cost, never a wrong reuse.)
fn weights_fingerprint(bytes: &[u8]) -> String {
    use std::hash::Hasher as _;
    let mut hasher = std::hash::DefaultHasher::new();
    hasher.write(&bytes[..bytes.len().min(FINGERPRINT_STRIDE)]);
    for start in (0..bytes.len()).step_by(FINGERPRINT_STRIDE) {
        hasher.write(&bytes[start..bytes.len().min(start + FINGERPRINT_RUN)]);
    }
    format!("{}:{:016x}", bytes.len(), hasher.finish())
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

    fn query_key<'a>(&self, text: &'a str) -> Cow<'a, str> {
        Cow::Owned(Embedder::reading_key(text))
    }

    fn hold_for_search(&self) -> Option<crate::hybrid::SearchHold<'_>> {
        let pool = self.pool.as_ref()?;
        Some(crate::hybrid::SearchHold::new(pool.foreground()))
    }

    fn embed_query(&self, text: &str) -> Result<Vec<f32>, crate::hybrid::EmbedError> {
        Embedder::embed_query(self, text).map_err(|e| crate::hybrid::EmbedError(e.to_string()))
    }

    fn embed_query_clauses(&self, text: &str) -> Result<QueryVectors, crate::hybrid::EmbedError> {
        Embedder::embed_query_clauses(self, text)
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
        let m = MODEL.get_or_init(|| {
            Embedder::from_env()
                .map(|r| Arc::new(r.expect("the model in TOOLSHED_SEARCH_MODEL loads")))
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
        // The forward pass in f32 is the model's own: it matches PyTorch.
        let exact = Embedder::load_with(m.dir(), Precision::F32).unwrap();
        let all = exact.embed_batch(&texts).unwrap();
        assert_eq!(all.len(), 3 * m.dim());
        for v in all.chunks(m.dim()) {
            let norm = dot(v, v).sqrt();
            assert!((norm - 1.0).abs() < 1e-4, "norm {norm}");
        }
        // First values from sentence-transformers 6.2 (PyTorch) on the same files, for the two
        // models scripts/search-model.sh makes (the tuned one by default, `--base` the other).
        let reference = match m.dir().file_name().and_then(|n| n.to_str()) {
            Some("toolshed-tools-MiniLM-L6-v1") => Some([
                [-0.022141f32, -0.063178, -0.05038, 0.066498],
                [-0.095046, 0.04134, 0.113601, 0.077762],
                [-0.052762, 0.046082, 0.05866, 0.081206],
            ]),
            Some("all-MiniLM-L6-v2") => Some([
                [-0.025008f32, -0.055082, -0.059556, 0.053654],
                [-0.089468, 0.041151, 0.1132, 0.084508],
                [-0.062772, 0.054959, 0.052165, 0.08579],
            ]),
            _ => {
                eprintln!(
                    "note: no reference values for the model in {}: its vectors are checked for length and agreement only",
                    m.dir().display()
                );
                None
            }
        };
        for (v, r) in all.chunks(m.dim()).zip(reference.iter().flatten()) {
            for (x, y) in v.iter().zip(r) {
                assert!((x - y).abs() < 1e-4, "{x} vs {y}");
            }
        }
        // The log names the precision and the instructions the products run on.
        let shown = format!("{exact:?}");
        assert!(shown.contains("precision: F32"), "{shown}");
        #[cfg(target_arch = "x86_64")]
        if exact.encoder.simd == kernels::Simd::Avx2 {
            assert!(shown.contains(r#"instructions: "AVX2""#), "{shown}");
            // The shared model is in the precision the environment chose (Q8 by default).
            let shown = format!("{m:?}");
            let named = ["AVX-512 VNNI", "AVX-VNNI", "AVX2"]
                .iter()
                .any(|i| shown.contains(&format!("instructions: \"{i}\"")));
            assert!(named, "{shown}");
        }
        // A batch gives the same vectors as one text at a time.
        let one = exact.embed(texts[2]).unwrap();
        assert!(dot(&one, &all[2 * m.dim()..]) > 0.9999);
        // The default (8-bit weights and 8-bit inputs in groups of 64) points the same way. A
        // text of a few tokens averages the least rounding away: "hello" is at 0.9986 on VNNI,
        // at 0.9953 on AVX2 alone, whose weights and inputs keep 7 bits (kernels/q8.rs).
        let bound = if kernels::kernel_tag(Precision::Q8).ends_with("/7x7") {
            0.994
        } else {
            0.998
        };
        for (text, r) in texts.iter().zip(all.chunks(m.dim())) {
            let cos = dot(&m.embed(text).unwrap(), r);
            assert!(cos > bound, "{text}: cosine {cos} to the f32 vector");
        }
    }

    #[test]
    fn weights_of_one_size_with_other_values_have_other_fingerprints() {
        let base: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let mut tuned = base.clone();
        // A re-tuned model: same size, the values changed throughout.
        for b in tuned.iter_mut().skip(9_000).step_by(7) {
            *b = b.wrapping_add(1);
        }
        assert_ne!(weights_fingerprint(&base), weights_fingerprint(&tuned));
        assert_eq!(
            weights_fingerprint(&base),
            weights_fingerprint(&base.clone())
        );
        assert!(weights_fingerprint(&base).starts_with("200000:"));
        // Short and empty files are named too.
        assert_ne!(weights_fingerprint(b"ab"), weights_fingerprint(b"ac"));
        assert_eq!(weights_fingerprint(b""), weights_fingerprint(b""));
    }

    #[test]
    fn a_query_is_keyed_by_what_the_model_reads_of_it() {
        let key = Embedder::reading_key;
        // Other values, the same words: one key.
        assert_eq!(
            key("book 2 rooms from 2024-05-01, then email me the $450 receipt"),
            key("book 3 rooms from 2025-01-09, then email me the $99 receipt")
        );
        // Other words, or the same words cut into other clauses: other keys.
        assert_ne!(key("book 2 rooms"), key("book 2 suites"));
        assert_ne!(
            key("find flights to Paris, book a hotel near the Louvre"),
            key("find flights to Paris book a hotel near the Louvre")
        );
        let Some(m) = model() else { return };
        // Whatever the key leaves out changes no vector.
        let pairs = [
            (
                "pay invoice 4411 of $20.50, then mail 3 copies",
                "pay invoice 17 of $3, then mail 9 copies",
            ),
            ("weather on 2024-06-01", "weather on 12/31"),
            ("ticket 42", "ticket 7"),
        ];
        for (a, b) in pairs {
            assert_eq!(key(a), key(b));
            assert_eq!(
                m.embed_query_clauses(a).unwrap(),
                m.embed_query_clauses(b).unwrap()
            );
        }
    }

    #[test]
    fn a_query_is_read_up_to_its_token_cap() {
        let Some(m) = model() else { return };
        let long = "find the open issues of a repository and list them by label ".repeat(16);
        assert!(m.token_count(&long).unwrap() > QUERY_TOKENS);
        let q = m.embed_query(&long).unwrap();
        // Words past the cap change nothing; the whole text (as a tool's) reads them all.
        let longer = format!("{long} then send an email to the whole team");
        assert_eq!(q, m.embed_query(&longer).unwrap());
        assert!(dot(&m.embed(&long).unwrap(), &m.embed(&longer).unwrap()) < 0.9999);
        // A short query is read whole: the same vector as the text's.
        let short = "create an issue";
        assert!(dot(&m.embed_query(short).unwrap(), &m.embed(short).unwrap()) > 0.99999);
    }

    #[test]
    fn a_query_is_read_without_its_letterless_words() {
        assert_eq!(
            words_with_letters("book 2 rooms from 2024-05-01 to 2024-05-03, $450 max"),
            "book rooms from to max"
        );
        // An untouched text keeps its spacing; a text of values only is kept.
        let kept = "rent a car for a 24-hour trip  (iPhone15)";
        assert_eq!(words_with_letters(kept), kept);
        assert_eq!(words_with_letters("42 + 7 = ?"), "42 + 7 = ?");
        let Some(m) = model() else { return };
        let with = "call +1 (555) 010-2030 and read the 3 latest messages";
        let without = "call and read the latest messages";
        assert_eq!(
            m.embed_query(with).unwrap(),
            m.embed_query(without).unwrap()
        );
        assert_eq!(
            m.query_token_count(with).unwrap(),
            m.token_count(without).unwrap()
        );
        assert!(m.token_count(with).unwrap() > m.token_count(without).unwrap() + 8);
        // A tool's text is read whole.
        assert!(dot(&m.embed(with).unwrap(), &m.embed(without).unwrap()) < 0.999);
    }

    #[test]
    fn a_long_query_is_tokenized_from_its_start_only() {
        // Short texts are kept whole; a long one is cut at its last space before the limit.
        assert_eq!(query_prefix("create an issue"), "create an issue");
        let words = "word ".repeat(QUERY_BYTES);
        let cut = query_prefix(&words);
        assert!(
            cut.len() < QUERY_BYTES && cut.ends_with("word"),
            "{}",
            cut.len()
        );
        // Without a space, at a character boundary (é is two bytes).
        let accents = "é".repeat(QUERY_BYTES);
        let cut = query_prefix(&accents);
        assert!(cut.len() <= QUERY_BYTES && cut.chars().all(|c| c == 'é'));
        // A question followed by a pasted blob embeds as its prefix does.
        let Some(m) = model() else { return };
        let blob = format!("What does this image mean? {}", "iVBORw0KGgo".repeat(2000));
        assert_eq!(
            m.embed_query(&blob).unwrap(),
            m.embed_query(query_prefix(&blob)).unwrap()
        );
    }

    #[test]
    fn a_request_of_several_clauses_is_embedded_clause_by_clause() {
        let Some(m) = model() else { return };
        let request =
            "Find flights from Boston to Paris next week, then book a hotel near the Louvre";
        let v = m.embed_query_clauses(request).unwrap();
        assert_eq!(v.clauses.len(), 2);
        // Each clause as a query of its own (the batch changes nothing).
        for (clause, text) in v.clauses.iter().zip([
            "Find flights from Boston to Paris next week",
            "book a hotel near the Louvre",
        ]) {
            assert!(
                dot(clause, &m.embed_query(text).unwrap()) > 0.9999,
                "{text}"
            );
        }
        // The whole is their unit mean.
        let mut mean: Vec<f32> = v.clauses[0]
            .iter()
            .zip(&v.clauses[1])
            .map(|(a, b)| a + b)
            .collect();
        let n = dot(&mean, &mean).sqrt();
        mean.iter_mut().for_each(|x| *x /= n);
        assert!(dot(&mean, &v.whole) > 0.9999);
        // A request of one clause is the query's own vector, without clauses.
        let one = m
            .embed_query_clauses("create an issue in a repository")
            .unwrap();
        assert!(one.clauses.is_empty());
        assert_eq!(
            one.whole,
            m.embed_query("create an issue in a repository").unwrap()
        );
    }

    #[test]
    fn the_precision_is_named_and_a_wrong_one_is_refused() {
        assert_eq!("q8".parse::<Precision>().unwrap(), Precision::Q8);
        assert_eq!("i8".parse::<Precision>().unwrap(), Precision::I8);
        assert_eq!("f32".parse::<Precision>().unwrap(), Precision::F32);
        let err = "int4".parse::<Precision>().unwrap_err();
        assert!(
            err.to_string().contains("\"int4\"") && err.to_string().contains(PRECISION_ENV),
            "{err}"
        );
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
