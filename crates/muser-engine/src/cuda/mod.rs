//! The CUDA route: the model's forward pass on the GPU, composed from `muser_cuda`'s kernels.
//!
//! Owns: `CudaSession` (device weights, f16 KV cache per sequence slot, activation buffers, the
//! decode graphs). Submodules: `options` (the session's options and route switches), `forward`
//! (the launch sequence of one step), `sequences` (the slots' API: `eval_seq`, `decode_batch`),
//! `weights` (upload and the kernel table per weight type), `a8` (what the A8 activation A/B
//! can run), `h16` (what the f16 route can run), `matmul` (the projections), `route_id` (the
//! route identity).
//! Numerics: weights stay quantized in the arena (Q4_K / Q6_K repacked into Q4H / Q6H on the f16
//! route) and are multiplied against f16 (the default where the f16 route covers the model), A8
//! (the default elsewhere where every matmul weight has A8 kernels) or A16 activations
//! (`options::Acts`; `resolve_default_acts`), f64 norm
//! reductions, attention over f16 K/V with a fixed split of the key range (`attn_super` keys
//! per partial) — f32 kernels, or on the f16 route the tensor cores (attn_h16.cu).
//! Invariants (BRIEF §2): a token's logits are a fixed function of the model, the token ids and
//! its position — identical across runs, chunk sizes, eager vs graph replay and serial vs
//! parallel capture (every kernel fixes its reduction order; see the `.cu` headers).
//!
//! Decode (one token) is recorded once as a CUDA graph and replayed; the position and token id
//! are read from device memory (`StepParams`, `tokens`), so replay needs no re-capture.
//! Prefill runs eagerly in chunks of up to `chunk` tokens (the tensor-core matmuls).
//!
//! Several sequences (`n_seq` slots, each with its own K/V rings and position): prefill runs
//! per sequence (`eval_seq`); `decode_batch` runs one token of each of up to `MAX_BATCH`
//! sequences as packed rows of one step — one graph per row count, the matmuls on the packed
//! decode kernels (each weight unit decoded once for all rows), attention per row on its own
//! sequence's cache. Every row's logits are bit-identical to that sequence decoding alone
//! (same per-(row, token) arithmetic in every kernel; device test `cuda_route`).

mod a8;
mod checks;
mod forward;
mod h16;
mod host_io;
mod matmul;
mod options;
mod prefetch;
mod route_id;
mod sequences;
pub mod weights;

use std::time::Instant;

use muser_cuda::attn_h16::AttnH16Shape;
use muser_cuda::graph::Fork;
use muser_cuda::launch::AttnShape;
use muser_cuda::prefetch::L2Prefetcher;
use muser_cuda::profile::PhaseProfiler;
use muser_cuda::sched::AcceleratorScheduler;
use muser_cuda::{DeviceBuffer, Gpu, Graph, KArgs, Module, Registry, MAX_BATCH};

use crate::model::Model;
use crate::EngineError;
pub use h16::TENSOR_CORE_ATTENTION_ENV;
use host_io::{HostStage, StepClock};
pub use options::{Acts, BatchMm, CudaOptions, L2Kind, ATTN_SUPER, L2_PREFETCH_BLOCKS};
use weights::DevWeights;

/// Device memory a session needs, by part (bytes).
#[derive(Clone, Debug)]
pub struct VramPlan {
    pub weights: u64,
    pub kv: u64,
    pub scratch: u64,
}

impl VramPlan {
    pub fn total(&self) -> u64 {
        self.weights + self.kv + self.scratch
    }
}

/// Activation and scratch buffers (all f32 unless noted), `C` = chunk.
struct Bufs {
    x: DeviceBuffer,                 // [C][n_embd]
    h: DeviceBuffer,                 // [C][n_embd]
    q: DeviceBuffer,                 // [C][n_head*hd]
    k: DeviceBuffer,                 // [C][n_head_kv*hd]
    v: DeviceBuffer,                 // [C][n_head_kv*hd_v]
    gate: DeviceBuffer,              // [C][n_head*hd_v]
    a: DeviceBuffer,                 // [C][n_head*hd_v]
    o: DeviceBuffer,                 // [C][n_embd]
    fg: DeviceBuffer,                // [C][n_ff]
    fu: DeviceBuffer,                // [C][n_ff]
    logits: DeviceBuffer,            // [C][n_vocab]
    tokens: DeviceBuffer,            // [C] u32
    step: DeviceBuffer,              // StepParams (muser_cuda::step)
    op: DeviceBuffer,                // [C][n_head][n_super][hd_v]
    mp: DeviceBuffer,                // [C][n_head][n_super]
    lp: DeviceBuffer,                // [C][n_head][n_super]
    xq: DeviceBuffer,                // [C][k_max] i16: A16 quants of the current matmul input
    xs: DeviceBuffer,                // [C][k_max/32] f32: A16 scales
    xsum: DeviceBuffer,              // [C][k_max/32] i32: A16 quant sums
    h16: H16Bufs,                    // the f16 route's activations (one word each elsewhere)
    rope: Vec<Option<DeviceBuffer>>, // per layer: [hd/2] f64 inverse frequencies
}

/// The f16 route's activation buffers (`act_h16`, matvec_h16.cu): `C` rows of `k_max`.
struct H16Bufs {
    xh: DeviceBuffer,     // [C][k_max] f16 in fragment order
    xn: DeviceBuffer,     // [C][k_max] f16 in natural order (the `mmw_*` tiles' input)
    xsum: DeviceBuffer,   // [C][k_max/32] f16: 32-value sums
    xsum16: DeviceBuffer, // [C][k_max/16] f16: 16-value sums
    xinv: DeviceBuffer,   // [C] f32: each row's inverse power of two
    split: DeviceBuffer,  // [S][C][n_out] f32: the split warpgroup tiles' chain sums (or 4 bytes)
    rowmax: DeviceBuffer, // [n_layer][3][C] u32: each row's largest magnitude (gate, FFN), combine tickets
}

impl H16Bufs {
    /// `args` with the four buffers appended in the kernels' order (XH, XSUM, XSUM16, XINV).
    fn append(&self, args: KArgs) -> KArgs {
        args.ptr(self.xh.ptr())
            .ptr(self.xsum.ptr())
            .ptr(self.xsum16.ptr())
            .ptr(self.xinv.ptr())
    }
}

/// f32 words of `H16Bufs` per row (the VRAM plan; the split scratch apart).
fn h16_words(k_max: usize, n_layer: usize) -> usize {
    2 * (k_max / 2) + k_max / 64 + k_max / 32 + 1 + 3 * n_layer
}

/// Per layer f16 K/V rings, one per sequence: position p of sequence s at row s * cap + p % cap.
struct LayerKv {
    k: DeviceBuffer, // [n_seq][cap][n_head_kv*hd] f16
    v: DeviceBuffer, // [n_seq][cap][n_head_kv*hd_v] f16
    cap: usize,
}

/// Sequences on the GPU (one, or `n_seq` slots decoded together by `decode_batch`).
pub struct CudaSession<'m> {
    /// Fields drop in declaration order: the fork's and the profiler's CUDA events go first,
    /// while the context (held by `gpu`, the buffers and the graphs) is still alive.
    fork: Fork,
    /// `MUSER_CUDA_STEP_TIMES=1`: the steps' device time (its events go before the context).
    clock: Option<StepClock>,
    /// The decode steps' L2 prefetch branch (`MUSER_CUDA_L2_PREFETCH`; f16 route).
    prefetch: Option<L2Prefetcher>,
    profile: PhaseProfiler,
    model: &'m Model,
    gpu: Gpu,
    reg: Registry,
    w: DevWeights,
    kv: Vec<LayerKv>,
    b: Bufs,
    opts: CudaOptions,
    n_super: usize,
    /// Prefill attention shape (`attn_partial_mt`), None: prefill uses decode's kernel
    /// (`MUSER_CUDA_ATTN_MT=0`, or head_dim too wide for its tiles; the route identity says).
    attn_prefill: Option<AttnShape>,
    /// The f16 route's tensor-core attention (`MUSER_CUDA_H16_ATTN=mma`): its decode shape and
    /// its prefill shape (decode's with `MUSER_CUDA_ATTN_MT=0`); None: the f32 kernels above.
    attn_h16: Option<(AttnH16Shape, AttnH16Shape)>,
    /// Positions seen, per sequence slot.
    n_past: Vec<usize>,
    /// Decode graphs by row count (index 1: one token; 2..=MAX_BATCH: packed rows).
    graphs: Vec<Option<Graph>>,
    sched: AcceleratorScheduler<(usize, usize, usize)>,
    /// Page-locked staging of the steps' inputs and logit rows (`MUSER_CUDA_HOST_STAGE`).
    stage: Option<HostStage>,
    /// Load report: upload seconds and GB/s, compile ms.
    pub load_report: String,
}

/// The activation format when none was asked for (`opts.acts_explicit` false), per model:
/// **f16** where the f16 route covers the model (`h16::fits`: Q4_K / Q6_K weights, heads its
/// tensor-core attention has kernels for), else A8 where every matmul weight has A8 kernels
/// (`a8::fits`), else A16 — float matmul weights keep 16-bit activations. Decided on the H200 at
/// 8581a35 (side by side, `docs/receipts/bench-cuda-full-8581a35-f16*.json`; A8 at a2b8ed5):
/// pp512 1.55× llama.cpp vs A8's 0.67×, 4 rows 3.57× one sequence vs 2.38×, KL to the oracle
/// ~13× lower (parity tiny / small); one-sequence decode 1.38× vs 1.44×. `MUSER_CUDA_ACTS`
/// keeps its value.
fn resolve_default_acts(model: &Model, opts: &mut CudaOptions) {
    if opts.acts_explicit || opts.acts != Acts::A8 {
        return;
    }
    opts.acts = if h16::fits(model, opts) {
        Acts::F16
    } else if a8::fits(model) {
        Acts::A8
    } else {
        Acts::A16
    };
}

/// The registry's Q6_K kernel switches act on one layout each: a switch for the layout the
/// session does not use would change nothing, so it is refused.
fn check_q6_switches(reg: &Registry, q6_pad: bool) -> Result<(), EngineError> {
    let unused = if q6_pad {
        [
            (reg.mva_wstages_q6 != 0, "MUSER_CUDA_MVA_WSTAGES_Q6"),
            (!reg.q6_lazy, "MUSER_CUDA_Q6_LAZY=0"),
        ]
        .into_iter()
        .find(|(set, _)| *set)
        .map(|(_, name)| (name, "GGUF's Q6_K layout (with MUSER_CUDA_Q6_PAD=0)"))
    } else {
        (reg.mva_ahead_q6p != 1)
            .then_some(("MUSER_CUDA_MVA_AHEAD_Q6P", "Q6_K-P (MUSER_CUDA_Q6_PAD)"))
    };
    match unused {
        Some((name, layout)) => Err(EngineError::Config(format!(
            "{name} applies to {layout} kernels only: this session would not run them"
        ))),
        None => Ok(()),
    }
}

fn bytes_f32(n: usize) -> usize {
    n * 4
}

/// Widest matmul input (n_embd, attention width or n_ff).
fn k_max(model: &Model) -> usize {
    let c = &model.config;
    c.n_embd.max(c.n_ff).max(c.n_head * c.head_dim_v)
}

/// Device memory needed for `model` at `opts` (computed before anything is allocated).
pub fn vram_plan(model: &Model, opts: &CudaOptions) -> VramPlan {
    let c = &model.config;
    let chunk = bufs_rows(opts);
    let kv: usize = (0..c.n_layer)
        .map(|il| {
            let cap = ring_cap(model, opts, il);
            cap * (c.kv_width() + c.n_head_kv * c.head_dim_v) * 2
        })
        .sum::<usize>()
        * opts.n_seq.max(1);
    let n_super = opts.n_ctx.div_ceil(opts.attn_super.max(32));
    let aw = c.n_head * c.head_dim_v;
    let scratch = bytes_f32(
        chunk
            * (3 * c.n_embd
                + c.q_width()
                + c.kv_width()
                + c.n_head_kv * c.head_dim_v
                + 2 * aw
                + 2 * c.n_ff
                + c.n_vocab
                + 1
                + c.n_head * n_super * (c.head_dim_v + 2)
                + k_max(model) / 2
                + k_max(model) / 16
                + if opts.acts == Acts::F16 {
                    h16_words(k_max(model), c.n_layer) + split_bound(model)
                } else {
                    0
                }),
    ) + 64
        + c.n_layer * c.head_dim * 4;
    VramPlan {
        weights: weights::arena_bytes(model, layouts(opts)) as u64,
        kv: kv as u64,
        scratch: scratch as u64,
    }
}

/// f32 words per row the split warpgroup tiles' scratch may take (`MUSER_CUDA_MMW_SPLIT=1`): at
/// most 8 chains of the widest matrix of 128 to 1023 row groups (`Registry::mmw_split_plan`
/// sizes the buffer exactly).
fn split_bound(model: &Model) -> usize {
    if std::env::var("MUSER_CUDA_MMW_SPLIT").as_deref() != Ok("1") {
        return 0;
    }
    model
        .weights
        .matrices()
        .map(|m| m.n_out)
        .filter(|n| (128..1024).contains(&(n / 16)))
        .max()
        .map_or(0, |n| 8 * n)
}

/// The matmul weights' device layouts for `opts`.
fn layouts(opts: &CudaOptions) -> weights::Layouts {
    weights::Layouts {
        q6_pad: opts.q6_pad,
        h16: opts.acts == Acts::F16,
        q4h: opts.q4h_scales.unwrap_or(muser_cuda::q4h::Scales::U8),
        q6h: opts.q6h_scales.unwrap_or(muser_cuda::q6h::Scales::F16),
    }
}

/// Token rows of the activation buffers: a prefill chunk, or a packed decode step's rows.
fn bufs_rows(opts: &CudaOptions) -> usize {
    opts.chunk.max(MAX_BATCH)
}

/// Rows of layer `il`'s ring: sliding layers keep `window + chunk` rows (a chunk's queries need
/// the window behind the chunk's first token while the chunk's own keys are written), full
/// layers the whole context.
fn ring_cap(model: &Model, opts: &CudaOptions, il: usize) -> usize {
    let c = &model.config;
    if c.swa_layers[il] {
        (c.sliding_window + opts.chunk).min(opts.n_ctx)
    } else {
        opts.n_ctx
    }
}

impl<'m> CudaSession<'m> {
    /// Open the device, compile the kernels, check the VRAM plan, upload the weights.
    pub fn new(
        model: &'m Model,
        mut opts: CudaOptions,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<CudaSession<'m>, EngineError> {
        let c = &model.config;
        checks::shapes_and_ranges(model, &opts)?;
        host_io::check_env()?;
        let gqa = c.gqa_ratio();
        resolve_default_acts(model, &mut opts);
        // The late gate by default where it can act (an explicit `=1` elsewhere was refused) and
        // where the device has run it: the f16 route (session 45). The integer routes take it
        // when asked (`cuda_route`'s A8 cases have it; not yet run on the device).
        if opts.mode == muser_cuda::GraphMode::Serial
            || !c.attn_gate
            || (!opts.gate_late_explicit && opts.acts != Acts::F16)
        {
            opts.gate_late = false;
        }
        h16::check_options(model, &mut opts)?;
        // MUSER_CUDA_Q4H_SCALES=auto: u8 where every Q4_K matrix can take it (the load report
        // says which, and what could not); MUSER_CUDA_Q6H_SCALES=auto: f16.
        let scales_note = h16::resolve_h16_scales(model, &mut opts);
        if opts.l2_prefetch_on() && opts.acts != Acts::F16 {
            return Err(EngineError::Config(
                "the L2 prefetch branch (MUSER_CUDA_L2_PREFETCH) runs on the f16 route only \
                 (MUSER_CUDA_ACTS=f16)"
                    .into(),
            ));
        }
        // f16: whole 64-value chunks, rows of at most 32768 for the one-block-per-token twins.
        let unit = if opts.acts == Acts::F16 { 64 } else { 32 };
        let fusable = matches!(opts.acts, Acts::A16 | Acts::A8 | Acts::F16)
            && c.n_embd <= 8 * 1024
            && c.n_embd.is_multiple_of(unit)
            && c.n_ff.is_multiple_of(unit)
            && (c.n_head * c.head_dim_v).is_multiple_of(unit)
            && (opts.acts != Acts::F16 || c.n_ff.max(c.n_head * c.head_dim_v) <= 32 * 1024);
        if opts.fuse && !fusable && !opts.fuse_explicit {
            opts.fuse = false;
        }
        if opts.acts == Acts::Invalid {
            return Err(EngineError::Config(format!(
                "MUSER_CUDA_ACTS={}: expected a16, a8, f16 or f32",
                std::env::var("MUSER_CUDA_ACTS").unwrap_or_default()
            )));
        }
        if !matches!(opts.qkv_acts, Acts::A16 | Acts::A8) {
            return Err(EngineError::Config(format!(
                "MUSER_CUDA_QKV_ACTS={}: expected a16 or a8",
                std::env::var("MUSER_CUDA_QKV_ACTS").unwrap_or_default()
            )));
        }
        if opts.qkv_acts_explicit && opts.acts != Acts::A8 {
            return Err(EngineError::Config(format!(
                "MUSER_CUDA_QKV_ACTS sets the attention projections' input on the A8 route only \
                 (this session's activations are {})",
                opts.acts.name()
            )));
        }
        if opts.q6_pad && opts.acts == Acts::F32 {
            // Q6_K-P has A16 and A8 kernels only: the f32 route keeps GGUF's layout.
            if opts.q6_pad_explicit {
                return Err(EngineError::Config(
                    "MUSER_CUDA_Q6_PAD=1 needs A16 activations (not MUSER_CUDA_ACTS=f32)".into(),
                ));
            }
            opts.q6_pad = false;
        }
        if opts.fuse && !fusable {
            return Err(EngineError::Config(format!(
                "MUSER_CUDA_FUSE=1 needs A16, A8 or f16 activations, n_embd <= 8192 and widths that are multiples of 32 (f16: of 64, at most 32768) (n_embd {}, n_ff {})",
                c.n_embd, c.n_ff
            )));
        }
        a8::check_options(model, &opts)?;
        let gpu = Gpu::open(0)?;
        gpu.set_pdl(opts.pdl_on());
        let plan = vram_plan(model, &opts);
        let (free, total) = gpu.mem_info()?;
        if plan.total() > free {
            return Err(muser_cuda::CudaError::OutOfMemory {
                what: format!(
                    "weights {} + KV {} + scratch {} at context {}",
                    plan.weights, plan.kv, plan.scratch, opts.n_ctx
                ),
                need: plan.total(),
                free,
                total,
            }
            .into());
        }
        // The packed decode kernels only where several sequences can decode together.
        let mut modules = Module::ENGINE.to_vec();
        if opts.n_seq > 1 && opts.qkv() == Acts::A16 && opts.batch_mm == BatchMm::Packed {
            modules.push(Module::MatvecPacked);
            if opts.mmv_min <= opts.n_seq.min(MAX_BATCH) {
                modules.push(Module::MmvA16);
            }
        }
        if opts.acts == Acts::A8 {
            modules.extend([Module::MatvecA8, Module::MmqA8]);
            if opts.n_seq > 1 && opts.batch_mm == BatchMm::Packed {
                modules.push(Module::MatvecPackedA8);
                if opts.mmv_min <= opts.n_seq.min(MAX_BATCH) {
                    modules.push(Module::MmvA8);
                }
            }
        }
        if opts.acts == Acts::F16 {
            modules.extend([Module::MatvecH16, Module::MmtH16, Module::MmwH16]);
            if opts.h16_attn_mma {
                modules.push(Module::AttnH16);
            }
            if opts.l2_prefetch_on() {
                modules.push(Module::Prefetch);
            }
        }
        let scales = [opts.q4h_scales, opts.q6h_scales];
        let reg = Registry::build_modules_with(&gpu, &modules, scales)?;
        if opts.acts == Acts::F16 && [Some(reg.h16.q4h_scales), Some(reg.h16.q6h_scales)] != scales
        {
            return Err(EngineError::Config(format!(
                "the Q4H / Q6H kernels were compiled for {:?} / {:?} scales and the weights \
                 planned as {scales:?}",
                reg.h16.q4h_scales, reg.h16.q6h_scales
            )));
        }
        check_q6_switches(&reg, opts.q6_pad)?;
        if reg.steps.pdl_early && !opts.pdl_on() {
            return Err(EngineError::Config(
                "MUSER_CUDA_PDL_EARLY=1 moves the programmatic-dependent-launch trigger, which \
                 this route launches without (MUSER_CUDA_PDL=0 or a route other than f16)"
                    .into(),
            ));
        }
        a8::check_switches(&reg, &opts)?;
        let t = Instant::now();
        let w = weights::upload(&gpu, model, progress, layouts(&opts))?;
        let up = t.elapsed().as_secs_f64();
        let gbps = w.arena.bytes() as f64 / up / 1e9;
        let kv = (0..c.n_layer)
            .map(|il| {
                let cap = ring_cap(model, &opts, il);
                let ns = opts.n_seq;
                Ok(LayerKv {
                    k: gpu.alloc(ns * cap * c.kv_width() * 2, "K cache")?,
                    v: gpu.alloc(ns * cap * c.n_head_kv * c.head_dim_v * 2, "V cache")?,
                    cap,
                })
            })
            .collect::<Result<Vec<_>, muser_cuda::CudaError>>()?;
        let n_super = opts.n_ctx.div_ceil(opts.attn_super);
        let split_floats = if opts.acts == Acts::F16 {
            let n_outs = model.weights.matrices().map(|m| m.n_out);
            reg.mmw_split_floats(n_outs, bufs_rows(&opts))
        } else {
            0
        };
        let b = alloc_bufs(&gpu, model, &opts, n_super, split_floats)?;
        let attn_prefill = if opts.attn_mt {
            AttnShape::prefill(gqa, c.head_dim, c.head_dim_v)
        } else {
            None
        };
        // h16::check_options refused head sizes without a shape; should one slip through, the
        // session fails instead of running the f32 kernels.
        let attn_h16 = if opts.acts == Acts::F16 && opts.h16_attn_mma {
            let no_shape = || {
                EngineError::Config(format!(
                    "the tensor-core attention has no kernel for heads of {} / {}",
                    c.head_dim, c.head_dim_v
                ))
            };
            let dec = AttnH16Shape::decode(gqa, c.head_dim, c.head_dim_v).ok_or_else(no_shape)?;
            // h16::check_options refused a count outside 1..=4.
            let dec = opts.attn_bufs.map_or(dec, |b| dec.with_bufs(b));
            // h16::check_options refused a value other than 1 or 4.
            let dec = match opts.attn_cols {
                4 => dec.with_cols(gqa).ok_or_else(|| {
                    EngineError::Config(format!(
                        "MUSER_CUDA_ATTN_COLS=4: {gqa} query heads per KV head do not fit 16 rows \
                         per four warps of a decode block"
                    ))
                })?,
                _ => dec,
            };
            let pre = if opts.attn_mt {
                AttnH16Shape::prefill(gqa, c.head_dim, c.head_dim_v).ok_or_else(no_shape)?
            } else {
                dec
            };
            Some((dec, pre))
        } else {
            None
        };
        let load_report = format!(
            "CUDA {} (sm_{}{}, driver {}): kernels compiled in {:.0} ms ({}{}), weights {:.2} GB uploaded in {:.2} s ({:.1} GB/s), KV {:.1} MB, scratch {:.1} MB",
            gpu.info.name,
            gpu.info.compute_capability.0,
            gpu.info.compute_capability.1,
            gpu.info.driver_version,
            reg.init_ms,
            reg.arch,
            match reg.load {
                muser_cuda::registry::Load::Ptx => "",
                muser_cuda::registry::Load::Cubin => ", NVRTC's cubin loaded",
            },
            w.arena.bytes() as f64 / 1e9,
            up,
            gbps,
            plan.kv as f64 / 1e6,
            plan.scratch as f64 / 1e6,
        ) + &scales_note.map_or(String::new(), |n| format!(", {n}"))
            + &format!(
                ", host I/O {} (MUSER_CUDA_HOST_STAGE), waits poll {} ms before sleeping (MUSER_CUDA_WAIT_SPIN_MS)",
                if opts.host_stage { "page-locked" } else { "pageable" },
                gpu.wait_spin().as_millis()
            )
            + if reg.h16.mvh_acc2 != 0 {
                ", TIMING ONLY: the two-accumulator matmul order, its bits across kernels \
                 unchecked (MUSER_CUDA_MVH_ACC2_TIMING=1)"
            } else {
                ""
            };
        let n_seq = opts.n_seq;
        // The branch only on the f16 route (refused above otherwise).
        let prefetch = match opts.l2_prefetch_on() {
            false => None,
            true => Some(L2Prefetcher::new(
                opts.l2_prefetch_kind_on(),
                opts.l2_prefetch_blocks_on() as u32,
            )?),
        };
        let stage = match opts.host_stage {
            true => Some(HostStage::new(&gpu, opts.chunk, c.n_vocab)?),
            false => None,
        };
        let clock = StepClock::new(opts.step_times)?;
        Ok(CudaSession {
            model,
            gpu,
            reg,
            w,
            kv,
            b,
            opts,
            n_super,
            attn_prefill,
            attn_h16,
            n_past: vec![0; n_seq],
            graphs: (0..=MAX_BATCH).map(|_| None).collect(),
            fork: Fork::new()?,
            prefetch,
            sched: AcceleratorScheduler::new(),
            profile: PhaseProfiler::from_env(),
            stage,
            clock,
            load_report,
        })
    }

    /// The model this session runs.
    pub fn model(&self) -> &'m Model {
        self.model
    }

    /// Query heads per attention block (the GQA ratio unless `MUSER_CUDA_ATTN_HPB` says less).
    fn attn_hpb(&self) -> usize {
        match self.opts.attn_hpb {
            0 => self.model.config.gqa_ratio(),
            n => n,
        }
    }

    pub fn registry(&self) -> &Registry {
        &self.reg
    }

    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// Packed decode steps run on the packed decode kernels (from `mmv_min` rows Q4_K and Q6_K
    /// on the tensor-core ones), else on the prefill kernels.
    fn batch_packed(&self) -> bool {
        matches!(self.opts.acts, Acts::A16 | Acts::A8) && self.opts.batch_mm == BatchMm::Packed
    }

    /// Forget the phase profile accumulated so far.
    /// (device seconds, steps) of the steps since the last call, where `MUSER_CUDA_STEP_TIMES=1`
    /// times them (host_io.rs `StepClock`).
    pub fn take_step_times(&mut self) -> Option<(f64, u64)> {
        self.clock.as_mut().map(StepClock::take)
    }

    pub fn profile_reset(&mut self) {
        self.profile.reset();
    }

    /// The phase profile (`MUSER_CUDA_PROFILE=1`; forces eager launches).
    pub fn profile_report(&self) -> Option<String> {
        self.profile.enabled().then(|| self.profile.report())
    }
}

fn alloc_bufs(
    gpu: &Gpu,
    model: &Model,
    opts: &CudaOptions,
    n_super: usize,
    split_floats: usize,
) -> Result<Bufs, muser_cuda::CudaError> {
    let c = &model.config;
    let ch = bufs_rows(opts);
    let f = |n: usize, what: &str| gpu.alloc(bytes_f32(ch * n), what);
    let aw = c.n_head * c.head_dim_v;
    let mut rope = Vec::new();
    for il in 0..c.n_layer {
        rope.push(match c.rope_for_layer(il) {
            Some(base) => {
                let d = c.head_dim as f64;
                let inv: Vec<f64> = (0..c.head_dim / 2)
                    .map(|i| f64::from(base).powf(-2.0 * i as f64 / d))
                    .collect();
                let b = gpu.alloc(inv.len() * 8, "rope table")?;
                gpu.upload(b.ptr(), &inv)?;
                Some(b)
            }
            None => None,
        });
    }
    Ok(Bufs {
        x: f(c.n_embd, "x")?,
        h: f(c.n_embd, "h")?,
        q: f(c.q_width(), "q")?,
        k: f(c.kv_width(), "k")?,
        v: f(c.n_head_kv * c.head_dim_v, "v")?,
        gate: f(aw, "gate")?,
        a: f(aw, "attn out")?,
        o: f(c.n_embd, "o")?,
        fg: f(c.n_ff, "ffn gate")?,
        fu: f(c.n_ff, "ffn up")?,
        logits: f(c.n_vocab, "logits")?,
        tokens: f(1, "tokens")?,
        step: gpu.alloc(muser_cuda::step::STEP_BYTES, "step params")?,
        op: f(c.n_head * n_super * c.head_dim_v, "attention partials")?,
        mp: f(c.n_head * n_super, "attention maxima")?,
        lp: f(c.n_head * n_super, "attention sums")?,
        xq: gpu.alloc(ch * k_max(model) * 2, "A16 quants")?,
        xs: f(k_max(model) / 32, "A16 scales")?,
        xsum: f(k_max(model) / 32, "A16 sums")?,
        h16: if opts.acts == Acts::F16 {
            let k = k_max(model);
            H16Bufs {
                xh: gpu.alloc(ch * k * 2, "f16 activations")?,
                xn: gpu.alloc(ch * k * 2, "f16 activations, natural order")?,
                xsum: gpu.alloc(ch * k / 32 * 2, "f16 32-value sums")?,
                xsum16: gpu.alloc(ch * k / 16 * 2, "f16 16-value sums")?,
                xinv: f(1, "f16 inverse scales")?,
                split: gpu.alloc(bytes_f32(split_floats.max(1)), "split tiles' chain sums")?,
                rowmax: gpu.alloc(ch * 3 * c.n_layer * 4, "f16 row maxima and combine tickets")?,
            }
        } else {
            H16Bufs {
                xh: gpu.alloc(4, "f16 activations (unused)")?,
                xn: gpu.alloc(4, "f16 activations (unused)")?,
                xsum: gpu.alloc(4, "f16 sums (unused)")?,
                xsum16: gpu.alloc(4, "f16 sums (unused)")?,
                xinv: gpu.alloc(4, "f16 scales (unused)")?,
                split: gpu.alloc(4, "split tiles' chain sums (unused)")?,
                rowmax: gpu.alloc(4, "f16 row maxima (unused)")?,
            }
        },
        rope,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn tiny() -> Model {
        let cfg = muser_forge::ForgeConfig::preset("tiny").expect("tiny");
        let mut bytes = Vec::new();
        muser_forge::forge(&cfg, &mut bytes, &mut |_| {}).expect("forge");
        Model::from_gguf(Arc::new(muser_gguf::Gguf::from_bytes(bytes).expect("gguf")))
            .expect("model")
    }

    #[test]
    fn vram_plan_counts_rings_and_full_layers() {
        let m = tiny();
        let c = &m.config;
        let opts = CudaOptions::new(1000, 100);
        let plan = vram_plan(&m, &opts);
        let row = (c.kv_width() + c.n_head_kv * c.head_dim_v) * 2;
        let want_kv: usize = (0..c.n_layer)
            .map(|il| {
                if c.swa_layers[il] {
                    (c.sliding_window + 100) * row
                } else {
                    1000 * row
                }
            })
            .sum();
        assert_eq!(plan.kv, want_kv as u64);
        // The arena holds every weight byte at least once.
        let file_weights: u64 = m.gguf().tensors().iter().map(|t| t.n_bytes).sum();
        assert!(
            plan.weights >= file_weights,
            "{} < {file_weights}",
            plan.weights
        );
        assert_eq!(plan.total(), plan.weights + plan.kv + plan.scratch);
        // A bigger context needs more memory, never less.
        assert!(vram_plan(&m, &CudaOptions::new(4000, 100)).total() > plan.total());
        // Each sequence slot has its own rings; weights and scratch do not grow with them.
        let mut three = CudaOptions::new(1000, 100);
        three.n_seq = 3;
        let p3 = vram_plan(&m, &three);
        assert_eq!(p3.kv, 3 * plan.kv);
        assert_eq!((p3.weights, p3.scratch), (plan.weights, plan.scratch));
    }

    /// `MUSER_CUDA_Q4H_SCALES=auto` on the f16 route picks u8 for a model whose Q4_K matrices
    /// all take it (the forge's do), says so for the load report, and plans fewer weight bytes;
    /// Q6H's auto is f16; other routes are left unresolved.
    #[test]
    fn auto_scales_pick_u8_for_q4h_and_f16_for_q6h() {
        for v in ["MUSER_CUDA_Q4H_SCALES", "MUSER_CUDA_Q6H_SCALES"] {
            if std::env::var_os(v).is_some() {
                eprintln!("skipping: {v} is set in this environment");
                return;
            }
        }
        use muser_cuda::scales::Scales::{F16, U8};
        let m = tiny();
        let mut a8 = CudaOptions::new(1000, 100);
        a8.acts = Acts::A8;
        assert_eq!(h16::resolve_h16_scales(&m, &mut a8), None);
        assert_eq!((a8.q4h_scales, a8.q6h_scales), (None, None));
        let mut opts = CudaOptions::new(1000, 100);
        opts.acts = Acts::F16;
        let note = h16::resolve_h16_scales(&m, &mut opts).expect("a note");
        assert!(
            note.starts_with("Q4H scales u8 (auto, checked in"),
            "{note}"
        );
        assert_eq!((opts.q4h_scales, opts.q6h_scales), (Some(U8), Some(F16)));
        let mut f16 = opts.clone();
        f16.q4h_scales = Some(F16);
        let (u, f) = (vram_plan(&m, &opts).weights, vram_plan(&m, &f16).weights);
        assert!(u < f, "u8 {u} vs f16 {f} weight bytes");

        // One Q4_K matrix with a block of d·sc = 1024·63 (so 2^E = 2^-11, under which the other
        // blocks' d' fall below f16's normals and lose bits): auto falls back to f16 and names it.
        let cfg = muser_forge::ForgeConfig::preset("tiny").expect("tiny");
        let mut bytes = Vec::new();
        muser_forge::forge(&cfg, &mut bytes, &mut |_| {}).expect("forge");
        let q4 = m
            .weights
            .matrices()
            .find(|w| w.ty == muser_gguf::GgmlType::Q4_K)
            .expect("a Q4_K matrix");
        let (name, (at, _)) = (q4.name.clone(), q4.file_range());
        bytes[at..at + 2].copy_from_slice(&half::f16::from_f32(1024.0).to_le_bytes());
        bytes[at + 4] |= 63;
        let bent = Model::from_gguf(Arc::new(muser_gguf::Gguf::from_bytes(bytes).expect("gguf")))
            .expect("model");
        let mut opts = CudaOptions::new(1000, 100);
        opts.acts = Acts::F16;
        let note = h16::resolve_h16_scales(&bent, &mut opts).expect("a note");
        assert!(note.starts_with("Q4H scales f16 (auto"), "{note}");
        assert!(note.contains(&name), "{note}");
        assert_eq!(opts.q4h_scales, Some(F16));
    }
}
