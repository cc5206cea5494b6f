//! The cosine scan of a large catalog, on 8-bit copies of the tool vectors.
//!
//! A search compares the query's vector with every tool's. At 125,000 tools of 384 values that
//! is 192 MB of f32 read per query, which memory bandwidth alone makes a 20 ms affair on a small
//! machine. [`Codes`] keeps each vector as 8-bit integers with one scale (a quarter of the
//! bytes); the scan ranks every tool by that approximate cosine (error about 1e-3 for unit
//! vectors), keeps [`OVERSAMPLE`] times the candidates asked for, and the caller re-scores those
//! few with the exact f32 vectors. Catalogs up to [`EXACT_UP_TO`] tools are scanned exactly.
//! From [`SPLIT_FROM`] vectors on, the scan is split among the CPU's cores: a large catalog's
//! codes do not fit in the caches, and each core then reads its own share of them. From
//! [`SKETCH_FROM`] vectors on, a one-bit sketch of every vector is scanned first and only the
//! vectors it ranks best are scored on the codes ([`crate::sketch`]).

pub use crate::sketch::SKETCH_FROM;
use crate::sketch::{self, Sketches};

/// Catalogs up to this many vectors are scanned in f32 (fast enough; nothing approximate).
pub const EXACT_UP_TO: usize = 20_000;
/// Candidates kept from the approximate scan per candidate asked for.
pub const OVERSAMPLE: usize = 4;
/// Fewest candidates kept from the approximate scan.
const MIN_CANDIDATES: usize = 64;
/// Rows ahead of its turn a scattered row is asked of the memory system
/// ([`crate::cpu::prefetch`]).
pub(crate) const AHEAD: usize = 4;
/// Vectors each part of a split scan gets at least: a thread costs tens of
/// microseconds to start, a part of this size about a millisecond to scan.
pub const SPLIT_FROM: usize = 32_768;
/// Most parts a scan is split into.
const MOST_PARTS: usize = 4;

/// How many parts (threads, the caller's included) a scan of `len` vectors is split into: one
/// per [`SPLIT_FROM`] vectors, at most one per core and four.
pub(crate) fn scan_parts(len: usize) -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let cores = *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from));
    (len / SPLIT_FROM).clamp(1, cores.clamp(1, MOST_PARTS))
}

/// 8-bit copies of a set of vectors: `codes[d·dim..]` times `scales[d]` ≈ vector `d`.
#[derive(Debug, Clone, Default)]
pub struct Codes {
    dim: usize,
    codes: Vec<i8>,
    scales: Vec<f32>,
    /// Per vector, the sum of its codes (the VNNI scan's correction, see [`vnni`]).
    sums: Vec<i32>,
    /// One-bit sketches of the vectors, when asked for ([`Codes::with_sketches`]).
    sketches: Option<Sketches>,
}

impl Codes {
    /// Quantises `vectors` (`dim` values each), without sketches.
    pub fn new(vectors: &[f32], dim: usize) -> Self {
        Self::with_sketches(vectors, dim, false)
    }

    /// [`Codes::new`], and one-bit sketches of the vectors when `sketch` (whether a catalog
    /// gets them is [`crate::HybridConfig::sketch_from`]'s to say).
    pub fn with_sketches(vectors: &[f32], dim: usize, sketch: bool) -> Self {
        let mut codes = vec![0i8; vectors.len()];
        let scales = vectors
            .chunks_exact(dim.max(1))
            .zip(codes.chunks_exact_mut(dim.max(1)))
            .map(|(v, c)| quantize(v, c))
            .collect();
        let sums = codes
            .chunks_exact(dim.max(1))
            .map(|c| c.iter().map(|&x| i32::from(x)).sum())
            .collect();
        Self {
            dim,
            codes,
            scales,
            sums,
            sketches: sketch.then(|| Sketches::new(vectors, dim)),
        }
    }

    /// Vectors held.
    pub fn len(&self) -> usize {
        self.scales.len()
    }

    /// Whether no vector is held.
    pub fn is_empty(&self) -> bool {
        self.scales.is_empty()
    }

    /// Bytes the copies take (the sketches' included).
    pub fn bytes(&self) -> usize {
        let sketches = self.sketches.as_ref().map_or(0, Sketches::bytes);
        self.codes.len() + self.scales.len() * 4 + self.sums.len() * 4 + sketches
    }

    /// The approximate best products with `queries` of at least the `candidates` vectors for
    /// which `keep(d)` that score best, as `(d, score)`: [`Codes::best_scores`] of every such
    /// vector, or with sketches, of the [`sketch::keep`] best by their sketch only, each
    /// scored against the query its sketch is best with.
    ///
    /// Scoring a kept vector against that one query, not all of them, keeps the cost of a
    /// request of several clauses linear in its vectors: the sketches keep as many more
    /// vectors per query vector, and scoring each against every query made the 8-bit stage
    /// grow with their square. Against the other queries the vector's sketch estimated lower
    /// products, and the exact re-scoring that follows takes every query again: on all of
    /// APIs.guru the top ten of 1,552 requests stayed those of the 8-bit scan of every vector
    /// (docs/benchmarks.md).
    pub fn candidate_scores(
        &self,
        queries: &[&[f32]],
        keep: impl Fn(usize) -> bool + Sync,
        candidates: usize,
    ) -> Vec<(usize, f32)> {
        match &self.sketches {
            Some(sketches) if sketch::keep(candidates) < self.len() => {
                let parts = scan_parts(self.len());
                let kept = sketches.best(queries, keep, sketch::keep(candidates), parts);
                let mut by_query: Vec<Vec<usize>> = vec![Vec::new(); queries.len()];
                for (row, query) in kept {
                    by_query[query].push(row);
                }
                // Each query's rows stay in increasing order: the codes are read front to back.
                let quantized = self.quantize_queries(queries);
                let scored = by_query
                    .iter()
                    .enumerate()
                    .map(|(i, rows)| self.scan(&quantized[i..=i], |_| true, self.prefetched(rows)));
                scored.flatten().collect()
            }
            _ => self.best_scores(queries, keep),
        }
    }

    /// `rows` in order, each row's codes asked of the memory system [`AHEAD`] rows before
    /// its turn ([`crate::cpu::prefetch`]).
    fn prefetched<'a>(&'a self, rows: &'a [usize]) -> impl ExactSizeIterator<Item = usize> + 'a {
        let dim = self.dim.max(1);
        rows.iter().enumerate().map(move |(i, &row)| {
            if let Some(&ahead) = rows.get(i + AHEAD) {
                crate::cpu::prefetch(&self.codes[ahead * dim..(ahead + 1) * dim]);
            }
            row
        })
    }

    /// The queries' 8-bit codes and scales.
    fn quantize_queries(&self, queries: &[&[f32]]) -> Vec<(Vec<i8>, f32)> {
        queries
            .iter()
            .map(|q| {
                let mut codes = vec![0i8; self.dim];
                let scale = quantize(q, &mut codes);
                (codes, scale)
            })
            .collect()
    }

    /// The approximate dot product of every vector `d` with `query` for which `keep(d)`, as
    /// `(d, score)`.
    pub fn scores(&self, query: &[f32], keep: impl Fn(usize) -> bool + Sync) -> Vec<(usize, f32)> {
        self.best_scores(&[query], keep)
    }

    /// For every vector `d` for which `keep(d)`, its best approximate dot product with any of
    /// `queries`, as `(d, score)`: one pass over the codes, however many queries (a request's
    /// clauses are scanned together).
    pub fn best_scores(
        &self,
        queries: &[&[f32]],
        keep: impl Fn(usize) -> bool + Sync,
    ) -> Vec<(usize, f32)> {
        self.best_scores_in(queries, keep, scan_parts(self.len()))
    }

    /// [`Codes::best_scores`] in `parts` runs of vectors, all but the first on threads of their
    /// own; the scores come back in the vectors' order whatever the split.
    pub(crate) fn best_scores_in(
        &self,
        queries: &[&[f32]],
        keep: impl Fn(usize) -> bool + Sync,
        parts: usize,
    ) -> Vec<(usize, f32)> {
        let quantized = self.quantize_queries(queries);
        let mut runs =
            crate::parts::run(self.len(), parts, |rows| self.scan(&quantized, &keep, rows))
                .into_iter();
        let mut out = runs.next().unwrap_or_default();
        runs.for_each(|run| out.extend(run));
        out
    }

    /// The scores of the vectors `rows` on the best kernel this CPU has.
    fn scan(
        &self,
        quantized: &[(Vec<i8>, f32)],
        keep: impl Fn(usize) -> bool,
        rows: impl ExactSizeIterator<Item = usize>,
    ) -> Vec<(usize, f32)> {
        #[cfg(target_arch = "x86_64")]
        if crate::cpu::avx512_vnni() && self.dim > 0 && self.dim.is_multiple_of(64) {
            // SAFETY: AVX-512 F, BW, VL and VNNI were detected; dim is a positive multiple of 64.
            return unsafe { vnni::best_scores(self, quantized, keep, rows) };
        }
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2") && self.dim > 0 && self.dim.is_multiple_of(32) {
            // SAFETY: AVX2 was detected; dim is a positive multiple of 32.
            return unsafe { avx2::best_scores(self, quantized, keep, rows) };
        }
        self.best_scores_body(quantized, keep, rows)
    }

    /// The portable scan (compiled for the build's baseline target).
    fn best_scores_body(
        &self,
        queries: &[(Vec<i8>, f32)],
        keep: impl Fn(usize) -> bool,
        rows: impl ExactSizeIterator<Item = usize>,
    ) -> Vec<(usize, f32)> {
        self.best_by(queries, keep, rows, |_, c, i| dot_i8(c, &queries[i].0))
    }

    /// Every vector `d` of `rows` for which `keep(d)`, with its best score over `queries`, as
    /// `(d, score)`; `dot(d, row, i)` is the integer product of vector `d` (its codes, `row`)
    /// with query `i`. Inlined into each kernel, so `dot` runs on that kernel's instructions.
    #[inline(always)]
    fn best_by(
        &self,
        queries: &[(Vec<i8>, f32)],
        keep: impl Fn(usize) -> bool,
        rows: impl ExactSizeIterator<Item = usize>,
        dot: impl Fn(usize, &[i8], usize) -> i32,
    ) -> Vec<(usize, f32)> {
        let mut out = Vec::with_capacity(rows.len());
        let dim = self.dim.max(1);
        for d in rows {
            if !keep(d) {
                continue;
            }
            let (row, scale) = (&self.codes[d * dim..(d + 1) * dim], self.scales[d]);
            let mut best = f32::NEG_INFINITY;
            for (i, (_, query_scale)) in queries.iter().enumerate() {
                best = best.max(dot(d, row, i) as f32 * scale * query_scale);
            }
            out.push((d, best));
        }
        out
    }
}

/// The sum of the eight 32-bit lanes of `acc`.
///
/// # Safety
/// The CPU must have AVX2; inlined into the kernels, which enable it.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn sum_lanes(acc: std::arch::x86_64::__m256i) -> i32 {
    use std::arch::x86_64::*;
    let half = _mm_add_epi32(
        _mm256_castsi256_si128(acc),
        _mm256_extracti128_si256::<1>(acc),
    );
    let quarter = _mm_add_epi32(half, _mm_unpackhi_epi64(half, half));
    _mm_cvtsi128_si32(_mm_add_epi32(quarter, _mm_shuffle_epi32::<0b01>(quarter)))
}

/// The scan on AVX-512 VNNI: `vpdpbusd` multiplies 32 unsigned bytes by 32 signed ones (its
/// 256-bit form, which searched 125,000 tools faster than the 512-bit one on AMD Zen 4; see
/// docs/benchmarks.md), so the query is shifted to `q + 128` (1..=255) and each vector's
/// `128 · Σ codes` taken back.
#[cfg(target_arch = "x86_64")]
mod vnni {
    use super::Codes;

    /// [`Codes::best_scores`] on VNNI.
    ///
    /// # Safety
    /// [`crate::cpu::avx512_vnni`] must have said yes and `codes.dim` be a positive multiple of
    /// 64.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2")]
    pub(super) unsafe fn best_scores(
        codes: &Codes,
        queries: &[(Vec<i8>, f32)],
        keep: impl Fn(usize) -> bool,
        rows: impl ExactSizeIterator<Item = usize>,
    ) -> Vec<(usize, f32)> {
        let shifted: Vec<Vec<u8>> = queries
            .iter()
            .map(|(q, _)| q.iter().map(|&x| (i16::from(x) + 128) as u8).collect())
            .collect();
        codes.best_by(queries, keep, rows, |d, row, i| {
            // SAFETY: the row and the query hold dim bytes, a multiple of 64.
            unsafe { dot(row, &shifted[i]) - 128 * codes.sums[d] }
        })
    }

    /// The product of a vector's codes with a shifted query, in two sums: `vpdpbusd` takes
    /// several cycles before its sum can be added to, so one chain of them would wait on itself.
    ///
    /// # Safety
    /// As [`best_scores`]; both slices hold a multiple of 64 bytes, the same number.
    #[inline(always)]
    unsafe fn dot(row: &[i8], shifted: &[u8]) -> i32 {
        use std::arch::x86_64::*;
        debug_assert!(row.len() == shifted.len() && row.len().is_multiple_of(64));
        let (q, c) = (shifted.as_ptr(), row.as_ptr());
        let (mut even, mut odd) = (_mm256_setzero_si256(), _mm256_setzero_si256());
        for i in (0..row.len()).step_by(64) {
            // SAFETY: i + 64 <= len for both slices.
            unsafe {
                let (q0, c0) = (q.add(i).cast(), c.add(i).cast());
                let (q1, c1) = (q.add(i + 32).cast(), c.add(i + 32).cast());
                even = _mm256_dpbusd_epi32(even, _mm256_loadu_si256(q0), _mm256_loadu_si256(c0));
                odd = _mm256_dpbusd_epi32(odd, _mm256_loadu_si256(q1), _mm256_loadu_si256(c1));
            }
        }
        // SAFETY: AVX2 is enabled where this is inlined.
        unsafe { super::sum_lanes(_mm256_add_epi32(even, odd)) }
    }
}

/// The scan on AVX2: `vpmaddubsw` multiplies 32 unsigned bytes by 32 signed ones and adds
/// adjacent pairs in 16 bits. The query's magnitudes are the unsigned side and the vector's
/// codes, given the query's signs (`vpsignb`), the signed one; both sides are within ±127
/// ([`quantize`]), so a pair sums to at most 2 · 127 · 127 = 32,258 and never saturates.
/// `vpmaddwd` by ones then adds pairs of those into 32 bits: the exact integer product, with
/// about half the instructions of the compiler's widening loop.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::Codes;

    /// [`Codes::best_scores`] on AVX2.
    ///
    /// # Safety
    /// The CPU must have AVX2 and `codes.dim` be a positive multiple of 32.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn best_scores(
        codes: &Codes,
        queries: &[(Vec<i8>, f32)],
        keep: impl Fn(usize) -> bool,
        rows: impl ExactSizeIterator<Item = usize>,
    ) -> Vec<(usize, f32)> {
        let magnitudes: Vec<Vec<u8>> = queries
            .iter()
            .map(|(q, _)| q.iter().map(|x| x.unsigned_abs()).collect())
            .collect();
        codes.best_by(queries, keep, rows, |_, row, i| {
            // SAFETY: the row, the query and its magnitudes hold dim bytes, a multiple of 32.
            unsafe { dot(row, &queries[i].0, &magnitudes[i]) }
        })
    }

    /// The product of a vector's codes with a query, given the query's magnitudes.
    ///
    /// # Safety
    /// As [`best_scores`]; the three slices hold the same multiple of 32 bytes.
    #[inline(always)]
    unsafe fn dot(row: &[i8], query: &[i8], magnitudes: &[u8]) -> i32 {
        use std::arch::x86_64::*;
        debug_assert!(row.len() == query.len() && row.len() == magnitudes.len());
        debug_assert!(row.len().is_multiple_of(32));
        let ones = _mm256_set1_epi16(1);
        let mut acc = _mm256_setzero_si256();
        for i in (0..row.len()).step_by(32) {
            // SAFETY: i + 32 <= len for all three slices.
            unsafe {
                let c = _mm256_loadu_si256(row.as_ptr().add(i).cast());
                let q = _mm256_loadu_si256(query.as_ptr().add(i).cast());
                let m = _mm256_loadu_si256(magnitudes.as_ptr().add(i).cast());
                let pairs = _mm256_maddubs_epi16(m, _mm256_sign_epi8(c, q));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, ones));
            }
        }
        // SAFETY: AVX2 is enabled where this is inlined.
        unsafe { super::sum_lanes(acc) }
    }
}

/// How many candidates the approximate scan keeps for `k` results.
pub fn candidates(k: usize) -> usize {
    (k * OVERSAMPLE).max(MIN_CANDIDATES)
}

/// Writes `v / scale` rounded into `out` and returns `scale` (the largest magnitude over 127).
fn quantize(v: &[f32], out: &mut [i8]) -> f32 {
    let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
    if max == 0.0 || !max.is_finite() {
        out.fill(0);
        return 0.0;
    }
    let inv = 127.0 / max;
    for (o, x) in out.iter_mut().zip(v) {
        *o = (x * inv).round().clamp(-127.0, 127.0) as i8;
    }
    max / 127.0
}

/// Integer dot product, summed in 16 independent lanes so that it compiles to vector
/// multiply-adds.
#[inline(always)]
fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    let mut lanes = [0i32; 16];
    let (ca, cb) = (a.chunks_exact(16), b.chunks_exact(16));
    let tail: i32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(&x, &y)| i32::from(x) * i32::from(y))
        .sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..16 {
            lanes[i] += i32::from(x[i]) * i32::from(y[i]);
        }
    }
    lanes.iter().sum::<i32>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(seed: u64, dim: usize) -> Vec<f32> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let v: Vec<f32> = (0..dim)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s % 2001) as f32 / 1000.0 - 1.0
            })
            .collect();
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.into_iter().map(|x| x / n).collect()
    }

    #[test]
    fn approximate_scores_are_within_a_hundredth_of_the_exact_cosine() {
        let dim = 384;
        let vectors: Vec<f32> = (0..200).flat_map(|i| unit(i, dim)).collect();
        let codes = Codes::new(&vectors, dim);
        assert_eq!(codes.len(), 200);
        assert_eq!(codes.bytes(), 200 * dim + 200 * 8);
        let q = unit(7, dim);
        let scores = codes.scores(&q, |d| d % 2 == 1);
        assert_eq!(scores.len(), 100, "only the kept vectors are scored");
        for (d, s) in scores {
            let exact = crate::hybrid::dot(&vectors[d * dim..(d + 1) * dim], &q);
            assert!((s - exact).abs() < 0.01, "doc {d}: {s} vs {exact}");
        }
        // The vector itself scores highest.
        let best = codes
            .scores(&q, |_| true)
            .into_iter()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap();
        assert_eq!(best.0, 7);
    }

    #[test]
    fn a_scan_split_among_threads_gives_the_scores_of_one_pass_in_order() {
        let dim = 64;
        let vectors: Vec<f32> = (0..1_003).flat_map(|i| unit(i, dim)).collect();
        let codes = Codes::new(&vectors, dim);
        let (a, b) = (unit(5, dim), unit(900, dim));
        let keep = |d: usize| d % 7 != 3;
        let whole = codes.best_scores_in(&[&a, &b], keep, 1);
        assert_eq!(whole.len(), 1_003 - 143);
        for parts in [2, 3, 4, 7, 2_000] {
            let split = codes.best_scores_in(&[&a, &b], keep, parts);
            assert_eq!(split, whole, "{parts} parts");
        }
        // Small scans stay on the caller; large ones are split, at most once per core.
        assert_eq!(scan_parts(SPLIT_FROM - 1), 1);
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        assert_eq!(scan_parts(10 * SPLIT_FROM), cores.clamp(1, MOST_PARTS));
    }

    #[test]
    fn several_queries_give_each_vector_its_best_score() {
        let dim = 384;
        let vectors: Vec<f32> = (0..50).flat_map(|i| unit(i, dim)).collect();
        let codes = Codes::new(&vectors, dim);
        let (a, b) = (unit(3, dim), unit(40, dim));
        let both = codes.best_scores(&[&a, &b], |_| true);
        let (sa, sb) = (codes.scores(&a, |_| true), codes.scores(&b, |_| true));
        for ((d, s), ((_, x), (_, y))) in both.iter().zip(sa.iter().zip(&sb)) {
            assert_eq!(*s, x.max(*y), "doc {d}");
        }
        let top: Vec<usize> = {
            let mut by = both.clone();
            by.sort_by(|p, q| q.1.total_cmp(&p.1));
            by.iter().take(2).map(|h| h.0).collect()
        };
        assert!(top.contains(&3) && top.contains(&40), "{top:?}");
        // Whichever kernel ran, the scores are the plain integer products.
        for (d, s) in &both {
            let c = &codes.codes[d * dim..(d + 1) * dim];
            let plain = [&a, &b]
                .iter()
                .map(|q| {
                    let mut qc = vec![0i8; dim];
                    let qs = quantize(q, &mut qc);
                    dot_i8(c, &qc) as f32 * codes.scales[*d] * qs
                })
                .fold(f32::NEG_INFINITY, f32::max);
            assert!(
                (s - plain).abs() <= 1e-6 * plain.abs().max(1.0),
                "doc {d}: {s} vs {plain}"
            );
        }
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_simd_scans_give_the_exact_integer_products() {
        let dim = 384;
        // Random vectors, and the extremes the codes reach (every code ±127, zeros).
        let mut vectors: Vec<f32> = (0..60).flat_map(|i| unit(i, dim)).collect();
        vectors.extend((0..dim).map(|i| if i % 2 == 0 { 1.0 } else { -1.0 }));
        vectors.extend(std::iter::repeat_n(1.0, dim));
        vectors.extend(std::iter::repeat_n(0.0, dim));
        let codes = Codes::new(&vectors, dim);
        let queries: Vec<(Vec<i8>, f32)> = [
            unit(5, dim),
            vec![-1.0; dim],
            (0..dim)
                .map(|i| if i % 3 == 0 { 0.0 } else { 1.0 })
                .collect(),
        ]
        .iter()
        .map(|q| {
            let mut c = vec![0i8; dim];
            let s = quantize(q, &mut c);
            (c, s)
        })
        .collect();
        let all = 0..codes.len();
        let plain = codes.best_scores_body(&queries, |d| d != 1, all.clone());
        assert_eq!(plain.len(), codes.len() - 1);
        // All 127s against all −127s: the largest product there is.
        let ones = codes.len() - 2;
        let largest = [(
            ones,
            (-127 * 127 * 384) as f32 * codes.scales[ones] * queries[1].1,
        )];
        if is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 was detected; 384 is a positive multiple of 32.
            unsafe {
                assert_eq!(
                    avx2::best_scores(&codes, &queries, |d| d != 1, all.clone()),
                    plain
                );
                assert_eq!(
                    avx2::best_scores(&codes, &queries[1..2], |d| d == ones, all.clone()),
                    largest
                );
            }
        }
        if crate::cpu::avx512_vnni() {
            // SAFETY: VNNI was detected; 384 is a positive multiple of 64.
            unsafe {
                assert_eq!(
                    vnni::best_scores(&codes, &queries, |d| d != 1, all.clone()),
                    plain
                );
                assert_eq!(
                    vnni::best_scores(&codes, &queries[1..2], |d| d == ones, all.clone()),
                    largest
                );
            }
        }
    }

    #[test]
    fn with_sketches_only_the_best_by_sketch_are_scored_on_the_codes() {
        let (dim, n) = (64, 6_000);
        let vectors: Vec<f32> = (0..n as u64).flat_map(|i| unit(i, dim)).collect();
        let plain = Codes::with_sketches(&vectors, dim, false);
        let sketched = Codes::with_sketches(&vectors, dim, true);
        assert!(sketched.bytes() > plain.bytes());
        let q = unit(17, dim);
        let all = plain.candidate_scores(&[&q], |_| true, 64);
        assert_eq!(all.len(), n, "without sketches every vector is scored");
        let some = sketched.candidate_scores(&[&q], |_| true, 64);
        assert_eq!(some.len(), sketch::keep(64));
        for &(d, score) in &some {
            assert_eq!(score, all[d].1, "vector {d} keeps its 8-bit score");
        }
        assert!(
            some.iter().any(|&(d, _)| d == 17),
            "the query's own vector is kept"
        );
        // With two queries each kept vector is scored against one of them (the one its sketch
        // is nearest): its score is that query's 8-bit score, and each query's own vector is
        // kept, with its score against that query.
        let q2 = unit(4_242, dim);
        let second = plain.candidate_scores(&[&q2], |_| true, 64);
        let pair = sketched.candidate_scores(&[&q, &q2], |_| true, 64);
        assert_eq!(pair.len(), sketch::keep(64));
        let mut against = [0, 0];
        for &(d, score) in &pair {
            let which = [all[d].1, second[d].1].iter().position(|&s| s == score);
            against[which.expect("a score against one of the queries")] += 1;
        }
        assert!(against[0] > 0 && against[1] > 0, "{against:?}");
        assert!(pair.contains(&(17, all[17].1)));
        assert!(pair.contains(&(4_242, second[4_242].1)));
        // A filter that leaves fewer than the sketches keep leaves them all.
        let even = sketched.candidate_scores(&[&q], |d| d % 4 == 0, 64);
        assert_eq!(even.len(), n / 4);
        assert!(even.iter().all(|&(d, _)| d % 4 == 0));
    }

    #[test]
    fn zero_and_odd_length_vectors_are_handled() {
        let codes = Codes::new(&[0.0; 6], 3);
        assert_eq!(
            codes.scores(&[1.0, 0.0, 0.0], |_| true),
            [(0, 0.0), (1, 0.0)]
        );
        assert_eq!(dot_i8(&[1; 17], &[2; 17]), 34);
        // Vectors of no dimension take the portable path: nothing to read, every score 0.
        assert_eq!(Codes::new(&[0.5; 4], 0).scores(&[], |_| true).len(), 4);
        assert!(Codes::new(&[], 384).is_empty());
        assert_eq!(candidates(10), 64);
        assert_eq!(candidates(50), 200);
    }
}
