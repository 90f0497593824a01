//! Q8_1: 32 values per block, f16 scale, f16 sum, i8 quants — the activation format of
//! ggml-cuda's quantized matrix-vector products (MMVQ).
//!
//! Block layout (36 bytes, 2-byte aligned):
//! | offset | size | field | meaning |
//! |---|---|---|---|
//! | 0 | 2 | `d` | f16 scale |
//! | 2 | 2 | `s` | f16 sum (see below) |
//! | 4 | 32 | `qs` | i8 quants; value `i` is `d * qs[i]` |
//!
//! Quantize ([`quantize_row`]): ggml-cuda's `quantize_q8_1` kernel, one warp lane per value,
//! evaluated with IEEE arithmetic: `amax` = max |x| (order-free), `d = amax / 127`,
//! `q = amax == 0 ? 0 : roundf(x / d)` (ties away from zero), and `s` = the **sum of the
//! unquantized inputs** reduced by the warp butterfly (`v[i] += v[i ^ o]` for
//! `o = 16, 8, 4, 2, 1`), with `d` and `s` stored as f16 (nearest-even). ggml's *CPU* Q8_1
//! stores `s = d · Σ q` instead; we follow CUDA. Verified on the H200 (nvcc 13.0, sm_90):
//! the same kernel compiled **without** fast math gives these bytes exactly
//! (`tests/golden/q8_1_cuda.json`).
//!
//! ggml-cuda itself is built with `-use_fast_math`: `amax / 127.0f` becomes
//! `amax * fl(1/127)` and `x / d` becomes `x * MUFU.RCP(d)`. [`quantize_row_fast_math`]
//! models that with a correctly rounded reciprocal. MUFU.RCP is not correctly rounded (it is
//! one ulp off for 1108522 of the 2^23 mantissas, measured), so the model is exact except
//! when that ulp moves `x · rcp` across a rounding boundary; it matched the H200 on every
//! probe value, while the IEEE version differs there on 1543 of 32768 exact-tie values
//! (and on none of 131072 random ones). Flush-to-zero is not modelled (|x| < 2^-126).

use bytemuck::{Pod, Zeroable};
use half::f16;

/// Elements per block.
pub const QK8_1: usize = 32;

/// One Q8_1 block.
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ8_1 {
    pub d: f16,
    pub s: f16,
    pub qs: [i8; QK8_1],
}

const _: () = assert!(std::mem::size_of::<BlockQ8_1>() == 36);

/// Dequantize to f32 (`q * d`). Panics unless `y.len() == x.len() * 32`.
pub fn dequantize_row(x: &[BlockQ8_1], y: &mut [f32]) {
    assert_eq!(
        y.len(),
        x.len() * QK8_1,
        "q8_1 dequantize_row: length mismatch"
    );
    for (b, out) in x.iter().zip(y.chunks_exact_mut(QK8_1)) {
        let d = b.d.to_f32();
        for (o, q) in out.iter_mut().zip(&b.qs) {
            *o = f32::from(*q) * d;
        }
    }
}

/// Dequantize to the exact values in f64. Panics unless `y.len() == x.len() * 32`.
pub fn dequantize_row_f64(x: &[BlockQ8_1], y: &mut [f64]) {
    assert_eq!(
        y.len(),
        x.len() * QK8_1,
        "q8_1 dequantize_row_f64: length mismatch"
    );
    for (b, out) in x.iter().zip(y.chunks_exact_mut(QK8_1)) {
        let d = b.d.to_f64();
        for (o, q) in out.iter_mut().zip(&b.qs) {
            *o = f64::from(*q) * d;
        }
    }
}

/// The warp butterfly sum of 32 floats as ggml-cuda's `warp_reduce_sum` computes it (every
/// lane ends with the same value because f32 addition is commutative).
#[inline]
pub fn warp_sum(x: &[f32; 32]) -> f32 {
    let mut v = *x;
    let mut o = 16;
    while o > 0 {
        let prev = v;
        for (i, e) in v.iter_mut().enumerate() {
            *e = prev[i] + prev[i ^ o];
        }
        o >>= 1;
    }
    v[0]
}

/// Quantize as ggml-cuda's `quantize_q8_1` kernel does (IEEE division). Panics unless
/// `x.len() == y.len() * 32`.
pub fn quantize_row(x: &[f32], y: &mut [BlockQ8_1]) {
    assert_eq!(
        x.len(),
        y.len() * QK8_1,
        "q8_1 quantize_row: length mismatch"
    );
    for (b, xs) in y.iter_mut().zip(x.chunks_exact(QK8_1)) {
        let mut lanes = [0f32; 32];
        lanes.copy_from_slice(xs);
        let amax = xs.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        for (q, &v) in b.qs.iter_mut().zip(xs) {
            *q = if amax == 0.0 {
                0
            } else {
                (v / d).round() as i8
            };
        }
        b.d = f16::from_f32(d);
        b.s = f16::from_f32(warp_sum(&lanes));
    }
}

/// Model of ggml-cuda's `quantize_q8_1` as built with `-use_fast_math` (see the module
/// header for where it can differ from the device). Panics unless `x.len() == y.len() * 32`.
pub fn quantize_row_fast_math(x: &[f32], y: &mut [BlockQ8_1]) {
    assert_eq!(
        x.len(),
        y.len() * QK8_1,
        "q8_1 quantize_row_fast_math: length mismatch"
    );
    const INV127: f32 = 1.0 / 127.0;
    for (b, xs) in y.iter_mut().zip(x.chunks_exact(QK8_1)) {
        let mut lanes = [0f32; 32];
        lanes.copy_from_slice(xs);
        let amax = xs.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = amax * INV127;
        let r = 1.0 / d;
        for (q, &v) in b.qs.iter_mut().zip(xs) {
            *q = if amax == 0.0 {
                0
            } else {
                (v * r).round() as i8
            };
        }
        b.d = f16::from_f32(d);
        b.s = f16::from_f32(warp_sum(&lanes));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        let mut x = [0f32; 32];
        x[0] = 127.0;
        x[1] = 0.5;
        x[2] = -2.5;
        x[3] = 1.0;
        let mut y = [BlockQ8_1::zeroed(); 1];
        quantize_row(&x, &mut y);
        assert_eq!(y[0].d.to_f32(), 1.0);
        assert_eq!(&y[0].qs[..4], &[127, 1, -3, 1]);
        assert_eq!(y[0].s.to_f32(), 127.0 + 0.5 - 2.5 + 1.0);
        quantize_row(&[0f32; 32], &mut y);
        assert_eq!(y[0], BlockQ8_1::zeroed());
    }

    #[test]
    fn warp_sum_order() {
        // Sum where order matters: 1e8 cancels only in the butterfly's pairing.
        let mut x = [0f32; 32];
        x[0] = 1e8;
        x[16] = -1e8;
        x[1] = 1.0;
        assert_eq!(warp_sum(&x), 1.0);
        let mut y = [1.0f32; 32];
        y[5] = 0.25;
        assert_eq!(warp_sum(&y), 31.25);
    }
}
