//! The k-quant weight quantizers: the asymmetric super-block quantizer of Q4_K (4-bit) and
//! Q5_K (5-bit), and the symmetric sub-block fit of Q6_K.
//!
//! Owns (asymmetric): turning 256 floats into a super-block scale `d`, a super-block min
//! scale `dmin`, eight 6-bit sub-block scales `sc`, eight 6-bit sub-block mins `m` and 256
//! quants `q` in `0..=nmax`, so that value `i` (sub-block `j = i / 32`) is
//! `d·sc[j]·q[i] − dmin·m[j]`.
//!
//! Algorithm (deterministic, no data-dependent iteration counts):
//! 1. Per sub-block of 32, fit `x ≈ a·q + b` with `a >= 0`, `b <= 0` (the format can only
//!    subtract a non-negative min). Candidates: `b = min(min x, 0)`,
//!    `a = (max x − b) / (nmax + δ)` for δ in [`STEP_CANDIDATES`]; each is quantized and
//!    then refitted by 2×2 least squares given its quants (with `b` clamped to 0 if the
//!    optimum is positive — the constrained optimum); the refit with the smallest squared
//!    error wins and gets one more quantize + refit round. No step increases the error of
//!    the candidate it refines.
//! 2. `d = max a / 63`, `dmin = max(−b) / 63`, each rounded *up* to f16 so the largest
//!    sub-block scale still fits in 6 bits (saturating at f16::MAX for huge inputs).
//! 3. `sc = round(a / d)`, `m = round(−b / dmin)`, clamped to `0..=63`.
//! 4. Each quant is the nearest level of the stored (rounded) scales:
//!    `q = clamp(round((x + dmin·m) / (d·sc)), 0, nmax)`.
//!
//! Symmetric (Q6_K, [`fit_sym`]): `x ≈ a·q`, `q` in `−32..=31`. Candidates
//! `a = v / −(32 − δ)` (`v` the element of largest magnitude, so it lands near `q = −32`,
//! using the asymmetric range fully) for δ in [`SYM_CANDIDATES`], each refitted by
//! `a = Σxq / Σq²` given its quants; the best gets one more round.
//!
//! The inner loops live in [`crate::lanes`]: four fixed lanes, SSE2 on x86-64 and the same
//! IEEE operations in portable code elsewhere, so a quantized file does not depend on the
//! machine that wrote it.
//!
//! Inputs should be finite; non-finite inputs give unspecified (but memory-safe, panic-free)
//! blocks. Cost is a few passes over the data: see the crate's bench example for speed.

use half::f16;

use crate::common::{f16_ceil, round_fast};
use crate::lanes::{levels, ls_sums, stats, sym_sums};

/// One quantized asymmetric super-block, before bit packing.
pub(crate) struct AsymSuper {
    pub d: f16,
    pub dmin: f16,
    pub sc: [u8; 8],
    pub m: [u8; 8],
    pub q: [u8; 256],
}

/// Offsets δ of the initial symmetric scale `v / −(32 − δ)` tried by [`fit_sym`].
const SYM_CANDIDATES: [f32; 5] = [0.0, 0.5, 1.0, 1.5, -0.5];

/// One symmetric refit: quantize with scale `a`, return `(a', sse(a'))` with
/// `a' = Σxq / Σq²`.
#[inline]
fn sym_step(x: &[f32], a: f32, sxx: f32) -> Option<(f32, f32)> {
    let [sxq, sq2] = sym_sums(x, 1.0 / a);
    let na = sxq / sq2;
    if sq2.is_nan() || sq2 <= 0.0 || !na.is_finite() || na == 0.0 {
        return None;
    }
    Some((na, sxx - sxq * na))
}

/// Least-squares symmetric scale of one Q6_K sub-block (`x ≈ a·q`, `q` in `−32..=31`;
/// `x.len()` a multiple of 4). Returns 0 for an all-zero sub-block.
pub(crate) fn fit_sym(x: &[f32]) -> f32 {
    let mut amax = 0f32;
    let mut v = 0f32;
    let mut sxx = 0f32;
    for &e in x {
        sxx += e * e;
        if e.abs() > amax {
            amax = e.abs();
            v = e;
        }
    }
    if amax == 0.0 {
        return 0.0;
    }
    let mut best = (v / -32.0, f32::INFINITY);
    for delta in SYM_CANDIDATES {
        if let Some(c) = sym_step(x, v / -(32.0 - delta), sxx) {
            if c.1 < best.1 {
                best = c;
            }
        }
    }
    if let Some(c) = sym_step(x, best.0, sxx) {
        if c.1 < best.1 {
            best = c;
        }
    }
    best.0
}

/// Relative offsets of the initial step `(max − min) / (nmax + δ)` tried by [`fit_sub`].
const STEP_CANDIDATES: [f32; 5] = [-1.0, -0.5, 0.0, 0.5, 1.0];

/// Quantize `x` on the grid `a·q + b` (`q` in `0..=nmax`), then solve the least-squares
/// `(a', b')` for those quants (`b' <= 0`). Returns `(a', b', sse(a', b'))`, or `None` when
/// the quants are degenerate (all equal).
#[inline]
fn ls_step(x: &[f32], a: f32, b: f32, nmax: f32, sxx: f32) -> Option<(f32, f32, f32)> {
    let [sq, sq2, sx, sxq] = ls_sums(x, 1.0 / a, b, nmax);
    let n = x.len() as f32;
    let det = n * sq2 - sq * sq;
    if det.is_nan() || det <= 0.0 {
        return None;
    }
    let mut na = (n * sxq - sx * sq) / det;
    let mut nb = (sx - na * sq) / n;
    if nb > 0.0 {
        nb = 0.0;
        na = sxq / sq2;
    }
    if na.is_nan() || na <= 0.0 || !na.is_finite() || !nb.is_finite() {
        return None;
    }
    // Σ (a q + b − x)² expanded over the same sums.
    let sse = sxx - 2.0 * (na * sxq + nb * sx) + na * na * sq2 + 2.0 * na * nb * sq + n * nb * nb;
    Some((na, nb, sse))
}

/// Least-squares fit of one sub-block; returns `(a, b)` with `a >= 0`, `b <= 0`.
#[inline]
fn fit_sub(x: &[f32], nmax: f32) -> (f32, f32) {
    let (lo, hi, sxx) = stats(x);
    if hi.is_nan() || lo.is_nan() || hi <= lo {
        return (0.0, lo);
    }
    let mut best = ((hi - lo) / nmax, lo, f32::INFINITY);
    for delta in STEP_CANDIDATES {
        if let Some(c) = ls_step(x, (hi - lo) / (nmax + delta), lo, nmax, sxx) {
            if c.2 < best.2 {
                best = c;
            }
        }
    }
    if let Some(c) = ls_step(x, best.0, best.1, nmax, sxx) {
        if c.2 < best.2 {
            best = c;
        }
    }
    (best.0, best.1)
}

/// Quantize one super-block of 256 values (`x.len() == 256`) with quants in `0..=nmax`.
pub(crate) fn quantize_asym(x: &[f32], nmax: u8) -> AsymSuper {
    debug_assert_eq!(x.len(), 256);
    let nmaxf = f32::from(nmax);
    let mut a = [0f32; 8];
    let mut mn = [0f32; 8];
    for (j, xs) in x.chunks_exact(32).enumerate() {
        let (aj, bj) = fit_sub(xs, nmaxf);
        a[j] = aj;
        mn[j] = -bj;
    }
    let amax = a.iter().fold(0f32, |m, v| m.max(*v));
    let mmax = mn.iter().fold(0f32, |m, v| m.max(*v));
    let d = f16_ceil(amax / 63.0);
    let dmin = f16_ceil(mmax / 63.0);
    let (df, dminf) = (d.to_f32(), dmin.to_f32());
    let mut out = AsymSuper {
        d,
        dmin,
        sc: [0; 8],
        m: [0; 8],
        q: [0; 256],
    };
    for j in 0..8 {
        let sc = if df > 0.0 {
            round_fast((a[j] / df).clamp(0.0, 63.0)) as u8
        } else {
            0
        };
        let m = if dminf > 0.0 {
            round_fast((mn[j] / dminf).clamp(0.0, 63.0)) as u8
        } else {
            0
        };
        out.sc[j] = sc;
        out.m[j] = m;
        // The dequantizer's own f32 products.
        let ds = df * f32::from(sc);
        let dm = dminf * f32::from(m);
        if ds > 0.0 {
            let qs = &mut out.q[32 * j..32 * j + 32];
            levels(&x[32 * j..32 * j + 32], dm, 1.0 / ds, 0.0, nmaxf, 0, qs);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Rng;
    use proptest::prelude::*;

    /// Reconstruct the values the asymmetric super-block encodes (f64).
    fn decode(s: &AsymSuper) -> Vec<f64> {
        (0..256)
            .map(|i| {
                let j = i / 32;
                s.d.to_f64() * f64::from(s.sc[j]) * f64::from(s.q[i])
                    - s.dmin.to_f64() * f64::from(s.m[j])
            })
            .collect()
    }

    proptest! {
        /// Mixed magnitudes per sub-block stress the 6-bit scales; the error stays within
        /// the rounding of the scales (≈ range/126 each) plus half a quant step.
        #[test]
        fn asym_error_bounded(seed in any::<u64>(), nmax in prop::sample::select(vec![15u8, 31])) {
            let mut rng = Rng::new(seed);
            let mut x = vec![0f32; 256];
            for xs in x.chunks_exact_mut(32) {
                let s = 2f32.powi((rng.next_u64() % 16) as i32 - 8);
                let off = rng.f32_range(-1.0, 1.0) * s;
                for v in xs.iter_mut() {
                    *v = off + rng.f32_range(-1.0, 1.0) * s;
                }
            }
            let a = quantize_asym(&x, nmax);
            let b = quantize_asym(&x, nmax);
            prop_assert_eq!(a.q, b.q);
            prop_assert!(a.q.iter().all(|q| *q <= nmax));
            let y = decode(&a);
            let r = x.chunks(32).map(|c| c.iter().fold(f32::MIN, |m, v| m.max(*v)) - c.iter().fold(0f32, |m, v| m.min(*v))).fold(0f32, f32::max);
            let mneg = x.chunks(32).map(|c| -c.iter().fold(0f32, |m, v| m.min(*v))).fold(0f32, f32::max);
            for (j, c) in x.chunks(32).enumerate() {
                let rj = c.iter().fold(f32::MIN, |m, v| m.max(*v)) - c.iter().fold(0f32, |m, v| m.min(*v));
                let bound = f64::from(r) / 60.0 + f64::from(mneg) / 60.0 + f64::from(rj) / f64::from(nmax);
                for (i, v) in c.iter().enumerate() {
                    let e = (f64::from(*v) - y[32 * j + i]).abs();
                    prop_assert!(e <= bound, "j={} i={} e={} bound={}", j, i, e, bound);
                }
            }
        }

        #[test]
        fn sym_fit_is_deterministic_and_signed(seed in any::<u64>()) {
            let mut rng = Rng::new(seed);
            let x: Vec<f32> = (0..16).map(|_| rng.f32_range(-3.0, 3.0)).collect();
            let a = fit_sym(&x);
            prop_assert_eq!(a.to_bits(), fit_sym(&x).to_bits());
            let v = x.iter().fold(0f32, |m, e| if e.abs() > m.abs() { *e } else { m });
            // The largest element lands on the negative side of the grid.
            prop_assert!(a * v < 0.0);
        }
    }
}
