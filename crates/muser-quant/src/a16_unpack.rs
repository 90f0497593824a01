//! Weight rows unpacked for the A16 prefill path: when several tokens multiply the same
//! weight rows, each row is unpacked once (`unpack_row`: integer weights offset-corrected,
//! sub-block scales precomputed exactly as the packed kernels compute them) and the tiles run
//! on the unpacked rows (`matmul_unpacked`). Results are bit-identical to the packed path.

use bytemuck::{Pod, Zeroable};
use muser_gguf::GgmlType;

use crate::a16::{fma_lanes, lane_partials, n_groups, reduce16, reduce8, BlockA16, GROUP, SUB};
use crate::a16_dispatch::{cast_blocks, supports, MAX_ROWS};
use crate::common::unpack_k4_scales;
use crate::q4_k::BlockQ4K;
use crate::q5_0::BlockQ5_0;
use crate::q5_k::BlockQ5K;
use crate::q6_k::BlockQ6K;
use crate::q8_0::BlockQ8_0;
use crate::simd::SimdLevel;
use crate::QuantError;

/// One group (256 values) of a weight row unpacked for repeated use by the prefill kernels:
/// the sub-block scale vectors exactly as the packed kernels compute them, and the integer
/// weights already offset-corrected. 608 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
#[repr(C)]
pub struct UnpackedGroup {
    /// Weight scale of each sub-block (Q6_K: of its first half); Q8_0/Q5_0: the block's `d`.
    pub ws: [f32; 8],
    /// Q6_K: scale of each sub-block's second half.
    pub ws_hi: [f32; 8],
    /// Q4_K/Q5_K: `dmin · m_j`.
    pub wm: [f32; 8],
    /// Weights, sub-block `j` at `32j..32j+32`.
    pub q: [i16; GROUP],
}

const _: () = assert!(std::mem::size_of::<UnpackedGroup>() == 608);

fn fill_asym(o: &mut UnpackedGroup, d: f32, dmin: f32, scales: &[u8; 12], q: &[u8; GROUP]) {
    let (sc, m) = unpack_k4_scales(scales);
    for j in 0..8 {
        o.ws[j] = d * f32::from(sc[j]);
        o.wm[j] = dmin * f32::from(m[j]);
    }
    for (x, &v) in o.q.iter_mut().zip(q.iter()) {
        *x = i16::from(v);
    }
}

/// Unpack one weight row of `ty` into `ceil(n / 256)` groups (`out.len()` must match).
pub fn unpack_row(ty: GgmlType, w: &[u8], out: &mut [UnpackedGroup]) -> Result<(), QuantError> {
    if !supports(ty) {
        return Err(QuantError::Unsupported {
            ty,
            op: "A16 unpack",
        });
    }
    let n = w.len() / ty.type_size() * ty.block_size();
    if out.len() != n_groups(n) || !w.len().is_multiple_of(ty.type_size()) {
        return Err(QuantError::Length {
            ty,
            what: "unpacked groups for the weight row",
            expected: n_groups(n),
            got: out.len(),
        });
    }
    out.fill(UnpackedGroup::zeroed());
    match ty {
        GgmlType::Q4_K => {
            for (o, b) in out.iter_mut().zip(cast_blocks::<BlockQ4K>(ty, w)?) {
                fill_asym(o, b.d.to_f32(), b.dmin.to_f32(), &b.scales, &b.quants());
            }
        }
        GgmlType::Q5_K => {
            for (o, b) in out.iter_mut().zip(cast_blocks::<BlockQ5K>(ty, w)?) {
                fill_asym(o, b.d.to_f32(), b.dmin.to_f32(), &b.scales, &b.quants());
            }
        }
        GgmlType::Q6_K => {
            let b: &[BlockQ6K] = cast_blocks(ty, w)?;
            for (o, b) in out.iter_mut().zip(b) {
                let d = b.d.to_f32();
                for j in 0..8 {
                    o.ws[j] = d * f32::from(b.scales[2 * j]);
                    o.ws_hi[j] = d * f32::from(b.scales[2 * j + 1]);
                }
                for (x, &v) in o.q.iter_mut().zip(b.quants().iter()) {
                    *x = i16::from(v) - 32;
                }
            }
        }
        GgmlType::Q8_0 => {
            let b: &[BlockQ8_0] = cast_blocks(ty, w)?;
            for (i, b) in b.iter().enumerate() {
                let (o, j) = (&mut out[i / 8], i % 8);
                o.ws[j] = b.d.to_f32();
                for (x, &v) in o.q[j * SUB..(j + 1) * SUB].iter_mut().zip(&b.qs) {
                    *x = i16::from(v);
                }
            }
        }
        _ => {
            let b: &[BlockQ5_0] = cast_blocks(ty, w)?;
            for (i, b) in b.iter().enumerate() {
                let (o, j) = (&mut out[i / 8], i % 8);
                o.ws[j] = b.d.to_f32();
                for (x, &v) in o.q[j * SUB..(j + 1) * SUB].iter_mut().zip(&b.quants()) {
                    *x = i16::from(v) - 16;
                }
            }
        }
    }
    Ok(())
}

/// Reference dot of an unpacked row (of a weight of type `ty`, `n` values) with an A16 row:
/// the same numbers as [`dot_at`] on the packed row.
pub fn dot_unpacked_ref(ty: GgmlType, u: &[UnpackedGroup], n: usize, a: &[BlockA16]) -> f32 {
    let mut acc = [0f32; 16];
    let mut macc = [0f32; 8];
    let nb = n / SUB;
    let mins = matches!(ty, GgmlType::Q4_K | GgmlType::Q5_K);
    let split = ty == GgmlType::Q6_K;
    for (g, (ug, ag)) in u.iter().zip(a).enumerate() {
        let w: Vec<i32> = ug.q.iter().map(|&v| i32::from(v)).collect();
        for j in 0..(nb - 8 * g).min(8) {
            let (o, aq) = (j * SUB, &ag.qs[j * SUB..(j + 1) * SUB]);
            let s_lo = ug.ws[j] * ag.d[j];
            let s_hi = if split { ug.ws_hi[j] * ag.d[j] } else { s_lo };
            fma_lanes(&mut acc, s_lo, s_hi, &lane_partials(&w[o..o + 32], aq));
        }
        if mins {
            for (j, m) in macc.iter_mut().enumerate() {
                *m = (ug.wm[j] * ag.d[j]).mul_add(ag.sum[j] as f32, *m);
            }
        }
    }
    if mins {
        reduce16(&acc) - reduce8(&macc)
    } else {
        reduce16(&acc)
    }
}

/// Activation rows from which [`matmul_rows_at`] unpacks the weight rows first (the unpack
/// is then amortised over enough tokens).
pub const UNPACK_MIN_ROWS: usize = 8;

/// Tokens per cache block in the unpacked product.
const TOKEN_BLOCK: usize = 16;

#[cfg(target_arch = "x86_64")]
fn x86_unpacked_tile<const RW: usize, const RA: usize>(
    level: SimdLevel,
    ty: GgmlType,
    nb: usize,
    w: [&[UnpackedGroup]; RW],
    a: [&[BlockA16]; RA],
    out: &mut [f32],
) {
    macro_rules! by_type {
        ($m:ident) => {
            // SAFETY: `level` is AVX2 or AVX-512, selected by `simd` only after detecting the
            // features the module's kernels enable; the unpacked rows and activation rows were
            // built for the same length by the caller.
            unsafe {
                match ty {
                    GgmlType::Q4_K | GgmlType::Q5_K => {
                        crate::$m::dot_unpacked::<false, true, RW, RA>(nb, w, a, out)
                    }
                    GgmlType::Q6_K => crate::$m::dot_unpacked::<true, false, RW, RA>(nb, w, a, out),
                    _ => crate::$m::dot_unpacked::<false, false, RW, RA>(nb, w, a, out),
                }
            }
        };
    }
    // Prefill tiles on unpacked rows: AVX-512 measured 25–27 GMAC/s vs AVX2 18 (forged small,
    // 64 tokens, 1 thread, matvec_bench).
    if level.avx512() {
        by_type!(a16_avx512)
    } else {
        by_type!(a16_avx2)
    }
}

/// The unpacked product: `out[i * a.len() + t] = u[i] · a[t]`, where `u` holds `n_rows`
/// unpacked rows of `groups` groups each, for a weight of type `ty` with `n` values per row.
/// `tokens` (2 or 4, `tile_shape`) is the tile height: it changes speed, never a result.
#[allow(clippy::too_many_arguments)]
pub(crate) fn matmul_unpacked(
    level: SimdLevel,
    ty: GgmlType,
    u: &[UnpackedGroup],
    groups: usize,
    n: usize,
    a: &[&[BlockA16]],
    out: &mut [f32],
    tokens: usize,
) {
    let n_rows = u.len() / groups.max(1);
    let na = a.len();
    let nb = n / SUB;
    let row = |i: usize| &u[i * groups..(i + 1) * groups];
    #[cfg(target_arch = "x86_64")]
    if level.avx2() {
        let mut tmp = [0f32; 2 * MAX_ROWS];
        for t0 in (0..na).step_by(TOKEN_BLOCK) {
            let tb = &a[t0..(t0 + TOKEN_BLOCK).min(na)];
            let mut i = 0;
            while i < n_rows {
                let rw = if i + 2 <= n_rows { 2 } else { 1 };
                let ta = tokens.clamp(1, MAX_ROWS);
                for (k, ac) in tb.chunks(ta).enumerate() {
                    let t = t0 + k * ta;
                    let o = &mut tmp[..rw * ac.len()];
                    match (rw, ac) {
                        (2, &[a0, a1, a2, a3]) => x86_unpacked_tile::<2, 4>(
                            level,
                            ty,
                            nb,
                            [row(i), row(i + 1)],
                            [a0, a1, a2, a3],
                            o,
                        ),
                        (2, &[a0, a1, a2]) => x86_unpacked_tile::<2, 3>(
                            level,
                            ty,
                            nb,
                            [row(i), row(i + 1)],
                            [a0, a1, a2],
                            o,
                        ),
                        (2, &[a0, a1]) => x86_unpacked_tile::<2, 2>(
                            level,
                            ty,
                            nb,
                            [row(i), row(i + 1)],
                            [a0, a1],
                            o,
                        ),
                        (2, &[a0]) => {
                            x86_unpacked_tile::<2, 1>(level, ty, nb, [row(i), row(i + 1)], [a0], o)
                        }
                        (_, &[a0, a1, a2, a3]) => {
                            x86_unpacked_tile::<1, 4>(level, ty, nb, [row(i)], [a0, a1, a2, a3], o)
                        }
                        (_, &[a0, a1, a2]) => {
                            x86_unpacked_tile::<1, 3>(level, ty, nb, [row(i)], [a0, a1, a2], o)
                        }
                        (_, &[a0, a1]) => {
                            x86_unpacked_tile::<1, 2>(level, ty, nb, [row(i)], [a0, a1], o)
                        }
                        (_, &[a0]) => x86_unpacked_tile::<1, 1>(level, ty, nb, [row(i)], [a0], o),
                        _ => {}
                    }
                    for r in 0..rw {
                        out[(i + r) * na + t..(i + r) * na + t + ac.len()]
                            .copy_from_slice(&tmp[r * ac.len()..(r + 1) * ac.len()]);
                    }
                }
                i += rw;
            }
        }
        return;
    }
    let _ = level;
    for i in 0..n_rows {
        for (t, ar) in a.iter().enumerate() {
            out[i * na + t] = dot_unpacked_ref(ty, row(i), n, ar);
        }
    }
}
