//! The device test harness shared by `cuda_kernels.rs` and `cuda_attention.rs`: the device
//! (or a loud skip without one), guarded device buffers whose sentinel words catch any write
//! outside an output, launches as the engine makes them, seeded inputs, and the comparisons
//! (bit-exact, or within a tolerance of a row's scale). Each test crate uses a subset.
#![allow(dead_code)]

use std::fmt::Debug;

use bytemuck::{Pod, Zeroable};
use muser_cuda::launch::{launch, launch_cluster, Dims};
use muser_cuda::{DeviceBuffer, Gpu, KArgs, Kernel, Math, Module, Registry};
use muser_quant::a16::{self, BlockA16};

pub const GUARD: usize = 256; // 4-byte words each side of every output
pub const SENTINEL: u32 = 0x7FC0_DEAD; // a NaN: an unwritten output never passes for a value
pub const KV_SENTINEL: u16 = 0x7E55; // an f16 NaN in every cache row nobody may write
pub const NORM_THREADS: usize = 1024; // NORM_THREADS in norm.cu
pub const EW_THREADS: usize = 256; // EW_THREADS in cuda/forward.rs
pub const SPARE: usize = 1; // grid token rows beyond StepParams.n_tok

/// The device and its kernels (`None`, loudly, without a CUDA device).
pub struct Dev {
    pub gpu: Gpu,
    pub reg: Registry,
}

pub fn device() -> Option<Dev> {
    if !matches!(Gpu::probe(), Ok(Some(_))) {
        eprintln!("skipping: no CUDA device");
        return None;
    }
    let gpu = Gpu::open(0).expect("open GPU");
    // The engine's modules and the f16 route's tensor-core attention (attn_h16.cu).
    let mut modules = Module::ENGINE.to_vec();
    modules.push(Module::AttnH16);
    let reg = Registry::build_modules(&gpu, &modules).expect("registry");
    Some(Dev { gpu, reg })
}

/// A device buffer between two guards; every word starts as the sentinel.
pub struct Guarded {
    pub buf: DeviceBuffer,
    pub ptr: u64,
    pub words: usize,
}

/// The A16 outputs of a kernel, guarded.
pub struct DevQuants {
    pub xq: Guarded,
    pub xs: Guarded,
    pub xsum: Guarded,
}

impl Dev {
    pub fn guarded(&self, bytes: usize) -> Guarded {
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
    pub fn guarded_from<T: Pod>(&self, init: &[T]) -> Guarded {
        let g = self.guarded(std::mem::size_of_val(init));
        self.gpu.upload(g.ptr, init).expect("upload");
        g
    }

    /// Read a guarded buffer back, asserting both guards are intact.
    pub fn read<T: Pod>(&self, g: &Guarded, what: &str) -> Vec<T> {
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
    pub fn input<T: Copy>(&self, data: &[T]) -> DeviceBuffer {
        let bytes = std::mem::size_of_val(data);
        let buf = self.gpu.alloc(bytes + 256, "test input").expect("alloc");
        self.gpu.upload(buf.ptr(), data).expect("upload");
        buf
    }

    /// `StepParams` of `n_tok` tokens of sequence 0 from `pos0` on the device.
    pub fn step(&self, pos0: usize, n_tok: usize) -> DeviceBuffer {
        self.input(muser_cuda::StepParams::single(0, pos0, n_tok).words())
    }

    pub fn quants(&self, n_tok: usize, width: usize) -> DevQuants {
        DevQuants {
            xq: self.guarded(n_tok * width * 2),
            xs: self.guarded(n_tok * width / 32 * 4),
            xsum: self.guarded(n_tok * width / 32 * 4),
        }
    }

    pub fn read_quants(&self, d: &DevQuants, what: &str) -> Quants {
        let (q, d, sum) = (&d.xq, &d.xs, &d.xsum);
        Quants {
            q: self.read(q, what),
            d: self.read(d, what),
            sum: self.read(sum, what),
        }
    }

    /// Launch `k` (strict math) on the main stream: grid [x, y, z], `block` threads, `smem`
    /// bytes of dynamic shared memory.
    pub fn go(&self, k: Kernel, grid: [usize; 3], block: usize, smem: usize, args: KArgs) {
        let dims = Dims {
            grid: (grid[0] as u32, grid[1] as u32, grid[2] as u32),
            block: block as u32,
            smem: smem as u32,
        };
        launch(self.reg.get(k, Math::Strict), dims, self.gpu.stream(), args)
            .unwrap_or_else(|e| panic!("launch {}: {e}", k.symbol()));
    }

    /// [`Dev::go`] as thread-block clusters of `cluster` consecutive blocks along x.
    pub fn go_cluster(&self, k: Kernel, grid: [usize; 3], block: usize, cluster: u32, args: KArgs) {
        let dims = Dims {
            grid: (grid[0] as u32, grid[1] as u32, grid[2] as u32),
            block: block as u32,
            smem: 0,
        };
        launch_cluster(
            self.reg.get(k, Math::Strict),
            dims,
            cluster,
            self.gpu.stream(),
            args,
        )
        .unwrap_or_else(|e| panic!("launch {}: {e}", k.symbol()));
    }

    /// quant_a16 (the unfused A16 quantization, as the engine launches it) of `n_tok` rows of
    /// `width` values at `x`.
    pub fn quant_a16(&self, x: u64, width: usize, n_tok: usize) -> DevQuants {
        let q = self.quants(n_tok, width);
        let args = KArgs::new().ptr(x).int(width).int(width).int(n_tok);
        self.ewq(Kernel::QuantA16, args, &q, width, n_tok); // the same launch shape
        q
    }

    /// A fused element-wise + A16 kernel as the engine launches it (`ewq`): one warp per group
    /// of 32, the quantization buffers appended to `args`.
    pub fn ewq(&self, k: Kernel, args: KArgs, q: &DevQuants, width: usize, n_tok: usize) {
        let args = args.ptr(q.xq.ptr).ptr(q.xs.ptr).ptr(q.xsum.ptr);
        let grid = [(width / 32).div_ceil(8), n_tok + SPARE, 1];
        self.go(k, grid, 256, 0, args);
    }
}

/// Deterministic pseudo-random values in [lo, hi) (LCG).
pub fn rand_vec(n: usize, seed: u64, lo: f32, hi: f32) -> Vec<f32> {
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
pub fn same_by<T: Copy + Debug, K: PartialEq>(got: &[T], want: &[T], key: fn(T) -> K, what: &str) {
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

pub fn same<T: Copy + Debug + PartialEq>(got: &[T], want: &[T], what: &str) {
    same_by(got, want, |v| v, what);
}

pub fn same_f32(got: &[f32], want: &[f32], what: &str) {
    same_by(got, want, f32::to_bits, what);
}

/// `|got - want| <= tol * scale(i)` for every element.
pub fn close(got: &[f32], want: &[f32], tol: f64, scale: impl Fn(usize) -> f64, what: &str) {
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
pub fn row_max(want: &[f32], row: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(want.len());
    for r in want.chunks(row) {
        let m = r.iter().fold(0f64, |m, &v| m.max(f64::from(v).abs()));
        out.extend(std::iter::repeat_n(m, r.len()));
    }
    out
}

/// A16 outputs of `n_tok` rows: quants, scales (bits) and quant sums.
#[derive(Debug, Default)]
pub struct Quants {
    pub q: Vec<i16>,
    pub d: Vec<u32>,
    pub sum: Vec<i32>,
}

/// `muser_quant::a16` of every `width`-long row, in the device layout.
pub fn cpu_a16(x: &[f32], width: usize) -> Quants {
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

pub fn same_quants(got: &Quants, want: &Quants, what: &str) {
    same(&got.q, &want.q, &format!("{what}: A16 quants"));
    same(&got.d, &want.d, &format!("{what}: A16 scales (bits)"));
    same(&got.sum, &want.sum, &format!("{what}: A16 sums"));
}
