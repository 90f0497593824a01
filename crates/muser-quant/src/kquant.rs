//! The shared quantizer of the asymmetric k-quants (Q4_K: 4-bit, Q5_K: 5-bit).
//!
//! Owns: turning 256 floats into a super-block scale `d`, a super-block min scale `dmin`,
//! eight 6-bit sub-block scales `sc`, eight 6-bit sub-block mins `m` and 256 quants `q` in
//! `0..=nmax`, so that value `i` (sub-block `j = i / 32`) is `d·sc[j]·q[i] − dmin·m[j]`.
//!
//! Algorithm (deterministic, no data-dependent iteration counts):
//! 1. Per sub-block of 32, fit `x ≈ a·q + b` with `a >= 0`, `b <= 0` (the format can only
//!    subtract a non-negative min): start from the min–max fit (`b = min(min x, 0)`,
//!    `a = (max x − b) / nmax`), then two rounds of alternating least squares — quantize
//!    with the current `(a, b)`, then solve the 2×2 least-squares problem for `(a, b)`
//!    given those quants (with `b` clamped to 0 if the optimum is positive, which is the
//!    constrained optimum). Each half-step cannot increase the squared error.
//! 2. `d = max a / 63`, `dmin = max(−b) / 63`, each rounded *up* to f16 so the largest
//!    sub-block scale still fits in 6 bits (saturating at f16::MAX for huge inputs).
//! 3. `sc = round(a / d)`, `m = round(−b / dmin)`, clamped to `0..=63`.
//! 4. Each quant is the nearest level of the stored (rounded) scales:
//!    `q = clamp(round((x + dmin·m) / (d·sc)), 0, nmax)`.
//!
//! Inputs should be finite; non-finite inputs give unspecified (but memory-safe, panic-free)
//! blocks. Cost is a few passes over the data: see the crate's bench example for speed.

use half::f16;

use crate::common::{f16_ceil, round_fast};

/// One quantized asymmetric super-block, before bit packing.
pub(crate) struct AsymSuper {
    pub d: f16,
    pub dmin: f16,
    pub sc: [u8; 8],
    pub m: [u8; 8],
    pub q: [u8; 256],
}

/// Relative offsets of the initial step `(max − min) / (nmax + δ)` tried by [`fit_sub`].
const STEP_CANDIDATES: [f32; 7] = [-1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0];

/// Quantize `x` on the grid `a·q + b` (`q` in `0..=nmax`), then solve the least-squares
/// `(a', b')` for those quants (`b' <= 0`). Returns `(a', b', sse(a', b'))`, or `None` when
/// the quants are degenerate (all equal).
#[inline]
fn ls_step(x: &[f32], a: f32, b: f32, nmax: f32, sxx: f32) -> Option<(f32, f32, f32)> {
    let ia = 1.0 / a;
    // Eight-lane partial sums (vectorizable); the lane order is fixed, so deterministic.
    let (mut sq, mut sq2, mut sx, mut sxq) = ([0f32; 8], [0f32; 8], [0f32; 8], [0f32; 8]);
    for c in x.chunks_exact(8) {
        for l in 0..8 {
            let v = c[l];
            let q = round_fast(((v - b) * ia).clamp(0.0, nmax));
            sq[l] += q;
            sq2[l] += q * q;
            sx[l] += v;
            sxq[l] += v * q;
        }
    }
    let (sq, sq2, sx, sxq) = (sum8(&sq), sum8(&sq2), sum8(&sx), sum8(&sxq));
    let n = x.len() as f32;
    let det = n * sq2 - sq * sq;
    if !(det > 0.0) {
        return None;
    }
    let mut na = (n * sxq - sx * sq) / det;
    let mut nb = (sx - na * sq) / n;
    if nb > 0.0 {
        nb = 0.0;
        na = sxq / sq2;
    }
    if !(na > 0.0) || !na.is_finite() || !nb.is_finite() {
        return None;
    }
    // Σ (a q + b − x)² expanded over the same sums.
    let sse = sxx - 2.0 * (na * sxq + nb * sx) + na * na * sq2 + 2.0 * na * nb * sq + n * nb * nb;
    Some((na, nb, sse))
}

#[inline(always)]
fn sum8(v: &[f32; 8]) -> f32 {
    ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]))
}

/// Least-squares fit of one sub-block; returns `(a, b)` with `a >= 0`, `b <= 0`.
#[inline]
fn fit_sub(x: &[f32], nmax: f32) -> (f32, f32) {
    let mut lo = 0f32;
    let mut hi = f32::MIN;
    let mut sxx = 0f32;
    for &v in x {
        lo = lo.min(v);
        hi = hi.max(v);
        sxx += v * v;
    }
    if !(hi > lo) {
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
        let qs = &mut out.q[32 * j..32 * j + 32];
        if ds > 0.0 {
            let ids = 1.0 / ds;
            for (q, &v) in qs.iter_mut().zip(&x[32 * j..32 * j + 32]) {
                *q = round_fast(((v + dm) * ids).clamp(0.0, nmaxf)) as u8;
            }
        }
    }
    out
}
