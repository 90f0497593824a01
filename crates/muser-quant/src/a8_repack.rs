//! Weights repacked once, at load, for the A8 route's AVX-512 VNNI tiles: every row of a
//! supported weight matrix rewritten group by group (256 values) into the interleaved order of
//! the activations' `BlockA8::qs_il` (`a8::il_index`), with the quants as unsigned bytes
//! `u = w + off` and the scales in a form a few instructions turn into the sixteen lane scales.
//! Decode and prefill then read one layout with no per-call unpacking: per (weight row,
//! activation row, group) four `vpdpbusd` (unsigned weights × signed activations) give the
//! sixteen exact lane partials directly (`a8_repack_avx512`).
//!
//! Group layouts (bytes; `nib`: the low four bits of `u`, IL rows `c` and `c + 2` in the low
//! and high nibbles of bytes `64c..64c + 64`; `hb4` / `hb5`: bit 4 / bit 5 of `u`, one `u64`
//! per IL row, bit `b` for byte `b`):
//! ```text
//! Q4_K 148: nib[128]                 d f16, dmin f16, sc[8] u8, m[8] u8     off   0
//! Q5_K 180: nib[128] hb4[4]          d f16, dmin f16, sc[8] u8, m[8] u8     off   0
//! Q6_K 210: nib[128] hb4[4] hb5[4]   d f16, sc[16] i8 in lane order         off  32
//! Q5_0 176: nib[128] hb4[4]          d[8] f16 (one per 32-value block)      off  16
//! Q8_0 272: u[256] in IL order       d[8] f16                               off 128
//! ```
//! Lane `L = j + 8h`'s scale is the reference's (`a8`): `d · sc_j` (Q4_K/Q5_K; min term
//! `dmin · m_j`), `d · sc_{2j+h}` (Q6_K), `d_j` (Q5_0/Q8_0) — products of an f16 and a small
//! integer, exact in f32, so computing them from these fields gives the reference's bits. The
//! offset comes back out exactly: the chain starts at `−off · Σ a` over the lane
//! (`BlockA8::lcorr = −128 · Σ a`, shifted right by `7 − log2 off`). Sub-blocks past a row's end
//! (32-value formats) hold zero quants and zero scales.
//!
//! Invariant: [`matmul_rows_at`] on a repacked row gives, bit for bit, `a8::dot_at` on the
//! original row (`a8_tests::repacked_tiles_equal_the_reference`). Only `SimdLevel::vnni()`
//! levels run it; elsewhere it is a typed error and the engine does not repack.

use muser_gguf::GgmlType;

use crate::a16_dispatch::{cast_blocks, check_block};
use crate::a8::{il_index, n_groups, BlockA8, GROUP, SUB};
use crate::common::unpack_k4_scales;
use crate::q4_k::BlockQ4K;
use crate::q5_0::BlockQ5_0;
use crate::q5_k::BlockQ5K;
use crate::q6_k::BlockQ6K;
use crate::q8_0::BlockQ8_0;
use crate::{QuantError, SimdLevel};

/// Bytes of one repacked group of `ty`, or `None` for a type without a repacked layout.
pub const fn group_bytes(ty: GgmlType) -> Option<usize> {
    match ty {
        GgmlType::Q4_K => Some(148),
        GgmlType::Q5_K => Some(180),
        GgmlType::Q6_K => Some(210),
        GgmlType::Q5_0 => Some(176),
        GgmlType::Q8_0 => Some(272),
        _ => None,
    }
}

/// Whether `ty` has a repacked layout.
pub fn supports(ty: GgmlType) -> bool {
    group_bytes(ty).is_some()
}

/// Bytes of one repacked row of `n` values.
pub fn row_bytes(ty: GgmlType, n: usize) -> Option<usize> {
    Some(group_bytes(ty)? * n_groups(n))
}

/// `il_index` on four-value quads (it moves them whole): quad `q` (values `4q..4q + 4`) goes
/// to quad `ILQ[q]` of the interleaved order.
const ILQ: [u8; GROUP / 4] = {
    let mut t = [0u8; GROUP / 4];
    let mut q = 0;
    while q < GROUP / 4 {
        t[q] = (il_index(4 * q) / 4) as u8;
        q += 1;
    }
    t
};

/// Quant bits per value in the repacked layout (8 for Q8_0 and for types without a layout).
pub(crate) const fn bits(ty: GgmlType) -> u32 {
    match ty {
        GgmlType::Q4_K => 4,
        GgmlType::Q5_K | GgmlType::Q5_0 => 5,
        GgmlType::Q6_K => 6,
        _ => 8,
    }
}

/// Bytes of a group's quant bits (the scale fields follow).
pub(crate) const fn quant_bytes(bits: u32) -> usize {
    if bits == 8 {
        GROUP
    } else {
        128 + 32 * (bits as usize - 4)
    }
}

/// Write the group's stored quants `u` (natural order) into `out` (`quant_bytes(bits)`):
/// interleaved; nibbles, then the `hb4` / `hb5` masks; or whole bytes for 8 bits.
fn place(u: &[u8; GROUP], bits: u32, out: &mut [u8]) {
    let mut il = [0u8; GROUP];
    for (quad, &at) in u.chunks_exact(4).zip(ILQ.iter()) {
        let at = 4 * usize::from(at);
        il[at..at + 4].copy_from_slice(quad);
    }
    if bits == 8 {
        out.copy_from_slice(&il);
        return;
    }
    let (nib, masks) = out.split_at_mut(128);
    for c in 0..2 {
        for b in 0..64 {
            nib[64 * c + b] = (il[64 * c + b] & 0x0f) | ((il[64 * (c + 2) + b] & 0x0f) << 4);
        }
    }
    // Bit `bit` of eight bytes at once: isolate it in each byte's low bit, then gather the
    // eight low bits into one byte (byte k's bit lands at bit 56 + k).
    for (bi, bit) in (4..bits).enumerate() {
        for k in 0..4 {
            let mut m = [0u8; 8];
            for (q, mb) in m.iter_mut().enumerate() {
                let at = 64 * k + 8 * q;
                let x = u64::from_le_bytes(il[at..at + 8].try_into().unwrap_or([0; 8]));
                let lows = (x >> bit) & 0x0101_0101_0101_0101;
                *mb = (lows.wrapping_mul(0x0102_0408_1020_4080) >> 56) as u8;
            }
            masks[32 * bi + 8 * k..32 * bi + 8 * k + 8].copy_from_slice(&m);
        }
    }
}

/// The k-quant scale fields: d, dmin, sc[8], m[8].
fn k4_fields(d: half::f16, dmin: half::f16, scales: &[u8; 12], out: &mut [u8]) {
    let (sc, m) = unpack_k4_scales(scales);
    out[0..2].copy_from_slice(&d.to_bits().to_le_bytes());
    out[2..4].copy_from_slice(&dmin.to_bits().to_le_bytes());
    out[4..12].copy_from_slice(&sc);
    out[12..20].copy_from_slice(&m);
}

/// Repack one row (`w`, whole blocks of `ty`) into `out` (`groups × group_bytes`).
fn repack_row(ty: GgmlType, w: &[u8], gb: usize, out: &mut [u8]) -> Result<(), QuantError> {
    let bits = bits(ty);
    let qb = quant_bytes(bits);
    let mut u = [0u8; GROUP];
    // The 32-value block formats: eight blocks per group, missing ones zero.
    let mut blocks32 = |nb: usize, blk: &dyn Fn(usize) -> (half::f16, [u8; SUB])| {
        for (g, og) in out.chunks_mut(gb).enumerate() {
            u.fill(0);
            let (q, sc) = og.split_at_mut(qb);
            sc.fill(0);
            for j in 0..(nb - 8 * g).min(8) {
                let (d, qs) = blk(8 * g + j);
                u[SUB * j..SUB * (j + 1)].copy_from_slice(&qs);
                sc[2 * j..2 * j + 2].copy_from_slice(&d.to_bits().to_le_bytes());
            }
            place(&u, bits, q);
        }
    };
    match ty {
        GgmlType::Q4_K => {
            for (b, og) in cast_blocks::<BlockQ4K>(ty, w)?
                .iter()
                .zip(out.chunks_mut(gb))
            {
                let (q, sc) = og.split_at_mut(qb);
                place(&b.quants(), bits, q);
                k4_fields(b.d, b.dmin, &b.scales, sc);
            }
        }
        GgmlType::Q5_K => {
            for (b, og) in cast_blocks::<BlockQ5K>(ty, w)?
                .iter()
                .zip(out.chunks_mut(gb))
            {
                let (q, sc) = og.split_at_mut(qb);
                place(&b.quants(), bits, q);
                k4_fields(b.d, b.dmin, &b.scales, sc);
            }
        }
        GgmlType::Q6_K => {
            for (b, og) in cast_blocks::<BlockQ6K>(ty, w)?
                .iter()
                .zip(out.chunks_mut(gb))
            {
                let (q, sc) = og.split_at_mut(qb);
                place(&b.quants(), bits, q);
                sc[0..2].copy_from_slice(&b.d.to_bits().to_le_bytes());
                for l in 0..16 {
                    sc[2 + l] = b.scales[2 * (l % 8) + l / 8] as u8;
                }
            }
        }
        GgmlType::Q5_0 => {
            let x = cast_blocks::<BlockQ5_0>(ty, w)?;
            blocks32(x.len(), &|i| (x[i].d, x[i].quants()));
        }
        GgmlType::Q8_0 => {
            let x = cast_blocks::<BlockQ8_0>(ty, w)?;
            blocks32(x.len(), &|i| (x[i].d, x[i].qs.map(|q| (q as u8) ^ 0x80)));
        }
        _ => {
            return Err(QuantError::Unsupported {
                ty,
                op: "A8 weight repacking",
            })
        }
    }
    Ok(())
}

/// Repack whole rows of `ty` (`w.len()` a multiple of `row_bytes_in`, the GGUF row size) into
/// `out`, which must hold `row_bytes(ty, n)` per row. Every byte of `out` is written.
pub fn repack_rows(
    ty: GgmlType,
    w: &[u8],
    row_bytes_in: usize,
    out: &mut [u8],
) -> Result<(), QuantError> {
    let gb = group_bytes(ty).ok_or(QuantError::Unsupported {
        ty,
        op: "A8 weight repacking",
    })?;
    if row_bytes_in == 0 || !w.len().is_multiple_of(row_bytes_in) {
        return Err(QuantError::NotBlockMultiple {
            ty,
            what: "weight bytes to repack",
            len: w.len(),
            unit: row_bytes_in.max(1),
        });
    }
    let n_rows = w.len() / row_bytes_in;
    let n = row_bytes_in / ty.type_size() * ty.block_size();
    let rb = gb * n_groups(n);
    if out.len() != n_rows * rb {
        return Err(QuantError::Length {
            ty,
            what: "repacked weight bytes",
            expected: n_rows * rb,
            got: out.len(),
        });
    }
    for (row, o) in w.chunks(row_bytes_in).zip(out.chunks_mut(rb)) {
        repack_row(ty, row, gb, o)?;
    }
    Ok(())
}

/// A block of a matrix product on repacked rows: `out[i * a.len() + t] = W[i] · a[t]` for the
/// `w.len() / row_bytes` repacked rows in `w` (`row_bytes` = [`row_bytes`] of the matrix).
/// Tiles of `shape.rows` (1, 2 or 4) weight rows × `shape.tokens` activation rows; every shape
/// gives the same bits, equal to `a8::dot_at` on the original rows. Needs a `vnni()` level.
pub fn matmul_rows_at(
    level: SimdLevel,
    ty: GgmlType,
    w: &[u8],
    row_bytes: usize,
    a: &[&[BlockA8]],
    out: &mut [f32],
    shape: crate::a8::TileShape,
) -> Result<(), QuantError> {
    let gb = group_bytes(ty).ok_or(QuantError::Unsupported {
        ty,
        op: "A8 repacked product",
    })?;
    if !level.vnni() {
        return Err(QuantError::Simd {
            reason: format!(
                "repacked A8 weights need AVX-512 VNNI; the level is {}",
                level.name()
            ),
        });
    }
    check_block(ty, w, row_bytes, a.len(), out)?;
    let groups = a[0].len();
    if groups == 0 || row_bytes != gb * groups || a.iter().any(|r| r.len() != groups) {
        return Err(QuantError::Length {
            ty,
            what: "repacked row bytes (groups × group bytes, every activation row alike)",
            expected: gb * groups,
            got: row_bytes,
        });
    }
    #[cfg(target_arch = "x86_64")]
    {
        crate::a8_repack_avx512::matmul(ty, w, row_bytes, a, out, shape)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = shape;
        Err(QuantError::Simd {
            reason: "repacked A8 weights need x86-64".into(),
        })
    }
}

/// [`matmul_rows_at`] at the process-wide SIMD level and tile shape.
pub fn matmul_rows(
    ty: GgmlType,
    w: &[u8],
    row_bytes: usize,
    a: &[&[BlockA8]],
    out: &mut [f32],
) -> Result<(), QuantError> {
    let level = crate::simd::simd_level();
    let shape = crate::a8::TileShape::for_level(level);
    matmul_rows_at(level, ty, w, row_bytes, a, out, shape)
}
