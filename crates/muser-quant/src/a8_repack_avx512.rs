//! AVX-512 VNNI tiles on repacked weights (`a8_repack`): `RW` weight rows × `RA` activation
//! rows, for decode (one activation row) and prefill alike.
//!
//! Per group: each weight row's four 64-byte IL rows are rebuilt from the stored bits (nibble
//! masks and shifts, the high bits added under `u64` byte masks), each activation row's lane
//! chain starts at `−off · Σ a` (`BlockA8::lcorr` shifted; exact: it removes the weights'
//! offset), and four `vpdpbusd` (unsigned weight bytes × signed activation bytes, `qs_il`) add
//! the sixteen exact lane partials. Then, as in the reference (`a8`), one fused multiply-add per lane with the scale
//! `(weight scale) · da`, the min term per sub-block, and the reference's reduction tree
//! (`a8_avx512::store_tile`). Missing sub-blocks are zero quants with zero scales (`+0`).
//!
//! Safety: the entry point is safe to call only through `a8_repack::matmul_rows_at`, which
//! checks the SIMD level (AVX-512 F/BW/VL/VNNI) and every length; the kernels are
//! `#[target_feature]` functions reached behind that check.

#![allow(unsafe_op_in_unsafe_fn)]

use std::arch::x86_64::*;

use muser_gguf::GgmlType;

use crate::a16::UNPACK_MIN_ROWS;
use crate::a8::{BlockA8, TileShape, UnpackedGroup8};
use crate::a8_avx512::{half, join, store_tile, token_pair};
use crate::a8_dispatch::{with_unpack_buffer, x86_unpacked_tiles};
use crate::prefetch::Prefetch;
use crate::{a8_repack, QuantError, SimdLevel};

/// How a repacked format's scale fields read (`a8_repack`'s layouts).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Scales {
    /// Q4_K/Q5_K: d, dmin f16, sc[8], m[8] u8.
    K4,
    /// Q6_K: d f16, sc[16] i8 in lane order.
    K6,
    /// Q5_0/Q8_0: d[8] f16.
    Blocks32,
}

/// One repacked format (the module header of `a8_repack` has the layouts).
trait Packed {
    /// Bytes per group.
    const BYTES: usize;
    /// Bits per stored quant: 4, 5, 6 (nibbles + high-bit masks) or 8 (whole bytes).
    const BITS: u32;
    /// `off = 1 << SHIFT` is added to the stored quants; 0: no offset.
    const SHIFT: u32;
    const SCALES: Scales;
    /// A min term per sub-block (Q4_K, Q5_K).
    const MINS: bool = matches!(Self::SCALES, Scales::K4);
}

/// A format's sizes come from `a8_repack`'s layout (the one definition); offset and scales here.
macro_rules! packed {
    ($name:ident, $ty:ident, $shift:literal, $scales:ident) => {
        struct $name;
        impl Packed for $name {
            const BYTES: usize = match a8_repack::group_bytes(GgmlType::$ty) {
                Some(b) => b,
                None => panic!("no repacked layout"),
            };
            const BITS: u32 = a8_repack::bits(GgmlType::$ty);
            const SHIFT: u32 = $shift;
            const SCALES: Scales = Scales::$scales;
        }
    };
}

packed!(Q4K, Q4_K, 0, K4);
packed!(Q5K, Q5_K, 0, K4);
packed!(Q6K, Q6_K, 5, K6);
packed!(Q50, Q5_0, 4, Blocks32);
packed!(Q80, Q8_0, 7, Blocks32);

/// The four IL rows of a group as unsigned bytes (`u = w + off`).
#[inline(always)]
unsafe fn rows<F: Packed>(g: *const u8) -> [__m512i; 4] {
    if F::BITS == 8 {
        let at = |k: usize| g.add(64 * k) as *const __m512i;
        // (Loads written out: a closure calling the intrinsic would not inherit the target
        // features.)
        return [
            _mm512_loadu_si512(at(0)),
            _mm512_loadu_si512(at(1)),
            _mm512_loadu_si512(at(2)),
            _mm512_loadu_si512(at(3)),
        ];
    }
    // The low nibbles: IL rows 0, 1 in the low, 2, 3 in the high nibbles of two 64-byte chunks.
    let m4 = _mm512_set1_epi8(0x0f);
    let c0 = _mm512_loadu_si512(g as *const __m512i);
    let c1 = _mm512_loadu_si512(g.add(64) as *const __m512i);
    let mut r = [
        _mm512_and_si512(c0, m4),
        _mm512_and_si512(c1, m4),
        _mm512_and_si512(_mm512_srli_epi16::<4>(c0), m4),
        _mm512_and_si512(_mm512_srli_epi16::<4>(c1), m4),
    ];
    // Bit 4 (and 5): `+16` (`+32`) on the bytes each IL row's `u64` mask selects.
    for b in 4..F::BITS {
        let m = g.add(128 + 32 * (b as usize - 4));
        let v = _mm512_set1_epi8(1 << b);
        for (k, rk) in r.iter_mut().enumerate() {
            let mask = (m.add(8 * k) as *const u64).read_unaligned();
            *rk = _mm512_mask_add_epi8(*rk, mask, *rk, v);
        }
    }
    r
}

/// `f16` at `p` as f32.
#[inline(always)]
unsafe fn f16_at(p: *const u8) -> f32 {
    let bits = (p as *const u16).read_unaligned();
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(bits))))
}

/// The sixteen lane scales and, with mins, `dmin · m_j` (products of an f16 and a small
/// integer: exact).
#[inline(always)]
unsafe fn scales<F: Packed>(g: *const u8) -> (__m512, __m256) {
    let s = g.add(a8_repack::quant_bytes(F::BITS));
    match F::SCALES {
        Scales::K4 => {
            let (d, dmin) = (f16_at(s), f16_at(s.add(2)));
            // [sc_0..8 | m_0..8] as floats, times [d × 8 | dmin × 8].
            let ints = _mm512_cvtepu8_epi32(_mm_loadu_si128(s.add(4) as *const __m128i));
            let f = _mm512_mul_ps(
                _mm512_cvtepi32_ps(ints),
                join(_mm256_set1_ps(d), _mm256_set1_ps(dmin)),
            );
            let ws = half(f, 0);
            (join(ws, ws), half(f, 1))
        }
        Scales::K6 => {
            let d = f16_at(s);
            let sc = _mm512_cvtepi8_epi32(_mm_loadu_si128(s.add(2) as *const __m128i));
            (
                _mm512_mul_ps(_mm512_cvtepi32_ps(sc), _mm512_set1_ps(d)),
                _mm256_setzero_ps(),
            )
        }
        Scales::Blocks32 => {
            let d = _mm256_cvtph_ps(_mm_loadu_si128(s as *const __m128i));
            (join(d, d), _mm256_setzero_ps())
        }
    }
}

/// The bytes a decode tile asks for while it runs: the next tile's rows (contiguous with this
/// tile's), per `MUSER_CPU_PREFETCH` (`prefetch`): `Spread` — an equal share of the lines at
/// each group; `Burst` — every line at the first group; `Off` (and prefill) — none.
#[derive(Clone, Copy)]
struct Next<'a> {
    bytes: &'a [u8],
    mode: Prefetch,
}

impl Next<'_> {
    /// Prefetch group `g`'s share (of `groups`).
    #[inline(always)]
    unsafe fn step(self, g: usize, groups: usize) {
        let n = self.bytes.len();
        let (lo, hi) = match self.mode {
            Prefetch::Off => return,
            Prefetch::Burst if g == 0 => (0, n),
            Prefetch::Burst => return,
            Prefetch::Spread => (n * g / groups, n * (g + 1) / groups),
        };
        let mut off = lo & !63;
        while off < hi {
            _mm_prefetch::<_MM_HINT_T0>(self.bytes.as_ptr().add(off) as *const i8);
            off += 64;
        }
    }
}

/// `out[rw * stride + ra] = dot(w[rw], a[ra])`; `w[rw]` points at a repacked row.
// Row and token indices address several arrays at once.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
unsafe fn tile<F: Packed, const RW: usize, const RA: usize>(
    w: [*const u8; RW],
    a: [&[BlockA8]; RA],
    out: &mut [f32],
    stride: usize,
    next: Next<'_>,
) {
    let groups = a[0].len();
    let mut acc = [[_mm512_setzero_ps(); RA]; RW];
    // The min accumulators of tokens 2p and 2p + 1 share a 512-bit vector (`[2p | 2p + 1]`;
    // a missing odd token's half stays unused): 32 vector registers hold a 4 × 4 tile.
    let mut macc = [[_mm512_setzero_ps(); 2]; RW];
    let shift = _mm512_set1_epi32(7 - F::SHIFT as i32);
    for g in 0..groups {
        next.step(g, groups);
        // Per token pair: [da | da'] and the quant sums as floats, [asum | asum'].
        let mut da2 = [_mm512_setzero_ps(); 2];
        let mut fas2 = [_mm512_setzero_ps(); 2];
        if F::MINS {
            for p in 0..RA.div_ceil(2) {
                (da2[p], fas2[p]) = token_pair(&a, g, p);
            }
        }
        for rw in 0..RW {
            let gp = w[rw].add(g * F::BYTES);
            let r = rows::<F>(gp);
            let (ws, wm) = scales::<F>(gp);
            for ra in 0..RA {
                let ag = &a[ra][g];
                let mut p = if F::SHIFT != 0 {
                    let c = _mm512_loadu_si512(ag.lcorr.as_ptr() as *const __m512i);
                    _mm512_srav_epi32(c, shift)
                } else {
                    _mm512_setzero_si512()
                };
                for k in 0..4 {
                    let av = _mm512_loadu_si512(ag.qs_il.as_ptr().add(64 * k) as *const __m512i);
                    p = _mm512_dpbusd_epi32(p, r[k], av);
                }
                let da = _mm256_loadu_ps(ag.d.as_ptr());
                let s = _mm512_mul_ps(ws, join(da, da));
                acc[rw][ra] = _mm512_fmadd_ps(s, _mm512_cvtepi32_ps(p), acc[rw][ra]);
            }
            if F::MINS {
                let wm2 = join(wm, wm);
                for p in 0..RA.div_ceil(2) {
                    let m = _mm512_mul_ps(wm2, da2[p]);
                    macc[rw][p] = _mm512_fmadd_ps(m, fas2[p], macc[rw][p]);
                }
            }
        }
    }
    let mut m = [[_mm256_setzero_ps(); RA]; RW];
    if F::MINS {
        for rw in 0..RW {
            for ra in 0..RA {
                m[rw][ra] = half(macc[rw][ra / 2], ra % 2);
            }
        }
    }
    store_tile::<RW, RA>(acc, F::MINS.then_some(m), out, stride);
}

/// One tile of `rw` (1, 2 or 4) rows from `w0` (`row_bytes` apart) × the activation rows `ac`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn tile_any<F: Packed>(
    w0: *const u8,
    row_bytes: usize,
    rw: usize,
    ac: &[&[BlockA8]],
    out: &mut [f32],
    stride: usize,
    next: Next<'_>,
) {
    let none = Next {
        bytes: &[],
        mode: Prefetch::Off,
    };
    macro_rules! rows {
        ($rw:literal) => {{
            let w: [*const u8; $rw] = std::array::from_fn(|r| w0.add(r * row_bytes));
            match *ac {
                [a0] => tile::<F, $rw, 1>(w, [a0], out, stride, next),
                [a0, a1] => tile::<F, $rw, 2>(w, [a0, a1], out, stride, none),
                [a0, a1, a2] => tile::<F, $rw, 3>(w, [a0, a1, a2], out, stride, none),
                [a0, a1, a2, a3] => tile::<F, $rw, 4>(w, [a0, a1, a2, a3], out, stride, none),
                _ => {}
            }
        }};
    }
    match rw {
        4 => rows!(4),
        2 => rows!(2),
        _ => rows!(1),
    }
}

/// Unpack `groups`-group repacked rows (`row_bytes` apart, `out.len() / groups` of them) into
/// the prefill tiles' form (`a8_unpack`): quants `w + 128`, the lane scales split into halves.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn unpack<F: Packed>(w: &[u8], row_bytes: usize, groups: usize, out: &mut [UnpackedGroup8]) {
    // u = w + off  →  w + 128 = u + (128 − off) (bytes, wrapping).
    let to128 =
        _mm512_set1_epi8((128u32 - (1u32 << F::SHIFT) * u32::from(F::SHIFT != 0)) as u8 as i8);
    for (row, og) in w.chunks(row_bytes).zip(out.chunks_mut(groups)) {
        for (g, o) in og.iter_mut().enumerate() {
            let gp = row.as_ptr().add(g * F::BYTES);
            let r = rows::<F>(gp);
            for (k, rk) in r.iter().enumerate() {
                let v = _mm512_add_epi8(*rk, to128);
                _mm512_storeu_si512(o.q.as_mut_ptr().add(64 * k) as *mut __m512i, v);
            }
            let (ws, wm) = scales::<F>(gp);
            _mm256_storeu_ps(o.ws.as_mut_ptr(), half(ws, 0));
            _mm256_storeu_ps(o.ws_hi.as_mut_ptr(), half(ws, 1));
            _mm256_storeu_ps(o.wm.as_mut_ptr(), wm);
        }
    }
}

/// The product over every tile. One activation row, or fewer than `UNPACK_MIN_ROWS`: the
/// repacked tiles (`a8_dispatch::tiles_into`); more: the rows are unpacked once per call
/// (`unpack`, into the thread's buffer) for the unpacked tiles (`a8_avx512::dot_unpacked`),
/// which do less per token. The caller (`a8_repack`) has checked the level (AVX-512
/// F/BW/VL/VNNI), `ty`, and that `w` is whole rows of `row_bytes = groups × BYTES` with every
/// activation row `groups` long and `out` rows × tokens.
pub(crate) fn matmul(
    ty: GgmlType,
    w: &[u8],
    row_bytes: usize,
    a: &[&[BlockA8]],
    out: &mut [f32],
    shape: TileShape,
) -> Result<(), QuantError> {
    match ty {
        GgmlType::Q4_K => matmul_as::<Q4K>(ty, w, row_bytes, a, out, shape),
        GgmlType::Q5_K => matmul_as::<Q5K>(ty, w, row_bytes, a, out, shape),
        GgmlType::Q6_K => matmul_as::<Q6K>(ty, w, row_bytes, a, out, shape),
        GgmlType::Q5_0 => matmul_as::<Q50>(ty, w, row_bytes, a, out, shape),
        _ => matmul_as::<Q80>(ty, w, row_bytes, a, out, shape),
    }
}

/// [`matmul`] for format `F` (`ty` its type).
fn matmul_as<F: Packed>(
    ty: GgmlType,
    w: &[u8],
    row_bytes: usize,
    a: &[&[BlockA8]],
    out: &mut [f32],
    shape: TileShape,
) -> Result<(), QuantError> {
    let n_rows = w.len() / row_bytes;
    let level = SimdLevel::Avx512Vnni;
    if a.len() >= UNPACK_MIN_ROWS {
        let groups = row_bytes / F::BYTES;
        return with_unpack_buffer(n_rows * groups, |u| {
            // SAFETY: the caller checked the CPU features and the lengths (see above).
            unsafe { unpack::<F>(w, row_bytes, groups, u) };
            x86_unpacked_tiles(level, ty, u, groups, a, out, shape)
        });
    }
    let mode = if a.len() == 1 {
        crate::prefetch::prefetch_mode()
    } else {
        Prefetch::Off
    };
    let tiles = |i: usize, rw: usize, ac: &[&[BlockA8]], o: &mut [f32], st: usize| {
        // The next tile's bytes (decode: one activation row).
        let from = ((i + rw) * row_bytes).min(w.len());
        let to = ((i + 2 * rw) * row_bytes).min(w.len());
        let next = Next {
            bytes: &w[from..to],
            mode,
        };
        // SAFETY: the caller checked the CPU features and the lengths (see above); rows
        // `i..i + rw` lie inside `w` (`tiles_into` never passes the last row).
        unsafe {
            tile_any::<F>(
                w.as_ptr().add(i * row_bytes),
                row_bytes,
                rw,
                ac,
                o,
                st,
                next,
            )
        };
        Ok(())
    };
    crate::a8_dispatch::tiles_into(n_rows, a, shape.tokens, shape.rows_at(level), out, tiles)
}
