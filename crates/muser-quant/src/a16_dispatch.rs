//! Dispatch of the A16 dot products: checks rows once, then runs the scalar references or the
//! x86 tiles (`a16_avx2`, `a16_avx512`) for single dots, multi-token tiles and whole blocks of
//! weight rows (`matmul_rows_at`, which unpacks rows first when enough tokens share them).
//! Every path gives the references' bits.

use bytemuck::{Pod, Zeroable};
use muser_gguf::GgmlType;

use crate::a16::{
    dot_q4_k_ref, dot_q5_0_ref, dot_q5_k_ref, dot_q6_k_ref, dot_q8_0_ref, n_groups, BlockA16,
};
use crate::a16_unpack::{matmul_unpacked, unpack_row, UnpackedGroup, UNPACK_MIN_ROWS};
use crate::prefetch::Prefetch;
use crate::simd::SimdLevel;
use crate::QuantError;

/// Whether weight type `ty` has an A16 dot product.
pub fn supports(ty: GgmlType) -> bool {
    matches!(
        ty,
        GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K | GgmlType::Q8_0 | GgmlType::Q5_0
    )
}

pub(crate) fn cast_blocks<T: Pod>(ty: GgmlType, w: &[u8]) -> Result<&[T], QuantError> {
    bytemuck::try_cast_slice(w).map_err(|_| QuantError::Misaligned {
        ty,
        what: "weight row",
        align: std::mem::align_of::<T>(),
        addr: w.as_ptr() as usize,
    })
}

/// Most activation rows one kernel call takes (the prefill tile height).
pub const MAX_ROWS: usize = 4;

fn check_row(ty: GgmlType, w: &[u8], a: &[BlockA16]) -> Result<(), QuantError> {
    check_row_groups(ty, w, a.len(), "A16")
}

/// A weight row of `ty` (whole blocks, a type with an A16/A8 dot) against an activation row of
/// `groups` 256-value groups, for the activation format `act`.
/// The checks every multi-row product makes first: `w` is whole rows of `row_bytes`, there is at
/// least one activation row, and `out` holds rows × activation rows. Returns the row count.
pub(crate) fn check_block(
    ty: GgmlType,
    w: &[u8],
    row_bytes: usize,
    n_act: usize,
    out: &[f32],
) -> Result<usize, QuantError> {
    if row_bytes == 0 || !w.len().is_multiple_of(row_bytes) || n_act == 0 {
        return Err(QuantError::Length {
            ty,
            what: "weight rows (whole rows, at least one activation row)",
            expected: row_bytes,
            got: w.len(),
        });
    }
    let n_rows = w.len() / row_bytes;
    if out.len() != n_rows * n_act {
        return Err(QuantError::Length {
            ty,
            what: "outputs (rows × activation rows)",
            expected: n_rows * n_act,
            got: out.len(),
        });
    }
    Ok(n_rows)
}

pub(crate) fn check_row_groups(
    ty: GgmlType,
    w: &[u8],
    groups: usize,
    act: &'static str,
) -> Result<(), QuantError> {
    if !supports(ty) {
        let op = if act == "A8" { "A8 dot" } else { "A16 dot" };
        return Err(QuantError::Unsupported { ty, op });
    }
    let ts = ty.type_size();
    if !w.len().is_multiple_of(ts) {
        return Err(QuantError::NotBlockMultiple {
            ty,
            what: "weight row bytes",
            len: w.len(),
            unit: ts,
        });
    }
    let n = w.len() / ts * ty.block_size();
    if groups != n_groups(n) {
        let what = if act == "A8" {
            "A8 groups for the weight row"
        } else {
            "A16 groups for the weight row"
        };
        return Err(QuantError::Length {
            ty,
            what,
            expected: n_groups(n),
            got: groups,
        });
    }
    Ok(())
}

fn reference(ty: GgmlType, w: &[u8], a: &[BlockA16]) -> Result<f32, QuantError> {
    Ok(match ty {
        GgmlType::Q4_K => dot_q4_k_ref(cast_blocks(ty, w)?, a),
        GgmlType::Q5_K => dot_q5_k_ref(cast_blocks(ty, w)?, a),
        GgmlType::Q6_K => dot_q6_k_ref(cast_blocks(ty, w)?, a),
        GgmlType::Q8_0 => dot_q8_0_ref(cast_blocks(ty, w)?, a),
        _ => dot_q5_0_ref(cast_blocks(ty, w)?, a),
    })
}

#[cfg(target_arch = "x86_64")]
fn x86_tile<const RW: usize, const RA: usize>(
    level: SimdLevel,
    ty: GgmlType,
    w: [&[u8]; RW],
    a: [&[BlockA16]; RA],
    out: &mut [f32],
    next: &[u8],
) -> Result<(), QuantError> {
    macro_rules! go {
        ($m:ident, $f:ident $(, $next:expr)?) => {{
            let mut rows = [&[][..]; RW];
            for (r, wb) in rows.iter_mut().zip(w) {
                *r = cast_blocks(ty, wb)?;
            }
            // SAFETY: `level` is AVX2 or AVX-512, selected by `simd` only after detecting the
            // features the module's kernels enable; every row's length was checked by the caller.
            unsafe { crate::$m::$f::<RW, RA>(rows, a, out $(, $next)?) }
        }};
    }
    macro_rules! by_type {
        ($m:ident $(, $next:expr)?) => {
            match ty {
                GgmlType::Q4_K => go!($m, dot_q4_k $(, $next)?),
                GgmlType::Q5_K => go!($m, dot_q5_k $(, $next)?),
                GgmlType::Q6_K => go!($m, dot_q6_k $(, $next)?),
                GgmlType::Q8_0 => go!($m, dot_q8_0 $(, $next)?),
                _ => go!($m, dot_q5_0 $(, $next)?),
            }
        };
    }
    // Single-token tiles stay on AVX2 even at the AVX-512 level: measured in-cache on the dev
    // VM (matvec_bench, 4-row tiles, 1 thread): Q8_0 14.7 GMAC/s AVX2 vs 12.5 AVX-512, Q4_K
    // 14.0 vs 12.9. Multi-token tiles use AVX-512 (see `x86_unpacked_tile`). Both give the
    // same bits; `MUSER_SIMD=avx2` is the A/B switch for the whole choice.
    if level.avx512() && RA > 1 {
        let _ = next;
        by_type!(a16_avx512)
    } else {
        by_type!(a16_avx2, next)
    }
    Ok(())
}

/// Dot products of one weight row (`w`, whole blocks of `ty`) with up to [`MAX_ROWS`] A16 rows
/// (`out[r] = w · a[r]`), at SIMD `level`. Every result is bit-identical to [`dot_at`] on its
/// row alone, at every level.
pub fn dot_rows_at(
    level: SimdLevel,
    ty: GgmlType,
    w: &[u8],
    a: &[&[BlockA16]],
    out: &mut [f32],
) -> Result<(), QuantError> {
    if a.len() != out.len() || a.is_empty() || a.len() > MAX_ROWS {
        return Err(QuantError::Length {
            ty,
            what: "A16 rows per call (1..=4, one output each)",
            expected: out.len(),
            got: a.len(),
        });
    }
    for r in a {
        check_row(ty, w, r)?;
    }
    #[cfg(target_arch = "x86_64")]
    if level.avx2() {
        return match *a {
            [a0] => x86_tile::<1, 1>(level, ty, [w], [a0], out, &[]),
            [a0, a1] => x86_tile::<1, 2>(level, ty, [w], [a0, a1], out, &[]),
            [a0, a1, a2] => x86_tile::<1, 3>(level, ty, [w], [a0, a1, a2], out, &[]),
            [a0, a1, a2, a3] => x86_tile::<1, 4>(level, ty, [w], [a0, a1, a2, a3], out, &[]),
            _ => Ok(()),
        };
    }
    let _ = level;
    for (o, r) in out.iter_mut().zip(a) {
        *o = reference(ty, w, r)?;
    }
    Ok(())
}

/// A block of a matrix product: `out[i * a.len() + t] = W[i] · a[t]` for the `w.len() /
/// row_bytes` weight rows packed in `w` and every activation row `a[t]`. Checks everything once,
/// then runs the kernel tiles (four weight rows at a time for a single activation row, four
/// activation rows at a time otherwise). Bit-identical to [`dot_at`] on each pair.
pub fn matmul_rows_at(
    level: SimdLevel,
    ty: GgmlType,
    w: &[u8],
    row_bytes: usize,
    a: &[&[BlockA16]],
    out: &mut [f32],
) -> Result<(), QuantError> {
    let n_rows = check_block(ty, w, row_bytes, a.len(), out)?;
    for r in a {
        check_row(ty, &w[..row_bytes], r)?;
    }
    let row = |i: usize| &w[i * row_bytes..(i + 1) * row_bytes];
    if a.len() >= UNPACK_MIN_ROWS {
        let n = row_bytes / ty.type_size() * ty.block_size();
        let groups = n_groups(n);
        let mut u = vec![UnpackedGroup::zeroed(); n_rows * groups];
        for (i, ug) in u.chunks_mut(groups).enumerate() {
            unpack_row(ty, row(i), ug)?;
        }
        let tokens = crate::tile_shape::tile_tokens(level);
        matmul_unpacked(level, ty, &u, groups, n, a, out, tokens);
        return Ok(());
    }
    #[cfg(target_arch = "x86_64")]
    if level.avx2() {
        if let [a0] = *a {
            return decode_tiles(ty, w, row_bytes, |i, rows, next| {
                let o = &mut out[i..i + rows];
                if rows == 4 {
                    let r = [row(i), row(i + 1), row(i + 2), row(i + 3)];
                    x86_tile::<4, 1>(level, ty, r, [a0], o, next)
                } else {
                    x86_tile::<1, 1>(level, ty, [row(i)], [a0], o, &[])
                }
            });
        }
        let na = a.len();
        for i in 0..n_rows {
            for (k, ac) in a.chunks(MAX_ROWS).enumerate() {
                let o = &mut out[i * na + k * MAX_ROWS..i * na + k * MAX_ROWS + ac.len()];
                match *ac {
                    [a0] => x86_tile::<1, 1>(level, ty, [row(i)], [a0], o, &[])?,
                    [a0, a1] => x86_tile::<1, 2>(level, ty, [row(i)], [a0, a1], o, &[])?,
                    [a0, a1, a2] => x86_tile::<1, 3>(level, ty, [row(i)], [a0, a1, a2], o, &[])?,
                    [a0, a1, a2, a3] => {
                        x86_tile::<1, 4>(level, ty, [row(i)], [a0, a1, a2, a3], o, &[])?
                    }
                    _ => {}
                }
            }
        }
        return Ok(());
    }
    let _ = level;
    for i in 0..n_rows {
        for (t, ar) in a.iter().enumerate() {
            out[i * a.len() + t] = reference(ty, row(i), ar)?;
        }
    }
    Ok(())
}

/// Decode's walk over the weight rows in `w`: `tile(i, 4, next)` for four-row tiles, each
/// handed the following tile's bytes as `next` or having them prefetched here, as the
/// `MUSER_CPU_PREFETCH` mode says; then `tile(i, 1, &[])` for the rows left over.
pub(crate) fn decode_tiles(
    ty: GgmlType,
    w: &[u8],
    row_bytes: usize,
    mut tile: impl FnMut(usize, usize, &[u8]) -> Result<(), QuantError>,
) -> Result<(), QuantError> {
    let n_rows = w.len() / row_bytes;
    let mode = crate::prefetch::prefetch_mode();
    let head = row_bytes.min(ROW_HEAD_GROUPS * ty.type_size() * 256 / ty.block_size());
    let mut i = 0;
    while i + 4 <= n_rows {
        let mut next: &[u8] = &[];
        if i + 8 <= n_rows {
            let following = &w[(i + 4) * row_bytes..(i + 8) * row_bytes];
            match mode {
                Prefetch::Spread => next = following,
                Prefetch::Burst => prefetch_rows(following, row_bytes, head),
                Prefetch::Off => {}
            }
        }
        tile(i, 4, next)?;
        i += 4;
    }
    while i < n_rows {
        tile(i, 1, &[])?;
        i += 1;
    }
    Ok(())
}

/// Groups of a row the decode kernels' own prefetch does not reach: it asks for group `g + 6`
/// while computing group `g` of the same row (`a16_avx2::prefetch_ahead`), so a row's first six
/// groups — all of a short row, such as gemma-3-270m's 640-wide output matrix — come from memory
/// unannounced unless the tile before asked for them (`Prefetch`, module `prefetch`).
const ROW_HEAD_GROUPS: usize = 6;

/// Prefetch the first `head` bytes of each `row_bytes` row in `rows` (hints only).
fn prefetch_rows(rows: &[u8], row_bytes: usize, head: usize) {
    #[cfg(target_arch = "x86_64")]
    for row in rows.chunks(row_bytes) {
        for off in (0..head.min(row.len())).step_by(64) {
            // SAFETY: `off < row.len()`, so the address is inside `rows`; a prefetch is a hint
            // that never faults and changes no state visible to the program.
            unsafe {
                use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                _mm_prefetch::<_MM_HINT_T0>(row.as_ptr().add(off) as *const i8);
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (rows, row_bytes, head);
}

/// [`matmul_rows_at`] at the process-wide SIMD level.
pub fn matmul_rows(
    ty: GgmlType,
    w: &[u8],
    row_bytes: usize,
    a: &[&[BlockA16]],
    out: &mut [f32],
) -> Result<(), QuantError> {
    matmul_rows_at(crate::simd::simd_level(), ty, w, row_bytes, a, out)
}

/// Dot product of one weight row with one A16 row, at SIMD `level`.
pub fn dot_at(level: SimdLevel, ty: GgmlType, w: &[u8], a: &[BlockA16]) -> Result<f32, QuantError> {
    let mut out = [0f32];
    dot_rows_at(level, ty, w, &[a], &mut out)?;
    Ok(out[0])
}

/// [`dot_at`] at the process-wide SIMD level.
pub fn dot(ty: GgmlType, w: &[u8], a: &[BlockA16]) -> Result<f32, QuantError> {
    dot_at(crate::simd::simd_level(), ty, w, a)
}

/// [`dot_rows_at`] at the process-wide SIMD level.
pub fn dot_rows(
    ty: GgmlType,
    w: &[u8],
    a: &[&[BlockA16]],
    out: &mut [f32],
) -> Result<(), QuantError> {
    dot_rows_at(crate::simd::simd_level(), ty, w, a, out)
}
