//! Options of a CUDA session (`CudaOptions`): route switches read from the environment
//! (`MUSER_CUDA_*`, each with its measurement in docs/cuda.md) and the session's shape (context,
//! prefill chunk, sequence slots). Invalid values are kept as such and refused with the
//! switch's name by `CudaSession::new`.

use muser_cuda::prefetch::PrefetchKind;
use muser_cuda::{GraphMode, Math};

/// Default keys per attention block (`MUSER_CUDA_ATTN_SUPER`); a multiple of 32.
pub const ATTN_SUPER: usize = 128;

/// Options of a CUDA session.
#[derive(Clone, Debug)]
pub struct CudaOptions {
    /// Context size (maximum positions).
    pub n_ctx: usize,
    /// Prefill chunk (tokens per eager step, ≤ 512).
    pub chunk: usize,
    /// Record decode as a CUDA graph (default) or launch eagerly (`MUSER_CUDA_GRAPH=0`).
    pub graphs: bool,
    /// Page-locked staging of the steps' inputs and logit rows (`MUSER_CUDA_HOST_STAGE=0|1`,
    /// default 1 since session 45; host_io.rs). Session 45 (full forge, with the waits' 50 ms
    /// polling window, `muser_cuda::device`): the host's share of a decode step 235.8 → 37.5 µs,
    /// tg128 +2.9%; the same bits (`cuda_batched`'s `staged_rows_equal_pageable_rows`).
    pub host_stage: bool,
    /// Each step's device time from events around its graph or launches
    /// (`MUSER_CUDA_STEP_TIMES=1`; `CudaSession::take_step_times`, `muser bench`'s step_times).
    pub step_times: bool,
    /// Parallel branches or serial capture (`MUSER_CUDA_SERIAL=1`).
    pub mode: GraphMode,
    /// The attention gate's projection forked with Q / K / V but joined only before the
    /// attention combine, so the rope and the attention run beside its tail
    /// (`MUSER_CUDA_GATE_LATE=0|1`, default 1 since session 45 where it can act — parallel
    /// branches and a model with the gate — on the f16 route, where the device has run it; the
    /// integer routes take it when set). The same kernels on the same inputs: the same bits.
    /// Session 45 (full forge, alternating beside the default of then in one call): tg128
    /// 158.10 / 158.61 vs 151.57 / 152.48 (+4.2%). `=1` set explicitly is refused serially and
    /// on models without the gate (it would change nothing); the default then turns it off.
    pub gate_late: bool,
    /// `MUSER_CUDA_GATE_LATE` was set (an explicit `=1` where it cannot act is refused).
    pub gate_late_explicit: bool,
    /// Math variant of the element-wise activation kernels (`MUSER_CUDA_FAST_ACT=1`: fast).
    pub act_math: Math,
    /// Activations fed to the matmuls: f16 (the default where the f16 route covers the model:
    /// Q4_K / Q6_K weights, heads of 64 or 128), A8 (the default where the model's matmul
    /// weights have A8 kernels: Q4_K, Q5_K, Q6_K in whole blocks, Q8_0, Q5_0), A16 (the default
    /// otherwise, and `MUSER_CUDA_ACTS=a16`) or f32 (`MUSER_CUDA_ACTS=f32`, A/B). `CudaOptions::new`
    /// holds A8 for "not asked"; `CudaSession::new` resolves the default (`acts_explicit` false)
    /// per model; the route identity says which.
    pub acts: Acts,
    /// `acts` was set explicitly (environment or caller), not by default: an explicit f16 or
    /// A8 on a model it cannot run is an error, the default takes the next format there.
    pub acts_explicit: bool,
    /// On the A8 route, the attention projections' input (Q / K / V / gate, one quantization
    /// shared by the four): A16 (default) or A8 (`MUSER_CUDA_QKV_ACTS=a16|a8`). The keys and
    /// values those projections make stay in the cache for every later position, and on
    /// gemma-3-270m their 8-bit input is 30% of A8's error for 11% of its prefill time
    /// (docs/cuda.md). Any other route refuses the switch (it would change nothing there).
    pub qkv_acts: Acts,
    /// `MUSER_CUDA_QKV_ACTS` was set (environment or caller).
    pub qkv_acts_explicit: bool,
    /// Software-pipelined decode matvec for Q4_K/Q6_K (default; `MUSER_CUDA_PIPE=0` for A/B).
    pub pipe: bool,
    /// Stage the activation quants in shared memory for the pipelined decode matvec
    /// (default; `MUSER_CUDA_XSMEM=0` for A/B). Same numbers either way.
    pub xsmem: bool,
    /// Multi-token matmuls (prefill chunks) of Q4_K/Q6_K weights on the int8 tensor-core
    /// kernels (`mmq_a16.cu`; default; `MUSER_CUDA_MMQ=0` for A/B: the eight-token dp2a
    /// kernels). Same numbers either way: both follow the decode kernels' order.
    pub mmq: bool,
    /// Fuse the A16 / A8 quantization into the kernels that produce matmul inputs (residual norm,
    /// gate, FFN activation, attention combine): default on, `MUSER_CUDA_FUSE=0` for A/B. Same
    /// logits by construction (the device tests assert it); measured faster (docs/cuda.md).
    /// Needs A16 or A8 activations, n_embd <= 8192 and widths that are multiples of 32: by default it
    /// is then on and otherwise off (the route identity says which); asked for explicitly
    /// (`MUSER_CUDA_FUSE=1`) on a model that does not allow it, the session is an error.
    pub fuse: bool,
    /// `fuse` was set explicitly (environment or caller), not by default.
    pub fuse_explicit: bool,
    /// On the f16 route with `fuse`, the element-wise kernels' f16 twins too (`sigmoid_gate_h16`,
    /// `swiglu_h16`: `MUSER_CUDA_H16_EW=fused`); default `plain`: the plain kernel, then
    /// `act_h16`. Same logits either way; the twins (one block per token) measured slower on the
    /// H200 (docs/cuda.md, "the f16 route"). Any other route refuses the switch.
    pub h16_ew_fused: bool,
    /// On the f16 route with the plain element-wise kernels, the attention combine (with the
    /// gate: `attn_combine_m`, strict math; else `sigmoid_gate_m`) and the FFN activation
    /// (`swiglu_m` / `geglu_m`) also fold each row's largest magnitude into a per-(layer, use)
    /// cell (atomicMax on the bits, merged per block first) and `act_h16_m` reads it instead of
    /// rescanning the row (`MUSER_CUDA_H16_ROWMAX`, default 1; `0` for A/B: H200, full forge,
    /// session 26, tg128 117.05 / 116.91 vs 110.12 / 111.52 tok/s, pp512 4422 / 4411 vs
    /// 4405 / 4402). The maximum is exact in any order, so the same bits (device test
    /// `cuda_route`); the cells are zeroed once per step. In effect where
    /// [`CudaOptions::h16_rowmax_on`] says.
    pub h16_rowmax: bool,
    /// On the f16 route with the row maxima, strict math and a SwiGLU FFN, decode steps run the
    /// FFN's gate and up projections and the SwiGLU in one launch (`mvh_glu_*`, matvec_h16.cu;
    /// `MUSER_CUDA_H16_GLU=0|1`; unset, `h16::check_options` turns it on wherever those
    /// conditions hold). The same bits as the two launches and `swiglu_m` (device test
    /// `cuda_route`). H200, full forge, session 27 (one call): f16 tg128 **127.32 vs
    /// 125.70 / 125.84** off, pp512 4484.7 vs 4482.3 (decode only). In effect where
    /// [`CudaOptions::h16_glu_on`] says.
    pub h16_glu: Option<bool>,
    /// On the f16 route with the row maxima and strict math, the attention combine's last block
    /// per token also writes the row's f16 activations (`attn_combine_h16`, attention.cu;
    /// `MUSER_CUDA_H16_COMBINE_ACT=1`, default 0: measured in session 28 and not kept — same bits,
    /// tg128 125.56 / 125.55 vs 126.36 / 126.63 without, pp512 4420 vs 4480) instead
    /// of an `act_h16_m` launch after it. The same bits (device test `cuda_route`). In effect
    /// where [`CudaOptions::h16_combine_act_on`] says.
    pub h16_combine_act: bool,
    /// MiB of the next matmul's weights prefetched into L2 at each point of a decode step where
    /// the main chain runs small kernels, by the matmuls prefetched there: [the attention
    /// projections (or the output head), the attention output, FFN gate + up, FFN down]
    /// (`MUSER_CUDA_L2_PREFETCH=<MiB>` for all four or `=<a>,<b>,<c>,<d>`; f16 route, 0 = off,
    /// the default; each at most 48): a side branch of prefetch launches
    /// (`muser_cuda::prefetch`). No number changes.
    pub l2_prefetch_mb: [usize; 4],
    /// How the prefetch branch pulls the bytes (`MUSER_CUDA_L2_PREFETCH_KIND=hint|touch`; unset:
    /// `touch`); only with `l2_prefetch_mb` (else refused).
    pub l2_prefetch_kind: Option<L2Kind>,
    /// Blocks per prefetch launch (`MUSER_CUDA_L2_PREFETCH_BLOCKS=1..=1024`; unset:
    /// [`L2_PREFETCH_BLOCKS`]); only with `l2_prefetch_mb` (else refused).
    pub l2_prefetch_blocks: Option<usize>,
    /// How the f16 route's Q4_K matrices store their sub-block factors
    /// (`MUSER_CUDA_Q4H_SCALES=auto|f16|u8`, `muser_cuda::q4h::Scales`; the registry compiles
    /// the matching reader). The same numbers either way; u8 has 7.5% fewer bytes per matrix.
    /// None: `auto`, resolved by `h16::resolve_h16_scales` (u8 where every Q4_K matrix can take
    /// it). An unreadable value reads as auto here and is refused by `h16::check_options`.
    pub q4h_scales: Option<muser_cuda::q4h::Scales>,
    /// The same for the Q6_K matrices (`MUSER_CUDA_Q6H_SCALES=auto|f16|u8`, `muser_cuda::q6h`;
    /// u8 has 6.25% fewer bytes per matrix but measured slower, so auto = f16).
    pub q6h_scales: Option<muser_cuda::q6h::Scales>,
    /// Keys per attention partial block (`MUSER_CUDA_ATTN_SUPER`, a multiple of 32 in
    /// 32..=4096): the fixed partition of the key range (part of the numerics: every route
    /// of one session uses the same partition).
    pub attn_super: usize,
    /// K / V tiles in flight in a decode block of the tensor-core attention
    /// (`MUSER_CUDA_ATTN_BUFS=1..=4`; unset: `AttnH16Shape::decode`'s 4, a default super-block's
    /// tiles at once). Launch only: the same bits (device test `cuda_attention`'s shapes); fewer
    /// buffers, less shared memory, more blocks per SM at depth. f16 route with the mma attention
    /// only (refused elsewhere).
    pub attn_bufs: Option<usize>,
    /// Warps per 16 rows of a decode block of the tensor-core attention
    /// (`MUSER_CUDA_ATTN_COLS=1|4`, default 1): with 4 the block's four warps each run a quarter
    /// of the output columns' P·V (the `_c4` kernels, `AttnH16Shape::with_cols`) instead of one
    /// warp running the whole tile chain. Launch only: the same bits (device test
    /// `cuda_attention`'s shapes). f16 route with the mma attention only (refused elsewhere).
    pub attn_cols: usize,
    /// Query heads per attention block (`MUSER_CUDA_ATTN_HPB`; 0 = the whole GQA group;
    /// must divide the GQA ratio). Launch shape only: a head's arithmetic does not change.
    pub attn_hpb: usize,
    /// Prefill attention on `attn_partial_mt` (eight query tokens share each K/V tile load;
    /// default; `MUSER_CUDA_ATTN_MT=0` for A/B: one token per block, as decode). Launch shape
    /// only: bit-identical partials (device test).
    pub attn_mt: bool,
    /// On the f16 route, attention on the tensor cores (`attn_h16_*`: f16 queries and
    /// probabilities, f32 sums; `MUSER_CUDA_H16_ATTN=mma`, the default) or on the f32 kernels
    /// every other route runs (`MUSER_CUDA_H16_ATTN=f32`). Different numbers (both
    /// deterministic; decode and prefill the same bits in either); any other route refuses
    /// the switch.
    pub h16_attn_mma: bool,
    /// Sequence slots (each its own K/V rings and position; `decode_batch` packs up to
    /// `MAX_BATCH` of them into one step). 1 for a single-sequence session.
    pub n_seq: usize,
    /// Matmuls of a packed decode step (`MUSER_CUDA_BATCH_MM=packed|mmq`): the packed decode
    /// kernels (default) or the prefill kernels (tensor cores). Same numbers either way.
    pub batch_mm: BatchMm,
    /// Rows per packed decode launch at most (`MUSER_CUDA_BATCH_NT=2|4|8`, default 4): a
    /// step of more rows runs several launches over the same weights.
    pub batch_nt: usize,
    /// Packed decode steps of at least this many rows run their Q4_K and Q6_K matmuls on the
    /// tensor cores (`mmv_q4_k` / `mmv_q6_k`, all rows in one launch;
    /// `MUSER_CUDA_MMV_MIN=2..=9`, default 3, 9 = never). Full model, tg64 aggregate vs one
    /// sequence with the first (Q4_K-only) kernel (docs/cuda.md): 2 rows 1.06x with it vs
    /// 1.27x without, 4 rows 1.90x vs 1.75x, 8 rows 2.74x vs 1.89x. Same numbers.
    pub mmv_min: usize,
    /// Tensor-core packed steps of at most 4 rows use the paired tiles (`mmv_pair_*`: two
    /// units per 16 × 8 tile, half the epilogue; `MUSER_CUDA_MMV_PAIR=1`, default off). Same
    /// numbers, slower (H200, 75dee43): 4 rows 2.13× one sequence vs 2.28× with the 8-column
    /// tiles; `mvb_bench` 4-row pass 303.6 vs 294.5 µs per layer (docs/cuda.md).
    pub mmv_pair: bool,
    /// Launch kernels with programmatic dependent launch (`MUSER_CUDA_PDL=0|1`; `None`: the
    /// route's default, [`CudaOptions::pdl_on`]): each kernel may start while the previous one
    /// in its stream/graph runs, issue its weight loads, and wait for it
    /// (`griddepcontrol.wait`) before touching anything it wrote (`Gpu::set_pdl`). Timing
    /// only: the same kernels and arithmetic.
    pub pdl: Option<bool>,
    /// A8 one-token decode on the register-resident kernels (`mvr_*_a8_t1`, where K <= 8192;
    /// `MUSER_CUDA_MVR=1`, A8 only; rows per warp `MUSER_CUDA_MVR_ROWS`). Same numbers.
    pub mvr: bool,
    /// Q6_K matmul weights on the device in the aligned repack Q6_K-P (`muser_cuda::q6pad`;
    /// default on with A16 activations, `MUSER_CUDA_Q6_PAD=0` keeps GGUF's layout): every A16
    /// kernel reads it (`q6p_kernels`) — a decode unit is three aligned 16-byte loads instead
    /// of eight windowed ones, 113 instead of 168 registers (H200: tg128 135.1 vs 124.8,
    /// docs/cuda.md). 1.03× the Q6_K bytes, one copy. Same arithmetic, bit for bit.
    pub q6_pad: bool,
    /// `MUSER_CUDA_Q6_PAD` was set (to 1: then the f32 route refuses it instead of leaving it off).
    pub q6_pad_explicit: bool,
}

/// The matmul kernels of a packed decode step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchMm {
    /// `mvs_*` / `mvp_*` `_t{2,4,8}` (matvec_packed.cu).
    Packed,
    /// The several-token kernels prefill uses (`mmq_*`, or the eight-token dp2a kernels).
    Mmq,
    /// An unknown `MUSER_CUDA_BATCH_MM` value (a session refuses it).
    Invalid,
}

/// Activation precision of the CUDA matmuls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acts {
    /// int16 quants with an f32 scale per 32 values (`muser_quant::a16`), int dot products.
    A16,
    /// int8 quants with an f32 scale per 32 values (`muser_quant::a8`'s quantization; the
    /// decode and prefill kernels of matvec_a8.cu / mmq_a8.cu): the A16 float chain on
    /// dp4a / single-MMA integer sums.
    A8,
    /// f32 activations against dequantized weights.
    F32,
    /// f16 activations (a power of two per token) against weights dequantized to f16 in
    /// registers, on the f16 tensor cores (`MUSER_CUDA_ACTS=f16`: Q4_K / Q6_K weights in the
    /// Q4H / Q6H layouts, `muser_cuda::q4h` / `q6h`; `cuda::h16`). The default where it covers
    /// the model (docs/cuda-f16.md).
    F16,
    /// An unknown `MUSER_CUDA_ACTS` value (a session refuses it).
    Invalid,
}

impl Acts {
    pub fn name(self) -> &'static str {
        match self {
            Acts::A16 => "a16",
            Acts::A8 => "a8",
            Acts::F32 => "f32",
            Acts::F16 => "f16",
            Acts::Invalid => "invalid",
        }
    }
}

impl CudaOptions {
    /// The activation format of the attention projections' input: `qkv_acts` on the A8 route,
    /// the route's own format elsewhere.
    pub fn qkv(&self) -> Acts {
        if self.acts == Acts::A8 {
            self.qkv_acts
        } else {
            self.acts
        }
    }

    /// Whether the f16 row maxima are in effect: `h16_rowmax` on the f16 route with the plain
    /// element-wise kernels (the fused twins, `h16_ew_fused` with `fuse`, write the f16 format
    /// themselves).
    pub fn h16_rowmax_on(&self) -> bool {
        self.acts == Acts::F16 && self.h16_rowmax && !(self.fuse && self.h16_ew_fused)
    }

    /// Whether the f16 decode FFN runs gate, up and SwiGLU in one launch: `h16_glu` as resolved
    /// by `h16::check_options` (which refuses `Some(true)` where the launch cannot run).
    pub fn h16_glu_on(&self) -> bool {
        self.acts == Acts::F16 && self.h16_glu == Some(true)
    }

    /// Whether the attention combine writes the f16 activations itself: `h16_combine_act` with
    /// the row maxima and strict math (`h16::check_options` refuses it elsewhere).
    pub fn h16_combine_act_on(&self) -> bool {
        self.h16_combine_act && self.h16_rowmax_on() && self.act_math == Math::Strict
    }

    /// Whether decode steps run the L2 prefetch branch (some point's budget above 0).
    pub fn l2_prefetch_on(&self) -> bool {
        self.l2_prefetch_mb.iter().any(|&mb| mb > 0)
    }

    /// The prefetch branch's kind as it runs (`touch` unless set).
    pub fn l2_prefetch_kind_on(&self) -> PrefetchKind {
        match self.l2_prefetch_kind {
            Some(L2Kind::Hint) => PrefetchKind::Hint,
            _ => PrefetchKind::Touch,
        }
    }

    /// Blocks per prefetch launch as they run.
    pub fn l2_prefetch_blocks_on(&self) -> usize {
        self.l2_prefetch_blocks.unwrap_or(L2_PREFETCH_BLOCKS)
    }

    /// Whether kernels launch with programmatic dependent launch: `pdl` where set, else on the
    /// f16 route only. H200, full forge, session 26 (alternating, one call): f16 tg128
    /// **124.93 / 124.65 vs 120.54 / 121.30** off, pp512 4473.5 vs 4434.7; the A8 route
    /// (2026-12-01): tg64 +0.4% in the parallel graph, pp512 −2% — off there.
    pub fn pdl_on(&self) -> bool {
        self.pdl.unwrap_or(self.acts == Acts::F16)
    }

    pub fn new(n_ctx: usize, chunk: usize) -> CudaOptions {
        CudaOptions {
            n_ctx,
            chunk: chunk.clamp(1, 512),
            graphs: std::env::var("MUSER_CUDA_GRAPH").as_deref() != Ok("0"),
            host_stage: std::env::var("MUSER_CUDA_HOST_STAGE").as_deref() != Ok("0"),
            step_times: std::env::var("MUSER_CUDA_STEP_TIMES").as_deref() == Ok("1"),
            mode: GraphMode::from_env(),
            gate_late: std::env::var("MUSER_CUDA_GATE_LATE").as_deref() != Ok("0"),
            gate_late_explicit: std::env::var_os("MUSER_CUDA_GATE_LATE").is_some(),
            act_math: if std::env::var("MUSER_CUDA_FAST_ACT").as_deref() == Ok("1") {
                Math::Fast
            } else {
                Math::Strict
            },
            pipe: std::env::var("MUSER_CUDA_PIPE").as_deref() != Ok("0"),
            xsmem: std::env::var("MUSER_CUDA_XSMEM").as_deref() != Ok("0"),
            mmq: std::env::var("MUSER_CUDA_MMQ").as_deref() != Ok("0"),
            fuse: std::env::var("MUSER_CUDA_FUSE").as_deref() != Ok("0"),
            fuse_explicit: std::env::var("MUSER_CUDA_FUSE").is_ok(),
            h16_ew_fused: std::env::var("MUSER_CUDA_H16_EW").as_deref() == Ok("fused"),
            h16_rowmax: std::env::var("MUSER_CUDA_H16_ROWMAX").as_deref() != Ok("0"),
            h16_glu: match std::env::var("MUSER_CUDA_H16_GLU").as_deref() {
                Ok("1") => Some(true),
                Ok("0") => Some(false),
                // Anything else is refused by `h16::check_options` on the f16 route.
                _ => None,
            },
            h16_combine_act: std::env::var("MUSER_CUDA_H16_COMBINE_ACT").as_deref() == Ok("1"),
            l2_prefetch_mb: std::env::var("MUSER_CUDA_L2_PREFETCH")
                .map_or([0; 4], |v| parse_points(&v)),
            l2_prefetch_kind: match std::env::var("MUSER_CUDA_L2_PREFETCH_KIND").as_deref() {
                Err(_) => None,
                Ok("hint") => Some(L2Kind::Hint),
                Ok("touch") => Some(L2Kind::Touch),
                Ok(_) => Some(L2Kind::Invalid),
            },
            l2_prefetch_blocks: env_usize("MUSER_CUDA_L2_PREFETCH_BLOCKS"),
            q4h_scales: muser_cuda::q4h::scales_from_env().unwrap_or(None),
            q6h_scales: muser_cuda::q6h::scales_from_env().unwrap_or(None),
            attn_super: env_usize("MUSER_CUDA_ATTN_SUPER").unwrap_or(ATTN_SUPER),
            attn_hpb: env_usize("MUSER_CUDA_ATTN_HPB").unwrap_or(0),
            attn_bufs: env_usize("MUSER_CUDA_ATTN_BUFS"),
            attn_cols: env_usize("MUSER_CUDA_ATTN_COLS").unwrap_or(1),
            attn_mt: std::env::var("MUSER_CUDA_ATTN_MT").as_deref() != Ok("0"),
            h16_attn_mma: std::env::var("MUSER_CUDA_H16_ATTN").as_deref() != Ok("f32"),
            acts: match std::env::var("MUSER_CUDA_ACTS").as_deref() {
                Ok("f32") => Acts::F32,
                Ok("f16") => Acts::F16,
                Ok("a8") => Acts::A8,
                Err(_) => Acts::A8,
                Ok("a16") => Acts::A16,
                // Rejected with the value's name by `CudaSession::new`.
                Ok(_) => Acts::Invalid,
            },
            acts_explicit: std::env::var("MUSER_CUDA_ACTS").is_ok(),
            qkv_acts: match std::env::var("MUSER_CUDA_QKV_ACTS").as_deref() {
                Err(_) | Ok("a16") => Acts::A16,
                Ok("a8") => Acts::A8,
                // Rejected with the value's name by `CudaSession::new`.
                Ok(_) => Acts::Invalid,
            },
            qkv_acts_explicit: std::env::var("MUSER_CUDA_QKV_ACTS").is_ok(),
            n_seq: 1,
            batch_nt: env_usize("MUSER_CUDA_BATCH_NT").unwrap_or(4),
            mmv_min: env_usize("MUSER_CUDA_MMV_MIN").unwrap_or(3),
            mmv_pair: std::env::var("MUSER_CUDA_MMV_PAIR").as_deref() == Ok("1"),
            pdl: match std::env::var("MUSER_CUDA_PDL").as_deref() {
                Ok("1") => Some(true),
                Ok("0") => Some(false),
                _ => None,
            },
            mvr: std::env::var("MUSER_CUDA_MVR").as_deref() == Ok("1"),
            q6_pad: std::env::var("MUSER_CUDA_Q6_PAD").as_deref() != Ok("0"),
            q6_pad_explicit: std::env::var("MUSER_CUDA_Q6_PAD").is_ok(),
            batch_mm: match std::env::var("MUSER_CUDA_BATCH_MM").as_deref() {
                Ok("mmq") => BatchMm::Mmq,
                Err(_) | Ok("packed") => BatchMm::Packed,
                // Rejected with the value's name by `CudaSession::new`.
                Ok(_) => BatchMm::Invalid,
            },
        }
    }
}

/// `MUSER_CUDA_L2_PREFETCH`'s value: one number for the four points or four comma-separated
/// ones; anything else reads as `usize::MAX` (refused with the range).
fn parse_points(v: &str) -> [usize; 4] {
    let parts: Vec<Option<usize>> = v.split(',').map(|p| p.trim().parse().ok()).collect();
    match parts.as_slice() {
        [Some(n)] => [*n; 4],
        [Some(a), Some(b), Some(c), Some(d)] => [*a, *b, *c, *d],
        _ => [usize::MAX; 4],
    }
}

/// How the L2 prefetch branch pulls bytes (`MUSER_CUDA_L2_PREFETCH_KIND`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum L2Kind {
    /// `cp.async.bulk.prefetch.L2` hints.
    Hint,
    /// Loads whose values are dropped (the default).
    Touch,
    /// Any other value: refused by `CudaSession::new`.
    Invalid,
}

/// Blocks per L2 prefetch launch unless `MUSER_CUDA_L2_PREFETCH_BLOCKS` says (the H200's SMs).
pub const L2_PREFETCH_BLOCKS: usize = 132;

/// A numeric environment switch: unset reads as `None`; a value that does not parse reads as
/// `usize::MAX`, which `CudaSession::new`'s checks reject with the switch's name.
fn env_usize(name: &str) -> Option<usize> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().parse().unwrap_or(usize::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefetch_points_parse_as_one_or_four_numbers() {
        assert_eq!(parse_points("8"), [8; 4]);
        assert_eq!(parse_points(" 16 "), [16; 4]);
        assert_eq!(parse_points("8,16,4,0"), [8, 16, 4, 0]);
        for bad in ["", "x", "8,16", "1,2,3,4,5", "8,,4,4", "-1"] {
            assert_eq!(parse_points(bad), [usize::MAX; 4], "{bad:?}");
        }
    }

    #[test]
    fn chunk_is_clamped_to_the_kernel_limit() {
        assert_eq!(CudaOptions::new(10, 4096).chunk, 512);
        assert_eq!(CudaOptions::new(10, 0).chunk, 1);
    }
}
