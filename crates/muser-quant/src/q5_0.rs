//! Q5_0: 32 weights per block, one f16 scale, 5-bit quants with an implicit offset of 16.
//!
//! Block layout (22 bytes, 2-byte aligned):
//! | offset | size | field | meaning |
//! |---|---|---|---|
//! | 0 | 2 | `d` | f16 scale |
//! | 2 | 4 | `qh` | bit `j` of the little-endian u32 is bit 4 of quant `j` |
//! | 6 | 16 | `qs` | low nibble of byte `j` = quant `j`, high nibble = quant `j + 16` (low 4 bits) |
//!
//! Value `j` is `d * (q_j - 16)` with `q_j` in `0..=31`.
//!
//! Dequantize: `(q - 16) as f32 * d` (matches gguf-py bit for bit).
//!
//! Quantize: ggml's `quantize_row_q5_0_ref`, which gguf-py reproduces bit for bit: take the
//! element of largest magnitude `max` (first one on ties), `d = max / -16`,
//! `id = d != 0 ? 1/d : 0`, `q = min(31, trunc(x * id + 16.5))`, `d` stored as f16. The
//! extreme element maps to `q = 0` (value `-16 d`), using the asymmetric range fully.
//!
//! Dot product (Q5_0·Q8_0): per block the exact `isum = Σ (q_j - 16)·y.qs[j]`, then
//! `acc = acc + (d_x * d_y) * (isum as f32)` block by block (ggml's generic order). The AVX2
//! kernel computes the integer sums in SIMD and the float steps in the same order:
//! bit-identical.

use bytemuck::{Pod, Zeroable};
use half::f16;

use crate::q8_0::{accumulate, BlockQ8_0};
use crate::simd::{self, SimdLevel};

/// Elements per block.
pub const QK5_0: usize = 32;

/// One Q5_0 block.
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ5_0 {
    pub d: f16,
    pub qh: [u8; 4],
    pub qs: [u8; QK5_0 / 2],
}

const _: () = assert!(std::mem::size_of::<BlockQ5_0>() == 22);

impl BlockQ5_0 {
    /// The 32 quants `q_j` in `0..=31` (before the -16 offset).
    #[inline]
    pub fn quants(&self) -> [u8; QK5_0] {
        let qh = u32::from_le_bytes(self.qh);
        let mut q = [0u8; QK5_0];
        for j in 0..16 {
            q[j] = (self.qs[j] & 0x0f) | ((((qh >> j) & 1) as u8) << 4);
            q[j + 16] = (self.qs[j] >> 4) | ((((qh >> (j + 16)) & 1) as u8) << 4);
        }
        q
    }
}

/// Dequantize to f32. Panics unless `y.len() == x.len() * 32`.
pub fn dequantize_row(x: &[BlockQ5_0], y: &mut [f32]) {
    assert_eq!(
        y.len(),
        x.len() * QK5_0,
        "q5_0 dequantize_row: length mismatch"
    );
    for (b, out) in x.iter().zip(y.chunks_exact_mut(QK5_0)) {
        let d = b.d.to_f32();
        for (o, q) in out.iter_mut().zip(b.quants()) {
            *o = (i32::from(q) - 16) as f32 * d;
        }
    }
}

/// Dequantize to the exact values in f64. Panics unless `y.len() == x.len() * 32`.
pub fn dequantize_row_f64(x: &[BlockQ5_0], y: &mut [f64]) {
    assert_eq!(
        y.len(),
        x.len() * QK5_0,
        "q5_0 dequantize_row_f64: length mismatch"
    );
    for (b, out) in x.iter().zip(y.chunks_exact_mut(QK5_0)) {
        let d = b.d.to_f64();
        for (o, q) in out.iter_mut().zip(b.quants()) {
            *o = f64::from(i32::from(q) - 16) * d;
        }
    }
}

/// Quantize like ggml's `quantize_row_q5_0_ref` (bit-exact). Panics unless
/// `x.len() == y.len() * 32`.
pub fn quantize_row(x: &[f32], y: &mut [BlockQ5_0]) {
    assert_eq!(
        x.len(),
        y.len() * QK5_0,
        "q5_0 quantize_row: length mismatch"
    );
    for (b, xs) in y.iter_mut().zip(x.chunks_exact(QK5_0)) {
        let mut amax = 0f32;
        let mut max = 0f32;
        for &v in xs {
            if amax < v.abs() {
                amax = v.abs();
                max = v;
            }
        }
        let d = max / -16.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        b.d = f16::from_f32(d);
        let q = |v: f32| ((v * id + 16.5) as i32).clamp(0, 31) as u32;
        let mut qh = 0u32;
        for j in 0..16 {
            let (q0, q1) = (q(xs[j]), q(xs[j + 16]));
            b.qs[j] = ((q0 & 0x0f) | ((q1 & 0x0f) << 4)) as u8;
            qh |= ((q0 >> 4) & 1) << j;
            qh |= ((q1 >> 4) & 1) << (j + 16);
        }
        b.qh = qh.to_le_bytes();
    }
}

/// Scalar reference Q5_0·Q8_0. Panics if the block counts differ.
pub fn vec_dot_ref(x: &[BlockQ5_0], y: &[BlockQ8_0]) -> f32 {
    assert_eq!(x.len(), y.len(), "q5_0 vec_dot: block count mismatch");
    let mut acc = 0f32;
    for (a, b) in x.iter().zip(y) {
        let isum: i32 = a
            .quants()
            .iter()
            .zip(&b.qs)
            .map(|(q, v)| (i32::from(*q) - 16) * i32::from(*v))
            .sum();
        acc = accumulate(acc, a.d.to_f32(), b.d.to_f32(), isum);
    }
    acc
}

/// Q5_0·Q8_0 at an explicit SIMD level. Panics if the block counts differ or the level is
/// not available on this CPU.
pub fn vec_dot_at(level: SimdLevel, x: &[BlockQ5_0], y: &[BlockQ8_0]) -> f32 {
    assert_eq!(x.len(), y.len(), "q5_0 vec_dot: block count mismatch");
    match level {
        SimdLevel::Scalar => vec_dot_ref(x, y),
        SimdLevel::Avx2 | SimdLevel::Avx512 | SimdLevel::Avx512Vnni => {
            simd::require(level);
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `require` checked AVX2/FMA/F16C; block counts are equal.
            unsafe {
                avx2::vec_dot(x, y)
            }
            #[cfg(not(target_arch = "x86_64"))]
            unreachable!()
        }
    }
}

/// Q5_0·Q8_0 at the process-wide SIMD level.
pub fn vec_dot(x: &[BlockQ5_0], y: &[BlockQ8_0]) -> f32 {
    vec_dot_at(simd::simd_level(), x, y)
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::BlockQ5_0;
    use crate::avx2::{block_steps_8, bytes_from_bits_32, f16_to_f32, hsum_i32_8, reduce_i32_8x8};
    use crate::q8_0::{accumulate, BlockQ8_0};
    use std::arch::x86_64::*;

    /// Eight i32 partial sums of one block pair's integer dot product.
    ///
    /// # Safety
    /// AVX2 must be available.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn block_partial(x: &BlockQ5_0, y: &BlockQ8_0) -> __m256i {
        let m4 = _mm_set1_epi8(0x0f);
        // SAFETY: `qs` is 16 bytes, `y.qs` 32 bytes; unaligned loads.
        let qs = _mm_loadu_si128(x.qs.as_ptr() as *const __m128i);
        let lo = _mm_and_si128(qs, m4);
        let hi = _mm_and_si128(_mm_srli_epi16::<4>(qs), m4);
        let q4 = _mm256_set_m128i(hi, lo);
        let hb = _mm256_and_si256(
            bytes_from_bits_32(u32::from_le_bytes(x.qh)),
            _mm256_set1_epi8(0x10),
        );
        let q = _mm256_or_si256(q4, hb); // 0..=31
        let yv = _mm256_loadu_si256(y.qs.as_ptr() as *const __m256i);
        // Σ q·y − 16·Σ y per pair, in i16 (|.| <= 31·128·2 + 16·256): exact.
        let p = _mm256_maddubs_epi16(q, yv);
        let off = _mm256_maddubs_epi16(_mm256_set1_epi8(16), yv);
        _mm256_madd_epi16(_mm256_sub_epi16(p, off), _mm256_set1_epi16(1))
    }

    /// # Safety
    /// AVX2/FMA/F16C must be available and `x.len() == y.len()`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn vec_dot(x: &[BlockQ5_0], y: &[BlockQ8_0]) -> f32 {
        let mut acc = 0f32;
        let mut xc = x.chunks_exact(8);
        let mut yc = y.chunks_exact(8);
        for (xs, ys) in (&mut xc).zip(&mut yc) {
            let parts: [__m256i; 8] = std::array::from_fn(|b| block_partial(&xs[b], &ys[b]));
            let dx: [u16; 8] = std::array::from_fn(|b| xs[b].d.to_bits());
            let dy: [u16; 8] = std::array::from_fn(|b| ys[b].d.to_bits());
            acc = block_steps_8(acc, &dx, &dy, reduce_i32_8x8(&parts));
        }
        for (a, b) in xc.remainder().iter().zip(yc.remainder()) {
            let isum = hsum_i32_8(block_partial(a, b));
            acc = accumulate(acc, f16_to_f32(a.d), f16_to_f32(b.d), isum);
        }
        acc
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simd::avx2_available;
    use proptest::prelude::*;

    #[test]
    fn quantize_known_block() {
        let mut x = [0f32; 32];
        x[0] = -16.0; // max magnitude, negative: d = 1
        x[1] = 15.0;
        x[2] = 3.4;
        x[17] = -2.6;
        let mut y = [BlockQ5_0::zeroed(); 1];
        quantize_row(&x, &mut y);
        assert_eq!(y[0].d.to_f32(), 1.0);
        let mut out = [0f32; 32];
        dequantize_row(&y, &mut out);
        assert_eq!(out[0], -16.0);
        assert_eq!(out[1], 15.0);
        assert_eq!(out[2], 3.0);
        assert_eq!(out[17], -3.0);
        assert_eq!(out[5], 0.0);
    }

    #[test]
    fn round_trip_gaussian() {
        let x = crate::testutil::gaussian(6, 32 * 512);
        let mut q = vec![BlockQ5_0::zeroed(); 512];
        quantize_row(&x, &mut q);
        let mut y = vec![0f32; x.len()];
        dequantize_row(&q, &mut y);
        // ggml's algorithm on N(0,1): 0.0427 measured on 2^22 values.
        let e = crate::testutil::rel_rms(&x, &y);
        assert!(e < 0.044, "rel rms {e}");
    }

    proptest! {
        #[test]
        fn avx2_bit_identical(raw in prop::collection::vec(any::<u8>(), 22 * 13),
                              yq in prop::collection::vec(-127i8..=127, 32 * 13),
                              d in prop::collection::vec((-2.0f32..2.0, -2.0f32..2.0), 13)) {
            let x: Vec<BlockQ5_0> = raw.chunks(22).zip(&d).map(|(r, d)| {
                let mut b: BlockQ5_0 = bytemuck::pod_read_unaligned(r);
                b.d = f16::from_f32(d.0);
                b
            }).collect();
            let y: Vec<BlockQ8_0> = yq.chunks(32).zip(&d).map(|(q, d)| {
                let mut b = BlockQ8_0::zeroed();
                b.d = f16::from_f32(d.1);
                b.qs.copy_from_slice(q);
                b
            }).collect();
            let r = vec_dot_ref(&x, &y);
            if avx2_available() {
                prop_assert_eq!(vec_dot_at(SimdLevel::Avx2, &x, &y).to_bits(), r.to_bits());
            }
            // Against the dequantized float dot (f64).
            let mut xf = vec![0f64; x.len() * 32];
            let mut yf = vec![0f64; y.len() * 32];
            dequantize_row_f64(&x, &mut xf);
            crate::q8_0::dequantize_row_f64(&y, &mut yf);
            let exact: f64 = xf.iter().zip(&yf).map(|(a, b)| a * b).sum();
            let mag: f64 = xf.iter().zip(&yf).map(|(a, b)| (a * b).abs()).sum();
            prop_assert!((f64::from(r) - exact).abs() <= 1e-5 * mag + 1e-6);
        }
    }
}
