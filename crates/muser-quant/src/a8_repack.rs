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
//! offset comes back out exactly: the chain starts at `−off · lsum[L]` (the activations' lane
//! sums). Sub-blocks past a row's end (32-value formats) hold zero quants and zero scales.
//!
//! Invariant: [`matmul_rows_at`] on a repacked row gives, bit for bit, `a8::dot_at` on the
//! original row (`a8_tests::repacked_tiles_equal_the_reference`). Only `SimdLevel::vnni()`
//! levels run it; elsewhere it is a typed error and the engine does not repack.

use muser_gguf::GgmlType;

use crate::a16_dispatch::cast_blocks;
use crate::a8::{il_index, n_groups, BlockA8, GROUP, SUB};
use crate::common::unpack_k4_scales;
use crate::q4_k::BlockQ4K;
use crate::q5_0::BlockQ5_0;
use crate::q5_k::BlockQ5K;
use crate::q6_k::BlockQ6K;
use crate::q8_0::BlockQ8_0;
use crate::{QuantError, SimdLevel};

/// Bytes of one repacked group of `ty`, or `None` for a type without a repacked layout.
pub fn group_bytes(ty: GgmlType) -> Option<usize> {
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

/// The offset-free quants (`u`, natural order) and the scale fields of one group.
struct Group {
    u: [u8; GROUP],
    /// Scale bytes as stored after the quants (see the module header).
    scales: Vec<u8>,
}

/// Write the quant bits of `g.u` into `out` (nibbles, then `hb4`, `hb5` as `bits` asks; Q8_0:
/// whole bytes), interleaved.
fn place(u: &[u8; GROUP], bits: u32, out: &mut Vec<u8>) {
    let mut il = [0u8; GROUP];
    for (i, &v) in u.iter().enumerate() {
        il[il_index(i)] = v;
    }
    if bits == 8 {
        out.extend_from_slice(&il);
        return;
    }
    for c in 0..2 {
        for b in 0..64 {
            out.push((il[64 * c + b] & 0x0f) | ((il[64 * (c + 2) + b] & 0x0f) << 4));
        }
    }
    for bit in 4..bits {
        for k in 0..4 {
            let m = (0..64).fold(0u64, |m, b| {
                m | (u64::from((il[64 * k + b] >> bit) & 1) << b)
            });
            out.extend_from_slice(&m.to_le_bytes());
        }
    }
}

/// The groups of one row of `ty` (`w` whole blocks).
fn groups_of(ty: GgmlType, w: &[u8]) -> Result<Vec<Group>, QuantError> {
    let k4 = |d: half::f16, dmin: half::f16, scales: &[u8; 12], q: [u8; GROUP]| {
        let (sc, m) = unpack_k4_scales(scales);
        let mut s = Vec::with_capacity(20);
        s.extend_from_slice(&d.to_bits().to_le_bytes());
        s.extend_from_slice(&dmin.to_bits().to_le_bytes());
        s.extend_from_slice(&sc);
        s.extend_from_slice(&m);
        Group { u: q, scales: s }
    };
    // The 32-value block formats: eight blocks per group, missing ones zero.
    let blocks32 = |nb: usize, blk: &dyn Fn(usize) -> (half::f16, [u8; SUB])| {
        (0..nb.div_ceil(8))
            .map(|g| {
                let mut u = [0u8; GROUP];
                let mut s = vec![0u8; 16];
                for j in 0..(nb - 8 * g).min(8) {
                    let (d, q) = blk(8 * g + j);
                    u[SUB * j..SUB * (j + 1)].copy_from_slice(&q);
                    s[2 * j..2 * j + 2].copy_from_slice(&d.to_bits().to_le_bytes());
                }
                Group { u, scales: s }
            })
            .collect::<Vec<_>>()
    };
    Ok(match ty {
        GgmlType::Q4_K => cast_blocks::<BlockQ4K>(ty, w)?
            .iter()
            .map(|b| k4(b.d, b.dmin, &b.scales, b.quants()))
            .collect(),
        GgmlType::Q5_K => cast_blocks::<BlockQ5K>(ty, w)?
            .iter()
            .map(|b| k4(b.d, b.dmin, &b.scales, b.quants()))
            .collect(),
        GgmlType::Q6_K => cast_blocks::<BlockQ6K>(ty, w)?
            .iter()
            .map(|b| {
                let mut s = b.d.to_bits().to_le_bytes().to_vec();
                s.extend((0..16).map(|l| b.scales[2 * (l % 8) + l / 8] as u8));
                Group {
                    u: b.quants(),
                    scales: s,
                }
            })
            .collect(),
        GgmlType::Q5_0 => {
            let x = cast_blocks::<BlockQ5_0>(ty, w)?;
            blocks32(x.len(), &|i| (x[i].d, x[i].quants()))
        }
        GgmlType::Q8_0 => {
            let x = cast_blocks::<BlockQ8_0>(ty, w)?;
            blocks32(x.len(), &|i| (x[i].d, x[i].qs.map(|q| (q as u8) ^ 0x80)))
        }
        _ => {
            return Err(QuantError::Unsupported {
                ty,
                op: "A8 weight repacking",
            })
        }
    })
}

/// Quant bits per value in the repacked layout.
fn bits(ty: GgmlType) -> u32 {
    match ty {
        GgmlType::Q4_K => 4,
        GgmlType::Q5_K | GgmlType::Q5_0 => 5,
        GgmlType::Q6_K => 6,
        _ => 8,
    }
}

/// Repack whole rows of `ty` (`w.len()` a multiple of `row_bytes`, the GGUF row size) into
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
    let mut buf = Vec::with_capacity(rb);
    for (row, o) in w.chunks(row_bytes_in).zip(out.chunks_mut(rb)) {
        buf.clear();
        for g in groups_of(ty, row)? {
            place(&g.u, bits(ty), &mut buf);
            buf.extend_from_slice(&g.scales);
        }
        debug_assert_eq!(buf.len(), rb);
        o.copy_from_slice(&buf);
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
    let groups = a.first().map_or(0, |r| r.len());
    if groups == 0
        || row_bytes != gb * groups
        || !w.len().is_multiple_of(row_bytes)
        || a.iter().any(|r| r.len() != groups)
    {
        return Err(QuantError::Length {
            ty,
            what: "repacked row bytes (groups × group bytes, every activation row alike)",
            expected: gb * groups,
            got: row_bytes,
        });
    }
    let n_rows = w.len() / row_bytes;
    if out.len() != n_rows * a.len() {
        return Err(QuantError::Length {
            ty,
            what: "outputs (rows × activation rows)",
            expected: n_rows * a.len(),
            got: out.len(),
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
    let shape = crate::a8::TileShape {
        rows: crate::tile_shape::tile_rows_a8(level),
        tokens: crate::tile_shape::tile_tokens_a8(level),
    };
    matmul_rows_at(level, ty, w, row_bytes, a, out, shape)
}
