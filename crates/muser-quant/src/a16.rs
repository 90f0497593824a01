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

/// The group walk of the activation formats' `quantize_row` (A16 here, A8 in `a8`): checks
/// that `x` is whole sub-blocks and `y` has `n_groups(x.len())` groups, zeroes every group, and
/// calls `sub(xs, group, j)` for each sub-block `j` of the group that lies inside the row
/// (sub-blocks past the end stay zero).
pub(crate) fn quantize_groups<G: Zeroable>(
    x: &[f32],
    y: &mut [G],
    what: &'static str,
    mut sub: impl FnMut(&[f32], &mut G, usize),
) -> Result<(), QuantError> {
    if !x.len().is_multiple_of(SUB) || y.len() != n_groups(x.len()) {
        return Err(QuantError::Length {
            ty: GgmlType::F32,
            what,
            expected: n_groups(x.len()),
            got: y.len(),
        });
    }
    for (g, out) in y.iter_mut().enumerate() {
        *out = G::zeroed();
        for j in 0..8 {
            let start = g * GROUP + j * SUB;
            if start >= x.len() {
                break;
            }
            sub(&x[start..start + SUB], out, j);
        }
    }
    Ok(())
}

/// Quantize one row. `x.len()` must be a multiple of 32 and `y.len() == n_groups(x.len())`.
pub fn quantize_row(x: &[f32], y: &mut [BlockA16]) -> Result<(), QuantError> {
    let what = "A16 row (elements must be a multiple of 32, groups = ceil(n/256))";
    quantize_groups(x, y, what, |xs, out, j| {
        let qs = &mut out.qs[j * SUB..(j + 1) * SUB];
        #[cfg(target_arch = "x86_64")]
        if crate::simd::simd_level().avx2() {
            // SAFETY: AVX2/FMA/F16C detected (`SimdLevel::Avx2`); both slices hold 32 values.
            if let Some((d, sum)) = unsafe { crate::a16_avx2::quantize_sub(xs, qs) } {
                (out.d[j], out.sum[j]) = (d, sum);
                return;
            }
        }
        let amax = xs.iter().fold(0f32, |m, v| m.max(v.abs()));
        if amax == 0.0 || !amax.is_finite() {
            return;
        }
        let id = QMAX / amax;
        out.d[j] = amax / QMAX;
        let mut s = 0i32;
        for (q, &v) in qs.iter_mut().zip(xs) {
            *q = (v * id).round_ties_even().clamp(-QMAX, QMAX) as i16;
            s += i32::from(*q);
        }
        out.sum[j] = s;
    })
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
pub(crate) fn lane_partials(w: &[i32], a: &[i16]) -> [i32; 16] {
    let mut p = [0i32; 16];
    for (l, v) in p.iter_mut().enumerate() {
        *v = w[2 * l] * i32::from(a[2 * l]) + w[2 * l + 1] * i32::from(a[2 * l + 1]);
    }
    p
}

/// `acc[l] = fma(s_lo, P[l], acc[l])` for lanes 0–7, `s_hi` for lanes 8–15.
#[inline]
pub(crate) fn fma_lanes(acc: &mut [f32; 16], s_lo: f32, s_hi: f32, p: &[i32; 16]) {
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

pub use crate::a16_dispatch::{
    dot, dot_at, dot_rows, dot_rows_at, matmul_rows, matmul_rows_at, supports, MAX_ROWS,
};
pub use crate::a16_unpack::{dot_unpacked_ref, unpack_row, UnpackedGroup, UNPACK_MIN_ROWS};

#[cfg(test)]
#[path = "a16_tests.rs"]
mod tests;
