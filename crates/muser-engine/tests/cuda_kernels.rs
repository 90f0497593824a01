//! The non-matmul CUDA kernels one at a time, on the device, against the CPU route
//! (`muser_engine::cpu::ops`) and `muser_quant::a16`: the RMSNorm family (norm.cu), QK-norm +
//! RoPE + KV append (rope.cu) and the element-wise kernels (elementwise.cu, strict math); the
//! attention kernels are in `cuda_attention.rs`, the shared harness in `cuda_support/`. Launch shapes and argument lists mirror
//! `muser_engine::cuda::forward`.
//!
//! What is asserted, and why:
//! - norms: bit-identical to a host replica of the kernels' documented f64 reduction order
//!   (squares of f32 values are exact in f64 and the summation order is replicated, so the
//!   replica is the device's value to the bit), and within 1e-6 of each row's largest |value|
//!   of the CPU ops (which sum in index order: the f32 scale may differ in its last bit);
//! - fused `*_q` kernels: values bit-identical to the unfused kernel, and A16 quants
//!   bit-identical to the quant_a16 kernel (element-wise, attention) and to `muser_quant::a16`
//!   of those values (same formulas, the same a16_group code);
//! - qk_norm_rope_kv: mode 0 bit-identical to the replica; modes 1 (NORM) and 2 (NEOX) within
//!   1e-6 of each head's largest |value| of `rmsnorm_heads` + `Rope::apply` (the device's f64
//!   sincos and the host's may round the f32 cos/sin differently); the f16 cache row of each
//!   position equals f16(K) / f16(V) bit for bit (round-to-nearest-even on both sides), every
//!   other row keeps its sentinel;
//! - attention (`cuda_attention.rs`): within 1e-5 of each head's largest |value| of an f64
//!   softmax over the f16 cache; every heads-per-block and the prefill kernel bit-identical
//!   (partials and all); attn_combine_q == attn_combine → quant_a16, or → sigmoid_gate_q;
//! - element-wise: within 1e-6 (relative; of |x·u| for geglu, where 1 + tanh cancels; of the
//!   cap for the soft-cap) of the CPU ops — the formulas are the same but the device's expf and
//!   the host's libm may differ by an ulp or two; the plain logit scale is bit-identical.
//!
//! Every output sits between guard regions filled with a sentinel, and every launch grid
//! covers one token row more than `StepParams.n_tok` (`SPARE`): a kernel that writes outside
//! its output or ignores n_tok fails. Without a CUDA device each test prints "skipping: no CUDA
//! device" and returns (CI).

mod cuda_support;

use half::f16;
use muser_cuda::KArgs;
use muser_cuda::Kernel;
use muser_engine::cpu::ops;
use muser_engine::RopeMode;

use cuda_support::*;

/// The xor butterfly of 32 values (`warp_sum_f64`): lane 0's total.
fn butterfly(mut v: [f64; 32]) -> f64 {
    for o in [16, 8, 4, 2, 1] {
        let old = v;
        v = std::array::from_fn(|l| old[l] + old[l ^ o]);
    }
    v[0]
}

/// rope.cu's per-head f64 sum of squares: lane `i` of 32 adds x[i]², x[i+32]², … in that
/// order from 0, then the warp butterfly.
fn dev_sum_sq_warp(x: &[f32]) -> f64 {
    let mut part = [0f64; 32];
    for (i, &v) in x.iter().enumerate() {
        part[i % 32] += f64::from(v) * f64::from(v);
    }
    butterfly(part)
}

/// norm.cu's f64 sum of squares of one row (`rms_scale`/`sumsq8` + common.cuh
/// `block_sum_f64`): thread `t` of `threads` owns the runs of 8 values t, t + threads, … and
/// adds their squares in element order from 0; each warp's partials meet in the butterfly, and
/// the warp totals (zeros past the last warp) in a second butterfly.
fn norm_sum(x: &[f32]) -> f64 {
    dev_sum_sq_runs(x, NORM_THREADS)
}

fn dev_sum_sq_runs(x: &[f32], threads: usize) -> f64 {
    let mut part = vec![0f64; threads];
    for (i, &v) in x.iter().enumerate() {
        part[(i / 8) % threads] += f64::from(v) * f64::from(v);
    }
    let mut warps = [0f64; 32];
    for (w, chunk) in part.chunks(32).enumerate() {
        warps[w] = butterfly(chunk.try_into().expect("whole warps"));
    }
    butterfly(warps)
}

/// `(x * s) * w` (or `x * s`) per `n`-long row, `s` the device's f32 RMS scale from the
/// device's sum of squares `sum_sq` (norm.cu or rope.cu order).
fn dev_norm(
    x: &[f32],
    n: usize,
    w: Option<&[f32]>,
    eps: f32,
    sum_sq: impl Fn(&[f32]) -> f64,
) -> Vec<f32> {
    let mut y = Vec::with_capacity(x.len());
    for r in x.chunks(n) {
        let ms = sum_sq(r) / r.len() as f64;
        let s = (1.0 / (ms + f64::from(eps)).sqrt()) as f32;
        y.extend(r.iter().enumerate().map(|(i, &v)| match w {
            Some(w) => (v * s) * w[i],
            None => v * s,
        }));
    }
    y
}

/// `ops::rmsnorm` per `n`-long row (the CPU route).
fn cpu_norm(x: &[f32], n: usize, w: Option<&[f32]>, eps: f32) -> Vec<f32> {
    let mut y = vec![0f32; x.len()];
    for (r, o) in x.chunks(n).zip(y.chunks_mut(n)) {
        ops::rmsnorm(r, w, eps, o);
    }
    y
}

/// rmsnorm_rows (with and without a weight), embed_finish (with and without the norm, with and
/// without a scale), residual_norm (with and without the next norm) and residual_norm_q.
#[test]
fn norm_kernels_match_the_cpu_route() {
    let Some(d) = device() else { return };
    let (eps, eps_post, embd_scale) = (1e-6f32, 1e-5f32, 81.58f32);
    // 6656: a real n_embd (6.5 values per thread); 8192: residual_norm_q's limit; 1056: an odd
    // multiple of 32; 1000: not a multiple of 32 (no fused kernel).
    for (n, n_tok) in [(6656usize, 3usize), (8192, 2), (1056, 1), (1000, 2)] {
        let x = rand_vec(n_tok * n, n as u64, -3.0, 3.0);
        let o = rand_vec(n_tok * n, n as u64 + 1, -20.0, 20.0);
        let (wa, wb) = (rand_vec(n, 3, 0.2, 1.8), rand_vec(n, 4, -1.5, 1.5));
        let (xd, od) = (d.input(&x), d.input(&o));
        let (wad, wbd) = (d.input(&wa), d.input(&wb));
        let sp = d.step(40, n_tok);
        let rows = |k, args| d.go(k, [n_tok + SPARE, 1, 1], NORM_THREADS, 0, args);
        let check = |got: &[f32], replica: &[f32], cpu: &[f32], what: String| {
            same_f32(got, replica, &format!("{what} vs the device replica"));
            let scale = row_max(cpu, n);
            close(got, cpu, 1e-6, |i| scale[i], &format!("{what} vs the CPU"));
        };

        for w in [Some(&wa[..]), None] {
            let y = d.guarded(n_tok * n * 4);
            let args = KArgs::new()
                .ptr(xd.ptr())
                .ptr(w.map_or(0, |_| wad.ptr()))
                .ptr(y.ptr)
                .int(n)
                .f32(eps)
                .ptr(sp.ptr());
            rows(Kernel::RmsnormRows, args);
            check(
                &d.read(&y, "rmsnorm_rows"),
                &dev_norm(&x, n, w, eps, norm_sum),
                &cpu_norm(&x, n, w, eps),
                format!("rmsnorm_rows n={n} weight={}", w.is_some()),
            );
        }

        for (do_norm, scale) in [(true, embd_scale), (true, 1.0), (false, embd_scale)] {
            let xb = d.guarded_from(&x);
            let args = KArgs::new()
                .ptr(xb.ptr)
                .int(n)
                .i32(i32::from(do_norm))
                .f32(eps)
                .f32(scale)
                .ptr(sp.ptr());
            rows(Kernel::EmbedFinish, args);
            // The CPU route's embedding post-processing (cpu/mod.rs; x * 1.0 == x exactly).
            let (replica, cpu) = match do_norm {
                true => (
                    dev_norm(&x, n, None, eps, norm_sum),
                    cpu_norm(&x, n, None, eps),
                ),
                false => (x.clone(), x.clone()),
            };
            let post = |v: Vec<f32>| -> Vec<f32> { v.iter().map(|v| v * scale).collect() };
            let (replica, cpu) = (post(replica), post(cpu));
            check(
                &d.read(&xb, "embed_finish"),
                &replica,
                &cpu,
                format!("embed_finish n={n} norm={do_norm} scale={scale}"),
            );
        }

        // CPU route: x += rmsnorm(o, w_post, eps_post); h = rmsnorm(x, w_next, eps).
        let add =
            |x: &[f32], y: Vec<f32>| -> Vec<f32> { x.iter().zip(y).map(|(a, b)| a + b).collect() };
        let x_rep = add(&x, dev_norm(&o, n, Some(&wa[..]), eps_post, norm_sum));
        let h_rep = dev_norm(&x_rep, n, Some(&wb[..]), eps, norm_sum);
        let x_cpu = add(&x, cpu_norm(&o, n, Some(&wa[..]), eps_post));
        let h_cpu = cpu_norm(&x_cpu, n, Some(&wb[..]), eps);
        let mut plain: Option<(Vec<f32>, Vec<f32>)> = None;
        for variant in ["plain", "no next norm", "fused A16"] {
            let fused = variant == "fused A16";
            if fused && (n % 32 != 0 || n > 8 * NORM_THREADS) {
                continue;
            }
            let (xb, h) = (d.guarded_from(&x), d.guarded(n_tok * n * 4));
            let qd = d.quants(n_tok, n.next_multiple_of(32));
            let no_next = variant == "no next norm";
            let w_next = if no_next { 0 } else { wbd.ptr() };
            let args = KArgs::new()
                .ptr(od.ptr())
                .ptr(wad.ptr())
                .f32(eps_post)
                .ptr(xb.ptr)
                .ptr(w_next)
                .f32(eps)
                .ptr(h.ptr)
                .int(n);
            if fused {
                let args = args.ptr(qd.xq.ptr).ptr(qd.xs.ptr).ptr(qd.xsum.ptr);
                rows(Kernel::ResidualNormQ, args.ptr(sp.ptr()));
            } else {
                rows(Kernel::ResidualNorm, args.ptr(sp.ptr()));
            }
            let what = format!("residual_norm ({variant}) n={n}");
            let (gx, gh) = (d.read::<f32>(&xb, &what), d.read::<f32>(&h, &what));
            check(&gx, &x_rep, &x_cpu, format!("{what}: x"));
            if no_next {
                let untouched = gh.iter().all(|v| v.to_bits() == SENTINEL);
                assert!(untouched, "{what}: H written without a next norm");
                continue;
            }
            check(&gh, &h_rep, &h_cpu, format!("{what}: h"));
            match &plain {
                None => plain = Some((gx, gh)),
                Some((px, ph)) => {
                    // residual_norm_q == residual_norm, then the A16 quantization of h.
                    same_f32(&gx, px, &format!("{what}: x vs residual_norm"));
                    same_f32(&gh, ph, &format!("{what}: h vs residual_norm"));
                    same_quants(&d.read_quants(&qd, &what), &cpu_a16(ph, n), &what);
                }
            }
        }
    }
}

/// qk_norm_rope_kv in modes 0, 1 (NORM pairs) and 2 (NEOX halves): Q and K in place, and the f16
/// K/V cache rows of the step's positions (ring rows `pos % cap`).
#[test]
fn qk_norm_rope_kv_matches_the_cpu_route() {
    let Some(d) = device() else { return };
    let eps = 1e-6f32;
    // (n_head, n_head_kv, hd, hd_v, cap, pos0, n_tok): a ring that wraps inside the step, a head
    // count that is no multiple of the 4 warps per block, hd != hd_v, and a far position.
    let shapes = [
        (8usize, 2usize, 128usize, 128usize, 24usize, 46usize, 3usize),
        (3, 1, 256, 256, 1100, 1041, 2),
        (6, 2, 64, 96, 16, 100_003, 3),
    ];
    for (nh, nkv, hd, hdv, cap, pos0, n_tok) in shapes {
        let (qw, kvw, vw) = (nh * hd, nkv * hd, nkv * hdv);
        let q = rand_vec(n_tok * qw, 11, -2.0, 2.0);
        let k = rand_vec(n_tok * kvw, 12, -2.0, 2.0);
        let v = rand_vec(n_tok * vw, 13, -2.0, 2.0);
        let (qn, kn) = (rand_vec(hd, 14, 0.2, 1.8), rand_vec(hd, 15, 0.2, 1.8));
        let (vd, qnd, knd) = (d.input(&v), d.input(&qn), d.input(&kn));
        let sp = d.step(pos0, n_tok);
        let modes = [
            (0i32, 1e6f32, None),
            (1, 10_000.0, Some(RopeMode::Norm)),
            (2, 1e6, Some(RopeMode::Neox)),
        ];
        for (mode, base, rope_mode) in modes {
            let what = format!(
                "mode {mode}, heads {nh}/{nkv} of {hd}/{hdv}, pos {pos0}+{n_tok}, cap {cap}"
            );
            let rope = rope_mode.map(|m| ops::Rope::new(hd, base, m));
            // The inverse frequencies as the engine uploads them (cuda/mod.rs, alloc_bufs).
            let inv: Vec<f64> = (0..hd / 2)
                .map(|i| f64::from(base).powf(-2.0 * i as f64 / hd as f64))
                .collect();
            let invd = d.input(&inv);
            let (qb, kb) = (d.guarded_from(&q), d.guarded_from(&k));
            let kc = d.guarded_from(&vec![KV_SENTINEL; cap * kvw]);
            let vc = d.guarded_from(&vec![KV_SENTINEL; cap * vw]);
            let args = KArgs::new()
                .ptr(qb.ptr)
                .ptr(kb.ptr)
                .ptr(vd.ptr())
                .ptr(qnd.ptr())
                .ptr(knd.ptr())
                .f32(eps)
                .ptr(if mode == 0 { 0 } else { invd.ptr() })
                .i32(mode)
                .int(nh)
                .int(nkv)
                .int(hd)
                .int(hdv)
                .ptr(kc.ptr)
                .ptr(vc.ptr)
                .int(cap)
                .ptr(sp.ptr());
            let grid = [(nh + 2 * nkv).div_ceil(4), n_tok + SPARE, 1];
            d.go(Kernel::QkNormRopeKv, grid, 128, 0, args);
            let (gq, gk) = (d.read::<f32>(&qb, "Q"), d.read::<f32>(&kb, "K"));
            for (got, x, w, width, name) in [(&gq, &q, &qn, qw, "Q"), (&gk, &k, &kn, kvw, "K")] {
                let mut want = x.clone();
                for (t, row) in want.chunks_mut(width).enumerate() {
                    ops::rmsnorm_heads(row, w, eps);
                    if let Some(r) = &rope {
                        r.apply(row, pos0 + t);
                    }
                }
                let scale = row_max(&want, hd);
                close(got, &want, 1e-6, |i| scale[i], &format!("{name}, {what}"));
                if mode == 0 {
                    let replica = dev_norm(x, hd, Some(&w[..]), eps, dev_sum_sq_warp);
                    same_f32(got, &replica, &format!("{name} vs the replica, {what}"));
                }
            }
            // Row pos % cap of each position holds f16(K) / f16(V); every other row its sentinel.
            let f16_bits =
                |x: &[f32]| -> Vec<u16> { x.iter().map(|&v| f16::from_f32(v).to_bits()).collect() };
            let (mut kwant, mut vwant) =
                (vec![KV_SENTINEL; cap * kvw], vec![KV_SENTINEL; cap * vw]);
            for t in 0..n_tok {
                let r = (pos0 + t) % cap;
                kwant.splice(
                    r * kvw..(r + 1) * kvw,
                    f16_bits(&gk[t * kvw..(t + 1) * kvw]),
                );
                vwant.splice(r * vw..(r + 1) * vw, f16_bits(&v[t * vw..(t + 1) * vw]));
            }
            let (kgot, vgot): (Vec<u16>, Vec<u16>) =
                (d.read(&kc, "K cache"), d.read(&vc, "V cache"));
            same(&kgot, &kwant, &format!("K cache, {what}"));
            same(&vgot, &vwant, &format!("V cache, {what}"));
            eprintln!("qk_norm_rope_kv {what}: ok");
        }
    }
}

/// sigmoid_gate, swiglu, geglu and scale_softcap against the CPU ops; the fused
/// sigmoid_gate_q / swiglu_q / geglu_q against the plain kernels and `muser_quant::a16`.
#[test]
fn elementwise_kernels_match_the_cpu_route() {
    let Some(d) = device() else { return };
    // 213 groups of 32 and 20448 elements: partial last blocks in both launch shapes.
    let (width, n_tok) = (6816usize, 3usize);
    let x = rand_vec(n_tok * width, 31, -6.0, 6.0); // gate logits / activation inputs
    let u = rand_vec(n_tok * width, 32, -2.0, 2.0); // gated values / up projections
    let sp = d.step(9, n_tok);
    // (plain, fused, in-place operand, other operand): sigmoid_gate(A = u, G = x),
    // swiglu / geglu(G = x, U = u).
    let kernels = [
        (Kernel::SigmoidGate, Kernel::SigmoidGateQ, &u, &x),
        (Kernel::Swiglu, Kernel::SwigluQ, &x, &u),
        (Kernel::Geglu, Kernel::GegluQ, &x, &u),
    ];
    for (plain, fused, inplace, other) in kernels {
        let od = d.input(other);
        let args = |p: u64| KArgs::new().ptr(p).ptr(od.ptr()).int(width).ptr(sp.ptr());
        let mut want = inplace.clone();
        match plain {
            Kernel::SigmoidGate => ops::sigmoid_gate(&mut want, other),
            Kernel::Swiglu => ops::swiglu(&mut want, other),
            _ => ops::geglu(&mut want, other),
        }
        let a = d.guarded_from(inplace);
        let grid = [((n_tok + SPARE) * width).div_ceil(EW_THREADS), 1, 1];
        d.go(plain, grid, EW_THREADS, 0, args(a.ptr));
        let got = d.read::<f32>(&a, plain.symbol());
        let geglu = plain == Kernel::Geglu;
        let scale = |i: usize| f64::from(if geglu { x[i] * u[i] } else { want[i] }).abs();
        close(&got, &want, 1e-6, scale, plain.symbol());
        let (b, qd) = (d.guarded_from(inplace), d.quants(n_tok, width));
        d.ewq(fused, args(b.ptr), &qd, width, n_tok);
        let what = fused.symbol();
        same_f32(&d.read(&b, what), &got, &format!("{what} vs plain"));
        let quants = d.read_quants(&qd, what);
        same_quants(
            &quants,
            &d.read_quants(&d.quant_a16(a.ptr, width, n_tok), what),
            what,
        );
        same_quants(&quants, &cpu_a16(&got, width), &format!("{what} (CPU)"));
        eprintln!("{what}: ok");
    }

    // The logit soft-cap over odd-width rows (the kernel takes a row count, not StepParams).
    let (n_vocab, rows) = (50_001usize, 3usize);
    let logits = rand_vec(rows * n_vocab, 33, -100.0, 100.0);
    for (scale, cap) in [(0.5f32, 30.0f32), (0.5, 0.0), (1.0, 0.0)] {
        let xb = d.guarded_from(&logits);
        let args = KArgs::new()
            .ptr(xb.ptr)
            .f32(scale)
            .f32(cap)
            .int(n_vocab)
            .int(rows);
        let grid = [((rows + SPARE) * n_vocab).div_ceil(EW_THREADS), 1, 1];
        d.go(Kernel::ScaleSoftcap, grid, EW_THREADS, 0, args);
        let got = d.read::<f32>(&xb, "scale_softcap");
        let mut want = logits.clone();
        ops::scale_softcap(&mut want, scale, (cap > 0.0).then_some(cap));
        let what = format!("scale_softcap scale={scale} cap={cap}");
        if cap > 0.0 {
            close(&got, &want, 1e-6, |_| f64::from(cap), &what);
        } else {
            same_f32(&got, &want, &what);
        }
    }
}
