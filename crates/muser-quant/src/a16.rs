//! A16: Muser's 16-bit activation format, and the reference dot products of every quantized
//! weight format against it.
//!
//! Why: the comparator quantizes activations to 8 bits (Q8_K: one scale per 256 values; Q8_0:
//! one f16 scale per 32) before every quantized matmul, and that rounding dominates its distance
//! to the f64 oracle (BRIEF §2). A16 keeps 16 bits per activation with an f32 scale per 32
//! values: the step is `amax/32767` instead of `amax/127`, ~250× finer, while the products stay
//! integer (weights are ≤ 8-bit integers) and the integer sums stay exact.
//!
//! Layout (`BlockA16`, 576 bytes, 4-byte aligned): one *group* of 256 activations as eight
//! sub-blocks of 32:
//! ```text
//! offset   0: d[8]    f32   sub-block scales (value = d[j] * qs[32j + i])
//! offset  32: sum[8]  i32   Σ qs over each sub-block (for the k-quants' min terms)
//! offset  64: qs[256] i16   quants in -32767..=32767
//! ```
//! A row of `n` activations (`n` a multiple of 32) is `ceil(n / 256)` groups; sub-blocks past
//! the end are zero (d = 0, sum = 0, qs = 0).
//!
//! Quantization: per sub-block, `amax = max |x|`, `d = amax / 32767`,
//! `q = round_ties_even(x * (32767 / amax))` clamped to ±32767 (all zero when `amax == 0`).
//!
//! Dot products (the reference below; the SIMD kernels in `a16_avx2` / `a16_avx512` are
//! bit-identical to it). Per sub-block of 32 (weights `w_i` as signed integers after the
//! format's offset: Q6_K `q − 32`, Q5_0 `q − 16`, the asymmetric k-quants the raw `q`), sixteen
//! exact integer *lane partials* `P[l] = w_{2l}·a_{2l} + w_{2l+1}·a_{2l+1}` — the lanes of
//! `vpmaddwd` over the sub-block's 32 values. |P| < 2^24 for every format, so `P as f32` is
//! exact. Sixteen f32 lane accumulators are updated with fused multiply-adds
//! `acc[l] = fma(S_l, P[l], acc[l])` (Rust's `mul_add`: one rounding, identical in software and
//! hardware), where the sub-block's scale is, every product rounded to f32:
//! - Q8_0 / Q5_0: `S = dw · da` for every lane;
//! - Q4_K / Q5_K: `S = (d · sc_j) · da_j` for every lane, and separately a min accumulator per
//!   sub-block position `j` of a group: `macc[j] = fma((dmin · m_j) · da_j, asum_j, macc[j])`;
//! - Q6_K: lanes 0–7 cover the sub-block's first 16 values and use `S_lo = (d · sc_lo) · da`,
//!   lanes 8–15 the second 16 with `S_hi`.
//!
//! Result: `reduce8(acc[0..8] + acc[8..16]) − reduce8(macc)` (lane-wise sum first) with
//! `reduce8(a) = ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7))`.
//! It depends only on the two rows: never on threads, batching or the CPU's SIMD level.

use bytemuck::{Pod, Zeroable};
use muser_gguf::GgmlType;

use crate::common::unpack_k4_scales;
use crate::q4_k::BlockQ4K;
use crate::q5_0::BlockQ5_0;
use crate::q5_k::BlockQ5K;
use crate::q6_k::BlockQ6K;
use crate::q8_0::BlockQ8_0;
use crate::simd::SimdLevel;
use crate::QuantError;

/// Activations per group.
pub const GROUP: usize = 256;
/// Activations per sub-block (one scale).
pub const SUB: usize = 32;
/// Largest quant magnitude.
pub const QMAX: f32 = 32767.0;

/// One group of 256 activations (see the module header for the layout).
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
#[repr(C)]
pub struct BlockA16 {
    pub d: [f32; 8],
    pub sum: [i32; 8],
    pub qs: [i16; GROUP],
}

const _: () = assert!(std::mem::size_of::<BlockA16>() == 576);

/// Groups needed for a row of `n` activations.
pub fn n_groups(n: usize) -> usize {
    n.div_ceil(GROUP)
}

/// Quantize one row. `x.len()` must be a multiple of 32 and `y.len() == n_groups(x.len())`.
pub fn quantize_row(x: &[f32], y: &mut [BlockA16]) -> Result<(), QuantError> {
    if !x.len().is_multiple_of(SUB) || y.len() != n_groups(x.len()) {
        return Err(QuantError::Length {
            ty: GgmlType::F32,
            what: "A16 row (elements must be a multiple of 32, groups = ceil(n/256))",
            expected: n_groups(x.len()),
            got: y.len(),
        });
    }
    for (g, out) in y.iter_mut().enumerate() {
        *out = BlockA16::zeroed();
        for j in 0..8 {
            let start = g * GROUP + j * SUB;
            if start >= x.len() {
                break;
            }
            let xs = &x[start..start + SUB];
            #[cfg(target_arch = "x86_64")]
            if crate::simd::simd_level().avx2() {
                // SAFETY: AVX2/FMA/F16C detected (`SimdLevel::Avx2`); both slices hold 32 values.
                if let Some((d, sum)) = unsafe {
                    crate::a16_avx2::quantize_sub(xs, &mut out.qs[j * SUB..(j + 1) * SUB])
                } {
                    out.d[j] = d;
                    out.sum[j] = sum;
                    continue;
                }
            }
            let amax = xs.iter().fold(0f32, |m, v| m.max(v.abs()));
            if amax == 0.0 || !amax.is_finite() {
                continue;
            }
            let id = QMAX / amax;
            out.d[j] = amax / QMAX;
            let mut s = 0i32;
            for (i, &v) in xs.iter().enumerate() {
                let q = (v * id).round_ties_even().clamp(-QMAX, QMAX) as i16;
                out.qs[j * SUB + i] = q;
                s += i32::from(q);
            }
            out.sum[j] = s;
        }
    }
    Ok(())
}

/// Dequantize the first `n` activations of a row (`y.len() == n`).
pub fn dequantize_row(x: &[BlockA16], y: &mut [f32]) {
    for (i, v) in y.iter_mut().enumerate() {
        let g = &x[i / GROUP];
        let k = i % GROUP;
        *v = g.d[k / SUB] * f32::from(g.qs[k]);
    }
}

/// The fixed final reduction of the eight lane accumulators.
#[inline]
pub fn reduce8(a: &[f32; 8]) -> f32 {
    ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]))
}

/// The sixteen lane partials of one 32-value sub-block (`w` already offset-corrected).
#[inline]
fn lane_partials(w: &[i32], a: &[i16]) -> [i32; 16] {
    let mut p = [0i32; 16];
    for (l, v) in p.iter_mut().enumerate() {
        *v = w[2 * l] * i32::from(a[2 * l]) + w[2 * l + 1] * i32::from(a[2 * l + 1]);
    }
    p
}

/// `acc[l] = fma(s_lo, P[l], acc[l])` for lanes 0–7, `s_hi` for lanes 8–15.
#[inline]
fn fma_lanes(acc: &mut [f32; 16], s_lo: f32, s_hi: f32, p: &[i32; 16]) {
    for (l, (a, &v)) in acc.iter_mut().zip(p).enumerate() {
        let s = if l < 8 { s_lo } else { s_hi };
        *a = s.mul_add(v as f32, *a);
    }
}

/// The final reduction of the sixteen lane accumulators.
#[inline]
pub fn reduce16(a: &[f32; 16]) -> f32 {
    let mut b = [0f32; 8];
    for (l, x) in b.iter_mut().enumerate() {
        *x = a[l] + a[l + 8];
    }
    reduce8(&b)
}

/// Q4_K / Q5_K reference: `blk(k)` gives super-block `k`'s (d, dmin, scales, quants).
fn dot_asym_ref(
    n_super: usize,
    blk: impl Fn(usize) -> (f32, f32, [u8; 12], [u8; 256]),
    a: &[BlockA16],
) -> f32 {
    let mut acc = [0f32; 16];
    let mut macc = [0f32; 8];
    for (k, ag) in a.iter().enumerate().take(n_super) {
        let (d, dmin, scales, q) = blk(k);
        let (sc, m) = unpack_k4_scales(&scales);
        let w: Vec<i32> = q.iter().map(|&v| i32::from(v)).collect();
        for j in 0..8 {
            let s = (d * f32::from(sc[j])) * ag.d[j];
            let p = lane_partials(&w[j * SUB..(j + 1) * SUB], &ag.qs[j * SUB..(j + 1) * SUB]);
            fma_lanes(&mut acc, s, s, &p);
        }
        for j in 0..8 {
            let mm = (dmin * f32::from(m[j])) * ag.d[j];
            macc[j] = mm.mul_add(ag.sum[j] as f32, macc[j]);
        }
    }
    reduce16(&acc) - reduce8(&macc)
}

/// Q4_K · A16, scalar reference.
pub fn dot_q4_k_ref(x: &[BlockQ4K], a: &[BlockA16]) -> f32 {
    dot_asym_ref(
        x.len(),
        |k| {
            (
                x[k].d.to_f32(),
                x[k].dmin.to_f32(),
                x[k].scales,
                x[k].quants(),
            )
        },
        a,
    )
}

/// Q5_K · A16, scalar reference.
pub fn dot_q5_k_ref(x: &[BlockQ5K], a: &[BlockA16]) -> f32 {
    dot_asym_ref(
        x.len(),
        |k| {
            (
                x[k].d.to_f32(),
                x[k].dmin.to_f32(),
                x[k].scales,
                x[k].quants(),
            )
        },
        a,
    )
}

/// Q6_K · A16, scalar reference.
pub fn dot_q6_k_ref(x: &[BlockQ6K], a: &[BlockA16]) -> f32 {
    let mut acc = [0f32; 16];
    for (b, ag) in x.iter().zip(a) {
        let d = b.d.to_f32();
        let w: Vec<i32> = b.quants().iter().map(|&v| i32::from(v) - 32).collect();
        for j in 0..8 {
            let (o, aq) = (j * SUB, &ag.qs[j * SUB..(j + 1) * SUB]);
            let s_lo = (d * f32::from(b.scales[2 * j])) * ag.d[j];
            let s_hi = (d * f32::from(b.scales[2 * j + 1])) * ag.d[j];
            fma_lanes(&mut acc, s_lo, s_hi, &lane_partials(&w[o..o + 32], aq));
        }
    }
    reduce16(&acc)
}

/// The 32-value block formats: block `i` pairs with sub-block `i % 8` of group `i / 8`.
fn dot_blocks32_ref(nb: usize, blk: impl Fn(usize) -> (f32, [i32; 32]), a: &[BlockA16]) -> f32 {
    let mut acc = [0f32; 16];
    for i in 0..nb {
        let (ag, j) = (&a[i / 8], i % 8);
        let (dw, w) = blk(i);
        let p = lane_partials(&w, &ag.qs[j * SUB..(j + 1) * SUB]);
        let s = dw * ag.d[j];
        fma_lanes(&mut acc, s, s, &p);
    }
    reduce16(&acc)
}

/// Q8_0 · A16, scalar reference.
pub fn dot_q8_0_ref(x: &[BlockQ8_0], a: &[BlockA16]) -> f32 {
    dot_blocks32_ref(x.len(), |i| (x[i].d.to_f32(), x[i].qs.map(i32::from)), a)
}

/// Q5_0 · A16, scalar reference.
pub fn dot_q5_0_ref(x: &[BlockQ5_0], a: &[BlockA16]) -> f32 {
    dot_blocks32_ref(
        x.len(),
        |i| (x[i].d.to_f32(), x[i].quants().map(|q| i32::from(q) - 16)),
        a,
    )
}

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

/// Whether weight type `ty` has an A16 dot product.
pub fn supports(ty: GgmlType) -> bool {
    matches!(
        ty,
        GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K | GgmlType::Q8_0 | GgmlType::Q5_0
    )
}

fn cast_blocks<T: Pod>(ty: GgmlType, w: &[u8]) -> Result<&[T], QuantError> {
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
    if !supports(ty) {
        return Err(QuantError::Unsupported { ty, op: "A16 dot" });
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
    if a.len() != n_groups(n) {
        return Err(QuantError::Length {
            ty,
            what: "A16 groups for the weight row",
            expected: n_groups(n),
            got: a.len(),
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
) -> Result<(), QuantError> {
    macro_rules! go {
        ($m:ident, $f:ident) => {{
            let mut rows = [&[][..]; RW];
            for (r, wb) in rows.iter_mut().zip(w) {
                *r = cast_blocks(ty, wb)?;
            }
            // SAFETY: `level` is AVX2 or AVX-512, selected by `simd` only after detecting the
            // features the module's kernels enable; every row's length was checked by the caller.
            unsafe { crate::$m::$f::<RW, RA>(rows, a, out) }
        }};
    }
    macro_rules! by_type {
        ($m:ident) => {
            match ty {
                GgmlType::Q4_K => go!($m, dot_q4_k),
                GgmlType::Q5_K => go!($m, dot_q5_k),
                GgmlType::Q6_K => go!($m, dot_q6_k),
                GgmlType::Q8_0 => go!($m, dot_q8_0),
                _ => go!($m, dot_q5_0),
            }
        };
    }
    // Single-token tiles stay on AVX2 even at the AVX-512 level: measured in-cache on the dev
    // VM (matvec_bench, 4-row tiles, 1 thread): Q8_0 14.7 GMAC/s AVX2 vs 12.5 AVX-512, Q4_K
    // 14.0 vs 12.9. Multi-token tiles use AVX-512 (see `x86_unpacked_tile`). Both give the
    // same bits; `MUSER_SIMD=avx2` is the A/B switch for the whole choice.
    if level == SimdLevel::Avx512 && RA > 1 {
        by_type!(a16_avx512)
    } else {
        by_type!(a16_avx2)
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
            [a0] => x86_tile::<1, 1>(level, ty, [w], [a0], out),
            [a0, a1] => x86_tile::<1, 2>(level, ty, [w], [a0, a1], out),
            [a0, a1, a2] => x86_tile::<1, 3>(level, ty, [w], [a0, a1, a2], out),
            [a0, a1, a2, a3] => x86_tile::<1, 4>(level, ty, [w], [a0, a1, a2, a3], out),
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
    if row_bytes == 0 || !w.len().is_multiple_of(row_bytes) || a.is_empty() {
        return Err(QuantError::Length {
            ty,
            what: "weight rows (whole rows, at least one activation row)",
            expected: row_bytes,
            got: w.len(),
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
        matmul_unpacked(level, ty, &u, groups, n, a, out);
        return Ok(());
    }
    #[cfg(target_arch = "x86_64")]
    if level.avx2() {
        if let [a0] = *a {
            let mut i = 0;
            while i + 4 <= n_rows {
                x86_tile::<4, 1>(
                    level,
                    ty,
                    [row(i), row(i + 1), row(i + 2), row(i + 3)],
                    [a0],
                    &mut out[i..i + 4],
                )?;
                i += 4;
            }
            while i < n_rows {
                x86_tile::<1, 1>(level, ty, [row(i)], [a0], &mut out[i..i + 1])?;
                i += 1;
            }
            return Ok(());
        }
        let na = a.len();
        for i in 0..n_rows {
            for (k, ac) in a.chunks(MAX_ROWS).enumerate() {
                let o = &mut out[i * na + k * MAX_ROWS..i * na + k * MAX_ROWS + ac.len()];
                match *ac {
                    [a0] => x86_tile::<1, 1>(level, ty, [row(i)], [a0], o)?,
                    [a0, a1] => x86_tile::<1, 2>(level, ty, [row(i)], [a0, a1], o)?,
                    [a0, a1, a2] => x86_tile::<1, 3>(level, ty, [row(i)], [a0, a1, a2], o)?,
                    [a0, a1, a2, a3] => x86_tile::<1, 4>(level, ty, [row(i)], [a0, a1, a2, a3], o)?,
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
    if level == SimdLevel::Avx512 {
        by_type!(a16_avx512)
    } else {
        by_type!(a16_avx2)
    }
}

/// The unpacked product: `out[i * a.len() + t] = u[i] · a[t]`, where `u` holds `n_rows`
/// unpacked rows of `groups` groups each, for a weight of type `ty` with `n` values per row.
fn matmul_unpacked(
    level: SimdLevel,
    ty: GgmlType,
    u: &[UnpackedGroup],
    groups: usize,
    n: usize,
    a: &[&[BlockA16]],
    out: &mut [f32],
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
                for (k, ac) in tb.chunks(MAX_ROWS).enumerate() {
                    let t = t0 + k * MAX_ROWS;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic pseudo-random f32 in [-s, s).
    fn noise(seed: u64, n: usize, s: f32) -> Vec<f32> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                ((x >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * s
            })
            .collect()
    }

    fn weights(ty: GgmlType, n_in: usize, seed: u64) -> Vec<u8> {
        let x = noise(seed, n_in, 1.0);
        let mut w = vec![0u8; ty.bytes_for(n_in as u64).expect("size") as usize];
        crate::quantize(ty, &x, &mut w).expect("quantize");
        w
    }

    fn acts(n: usize, seed: u64) -> (Vec<f32>, Vec<BlockA16>) {
        let mut x = noise(seed, n, 3.0);
        // An outlier sub-block and an all-zero sub-block.
        x[5] = 40.0;
        for v in x.iter_mut().skip(64).take(32) {
            *v = 0.0;
        }
        let mut a = vec![BlockA16::zeroed(); n_groups(n)];
        quantize_row(&x, &mut a).expect("quantize");
        (x, a)
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn simd_quantization_matches_the_reference() {
        if !crate::simd::avx2_available() {
            eprintln!("skipping: no AVX2 on this CPU");
            return;
        }
        for seed in 0..50u64 {
            let mut x = noise(seed, 96, 10.0);
            x[3] = 0.5; // ties at the top of the range are exercised by the scale
            if seed % 7 == 0 {
                x[40] = f32::NAN;
            }
            if seed % 11 == 0 {
                x[70] = f32::INFINITY;
            }
            for sb in x.chunks(32) {
                let amax = sb.iter().fold(0f32, |m, v| m.max(v.abs()));
                let mut q = [0i16; 32];
                // SAFETY: AVX2 checked above.
                let got = unsafe { crate::a16_avx2::quantize_sub(sb, &mut q) };
                if sb.iter().any(|v| v.is_nan()) {
                    assert!(got.is_none());
                    continue;
                }
                let (d, sum) = got.expect("no NaN");
                if amax == 0.0 || !amax.is_finite() {
                    assert_eq!((d, sum), (0.0, 0));
                    continue;
                }
                let id = QMAX / amax;
                let want: Vec<i16> = sb
                    .iter()
                    .map(|&v| (v * id).round_ties_even().clamp(-QMAX, QMAX) as i16)
                    .collect();
                assert_eq!(q.to_vec(), want);
                assert_eq!(d.to_bits(), (amax / QMAX).to_bits());
                assert_eq!(sum, want.iter().map(|&v| i32::from(v)).sum::<i32>());
            }
        }
    }

    #[test]
    fn quantization_is_fine_grained() {
        let (x, a) = acts(640, 1);
        let mut y = vec![0f32; 640];
        dequantize_row(&a, &mut y);
        for (j, (xs, ys)) in x.chunks(32).zip(y.chunks(32)).enumerate() {
            let amax = xs.iter().fold(0f32, |m, v| m.max(v.abs()));
            for (p, q) in xs.iter().zip(ys) {
                assert!(
                    (p - q).abs() <= amax / 32767.0 * 0.5 + amax * 1e-6,
                    "sub-block {j}"
                );
            }
        }
        assert_eq!(a[2].d[4..], [0.0; 4], "padding sub-blocks are zero");
    }

    #[test]
    fn dots_match_f64_of_the_dequantized_rows() {
        for ty in [
            GgmlType::Q4_K,
            GgmlType::Q5_K,
            GgmlType::Q6_K,
            GgmlType::Q8_0,
            GgmlType::Q5_0,
        ] {
            let n = if ty.block_size() == 256 { 768 } else { 640 };
            let w = weights(ty, n, 7);
            let (_, a) = acts(n, 9);
            let mut wf = vec![0f64; n];
            crate::dequantize_f64(ty, &w, &mut wf).expect("dequantize");
            let mut af = vec![0f32; n];
            dequantize_row(&a, &mut af);
            let exact: f64 = wf.iter().zip(&af).map(|(p, q)| p * f64::from(*q)).sum();
            let got = f64::from(dot_at(SimdLevel::Scalar, ty, &w, &a).expect("dot"));
            let scale: f64 = wf
                .iter()
                .zip(&af)
                .map(|(p, q)| (p * f64::from(*q)).abs())
                .sum();
            assert!(
                (got - exact).abs() <= 1e-5 * scale,
                "{ty}: {got} vs {exact}"
            );
        }
    }

    /// Every level this CPU can run.
    fn test_levels() -> Vec<SimdLevel> {
        [SimdLevel::Scalar, SimdLevel::Avx2, SimdLevel::Avx512]
            .into_iter()
            .filter(|l| l.is_available())
            .collect()
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx2_is_bit_identical_to_the_reference() {
        if !crate::simd::avx2_available() {
            eprintln!("skipping: no AVX2 on this CPU");
            return;
        }
        for ty in [
            GgmlType::Q4_K,
            GgmlType::Q5_K,
            GgmlType::Q6_K,
            GgmlType::Q8_0,
            GgmlType::Q5_0,
        ] {
            for (n, seed) in [(256usize, 1u64), (512, 2), (2304, 3), (640, 4), (96, 5)] {
                if n % ty.block_size() != 0 {
                    continue;
                }
                let w = weights(ty, n, seed);
                let (_, a) = acts(n, seed + 100);
                let r = dot_at(SimdLevel::Scalar, ty, &w, &a).expect("ref");
                for level in test_levels() {
                    let v = dot_at(level, ty, &w, &a).expect("simd");
                    assert_eq!(
                        r.to_bits(),
                        v.to_bits(),
                        "{ty} n={n} at {level:?}: {r} vs {v}"
                    );
                }
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn multi_row_tiles_equal_single_rows() {
        if !crate::simd::avx2_available() {
            eprintln!("skipping: no AVX2 on this CPU");
            return;
        }
        for ty in [
            GgmlType::Q4_K,
            GgmlType::Q5_K,
            GgmlType::Q6_K,
            GgmlType::Q8_0,
            GgmlType::Q5_0,
        ] {
            let n = 512;
            let w = weights(ty, n, 11);
            let rows: Vec<Vec<BlockA16>> = (0..4).map(|r| acts(n, 20 + r).1).collect();
            let refs: Vec<&[BlockA16]> = rows.iter().map(Vec::as_slice).collect();
            for k in 1..=4 {
                for level in test_levels() {
                    let mut out = vec![0f32; k];
                    dot_rows_at(level, ty, &w, &refs[..k], &mut out).expect("rows");
                    for (r, o) in out.iter().enumerate() {
                        let single = dot_at(SimdLevel::Scalar, ty, &w, refs[r]).expect("single");
                        assert_eq!(
                            o.to_bits(),
                            single.to_bits(),
                            "{ty} tile {k} row {r} at {level:?}"
                        );
                    }
                }
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn matmul_blocks_equal_single_dots() {
        if !crate::simd::avx2_available() {
            eprintln!("skipping: no AVX2 on this CPU");
            return;
        }
        for ty in [
            GgmlType::Q4_K,
            GgmlType::Q5_K,
            GgmlType::Q6_K,
            GgmlType::Q8_0,
            GgmlType::Q5_0,
        ] {
            let n = if ty.block_size() == 256 { 512 } else { 608 };
            let rows: Vec<u8> = (0..7).flat_map(|r| weights(ty, n, 40 + r)).collect();
            let row_bytes = rows.len() / 7;
            let acts: Vec<Vec<BlockA16>> = (0..14).map(|t| acts(n, 60 + t).1).collect();
            let refs: Vec<&[BlockA16]> = acts.iter().map(Vec::as_slice).collect();
            for na in [1usize, 2, 5, 6, 9, 14] {
                for level in test_levels() {
                    let mut out = vec![0f32; 7 * na];
                    matmul_rows_at(level, ty, &rows, row_bytes, &refs[..na], &mut out)
                        .expect("matmul");
                    for i in 0..7 {
                        for t in 0..na {
                            let want = dot_at(
                                SimdLevel::Scalar,
                                ty,
                                &rows[i * row_bytes..(i + 1) * row_bytes],
                                refs[t],
                            )
                            .expect("dot");
                            assert_eq!(
                                out[i * na + t].to_bits(),
                                want.to_bits(),
                                "{ty} row {i} act {t} of {na} at {level:?}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn rejects_mismatched_rows() {
        let w = weights(GgmlType::Q4_K, 512, 1);
        let (_, a) = acts(256, 2);
        assert!(dot(GgmlType::Q4_K, &w, &a).is_err());
        assert!(dot(GgmlType::F16, &[0u8; 64], &a).is_err());
    }
}
