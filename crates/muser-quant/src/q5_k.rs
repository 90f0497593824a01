//! Q5_K: 256 weights per super-block in 8 sub-blocks of 32; 5-bit quants with a 6-bit scale
//! and a 6-bit min per sub-block, and f16 super-block scales for both.
//!
//! Block layout (176 bytes, 2-byte aligned):
//! | offset | size | field | meaning |
//! |---|---|---|---|
//! | 0 | 2 | `d` | f16 scale of the sub-block scales |
//! | 2 | 2 | `dmin` | f16 scale of the sub-block mins |
//! | 4 | 12 | `scales` | 8 scales + 8 mins, 6 bits each (same packing as Q4_K) |
//! | 16 | 32 | `qh` | bit `j` of byte `l` is bit 4 of element `32j + l` |
//! | 48 | 128 | `qs` | low 4 bits, packed as in Q4_K (byte `32k + l`: elements `64k + l`, `64k + 32 + l`) |
//!
//! Value `i` (sub-block `j = i / 32`): `d·sc[j]·q[i] − dmin·m[j]`, `q` in `0..=31`.
//!
//! Dequantize (f32): `(d * sc) * q − (dmin * m)`; the products are exact (at most 22
//! significant bits), so the result is the correctly rounded exact value. Matched bit for bit
//! against gguf-py.
//!
//! Quantize: [`crate::kquant`] with 31 levels (not ggml's iterative search).
//!
//! Dot product (Q5_K·Q8_K): the same integer decomposition and float step as Q4_K
//! (`acc = acc + ((d·y.d)·isum − (dmin·y.d)·msum)`), AVX2 bit-identical to the reference.
//! Relies on the Q8_K invariant `bsums[g] = Σ qs[16g..16g+16]`.

use bytemuck::{Pod, Zeroable};
use half::f16;

use crate::common::{pack_k4_scales, unpack_k4_scales};
use crate::kquant::quantize_asym;
use crate::q4_k::{accumulate, min_sum};
use crate::q8_k::BlockQ8K;
use crate::simd::{self, SimdLevel};
use crate::QK_K;

/// One Q5_K super-block.
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ5K {
    pub d: f16,
    pub dmin: f16,
    pub scales: [u8; 12],
    pub qh: [u8; QK_K / 8],
    pub qs: [u8; QK_K / 2],
}

const _: () = assert!(std::mem::size_of::<BlockQ5K>() == 176);

impl BlockQ5K {
    /// The 256 quants in element order (each `0..=31`).
    #[inline]
    pub fn quants(&self) -> [u8; QK_K] {
        let mut q = [0u8; QK_K];
        for k in 0..4 {
            for l in 0..32 {
                let b = self.qs[32 * k + l];
                let h = self.qh[l];
                q[64 * k + l] = (b & 0x0f) | (((h >> (2 * k)) & 1) << 4);
                q[64 * k + 32 + l] = (b >> 4) | (((h >> (2 * k + 1)) & 1) << 4);
            }
        }
        q
    }
}

/// Dequantize to f32 (gguf-py's float order). Panics unless `y.len() == x.len() * 256`.
pub fn dequantize_row(x: &[BlockQ5K], y: &mut [f32]) {
    assert_eq!(
        y.len(),
        x.len() * QK_K,
        "q5_K dequantize_row: length mismatch"
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

/// Dequantize to the exact values in f64. Panics unless `y.len() == x.len() * 256`.
pub fn dequantize_row_f64(x: &[BlockQ5K], y: &mut [f64]) {
    assert_eq!(
        y.len(),
        x.len() * QK_K,
        "q5_K dequantize_row_f64: length mismatch"
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
pub fn quantize_row(x: &[f32], y: &mut [BlockQ5K]) {
    assert_eq!(
        x.len(),
        y.len() * QK_K,
        "q5_K quantize_row: length mismatch"
    );
    for (b, xs) in y.iter_mut().zip(x.chunks_exact(QK_K)) {
        let s = quantize_asym(xs, 31);
        b.d = s.d;
        b.dmin = s.dmin;
        b.scales = pack_k4_scales(&s.sc, &s.m);
        b.qh = [0; 32];
        for k in 0..4 {
            for l in 0..32 {
                let (q0, q1) = (s.q[64 * k + l], s.q[64 * k + 32 + l]);
                b.qs[32 * k + l] = (q0 & 0x0f) | ((q1 & 0x0f) << 4);
                b.qh[l] |= ((q0 >> 4) << (2 * k)) | ((q1 >> 4) << (2 * k + 1));
            }
        }
    }
}

/// Scalar reference Q5_K·Q8_K. Panics if the block counts differ.
pub fn vec_dot_ref(x: &[BlockQ5K], y: &[BlockQ8K]) -> f32 {
    assert_eq!(x.len(), y.len(), "q5_K vec_dot: block count mismatch");
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

/// Q5_K·Q8_K at an explicit SIMD level. Panics if the block counts differ or the level is
/// not available on this CPU.
pub fn vec_dot_at(level: SimdLevel, x: &[BlockQ5K], y: &[BlockQ8K]) -> f32 {
    assert_eq!(x.len(), y.len(), "q5_K vec_dot: block count mismatch");
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

/// Q5_K·Q8_K at the process-wide SIMD level.
pub fn vec_dot(x: &[BlockQ5K], y: &[BlockQ8K]) -> f32 {
    vec_dot_at(simd::simd_level(), x, y)
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::BlockQ5K;
    use crate::avx2::{f16_to_f32, hsum_i32_8};
    use crate::common::unpack_k4_scales;
    use crate::q4_k::{accumulate, avx2::min_sum};
    use crate::q8_k::BlockQ8K;
    use std::arch::x86_64::*;

    /// # Safety
    /// AVX2/FMA/F16C must be available and `x.len() == y.len()`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn vec_dot(x: &[BlockQ5K], y: &[BlockQ8K]) -> f32 {
        let m4 = _mm256_set1_epi8(0x0f);
        let b4 = _mm256_set1_epi8(0x10);
        let mut acc = 0f32;
        for (b, yb) in x.iter().zip(y) {
            let (sc, m) = unpack_k4_scales(&b.scales);
            // SAFETY: `qh` is 32 bytes.
            let qh = _mm256_loadu_si256(b.qh.as_ptr() as *const __m256i);
            let mut iacc = _mm256_setzero_si256();
            for k in 0..4 {
                // SAFETY: 32 bytes at qs[32k], 64 bytes at y.qs[64k]; all in bounds.
                let q4 = _mm256_loadu_si256(b.qs.as_ptr().add(32 * k) as *const __m256i);
                let y0 = _mm256_loadu_si256(yb.qs.as_ptr().add(64 * k) as *const __m256i);
                let y1 = _mm256_loadu_si256(yb.qs.as_ptr().add(64 * k + 32) as *const __m256i);
                let bit0 = _mm256_set1_epi8((1u8 << (2 * k)) as i8);
                let bit1 = _mm256_set1_epi8((1u8 << (2 * k + 1)) as i8);
                let h0 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bit0), bit0), b4);
                let h1 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bit1), bit1), b4);
                let lo = _mm256_or_si256(_mm256_and_si256(q4, m4), h0);
                let hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16::<4>(q4), m4), h1);
                // u5 × i8 pair sums fit i16 (<= 2·31·128).
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

    fn random_blocks(rng: &mut Rng, n: usize) -> Vec<BlockQ5K> {
        (0..n)
            .map(|_| {
                let mut b: BlockQ5K = rng.pod();
                b.d = f16::from_f32(rng.f32_range(-1.0, 1.0));
                b.dmin = f16::from_f32(rng.f32_range(-1.0, 1.0));
                b
            })
            .collect()
    }

    #[test]
    fn round_trip_gaussian() {
        let x = gaussian(2, 256 * 64);
        let mut q = vec![BlockQ5K::zeroed(); 64];
        quantize_row(&x, &mut q);
        let mut y = vec![0f32; x.len()];
        dequantize_row(&q, &mut y);
        let e = rel_rms(&x, &y);
        // Q5_K on N(0,1): 0.0358 measured on 2^22 values (ggml's reference: 0.0361).
        assert!(e < 0.037, "rel rms {e}");
    }

    #[test]
    fn quants_round_trip_through_packing() {
        let mut rng = Rng::new(5);
        let x: Vec<f32> = (0..256).map(|_| rng.f32_range(-3.0, 5.0)).collect();
        let mut q = [BlockQ5K::zeroed(); 1];
        quantize_row(&x, &mut q);
        let s = crate::kquant::quantize_asym(&x, 31);
        assert_eq!(q[0].quants(), s.q);
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
    }
}
