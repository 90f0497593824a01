//! Q6_K: 256 weights per super-block in 16 sub-blocks of 16; symmetric 6-bit quants with a
//! signed 8-bit scale per sub-block and one f16 super-block scale.
//!
//! Block layout (210 bytes, 2-byte aligned; `d` is last):
//! | offset | size | field | meaning |
//! |---|---|---|---|
//! | 0 | 128 | `ql` | low 4 bits (see below) |
//! | 128 | 64 | `qh` | high 2 bits |
//! | 192 | 16 | `scales` | i8 sub-block scales |
//! | 208 | 2 | `d` | f16 super-block scale |
//!
//! For half `h` (elements `128h..128h+128`) and `l < 32`, with `L = ql[64h..]`,
//! `H = qh[32h..]`: element `128h + l` is `L[l] & 15 | (H[l] & 3) << 4`, `+32` is
//! `L[l+32] & 15 | (H[l] >> 2 & 3) << 4`, `+64` is `L[l] >> 4 | (H[l] >> 4 & 3) << 4`,
//! `+96` is `L[l+32] >> 4 | (H[l] >> 6) << 4`. Value `i` is `d·scales[i/16]·(q[i] − 32)`.
//!
//! Dequantize (f32): `(d * sc) * (q − 32)`; `d * sc` is exact, so the single rounding gives
//! the correctly rounded exact value. Matched bit for bit against gguf-py.
//!
//! Quantize (not ggml's search): per sub-block a least-squares symmetric scale
//! ([`crate::kquant`]: a few initial scales that map the element of largest magnitude near
//! `q = −32`, each refined by `a = Σxq / Σq²`, the best kept). The super-block scale maps the sub-block scale of largest magnitude to `−128`:
//! `|d| = max|a| / 128` rounded *up* to f16, `sc = clamp(round(a / d), −128, 127)`, then
//! each quant is the nearest level of the stored scale: `clamp(round(x / (d·sc)), −32, 31)`.
//!
//! Dot product (Q6_K·Q8_K), per super-block, integers exact: with unsigned `q` in `0..=63`,
//! `isum = Σ_j sc[j]·Σ_{i∈j} q[i]·y.qs[i] − 32·Σ_j sc[j]·y.bsums[j]`, then
//! `acc = acc + (d·y.d)·isum`, super-block by super-block. AVX2 is bit-identical. Relies on
//! the Q8_K invariant `bsums[g] = Σ qs[16g..16g+16]`.

use bytemuck::{Pod, Zeroable};
use half::f16;

use crate::common::{f16_ceil, round_fast};
use crate::kquant::fit_sym;
use crate::lanes::levels;
use crate::q8_k::BlockQ8K;
use crate::simd::{self, SimdLevel};
use crate::QK_K;

/// One Q6_K super-block.
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
#[repr(C)]
pub struct BlockQ6K {
    pub ql: [u8; QK_K / 2],
    pub qh: [u8; QK_K / 4],
    pub scales: [i8; QK_K / 16],
    pub d: f16,
}

const _: () = assert!(std::mem::size_of::<BlockQ6K>() == 210);

impl BlockQ6K {
    /// The 256 unsigned quants in element order (each `0..=63`; the value uses `q − 32`).
    #[inline]
    pub fn quants(&self) -> [u8; QK_K] {
        let mut q = [0u8; QK_K];
        for h in 0..2 {
            let (ql, qh) = (&self.ql[64 * h..64 * h + 64], &self.qh[32 * h..32 * h + 32]);
            let o = &mut q[128 * h..128 * h + 128];
            for l in 0..32 {
                o[l] = (ql[l] & 0x0f) | ((qh[l] & 3) << 4);
                o[l + 32] = (ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4);
                o[l + 64] = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
                o[l + 96] = (ql[l + 32] >> 4) | ((qh[l] >> 6) << 4);
            }
        }
        q
    }
}

/// Dequantize to f32 (gguf-py's float order). Panics unless `y.len() == x.len() * 256`.
pub fn dequantize_row(x: &[BlockQ6K], y: &mut [f32]) {
    assert_eq!(
        y.len(),
        x.len() * QK_K,
        "q6_K dequantize_row: length mismatch"
    );
    for (b, out) in x.iter().zip(y.chunks_exact_mut(QK_K)) {
        let d = b.d.to_f32();
        let q = b.quants();
        for (i, o) in out.iter_mut().enumerate() {
            *o = (d * f32::from(b.scales[i / 16])) * (i32::from(q[i]) - 32) as f32;
        }
    }
}

/// Dequantize to the exact values in f64. Panics unless `y.len() == x.len() * 256`.
pub fn dequantize_row_f64(x: &[BlockQ6K], y: &mut [f64]) {
    assert_eq!(
        y.len(),
        x.len() * QK_K,
        "q6_K dequantize_row_f64: length mismatch"
    );
    for (b, out) in x.iter().zip(y.chunks_exact_mut(QK_K)) {
        let d = b.d.to_f64();
        let q = b.quants();
        for (i, o) in out.iter_mut().enumerate() {
            *o = d * f64::from(b.scales[i / 16]) * f64::from(i32::from(q[i]) - 32);
        }
    }
}

/// Quantize (algorithm in the module header). Panics unless `x.len() == y.len() * 256`.
pub fn quantize_row(x: &[f32], y: &mut [BlockQ6K]) {
    assert_eq!(
        x.len(),
        y.len() * QK_K,
        "q6_K quantize_row: length mismatch"
    );
    for (b, xs) in y.iter_mut().zip(x.chunks_exact(QK_K)) {
        let mut a = [0f32; 16];
        let (mut amax, mut smax) = (0f32, 0f32);
        for (j, aj) in a.iter_mut().enumerate() {
            *aj = fit_sym(&xs[16 * j..16 * j + 16]);
            if aj.abs() > amax {
                amax = aj.abs();
                smax = *aj;
            }
        }
        let dmag = f16_ceil(amax / 128.0);
        let d = if smax > 0.0 { -dmag } else { dmag };
        let df = d.to_f32();
        let mut q = [32u8; QK_K];
        for (j, (aj, sj)) in a.iter().zip(b.scales.iter_mut()).enumerate() {
            let sc = if df != 0.0 {
                round_fast((aj / df).clamp(-128.0, 127.0)) as i8
            } else {
                0
            };
            *sj = sc;
            let ds = df * f32::from(sc);
            if ds != 0.0 {
                let (q, xs) = (&mut q[16 * j..16 * j + 16], &xs[16 * j..16 * j + 16]);
                levels(xs, 0.0, 1.0 / ds, -32.0, 31.0, 32, q);
            }
        }
        b.d = d;
        for h in 0..2 {
            let o = &q[128 * h..128 * h + 128];
            for l in 0..32 {
                let (q0, q1, q2, q3) = (o[l], o[l + 32], o[l + 64], o[l + 96]);
                b.ql[64 * h + l] = (q0 & 0x0f) | ((q2 & 0x0f) << 4);
                b.ql[64 * h + l + 32] = (q1 & 0x0f) | ((q3 & 0x0f) << 4);
                b.qh[32 * h + l] =
                    (q0 >> 4) | ((q1 >> 4) << 2) | ((q2 >> 4) << 4) | ((q3 >> 4) << 6);
            }
        }
    }
}

/// The float step shared by both paths.
#[inline(always)]
fn accumulate(acc: f32, d: f32, yd: f32, isum: i32) -> f32 {
    acc + (d * yd) * isum as f32
}

/// Scalar reference Q6_K·Q8_K. Panics if the block counts differ.
pub fn vec_dot_ref(x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
    assert_eq!(x.len(), y.len(), "q6_K vec_dot: block count mismatch");
    let mut acc = 0f32;
    for (b, yb) in x.iter().zip(y) {
        let q = b.quants();
        let mut isum = 0i32;
        let mut corr = 0i32;
        for j in 0..16 {
            let s: i32 = (16 * j..16 * j + 16)
                .map(|i| i32::from(q[i]) * i32::from(yb.qs[i]))
                .sum();
            isum += i32::from(b.scales[j]) * s;
            corr += i32::from(b.scales[j]) * i32::from(yb.bsums[j]);
        }
        acc = accumulate(acc, b.d.to_f32(), yb.d, isum - 32 * corr);
    }
    acc
}

/// Q6_K·Q8_K at an explicit SIMD level. Panics if the block counts differ or the level is
/// not available on this CPU.
pub fn vec_dot_at(level: SimdLevel, x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
    assert_eq!(x.len(), y.len(), "q6_K vec_dot: block count mismatch");
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

/// Q6_K·Q8_K at the process-wide SIMD level.
pub fn vec_dot(x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
    vec_dot_at(simd::simd_level(), x, y)
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{accumulate, BlockQ6K};
    use crate::avx2::{f16_to_f32, hsum_i32_8};
    use crate::q8_k::BlockQ8K;
    use std::arch::x86_64::*;

    /// # Safety
    /// AVX2/FMA/F16C must be available and `x.len() == y.len()`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn vec_dot(x: &[BlockQ6K], y: &[BlockQ8K]) -> f32 {
        let m4 = _mm256_set1_epi8(0x0f);
        let m3 = _mm256_set1_epi8(0x03);
        let m0c = _mm256_set1_epi8(0x0c);
        let m30 = _mm256_set1_epi8(0x30);
        // Byte-shuffle masks that spread i16 scale lanes (2s, 2s+1) of a 128-bit half over
        // the low and high 128-bit halves of a 256-bit register.
        let masks: [__m256i; 4] = std::array::from_fn(|s| {
            let (a, b) = (4 * s as i8, 4 * s as i8 + 2);
            _mm256_setr_epi8(
                a,
                a + 1,
                a,
                a + 1,
                a,
                a + 1,
                a,
                a + 1,
                a,
                a + 1,
                a,
                a + 1,
                a,
                a + 1,
                a,
                a + 1,
                b,
                b + 1,
                b,
                b + 1,
                b,
                b + 1,
                b,
                b + 1,
                b,
                b + 1,
                b,
                b + 1,
                b,
                b + 1,
                b,
                b + 1,
            )
        });
        let mut acc = 0f32;
        for (b, yb) in x.iter().zip(y) {
            // SAFETY: `scales` is 16 bytes, `bsums` 16 i16 = 32 bytes.
            let sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(b.scales.as_ptr() as *const __m128i));
            let bs = _mm256_loadu_si256(yb.bsums.as_ptr() as *const __m256i);
            // Start from −32·Σ_g sc[g]·bsums[g] (the offset of the signed quants).
            let mut iacc = _mm256_slli_epi32::<5>(_mm256_madd_epi16(sc16, bs));
            iacc = _mm256_sub_epi32(_mm256_setzero_si256(), iacc);
            let halves = [
                _mm256_permute2x128_si256::<0x00>(sc16, sc16),
                _mm256_permute2x128_si256::<0x11>(sc16, sc16),
            ];
            for (h, sch) in halves.iter().enumerate() {
                // SAFETY: ql[64h..64h+64], qh[32h..32h+32], y.qs[128h..128h+128] in bounds.
                let ql0 = _mm256_loadu_si256(b.ql.as_ptr().add(64 * h) as *const __m256i);
                let ql1 = _mm256_loadu_si256(b.ql.as_ptr().add(64 * h + 32) as *const __m256i);
                let qh = _mm256_loadu_si256(b.qh.as_ptr().add(32 * h) as *const __m256i);
                let q = [
                    _mm256_or_si256(
                        _mm256_and_si256(ql0, m4),
                        _mm256_slli_epi16::<4>(_mm256_and_si256(qh, m3)),
                    ),
                    _mm256_or_si256(
                        _mm256_and_si256(ql1, m4),
                        _mm256_slli_epi16::<2>(_mm256_and_si256(qh, m0c)),
                    ),
                    _mm256_or_si256(
                        _mm256_and_si256(_mm256_srli_epi16::<4>(ql0), m4),
                        _mm256_and_si256(qh, m30),
                    ),
                    _mm256_or_si256(
                        _mm256_and_si256(_mm256_srli_epi16::<4>(ql1), m4),
                        _mm256_and_si256(_mm256_srli_epi16::<2>(qh), m30),
                    ),
                ];
                for (s, qv) in q.iter().enumerate() {
                    let yv =
                        _mm256_loadu_si256(yb.qs.as_ptr().add(128 * h + 32 * s) as *const __m256i);
                    // Scales of groups 8h+2s (low half) and 8h+2s+1 (high half).
                    let scale = _mm256_shuffle_epi8(*sch, masks[s]);
                    // u6 × i8 pair sums fit i16 (<= 2·63·128).
                    let p = _mm256_madd_epi16(_mm256_maddubs_epi16(*qv, yv), scale);
                    iacc = _mm256_add_epi32(iacc, p);
                }
            }
            acc = accumulate(acc, f16_to_f32(b.d), yb.d, hsum_i32_8(iacc));
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

    fn random_blocks(rng: &mut Rng, n: usize) -> Vec<BlockQ6K> {
        (0..n)
            .map(|_| {
                let mut b: BlockQ6K = rng.pod();
                b.d = f16::from_f32(rng.f32_range(-1.0, 1.0));
                b
            })
            .collect()
    }

    #[test]
    fn round_trip_gaussian() {
        let x = gaussian(3, 256 * 64);
        let mut q = vec![BlockQ6K::zeroed(); 64];
        quantize_row(&x, &mut q);
        let mut y = vec![0f32; x.len()];
        dequantize_row(&q, &mut y);
        let e = rel_rms(&x, &y);
        // Q6_K on N(0,1): 0.0171 measured on 2^22 values (ggml's reference: 0.0177).
        assert!(e < 0.0178, "rel rms {e}");
    }

    #[test]
    fn quantize_edge_inputs() {
        let mut q = [BlockQ6K::zeroed(); 1];
        let mut y = [0f32; 256];
        for fill in [0.0f32, 1.0, -1.0, 1e-30, 77.7, -0.003] {
            quantize_row(&[fill; 256], &mut q);
            dequantize_row(&q, &mut y);
            for v in y {
                assert!((v - fill).abs() <= fill.abs() * 0.01 + 1e-7, "{fill} {v}");
            }
        }
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
            let mut xf = vec![0f64; 256 * n];
            let mut yf = vec![0f64; 256 * n];
            dequantize_row_f64(&x, &mut xf);
            crate::q8_k::dequantize_row_f64(&y, &mut yf);
            let exact: f64 = xf.iter().zip(&yf).map(|(a, b)| a * b).sum();
            let mag: f64 = xf.iter().zip(&yf).map(|(a, b)| (a * b).abs()).sum();
            prop_assert!((f64::from(r) - exact).abs() <= 1e-5 * mag + 1e-30);
        }

        #[test]
        fn quantize_is_deterministic_and_bounded(seed in any::<u64>(), scale in -12i32..20) {
            let mut rng = Rng::new(seed);
            let s = 2f32.powi(scale);
            let x: Vec<f32> = (0..256).map(|_| rng.f32_range(-1.0, 1.0) * s).collect();
            let mut a = [BlockQ6K::zeroed(); 1];
            let mut b = [BlockQ6K::zeroed(); 1];
            quantize_row(&x, &mut a);
            quantize_row(&x, &mut b);
            prop_assert_eq!(a, b);
            let mut y = [0f32; 256];
            dequantize_row(&a, &mut y);
            for j in 0..16 {
                let amax = x[16 * j..16 * j + 16].iter().fold(0f32, |m, v| m.max(v.abs()));
                for i in 16 * j..16 * j + 16 {
                    // Within ~one level of the sub-block's own scale, plus f16 underflow.
                    prop_assert!((x[i] - y[i]).abs() <= amax / 16.0 + 1e-7);
                }
            }
        }
    }
}
