//! Four-lane kernels of the weight quantizers (Q4_K, Q5_K, Q6_K).
//!
//! Owns: the inner loops of [`crate::kquant`], written once with SSE2 (part of the x86-64
//! baseline, so no run-time detection) and once portably, performing the *same* IEEE
//! operations in the same order: element `i` goes to lane `i % 4`, lanes combine as
//! `(l0 + l2) + (l1 + l3)`, `max(a, b)` is `a > b ? a : b` and `min(a, b)` is
//! `a < b ? a : b` (the SSE semantics). A quantized file therefore does not depend on the
//! machine that wrote it. Slice lengths must be multiples of 4.

#[cfg(target_arch = "x86_64")]
mod imp {
    use std::arch::x86_64::*;

    #[inline(always)]
    fn hsum(v: __m128) -> f32 {
        // SAFETY: SSE2 register operations only (x86-64 baseline).
        unsafe {
            let t = _mm_add_ps(v, _mm_movehl_ps(v, v));
            _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps::<0b01>(t, t)))
        }
    }

    #[inline(always)]
    fn hmin(v: __m128) -> f32 {
        // SAFETY: as above.
        unsafe {
            let t = _mm_min_ps(v, _mm_movehl_ps(v, v));
            _mm_cvtss_f32(_mm_min_ss(t, _mm_shuffle_ps::<0b01>(t, t)))
        }
    }

    #[inline(always)]
    fn hmax(v: __m128) -> f32 {
        // SAFETY: as above.
        unsafe {
            let t = _mm_max_ps(v, _mm_movehl_ps(v, v));
            _mm_cvtss_f32(_mm_max_ss(t, _mm_shuffle_ps::<0b01>(t, t)))
        }
    }

    #[inline]
    pub(crate) fn stats(x: &[f32]) -> (f32, f32, f32) {
        // SAFETY: SSE2 is baseline; each load reads one 4-float chunk of `x`.
        unsafe {
            let (mut lo, mut hi, mut sxx) =
                (_mm_setzero_ps(), _mm_set1_ps(f32::MIN), _mm_setzero_ps());
            for c in x.chunks_exact(4) {
                let v = _mm_loadu_ps(c.as_ptr());
                lo = _mm_min_ps(lo, v);
                hi = _mm_max_ps(hi, v);
                sxx = _mm_add_ps(sxx, _mm_mul_ps(v, v));
            }
            (hmin(lo), hmax(hi), hsum(sxx))
        }
    }

    #[inline]
    pub(crate) fn ls_sums(x: &[f32], ia: f32, b: f32, nmax: f32) -> [f32; 4] {
        // SAFETY: SSE2 is baseline; each load reads one 4-float chunk of `x`.
        unsafe {
            let (iav, bv, nm) = (_mm_set1_ps(ia), _mm_set1_ps(b), _mm_set1_ps(nmax));
            let (zero, magic) = (_mm_setzero_ps(), _mm_set1_ps(12_582_912.0));
            let (mut sq, mut sq2, mut sx, mut sxq) = (zero, zero, zero, zero);
            for c in x.chunks_exact(4) {
                let v = _mm_loadu_ps(c.as_ptr());
                let t = _mm_min_ps(_mm_max_ps(_mm_mul_ps(_mm_sub_ps(v, bv), iav), zero), nm);
                let q = _mm_sub_ps(_mm_add_ps(t, magic), magic);
                sq = _mm_add_ps(sq, q);
                sq2 = _mm_add_ps(sq2, _mm_mul_ps(q, q));
                sx = _mm_add_ps(sx, v);
                sxq = _mm_add_ps(sxq, _mm_mul_ps(v, q));
            }
            [hsum(sq), hsum(sq2), hsum(sx), hsum(sxq)]
        }
    }

    #[inline]
    pub(crate) fn sym_sums(x: &[f32], ia: f32) -> [f32; 2] {
        // SAFETY: SSE2 is baseline; each load reads one 4-float chunk of `x`.
        unsafe {
            let iav = _mm_set1_ps(ia);
            let (lo, hi) = (_mm_set1_ps(-32.0), _mm_set1_ps(31.0));
            let magic = _mm_set1_ps(12_582_912.0);
            let (mut sxq, mut sq2) = (_mm_setzero_ps(), _mm_setzero_ps());
            for c in x.chunks_exact(4) {
                let v = _mm_loadu_ps(c.as_ptr());
                let t = _mm_min_ps(_mm_max_ps(_mm_mul_ps(v, iav), lo), hi);
                let q = _mm_sub_ps(_mm_add_ps(t, magic), magic);
                sxq = _mm_add_ps(sxq, _mm_mul_ps(v, q));
                sq2 = _mm_add_ps(sq2, _mm_mul_ps(q, q));
            }
            [hsum(sxq), hsum(sq2)]
        }
    }

    #[inline]
    pub(crate) fn levels(
        x: &[f32],
        add: f32,
        scale: f32,
        lo: f32,
        hi: f32,
        offset: i32,
        out: &mut [u8],
    ) {
        // SAFETY: SSE2 is baseline; loads read 4-float chunks of `x`, stores write 4-byte
        // chunks of `out` (same number of chunks, checked by the caller's lengths).
        unsafe {
            let (av, sv) = (_mm_set1_ps(add), _mm_set1_ps(scale));
            let (lov, hiv) = (_mm_set1_ps(lo), _mm_set1_ps(hi));
            let magic = _mm_set1_ps(12_582_912.0);
            let off = _mm_set1_epi32(offset);
            for (c, o) in x.chunks_exact(4).zip(out.chunks_exact_mut(4)) {
                let v = _mm_loadu_ps(c.as_ptr());
                let t = _mm_min_ps(_mm_max_ps(_mm_mul_ps(_mm_add_ps(v, av), sv), lov), hiv);
                let q = _mm_sub_ps(_mm_add_ps(t, magic), magic);
                let i = _mm_add_epi32(_mm_cvttps_epi32(q), off);
                let p = _mm_packus_epi16(_mm_packs_epi32(i, i), _mm_setzero_si128());
                let w = _mm_cvtsi128_si32(p) as u32;
                o.copy_from_slice(&w.to_le_bytes());
            }
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod imp {
    use crate::common::round_fast;

    #[inline(always)]
    fn max(a: f32, b: f32) -> f32 {
        if a > b {
            a
        } else {
            b
        }
    }

    #[inline(always)]
    fn min(a: f32, b: f32) -> f32 {
        if a < b {
            a
        } else {
            b
        }
    }

    #[inline(always)]
    fn hsum(v: [f32; 4]) -> f32 {
        (v[0] + v[2]) + (v[1] + v[3])
    }

    pub(crate) fn stats(x: &[f32]) -> (f32, f32, f32) {
        let (mut lo, mut hi, mut sxx) = ([0f32; 4], [f32::MIN; 4], [0f32; 4]);
        for c in x.chunks_exact(4) {
            for l in 0..4 {
                lo[l] = min(lo[l], c[l]);
                hi[l] = max(hi[l], c[l]);
                sxx[l] += c[l] * c[l];
            }
        }
        let lo = min(min(lo[0], lo[2]), min(lo[1], lo[3]));
        let hi = max(max(hi[0], hi[2]), max(hi[1], hi[3]));
        (lo, hi, hsum(sxx))
    }

    pub(crate) fn ls_sums(x: &[f32], ia: f32, b: f32, nmax: f32) -> [f32; 4] {
        let mut acc = [[0f32; 4]; 4];
        for c in x.chunks_exact(4) {
            for l in 0..4 {
                let v = c[l];
                let q = round_fast(min(max((v - b) * ia, 0.0), nmax));
                acc[0][l] += q;
                acc[1][l] += q * q;
                acc[2][l] += v;
                acc[3][l] += v * q;
            }
        }
        acc.map(hsum)
    }

    pub(crate) fn sym_sums(x: &[f32], ia: f32) -> [f32; 2] {
        let mut acc = [[0f32; 4]; 2];
        for c in x.chunks_exact(4) {
            for l in 0..4 {
                let v = c[l];
                let q = round_fast(min(max(v * ia, -32.0), 31.0));
                acc[0][l] += v * q;
                acc[1][l] += q * q;
            }
        }
        acc.map(hsum)
    }

    pub(crate) fn levels(
        x: &[f32],
        add: f32,
        scale: f32,
        lo: f32,
        hi: f32,
        offset: i32,
        out: &mut [u8],
    ) {
        for (v, o) in x.iter().zip(out.iter_mut()) {
            let q = round_fast(min(max((v + add) * scale, lo), hi));
            *o = (q as i32 + offset).clamp(0, 255) as u8;
        }
    }
}

/// `(min(0, min x), max(f32::MIN, max x), Σx²)`.
pub(crate) use imp::stats;

/// `[Σq, Σq², Σx, Σxq]` for `q = round(clamp((x − b)·ia, 0, nmax))` (ties to even).
pub(crate) use imp::ls_sums;

/// `[Σxq, Σq²]` for `q = round(clamp(x·ia, −32, 31))`.
pub(crate) use imp::sym_sums;

/// `out[i] = round(clamp((x[i] + add)·scale, lo, hi)) + offset` as a byte (the caller keeps
/// the result in `0..=255`).
pub(crate) use imp::levels;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::round_fast;

    #[test]
    fn lanes_match_scalar_definitions() {
        let x: Vec<f32> = (0..32)
            .map(|i| ((i * 37 % 29) as f32 - 14.0) * 0.37)
            .collect();
        let (lo, hi, sxx) = stats(&x);
        assert_eq!(lo, x.iter().fold(0f32, |m, v| m.min(*v)));
        assert_eq!(hi, x.iter().fold(f32::MIN, |m, v| m.max(*v)));
        let lane = |f: &dyn Fn(f32) -> f32| {
            let mut a = [0f32; 4];
            for (i, v) in x.iter().enumerate() {
                a[i % 4] += f(*v);
            }
            (a[0] + a[2]) + (a[1] + a[3])
        };
        assert_eq!(sxx, lane(&|v| v * v));
        let q = |v: f32| round_fast(((v + 5.2) * 2.9).clamp(0.0, 15.0));
        let s = ls_sums(&x, 2.9, -5.2, 15.0);
        assert_eq!(
            s,
            [
                lane(&q),
                lane(&|v| q(v) * q(v)),
                lane(&|v| v),
                lane(&|v| v * q(v))
            ]
        );
        let mut out = [0u8; 32];
        levels(&x, 5.2, 2.9, 0.0, 15.0, 0, &mut out);
        for (o, v) in out.iter().zip(&x) {
            assert_eq!(*o, q(*v) as u8);
        }
        levels(&x, 0.0, 1.3, -32.0, 31.0, 32, &mut out);
        for (o, v) in out.iter().zip(&x) {
            assert_eq!(
                *o,
                (round_fast((v * 1.3).clamp(-32.0, 31.0)) as i32 + 32) as u8
            );
        }
    }
}
