//! Dispatch of the A8 dot products: checks rows once, then runs the scalar references or the
//! AVX2 tiles (`a8_avx2`) for whole blocks of weight rows (`matmul_rows_at`: four-row tiles at
//! one token, two rows × a few tokens otherwise). Every path gives the references' bits.

use muser_gguf::GgmlType;

use bytemuck::Zeroable;

use crate::a16::UNPACK_MIN_ROWS;
use crate::a16_dispatch::{cast_blocks, check_block, check_row_groups, decode_tiles};
use crate::a8::{
    dot_q4_k_ref, dot_q5_0_ref, dot_q5_k_ref, dot_q6_k_ref, dot_q8_0_ref, n_groups, BlockA8,
};
use crate::a8::{UnpackedGroup8, SUB};
use crate::simd::SimdLevel;
use crate::QuantError;

/// Whether weight type `ty` has an A8 dot product.
pub fn supports(ty: GgmlType) -> bool {
    crate::a16::supports(ty)
}

fn check_row(ty: GgmlType, w: &[u8], a: &[BlockA8]) -> Result<(), QuantError> {
    check_row_groups(ty, w, a.len(), "A8")
}

fn reference(ty: GgmlType, w: &[u8], a: &[BlockA8]) -> Result<f32, QuantError> {
    Ok(match ty {
        GgmlType::Q4_K => dot_q4_k_ref(cast_blocks(ty, w)?, a),
        GgmlType::Q5_K => dot_q5_k_ref(cast_blocks(ty, w)?, a),
        GgmlType::Q6_K => dot_q6_k_ref(cast_blocks(ty, w)?, a),
        GgmlType::Q8_0 => dot_q8_0_ref(cast_blocks(ty, w)?, a),
        _ => dot_q5_0_ref(cast_blocks(ty, w)?, a),
    })
}

/// One packed tile of `RW` weight rows × `RA` activation rows: the AVX2 kernels, with
/// `vpdpbusd` at a `vnni()` level (the same bits).
#[cfg(target_arch = "x86_64")]
fn x86_tile<const RW: usize, const RA: usize>(
    level: SimdLevel,
    ty: GgmlType,
    w: [&[u8]; RW],
    a: [&[BlockA8]; RA],
    out: &mut [f32],
    next: &[u8],
) -> Result<(), QuantError> {
    macro_rules! go {
        ($f:ident, $fv:ident) => {{
            let mut rows = [&[][..]; RW];
            for (r, wb) in rows.iter_mut().zip(w) {
                *r = cast_blocks(ty, wb)?;
            }
            if level.vnni() {
                // SAFETY: `vnni()` levels are selected only after detecting AVX-512
                // F/BW/VL/VNNI and the AVX2 set; every row's length was checked by the caller.
                unsafe { crate::a8_avx2::$fv::<RW, RA>(rows, a, out, next) }
            } else {
                // SAFETY: callers reach this only at an AVX2-or-better `SimdLevel`, selected by
                // `simd` after detecting AVX2/FMA/F16C; every row's length was checked by the
                // caller.
                unsafe { crate::a8_avx2::$f::<RW, RA>(rows, a, out, next) }
            }
        }};
    }
    match ty {
        GgmlType::Q4_K => go!(dot_q4_k, dot_q4_k_vnni),
        GgmlType::Q5_K => go!(dot_q5_k, dot_q5_k_vnni),
        GgmlType::Q6_K => go!(dot_q6_k, dot_q6_k_vnni),
        GgmlType::Q8_0 => go!(dot_q8_0, dot_q8_0_vnni),
        _ => go!(dot_q5_0, dot_q5_0_vnni),
    }
    Ok(())
}

/// `$tile::<RW, RA>(…, [a…], out)` for the one to four activation rows in `$a`.
#[cfg(target_arch = "x86_64")]
macro_rules! by_tokens {
    ($a:expr, |$rows:ident| $call:expr) => {
        match *$a {
            [a0] => {
                let $rows = [a0];
                $call
            }
            [a0, a1] => {
                let $rows = [a0, a1];
                $call
            }
            [a0, a1, a2] => {
                let $rows = [a0, a1, a2];
                $call
            }
            [a0, a1, a2, a3] => {
                let $rows = [a0, a1, a2, a3];
                $call
            }
            _ => {}
        }
    };
}

/// Tokens per cache block of a multi-token product.
const TOKEN_BLOCK: usize = 16;

/// The multi-token walk: for each block of 16 activation rows, every group of `max_rw` weight
/// rows (then pairs, then a single one at the end) times `tokens` activation rows at a time.
/// `tile(i, rw, a_chunk, o, stride)` writes its outputs straight into `out`: `o[r * stride +
/// t]` for weight row `i + r` and the chunk's token `t` (`o` starts at the tile's first output,
/// `stride` is the token count).
pub(crate) fn tiles_into(
    n_rows: usize,
    a: &[&[BlockA8]],
    tokens: usize,
    max_rw: usize,
    out: &mut [f32],
    mut tile: impl FnMut(usize, usize, &[&[BlockA8]], &mut [f32], usize) -> Result<(), QuantError>,
) -> Result<(), QuantError> {
    let na = a.len();
    let ta = tokens.clamp(1, 4);
    for t0 in (0..na).step_by(TOKEN_BLOCK) {
        let tb = &a[t0..(t0 + TOKEN_BLOCK).min(na)];
        let mut i = 0;
        while i < n_rows {
            let rw = [max_rw, 2, 1]
                .into_iter()
                .find(|&r| i + r <= n_rows)
                .unwrap_or(1);
            for (k, ac) in tb.chunks(ta).enumerate() {
                let t = t0 + k * ta;
                tile(i, rw, ac, &mut out[i * na + t..], na)?;
            }
            i += rw;
        }
    }
    Ok(())
}

/// Unpack the `w.len() / row_bytes` rows of `w` into `u` (`groups` per row) with the
/// AVX2 unpackers (`a8_avx2::unpack_*`; equal to `a8_unpack::unpack_row`, `a8_tests`).
#[cfg(target_arch = "x86_64")]
pub(crate) fn x86_unpack(
    ty: GgmlType,
    w: &[u8],
    row_bytes: usize,
    nb: usize,
    groups: usize,
    u: &mut [UnpackedGroup8],
) -> Result<(), QuantError> {
    macro_rules! go {
        ($f:ident) => {{
            let rows = w
                .chunks(row_bytes)
                .map(|r| cast_blocks(ty, r))
                .collect::<Result<Vec<_>, _>>()?;
            // SAFETY: callers reach this only at an AVX2-or-better level (AVX2/FMA/F16C
            // detected by `simd`); every row holds `nb` 32-value blocks (checked by the caller)
            // and `u` holds `groups` groups per row.
            unsafe { crate::a8_avx2::$f(&rows, nb, groups, u) }
        }};
    }
    match ty {
        GgmlType::Q4_K => go!(unpack_q4_k),
        GgmlType::Q5_K => go!(unpack_q5_k),
        GgmlType::Q6_K => go!(unpack_q6_k),
        GgmlType::Q8_0 => go!(unpack_q8_0),
        _ => go!(unpack_q5_0),
    }
    Ok(())
}

/// Multi-token product on rows unpacked once (`a8_unpack`): the AVX-512 VNNI tiles at a
/// `vnni()` level, the AVX2 ones otherwise.
#[cfg(target_arch = "x86_64")]
fn x86_unpacked(
    level: SimdLevel,
    ty: GgmlType,
    w: &[u8],
    row_bytes: usize,
    a: &[&[BlockA8]],
    out: &mut [f32],
    shape: TileShape,
) -> Result<(), QuantError> {
    let n_rows = w.len() / row_bytes;
    let n = row_bytes / ty.type_size() * ty.block_size();
    let (groups, nb) = (n_groups(n), n / SUB);
    with_unpack_buffer(n_rows * groups, |u| {
        x86_unpack(ty, w, row_bytes, nb, groups, u)?;
        x86_unpacked_tiles(level, ty, u, groups, a, out, shape)
    })
}

/// `f` on `len` groups of this thread's unpack buffer (`UNPACKED`; contents unspecified).
#[cfg(target_arch = "x86_64")]
pub(crate) fn with_unpack_buffer<R>(len: usize, f: impl FnOnce(&mut [UnpackedGroup8]) -> R) -> R {
    UNPACKED.with_borrow_mut(|buf| {
        if buf.len() < len {
            buf.resize(len, UnpackedGroup8::zeroed());
        }
        f(&mut buf[..len])
    })
}

#[cfg(target_arch = "x86_64")]
std::thread_local! {
    /// Each thread's buffer for the weight rows `x86_unpacked` (and `a8_repack`) unpacks
    /// (reused: a fresh zeroed allocation per call was 13% of the time in `memset` in the
    /// `a8_tiles` harness).
    static UNPACKED: std::cell::RefCell<Vec<UnpackedGroup8>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// The tiles of [`x86_unpacked`] on rows already unpacked into `u` (`groups` per row).
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
pub(crate) fn x86_unpacked_tiles(
    level: SimdLevel,
    ty: GgmlType,
    u: &[UnpackedGroup8],
    groups: usize,
    a: &[&[BlockA8]],
    out: &mut [f32],
    shape: TileShape,
) -> Result<(), QuantError> {
    let n_rows = u.len() / groups;
    let row = |i: usize| &u[i * groups..(i + 1) * groups];
    let vnni = level.vnni();
    let (max_rw, tokens) = (shape.rows_at(level), shape.tokens);
    // `$rw` rows from `i` by the tokens of `ac`, with the kernel of this level.
    macro_rules! tile {
        ($signed:literal, $mins:literal, $rw:literal, $i:expr, $ac:expr, $o:expr, $st:expr) => {{
            let rows: [&[UnpackedGroup8]; $rw] = std::array::from_fn(|r| row($i + r));
            if vnni {
                // SAFETY: `vnni()` levels are selected only after detecting AVX-512
                // F/BW/VL/VNNI and the AVX2 set; the unpacked and activation rows were built
                // for the same length.
                by_tokens!($ac, |ar| unsafe {
                    crate::a8_avx512::dot_unpacked::<$mins, $rw, _>(rows, ar, $o, $st)
                });
            } else {
                // SAFETY: reached only at an AVX2-or-better level (AVX2/FMA/F16C detected by
                // `simd`); the unpacked and activation rows were built for the same length.
                by_tokens!($ac, |ar| unsafe {
                    crate::a8_avx2::dot_unpacked::<$signed, $mins, $rw, _>(rows, ar, $o, $st)
                });
            }
        }};
    }
    macro_rules! go {
        ($signed:literal, $mins:literal) => {
            tiles_into(n_rows, a, tokens, max_rw, out, |i, rw, ac, o, stride| {
                match rw {
                    4 => tile!($signed, $mins, 4, i, ac, o, stride),
                    2 => tile!($signed, $mins, 2, i, ac, o, stride),
                    _ => tile!($signed, $mins, 1, i, ac, o, stride),
                }
                Ok(())
            })
        };
    }
    match ty {
        GgmlType::Q4_K | GgmlType::Q5_K => go!(false, true),
        _ => go!(true, false),
    }
}

/// A block of a matrix product: `out[i * a.len() + t] = W[i] · a[t]` for the `w.len() /
/// row_bytes` weight rows packed in `w` and every activation row `a[t]`. Checks everything once,
/// then runs the kernel tiles: four weight rows at a time for a single activation row (with
/// decode's prefetch, `a16_dispatch::decode_tiles`); otherwise two weight rows ×
/// `tile_shape::tile_tokens_a8` activation rows, on rows unpacked once when at least
/// `UNPACK_MIN_ROWS` activation rows share them. Bit-identical to [`dot_at`] on each pair.
pub fn matmul_rows_at(
    level: SimdLevel,
    ty: GgmlType,
    w: &[u8],
    row_bytes: usize,
    a: &[&[BlockA8]],
    out: &mut [f32],
) -> Result<(), QuantError> {
    matmul_rows_shaped(level, ty, w, row_bytes, a, out, TileShape::for_level(level))
}

/// The shape of a multi-token tile: up to `rows` weight rows (1, 2 or 4; the AVX2 tiles take
/// at most 2) × `tokens` activation rows (1..=4). A speed choice, never a result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TileShape {
    pub rows: usize,
    pub tokens: usize,
}

impl TileShape {
    /// The process-wide shape at `level` (`tile_shape`; 1 × 1 below AVX2).
    pub fn for_level(level: SimdLevel) -> TileShape {
        if level.avx2() {
            TileShape {
                rows: crate::tile_shape::tile_rows_a8(level),
                tokens: crate::tile_shape::tile_tokens_a8(level),
            }
        } else {
            TileShape { rows: 1, tokens: 1 }
        }
    }

    /// Weight rows per tile at `level` (4 only at a `vnni()` level, else at most 2).
    pub(crate) fn rows_at(self, level: SimdLevel) -> usize {
        match (self.rows, level.vnni()) {
            (4.., true) => 4,
            (2.., _) => 2,
            _ => 1,
        }
    }
}

/// [`matmul_rows_at`] with an explicit multi-token tile shape (benchmarks and tests; every
/// shape gives the same bits).
pub fn matmul_rows_shaped(
    level: SimdLevel,
    ty: GgmlType,
    w: &[u8],
    row_bytes: usize,
    a: &[&[BlockA8]],
    out: &mut [f32],
    shape: TileShape,
) -> Result<(), QuantError> {
    let tokens = shape.tokens;
    let n_rows = check_block(ty, w, row_bytes, a.len(), out)?;
    let na = a.len();
    for r in a {
        check_row(ty, &w[..row_bytes], r)?;
    }
    let row = |i: usize| &w[i * row_bytes..(i + 1) * row_bytes];
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
        if na >= UNPACK_MIN_ROWS {
            return x86_unpacked(level, ty, w, row_bytes, a, out, shape);
        }
        return tiles_into(n_rows, a, tokens, 2, out, |i, rw, ac, o, stride| {
            // The packed tiles write `[row][token]` densely; spread that over the stride.
            let mut tmp = [0f32; 8];
            let t = &mut tmp[..rw * ac.len()];
            if rw == 2 {
                by_tokens!(ac, |ar| x86_tile::<2, _>(
                    level,
                    ty,
                    [row(i), row(i + 1)],
                    ar,
                    t,
                    &[]
                )?);
            } else {
                by_tokens!(ac, |ar| x86_tile::<1, _>(level, ty, [row(i)], ar, t, &[])?);
            }
            for (r, vals) in t.chunks(ac.len()).enumerate() {
                for (k, &v) in vals.iter().enumerate() {
                    o[r * stride + k] = v;
                }
            }
            Ok(())
        });
    }
    let _ = level;
    for i in 0..n_rows {
        for (t, ar) in a.iter().enumerate() {
            out[i * na + t] = reference(ty, row(i), ar)?;
        }
    }
    Ok(())
}

/// [`matmul_rows_at`] at the process-wide SIMD level.
pub fn matmul_rows(
    ty: GgmlType,
    w: &[u8],
    row_bytes: usize,
    a: &[&[BlockA8]],
    out: &mut [f32],
) -> Result<(), QuantError> {
    matmul_rows_at(crate::simd::simd_level(), ty, w, row_bytes, a, out)
}

/// Dot product of one weight row with one A8 row, at SIMD `level`.
pub fn dot_at(level: SimdLevel, ty: GgmlType, w: &[u8], a: &[BlockA8]) -> Result<f32, QuantError> {
    let mut out = [0f32];
    matmul_rows_at(level, ty, w, w.len().max(1), &[a], &mut out)?;
    Ok(out[0])
}

/// [`dot_at`] at the process-wide SIMD level.
pub fn dot(ty: GgmlType, w: &[u8], a: &[BlockA8]) -> Result<f32, QuantError> {
    dot_at(crate::simd::simd_level(), ty, w, a)
}
