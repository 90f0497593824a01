//! Shared AVX2 helpers for the format kernels (x86-64 only).
//!
//! Owns: integer horizontal sums, the 8-way transpose-reduce used to get one integer sum
//! per block, the bit-to-byte expansion of Q5 high bits, and the float horizontal sum that
//! mirrors [`crate::common::reduce_lanes`] exactly.
//!
//! Every function here is `unsafe` only because it is compiled with
//! `#[target_feature(enable = "avx2,fma,f16c")]`: callers must have checked
//! [`crate::simd::avx2_available`]. None of them touch memory through raw pointers.

use std::arch::x86_64::*;

/// Sum of the eight i32 lanes (exact; integer addition is associative).
///
/// # Safety
/// The CPU must support AVX2.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn hsum_i32_8(v: __m256i) -> i32 {
    let lo = _mm256_castsi256_si128(v);
    let hi = _mm256_extracti128_si256::<1>(v);
    let s = _mm_add_epi32(lo, hi);
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s));
    _mm_cvtsi128_si32(s)
}

/// Given eight vectors of eight i32 partial sums, return one vector whose lane `b` is the
/// total of `v[b]` (exact).
///
/// # Safety
/// The CPU must support AVX2.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn reduce_i32_8x8(v: &[__m256i; 8]) -> __m256i {
    let h01 = _mm256_hadd_epi32(v[0], v[1]);
    let h23 = _mm256_hadd_epi32(v[2], v[3]);
    let h45 = _mm256_hadd_epi32(v[4], v[5]);
    let h67 = _mm256_hadd_epi32(v[6], v[7]);
    let a = _mm256_hadd_epi32(h01, h23);
    let b = _mm256_hadd_epi32(h45, h67);
    let lo = _mm256_permute2x128_si256::<0x20>(a, b);
    let hi = _mm256_permute2x128_si256::<0x31>(a, b);
    _mm256_add_epi32(lo, hi)
}

/// Expand the 32 bits of `bits` into 32 bytes: byte `i` is 0xFF when bit `i` is set, else 0.
///
/// # Safety
/// The CPU must support AVX2.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn bytes_from_bits_32(bits: u32) -> __m256i {
    let v = _mm256_set1_epi32(bits as i32);
    // Byte i takes byte i/8 of the word (each 128-bit lane holds a full copy).
    let shuf = _mm256_setr_epi8(
        0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3,
        3, 3,
    );
    let v = _mm256_shuffle_epi8(v, shuf);
    let mask = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    _mm256_cmpeq_epi8(_mm256_and_si256(v, mask), mask)
}

/// Exact f16 → f32 with F16C (the same value as `half::f16::to_f32`).
///
/// # Safety
/// The CPU must support F16C.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn f16_to_f32(h: half::f16) -> f32 {
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(h.to_bits()))))
}

/// The float steps of eight consecutive 32-element blocks, in the reference order:
/// `acc = acc + (dx[b] * dy[b]) * (isum[b] as f32)` for `b = 0..8`. The products are formed
/// in SIMD (each lane rounds exactly as the scalar expression), the additions one by one.
///
/// # Safety
/// The CPU must support AVX2 and F16C.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn block_steps_8(acc: f32, dx: &[u16; 8], dy: &[u16; 8], isums: __m256i) -> f32 {
    // SAFETY: each array is 8 u16 = 16 bytes.
    let fx = _mm256_cvtph_ps(_mm_loadu_si128(dx.as_ptr() as *const __m128i));
    let fy = _mm256_cvtph_ps(_mm_loadu_si128(dy.as_ptr() as *const __m128i));
    let p = _mm256_mul_ps(_mm256_mul_ps(fx, fy), _mm256_cvtepi32_ps(isums));
    let mut v = [0f32; 8];
    // SAFETY: `v` is 8 f32 = 32 bytes.
    _mm256_storeu_ps(v.as_mut_ptr(), p);
    let mut acc = acc;
    for x in v {
        acc += x;
    }
    acc
}

/// Reduce four 8-lane f32 accumulators exactly as [`crate::common::reduce_lanes`] does with
/// `a = [a0 | a1 | a2 | a3]`.
///
/// # Safety
/// The CPU must support AVX2.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn reduce_f32_4x8(a0: __m256, a1: __m256, a2: __m256, a3: __m256) -> f32 {
    let s = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
    let t = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps::<1>(s));
    let u = _mm_add_ps(t, _mm_movehl_ps(t, t));
    let r = _mm_add_ss(u, _mm_shuffle_ps::<0b01>(u, u));
    _mm_cvtss_f32(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simd::avx2_available;

    #[test]
    fn helpers_match_scalar() {
        if !avx2_available() {
            return;
        }
        // SAFETY: AVX2 presence checked above; the helpers only use registers.
        unsafe {
            let v = _mm256_setr_epi32(1, -2, 3, 400, 5, 6, -7, 1 << 20);
            assert_eq!(hsum_i32_8(v), 1 - 2 + 3 + 400 + 5 + 6 - 7 + (1 << 20));
            let vs: [__m256i; 8] = std::array::from_fn(|b| {
                _mm256_setr_epi32(b as i32, 1, 2, 3, 4, 5, 6, 7 * b as i32)
            });
            let r = reduce_i32_8x8(&vs);
            let mut out = [0i32; 8];
            _mm256_storeu_si256(out.as_mut_ptr() as *mut __m256i, r);
            for (b, o) in out.iter().enumerate() {
                assert_eq!(*o, b as i32 + 21 + 7 * b as i32);
            }
            let bits = 0xA5F0_0F5Au32;
            let m = bytes_from_bits_32(bits);
            let mut bytes = [0u8; 32];
            _mm256_storeu_si256(bytes.as_mut_ptr() as *mut __m256i, m);
            for (i, b) in bytes.iter().enumerate() {
                assert_eq!(*b, if bits >> i & 1 == 1 { 0xFF } else { 0 });
            }
        }
    }
}
