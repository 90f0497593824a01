//! Q8_K: the activation format of the k-quant dot products (ggml's `vec_dot_type` for
//! Q4_K, Q5_K and Q6_K). 256 values per block, f32 scale, i8 quants, and the sums of each
//! group of 16 quants.
//!
//! Block layout (292 bytes, **4-byte aligned** because of the f32):
//! | offset | size | field | meaning |
//! |---|---|---|---|
//! | 0 | 4 | `d` | f32 scale |
//! | 4 | 256 | `qs` | i8 quants; value `i` is `d * qs[i]` |
//! | 260 | 32 | `bsums` | i16: `bsums[g] = Σ qs[16g..16g+16]` |
//!
//! Invariant (the dot products rely on it): `bsums` matches `qs`, and `qs` lies in
//! `-127..=127`. [`quantize_row`] guarantees both. Q8_K only lives in Muser's own activation
//! buffers (allocate them as `Vec<BlockQ8K>`), never in a GGUF file, so its 4-byte
//! alignment is never a problem for mmapped tensors.
//!
//! Quantize: exactly ggml's CPU `quantize_row_q8_K_ref` (which ggml-cpu's x86
//! `quantize_row_q8_K` calls): take the element of largest magnitude `max` (first on ties);
//! if it is 0 the block is all zero; else `iscale = -127 / max`,
//! `qs = min(127, nearest_int(iscale * x))` (ties to even), `d = 1 / iscale`. ggml leaves
//! `bsums` unwritten for an all-zero block; we write zeros.
//! (ggml's repacked AVX2 GEMV path for Q4_K quantizes activations with its own
//! `ggml_quantize_mat_q8_K_4x8`, which differs in rounding details; this is the plain one.)

use bytemuck::{Pod, Zeroable};

use crate::common::nearest_int;
use crate::QK_K;

/// One Q8_K block.
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ8K {
    pub d: f32,
    pub qs: [i8; QK_K],
    pub bsums: [i16; QK_K / 16],
}

const _: () = assert!(std::mem::size_of::<BlockQ8K>() == 292);

/// Dequantize to f32 (`d * q`). Panics unless `y.len() == x.len() * 256`.
pub fn dequantize_row(x: &[BlockQ8K], y: &mut [f32]) {
    assert_eq!(
        y.len(),
        x.len() * QK_K,
        "q8_K dequantize_row: length mismatch"
    );
    for (b, out) in x.iter().zip(y.chunks_exact_mut(QK_K)) {
        for (o, q) in out.iter_mut().zip(&b.qs) {
            *o = b.d * f32::from(*q);
        }
    }
}

/// Dequantize to the exact values in f64. Panics unless `y.len() == x.len() * 256`.
pub fn dequantize_row_f64(x: &[BlockQ8K], y: &mut [f64]) {
    assert_eq!(
        y.len(),
        x.len() * QK_K,
        "q8_K dequantize_row_f64: length mismatch"
    );
    for (b, out) in x.iter().zip(y.chunks_exact_mut(QK_K)) {
        let d = f64::from(b.d);
        for (o, q) in out.iter_mut().zip(&b.qs) {
            *o = d * f64::from(*q);
        }
    }
}

/// Quantize exactly like ggml's `quantize_row_q8_K_ref`. Panics unless
/// `x.len() == y.len() * 256`.
pub fn quantize_row(x: &[f32], y: &mut [BlockQ8K]) {
    assert_eq!(
        x.len(),
        y.len() * QK_K,
        "q8_K quantize_row: length mismatch"
    );
    for (b, xs) in y.iter_mut().zip(x.chunks_exact(QK_K)) {
        let mut amax = 0f32;
        let mut max = 0f32;
        for &v in xs {
            let ax = v.abs();
            if ax > amax {
                amax = ax;
                max = v;
            }
        }
        if amax == 0.0 {
            *b = BlockQ8K::zeroed();
            continue;
        }
        let iscale = -127.0 / max;
        for (q, &v) in b.qs.iter_mut().zip(xs) {
            *q = nearest_int(iscale * v).min(127) as i8;
        }
        for (g, s) in b.bsums.iter_mut().enumerate() {
            *s = b.qs[16 * g..16 * g + 16]
                .iter()
                .map(|q| i16::from(*q))
                .sum();
        }
        b.d = 1.0 / iscale;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{gaussian, rel_rms};

    #[test]
    fn known_values() {
        let mut x = [0f32; 256];
        x[0] = -127.0; // largest magnitude: iscale = 1
        x[1] = 0.5; // ties to even
        x[2] = 1.5;
        x[3] = 2.5;
        x[4] = -0.5;
        x[5] = 126.6;
        let mut y = [BlockQ8K::zeroed(); 1];
        quantize_row(&x, &mut y);
        assert_eq!(y[0].d, 1.0);
        assert_eq!(&y[0].qs[..6], &[-127, 0, 2, 2, 0, 127]);
        assert_eq!(y[0].bsums[0], -127 + 2 + 2 + 127);
        quantize_row(&[0f32; 256], &mut y);
        assert_eq!(y[0], BlockQ8K::zeroed());
    }

    #[test]
    fn round_trip_gaussian() {
        let x = gaussian(4, 256 * 16);
        let mut q = vec![BlockQ8K::zeroed(); 16];
        quantize_row(&x, &mut q);
        let mut y = vec![0f32; x.len()];
        dequantize_row(&q, &mut y);
        // 8-bit with one scale per 256 values: relative RMS < 0.01 on N(0,1).
        assert!(rel_rms(&x, &y) < 0.01);
        for b in &q {
            assert!(b.qs.iter().all(|v| *v >= -127));
        }
    }
}
