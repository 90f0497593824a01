//! F16 rows: conversion to/from f32 and f64, and the F16·F16 dot product (ggml's
//! `vec_dot_type` for F16 weights is F16: activations are rounded to f16 first).
//!
//! Layout: 2 bytes per element, IEEE binary16, little-endian (`half::f16`, 2-byte aligned).
//!
//! Quantize: round to nearest, ties to even (IEEE; what numpy's `astype(float16)` and
//! ggml's `GGML_FP32_TO_FP16` do); overflow gives ±inf.
//!
//! Dot product order: the fixed 32-accumulator order of [`crate::common::lane_dot_ref`].
//! The product of two f16 values is exact in f32, so only the sums round. The AVX2 kernel
//! (F16C conversion, four 8-lane accumulators) is bit-identical to [`vec_dot_ref`].

use half::f16;

use crate::common::{f16_to_f32, lane_dot_ref};
use crate::simd::{self, SimdLevel};

/// Widen to f32 (exact). Panics if the lengths differ.
pub fn dequantize_row(x: &[f16], y: &mut [f32]) {
    assert_eq!(x.len(), y.len(), "f16 dequantize_row: length mismatch");
    for (o, v) in y.iter_mut().zip(x) {
        *o = f16_to_f32(*v);
    }
}

/// Widen to f64 (exact). Panics if the lengths differ.
pub fn dequantize_row_f64(x: &[f16], y: &mut [f64]) {
    assert_eq!(x.len(), y.len(), "f16 dequantize_row_f64: length mismatch");
    for (o, v) in y.iter_mut().zip(x) {
        *o = v.to_f64();
    }
}

/// Round to f16, nearest-even. Panics if the lengths differ.
pub fn quantize_row(x: &[f32], y: &mut [f16]) {
    assert_eq!(x.len(), y.len(), "f16 quantize_row: length mismatch");
    for (o, v) in y.iter_mut().zip(x) {
        *o = f16::from_f32(*v);
    }
}

/// Scalar reference dot product. Panics if the lengths differ.
pub fn vec_dot_ref(x: &[f16], y: &[f16]) -> f32 {
    assert_eq!(x.len(), y.len(), "f16 vec_dot: length mismatch");
    lane_dot_ref(x.len(), |i| f16_to_f32(x[i]) * f16_to_f32(y[i]))
}

/// Dot product at an explicit SIMD level. Panics if the lengths differ or the level is not
/// available on this CPU.
pub fn vec_dot_at(level: SimdLevel, x: &[f16], y: &[f16]) -> f32 {
    assert_eq!(x.len(), y.len(), "f16 vec_dot: length mismatch");
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
pub fn vec_dot(x: &[f16], y: &[f16]) -> f32 {
    vec_dot_at(simd::simd_level(), x, y)
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use crate::avx2::reduce_f32_4x8;
    use crate::common::f16_to_f32;
    use half::f16;
    use std::arch::x86_64::*;

    /// # Safety
    /// AVX2/FMA/F16C must be available and `x.len() == y.len()`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn vec_dot(x: &[f16], y: &[f16]) -> f32 {
        let n = x.len();
        let main = n - n % 32;
        let (xp, yp) = (x.as_ptr(), y.as_ptr());
        let mut acc = [_mm256_setzero_ps(); 4];
        let mut base = 0;
        while base < main {
            for (k, a) in acc.iter_mut().enumerate() {
                // SAFETY: 8 f16 (16 bytes) at base + 8k, within main <= n; unaligned loads.
                let xv = _mm256_cvtph_ps(_mm_loadu_si128(xp.add(base + 8 * k) as *const __m128i));
                let yv = _mm256_cvtph_ps(_mm_loadu_si128(yp.add(base + 8 * k) as *const __m128i));
                // Product exact in f32; add rounds once, as in the reference.
                *a = _mm256_add_ps(*a, _mm256_mul_ps(xv, yv));
            }
            base += 32;
        }
        let mut r = reduce_f32_4x8(acc[0], acc[1], acc[2], acc[3]);
        for i in main..n {
            r += f16_to_f32(x[i]) * f16_to_f32(y[i]);
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
    fn quantize_rounds_to_nearest_even() {
        let x = [
            1.0f32 + 1.0 / 2048.0,
            1.0 + 3.0 / 2048.0,
            70000.0,
            -1e-8,
            65519.0,
        ];
        let mut y = [f16::ZERO; 5];
        quantize_row(&x, &mut y);
        assert_eq!(y[0].to_f32(), 1.0);
        assert_eq!(y[1].to_f32(), 1.0 + 2.0 / 1024.0);
        assert!(y[2].is_infinite());
        assert_eq!(y[3].to_bits(), 0x8000);
        assert_eq!(y[4].to_f32(), 65504.0);
    }

    proptest! {
        #[test]
        fn avx2_bit_identical(v in prop::collection::vec((any::<u16>(), any::<u16>()), 0..200)) {
            // Finite values only: NaN payloads may legitimately differ between converters.
            let fin = |b: u16| if (b >> 10) & 0x1f == 0x1f { b & 0x83ff } else { b };
            let x: Vec<f16> = v.iter().map(|p| f16::from_bits(fin(p.0))).collect();
            let y: Vec<f16> = v.iter().map(|p| f16::from_bits(fin(p.1))).collect();
            let r = vec_dot_ref(&x, &y);
            if avx2_available() {
                prop_assert_eq!(vec_dot_at(SimdLevel::Avx2, &x, &y).to_bits(), r.to_bits());
            }
        }
    }
}
