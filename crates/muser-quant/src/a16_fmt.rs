//! The x86 view of each weight format for the A16 kernels (shared by the AVX2 and AVX-512
//! tiles): per group of 256 values, the sub-block scale vectors (`Scales`, lane `j` =
//! sub-block `j`, computed exactly as the references in `a16` compute them), and per 32-value
//! sub-block the quant bytes, offset-corrected (`Fmt::bytes`), or for rows unpacked by
//! `a16::unpack_row` the i16 values themselves.
//!
//! Safety: every method is `unsafe` and `#[inline(always)]`; it is only ever inlined into the
//! `#[target_feature]` kernels of `a16_avx2` / `a16_avx512`, whose callers checked the CPU.

#![allow(unsafe_op_in_unsafe_fn)]

use std::arch::x86_64::*;

use crate::a16::{UnpackedGroup, SUB};
use crate::common::unpack_k4_scales;
use crate::q4_k::BlockQ4K;
use crate::q5_0::BlockQ5_0;
use crate::q5_k::BlockQ5K;
use crate::q6_k::BlockQ6K;
use crate::q8_0::BlockQ8_0;

#[inline(always)]
pub(crate) unsafe fn f16_bits_to_f32(bits: u16) -> f32 {
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(bits))))
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

/// The scales of up to eight 32-value blocks (f16 bits) as lanes; missing lanes are 0.
#[inline(always)]
unsafe fn block_scales(d: impl Iterator<Item = u16>) -> Scales {
    let mut bits = [0u16; 8];
    for (j, b) in d.enumerate() {
        bits[j] = b;
    }
    Scales {
        ws: _mm256_cvtph_ps(_mm_loadu_si128(bits.as_ptr() as *const __m128i)),
        ws_hi: _mm256_setzero_ps(),
        wm: _mm256_setzero_ps(),
    }
}

/// Q4_K/Q5_K: `d · sc_j` and `dmin · m_j` lanes from the 12 packed scale bytes.
#[inline(always)]
unsafe fn asym_scales(scales: &[u8; 12], d: u16, dmin: u16) -> Scales {
    let (sc, m) = unpack_k4_scales(scales);
    Scales {
        ws: scaled_u8(&sc, f16_bits_to_f32(d)),
        ws_hi: _mm256_setzero_ps(),
        wm: scaled_u8(&m, f16_bits_to_f32(dmin)),
    }
}

/// Q4_K/Q5_K: the 4-bit part of sub-block `j` (low nibbles of `qs[32(j/2)..]` for even `j`,
/// high nibbles for odd `j`).
#[inline(always)]
unsafe fn nibbles(qs: *const u8, j: usize) -> __m256i {
    let v = _mm256_loadu_si256(qs.add(32 * (j / 2)) as *const __m256i);
    let v = if j.is_multiple_of(2) {
        v
    } else {
        _mm256_srli_epi16(v, 4)
    };
    _mm256_and_si256(v, _mm256_set1_epi8(0x0f))
}

/// The scale vectors of an unpacked group (A16's `UnpackedGroup`, A8's `UnpackedGroup8`).
#[inline(always)]
pub(crate) unsafe fn stored_scales(ws: &[f32; 8], ws_hi: &[f32; 8], wm: &[f32; 8]) -> Scales {
    Scales {
        ws: _mm256_loadu_ps(ws.as_ptr()),
        ws_hi: _mm256_loadu_ps(ws_hi.as_ptr()),
        wm: _mm256_loadu_ps(wm.as_ptr()),
    }
}

/// Scale vectors of one group of one weight row (lane `j` = sub-block `j`).
#[derive(Clone, Copy)]
pub(crate) struct Scales {
    /// Weight scale of each sub-block (Q6_K: of its first half).
    pub ws: __m256,
    /// Q6_K: scale of each sub-block's second half.
    pub ws_hi: __m256,
    /// Q4_K/Q5_K: the min factor `dmin · m_j`.
    pub wm: __m256,
}

/// How one weight format presents itself to the tile kernel.
pub(crate) trait Fmt {
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
    /// Packed formats: whether `bytes` are signed (offset already subtracted) or unsigned.
    const SIGNED: bool;
    /// Unpacked rows: weights are already i16 (`i16_ptr`), not bytes.
    const UNPACKED: bool = false;
    /// Sub-block `j` of group `g` as 32 quant bytes (offset-corrected; packed formats).
    unsafe fn bytes(row: &[Self::Block], g: usize, j: usize) -> __m256i;
    /// Sub-block `j` of group `g` as 32 i16 (unpacked rows only).
    unsafe fn i16_ptr(_row: &[Self::Block], _g: usize, _j: usize) -> *const i16 {
        std::ptr::null()
    }
}

pub(crate) struct Q4K;
pub(crate) struct Q5K;
pub(crate) struct Q6K;
pub(crate) struct Q80;
pub(crate) struct Q50;

impl Fmt for Q4K {
    type Block = BlockQ4K;
    const SIGNED: bool = false;
    const VALUES_PER_BLOCK: usize = 256;
    const SPLIT: bool = false;
    const MINS: bool = true;
    fn n_sub(_: usize, _: usize) -> usize {
        8
    }
    #[inline(always)]
    unsafe fn scales(row: &[BlockQ4K], g: usize) -> Scales {
        let b = &row[g];
        asym_scales(&b.scales, b.d.to_bits(), b.dmin.to_bits())
    }
    #[inline(always)]
    unsafe fn bytes(row: &[BlockQ4K], g: usize, j: usize) -> __m256i {
        nibbles(row[g].qs.as_ptr(), j)
    }
}

impl Fmt for Q5K {
    type Block = BlockQ5K;
    const SIGNED: bool = false;
    const VALUES_PER_BLOCK: usize = 256;
    const SPLIT: bool = false;
    const MINS: bool = true;
    fn n_sub(_: usize, _: usize) -> usize {
        8
    }
    #[inline(always)]
    unsafe fn scales(row: &[BlockQ5K], g: usize) -> Scales {
        let b = &row[g];
        asym_scales(&b.scales, b.d.to_bits(), b.dmin.to_bits())
    }
    #[inline(always)]
    unsafe fn bytes(row: &[BlockQ5K], g: usize, j: usize) -> __m256i {
        let b = &row[g];
        let qh = _mm256_loadu_si256(b.qh.as_ptr() as *const __m256i);
        let bit = _mm256_and_si256(
            _mm256_srl_epi16(qh, _mm_cvtsi32_si128(j as i32)),
            _mm256_set1_epi8(1),
        );
        _mm256_or_si256(nibbles(b.qs.as_ptr(), j), _mm256_slli_epi16(bit, 4))
    }
}

impl Fmt for Q6K {
    type Block = BlockQ6K;
    const SIGNED: bool = true;
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
    unsafe fn bytes(row: &[BlockQ6K], g: usize, j: usize) -> __m256i {
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
        _mm256_sub_epi8(q, _mm256_set1_epi8(32))
    }
}

impl Fmt for Q80 {
    type Block = BlockQ8_0;
    const SIGNED: bool = true;
    const VALUES_PER_BLOCK: usize = 32;
    const SPLIT: bool = false;
    const MINS: bool = false;
    fn n_sub(nb: usize, g: usize) -> usize {
        (nb - 8 * g).min(8)
    }
    #[inline(always)]
    unsafe fn scales(row: &[BlockQ8_0], g: usize) -> Scales {
        block_scales(row[8 * g..].iter().take(8).map(|b| b.d.to_bits()))
    }
    #[inline(always)]
    unsafe fn bytes(row: &[BlockQ8_0], g: usize, j: usize) -> __m256i {
        _mm256_loadu_si256(row[8 * g + j].qs.as_ptr() as *const __m256i)
    }
}

impl Fmt for Q50 {
    type Block = BlockQ5_0;
    const SIGNED: bool = true;
    const VALUES_PER_BLOCK: usize = 32;
    const SPLIT: bool = false;
    const MINS: bool = false;
    fn n_sub(nb: usize, g: usize) -> usize {
        (nb - 8 * g).min(8)
    }
    #[inline(always)]
    unsafe fn scales(row: &[BlockQ5_0], g: usize) -> Scales {
        block_scales(row[8 * g..].iter().take(8).map(|b| b.d.to_bits()))
    }
    #[inline(always)]
    unsafe fn bytes(row: &[BlockQ5_0], g: usize, j: usize) -> __m256i {
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
        _mm256_sub_epi8(q, sixteen)
    }
}

/// Weights already unpacked by `a16::unpack_row` (any format; `SPLIT`/`MINS` as that format).
pub(crate) struct Unp<const SPLIT: bool, const MINS: bool>;

impl<const SPLIT_: bool, const MINS_: bool> Fmt for Unp<SPLIT_, MINS_> {
    type Block = UnpackedGroup;
    const SIGNED: bool = true;
    const UNPACKED: bool = true;
    const VALUES_PER_BLOCK: usize = 256;
    const SPLIT: bool = SPLIT_;
    const MINS: bool = MINS_;
    fn n_sub(nb: usize, g: usize) -> usize {
        (nb - 8 * g).min(8)
    }
    #[inline(always)]
    unsafe fn scales(row: &[UnpackedGroup], g: usize) -> Scales {
        let u = &row[g];
        stored_scales(&u.ws, &u.ws_hi, &u.wm)
    }
    #[inline(always)]
    unsafe fn bytes(_row: &[UnpackedGroup], _g: usize, _j: usize) -> __m256i {
        _mm256_setzero_si256()
    }
    #[inline(always)]
    unsafe fn i16_ptr(row: &[UnpackedGroup], g: usize, j: usize) -> *const i16 {
        row[g].q.as_ptr().add(SUB * j)
    }
}
