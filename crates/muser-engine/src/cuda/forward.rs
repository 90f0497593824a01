//! The forward pass on the device: the launch sequence of one step (embedding → layers →
//! logits), the decode graph, and the host side of a step (upload ids/position, download rows;
//! the staging itself is host_io.rs).
//! Every launch names its kernel through the typed registry; the matmuls go through
//! `matmul.rs` (`project`).

use muser_cuda::launch::{launch, launch_cluster, AttnShape, Dims, SMEM_DEFAULT_MAX};
use muser_cuda::profile::PhaseProfiler;
use muser_cuda::step_switches::combine_cluster;
use muser_cuda::{CudaError, Graph, KArgs, Kernel, Math, Registry, StepParams, MAX_BATCH};

use super::host_io::Land;
use super::prefetch::PfPoint;
use super::weights::{kernels_for, DevLayer, DevMatrix};
use super::{bufs_rows, Acts, CudaSession};
use crate::config::{FfnActivation, RopeMode};
use crate::EngineError;

use muser_cuda::Stream;

/// Threads of the norm kernels (`NORM_THREADS` in norm.cu).
const NORM_THREADS: u32 = 1024;
const EW_THREADS: u32 = 256;

impl<'m> CudaSession<'m> {
    /// Run one step — a chunk of one sequence's tokens, or packed decode rows (`sp` says which
    /// and where) — and land its last `rows` logit rows where `land` says. The caller advances
    /// the positions. The stream is idle when this returns, also on an error (host_io.rs).
    pub(super) fn step(
        &mut self,
        tokens: &[u32],
        sp: StepParams,
        rows: usize,
        land: Land<'_>,
    ) -> Result<(), EngineError> {
        self.gpu.bind()?;
        let r = self.step_queued(tokens, sp, rows, land);
        // Nothing queued may outlive the step where the staging is rewritten by the next one
        // (not after a deadline: the device is not answering, and the error says so).
        let timed_out = matches!(r, Err(EngineError::Cuda(CudaError::Deadline { .. })));
        if r.is_err() && self.stage.is_some() && !timed_out {
            let _ = self.gpu.wait("failed step");
        }
        r
    }

    fn step_queued(
        &mut self,
        tokens: &[u32],
        sp: StepParams,
        rows: usize,
        land: Land<'_>,
    ) -> Result<(), EngineError> {
        let n = tokens.len();
        debug_assert_eq!(n, sp.n_tok());
        let packed = sp.per_row();
        let dsts = (self.b.tokens.ptr(), self.b.step.ptr());
        let staged = match &mut self.stage {
            Some(st) => st.upload(&self.gpu, tokens, &sp, dsts)?,
            None => false,
        };
        if !staged {
            self.gpu.upload(dsts.0, tokens)?;
            self.gpu.upload(dsts.1, sp.words())?;
        }
        // Graphs: single-token decode, and packed decode steps (one graph per row count; the
        // one-token graph serves both kinds of one-row step: the kernels are the same).
        let use_graph = self.opts.graphs
            && rows == n
            && (n == 1 || (packed && n <= MAX_BATCH))
            && !self.profile.enabled();
        let label = if use_graph {
            "decode graph"
        } else {
            "prefill step"
        };
        if use_graph {
            if self.graphs[n].is_none() {
                let g = Graph::capture(&self.gpu, "decode step", || {
                    self.enqueue(n, n, packed, &mut PhaseProfiler::default())
                })?;
                self.graphs[n] = Some(g);
            }
            if let Some(c) = &mut self.clock {
                c.start(self.gpu.stream())?;
            }
            if let Some(g) = &self.graphs[n] {
                g.launch()?;
            }
            if let Some(c) = &mut self.clock {
                c.end(self.gpu.stream())?;
            }
        } else {
            if let Some(c) = &mut self.clock {
                c.start(self.gpu.stream())?;
            }
            let mut prof = std::mem::take(&mut self.profile);
            let r = self.enqueue(n, rows, packed, &mut prof);
            let r = match (r, &mut self.clock) {
                (Ok(()), Some(c)) => c.end(self.gpu.stream()),
                (r, _) => r,
            };
            let label_count = 1 + 5 * self.model.config.n_layer + usize::from(rows > 0);
            let r2 = r.and_then(|()| {
                self.gpu.wait(label)?;
                prof.end(label_count)
            });
            self.profile = prof;
            r2?;
        }
        let n_vocab = self.model.config.n_vocab;
        match land {
            Land::Staged(at) if rows > 0 => {
                let st = self.stage.as_mut().ok_or_else(|| {
                    CudaError::Invalid("logit rows staged without the staging".into())
                })?;
                st.download(&self.gpu, self.b.logits.ptr(), at, rows)?;
                // The step's one wait: the graph, then the rows.
                self.gpu.wait(label)?;
            }
            // (Every path below has waited: the prefill path after its launches, `download`
            // after its copy; a graph step always has rows.)
            Land::Staged(_) => {}
            Land::Vec(out) if rows > 0 => {
                let start = out.len();
                out.resize(start + rows * n_vocab, 0.0);
                self.gpu
                    .download(&mut out[start..], self.b.logits.ptr(), label)?;
            }
            Land::Vec(_) => {}
        }
        if let Some(c) = &mut self.clock {
            c.add()?;
        }
        Ok(())
    }

    pub(super) fn f(&self, k: Kernel) -> &muser_cuda::CudaFunction {
        self.reg.get(k, Math::Strict)
    }

    fn ew(&self, k: Kernel, s: Stream, args: KArgs, elems: usize) -> Result<(), CudaError> {
        let dims = Dims {
            grid: ((elems as u32).div_ceil(EW_THREADS), 1, 1),
            block: EW_THREADS,
            smem: 0,
        };
        launch(self.reg.get(k, self.opts.act_math), dims, s, args)
    }

    /// Queue one step of `n` tokens (ids and StepParams already on the device) producing the
    /// last `rows` logit rows; `packed`: the tokens are packed decode rows of several
    /// sequences (decode's attention kernel per row, the packed matmuls).
    fn enqueue(
        &self,
        n: usize,
        rows: usize,
        packed: bool,
        prof: &mut PhaseProfiler,
    ) -> Result<(), CudaError> {
        let c = &self.model.config;
        let b = &self.b;
        let w = &self.w;
        let s = self.gpu.stream();
        let e = c.n_embd;
        let (qw, kvw) = (c.q_width(), c.kv_width());
        let vw = c.n_head_kv * c.head_dim_v;
        let aw = c.n_head * c.head_dim_v;
        let step = b.step.ptr();
        let rows_dims = |threads: u32| Dims {
            grid: (n as u32, 1, 1),
            block: threads,
            smem: 0,
        };
        let fuse = self.opts.fuse;
        // Activation formats: the attention projections' input, and every other matmul's.
        let (qkv_acts, acts) = (self.opts.qkv(), self.opts.acts);
        // The f16 route fuses the residual norm, and the element-wise kernels only with
        // `h16_ew_fused` (their one-block-per-token twins measured slower); it has no twin of the
        // attention combine. Unfused, the projection after the kernel quantizes.
        let fuse_combine = fuse && acts != Acts::F16;
        let fuse_ew = fuse && (acts != Acts::F16 || self.opts.h16_ew_fused);
        prof.begin(s)?;
        // The f16 row maxima (`MUSER_CUDA_H16_ROWMAX`) and the combine's tickets
        // (`MUSER_CUDA_H16_COMBINE_ACT`): every (layer, use) cell starts at 0 (uses: 0 the
        // attention output's maximum, 1 the FFN's, 2 the combine's tickets).
        let rowmax = self.opts.h16_rowmax_on();
        let cap_rows = bufs_rows(&self.opts);
        let rowmax_cell =
            |il: usize, usage: usize| b.h16.rowmax.ptr() + ((il * 3 + usage) * cap_rows * 4) as u64;
        if rowmax {
            self.gpu
                .zero(b.h16.rowmax.ptr(), cap_rows * 3 * c.n_layer * 4)?;
        }
        // The prefetch branch (`MUSER_CUDA_L2_PREFETCH`): layer 0's projections during the
        // embedding and norm, then before each stretch of small kernels the next matmul's.
        if let Some(pf) = &self.prefetch {
            pf.begin();
        }
        if let Some(l0) = w.layers.first() {
            self.prefetch(n, PfPoint::Projections, &qkv_mats(l0))?;
        }
        let kemb = kernels_for(w.token_embd.ty)
            .and_then(|k| k.embed)
            .expect("checked at upload (the token table is in GGUF's layout)");
        launch(
            self.f(kemb),
            rows_dims(256),
            s,
            KArgs::new()
                .ptr(w.token_embd.ptr)
                .u64(w.token_embd.row_bytes as u64)
                .ptr(b.tokens.ptr())
                .ptr(step)
                .ptr(b.x.ptr())
                .int(e),
        )?;
        launch(
            self.f(Kernel::EmbedFinish),
            rows_dims(NORM_THREADS),
            s,
            KArgs::new()
                .ptr(b.x.ptr())
                .int(e)
                .i32(i32::from(c.embd_norm))
                .f32(c.rms_eps)
                .f32(c.embd_scale)
                .ptr(step),
        )?;
        launch(
            self.f(Kernel::RmsnormRows),
            rows_dims(NORM_THREADS),
            s,
            KArgs::new()
                .ptr(b.x.ptr())
                .ptr(w.layers[0].attn_norm)
                .ptr(b.h.ptr())
                .int(e)
                .f32(c.rms_eps)
                .ptr(step),
        )?;
        prof.mark("embed+norm", s)?;

        // Decode (and `MUSER_CUDA_ATTN_MT=0`): one query token per block; prefill: eight (the
        // f32 kernels) or `AttnH16Shape::prefill`'s (the f16 route's tensor-core kernels).
        let prefill_shape = n > 1 && !packed && self.opts.attn_mt;
        let h16_shape = self
            .attn_h16
            .map(|(dec, pre)| if prefill_shape { pre } else { dec });
        let (attn_kernel, attn_dims, attn_bufs) = match h16_shape {
            Some(shape) => (
                shape.kernel,
                shape.dims(self.n_super, c.n_head_kv, n),
                shape.bufs,
            ),
            None => {
                let (kernel, shape) = match (prefill_shape, self.attn_prefill) {
                    (true, Some(shape)) => (Kernel::AttnPartialMt, shape),
                    _ => (
                        Kernel::AttnPartial,
                        AttnShape::decode(self.attn_hpb(), c.head_dim, c.head_dim_v),
                    ),
                };
                let dims = shape.dims(self.n_super, c.n_head, n, c.head_dim, c.head_dim_v);
                assert!(
                    dims.smem as usize <= SMEM_DEFAULT_MAX,
                    "attention tile does not fit 48 KiB of shared memory"
                );
                (kernel, dims, shape.bufs)
            }
        };
        for (il, lw) in w.layers.iter().enumerate() {
            let h = b.h.ptr();
            let mut outs = vec![
                (&lw.wq, b.q.ptr(), qw),
                (&lw.wk, b.k.ptr(), kvw),
                (&lw.wv, b.v.ptr(), vw),
            ];
            if let Some(wg) = &lw.wgate {
                outs.push((wg, b.gate.ptr(), aw));
            }
            // `MUSER_CUDA_GATE_LATE=1`: the attention gate's projection (the last branch) is
            // joined only before the combine, so the rope and the attention need not wait for it.
            let late = usize::from(self.opts.gate_late && lw.wgate.is_some());
            self.project_late((h, e), e, n, &outs, fuse && il > 0, packed, qkv_acts, late)?;
            self.prefetch(n, PfPoint::AttnOutput, &[&lw.wo])?;
            prof.mark("qkv+gate", s)?;
            let kv = &self.kv[il];
            let (inv, mode) = match (&b.rope[il], c.rope_mode) {
                (Some(t), RopeMode::Norm) => (t.ptr(), 1),
                (Some(t), RopeMode::Neox) => (t.ptr(), 2),
                (None, _) => (0, 0),
            };
            let heads = (c.n_head + 2 * c.n_head_kv) as u32;
            launch(
                self.f(Kernel::QkNormRopeKv),
                Dims {
                    grid: (heads.div_ceil(4), n as u32, 1),
                    block: 128,
                    smem: 0,
                },
                s,
                KArgs::new()
                    .ptr(b.q.ptr())
                    .ptr(b.k.ptr())
                    .ptr(b.v.ptr())
                    .ptr(lw.q_norm)
                    .ptr(lw.k_norm)
                    .f32(c.rms_eps)
                    .ptr(inv)
                    .i32(mode)
                    .int(c.n_head)
                    .int(c.n_head_kv)
                    .int(c.head_dim)
                    .int(c.head_dim_v)
                    .ptr(kv.k.ptr())
                    .ptr(kv.v.ptr())
                    .int(kv.cap)
                    .ptr(step),
            )?;
            let window = if c.swa_layers[il] {
                c.sliding_window
            } else {
                0
            };
            // attn_partial / _mt: (…, hd, hd_v, n_super, super_len, Op, Mp, Lp, step, nbuf);
            // attn_h16_*: (…, n_super, super_len, tokens per block, bufs, Op, Mp, Lp, step).
            let args = KArgs::new()
                .ptr(b.q.ptr())
                .ptr(kv.k.ptr())
                .ptr(kv.v.ptr())
                .int(kv.cap)
                .int(window)
                .f32(c.attn_scale)
                .int(c.n_head)
                .int(c.n_head_kv);
            let args = if let Some(shape) = h16_shape {
                args.int(self.n_super)
                    .int(self.opts.attn_super)
                    .int(shape.tokens)
                    .int(attn_bufs)
                    .ptr(b.op.ptr())
                    .ptr(b.mp.ptr())
                    .ptr(b.lp.ptr())
                    .ptr(step)
            } else {
                args.int(c.head_dim)
                    .int(c.head_dim_v)
                    .int(self.n_super)
                    .int(self.opts.attn_super)
                    .ptr(b.op.ptr())
                    .ptr(b.mp.ptr())
                    .ptr(b.lp.ptr())
                    .ptr(step)
                    .int(attn_bufs)
            };
            launch(self.f(attn_kernel), attn_dims, s, args)?;
            // The gate's projection, where it ran late: everything below may read it.
            self.fork.join_late(&self.gpu)?;
            // Fused (the default, MUSER_CUDA_FUSE; strict activation math): combine, gate and quantize
            // in one kernel. Otherwise combine, then the gate (fused with the quantization or
            // not), or the projection quantizes.
            let fused_combine = fuse_combine && self.opts.act_math == Math::Strict;
            // The f16 row maxima: the combine (and the gate, strict math) folds them.
            let combine_m = rowmax && self.opts.act_math == Math::Strict;
            let combine_args = KArgs::new()
                .ptr(b.op.ptr())
                .ptr(b.mp.ptr())
                .ptr(b.lp.ptr())
                .int(window)
                .int(c.n_head)
                .int(c.head_dim_v)
                .int(self.n_super)
                .int(self.opts.attn_super)
                .ptr(b.a.ptr());
            // One warp per 32-value group of a head's output (the kernel also runs, with the
            // same numbers, on one warp per head: the attention kernel test).
            let combine_dims = Dims {
                grid: (c.n_head as u32, n as u32, 1),
                block: c.head_dim_v as u32,
                smem: 0,
            };
            if fused_combine {
                let gate = lw.wgate.as_ref().map_or(0, |_| b.gate.ptr());
                launch(
                    self.f(self.fused_q(Kernel::AttnCombineQ, acts)),
                    combine_dims,
                    s,
                    combine_args
                        .ptr(gate)
                        .ptr(step)
                        .ptr(b.xq.ptr())
                        .ptr(b.xs.ptr())
                        .ptr(b.xsum.ptr()),
                )?;
            } else if combine_m && self.opts.h16_combine_act_on() {
                // The combine's last block per token writes the f16 activations.
                let gate = lw.wgate.as_ref().map_or(0, |_| b.gate.ptr());
                let args = combine_args
                    .ptr(gate)
                    .ptr(step)
                    .ptr(rowmax_cell(il, 0))
                    .ptr(rowmax_cell(il, 2));
                launch(
                    self.f(Kernel::AttnCombineH16),
                    combine_dims,
                    s,
                    b.h16.append(args),
                )?;
            } else if combine_m && !prefill_shape && self.reg.steps.combine_cl {
                // Decode: the combine and the row's f16 activations as one cluster launch per
                // token (`MUSER_CUDA_COMBINE_CL`, the same bits as the two launches below).
                let (cl, threads) = combine_cluster(c.n_head, c.head_dim_v).ok_or_else(|| {
                    CudaError::Invalid(format!(
                        "MUSER_CUDA_COMBINE_CL: no cluster of at most 8 blocks of 1024 threads \
                         holds {} heads of {} values",
                        c.n_head, c.head_dim_v
                    ))
                })?;
                let gate = lw.wgate.as_ref().map_or(0, |_| b.gate.ptr());
                let dims = Dims {
                    grid: (cl, n as u32, 1),
                    block: threads,
                    smem: 0,
                };
                let args = b.h16.append(combine_args.ptr(gate).ptr(step));
                launch_cluster(self.f(Kernel::AttnCombineH16Cl), dims, cl, s, args)?;
            } else if combine_m {
                let (gate, m) = (
                    lw.wgate.as_ref().map_or(0, |_| b.gate.ptr()),
                    rowmax_cell(il, 0),
                );
                // Decode steps merge deep heads' partials 32 at a time (`MUSER_CUDA_COMBINE_WIDE`,
                // the same bits); prefill keeps the plain kernel (the wide path cost it 1.3%).
                let kernel = if !prefill_shape && self.reg.steps.combine_wide > 0 {
                    Kernel::AttnCombineMWide
                } else {
                    Kernel::AttnCombineM
                };
                launch(
                    self.f(kernel),
                    combine_dims,
                    s,
                    combine_args.ptr(gate).ptr(step).ptr(m),
                )?;
                self.act_h16(s, (b.a.ptr(), aw), aw, n, Some(m))?;
            } else {
                launch(
                    self.f(Kernel::AttnCombine),
                    combine_dims,
                    s,
                    combine_args.ptr(step),
                )?;
            }
            if lw.wgate.is_some() && !fused_combine && !combine_m {
                let gate_args = KArgs::new()
                    .ptr(b.a.ptr())
                    .ptr(b.gate.ptr())
                    .int(aw)
                    .ptr(step);
                if fuse_ew {
                    self.ewq(Kernel::SigmoidGateQ, s, gate_args, aw, n, acts)?;
                } else if rowmax {
                    let m = rowmax_cell(il, 0);
                    self.ew(Kernel::SigmoidGateM, s, gate_args.ptr(m), n * aw)?;
                    self.act_h16(s, (b.a.ptr(), aw), aw, n, Some(m))?;
                } else {
                    self.ew(Kernel::SigmoidGate, s, gate_args, n * aw)?;
                }
            }
            prof.mark("attention", s)?;
            let a_quantized =
                fused_combine || combine_m || ((fuse_ew || rowmax) && lw.wgate.is_some());
            self.project(
                (b.a.ptr(), aw),
                aw,
                n,
                &[(&lw.wo, b.o.ptr(), e)],
                a_quantized,
                packed,
                acts,
            )?;
            self.prefetch(n, PfPoint::GateUp, &[&lw.ffn_gate, &lw.ffn_up])?;
            self.residual_norm(s, n, lw.post_attn_norm, lw.ffn_norm, fuse, acts)?;
            prof.mark("attn out+norm", s)?;
            // The f16 decode FFN's gate, up and SwiGLU in one launch where it applies
            // (`MUSER_CUDA_H16_GLU`, on by default where `h16::check_options` finds the row
            // maxima, strict math and SiLU; decode steps).
            let glu = self.opts.h16_glu_on()
                && self.glu_h16(
                    s,
                    (h, e),
                    e,
                    n,
                    (&lw.ffn_gate, &lw.ffn_up),
                    (b.fg.ptr(), c.n_ff),
                    fuse,
                    rowmax_cell(il, 1),
                )?;
            if glu {
                self.prefetch(n, PfPoint::Down, &[&lw.ffn_down])?;
                self.act_h16(s, (b.fg.ptr(), c.n_ff), c.n_ff, n, Some(rowmax_cell(il, 1)))?;
            } else {
                self.project(
                    (h, e),
                    e,
                    n,
                    &[
                        (&lw.ffn_gate, b.fg.ptr(), c.n_ff),
                        (&lw.ffn_up, b.fu.ptr(), c.n_ff),
                    ],
                    fuse,
                    packed,
                    acts,
                )?;
                self.prefetch(n, PfPoint::Down, &[&lw.ffn_down])?;
                let act = match (c.ffn_activation, fuse_ew, rowmax) {
                    (FfnActivation::Silu, false, false) => Kernel::Swiglu,
                    (FfnActivation::GeluTanh, false, false) => Kernel::Geglu,
                    (FfnActivation::Silu, false, true) => Kernel::SwigluM,
                    (FfnActivation::GeluTanh, false, true) => Kernel::GegluM,
                    (FfnActivation::Silu, true, _) => Kernel::SwigluQ,
                    (FfnActivation::GeluTanh, true, _) => Kernel::GegluQ,
                };
                let act_args = KArgs::new()
                    .ptr(b.fg.ptr())
                    .ptr(b.fu.ptr())
                    .int(c.n_ff)
                    .ptr(step);
                if fuse_ew {
                    self.ewq(act, s, act_args, c.n_ff, n, acts)?;
                } else if rowmax {
                    let m = rowmax_cell(il, 1);
                    self.ew(act, s, act_args.ptr(m), n * c.n_ff)?;
                    self.act_h16(s, (b.fg.ptr(), c.n_ff), c.n_ff, n, Some(m))?;
                } else {
                    self.ew(act, s, act_args, n * c.n_ff)?;
                }
            }
            prof.mark("ffn gate+up", s)?;
            self.project(
                (b.fg.ptr(), c.n_ff),
                c.n_ff,
                n,
                &[(&lw.ffn_down, b.o.ptr(), e)],
                fuse_ew || rowmax,
                packed,
                acts,
            )?;
            match w.layers.get(il + 1) {
                Some(l) => self.prefetch(n, PfPoint::Projections, &qkv_mats(l))?,
                None if rows > 0 => self.prefetch(n, PfPoint::Projections, &[&w.output])?,
                None => {}
            }
            let next = w.layers.get(il + 1).map_or(w.output_norm, |l| l.attn_norm);
            // The last layer's h feeds only the output rows, quantized there.
            let quantize_next = fuse && il + 1 < w.layers.len();
            self.residual_norm(s, n, lw.post_ffw_norm, next, quantize_next, qkv_acts)?;
            prof.mark("ffn down+norm", s)?;
        }
        if rows > 0 {
            let x_last = b.h.ptr() + ((n - rows) * e * 4) as u64;
            self.project(
                (x_last, e),
                e,
                rows,
                &[(&w.output, b.logits.ptr(), c.n_vocab)],
                false,
                packed && rows == n,
                acts,
            )?;
            self.ew(
                Kernel::ScaleSoftcap,
                s,
                KArgs::new()
                    .ptr(b.logits.ptr())
                    .f32(c.logit_scale)
                    .f32(c.softcap.unwrap_or(0.0))
                    .int(c.n_vocab)
                    .int(rows),
                rows * c.n_vocab,
            )?;
            prof.mark("output", s)?;
        }
        self.prefetch_join(n)
    }

    /// The fused-quantization kernel `k` (A16) for the activation format `acts`: its A8 twin
    /// for A8 (same arithmetic, A8's quantization).
    fn fused_q(&self, k: Kernel, acts: Acts) -> Kernel {
        if acts != Acts::A8 {
            return k;
        }
        match k {
            Kernel::ResidualNormQ => Kernel::ResidualNormQ8,
            Kernel::SigmoidGateQ => Kernel::SigmoidGateQ8,
            Kernel::SwigluQ => Kernel::SwigluQ8,
            Kernel::GegluQ => Kernel::GegluQ8,
            Kernel::AttnCombineQ => Kernel::AttnCombineQ8,
            other => other,
        }
    }

    /// `x += rmsnorm(o, eps_post) * w_post; h = rmsnorm(x, eps) * w_next`, and with `quantize`
    /// also h's quants in the format `acts` (the fused kernel; same numbers as quantizing
    /// afterwards; f16: `residual_norm_h16` into the f16 route's buffers).
    fn residual_norm(
        &self,
        s: Stream,
        n: usize,
        w_post: u64,
        w_next: u64,
        quantize: bool,
        acts: Acts,
    ) -> Result<(), CudaError> {
        let c = &self.model.config;
        let b = &self.b;
        let args = KArgs::new()
            .ptr(b.o.ptr())
            .ptr(w_post)
            .f32(c.post_norm_eps)
            .ptr(b.x.ptr())
            .ptr(w_next)
            .f32(c.rms_eps)
            .ptr(b.h.ptr())
            .int(c.n_embd);
        let (k, args) = if quantize && acts == Acts::F16 {
            (
                Kernel::ResidualNormH16,
                b.h16.append(args).ptr(b.step.ptr()),
            )
        } else if quantize {
            (
                self.fused_q(Kernel::ResidualNormQ, acts),
                args.ptr(b.xq.ptr())
                    .ptr(b.xs.ptr())
                    .ptr(b.xsum.ptr())
                    .ptr(b.step.ptr()),
            )
        } else {
            (Kernel::ResidualNorm, args.ptr(b.step.ptr()))
        };
        // One block per token; residual_norm_h16 as MUSER_CUDA_NORM_H16 shapes it, or its
        // cluster twin (`auto`: 8 blocks per token for launches of few tokens; `cl8`: 8 for all;
        // `cl16`: 16 for few) as one cluster of `cl` blocks per token, grid (cl, n).
        let norm = self.reg.steps.norm_h16;
        if let Some(cl) = (k == Kernel::ResidualNormH16)
            .then(|| norm.cluster_for(n))
            .flatten()
        {
            let kernel = if cl == 16 {
                Kernel::ResidualNormH16Cl16
            } else {
                Kernel::ResidualNormH16Cl8
            };
            let dims = Dims {
                grid: (cl, n as u32, 1),
                block: NORM_THREADS / cl,
                smem: 0,
            };
            return launch_cluster(self.f(kernel), dims, cl, s, args);
        }
        let block = if k == Kernel::ResidualNormH16 {
            norm.block(c.n_embd, NORM_THREADS)
        } else {
            NORM_THREADS
        };
        let dims = Dims {
            grid: (n as u32, 1, 1),
            block,
            smem: 0,
        };
        launch(self.f(k), dims, s, args)
    }

    /// A fused element-wise + quantize kernel (`k` the A16 one; `fused_q` picks `acts`'s): one
    /// warp per group of 32 of `width`-wide rows; `args` are the element-wise kernel's, the
    /// activation buffers are appended. f16: the `*_h16` twin, one block per token, into the
    /// f16 route's buffers.
    fn ewq(
        &self,
        k: Kernel,
        s: Stream,
        args: KArgs,
        width: usize,
        n: usize,
        acts: Acts,
    ) -> Result<(), CudaError> {
        let b = &self.b;
        if acts == Acts::F16 {
            let k = match k {
                Kernel::SigmoidGateQ => Kernel::SigmoidGateH16,
                Kernel::SwigluQ => Kernel::SwigluH16,
                Kernel::GegluQ => Kernel::GegluH16,
                other => {
                    return Err(CudaError::Invalid(format!(
                        "{other:?} has no f16 twin (the f16 route fuses the gate and the FFN \
                         activation only)"
                    )))
                }
            };
            return launch(
                self.reg.get(k, self.opts.act_math),
                Registry::ewh_dims(n),
                s,
                b.h16.append(args),
            );
        }
        launch(
            self.reg.get(self.fused_q(k, acts), self.opts.act_math),
            Dims {
                grid: ((width as u32 / 32).div_ceil(8), n as u32, 1),
                block: 256,
                smem: 0,
            },
            s,
            args.ptr(b.xq.ptr()).ptr(b.xs.ptr()).ptr(b.xsum.ptr()),
        )
    }
}

/// A layer's attention projections (the prefetch branch's targets before them).
fn qkv_mats(l: &DevLayer) -> Vec<&DevMatrix> {
    let mut v = vec![&l.wq, &l.wk, &l.wv];
    v.extend(l.wgate.as_ref());
    v
}
