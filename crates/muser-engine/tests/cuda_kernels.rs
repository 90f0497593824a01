//! The non-matmul CUDA kernels one at a time, on the device, against the CPU route
//! (`muser_engine::cpu::ops`) and `muser_quant::a16`: the RMSNorm family (norm.cu), QK-norm +
//! RoPE + KV append (rope.cu), split attention and its combines (attention.cu), and the
//! element-wise kernels (elementwise.cu, strict math). Launch shapes and argument lists mirror
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
//! - attention: within 1e-5 of each head's largest |value| of an f64 softmax over the f16
//!   cache; one head per block and the whole GQA group per block bit-identical (partials and
//!   all); attn_combine_q == attn_combine → quant_a16, or → sigmoid_gate_q when gated;
//! - element-wise: within 1e-6 (relative; of |x·u| for geglu, where 1 + tanh cancels; of the
//!   cap for the soft-cap) of the CPU ops — the formulas are the same but the device's expf and
//!   the host's libm may differ by an ulp or two; the plain logit scale is bit-identical.
//!
//! Every output sits between guard regions filled with a sentinel, and every launch grid
//! covers one token row more than `StepParams.n_tok` (`SPARE`): a kernel that writes outside
//! its output or ignores n_tok fails. Without a CUDA device each test prints "skipping: no CUDA
//! device" and returns (CI).

use std::fmt::Debug;

use bytemuck::{Pod, Zeroable};
use half::f16;
use muser_cuda::launch::{launch, AttnShape, Dims, ATTN_MT_TOKENS, SMEM_DEFAULT_MAX};
use muser_cuda::{DeviceBuffer, Gpu, KArgs, Kernel, Math, Registry};
use muser_engine::cpu::ops;
use muser_engine::RopeMode;
use muser_quant::a16::{self, BlockA16};

const GUARD: usize = 256; // 4-byte words each side of every output
const SENTINEL: u32 = 0x7FC0_DEAD; // a NaN: an unwritten output never passes for a value
const KV_SENTINEL: u16 = 0x7E55; // an f16 NaN in every cache row nobody may write
const NORM_THREADS: usize = 1024; // NORM_THREADS in norm.cu
const EW_THREADS: usize = 256; // EW_THREADS in cuda/forward.rs
const SPARE: usize = 1; // grid token rows beyond StepParams.n_tok

/// The device and its kernels (`None`, loudly, without a CUDA device).
struct Dev {
    gpu: Gpu,
    reg: Registry,
}

fn device() -> Option<Dev> {
    if !matches!(Gpu::probe(), Ok(Some(_))) {
        eprintln!("skipping: no CUDA device");
        return None;
    }
    let gpu = Gpu::open(0).expect("open GPU");
    let reg = Registry::build(&gpu).expect("registry");
    Some(Dev { gpu, reg })
}

/// A device buffer between two guards; every word starts as the sentinel.
struct Guarded {
    buf: DeviceBuffer,
    ptr: u64,
    words: usize,
}

/// The A16 outputs of a kernel, guarded.
struct DevQuants {
    xq: Guarded,
    xs: Guarded,
    xsum: Guarded,
}

impl Dev {
    fn guarded(&self, bytes: usize) -> Guarded {
        assert_eq!(bytes % 4, 0, "guarded buffers hold whole words");
        let (words, all) = (bytes / 4, bytes / 4 + 2 * GUARD);
        let buf = self.gpu.alloc(all * 4, "guarded").expect("alloc");
        self.gpu
            .upload(buf.ptr(), &vec![SENTINEL; all])
            .expect("upload");
        let ptr = buf.ptr() + (GUARD * 4) as u64;
        Guarded { buf, ptr, words }
    }

    /// A guarded buffer holding `init` (in-place kernels).
    fn guarded_from<T: Pod>(&self, init: &[T]) -> Guarded {
        let g = self.guarded(std::mem::size_of_val(init));
        self.gpu.upload(g.ptr, init).expect("upload");
        g
    }

    /// Read a guarded buffer back, asserting both guards are intact.
    fn read<T: Pod>(&self, g: &Guarded, what: &str) -> Vec<T> {
        let mut all = vec![0u32; g.words + 2 * GUARD];
        let msg = "download (a kernel fault shows here)";
        self.gpu.download(&mut all, g.buf.ptr(), what).expect(msg);
        let (head, rest) = all.split_at(GUARD);
        let (body, tail) = rest.split_at(g.words);
        let bad = head.iter().chain(tail).filter(|&&w| w != SENTINEL).count();
        assert_eq!(bad, 0, "{what}: {bad} guard words overwritten");
        bytemuck::cast_slice(body).to_vec()
    }

    /// An input buffer (256 bytes of slack).
    fn input<T: Copy>(&self, data: &[T]) -> DeviceBuffer {
        let bytes = std::mem::size_of_val(data);
        let buf = self.gpu.alloc(bytes + 256, "test input").expect("alloc");
        self.gpu.upload(buf.ptr(), data).expect("upload");
        buf
    }

    /// `StepParams { pos0, n_tok }` on the device.
    fn step(&self, pos0: usize, n_tok: usize) -> DeviceBuffer {
        self.input(&[pos0 as u32, n_tok as u32])
    }

    fn quants(&self, n_tok: usize, width: usize) -> DevQuants {
        DevQuants {
            xq: self.guarded(n_tok * width * 2),
            xs: self.guarded(n_tok * width / 32 * 4),
            xsum: self.guarded(n_tok * width / 32 * 4),
        }
    }

    fn read_quants(&self, d: &DevQuants, what: &str) -> Quants {
        let (q, d, sum) = (&d.xq, &d.xs, &d.xsum);
        Quants {
            q: self.read(q, what),
            d: self.read(d, what),
            sum: self.read(sum, what),
        }
    }

    /// Launch `k` (strict math) on the main stream: grid [x, y, z], `block` threads, `smem`
    /// bytes of dynamic shared memory.
    fn go(&self, k: Kernel, grid: [usize; 3], block: usize, smem: usize, args: KArgs) {
        let dims = Dims {
            grid: (grid[0] as u32, grid[1] as u32, grid[2] as u32),
            block: block as u32,
            smem: smem as u32,
        };
        launch(self.reg.get(k, Math::Strict), dims, self.gpu.stream(), args)
            .unwrap_or_else(|e| panic!("launch {}: {e}", k.symbol()));
    }

    /// quant_a16 (the unfused A16 quantization, as the engine launches it) of `n_tok` rows of
    /// `width` values at `x`.
    fn quant_a16(&self, x: u64, width: usize, n_tok: usize) -> DevQuants {
        let q = self.quants(n_tok, width);
        let args = KArgs::new().ptr(x).int(width).int(width).int(n_tok);
        self.ewq(Kernel::QuantA16, args, &q, width, n_tok); // the same launch shape
        q
    }

    /// A fused element-wise + A16 kernel as the engine launches it (`ewq`): one warp per group
    /// of 32, the quantization buffers appended to `args`.
    fn ewq(&self, k: Kernel, args: KArgs, q: &DevQuants, width: usize, n_tok: usize) {
        let args = args.ptr(q.xq.ptr).ptr(q.xs.ptr).ptr(q.xsum.ptr);
        let grid = [(width / 32).div_ceil(8), n_tok + SPARE, 1];
        self.go(k, grid, 256, 0, args);
    }
}

/// Deterministic pseudo-random values in [lo, hi) (LCG).
fn rand_vec(n: usize, seed: u64, lo: f32, hi: f32) -> Vec<f32> {
    const A: u64 = 6364136223846793005;
    const C: u64 = 1442695040888963407;
    let mut s = seed.wrapping_mul(A).wrapping_add(C);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(A).wrapping_add(C);
            lo + (hi - lo) * ((s >> 40) as f32 / (1u64 << 24) as f32)
        })
        .collect()
}

/// Bit-exact equality (of `key` of each element), naming the first difference.
fn same_by<T: Copy + Debug, K: PartialEq>(got: &[T], want: &[T], key: fn(T) -> K, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths differ");
    let diff = |i: &usize| key(got[*i]) != key(want[*i]);
    if let Some(i) = (0..got.len()).find(diff) {
        let bad = (0..got.len()).filter(diff).count();
        let n = got.len();
        panic!(
            "{what}: {bad} of {n} differ; first [{i}]: {:?} vs {:?}",
            got[i], want[i]
        );
    }
}

fn same<T: Copy + Debug + PartialEq>(got: &[T], want: &[T], what: &str) {
    same_by(got, want, |v| v, what);
}

fn same_f32(got: &[f32], want: &[f32], what: &str) {
    same_by(got, want, f32::to_bits, what);
}

/// `|got - want| <= tol * scale(i)` for every element.
fn close(got: &[f32], want: &[f32], tol: f64, scale: impl Fn(usize) -> f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths differ");
    let (mut differ, mut worst) = (0usize, 0f64);
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        differ += usize::from(g.to_bits() != w.to_bits());
        let err = (f64::from(g) - f64::from(w)).abs();
        let lim = tol * scale(i);
        assert!(
            err <= lim,
            "{what} [{i}]: {g:e} vs {w:e} (error {err:.3e} > {lim:.3e})"
        );
        if err > 0.0 {
            worst = worst.max(err / scale(i));
        }
    }
    eprintln!(
        "{what}: ok; {differ} of {} not bit-identical, largest error {worst:.2e} of the scale",
        got.len()
    );
}

/// For every element, the largest |value| of its `row`-long row of `want`.
fn row_max(want: &[f32], row: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(want.len());
    for r in want.chunks(row) {
        let m = r.iter().fold(0f64, |m, &v| m.max(f64::from(v).abs()));
        out.extend(std::iter::repeat_n(m, r.len()));
    }
    out
}

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

/// A16 outputs of `n_tok` rows: quants, scales (bits) and quant sums.
#[derive(Debug, Default)]
struct Quants {
    q: Vec<i16>,
    d: Vec<u32>,
    sum: Vec<i32>,
}

/// `muser_quant::a16` of every `width`-long row, in the device layout.
fn cpu_a16(x: &[f32], width: usize) -> Quants {
    let mut out = Quants::default();
    for row in x.chunks(width) {
        let mut blocks = vec![BlockA16::zeroed(); a16::n_groups(width)];
        a16::quantize_row(row, &mut blocks).expect("CPU A16");
        out.q
            .extend((0..width).map(|i| blocks[i / 256].qs[i % 256]));
        for g in 0..width / 32 {
            out.d.push(blocks[g / 8].d[g % 8].to_bits());
            out.sum.push(blocks[g / 8].sum[g % 8]);
        }
    }
    out
}

fn same_quants(got: &Quants, want: &Quants, what: &str) {
    same(&got.q, &want.q, &format!("{what}: A16 quants"));
    same(&got.d, &want.d, &format!("{what}: A16 scales (bits)"));
    same(&got.sum, &want.sum, &format!("{what}: A16 sums"));
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

/// attn_partial + attn_combine against an f64 softmax over the f16 cache, for key-block sizes
/// 32 and 512 and every heads-per-block that divides the GQA ratio (bit-identical to each
/// other); the prefill kernel attn_partial_mt (eight tokens per block, tiles shared across
/// tokens whose visible ranges differ) bit-identical to attn_partial in every head shape;
/// attn_combine_q without a gate == attn_combine + A16, with one == attn_combine →
/// sigmoid_gate_q.
#[test]
fn attention_matches_an_f64_softmax_and_fused_combines_are_exact() {
    let Some(d) = device() else { return };
    for (nh, nkv, hd, hdv) in [(8usize, 2usize, 128usize, 128usize), (6, 2, 64, 96)] {
        let gqa = nh / nkv;
        let (kvw, vw, aw) = (nkv * hd, nkv * hdv, nh * hdv);
        let scale = 1.0 / (hd as f32).sqrt();
        // (window, cap, pos0, n_tok): full attention over a long cache (many tiles and key
        // blocks), over a short one, and a 16-key window whose ring (64 rows) wraps in the step.
        // Prefill steps of 45 and 40 tokens: blocks of eight tokens whose causal and window
        // edges fall inside tiles, partial last blocks.
        for (window, cap, pos0, n_tok) in [
            (0usize, 1100usize, 1040usize, 3usize),
            (0, 64, 61, 3),
            (16, 64, 190, 3),
            (0, 1100, 1000, 45),
            (16, 64, 190, 40),
        ] {
            let q = rand_vec(n_tok * nh * hd, 21, -4.0, 4.0);
            let to_f16 = |v: Vec<f32>| -> Vec<f16> { v.into_iter().map(f16::from_f32).collect() };
            let kc = to_f16(rand_vec(cap * kvw, 22, -1.0, 1.0));
            let vc = to_f16(rand_vec(cap * vw, 23, -1.0, 1.0));
            let gate = rand_vec(n_tok * aw, 24, -4.0, 4.0);
            let (qd, kd, vd, gd) = (d.input(&q), d.input(&kc), d.input(&vc), d.input(&gate));
            let sp = d.step(pos0, n_tok);
            // Reference: softmax(scale · q·k) · v in f64 over positions lo..=pos (row p % cap).
            let mut want = vec![0f32; n_tok * aw];
            let win = if window > 0 { window } else { usize::MAX };
            for t in 0..n_tok {
                let pos = pos0 + t;
                let lo = (pos + 1).saturating_sub(win);
                for h in 0..nh {
                    let kh = h / gqa;
                    let qh = &q[(t * nh + h) * hd..(t * nh + h + 1) * hd];
                    let s: Vec<f64> = (lo..=pos)
                        .map(|p| {
                            let kr = &kc[(p % cap) * kvw + kh * hd..][..hd];
                            let prod = |(&a, b): (&f32, &f16)| f64::from(a) * f64::from(b.to_f32());
                            f64::from(scale) * qh.iter().zip(kr).map(prod).sum::<f64>()
                        })
                        .collect();
                    let m = s.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v));
                    let e: Vec<f64> = s.iter().map(|v| (v - m).exp()).collect();
                    let z: f64 = e.iter().sum();
                    for j in 0..hdv {
                        let v = |p: usize| f64::from(vc[(p % cap) * vw + kh * hdv + j].to_f32());
                        let acc: f64 = (lo..=pos).zip(&e).map(|(p, &w)| w * v(p)).sum();
                        want[t * aw + h * hdv + j] = (acc / z) as f32;
                    }
                }
            }
            let want_scale = row_max(&want, hdv);
            for super_len in [32usize, 512] {
                let n_super = (pos0 + n_tok - 1) / super_len + 2; // one block past the last visible
                let slots = n_tok * nh * n_super;
                let what = format!(
                    "attention, heads {nh}/{nkv} of {hd}/{hdv}, window {window}, cap {cap}, \
                     pos {pos0}+{n_tok}, super {super_len}"
                );
                let partial_args = |op: u64, mp: u64, lp: u64, bufs: usize| {
                    KArgs::new()
                        .ptr(qd.ptr())
                        .ptr(kd.ptr())
                        .ptr(vd.ptr())
                        .int(cap)
                        .int(window)
                        .f32(scale)
                        .int(nh)
                        .int(nkv)
                        .int(hd)
                        .int(hdv)
                        .int(n_super)
                        .int(super_len)
                        .ptr(op)
                        .ptr(mp)
                        .ptr(lp)
                        .ptr(sp.ptr())
                        .int(bufs)
                };
                let mut first: Option<Vec<u32>> = None;
                let mut parts = None;
                for hpb in (1..=gqa).rev().filter(|&g| gqa % g == 0) {
                    let op = d.guarded(slots * hdv * 4);
                    let (mp, lp) = (d.guarded(slots * 4), d.guarded(slots * 4));
                    let shape = AttnShape::decode(hpb, hd, hdv);
                    let args = partial_args(op.ptr, mp.ptr, lp.ptr, shape.bufs);
                    let grid = [n_super, nh / hpb, n_tok + SPARE];
                    d.go(
                        Kernel::AttnPartial,
                        grid,
                        32 * hpb,
                        shape.smem(hd, hdv),
                        args,
                    );
                    let mut got: Vec<u32> = d.read(&op, "Op");
                    got.extend(d.read::<u32>(&mp, "Mp"));
                    got.extend(d.read::<u32>(&lp, "Lp"));
                    let msg = format!("Op|Mp|Lp, {hpb} vs {gqa} heads per block, {what}");
                    match &first {
                        None => first = Some(got),
                        Some(f0) => same(&got, f0, &msg),
                    }
                    parts = Some((op, mp, lp));
                }
                let first = first.expect("at least one block shape");
                let mt_heads = (1..=gqa.min(4)).filter(|&g| gqa % g == 0);
                let mut mt_runs = 0;
                for shape in mt_heads.map(|heads| AttnShape {
                    heads,
                    tokens: ATTN_MT_TOKENS,
                    bufs: 1,
                }) {
                    if shape.smem(hd, hdv) > SMEM_DEFAULT_MAX {
                        continue;
                    }
                    let op = d.guarded(slots * hdv * 4);
                    let (mp, lp) = (d.guarded(slots * 4), d.guarded(slots * 4));
                    let args = partial_args(op.ptr, mp.ptr, lp.ptr, shape.bufs);
                    let dims = shape.dims(n_super, nh, n_tok + SPARE, hd, hdv);
                    let grid = [dims.grid.0, dims.grid.1, dims.grid.2].map(|v| v as usize);
                    d.go(
                        Kernel::AttnPartialMt,
                        grid,
                        dims.block as usize,
                        dims.smem as usize,
                        args,
                    );
                    let mut got: Vec<u32> = d.read(&op, "Op (mt)");
                    got.extend(d.read::<u32>(&mp, "Mp (mt)"));
                    got.extend(d.read::<u32>(&lp, "Lp (mt)"));
                    let msg =
                        format!("Op|Mp|Lp, attn_partial_mt {shape:?} vs attn_partial, {what}");
                    same(&got, &first, &msg);
                    mt_runs += 1;
                }
                assert!(mt_runs > 0, "no attn_partial_mt shape fits, {what}");
                eprintln!("{what}: attn_partial_mt == attn_partial ({mt_runs} shapes)");
                let (op, mp, lp) = parts.expect("at least one block shape");
                let combine_args = || {
                    KArgs::new()
                        .ptr(op.ptr)
                        .ptr(mp.ptr)
                        .ptr(lp.ptr)
                        .int(window)
                        .int(nh)
                        .int(hdv)
                        .int(n_super)
                        .int(super_len)
                };
                let cgrid = [nh, n_tok + SPARE, 1];
                let a = d.guarded(n_tok * aw * 4);
                let args = combine_args().ptr(a.ptr).ptr(sp.ptr());
                d.go(Kernel::AttnCombine, cgrid, 32, 0, args);
                let ga = d.read::<f32>(&a, "A");
                close(&ga, &want, 1e-5, |i| want_scale[i], &what);
                for gated in [false, true] {
                    let (aq, qq) = (d.guarded(n_tok * aw * 4), d.quants(n_tok, aw));
                    let args = combine_args()
                        .ptr(aq.ptr)
                        .ptr(if gated { gd.ptr() } else { 0 })
                        .ptr(sp.ptr())
                        .ptr(qq.xq.ptr)
                        .ptr(qq.xs.ptr)
                        .ptr(qq.xsum.ptr);
                    d.go(Kernel::AttnCombineQ, cgrid, 32, 0, args);
                    let what = format!("attn_combine_q gated={gated}, {what}");
                    let (gaq, quants) = (d.read::<f32>(&aq, &what), d.read_quants(&qq, &what));
                    let (want_a, want_q) = if gated {
                        let (ab, qs) = (d.guarded_from(&ga), d.quants(n_tok, aw));
                        let args = KArgs::new().ptr(ab.ptr).ptr(gd.ptr()).int(aw).ptr(sp.ptr());
                        d.ewq(Kernel::SigmoidGateQ, args, &qs, aw, n_tok);
                        (d.read::<f32>(&ab, &what), d.read_quants(&qs, &what))
                    } else {
                        (
                            ga.clone(),
                            d.read_quants(&d.quant_a16(a.ptr, aw, n_tok), &what),
                        )
                    };
                    same_f32(&gaq, &want_a, &what);
                    same_quants(&quants, &want_q, &what);
                    same_quants(&quants, &cpu_a16(&gaq, aw), &format!("{what} (CPU)"));
                }
                eprintln!("{what}: fused combines ok");
            }
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
