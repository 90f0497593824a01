//! Element-wise and row-wise f32 operations of the CPU route: RMSNorm (plain, weighted, per
//! head), RoPE (NORM and NEOX), the gated-FFN activations, the attention gate, softcap.
//!
//! Owns: the numerics of these steps. Invariant: every function processes its row
//! sequentially in index order, so results never depend on threading or batching.
//! Reductions (the RMS) accumulate in f64: it costs nothing measurable and removes the
//! order-dependent rounding of long f32 sums.

use muser_quant::SimdLevel;
use rayon::prelude::*;

use super::expf::{expf, expf_slice};

use crate::config::RopeMode;

/// `x / sqrt(mean(x²) + eps)`, optionally times `w`, written to `out`.
pub fn rmsnorm(x: &[f32], w: Option<&[f32]>, eps: f32, out: &mut [f32]) {
    let ms = x.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>() / x.len() as f64;
    let s = (1.0 / (ms + f64::from(eps)).sqrt()) as f32;
    scale_row(x, w, s, out);
}

/// [`rmsnorm`] of each `n`-value row of `x` into the same row of `out`, eight rows' sums of
/// squares at a time (eight independent f64 chains instead of one; each row's chain is the
/// same additions in the same order, so every value equals `rmsnorm`'s).
pub fn rmsnorm_rows(x: &[f32], n: usize, w: Option<&[f32]>, eps: f32, out: &mut [f32]) {
    const R: usize = 8;
    for (xs, os) in x.chunks(R * n).zip(out.chunks_mut(R * n)) {
        if xs.len() < R * n {
            for (xr, or) in xs.chunks(n).zip(os.chunks_mut(n)) {
                rmsnorm(xr, w, eps, or);
            }
            continue;
        }
        let rows: [&[f32]; R] = std::array::from_fn(|r| &xs[r * n..(r + 1) * n]);
        let mut ss = [0f64; R];
        // Column `i` of all eight rows at once: the rows' chains advance together.
        #[allow(clippy::needless_range_loop)]
        for i in 0..n {
            for r in 0..R {
                let v = f64::from(rows[r][i]);
                ss[r] += v * v;
            }
        }
        for ((xr, or), s) in xs.chunks(n).zip(os.chunks_mut(n)).zip(ss) {
            let s = (1.0 / (s / n as f64 + f64::from(eps)).sqrt()) as f32;
            scale_row(xr, w, s, or);
        }
    }
}

/// `out = x · s (· w)`, as `rmsnorm` applies its scale.
fn scale_row(x: &[f32], w: Option<&[f32]>, s: f32, out: &mut [f32]) {
    match w {
        Some(w) => {
            for ((o, &v), &g) in out.iter_mut().zip(x).zip(w) {
                *o = v * s * g;
            }
        }
        None => {
            for (o, &v) in out.iter_mut().zip(x) {
                *o = v * s;
            }
        }
    }
}

/// In-place weighted RMSNorm of each `head_dim` slice of `x`.
pub fn rmsnorm_heads(x: &mut [f32], w: &[f32], eps: f32) {
    let hd = w.len();
    let src = x.to_vec();
    rmsnorm_rows(&src, hd, Some(w), eps, x);
}

/// Precomputed RoPE angles for one head size and base: `inv_freq[i] = base^(-2i/d)` in f64.
#[derive(Clone, Debug)]
pub struct Rope {
    inv_freq: Vec<f64>,
    mode: RopeMode,
}

impl Rope {
    pub fn new(head_dim: usize, base: f32, mode: RopeMode) -> Rope {
        let d = head_dim as f64;
        let inv_freq = (0..head_dim / 2)
            .map(|i| f64::from(base).powf(-2.0 * i as f64 / d))
            .collect();
        Rope { inv_freq, mode }
    }

    /// Rotate every head of `x` (heads of `2 * inv_freq.len()` elements) for position `pos`.
    /// Angles are computed in f64 and rounded once, so positions far into the context keep
    /// full precision.
    pub fn apply(&self, x: &mut [f32], pos: usize) {
        let half = self.inv_freq.len();
        let cs: Vec<(f32, f32)> = self
            .inv_freq
            .iter()
            .map(|&f| {
                let (s, c) = (pos as f64 * f).sin_cos();
                (c as f32, s as f32)
            })
            .collect();
        for head in x.chunks_mut(2 * half) {
            for (i, &(c, s)) in cs.iter().enumerate() {
                let (a, b) = match self.mode {
                    RopeMode::Norm => (2 * i, 2 * i + 1),
                    RopeMode::Neox => (i, i + half),
                };
                let (x0, x1) = (head[a], head[b]);
                head[a] = x0 * c - x1 * s;
                head[b] = x0 * s + x1 * c;
            }
        }
    }
}

/// Elements per parallel task of the element-wise activations.
const ACT_CHUNK: usize = 4096;

/// tanh through one `exp`: `sign(y) · (1 − 2 / (e^{2|y|} + 1))`. Absolute error within a few
/// ulps of 1 (≈ 1e-7) everywhere — GELU multiplies it by `x/2`, so that is far below the other
/// roundings — at a sixth of libm `tanhf`'s cost (measured 18.6 vs ~3 ns per value here).
#[inline]
pub fn tanh_exp(y: f32) -> f32 {
    let e = expf(2.0 * y.abs());
    (1.0 - 2.0 / (e + 1.0)).copysign(y)
}

/// Values per `expf_slice` call of the element-wise ops (a stack buffer).
const EXP_BLOCK: usize = 256;

/// `y[i] = tanh_exp(y[i])` for every element (the `exp`s eight at a time).
fn tanh_exp_slice(level: SimdLevel, y: &mut [f32]) {
    for ys in y.chunks_mut(EXP_BLOCK) {
        let mut e = [0f32; EXP_BLOCK];
        let e = &mut e[..ys.len()];
        e.iter_mut()
            .zip(ys.iter())
            .for_each(|(e, &y)| *e = 2.0 * y.abs());
        expf_slice(level, e);
        ys.iter_mut()
            .zip(e.iter())
            .for_each(|(y, &e)| *y = (1.0 - 2.0 / (e + 1.0)).copysign(*y));
    }
}

/// `a[i] = f(a[i], b[i], expf(arg(a[i])))` for every element: the element-wise ops' shape,
/// with the `exp`s eight at a time (`expf_slice`), in parallel over chunks.
fn map_exp(
    a: &mut [f32],
    b: &[f32],
    arg: impl Fn(f32, f32) -> f32 + Sync,
    f: impl Fn(f32, f32, f32) -> f32 + Sync,
) {
    let level = muser_quant::simd_level();
    a.par_chunks_mut(ACT_CHUNK)
        .zip(b.par_chunks(ACT_CHUNK))
        .for_each(|(a, b)| {
            for (a, b) in a.chunks_mut(EXP_BLOCK).zip(b.chunks(EXP_BLOCK)) {
                let mut e = [0f32; EXP_BLOCK];
                let e = &mut e[..a.len()];
                for ((e, &x), &y) in e.iter_mut().zip(a.iter()).zip(b) {
                    *e = arg(x, y);
                }
                expf_slice(level, e);
                for ((x, &y), &e) in a.iter_mut().zip(b).zip(e.iter()) {
                    *x = f(*x, y, e);
                }
            }
        });
}

/// `silu(g) * u`, element-wise into `g` (parallel; each element computed alone).
pub fn swiglu(g: &mut [f32], u: &[f32]) {
    map_exp(g, u, |x, _| -x, |x, b, e| x / (1.0 + e) * b);
}

/// `gelu_tanh(g) * u`, element-wise into `g` (parallel; each element computed alone).
pub fn geglu(g: &mut [f32], u: &[f32]) {
    const K: f32 = 0.797_884_6; // sqrt(2/pi)
    let level = muser_quant::simd_level();
    g.par_chunks_mut(ACT_CHUNK)
        .zip(u.par_chunks(ACT_CHUNK))
        .for_each(|(g, u)| {
            for (g, u) in g.chunks_mut(EXP_BLOCK).zip(u.chunks(EXP_BLOCK)) {
                let mut t = [0f32; EXP_BLOCK];
                let t = &mut t[..g.len()];
                t.iter_mut()
                    .zip(g.iter())
                    .for_each(|(t, &x)| *t = K * (x + 0.044715 * x * x * x));
                tanh_exp_slice(level, t);
                for ((a, &b), &t) in g.iter_mut().zip(u).zip(t.iter()) {
                    let x = *a;
                    *a = 0.5 * x * (1.0 + t) * b;
                }
            }
        });
}

/// `a *= sigmoid(g)` element-wise (parallel; each element computed alone).
pub fn sigmoid_gate(a: &mut [f32], g: &[f32]) {
    map_exp(a, g, |_, y| -y, |x, _, e| x / (1.0 + e));
}

/// `x = cap * tanh(x * scale / cap)` (or just `x * scale` without a cap).
pub fn scale_softcap(x: &mut [f32], scale: f32, cap: Option<f32>) {
    match cap {
        Some(cap) => {
            let level = muser_quant::simd_level();
            x.par_chunks_mut(ACT_CHUNK).for_each(|c| {
                c.iter_mut().for_each(|v| *v = *v * scale / cap);
                tanh_exp_slice(level, c);
                c.iter_mut().for_each(|v| *v *= cap);
            })
        }
        None if scale != 1.0 => x.iter_mut().for_each(|v| *v *= scale),
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tanh_exp_is_accurate() {
        for i in -2000..=2000 {
            let y = i as f32 * 0.005;
            let d = (f64::from(tanh_exp(y)) - f64::from(y).tanh()).abs();
            assert!(d < 3e-7, "y={y}: {d}");
        }
        assert_eq!(tanh_exp(100.0), 1.0);
        assert_eq!(tanh_exp(-100.0), -1.0);
        assert!(tanh_exp(f32::NAN).is_nan());
    }

    /// The eight-row form gives `rmsnorm`'s bits on every row (full blocks and a remainder).
    #[test]
    fn rmsnorm_rows_equals_rmsnorm() {
        let n = 40;
        let x: Vec<f32> = (0..11 * n)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.013)
            .collect();
        let w: Vec<f32> = (0..n).map(|i| 1.0 + i as f32 * 0.01).collect();
        for wt in [None, Some(&w[..])] {
            let mut got = vec![f32::NAN; x.len()];
            rmsnorm_rows(&x, n, wt, 1e-6, &mut got);
            for (xr, gr) in x.chunks(n).zip(got.chunks(n)) {
                let mut want = vec![0f32; n];
                rmsnorm(xr, wt, 1e-6, &mut want);
                let (a, b): (Vec<u32>, Vec<u32>) = (
                    gr.iter().map(|v| v.to_bits()).collect(),
                    want.iter().map(|v| v.to_bits()).collect(),
                );
                assert_eq!(a, b);
            }
        }
    }

    #[test]
    fn rmsnorm_normalises() {
        let x = [3.0f32, 4.0];
        let mut o = [0f32; 2];
        rmsnorm(&x, None, 0.0, &mut o);
        let rms = ((o[0] * o[0] + o[1] * o[1]) / 2.0).sqrt();
        assert!((rms - 1.0).abs() < 1e-6);
    }

    #[test]
    fn rope_preserves_norm_and_is_identity_at_zero() {
        for mode in [RopeMode::Norm, RopeMode::Neox] {
            let r = Rope::new(8, 10000.0, mode);
            let x0: Vec<f32> = (0..16).map(|i| i as f32 * 0.1 - 0.7).collect();
            let mut x = x0.clone();
            r.apply(&mut x, 0);
            assert_eq!(x, x0);
            r.apply(&mut x, 1234);
            let n0: f32 = x0.iter().map(|v| v * v).sum();
            let n1: f32 = x.iter().map(|v| v * v).sum();
            assert!((n0 - n1).abs() < 1e-4);
        }
    }
}
