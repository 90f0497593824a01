//! AVX2 kernels for the weight · A16 dot products, on tiles of `RW` weight rows × `RA`
//! activation rows: `RW = 4, RA = 1` for decode (independent accumulator chains share each
//! activation load), `RW ≤ 2, RA ≤ 4` for prefill (each weight sub-block is reused by up to four
//! tokens).
//!
//! Bit-identical to the references in `a16`: `vpmaddwd` on the two 16-value halves of a
//! sub-block gives exactly the reference's 16 lane partials (lanes 0–7 from the first half, in
//! the low accumulator; 8–15 from the second, in the high one), exact in f32; each (weight row,
//! activation row) pair has its own accumulators, updated with the same fused multiply-add by
//! the same scale in the same order; the final reduction is the reference's tree. The tile shape
//! therefore never changes a result.
//!
//! Owns: the AVX2 tile kernel and its entry points; the formats' byte layouts are in `a16_fmt`.
//!
//! Safety: the entry points are `unsafe` and `#[target_feature(enable = "avx2,fma,f16c")]`;
//! callers check those features at run time (`SimdLevel::avx2()`) and pass rows of matching
//! lengths (checked by the dispatcher in `a16`).

#![allow(unsafe_op_in_unsafe_fn)]

use std::arch::x86_64::*;

use crate::a16::{BlockA16, UnpackedGroup, SUB};
use crate::a16_fmt::{Fmt, Unp, Q4K, Q50, Q5K, Q6K, Q80};
use crate::q4_k::BlockQ4K;
use crate::q5_0::BlockQ5_0;
use crate::q5_k::BlockQ5K;
use crate::q6_k::BlockQ6K;
use crate::q8_0::BlockQ8_0;

/// `((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7))`, as `a16::reduce8`.
#[inline(always)]
pub(crate) unsafe fn reduce8(acc: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    let t = _mm_add_ps(s, _mm_movehl_ps(s, s));
    _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)))
}

/// Sub-block `j` of group `g` as two vectors of 16 i16 (values 0..16, 16..32).
#[inline(always)]
unsafe fn weights<F: Fmt>(row: &[F::Block], g: usize, j: usize) -> (__m256i, __m256i) {
    if F::UNPACKED {
        let p = F::i16_ptr(row, g, j);
        return (
            _mm256_loadu_si256(p as *const __m256i),
            _mm256_loadu_si256(p.add(16) as *const __m256i),
        );
    }
    let v = F::bytes(row, g, j);
    let (lo, hi) = (_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    if F::SIGNED {
        (_mm256_cvtepi8_epi16(lo), _mm256_cvtepi8_epi16(hi))
    } else {
        (_mm256_cvtepu8_epi16(lo), _mm256_cvtepu8_epi16(hi))
    }
}

/// Per-(row, token) sub-block scales of group `g`, kept in memory so each sub-block's scale is
/// one broadcast load (`s`, and `s_hi` for Q6_K's second halves), and the min accumulators'
/// update for the k-quants. Shared by the AVX2 and AVX-512 tiles.
// Row and token indices address several arrays at once.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
pub(crate) unsafe fn group_scales<F: Fmt, A: ActGroup, const RW: usize, const RA: usize>(
    w: [&[F::Block]; RW],
    a: [&[A]; RA],
    g: usize,
    s: &mut [[[f32; 8]; RA]; RW],
    s_hi: &mut [[[f32; 8]; RA]; RW],
    macc: &mut [[__m256; RA]; RW],
) {
    for rw in 0..RW {
        let sc = F::scales(w[rw], g);
        for ra in 0..RA {
            let (ad, asum) = a[ra][g].scales_sums();
            let da = _mm256_loadu_ps(ad.as_ptr());
            _mm256_storeu_ps(s[rw][ra].as_mut_ptr(), _mm256_mul_ps(sc.ws, da));
            if F::SPLIT {
                _mm256_storeu_ps(s_hi[rw][ra].as_mut_ptr(), _mm256_mul_ps(sc.ws_hi, da));
            }
            if F::MINS {
                let fas = _mm256_cvtepi32_ps(_mm256_loadu_si256(asum.as_ptr() as *const __m256i));
                macc[rw][ra] = _mm256_fmadd_ps(_mm256_mul_ps(sc.wm, da), fas, macc[rw][ra]);
            }
        }
    }
}

/// A group of 256 quantized activations with a scale and a quant sum per 32 (A16).
pub(crate) trait ActGroup {
    fn scales_sums(&self) -> (&[f32; 8], &[i32; 8]);
}

impl ActGroup for BlockA16 {
    #[inline(always)]
    fn scales_sums(&self) -> (&[f32; 8], &[i32; 8]) {
        (&self.d, &self.sum)
    }
}

/// The spread prefetch of a decode tile (module `prefetch`): the following tile's bytes
/// (`next`), a few cache lines before each of the tile's `iters` sub-block steps, so the last
/// line is asked for by the last step. Addresses past `next`'s end are never formed.
pub(crate) struct Spread {
    ptr: *const i8,
    left: usize,
    step: usize,
}

impl Spread {
    #[inline(always)]
    pub(crate) fn new(next: &[u8], iters: impl FnOnce() -> usize) -> Spread {
        let lines = next.len().div_ceil(64);
        let step = if next.is_empty() {
            0
        } else {
            lines.div_ceil(iters().max(1))
        };
        Spread {
            ptr: next.as_ptr() as *const i8,
            left: lines,
            step,
        }
    }

    /// Whether this tile prefetches its successor (else the in-row prefetch runs).
    #[inline(always)]
    pub(crate) fn active(&self) -> bool {
        self.step != 0
    }

    /// Ask for this step's lines (hints only).
    #[inline(always)]
    pub(crate) unsafe fn step(&mut self) {
        for _ in 0..self.step.min(self.left) {
            _mm_prefetch::<_MM_HINT_T0>(self.ptr);
            self.left -= 1;
            if self.left > 0 {
                self.ptr = self.ptr.add(64);
            }
        }
    }
}

/// Ask for group `g + 6` of each row now: decode streams weights from memory.
#[inline(always)]
pub(crate) unsafe fn prefetch_ahead<F: Fmt, const RW: usize>(
    w: [&[F::Block]; RW],
    g: usize,
    groups: usize,
) {
    if F::UNPACKED || g + 6 >= groups {
        return;
    }
    for row in w.iter() {
        let bytes = F::group_bytes();
        let start = (row.as_ptr() as *const i8).add((g + 6) * bytes);
        let mut off = 0;
        while off < bytes {
            _mm_prefetch::<_MM_HINT_T0>(start.add(off));
            off += 64;
        }
    }
}

/// The tile kernel: `out[rw * RA + ra] = dot(w[rw], a[ra])`. A non-empty `next` (the
/// following tile's bytes, decode only) is prefetched a few lines per sub-block, spread evenly
/// over the tile's work, and then replaces the in-row prefetch (module `prefetch`).
// Group, row and sub-block indices address several arrays at once.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
unsafe fn tile<F: Fmt, const RW: usize, const RA: usize>(
    nb: usize,
    w: [&[F::Block]; RW],
    a: [&[BlockA16]; RA],
    out: &mut [f32],
    next: &[u8],
) {
    let groups = a[0].len();
    let mut pf = Spread::new(next, || (0..groups).map(|g| F::n_sub(nb, g)).sum());
    let mut acc_lo = [[_mm256_setzero_ps(); RA]; RW];
    let mut acc_hi = [[_mm256_setzero_ps(); RA]; RW];
    let mut macc = [[_mm256_setzero_ps(); RA]; RW];
    for g in 0..groups {
        let n_sub = F::n_sub(nb, g);
        if RA == 1 && !pf.active() {
            prefetch_ahead::<F, RW>(w, g, groups);
        }
        let mut s = [[[0f32; 8]; RA]; RW];
        let mut s_hi = [[[0f32; 8]; RA]; RW];
        group_scales::<F, BlockA16, RW, RA>(w, a, g, &mut s, &mut s_hi, &mut macc);
        for j in 0..n_sub {
            pf.step();
            let mut wv = [(_mm256_setzero_si256(), _mm256_setzero_si256()); RW];
            for rw in 0..RW {
                wv[rw] = weights::<F>(w[rw], g, j);
            }
            for ra in 0..RA {
                let ap = a[ra][g].qs.as_ptr().add(SUB * j);
                let a0 = _mm256_loadu_si256(ap as *const __m256i);
                let a1 = _mm256_loadu_si256(ap.add(16) as *const __m256i);
                for rw in 0..RW {
                    let (w0, w1) = wv[rw];
                    let p0 = _mm256_cvtepi32_ps(_mm256_madd_epi16(w0, a0));
                    let p1 = _mm256_cvtepi32_ps(_mm256_madd_epi16(w1, a1));
                    let s_lo = _mm256_broadcast_ss(&s[rw][ra][j]);
                    let s_hi = if F::SPLIT {
                        _mm256_broadcast_ss(&s_hi[rw][ra][j])
                    } else {
                        s_lo
                    };
                    acc_lo[rw][ra] = _mm256_fmadd_ps(s_lo, p0, acc_lo[rw][ra]);
                    acc_hi[rw][ra] = _mm256_fmadd_ps(s_hi, p1, acc_hi[rw][ra]);
                }
            }
        }
    }
    for rw in 0..RW {
        for ra in 0..RA {
            let r = reduce8(_mm256_add_ps(acc_lo[rw][ra], acc_hi[rw][ra]));
            out[rw * RA + ra] = if F::MINS {
                r - reduce8(macc[rw][ra])
            } else {
                r
            };
        }
    }
}

/// `out[rw * RA + ra] = dot(w[rw], a[ra])` for unpacked rows of `nb` 32-value blocks.
#[target_feature(enable = "avx2,fma,f16c")]
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
    tile::<Unp<SPLIT, MINS>, RW, RA>(nb, w, a, out, &[])
}

macro_rules! entry {
    ($name:ident, $fmt:ty, $block:ty) => {
        /// `out[rw * RA + ra] = dot(w[rw], a[ra])` for this weight format, prefetching
        /// `next` (hints only) spread over the tile's sub-blocks.
        #[target_feature(enable = "avx2,fma,f16c")]
        pub unsafe fn $name<const RW: usize, const RA: usize>(
            w: [&[$block]; RW],
            a: [&[BlockA16]; RA],
            out: &mut [f32],
            next: &[u8],
        ) {
            tile::<$fmt, RW, RA>(w[0].len(), w, a, out, next)
        }
    };
}

entry!(dot_q4_k, Q4K, BlockQ4K);
entry!(dot_q5_k, Q5K, BlockQ5K);
entry!(dot_q6_k, Q6K, BlockQ6K);
entry!(dot_q8_0, Q80, BlockQ8_0);
entry!(dot_q5_0, Q50, BlockQ5_0);

/// One 32-value sub-block's quants as four vectors of eight i32 (values 0–7, …, 24–31),
/// `round_ties_even(x · (qmax / amax))` clamped to ±qmax (`cvtps` rounds to nearest-even like
/// `round_ties_even`), with the scale `amax / qmax` and the quants' sum. `None` when the
/// sub-block holds a NaN (callers then use their reference, whose NaN handling differs from
/// `cvtps`'s); zero quants, scale and sum when `amax` is 0 or not finite. Shared by A16 and A8.
///
/// # Safety
/// AVX2, FMA and F16C must be available; `x.len() >= 32`.
#[inline(always)]
pub(crate) unsafe fn quantize_sub_i32(x: &[f32], qmax: f32) -> Option<([__m256i; 4], f32, i32)> {
    let p = x.as_ptr();
    let v = [
        _mm256_loadu_ps(p),
        _mm256_loadu_ps(p.add(8)),
        _mm256_loadu_ps(p.add(16)),
        _mm256_loadu_ps(p.add(24)),
    ];
    let mut nan = _mm256_setzero_ps();
    for &x in &v {
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    }
    if _mm256_movemask_ps(nan) != 0 {
        return None;
    }
    let abs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fff_ffff));
    let m = _mm256_max_ps(
        _mm256_max_ps(_mm256_and_ps(v[0], abs), _mm256_and_ps(v[1], abs)),
        _mm256_max_ps(_mm256_and_ps(v[2], abs), _mm256_and_ps(v[3], abs)),
    );
    let m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    let m2 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    let amax = _mm_cvtss_f32(_mm_max_ss(m2, _mm_shuffle_ps(m2, m2, 1)));
    let mut ints = [_mm256_setzero_si256(); 4];
    if amax == 0.0 || !amax.is_finite() {
        return Some((ints, 0.0, 0));
    }
    let id = _mm256_set1_ps(qmax / amax);
    let q = qmax as i32;
    let (lo, hi) = (_mm256_set1_epi32(-q), _mm256_set1_epi32(q));
    let mut sum = _mm256_setzero_si256();
    for k in 0..4 {
        let i = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], id));
        ints[k] = _mm256_min_epi32(_mm256_max_epi32(i, lo), hi);
        sum = _mm256_add_epi32(sum, ints[k]);
    }
    let s4 = _mm_add_epi32(
        _mm256_castsi256_si128(sum),
        _mm256_extracti128_si256(sum, 1),
    );
    let s2 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0b01_00_11_10));
    let s1 = _mm_add_epi32(s2, _mm_shuffle_epi32(s2, 0b10_11_00_01));
    Some((ints, amax / qmax, _mm_cvtsi128_si32(s1)))
}

/// Quantize one 32-value sub-block as `a16::quantize_row` does; returns `None` when the
/// sub-block holds a NaN (the caller then uses the reference).
///
/// # Safety
/// AVX2, FMA and F16C must be available; `x.len() >= 32`, `q.len() >= 32`.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn quantize_sub(x: &[f32], q: &mut [i16]) -> Option<(f32, i32)> {
    let (ints, d, sum) = quantize_sub_i32(x, crate::a16::QMAX)?;
    let qp = q.as_mut_ptr();
    for k in 0..2 {
        let packed = _mm256_packs_epi32(ints[2 * k], ints[2 * k + 1]);
        let ordered = _mm256_permute4x64_epi64(packed, 0b11_01_10_00);
        _mm256_storeu_si256(qp.add(16 * k) as *mut __m256i, ordered);
    }
    Some((d, sum))
}
