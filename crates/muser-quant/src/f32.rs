//! F32 rows: conversion (trivial) and the F32·F32 dot product.
//!
//! Owns: the f32 "format" (4 bytes per element, little-endian IEEE binary32) so the
//! type-erased front treats it like every other type.
//!
//! Dot product order: 32 f32 accumulators, element `i` of the first `n - n % 32` goes to
//! accumulator `i % 32` (`acc = acc + x*y`, product and sum each rounded: no FMA), then the
//! fixed reduction tree of [`crate::common::reduce_lanes`], then the tail added in order.
//! The AVX2 kernel (four 8-lane accumulators) performs exactly these operations, so it is
//! bit-identical to [`vec_dot_ref`].

use crate::common::lane_dot_ref;
use crate::simd::{self, SimdLevel};

/// Copy `x` into `y`. Panics if the lengths differ.
pub fn dequantize_row(x: &[f32], y: &mut [f32]) {
    y.copy_from_slice(x);
}

/// Widen `x` into `y` (exact). Panics if the lengths differ.
pub fn dequantize_row_f64(x: &[f32], y: &mut [f64]) {
    assert_eq!(x.len(), y.len(), "f32 dequantize_row_f64: length mismatch");
    for (o, v) in y.iter_mut().zip(x) {
        *o = f64::from(*v);
    }
}

/// Copy `x` into `y`. Panics if the lengths differ.
pub fn quantize_row(x: &[f32], y: &mut [f32]) {
    y.copy_from_slice(x);
}

/// Scalar reference dot product. Panics if the lengths differ.
pub fn vec_dot_ref(x: &[f32], y: &[f32]) -> f32 {
    assert_eq!(x.len(), y.len(), "f32 vec_dot: length mismatch");
    lane_dot_ref(x.len(), |i| x[i] * y[i])
}

/// Dot product at an explicit SIMD level. Panics if the lengths differ or the level is not
/// available on this CPU.
pub fn vec_dot_at(level: SimdLevel, x: &[f32], y: &[f32]) -> f32 {
    assert_eq!(x.len(), y.len(), "f32 vec_dot: length mismatch");
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

/// Dot product at the process-wide SIMD level ([`crate::simd_level`]).
pub fn vec_dot(x: &[f32], y: &[f32]) -> f32 {
    vec_dot_at(simd::simd_level(), x, y)
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use crate::avx2::reduce_f32_4x8;
    use std::arch::x86_64::*;

    /// # Safety
    /// AVX2/FMA/F16C must be available and `x.len() == y.len()`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn vec_dot(x: &[f32], y: &[f32]) -> f32 {
        let n = x.len();
        let main = n - n % 32;
        let (xp, yp) = (x.as_ptr(), y.as_ptr());
        let mut acc = [_mm256_setzero_ps(); 4];
        let mut base = 0;
        while base < main {
            for (k, a) in acc.iter_mut().enumerate() {
                // SAFETY: base + 8k + 8 <= main <= n for both slices.
                let xv = _mm256_loadu_ps(xp.add(base + 8 * k));
                let yv = _mm256_loadu_ps(yp.add(base + 8 * k));
                *a = _mm256_add_ps(*a, _mm256_mul_ps(xv, yv));
            }
            base += 32;
        }
        let mut r = reduce_f32_4x8(acc[0], acc[1], acc[2], acc[3]);
        for i in main..n {
            r += x[i] * y[i];
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simd::avx2_available;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn avx2_bit_identical(v in prop::collection::vec((-1e3f32..1e3, -1e3f32..1e3), 0..200)) {
            let (x, y): (Vec<f32>, Vec<f32>) = v.into_iter().unzip();
            let r = vec_dot_ref(&x, &y);
            if avx2_available() {
                prop_assert_eq!(vec_dot_at(SimdLevel::Avx2, &x, &y).to_bits(), r.to_bits());
            }
            let exact: f64 = x.iter().zip(&y).map(|(a, b)| f64::from(*a) * f64::from(*b)).sum();
            let mag: f64 = x.iter().zip(&y).map(|(a, b)| (f64::from(*a) * f64::from(*b)).abs()).sum();
            prop_assert!((f64::from(r) - exact).abs() <= 1e-5 * mag + 1e-30);
        }
    }
}
