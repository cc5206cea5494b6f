//! The numeric kernels of the encoder: a matrix product against weights packed once at load
//! time, and the element-wise functions (GELU, the exponential of the softmax, layer norm).
//!
//! The element-wise functions have a portable body, compiled three times: as is, inside a
//! function that enables AVX2 and FMA, and inside one that adds AVX-512, chosen at run time
//! ([`Simd::detect`], [`crate::cpu::avx512`]) and left to the compiler's vectoriser. The matrix
//! product has an explicit AVX2 micro-kernel (6 rows × 16 columns in twelve accumulators). The
//! default precision ([`Precision::Q8`]) takes the 8-bit products of [`q8`] instead: `vpdpbusd`
//! where the CPU has AVX-512 VNNI (two panels per tile) or AVX-VNNI, `vpmaddubsw` elsewhere.

/// Runs `$body` with the constant `$R` (a micro-tile's row count, a const generic of the tile
/// kernels) set to `$rr`, 1 to [`MR`] = 6.
macro_rules! by_rows {
    ($rr:expr, $R:ident => $body:expr) => {
        match $rr {
            6 => {
                const $R: usize = 6;
                $body
            }
            5 => {
                const $R: usize = 5;
                $body
            }
            4 => {
                const $R: usize = 4;
                $body
            }
            3 => {
                const $R: usize = 3;
                $body
            }
            2 => {
                const $R: usize = 2;
                $body
            }
            _ => {
                const $R: usize = 1;
                $body
            }
        }
    };
}

mod q8;

/// Output columns per packed panel (two 8-lane vectors).
pub(crate) const NR: usize = 16;
/// Rows per micro-tile of the AVX2 kernel.
const MR: usize = 6;

/// Which instruction set the kernels use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Simd {
    /// Plain Rust, vectorised by the compiler for the build's baseline target.
    Portable,
    /// x86-64 with AVX2, FMA and F16C, detected at run time.
    #[cfg(target_arch = "x86_64")]
    Avx2,
}

impl Simd {
    /// The best kernels this CPU runs.
    pub(crate) fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("f16c")
        {
            return Simd::Avx2;
        }
        Simd::Portable
    }
}

/// Runs `$body` (a call of an `#[inline(always)]` function) compiled with AVX2 and FMA when
/// `$simd` says so, and with AVX-512 as well where the CPU has it ([`crate::cpu::avx512`]):
/// the compiler's loops then take 16 values per instruction instead of 8. The arithmetic is
/// the body's, in its order, so every width gives the same values bit for bit.
macro_rules! dispatch {
    ($simd:expr, $body:expr) => {{
        #[cfg(target_arch = "x86_64")]
        {
            #[target_feature(enable = "avx2,fma")]
            unsafe fn avx2<R>(f: impl FnOnce() -> R) -> R {
                f()
            }
            #[target_feature(enable = "avx2,fma,avx512f,avx512bw,avx512vl")]
            unsafe fn avx512<R>(f: impl FnOnce() -> R) -> R {
                f()
            }
            if $simd == Simd::Avx2 && crate::cpu::avx512() {
                // SAFETY: the CPU reports AVX2, FMA and AVX-512 F, BW and VL.
                unsafe { avx512(|| $body) }
            } else if $simd == Simd::Avx2 {
                // SAFETY: `Simd::Avx2` is only chosen when the CPU reports AVX2 and FMA.
                unsafe { avx2(|| $body) }
            } else {
                $body
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = $simd;
            $body
        }
    }};
}

/// How the packed weights are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Precision {
    /// The model's own precision (matches the reference implementation to about 1e-6).
    F32,
    /// IEEE half precision (read with F16C; products still accumulate in f32). Half the memory
    /// traffic: a short query's forward pass reads every weight once, so on a small machine it
    /// is bound by memory bandwidth as much as by arithmetic.
    F16,
    /// 8-bit integers with one scale per output column and group of inputs, multiplied with
    /// the input quantised to 15-bit integers with one scale per row (`vpmaddwd`, exact 32-bit
    /// sums): a quarter of the f32 memory traffic and about twice the multiply-adds per
    /// instruction.
    I8,
    /// The default. The weights as in [`Precision::I8`], the input quantised to 8 bits too, with
    /// one scale per row and group of 64 inputs, multiplied on AVX-512 VNNI (`vpdpbusd`: 64
    /// products per instruction), on AVX-VNNI (the same on 256 bits, same vectors) or, without
    /// either, on AVX2 (`vpmaddubsw`, weights and inputs in 7 bits; see `kernels/q8.rs`).
    #[default]
    Q8,
}

enum Store {
    F32(Vec<f32>),
    /// f16 bit patterns (only with [`Simd::Avx2`]).
    #[cfg(target_arch = "x86_64")]
    F16(Vec<u16>),
    /// Only with [`Simd::Avx2`]. Per panel and pair of inputs `(2t, 2t+1)`, 32 bytes: for
    /// columns 0–7 then 8–15 of the panel, `W[c][2t], W[c][2t+1]`; `k` padded to even.
    #[cfg(target_arch = "x86_64")]
    I8 {
        data: Vec<i8>,
        /// Per panel, group of [`I8_GROUP`] inputs and column: the weight is `data · scale`.
        scales: Vec<f32>,
    },
    /// Only with [`Simd::Avx2`] (`vpdpbusd` or `vpmaddubsw`, see [`q8::Kernel`]).
    #[cfg(target_arch = "x86_64")]
    Q8(q8::Weights),
}

/// Integer weights have one scale per column and group of this many inputs (even). Each group's
/// products are summed exactly in 32 bits (at most 384 · 32767 · 127 < 2³¹), then scaled and
/// added in f32.
#[cfg(target_arch = "x86_64")]
const I8_GROUP: usize = 32;

/// The instructions the products of `precision` run on, for the log: which of the 8-bit
/// kernels ([`q8::Kernel`]), or the kernels `simd` chose for the other precisions.
pub(crate) fn instructions(simd: Simd, precision: Precision) -> &'static str {
    match (simd, precision) {
        #[cfg(target_arch = "x86_64")]
        (Simd::Avx2, Precision::Q8) => match q8::Kernel::of_cpu() {
            q8::Kernel::Avx512Vnni => "AVX-512 VNNI",
            q8::Kernel::AvxVnni => "AVX-VNNI",
            q8::Kernel::Avx2 => "AVX2",
        },
        #[cfg(target_arch = "x86_64")]
        (Simd::Avx2, _) => "AVX2",
        _ => "portable",
    }
}

/// What decides a vector's exact values besides the model: the precision, and for
/// [`Precision::Q8`] its quantisation group. Stored vectors are reused only under the same tag.
pub(crate) fn kernel_tag(precision: Precision) -> String {
    match precision {
        #[cfg(target_arch = "x86_64")]
        Precision::Q8 if q8::Kernel::of_cpu().full_bytes() => {
            format!("{precision:?}/{}", q8::GROUP)
        }
        #[cfg(target_arch = "x86_64")]
        Precision::Q8 => format!("{precision:?}/{}/7x7", q8::GROUP),
        _ => format!("{precision:?}"),
    }
}

/// How work split in parts is run: `each(count, f)` calls `f(i)` once for every `i < count`,
/// on any threads (the encoder's pool), and returns when all have returned.
pub(crate) type Each<'a> = &'a dyn Fn(usize, &(dyn Fn(usize) + Sync));

/// The input of a product, as the weights' storage needs it (see [`Packed::input`]).
pub(crate) enum Input<'a> {
    F32(&'a [f32]),
    /// Rows quantised to 15-bit integers: `x[r][c] ≈ values[r·stride + c] · scales[r]`, `stride`
    /// being `k` rounded up to even.
    I16 {
        values: Vec<i16>,
        scales: Vec<f32>,
        stride: usize,
    },
    /// Rows quantised to 8 bits for [`Store::Q8`] weights.
    U8(q8::Rows),
}

/// The weights of one linear layer `y = x·Wᵀ + b` (`W` is `n × k`, PyTorch's layout), packed in
/// panels of [`NR`] output columns: panel `p` holds, for every input index `kk`, the weights
/// `W[p·NR + j][kk]` for `j` in `0..NR` side by side, zeros past `n`. A row-block of the input
/// then meets every weight of a panel once, in the order it is stored.
pub(crate) struct Packed {
    pub(crate) n: usize,
    pub(crate) k: usize,
    data: Store,
    /// `n` biases, zero-padded to whole panels.
    bias: Vec<f32>,
}

impl Packed {
    /// Packs `w` (`n × k`, row-major) and its `n` biases in `precision` when `simd` can compute
    /// with it (f16 and i8 need AVX2), in f32 otherwise.
    pub(crate) fn new(
        w: &[f32],
        bias: &[f32],
        n: usize,
        k: usize,
        simd: Simd,
        precision: Precision,
    ) -> Self {
        assert_eq!(w.len(), n * k, "weight shape");
        assert_eq!(bias.len(), n, "bias shape");
        let panels = n.div_ceil(NR);
        let mut padded = bias.to_vec();
        padded.resize(panels * NR, 0.0);
        let _ = (simd, precision);
        #[cfg(target_arch = "x86_64")]
        if simd == Simd::Avx2 && precision == Precision::Q8 {
            return Self {
                n,
                k,
                data: Store::Q8(q8::Weights::pack(w, n, k, panels)),
                bias: padded,
            };
        }
        #[cfg(target_arch = "x86_64")]
        if simd == Simd::Avx2 && matches!(precision, Precision::I8 | Precision::Q8) {
            let kp = k.div_ceil(2) * 2;
            let groups = kp.div_ceil(I8_GROUP);
            let mut data = vec![0i8; panels * kp * NR];
            let mut scales = vec![1f32; panels * groups * NR];
            for (c, row) in w.chunks_exact(k).enumerate() {
                let (p, j) = (c / NR, c % NR);
                let (half, jj) = (j / 8, j % 8);
                for (g, group) in row.chunks(I8_GROUP).enumerate() {
                    let max = group.iter().fold(0f32, |m, x| m.max(x.abs()));
                    let scale = if max > 0.0 { max / 127.0 } else { 1.0 };
                    scales[(p * groups + g) * NR + j] = scale;
                    for (i, &v) in group.iter().enumerate() {
                        let kk = g * I8_GROUP + i;
                        let q = (v / scale).round_ties_even().clamp(-127.0, 127.0) as i8;
                        data[p * kp * NR + (kk / 2) * 32 + half * 16 + jj * 2 + kk % 2] = q;
                    }
                }
            }
            return Self {
                n,
                k,
                data: Store::I8 { data, scales },
                bias: padded,
            };
        }
        let mut data = vec![0f32; panels * k * NR];
        for (col, row) in w.chunks_exact(k).enumerate() {
            let (p, j) = (col / NR, col % NR);
            let panel = &mut data[p * k * NR..(p + 1) * k * NR];
            for (kk, &v) in row.iter().enumerate() {
                panel[kk * NR + j] = v;
            }
        }
        #[cfg(target_arch = "x86_64")]
        if simd == Simd::Avx2 && precision == Precision::F16 {
            let mut half = vec![0u16; data.len()];
            // SAFETY: F16C is part of `Simd::Avx2`; both vectors have data.len() values, a
            // multiple of NR.
            unsafe { to_f16(&data, &mut half) };
            return Self {
                n,
                k,
                data: Store::F16(half),
                bias: padded,
            };
        }
        Self {
            n,
            k,
            data: Store::F32(data),
            bias: padded,
        }
    }

    /// The precision the weights are stored in.
    pub(crate) fn precision(&self) -> Precision {
        match self.data {
            Store::F32(_) => Precision::F32,
            #[cfg(target_arch = "x86_64")]
            Store::F16(_) => Precision::F16,
            #[cfg(target_arch = "x86_64")]
            Store::I8 { .. } => Precision::I8,
            #[cfg(target_arch = "x86_64")]
            Store::Q8(_) => Precision::Q8,
        }
    }

    /// Number of panels of [`NR`] columns.
    pub(crate) fn panels(&self) -> usize {
        self.n.div_ceil(NR)
    }

    /// Whether [`Packed::apply`] takes whole panels two at a time (8-bit weights on AVX-512
    /// VNNI), so that a caller splitting the panels among threads should give each an even
    /// number.
    pub(crate) fn pairs_panels(&self) -> bool {
        match self.data {
            #[cfg(target_arch = "x86_64")]
            Store::Q8(ref w) => w.kernel().pairs(),
            _ => false,
        }
    }

    /// `x` (`m × k`, row-major) as [`Packed::apply`] takes it: as is, or quantised per row for
    /// integer weights. Done once per product, before its columns are split among threads;
    /// 8-bit inputs are quantised in up to `parts` runs of rows that `each` hands out (see
    /// [`Each`]).
    pub(crate) fn input<'a>(
        &self,
        simd: Simd,
        x: &'a [f32],
        m: usize,
        parts: usize,
        each: Each<'_>,
    ) -> Input<'a> {
        debug_assert!(x.len() >= m * self.k);
        match self.data {
            #[cfg(target_arch = "x86_64")]
            Store::I8 { .. } => {
                let k = self.k;
                let stride = k.div_ceil(2) * 2;
                let mut values = vec![0i16; m * stride];
                let mut scales = vec![1f32; m];
                dispatch!(simd, {
                    for ((row, q), s) in x
                        .chunks_exact(k)
                        .zip(values.chunks_exact_mut(stride))
                        .zip(scales.iter_mut())
                    {
                        let max = max_abs(row);
                        if max > 0.0 {
                            *s = max / 32767.0;
                        }
                        // SAFETY: i8 weights exist only with `Simd::Avx2`. (The block is nested in
                        // the AVX2 branch of `dispatch!`, but the plain branch needs it.)
                        #[allow(unused_unsafe)]
                        unsafe {
                            quantize_avx2(row, 1.0 / *s, q)
                        };
                    }
                });
                Input::I16 {
                    values,
                    scales,
                    stride,
                }
            }
            #[cfg(target_arch = "x86_64")]
            Store::Q8(ref w) => {
                let k = self.k;
                Input::U8(dispatch!(
                    simd,
                    q8::Rows::quantize_in(x, m, k, w, parts, each)
                ))
            }
            _ => Input::F32(x),
        }
    }

    /// Writes `y[r][c] = x[r]·W[c] + b[c]` for the rows `rows` of `x` (from [`Packed::input`])
    /// and the columns of the panels `panels`; `y` has row stride `n`.
    ///
    /// # Safety
    /// `y` must point to a `rows.end × n` matrix that no one else reads or writes at those
    /// rows and columns during the call; `x` must hold at least `rows.end` rows.
    pub(crate) unsafe fn apply(
        &self,
        simd: Simd,
        x: &Input<'_>,
        rows: std::ops::Range<usize>,
        panels: std::ops::Range<usize>,
        y: *mut f32,
    ) {
        debug_assert!(panels.end <= self.panels());
        let k = self.k;
        let (n, bias) = (self.n, &self.bias);
        match (&self.data, x) {
            (Store::F32(w), Input::F32(x)) => {
                debug_assert!(x.len() >= rows.end * k);
                // SAFETY: as the caller vouches.
                unsafe { product_f32(simd, w, k, n, bias, x, rows, panels, y, n) }
            }
            #[cfg(target_arch = "x86_64")]
            (Store::F16(w), Input::F32(x)) => {
                debug_assert!(x.len() >= rows.end * k);
                // SAFETY: f16 weights exist only with `Simd::Avx2` (AVX2, FMA, F16C); the caller
                // vouches for `y`.
                unsafe {
                    tiles(n, n, rows, panels, y, |r, rr, p, dst, ldy| {
                        let w = w[p * k * NR..].as_ptr().cast();
                        let x = x[r * k..].as_ptr();
                        tile_avx2::<true>(rr, x, k, w, bias[p * NR..].as_ptr(), dst, ldy)
                    })
                }
            }
            #[cfg(target_arch = "x86_64")]
            (
                Store::I8 { data, scales },
                Input::I16 {
                    values,
                    scales: row_scales,
                    stride,
                },
            ) => {
                debug_assert!(values.len() >= rows.end * stride);
                // SAFETY: i8 weights exist only with `Simd::Avx2` (AVX2); the caller vouches for
                // `y`.
                unsafe {
                    tiles(n, n, rows, panels, y, |r, rr, p, dst, ldy| {
                        tile_i8(
                            rr,
                            values[r * stride..].as_ptr(),
                            row_scales[r..].as_ptr(),
                            *stride,
                            data[p * stride * NR..].as_ptr(),
                            scales[p * stride.div_ceil(I8_GROUP) * NR..].as_ptr(),
                            bias[p * NR..].as_ptr(),
                            dst,
                            ldy,
                        )
                    })
                }
            }
            #[cfg(target_arch = "x86_64")]
            (Store::Q8(w), Input::U8(x)) => {
                // Whole panels two at a time where the kernel takes pairs, the rest one by one.
                let mut single = panels;
                if w.kernel().pairs() {
                    let whole = single.end.min(n / NR).max(single.start);
                    let paired = single.start..single.start + (whole - single.start) / 2 * 2;
                    for p in paired.clone().step_by(2) {
                        for (r, rr) in row_tiles(rows.clone()) {
                            // SAFETY: Q8 weights exist only with `Simd::Avx2`; panels p and
                            // p + 1 are whole; the caller vouches for rows r..r+rr of `y` and
                            // `x`.
                            unsafe {
                                let dst = y.add(r * n + p * NR);
                                q8::tile::<2>(rr, x, r, w, p, bias[p * NR..].as_ptr(), dst, n)
                            }
                        }
                    }
                    single.start = paired.end;
                }
                // SAFETY: Q8 weights exist only with `Simd::Avx2`; the caller vouches for
                // `y` and the rows of `x`.
                unsafe {
                    tiles(n, n, rows, single, y, |r, rr, p, dst, ldy| {
                        q8::tile::<1>(rr, x, r, w, p, bias[p * NR..].as_ptr(), dst, ldy)
                    })
                }
            }
            #[allow(unreachable_patterns)]
            _ => unreachable!("an input prepared for other weights"),
        }
    }
}

/// `y[r][c] = x[r]·W[c] + bias[c]` for the rows `rows` of `x` (row stride `k`) and the columns
/// of the panels `panels` of `data` (f32 weights packed as in [`Packed`]); columns from `n` on
/// are not written; `y` has row stride `ldy`.
///
/// # Safety
/// `y` must point to a `rows.end × ldy` matrix that no one else reads or writes at those rows
/// and columns during the call.
#[allow(clippy::too_many_arguments)]
unsafe fn product_f32(
    simd: Simd,
    data: &[f32],
    k: usize,
    n: usize,
    bias: &[f32],
    x: &[f32],
    rows: std::ops::Range<usize>,
    panels: std::ops::Range<usize>,
    y: *mut f32,
    ldy: usize,
) {
    #[cfg(target_arch = "x86_64")]
    if simd == Simd::Avx2 {
        // SAFETY: AVX2 and FMA were detected; the caller vouches for `y`.
        unsafe {
            tiles(n, ldy, rows, panels, y, |r, rr, p, dst, ldy| {
                let w = data[p * k * NR..].as_ptr().cast();
                tile_avx2::<false>(
                    rr,
                    x[r * k..].as_ptr(),
                    k,
                    w,
                    bias[p * NR..].as_ptr(),
                    dst,
                    ldy,
                )
            })
        };
        return;
    }
    let _ = simd;
    for p in panels {
        let w = &data[p * k * NR..(p + 1) * k * NR];
        let bias = &bias[p * NR..(p + 1) * NR];
        let cols = NR.min(n - p * NR);
        for r in rows.clone() {
            let xr = &x[r * k..(r + 1) * k];
            let mut acc = [0f32; NR];
            for (&xv, wk) in xr.iter().zip(w.chunks_exact(NR)) {
                for (a, &wv) in acc.iter_mut().zip(wk) {
                    *a += xv * wv;
                }
            }
            for (j, (&a, &b)) in acc.iter().zip(bias).take(cols).enumerate() {
                // SAFETY: row r, column p·NR + j < n of the caller's matrix.
                unsafe { *y.add(r * ldy + p * NR + j) = a + b };
            }
        }
    }
}

/// Calls `tile(r, rr, p, dst, ldy)` for the tiles of `rr ≤ MR` rows from row `r` of panel `p`,
/// `dst` pointing to where the tile's `rr × NR` values go (row stride `ldy`): into `y` (row
/// stride `ldy`) for a whole panel, into a buffer copied out up to column `n` for a partial one.
#[cfg(target_arch = "x86_64")]
unsafe fn tiles(
    n: usize,
    ldy: usize,
    rows: std::ops::Range<usize>,
    panels: std::ops::Range<usize>,
    y: *mut f32,
    tile: impl Fn(usize, usize, usize, *mut f32, usize),
) {
    for p in panels {
        let cols = NR.min(n - p * NR);
        for (r, rr) in row_tiles(rows.clone()) {
            if cols == NR {
                // SAFETY: rows r..r+rr, columns p·NR.. of the caller's matrix.
                tile(r, rr, p, unsafe { y.add(r * ldy + p * NR) }, ldy);
            } else {
                let mut buf = [0f32; MR * NR];
                tile(r, rr, p, buf.as_mut_ptr(), NR);
                for i in 0..rr {
                    for j in 0..cols {
                        // SAFETY: row r + i, column p·NR + j < n.
                        unsafe { *y.add((r + i) * ldy + p * NR + j) = buf[i * NR + j] };
                    }
                }
            }
        }
    }
}

/// The tiles of `rows`, as (first row, row count): at most [`MR`] rows each, as even as
/// possible, since a tile of 1 or 2 rows would wait on the latency of its few accumulators.
#[cfg(target_arch = "x86_64")]
fn row_tiles(rows: std::ops::Range<usize>) -> impl Iterator<Item = (usize, usize)> {
    let tiles = (rows.end - rows.start).div_ceil(MR);
    let mut r = rows.start;
    (0..tiles).map(move |t| {
        let rr = (rows.end - r).div_ceil(tiles - t);
        r += rr;
        (r - rr, rr)
    })
}

/// `rr` (1..=MR) rows × 16 columns of a float product: `dst[i][j] = Σₖ x[i][k]·w[k][j] +
/// bias[j]`, `w` being f32 values or, when `HALF`, f16 bit patterns.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
#[allow(clippy::too_many_arguments)]
unsafe fn tile_avx2<const HALF: bool>(
    rr: usize,
    x: *const f32,
    k: usize,
    w: *const u8,
    bias: *const f32,
    dst: *mut f32,
    ldy: usize,
) {
    // SAFETY: as the caller vouches.
    unsafe { by_rows!(rr, R => tile_f::<R, HALF>(x, k, w, bias, dst, ldy)) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn tile_f<const R: usize, const HALF: bool>(
    x: *const f32,
    k: usize,
    w: *const u8,
    bias: *const f32,
    dst: *mut f32,
    ldy: usize,
) {
    use std::arch::x86_64::*;
    // SAFETY (whole body): the caller passes R rows of k values (row stride k), a k × 16 panel
    // and an R × 16 destination with row stride ldy.
    unsafe {
        let mut lo = [_mm256_setzero_ps(); R];
        let mut hi = [_mm256_setzero_ps(); R];
        // The next panel follows this one in memory: fetch it while this one is multiplied, so
        // that the weights (read once per query) stream in behind the arithmetic.
        let next = w.wrapping_add(k * NR * if HALF { 2 } else { 4 });
        let row_bytes = NR * if HALF { 2 } else { 4 };
        for kk in 0..k {
            _mm_prefetch::<_MM_HINT_T0>(next.wrapping_add(kk * row_bytes).cast());
            let (w0, w1) = if HALF {
                let p = w.cast::<u16>().add(kk * NR);
                (
                    _mm256_cvtph_ps(_mm_loadu_si128(p.cast())),
                    _mm256_cvtph_ps(_mm_loadu_si128(p.add(8).cast())),
                )
            } else {
                let p = w.cast::<f32>().add(kk * NR);
                (_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8)))
            };
            for i in 0..R {
                let xv = _mm256_broadcast_ss(&*x.add(i * k + kk));
                lo[i] = _mm256_fmadd_ps(xv, w0, lo[i]);
                hi[i] = _mm256_fmadd_ps(xv, w1, hi[i]);
            }
        }
        let b0 = _mm256_loadu_ps(bias);
        let b1 = _mm256_loadu_ps(bias.add(8));
        for i in 0..R {
            _mm256_storeu_ps(dst.add(i * ldy), _mm256_add_ps(lo[i], b0));
            _mm256_storeu_ps(dst.add(i * ldy + 8), _mm256_add_ps(hi[i], b1));
        }
    }
}

/// `rr` (1..=MR) rows × 16 columns of an integer product: `x` holds 15-bit inputs (row stride
/// `kp`, even) with one scale per row, `w` a panel of i8 weight pairs with one scale per column.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn tile_i8(
    rr: usize,
    x: *const i16,
    x_scales: *const f32,
    kp: usize,
    w: *const i8,
    w_scales: *const f32,
    bias: *const f32,
    dst: *mut f32,
    ldy: usize,
) {
    // SAFETY: as the caller vouches.
    unsafe { by_rows!(rr, R => tile_q::<R>(x, x_scales, kp, w, w_scales, bias, dst, ldy)) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
#[allow(clippy::too_many_arguments)]
unsafe fn tile_q<const R: usize>(
    x: *const i16,
    x_scales: *const f32,
    kp: usize,
    w: *const i8,
    w_scales: *const f32,
    bias: *const f32,
    dst: *mut f32,
    ldy: usize,
) {
    use std::arch::x86_64::*;
    // SAFETY (whole body): the caller passes R rows of kp 16-bit values (row stride kp) and
    // their R scales, a panel of kp/2 × 32 weight bytes with 16 scales, and an R × 16
    // destination with row stride ldy.
    unsafe {
        let mut flo = [_mm256_setzero_ps(); R];
        let mut fhi = [_mm256_setzero_ps(); R];
        let mut start = 0;
        let mut scales = w_scales;
        while start < kp {
            let end = (start + I8_GROUP).min(kp);
            let mut lo = [_mm256_setzero_si256(); R];
            let mut hi = [_mm256_setzero_si256(); R];
            for t in start / 2..end / 2 {
                let wp = w.add(t * 32);
                // Fetch the next panel while this one is multiplied (see `tile_f`).
                _mm_prefetch::<_MM_HINT_T0>(wp.wrapping_add(kp * NR).cast());
                let w0 = _mm256_cvtepi8_epi16(_mm_loadu_si128(wp.cast()));
                let w1 = _mm256_cvtepi8_epi16(_mm_loadu_si128(wp.add(16).cast()));
                for i in 0..R {
                    let pair = x.add(i * kp + 2 * t).cast::<i32>().read_unaligned();
                    let xv = _mm256_set1_epi32(pair);
                    lo[i] = _mm256_add_epi32(lo[i], _mm256_madd_epi16(xv, w0));
                    hi[i] = _mm256_add_epi32(hi[i], _mm256_madd_epi16(xv, w1));
                }
            }
            let s0 = _mm256_loadu_ps(scales);
            let s1 = _mm256_loadu_ps(scales.add(8));
            for i in 0..R {
                flo[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lo[i]), s0, flo[i]);
                fhi[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(hi[i]), s1, fhi[i]);
            }
            scales = scales.add(NR);
            start = end;
        }
        let b0 = _mm256_loadu_ps(bias);
        let b1 = _mm256_loadu_ps(bias.add(8));
        for i in 0..R {
            let xs = _mm256_set1_ps(*x_scales.add(i));
            let lo = _mm256_fmadd_ps(flo[i], xs, b0);
            let hi = _mm256_fmadd_ps(fhi[i], xs, b1);
            _mm256_storeu_ps(dst.add(i * ldy), lo);
            _mm256_storeu_ps(dst.add(i * ldy + 8), hi);
        }
    }
}

/// `q[i] = round(row[i] · inv)` (nearest, ties to even), for values within ±32767.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn quantize_avx2(row: &[f32], inv: f32, q: &mut [i16]) {
    use std::arch::x86_64::*;
    let n = row.len().min(q.len());
    let mut i = 0;
    // SAFETY: 16 values read from row and written to q at i + 16 ≤ n.
    unsafe {
        let inv_v = _mm256_set1_ps(inv);
        while i + 16 <= n {
            // Conversion rounds as MXCSR says: to nearest, ties to even.
            let a = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(row.as_ptr().add(i)), inv_v));
            let b = _mm256_cvtps_epi32(_mm256_mul_ps(
                _mm256_loadu_ps(row.as_ptr().add(i + 8)),
                inv_v,
            ));
            // packs interleaves the 128-bit halves; the permutation restores the order.
            let p = _mm256_permute4x64_epi64::<0xD8>(_mm256_packs_epi32(a, b));
            _mm256_storeu_si256(q.as_mut_ptr().add(i).cast(), p);
            i += 16;
        }
    }
    for j in i..n {
        q[j] = (row[j] * inv).round_ties_even() as i16;
    }
}

/// f32 → f16 bit patterns, rounding to nearest even. `from.len()` must be a multiple of 8 and
/// `to` as long.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c")]
unsafe fn to_f16(from: &[f32], to: &mut [u16]) {
    use std::arch::x86_64::*;
    assert!(from.len().is_multiple_of(8) && to.len() == from.len());
    for (f, t) in from.chunks_exact(8).zip(to.chunks_exact_mut(8)) {
        // SAFETY: 8 values read, 8 written.
        unsafe {
            let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm256_loadu_ps(f.as_ptr()));
            _mm_storeu_si128(t.as_mut_ptr().cast(), h);
        }
    }
}

/// erf(x) as a rational function of x (Eigen's `generic_fast_erf_float`): absolute error
/// below 1e-7, no branches, so a loop of it vectorises.
#[inline(always)]
#[allow(clippy::excessive_precision)]
fn erf(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = x2 * -2.726_142_3e-10 + 2.770_681_4e-8;
    p = x2 * p + -2.101_024e-6;
    p = x2 * p + -5.692_506_4e-5;
    p = x2 * p + -7.349_906_3e-4;
    p = x2 * p + -2.954_599_8e-3;
    p = x2 * p + -1.609_603_3e-2;
    p *= x;
    let mut q = x2 * -1.456_607_2e-5 + -2.133_740_6e-4;
    q = x2 * q + -1.682_827e-3;
    q = x2 * q + -7.373_329e-3;
    q = x2 * q + -1.426_473_9e-2;
    p / q
}

/// e^x for x ≤ 0 (Cephes `expf`: range reduction by ln 2, a degree-6 polynomial); relative
/// error about 2e-7; inputs below −87 give e^−87.
#[inline(always)]
#[allow(clippy::excessive_precision)]
fn exp_neg(x: f32) -> f32 {
    let x = x.clamp(-87.0, 0.0);
    // Round x·log2(e) to the nearest integer by the 1.5·2²³ trick (no call, vectorises).
    const MAGIC: f32 = 12_582_912.0;
    let shifted = x * std::f32::consts::LOG2_E + MAGIC;
    let n = shifted - MAGIC;
    let r = x - n * 0.693_359_375 - n * -2.121_944_4e-4;
    let mut y = 1.987_569_1e-4f32;
    y = y * r + 1.398_2e-3;
    y = y * r + 8.333_452e-3;
    y = y * r + 4.166_579_6e-2;
    y = y * r + 0.166_666_65;
    y = y * r + 0.5;
    y = y * r * r + r + 1.0;
    // 2ⁿ from the bits of `shifted`, whose low mantissa bits hold n (−126..=0) over 2²²: an
    // integer subtraction and shift, which vectorise, where `n as i32` (a saturating
    // conversion) would be taken one value at a time.
    let biased = shifted
        .to_bits()
        .wrapping_sub(MAGIC.to_bits())
        .wrapping_add(127);
    y * f32::from_bits(biased << 23)
}

/// The activations BERT configurations name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Activation {
    /// `x·Φ(x)` with the exact (erf) normal CDF.
    Gelu,
    /// The tanh approximation of GELU.
    GeluTanh,
    Relu,
}

#[inline(always)]
fn activate_body(act: Activation, v: &mut [f32]) {
    match act {
        Activation::Gelu => {
            for x in v {
                *x = 0.5 * *x * (1.0 + erf(*x * std::f32::consts::FRAC_1_SQRT_2));
            }
        }
        Activation::GeluTanh => {
            for x in v {
                let u = 0.797_884_6 * (*x + 0.044_715 * *x * *x * *x);
                *x = 0.5 * *x * (1.0 + u.tanh());
            }
        }
        Activation::Relu => {
            for x in v {
                *x = x.max(0.0);
            }
        }
    }
}

/// Applies `act` to every value of `v`.
pub(crate) fn activate(simd: Simd, act: Activation, v: &mut [f32]) {
    dispatch!(simd, activate_body(act, v))
}

#[inline(always)]
fn softmax_body(v: &mut [f32]) {
    let max = max_of(v);
    // Exponentials first (a loop the compiler vectorises), then their sum.
    for x in v.iter_mut() {
        *x = exp_neg(*x - max);
    }
    let inv = 1.0 / sum8(v, |x| x);
    for x in v {
        *x *= inv;
    }
}

/// The largest `f(x)` over `v` (`−∞` when empty), in sixteen interleaved partial maxima (one or
/// two vectors; a plain fold would compare one value at a time). Maxima are exact, so the
/// grouping does not change the result.
#[inline(always)]
fn max_by(v: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut acc = [f32::NEG_INFINITY; 16];
    let chunks = v.chunks_exact(16);
    let rest = chunks
        .remainder()
        .iter()
        .fold(f32::NEG_INFINITY, |m, &x| m.max(f(x)));
    for c in chunks {
        for (a, &x) in acc.iter_mut().zip(c) {
            *a = a.max(f(x));
        }
    }
    acc.iter().fold(rest, |m, &x| m.max(x))
}

/// The largest value in `v` (`−∞` when empty).
#[inline(always)]
fn max_of(v: &[f32]) -> f32 {
    max_by(v, |x| x)
}

/// The largest magnitude in `v` (0 when empty).
#[inline(always)]
fn max_abs(v: &[f32]) -> f32 {
    max_by(v, f32::abs).max(0.0)
}

/// A sum in eight interleaved partial sums, which the compiler can keep in one vector.
#[inline(always)]
fn sum8(v: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut acc = [0f32; 8];
    let chunks = v.chunks_exact(8);
    let rest: f32 = chunks.remainder().iter().map(|&x| f(x)).sum();
    for c in chunks {
        for (a, &x) in acc.iter_mut().zip(c) {
            *a += f(x);
        }
    }
    acc.iter().sum::<f32>() + rest
}

#[inline(always)]
fn layer_norm_body(v: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32) {
    let n = v.len() as f32;
    let mean = sum8(v, |x| x) / n;
    let var = sum8(v, |x| (x - mean) * (x - mean)) / n;
    let inv = 1.0 / (var + eps).sqrt();
    for ((x, g), b) in v.iter_mut().zip(gamma).zip(beta) {
        *x = (*x - mean) * inv * g + b;
    }
}

/// Layer norm of every `gamma.len()`-long row of `v`, with a residual added first when given.
pub(crate) fn layer_norm(
    simd: Simd,
    v: &mut [f32],
    residual: Option<&[f32]>,
    gamma: &[f32],
    beta: &[f32],
    eps: f32,
) {
    dispatch!(simd, {
        let h = gamma.len();
        if let Some(res) = residual {
            for (x, r) in v.iter_mut().zip(res) {
                *x += r;
            }
        }
        for row in v.chunks_exact_mut(h) {
            layer_norm_body(row, gamma, beta, eps);
        }
    })
}

/// Self-attention of one sequence and one head. `qkv` holds the sequence's `len` rows (stride
/// `stride`) with the head's query, key and value at columns `q`, `k` and `v` (each `d` long);
/// writes the `len × d` context to `out` (row stride `ldo`). Both products (scores = Q·Kᵀ,
/// context = P·V) run on the f32 product kernel, the keys and the values packed as its
/// "weights" (keys padded to whole panels with zero scores that the softmax leaves out).
/// `scratch` is reused between calls: it grows to the longest sequence and is never filled
/// whole, only where padding must read as zero.
///
/// # Safety
/// `out` must point to `len` rows of `d` writable values, row stride `ldo`, that no one else
/// reads or writes during the call.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn attention_head(
    simd: Simd,
    qkv: &[f32],
    len: usize,
    stride: usize,
    (q, k, v): (usize, usize, usize),
    d: usize,
    scale: f32,
    (out, ldo): (*mut f32, usize),
    scratch: &mut Vec<f32>,
) {
    let lp = len.div_ceil(NR) * NR;
    let dp = d.div_ceil(NR) * NR;
    let need = len * d + lp * d + len * lp + lp * dp + lp.max(dp);
    if scratch.len() < need {
        scratch.resize(need, 0.0);
    }
    let (queries, rest) = scratch.split_at_mut(len * d);
    let (keys, rest) = rest.split_at_mut(lp * d);
    let (scores, rest) = rest.split_at_mut(len * lp);
    let (values, rest) = rest.split_at_mut(lp * dp);
    let zeros = &mut rest[..lp.max(dp)];
    // What the products read beyond the sequence: the padding keys of the last panel, the
    // padding rows and columns of the values, and the zero bias.
    zeros.fill(0.0);
    keys[(lp - NR) * d..].fill(0.0);
    values.fill(0.0);
    for j in 0..len {
        let row = &qkv[j * stride..];
        for (x, &y) in queries[j * d..(j + 1) * d].iter_mut().zip(&row[q..q + d]) {
            *x = y * scale;
        }
        // Key j is column j % NR of panel j / NR (d × NR).
        let panel = &mut keys[(j / NR) * d * NR..];
        for (c, &y) in row[k..k + d].iter().enumerate() {
            panel[c * NR + j % NR] = y;
        }
        // Value dimensions are the outputs: panel c / NR holds row j's values c..c+NR.
        for (pc, part) in row[v..v + d].chunks(NR).enumerate() {
            values[pc * lp * NR + j * NR..][..part.len()].copy_from_slice(part);
        }
    }
    // SAFETY: scores is len × lp, written in full; queries len × d.
    unsafe {
        product_f32(
            simd,
            keys,
            d,
            lp,
            &zeros[..lp],
            queries,
            0..len,
            0..lp / NR,
            scores.as_mut_ptr(),
            lp,
        )
    };
    dispatch!(simd, {
        for row in scores.chunks_exact_mut(lp) {
            let (real, padding) = row.split_at_mut(len);
            softmax_body(real);
            padding.fill(0.0);
        }
    });
    // SAFETY: the caller vouches for `out` (columns from d on are not written); scores is
    // len × lp.
    unsafe {
        product_f32(
            simd,
            values,
            lp,
            d,
            &zeros[..dp],
            scores,
            0..len,
            0..dp / NR,
            out,
            ldo,
        )
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An [`Each`] that runs the parts one after another on this thread.
    pub(super) fn in_turn(count: usize, f: &(dyn Fn(usize) + Sync)) {
        (0..count).for_each(f)
    }

    /// erf by its Taylor series, in f64 (exact to about 1e-9 for |x| ≤ 4; beyond, erf is ±1
    /// within 2e-8).
    fn erf_ref(x: f64) -> f64 {
        if x.abs() > 4.0 {
            return x.signum();
        }
        let mut sum = 0.0;
        let mut term = x;
        let mut n = 0.0;
        while term.abs() > 1e-17 || n < 5.0 {
            sum += term / (2.0 * n + 1.0);
            n += 1.0;
            term *= -x * x / n;
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    }

    #[test]
    fn erf_and_exp_are_accurate() {
        for i in -600..=600 {
            let x = i as f32 / 100.0;
            let e = (erf(x) as f64 - erf_ref(x as f64)).abs();
            assert!(e < 5e-7, "erf({x}) off by {e}");
        }
        for i in 0..=8700 {
            let x = -(i as f32) / 100.0;
            let want = (x as f64).exp();
            let rel = ((exp_neg(x) as f64 - want) / want).abs();
            assert!(rel < 1e-6, "exp({x}) off by {rel}");
        }
        assert!(exp_neg(-1000.0) > 0.0 && exp_neg(-1000.0) < 1e-37);
    }

    /// Weights (`n × k`), biases and inputs (`m × k`) of a test product, varied but fixed.
    fn sample(n: usize, k: usize, m: usize) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
        let w = (0..n * k)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 97.0)
            .collect();
        let b = (0..n).map(|i| i as f32 / 10.0).collect();
        let x = (0..m * k)
            .map(|i| ((i * 13 % 29) as f32 - 14.0) / 31.0)
            .collect();
        (w, b, x)
    }

    fn product(
        simd: Simd,
        precision: Precision,
        n: usize,
        k: usize,
        m: usize,
    ) -> (Vec<f32>, Vec<f32>) {
        let (w, b, x) = sample(n, k, m);
        let packed = Packed::new(&w, &b, n, k, simd, precision);
        let mut y = vec![f32::NAN; m * n];
        // Two calls over disjoint panels and rows, as threads would make them.
        let half = packed.panels() / 2;
        // SAFETY: y is m × n and each call writes its own panels.
        unsafe {
            let x = packed.input(simd, &x, m, 3, &in_turn);
            packed.apply(simd, &x, 0..m, 0..half, y.as_mut_ptr());
            packed.apply(simd, &x, 0..m / 2, half..packed.panels(), y.as_mut_ptr());
            packed.apply(simd, &x, m / 2..m, half..packed.panels(), y.as_mut_ptr());
        }
        let mut want = vec![0f32; m * n];
        for r in 0..m {
            for c in 0..n {
                let dot: f64 = (0..k)
                    .map(|i| x[r * k + i] as f64 * w[c * k + i] as f64)
                    .sum();
                want[r * n + c] = (dot + b[c] as f64) as f32;
            }
        }
        (y, want)
    }

    /// However the panels and rows of an 8-bit product are split among calls (as threads split
    /// them), every value is the one a call for its panel alone gives, bit for bit: on AVX-512
    /// VNNI, where whole panels go two at a time from any start, as on the other kernels.
    #[test]
    fn eight_bit_products_are_the_same_however_the_panels_are_split() {
        let simd = Simd::detect();
        if simd == Simd::Portable {
            return; // No 8-bit kernels without AVX2.
        }
        let (n, k, m) = (4 * NR + 5, 200, 13);
        let (w, b, x) = sample(n, k, m);
        let packed = Packed::new(&w, &b, n, k, simd, Precision::Q8);
        assert_eq!(packed.panels(), 5);
        let input = packed.input(simd, &x, m, 1, &in_turn);
        let run = |calls: &[(std::ops::Range<usize>, std::ops::Range<usize>)]| {
            let mut y = vec![f32::NAN; m * n];
            for (rows, panels) in calls {
                // SAFETY: y is m × n; the calls write disjoint panels or rows.
                unsafe { packed.apply(simd, &input, rows.clone(), panels.clone(), y.as_mut_ptr()) };
            }
            y
        };
        let alone: Vec<_> = (0..5).map(|p| (0..m, p..p + 1)).collect();
        let want = run(&alone);
        assert!(want.iter().all(|v| v.is_finite()));
        for calls in [
            vec![(0..m, 0..5)],
            vec![(0..m, 0..1), (0..m, 1..5)],
            vec![(0..m, 1..4), (0..m, 0..1), (0..m, 4..5), (0..m, 5..5)],
            vec![(0..m, 0..2), (0..m, 2..4), (0..m, 4..5)],
            vec![(0..7, 0..5), (7..m, 0..3), (7..m, 3..5)],
        ] {
            let got = run(&calls);
            for (at, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(
                    g.to_bits(),
                    w.to_bits(),
                    "{calls:?}: value {at}: {g} for {w}"
                );
            }
        }
    }

    /// Inputs and weights all at their groups' largest magnitude, of the same and of opposite
    /// signs: the 8-bit products' 16-bit pairs (`vpmaddubsw` on AVX2), and the sums of two runs'
    /// pairs, must not saturate.
    #[test]
    fn the_largest_8_bit_products_sum_exactly() {
        if Simd::detect() == Simd::Portable {
            return;
        }
        let simd = Simd::detect();
        let (n, k) = (16, 128);
        for (w, x) in [(1.0f32, 1.0f32), (1.0, -1.0), (-1.0, -1.0), (-1.0, 1.0)] {
            let packed = Packed::new(&vec![w; n * k], &[0.0; 16], n, k, simd, Precision::Q8);
            let (xs, mut y) = (vec![x; k], vec![f32::NAN; n]);
            // SAFETY: y is 1 × n.
            unsafe {
                let input = packed.input(simd, &xs, 1, 1, &in_turn);
                packed.apply(simd, &input, 0..1, 0..1, y.as_mut_ptr());
            }
            let want = w * x * k as f32;
            assert!(y.iter().all(|v| (v - want).abs() < 1e-3), "{w}·{x}: {y:?}");
        }
    }

    #[test]
    fn packed_products_match_a_plain_product() {
        let mut kinds = vec![(Simd::Portable, Precision::F32)];
        if Simd::detect() != Simd::Portable {
            kinds.push((Simd::detect(), Precision::F32));
            kinds.push((Simd::detect(), Precision::F16));
            kinds.push((Simd::detect(), Precision::I8));
            kinds.push((Simd::detect(), Precision::Q8));
        }
        for (simd, precision) in kinds {
            // f16 weights: a relative error of 2⁻¹¹ each, on sums of up to 384 terms below 1.
            // i8 weights: 1/254 of the column's largest weight each.
            let tolerance = match precision {
                Precision::F32 => 1e-4,
                Precision::F16 => 2e-2,
                Precision::I8 => 1e-1,
                // and 8-bit inputs: 1/254 of their group's largest value each (1/126 on AVX2,
                // whose inputs keep 7 bits).
                Precision::Q8 => 2e-1,
            };
            for (n, k, m) in [
                (48, 40, 13),
                (40, 7, 1),
                (16, 384, 6),
                (35, 9, 20),
                (32, 1000, 7),
            ] {
                let (y, want) = product(simd, precision, n, k, m);
                for (a, b) in y.iter().zip(&want) {
                    assert!(
                        (a - b).abs() < tolerance,
                        "{simd:?} {precision:?} {n}×{k}×{m}: {a} vs {b}"
                    );
                }
            }
        }
        // Weights stored in f16 are f16 only where the CPU can read them.
        let p = Packed::new(
            &[1.0; 16],
            &[0.0; 16],
            16,
            1,
            Simd::Portable,
            Precision::F16,
        );
        assert_eq!(p.precision(), Precision::F32);
        // 8-bit inputs wherever AVX2 is (VNNI or not).
        let p = Packed::new(&[1.0; 16], &[0.0; 16], 16, 1, Simd::detect(), Precision::Q8);
        let want = match Simd::detect() {
            Simd::Portable => Precision::F32,
            _ => Precision::Q8,
        };
        assert_eq!(p.precision(), want);
    }

    /// Attention of one head written out plainly, in f64: softmax(Q·Kᵀ·scale)·V.
    fn attention_ref(qkv: &[f32], len: usize, stride: usize, at: [usize; 3], d: usize) -> Vec<f64> {
        let scale = 1.0 / (d as f64).sqrt();
        let get = |j: usize, part: usize, c: usize| f64::from(qkv[j * stride + at[part] + c]);
        let mut out = vec![0f64; len * d];
        for i in 0..len {
            let scores: Vec<f64> = (0..len)
                .map(|j| (0..d).map(|c| get(i, 0, c) * get(j, 1, c)).sum::<f64>() * scale)
                .collect();
            let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let exps: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
            let total: f64 = exps.iter().sum();
            for c in 0..d {
                out[i * d + c] = (0..len).map(|j| exps[j] * get(j, 2, c)).sum::<f64>() / total;
            }
        }
        out
    }

    #[test]
    fn attention_matches_a_plain_one_whatever_the_scratch_held_before() {
        // One scratch for every call, the longest sequence first, so that later calls find
        // the values of earlier ones in it; heads of 32 dimensions (whole panels) and of 24 (a
        // partial one); the context written into a wider matrix, whose other columns must stay.
        for simd in [Simd::Portable, Simd::detect()] {
            let mut scratch = Vec::new();
            for (len, d) in [(40, 32), (17, 32), (16, 24), (5, 24), (1, 32), (33, 24)] {
                let stride = 3 * d + 5;
                let qkv: Vec<f32> = (0..len * stride)
                    .map(|i| ((i * 7919 % 1013) as f32 / 1013.0 - 0.5) * 3.0)
                    .collect();
                let at = [1, d + 3, 2 * d + 4];
                let ldo = d + 7;
                let mut out = vec![f32::NAN; len * ldo];
                // SAFETY: `out` holds len rows of ldo ≥ d values.
                unsafe {
                    attention_head(
                        simd,
                        &qkv,
                        len,
                        stride,
                        (at[0], at[1], at[2]),
                        d,
                        1.0 / (d as f32).sqrt(),
                        (out.as_mut_ptr(), ldo),
                        &mut scratch,
                    )
                };
                let want = attention_ref(&qkv, len, stride, at, d);
                for i in 0..len {
                    for c in 0..ldo {
                        let got = out[i * ldo + c];
                        if c < d {
                            let w = want[i * d + c];
                            assert!(
                                (f64::from(got) - w).abs() < 1e-5,
                                "{simd:?} len {len} d {d} [{i}][{c}]: {got} vs {w}"
                            );
                        } else {
                            assert!(got.is_nan(), "{simd:?} len {len} d {d}: column {c} written");
                        }
                    }
                }
            }
        }
    }
}
