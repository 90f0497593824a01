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
//! Layout (`BlockA8`, 640 bytes, 4-byte aligned): one *group* of 256 activations as eight
//! sub-blocks of 32:
//! ```text
//! offset   0: d[8]       f32  sub-block scales (value = d[j] * qs[32j + i])
//! offset  32: sum[8]     i32  Σ qs over each sub-block (for the k-quants' min terms)
//! offset  64: qs[256]    i8   quants in -127..=127, natural order
//! offset 320: qs_il[256] i8   the same quants interleaved (`il_index`) for the unpacked and
//!                             repacked tiles
//! offset 576: lcorr[16]  i32  −128 · Σ qs over each lane (half sub-block, see below): the
//!                             offset corrections of the tiles whose weights enter `vpdpbusd`
//!                             as unsigned bytes (`a8_unpack`, `a8_repack`)
//! ```
//! A row of `n` activations (`n` a multiple of 32) is `ceil(n / 256)` groups; sub-blocks past
//! the end are zero (d = 0, sum = 0, qs = 0).
//!
//! Quantization: per sub-block, `amax = max |x|`, `d = amax / 127`,
//! `q = round_ties_even(x * (127 / amax))` clamped to ±127 (all zero when `amax == 0` or
//! `amax` is not finite).
//!
//! Dot products (the references below; the SIMD tiles in `a8_avx2` and `a8_avx512` are
//! bit-identical to them). Weights `w_i` are signed integers after the format's offset, as in
//! `a16`. Per group, sixteen *lanes*: lane `L = j + 8h` is half `h` (values `16h..16h+16`) of
//! sub-block `j`, and its partial `P[L] = Σ w_i·a_i` over those sixteen values is an exact
//! integer (|P| ≤ 16·128·127 < 2^24, so `P as f32` is exact; the kernels may add the products
//! in any order). Sixteen f32 accumulators are updated once per group:
//! `acc[L] = fma(S[L], P[L], acc[L])`, with the scale `S` as in `a16` (each product rounded to
//! f32): Q8_0 / Q5_0 `dw_j · da_j` (block `8g + j`); Q4_K / Q5_K `(d · sc_j) · da_j` plus the
//! min accumulator `macc[j] = fma((dmin · m_j) · da_j, asum_j, macc[j])`; Q6_K
//! `(d · sc_{2j+h}) · da_j`. Missing sub-blocks (a row that ends inside a group) add nothing.
//!
//! Result: `reduce8(acc[0..8] + acc[8..16]) − reduce8(macc)` (the lane-wise sum first). It
//! depends only on the two rows: never on threads, batching, tile shape or the CPU's SIMD level.
//!
//! Why sixteen-value lanes: one float update per sixteen products (integer sums within a
//! half sub-block, where the scale is constant) instead of one per four; the prefill and
//! repacked tiles take the interleaved copy `qs_il`, where each 64-byte row of a group holds
//! four values of every lane, so one `vpdpbusd` chain per group fills all sixteen lanes.

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
    /// `qs` interleaved: `qs_il[il_index(i)] = qs[i]`.
    pub qs_il: [i8; GROUP],
    /// `lcorr[L]` = −128 · Σ `qs` over lane `L` (values `32(L % 8) + 16(L / 8)..+16`): a
    /// chain of products with weights offset by `+128` that starts here ends at the exact
    /// partial (offset `2^s`: start at `lcorr[L] >> (7 − s)`, exact).
    pub lcorr: [i32; 16],
}

const _: () = assert!(std::mem::size_of::<BlockA8>() == 640);

/// Where value `i` of a group (0..256) sits in the interleaved order: 64-byte row `k`, lane
/// `L` (4 bytes), byte `t`, for `i = 32(L % 8) + 16(L / 8) + 4k + t` — row `k` holds values
/// `4k..4k+4` of every half sub-block.
#[inline]
pub const fn il_index(i: usize) -> usize {
    let (j, h, k, t) = (i / 32, (i / 16) % 2, (i / 4) % 4, i % 4);
    64 * k + 4 * (j + 8 * h) + t
}

/// Fill a group's interleaved copy and lane corrections from its natural-order quants.
#[inline]
pub(crate) fn fill_interleaved(g: &mut BlockA8) {
    // `il_index` moves four-value quads whole: quad `q` lands at quad `il_index(4q) / 4`.
    for (q, quad) in g.qs.chunks_exact(4).enumerate() {
        let at = il_index(4 * q);
        g.qs_il[at..at + 4].copy_from_slice(quad);
    }
    for (l, s) in g.lcorr.iter_mut().enumerate() {
        let o = 32 * (l % 8) + 16 * (l / 8);
        *s = -128 * g.qs[o..o + 16].iter().map(|&v| i32::from(v)).sum::<i32>();
    }
}

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
    })?;
    y.iter_mut().for_each(fill_interleaved);
    Ok(())
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

/// Sixteen lane accumulators (see the module header).
type Acc = [f32; 16];

/// `reduce8(acc[0..8] + acc[8..16])`.
fn reduce_lanes(acc: &Acc) -> f32 {
    let sum: [f32; 8] = std::array::from_fn(|l| acc[l] + acc[l + 8]);
    reduce8(&sum)
}

/// One group's update: `w` and `a` the group's values (weights offset-corrected), `n_sub`
/// sub-blocks present, `scale(L)` the lane scale `S[L]`.
fn group_update(acc: &mut Acc, w: &[i32], a: &[i8], n_sub: usize, scale: impl Fn(usize) -> f32) {
    for (l, acc_l) in acc.iter_mut().enumerate() {
        let (j, h) = (l % 8, l / 8);
        if j >= n_sub {
            continue;
        }
        let o = 32 * j + 16 * h;
        let p: i32 = (o..o + 16).map(|i| w[i] * i32::from(a[i])).sum();
        *acc_l = scale(l).mul_add(p as f32, *acc_l);
    }
}

/// Q4_K / Q5_K reference: `blk(k)` gives super-block `k`'s (d, dmin, scales, quants).
fn dot_asym_ref(
    n_super: usize,
    blk: impl Fn(usize) -> (f32, f32, [u8; 12], [u8; 256]),
    a: &[BlockA8],
) -> f32 {
    let mut acc: Acc = [0f32; 16];
    let mut macc = [0f32; 8];
    for (k, ag) in a.iter().enumerate().take(n_super) {
        let (d, dmin, scales, q) = blk(k);
        let (sc, m) = unpack_k4_scales(&scales);
        let w: Vec<i32> = q.iter().map(|&v| i32::from(v)).collect();
        group_update(&mut acc, &w, &ag.qs, 8, |l| {
            (d * f32::from(sc[l % 8])) * ag.d[l % 8]
        });
        for j in 0..8 {
            let mm = (dmin * f32::from(m[j])) * ag.d[j];
            macc[j] = mm.mul_add(ag.sum[j] as f32, macc[j]);
        }
    }
    reduce_lanes(&acc) - reduce8(&macc)
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
    let mut acc: Acc = [0f32; 16];
    for (b, ag) in x.iter().zip(a) {
        let d = b.d.to_f32();
        let w: Vec<i32> = b.quants().iter().map(|&v| i32::from(v) - 32).collect();
        group_update(&mut acc, &w, &ag.qs, 8, |l| {
            let (j, h) = (l % 8, l / 8);
            (d * f32::from(b.scales[2 * j + h])) * ag.d[j]
        });
    }
    reduce_lanes(&acc)
}

/// The 32-value block formats: block `i` is sub-block `i % 8` of group `i / 8`.
fn dot_blocks32_ref(nb: usize, blk: impl Fn(usize) -> (f32, [i32; 32]), a: &[BlockA8]) -> f32 {
    let mut acc: Acc = [0f32; 16];
    for (g, ag) in a.iter().enumerate().take(nb.div_ceil(8)) {
        let n_sub = (nb - 8 * g).min(8);
        let mut w = vec![0i32; GROUP];
        let mut dw = [0f32; 8];
        for j in 0..n_sub {
            let (d, q) = blk(8 * g + j);
            dw[j] = d;
            w[32 * j..32 * j + 32].copy_from_slice(&q);
        }
        group_update(&mut acc, &w, &ag.qs, n_sub, |l| dw[l % 8] * ag.d[l % 8]);
    }
    reduce_lanes(&acc)
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
