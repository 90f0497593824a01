//! AVX2 kernels for the weight · A16 dot products, on tiles of `RW` weight rows × `RA`
//! activation rows: `RW = 4, RA = 1` for decode (four independent accumulator chains share each
//! activation load), `RW = 1, RA = 1..=4` for prefill (each unpacked weight sub-block is reused
//! by up to four tokens).
//!
//! Bit-identical to the references in `a16`: `vpmaddwd` on the two 16-value halves of a
//! sub-block gives exactly the reference's lane partials, which are exact in f32; each (weight
//! row, activation row) pair has its own accumulators, updated with the same fused multiply-add
//! by the same scale in the same order; the final reduction is the reference's tree. The tile
//! shape therefore never changes a result.
//!
//! Owns: one `Fmt` implementation per weight format (per-group scale vectors and per-sub-block
//! i16 weights) and the one tile kernel they share.
//!
//! Safety: the entry points are `unsafe` and `#[target_feature(enable = "avx2,fma,f16c")]`;
//! callers check those features at run time (`SimdLevel::Avx2`) and pass rows of matching
//! lengths (checked by the dispatcher in `a16`).

#![allow(unsafe_op_in_unsafe_fn)]

use std::arch::x86_64::*;

use crate::a16::{BlockA16, UnpackedGroup, SUB};
use crate::common::unpack_k4_scales;
use crate::q4_k::BlockQ4K;
use crate::q5_0::BlockQ5_0;
use crate::q5_k::BlockQ5K;
use crate::q6_k::BlockQ6K;
use crate::q8_0::BlockQ8_0;

/// `((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7))`, as `a16::reduce8`.
#[inline(always)]
unsafe fn reduce8(acc: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    let t = _mm_add_ps(s, _mm_movehl_ps(s, s));
    _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)))
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

/// Scale vectors of one group of one weight row (lane `j` = sub-block `j`).
#[derive(Clone, Copy)]
struct Scales {
    /// Weight scale of each sub-block (Q6_K: of its first half).
    ws: __m256,
    /// Q6_K: scale of each sub-block's second half.
    ws_hi: __m256,
    /// Q4_K/Q5_K: the min factor `dmin · m_j`.
    wm: __m256,
}

/// How one weight format presents itself to the tile kernel.
trait Fmt {
    type Block;
    /// Q6_K: two scales per sub-block.
    const SPLIT: bool;
    /// Q4_K/Q5_K: a min term.
    const MINS: bool;
    /// Sub-blocks of group `g` present in a row of `nb` blocks.
    fn n_sub(nb: usize, g: usize) -> usize;
    /// Bytes of one group (256 values) of a row.
    fn group_bytes() -> usize {
        std::mem::size_of::<Self::Block>() * 256 / Self::VALUES_PER_BLOCK
    }
    /// Values per `Block`.
    const VALUES_PER_BLOCK: usize;
    unsafe fn scales(row: &[Self::Block], g: usize) -> Scales;
    /// Sub-block `j` of group `g` as two vectors of 16 i16 (offset-corrected).
    unsafe fn weights(row: &[Self::Block], g: usize, j: usize) -> (__m256i, __m256i);
}

struct Q4K;
struct Q5K;
struct Q6K;
struct Q80;
struct Q50;

impl Fmt for Q4K {
    type Block = BlockQ4K;
    const VALUES_PER_BLOCK: usize = 256;
    const SPLIT: bool = false;
    const MINS: bool = true;
    fn n_sub(_: usize, _: usize) -> usize {
        8
    }
    #[inline(always)]
    unsafe fn scales(row: &[BlockQ4K], g: usize) -> Scales {
        let b = &row[g];
        let (sc, m) = unpack_k4_scales(&b.scales);
        Scales {
            ws: scaled_u8(&sc, f16_bits_to_f32(b.d.to_bits())),
            ws_hi: _mm256_setzero_ps(),
            wm: scaled_u8(&m, f16_bits_to_f32(b.dmin.to_bits())),
        }
    }
    #[inline(always)]
    unsafe fn weights(row: &[BlockQ4K], g: usize, j: usize) -> (__m256i, __m256i) {
        let v = _mm256_loadu_si256(row[g].qs.as_ptr().add(32 * (j / 2)) as *const __m256i);
        let v = if j % 2 == 0 {
            v
        } else {
            _mm256_srli_epi16(v, 4)
        };
        u8_to_i16x2(_mm256_and_si256(v, _mm256_set1_epi8(0x0f)))
    }
}

impl Fmt for Q5K {
    type Block = BlockQ5K;
    const VALUES_PER_BLOCK: usize = 256;
    const SPLIT: bool = false;
    const MINS: bool = true;
    fn n_sub(_: usize, _: usize) -> usize {
        8
    }
    #[inline(always)]
    unsafe fn scales(row: &[BlockQ5K], g: usize) -> Scales {
        let b = &row[g];
        let (sc, m) = unpack_k4_scales(&b.scales);
        Scales {
            ws: scaled_u8(&sc, f16_bits_to_f32(b.d.to_bits())),
            ws_hi: _mm256_setzero_ps(),
            wm: scaled_u8(&m, f16_bits_to_f32(b.dmin.to_bits())),
        }
    }
    #[inline(always)]
    unsafe fn weights(row: &[BlockQ5K], g: usize, j: usize) -> (__m256i, __m256i) {
        let b = &row[g];
        let v = _mm256_loadu_si256(b.qs.as_ptr().add(32 * (j / 2)) as *const __m256i);
        let v = if j % 2 == 0 {
            v
        } else {
            _mm256_srli_epi16(v, 4)
        };
        let qh = _mm256_loadu_si256(b.qh.as_ptr() as *const __m256i);
        let bit = _mm256_and_si256(
            _mm256_srl_epi16(qh, _mm_cvtsi32_si128(j as i32)),
            _mm256_set1_epi8(1),
        );
        let q = _mm256_or_si256(
            _mm256_and_si256(v, _mm256_set1_epi8(0x0f)),
            _mm256_slli_epi16(bit, 4),
        );
        u8_to_i16x2(q)
    }
}

impl Fmt for Q6K {
    type Block = BlockQ6K;
    const VALUES_PER_BLOCK: usize = 256;
    const SPLIT: bool = true;
    const MINS: bool = false;
    fn n_sub(_: usize, _: usize) -> usize {
        8
    }
    #[inline(always)]
    unsafe fn scales(row: &[BlockQ6K], g: usize) -> Scales {
        let b = &row[g];
        // Even scale indices first, then odd.
        let deint = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
        let sc = _mm_shuffle_epi8(_mm_loadu_si128(b.scales.as_ptr() as *const __m128i), deint);
        let d = _mm256_set1_ps(f16_bits_to_f32(b.d.to_bits()));
        Scales {
            ws: _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc))),
            ws_hi: _mm256_mul_ps(
                d,
                _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(sc, 8))),
            ),
            wm: _mm256_setzero_ps(),
        }
    }
    #[inline(always)]
    unsafe fn weights(row: &[BlockQ6K], g: usize, j: usize) -> (__m256i, __m256i) {
        let b = &row[g];
        let (h, s) = (j / 4, j % 4);
        // Sub-block s of half h: low/high nibbles of ql[64h + 32(s % 2)..], 2 bits of qh at 2s.
        let ql = _mm256_loadu_si256(b.ql.as_ptr().add(64 * h + 32 * (s % 2)) as *const __m256i);
        let ql = if s < 2 { ql } else { _mm256_srli_epi16(ql, 4) };
        let qh = _mm256_loadu_si256(b.qh.as_ptr().add(32 * h) as *const __m256i);
        let hi = _mm256_and_si256(
            _mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * s as i32)),
            _mm256_set1_epi8(3),
        );
        let q = _mm256_or_si256(
            _mm256_and_si256(ql, _mm256_set1_epi8(0x0f)),
            _mm256_slli_epi16(hi, 4),
        );
        i8_to_i16x2(_mm256_sub_epi8(q, _mm256_set1_epi8(32)))
    }
}

impl Fmt for Q80 {
    type Block = BlockQ8_0;
    const VALUES_PER_BLOCK: usize = 32;
    const SPLIT: bool = false;
    const MINS: bool = false;
    fn n_sub(nb: usize, g: usize) -> usize {
        (nb - 8 * g).min(8)
    }
    #[inline(always)]
    unsafe fn scales(row: &[BlockQ8_0], g: usize) -> Scales {
        let mut bits = [0u16; 8];
        for (j, b) in row[8 * g..].iter().take(8).enumerate() {
            bits[j] = b.d.to_bits();
        }
        Scales {
            ws: _mm256_cvtph_ps(_mm_loadu_si128(bits.as_ptr() as *const __m128i)),
            ws_hi: _mm256_setzero_ps(),
            wm: _mm256_setzero_ps(),
        }
    }
    #[inline(always)]
    unsafe fn weights(row: &[BlockQ8_0], g: usize, j: usize) -> (__m256i, __m256i) {
        i8_to_i16x2(_mm256_loadu_si256(
            row[8 * g + j].qs.as_ptr() as *const __m256i
        ))
    }
}

impl Fmt for Q50 {
    type Block = BlockQ5_0;
    const VALUES_PER_BLOCK: usize = 32;
    const SPLIT: bool = false;
    const MINS: bool = false;
    fn n_sub(nb: usize, g: usize) -> usize {
        (nb - 8 * g).min(8)
    }
    #[inline(always)]
    unsafe fn scales(row: &[BlockQ5_0], g: usize) -> Scales {
        let mut bits = [0u16; 8];
        for (j, b) in row[8 * g..].iter().take(8).enumerate() {
            bits[j] = b.d.to_bits();
        }
        Scales {
            ws: _mm256_cvtph_ps(_mm_loadu_si128(bits.as_ptr() as *const __m128i)),
            ws_hi: _mm256_setzero_ps(),
            wm: _mm256_setzero_ps(),
        }
    }
    #[inline(always)]
    unsafe fn weights(row: &[BlockQ5_0], g: usize, j: usize) -> (__m256i, __m256i) {
        let b = &row[8 * g + j];
        let qs = _mm_loadu_si128(b.qs.as_ptr() as *const __m128i);
        let m4 = _mm_set1_epi8(0x0f);
        let nib = _mm256_set_m128i(
            _mm_and_si128(_mm_srli_epi16(qs, 4), m4),
            _mm_and_si128(qs, m4),
        );
        let bits = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
        let spread = _mm256_setr_epi8(
            0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3,
            3, 3, 3,
        );
        let qh = _mm256_set1_epi32(i32::from_le_bytes(b.qh));
        let set = _mm256_cmpeq_epi8(
            _mm256_and_si256(_mm256_shuffle_epi8(qh, spread), bits),
            bits,
        );
        let sixteen = _mm256_set1_epi8(0x10);
        let q = _mm256_or_si256(nib, _mm256_and_si256(set, sixteen));
        i8_to_i16x2(_mm256_sub_epi8(q, sixteen))
    }
}

/// Weights already unpacked by `a16::unpack_row` (any format; `SPLIT`/`MINS` as that format).
struct Unp<const SPLIT: bool, const MINS: bool>;

impl<const SPLIT_: bool, const MINS_: bool> Fmt for Unp<SPLIT_, MINS_> {
    type Block = UnpackedGroup;
    const VALUES_PER_BLOCK: usize = 256;
    const SPLIT: bool = SPLIT_;
    const MINS: bool = MINS_;
    fn n_sub(nb: usize, g: usize) -> usize {
        (nb - 8 * g).min(8)
    }
    #[inline(always)]
    unsafe fn scales(row: &[UnpackedGroup], g: usize) -> Scales {
        let u = &row[g];
        Scales {
            ws: _mm256_loadu_ps(u.ws.as_ptr()),
            ws_hi: _mm256_loadu_ps(u.ws_hi.as_ptr()),
            wm: _mm256_loadu_ps(u.wm.as_ptr()),
        }
    }
    #[inline(always)]
    unsafe fn weights(row: &[UnpackedGroup], g: usize, j: usize) -> (__m256i, __m256i) {
        let p = row[g].q.as_ptr().add(SUB * j);
        (
            _mm256_loadu_si256(p as *const __m256i),
            _mm256_loadu_si256(p.add(16) as *const __m256i),
        )
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
    tile::<Unp<SPLIT, MINS>, RW, RA>(nb, w, a, out)
}

/// The shared tile kernel: `out[rw * RA + ra] = dot(w[rw], a[ra])`.
// Group, row and sub-block indices address several arrays at once.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
unsafe fn tile<F: Fmt, const RW: usize, const RA: usize>(
    nb: usize,
    w: [&[F::Block]; RW],
    a: [&[BlockA16]; RA],
    out: &mut [f32],
) {
    let mut acc = [[_mm256_setzero_ps(); RA]; RW];
    let mut macc = [[_mm256_setzero_ps(); RA]; RW];
    let groups = a[0].len();
    for g in 0..groups {
        let n_sub = F::n_sub(nb, g);
        // Decode streams weights from memory: ask for the group after next now.
        if RA == 1 && g + 6 < groups {
            for row in w.iter() {
                let base = row.as_ptr() as *const i8;
                let bytes = F::group_bytes();
                let start = base.add((g + 6) * bytes);
                let mut off = 0;
                while off < bytes {
                    _mm_prefetch::<_MM_HINT_T0>(start.add(off));
                    off += 64;
                }
            }
        }
        // Per-(row, token) sub-block scales, kept in memory so each sub-block's scale is one
        // broadcast load rather than a lane permute.
        let mut s = [[[0f32; 8]; RA]; RW];
        let mut s_hi = [[[0f32; 8]; RA]; RW];
        for rw in 0..RW {
            let sc = F::scales(w[rw], g);
            for ra in 0..RA {
                let ag = &a[ra][g];
                let da = _mm256_loadu_ps(ag.d.as_ptr());
                _mm256_storeu_ps(s[rw][ra].as_mut_ptr(), _mm256_mul_ps(sc.ws, da));
                if F::SPLIT {
                    _mm256_storeu_ps(s_hi[rw][ra].as_mut_ptr(), _mm256_mul_ps(sc.ws_hi, da));
                }
                if F::MINS {
                    let fas =
                        _mm256_cvtepi32_ps(_mm256_loadu_si256(ag.sum.as_ptr() as *const __m256i));
                    macc[rw][ra] = _mm256_fmadd_ps(_mm256_mul_ps(sc.wm, da), fas, macc[rw][ra]);
                }
            }
        }
        for j in 0..n_sub {
            let mut wv = [(_mm256_setzero_si256(), _mm256_setzero_si256()); RW];
            for rw in 0..RW {
                wv[rw] = F::weights(w[rw], g, j);
            }
            for ra in 0..RA {
                let ap = a[ra][g].qs.as_ptr().add(SUB * j);
                let a0 = _mm256_loadu_si256(ap as *const __m256i);
                let a1 = _mm256_loadu_si256(ap.add(16) as *const __m256i);
                for rw in 0..RW {
                    let (w0, w1) = wv[rw];
                    let p0 = _mm256_madd_epi16(w0, a0);
                    let p1 = _mm256_madd_epi16(w1, a1);
                    let sj = _mm256_broadcast_ss(&s[rw][ra][j]);
                    if F::SPLIT {
                        let t = _mm256_fmadd_ps(sj, _mm256_cvtepi32_ps(p0), acc[rw][ra]);
                        let hj = _mm256_broadcast_ss(&s_hi[rw][ra][j]);
                        acc[rw][ra] = _mm256_fmadd_ps(hj, _mm256_cvtepi32_ps(p1), t);
                    } else {
                        let p = _mm256_cvtepi32_ps(_mm256_add_epi32(p0, p1));
                        acc[rw][ra] = _mm256_fmadd_ps(sj, p, acc[rw][ra]);
                    }
                }
            }
        }
    }
    for rw in 0..RW {
        for ra in 0..RA {
            let r = reduce8(acc[rw][ra]);
            out[rw * RA + ra] = if F::MINS {
                r - reduce8(macc[rw][ra])
            } else {
                r
            };
        }
    }
}

macro_rules! entry {
    ($name:ident, $fmt:ty, $block:ty) => {
        /// `out[rw * RA + ra] = dot(w[rw], a[ra])` for this weight format.
        #[target_feature(enable = "avx2,fma,f16c")]
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

/// Quantize one 32-value sub-block as `a16::quantize_row` does (same scale arithmetic, `cvtps`
/// rounds to nearest-even like `round_ties_even`); returns `None` when the sub-block holds a NaN
/// (the caller then uses the reference, whose NaN handling differs from `cvtps`'s).
///
/// # Safety
/// AVX2, FMA and F16C must be available; `x.len() >= 32`, `q.len() >= 32`.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn quantize_sub(x: &[f32], q: &mut [i16]) -> Option<(f32, i32)> {
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
    if amax == 0.0 || !amax.is_finite() {
        q[..32].fill(0);
        return Some((0.0, 0));
    }
    let id = _mm256_set1_ps(crate::a16::QMAX / amax);
    let lo = _mm256_set1_epi32(-32767);
    let hi = _mm256_set1_epi32(32767);
    let mut ints = [_mm256_setzero_si256(); 4];
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
    let qp = q.as_mut_ptr();
    for k in 0..2 {
        let packed = _mm256_packs_epi32(ints[2 * k], ints[2 * k + 1]);
        let ordered = _mm256_permute4x64_epi64(packed, 0b11_01_10_00);
        _mm256_storeu_si256(qp.add(16 * k) as *mut __m256i, ordered);
    }
    Some((amax / crate::a16::QMAX, _mm_cvtsi128_si32(s1)))
}
