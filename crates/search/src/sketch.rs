//! One-bit sketches of a very large catalog's vectors: the first, rough pass of its scan.
//!
//! The 8-bit scan ([`crate::scan`]) of 125,000 tools reads some 60 MB per query. That much
//! memory is read at the pace of the host's memory bus, which a virtual machine shares with
//! its neighbours: on a two-core VM the same 48 MB read took 2 ms at the median and up to
//! 16–24 ms now and then, while 6 MB (which stays in the caches) never took more than 0.7 ms
//! (docs/benchmarks.md). So from [`SKETCH_FROM`] vectors on, each vector is also kept as one
//! bit per value, the sign of its difference from the catalog's mean vector, with a scale and
//! a count of its set bits: 56 bytes for 384 values, 7 MB for 125,000 tools. A query scans the
//! sketches first and only the best [`keep`] of them go on to the 8-bit scan, and the best of
//! those to the exact one.
//! On all of APIs.guru (185,646 vectors) and 1,552 requests, the top ten answers and the 50
//! nearest tools were those of the 8-bit scan of every vector, every one.
//!
//! The estimate is asymmetric: the query keeps four bits per value (as four bit planes), the
//! vector one, so the score is a sum of a few `popcount`s per 64 values. For a vector `v`, the
//! catalog's mean `c`, `x = v − c`, its signs `s` and `α = mean |xᵢ|` (the scale that makes
//! `α·s` nearest `x`): `q·v = q·c + q·x ≈ q·c + α · Σ qᵢ sᵢ`. Adding `q·c` keeps the scores of
//! several queries (a request's clauses) comparable, so a vector's best one ranks it.
//!
//! Three kernels give the same estimates: eight vectors per step on AVX-512 VPOPCNTDQ, 32 per
//! step on AVX2, and one at a time elsewhere. AVX2 has no vector `popcount`, so its kernel reads
//! a second copy of the sketches laid out byte by byte for 32 vectors side by side, and the
//! query as one 16-entry table per half-byte (entry `x` the sum of the query's 4-bit values
//! whose bits are set in `x`): one table lookup (`vpshufb`) adds a half-byte's share to 32
//! vectors' sums, and each byte of the sketches is read once for up to four queries. On all
//! of APIs.guru that took a request of four to seven vectors from p50 10.9–11.4 ms to 8.7–9.4 ms
//! (scan and fusion, docs/benchmarks.md). A large scan is split among the cores by runs of
//! blocks (`crate::parts`); each run keeps its own best, and the best of those are the best
//! of the whole.
//!
//! Each vector kept is named with the query its estimate is best with, so the 8-bit scan that
//! follows scores it against that query alone ([`crate::scan::Codes::candidate_scores`]).

use std::ops::Range;

/// Catalogs of this many vectors or more get sketches; below it the 8-bit scan reads under
/// 20 MB per query.
pub const SKETCH_FROM: usize = 50_000;
/// The catalog size from which a search ranks sketches first by default: [`SKETCH_FROM`] on a
/// CPU with AVX-512 VPOPCNTDQ or AVX2 (eight vectors per step), else never. One vector at a
/// time, with `popcnt`, the sketches of 125,000 tools took 3.6–4.0 ms to scan, and a search of
/// them was slower (p50 6.5–7.5 ms) than with the 8-bit scan split between two cores on AVX2
/// (4.3–4.9 ms); eight at a time on AVX2, split between the cores too, a sketch-first scan of
/// 185,646 vectors took p50 1.6–1.7 ms against 2.0 ms for the 8-bit scan (docs/benchmarks.md).
pub fn default_from() -> usize {
    if crate::cpu::avx512_popcnt() || avx2() {
        SKETCH_FROM
    } else {
        usize::MAX
    }
}

/// Whether the sketch scan runs the AVX2 kernel here, which reads the half-byte layout
/// (`Sketches::nibbles`): a CPU with AVX2 and without AVX-512 VPOPCNTDQ (or with it turned
/// off, [`crate::cpu::AVX512_ENV`]). Only then is that layout built.
pub(crate) fn half_bytes() -> bool {
    avx2() && !crate::cpu::avx512_popcnt()
}

/// Whether this CPU has AVX2 (the sketch scan without AVX-512).
fn avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Fewest vectors a sketch scan passes on to the 8-bit scan.
const KEEP_AT_LEAST: usize = 4_096;
/// Vectors passed on per candidate the 8-bit scan is to keep.
const KEEP_PER_CANDIDATE: usize = 12;
/// Bits a query value is quantised to (one bit plane each).
const PLANES: usize = 4;

/// How many vectors a sketch scan passes on when the 8-bit scan is to keep `candidates`.
pub fn keep(candidates: usize) -> usize {
    candidates
        .saturating_mul(KEEP_PER_CANDIDATE)
        .max(KEEP_AT_LEAST)
}

/// Whether a sink whose floor is `floor` wants an estimate of `score`: not below it (a NaN on
/// either side is not below).
#[inline(always)]
fn wanted(score: f32, floor: f32) -> bool {
    score.partial_cmp(&floor) != Some(std::cmp::Ordering::Less)
}

/// Vectors per block: a block's sketches are stored word by word, eight vectors side by side
/// (one 512-bit register per word), so a scan works on eight vectors at once.
const LANES: usize = 8;

/// Vectors per group of the AVX2 layout (`Sketches::nibbles`): one byte each in a 256-bit
/// register.
const GROUP: usize = 32;

/// Sketch words up to which the AVX2 layout is kept: a vector's sum of table entries (at most
/// 60 per half-byte) must fit in 16 bits. 68 words are 4,352 values.
const NIBBLES_UP_TO: usize = 68;

/// The sketches of a set of vectors (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct Sketches {
    /// Vectors held.
    len: usize,
    /// 64-bit words per vector.
    words: usize,
    /// The vectors' mean.
    center: Vec<f32>,
    /// Per block of [`LANES`] vectors, `words` runs of [`LANES`] words: word `w` of vector
    /// `b · LANES + l` at `(b · words + w) · LANES + l`. Bit `i` of a vector is set when its value
    /// `i` is above the mean's; the last block's missing vectors have no bit set.
    bits: Vec<u64>,
    /// Per vector, the mean magnitude of its difference from the mean (0 past the last).
    scales: Vec<f32>,
    /// Per vector, its sketch's set bits (0 past the last): the same for every query, so
    /// counted once.
    sets: Vec<f32>,
    /// The AVX2 kernel's copy of `bits` (empty where that kernel does not run, [`half_bytes`],
    /// or [`NIBBLES_UP_TO`] is passed): per group of [`GROUP`] vectors, for each byte of a sketch,
    /// that byte of the group's vectors side by side, so one table lookup (`vpshufb`) reads a
    /// half-byte of 32 vectors at once.
    nibbles: Vec<u8>,
}

/// A query as the sketch scan uses it: value `i` ≈ `low + step · uᵢ`, `uᵢ` in 0..16, bit `j`
/// of `uᵢ` in `planes[j]`.
struct Planes {
    planes: Vec<u64>,
    /// Where the sketches have `nibbles`: per half-byte `h` of a sketch (values `4h` to
    /// `4h + 3`), 16 entries, entry `x` the sum of the `uᵢ` whose bit is set in `x`.
    tables: Vec<u8>,
    low: f32,
    step: f32,
    /// `Σ (low + step · uᵢ)`: the quantised query's sum.
    sum: f32,
    /// `q · c`.
    offset: f32,
}

impl Sketches {
    /// Sketches of `vectors` (`dim` values each). A vector with a value that is not finite
    /// (a damaged one) counts for nothing in the mean and gets no bits and a scale of 0, as its
    /// 8-bit copy gets codes and a scale of 0.
    pub fn new(vectors: &[f32], dim: usize) -> Self {
        let dim = dim.max(1);
        let n = vectors.len() / dim;
        let words = dim.div_ceil(64);
        let finite = |v: &[f32]| v.iter().all(|x| x.is_finite());
        let mut center = vec![0f64; dim];
        let mut counted = 0usize;
        for v in vectors.chunks_exact(dim).filter(|v| finite(v)) {
            counted += 1;
            for (c, &x) in center.iter_mut().zip(v) {
                *c += f64::from(x);
            }
        }
        let center: Vec<f32> = center
            .into_iter()
            .map(|c| (c / counted.max(1) as f64) as f32)
            .collect();
        let padded = n.div_ceil(LANES) * LANES;
        let mut bits = vec![0u64; padded * words];
        let mut scales = vec![0f32; padded];
        let mut sets = vec![0f32; padded];
        for (row, v) in vectors.chunks_exact(dim).enumerate() {
            if !finite(v) {
                continue;
            }
            let (block, lane) = (row / LANES, row % LANES);
            let (mut magnitude, mut set) = (0f32, 0u32);
            for (i, (&x, &c)) in v.iter().zip(&center).enumerate() {
                let d = x - c;
                magnitude += d.abs();
                if d > 0.0 {
                    bits[(block * words + i / 64) * LANES + lane] |= 1 << (i % 64);
                    set += 1;
                }
            }
            scales[row] = magnitude / dim as f32;
            sets[row] = set as f32;
        }
        let nibbles = if half_bytes() && words <= NIBBLES_UP_TO {
            by_groups(&bits, n, words)
        } else {
            Vec::new()
        };
        Self {
            len: n,
            words,
            center,
            bits,
            scales,
            sets,
            nibbles,
        }
    }

    /// Vectors held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no vector is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes the sketches take.
    pub fn bytes(&self) -> usize {
        self.bits.len() * 8
            + self.nibbles.len()
            + (self.scales.len() + self.sets.len() + self.center.len()) * 4
    }

    /// The `n` vectors `d` for which `keep(d)` with the best estimated product with any of
    /// `queries`, in increasing order (all of them when fewer are kept), each as `(d, i)`:
    /// `queries[i]` is the one its estimate is best with (the first of equal ones). The scan is
    /// split into `parts` runs of blocks, all but one on threads of their own (`1` scans on
    /// the caller).
    pub fn best(
        &self,
        queries: &[&[f32]],
        keep: impl Fn(usize) -> bool + Sync,
        n: usize,
        parts: usize,
    ) -> Vec<(usize, usize)> {
        let planes: Vec<Planes> = queries.iter().map(|q| self.planes(q)).collect();
        let n = n.max(1);
        let runs = crate::parts::run(self.blocks(), parts, |run| {
            self.best_of(&planes, &keep, n, run)
        });
        // Each run's best `n` holds whatever of the best `n` overall lies in it.
        let mut kept = runs.concat();
        if kept.len() > n {
            kept.select_nth_unstable_by(n - 1, by_score);
            kept.truncate(n);
        }
        // In order, so that the next stage reads their codes front to back.
        let mut rows: Vec<(usize, usize)> = kept.into_iter().map(|(d, _, i)| (d, i)).collect();
        rows.sort_unstable();
        rows
    }

    /// The best `n` vectors of the blocks `blocks` for which `keep(d)`, with their estimates
    /// and the query each is best with.
    ///
    /// The scan keeps at most `2n` candidates at a time (whenever that fills, the best `n` stay
    /// and a vector must beat the worst of them from then on), so what it writes stays in the
    /// caches however large the catalog.
    fn best_of(
        &self,
        planes: &[Planes],
        keep: impl Fn(usize) -> bool,
        n: usize,
        blocks: Range<usize>,
    ) -> Vec<(usize, f32, usize)> {
        let full = n.saturating_mul(2);
        let mut kept: Vec<(usize, f32, usize)> = Vec::with_capacity(full.min(blocks.len() * LANES));
        let mut floor = f32::NEG_INFINITY;
        self.scores(planes, keep, blocks, |d, score, query| {
            kept.push((d, score, query));
            if kept.len() == full {
                kept.select_nth_unstable_by(n - 1, by_score);
                kept.truncate(n);
                floor = kept[n - 1].1;
            }
            floor
        });
        if kept.len() > n {
            kept.select_nth_unstable_by(n - 1, by_score);
            kept.truncate(n);
        }
        kept
    }

    /// `q` as bit planes.
    fn planes(&self, q: &[f32]) -> Planes {
        let (low, high) = q
            .iter()
            .fold((f32::INFINITY, f32::NEG_INFINITY), |(l, h), &x| {
                (l.min(x), h.max(x))
            });
        let levels = ((1 << PLANES) - 1) as f32;
        let step = if high > low && (high - low).is_finite() {
            (high - low) / levels
        } else {
            0.0
        };
        let low = if low.is_finite() { low } else { 0.0 };
        let mut planes = vec![0u64; PLANES * self.words];
        let mut units = 0u32;
        let mut each = vec![0u8; self.words * 64];
        for (i, &x) in q.iter().enumerate().take(self.center.len()) {
            let u = if step > 0.0 {
                ((x - low) / step).round().clamp(0.0, levels) as u32
            } else {
                0
            };
            units += u;
            each[i] = u as u8;
            for (j, plane) in planes.chunks_exact_mut(self.words).enumerate() {
                if u >> j & 1 == 1 {
                    plane[i / 64] |= 1 << (i % 64);
                }
            }
        }
        let tables = if self.nibbles.is_empty() {
            Vec::new()
        } else {
            half_byte_tables(&each)
        };
        Planes {
            planes,
            tables,
            low,
            step,
            sum: self.center.len() as f32 * low + step * units as f32,
            offset: q.iter().zip(&self.center).map(|(a, b)| a * b).sum(),
        }
    }

    /// Gives `sink` every vector `d` of the blocks `blocks` for which `keep(d)`, in order,
    /// with its best estimated product over `queries` and the index of the query that gives
    /// it (the first of equal ones; 0 when none is a number), but for those estimated below
    /// the floor `sink` last returned (the least estimate it still wants; `f32::NEG_INFINITY`
    /// for all): the SIMD kernels ask `keep` only of vectors at or above it, so a search's
    /// filter is not asked of every vector of the catalog.
    fn scores(
        &self,
        queries: &[Planes],
        keep: impl Fn(usize) -> bool,
        blocks: Range<usize>,
        sink: impl FnMut(usize, f32, usize) -> f32,
    ) {
        let blocks = blocks.start.min(self.blocks())..blocks.end.min(self.blocks());
        #[cfg(target_arch = "x86_64")]
        if crate::cpu::avx512_popcnt() {
            // SAFETY: AVX-512 F, BW, VL and VPOPCNTDQ were detected; the blocks exist.
            return unsafe { avx512::scores(self, queries, keep, blocks, sink) };
        }
        #[cfg(target_arch = "x86_64")]
        if avx2() {
            // SAFETY: the CPU has AVX2; the blocks exist.
            return unsafe { avx2::scores(self, queries, keep, blocks, sink) };
        }
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("popcnt") {
            // SAFETY: the CPU has POPCNT.
            return unsafe { self.scores_popcnt(queries, keep, blocks, sink) };
        }
        self.scores_body(queries, keep, blocks, sink)
    }

    /// Blocks of [`LANES`] vectors held, the last one part-filled.
    fn blocks(&self) -> usize {
        self.len.div_ceil(LANES)
    }

    /// The words and the vectors' scales and set bits of block `block`.
    #[inline(always)]
    fn block(&self, block: usize) -> (&[u64], &[f32], &[f32]) {
        let words = self.words * LANES;
        let lanes = block * LANES..(block + 1) * LANES;
        (
            &self.bits[block * words..(block + 1) * words],
            &self.scales[lanes.clone()],
            &self.sets[lanes],
        )
    }

    /// [`Sketches::scores`] with the POPCNT instruction.
    ///
    /// # Safety
    /// The CPU must have POPCNT.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt")]
    unsafe fn scores_popcnt(
        &self,
        queries: &[Planes],
        keep: impl Fn(usize) -> bool,
        blocks: Range<usize>,
        sink: impl FnMut(usize, f32, usize) -> f32,
    ) {
        self.scores_body(queries, keep, blocks, sink)
    }

    /// The portable body of [`Sketches::scores`], one vector at a time; inlined where POPCNT
    /// is enabled.
    #[inline(always)]
    fn scores_body(
        &self,
        queries: &[Planes],
        keep: impl Fn(usize) -> bool,
        blocks: Range<usize>,
        mut sink: impl FnMut(usize, f32, usize) -> f32,
    ) {
        let words = self.words;
        let rows =
            blocks.start.saturating_mul(LANES)..blocks.end.saturating_mul(LANES).min(self.len);
        let mut floor = f32::NEG_INFINITY;
        for d in rows.filter(|&d| keep(d)) {
            let (block, lane) = (d / LANES, d % LANES);
            let word = |w: usize| self.bits[(block * words + w) * LANES + lane];
            let set = self.sets[d];
            let (mut best, mut best_query) = (f32::NEG_INFINITY, 0);
            for (i, q) in queries.iter().enumerate() {
                let mut units = 0u32;
                for (j, plane) in q.planes.chunks_exact(words.max(1)).enumerate() {
                    let count: u32 = (0..words).map(|w| (word(w) & plane[w]).count_ones()).sum();
                    units += count << j;
                }
                // Not a number never wins, as with `f32::max`.
                let estimate = q.estimate(self.scales[d], set, units);
                if estimate > best {
                    (best, best_query) = (estimate, i);
                }
            }
            if wanted(best, floor) {
                floor = sink(d, best, best_query);
            }
        }
    }
}

/// The block loop of the SIMD kernels, inlined into each: for each block of the range with a
/// vector to keep, the eight estimates of every query from `units(block, bits, i, query)` (the
/// block's `Σ 2ʲ · |sketch ∧ planeⱼ|` per vector, as f32; `bits` its words, `i` the query's
/// index), the best of them to `sink` with its query.
///
/// # Safety
/// Inlined only into functions with AVX enabled; `units` must be safe to call on every block of
/// the range and every query.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn by_blocks(
    sketches: &Sketches,
    queries: &[Planes],
    keep: impl Fn(usize) -> bool,
    blocks: Range<usize>,
    mut sink: impl FnMut(usize, f32, usize) -> f32,
    mut units: impl FnMut(usize, &[u64], usize, &Planes) -> std::arch::x86_64::__m256,
) {
    use std::arch::x86_64::*;
    let (mut best, mut best_query) = ([0f32; LANES], [0f32; LANES]);
    let mut floor = f32::NEG_INFINITY;
    for block in blocks {
        let first = block * LANES;
        let lanes = LANES.min(sketches.len - first);
        if !(first..first + lanes).any(&keep) {
            continue;
        }
        let (bits, scales, sets) = sketches.block(block);
        // SAFETY: a block holds LANES scales and set counts; AVX is enabled where this is
        // inlined.
        unsafe {
            let (set, scales) = (
                _mm256_loadu_ps(sets.as_ptr()),
                _mm256_loadu_ps(scales.as_ptr()),
            );
            let mut top = _mm256_set1_ps(f32::NEG_INFINITY);
            let mut top_query = _mm256_setzero_ps();
            for (i, q) in queries.iter().enumerate() {
                let units = units(block, bits, i, q);
                // The arithmetic of `Planes::estimate`, in its order, eight at a time.
                let above = _mm256_add_ps(
                    _mm256_mul_ps(_mm256_set1_ps(q.low), set),
                    _mm256_mul_ps(_mm256_set1_ps(q.step), units),
                );
                let twice = _mm256_add_ps(above, above);
                let estimate = _mm256_add_ps(
                    _mm256_set1_ps(q.offset),
                    _mm256_mul_ps(scales, _mm256_sub_ps(twice, _mm256_set1_ps(q.sum))),
                );
                // A NaN estimate (a query value that is not a number) is never above `top`
                // (an ordered comparison), as in the portable kernel.
                let above = _mm256_cmp_ps::<_CMP_GT_OQ>(estimate, top);
                top = _mm256_blendv_ps(top, estimate, above);
                top_query = _mm256_blendv_ps(top_query, _mm256_set1_ps(i as f32), above);
            }
            // The lanes at or above the floor (not below it: `top` is never a NaN).
            let wanted =
                _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_NLT_UQ>(top, _mm256_set1_ps(floor)));
            if wanted & ((1 << lanes) - 1) == 0 {
                continue;
            }
            _mm256_storeu_ps(best.as_mut_ptr(), top);
            _mm256_storeu_ps(best_query.as_mut_ptr(), top_query);
        }
        for (l, (&score, &query)) in best.iter().zip(&best_query).enumerate().take(lanes) {
            // The floor rises as the sink takes vectors: checked again for each.
            if wanted(score, floor) && keep(first + l) {
                floor = sink(first + l, score, query as usize);
            }
        }
    }
}

/// The sketch scan on AVX-512 with VPOPCNTDQ: eight vectors per step, one per 64-bit lane.
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{Planes, Range, Sketches, LANES, PLANES};
    use std::arch::x86_64::*;

    /// [`Sketches::scores`] on AVX-512.
    ///
    /// # Safety
    /// [`crate::cpu::avx512_popcnt`] must have said yes.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vpopcntdq,avx2")]
    pub(super) unsafe fn scores(
        sketches: &Sketches,
        queries: &[Planes],
        keep: impl Fn(usize) -> bool,
        blocks: Range<usize>,
        sink: impl FnMut(usize, f32, usize) -> f32,
    ) {
        let words = sketches.words;
        // SAFETY: AVX-512 F and AVX are enabled here; a query holds PLANES runs of `words`
        // words and a block `words` runs of LANES words.
        unsafe {
            super::by_blocks(sketches, queries, keep, blocks, sink, |_, bits, _, q| {
                units(bits, q, words)
            })
        }
    }

    /// `Σ 2ʲ · |sketch ∧ planeⱼ|` of the block's eight vectors, as f32.
    ///
    /// # Safety
    /// As [`scores`]; `bits` holds `words` runs of LANES words, `q.planes` PLANES runs of
    /// `words`.
    #[inline(always)]
    unsafe fn units(bits: &[u64], q: &Planes, words: usize) -> __m256 {
        debug_assert!(PLANES == 4 && q.planes.len() == PLANES * words);
        let mut c = [_mm512_setzero_si512(); PLANES];
        for w in 0..words {
            // SAFETY: w < words, so the loads stay within the block and the query's planes.
            unsafe {
                let v = _mm512_loadu_si512(bits.as_ptr().add(w * LANES).cast());
                for (j, c) in c.iter_mut().enumerate() {
                    let plane = _mm512_set1_epi64(*q.planes.get_unchecked(j * words + w) as i64);
                    *c = _mm512_add_epi64(*c, _mm512_popcnt_epi64(_mm512_and_si512(v, plane)));
                }
            }
        }
        let units = _mm512_add_epi64(
            _mm512_add_epi64(c[0], _mm512_slli_epi64::<1>(c[1])),
            _mm512_add_epi64(_mm512_slli_epi64::<2>(c[2]), _mm512_slli_epi64::<3>(c[3])),
        );
        // SAFETY: as above.
        unsafe { to_f32(units) }
    }

    /// Eight small 64-bit counts as f32.
    ///
    /// # Safety
    /// As [`scores`], where it is inlined.
    #[inline(always)]
    unsafe fn to_f32(counts: __m512i) -> __m256 {
        // SAFETY: AVX-512 F and AVX are enabled where this is inlined.
        unsafe { _mm256_cvtepi32_ps(_mm512_cvtepi64_epi32(counts)) }
    }
}

/// The sketch scan on AVX2: 32 vectors per table lookup on the half-byte layout, or (without
/// it) eight vectors per step as two registers of four 64-bit lanes, the `popcount`s of each
/// bit plane done on bytes by table lookup (`vpshufb` on each half-byte).
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{Planes, Range, Sketches, GROUP, LANES, PLANES};
    use std::arch::x86_64::*;

    /// [`Sketches::scores`] on AVX2: from the sketches' `nibbles` where they have them (one
    /// table lookup per half-byte of 32 vectors), else from their bits by bit plane.
    ///
    /// # Safety
    /// The CPU must have AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn scores(
        sketches: &Sketches,
        queries: &[Planes],
        keep: impl Fn(usize) -> bool,
        blocks: Range<usize>,
        sink: impl FnMut(usize, f32, usize) -> f32,
    ) {
        let words = sketches.words;
        let bytes = words * 8;
        let tables_fit = queries.iter().all(|q| q.tables.len() == bytes * 32);
        if sketches.nibbles.is_empty() || !tables_fit {
            // SAFETY: AVX2 is enabled here; a query holds PLANES runs of `words` words and a
            // block `words` runs of LANES words.
            return unsafe {
                super::by_blocks(sketches, queries, keep, blocks, sink, |_, bits, _, q| {
                    units(bits, q, words)
                })
            };
        }
        // Every query's units of the group last computed, read a block at a time.
        let (mut group, mut cached) = (usize::MAX, vec![[0f32; GROUP]; queries.len()]);
        let tables: Vec<&[u8]> = queries.iter().map(|q| q.tables.as_slice()).collect();
        let per_group = GROUP / LANES;
        // SAFETY: AVX2 is enabled here; the nibbles hold every group's `bytes · GROUP` bytes
        // and a query's tables 16 entries per half-byte of a sketch.
        unsafe {
            super::by_blocks(sketches, queries, keep, blocks, sink, |block, _, i, _| {
                if group != block / per_group {
                    group = block / per_group;
                    let nibbles = &sketches.nibbles[group * bytes * GROUP..][..bytes * GROUP];
                    for (tables, out) in tables.chunks(4).zip(cached.chunks_mut(4)) {
                        group_units(nibbles, tables, out);
                    }
                }
                _mm256_loadu_ps(cached[i][block % per_group * LANES..].as_ptr())
            })
        }
    }

    /// `Σ uᵢ sᵢ` of a group's 32 vectors (`nibbles`, the group's bytes in the AVX2 layout) for
    /// each of up to four queries (`tables`), by table lookup of each half-byte, into `out` as
    /// f32. The half-bytes are read once for all the queries.
    ///
    /// # Safety
    /// AVX2 must be enabled where this is inlined; each of `tables` holds 32 entries per byte
    /// of a sketch (`nibbles` holds 32 bytes per byte of a sketch).
    #[inline(always)]
    unsafe fn group_units(nibbles: &[u8], tables: &[&[u8]], out: &mut [[f32; GROUP]]) {
        let bytes = nibbles.len() / GROUP;
        let n = tables.len().min(out.len()).min(4);
        debug_assert!(tables.iter().all(|t| t.len() == bytes * 32));
        // SAFETY: every load stays within `nibbles` (byte `j < bytes`) and each of `tables`
        // (entries `32j` to `32j + 31`); AVX2 is enabled where this is inlined.
        unsafe {
            let low = _mm256_set1_epi8(0x0f);
            let table = |q: usize, h: usize| {
                _mm256_broadcastsi128_si256(_mm_loadu_si128(tables[q].as_ptr().add(h * 16).cast()))
            };
            let mut even = [_mm256_setzero_si256(); 4];
            let mut odd = [_mm256_setzero_si256(); 4];
            // Two bytes at a time: four lookups of at most 60 each stay within a byte; then
            // into the 16-bit sums of the even and the odd vectors.
            for pair in (0..bytes).step_by(2) {
                let mut part = [_mm256_setzero_si256(); 4];
                for j in pair..(pair + 2).min(bytes) {
                    let v = _mm256_loadu_si256(nibbles.as_ptr().add(j * GROUP).cast());
                    let lo = _mm256_and_si256(v, low);
                    let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(v), low);
                    for (q, part) in part.iter_mut().enumerate().take(n) {
                        let sum = _mm256_add_epi8(
                            _mm256_shuffle_epi8(table(q, 2 * j), lo),
                            _mm256_shuffle_epi8(table(q, 2 * j + 1), hi),
                        );
                        *part = _mm256_add_epi8(*part, sum);
                    }
                }
                for q in 0..n {
                    let byte = _mm256_and_si256(part[q], _mm256_set1_epi16(0xff));
                    even[q] = _mm256_add_epi16(even[q], byte);
                    odd[q] = _mm256_add_epi16(odd[q], _mm256_srli_epi16::<8>(part[q]));
                }
            }
            for q in 0..n {
                let (mut e, mut o) = ([0u16; 16], [0u16; 16]);
                _mm256_storeu_si256(e.as_mut_ptr().cast(), even[q]);
                _mm256_storeu_si256(o.as_mut_ptr().cast(), odd[q]);
                for m in 0..16 {
                    out[q][2 * m] = f32::from(e[m]);
                    out[q][2 * m + 1] = f32::from(o[m]);
                }
            }
        }
    }

    /// `Σ 2ʲ · |sketch ∧ planeⱼ|` of the block's eight vectors, as f32.
    ///
    /// # Safety
    /// As [`scores`]; `bits` holds `words` runs of LANES words, `q.planes` PLANES runs of
    /// `words`.
    #[inline(always)]
    unsafe fn units(bits: &[u64], q: &Planes, words: usize) -> __m256 {
        debug_assert!(PLANES == 4 && q.planes.len() == PLANES * words);
        let mut units = [_mm256_setzero_si256(); 2];
        for w in 0..words {
            // SAFETY: w < words, so the loads stay within the block and the query's planes.
            unsafe {
                let plane =
                    |j: usize| _mm256_set1_epi64x(*q.planes.get_unchecked(j * words + w) as i64);
                let planes = [plane(0), plane(1), plane(2), plane(3)];
                for (h, units) in units.iter_mut().enumerate() {
                    let v = load(bits, w * LANES + h * 4);
                    let count = |j: usize| byte_counts(_mm256_and_si256(v, planes[j]));
                    // Per byte Σ 2ʲ · count: at most 8 · 15 = 120, so it stays in the byte.
                    let mut weighted = count(3);
                    for j in (0..3).rev() {
                        weighted = _mm256_add_epi8(_mm256_add_epi8(weighted, weighted), count(j));
                    }
                    *units = _mm256_add_epi64(*units, sums(weighted));
                }
            }
        }
        // SAFETY: as above.
        unsafe { to_f32(units) }
    }

    /// Four words of `bits` from `at`.
    ///
    /// # Safety
    /// `bits` must hold four words from `at`; AVX2 enabled where this is inlined.
    #[inline(always)]
    unsafe fn load(bits: &[u64], at: usize) -> __m256i {
        debug_assert!(at + 4 <= bits.len());
        // SAFETY: as the caller promises.
        unsafe { _mm256_loadu_si256(bits.as_ptr().add(at).cast()) }
    }

    /// The number of set bits of each byte of `v`.
    ///
    /// # Safety
    /// AVX2 must be enabled where this is inlined.
    #[inline(always)]
    unsafe fn byte_counts(v: __m256i) -> __m256i {
        let table = _mm256_setr_epi8(
            0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4, 0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2,
            3, 3, 4,
        );
        let low = _mm256_set1_epi8(0x0f);
        let lo = _mm256_and_si256(v, low);
        let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(v), low);
        _mm256_add_epi8(
            _mm256_shuffle_epi8(table, lo),
            _mm256_shuffle_epi8(table, hi),
        )
    }

    /// The sum of each 64-bit lane's eight bytes.
    ///
    /// # Safety
    /// AVX2 must be enabled where this is inlined.
    #[inline(always)]
    unsafe fn sums(bytes: __m256i) -> __m256i {
        _mm256_sad_epu8(bytes, _mm256_setzero_si256())
    }

    /// Eight counts below 2³¹, vectors 0–3 in `halves[0]`'s 64-bit lanes and 4–7 in
    /// `halves[1]`'s, as f32 in vector order.
    ///
    /// # Safety
    /// AVX2 must be enabled where this is inlined.
    #[inline(always)]
    unsafe fn to_f32(halves: [__m256i; 2]) -> __m256 {
        // 32-bit lanes 0, 1, 2, … hold vectors 0, 4, 1, 5, …; put them in order.
        let mixed = _mm256_or_si256(halves[0], _mm256_slli_epi64::<32>(halves[1]));
        let order = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
        _mm256_cvtepi32_ps(_mm256_permutevar8x32_epi32(mixed, order))
    }
}

/// `bits` (the block layout of `len` vectors of `words` words) in the AVX2 layout: per group of
/// [`GROUP`] vectors, each byte of a sketch of the group's vectors side by side (bits `8j` to
/// `8j + 7` of vector `g · GROUP + l` at `(g · bytes + j) · GROUP + l`, `bytes = 8 · words`).
fn by_groups(bits: &[u64], len: usize, words: usize) -> Vec<u8> {
    let bytes = words * 8;
    let mut out = vec![0u8; len.div_ceil(GROUP) * GROUP * bytes];
    for row in 0..len {
        let (block, lane) = (row / LANES, row % LANES);
        let (group, at) = (row / GROUP, row % GROUP);
        for j in 0..bytes {
            let word = bits[(block * words + j / 8) * LANES + lane];
            out[(group * bytes + j) * GROUP + at] = (word >> (8 * (j % 8))) as u8;
        }
    }
    out
}

/// A query's 4-bit values `units` (a multiple of 4 of them) as the AVX2 kernel's tables: per
/// half-byte `h`, entry `x` is the sum of `units[4h + b]` over the bits `b` set in `x`.
fn half_byte_tables(units: &[u8]) -> Vec<u8> {
    let mut tables = vec![0u8; units.len() * 4];
    for (h, values) in units.chunks_exact(4).enumerate() {
        for x in 0..16 {
            let sum: u8 = (0..4).filter(|b| x >> b & 1 == 1).map(|b| values[b]).sum();
            tables[h * 16 + x] = sum;
        }
    }
    tables
}

/// Orders `(vector, estimate)` pairs best first, ties by vector: which of several equal
/// estimates are kept then does not depend on how the scan was split among the cores.
fn by_score(a: &(usize, f32, usize), b: &(usize, f32, usize)) -> std::cmp::Ordering {
    b.1.total_cmp(&a.1).then(a.0.cmp(&b.0))
}

impl Planes {
    /// The estimated product with a vector of scale `scale` whose sketch has `set` bits set,
    /// `units` being `Σ 2ʲ · |sketch ∧ planeⱼ|`.
    #[inline(always)]
    fn estimate(&self, scale: f32, set: f32, units: u32) -> f32 {
        // Σ over the set bits of the quantised query, then Σ qᵢ sᵢ with sᵢ = ±1: what the set
        // bits add minus what the others do.
        let above = self.low * set + self.step * units as f32;
        self.offset + scale * (2.0 * above - self.sum)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every block (the scan clips the range to those held).
    const ALL: Range<usize> = 0..usize::MAX;

    /// A pseudo-random vector of `dim` values in −1..1 (unnormalised).
    fn noise(seed: u64, dim: usize) -> Vec<f32> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..dim)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s % 2001) as f32 / 1000.0 - 1.0
            })
            .collect()
    }

    fn normalised(v: Vec<f32>) -> Vec<f32> {
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.into_iter().map(|x| x / n).collect()
    }

    /// `n` unit vectors in `clusters` groups around shared directions, plus a shared offset
    /// (sentence embeddings are neither centred nor spread evenly).
    fn clustered(n: usize, clusters: u64, dim: usize) -> Vec<f32> {
        let offset = noise(999_999, dim);
        (0..n as u64)
            .flat_map(|i| {
                let centre = noise(i % clusters + 1_000_000, dim);
                let own = noise(i, dim);
                normalised(
                    (0..dim)
                        .map(|k| 0.5 * offset[k] + centre[k] + 0.8 * own[k])
                        .collect(),
                )
            })
            .collect()
    }

    fn dot(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    /// What a scoring function gives its sink, in order: vector, estimate, query.
    fn collect(
        score: impl FnOnce(&mut dyn FnMut(usize, f32, usize) -> f32),
    ) -> Vec<(usize, f32, usize)> {
        let mut out = Vec::new();
        score(&mut |d, s, q| {
            out.push((d, s, q));
            f32::NEG_INFINITY
        });
        out
    }

    /// `s` with the half-byte layout, whatever this CPU's kernel (so that the AVX2 kernel's
    /// two paths are tested on any CPU with AVX2), and without it.
    fn both_layouts(s: &Sketches) -> [Sketches; 2] {
        [
            Sketches {
                nibbles: by_groups(&s.bits, s.len, s.words),
                ..s.clone()
            },
            Sketches {
                nibbles: Vec::new(),
                ..s.clone()
            },
        ]
    }

    /// The vectors of a [`Sketches::best`] answer, without their queries.
    fn rows(kept: Vec<(usize, usize)>) -> Vec<usize> {
        kept.into_iter().map(|(d, _)| d).collect()
    }

    #[test]
    fn the_nearest_vectors_are_among_those_the_sketches_keep() {
        let (dim, n) = (384, 20_000);
        let vectors = clustered(n, 300, dim);
        let sketches = Sketches::new(&vectors, dim);
        assert_eq!(sketches.len(), n);
        let nibbles = if half_bytes() { n * 48 } else { 0 };
        assert_eq!(sketches.bytes(), n * 48 + n * 8 + dim * 4 + nibbles);
        let (mut found, mut wanted) = ([0; 2], [0; 2]);
        for seed in 0..40u64 {
            // A query near one vector of the catalog, and one near none in particular.
            let near = &vectors[(seed as usize * 487 % n) * dim..][..dim];
            let q1 = normalised(
                near.iter()
                    .zip(noise(seed + 77, dim))
                    .map(|(a, b)| a + 0.03 * b)
                    .collect(),
            );
            let q2 = normalised(noise(seed + 5_000, dim));
            for (kind, q) in [(0, q1), (1, q2)] {
                let mut exact: Vec<(usize, f32)> = vectors
                    .chunks_exact(dim)
                    .map(|v| dot(v, &q))
                    .enumerate()
                    .collect();
                exact.sort_by(|a, b| b.1.total_cmp(&a.1));
                let kept = sketches.best(&[&q], |_| true, 800, 2);
                assert_eq!(kept.len(), 800);
                let kept: std::collections::HashSet<usize> = rows(kept).into_iter().collect();
                wanted[kind] += 50;
                found[kind] += exact[..50].iter().filter(|(d, _)| kept.contains(d)).count();
            }
        }
        // The 50 nearest of 20,000 to a query near a vector are all in the best 4 % by the
        // sketch (all 2,000 when measured). A query near nothing has 50 nearest of much the
        // same scores, and most of them are (1,759 of 2,000).
        assert!(found[0] * 100 >= wanted[0] * 98, "{found:?} of {wanted:?}");
        assert!(found[1] * 100 >= wanted[1] * 80, "{found:?} of {wanted:?}");
    }

    #[test]
    fn estimates_follow_the_products_and_several_queries_take_the_best() {
        let dim = 128;
        let vectors = clustered(2_000, 40, dim);
        let sketches = Sketches::new(&vectors, dim);
        let q = normalised(noise(3, dim));
        let planes = [sketches.planes(&q)];
        let est = collect(|sink| sketches.scores(&planes, |_| true, ALL, sink));
        // The estimate tracks the product: their correlation over the catalog is high.
        let exact: Vec<f32> = vectors.chunks_exact(dim).map(|v| dot(v, &q)).collect();
        let mean = |x: &[f32]| x.iter().sum::<f32>() / x.len() as f32;
        let e: Vec<f32> = est.iter().map(|p| p.1).collect();
        let (me, mx) = (mean(&e), mean(&exact));
        let cov: f32 = e.iter().zip(&exact).map(|(a, b)| (a - me) * (b - mx)).sum();
        let var = |x: &[f32], m: f32| x.iter().map(|a| (a - m) * (a - m)).sum::<f32>();
        let r = cov / (var(&e, me) * var(&exact, mx)).sqrt();
        assert!(r > 0.75, "correlation {r}");
        // The best few, kept within a bounded buffer, are the best of the whole scan, however
        // it is split among threads.
        for (n, parts) in [1, 7, 100, 999, 5_000]
            .into_iter()
            .flat_map(|n| [(n, 1), (n, 3)])
        {
            let mut top: Vec<f32> = est.iter().map(|p| p.1).collect();
            top.sort_by(|a, b| b.total_cmp(a));
            top.truncate(n);
            let kept = rows(sketches.best(&[&q], |_| true, n, parts));
            assert!(kept.is_sorted(), "best {n} in {parts} parts");
            let mut got: Vec<f32> = kept.iter().map(|&d| est[d].1).collect();
            got.sort_by(|a, b| b.total_cmp(a));
            assert_eq!(got, top, "best {n} in {parts} parts");
        }
        // With a second query, each vector's estimate is its better one; filters hold.
        let q2 = normalised(noise(4, dim));
        let pair = [sketches.planes(&q), sketches.planes(&q2)];
        let both = collect(|sink| sketches.scores(&pair, |d| d % 3 != 0, ALL, sink));
        let second = collect(|sink| sketches.scores(&pair[1..], |_| true, ALL, sink));
        assert_eq!(both.len(), 2_000 - 667);
        let mut firsts = 0;
        for &(d, s, query) in &both {
            assert_ne!(d % 3, 0);
            assert_eq!(s, est[d].1.max(second[d].1), "vector {d}");
            // The query named is the one that gives the estimate, the first of equal ones.
            let expected = usize::from(second[d].1 > est[d].1);
            assert_eq!(query, expected, "vector {d}");
            firsts += usize::from(query == 0);
        }
        assert!(
            firsts > 0 && firsts < both.len(),
            "{firsts} of {}",
            both.len()
        );
        // So does the best of the scan.
        for (d, query) in sketches.best(&[&q, &q2], |_| true, 50, 2) {
            assert_eq!(query, usize::from(second[d].1 > est[d].1), "vector {d}");
        }
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("popcnt") {
            // SAFETY: POPCNT was detected.
            let fast =
                collect(|sink| unsafe { sketches.scores_popcnt(&planes, |_| true, ALL, sink) });
            let body = collect(|sink| sketches.scores_body(&planes, |_| true, ALL, sink));
            assert_eq!(fast, body);
        }
        // The SIMD kernels give the portable loop's estimates, on all blocks or some, the last
        // one part-filled.
        for dim in [384, 768, 100] {
            let vectors = clustered(301, 10, dim);
            let sketches = Sketches::new(&vectors, dim);
            let queries = [normalised(noise(9, dim)), normalised(noise(10, dim))];
            let planes = [sketches.planes(&queries[0]), sketches.planes(&queries[1])];
            let keep = |d: usize| d != 4;
            let body = collect(|sink| sketches.scores_body(&planes, keep, ALL, sink));
            assert_eq!(body.len(), 300);
            assert_eq!(sketches.blocks(), 38);
            for blocks in [0..38, 3..20, 37..38] {
                let rows = blocks.start * LANES..(blocks.end * LANES).min(301);
                let part =
                    collect(|sink| sketches.scores_body(&planes, keep, blocks.clone(), sink));
                let expected: Vec<_> = body
                    .iter()
                    .filter(|p| rows.contains(&p.0))
                    .copied()
                    .collect();
                assert_eq!(part, expected, "{dim} values, blocks {blocks:?}");
                #[cfg(target_arch = "x86_64")]
                if crate::cpu::avx512_popcnt() {
                    // SAFETY: AVX-512 with VPOPCNTDQ was detected; the blocks exist.
                    let fast = collect(|sink| unsafe {
                        avx512::scores(&sketches, &planes, keep, blocks.clone(), sink)
                    });
                    assert_eq!(fast, part, "{dim} values, blocks {blocks:?}, AVX-512");
                }
                #[cfg(target_arch = "x86_64")]
                if is_x86_feature_detected!("avx2") {
                    // By half-byte tables and by bit plane: the same.
                    for (layout, s) in both_layouts(&sketches).iter().enumerate() {
                        let planes = [s.planes(&queries[0]), s.planes(&queries[1])];
                        assert_eq!(planes[0].tables.is_empty(), layout == 1);
                        // SAFETY: AVX2 was detected; the blocks exist.
                        let fast = collect(|sink| unsafe {
                            avx2::scores(s, &planes, keep, blocks.clone(), sink)
                        });
                        assert_eq!(fast, part, "{dim} values, blocks {blocks:?}, AVX2 {layout}");
                    }
                }
            }
        }
    }

    /// `count` random queries (seeds from `first`) as `s` scans them.
    fn query_planes(s: &Sketches, count: u64, first: u64) -> Vec<Planes> {
        (first..first + count)
            .map(|seed| s.planes(&normalised(noise(seed, s.center.len()))))
            .collect()
    }

    /// What a scoring function gives a sink whose floor is the best estimate it has had, and
    /// which vectors it asked `keep` of.
    fn records(
        score: impl FnOnce(&dyn Fn(usize) -> bool, &mut dyn FnMut(usize, f32, usize) -> f32),
        keep: impl Fn(usize) -> bool,
    ) -> (Vec<(usize, f32, usize)>, Vec<usize>) {
        let asked = std::cell::RefCell::new(Vec::new());
        let keep = |d: usize| {
            asked.borrow_mut().push(d);
            keep(d)
        };
        let mut out: Vec<(usize, f32, usize)> = Vec::new();
        let mut best = f32::NEG_INFINITY;
        score(&keep, &mut |d, s, q| {
            out.push((d, s, q));
            best = best.max(s);
            best
        });
        (out, asked.into_inner())
    }

    #[test]
    fn a_vector_below_the_sinks_floor_is_left_out_and_not_asked_of_keep() {
        let dim = 384;
        let vectors = clustered(2_001, 40, dim);
        let sketches = Sketches::new(&vectors, dim);
        let planes = query_planes(&sketches, 3, 70);
        let keep = |d: usize| d % 7 != 3;
        let every = collect(|sink| sketches.scores_body(&planes, keep, ALL, sink));
        // With a floor at the best so far, exactly the kept vectors that reach it come.
        let mut expected = Vec::new();
        let mut best = f32::NEG_INFINITY;
        for &(d, score, q) in &every {
            if score >= best {
                expected.push((d, score, q));
                best = score;
            }
        }
        assert!(
            expected.len() > 3 && expected.len() < 200,
            "{}",
            expected.len()
        );
        let (body, _) = records(|k, sink| sketches.scores_body(&planes, k, ALL, sink), keep);
        assert_eq!(body, expected);
        #[cfg(target_arch = "x86_64")]
        {
            let mut kernels: Vec<(Sketches, &str)> = Vec::new();
            if crate::cpu::avx512_popcnt() {
                kernels.push((sketches.clone(), "AVX-512"));
            }
            if is_x86_feature_detected!("avx2") {
                let [a, b] = both_layouts(&sketches);
                kernels.push((a, "AVX2 by tables"));
                kernels.push((b, "AVX2 by planes"));
            }
            for (s, name) in &kernels {
                let planes = query_planes(s, 3, 70);
                let blocks = 0..s.blocks();
                let (given, asked) = records(
                    |k, sink| {
                        // SAFETY: the kernel's features were detected; the blocks exist.
                        unsafe {
                            if name.starts_with("AVX-512") {
                                avx512::scores(s, &planes, k, blocks.clone(), sink)
                            } else {
                                avx2::scores(s, &planes, k, blocks.clone(), sink)
                            }
                        }
                    },
                    keep,
                );
                assert_eq!(given, expected, "{name}");
                // `keep` is asked of each block until one of its vectors is to be kept
                // (whether to score the block at all), then only of vectors at or above the
                // floor: far fewer than the 2,001 vectors and 251 blocks of asking it of each.
                assert!(asked.len() < 1_000, "{name}: {}", asked.len());
            }
        }
    }

    #[test]
    fn many_queries_give_the_estimates_of_the_portable_loop() {
        // More queries than the AVX2 kernel reads at once (four), and a filter.
        let dim = 384;
        let vectors = clustered(1_000, 30, dim);
        let sketches = Sketches::new(&vectors, dim);
        let planes = query_planes(&sketches, 7, 40);
        let keep = |d: usize| d % 5 != 1;
        let body = collect(|sink| sketches.scores_body(&planes, keep, ALL, sink));
        assert_eq!(body.len(), 800);
        let mut named = [0usize; 7];
        body.iter().for_each(|&(_, _, q)| named[q] += 1);
        assert!(named.iter().filter(|&&n| n > 0).count() >= 3, "{named:?}");
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2") {
            for s in both_layouts(&sketches) {
                let planes = query_planes(&s, 7, 40);
                // SAFETY: AVX2 was detected.
                let fast =
                    collect(|sink| unsafe { avx2::scores(&s, &planes, keep, 0..s.blocks(), sink) });
                assert_eq!(fast, body);
            }
        }
        #[cfg(target_arch = "x86_64")]
        if crate::cpu::avx512_popcnt() {
            // SAFETY: AVX-512 with VPOPCNTDQ was detected.
            let fast = collect(|sink| unsafe {
                avx512::scores(&sketches, &planes, keep, 0..sketches.blocks(), sink)
            });
            assert_eq!(fast, body);
        }
    }

    #[test]
    fn a_damaged_vector_or_query_value_leaves_the_rest_ranked() {
        let dim = 64;
        let mut vectors = clustered(1_000, 20, dim);
        let q: Vec<f32> = vectors[5 * dim..6 * dim].to_vec();
        vectors[999 * dim + 3] = f32::NAN;
        vectors[998 * dim] = f32::INFINITY;
        // The two damaged vectors count for nothing: the rest rank as without them.
        let clean = Sketches::new(&vectors[..998 * dim], dim).best(&[&q], |_| true, 10, 1);
        let damaged = Sketches::new(&vectors, dim);
        assert_eq!(damaged.best(&[&q], |_| true, 10, 2), clean);
        assert!(damaged.center.iter().all(|c| c.is_finite()));
        assert_eq!((damaged.scales[999], damaged.scales[998]), (0.0, 0.0));
        // A clause with a value that is not a number ranks nothing, in either kernel and
        // whichever place it has among the clauses.
        let mut bad = q.clone();
        bad[0] = f32::NAN;
        assert_eq!(damaged.best(&[&q, &bad], |_| true, 10, 1), clean);
        let second: Vec<(usize, usize)> = clean.iter().map(|&(d, _)| (d, 1)).collect();
        assert_eq!(damaged.best(&[&bad, &q], |_| true, 10, 3), second);
        let planes = [damaged.planes(&q), damaged.planes(&bad)];
        let body = collect(|sink| damaged.scores_body(&planes, |_| true, ALL, sink));
        #[cfg(target_arch = "x86_64")]
        if crate::cpu::avx512_popcnt() {
            // SAFETY: AVX-512 with VPOPCNTDQ was detected.
            let fast = collect(|sink| unsafe {
                avx512::scores(&damaged, &planes, |_| true, 0..damaged.blocks(), sink)
            });
            assert_eq!(fast, body);
        }
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2") {
            for s in both_layouts(&damaged) {
                let planes = [s.planes(&q), s.planes(&bad)];
                // SAFETY: AVX2 was detected.
                let fast = collect(|sink| unsafe {
                    avx2::scores(&s, &planes, |_| true, 0..s.blocks(), sink)
                });
                assert_eq!(fast, body);
            }
        }
        // Asking for more than there are gives them all.
        assert_eq!(damaged.best(&[&q], |_| true, usize::MAX, 4).len(), 1_000);
    }

    #[test]
    fn degenerate_input_is_handled() {
        // Constant, zero and odd-length vectors; a constant query has no step.
        let s = Sketches::new(&[0.5; 30], 3);
        assert_eq!(s.len(), 10);
        assert_eq!(s.best(&[&[1.0, 1.0, 1.0]], |_| true, 4, 1).len(), 4);
        // Equal estimates: the first vectors are kept, however the scan is split.
        let tied = Sketches::new(&[0.5; 3 * 40], 3);
        for parts in [1, 2, 5] {
            assert_eq!(
                rows(tied.best(&[&[1.0, 0.0, 2.0]], |_| true, 9, parts)),
                (0..9).collect::<Vec<_>>()
            );
        }
        assert_eq!(s.best(&[&[0.0, 0.0, 0.0]], |d| d < 2, 4, 2).len(), 2);
        assert!(Sketches::new(&[], 384).is_empty());
        assert_eq!(
            Sketches::new(&[], 384).best(&[&[0.0; 384]], |_| true, 5, 2),
            Vec::<(usize, usize)>::new()
        );
        assert_eq!(keep(200), 4_096.max(200 * KEEP_PER_CANDIDATE));
        assert_eq!(keep(10), 4_096);
        assert_eq!(keep(usize::MAX), usize::MAX);
        // Searches rank sketches first by default only where eight are scanned per step.
        let fast = crate::cpu::avx512_popcnt() || avx2();
        // The half-byte layout is built only for the AVX2 kernel.
        assert_eq!(half_bytes(), avx2() && !crate::cpu::avx512_popcnt());
        assert_eq!(
            Sketches::new(&[0.5; 30], 3).nibbles.is_empty(),
            !half_bytes()
        );
        assert_eq!(default_from(), if fast { SKETCH_FROM } else { usize::MAX });
        assert_eq!(crate::HybridConfig::default().sketch_from, default_from());
    }
}
