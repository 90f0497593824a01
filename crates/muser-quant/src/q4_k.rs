//! Q4_K: 256 weights per super-block in 8 sub-blocks of 32; 4-bit quants with a 6-bit scale
//! and a 6-bit min per sub-block, and f16 super-block scales for both.
//!
//! Block layout (144 bytes, 2-byte aligned):
//! | offset | size | field | meaning |
//! |---|---|---|---|
//! | 0 | 2 | `d` | f16 scale of the sub-block scales |
//! | 2 | 2 | `dmin` | f16 scale of the sub-block mins |
//! | 4 | 12 | `scales` | 8 scales + 8 mins, 6 bits each (see `common::unpack_k4_scales`) |
//! | 16 | 128 | `qs` | quants: byte `32k + l` holds element `64k + l` (low nibble) and `64k + 32 + l` (high nibble) |
//!
//! Value `i` (sub-block `j = i / 32`): `d·sc[j]·q[i] − dmin·m[j]`.
//!
//! Dequantize (f32): `(d * sc) * q − (dmin * m)` (gguf-py's order). Every product is exact
//! in f32 (at most 21 significant bits), so the one rounding is the final subtraction: the
//! result is the correctly rounded exact value, whatever the order or FMA use (ggml's C
//! `d1 * q - m1` agrees). Matched bit for bit against gguf-py.
//!
//! Quantize: see [`crate::kquant`] (least-squares sub-block fit, 6-bit scales from rounded-up
//! f16 super-scales, nearest-level quants). It is not ggml's iterative search.
//!
//! Dot product (Q4_K·Q8_K), per super-block, all integer parts exact:
//! `isum = Σ_j sc[j]·Σ_{i∈j} q[i]·y.qs[i]`, `msum = Σ_{g<16} y.bsums[g]·m[g/2]`, then
//! `acc = acc + ((d·y.d)·isum − (dmin·y.d)·msum)` in f32, super-block by super-block. The
//! AVX2 kernel computes `isum`/`msum` in SIMD and the float step in the same scalar order:
//! bit-identical. Relies on the Q8_K invariant `bsums[g] = Σ qs[16g..16g+16]`.

use bytemuck::{Pod, Zeroable};
use half::f16;

use crate::common::{pack_k4_scales, unpack_k4_scales};
use crate::kquant::quantize_asym;
use crate::q8_k::BlockQ8K;
use crate::simd::{self, SimdLevel};
use crate::QK_K;

/// One Q4_K super-block.
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ4K {
    pub d: f16,
    pub dmin: f16,
    pub scales: [u8; 12],
    pub qs: [u8; QK_K / 2],
}

const _: () = assert!(std::mem::size_of::<BlockQ4K>() == 144);

impl BlockQ4K {
    /// The 256 quants in element order (each `0..=15`).
    #[inline]
    pub fn quants(&self) -> [u8; QK_K] {
        let mut q = [0u8; QK_K];
        for k in 0..4 {
            for l in 0..32 {
                let b = self.qs[32 * k + l];
                q[64 * k + l] = b & 0x0f;
                q[64 * k + 32 + l] = b >> 4;
            }
        }
        q
    }

    /// The 8 sub-blocks' 6-bit scales and mins (`sc[j]`, `m[j]`: value `d·sc[j]·q − dmin·m[j]`).
    #[inline]
    pub fn scales_mins(&self) -> ([u8; 8], [u8; 8]) {
        unpack_k4_scales(&self.scales)
    }
}

/// Dequantize to f32 (gguf-py's float order). Panics unless `y.len() == x.len() * 256`.
pub fn dequantize_row(x: &[BlockQ4K], y: &mut [f32]) {
    assert_eq!(
        y.len(),
        x.len() * QK_K,
        "q4_K dequantize_row: length mismatch"
    );
    for (b, out) in x.iter().zip(y.chunks_exact_mut(QK_K)) {
        let (sc, m) = unpack_k4_scales(&b.scales);
        let (d, dmin) = (b.d.to_f32(), b.dmin.to_f32());
        let q = b.quants();
        for j in 0..8 {
            let d1 = d * f32::from(sc[j]);
            let m1 = dmin * f32::from(m[j]);
            for i in 32 * j..32 * j + 32 {
                out[i] = d1 * f32::from(q[i]) - m1;
            }
        }
    }
}

/// Dequantize to the exact values in f64 (every product and the difference are exact in
/// f64). Panics unless `y.len() == x.len() * 256`.
pub fn dequantize_row_f64(x: &[BlockQ4K], y: &mut [f64]) {
    assert_eq!(
        y.len(),
        x.len() * QK_K,
        "q4_K dequantize_row_f64: length mismatch"
    );
    for (b, out) in x.iter().zip(y.chunks_exact_mut(QK_K)) {
        let (sc, m) = unpack_k4_scales(&b.scales);
        let (d, dmin) = (b.d.to_f64(), b.dmin.to_f64());
        let q = b.quants();
        for j in 0..8 {
            let d1 = d * f64::from(sc[j]);
            let m1 = dmin * f64::from(m[j]);
            for i in 32 * j..32 * j + 32 {
                out[i] = d1 * f64::from(q[i]) - m1;
            }
        }
    }
}

/// Quantize (algorithm in [`crate::kquant`]). Panics unless `x.len() == y.len() * 256`.
pub fn quantize_row(x: &[f32], y: &mut [BlockQ4K]) {
    assert_eq!(
        x.len(),
        y.len() * QK_K,
        "q4_K quantize_row: length mismatch"
    );
    for (b, xs) in y.iter_mut().zip(x.chunks_exact(QK_K)) {
        let s = quantize_asym(xs, 15);
        b.d = s.d;
        b.dmin = s.dmin;
        b.scales = pack_k4_scales(&s.sc, &s.m);
        for k in 0..4 {
            for l in 0..32 {
                b.qs[32 * k + l] = s.q[64 * k + l] | (s.q[64 * k + 32 + l] << 4);
            }
        }
    }
}

/// `msum = Σ_g bsums[g]·m[g/2]` (exact).
#[inline]
pub(crate) fn min_sum(m: &[u8; 8], y: &BlockQ8K) -> i32 {
    y.bsums
        .iter()
        .enumerate()
        .map(|(g, s)| i32::from(*s) * i32::from(m[g / 2]))
        .sum()
}

/// The float step shared by the scalar and SIMD paths (Q4_K and Q5_K).
#[inline(always)]
pub(crate) fn accumulate(acc: f32, d: f32, dmin: f32, yd: f32, isum: i32, msum: i32) -> f32 {
    let dd = d * yd;
    let dm = dmin * yd;
    acc + (dd * isum as f32 - dm * msum as f32)
}

/// Scalar reference Q4_K·Q8_K. Panics if the block counts differ.
pub fn vec_dot_ref(x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
    assert_eq!(x.len(), y.len(), "q4_K vec_dot: block count mismatch");
    let mut acc = 0f32;
    for (b, yb) in x.iter().zip(y) {
        let (sc, m) = unpack_k4_scales(&b.scales);
        let q = b.quants();
        let mut isum = 0i32;
        for ((s, qj), yj) in sc
            .iter()
            .zip(q.chunks_exact(32))
            .zip(yb.qs.chunks_exact(32))
        {
            let dot: i32 = qj
                .iter()
                .zip(yj)
                .map(|(a, b)| i32::from(*a) * i32::from(*b))
                .sum();
            isum += i32::from(*s) * dot;
        }
        let msum = min_sum(&m, yb);
        acc = accumulate(acc, b.d.to_f32(), b.dmin.to_f32(), yb.d, isum, msum);
    }
    acc
}

/// Q4_K·Q8_K at an explicit SIMD level. Panics if the block counts differ or the level is
/// not available on this CPU.
pub fn vec_dot_at(level: SimdLevel, x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
    assert_eq!(x.len(), y.len(), "q4_K vec_dot: block count mismatch");
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

/// Q4_K·Q8_K at the process-wide SIMD level.
pub fn vec_dot(x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
    vec_dot_at(simd::simd_level(), x, y)
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2 {
    use super::{accumulate, BlockQ4K};
    use crate::avx2::{f16_to_f32, hsum_i32_8};
    use crate::common::unpack_k4_scales;
    use crate::q8_k::BlockQ8K;
    use std::arch::x86_64::*;

    /// `Σ_g bsums[g]·m[g/2]` in SIMD (exact).
    ///
    /// # Safety
    /// AVX2 must be available.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) unsafe fn min_sum(m: &[u8; 8], y: &BlockQ8K) -> i32 {
        // SAFETY: `bsums` is 16 i16 = 32 bytes.
        let bs = _mm256_loadu_si256(y.bsums.as_ptr() as *const __m256i);
        // [m0 m1 .. m7] as i16, each duplicated: lane g holds m[g/2].
        let m8 = _mm_cvtepu8_epi16(_mm_loadl_epi64(m.as_ptr() as *const __m128i));
        let lo = _mm_unpacklo_epi16(m8, m8);
        let hi = _mm_unpackhi_epi16(m8, m8);
        hsum_i32_8(_mm256_madd_epi16(bs, _mm256_set_m128i(hi, lo)))
    }

    /// # Safety
    /// AVX2/FMA/F16C must be available and `x.len() == y.len()`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn vec_dot(x: &[BlockQ4K], y: &[BlockQ8K]) -> f32 {
        let m4 = _mm256_set1_epi8(0x0f);
        let mut acc = 0f32;
        for (b, yb) in x.iter().zip(y) {
            let (sc, m) = unpack_k4_scales(&b.scales);
            let mut iacc = _mm256_setzero_si256();
            for k in 0..4 {
                // SAFETY: 32 bytes at qs[32k], 64 bytes at y.qs[64k]; all in bounds.
                let q4 = _mm256_loadu_si256(b.qs.as_ptr().add(32 * k) as *const __m256i);
                let y0 = _mm256_loadu_si256(yb.qs.as_ptr().add(64 * k) as *const __m256i);
                let y1 = _mm256_loadu_si256(yb.qs.as_ptr().add(64 * k + 32) as *const __m256i);
                let lo = _mm256_and_si256(q4, m4);
                let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(q4), m4);
                // u4 × i8 pair sums fit i16 (<= 2·15·128); scale and widen in one madd.
                let p0 = _mm256_madd_epi16(
                    _mm256_maddubs_epi16(lo, y0),
                    _mm256_set1_epi16(i16::from(sc[2 * k])),
                );
                let p1 = _mm256_madd_epi16(
                    _mm256_maddubs_epi16(hi, y1),
                    _mm256_set1_epi16(i16::from(sc[2 * k + 1])),
                );
                iacc = _mm256_add_epi32(iacc, _mm256_add_epi32(p0, p1));
            }
            let isum = hsum_i32_8(iacc);
            let msum = min_sum(&m, yb);
            acc = accumulate(acc, f16_to_f32(b.d), f16_to_f32(b.dmin), yb.d, isum, msum);
        }
        acc
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simd::avx2_available;
    use crate::testutil::{gaussian, rel_rms, Rng};
    use proptest::prelude::*;

    fn random_blocks(rng: &mut Rng, n: usize) -> Vec<BlockQ4K> {
        (0..n)
            .map(|_| {
                let mut b: BlockQ4K = rng.pod();
                b.d = f16::from_f32(rng.f32_range(-1.0, 1.0));
                b.dmin = f16::from_f32(rng.f32_range(-1.0, 1.0));
                b
            })
            .collect()
    }

    #[test]
    fn round_trip_gaussian() {
        let x = gaussian(1, 256 * 64);
        let mut q = vec![BlockQ4K::zeroed(); 64];
        quantize_row(&x, &mut q);
        let mut y = vec![0f32; x.len()];
        dequantize_row(&q, &mut y);
        let e = rel_rms(&x, &y);
        // Q4_K on N(0,1): relative RMS error 0.0715 measured on 2^22 values (ggml's
        // reference quantizer: 0.0714); bound with margin for this 16K sample.
        assert!(e < 0.074, "rel rms {e}");
    }

    #[test]
    fn quantize_edge_inputs() {
        let mut q = [BlockQ4K::zeroed(); 1];
        let mut y = [0f32; 256];
        for fill in [0.0f32, 1.0, -1.0, 1e-30, -1e-30, 123.4, -0.001] {
            quantize_row(&[fill; 256], &mut q);
            dequantize_row(&q, &mut y);
            for v in y {
                assert!((v - fill).abs() <= fill.abs() * 0.01 + 1e-7, "{fill} {v}");
            }
        }
        // Beyond the f16 super-scale range the values saturate at 65504·63·15.
        quantize_row(&[3e9f32; 256], &mut q);
        dequantize_row(&q, &mut y);
        assert!(y.iter().all(|v| *v == 65504.0 * 63.0 * 15.0));
    }

    #[test]
    fn dot_matches_f64_of_dequantized() {
        let mut rng = Rng::new(7);
        let x = random_blocks(&mut rng, 9);
        let act = gaussian(3, 256 * 9);
        let mut yq = vec![BlockQ8K::zeroed(); 9];
        crate::q8_k::quantize_row(&act, &mut yq);
        let r = vec_dot_ref(&x, &yq);
        let mut xf = vec![0f64; 256 * 9];
        let mut yf = vec![0f64; 256 * 9];
        dequantize_row_f64(&x, &mut xf);
        crate::q8_k::dequantize_row_f64(&yq, &mut yf);
        let exact: f64 = xf.iter().zip(&yf).map(|(a, b)| a * b).sum();
        let mag: f64 = xf.iter().zip(&yf).map(|(a, b)| (a * b).abs()).sum();
        assert!((f64::from(r) - exact).abs() <= 1e-5 * mag, "{r} {exact}");
    }

    proptest! {
        #[test]
        fn avx2_bit_identical(seed in any::<u64>(), n in 0usize..6) {
            let mut rng = Rng::new(seed);
            let x = random_blocks(&mut rng, n);
            let y: Vec<BlockQ8K> = (0..n).map(|_| rng.q8k_block()).collect();
            let r = vec_dot_ref(&x, &y);
            if avx2_available() {
                prop_assert_eq!(vec_dot_at(SimdLevel::Avx2, &x, &y).to_bits(), r.to_bits());
            }
        }

        #[test]
        fn f64_dequant_agrees_with_f32(seed in any::<u64>()) {
            let mut rng = Rng::new(seed);
            let x = random_blocks(&mut rng, 2);
            let mut a = vec![0f32; 512];
            let mut b = vec![0f64; 512];
            dequantize_row(&x, &mut a);
            dequantize_row_f64(&x, &mut b);
            for (i, (u, v)) in a.iter().zip(&b).enumerate() {
                let blk = &x[i / 256];
                let scale = blk.d.to_f64().abs() * 63.0 * 15.0 + blk.dmin.to_f64().abs() * 63.0;
                prop_assert!((f64::from(*u) - v).abs() <= 4.0 * f64::from(f32::EPSILON) * scale);
            }
        }
    }
}
