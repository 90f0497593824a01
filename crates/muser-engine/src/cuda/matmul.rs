//! The matmul dispatch of a step: which kernel multiplies one weight matrix by a step's
//! activations (`mv`: per activation format, token count and packed rows, each choice's
//! kernel from the typed registry), the activation quantization that feeds it (`quantize`,
//! A16 or A8 into the shared buffers `xq` / `xs` / `xsum`, f16 into the f16 route's), and
//! `project` — one quantization,
//! then every projection of it as parallel graph branches. The launch sequence that calls them
//! is `forward.rs`.

use muser_cuda::launch::{launch, launch_cluster, A16Matmul, Dims};
use muser_cuda::{CudaError, KArgs, Kernel, MmwSplit, PackedPlan, Registry, MMV_PAIR_MAX_TOKENS};

use super::weights::{A8OneToken, DevMatrix, TypeKernels};
use super::{Acts, BatchMm, CudaSession};

use muser_cuda::Stream;

/// Warps per block of the f32-route matvec kernels (`MV_WARPS` in matvec.cu); the A16 kernels'
/// count is the registry's `mva_warps`.
const MV_WARPS: u32 = 4;

impl<'m> CudaSession<'m> {
    /// `y[t] = m · x[t]` for `n` tokens; `x`, `y` are (device pointer, row stride in f32).
    /// With A16 / A8 activations (`acts`: the route's, or the attention projections' —
    /// `CudaOptions::qkv`) `x` must already be quantized into the activation buffers in that
    /// format (`quantize`). `packed`: the tokens are packed decode rows of several sequences.
    /// `alone`: no graph branch runs beside this matmul (the f16 route's split tiles may use
    /// their scratch).
    #[allow(clippy::too_many_arguments)]
    fn mv(
        &self,
        s: Stream,
        m: &DevMatrix,
        (x, ldx): (u64, usize),
        (y, ldy): (u64, usize),
        n: usize,
        packed: bool,
        acts: Acts,
        alone: bool,
    ) -> Result<(), CudaError> {
        if acts == Acts::F16 {
            return self.mv_h16(s, m, (y, ldy), n, alone);
        }
        let ks = m.kernels().expect("checked at upload");
        if acts == Acts::A8 {
            return self.mv_a8(s, m, ks, (y, ldy), n, packed);
        }
        let a16 = acts == Acts::A16;
        let packed_mm = packed && n > 1 && a16 && self.opts.batch_mm == BatchMm::Packed;
        if let Some((km, kpair)) = ks
            .a16_mmv
            .filter(|_| packed_mm && n >= self.opts.mmv_min && Registry::mmv_fits(m.n_in))
        {
            // All rows (<= MAX_BATCH = 8 token columns) in one tensor-core launch; at most 4
            // on the paired tiles.
            let args = self.quant_args(m, 0, (y, ldy), n, Acts::A16);
            if self.opts.mmv_pair && n <= MMV_PAIR_MAX_TOKENS {
                return launch(
                    self.f(kpair),
                    self.reg.mmv_pair_dims(m.n_out, m.n_in),
                    s,
                    args,
                );
            }
            return launch(self.f(km), self.reg.mmv_dims(m.n_out, m.n_in), s, args);
        }
        if let Some(kp) = ks.a16_packed.filter(|_| packed_mm) {
            let plan = |nt| self.reg.packed_plan(m.n_out, m.n_in, nt);
            return self.packed_rows(s, m, kp, plan, (y, ldy), n, Acts::A16);
        }
        if let Some((ks_staged, ks_pipe)) = ks
            .a16_smem
            .zip(ks.a16_pipe)
            .filter(|_| a16 && n == 1 && self.opts.pipe)
        {
            // The pipelined one-token kernel, staged where its shared memory fits
            // (`Registry::t1_plan`; wider inputs take the unstaged twin — same numbers).
            let plan = self.reg.t1_plan(ks_pipe, m.n_out, m.n_in, self.opts.xsmem);
            let kern = if plan.staged { ks_staged } else { ks_pipe };
            return launch(
                self.f(kern),
                plan.dims,
                s,
                self.quant_args(m, 0, (y, ldy), 1, Acts::A16),
            );
        }
        let mmq = ks.a16_mmq.filter(|_| a16 && n > 1 && self.opts.mmq);
        let (k, nt) = match (n, a16) {
            (1, true) => (ks.a16_t1, 1),
            (_, true) => (mmq.unwrap_or(ks.a16_t8), 8),
            (1, false) => (ks.t1.ok_or_else(|| f32_layout(m))?, 1),
            (_, false) => (ks.t8.ok_or_else(|| f32_layout(m))?, 8),
        };
        let warps = if a16 { self.reg.mva_warps } else { MV_WARPS };
        let rows_per_block = if a16 && nt == 1 {
            warps * self.reg.mva_rows
        } else {
            warps
        };
        let dims = if mmq.is_some() {
            self.reg.mmq_dims(m.n_out, n)
        } else {
            Dims {
                grid: (
                    (m.n_out as u32).div_ceil(rows_per_block),
                    (n as u32).div_ceil(nt),
                    1,
                ),
                block: 32 * warps,
                smem: 0,
            }
        };
        let args = if a16 {
            self.quant_args(m, 0, (y, ldy), n, Acts::A16)
        } else {
            KArgs::new()
                .ptr(m.ptr)
                .u64(m.row_bytes as u64)
                .ptr(x)
                .int(ldx)
                .ptr(y)
                .int(ldy)
                .int(m.n_in)
                .int(m.n_out)
                .int(n)
        };
        launch(self.f(k), dims, s, args)
    }

    /// `mv` on the A8 route (`MUSER_CUDA_ACTS=a8`; `cuda::a8` checked the weights and
    /// options): one token on the pipelined kernel (staged where it fits) or, with `mvr`, the
    /// register-resident one where K allows, or the plain kernel of formats without either;
    /// packed decode rows on the tensor cores from `mmv_min` rows, else on the packed kernels
    /// (launches of at most `batch_nt` rows), as A16's;
    /// several tokens on the tensor cores or the eight-token kernel.
    fn mv_a8(
        &self,
        s: Stream,
        m: &DevMatrix,
        ks: TypeKernels,
        (y, ldy): (u64, usize),
        n: usize,
        packed: bool,
    ) -> Result<(), CudaError> {
        let k8 = ks.a8.ok_or_else(|| {
            CudaError::Invalid(format!("a {:?} matrix reached the A8 route", m.ty))
        })?;
        if n == 1 {
            if let Some((kr, dims)) = k8
                .mvr
                .zip(self.reg.mvr_dims(m.n_out, m.n_in))
                .filter(|_| self.opts.mvr)
            {
                return launch(
                    self.f(kr),
                    dims,
                    s,
                    self.quant_args(m, 0, (y, ldy), 1, Acts::A8),
                );
            }
            return match k8.t1 {
                A8OneToken::Pipe(staged, unstaged) => {
                    let plan = self.reg.t1_plan(unstaged, m.n_out, m.n_in, self.opts.xsmem);
                    let kern = if plan.staged { staged } else { unstaged };
                    launch(
                        self.f(kern),
                        plan.dims,
                        s,
                        self.quant_args(m, 0, (y, ldy), 1, Acts::A8),
                    )
                }
                A8OneToken::Plain(k1) => {
                    let warps = self.reg.mva_warps;
                    let dims = Dims {
                        grid: ((m.n_out as u32).div_ceil(warps * self.reg.mva_rows), 1, 1),
                        block: 32 * warps,
                        smem: 0,
                    };
                    launch(
                        self.f(k1),
                        dims,
                        s,
                        self.quant_args(m, 0, (y, ldy), 1, Acts::A8),
                    )
                }
            };
        }
        let packed_mm = packed && self.opts.batch_mm == BatchMm::Packed;
        if let Some(km) = k8
            .mmv
            .filter(|_| packed_mm && n >= self.opts.mmv_min && Registry::mmv_fits(m.n_in))
        {
            // All rows (<= MAX_BATCH = 8 token columns) in one tensor-core launch, as A16's.
            return launch(
                self.f(km),
                self.reg.mmv_dims(m.n_out, m.n_in),
                s,
                self.quant_args(m, 0, (y, ldy), n, Acts::A8),
            );
        }
        if let Some(kp) = k8.packed.filter(|_| packed_mm) {
            let plan = |nt| self.reg.packed_plan_a8(m.n_out, m.n_in, nt);
            return self.packed_rows(s, m, kp, plan, (y, ldy), n, Acts::A8);
        }
        let args = self.quant_args(m, 0, (y, ldy), n, Acts::A8);
        if let Some(kmmq) = k8.mmq.filter(|_| self.opts.mmq) {
            return launch(self.f(kmmq), self.reg.mmq_dims(m.n_out, n), s, args);
        }
        let dims = Dims {
            grid: (
                (m.n_out as u32).div_ceil(self.reg.mva_warps),
                (n as u32).div_ceil(8),
                1,
            ),
            block: 32 * self.reg.mva_warps,
            smem: 0,
        };
        launch(self.f(k8.t8), dims, s, args)
    }

    /// `mv` on the f16 route (`MUSER_CUDA_ACTS=f16`; `cuda::h16` checked the weights): up to 8
    /// tokens (one, packed rows, short chunks) on `mvh_*`, more on the prefill tiles `mmt_*` (or
    /// rows `mmh_*` for matrices of few rows) —
    /// the same bits per output either way — from the f16 activation buffers.
    fn mv_h16(
        &self,
        s: Stream,
        m: &DevMatrix,
        (y, ldy): (u64, usize),
        n: usize,
        alone: bool,
    ) -> Result<(), CudaError> {
        let (fmt, exp) = m.h16.ok_or_else(|| {
            CudaError::Invalid(format!(
                "a {:?} matrix not in an f16 layout reached the f16 route",
                m.ty
            ))
        })?;
        // Prefill: shared-memory tiles from 128 row groups (a tile is 8 groups, and needs enough
        // blocks); rows below (K / V: 16 groups). H200, mvh_bench at 784bef7, 512 tokens: Q
        // (256 groups) tiles 161.5 vs rows 298.9 µs, FFN up 735.9 vs 1526.1; K rows 20.1 vs
        // tiles 84.6, V 25.3 vs 96.6. The same bits either way.
        let tiles = Self::h16_tiles(m, n);
        let (kern, dims) = if n <= 8 {
            self.reg.mvh_plan(fmt, m.n_out, m.n_in, n)
        } else if tiles {
            self.reg.mmt_plan(fmt, m.n_out, n)
        } else {
            self.reg.mmh_plan(fmt, m.n_out, n)
        };
        let h = &self.b.h16;
        let split = self.h16_split(m, n, alone);
        // The warpgroup tiles read the activations in natural order (`project` wrote XN).
        let xh = if self.h16_reads_xn(m, n, alone) {
            h.xn.ptr()
        } else {
            h.xh.ptr()
        };
        let args = KArgs::new()
            .ptr(m.ptr)
            .int(m.n_out)
            .int(m.n_in)
            .ptr(xh)
            .ptr(h.xsum.ptr())
            .ptr(h.xsum16.ptr())
            .ptr(h.xinv.ptr())
            .f32(2f32.powi(-exp))
            .ptr(y)
            .int(ldy)
            .int(n);
        if let Some(sp) = split {
            // The split warpgroup tiles: each chain's sums into the scratch, then the fold.
            launch(self.f(sp.kernel), sp.dims, s, args.ptr(h.split.ptr()))?;
            let fold = sp.fold_args(
                h.split.ptr(),
                m.n_in,
                m.n_out,
                n,
                h.xinv.ptr(),
                2f32.powi(-exp),
                y,
                ldy,
            );
            return launch(self.f(Kernel::MmwFold), sp.fold_dims, s, fold);
        }
        if n <= 8 {
            if let Some((twin, dims, c)) = self.reg.mvh_cluster_plan(kern, dims) {
                return launch_cluster(self.f(twin), dims, c, s, args);
            }
        }
        launch(self.f(kern), dims, s, args)
    }

    /// The FFN's gate and up projections of `n` decode tokens (`x`, `k` values a row) in one
    /// launch (`mvh_glu_*`, `MUSER_CUDA_H16_GLU=1`) that also applies the SwiGLU — writing it
    /// to `y` — and folds each token's largest magnitude into the row-maxima cells `m`; the
    /// same bits as the two `mvh` launches and `swiglu_m` (strict math: the caller's check).
    /// Queues nothing and returns false where no such launch exists (more than 8 tokens, a
    /// chain count or layout pair without a kernel).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn glu_h16(
        &self,
        s: Stream,
        x: (u64, usize),
        k: usize,
        n: usize,
        (gate, up): (&DevMatrix, &DevMatrix),
        (y, ldy): (u64, usize),
        prequantized: bool,
        m: u64,
    ) -> Result<bool, CudaError> {
        let (Some((fg, eg)), Some((fu, eu))) = (gate.h16, up.h16) else {
            return Ok(false);
        };
        if fg != fu || gate.n_out != up.n_out || gate.n_in != up.n_in {
            return Ok(false);
        }
        let Some((kernel, dims)) = self.reg.mvh_glu_plan(fg, gate.n_out, gate.n_in, n) else {
            return Ok(false);
        };
        if !prequantized {
            self.quantize(s, x, k, n, Acts::F16)?;
        }
        let args = (self.b.h16)
            .append(
                KArgs::new()
                    .ptr(gate.ptr)
                    .ptr(up.ptr)
                    .int(gate.n_out)
                    .int(gate.n_in),
            )
            .f32(2f32.powi(-eg))
            .f32(2f32.powi(-eu))
            .ptr(y)
            .int(ldy)
            .int(n)
            .ptr(m);
        launch(self.f(kernel), dims, s, args)?;
        Ok(true)
    }

    /// Whether the f16 route runs `n` tokens through `m` on the prefill tiles (else decode
    /// kernels or prefill rows).
    fn h16_tiles(m: &DevMatrix, n: usize) -> bool {
        n > 8 && m.n_out / 16 >= 128
    }

    /// The split warpgroup tiles' plan for `n` tokens through `m`, where they apply (`alone`: no
    /// graph branch beside the matmul, so their scratch is free).
    fn h16_split(&self, m: &DevMatrix, n: usize, alone: bool) -> Option<MmwSplit> {
        let (fmt, _) = m.h16?;
        (Self::h16_tiles(m, n) && alone)
            .then(|| self.reg.mmw_split_plan(fmt, m.n_out, n))
            .flatten()
    }

    /// Whether `n` tokens through `m` read the f16 activations in natural order (XN: the
    /// warpgroup tiles, whole or split).
    fn h16_reads_xn(&self, m: &DevMatrix, n: usize, alone: bool) -> bool {
        Self::h16_tiles(m, n)
            && (self.reg.mmt_natural(m.n_out) || self.h16_split(m, n, alone).is_some())
    }

    /// `n` packed decode rows on the packed kernels `kp` ((staged, unstaged) per 2, 4, 8 rows),
    /// each launch planned by `plan(nt)`: launches of at most `batch_nt` rows (default 4: two
    /// four-row passes beat one eight-row pass, docs/cuda.md), each NT = the next of 2, 4, 8 —
    /// a last single row too takes the two-row kernel (rows past n compute on spare buffer rows
    /// nobody reads: the buffers hold MAX_BATCH rows). `acts`: the kernels' activation format.
    #[allow(clippy::too_many_arguments)]
    fn packed_rows(
        &self,
        s: Stream,
        m: &DevMatrix,
        kp: [(Kernel, Kernel); 3],
        plan: impl Fn(usize) -> PackedPlan,
        (y, ldy): (u64, usize),
        n: usize,
        acts: Acts,
    ) -> Result<(), CudaError> {
        let mut r0 = 0;
        while r0 < n {
            let nt = (n - r0).min(self.opts.batch_nt).next_power_of_two().max(2);
            let (staged, unstaged) = kp[nt.trailing_zeros() as usize - 1];
            let plan = plan(nt);
            let kern = if plan.staged { staged } else { unstaged };
            launch(
                self.f(kern),
                plan.dims,
                s,
                self.quant_args(m, r0, (y, ldy), nt, acts),
            )?;
            r0 += nt;
        }
        Ok(())
    }

    /// A quantized-activation matmul's arguments (A16 or A8): `m` times the activation
    /// buffers' rows `r0 .. r0 + n_tok` into the rows of `y` (row stride `ldy` f32) from the
    /// same offset; `acts` says the quants' width.
    fn quant_args(
        &self,
        m: &DevMatrix,
        r0: usize,
        (y, ldy): (u64, usize),
        n_tok: usize,
        acts: Acts,
    ) -> KArgs {
        let (b, k) = (&self.b, m.n_in);
        let quant_bytes = if acts == Acts::A8 { 1 } else { 2 };
        A16Matmul {
            w: m.ptr,
            row_bytes: m.row_bytes,
            xq: b.xq.ptr() + (r0 * k * quant_bytes) as u64,
            xs: b.xs.ptr() + (r0 * (k / 32) * 4) as u64,
            xsum: b.xsum.ptr() + (r0 * (k / 32) * 4) as u64,
            k,
            y: y + (r0 * ldy * 4) as u64,
            ldy,
            n_out: m.n_out,
            n_tok,
        }
        .args()
    }

    /// The f16 route's activation step for `n` rows of `k` values (row stride `ldx`): `act_h16`
    /// (each block scans the row for its largest magnitude) or, where the producer folded the
    /// rows' largest magnitudes into `rowmax`, `act_h16_m` (no rescan; the same bits).
    pub(super) fn act_h16(
        &self,
        s: Stream,
        (x, ldx): (u64, usize),
        k: usize,
        n: usize,
        rowmax: Option<u64>,
    ) -> Result<(), CudaError> {
        let args = (self.b.h16).append(KArgs::new().ptr(x).int(ldx).int(k).int(n));
        let (kernel, args) = match rowmax {
            Some(m) => (Kernel::ActH16M, args.ptr(m)),
            None => (Kernel::ActH16, args),
        };
        launch(self.f(kernel), Registry::act_h16_dims(n, k), s, args)
    }

    /// Quantize `n` rows of `k` activations (row stride `ldx`) into the activation buffers
    /// in the format `acts` (A16 or A8; the f32 route reads activations directly).
    fn quantize(
        &self,
        s: Stream,
        (x, ldx): (u64, usize),
        k: usize,
        n: usize,
        acts: Acts,
    ) -> Result<(), CudaError> {
        let kern = match acts {
            Acts::A16 => Kernel::QuantA16,
            Acts::A8 => Kernel::QuantA8,
            Acts::F16 => return self.act_h16(s, (x, ldx), k, n, None),
            _ => return Ok(()),
        };
        let b = &self.b;
        launch(
            self.f(kern),
            Dims {
                grid: ((k as u32 / 32).div_ceil(8), n as u32, 1),
                block: 256,
                smem: 0,
            },
            s,
            KArgs::new()
                .ptr(x)
                .int(ldx)
                .int(k)
                .int(n)
                .ptr(b.xq.ptr())
                .ptr(b.xs.ptr())
                .ptr(b.xsum.ptr()),
        )
    }

    /// Quantize `x` once, then run every `(matrix, y, ldy)` projection of it — as parallel
    /// graph branches (or serially, `MUSER_CUDA_SERIAL=1`).
    /// `prequantized`: the activation buffers already hold `x` in the format `acts` (a fused
    /// kernel wrote them).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn project(
        &self,
        x: (u64, usize),
        k: usize,
        n: usize,
        outs: &[(&DevMatrix, u64, usize)],
        prequantized: bool,
        packed: bool,
        acts: Acts,
    ) -> Result<(), CudaError> {
        self.project_late(x, k, n, outs, prequantized, packed, acts, 0)
    }

    /// [`Self::project`] with the last `late` projections left running past the return
    /// (`graph::Fork::run_late`): the caller joins them (`self.fork.join_late`) before anything
    /// reads their outputs or rewrites the activations they read.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn project_late(
        &self,
        x: (u64, usize),
        k: usize,
        n: usize,
        outs: &[(&DevMatrix, u64, usize)],
        prequantized: bool,
        packed: bool,
        acts: Acts,
        late: usize,
    ) -> Result<(), CudaError> {
        if !prequantized {
            self.quantize(self.gpu.stream(), x, k, n, acts)?;
        }
        if acts == Acts::F16
            && outs
                .iter()
                .any(|(m, _, _)| self.h16_reads_xn(m, n, outs.len() == 1))
        {
            // The warpgroup tiles' input in natural order, once before the branches fork.
            let h = &self.b.h16;
            launch(
                self.f(Kernel::H16Natural),
                Registry::h16_natural_dims(n, k),
                self.gpu.stream(),
                KArgs::new().ptr(h.xh.ptr()).int(k).int(n).ptr(h.xn.ptr()),
            )?;
        }
        type Branch<'a> = Box<dyn FnMut(Stream) -> Result<(), CudaError> + 'a>;
        let mut branches: Vec<Branch<'_>> = outs
            .iter()
            .map(|&(m, y, ldy)| {
                Box::new(move |st: Stream| {
                    self.mv(st, m, x, (y, ldy), n, packed, acts, outs.len() == 1)
                }) as Branch<'_>
            })
            .collect();
        let mut refs: Vec<&mut dyn FnMut(Stream) -> Result<(), CudaError>> = branches
            .iter_mut()
            .map(|b| b.as_mut() as &mut dyn FnMut(Stream) -> Result<(), CudaError>)
            .collect();
        self.fork
            .run_late(&self.gpu, self.opts.mode, &mut refs, late)
    }
}

/// The f32 route reads GGUF's layouts only (the session refuses Q6_K-P with it).
fn f32_layout(m: &DevMatrix) -> CudaError {
    CudaError::Invalid(format!(
        "a {:?} matrix in Q6_K-P reached the f32-activation route",
        m.ty
    ))
}
