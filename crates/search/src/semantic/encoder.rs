//! The BERT encoder's forward pass, written for one short text at a time.
//!
//! A query is 5–30 tokens. At that size a general tensor library spends its time around the
//! arithmetic rather than in it: it packs every weight matrix again for each product, splits
//! each product over threads through a general scheduler, computes erf in f64, and pads batches.
//! Here the weights are packed once at load time ([`Packed`]), the query/key/value projections
//! are one product, texts are never padded (a batch is its texts' tokens stacked; attention runs
//! within each text), and the products, the attention heads, the layer norms and the
//! quantising of the products' inputs are shared with a small spinning [`Pool`]. The arithmetic
//! is the model's, in f32, so the vectors match the reference implementation
//! (sentence-transformers on PyTorch) to about 1e-6.

use std::collections::HashMap;
use std::sync::Mutex;

use candle_core::{DType, Tensor};

use super::kernels::{self, Activation, Packed, Precision, Simd, NR};
use super::pool::Pool;

/// Rows of a product handled by one chunk of work (bounds the cache footprint of big batches).
const ROW_BLOCK: usize = 64;
/// Chunks a product is split into per row block, so that threads finish together.
const CHUNKS: usize = 24;

/// The fields of a Hugging Face BERT `config.json` the encoder reads.
#[derive(Debug, Clone, serde::Deserialize)]
pub(crate) struct Config {
    pub(crate) vocab_size: usize,
    pub(crate) hidden_size: usize,
    pub(crate) num_hidden_layers: usize,
    pub(crate) num_attention_heads: usize,
    pub(crate) intermediate_size: usize,
    #[serde(default = "gelu")]
    pub(crate) hidden_act: HiddenAct,
    pub(crate) max_position_embeddings: usize,
    #[serde(default = "one")]
    pub(crate) type_vocab_size: usize,
    #[serde(default = "eps")]
    pub(crate) layer_norm_eps: f64,
    #[serde(default)]
    pub(crate) model_type: Option<String>,
}

/// The feed-forward activation a config names.
#[derive(Debug, Clone, Copy, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum HiddenAct {
    /// erf GELU.
    Gelu,
    /// tanh-approximated GELU (`gelu_new`, `gelu_pytorch_tanh`).
    #[serde(alias = "gelu_new", alias = "gelu_pytorch_tanh")]
    GeluApproximate,
    Relu,
}

fn gelu() -> HiddenAct {
    HiddenAct::Gelu
}
fn one() -> usize {
    1
}
fn eps() -> f64 {
    1e-12
}

struct Norm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
}

struct Layer {
    /// Query, key and value projections as one `3·hidden × hidden` product.
    qkv: Packed,
    out: Packed,
    norm1: Norm,
    up: Packed,
    down: Packed,
    norm2: Norm,
}

/// A loaded BERT encoder (weights in f32, products packed).
pub(crate) struct Encoder {
    hidden: usize,
    heads: usize,
    max_positions: usize,
    vocab: usize,
    eps: f32,
    act: Activation,
    word: Vec<f32>,
    position: Vec<f32>,
    /// The embedding of token type 0 (single-segment input).
    token_type: Vec<f32>,
    norm: Norm,
    layers: Vec<Layer>,
    pub(crate) simd: Simd,
}

/// Values of attention scratch a thread keeps between heads (256 KiB, enough for sequences of
/// about 200 tokens); a longer sequence's scratch is freed after its head.
const SCRATCH_KEPT: usize = 64 * 1024;

thread_local! {
    /// The scratch of [`kernels::attention_head`] on this thread, reused from head to head.
    static SCRATCH: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A raw pointer to an output matrix that chunks on several threads write at disjoint places.
#[derive(Clone, Copy)]
struct Out(*mut f32);
// SAFETY: every use writes a region no other chunk of the same job touches.
unsafe impl Send for Out {}
// SAFETY: as above.
unsafe impl Sync for Out {}

/// Rows per part below which work over rows (quantising a product's input, layer norm) is not
/// split among threads: handing it out would cost more than it saves.
const SPLIT_ROWS: usize = 8;

/// How many parts work over `m` rows is split into: one per thread of `pool`, as long as each
/// gets [`SPLIT_ROWS`] rows; one without a pool.
fn row_parts(pool: Option<&Pool>, m: usize) -> usize {
    pool.map_or(1, |p| p.threads().min(m / SPLIT_ROWS).max(1))
}

/// Runs `f(i)` for every `i < count`: on the pool's threads when there is one and more than one
/// chunk, on this thread otherwise.
fn run(pool: Option<&Pool>, count: usize, f: &(dyn Fn(usize) + Sync)) {
    match pool {
        Some(p) if count > 1 => p.run(count, f),
        _ => (0..count).for_each(f),
    }
}

impl Encoder {
    /// Builds the encoder from the checkpoint's tensors (names as in Hugging Face BERT
    /// checkpoints, with or without a `bert.` or `<model_type>.` prefix).
    pub(crate) fn from_tensors(
        tensors: &HashMap<String, Tensor>,
        config: &Config,
        precision: Precision,
    ) -> Result<Self, String> {
        let simd = Simd::detect();
        let prefix = ["", "bert."]
            .iter()
            .map(|p| p.to_string())
            .chain(config.model_type.iter().map(|m| format!("{m}.")))
            .find(|p| tensors.contains_key(&format!("{p}embeddings.word_embeddings.weight")))
            .ok_or("no tensor embeddings.word_embeddings.weight")?;
        let get = |name: &str, shape: &[usize]| -> Result<Vec<f32>, String> {
            let full = format!("{prefix}{name}");
            let t = tensors
                .get(&full)
                .ok_or_else(|| format!("no tensor {full}"))?;
            if t.dims() != shape {
                return Err(format!(
                    "tensor {full} has shape {:?}, expected {shape:?}",
                    t.dims()
                ));
            }
            t.to_dtype(DType::F32)
                .and_then(|t| t.flatten_all())
                .and_then(|t| t.to_vec1::<f32>())
                .map_err(|e| format!("tensor {full}: {e}"))
        };
        let h = config.hidden_size;
        let heads = config.num_attention_heads;
        if heads == 0 || !h.is_multiple_of(heads) {
            return Err(format!(
                "hidden size {h} is not a multiple of {heads} heads"
            ));
        }
        let inter = config.intermediate_size;
        let norm = |name: &str| -> Result<Norm, String> {
            Ok(Norm {
                gamma: get(&format!("{name}.weight"), &[h])?,
                beta: get(&format!("{name}.bias"), &[h])?,
            })
        };
        let linear = |name: &str, n: usize, k: usize| -> Result<Packed, String> {
            let w = get(&format!("{name}.weight"), &[n, k])?;
            let b = get(&format!("{name}.bias"), &[n])?;
            Ok(Packed::new(&w, &b, n, k, simd, precision))
        };
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for i in 0..config.num_hidden_layers {
            let at = format!("encoder.layer.{i}");
            let mut w = Vec::with_capacity(3 * h * h);
            let mut b = Vec::with_capacity(3 * h);
            for part in ["query", "key", "value"] {
                w.extend(get(&format!("{at}.attention.self.{part}.weight"), &[h, h])?);
                b.extend(get(&format!("{at}.attention.self.{part}.bias"), &[h])?);
            }
            layers.push(Layer {
                qkv: Packed::new(&w, &b, 3 * h, h, simd, precision),
                out: linear(&format!("{at}.attention.output.dense"), h, h)?,
                norm1: norm(&format!("{at}.attention.output.LayerNorm"))?,
                up: linear(&format!("{at}.intermediate.dense"), inter, h)?,
                down: linear(&format!("{at}.output.dense"), h, inter)?,
                norm2: norm(&format!("{at}.output.LayerNorm"))?,
            });
        }
        let token_types = config.type_vocab_size.max(1);
        let mut token_type = get("embeddings.token_type_embeddings.weight", &[token_types, h])?;
        token_type.truncate(h);
        Ok(Self {
            hidden: h,
            heads,
            max_positions: config.max_position_embeddings,
            vocab: config.vocab_size,
            eps: config.layer_norm_eps as f32,
            act: match config.hidden_act {
                HiddenAct::Gelu => Activation::Gelu,
                HiddenAct::GeluApproximate => Activation::GeluTanh,
                HiddenAct::Relu => Activation::Relu,
            },
            word: get("embeddings.word_embeddings.weight", &[config.vocab_size, h])?,
            position: get(
                "embeddings.position_embeddings.weight",
                &[config.max_position_embeddings, h],
            )?,
            token_type,
            norm: norm("embeddings.LayerNorm")?,
            layers,
            simd,
        })
    }

    /// Length of every embedding.
    pub(crate) fn hidden(&self) -> usize {
        self.hidden
    }

    /// The precision the products' weights are stored in.
    pub(crate) fn precision(&self) -> Precision {
        self.layers
            .first()
            .map_or(Precision::F32, |l| l.qkv.precision())
    }

    /// Writes the mean-pooled, unit-length embedding of each token sequence (`[CLS] … [SEP]`
    /// ids, at most `max_position_embeddings` long) to `out`, `hidden` values per sequence.
    pub(crate) fn embed(
        &self,
        seqs: &[&[u32]],
        pool: Option<&Pool>,
        out: &mut [f32],
    ) -> Result<(), String> {
        let h = self.hidden;
        assert_eq!(out.len(), seqs.len() * h, "output length");
        let mut starts = Vec::with_capacity(seqs.len() + 1);
        let mut m = 0;
        for s in seqs {
            if s.len() > self.max_positions {
                return Err(format!(
                    "{} tokens, more than the model's {} positions",
                    s.len(),
                    self.max_positions
                ));
            }
            if let Some(id) = s.iter().find(|&&id| id as usize >= self.vocab) {
                return Err(format!("token id {id} outside the vocabulary"));
            }
            starts.push(m);
            m += s.len();
        }
        starts.push(m);
        if m == 0 {
            out.fill(0.0);
            return Ok(());
        }

        // Embeddings: word + position + token type 0, then layer norm.
        let mut x = vec![0f32; m * h];
        for (s, &start) in seqs.iter().zip(&starts) {
            for (t, &id) in s.iter().enumerate() {
                let row = &mut x[(start + t) * h..(start + t + 1) * h];
                let word = &self.word[id as usize * h..(id as usize + 1) * h];
                let pos = &self.position[t * h..(t + 1) * h];
                for (((v, w), p), tt) in row.iter_mut().zip(word).zip(pos).zip(&self.token_type) {
                    *v = w + p + tt;
                }
            }
        }
        self.layer_norm(&mut x, None, &self.norm, pool);

        let inter = self.layers.first().map_or(0, |l| l.up.n);
        let mut qkv = vec![0f32; m * 3 * h];
        let mut ctx = vec![0f32; m * h];
        let mut x1 = vec![0f32; m * h];
        let mut up = vec![0f32; m * inter];
        for layer in &self.layers {
            self.linear(&layer.qkv, &x, m, &mut qkv, pool, false);
            self.attention(&qkv, &starts, &mut ctx, pool);
            self.linear(&layer.out, &ctx, m, &mut x1, pool, false);
            self.layer_norm(&mut x1, Some(&x), &layer.norm1, pool);
            self.linear(&layer.up, &x1, m, &mut up, pool, true);
            self.linear(&layer.down, &up, m, &mut x, pool, false);
            self.layer_norm(&mut x, Some(&x1), &layer.norm2, pool);
        }

        // Mean over each text's tokens, then unit length.
        for (i, v) in out.chunks_exact_mut(h).enumerate() {
            let (a, b) = (starts[i], starts[i + 1]);
            v.fill(0.0);
            for row in x[a * h..b * h].chunks_exact(h) {
                for (s, r) in v.iter_mut().zip(row) {
                    *s += r;
                }
            }
            let n = (b - a).max(1) as f32;
            let norm = v.iter().map(|s| (s / n) * (s / n)).sum::<f32>().sqrt();
            let scale = 1.0 / (n * norm.max(1e-12));
            for s in v.iter_mut() {
                *s *= scale;
            }
        }
        Ok(())
    }

    /// Layer norm of every row of `v` (the residual added first when given), the rows split
    /// among the pool's threads ([`row_parts`]).
    fn layer_norm(
        &self,
        v: &mut [f32],
        residual: Option<&[f32]>,
        norm: &Norm,
        pool: Option<&Pool>,
    ) {
        let h = self.hidden;
        let m = v.len() / h;
        let per = m.div_ceil(row_parts(pool, m)).max(1) * h;
        let parts: Vec<_> = match residual {
            Some(res) => v
                .chunks_mut(per)
                .zip(res.chunks(per))
                .map(|(v, r)| Mutex::new((v, Some(r))))
                .collect(),
            None => v.chunks_mut(per).map(|v| Mutex::new((v, None))).collect(),
        };
        run(pool, parts.len(), &|i| {
            let mut part = parts[i].lock().unwrap_or_else(|e| e.into_inner());
            let (v, residual) = &mut *part;
            kernels::layer_norm(self.simd, v, *residual, &norm.gamma, &norm.beta, self.eps);
        });
    }

    /// `y = x·Wᵀ + b` over `m` rows (then the activation when `activate`), in chunks of a row
    /// block and a group of panels.
    fn linear(
        &self,
        lin: &Packed,
        x: &[f32],
        m: usize,
        y: &mut [f32],
        pool: Option<&Pool>,
        activate: bool,
    ) {
        debug_assert_eq!(y.len(), m * lin.n);
        let panels = lin.panels();
        let mut group = panels.div_ceil(CHUNKS).max(1);
        if lin.pairs_panels() {
            // An even number of panels per chunk, so that none is left alone.
            group = group.next_multiple_of(2);
        }
        let groups = panels.div_ceil(group);
        let blocks = m.div_ceil(ROW_BLOCK);
        let dst = Out(y.as_mut_ptr());
        let (simd, act, n) = (self.simd, self.act, lin.n);
        let each = |count: usize, f: &(dyn Fn(usize) + Sync)| run(pool, count, f);
        let x = lin.input(simd, x, m, row_parts(pool, m), &each);
        run(pool, blocks * groups, &|c| {
            // The whole `Out` (Send + Sync), not its raw pointer field, is captured.
            #[allow(clippy::redundant_locals)]
            let dst = dst;
            let (b, g) = (c / groups, c % groups);
            let rows = b * ROW_BLOCK..((b + 1) * ROW_BLOCK).min(m);
            let ps = g * group..((g + 1) * group).min(panels);
            let cols = ps.start * NR..(ps.end * NR).min(n);
            // SAFETY: chunk (b, g) is the only writer of its rows × columns of `y`, which is
            // m × n and outlives the job.
            unsafe {
                lin.apply(simd, &x, rows.clone(), ps, dst.0);
                if activate {
                    for r in rows {
                        let row = std::slice::from_raw_parts_mut(
                            dst.0.add(r * n + cols.start),
                            cols.len(),
                        );
                        kernels::activate(simd, act, row);
                    }
                }
            }
        });
    }

    /// Multi-head self-attention within each sequence, one chunk per (sequence, head).
    fn attention(&self, qkv: &[f32], starts: &[usize], ctx: &mut [f32], pool: Option<&Pool>) {
        let h = self.hidden;
        let heads = self.heads;
        let d = h / heads;
        let scale = 1.0 / (d as f32).sqrt();
        let dst = Out(ctx.as_mut_ptr());
        let seqs = starts.len() - 1;
        debug_assert_eq!(ctx.len(), starts[seqs] * h);
        let simd = self.simd;
        run(pool, seqs * heads, &|c| {
            // The whole `Out` (Send + Sync), not its raw pointer field, is captured.
            #[allow(clippy::redundant_locals)]
            let dst = dst;
            let (s, hd) = (c / heads, c % heads);
            let (a, b) = (starts[s], starts[s + 1]);
            if a == b {
                return;
            }
            SCRATCH.with_borrow_mut(|scratch| {
                // SAFETY: the chunk is the only writer of columns hd·d..(hd+1)·d of rows a..b of
                // the m × h context.
                unsafe {
                    kernels::attention_head(
                        simd,
                        &qkv[a * 3 * h..b * 3 * h],
                        b - a,
                        3 * h,
                        (hd * d, h + hd * d, 2 * h + hd * d),
                        d,
                        scale,
                        (dst.0.add(a * h + hd * d), h),
                        scratch,
                    )
                };
                if scratch.len() > SCRATCH_KEPT {
                    *scratch = Vec::new();
                }
            });
        });
    }
}
