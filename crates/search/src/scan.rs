//! The cosine scan of a large catalog, on 8-bit copies of the tool vectors.
//!
//! A search compares the query's vector with every tool's. At 125,000 tools of 384 values that
//! is 192 MB of f32 read per query, which memory bandwidth alone makes a 20 ms affair on a small
//! machine. [`Codes`] keeps each vector as 8-bit integers with one scale (a quarter of the
//! bytes); the scan ranks every tool by that approximate cosine (error about 1e-3 for unit
//! vectors), keeps [`OVERSAMPLE`] times the candidates asked for, and the caller re-scores those
//! few with the exact f32 vectors. Catalogs up to [`EXACT_UP_TO`] tools are scanned exactly.

/// Catalogs up to this many vectors are scanned in f32 (fast enough; nothing approximate).
pub const EXACT_UP_TO: usize = 20_000;
/// Candidates kept from the approximate scan per candidate asked for.
pub const OVERSAMPLE: usize = 4;
/// Fewest candidates kept from the approximate scan.
const MIN_CANDIDATES: usize = 64;

/// 8-bit copies of a set of vectors: `codes[d·dim..]` times `scales[d]` ≈ vector `d`.
#[derive(Debug, Clone, Default)]
pub struct Codes {
    dim: usize,
    codes: Vec<i8>,
    scales: Vec<f32>,
}

impl Codes {
    /// Quantises `vectors` (`dim` values each).
    pub fn new(vectors: &[f32], dim: usize) -> Self {
        let mut codes = vec![0i8; vectors.len()];
        let scales = vectors
            .chunks_exact(dim.max(1))
            .zip(codes.chunks_exact_mut(dim.max(1)))
            .map(|(v, c)| quantize(v, c))
            .collect();
        Self { dim, codes, scales }
    }

    /// Vectors held.
    pub fn len(&self) -> usize {
        self.scales.len()
    }

    /// Whether no vector is held.
    pub fn is_empty(&self) -> bool {
        self.scales.is_empty()
    }

    /// Bytes the copies take.
    pub fn bytes(&self) -> usize {
        self.codes.len() + self.scales.len() * 4
    }

    /// The approximate dot product of every vector `d` with `query` for which `keep(d)`, as
    /// `(d, score)`.
    pub fn scores(&self, query: &[f32], keep: impl Fn(usize) -> bool) -> Vec<(usize, f32)> {
        let mut q = vec![0i8; self.dim];
        let qs = quantize(query, &mut q);
        self.codes
            .chunks_exact(self.dim.max(1))
            .zip(&self.scales)
            .enumerate()
            .filter(|(d, _)| keep(*d))
            .map(|(d, (c, s))| (d, dot_i8(c, &q) as f32 * s * qs))
            .collect()
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
        assert_eq!(codes.bytes(), 200 * dim + 200 * 4);
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
    fn zero_and_odd_length_vectors_are_handled() {
        let codes = Codes::new(&[0.0; 6], 3);
        assert_eq!(
            codes.scores(&[1.0, 0.0, 0.0], |_| true),
            [(0, 0.0), (1, 0.0)]
        );
        assert_eq!(dot_i8(&[1; 17], &[2; 17]), 34);
        assert!(Codes::new(&[], 384).is_empty());
        assert_eq!(candidates(10), 64);
        assert_eq!(candidates(50), 200);
    }
}
