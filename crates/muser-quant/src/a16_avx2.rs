//! AVX2 kernels for the weight · A16 dot products. Bit-identical to the references in `a16`:
//! the integer sub-block sums are exact whatever the order, and the float lane updates use the
//! same operations in the same order (separate multiply / add / subtract, never FMA), lane `j`
//! of a vector holding sub-block `j` of a group.
//!
//! Owns: unpacking each weight format to i16 lanes, `vpmaddwd` against the activations, and the
//! 8×8 transpose-reduction of partial sums into one vector of sub-block sums.
//!
//! Safety: every function is `unsafe` and `#[target_feature(enable = "avx2")]`; callers check
//! AVX2 at run time (`SimdLevel::Avx2`) and pass rows of matching lengths (checked by the
//! dispatcher in `a16`).

#![allow(unsafe_op_in_unsafe_fn)]

use std::arch::x86_64::*;

use crate::a16::{BlockA16, SUB};
use crate::common::unpack_k4_scales;
use crate::q4_k::BlockQ4K;
use crate::q5_0::BlockQ5_0;
use crate::q5_k::BlockQ5K;
use crate::q6_k::BlockQ6K;
use crate::q8_0::BlockQ8_0;

/// Partial sums of 32 products: weights as two vectors of 16 i16 (elements 0..16, 16..32).
#[inline(always)]
unsafe fn madd32(w0: __m256i, w1: __m256i, a: *const i16) -> __m256i {
    let a0 = _mm256_loadu_si256(a as *const __m256i);
    let a1 = _mm256_loadu_si256(a.add(16) as *const __m256i);
    _mm256_add_epi32(_mm256_madd_epi16(w0, a0), _mm256_madd_epi16(w1, a1))
}

/// Partial sums of 16 products.
#[inline(always)]
unsafe fn madd16(w: __m256i, a: *const i16) -> __m256i {
    _mm256_madd_epi16(w, _mm256_loadu_si256(a as *const __m256i))
}

/// Lane `j` of the result is the sum of the 8 lanes of `p[j]` (exact integer arithmetic).
#[inline(always)]
unsafe fn reduce_8x8(p: &[__m256i; 8]) -> __m256i {
    let h01 = _mm256_hadd_epi32(p[0], p[1]);
    let h23 = _mm256_hadd_epi32(p[2], p[3]);
    let h45 = _mm256_hadd_epi32(p[4], p[5]);
    let h67 = _mm256_hadd_epi32(p[6], p[7]);
    let h0123 = _mm256_hadd_epi32(h01, h23);
    let h4567 = _mm256_hadd_epi32(h45, h67);
    let lo = _mm256_permute2x128_si256(h0123, h4567, 0x20);
    let hi = _mm256_permute2x128_si256(h0123, h4567, 0x31);
    _mm256_add_epi32(lo, hi)
}

/// `((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7))`, as `a16::reduce8`.
#[inline(always)]
unsafe fn reduce8(acc: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    let t = _mm_add_ps(s, _mm_movehl_ps(s, s));
    _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)))
}

/// 32 unsigned bytes to two vectors of 16 i16.
#[inline(always)]
unsafe fn u8_to_i16x2(v: __m256i) -> (__m256i, __m256i) {
    (
        _mm256_cvtepu8_epi16(_mm256_castsi256_si128(v)),
        _mm256_cvtepu8_epi16(_mm256_extracti128_si256(v, 1)),
    )
}

/// 32 signed bytes to two vectors of 16 i16.
#[inline(always)]
unsafe fn i8_to_i16x2(v: __m256i) -> (__m256i, __m256i) {
    (
        _mm256_cvtepi8_epi16(_mm256_castsi256_si128(v)),
        _mm256_cvtepi8_epi16(_mm256_extracti128_si256(v, 1)),
    )
}

/// Eight u8 scales as f32 lanes multiplied by `d`: `d * (s as f32)` per lane.
#[inline(always)]
unsafe fn scaled_u8(s: &[u8; 8], d: f32) -> __m256 {
    let v = _mm_loadl_epi64(s.as_ptr() as *const __m128i);
    _mm256_mul_ps(
        _mm256_set1_ps(d),
        _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v)),
    )
}

/// Shared tail of Q4_K/Q5_K: `acc += da * ((d·sc) * isum − (dmin·m) * asum)`.
#[inline(always)]
unsafe fn asym_update(
    acc: __m256,
    isum: __m256i,
    b_d: f32,
    b_dmin: f32,
    scales: &[u8; 12],
    a: &BlockA16,
) -> __m256 {
    let (sc, m) = unpack_k4_scales(scales);
    let dsc = scaled_u8(&sc, b_d);
    let dm = scaled_u8(&m, b_dmin);
    let fis = _mm256_cvtepi32_ps(isum);
    let fas = _mm256_cvtepi32_ps(_mm256_loadu_si256(a.sum.as_ptr() as *const __m256i));
    let da = _mm256_loadu_ps(a.d.as_ptr());
    let t = _mm256_sub_ps(_mm256_mul_ps(dsc, fis), _mm256_mul_ps(dm, fas));
    _mm256_add_ps(acc, _mm256_mul_ps(da, t))
}

/// Q4_K · A16.
#[target_feature(enable = "avx2")]
pub unsafe fn dot_q4_k(x: &[BlockQ4K], a: &[BlockA16]) -> f32 {
    let m4 = _mm256_set1_epi8(0x0f);
    let mut acc = _mm256_setzero_ps();
    for (b, ag) in x.iter().zip(a) {
        let mut p = [_mm256_setzero_si256(); 8];
        for k in 0..4 {
            let v = _mm256_loadu_si256(b.qs.as_ptr().add(32 * k) as *const __m256i);
            let (l0, l1) = u8_to_i16x2(_mm256_and_si256(v, m4));
            let (h0, h1) = u8_to_i16x2(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
            p[2 * k] = madd32(l0, l1, ag.qs.as_ptr().add(SUB * 2 * k));
            p[2 * k + 1] = madd32(h0, h1, ag.qs.as_ptr().add(SUB * (2 * k + 1)));
        }
        acc = asym_update(
            acc,
            reduce_8x8(&p),
            b.d.to_f32(),
            b.dmin.to_f32(),
            &b.scales,
            ag,
        );
    }
    reduce8(acc)
}

/// Q5_K · A16.
#[target_feature(enable = "avx2")]
pub unsafe fn dot_q5_k(x: &[BlockQ5K], a: &[BlockA16]) -> f32 {
    let m4 = _mm256_set1_epi8(0x0f);
    let m1 = _mm256_set1_epi8(0x01);
    let mut acc = _mm256_setzero_ps();
    for (b, ag) in x.iter().zip(a) {
        let qh = _mm256_loadu_si256(b.qh.as_ptr() as *const __m256i);
        let mut p = [_mm256_setzero_si256(); 8];
        for k in 0..4 {
            let v = _mm256_loadu_si256(b.qs.as_ptr().add(32 * k) as *const __m256i);
            let hb_lo = _mm256_slli_epi16(
                _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * k as i32)), m1),
                4,
            );
            let hb_hi = _mm256_slli_epi16(
                _mm256_and_si256(
                    _mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * k as i32 + 1)),
                    m1,
                ),
                4,
            );
            let lo = _mm256_or_si256(_mm256_and_si256(v, m4), hb_lo);
            let hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), hb_hi);
            let (l0, l1) = u8_to_i16x2(lo);
            let (h0, h1) = u8_to_i16x2(hi);
            p[2 * k] = madd32(l0, l1, ag.qs.as_ptr().add(SUB * 2 * k));
            p[2 * k + 1] = madd32(h0, h1, ag.qs.as_ptr().add(SUB * (2 * k + 1)));
        }
        acc = asym_update(
            acc,
            reduce_8x8(&p),
            b.d.to_f32(),
            b.dmin.to_f32(),
            &b.scales,
            ag,
        );
    }
    reduce8(acc)
}

/// Q6_K · A16.
#[target_feature(enable = "avx2")]
pub unsafe fn dot_q6_k(x: &[BlockQ6K], a: &[BlockA16]) -> f32 {
    let m4 = _mm256_set1_epi8(0x0f);
    let m3 = _mm256_set1_epi8(0x03);
    let off = _mm256_set1_epi8(32);
    // Even scale indices first, then odd.
    let deint = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    let mut acc = _mm256_setzero_ps();
    for (b, ag) in x.iter().zip(a) {
        let mut plo = [_mm256_setzero_si256(); 8];
        let mut phi = [_mm256_setzero_si256(); 8];
        for h in 0..2 {
            let qa = _mm256_loadu_si256(b.ql.as_ptr().add(64 * h) as *const __m256i);
            let qb = _mm256_loadu_si256(b.ql.as_ptr().add(64 * h + 32) as *const __m256i);
            let qh = _mm256_loadu_si256(b.qh.as_ptr().add(32 * h) as *const __m256i);
            let hi2 = |s: i32| {
                _mm256_slli_epi16(
                    _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(s)), m3),
                    4,
                )
            };
            let subs = [
                _mm256_or_si256(_mm256_and_si256(qa, m4), hi2(0)),
                _mm256_or_si256(_mm256_and_si256(qb, m4), hi2(2)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qa, 4), m4), hi2(4)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qb, 4), m4), hi2(6)),
            ];
            for (s, v) in subs.into_iter().enumerate() {
                let j = 4 * h + s;
                let (w0, w1) = i8_to_i16x2(_mm256_sub_epi8(v, off));
                let ap = ag.qs.as_ptr().add(SUB * j);
                plo[j] = madd16(w0, ap);
                phi[j] = madd16(w1, ap.add(16));
            }
        }
        let lo = _mm256_cvtepi32_ps(reduce_8x8(&plo));
        let hi = _mm256_cvtepi32_ps(reduce_8x8(&phi));
        let sc = _mm_shuffle_epi8(_mm_loadu_si128(b.scales.as_ptr() as *const __m128i), deint);
        let s_lo = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc));
        let s_hi = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(sc, 8)));
        let t = _mm256_add_ps(_mm256_mul_ps(s_lo, lo), _mm256_mul_ps(s_hi, hi));
        let t = _mm256_mul_ps(_mm256_set1_ps(b.d.to_f32()), t);
        acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(ag.d.as_ptr()), t));
    }
    reduce8(acc)
}

/// The 32-value block formats: block `i` of the row contributes to lane `i % 8` of group `i / 8`.
#[inline(always)]
unsafe fn dot_blocks32(
    nb: usize,
    a: &[BlockA16],
    weights: impl Fn(usize) -> (__m256i, __m256i),
    scale: impl Fn(usize) -> f32,
) -> f32 {
    let mut acc = _mm256_setzero_ps();
    for (g, ag) in a.iter().enumerate() {
        let first = 8 * g;
        if first >= nb {
            break;
        }
        let n = (nb - first).min(8);
        let mut p = [_mm256_setzero_si256(); 8];
        let mut dw = [0f32; 8];
        for j in 0..n {
            let (w0, w1) = weights(first + j);
            p[j] = madd32(w0, w1, ag.qs.as_ptr().add(SUB * j));
            dw[j] = scale(first + j);
        }
        let fis = _mm256_cvtepi32_ps(reduce_8x8(&p));
        let t = _mm256_mul_ps(_mm256_loadu_ps(dw.as_ptr()), fis);
        acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(ag.d.as_ptr()), t));
    }
    reduce8(acc)
}

/// Q8_0 · A16.
#[target_feature(enable = "avx2")]
pub unsafe fn dot_q8_0(x: &[BlockQ8_0], a: &[BlockA16]) -> f32 {
    dot_blocks32(
        x.len(),
        a,
        |i| i8_to_i16x2(_mm256_loadu_si256(x[i].qs.as_ptr() as *const __m256i)),
        |i| x[i].d.to_f32(),
    )
}

/// Q5_0 · A16.
#[target_feature(enable = "avx2")]
pub unsafe fn dot_q5_0(x: &[BlockQ5_0], a: &[BlockA16]) -> f32 {
    let m4 = _mm_set1_epi8(0x0f);
    let bits = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    let spread = _mm256_setr_epi8(
        0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3,
        3, 3,
    );
    let sixteen = _mm256_set1_epi8(0x10);
    dot_blocks32(
        x.len(),
        a,
        |i| {
            let b = &x[i];
            let qs = _mm_loadu_si128(b.qs.as_ptr() as *const __m128i);
            let lo = _mm_and_si128(qs, m4);
            let hi = _mm_and_si128(_mm_srli_epi16(qs, 4), m4);
            let nib = _mm256_set_m128i(hi, lo);
            let qh = _mm256_set1_epi32(i32::from_le_bytes(b.qh));
            let sel = _mm256_and_si256(_mm256_shuffle_epi8(qh, spread), bits);
            let set = _mm256_cmpeq_epi8(sel, bits);
            let q = _mm256_or_si256(nib, _mm256_and_si256(set, sixteen));
            i8_to_i16x2(_mm256_sub_epi8(q, sixteen))
        },
        |i| x[i].d.to_f32(),
    )
}
