//! Products with 8-bit weights *and* 8-bit inputs: `vpdpbusd` on AVX-512 VNNI or AVX-VNNI,
//! `vpmaddubsw` on AVX2.
//!
//! One `vpdpbusd` on 512 bits multiplies 64 unsigned input bytes by 64 signed weight bytes and
//! adds each run of four products to one of 16 32-bit sums: the 16 columns of a panel
//! ([`NR`]), four inputs each, in one instruction, where the 15-bit path of
//! [`super::Precision::I8`] needs a widening of the weights, two `vpmaddwd` and two additions on
//! 256 bits for two inputs. AVX-VNNI (CPUs without AVX-512 such as Intel's Alder Lake, and
//! those with both) has the same instruction on 256 bits: two per panel, half a panel each
//! ([`tile_rows_avx_vnni`]), with the same sums, so the same vectors. Without either,
//! `vpmaddubsw` multiplies the bytes of two runs (half a panel per 256-bit register) into
//! 16-bit pairs, `vpaddw` adds the two runs' pairs, and `vpmaddwd` by ones adds them into the
//! 32-bit sums ([`tile_rows_avx2`]): no widening of the weights, one broadcast per four inputs,
//! and one widening per eight.
//!
//! Both sides are quantised in groups of [`GROUP`] inputs: the weights once at load time, one
//! scale per column and group; the inputs per product, one scale per row and group, so that a
//! few large hidden dimensions (BERT has some) coarsen only their own group. An input `x` is
//! stored as the byte `round(x / s) + zero` (128 for `vpdpbusd`); the `zero` each byte carries
//! is taken back by starting each column's group sum at `−zero · Σ w` (the group's quantised
//! weights, summed at load time). A group's sum is exact in 32 bits (at most 64 · 255 · 127),
//! then scaled and added in f32. Groups of 64 rather than 32 halve that scaling, which costs a
//! `vpdpbusd` tile almost as much as its products: a query embeds about a quarter faster on AMD
//! Zen 4, for a cosine to the f32 pass of 0.99956 on average instead of 0.99972
//! (docs/benchmarks.md). On AVX2 weights and inputs keep 7 bits ([`Kernel::Avx2`] says why):
//! a cosine of 0.9985 on average (0.9990 with 8-bit inputs and one widening per four), for
//! products about a sixth faster on AMD Zen 3 and the same ranking.
//!
//! The packed weights sit in lines of 64 bytes on 64-byte boundaries ([`Line`]), so that no
//! load of them straddles two cache lines.

use super::NR;

/// Inputs per quantisation group (a multiple of 16: whole registers of f32 inputs).
pub(super) const GROUP: usize = 64;
// Whole 512-bit registers per group (`quantize_groups`), and a group's sum exact in 32 bits.
const _: () = assert!(GROUP.is_multiple_of(16) && GROUP * 255 * 127 < i32::MAX as usize);

/// The instructions a tile multiplies with, chosen once from what the CPU has
/// ([`crate::cpu`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kernel {
    /// `vpdpbusd` on 512 bits ([`tile_rows`]), the weights in whole signed bytes.
    Avx512Vnni,
    /// `vpdpbusd` on 256 bits, VEX-encoded ([`tile_rows_avx_vnni`]): the same sums as
    /// [`Kernel::Avx512Vnni`], the weights in whole signed bytes.
    AvxVnni,
    /// `vpmaddubsw` ([`tile_rows_avx2`]), whose pairs of products saturate at 16 bits: weights
    /// and inputs keep 7 bits each (±[`AVX2_LIMIT`], the inputs as bytes `1..=127`), so that the
    /// two pairs of two runs of four inputs add up in 16 bits (at most 2 · 2 · 127 · 63 =
    /// 32,004 < 2¹⁵) and one `vpmaddwd` widens both runs' sums.
    Avx2,
}

impl Kernel {
    /// The kernel this CPU runs: AVX-512 VNNI where it has it and `TOOLSHED_SEARCH_AVX512` does
    /// not turn it off, else AVX-VNNI unless `TOOLSHED_SEARCH_AVX_VNNI` turns it off, else AVX2.
    pub(super) fn of_cpu() -> Self {
        if crate::cpu::avx512_vnni() {
            Self::Avx512Vnni
        } else if crate::cpu::avx_vnni() {
            Self::AvxVnni
        } else {
            Self::Avx2
        }
    }

    /// Whether the weights use the whole signed byte (the two `vpdpbusd` kernels, which give
    /// the same sums); 7 bits otherwise.
    pub(super) fn full_bytes(self) -> bool {
        self != Self::Avx2
    }

    /// Whether [`tile`] runs this kernel on two panels at once (AVX-512 VNNI, whose 32
    /// registers hold the sums of two panels; one broadcast of the inputs then feeds two
    /// products); the others take one panel at a time.
    pub(super) fn pairs(self) -> bool {
        self == Self::Avx512Vnni
    }

    /// The largest quantised magnitude of a weight or an input: ±127 for `vpdpbusd`, ±63 for
    /// `vpmaddubsw` ([`Kernel::Avx2`]).
    fn limit(self) -> f32 {
        if self.full_bytes() {
            127.0
        } else {
            AVX2_LIMIT
        }
    }

    /// The byte that stands for an input of zero: the inputs are unsigned, `round(x / s) +
    /// zero`, from `zero − limit` to `zero + limit`.
    fn zero(self) -> i32 {
        self.limit() as i32 + 1
    }
}

/// See [`Kernel::Avx2`].
const AVX2_LIMIT: f32 = 63.0;

/// 64 bytes of packed weights on a 64-byte boundary: one run of four inputs for one panel.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([i8; 64]);

// A line is its 64 bytes, nothing more (`Weights::bytes`).
const _: () = assert!(std::mem::size_of::<Line>() == 64);

impl Weights {
    /// The kernel the weights were packed for: one this CPU has ([`Kernel::of_cpu`]), unless a
    /// test chose it. Their tiles and quantised inputs go with it.
    pub(super) fn kernel(&self) -> Kernel {
        self.kernel
    }

    /// The packed bytes (`panels · kq · NR`), as [`Weights`] describes them.
    fn bytes(&self) -> &[i8] {
        // SAFETY: a `Line` is 64 bytes with no padding; the slice covers exactly the lines.
        unsafe { std::slice::from_raw_parts(self.data.as_ptr().cast(), self.data.len() * 64) }
    }
}

/// Weights `W` (`n × k`) packed in panels of [`NR`] columns: per panel and run of four inputs
/// `4t..4t+4`, 64 bytes, column `j`'s four weights at bytes `4j..4j+4`; `k` padded with zeros to
/// whole groups.
pub(super) struct Weights {
    /// The kernel the weights were packed for ([`Weights::kernel`]).
    kernel: Kernel,
    /// `k` rounded up to a whole number of groups.
    pub(super) kq: usize,
    /// The packed bytes in lines of 64, so that no load of a run's weights straddles two cache
    /// lines (a split load costs about two).
    data: Vec<Line>,
    /// Per panel, group and column: the weight is `data · scale`.
    scales: Vec<f32>,
    /// Per panel, group and column: `−zero ·` the sum of the group's quantised weights
    /// ([`Kernel::zero`]).
    offsets: Vec<i32>,
}

impl Weights {
    /// Quantises and packs `w` (`n × k`, row-major) into `panels` panels, for the kernel this
    /// CPU runs ([`Kernel::of_cpu`]).
    pub(super) fn pack(w: &[f32], n: usize, k: usize, panels: usize) -> Self {
        Self::pack_for(Kernel::of_cpu(), w, n, k, panels)
    }

    /// [`Weights::pack`] for `kernel`.
    fn pack_for(kernel: Kernel, w: &[f32], n: usize, k: usize, panels: usize) -> Self {
        let (limit, zero) = (kernel.limit(), kernel.zero());
        let kq = k.div_ceil(GROUP) * GROUP;
        let groups = kq / GROUP;
        let mut data = vec![Line([0; 64]); panels * kq * NR / 64];
        let mut scales = vec![1f32; panels * groups * NR];
        let mut offsets = vec![0i32; panels * groups * NR];
        for (c, row) in w.chunks_exact(k).enumerate().take(n) {
            let (p, j) = (c / NR, c % NR);
            for (g, group) in row.chunks(GROUP).enumerate() {
                let max = group.iter().fold(0f32, |m, x| m.max(x.abs()));
                let scale = if max > 0.0 { max / limit } else { 1.0 };
                let at = (p * groups + g) * NR + j;
                scales[at] = scale;
                let mut sum = 0i32;
                for (i, &v) in group.iter().enumerate() {
                    let kk = g * GROUP + i;
                    let q = (v / scale).round_ties_even().clamp(-limit, limit) as i8;
                    sum += i32::from(q);
                    data[(p * kq * NR) / 64 + kk / 4].0[j * 4 + kk % 4] = q;
                }
                offsets[at] = -zero * sum;
            }
        }
        Self {
            kernel,
            kq,
            data,
            scales,
            offsets,
        }
    }
}

/// The rows of an input quantised for [`tile`]: `x[r][c] ≈ (values[r·kq + c] − zero) ·
/// scales[r·groups + c / GROUP]`, `zero` being the kernel's ([`Kernel::zero`]).
pub(crate) struct Rows {
    values: Vec<u8>,
    scales: Vec<f32>,
    kq: usize,
    #[cfg(test)]
    zero: i32,
}

impl Rows {
    /// [`Rows::quantize_in`] in one part, on this thread.
    #[cfg(test)]
    pub(super) fn quantize(x: &[f32], m: usize, k: usize, w: &Weights) -> Self {
        Self::quantize_in(x, m, k, w, 1, &super::tests::in_turn)
    }

    /// Quantises the `m` rows of `x` (`m × k`, row-major) for the weights `w`: in groups of
    /// [`GROUP`] inputs, to the magnitudes and zero point of their kernel. The rows are split
    /// in up to `parts` runs, which `each(count, f)` hands out: it calls `f(i)` once for every
    /// `i < count`, on any threads. The bytes do not depend on the split.
    pub(super) fn quantize_in(
        x: &[f32],
        m: usize,
        k: usize,
        w: &Weights,
        parts: usize,
        each: super::Each<'_>,
    ) -> Self {
        let (kq, kernel) = (w.kq, w.kernel);
        let groups = kq / GROUP;
        let zero = kernel.zero();
        let mut values = vec![zero as u8; m * kq];
        let mut scales = vec![1f32; m * groups];
        if m > 0 {
            let per = m.div_ceil(parts.clamp(1, m));
            let runs: Vec<_> = values
                .chunks_mut(per * kq)
                .zip(scales.chunks_mut(per * groups))
                .zip(x[..m * k].chunks(per * k))
                .map(|((v, s), x)| std::sync::Mutex::new((v, s, x)))
                .collect();
            each(runs.len(), &|i| {
                let mut run = runs[i].lock().unwrap_or_else(|e| e.into_inner());
                let (values, scales, x) = &mut *run;
                quantize_rows(x, k, kq, kernel, values, scales);
            });
        }
        Self {
            values,
            scales,
            kq,
            #[cfg(test)]
            zero,
        }
    }
}

/// Quantises the rows of `x` (row length `k`) into `values` (row length `kq`, filled with the
/// kernel's zero byte) and `scales` (one per row and group), as [`Rows`] describes them.
fn quantize_rows(
    x: &[f32],
    k: usize,
    kq: usize,
    kernel: Kernel,
    values: &mut [u8],
    scales: &mut [f32],
) {
    let (limit, zero) = (kernel.limit(), kernel.zero());
    let groups = kq / GROUP;
    for (r, row) in x.chunks_exact(k).enumerate() {
        let values = &mut values[r * kq..(r + 1) * kq];
        let scales = &mut scales[r * groups..(r + 1) * groups];
        // Whole groups go to a vector quantiser where there is one, the rest to the plain code.
        let done = quantize_whole_groups(row, values, scales, kernel);
        for (g, group) in row.chunks(GROUP).enumerate().skip(done) {
            let out = &mut values[g * GROUP..][..group.len()];
            scales[g] = quantize_plain(group, out, limit, zero);
        }
    }
}

/// Quantises one group (at most [`GROUP`] values, `out` as long) to `round(x / s) + zero`
/// without vector instructions and returns its scale `s`: the bytes of the vector quantisers
/// for a whole group, and the quantiser of a row's partial last group.
fn quantize_plain(group: &[f32], out: &mut [u8], limit: f32, zero: i32) -> f32 {
    let (scale, inv) = scale_of(group.iter().fold(0f32, |m, x| m.max(x.abs())), limit);
    if inv == 0.0 {
        return scale;
    }
    // Round to nearest, ties to even, by the 1.5·2²³ trick; the clamp holds only where `inv`
    // overflowed (a group of subnormal values).
    const MAGIC: f32 = 12_582_912.0;
    for (q, &v) in out.iter_mut().zip(group) {
        let steps = (v * inv).clamp(-limit, limit);
        *q = (((steps + MAGIC) - MAGIC) as i32 + zero) as u8;
    }
    scale
}

/// Quantises the whole groups of `row` into `values` and `scales` (as [`quantize_rows`]) on
/// the vector quantiser of this CPU, if it has one, and says how many groups it did: all the
/// whole ones, or none.
fn quantize_whole_groups(
    row: &[f32],
    values: &mut [u8],
    scales: &mut [f32],
    kernel: Kernel,
) -> usize {
    let whole = row.len() / GROUP;
    let n = whole * GROUP;
    #[cfg(target_arch = "x86_64")]
    if whole > 0 {
        let (from, to, s) = (&row[..n], &mut values[..n], &mut scales[..whole]);
        if kernel == Kernel::Avx512Vnni && crate::cpu::avx512_vnni() {
            // SAFETY: AVX-512 F is available; `from` and `to` hold `s.len()` whole groups.
            // (Elsewhere the AVX2 quantiser writes the same bytes.)
            unsafe { quantize_groups(from, to, s) };
            return whole;
        }
        if crate::cpu::avx2_fma() {
            // SAFETY: AVX2 is available; as above.
            unsafe { quantize_groups_avx2(from, to, s, kernel.limit(), kernel.zero()) };
            return whole;
        }
    }
    let _ = (n, values, scales, kernel);
    0
}

/// Groups whose scales the vector quantisers work out together: first every group's largest
/// magnitude, then the scales, then the bytes, so that one group's reduction and divisions
/// overlap the next one's instead of each waiting on its own.
#[cfg(target_arch = "x86_64")]
const BLOCK: usize = 8;

/// The scale of a group whose largest magnitude is `max`, for `limit` steps, and its inverse;
/// `(1, 0)` for a group of zeros, whose bytes the quantisers leave as they are (the zero
/// byte), as they do where the inverse is 0 for an infinite magnitude.
#[inline(always)]
fn scale_of(max: f32, limit: f32) -> (f32, f32) {
    if max == 0.0 {
        (1.0, 0.0)
    } else {
        let scale = max / limit;
        (scale, 1.0 / scale)
    }
}

/// Quantises whole groups (`from` and `to` `scales.len()` groups long) to the bytes
/// `round(x / s) + 128` of the `vpdpbusd` kernels and writes each group's scale `s`; a group
/// of zeros keeps its bytes (the caller's zero bytes) and gets the scale 1.
///
/// # Safety
/// The CPU must have AVX-512 F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn quantize_groups(from: &[f32], to: &mut [u8], scales: &mut [f32]) {
    use std::arch::x86_64::*;
    debug_assert!(from.len() == scales.len() * GROUP && to.len() == from.len());
    let blocks = from
        .chunks(BLOCK * GROUP)
        .zip(to.chunks_mut(BLOCK * GROUP))
        .zip(scales.chunks_mut(BLOCK));
    for ((from, to), scales) in blocks {
        let mut inv = [0f32; BLOCK];
        for (g, (s, i)) in scales.iter_mut().zip(&mut inv).enumerate() {
            // SAFETY: group g of the block holds GROUP values.
            let max = unsafe {
                let at = from.as_ptr().add(g * GROUP);
                let mut maxv = _mm512_setzero_ps();
                for j in (0..GROUP).step_by(16) {
                    maxv = _mm512_max_ps(maxv, _mm512_abs_ps(_mm512_loadu_ps(at.add(j))));
                }
                _mm512_reduce_max_ps(maxv)
            };
            (*s, *i) = scale_of(max, 127.0);
        }
        let zero = _mm512_set1_epi32(128);
        for (g, &i) in inv.iter().enumerate().take(scales.len()) {
            if i == 0.0 {
                continue;
            }
            let inv = _mm512_set1_ps(i);
            // SAFETY: group g of the block: GROUP values read, GROUP bytes written.
            unsafe {
                let (src, dst) = (from.as_ptr().add(g * GROUP), to.as_mut_ptr().add(g * GROUP));
                for j in (0..GROUP).step_by(16) {
                    let v = _mm512_loadu_ps(src.add(j));
                    // Conversion rounds as MXCSR says: to nearest, ties to even.
                    let q = _mm512_add_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(v, inv)), zero);
                    _mm_storeu_si128(dst.add(j).cast(), _mm512_cvtusepi32_epi8(q));
                }
            }
        }
    }
}

/// [`quantize_groups`] on AVX2, to `round(x / s) + zero` with `s = max |x| / limit` (`limit`
/// and `zero` a kernel's: [`Kernel::limit`], [`Kernel::zero`]).
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn quantize_groups_avx2(
    from: &[f32],
    to: &mut [u8],
    scales: &mut [f32],
    limit: f32,
    zero: i32,
) {
    use std::arch::x86_64::*;
    debug_assert!(from.len() == scales.len() * GROUP && to.len() == from.len());
    let abs = _mm256_castsi256_ps(_mm256_set1_epi32(i32::MAX));
    let zero = _mm256_set1_epi32(zero);
    // packs and packus interleave the 128-bit halves; this restores the order of 32 bytes.
    let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    let blocks = from
        .chunks(BLOCK * GROUP)
        .zip(to.chunks_mut(BLOCK * GROUP))
        .zip(scales.chunks_mut(BLOCK));
    for ((from, to), scales) in blocks {
        let mut inv = [0f32; BLOCK];
        for (g, (s, i)) in scales.iter_mut().zip(&mut inv).enumerate() {
            // SAFETY: group g of the block holds GROUP values.
            let max = unsafe {
                let at = from.as_ptr().add(g * GROUP);
                let mut maxv = _mm256_setzero_ps();
                for j in (0..GROUP).step_by(8) {
                    maxv = _mm256_max_ps(maxv, _mm256_and_ps(_mm256_loadu_ps(at.add(j)), abs));
                }
                let m = _mm_max_ps(
                    _mm256_castps256_ps128(maxv),
                    _mm256_extractf128_ps::<1>(maxv),
                );
                let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
                _mm_cvtss_f32(_mm_max_ss(m, _mm_shuffle_ps::<1>(m, m)))
            };
            (*s, *i) = scale_of(max, limit);
        }
        for (g, &i) in inv.iter().enumerate().take(scales.len()) {
            if i == 0.0 {
                continue;
            }
            let inv = _mm256_set1_ps(i);
            // SAFETY: group g of the block: GROUP values read, GROUP bytes written.
            unsafe {
                let (src, dst) = (from.as_ptr().add(g * GROUP), to.as_mut_ptr().add(g * GROUP));
                for j in (0..GROUP).step_by(32) {
                    // Conversion rounds as MXCSR says: to nearest, ties to even.
                    let q = |u: usize| {
                        let v = _mm256_loadu_ps(src.add(j + 8 * u));
                        _mm256_add_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(v, inv)), zero)
                    };
                    let lo = _mm256_packs_epi32(q(0), q(1));
                    let hi = _mm256_packs_epi32(q(2), q(3));
                    let bytes = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(lo, hi), order);
                    _mm256_storeu_si256(dst.add(j).cast(), bytes);
                }
            }
        }
    }
}

/// `rr` (1..=6) rows from row `r` of `x` × the columns of the `P` panels from `p` of `w` (16
/// columns, or 32 where `P` is 2): `dst[i][j] = Σ x[r+i][c]·W[p·NR+j][c] + bias[j]`, `dst`
/// with row stride `ldy`. Two panels at once only where the weights' kernel pairs them
/// ([`Kernel::pairs`]).
///
/// # Safety
/// The CPU must have the instructions of `w`'s kernel ([`Weights::kernel`]); `x` must be
/// quantised for `w` and hold rows `r..r+rr`, `w` panels `p..p+P` (whole ones where `P` is 2),
/// `bias` `16 · P` values, and `dst` must point to `rr` rows of `16 · P` writable values, row
/// stride `ldy`.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn tile<const P: usize>(
    rr: usize,
    x: &Rows,
    r: usize,
    w: &Weights,
    p: usize,
    bias: *const f32,
    dst: *mut f32,
    ldy: usize,
) {
    debug_assert_eq!(x.kq, w.kq);
    assert!(
        P == 1 || (P == 2 && w.kernel.pairs()),
        "{P} panels on {:?}",
        w.kernel
    );
    // SAFETY: as the caller vouches; the weights' kernel is one this CPU has.
    unsafe {
        match w.kernel {
            Kernel::Avx512Vnni => {
                by_rows!(rr, R => tile_rows::<R, P>(x, r, w, p, bias, dst, ldy))
            }
            Kernel::AvxVnni => {
                by_rows!(rr, R => tile_rows_avx_vnni::<R>(x, r, w, p, bias, dst, ldy))
            }
            Kernel::Avx2 => by_rows!(rr, R => tile_rows_avx2::<R>(x, r, w, p, bias, dst, ldy)),
        }
    }
}

/// Where a tile of `rows` rows from row `r` and panel `p` starts: the panel's weights, their
/// scales and offsets (per group and column), the rows' input bytes and their scales (per row
/// and group).
#[cfg(target_arch = "x86_64")]
struct Start {
    panel: *const i8,
    w_scales: *const f32,
    offsets: *const i32,
    xs: *const u8,
    x_scales: *const f32,
}

#[cfg(target_arch = "x86_64")]
impl Start {
    /// # Safety
    /// Rows `r..r + rows` of `x` and panel `p` of `w` must exist.
    #[inline(always)]
    unsafe fn of(x: &Rows, r: usize, rows: usize, w: &Weights, p: usize) -> Self {
        let (kq, groups) = (w.kq, w.kq / GROUP);
        debug_assert_eq!(x.kq, kq);
        debug_assert!(x.values.len() >= (r + rows) * kq && w.bytes().len() >= (p + 1) * kq * NR);
        // SAFETY: within the rows and the panel, as the caller promises.
        unsafe {
            Self {
                panel: w.bytes().as_ptr().add(p * kq * NR),
                w_scales: w.scales.as_ptr().add(p * groups * NR),
                offsets: w.offsets.as_ptr().add(p * groups * NR),
                xs: x.values.as_ptr().add(r * kq),
                x_scales: x.scales.as_ptr().add(r * groups),
            }
        }
    }
}

/// `R` rows × the `P` (1 or 2) panels from `p` on AVX-512 VNNI: per run of four inputs, one
/// broadcast of each row's input bytes feeds a `vpdpbusd` per panel. With two panels a step
/// loads two weight registers and `R` inputs for `2R` products instead of one and `R` for `R`
/// (the loads, not the products, set the pace on an Intel core); the 32 registers of AVX-512
/// hold both panels' sums. The sums per lane do not depend on `P`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,fma")]
#[inline]
unsafe fn tile_rows<const R: usize, const P: usize>(
    x: &Rows,
    r: usize,
    w: &Weights,
    p: usize,
    bias: *const f32,
    dst: *mut f32,
    ldy: usize,
) {
    use std::arch::x86_64::*;
    let (kq, groups) = (w.kq, w.kq / GROUP);
    debug_assert!(w.bytes().len() >= (p + P) * kq * NR);
    // Panel p + j's weights, scales and offsets follow panel p's at these strides.
    let (next, next_g) = (kq * NR, groups * NR);
    // SAFETY (whole body): the pointers of `Start::of` (R rows, panels p..p + P), P × 16
    // biases and R × P × 16 destination values exist, as the caller promises.
    unsafe {
        let Start {
            panel,
            w_scales,
            offsets,
            xs,
            x_scales,
        } = Start::of(x, r, R, w, p);
        let mut f = [[_mm512_setzero_ps(); R]; P];
        for g in 0..groups {
            let mut acc = [[_mm512_setzero_si512(); R]; P];
            for (j, a) in acc.iter_mut().enumerate() {
                *a = [_mm512_loadu_si512(offsets.add(j * next_g + g * NR).cast()); R];
            }
            for t in g * GROUP / 4..(g + 1) * GROUP / 4 {
                let wp = panel.add(t * 64);
                let mut wv = [_mm512_setzero_si512(); P];
                for (j, v) in wv.iter_mut().enumerate() {
                    // Fetch the next panels while these are multiplied: the weights are read
                    // once per query and stream in behind the arithmetic.
                    _mm_prefetch::<_MM_HINT_T0>(wp.wrapping_add((P + j) * next).cast());
                    *v = _mm512_loadu_si512(wp.add(j * next).cast());
                }
                for i in 0..R {
                    let quad = xs.add(i * kq + 4 * t).cast::<i32>().read_unaligned();
                    let xv = _mm512_set1_epi32(quad);
                    for (a, v) in acc.iter_mut().zip(&wv) {
                        a[i] = _mm512_dpbusd_epi32(a[i], xv, *v);
                    }
                }
            }
            for (j, (fj, aj)) in f.iter_mut().zip(&acc).enumerate() {
                let ws = _mm512_loadu_ps(w_scales.add(j * next_g + g * NR));
                for (i, (fi, a)) in fj.iter_mut().zip(aj).enumerate() {
                    let s = _mm512_mul_ps(ws, _mm512_set1_ps(*x_scales.add(i * groups + g)));
                    *fi = _mm512_fmadd_ps(_mm512_cvtepi32_ps(*a), s, *fi);
                }
            }
        }
        for (j, fj) in f.iter().enumerate() {
            let b = _mm512_loadu_ps(bias.add(j * NR));
            for (i, fi) in fj.iter().enumerate() {
                _mm512_storeu_ps(dst.add(i * ldy + j * NR), _mm512_add_ps(*fi, b));
            }
        }
    }
}

/// [`tile_rows`] on AVX-VNNI: per run of four inputs, one 256-bit `vpdpbusd` per half panel
/// (8 columns).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,avxvnni")]
#[inline]
unsafe fn tile_rows_avx_vnni<const R: usize>(
    x: &Rows,
    r: usize,
    w: &Weights,
    p: usize,
    bias: *const f32,
    dst: *mut f32,
    ldy: usize,
) {
    use std::arch::x86_64::*;
    // SAFETY: as the caller vouches; AVX2, FMA and AVX-VNNI are enabled here.
    unsafe {
        tile_rows_ymm::<R, 1>(x, r, w, p, bias, dst, ldy, |acc, [xv], [wv]| {
            _mm256_dpbusd_avx_epi32(acc, xv, wv)
        })
    }
}

/// [`tile_rows`] on AVX2: per two runs of four inputs and half panel (8 columns), `vpmaddubsw`
/// multiplies each run's input bytes by its weights and adds them in pairs (16 bits), `vpaddw`
/// adds the two runs' pairs, and `vpmaddwd` by ones adds those into the 32-bit sums: one
/// widening for eight inputs instead of four (exact for weights and inputs of 7 bits:
/// [`Kernel::Avx2`]).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn tile_rows_avx2<const R: usize>(
    x: &Rows,
    r: usize,
    w: &Weights,
    p: usize,
    bias: *const f32,
    dst: *mut f32,
    ldy: usize,
) {
    use std::arch::x86_64::*;
    let ones = _mm256_set1_epi16(1);
    // SAFETY: as the caller vouches; AVX2 and FMA are enabled here.
    unsafe {
        tile_rows_ymm::<R, 2>(x, r, w, p, bias, dst, ldy, |acc, [xa, xb], [wa, wb]| {
            let pairs =
                _mm256_add_epi16(_mm256_maddubs_epi16(xa, wa), _mm256_maddubs_epi16(xb, wb));
            _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, ones))
        })
    }
}

/// The body of the 256-bit kernels: per `RUNS` (1 or 2) runs of four inputs and half panel
/// (8 columns), `add(sums, inputs, weights)` adds the `4 · RUNS` products of each column to its
/// 32-bit sum, the runs' input bytes broadcast and their weights in one register each; 16
/// registers of sums at most (VEX reaches only 16). Inlined into a function that enables
/// AVX2, FMA and whatever `add` needs.
///
/// # Safety
/// As for [`tile_rows`]; the caller must enable AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn tile_rows_ymm<const R: usize, const RUNS: usize>(
    x: &Rows,
    r: usize,
    w: &Weights,
    p: usize,
    bias: *const f32,
    dst: *mut f32,
    ldy: usize,
    add: impl Fn(
        std::arch::x86_64::__m256i,
        [std::arch::x86_64::__m256i; RUNS],
        [std::arch::x86_64::__m256i; RUNS],
    ) -> std::arch::x86_64::__m256i,
) {
    use std::arch::x86_64::*;
    let (kq, groups) = (w.kq, w.kq / GROUP);
    // SAFETY (whole body): as in `tile_rows`.
    unsafe {
        let Start {
            panel,
            w_scales,
            offsets,
            xs,
            x_scales,
        } = Start::of(x, r, R, w, p);
        let mut flo = [_mm256_setzero_ps(); R];
        let mut fhi = [_mm256_setzero_ps(); R];
        let quad = |i: usize, t: usize| {
            _mm256_set1_epi32(xs.add(i * kq + 4 * t).cast::<i32>().read_unaligned())
        };
        for g in 0..groups {
            let mut lo = [_mm256_loadu_si256(offsets.add(g * NR).cast()); R];
            let mut hi = [_mm256_loadu_si256(offsets.add(g * NR + 8).cast()); R];
            for t in (g * GROUP / 4..(g + 1) * GROUP / 4).step_by(RUNS) {
                let wp = panel.add(t * 64);
                // Run t + u's weights: columns 0..8 at 64 u, columns 8..16 at 64 u + 32.
                let (mut w0, mut w1) = (
                    [_mm256_setzero_si256(); RUNS],
                    [_mm256_setzero_si256(); RUNS],
                );
                for u in 0..RUNS {
                    _mm_prefetch::<_MM_HINT_T0>(wp.wrapping_add(kq * NR + 64 * u).cast());
                    w0[u] = _mm256_loadu_si256(wp.add(64 * u).cast());
                    w1[u] = _mm256_loadu_si256(wp.add(64 * u + 32).cast());
                }
                for i in 0..R {
                    let mut xv = [_mm256_setzero_si256(); RUNS];
                    for (u, v) in xv.iter_mut().enumerate() {
                        *v = quad(i, t + u);
                    }
                    lo[i] = add(lo[i], xv, w0);
                    hi[i] = add(hi[i], xv, w1);
                }
            }
            let s0 = _mm256_loadu_ps(w_scales.add(g * NR));
            let s1 = _mm256_loadu_ps(w_scales.add(g * NR + 8));
            for i in 0..R {
                let xs = _mm256_set1_ps(*x_scales.add(i * groups + g));
                let (s0, s1) = (_mm256_mul_ps(s0, xs), _mm256_mul_ps(s1, xs));
                flo[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lo[i]), s0, flo[i]);
                fhi[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(hi[i]), s1, fhi[i]);
            }
        }
        let b0 = _mm256_loadu_ps(bias);
        let b1 = _mm256_loadu_ps(bias.add(8));
        for i in 0..R {
            _mm256_storeu_ps(dst.add(i * ldy), _mm256_add_ps(flo[i], b0));
            _mm256_storeu_ps(dst.add(i * ldy + 8), _mm256_add_ps(fhi[i], b1));
        }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    /// What a tile of `kernel` must give: the exact integer sums of the packed weights and the
    /// quantised rows, scaled per group, plus the bias (in f64).
    fn reference(x: &Rows, rows: usize, w: &Weights, n: usize, bias: &[f32]) -> Vec<f64> {
        let (kq, groups) = (w.kq, w.kq / GROUP);
        let mut out = vec![0f64; rows * n];
        for i in 0..rows {
            for c in 0..n {
                let (p, j) = (c / NR, c % NR);
                let mut total = f64::from(bias[c]);
                for g in 0..groups {
                    let mut sum = 0i64;
                    for kk in g * GROUP..(g + 1) * GROUP {
                        let wq = w.bytes()[p * kq * NR + (kk / 4) * 64 + j * 4 + kk % 4];
                        let xq = i64::from(x.values[i * kq + kk]) - i64::from(x.zero);
                        sum += xq * i64::from(wq);
                    }
                    let ws = f64::from(w.scales[(p * groups + g) * NR + j]);
                    total += sum as f64 * ws * f64::from(x.scales[i * groups + g]);
                }
                out[i * n + c] = total;
            }
        }
        out
    }

    /// Every kernel this CPU has gives the exact sums of its weights, scaled (to f32 rounding),
    /// for every row count; the two `vpdpbusd` kernels, and the AVX-512 one on two panels at
    /// once, give the very same values, so vectors stored by one serve the other (they share a
    /// kernel tag).
    #[test]
    fn every_kernel_gives_the_exact_sums_and_both_vnni_kernels_the_same_values() {
        let (n, k, m) = (2 * NR, 2 * GROUP + 10, 6);
        let kq = k.div_ceil(GROUP) * GROUP;
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % 20_001) as f32 / 10_000.0 - 1.0
        };
        let w: Vec<f32> = (0..n * k).map(|_| next()).collect();
        let x: Vec<f32> = (0..m * k)
            .map(|i| next() * if i % 29 == 0 { 8.0 } else { 1.0 })
            .collect();
        let bias: Vec<f32> = (0..n).map(|_| next()).collect();
        let has = |kernel| match kernel {
            Kernel::Avx512Vnni => {
                is_x86_feature_detected!("avx512f")
                    && is_x86_feature_detected!("avx512bw")
                    && is_x86_feature_detected!("avx512vnni")
                    && is_x86_feature_detected!("fma")
            }
            Kernel::AvxVnni => is_x86_feature_detected!("avxvnni") && crate::cpu::avx2_fma(),
            Kernel::Avx2 => crate::cpu::avx2_fma(),
        };
        let mut full_bytes: Vec<Vec<f32>> = Vec::new();
        for kernel in [Kernel::Avx512Vnni, Kernel::AvxVnni, Kernel::Avx2] {
            if !has(kernel) {
                continue;
            }
            let weights = Weights::pack_for(kernel, &w, n, k, n / NR);
            assert_eq!(weights.kq, kq);
            assert_eq!(
                weights.bytes().as_ptr() as usize % 64,
                0,
                "lines on 64 bytes"
            );
            let rows = Rows::quantize(&x, m, k, &weights);
            let mut out = vec![0f32; m * n];
            for rr in 1..=m {
                for p in 0..n / NR {
                    // SAFETY: the CPU has the kernel's instructions; rows 0..rr, panel p, 16
                    // biases and rr rows of 16 values (row stride n) from column p · NR exist.
                    unsafe {
                        let dst = out.as_mut_ptr().add(p * NR);
                        let b = bias.as_ptr().add(p * NR);
                        tile::<1>(rr, &rows, 0, &weights, p, b, dst, n);
                    }
                }
                let want = reference(&rows, rr, &weights, n, &bias);
                for (at, (&got, &want)) in out.iter().zip(&want).take(rr * n).enumerate() {
                    let tolerance = 1e-4 * want.abs().max(1.0);
                    assert!(
                        (f64::from(got) - want).abs() <= tolerance,
                        "{kernel:?}, {rr} rows, value {at}: {got} for {want}"
                    );
                }
            }
            if kernel.pairs() {
                // Two panels at once give the very values of one at a time.
                let mut paired = vec![0f32; m * n];
                for rr in 1..=m {
                    // SAFETY: as above, with panels 0 and 1 and 32 values per row.
                    unsafe {
                        let (b, dst) = (bias.as_ptr(), paired.as_mut_ptr());
                        tile::<2>(rr, &rows, 0, &weights, 0, b, dst, n);
                    }
                    assert_eq!(paired[..rr * n], out[..rr * n], "{rr} rows in pairs");
                }
            }
            if kernel.full_bytes() {
                full_bytes.push(out);
            }
        }
        if let [a, b] = full_bytes.as_slice() {
            assert_eq!(a, b, "the two vpdpbusd kernels differ");
        }
    }

    /// The AVX-512 and AVX2 quantisers write the same bytes and scales (ties to even both), so
    /// the two `vpdpbusd` kernels read the same inputs whichever CPU quantised them; a group of
    /// zeros keeps its bytes and gets the scale 1 from both. More groups than a block of them
    /// ([`BLOCK`]), so that a second block is quantised too.
    #[test]
    fn both_vector_quantisers_write_the_same_bytes() {
        if !(is_x86_feature_detected!("avx512f") && crate::cpu::avx2_fma()) {
            return; // Nothing to compare on this CPU.
        }
        let groups = BLOCK + 3;
        let mut x: Vec<f32> = (0..groups * GROUP)
            .map(|i| ((i % GROUP) as f32 - 31.5) / 3.0 * (1 + i / GROUP) as f32)
            .collect();
        x[7] = 21.0; // 127 steps exactly: the scale is 21 / 127.
        x[9] = 21.0 / 127.0 * 2.5; // a tie: to even, 2.
        x[11] = -21.0 / 127.0 * 3.5; // a tie: to even, −4.
        x[2 * GROUP..3 * GROUP].fill(0.0); // a group of zeros
        let (mut a, mut b) = (vec![128u8; x.len()], vec![128u8; x.len()]);
        let (mut sa, mut sb) = (vec![0f32; groups], vec![0f32; groups]);
        // SAFETY: AVX-512 F and AVX2 were detected; the slices hold `groups` whole groups.
        unsafe {
            quantize_groups(&x, &mut a, &mut sa);
            quantize_groups_avx2(&x, &mut b, &mut sb, 127.0, 128);
        }
        assert_eq!(
            sa.iter().map(|s| s.to_bits()).collect::<Vec<_>>(),
            sb.iter().map(|s| s.to_bits()).collect::<Vec<_>>()
        );
        assert_eq!(a, b);
        assert_eq!((a[9], a[11]), (130, 124));
        assert_eq!(sa[2], 1.0);
        assert!(a[2 * GROUP..3 * GROUP].iter().all(|&q| q == 128));
    }

    /// The vector quantiser of the 256-bit kernels writes the bytes and scales of the plain one,
    /// for both kernels' magnitudes and zero points: ties to even, a group of zeros left alone,
    /// more groups than a block.
    #[test]
    fn the_vector_and_plain_quantisers_write_the_same_bytes() {
        if !crate::cpu::avx2_fma() {
            return; // No vector quantiser on this CPU.
        }
        let groups = BLOCK + 3;
        for kernel in [Kernel::Avx2, Kernel::AvxVnni] {
            let (limit, zero) = (kernel.limit(), kernel.zero());
            let mut x: Vec<f32> = (0..groups * GROUP)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0 * (1 + i / GROUP) as f32)
                .collect();
            // Group 0 is scaled by 1 exactly, with ties between steps.
            x[..GROUP].fill(1.0);
            x[0] = limit;
            (x[1], x[2], x[3], x[4]) = (2.5, -3.5, 0.5, -0.5);
            x[2 * GROUP..3 * GROUP].fill(0.0);
            let (mut a, mut b) = (vec![zero as u8; x.len()], vec![zero as u8; x.len()]);
            let (mut sa, mut sb) = (vec![1f32; groups], vec![1f32; groups]);
            assert_eq!(quantize_whole_groups(&x, &mut a, &mut sa, kernel), groups);
            for ((from, to), s) in x.chunks(GROUP).zip(b.chunks_mut(GROUP)).zip(&mut sb) {
                *s = quantize_plain(from, to, limit, zero);
            }
            let bits = |s: &[f32]| s.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&sa), bits(&sb), "{kernel:?}");
            assert_eq!(a, b, "{kernel:?}");
            let step = |i: usize| i32::from(a[i]) - zero;
            assert_eq!((step(1), step(2), step(3), step(4)), (2, -4, 0, 0));
            assert_eq!(sa[2], 1.0);
        }
    }

    /// Rows quantised by the vector path (whole groups) and the scalar one (the partial group at
    /// the end) come back within half a step of every input, for each kernel's magnitudes and
    /// zero point.
    #[test]
    fn quantised_rows_round_trip_within_half_a_step() {
        let k = 2 * GROUP + 5;
        let x: Vec<f32> = (0..2 * k)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0 * if i % 13 == 0 { 9.0 } else { 1.0 })
            .collect();
        let mut kernels = vec![(Kernel::Avx2, 63, 64), (Kernel::AvxVnni, 127, 128)];
        if is_x86_feature_detected!("avx512f") {
            kernels.push((Kernel::Avx512Vnni, 127, 128));
        }
        for (kernel, limit, zero) in kernels {
            // Quantising reads only the kernel and the padded length of the weights.
            let w = Weights::pack_for(kernel, &[0.0; 16], 1, 16, 1);
            let w = Weights {
                kq: k.div_ceil(GROUP) * GROUP,
                ..w
            };
            let (kq, groups) = (w.kq, w.kq / GROUP);
            let rows = Rows::quantize(&x, 2, k, &w);
            assert_eq!(rows.zero, zero, "{kernel:?}");
            for r in 0..2 {
                for c in 0..k {
                    let scale = rows.scales[r * groups + c / GROUP];
                    let back = (f32::from(rows.values[r * kq + c]) - zero as f32) * scale;
                    let want = x[r * k + c];
                    assert!(
                        (back - want).abs() <= scale * 0.5 + 1e-5,
                        "{kernel:?} row {r} input {c}: {back} for {want} (step {scale})"
                    );
                }
                // Every group's largest input is ±limit steps: the whole group was scaled.
                for g in 0..groups {
                    let group = &rows.values[r * kq + g * GROUP..][..GROUP.min(k - g * GROUP)];
                    let top = group.iter().map(|&v| (i32::from(v) - zero).abs()).max();
                    assert_eq!(top, Some(limit), "{kernel:?} row {r} group {g}");
                }
                // The padding past k stays at the zero point.
                assert!(rows.values[r * kq + k..(r + 1) * kq]
                    .iter()
                    .all(|&v| i32::from(v) == zero));
            }
        }
    }

    /// A partial group of subnormal values, whose scale's inverse overflows, still gives bytes
    /// within the kernel's range (the scalar quantiser; a debug build would panic on overflow).
    #[test]
    fn rows_quantised_in_parts_on_threads_are_the_rows_quantised_at_once() {
        let (m, k) = (7, 3 * GROUP + 9);
        let x: Vec<f32> = (0..m * k)
            .map(|i| ((i * 53 % 97) as f32 - 48.0) / 5.0)
            .collect();
        let w = Weights::pack(&vec![0.5; 16 * k], 16, k, 1);
        let whole = Rows::quantize(&x, m, k, &w);
        // Parts on scoped threads, each one once, in whatever order they finish.
        let on_threads = |count: usize, f: &(dyn Fn(usize) + Sync)| {
            std::thread::scope(|s| {
                for i in (0..count).rev() {
                    s.spawn(move || f(i));
                }
            })
        };
        for parts in [0, 1, 2, 3, m, m + 4] {
            let split = Rows::quantize_in(&x, m, k, &w, parts, &on_threads);
            assert_eq!(split.values, whole.values, "{parts} parts");
            assert_eq!(split.scales, whole.scales, "{parts} parts");
        }
        // No rows: nothing to hand out.
        let none = Rows::quantize_in(&[], 0, k, &w, 2, &|count, _| assert_eq!(count, 0));
        assert!(none.values.is_empty() && none.scales.is_empty());
    }

    #[test]
    fn a_group_too_small_to_scale_stays_in_range() {
        let k = GROUP + 3;
        let mut x = vec![0.5f32; k];
        x[GROUP..].copy_from_slice(&[1e-39, -1e-39, 0.0]);
        for kernel in [Kernel::Avx2, Kernel::AvxVnni] {
            let w = Weights::pack_for(kernel, &vec![0.0; 16 * k], 16, k, 1);
            let rows = Rows::quantize(&x, 1, k, &w);
            let (limit, zero) = (kernel.limit() as i32, kernel.zero());
            let tail: Vec<i32> = rows.values[GROUP..k]
                .iter()
                .map(|&v| i32::from(v))
                .collect();
            assert_eq!(tail, [zero + limit, zero - limit, zero], "{kernel:?}");
        }
    }

    /// Two panels at once are refused where the weights' kernel takes one at a time, before
    /// any of it runs.
    #[test]
    #[should_panic(expected = "2 panels on Avx2")]
    fn two_panels_only_where_the_kernel_pairs_them() {
        let (n, k) = (2 * NR, GROUP);
        let w = Weights::pack_for(Kernel::Avx2, &vec![0.5; n * k], n, k, 2);
        let rows = Rows::quantize(&vec![0.5; k], 1, k, &w);
        let (bias, mut out) = ([0f32; 2 * NR], [0f32; 2 * NR]);
        // SAFETY: one row, panels 0 and 1, 32 biases and 32 values; it stops at the assertion.
        unsafe { tile::<2>(1, &rows, 0, &w, 0, bias.as_ptr(), out.as_mut_ptr(), n) };
    }
}
