//! `expf` for the CPU route's element-wise ops (SiLU, sigmoid gate, GELU's tanh, softmax):
//! one definition, a scalar form and an AVX2 form eight values at a time, bit-identical.
//!
//! Owns: the definition. It is the algorithm of glibc's `expf` (from Arm's optimized-routines:
//! `x·32/ln2 = k + r`, a 32-entry table of `2^(i/32)`, a cubic in `r`, all in f64, one final
//! rounding to f32) with the fused multiply-adds glibc's FMA build uses, so on x86-64 glibc
//! (2.27 and later) it gives libm's bits — the route's logits did not change when it replaced
//! `f32::exp` (checked: `muser eval` logits byte-identical on forged small and gemma-3-270m; the
//! test below counts agreement with this machine's libm). Defining it here also makes the
//! route's numbers independent of the platform's libm.
//!
//! Special cases as glibc: `exp(-inf) = 0`, NaN and `+inf` propagate (`x + x`), overflow above
//! `0x1.62e42ep6` gives `+inf`, underflow below `-0x1.9fe368p6` gives `+0`; in between (|x| ≥ 88)
//! the main path, which rounds to subnormals correctly. The vector form sends lanes with
//! |x| ≥ 88 (or NaN) through the scalar form.

/// `asuint64(2^(i/32)) - (i << 47)`: the table entry, with the exponent of `2^(k/32)` added by
/// `ki << 47` (correctly rounded powers of two; glibc's `__exp2f_data.tab`).
const TAB: [u64; 32] = [
    0x3ff0000000000000,
    0x3fefd9b0d3158574,
    0x3fefb5586cf9890f,
    0x3fef9301d0125b51,
    0x3fef72b83c7d517b,
    0x3fef54873168b9aa,
    0x3fef387a6e756238,
    0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715,
    0x3feef1a7373aa9cb,
    0x3feedea64c123422,
    0x3feece086061892d,
    0x3feebfdad5362a27,
    0x3feeb42b569d4f82,
    0x3feeab07dd485429,
    0x3feea47eb03a5585,
    0x3feea09e667f3bcd,
    0x3fee9f75e8ec5f74,
    0x3feea11473eb0187,
    0x3feea589994cce13,
    0x3feeace5422aa0db,
    0x3feeb737b0cdc5e5,
    0x3feec49182a3f090,
    0x3feed503b23e255d,
    0x3feee89f995ad3ad,
    0x3feeff76f2fb5e47,
    0x3fef199bdd85529c,
    0x3fef3720dcef9069,
    0x3fef5818dcfba487,
    0x3fef7c97337b9b5f,
    0x3fefa4afa2a490da,
    0x3fefd0765b6e4540,
];

/// 32 / ln 2.
const INV_LN2_N: f64 = f64::from_bits(0x4047_1547_652b_82fe);
/// 1.5 · 2^52: adding it rounds to an integer (ties to even) in the low mantissa bits.
const SHIFT: f64 = f64::from_bits(0x4338_0000_0000_0000);
/// The cubic's coefficients, scaled for `r` in units of 1/32.
const C0: f64 = f64::from_bits(0x3ebc_6af8_4b91_2394); // 0x1.c6af84b912394p-5 / 32^3
const C1: f64 = f64::from_bits(0x3f2e_bfce_50fa_c4f3); // 0x1.ebfce50fac4f3p-3 / 32^2
const C2: f64 = f64::from_bits(0x3f96_2e42_ff0c_52d6); // 0x1.62e42ff0c52d6p-1 / 32

/// Top 12 bits of 88.0f (the threshold of the special-case path).
const TOP_88: u32 = 0x42b;

/// The scalar form.
pub fn expf(x: f32) -> f32 {
    let abstop = (x.to_bits() >> 20) & 0x7ff;
    if abstop >= TOP_88 {
        if x == f32::NEG_INFINITY {
            return 0.0;
        }
        if abstop >= 0x7f8 {
            return x + x;
        }
        if x > f32::from_bits(0x42b1_7217) {
            return f32::INFINITY;
        }
        if x < f32::from_bits(0xc2cf_f1b4) {
            return 0.0;
        }
    }
    let xd = f64::from(x);
    // z = x·32/ln2 fused into both of its uses, as glibc's FMA build computes it.
    let kd = INV_LN2_N.mul_add(xd, SHIFT);
    let ki = kd.to_bits();
    let kd = kd - SHIFT;
    let r = INV_LN2_N.mul_add(xd, -kd);
    let t = TAB[(ki % 32) as usize].wrapping_add(ki << 47);
    let s = f64::from_bits(t);
    let z = C0.mul_add(r, C1);
    let r2 = r * r;
    let y = C2.mul_add(r, 1.0);
    let y = z.mul_add(r2, y);
    (y * s) as f32
}

/// `x[i] = expf(x[i])` for every element, eight at a time where `level` has AVX2.
pub fn expf_slice(level: muser_quant::SimdLevel, x: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if level.avx2() {
        let n8 = x.len() / 8 * 8;
        let (body, tail) = x.split_at_mut(n8);
        for c in body.chunks_exact_mut(8) {
            // SAFETY: AVX2/FMA detected (`SimdLevel::avx2()` levels are chosen only after
            // detecting AVX2, FMA and F16C); `c` holds exactly eight values.
            unsafe { avx2::exp8(c) };
        }
        tail.iter_mut().for_each(|v| *v = expf(*v));
        return;
    }
    let _ = level;
    x.iter_mut().for_each(|v| *v = expf(*v));
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    #![allow(unsafe_op_in_unsafe_fn)]
    use std::arch::x86_64::*;

    use super::{expf, C0, C1, C2, INV_LN2_N, SHIFT, TAB, TOP_88};

    /// Four lanes of the main path (`x` already as f64).
    #[inline(always)]
    unsafe fn main4(xd: __m256d) -> __m128 {
        let kd = _mm256_fmadd_pd(_mm256_set1_pd(INV_LN2_N), xd, _mm256_set1_pd(SHIFT));
        let ki = _mm256_castpd_si256(kd);
        let kd = _mm256_sub_pd(kd, _mm256_set1_pd(SHIFT));
        let r = _mm256_fmsub_pd(_mm256_set1_pd(INV_LN2_N), xd, kd);
        let idx = _mm256_and_si256(ki, _mm256_set1_epi64x(31));
        let tab = _mm256_i64gather_epi64::<8>(TAB.as_ptr() as *const i64, idx);
        let t = _mm256_add_epi64(tab, _mm256_slli_epi64::<47>(ki));
        let s = _mm256_castsi256_pd(t);
        let z = _mm256_fmadd_pd(_mm256_set1_pd(C0), r, _mm256_set1_pd(C1));
        let r2 = _mm256_mul_pd(r, r);
        let y = _mm256_fmadd_pd(_mm256_set1_pd(C2), r, _mm256_set1_pd(1.0));
        let y = _mm256_fmadd_pd(z, r2, y);
        _mm256_cvtpd_ps(_mm256_mul_pd(y, s))
    }

    /// `c[i] = expf(c[i])` for eight values.
    ///
    /// # Safety
    /// AVX2 and FMA must be available; `c.len() == 8`.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn exp8(c: &mut [f32]) {
        let x = _mm256_loadu_ps(c.as_ptr());
        let lo = main4(_mm256_cvtps_pd(_mm256_castps256_ps128(x)));
        let hi = main4(_mm256_cvtps_pd(_mm256_extractf128_ps::<1>(x)));
        _mm256_storeu_ps(c.as_mut_ptr(), _mm256_set_m128(hi, lo));
        // Lanes on the special-case path (|x| ≥ 88 or NaN): the scalar form.
        let abstop = _mm256_and_si256(
            _mm256_srli_epi32::<20>(_mm256_castps_si256(x)),
            _mm256_set1_epi32(0x7ff),
        );
        let special = _mm256_cmpgt_epi32(abstop, _mm256_set1_epi32(TOP_88 as i32 - 1));
        let mut m = _mm256_movemask_ps(_mm256_castsi256_ps(special));
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            let xi = f32::from_bits(_mm256_extract_epi32_dyn(x, i));
            c[i] = expf(xi);
            m &= m - 1;
        }
    }

    /// Lane `i` of `x` as bits.
    #[inline(always)]
    unsafe fn _mm256_extract_epi32_dyn(x: __m256, i: usize) -> u32 {
        let mut a = [0u32; 8];
        _mm256_storeu_ps(a.as_mut_ptr() as *mut f32, x);
        a[i]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Inputs: a dense sweep of the range that matters, random bit patterns, and the edges.
    fn inputs() -> Vec<f32> {
        let mut v: Vec<f32> = (0..400_000)
            .map(|i| -110.0 + i as f32 * (200.0 / 400_000.0))
            .collect();
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..400_000 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            v.push(f32::from_bits(s as u32));
        }
        v.extend([
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            f32::MIN_POSITIVE,
            88.0,
            -88.0,
            f32::from_bits(0x42b1_7217),
            f32::from_bits(0x42b1_7218),
            f32::from_bits(0xc2cf_f1b4),
            f32::from_bits(0xc2cf_f1b5),
            -103.5,
            -87.9,
        ]);
        v
    }

    #[test]
    fn the_vector_form_equals_the_scalar_form() {
        let x = inputs();
        let want: Vec<u32> = x.iter().map(|&v| expf(v).to_bits()).collect();
        let level = muser_quant::simd_level();
        let mut got = x.clone();
        expf_slice(level, &mut got);
        for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
            let (g, w) = (f32::from_bits(g.to_bits()), f32::from_bits(w));
            assert!(
                g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
                "x={:e}: {g:e} vs {w:e} at {}",
                x[i],
                level.name()
            );
        }
    }

    /// Within one ulp of the exact value everywhere (f64 `exp` as the reference), and the
    /// count of exact agreements with this machine's libm `expf` (printed: the claim that the
    /// route's numbers did not change rests on it being all of them on glibc).
    #[test]
    fn it_is_accurate_and_matches_libm() {
        let x = inputs();
        let mut same = 0usize;
        let mut finite = 0usize;
        for &v in &x {
            let e = expf(v);
            let l = v.exp();
            if e.to_bits() == l.to_bits() || (e.is_nan() && l.is_nan()) {
                same += 1;
            }
            let exact = f64::from(v).exp();
            if !exact.is_finite() || exact > f64::from(f32::MAX) || exact < 1e-37 {
                continue;
            }
            finite += 1;
            let ulp =
                f64::from(f32::from_bits((exact as f32).to_bits() + 1)) - f64::from(exact as f32);
            assert!(
                (f64::from(e) - exact).abs() <= ulp,
                "x={v:e}: {e:e} vs {exact:e}"
            );
        }
        eprintln!(
            "expf: {same} of {} inputs bit-identical to libm expf ({finite} checked to 1 ulp)",
            x.len()
        );
        assert!(
            same * 10 >= x.len() * 9,
            "fewer than 90% agree with libm: {same}"
        );
        assert_eq!(expf(f32::NEG_INFINITY), 0.0);
        assert_eq!(expf(f32::INFINITY), f32::INFINITY);
        assert!(expf(f32::NAN).is_nan());
        assert_eq!(expf(0.0), 1.0);
        assert_eq!(expf(100.0), f32::INFINITY);
        assert_eq!(expf(-200.0), 0.0);
    }

    /// Every f32 against libm and the vector form against the scalar one (`cargo test --release
    /// -p muser-engine --lib exhaustive -- --ignored`; about a minute on two cores).
    #[test]
    #[ignore = "exhaustive over 2^32 inputs; run by hand"]
    fn exhaustive_against_libm() {
        use rayon::prelude::*;
        let level = muser_quant::simd_level();
        let bad: u64 = (0u32..=u32::MAX >> 16)
            .into_par_iter()
            .map(|hi| {
                let mut x: Vec<f32> = (0..=0xffffu32)
                    .map(|lo| f32::from_bits(hi << 16 | lo))
                    .collect();
                let want: Vec<f32> = x.iter().map(|v| v.exp()).collect();
                expf_slice(level, &mut x);
                x.iter()
                    .zip(&want)
                    .filter(|(g, w)| g.to_bits() != w.to_bits() && !(g.is_nan() && w.is_nan()))
                    .count() as u64
            })
            .sum();
        assert_eq!(bad, 0, "inputs where expf differs from libm");
    }
}
