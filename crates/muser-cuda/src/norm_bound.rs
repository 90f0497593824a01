//! The f16 norm's shift from a bound (norm.cu `h16_shift_bound`, `MUSER_CUDA_NORM_BOUND=1`):
//! the host mirror of the device function, and the tests that it never disagrees with the
//! exact shift.
//!
//! The fused norm (`residual_norm_h16_cl8`) writes H = fl(fl(x·sx)·wn) and then needs
//! `h16_shift(max |H|)`, which depends on the exponent of that maximum alone. The exact form
//! reduces max |H| over the row in a third cluster exchange. The bound form carries
//! m = max |fl(x·wn)| and w = max |wn| in the second exchange (the one that yields sx) and
//! decides the exponent from P = sx·m whenever the whole interval the maximum can lie in shares
//! one exponent; otherwise it answers "unknown" and the kernel runs the third exchange. So the
//! shift is always the exact one: the same bits. The argument is in norm.cu's comment; the
//! tests here check it on rows built to break it (boundaries, subnormal intermediates, huge
//! weights, zeros, infinities, NaNs).
//!
//! Invariant: [`shift_bound`] returns `Some(s)` only when `s` equals [`crate::h16::shift_of`]
//! of the exact maximum, for `sx` the rms scale of the same `x` (`|x_i|·sx <= sqrt(n)`).

use crate::h16::pow2;

/// The shift of H's row when (`sx`, `m`, `w`) decide it, else `None` (norm.cu
/// `h16_shift_bound`, operation for operation: f64 products and comparisons, exact here and
/// there).
pub fn shift_bound(sx: f32, m: f32, w: f32) -> Option<i32> {
    // Every comparison is false for a NaN, as on the device.
    let inputs_ok = sx > 0.0 && sx <= f32::MAX && m >= pow2(-125) && m <= f32::MAX && w <= f32::MAX;
    if !inputs_ok {
        return None;
    }
    let p = f64::from(sx) * f64::from(m);
    let lo = p * (1.0 - pow2d(-20));
    let hi = p * (1.0 + pow2d(-20));
    let range_ok = lo > pow2d(-100) && lo > pow2d(-125) * f64::from(w) && hi < pow2d(127);
    if !range_ok {
        return None;
    }
    let e = ilogb(lo);
    (ilogb(hi) == e).then(|| (9 - e).min(127))
}

/// The kernel's inputs to [`shift_bound`] for one row: m = max |fl(x·wn)| and w = max |wn|
/// (NaNs skipped, as `fmaxf` does).
pub fn bound_inputs(x: &[f32], wn: &[f32]) -> (f32, f32) {
    x.iter().zip(wn).fold((0f32, 0f32), |(m, w), (&x, &wn)| {
        (m.max((x * wn).abs()), w.max(wn.abs()))
    })
}

/// 2^e as f64 (|e| < 1022).
fn pow2d(e: i32) -> f64 {
    f64::from_bits(((e + 1023) as u64) << 52)
}

/// ⌊log2 v⌋ of a normal positive f64 (CUDA's `ilogb` there).
fn ilogb(v: f64) -> i32 {
    ((v.to_bits() >> 52) & 0x7ff) as i32 - 1023
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h16::shift_of;

    /// The rms scale as the kernel forms it (f64 sum of squares, then rounded once to f32).
    fn sx_of(x: &[f32], eps: f32) -> f32 {
        let s: f64 = x.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
        (1.0 / (s / x.len() as f64 + f64::from(eps)).sqrt()) as f32
    }

    /// The exact shift of H = fl(fl(x·sx)·wn).
    fn exact(x: &[f32], wn: &[f32], sx: f32) -> i32 {
        shift_of(
            x.iter()
                .zip(wn)
                .fold(0f32, |m, (&x, &w)| m.max(((x * sx) * w).abs())),
        )
    }

    /// Checks one row; returns whether the bound decided it.
    fn check(x: &[f32], wn: &[f32], eps: f32, what: &str) -> bool {
        let sx = sx_of(x, eps);
        let (m, w) = bound_inputs(x, wn);
        match shift_bound(sx, m, w) {
            Some(s) => {
                assert_eq!(s, exact(x, wn, sx), "{what}: sx {sx:e} m {m:e} w {w:e}");
                true
            }
            None => false,
        }
    }

    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            self.0 >> 11
        }
        /// Uniform in [-1, 1).
        fn unit(&mut self) -> f32 {
            (self.next() >> 29) as f32 / (1u64 << 23) as f32 - 1.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// Rows like a model's (values over 80 binades, weights near 1, the norm's eps): every
    /// answer the bound gives is the exact shift, and it decides all but a sliver of them.
    #[test]
    fn the_bound_decides_ordinary_rows_and_agrees() {
        let mut r = Lcg(7);
        let (mut rows, mut decided) = (0, 0);
        for n in [64usize, 256, 6656] {
            let wn: Vec<f32> = (0..n).map(|_| 1.0 + 0.4 * r.unit()).collect();
            let trials = if n == 6656 { 200 } else { 3000 };
            for t in 0..trials {
                let scale = pow2((r.below(80) as i32) - 40);
                let mut x: Vec<f32> = (0..n).map(|_| r.unit() * scale).collect();
                // An outlier now and then (the real residual stream has some).
                if t % 3 == 0 {
                    let i = r.below(n as u64) as usize;
                    x[i] *= 50.0;
                }
                rows += 1;
                decided += usize::from(check(&x, &wn, 1e-6, &format!("n {n} row {t}")));
            }
        }
        // P sits within 2^-20 of a power of two about once in 2^19 rows.
        assert!(
            decided * 1000 >= rows * 999,
            "decided {decided} of {rows} rows"
        );
    }

    /// Rows whose largest |H| sits on a power of two, or a few ulps either side: the bound must
    /// not decide a wrong exponent (it mostly declines these).
    #[test]
    fn boundaries_are_declined_or_exact() {
        let mut r = Lcg(11);
        let n = 256;
        let mut declined = 0;
        for t in 0..400 {
            let mut x: Vec<f32> = (0..n).map(|_| r.unit()).collect();
            let mut wn: Vec<f32> = (0..n).map(|_| 1.0 + 0.25 * r.unit()).collect();
            let k = r.below(n as u64) as usize;
            x[k] = 3.0 + r.unit();
            let sx = sx_of(&x, 0.0);
            // wn[k] so that x_k·sx·wn_k is 2^e, then nudged by a few ulps.
            let e = 1 + t % 7;
            let base = (f64::from(pow2(e)) / (f64::from(x[k]) * f64::from(sx))) as f32;
            let nudge = t % 9 - 4;
            wn[k] = f32::from_bits((base.to_bits() as i32 + nudge) as u32);
            if !check(&x, &wn, 0.0, &format!("boundary row {t}")) {
                declined += 1;
            }
        }
        assert!(
            declined > 0,
            "no boundary row was declined: the test built none"
        );
    }

    /// Subnormal intermediates with huge weights, tiny rows, huge weights that overflow H,
    /// zeros, infinities and NaNs, eps 0: never a wrong answer.
    #[test]
    fn extreme_rows_are_declined_or_exact() {
        let n = 64;
        let ones = vec![1f32; n];
        let mut r = Lcg(3);
        let mut rows: Vec<(Vec<f32>, Vec<f32>, &str)> = Vec::new();
        // One element 2^-140 below the rest (subnormal x·sx) against a 2^120 weight.
        let mut x: Vec<f32> = (0..n).map(|_| r.unit()).collect();
        x[3] = pow2(-126) * pow2(-14);
        let mut wn = ones.clone();
        wn[3] = pow2(120);
        rows.push((x.clone(), wn.clone(), "subnormal intermediate, huge weight"));
        wn[3] = pow2(127);
        rows.push((x, wn, "subnormal intermediate, the largest weight"));
        rows.push((vec![0.0; n], ones.clone(), "zero row"));
        let tiny: Vec<f32> = (0..n)
            .map(|i| (i as f32 + 1.0) * pow2(-126) * pow2(-20))
            .collect();
        rows.push((tiny, ones.clone(), "subnormal row"));
        let x: Vec<f32> = (0..n).map(|_| r.unit()).collect();
        rows.push((x.clone(), vec![pow2(126) * 1.5; n], "H overflows"));
        let mut xi = x.clone();
        xi[5] = f32::INFINITY;
        rows.push((xi, ones.clone(), "an infinite x"));
        let mut xn = x.clone();
        xn[6] = f32::NAN;
        rows.push((xn, ones.clone(), "a NaN x"));
        let mut wnan = ones.clone();
        wnan[7] = f32::NAN;
        rows.push((x.clone(), wnan, "a NaN weight"));
        let mut winf = ones.clone();
        winf[8] = f32::INFINITY;
        rows.push((x.clone(), winf, "an infinite weight"));
        let mut wz = ones.clone();
        wz.iter_mut().step_by(2).for_each(|v| *v = 0.0);
        rows.push((x, wz, "half the weights zero"));
        for eps in [0.0, 1e-6] {
            for (x, wn, what) in &rows {
                check(x, wn, eps, &format!("{what}, eps {eps}"));
            }
        }
        // One x of a few 2^-149 (x·sx rounded to a few bits) against the largest weight, the
        // others' weights 2^-30: that x's H is the row's largest and far from P's estimate.
        for (t, k) in (1..=12).cycle().take(120).enumerate() {
            let mut x: Vec<f32> = (0..n).map(|_| r.unit()).collect();
            x[0] = k as f32 * pow2(-126) * pow2(-23);
            let mut wn = vec![pow2(-30); n];
            wn[0] = pow2(127) * (1.0 + 0.5 * r.unit().abs());
            check(&x, &wn, 0.0, &format!("few-bit intermediate row {t}"));
        }
    }

    /// Random rows over the whole range, each row at its own scale: values 2^-149 .. 2^16,
    /// weights 2^-149 .. 2^17 (subnormal m, subnormal H and huge sx from eps 0 included).
    #[test]
    fn random_rows_at_every_scale_are_declined_or_exact() {
        let mut r = Lcg(5);
        let n = 16;
        for t in 0..200_000 {
            let xs = pow2(r.below(166) as i32 - 149);
            let ws = pow2(r.below(167) as i32 - 149);
            let x: Vec<f32> = (0..n).map(|_| r.unit() * xs).collect();
            let wn: Vec<f32> = (0..n).map(|_| (1.0 + 0.5 * r.unit()) * ws).collect();
            let eps = if t % 2 == 0 { 0.0 } else { 1e-6 };
            check(&x, &wn, eps, &format!("random row {t}"));
        }
        // Subnormal H from a normal m: large values (sx ~ 2^-16) against weights of ~2^-138.
        for t in 0..20_000 {
            let x: Vec<f32> = (0..n).map(|_| r.unit() * pow2(16)).collect();
            let ws = pow2(-126) * pow2(-12 + t % 4);
            let wn: Vec<f32> = (0..n).map(|_| (1.0 + 0.5 * r.unit()) * ws).collect();
            check(&x, &wn, 0.0, &format!("subnormal H row {t}"));
        }
    }

    #[test]
    fn the_helpers() {
        assert_eq!(ilogb(1.0), 0);
        assert_eq!(ilogb(pow2d(-100) * 1.5), -100);
        assert_eq!(pow2(-125), 2.350_988_7e-38);
        assert_eq!(shift_bound(1.0, 600.0, 1.0), Some(0));
        assert_eq!(shift_bound(1.0, 1.0, 1.0), None, "1.0 is a boundary");
        assert_eq!(shift_bound(1.0, 0.0, 1.0), None);
        assert_eq!(shift_bound(f32::NAN, 3.0, 1.0), None);
    }
}

/// The fused f16 norm on the device: the one-block `residual_norm_h16` and its cluster twins
/// (`_cl8`, `_cl16`) give every output the same bits on rows built to take both of the bound's
/// paths (under `MUSER_CUDA_NORM_BOUND=1` the twins run it; otherwise all three are the exact
/// form), and the f16 outputs are `h16::act_reference` of H.
#[cfg(test)]
mod device_tests {
    use super::{bound_inputs, shift_bound};
    use crate::device::{DeviceBuffer, Gpu};
    use crate::h16::act_reference;
    use crate::launch::{launch, launch_cluster, Dims, KArgs};
    use crate::{Kernel, Math, Module, Registry, StepParams};

    const N: usize = 6656;
    const NORM_THREADS: u32 = 1024;

    struct Rng(u64);
    impl Rng {
        fn unit(&mut self) -> f32 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        }
    }

    /// The host's H value of row `x` at `k` (f64 sum in order: within an ulp of the device's sx).
    fn host_h(x: &[f32], wn: &[f32], eps: f32, k: usize) -> f32 {
        let s: f64 = x.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
        let sx = (1.0 / (s / x.len() as f64 + f64::from(eps)).sqrt()) as f32;
        (x[k] * sx) * wn[k]
    }

    /// X rows (O = 0 for all but the first, so X is H's input unchanged): random, zero, a
    /// largest |H| placed on a power of two and a few ulps around it (by bisecting the size of
    /// the other values, which moves the rms), a NaN, an infinity, a value 2^-140 under weight 7.
    fn rows(wn: &[f32], eps: f32) -> (Vec<f32>, Vec<f32>) {
        let mut r = Rng(17);
        let mut xs: Vec<Vec<f32>> = Vec::new();
        let mut os: Vec<Vec<f32>> = Vec::new();
        let random = |r: &mut Rng, s: f32| (0..N).map(|_| r.unit() * s).collect::<Vec<f32>>();
        xs.push(random(&mut r, 4.0));
        os.push(random(&mut r, 1.0));
        xs.push(random(&mut r, 0.01));
        xs.push(vec![0.0; N]);
        for nudge in [-3i32, -1, 0, 1, 3] {
            // The others scaled by c raise the rms, so h_k falls; bisect c for the power of two
            // below h_k(1), then nudge c by a few ulps (the others stay below h_k for c < 16).
            let base = random(&mut r, 1.0);
            let k = 100;
            let row = |c: f32| -> Vec<f32> {
                let mut x: Vec<f32> = base.iter().map(|&v| v * c).collect();
                x[k] = 30.0;
                x
            };
            let h0 = host_h(&row(1.0), wn, eps, k);
            let target = 2f32.powi(h0.log2().floor() as i32);
            let (mut lo, mut hi) = (1f32, 8f32);
            for _ in 0..100 {
                let mid = 0.5 * (lo + hi);
                if host_h(&row(mid), wn, eps, k) < target {
                    hi = mid;
                } else {
                    lo = mid;
                }
            }
            xs.push(row(f32::from_bits((hi.to_bits() as i32 + nudge) as u32)));
        }
        let mut x = random(&mut r, 1.0);
        x[5] = f32::NAN;
        xs.push(x);
        let mut x = random(&mut r, 1.0);
        x[6] = f32::INFINITY;
        xs.push(x);
        let mut x = random(&mut r, 1.0);
        x[7] = 2f32.powi(-140);
        xs.push(x);
        os.resize(xs.len(), vec![0.0; N]);
        (xs.concat(), os.concat())
    }

    fn up(gpu: &Gpu, v: &[f32]) -> DeviceBuffer {
        let b = gpu.alloc(v.len() * 4, "norm test input").expect("alloc");
        gpu.upload(b.ptr(), v).expect("upload");
        b
    }

    /// One launch of `kernel` (`cl` blocks per token, 0 = one block): X after, H, XH, XSUM,
    /// XSUM16, XINV as bits.
    #[allow(clippy::too_many_arguments)]
    fn run(
        gpu: &Gpu,
        reg: &Registry,
        kernel: Kernel,
        cl: u32,
        (x, o): (&[f32], &[f32]),
        (wpost, wn): (&[f32], &[f32]),
        eps: f32,
    ) -> Vec<Vec<u32>> {
        let n_tok = x.len() / N;
        let (xb, ob, wpb, wnb) = (up(gpu, x), up(gpu, o), up(gpu, wpost), up(gpu, wn));
        let zero = |words: usize| up(gpu, &vec![0f32; words]);
        let (h, xh, xs, xs16, inv) = (
            zero(n_tok * N),
            zero(n_tok * N / 2),
            zero(n_tok * N / 64),
            zero(n_tok * N / 32),
            zero(n_tok),
        );
        let sp = gpu.alloc(256, "step params").expect("alloc");
        gpu.upload(sp.ptr(), StepParams::single(0, 0, n_tok).words())
            .expect("upload");
        let args = KArgs::new()
            .ptr(ob.ptr())
            .ptr(wpb.ptr())
            .f32(eps)
            .ptr(xb.ptr())
            .ptr(wnb.ptr())
            .f32(eps)
            .ptr(h.ptr())
            .int(N)
            .ptr(xh.ptr())
            .ptr(xs.ptr())
            .ptr(xs16.ptr())
            .ptr(inv.ptr())
            .ptr(sp.ptr());
        let f = reg.get(kernel, Math::Strict);
        if cl == 0 {
            let dims = Dims {
                grid: (n_tok as u32, 1, 1),
                block: reg.steps.norm_h16.block(N, NORM_THREADS),
                smem: 0,
            };
            launch(f, dims, gpu.stream(), args).expect("launch");
        } else {
            let dims = Dims {
                grid: (cl, n_tok as u32, 1),
                block: NORM_THREADS / cl,
                smem: 0,
            };
            launch_cluster(f, dims, cl, gpu.stream(), args).expect("launch");
        }
        gpu.wait("residual_norm_h16 test").expect("wait");
        [
            (&xb, n_tok * N),
            (&h, n_tok * N),
            (&xh, n_tok * N / 2),
            (&xs, n_tok * N / 64),
        ]
        .into_iter()
        .chain([(&xs16, n_tok * N / 32), (&inv, n_tok)])
        .map(|(b, words)| {
            let mut v = vec![0u32; words];
            gpu.download(&mut v, b.ptr(), "norm test output")
                .expect("download");
            v
        })
        .collect()
    }

    /// The device test's rows take both of the bound's paths (by the host's estimate of sx,
    /// within an ulp of the device's): the random row is decided, some boundary rows declined.
    /// Runs everywhere.
    #[test]
    fn the_device_rows_take_both_paths() {
        let mut r = Rng(5);
        let wn: Vec<f32> = (0..N).map(|_| 1.0 + 0.3 * r.unit()).collect();
        let (x, _) = rows(&wn, 1e-6);
        let decided: Vec<bool> = x
            .chunks(N)
            .map(|row| {
                let s: f64 = row.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
                let sx = (1.0 / (s / N as f64 + 1e-6).sqrt()) as f32;
                let (m, w) = bound_inputs(row, &wn);
                shift_bound(sx, m, w).is_some()
            })
            .collect();
        assert!(decided[1], "the random row: {decided:?}");
        assert!(
            decided[3..8].iter().any(|d| !d),
            "boundary rows: {decided:?}"
        );
        assert!(
            !decided[2] && !decided[8] && !decided[9],
            "zero, NaN, inf: {decided:?}"
        );
    }

    #[test]
    fn clustered_norm_equals_the_one_block_norm_bit_for_bit() {
        if !matches!(Gpu::probe(), Ok(Some(_))) {
            eprintln!("skipping: no CUDA device");
            return;
        }
        let gpu = Gpu::open(0).expect("open GPU");
        let reg = Registry::build_modules(&gpu, &[Module::Norm]).expect("registry");
        eprintln!(
            "norm module: MUSER_CUDA_NORM_BOUND={}",
            u8::from(reg.steps.norm_bound)
        );
        let mut r = Rng(5);
        let wpost: Vec<f32> = (0..N).map(|_| 1.0 + 0.3 * r.unit()).collect();
        let plain: Vec<f32> = (0..N).map(|_| 1.0 + 0.3 * r.unit()).collect();
        // Weight 7 huge (against row 12's 2^-140 value), 9 NaN, 11..20 zero.
        let mut odd = plain.clone();
        odd[7] = 2f32.powi(100);
        odd[9] = f32::NAN;
        odd[11..20].iter_mut().for_each(|v| *v = 0.0);
        for (what, wn, eps) in [
            ("plain weights", &plain, 1e-6f32),
            ("odd weights", &odd, 0.0),
        ] {
            let (x, o) = rows(wn, eps);
            let n_tok = x.len() / N;
            let inputs = (&x[..], &o[..]);
            let one = run(
                &gpu,
                &reg,
                Kernel::ResidualNormH16,
                0,
                inputs,
                (&wpost, wn),
                eps,
            );
            for (kernel, cl) in [
                (Kernel::ResidualNormH16Cl8, 8),
                (Kernel::ResidualNormH16Cl16, 16),
            ] {
                let got = run(&gpu, &reg, kernel, cl, inputs, (&wpost, wn), eps);
                for (b, name) in ["X", "H", "XH", "XSUM", "XSUM16", "XINV"]
                    .iter()
                    .enumerate()
                {
                    let per = one[b].len() / n_tok;
                    for t in 0..n_tok {
                        let s = t * per..(t + 1) * per;
                        assert_eq!(
                            got[b][s.clone()],
                            one[b][s],
                            "{what}, cl{cl}: {name} of row {t}"
                        );
                    }
                }
            }
            // The f16 outputs are act_h16's of H (rows whose H is finite).
            let mut finite = 0;
            for t in 0..n_tok {
                let h: Vec<f32> = one[1][t * N..(t + 1) * N]
                    .iter()
                    .map(|&b| f32::from_bits(b))
                    .collect();
                if !h.iter().all(|v| v.is_finite()) {
                    continue;
                }
                finite += 1;
                let want = act_reference(&h).expect("reference");
                assert_eq!(one[5][t], want.inv.to_bits(), "{what}: XINV of row {t}");
                let xh: Vec<u16> = one[2][t * N / 2..(t + 1) * N / 2]
                    .iter()
                    .flat_map(|&w| [w as u16, (w >> 16) as u16])
                    .collect();
                assert_eq!(xh, want.xh, "{what}: XH of row {t}");
            }
            eprintln!(
                "{what}: {n_tok} rows equal in all three forms, {finite} against the reference"
            );
        }
    }
}
