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
//! Dot products (the reference; the SIMD kernels in `a16_avx2` are bit-identical to it): eight
//! f32 lane accumulators, one per sub-block position `j` of a group. For each sub-block the
//! integer sum `isum = Σ w_q · a_q` is exact (i32, it always fits), and the lane update is, with
//! every operation rounded to f32 in this order and no fused multiply-add:
//! - Q4_K / Q5_K: `acc[j] += da * ((d·sc_j) * isum − (dmin·m_j) * asum)`;
//! - Q6_K (two 16-value halves `lo`, `hi` with signed quants `q − 32`):
//!   `acc[j] += da * (d * (sc_lo * isum_lo + sc_hi * isum_hi))`;
//! - Q8_0 / Q5_0 (block `b` of 32, lane `j = b % 8`, signed quants, Q5_0 `q − 16`):
//!   `acc[j] += da * (dw * isum)`.
//!
//! Finally `((acc0 + acc4) + (acc2 + acc6)) + ((acc1 + acc5) + (acc3 + acc7))`.
//! The result depends only on the two rows: never on threads, batching or the CPU's SIMD level.

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
    if x.len() % SUB != 0 || y.len() != n_groups(x.len()) {
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

#[inline]
fn isum(w: &[i32], a: &[i16]) -> i32 {
    w.iter().zip(a).map(|(&w, &a)| w * i32::from(a)).sum()
}

/// Q4_K (or Q5_K, via `quants`) · A16, reference. Both rows span `x.len()` super-blocks.
fn dot_asym_ref(
    n_super: usize,
    blk: impl Fn(usize) -> (f32, f32, [u8; 12], [u8; 256]),
    a: &[BlockA16],
) -> f32 {
    let mut acc = [0f32; 8];
    for (k, ag) in a.iter().enumerate().take(n_super) {
        let (d, dmin, scales, q) = blk(k);
        let (sc, m) = unpack_k4_scales(&scales);
        for j in 0..8 {
            let w: Vec<i32> = q[j * SUB..(j + 1) * SUB]
                .iter()
                .map(|&v| i32::from(v))
                .collect();
            let is = isum(&w, &ag.qs[j * SUB..(j + 1) * SUB]) as f32;
            let dsc = d * f32::from(sc[j]);
            let dm = dmin * f32::from(m[j]);
            acc[j] += ag.d[j] * (dsc * is - dm * ag.sum[j] as f32);
        }
    }
    reduce8(&acc)
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
    let mut acc = [0f32; 8];
    for (b, ag) in x.iter().zip(a) {
        let d = b.d.to_f32();
        let q: Vec<i32> = b.quants().iter().map(|&v| i32::from(v) - 32).collect();
        for j in 0..8 {
            let lo = isum(&q[j * SUB..j * SUB + 16], &ag.qs[j * SUB..j * SUB + 16]) as f32;
            let hi = isum(
                &q[j * SUB + 16..(j + 1) * SUB],
                &ag.qs[j * SUB + 16..(j + 1) * SUB],
            ) as f32;
            let s_lo = f32::from(b.scales[2 * j]);
            let s_hi = f32::from(b.scales[2 * j + 1]);
            acc[j] += ag.d[j] * (d * (s_lo * lo + s_hi * hi));
        }
    }
    reduce8(&acc)
}

/// Q8_0 · A16, scalar reference.
pub fn dot_q8_0_ref(x: &[BlockQ8_0], a: &[BlockA16]) -> f32 {
    let mut acc = [0f32; 8];
    for (bi, b) in x.iter().enumerate() {
        let (ag, j) = (&a[bi / 8], bi % 8);
        let w: Vec<i32> = b.qs.iter().map(|&v| i32::from(v)).collect();
        let is = isum(&w, &ag.qs[j * SUB..(j + 1) * SUB]) as f32;
        acc[j] += ag.d[j] * (b.d.to_f32() * is);
    }
    reduce8(&acc)
}

/// Q5_0 · A16, scalar reference.
pub fn dot_q5_0_ref(x: &[BlockQ5_0], a: &[BlockA16]) -> f32 {
    let mut acc = [0f32; 8];
    for (bi, b) in x.iter().enumerate() {
        let (ag, j) = (&a[bi / 8], bi % 8);
        let w: Vec<i32> = b.quants().iter().map(|&v| i32::from(v) - 16).collect();
        let is = isum(&w, &ag.qs[j * SUB..(j + 1) * SUB]) as f32;
        acc[j] += ag.d[j] * (b.d.to_f32() * is);
    }
    reduce8(&acc)
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

/// Dot product of one weight row (`w`, whole blocks of `ty`) with an A16 row, at SIMD `level`.
/// The result is bit-identical at every level.
pub fn dot_at(level: SimdLevel, ty: GgmlType, w: &[u8], a: &[BlockA16]) -> Result<f32, QuantError> {
    if !supports(ty) {
        return Err(QuantError::Unsupported { ty, op: "A16 dot" });
    }
    let ts = ty.type_size();
    if w.len() % ts != 0 {
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
    #[cfg(target_arch = "x86_64")]
    if level == SimdLevel::Avx2 {
        // SAFETY: `SimdLevel::Avx2` is only ever selected after `is_x86_feature_detected!("avx2")`
        // (see `simd`); block and group counts were checked above.
        return Ok(unsafe {
            match ty {
                GgmlType::Q4_K => crate::a16_avx2::dot_q4_k(cast_blocks(ty, w)?, a),
                GgmlType::Q5_K => crate::a16_avx2::dot_q5_k(cast_blocks(ty, w)?, a),
                GgmlType::Q6_K => crate::a16_avx2::dot_q6_k(cast_blocks(ty, w)?, a),
                GgmlType::Q8_0 => crate::a16_avx2::dot_q8_0(cast_blocks(ty, w)?, a),
                _ => crate::a16_avx2::dot_q5_0(cast_blocks(ty, w)?, a),
            }
        });
    }
    let _ = level;
    Ok(match ty {
        GgmlType::Q4_K => dot_q4_k_ref(cast_blocks(ty, w)?, a),
        GgmlType::Q5_K => dot_q5_k_ref(cast_blocks(ty, w)?, a),
        GgmlType::Q6_K => dot_q6_k_ref(cast_blocks(ty, w)?, a),
        GgmlType::Q8_0 => dot_q8_0_ref(cast_blocks(ty, w)?, a),
        _ => dot_q5_0_ref(cast_blocks(ty, w)?, a),
    })
}

/// [`dot_at`] at the process-wide SIMD level.
pub fn dot(ty: GgmlType, w: &[u8], a: &[BlockA16]) -> Result<f32, QuantError> {
    dot_at(crate::simd::simd_level(), ty, w, a)
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
                let v = dot_at(SimdLevel::Avx2, ty, &w, &a).expect("avx2");
                assert_eq!(r.to_bits(), v.to_bits(), "{ty} n={n}: {r} vs {v}");
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
