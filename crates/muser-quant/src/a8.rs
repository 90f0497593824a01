//! A8: Muser's 8-bit activation format (an f32 scale per 32 values), and the reference dot
//! products of every quantized weight format against it.
//!
//! Why: A16 (`a16`) is three to four orders of magnitude closer to the f64 oracle than the
//! comparator, but its int16 × int8 products (`vpmaddwd`, 16 multiply-adds per AVX2
//! instruction) cost twice the instructions of the comparator's 8-bit route. A8 uses the 8-bit
//! products (`vpmaddubsw`, 32 per instruction) and keeps a finer scale than the comparator's
//! activations: one f32 scale per 32 values where Q8_K has one per 256 (Q8_0, for Q8_0/Q5_0
//! weights, has an f16 scale per 32). The step is `amax_32/127`, never coarser than Q8_K's
//! `amax_256/127`; the integer sums stay exact.
//!
//! Layout (`BlockA8`, 320 bytes, 4-byte aligned): one *group* of 256 activations as eight
//! sub-blocks of 32:
//! ```text
//! offset   0: d[8]    f32   sub-block scales (value = d[j] * qs[32j + i])
//! offset  32: sum[8]  i32   Σ qs over each sub-block (for the k-quants' min terms)
//! offset  64: qs[256] i8    quants in -127..=127
//! ```
//! A row of `n` activations (`n` a multiple of 32) is `ceil(n / 256)` groups; sub-blocks past
//! the end are zero (d = 0, sum = 0, qs = 0).
//!
//! Quantization: per sub-block, `amax = max |x|`, `d = amax / 127`,
//! `q = round_ties_even(x * (127 / amax))` clamped to ±127 (all zero when `amax == 0` or
//! `amax` is not finite).
//!
//! Dot products (the references below; the AVX2 kernels in `a8_avx2` are bit-identical to
//! them). Per sub-block of 32 (weights `w_i` as signed integers after the format's offset, as
//! in `a16`), eight exact integer *lane partials* `P[l] = Σ_{i<4} w_{4l+i}·a_{4l+i}` — the
//! lanes of `vpmaddubsw` followed by `vpmaddwd` with ones, or of one `vpdpbusd`. |P| ≤
//! 4·128·127 < 2^24, so `P as f32` is exact. Two sets of eight f32 lane accumulators, `acc_e`
//! for the even sub-blocks of each group and `acc_o` for the odd ones (a 512-bit vector holds
//! a pair of sub-blocks: `a8_avx512`), are updated with fused multiply-adds
//! `acc[l] = fma(S_l, P[l], acc[l])`, with the sub-block scale `S` as in `a16` (every product
//! rounded to f32): Q8_0 / Q5_0 `dw · da`; Q4_K / Q5_K `(d · sc_j) · da_j` plus the min
//! accumulator `macc[j] = fma((dmin · m_j) · da_j, asum_j, macc[j])`; Q6_K lanes 0–3 (the
//! sub-block's first 16 values) `S_lo`, lanes 4–7 `S_hi`. For the 32-value block formats,
//! block `i` is sub-block `i % 8` of group `i / 8`.
//!
//! Result: `reduce8(acc_e + acc_o) − reduce8(macc)` (the lane-wise sum first). It depends only
//! on the two rows: never on threads, batching, tile shape or the CPU's SIMD level.

use bytemuck::{Pod, Zeroable};

use crate::a16::{quantize_groups, reduce8};
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
pub const QMAX: f32 = 127.0;

/// One group of 256 activations (see the module header for the layout).
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
#[repr(C)]
pub struct BlockA8 {
    pub d: [f32; 8],
    pub sum: [i32; 8],
    pub qs: [i8; GROUP],
}

const _: () = assert!(std::mem::size_of::<BlockA8>() == 320);

/// Groups needed for a row of `n` activations.
pub fn n_groups(n: usize) -> usize {
    n.div_ceil(GROUP)
}

/// Quantize one row. `x.len()` must be a multiple of 32 and `y.len() == n_groups(x.len())`.
pub fn quantize_row(x: &[f32], y: &mut [BlockA8]) -> Result<(), QuantError> {
    let what = "A8 row (elements must be a multiple of 32, groups = ceil(n/256))";
    quantize_groups(x, y, what, |xs, out, j| {
        let qs = &mut out.qs[j * SUB..(j + 1) * SUB];
        #[cfg(target_arch = "x86_64")]
        if crate::simd::simd_level().avx2() {
            // SAFETY: AVX2/FMA/F16C detected (`SimdLevel::Avx2`); both slices hold 32 values.
            if let Some((d, sum)) = unsafe { crate::a8_avx2::quantize_sub(xs, qs) } {
                (out.d[j], out.sum[j]) = (d, sum);
                return;
            }
        }
        (out.d[j], out.sum[j]) = quantize_sub_ref(xs, qs);
    })
}

/// One 32-value sub-block, scalar: returns (scale, Σ quants).
pub(crate) fn quantize_sub_ref(xs: &[f32], qs: &mut [i8]) -> (f32, i32) {
    let amax = xs.iter().fold(0f32, |m, v| m.max(v.abs()));
    if amax == 0.0 || !amax.is_finite() {
        qs.fill(0);
        return (0.0, 0);
    }
    let id = QMAX / amax;
    let mut s = 0i32;
    for (q, &v) in qs.iter_mut().zip(xs) {
        *q = (v * id).round_ties_even().clamp(-QMAX, QMAX) as i8;
        s += i32::from(*q);
    }
    (amax / QMAX, s)
}

/// Dequantize the first `n` activations of a row (`y.len() == n`).
pub fn dequantize_row(x: &[BlockA8], y: &mut [f32]) {
    for (i, v) in y.iter_mut().enumerate() {
        let g = &x[i / GROUP];
        let k = i % GROUP;
        *v = g.d[k / SUB] * f32::from(g.qs[k]);
    }
}

/// The eight lane partials of one 32-value sub-block (`w` already offset-corrected).
#[inline]
fn lane_partials(w: &[i32], a: &[i8]) -> [i32; 8] {
    let mut p = [0i32; 8];
    for (l, v) in p.iter_mut().enumerate() {
        *v = (0..4).map(|i| w[4 * l + i] * i32::from(a[4 * l + i])).sum();
    }
    p
}

/// Even- and odd-sub-block lane accumulators (see the module header).
type Acc = [[f32; 8]; 2];

/// `reduce8(acc_e + acc_o)`.
fn reduce_pair(acc: &Acc) -> f32 {
    let sum: [f32; 8] = std::array::from_fn(|l| acc[0][l] + acc[1][l]);
    reduce8(&sum)
}

/// `acc[l] = fma(s_lo, P[l], acc[l])` for lanes 0–3, `s_hi` for lanes 4–7.
#[inline]
fn fma_lanes(acc: &mut [f32; 8], s_lo: f32, s_hi: f32, p: &[i32; 8]) {
    for (l, (a, &v)) in acc.iter_mut().zip(p).enumerate() {
        let s = if l < 4 { s_lo } else { s_hi };
        *a = s.mul_add(v as f32, *a);
    }
}

/// Q4_K / Q5_K reference: `blk(k)` gives super-block `k`'s (d, dmin, scales, quants).
fn dot_asym_ref(
    n_super: usize,
    blk: impl Fn(usize) -> (f32, f32, [u8; 12], [u8; 256]),
    a: &[BlockA8],
) -> f32 {
    let mut acc: Acc = [[0f32; 8]; 2];
    let mut macc = [0f32; 8];
    for (k, ag) in a.iter().enumerate().take(n_super) {
        let (d, dmin, scales, q) = blk(k);
        let (sc, m) = unpack_k4_scales(&scales);
        let w: Vec<i32> = q.iter().map(|&v| i32::from(v)).collect();
        for j in 0..8 {
            let s = (d * f32::from(sc[j])) * ag.d[j];
            let p = lane_partials(&w[j * SUB..(j + 1) * SUB], &ag.qs[j * SUB..(j + 1) * SUB]);
            fma_lanes(&mut acc[j % 2], s, s, &p);
        }
        for j in 0..8 {
            let mm = (dmin * f32::from(m[j])) * ag.d[j];
            macc[j] = mm.mul_add(ag.sum[j] as f32, macc[j]);
        }
    }
    reduce_pair(&acc) - reduce8(&macc)
}

/// Q4_K · A8, scalar reference.
pub fn dot_q4_k_ref(x: &[BlockQ4K], a: &[BlockA8]) -> f32 {
    let blk = |k: usize| {
        let b = &x[k];
        (b.d.to_f32(), b.dmin.to_f32(), b.scales, b.quants())
    };
    dot_asym_ref(x.len(), blk, a)
}

/// Q5_K · A8, scalar reference.
pub fn dot_q5_k_ref(x: &[BlockQ5K], a: &[BlockA8]) -> f32 {
    let blk = |k: usize| {
        let b = &x[k];
        (b.d.to_f32(), b.dmin.to_f32(), b.scales, b.quants())
    };
    dot_asym_ref(x.len(), blk, a)
}

/// Q6_K · A8, scalar reference.
pub fn dot_q6_k_ref(x: &[BlockQ6K], a: &[BlockA8]) -> f32 {
    let mut acc: Acc = [[0f32; 8]; 2];
    for (b, ag) in x.iter().zip(a) {
        let d = b.d.to_f32();
        let w: Vec<i32> = b.quants().iter().map(|&v| i32::from(v) - 32).collect();
        for j in 0..8 {
            let (o, aq) = (j * SUB, &ag.qs[j * SUB..(j + 1) * SUB]);
            let s_lo = (d * f32::from(b.scales[2 * j])) * ag.d[j];
            let s_hi = (d * f32::from(b.scales[2 * j + 1])) * ag.d[j];
            fma_lanes(
                &mut acc[j % 2],
                s_lo,
                s_hi,
                &lane_partials(&w[o..o + 32], aq),
            );
        }
    }
    reduce_pair(&acc)
}

/// The 32-value block formats: block `i` pairs with sub-block `i % 8` of group `i / 8`.
fn dot_blocks32_ref(nb: usize, blk: impl Fn(usize) -> (f32, [i32; 32]), a: &[BlockA8]) -> f32 {
    let mut acc: Acc = [[0f32; 8]; 2];
    for i in 0..nb {
        let (ag, j) = (&a[i / 8], i % 8);
        let (dw, w) = blk(i);
        let p = lane_partials(&w, &ag.qs[j * SUB..(j + 1) * SUB]);
        let s = dw * ag.d[j];
        fma_lanes(&mut acc[j % 2], s, s, &p);
    }
    reduce_pair(&acc)
}

/// Q8_0 · A8, scalar reference.
pub fn dot_q8_0_ref(x: &[BlockQ8_0], a: &[BlockA8]) -> f32 {
    dot_blocks32_ref(x.len(), |i| (x[i].d.to_f32(), x[i].qs.map(i32::from)), a)
}

/// Q5_0 · A8, scalar reference.
pub fn dot_q5_0_ref(x: &[BlockQ5_0], a: &[BlockA8]) -> f32 {
    dot_blocks32_ref(
        x.len(),
        |i| (x[i].d.to_f32(), x[i].quants().map(|q| i32::from(q) - 16)),
        a,
    )
}

pub use crate::a8_dispatch::{
    dot, dot_at, matmul_rows, matmul_rows_at, matmul_rows_shaped, supports, TileShape,
};
pub use crate::a8_unpack::{unpack_row, UnpackedGroup8};

#[cfg(test)]
#[path = "a8_tests.rs"]
mod tests;
