//! Q8_0: 32 weights per block, one f16 scale, signed 8-bit quants. Also the activation
//! format ggml's CPU backend pairs with Q8_0 and Q5_0 weights.
//!
//! Block layout (34 bytes, 2-byte aligned):
//! | offset | size | field | meaning |
//! |---|---|---|---|
//! | 0 | 2 | `d` | f16 scale |
//! | 2 | 32 | `qs` | i8 quants; value `i` is `d * qs[i]` |
//!
//! Dequantize: `qs[i] as f32 * d` (one rounding; matches gguf-py bit for bit).
//!
//! Quantize ([`quantize_row`]): ggml's reference `quantize_row_q8_0_ref`, which gguf-py
//! reproduces: `amax = max |x|`, `d = amax / 127`, `id = d != 0 ? 1/d : 0`,
//! `qs = roundf(x * id)` (ties away from zero), `d` stored rounded to f16 (nearest-even).
//! [`quantize_row_x86`] is what ggml-cpu's x86 build (AVX/AVX2/AVX-512) actually runs as
//! `from_float` for Q8_0 activations: `id = 127 / amax` and ties to even. The two differ
//! only on rounding ties and one-ulp differences of `id`.
//!
//! Dot product (Q8_0·Q8_0): per block the exact integer `isum = Σ x.qs[i]·y.qs[i]`, then
//! `acc = acc + (d_x * d_y) * (isum as f32)` block by block in order (this is ggml's
//! generic order). The AVX2 kernel computes the integer sums in SIMD and the float steps in
//! the same scalar order: bit-identical. Invariant for the AVX2 path: the activation
//! operand `y` has no `-128` quant (our quantizers produce `[-127, 127]`).

use bytemuck::{Pod, Zeroable};
use half::f16;

use crate::simd::{self, SimdLevel};

/// Elements per block.
pub const QK8_0: usize = 32;

/// One Q8_0 block.
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ8_0 {
    pub d: f16,
    pub qs: [i8; QK8_0],
}

const _: () = assert!(std::mem::size_of::<BlockQ8_0>() == 34);

/// Dequantize to f32. Panics unless `y.len() == x.len() * 32`.
pub fn dequantize_row(x: &[BlockQ8_0], y: &mut [f32]) {
    assert_eq!(
        y.len(),
        x.len() * QK8_0,
        "q8_0 dequantize_row: length mismatch"
    );
    for (b, out) in x.iter().zip(y.chunks_exact_mut(QK8_0)) {
        let d = b.d.to_f32();
        for (o, q) in out.iter_mut().zip(&b.qs) {
            *o = f32::from(*q) * d;
        }
    }
}

/// Dequantize to the exact values in f64. Panics unless `y.len() == x.len() * 32`.
pub fn dequantize_row_f64(x: &[BlockQ8_0], y: &mut [f64]) {
    assert_eq!(
        y.len(),
        x.len() * QK8_0,
        "q8_0 dequantize_row_f64: length mismatch"
    );
    for (b, out) in x.iter().zip(y.chunks_exact_mut(QK8_0)) {
        let d = b.d.to_f64();
        for (o, q) in out.iter_mut().zip(&b.qs) {
            *o = f64::from(*q) * d;
        }
    }
}

/// Quantize like ggml's `quantize_row_q8_0_ref` (bit-exact). Panics unless
/// `x.len() == y.len() * 32`.
pub fn quantize_row(x: &[f32], y: &mut [BlockQ8_0]) {
    assert_eq!(
        x.len(),
        y.len() * QK8_0,
        "q8_0 quantize_row: length mismatch"
    );
    for (b, xs) in y.iter_mut().zip(x.chunks_exact(QK8_0)) {
        let amax = xs.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        b.d = f16::from_f32(d);
        for (q, v) in b.qs.iter_mut().zip(xs) {
            *q = (v * id).round() as i8;
        }
    }
}

/// Quantize like ggml-cpu's x86 `quantize_row_q8_0` (AVX/AVX2 builds): `d = amax / 127`,
/// `id = 127 / amax`, round half to even, saturate to i8. Panics unless
/// `x.len() == y.len() * 32`.
pub fn quantize_row_x86(x: &[f32], y: &mut [BlockQ8_0]) {
    assert_eq!(
        x.len(),
        y.len() * QK8_0,
        "q8_0 quantize_row_x86: length mismatch"
    );
    for (b, xs) in y.iter_mut().zip(x.chunks_exact(QK8_0)) {
        let amax = xs.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
        b.d = f16::from_f32(d);
        for (q, v) in b.qs.iter_mut().zip(xs) {
            *q = (v * id).round_ties_even() as i8;
        }
    }
}

/// Integer dot product of one block pair.
#[inline]
pub(crate) fn block_isum(x: &[i8; 32], y: &[i8; 32]) -> i32 {
    x.iter()
        .zip(y)
        .map(|(a, b)| i32::from(*a) * i32::from(*b))
        .sum()
}

/// The float step shared by both paths.
#[inline(always)]
pub(crate) fn accumulate(acc: f32, dx: f32, dy: f32, isum: i32) -> f32 {
    acc + (dx * dy) * isum as f32
}

/// Scalar reference Q8_0·Q8_0. Panics if the block counts differ.
pub fn vec_dot_ref(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
    assert_eq!(x.len(), y.len(), "q8_0 vec_dot: block count mismatch");
    let mut acc = 0f32;
    for (a, b) in x.iter().zip(y) {
        acc = accumulate(acc, a.d.to_f32(), b.d.to_f32(), block_isum(&a.qs, &b.qs));
    }
    acc
}

/// Q8_0·Q8_0 at an explicit SIMD level. Panics if the block counts differ or the level is
/// not available on this CPU.
pub fn vec_dot_at(level: SimdLevel, x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
    assert_eq!(x.len(), y.len(), "q8_0 vec_dot: block count mismatch");
    match level {
        SimdLevel::Scalar => vec_dot_ref(x, y),
        SimdLevel::Avx2 | SimdLevel::Avx512 | SimdLevel::Avx512Vnni => {
            simd::require(level);
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `require` checked AVX2/FMA/F16C; block counts are equal.
            unsafe {
                avx2::vec_dot(x, y)
            }
            #[cfg(not(target_arch = "x86_64"))]
            unreachable!()
        }
    }
}

/// Q8_0·Q8_0 at the process-wide SIMD level.
pub fn vec_dot(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
    vec_dot_at(simd::simd_level(), x, y)
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{accumulate, BlockQ8_0};
    use crate::avx2::{block_steps_8, f16_to_f32, hsum_i32_8, reduce_i32_8x8};
    use std::arch::x86_64::*;

    /// Eight i32 partial sums of one block pair's integer dot product.
    ///
    /// # Safety
    /// AVX2 must be available.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn block_partial(x: &BlockQ8_0, y: &BlockQ8_0) -> __m256i {
        // SAFETY: each `qs` is 32 bytes; unaligned loads.
        let xv = _mm256_loadu_si256(x.qs.as_ptr() as *const __m256i);
        let yv = _mm256_loadu_si256(y.qs.as_ptr() as *const __m256i);
        // |x| as u8 (128 for -128) times y with x's sign: exact while y != -128.
        let p = _mm256_maddubs_epi16(_mm256_abs_epi8(xv), _mm256_sign_epi8(yv, xv));
        _mm256_madd_epi16(p, _mm256_set1_epi16(1))
    }

    /// # Safety
    /// AVX2/FMA/F16C must be available and `x.len() == y.len()`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn vec_dot(x: &[BlockQ8_0], y: &[BlockQ8_0]) -> f32 {
        let mut acc = 0f32;
        let mut xc = x.chunks_exact(8);
        let mut yc = y.chunks_exact(8);
        for (xs, ys) in (&mut xc).zip(&mut yc) {
            let parts: [__m256i; 8] = std::array::from_fn(|b| block_partial(&xs[b], &ys[b]));
            let dx: [u16; 8] = std::array::from_fn(|b| xs[b].d.to_bits());
            let dy: [u16; 8] = std::array::from_fn(|b| ys[b].d.to_bits());
            acc = block_steps_8(acc, &dx, &dy, reduce_i32_8x8(&parts));
        }
        for (a, b) in xc.remainder().iter().zip(yc.remainder()) {
            let isum = hsum_i32_8(block_partial(a, b));
            acc = accumulate(acc, f16_to_f32(a.d), f16_to_f32(b.d), isum);
        }
        acc
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simd::avx2_available;
    use proptest::prelude::*;

    fn blocks(n: usize, seed: u64) -> Vec<BlockQ8_0> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                let mut b = BlockQ8_0::zeroed();
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                b.d = f16::from_f32(((s >> 40) as f32 / 16777216.0 - 0.5) * 0.1);
                for q in b.qs.iter_mut() {
                    s = s
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    *q = (((s >> 33) % 255) as i32 - 127) as i8;
                }
                b
            })
            .collect()
    }

    #[test]
    fn quantize_ties_and_zero() {
        let mut x = [0f32; 32];
        x[0] = 127.0; // d = 1, id = 1
        x[1] = 0.5;
        x[2] = -0.5;
        x[3] = 2.5;
        x[4] = -2.5;
        let mut y = [BlockQ8_0::zeroed(); 1];
        quantize_row(&x, &mut y);
        assert_eq!(y[0].d.to_f32(), 1.0);
        assert_eq!(&y[0].qs[..5], &[127, 1, -1, 3, -3]);
        quantize_row_x86(&x, &mut y);
        assert_eq!(&y[0].qs[..5], &[127, 0, 0, 2, -2]);
        quantize_row(&[0f32; 32], &mut y);
        assert_eq!(y[0], BlockQ8_0::zeroed());
    }

    #[test]
    fn round_trip_error() {
        let x: Vec<f32> = (0..4096)
            .map(|i| (i * 7919 % 1000) as f32 / 500.0 - 1.0)
            .collect();
        let mut q = vec![BlockQ8_0::zeroed(); x.len() / 32];
        quantize_row(&x, &mut q);
        let mut y = vec![0f32; x.len()];
        dequantize_row(&q, &mut y);
        for (xb, yb) in x.chunks(32).zip(y.chunks(32)) {
            let amax = xb.iter().fold(0f32, |m, v| m.max(v.abs()));
            for (a, b) in xb.iter().zip(yb) {
                assert!((a - b).abs() <= amax / 127.0 * 0.5001 + amax * 1e-3);
            }
        }
    }

    #[test]
    fn round_trip_gaussian() {
        let x = crate::testutil::gaussian(7, 32 * 512);
        let mut q = vec![BlockQ8_0::zeroed(); 512];
        quantize_row(&x, &mut q);
        let mut y = vec![0f32; x.len()];
        dequantize_row(&q, &mut y);
        // N(0,1): 0.00535 measured on 2^22 values.
        let e = crate::testutil::rel_rms(&x, &y);
        assert!(e < 0.0056, "rel rms {e}");
    }

    #[test]
    fn avx2_matches_reference() {
        for n in [0usize, 1, 7, 8, 9, 33, 100] {
            let x = blocks(n, 1 + n as u64);
            let y = blocks(n, 1000 + n as u64);
            let r = vec_dot_ref(&x, &y);
            if avx2_available() {
                assert_eq!(
                    vec_dot_at(SimdLevel::Avx2, &x, &y).to_bits(),
                    r.to_bits(),
                    "n={n}"
                );
            }
        }
    }

    proptest! {
        #[test]
        fn avx2_bit_identical(xq in prop::collection::vec(any::<i8>(), 32 * 11),
                              yq in prop::collection::vec(-127i8..=127, 32 * 11),
                              d in prop::collection::vec((-2.0f32..2.0, -2.0f32..2.0), 11)) {
            let mk = |qs: &[i8], d: f32| {
                let mut b = BlockQ8_0::zeroed();
                b.d = f16::from_f32(d);
                b.qs.copy_from_slice(qs);
                b
            };
            let x: Vec<_> = xq.chunks(32).zip(&d).map(|(q, d)| mk(q, d.0)).collect();
            let y: Vec<_> = yq.chunks(32).zip(&d).map(|(q, d)| mk(q, d.1)).collect();
            let r = vec_dot_ref(&x, &y);
            if avx2_available() {
                prop_assert_eq!(vec_dot_at(SimdLevel::Avx2, &x, &y).to_bits(), r.to_bits());
            }
        }
    }
}
