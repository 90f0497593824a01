//! The typed kernel registry. Every kernel Muser launches is a `Kernel` variant, defined once
//! with its module (`.cu` family) and symbol (`kernel_id`). `Registry::build` compiles every
//! module the engine launches from (`Module::ENGINE`; `Registry::build_modules` picks others)
//! with NVRTC for the device's architecture (`compile`) — strict, and where the module allows it
//! also fast-math — loads every kernel of it, and keeps each compiled module's identity (SHA-256
//! over the compiler version, options and source; `compile::Compiled`). A compile or load
//! failure is a typed error naming the module or kernel with the NVRTC log; asking for a
//! kernel/math pair that was never built is a programming error and panics (fail closed: there
//! is no fallback kernel).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{CudaFunction, CudaModule};
use cudarc::nvrtc::Ptx;
use sha2::{Digest, Sha256};

use crate::compile::hex;
pub use crate::compile::{compile_module, nvrtc_present, nvrtc_version, Compiled, Math, Module};
use crate::device::Gpu;
use crate::error::CudaError;
pub use crate::kernel_id::Kernel;
use crate::plan_h16::{H16Switches, MmtShape};
use crate::step_switches::StepSwitches;

/// One compiled module variant.
#[derive(Clone, Debug)]
pub struct CompiledModule {
    pub module: Module,
    pub math: Math,
    pub options: Vec<String>,
    /// The module's identity: SHA-256 (hex) over the NVRTC version, the options and the full
    /// source — what was compiled, the same in every run of a build (`compile_module`).
    pub sha256: String,
    /// SHA-256 (hex) of the PTX NVRTC returned this time: diagnostic only, it may differ
    /// between processes for the same source and options (see `compile_module`).
    pub ptx_sha256: String,
    pub compile_ms: f64,
    pub ptx_bytes: usize,
    /// What was loaded: the PTX (the driver JITs it) or NVRTC's CUBIN (`MUSER_CUDA_LOAD`).
    pub load: Load,
}

/// `MUSER_CUDA_LOAD=ptx|cubin` (default ptx): load each module's PTX, which the driver
/// compiles for the device at load (its JIT, cached per machine in the driver's compute
/// cache), or the CUBIN NVRTC assembled in the same compile for the real architecture
/// (`sm_90a`), with no JIT at load. The same source, options and arithmetic; the machine code
/// comes from NVRTC's assembler instead of the driver's. Built in session 43 (not yet run on
/// the device): a fresh machine's first init took ~110 s (session 41), later ones 0.5–1 s —
/// if the JIT is that time, `cubin` removes it. In the registry identity when `cubin`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Load {
    Ptx,
    Cubin,
}

impl Load {
    pub fn from_env() -> Result<Load, CudaError> {
        match std::env::var("MUSER_CUDA_LOAD").as_deref() {
            Err(_) | Ok("ptx") => Ok(Load::Ptx),
            Ok("cubin") => Ok(Load::Cubin),
            Ok(v) => Err(CudaError::Invalid(format!(
                "MUSER_CUDA_LOAD={v:?}: expected ptx or cubin"
            ))),
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Load::Ptx => "ptx",
            Load::Cubin => "cubin",
        }
    }
}

/// Launch shape of the tensor-core matmuls (`mmq_*`; `MMQ_BM`, `MMQ_THREADS` in mmq_a16.cu):
/// one block per tile of `MMQ_ROWS` output rows × `Registry::mmq_tokens` tokens
/// (`Registry::mmq_dims`).
pub const MMQ_ROWS: u32 = 128;
const MMQ_THREADS: u32 = 256;

/// All kernels, compiled and loaded.
pub struct Registry {
    /// Rows per warp of the one-token A16 matvec kernels (`-DMVA_R1`).
    pub mva_rows: u32,
    /// Warps per block of the A16 matvec kernels (`-DMVA_WARPS`).
    pub mva_warps: u32,
    /// Warps per block of the packed decode kernels (`-DMVA_WARPS` of matvec_packed.cu,
    /// `MUSER_CUDA_MVB_WARPS`, default 8: `mvb_bench` four-row pass 354.5 µs per layer vs 470.9
    /// with 4 warps, docs/cuda.md).
    pub mvb_warps: u32,
    /// Minimum resident blocks per SM asked of the one-token A16 matvec kernels (`-DMVA_MINB`;
    /// 0 = no register cap).
    pub mva_minb: u32,
    /// Tokens per tile of the tensor-core matmuls (`MMQ_BN` = 16 × `-DMMQ_WN`,
    /// `MUSER_CUDA_MMQ_WN`).
    pub mmq_tokens: u32,
    /// Minimum resident blocks per SM asked of the tensor-core matmuls (`-DMMQ_MINB`,
    /// `MUSER_CUDA_MMQ_MINB`).
    pub mmq_minb: u32,
    /// How the tensor-core matmuls convert their sums (`-DMMQ_CVT`, `MUSER_CUDA_MMQ_CVT`: 1
    /// (default) integer chain + I2FP, 0 magic-bias FP32 arithmetic; the same floats).
    pub mmq_cvt: u32,
    /// Double-buffered staging of the tensor-core matmuls (`-DMMQ_DB`, `MUSER_CUDA_MMQ_DB=1`: one
    /// barrier per unit instead of two; the same floats). Off until measured.
    pub mmq_db: u32,
    /// The Q6_K decode matvec keeps the next unit's weights as raw windows until they are
    /// needed (`-DMVA_Q6_LAZY`; default on, `MUSER_CUDA_Q6_LAZY=0` for A/B: tg128 109.5 vs
    /// 102.2 tok/s on the H200; the same words, so the same numbers).
    pub q6_lazy: bool,
    /// The staged decode kernels copy the activations with cp.async (`-DMVA_STAGE_ASYNC`,
    /// `MUSER_CUDA_STAGE_ASYNC=1`; the same bytes, so the same numbers). Off by default:
    /// `mvb_bench` one-token pass 196.8 / 194.0 µs per layer with it vs 156.0 / 153.0 without.
    pub stage_async: bool,
    /// Stages of the one-token decode kernels' weight ring in shared memory for Q4_K / Q6_K
    /// (`-DMVA_WSTAGES` / `-DMVA_WSTAGES_Q6`, `MUSER_CUDA_MVA_WSTAGES` /
    /// `MUSER_CUDA_MVA_WSTAGES_Q6`; 0 = the next unit in flight in registers). The same bytes,
    /// so the same numbers.
    pub mva_wstages: u32,
    pub mva_wstages_q6: u32,
    /// Units requested ahead in registers by the one-token Q4_K and Q6_K-P decode kernels
    /// (`-DMVA_AHEAD` / `-DMVA_AHEAD_Q6P`, `MUSER_CUDA_MVA_AHEAD` / `MUSER_CUDA_MVA_AHEAD_Q6P`;
    /// 1 = the next unit, 2 = the next two; 2 for Q4_K excludes its weight ring). Same
    /// units, same order, so the same numbers.
    pub mva_ahead: u32,
    pub mva_ahead_q6p: u32,
    /// Rows per warp of the register-resident A8 decode kernels (`mvr_*_a8_t1`, -DMVR_ROWS,
    /// `MUSER_CUDA_MVR_ROWS`) and whether they request the next row's weights ahead
    /// (-DMVR_AHEAD, `MUSER_CUDA_MVR_AHEAD`). Launch and schedule only: the same numbers.
    pub mvr_rows: u32,
    pub mvr_ahead: u32,
    /// The shape of the f16 prefill tiles (`MUSER_CUDA_MMT`): `MmtShape::Wg` (default) puts the
    /// matrices of at least `mmw_min` row groups on the warpgroup tiles `mmw_*`; the `mmt_*`
    /// shapes act on Q4H (Q6H's is always `MmtShape::W8`). Launch and schedule only: the same
    /// numbers.
    pub mmt: MmtShape,
    /// The f16 matmul chains' switches: chain counts S (part of the numbers) and the decode
    /// kernels' load schedule (the same bits), from `MUSER_CUDA_H16_*` / `MUSER_CUDA_MVH_*`.
    pub h16: H16Switches,
    /// The small steps' switches: the wide attention combine, the fused norm's thread layout
    /// (`MUSER_CUDA_COMBINE_WIDE`, `MUSER_CUDA_NORM_H16`; crate::step_switches).
    pub steps: StepSwitches,
    /// The kernel whose launches run twice (`MUSER_CUDA_PROBE_DUP`, a timing probe: crate::probe).
    pub probe_dup: Option<Kernel>,
    /// With `MmtShape::Wg`: the fewest row groups a matrix needs for the warpgroup tiles
    /// (`MUSER_CUDA_MMW_MIN`: 1024, FFN gate / up and the output projection; 0, every tiled
    /// matrix); the others keep `mmt_*` as `W8`. Launch only: the same bits.
    pub mmw_min: u32,
    /// Warpgroups per block of the warpgroup tiles (`MUSER_CUDA_MMW_WG`: 3, the measured default
    /// — the prototype's 429 µs on FFN gate / up against 566–580 at 2 — or 2, more blocks for the
    /// 4096- and 6656-row matrices: slower, pp512 3057.6 vs 3375.6 with every tiled matrix on
    /// `mmw`, eb802ec, docs/receipts/cuda-mmw-split-eb802ec.txt). Launch only: the same bits.
    pub mmw_wg: u32,
    /// With `MmtShape::Wg`: the matrices below `mmw_min` row groups (from 128) on the split
    /// warpgroup tiles — one block per (tile, chain), the chains' sums through scratch, then
    /// `mmw_fold` (`MUSER_CUDA_MMW_SPLIT=1`, the default; [`Registry::mmw_split_plan`]) — where
    /// the engine runs the matrix alone (no graph branch beside it: FFN down, O). Launch only:
    /// the same bits (`kernels_h16`). H200, eb802ec, full forge: pp512 3837.1 vs 3751.4 tok/s
    /// unsplit; `mvh_bench` 512 tokens, Q4H FFN down 464.6 vs 643.8 µs (`mmt`), Q6H 673.7 vs
    /// 704.8, O 142.1 vs 142.5 (docs/receipts/cuda-mmw-split-eb802ec.txt).
    pub mmw_split: bool,
    functions: HashMap<(Kernel, Math), CudaFunction>,
    modules: Vec<CompiledModule>,
    _loaded: Vec<Arc<CudaModule>>,
    /// What the modules were loaded from (`MUSER_CUDA_LOAD`).
    pub load: Load,
    pub arch: String,
    pub init_ms: f64,
}

/// Launch shape of the tensor-core packed decode rows (`mmv_*`; `MMV_WARPS` in mmv_a16.cu): one
/// block of 8 warps per 16 output rows, all token columns (<= 8) in it; the tokens' group
/// factors staged in dynamic shared memory (8 tokens × K/32 groups × 8 bytes) beside the
/// kernel's 16 KiB of static partials.
pub const MMV_ROWS: u32 = 16;
/// Output rows per block of the paired tensor-core packed rows (`mmv_pair_*`, <= 4 tokens).
pub const MMV_PAIR_ROWS: u32 = 8;
/// Most token columns of the paired kernels (`mmv_pair_*`).
pub const MMV_PAIR_MAX_TOKENS: usize = 4;
const MMV_THREADS: u32 = 256;
const MMV_STATIC_SMEM: usize = 16 * 1024;

impl Registry {
    /// The kernels launched as clusters of more than 8 blocks (the portable limit): the
    /// registry allows each the non-portable size when it loads them.
    pub const NON_PORTABLE_CLUSTER: [Kernel; 1] = [Kernel::ResidualNormH16Cl16];

    /// The launch of a tensor-core packed-rows matmul (`mmv_*`) over `n_out` rows of `k`
    /// inputs (`k` <= 93 184: the staged factors fit the opt-in shared memory).
    pub fn mmv_dims(&self, n_out: usize, k: usize) -> crate::launch::Dims {
        crate::launch::Dims {
            grid: ((n_out as u32).div_ceil(MMV_ROWS), 1, 1),
            block: MMV_THREADS,
            smem: (k / 32 * 8 * 8) as u32,
        }
    }

    /// The launch of a paired tensor-core packed-rows matmul (`mmv_pair_*`, at most 4 token
    /// columns): one block of 8 warps per 8 output rows; the tokens' group factors (4 tokens ×
    /// K/32 groups × 8 bytes) in dynamic shared memory beside 4 KiB of static partials.
    pub fn mmv_pair_dims(&self, n_out: usize, k: usize) -> crate::launch::Dims {
        crate::launch::Dims {
            grid: ((n_out as u32).div_ceil(MMV_PAIR_ROWS), 1, 1),
            block: MMV_THREADS,
            smem: (k / 32 * 4 * 8) as u32,
        }
    }

    /// Whether `mmv_*` takes `k` inputs (its staged factors fit the opt-in shared memory).
    pub fn mmv_fits(k: usize) -> bool {
        k.is_multiple_of(256) && k / 32 * 64 <= SMEM_OPTIN_MAX - MMV_STATIC_SMEM
    }

    /// Weight-ring stages and 16-byte chunks per unit of a one-token decode kernel (0 stages:
    /// no ring; only the pipelined Q4_K / Q6_K kernels have one).
    fn t1_ring(kernel: Kernel, q4: u32, q6: u32) -> (u32, u32) {
        match kernel {
            Kernel::MvsQ4kT1 | Kernel::MvpQ4kT1 => (q4, 3),
            Kernel::MvsQ6kT1 | Kernel::MvpQ6kT1 => (q6, 8),
            _ => (0, 0),
        }
    }

    /// The launch of a one-token pipelined decode matmul over `n_out` rows of `k` inputs:
    /// `kernel` is either of the format's pipelined kernels (`mvs_*_t1` staged, `mvp_*_t1`; the
    /// weight ring depends on the format only), and the plan says whether the staged one runs;
    /// `staged` false asks for the unstaged one. Staged where its shared memory fits: the
    /// 48 KiB default without a weight ring (wider inputs, K > 21 845 at the defaults, take the
    /// unstaged kernel), the opt-in limit with one. Dynamic shared memory: the staged
    /// activations (K/64 runs of 64 quants and their pad: 144 bytes A16, 80 bytes A8), then
    /// the weight ring (`mva_warps` warps × stages × `mva_rows` rows × chunks × 32 lanes × 16
    /// bytes).
    pub fn t1_plan(&self, kernel: Kernel, n_out: usize, k: usize, staged: bool) -> PackedPlan {
        let (stages, chunks) = Self::t1_ring(kernel, self.mva_wstages, self.mva_wstages_q6);
        let ring = (self.mva_warps * stages * self.mva_rows * chunks * 32 * 16) as usize;
        let act = k.div_ceil(64)
            * if kernel.module() == Module::MatvecA8 {
                80
            } else {
                144
            };
        let red = (self.mva_warps * self.mva_rows) as usize * 36 * 4;
        let limit = if stages > 0 {
            SMEM_OPTIN_MAX
        } else {
            crate::launch::SMEM_DEFAULT_MAX
        };
        let staged = staged && k.is_multiple_of(64) && act + ring + red <= limit;
        PackedPlan {
            staged,
            dims: crate::launch::Dims {
                grid: (
                    (n_out as u32).div_ceil(self.mva_warps * self.mva_rows),
                    1,
                    1,
                ),
                block: 32 * self.mva_warps,
                smem: (if staged { act + ring } else { ring }) as u32,
            },
        }
    }

    /// The launch of a register-resident A8 decode kernel (`mvr_*_a8_t1`) over `n_out` rows of
    /// `k` inputs, where its registers hold a lane's activations (`k` a multiple of 256 and at
    /// most 64 · 32 · MVR_UNITS = 8192); `None` elsewhere.
    pub fn mvr_dims(&self, n_out: usize, k: usize) -> Option<crate::launch::Dims> {
        (k.is_multiple_of(256) && k <= 8192).then(|| crate::launch::Dims {
            grid: (
                (n_out as u32).div_ceil(self.mva_warps * self.mvr_rows),
                1,
                1,
            ),
            block: 32 * self.mva_warps,
            smem: 0,
        })
    }

    /// The launch of a tensor-core matmul (`mmq_*`) over `n_out` rows and `n_tok` tokens.
    pub fn mmq_dims(&self, n_out: usize, n_tok: usize) -> crate::launch::Dims {
        crate::launch::Dims {
            grid: (
                (n_out as u32).div_ceil(MMQ_ROWS),
                (n_tok as u32).div_ceil(self.mmq_tokens),
                1,
            ),
            block: MMQ_THREADS,
            smem: 0,
        }
    }

    /// The launch of a packed decode matmul (`mvs_*` / `mvp_*` `_t{nt}`, matvec_packed.cu) over
    /// `n_out` rows of `k` inputs: staged (the NT activation rows copied into shared memory,
    /// up to the opt-in limit) where the copy fits, else unstaged. Rows per warp: the one-token
    /// kernels' `mva_rows`, fewer where R·NT would exceed 8 outputs per warp (the kernel
    /// macro's rule).
    pub fn packed_plan(&self, n_out: usize, k: usize, nt: usize) -> PackedPlan {
        self.packed_plan_with(n_out, k, nt, 72 * 2)
    }

    /// [`Registry::packed_plan`] for the A8 packed decode kernels (`mvs_*_a8_t{nt}` /
    /// `mvp_*_a8_t{nt}`, matvec_packed_a8.cu): 80 staged bytes per 64 activations instead of 144.
    pub fn packed_plan_a8(&self, n_out: usize, k: usize, nt: usize) -> PackedPlan {
        self.packed_plan_with(n_out, k, nt, 80)
    }

    /// The packed plan with `bytes64` staged bytes per 64 activations of a token.
    fn packed_plan_with(&self, n_out: usize, k: usize, nt: usize, bytes64: usize) -> PackedPlan {
        let rows = if self.mva_rows as usize * nt <= 8 {
            self.mva_rows
        } else {
            (8 / nt) as u32
        };
        let smem = nt * (k / 64) * bytes64;
        let staged =
            k.is_multiple_of(64) && smem <= SMEM_OPTIN_MAX - packed_red_max(self.mvb_warps);
        PackedPlan {
            staged,
            dims: crate::launch::Dims {
                grid: ((n_out as u32).div_ceil(self.mvb_warps * rows), 1, 1),
                block: 32 * self.mvb_warps,
                smem: if staged { smem as u32 } else { 0 },
            },
        }
    }

    /// Compile and load every module variant for `gpu`'s architecture.
    pub fn build(gpu: &Gpu) -> Result<Registry, CudaError> {
        Registry::build_modules(gpu, &Module::ENGINE)
    }

    /// [`Registry::build`] for the given modules only (the packed-decode benchmark and tests
    /// add [`Module::MatvecPacked`]).
    pub fn build_modules(gpu: &Gpu, which: &[Module]) -> Result<Registry, CudaError> {
        Registry::build_modules_with(gpu, which, [None, None])
    }

    /// [`Registry::build_modules`] with the Q4H and Q6H scales' forms given where Some (the
    /// engine's choice for its model, `MUSER_CUDA_Q4H_SCALES` / `_Q6H_SCALES=auto` resolved)
    /// instead of the environment's.
    pub fn build_modules_with(
        gpu: &Gpu,
        which: &[Module],
        [q4h, q6h]: [Option<crate::scales::Scales>; 2],
    ) -> Result<Registry, CudaError> {
        let t0 = Instant::now();
        gpu.bind()?;
        let (maj, min) = gpu.info.compute_capability;
        // sm_90 gets the architecture-specific `a` target (Hopper features); others plain.
        let arch: &'static str = match (maj, min) {
            (9, 0) => "sm_90a",
            _ => Box::leak(format!("sm_{maj}{min}").into_boxed_str()),
        };
        let mva_rows = mva_rows_from_env()?;
        let mva_minb = mva_minb_from_env()?;
        let mva_warps = mva_warps_from_env()?;
        let mvb_warps = env_choice("MUSER_CUDA_MVB_WARPS", 8, &[4, 8, 16])?;
        let ld16_window = ld16_from_env()?;
        let mmq_wn = env_choice("MUSER_CUDA_MMQ_WN", 4, &[2, 4])?;
        let mmq_minb = env_choice("MUSER_CUDA_MMQ_MINB", 1, &[1, 2])?;
        let mmq_cvt = env_choice("MUSER_CUDA_MMQ_CVT", 1, &[0, 1])?;
        let mmq_db = env_choice("MUSER_CUDA_MMQ_DB", 0, &[0, 1])?;
        let q6_lazy = env_choice("MUSER_CUDA_Q6_LAZY", 1, &[0, 1])?;
        let stage_async = env_choice("MUSER_CUDA_STAGE_ASYNC", 0, &[0, 1])?;
        let mva_wstages = env_choice("MUSER_CUDA_MVA_WSTAGES", 0, &[0, 2, 3, 4, 6])?;
        let mva_wstages_q6 = env_choice("MUSER_CUDA_MVA_WSTAGES_Q6", 0, &[0, 2, 3, 4])?;
        let mva_ahead = env_choice("MUSER_CUDA_MVA_AHEAD", 1, &[1, 2])?;
        let mva_ahead_q6p = env_choice("MUSER_CUDA_MVA_AHEAD_Q6P", 1, &[1, 2])?;
        let mvr_rows = env_choice("MUSER_CUDA_MVR_ROWS", 4, &[1, 2, 4, 8, 16])?;
        let mvr_ahead = env_choice("MUSER_CUDA_MVR_AHEAD", 0, &[0, 1])?;
        let mmt = MmtShape::from_env()?;
        let mmw_min = env_choice("MUSER_CUDA_MMW_MIN", 1024, &[0, 1024])?;
        let mmw_wg = env_choice("MUSER_CUDA_MMW_WG", 3, &[2, 3])?;
        let mmw_split = env_choice("MUSER_CUDA_MMW_SPLIT", 1, &[0, 1])? == 1;
        for name in [
            "MUSER_CUDA_MMW_MIN",
            "MUSER_CUDA_MMW_WG",
            "MUSER_CUDA_MMW_SPLIT",
        ] {
            if mmt != MmtShape::Wg && std::env::var_os(name).is_some() {
                return Err(CudaError::Invalid(format!(
                    "{name} acts on the warpgroup tiles only (MUSER_CUDA_MMT=wg, not {})",
                    mmt.label()
                )));
            }
        }
        let mut h16 = H16Switches::from_env()?;
        if let Some(q) = q4h {
            h16.q4h_scales = q;
        }
        if let Some(q) = q6h {
            h16.q6h_scales = q;
        }
        if mva_ahead == 2 && mva_wstages > 0 {
            return Err(CudaError::Invalid(
                "MUSER_CUDA_MVA_AHEAD=2 and MUSER_CUDA_MVA_WSTAGES: the Q4_K decode kernel \
                 keeps its weights ahead either in registers or in a ring, not both"
                    .into(),
            ));
        }
        let steps = StepSwitches::from_env()?;
        let load = Load::from_env()?;
        let mut functions = HashMap::new();
        let mut modules = Vec::new();
        let mut loaded = Vec::new();
        for &m in which {
            let src = m.source();
            for &math in m.maths() {
                let t = Instant::now();
                let mut extra = match m {
                    Module::MatvecA16
                    | Module::MatvecPacked
                    | Module::MatvecA8
                    | Module::MatvecPackedA8 => vec![
                        format!("-DMVA_R1={mva_rows}"),
                        format!("-DMVA_MINB={mva_minb}"),
                        format!(
                            "-DMVA_WARPS={}",
                            if matches!(m, Module::MatvecPacked | Module::MatvecPackedA8) {
                                mvb_warps
                            } else {
                                mva_warps
                            }
                        ),
                        format!("-DMUSER_LD16_WINDOW={}", u8::from(ld16_window)),
                        format!("-DMVA_Q6_LAZY={q6_lazy}"),
                        format!("-DMVA_STAGE_ASYNC={stage_async}"),
                    ],
                    Module::MmvA16 => vec![
                        format!("-DMUSER_LD16_WINDOW={}", u8::from(ld16_window)),
                        format!("-DMMQ_CVT={mmq_cvt}"),
                    ],
                    Module::MmqA16 | Module::MmqA8 => vec![
                        format!("-DMUSER_LD16_WINDOW={}", u8::from(ld16_window)),
                        format!("-DMMQ_WN={mmq_wn}"),
                        format!("-DMMQ_MINB={mmq_minb}"),
                        format!("-DMMQ_CVT={mmq_cvt}"),
                        format!("-DMMQ_DB={mmq_db}"),
                    ],
                    _ => Vec::new(),
                };
                if m == Module::MatvecA16 {
                    extra.push(format!("-DMVA_WSTAGES={mva_wstages}"));
                    extra.push(format!("-DMVA_WSTAGES_Q6={mva_wstages_q6}"));
                    extra.push(format!("-DMVA_AHEAD={mva_ahead}"));
                    extra.push(format!("-DMVA_AHEAD_Q6P={mva_ahead_q6p}"));
                }
                if m == Module::MatvecA8 {
                    extra.push(format!("-DMVR_ROWS={mvr_rows}"));
                    extra.push(format!("-DMVR_AHEAD={mvr_ahead}"));
                }
                if matches!(m, Module::MatvecH16 | Module::ProbesH16) {
                    extra.extend(h16.defines());
                }
                extra.extend(steps.defines(m));
                if matches!(m, Module::MmtH16 | Module::MmwH16) {
                    // The prefill tiles share formats_h16.cuh's scale broadcasts.
                    extra.push(format!("-DMVH_LEAN={}", h16.mvh_lean));
                    extra.extend(h16.scale_defines());
                    // The decode kernels' k16 order (an experiment: formats_h16.cuh). Only where
                    // on: the default modules' compile line stays what the receipts measured.
                    if h16.mvh_acc2 != 0 {
                        extra.push(format!("-DMVH_ACC2={}", h16.mvh_acc2));
                    }
                }
                if m == Module::MmwH16 {
                    extra.push(format!("-DMMW_WG={mmw_wg}"));
                }
                if m == Module::MmtH16 {
                    // Q4H's tile shape (`MmtShape::params`: the stages `MmtShape::smem` sizes the
                    // launch for, one source of truth) and the blocks per SM.
                    let (wg, minb, stages) = mmt.params();
                    extra.push(format!("-DMMT_WG={wg}"));
                    extra.push(format!("-DMMT_MINB={minb}"));
                    extra.push(format!("-DMMT_STAGES={stages}"));
                }
                let c = compile_module(m, math, arch, &src, &extra)?;
                let (options, sha256, ptx_bytes) = (c.options, c.sha256, c.ptx_bytes);
                let image = match (load, c.cubin) {
                    (Load::Ptx, _) => c.ptx,
                    (Load::Cubin, Some(bin)) => Ptx::from_binary(bin),
                    (Load::Cubin, None) => {
                        return Err(CudaError::Invalid(format!(
                            "MUSER_CUDA_LOAD=cubin: NVRTC built no CUBIN for {arch} ({})",
                            m.file()
                        )))
                    }
                };
                let module = gpu.ctx().load_module(image).map_err(|e| CudaError::Load {
                    module: m.file().into(),
                    kernel: "(module)".into(),
                    source: e,
                })?;
                for &k in Kernel::ALL.iter().filter(|k| k.module() == m) {
                    let f = module
                        .load_function(k.symbol())
                        .map_err(|e| CudaError::Load {
                            module: m.file().into(),
                            kernel: k.symbol().into(),
                            source: e,
                        })?;
                    // Kernels whose dynamic shared memory may pass the 48 KiB default opt in
                    // to the SM's large shared memory, beside their static scratch.
                    let static_smem = if matches!(m, Module::MmvA16 | Module::MmvA8) {
                        // Up to 93 184 inputs' staged factors beside the static partials.
                        Some(MMV_STATIC_SMEM)
                    } else if Self::t1_ring(k, mva_wstages, mva_wstages_q6).0 > 0 {
                        // The one-token decode kernels' weight ring (`t1_plan`) beside the
                        // staged activations and the lane-sum scratch.
                        Some((mva_warps * mva_rows) as usize * 36 * 4)
                    } else if (h16.mvh_bulk > 0 || h16.mvh_xstage || h16.mvh_xsmem)
                        && k.symbol().starts_with("mvh_")
                    {
                        // The bulk-copy ring (`Registry::mvh_bulk_smem`) or the staged
                        // activations (`Registry::mvh_xstage_smem` / `mvh_xsmem_smem`) beside the barriers and the
                        // chains' partial sums.
                        Some(crate::plan_h16::MVH_STATIC_SMEM)
                    } else if matches!(m, Module::MmtH16 | Module::MmwH16 | Module::AttnH16) {
                        // The prefill tiles' stages (`MmtShape::smem`), the attention's tiles in
                        // flight (`AttnH16Shape::smem`), no static shared memory.
                        Some(0)
                    } else if matches!(m, Module::MatvecPacked | Module::MatvecPackedA8)
                        && k.symbol().starts_with("mvs_")
                    {
                        // The staged packed kernels copy NT activation rows.
                        Some(packed_red_max(mvb_warps))
                    } else {
                        None
                    };
                    if let Some(st) = static_smem {
                        f.set_attribute(
                            cudarc::driver::sys::CUfunction_attribute_enum::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                            (SMEM_OPTIN_MAX - st) as i32,
                        )
                        .map_err(|e| CudaError::Load {
                            module: m.file().into(),
                            kernel: k.symbol().into(),
                            source: e,
                        })?;
                    }
                    if Registry::NON_PORTABLE_CLUSTER.contains(&k) {
                        f.set_attribute(
                            cudarc::driver::sys::CUfunction_attribute_enum::CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
                            1,
                        )
                        .map_err(|e| CudaError::Load {
                            module: m.file().into(),
                            kernel: k.symbol().into(),
                            source: e,
                        })?;
                    }
                    functions.insert((k, math), f);
                }
                loaded.push(module);
                modules.push(CompiledModule {
                    module: m,
                    math,
                    options,
                    sha256,
                    ptx_sha256: c.ptx_sha256,
                    compile_ms: t.elapsed().as_secs_f64() * 1e3,
                    ptx_bytes,
                    load,
                });
            }
        }
        let probe_dup = crate::probe::dup_from_env()?;
        let dup_fns: Vec<&CudaFunction> = probe_dup.map_or(Vec::new(), |k| {
            [Math::Strict, Math::Fast]
                .iter()
                .filter_map(|m| functions.get(&(k, *m)))
                .collect()
        });
        crate::probe::install(probe_dup, &dup_fns)?;
        Ok(Registry {
            probe_dup,
            steps,
            mva_rows,
            mva_minb,
            mmq_tokens: 16 * mmq_wn,
            mmq_minb,
            mmq_cvt,
            mmq_db,
            q6_lazy: q6_lazy == 1,
            stage_async: stage_async == 1,
            mva_wstages,
            mva_wstages_q6,
            mva_ahead,
            mva_ahead_q6p,
            mvr_rows,
            mvr_ahead,
            mmt,
            h16,
            mmw_min,
            mmw_wg,
            mmw_split,
            mva_warps,
            mvb_warps,
            functions,
            modules,
            _loaded: loaded,
            arch: arch.to_string(),
            load,
            init_ms: t0.elapsed().as_secs_f64() * 1e3,
        })
    }

    /// The loaded function. Panics if `(kernel, math)` was never built: that is a programming
    /// error in the route, not an input error.
    pub fn get(&self, kernel: Kernel, math: Math) -> &CudaFunction {
        match self.functions.get(&(kernel, math)) {
            Some(f) => f,
            None => panic!(
                "kernel {kernel:?} ({}) in {} math was never registered",
                kernel.symbol(),
                math.label()
            ),
        }
    }

    pub fn modules(&self) -> &[CompiledModule] {
        &self.modules
    }

    /// SHA-256 over every compiled module's fingerprint, in registry order.
    pub fn identity(&self) -> String {
        let mut h = Sha256::new();
        for m in &self.modules {
            h.update(m.sha256.as_bytes());
            if m.load == Load::Cubin {
                h.update(b"+cubin");
            }
        }
        hex(&h.finalize())
    }
}

/// Dynamic + static shared memory one block may use on sm_90 after opting in (227 KiB).
pub const SMEM_OPTIN_MAX: usize = 232_448;

/// The packed decode kernels' static lane-sum scratch at most (`MVA_RED_DECL`: 8 outputs per
/// warp × 36 floats per warp).
fn packed_red_max(warps: u32) -> usize {
    warps as usize * 8 * 36 * 4
}

/// How one packed decode matmul launches (`Registry::packed_plan`).
#[derive(Clone, Copy, Debug)]
pub struct PackedPlan {
    /// The `mvs_*` kernel (activations staged in shared memory) rather than `mvp_*`.
    pub staged: bool,
    pub dims: crate::launch::Dims,
}

/// A numeric compile-time switch: `name` unset gives `default`; otherwise one of `allowed`.
pub(crate) fn env_choice(name: &str, default: u32, allowed: &[u32]) -> Result<u32, CudaError> {
    match std::env::var(name) {
        Err(_) => Ok(default),
        Ok(v) => match v.trim().parse::<u32>() {
            Ok(n) if allowed.contains(&n) => Ok(n),
            _ => Err(CudaError::Invalid(format!(
                "{name}={v}: expected one of {allowed:?}"
            ))),
        },
    }
}

/// `MUSER_CUDA_MVA_ROWS` (rows per warp of the decode matvec; default 2, measured fastest on
/// the H200: docs/cuda.md).
fn mva_rows_from_env() -> Result<u32, CudaError> {
    env_choice("MUSER_CUDA_MVA_ROWS", 2, &[1, 2, 4, 8])
}

/// `MUSER_CUDA_MVA_MINB` (minimum blocks per SM for the decode matvec's register budget;
/// default 0 = none).
fn mva_minb_from_env() -> Result<u32, CudaError> {
    env_choice("MUSER_CUDA_MVA_MINB", 0, &[0, 1, 2, 3, 4, 5, 6, 7, 8])
}

/// `MUSER_CUDA_MVA_WARPS` (warps per block of the A16 matvec kernels; default 4).
fn mva_warps_from_env() -> Result<u32, CudaError> {
    env_choice("MUSER_CUDA_MVA_WARPS", 4, &[4, 8, 16])
}

/// `MUSER_CUDA_LD16` (how the A16 kernels read 16 bytes at 2-byte-aligned addresses: `window`,
/// the default, or `words`; see formats_a16.cuh).
fn ld16_from_env() -> Result<bool, CudaError> {
    match std::env::var("MUSER_CUDA_LD16").as_deref() {
        Err(_) | Ok("window") => Ok(true),
        Ok("words") => Ok(false),
        Ok(v) => Err(CudaError::Invalid(format!(
            "MUSER_CUDA_LD16={v}: expected window or words"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kernel_symbol_is_defined_in_its_module() {
        for &k in Kernel::ALL {
            let src = k.module().source();
            let needle = format!("{}(", k.symbol());
            let macro_use = format!("({},", k.symbol());
            assert!(
                src.contains(&needle) || src.contains(&macro_use),
                "{k:?}: symbol {} not found in {}",
                k.symbol(),
                k.module().file()
            );
        }
    }

    #[test]
    fn kernel_symbols_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for &k in Kernel::ALL {
            assert!(seen.insert(k.symbol()), "duplicate symbol {}", k.symbol());
        }
    }
}
