//! BF16 rows: conversion to/from f32 and f64, and the BF16·BF16 dot product.
//!
//! Layout: 2 bytes per element (the top half of an IEEE binary32), little-endian
//! (`half::bf16`, 2-byte aligned). Dequantize is a 16-bit shift (exact).
//!
//! Quantize: ggml's `ggml_compute_fp32_to_bf16` (gguf-py's `BF16.quantize_blocks` is the
//! same): NaN becomes a quiet NaN keeping the top bits (`(u >> 16) | 0x40`), everything else
//! rounds to nearest, ties to even, on the bit pattern (overflow gives ±inf).
//!
//! Dot product order: the fixed 32-accumulator order of [`crate::common::lane_dot_ref`],
//! product and sum each rounded (a BF16 product can underflow in f32, so no FMA). The AVX2
//! kernel is bit-identical to [`vec_dot_ref`].

use half::bf16;

use crate::common::lane_dot_ref;
use crate::simd::{self, SimdLevel};

#[inline]
fn to_f32(v: bf16) -> f32 {
    f32::from_bits(u32::from(v.to_bits()) << 16)
}

/// ggml's f32 → bf16 rounding.
#[inline]
pub fn from_f32(v: f32) -> bf16 {
    let u = v.to_bits();
    if (u & 0x7fff_ffff) > 0x7f80_0000 {
        return bf16::from_bits(((u >> 16) | 64) as u16);
    }
    let r = (u64::from(u) + 0x7fff + u64::from((u >> 16) & 1)) >> 16;
    bf16::from_bits(r as u16)
}

/// Widen to f32 (exact). Panics if the lengths differ.
pub fn dequantize_row(x: &[bf16], y: &mut [f32]) {
    assert_eq!(x.len(), y.len(), "bf16 dequantize_row: length mismatch");
    for (o, v) in y.iter_mut().zip(x) {
        *o = to_f32(*v);
    }
}

/// Widen to f64 (exact). Panics if the lengths differ.
pub fn dequantize_row_f64(x: &[bf16], y: &mut [f64]) {
    assert_eq!(x.len(), y.len(), "bf16 dequantize_row_f64: length mismatch");
    for (o, v) in y.iter_mut().zip(x) {
        *o = f64::from(to_f32(*v));
    }
}

/// Round to bf16 as ggml does. Panics if the lengths differ.
pub fn quantize_row(x: &[f32], y: &mut [bf16]) {
    assert_eq!(x.len(), y.len(), "bf16 quantize_row: length mismatch");
    for (o, v) in y.iter_mut().zip(x) {
        *o = from_f32(*v);
    }
}

/// Scalar reference dot product. Panics if the lengths differ.
pub fn vec_dot_ref(x: &[bf16], y: &[bf16]) -> f32 {
    assert_eq!(x.len(), y.len(), "bf16 vec_dot: length mismatch");
    lane_dot_ref(x.len(), |i| to_f32(x[i]) * to_f32(y[i]))
}

/// Dot product at an explicit SIMD level. Panics if the lengths differ or the level is not
/// available on this CPU.
pub fn vec_dot_at(level: SimdLevel, x: &[bf16], y: &[bf16]) -> f32 {
    assert_eq!(x.len(), y.len(), "bf16 vec_dot: length mismatch");
    match level {
        SimdLevel::Scalar => vec_dot_ref(x, y),
        SimdLevel::Avx2 | SimdLevel::Avx512 | SimdLevel::Avx512Vnni => {
            simd::require(level);
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `require` checked AVX2/FMA/F16C; lengths are equal.
            unsafe {
                avx2::vec_dot(x, y)
            }
            #[cfg(not(target_arch = "x86_64"))]
            unreachable!()
        }
    }
}

/// Dot product at the process-wide SIMD level.
pub fn vec_dot(x: &[bf16], y: &[bf16]) -> f32 {
    vec_dot_at(simd::simd_level(), x, y)
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::to_f32;
    use crate::avx2::reduce_f32_4x8;
    use half::bf16;
    use std::arch::x86_64::*;

    /// Eight bf16 at `p` widened to f32 (exact).
    ///
    /// # Safety
    /// AVX2 must be available and `p` must point to 8 readable bf16 values.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn load8(p: *const bf16) -> __m256 {
        // SAFETY: the caller guarantees 8 readable bf16 at `p`; the load is unaligned.
        let h = _mm_loadu_si128(p as *const __m128i);
        _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(h)))
    }

    /// # Safety
    /// AVX2/FMA/F16C must be available and `x.len() == y.len()`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn vec_dot(x: &[bf16], y: &[bf16]) -> f32 {
        let n = x.len();
        let main = n - n % 32;
        let (xp, yp) = (x.as_ptr(), y.as_ptr());
        let mut acc = [_mm256_setzero_ps(); 4];
        let mut base = 0;
        while base < main {
            for (k, a) in acc.iter_mut().enumerate() {
                // SAFETY: 8 elements at base + 8k, within main <= n.
                let xv = load8(xp.add(base + 8 * k));
                let yv = load8(yp.add(base + 8 * k));
                *a = _mm256_add_ps(*a, _mm256_mul_ps(xv, yv));
            }
            base += 32;
        }
        let mut r = reduce_f32_4x8(acc[0], acc[1], acc[2], acc[3]);
        for i in main..n {
            r += to_f32(x[i]) * to_f32(y[i]);
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simd::avx2_available;
    use proptest::prelude::*;

    #[test]
    fn rounding_matches_ggml_rule() {
        assert_eq!(from_f32(1.0).to_bits(), 0x3f80);
        // 1 + 2^-8 is a tie between 1 and 1 + 2^-7: to even (1).
        assert_eq!(from_f32(1.0 + 1.0 / 256.0).to_bits(), 0x3f80);
        assert_eq!(from_f32(1.0 + 3.0 / 256.0).to_bits(), 0x3f82);
        assert_eq!(from_f32(f32::from_bits(0x7f80_0001)).to_bits(), 0x7fc0);
        assert_eq!(from_f32(f32::MAX).to_bits(), 0x7f80);
        assert_eq!(from_f32(-0.0).to_bits(), 0x8000);
    }

    proptest! {
        #[test]
        fn avx2_bit_identical(v in prop::collection::vec((any::<u16>(), any::<u16>()), 0..200)) {
            let fin = |b: u16| if (b >> 7) & 0xff == 0xff { b & 0x807f } else { b };
            let x: Vec<bf16> = v.iter().map(|p| bf16::from_bits(fin(p.0))).collect();
            let y: Vec<bf16> = v.iter().map(|p| bf16::from_bits(fin(p.1))).collect();
            let r = vec_dot_ref(&x, &y);
            if avx2_available() {
                prop_assert_eq!(vec_dot_at(SimdLevel::Avx2, &x, &y).to_bits(), r.to_bits());
            }
        }
    }
}
