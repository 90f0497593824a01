//! AVX2 kernels for the weight · A8 dot products, on tiles of `RW` weight rows × `RA`
//! activation rows (`RW = 4, RA = 1` for decode, `RW ≤ 2, RA ≤ 4` for prefill), straight from
//! the packed weight bytes (`a16_fmt::Fmt::bytes`, decoded once per tile and sub-block).
//!
//! Bit-identical to the references in `a8`: `vpmaddubsw` multiplies unsigned by signed bytes
//! and adds adjacent pairs into i16 (no saturation: |pair| ≤ 2·128·127 < 2^15), `vpmaddwd` with
//! ones adds adjacent pairs of those into the reference's eight lane partials. Unsigned weights
//! (Q4_K, Q5_K) go in as they are; signed ones as `|w|` with the activation's sign flipped
//! where `w < 0` (`vpsignb`; exact, activations are within ±127). Each (weight row, activation
//! row) pair has its own two accumulators (even and odd sub-blocks), updated with the same fused
//! multiply-add by the same scale in the same order; the final reduction is the reference's. The tile shape
//! therefore never changes a result.
//!
//! Safety: the entry points are `unsafe` and `#[target_feature(enable = "avx2,fma,f16c")]`;
//! callers check those features at run time (`SimdLevel::avx2()`) and pass rows of matching
//! lengths (checked by the dispatcher in `a8_dispatch`).

#![allow(unsafe_op_in_unsafe_fn)]

use std::arch::x86_64::*;

use crate::a16_avx2::{group_scales, prefetch_ahead, quantize_sub_i32, reduce8, Spread};
use crate::a16_fmt::{stored_scales, Fmt, Scales, Q4K, Q50, Q5K, Q6K, Q80};
use crate::a8::{BlockA8, UnpackedGroup8, SUB};
use crate::q4_k::BlockQ4K;
use crate::q5_0::BlockQ5_0;
use crate::q5_k::BlockQ5K;
use crate::q6_k::BlockQ6K;
use crate::q8_0::BlockQ8_0;

/// The tile kernel: `out[rw * RA + ra] = dot(w[rw], a[ra])`. A non-empty `next` (the
/// following tile's bytes, decode only) is prefetched a few lines per sub-block, spread evenly
/// over the tile's work, and then replaces the in-row prefetch (module `prefetch`).
// Group, row and sub-block indices address several arrays at once.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
unsafe fn tile<F: Fmt, const RW: usize, const RA: usize>(
    nb: usize,
    w: [&[F::Block]; RW],
    a: [&[BlockA8]; RA],
    out: &mut [f32],
    next: &[u8],
) {
    let groups = a[0].len();
    let mut pf = Spread::new(next, || (0..groups).map(|g| F::n_sub(nb, g)).sum());
    let ones = _mm256_set1_epi16(1);
    // acc[0]: even sub-blocks, acc[1]: odd ones (the reference's two accumulator sets).
    let mut acc = [[[_mm256_setzero_ps(); RA]; RW]; 2];
    let mut macc = [[_mm256_setzero_ps(); RA]; RW];
    for g in 0..groups {
        let n_sub = F::n_sub(nb, g);
        if RA == 1 && !pf.active() {
            prefetch_ahead::<F, RW>(w, g, groups);
        }
        let mut s = [[[0f32; 8]; RA]; RW];
        let mut s_hi = [[[0f32; 8]; RA]; RW];
        group_scales::<F, BlockA8, RW, RA>(w, a, g, &mut s, &mut s_hi, &mut macc);
        // Sub-block `$j` into accumulator set `$par` (a constant, so the sets stay in registers).
        macro_rules! sub_block {
            ($j:expr, $par:literal) => {{
                let j = $j;
                pf.step();
                let mut wv = [_mm256_setzero_si256(); RW];
                let mut wabs = [_mm256_setzero_si256(); RW];
                for rw in 0..RW {
                    wv[rw] = F::bytes(w[rw], g, j);
                    if F::SIGNED {
                        wabs[rw] = _mm256_abs_epi8(wv[rw]);
                    }
                }
                for ra in 0..RA {
                    let av =
                        _mm256_loadu_si256(a[ra][g].qs.as_ptr().add(SUB * j) as *const __m256i);
                    for rw in 0..RW {
                        let pairs = if F::SIGNED {
                            _mm256_maddubs_epi16(wabs[rw], _mm256_sign_epi8(av, wv[rw]))
                        } else {
                            _mm256_maddubs_epi16(wv[rw], av)
                        };
                        let p = _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, ones));
                        let lo = _mm256_broadcast_ss(&s[rw][ra][j]);
                        let sv = if F::SPLIT {
                            _mm256_blend_ps::<0b1111_0000>(
                                lo,
                                _mm256_broadcast_ss(&s_hi[rw][ra][j]),
                            )
                        } else {
                            lo
                        };
                        acc[$par][rw][ra] = _mm256_fmadd_ps(sv, p, acc[$par][rw][ra]);
                    }
                }
            }};
        }
        let mut j = 0;
        while j < n_sub {
            sub_block!(j, 0);
            if j + 1 < n_sub {
                sub_block!(j + 1, 1);
            }
            j += 2;
        }
    }
    for rw in 0..RW {
        for ra in 0..RA {
            let r = reduce8(_mm256_add_ps(acc[0][rw][ra], acc[1][rw][ra]));
            out[rw * RA + ra] = if F::MINS {
                r - reduce8(macc[rw][ra])
            } else {
                r
            };
        }
    }
}

/// Rows unpacked by `a8::unpack_row` (any format; `SPLIT`/`MINS` as that format).
struct Unp8<const SPLIT: bool, const MINS: bool>;

impl<const SPLIT_: bool, const MINS_: bool> Fmt for Unp8<SPLIT_, MINS_> {
    type Block = UnpackedGroup8;
    /// The formats with a min term (Q4_K, Q5_K) have unsigned weights (0..32), which go into
    /// `vpmaddubsw` as they are; the others are signed.
    const SIGNED: bool = !MINS_;
    const VALUES_PER_BLOCK: usize = 256;
    const SPLIT: bool = SPLIT_;
    const MINS: bool = MINS_;
    fn n_sub(nb: usize, g: usize) -> usize {
        (nb - 8 * g).min(8)
    }
    #[inline(always)]
    unsafe fn scales(row: &[UnpackedGroup8], g: usize) -> Scales {
        let u = &row[g];
        stored_scales(&u.ws, &u.ws_hi, &u.wm)
    }
    #[inline(always)]
    unsafe fn bytes(row: &[UnpackedGroup8], g: usize, j: usize) -> __m256i {
        _mm256_loadu_si256(row[g].q.as_ptr().add(SUB * j) as *const __m256i)
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
    w: [&[UnpackedGroup8]; RW],
    a: [&[BlockA8]; RA],
    out: &mut [f32],
) {
    tile::<Unp8<SPLIT, MINS>, RW, RA>(nb, w, a, out, &[])
}

macro_rules! entry {
    ($name:ident, $fmt:ty, $block:ty) => {
        /// `out[rw * RA + ra] = dot(w[rw], a[ra])` for this weight format, prefetching
        /// `next` (hints only) spread over the tile's sub-blocks.
        #[target_feature(enable = "avx2,fma,f16c")]
        pub unsafe fn $name<const RW: usize, const RA: usize>(
            w: [&[$block]; RW],
            a: [&[BlockA8]; RA],
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

/// Unpack the rows of `w` (each `nb` 32-value blocks of format `F`, `groups` groups) into
/// `out` (`groups` per row; every byte is written): scales exactly as the packed tiles compute
/// them (`Fmt::scales`), quants as the packed tiles see them (`Fmt::bytes`) — so the unpacked
/// tiles give the packed tiles' bits — and each lane's offset correction (`corr`).
#[inline(always)]
unsafe fn unpack<F: Fmt>(
    rows: &[&[F::Block]],
    nb: usize,
    groups: usize,
    out: &mut [UnpackedGroup8],
) {
    for (row, og) in rows.iter().zip(out.chunks_mut(groups)) {
        for (g, o) in og.iter_mut().enumerate() {
            let sc = F::scales(row, g);
            _mm256_storeu_ps(o.ws.as_mut_ptr(), sc.ws);
            _mm256_storeu_ps(o.ws_hi.as_mut_ptr(), sc.ws_hi);
            _mm256_storeu_ps(o.wm.as_mut_ptr(), sc.wm);
            let n_sub = F::n_sub(nb, g);
            // A partial last group: the missing sub-blocks are zero (the buffer is reused).
            o.q[SUB * n_sub..].fill(0);
            o.corr[8 * n_sub..].fill(0);
            for j in 0..n_sub {
                let v = F::bytes(row, g, j);
                _mm256_storeu_si256(o.q.as_mut_ptr().add(SUB * j) as *mut __m256i, v);
                // Lane sums of four (signed bytes times ones), times -128.
                let sums = _mm256_madd_epi16(
                    _mm256_maddubs_epi16(_mm256_set1_epi8(1), v),
                    _mm256_set1_epi16(1),
                );
                let corr = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(sums, 7));
                _mm256_storeu_si256(o.corr.as_mut_ptr().add(8 * j) as *mut __m256i, corr);
            }
        }
    }
}

macro_rules! unpack_entry {
    ($name:ident, $fmt:ty, $block:ty) => {
        /// Unpack rows of this format for the A8 prefill tiles (see `unpack`).
        #[target_feature(enable = "avx2,fma,f16c")]
        pub unsafe fn $name(
            rows: &[&[$block]],
            nb: usize,
            groups: usize,
            out: &mut [UnpackedGroup8],
        ) {
            unpack::<$fmt>(rows, nb, groups, out)
        }
    };
}

unpack_entry!(unpack_q4_k, Q4K, BlockQ4K);
unpack_entry!(unpack_q5_k, Q5K, BlockQ5K);
unpack_entry!(unpack_q6_k, Q6K, BlockQ6K);
unpack_entry!(unpack_q8_0, Q80, BlockQ8_0);
unpack_entry!(unpack_q5_0, Q50, BlockQ5_0);

/// Quantize one 32-value sub-block as `a8::quantize_row` does; returns `None` when the
/// sub-block holds a NaN (the caller then uses the reference).
///
/// # Safety
/// AVX2, FMA and F16C must be available; `x.len() >= 32`, `q.len() >= 32`.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn quantize_sub(x: &[f32], q: &mut [i8]) -> Option<(f32, i32)> {
    let (ints, d, sum) = quantize_sub_i32(x, crate::a8::QMAX)?;
    // Per 128-bit half, packing gives dwords of 4 bytes in the order 0, 8, 16, 24 | 4, 12, 20,
    // 28 (values ÷ 4 … as first value); the permutation restores 0, 4, 8, …, 28.
    let p01 = _mm256_packs_epi32(ints[0], ints[1]);
    let p23 = _mm256_packs_epi32(ints[2], ints[3]);
    let bytes = _mm256_packs_epi16(p01, p23);
    let ordered = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(q.as_mut_ptr() as *mut __m256i, ordered);
    Some((d, sum))
}
