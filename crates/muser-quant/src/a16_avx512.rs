//! AVX-512 (F + BW) kernels for the weight · A16 dot products: the same tiles as `a16_avx2`,
//! with one 512-bit `vpmaddwd` per 32-value sub-block producing all sixteen lane partials at
//! once (about half the instructions of the AVX2 tile).
//!
//! Bit-identical to the references in `a16` (and so to the AVX2 kernels): lane `l` of the
//! 512-bit product is exactly the reference's `P[l]`; each lane gets the same fused
//! multiply-add by the same scale in the same order; the final reduction adds the upper eight
//! lanes to the lower eight and applies the reference's tree.
//!
//! Safety: the entry points are `unsafe` and
//! `#[target_feature(enable = "avx512f,avx512bw,avx2,fma,f16c")]`; callers check those features
//! at run time (`SimdLevel::Avx512`) and pass rows of matching lengths (checked by the
//! dispatcher in `a16`).

#![allow(unsafe_op_in_unsafe_fn)]

use std::arch::x86_64::*;

use crate::a16::{BlockA16, UnpackedGroup, SUB};
use crate::a16_avx2::{group_scales, prefetch_ahead, reduce8};
use crate::a16_fmt::{Fmt, Unp, Q4K, Q50, Q5K, Q6K, Q80};
use crate::q4_k::BlockQ4K;
use crate::q5_0::BlockQ5_0;
use crate::q5_k::BlockQ5K;
use crate::q6_k::BlockQ6K;
use crate::q8_0::BlockQ8_0;

/// Sub-block `j` of group `g` as 32 i16.
#[inline(always)]
unsafe fn weights<F: Fmt>(row: &[F::Block], g: usize, j: usize) -> __m512i {
    if F::UNPACKED {
        return _mm512_loadu_si512(F::i16_ptr(row, g, j) as *const _);
    }
    let v = F::bytes(row, g, j);
    if F::SIGNED {
        _mm512_cvtepi8_epi16(v)
    } else {
        _mm512_cvtepu8_epi16(v)
    }
}

/// Lanes 0–7 `lo`, lanes 8–15 `hi`.
#[inline(always)]
unsafe fn two_scales(lo: f32, hi: f32) -> __m512 {
    let l = _mm512_castps256_ps512(_mm256_set1_ps(lo));
    _mm512_castpd_ps(_mm512_insertf64x4(
        _mm512_castps_pd(l),
        _mm256_castps_pd(_mm256_set1_ps(hi)),
        1,
    ))
}

/// The tile kernel: `out[rw * RA + ra] = dot(w[rw], a[ra])`.
// Group, row and sub-block indices address several arrays at once.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
unsafe fn tile<F: Fmt, const RW: usize, const RA: usize>(
    nb: usize,
    w: [&[F::Block]; RW],
    a: [&[BlockA16]; RA],
    out: &mut [f32],
) {
    let mut acc = [[_mm512_setzero_ps(); RA]; RW];
    let mut macc = [[_mm256_setzero_ps(); RA]; RW];
    let groups = a[0].len();
    for g in 0..groups {
        let n_sub = F::n_sub(nb, g);
        if RA == 1 {
            prefetch_ahead::<F, RW>(w, g, groups);
        }
        let mut s = [[[0f32; 8]; RA]; RW];
        let mut s_hi = [[[0f32; 8]; RA]; RW];
        group_scales::<F, BlockA16, RW, RA>(w, a, g, &mut s, &mut s_hi, &mut macc);
        for j in 0..n_sub {
            let mut wv = [_mm512_setzero_si512(); RW];
            for rw in 0..RW {
                wv[rw] = weights::<F>(w[rw], g, j);
            }
            for ra in 0..RA {
                let av = _mm512_loadu_si512(a[ra][g].qs.as_ptr().add(SUB * j) as *const _);
                for rw in 0..RW {
                    let p = _mm512_cvtepi32_ps(_mm512_madd_epi16(wv[rw], av));
                    let sc = if F::SPLIT {
                        two_scales(s[rw][ra][j], s_hi[rw][ra][j])
                    } else {
                        _mm512_set1_ps(s[rw][ra][j])
                    };
                    acc[rw][ra] = _mm512_fmadd_ps(sc, p, acc[rw][ra]);
                }
            }
        }
    }
    for rw in 0..RW {
        for ra in 0..RA {
            let v = acc[rw][ra];
            let lo = _mm512_castps512_ps256(v);
            let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
            let r = reduce8(_mm256_add_ps(lo, hi));
            out[rw * RA + ra] = if F::MINS {
                r - reduce8(macc[rw][ra])
            } else {
                r
            };
        }
    }
}

/// `out[rw * RA + ra] = dot(w[rw], a[ra])` for unpacked rows of `nb` 32-value blocks.
#[target_feature(enable = "avx512f,avx512bw,avx2,fma,f16c")]
pub unsafe fn dot_unpacked<
    const SPLIT: bool,
    const MINS: bool,
    const RW: usize,
    const RA: usize,
>(
    nb: usize,
    w: [&[UnpackedGroup]; RW],
    a: [&[BlockA16]; RA],
    out: &mut [f32],
) {
    tile::<Unp<SPLIT, MINS>, RW, RA>(nb, w, a, out)
}

macro_rules! entry {
    ($name:ident, $fmt:ty, $block:ty) => {
        /// `out[rw * RA + ra] = dot(w[rw], a[ra])` for this weight format.
        #[target_feature(enable = "avx512f,avx512bw,avx2,fma,f16c")]
        pub unsafe fn $name<const RW: usize, const RA: usize>(
            w: [&[$block]; RW],
            a: [&[BlockA16]; RA],
            out: &mut [f32],
        ) {
            tile::<$fmt, RW, RA>(w[0].len(), w, a, out)
        }
    };
}

entry!(dot_q4_k, Q4K, BlockQ4K);
entry!(dot_q5_k, Q5K, BlockQ5K);
entry!(dot_q6_k, Q6K, BlockQ6K);
entry!(dot_q8_0, Q80, BlockQ8_0);
entry!(dot_q5_0, Q50, BlockQ5_0);
