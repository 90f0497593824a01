//! AVX2 kernels for the weight · A16 dot products, for one weight row against `R` activation
//! rows at once (the weight is unpacked once and reused: the prefill GEMM tile).
//!
//! Bit-identical to the references in `a16`: `vpmaddwd` on the two 16-value halves of a
//! sub-block gives exactly the reference's lane partials, which are exact in f32, and each lane
//! is updated with the same fused multiply-add by the same scale in the same order; the final
//! reduction is the reference's tree.
//!
//! Safety: every function is `unsafe` and `#[target_feature(enable = "avx2,fma,f16c")]`; callers
//! check those features at run time (`SimdLevel::Avx2`) and pass rows of matching lengths
//! (checked by the dispatcher in `a16`).

#![allow(unsafe_op_in_unsafe_fn)]

use std::arch::x86_64::*;

use crate::a16::{BlockA16, SUB};
use crate::common::unpack_k4_scales;
use crate::q4_k::BlockQ4K;
use crate::q5_0::BlockQ5_0;
use crate::q5_k::BlockQ5K;
use crate::q6_k::BlockQ6K;
use crate::q8_0::BlockQ8_0;

/// Lane partials of 32 products: weights as two vectors of 16 i16 (values 0..16, 16..32).
#[inline(always)]
unsafe fn madd32(w0: __m256i, w1: __m256i, a: *const i16) -> __m256 {
    let a0 = _mm256_loadu_si256(a as *const __m256i);
    let a1 = _mm256_loadu_si256(a.add(16) as *const __m256i);
    _mm256_cvtepi32_ps(_mm256_add_epi32(
        _mm256_madd_epi16(w0, a0),
        _mm256_madd_epi16(w1, a1),
    ))
}

/// Lane partials of 16 products.
#[inline(always)]
unsafe fn madd16(w: __m256i, a: *const i16) -> __m256 {
    _mm256_cvtepi32_ps(_mm256_madd_epi16(
        w,
        _mm256_loadu_si256(a as *const __m256i),
    ))
}

/// `((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7))`, as `a16::reduce8`.
#[inline(always)]
unsafe fn reduce8(acc: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    let t = _mm_add_ps(s, _mm_movehl_ps(s, s));
    _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)))
}

/// Lane `j` of `v`, in every lane.
#[inline(always)]
unsafe fn lane(v: __m256, j: usize) -> __m256 {
    _mm256_permutevar8x32_ps(v, _mm256_set1_epi32(j as i32))
}

#[inline(always)]
unsafe fn f16_bits_to_f32(bits: u16) -> f32 {
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(bits))))
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

/// Unpacked weights of one k-quant super-block: for each sub-block, two vectors of 16 i16.
type Unpacked = [(__m256i, __m256i); 8];

/// Shared body of Q4_K/Q5_K: `unpack(k)` gives super-block `k`'s (d, dmin, scales, weights).
// `k` indexes the weight row and all `R` activation rows alike.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
unsafe fn dot_asym<const R: usize>(
    n_super: usize,
    unpack: impl Fn(usize) -> (f32, f32, [u8; 12], Unpacked),
    a: [&[BlockA16]; R],
    out: &mut [f32],
) {
    let mut acc = [_mm256_setzero_ps(); R];
    let mut macc = [_mm256_setzero_ps(); R];
    for k in 0..n_super {
        let (d, dmin, scales, w) = unpack(k);
        let (sc, m) = unpack_k4_scales(&scales);
        let dsc = scaled_u8(&sc, d);
        let dm = scaled_u8(&m, dmin);
        for r in 0..R {
            let ag = &a[r][k];
            let da = _mm256_loadu_ps(ag.d.as_ptr());
            let s = _mm256_mul_ps(dsc, da);
            let fas = _mm256_cvtepi32_ps(_mm256_loadu_si256(ag.sum.as_ptr() as *const __m256i));
            macc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dm, da), fas, macc[r]);
            for (j, &(w0, w1)) in w.iter().enumerate() {
                let p = madd32(w0, w1, ag.qs.as_ptr().add(SUB * j));
                acc[r] = _mm256_fmadd_ps(lane(s, j), p, acc[r]);
            }
        }
    }
    for r in 0..R {
        out[r] = reduce8(acc[r]) - reduce8(macc[r]);
    }
}

/// Q4_K · A16 for `R` activation rows.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_q4_k<const R: usize>(x: &[BlockQ4K], a: [&[BlockA16]; R], out: &mut [f32]) {
    let m4 = _mm256_set1_epi8(0x0f);
    let unpack = |k: usize| {
        let b = &x[k];
        let mut w = [(_mm256_setzero_si256(), _mm256_setzero_si256()); 8];
        for p in 0..4 {
            let v = _mm256_loadu_si256(b.qs.as_ptr().add(32 * p) as *const __m256i);
            w[2 * p] = u8_to_i16x2(_mm256_and_si256(v, m4));
            w[2 * p + 1] = u8_to_i16x2(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
        }
        (
            f16_bits_to_f32(b.d.to_bits()),
            f16_bits_to_f32(b.dmin.to_bits()),
            b.scales,
            w,
        )
    };
    dot_asym::<R>(x.len(), unpack, a, out)
}

/// Q5_K · A16 for `R` activation rows.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_q5_k<const R: usize>(x: &[BlockQ5K], a: [&[BlockA16]; R], out: &mut [f32]) {
    let m4 = _mm256_set1_epi8(0x0f);
    let m1 = _mm256_set1_epi8(0x01);
    let unpack = |k: usize| {
        let b = &x[k];
        let qh = _mm256_loadu_si256(b.qh.as_ptr() as *const __m256i);
        let hbit = |s: i32| {
            _mm256_slli_epi16(
                _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(s)), m1),
                4,
            )
        };
        let mut w = [(_mm256_setzero_si256(), _mm256_setzero_si256()); 8];
        for p in 0..4 {
            let v = _mm256_loadu_si256(b.qs.as_ptr().add(32 * p) as *const __m256i);
            let lo = _mm256_or_si256(_mm256_and_si256(v, m4), hbit(2 * p as i32));
            let hi = _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi16(v, 4), m4),
                hbit(2 * p as i32 + 1),
            );
            w[2 * p] = u8_to_i16x2(lo);
            w[2 * p + 1] = u8_to_i16x2(hi);
        }
        (
            f16_bits_to_f32(b.d.to_bits()),
            f16_bits_to_f32(b.dmin.to_bits()),
            b.scales,
            w,
        )
    };
    dot_asym::<R>(x.len(), unpack, a, out)
}

/// Q6_K · A16 for `R` activation rows.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_q6_k<const R: usize>(x: &[BlockQ6K], a: [&[BlockA16]; R], out: &mut [f32]) {
    let m4 = _mm256_set1_epi8(0x0f);
    let m3 = _mm256_set1_epi8(0x03);
    let off = _mm256_set1_epi8(32);
    // Even scale indices first, then odd.
    let deint = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    let mut acc = [_mm256_setzero_ps(); R];
    for (k, b) in x.iter().enumerate() {
        let mut w = [(_mm256_setzero_si256(), _mm256_setzero_si256()); 8];
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
                w[4 * h + s] = i8_to_i16x2(_mm256_sub_epi8(v, off));
            }
        }
        let sc = _mm_shuffle_epi8(_mm_loadu_si128(b.scales.as_ptr() as *const __m128i), deint);
        let d = _mm256_set1_ps(f16_bits_to_f32(b.d.to_bits()));
        let ds_lo = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc)));
        let ds_hi = _mm256_mul_ps(
            d,
            _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(sc, 8))),
        );
        for r in 0..R {
            let ag = &a[r][k];
            let da = _mm256_loadu_ps(ag.d.as_ptr());
            let s_lo = _mm256_mul_ps(ds_lo, da);
            let s_hi = _mm256_mul_ps(ds_hi, da);
            for (j, &(w0, w1)) in w.iter().enumerate() {
                let ap = ag.qs.as_ptr().add(SUB * j);
                acc[r] = _mm256_fmadd_ps(lane(s_lo, j), madd16(w0, ap), acc[r]);
                acc[r] = _mm256_fmadd_ps(lane(s_hi, j), madd16(w1, ap.add(16)), acc[r]);
            }
        }
    }
    for r in 0..R {
        out[r] = reduce8(acc[r]);
    }
}

/// The 32-value block formats: block `i` pairs with sub-block `i % 8` of group `i / 8`.
#[inline(always)]
unsafe fn dot_blocks32<const R: usize>(
    nb: usize,
    a: [&[BlockA16]; R],
    out: &mut [f32],
    block: impl Fn(usize) -> (f32, __m256i, __m256i),
) {
    let mut acc = [_mm256_setzero_ps(); R];
    for i in 0..nb {
        let (g, j) = (i / 8, i % 8);
        let (dw, w0, w1) = block(i);
        for r in 0..R {
            let ag = &a[r][g];
            let p = madd32(w0, w1, ag.qs.as_ptr().add(SUB * j));
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(dw * ag.d[j]), p, acc[r]);
        }
    }
    for r in 0..R {
        out[r] = reduce8(acc[r]);
    }
}

/// Q8_0 · A16 for `R` activation rows.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_q8_0<const R: usize>(x: &[BlockQ8_0], a: [&[BlockA16]; R], out: &mut [f32]) {
    dot_blocks32::<R>(x.len(), a, out, |i| {
        let b = &x[i];
        let (w0, w1) = i8_to_i16x2(_mm256_loadu_si256(b.qs.as_ptr() as *const __m256i));
        (f16_bits_to_f32(b.d.to_bits()), w0, w1)
    })
}

/// Q5_0 · A16 for `R` activation rows.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_q5_0<const R: usize>(x: &[BlockQ5_0], a: [&[BlockA16]; R], out: &mut [f32]) {
    let m4 = _mm_set1_epi8(0x0f);
    let bits = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    let spread = _mm256_setr_epi8(
        0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3,
        3, 3,
    );
    let sixteen = _mm256_set1_epi8(0x10);
    dot_blocks32::<R>(x.len(), a, out, |i| {
        let b = &x[i];
        let qs = _mm_loadu_si128(b.qs.as_ptr() as *const __m128i);
        let lo = _mm_and_si128(qs, m4);
        let hi = _mm_and_si128(_mm_srli_epi16(qs, 4), m4);
        let nib = _mm256_set_m128i(hi, lo);
        let qh = _mm256_set1_epi32(i32::from_le_bytes(b.qh));
        let sel = _mm256_and_si256(_mm256_shuffle_epi8(qh, spread), bits);
        let set = _mm256_cmpeq_epi8(sel, bits);
        let q = _mm256_or_si256(nib, _mm256_and_si256(set, sixteen));
        let (w0, w1) = i8_to_i16x2(_mm256_sub_epi8(q, sixteen));
        (f16_bits_to_f32(b.d.to_bits()), w0, w1)
    })
}
