//! The two f16 inner loops of the CPU route's attention — q·k over an f16 key row, and
//! `out += p · v` over an f16 value row — as a scalar reference and an AVX2+F16C kernel that is
//! bit-identical to it.
//!
//! Owns: their floating-point definition.
//! - `dot_f16`: element `i` goes to lane `i % 8`, `acc[l] = fma(q[i], k[i], acc[l])` (one
//!   rounding, Rust's `mul_add`), lanes reduced as `((a0+a4)+(a2+a6))+((a1+a5)+(a3+a7))`.
//! - `axpy_f16`: `out[i] = fma(p, v[i], out[i])` element-wise.
//!
//! f16 → f32 conversion is exact, so the only roundings are the ones listed; the AVX2 path uses
//! the same fused operations on the same lanes. The level is chosen once per process
//! (`muser_quant::simd_level`, `MUSER_SIMD=scalar` forces the reference).

use half::f16;
use muser_quant::SimdLevel;

#[inline]
fn reduce8(a: &[f32; 8]) -> f32 {
    ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]))
}

/// Reference q·k.
pub fn dot_f16_ref(q: &[f32], k: &[f16]) -> f32 {
    let mut acc = [0f32; 8];
    for (i, (&a, &b)) in q.iter().zip(k).enumerate() {
        acc[i % 8] = a.mul_add(b.to_f32(), acc[i % 8]);
    }
    reduce8(&acc)
}

/// Reference `out += p · v`.
pub fn axpy_f16_ref(out: &mut [f32], p: f32, v: &[f16]) {
    for (o, &x) in out.iter_mut().zip(v) {
        *o = p.mul_add(x.to_f32(), *o);
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    #![allow(unsafe_op_in_unsafe_fn)]
    use std::arch::x86_64::*;

    use half::f16;

    /// # Safety
    /// AVX2, FMA and F16C must be available; `q.len() == k.len()`, a multiple of 8.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn dot(q: &[f32], k: &[f16]) -> f32 {
        let mut acc = _mm256_setzero_ps();
        for i in (0..q.len()).step_by(8) {
            let kv = _mm256_cvtph_ps(_mm_loadu_si128(k.as_ptr().add(i) as *const __m128i));
            acc = _mm256_fmadd_ps(_mm256_loadu_ps(q.as_ptr().add(i)), kv, acc);
        }
        let s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
        let t = _mm_add_ps(s, _mm_movehl_ps(s, s));
        _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)))
    }

    #[inline(always)]
    unsafe fn hsum(acc: __m256) -> f32 {
        let s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
        let t = _mm_add_ps(s, _mm_movehl_ps(s, s));
        _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)))
    }

    /// # Safety
    /// AVX2, FMA and F16C; `q.len() <= 8`, every `q[h].len() == k.len()`, a multiple of 8.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn dot_many(q: &[&[f32]], k: &[f16], out: &mut [f32]) {
        let mut acc = [_mm256_setzero_ps(); 8];
        let nq = q.len().min(8);
        for i in (0..k.len()).step_by(8) {
            let kv = _mm256_cvtph_ps(_mm_loadu_si128(k.as_ptr().add(i) as *const __m128i));
            for h in 0..nq {
                acc[h] = _mm256_fmadd_ps(_mm256_loadu_ps(q[h].as_ptr().add(i)), kv, acc[h]);
            }
        }
        for h in 0..nq {
            out[h] = hsum(acc[h]);
        }
    }

    /// # Safety
    /// AVX2, FMA and F16C; `out.len() <= 8`, every `out[h].len() == v.len()`, a multiple of 8.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn axpy_many(out: &mut [&mut [f32]], p: &[f32], v: &[f16]) {
        let n = out.len().min(8);
        for i in (0..v.len()).step_by(8) {
            let x = _mm256_cvtph_ps(_mm_loadu_si128(v.as_ptr().add(i) as *const __m128i));
            for h in 0..n {
                let o = out[h].as_mut_ptr().add(i);
                _mm256_storeu_ps(
                    o,
                    _mm256_fmadd_ps(_mm256_set1_ps(p[h]), x, _mm256_loadu_ps(o)),
                );
            }
        }
    }

    /// `scores[j * G + h] = q[h]·keys[j]`, two keys at a time (2G independent chains).
    ///
    /// # Safety
    /// AVX2, FMA and F16C; every `q[h]` and `keys[j]` of one length, a multiple of 8;
    /// `scores.len() == keys.len() * G`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn dots<const G: usize>(q: &[&[f32]; G], keys: &[&[f16]], scores: &mut [f32]) {
        let n = q[0].len();
        let mut j = 0;
        while j < keys.len() {
            let two = j + 1 < keys.len();
            let (k0, k1) = (keys[j], if two { keys[j + 1] } else { keys[j] });
            let mut a0 = [_mm256_setzero_ps(); G];
            let mut a1 = [_mm256_setzero_ps(); G];
            for i in (0..n).step_by(8) {
                let x0 = _mm256_cvtph_ps(_mm_loadu_si128(k0.as_ptr().add(i) as *const __m128i));
                let x1 = _mm256_cvtph_ps(_mm_loadu_si128(k1.as_ptr().add(i) as *const __m128i));
                for h in 0..G {
                    let qv = _mm256_loadu_ps(q[h].as_ptr().add(i));
                    a0[h] = _mm256_fmadd_ps(qv, x0, a0[h]);
                    a1[h] = _mm256_fmadd_ps(qv, x1, a1[h]);
                }
            }
            for h in 0..G {
                scores[j * G + h] = hsum(a0[h]);
                if two {
                    scores[(j + 1) * G + h] = hsum(a1[h]);
                }
            }
            j += 2;
        }
    }

    /// `out[h] = Σ_j p[j * G + h] · vals[j]`, each element a chain of fused multiply-adds from
    /// `+0` in key order; sixteen elements at a time (2G independent chains).
    ///
    /// # Safety
    /// AVX2, FMA and F16C; every `out[h]` and `vals[j]` of one length, a multiple of 8;
    /// `p.len() == vals.len() * G`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn weighted_sum<const G: usize>(out: &mut [&mut [f32]], p: &[f32], vals: &[&[f16]]) {
        let n = out[0].len();
        let mut i = 0;
        while i < n {
            let two = i + 8 < n;
            let mut a0 = [_mm256_setzero_ps(); G];
            let mut a1 = [_mm256_setzero_ps(); G];
            for (j, v) in vals.iter().enumerate() {
                let x0 = _mm256_cvtph_ps(_mm_loadu_si128(v.as_ptr().add(i) as *const __m128i));
                let x1 = if two {
                    _mm256_cvtph_ps(_mm_loadu_si128(v.as_ptr().add(i + 8) as *const __m128i))
                } else {
                    x0
                };
                for h in 0..G {
                    let ph = _mm256_set1_ps(*p.get_unchecked(j * G + h));
                    a0[h] = _mm256_fmadd_ps(ph, x0, a0[h]);
                    a1[h] = _mm256_fmadd_ps(ph, x1, a1[h]);
                }
            }
            for h in 0..G {
                _mm256_storeu_ps(out[h].as_mut_ptr().add(i), a0[h]);
                if two {
                    _mm256_storeu_ps(out[h].as_mut_ptr().add(i + 8), a1[h]);
                }
            }
            i += 16;
        }
    }

    /// # Safety
    /// AVX2, FMA and F16C must be available; `out.len() == v.len()`, a multiple of 8.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn axpy(out: &mut [f32], p: f32, v: &[f16]) {
        let pv = _mm256_set1_ps(p);
        for i in (0..out.len()).step_by(8) {
            let x = _mm256_cvtph_ps(_mm_loadu_si128(v.as_ptr().add(i) as *const __m128i));
            let o = out.as_mut_ptr().add(i);
            _mm256_storeu_ps(o, _mm256_fmadd_ps(pv, x, _mm256_loadu_ps(o)));
        }
    }
}

/// `out[h] = q[h]·k` for several queries against one key (each exactly `dot_f16`), converting
/// the key once.
#[inline]
pub fn dot_f16_many(level: SimdLevel, q: &[&[f32]], k: &[f16], out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if level.avx2()
        && q.len() <= 8
        && k.len().is_multiple_of(8)
        && q.iter().all(|x| x.len() == k.len())
    {
        // SAFETY: AVX2/FMA/F16C detected (`SimdLevel::Avx2`); lengths checked just above.
        unsafe { avx2::dot_many(q, k, out) };
        return;
    }
    for (o, qh) in out.iter_mut().zip(q) {
        *o = dot_f16(level, qh, k);
    }
}

/// `out[h] += p[h] · v` for several outputs and one value row (each exactly `axpy_f16`),
/// converting the value row once.
#[inline]
pub fn axpy_f16_many(level: SimdLevel, out: &mut [&mut [f32]], p: &[f32], v: &[f16]) {
    #[cfg(target_arch = "x86_64")]
    if level.avx2()
        && out.len() <= 8
        && v.len().is_multiple_of(8)
        && out.iter().all(|x| x.len() == v.len())
    {
        // SAFETY: as in `dot_f16_many`.
        unsafe { avx2::axpy_many(out, p, v) };
        return;
    }
    for (o, &ph) in out.iter_mut().zip(p) {
        axpy_f16(level, o, ph, v);
    }
}

/// The AVX2 group kernels' shape: at least one row, every row as long as the first, whose length
/// is a multiple of 8 (`lens`: the query/output rows first, then the key/value rows).
#[cfg(target_arch = "x86_64")]
fn uniform_x8(mut lens: impl Iterator<Item = usize>) -> bool {
    match lens.next() {
        Some(n) if n.is_multiple_of(8) => lens.all(|l| l == n),
        _ => false,
    }
}

/// `scores[j * g + h] = q[h]·keys[j]` for `g = q.len()` queries and every key row (each
/// exactly [`dot_f16`]).
pub fn dots_f16(level: SimdLevel, q: &[&[f32]], keys: &[&[f16]], scores: &mut [f32]) {
    let g = q.len();
    assert_eq!(
        scores.len(),
        keys.len() * g,
        "dots_f16: scores are keys × queries"
    );
    #[cfg(target_arch = "x86_64")]
    if level.avx2()
        && uniform_x8(
            q.iter()
                .map(|x| x.len())
                .chain(keys.iter().map(|k| k.len())),
        )
    {
        macro_rules! go {
            ($g:literal) => {{
                let qa: &[&[f32]; $g] = q.try_into().expect("length matched");
                // SAFETY: AVX2/FMA/F16C detected (`SimdLevel::Avx2`); lengths checked above.
                unsafe { avx2::dots::<$g>(qa, keys, scores) };
                return;
            }};
        }
        match g {
            1 => go!(1),
            2 => go!(2),
            4 => go!(4),
            8 => go!(8),
            _ => {}
        }
    }
    for (k, row) in keys.iter().zip(scores.chunks_mut(g.max(1))) {
        dot_f16_many(level, q, k, row);
    }
}

/// `out[h] = Σ_j p[j * g + h] · vals[j]` for `g = out.len()` outputs, overwriting `out`: each
/// element exactly `axpy_f16` applied key by key to `+0`.
pub fn weighted_sum_f16(level: SimdLevel, out: &mut [&mut [f32]], p: &[f32], vals: &[&[f16]]) {
    let g = out.len();
    assert_eq!(
        p.len(),
        vals.len() * g,
        "weighted_sum_f16: weights are keys × outputs"
    );
    #[cfg(target_arch = "x86_64")]
    if level.avx2()
        && uniform_x8(
            out.iter()
                .map(|x| x.len())
                .chain(vals.iter().map(|v| v.len())),
        )
    {
        macro_rules! go {
            ($g:literal) => {{
                // SAFETY: AVX2/FMA/F16C detected (`SimdLevel::Avx2`); lengths checked above.
                unsafe { avx2::weighted_sum::<$g>(out, p, vals) };
                return;
            }};
        }
        match g {
            1 => go!(1),
            2 => go!(2),
            4 => go!(4),
            8 => go!(8),
            _ => {}
        }
    }
    for o in out.iter_mut() {
        o.fill(0.0);
    }
    for (v, ph) in vals.iter().zip(p.chunks(g.max(1))) {
        axpy_f16_many(level, out, ph, v);
    }
}

/// q·k at `level` (bit-identical at every level).
#[inline]
pub fn dot_f16(level: SimdLevel, q: &[f32], k: &[f16]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if level.avx2() && q.len() == k.len() && q.len().is_multiple_of(8) {
        // SAFETY: `SimdLevel::Avx2` is selected only after detecting AVX2, FMA and F16C;
        // lengths checked just above.
        return unsafe { avx2::dot(q, k) };
    }
    let _ = level;
    dot_f16_ref(q, k)
}

/// `out += p · v` at `level` (bit-identical at every level).
#[inline]
pub fn axpy_f16(level: SimdLevel, out: &mut [f32], p: f32, v: &[f16]) {
    #[cfg(target_arch = "x86_64")]
    if level.avx2() && out.len() == v.len() && out.len().is_multiple_of(8) {
        // SAFETY: as in `dot_f16`.
        unsafe { avx2::axpy(out, p, v) };
        return;
    }
    let _ = level;
    axpy_f16_ref(out, p, v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: usize, seed: u32) -> (Vec<f32>, Vec<f16>) {
        let mut x = seed.wrapping_mul(2_654_435_761) | 1;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x as f32 / u32::MAX as f32) * 4.0 - 2.0
        };
        let q = (0..n).map(|_| next()).collect();
        let k = (0..n).map(|_| f16::from_f32(next())).collect();
        (q, k)
    }

    #[test]
    fn avx2_matches_the_reference_bit_for_bit() {
        if !muser_quant::avx2_available() {
            eprintln!("skipping: no AVX2 on this CPU");
            return;
        }
        for (n, seed) in [(64, 1), (128, 2), (256, 3), (8, 4)] {
            let (q, k) = data(n, seed);
            let r = dot_f16(SimdLevel::Scalar, &q, &k);
            let v = dot_f16(SimdLevel::Avx2, &q, &k);
            assert_eq!(r.to_bits(), v.to_bits(), "dot n={n}");
            let mut o1 = q.clone();
            let mut o2 = q.clone();
            axpy_f16(SimdLevel::Scalar, &mut o1, 0.37, &k);
            axpy_f16(SimdLevel::Avx2, &mut o2, 0.37, &k);
            assert_eq!(o1, o2, "axpy n={n}");
        }
    }

    #[test]
    fn many_variants_equal_single_calls() {
        let (q0, k) = data(128, 5);
        let (q1, _) = data(128, 6);
        let (q2, v) = data(128, 7);
        for level in [SimdLevel::Scalar, muser_quant::simd_level()] {
            let qs: Vec<&[f32]> = vec![&q0, &q1, &q2];
            let mut out = [0f32; 3];
            dot_f16_many(level, &qs, &k, &mut out);
            for (o, q) in out.iter().zip(&qs) {
                assert_eq!(o.to_bits(), dot_f16(SimdLevel::Scalar, q, &k).to_bits());
            }
            let (mut a, mut b) = (q0.clone(), q1.clone());
            let (mut a2, mut b2) = (q0.clone(), q1.clone());
            axpy_f16_many(level, &mut [&mut a, &mut b], &[0.3, -1.7], &v);
            axpy_f16(SimdLevel::Scalar, &mut a2, 0.3, &v);
            axpy_f16(SimdLevel::Scalar, &mut b2, -1.7, &v);
            assert_eq!((a, b), (a2, b2));
            let _ = &q2;
        }
    }

    /// The batched forms (every group size, odd key counts, a head size that is not a multiple
    /// of 16) equal the one-key calls bit for bit.
    #[test]
    fn batched_forms_equal_single_calls() {
        for (g, hd, nk) in [(1, 64, 5), (2, 128, 4), (4, 128, 7), (8, 24, 3), (3, 64, 2)] {
            let qs: Vec<Vec<f32>> = (0..g).map(|h| data(hd, 20 + h as u32).0).collect();
            let ks: Vec<Vec<f16>> = (0..nk).map(|j| data(hd, 40 + j as u32).1).collect();
            let q: Vec<&[f32]> = qs.iter().map(|v| &v[..]).collect();
            let k: Vec<&[f16]> = ks.iter().map(|v| &v[..]).collect();
            let p: Vec<f32> = (0..nk * g).map(|i| (i as f32 * 0.37).sin()).collect();
            for level in [SimdLevel::Scalar, muser_quant::simd_level()] {
                let mut scores = vec![f32::NAN; nk * g];
                dots_f16(level, &q, &k, &mut scores);
                for j in 0..nk {
                    for h in 0..g {
                        let want = dot_f16(SimdLevel::Scalar, q[h], k[j]);
                        assert_eq!(scores[j * g + h].to_bits(), want.to_bits(), "g={g} j={j}");
                    }
                }
                let mut outs: Vec<Vec<f32>> = (0..g).map(|_| vec![f32::NAN; hd]).collect();
                let mut o: Vec<&mut [f32]> = outs.iter_mut().map(|v| &mut v[..]).collect();
                weighted_sum_f16(level, &mut o, &p, &k);
                for h in 0..g {
                    let mut want = vec![0f32; hd];
                    for j in 0..nk {
                        axpy_f16(SimdLevel::Scalar, &mut want, p[j * g + h], k[j]);
                    }
                    let got: Vec<u32> = o[h].iter().map(|v| v.to_bits()).collect();
                    let want: Vec<u32> = want.iter().map(|v| v.to_bits()).collect();
                    assert_eq!(got, want, "g={g} h={h} {}", level.name());
                }
            }
        }
    }

    #[test]
    fn dot_is_close_to_f64() {
        let (q, k) = data(256, 9);
        let exact: f64 = q
            .iter()
            .zip(&k)
            .map(|(a, b)| f64::from(*a) * f64::from(b.to_f32()))
            .sum();
        assert!((f64::from(dot_f16_ref(&q, &k)) - exact).abs() < 1e-4);
    }
}
