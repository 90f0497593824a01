//! AVX2 kernels for the weight · A8 dot products, on tiles of `RW` weight rows × `RA`
//! activation rows (`RW = 4, RA = 1` for decode, `RW ≤ 2, RA ≤ 4` for prefill): straight from
//! the packed weight bytes (`a16_fmt::Fmt::bytes`, decoded once per tile and sub-block), or on
//! rows unpacked once into the interleaved order (`a8_unpack`).
//!
//! Bit-identical to the references in `a8`: `vpmaddubsw` multiplies unsigned by signed bytes
//! and adds adjacent pairs into i16 (no saturation: |pair| ≤ 2·128·127 < 2^15), `vpmaddwd` with
//! ones adds adjacent pairs of those; the lane partials of sixteen values are then exact i32
//! sums — from natural-order sub-blocks by two rounds of `vphaddd` (packed tiles), from the
//! interleaved order by adding the four rows of a group (unpacked tiles). Unsigned weights
//! (Q4_K, Q5_K) go in as they are; signed ones as `|w|` with the activation's sign flipped
//! where `w < 0` (`vpsignb`; exact, activations are within ±127). Each (weight row, activation
//! row) pair has its own two accumulators (lanes 0–7 and 8–15), updated once per group with the
//! same fused multiply-add by the same scale; the final reduction is the reference's. The tile
//! shape therefore never changes a result.
//!
//! Safety: the entry points are `unsafe` and `#[target_feature(enable = "avx2,fma,f16c")]`;
//! callers check those features at run time (`SimdLevel::avx2()`) and pass rows of matching
//! lengths (checked by the dispatcher in `a8_dispatch`).

#![allow(unsafe_op_in_unsafe_fn)]

use std::arch::x86_64::*;

use crate::a16_avx2::{prefetch_ahead, quantize_sub_i32, reduce8, Spread};
use crate::a16_fmt::{Fmt, Q4K, Q50, Q5K, Q6K, Q80};
use crate::a8::{BlockA8, UnpackedGroup8, SUB};
use crate::q4_k::BlockQ4K;
use crate::q5_0::BlockQ5_0;
use crate::q5_k::BlockQ5K;
use crate::q6_k::BlockQ6K;
use crate::q8_0::BlockQ8_0;

/// The eight lane partials of sub-block `w`·`a` (32 bytes each; `signed`: `w` signed, else
/// unsigned): lane `l` = values `4l..4l+4`. `vnni`: one `vpdpbusd` instead of `vpmaddubsw` +
/// `vpmaddwd` (the same exact sums; only in functions that enable AVX-512 VNNI/VL).
#[inline(always)]
unsafe fn quad_partials(signed: bool, vnni: bool, wv: __m256i, av: __m256i) -> __m256i {
    let (wu, a) = if signed {
        (_mm256_abs_epi8(wv), _mm256_sign_epi8(av, wv))
    } else {
        (wv, av)
    };
    if vnni {
        _mm256_dpbusd_epi32(_mm256_setzero_si256(), wu, a)
    } else {
        _mm256_madd_epi16(_mm256_maddubs_epi16(wu, a), _mm256_set1_epi16(1))
    }
}

/// The packed tile kernel: `out[rw * RA + ra] = dot(w[rw], a[ra])`. A non-empty `next` (the
/// following tile's bytes, decode only) is prefetched a few lines per sub-block, spread evenly
/// over the tile's work, and then replaces the in-row prefetch (module `prefetch`).
// Group, row and sub-block indices address several arrays at once.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
unsafe fn tile<F: Fmt, const RW: usize, const RA: usize, const VNNI: bool>(
    nb: usize,
    w: [&[F::Block]; RW],
    a: [&[BlockA8]; RA],
    out: &mut [f32],
    next: &[u8],
) {
    let groups = a[0].len();
    let mut pf = Spread::new(next, || (0..groups).map(|g| F::n_sub(nb, g)).sum());
    let zero = _mm256_setzero_si256();
    // Lanes 0–7 (first halves) and 8–15 (second halves) of each pair's accumulators.
    let mut acc_lo = [[_mm256_setzero_ps(); RA]; RW];
    let mut acc_hi = [[_mm256_setzero_ps(); RA]; RW];
    let mut macc = [[_mm256_setzero_ps(); RA]; RW];
    for g in 0..groups {
        let n_sub = F::n_sub(nb, g);
        if RA == 1 && !pf.active() {
            prefetch_ahead::<F, RW>(w, g, groups);
        }
        // Sub-block `j`'s eight four-value partials per (row, token); zero past the row's end.
        // (A macro, not a closure: closures do not inherit the target features.)
        macro_rules! partials {
            ($j:expr) => {{
                let j = $j;
                let mut p = [[zero; RA]; RW];
                if j < n_sub {
                    pf.step();
                    let mut wv = [zero; RW];
                    for rw in 0..RW {
                        wv[rw] = F::bytes(w[rw], g, j);
                    }
                    for ra in 0..RA {
                        let at = a[ra][g].qs.as_ptr().add(SUB * j) as *const __m256i;
                        let av = _mm256_loadu_si256(at);
                        for rw in 0..RW {
                            p[rw][ra] = quad_partials(F::SIGNED, VNNI, wv[rw], av);
                        }
                    }
                }
                p
            }};
        }
        // Sub-blocks 4q..4q+4 summed into halves, `[h0 of each | h1 of each]`, per quad q.
        let mut quad = [[[zero; 2]; RA]; RW];
        for q in 0..2 {
            let (p0, p1) = (partials!(4 * q), partials!(4 * q + 1));
            let mut h01 = [[zero; RA]; RW];
            for rw in 0..RW {
                for ra in 0..RA {
                    h01[rw][ra] = _mm256_hadd_epi32(p0[rw][ra], p1[rw][ra]);
                }
            }
            let (p2, p3) = (partials!(4 * q + 2), partials!(4 * q + 3));
            for rw in 0..RW {
                for ra in 0..RA {
                    let h23 = _mm256_hadd_epi32(p2[rw][ra], p3[rw][ra]);
                    quad[rw][ra][q] = _mm256_hadd_epi32(h01[rw][ra], h23);
                }
            }
        }
        for rw in 0..RW {
            let sc = F::scales(w[rw], g);
            let ws_hi = if F::SPLIT { sc.ws_hi } else { sc.ws };
            for ra in 0..RA {
                let da = _mm256_loadu_ps(a[ra][g].d.as_ptr());
                let [q0, q1] = quad[rw][ra];
                let lo = _mm256_cvtepi32_ps(_mm256_permute2x128_si256::<0x20>(q0, q1));
                let hi = _mm256_cvtepi32_ps(_mm256_permute2x128_si256::<0x31>(q0, q1));
                acc_lo[rw][ra] = _mm256_fmadd_ps(_mm256_mul_ps(sc.ws, da), lo, acc_lo[rw][ra]);
                acc_hi[rw][ra] = _mm256_fmadd_ps(_mm256_mul_ps(ws_hi, da), hi, acc_hi[rw][ra]);
                if F::MINS {
                    let sum = _mm256_loadu_si256(a[ra][g].sum.as_ptr() as *const __m256i);
                    let fas = _mm256_cvtepi32_ps(sum);
                    macc[rw][ra] = _mm256_fmadd_ps(_mm256_mul_ps(sc.wm, da), fas, macc[rw][ra]);
                }
            }
        }
    }
    finish(F::MINS, &acc_lo, &acc_hi, &macc, out, RA);
}

/// `out[rw * stride + ra] = reduce8(acc_lo + acc_hi) − reduce8(macc)` (without the min term
/// when `!mins`).
#[inline(always)]
unsafe fn finish<const RW: usize, const RA: usize>(
    mins: bool,
    acc_lo: &[[__m256; RA]; RW],
    acc_hi: &[[__m256; RA]; RW],
    macc: &[[__m256; RA]; RW],
    out: &mut [f32],
    stride: usize,
) {
    for rw in 0..RW {
        for ra in 0..RA {
            let r = reduce8(_mm256_add_ps(acc_lo[rw][ra], acc_hi[rw][ra]));
            out[rw * stride + ra] = if mins { r - reduce8(macc[rw][ra]) } else { r };
        }
    }
}

/// The unpacked tile kernel (interleaved rows from `a8_unpack`, `qs_il` activations):
/// `out[rw * stride + ra] = dot(w[rw], a[ra])`. `SIGNED`: the format's weights can be negative.
// Group, row and token indices address several arrays at once.
#[allow(clippy::needless_range_loop)]
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_unpacked<
    const SIGNED: bool,
    const MINS: bool,
    const RW: usize,
    const RA: usize,
>(
    w: [&[UnpackedGroup8]; RW],
    a: [&[BlockA8]; RA],
    out: &mut [f32],
    stride: usize,
) {
    let groups = a[0].len();
    // The stored weights are offset by +128; `^ 0x80` gives the signed weights back.
    let flip = _mm256_set1_epi8(-128);
    let mut acc = [[[_mm256_setzero_ps(); RA]; RW]; 2];
    let mut macc = [[_mm256_setzero_ps(); RA]; RW];
    for g in 0..groups {
        for h in 0..2 {
            let mut p = [[_mm256_setzero_si256(); RA]; RW];
            for k in 0..4 {
                let o = 64 * k + 32 * h;
                let mut wv = [_mm256_setzero_si256(); RW];
                for rw in 0..RW {
                    let u = _mm256_loadu_si256(w[rw][g].q.as_ptr().add(o) as *const __m256i);
                    wv[rw] = _mm256_xor_si256(u, flip);
                }
                for ra in 0..RA {
                    let av = _mm256_loadu_si256(a[ra][g].qs_il.as_ptr().add(o) as *const __m256i);
                    for rw in 0..RW {
                        p[rw][ra] =
                            _mm256_add_epi32(p[rw][ra], quad_partials(SIGNED, false, wv[rw], av));
                    }
                }
            }
            for rw in 0..RW {
                let u = &w[rw][g];
                let ws = _mm256_loadu_ps(if h == 0 {
                    u.ws.as_ptr()
                } else {
                    u.ws_hi.as_ptr()
                });
                for ra in 0..RA {
                    let da = _mm256_loadu_ps(a[ra][g].d.as_ptr());
                    let pf = _mm256_cvtepi32_ps(p[rw][ra]);
                    acc[h][rw][ra] = _mm256_fmadd_ps(_mm256_mul_ps(ws, da), pf, acc[h][rw][ra]);
                }
            }
        }
        if MINS {
            for rw in 0..RW {
                let wm = _mm256_loadu_ps(w[rw][g].wm.as_ptr());
                for ra in 0..RA {
                    let da = _mm256_loadu_ps(a[ra][g].d.as_ptr());
                    let sum = _mm256_loadu_si256(a[ra][g].sum.as_ptr() as *const __m256i);
                    let fas = _mm256_cvtepi32_ps(sum);
                    macc[rw][ra] = _mm256_fmadd_ps(_mm256_mul_ps(wm, da), fas, macc[rw][ra]);
                }
            }
        }
    }
    finish(MINS, &acc[0], &acc[1], &macc, out, stride);
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
            tile::<$fmt, RW, RA, false>(w[0].len(), w, a, out, next)
        }
    };
}

entry!(dot_q4_k, Q4K, BlockQ4K);
entry!(dot_q5_k, Q5K, BlockQ5K);
entry!(dot_q6_k, Q6K, BlockQ6K);
entry!(dot_q8_0, Q80, BlockQ8_0);
entry!(dot_q5_0, Q50, BlockQ5_0);

macro_rules! entry_vnni {
    ($name:ident, $fmt:ty, $block:ty) => {
        /// As the AVX2 entry of this format, with `vpdpbusd` for the lane partials (the same
        /// bits); callers check AVX-512 VNNI/VL (`SimdLevel::vnni()`).
        #[target_feature(enable = "avx512vnni,avx512vl,avx512f,avx512bw,avx2,fma,f16c")]
        pub unsafe fn $name<const RW: usize, const RA: usize>(
            w: [&[$block]; RW],
            a: [&[BlockA8]; RA],
            out: &mut [f32],
            next: &[u8],
        ) {
            tile::<$fmt, RW, RA, true>(w[0].len(), w, a, out, next)
        }
    };
}

entry_vnni!(dot_q4_k_vnni, Q4K, BlockQ4K);
entry_vnni!(dot_q5_k_vnni, Q5K, BlockQ5K);
entry_vnni!(dot_q6_k_vnni, Q6K, BlockQ6K);
entry_vnni!(dot_q8_0_vnni, Q80, BlockQ8_0);
entry_vnni!(dot_q5_0_vnni, Q50, BlockQ5_0);

/// Unpack the rows of `w` (each `nb` 32-value blocks of format `F`, `groups` groups) into
/// `out` (`groups` per row; every byte is written): scales exactly as the packed tiles compute
/// them (`Fmt::scales`; `ws_hi = ws` for the formats with one scale per sub-block), quants as
/// the packed tiles see them (`Fmt::bytes`) offset by +128 in the interleaved order
/// (`a8::il_index`) — so the unpacked tiles give the packed tiles' bits.
// Group and sub-block indices address several arrays at once.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
unsafe fn unpack<F: Fmt>(
    rows: &[&[F::Block]],
    nb: usize,
    groups: usize,
    out: &mut [UnpackedGroup8],
) {
    let flip = _mm256_set1_epi8(-128);
    for (row, og) in rows.iter().zip(out.chunks_mut(groups)) {
        for (g, o) in og.iter_mut().enumerate() {
            let sc = F::scales(row, g);
            _mm256_storeu_ps(o.ws.as_mut_ptr(), sc.ws);
            _mm256_storeu_ps(
                o.ws_hi.as_mut_ptr(),
                if F::SPLIT { sc.ws_hi } else { sc.ws },
            );
            _mm256_storeu_ps(o.wm.as_mut_ptr(), sc.wm);
            let n_sub = F::n_sub(nb, g);
            // Missing sub-blocks: weight 0, stored as 0x80.
            let mut q = [[i32::from_ne_bytes([0x80; 4]); 8]; 8];
            for j in 0..n_sub {
                let v = _mm256_xor_si256(F::bytes(row, g, j), flip);
                _mm256_storeu_si256(q[j].as_mut_ptr() as *mut __m256i, v);
            }
            // Dword `d` of sub-block `j` (values 4d..4d+4) to its interleaved place.
            let qd: &mut [i32; 64] = bytemuck::cast_mut(&mut o.q);
            for j in 0..8 {
                for d in 0..8 {
                    qd[crate::a8::il_index(32 * j + 4 * d) / 4] = q[j][d];
                }
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
