//! Switches of the small decode steps between the matmuls — the attention combine and the f16
//! route's fused norm — read once from the environment when the registry is built, turned into
//! compile defines of their modules. Each is a schedule choice with the same bits as its
//! default (the device checks: `cuda_route`'s f16 variants and the tiny logits,
//! `scripts/device/l2pf-super-ab.sh`); measurements in docs/cuda.md's switch rows.

use crate::error::CudaError;
use crate::registry::{env_choice, Module};

/// Launches of at most this many tokens run `residual_norm_h16_cl8` under
/// [`NormH16::Auto`]: 8 blocks per token, so up to 128 blocks — one wave on the H200's 132 SMs.
/// Measured at 1 token (decode, the win) and 512 (prefill, the loss); batched decode (2–16
/// tokens) sits between, its side by side in docs/benchmarks.md.
pub const CL8_AUTO_MAX_TOKENS: usize = 16;

/// How the f16 route's fused norm (norm.cu `residual_norm_h16`, `-DNORM_H16`, and its cluster
/// twin `residual_norm_h16_cl8`) lays the same arithmetic on threads
/// (`MUSER_CUDA_NORM_H16=auto|shfl|smem|unit|cl8`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NormH16 {
    /// `Cl8` for launches of at most [`CL8_AUTO_MAX_TOKENS`] tokens (decode), `Shfl` for the
    /// others (prefill) — the default since session 36: `cl8` measured tg128 +2.0 / +2.1 /
    /// +2.8 / +2.7% at depth 0 / 2048 / 8192 / 32768 and pp512 −0.9 / −0.9 / −0.1 / +0.1%
    /// against `shfl` (full forge, one call).
    Auto,
    /// A thread per run of 8 values (`NORM_THREADS` threads), each 32-value unit gathered onto
    /// its first lane by shuffles (every launch).
    Shfl,
    /// The same threads, the units gathered through shared memory.
    Smem,
    /// A thread per 32-value unit (n / 32 threads rounded up to whole warps): no gather, fewer
    /// warps at each barrier.
    Unit,
    /// `Shfl`'s 1024 threads as a thread-block cluster of 8 blocks of 128 per token (grid (8,
    /// n_tok), cluster (8, 1, 1): `crate::launch::launch_cluster`), the block reductions' warp
    /// totals exchanged through distributed shared memory into `Shfl`'s 32 slots (the same
    /// tree), for every launch.
    Cl8,
    /// The same as a cluster of 16 blocks of 64 per token (`residual_norm_h16_cl16`, a
    /// non-portable cluster size), the warp totals into slot 2c + w: the same tree, for launches
    /// of at most [`CL8_AUTO_MAX_TOKENS`] tokens (`Shfl` above). The same bits; level with
    /// `Cl8` (session 37, full forge tg128 alternating: 143.99 / 143.43 vs 143.67 / 144.03).
    Cl16,
}

impl NormH16 {
    fn from_env() -> Result<NormH16, CudaError> {
        if std::env::var_os("MUSER_CUDA_NORM_SMEM").is_some() {
            return Err(CudaError::Invalid(
                "MUSER_CUDA_NORM_SMEM is now MUSER_CUDA_NORM_H16=smem (auto | shfl | smem | unit \
                 | cl8 | cl16)"
                    .into(),
            ));
        }
        match std::env::var("MUSER_CUDA_NORM_H16").as_deref() {
            Err(_) | Ok("auto") => Ok(NormH16::Auto),
            Ok("shfl") => Ok(NormH16::Shfl),
            Ok("smem") => Ok(NormH16::Smem),
            Ok("unit") => Ok(NormH16::Unit),
            Ok("cl8") => Ok(NormH16::Cl8),
            Ok("cl16") => Ok(NormH16::Cl16),
            Ok(v) => Err(CudaError::Invalid(format!(
                "MUSER_CUDA_NORM_H16={v}: expected auto, shfl, smem, unit, cl8 or cl16"
            ))),
        }
    }

    /// `-DNORM_H16`'s value: the body of `residual_norm_h16` (the cluster twin is always
    /// compiled).
    fn define(self) -> u32 {
        match self {
            NormH16::Auto | NormH16::Shfl | NormH16::Cl8 | NormH16::Cl16 => 0,
            NormH16::Smem => 1,
            NormH16::Unit => 2,
        }
    }

    /// The route-id suffix of the fused norm (`fuse=norm…`): empty for the default.
    pub fn label(self) -> &'static str {
        match self {
            NormH16::Auto => "",
            NormH16::Shfl => "-shfl",
            NormH16::Smem => "-smem",
            NormH16::Unit => "-unit",
            NormH16::Cl8 => "-cl8",
            NormH16::Cl16 => "-cl16",
        }
    }

    /// The blocks per token of the cluster twin (`residual_norm_h16_cl8` / `_cl16`) a launch of
    /// `n_tok` tokens runs, or `None` for the one-block `residual_norm_h16`.
    pub fn cluster_for(self, n_tok: usize) -> Option<u32> {
        match self {
            NormH16::Cl8 => Some(8),
            NormH16::Auto => (n_tok <= CL8_AUTO_MAX_TOKENS).then_some(8),
            NormH16::Cl16 => (n_tok <= CL8_AUTO_MAX_TOKENS).then_some(16),
            NormH16::Shfl | NormH16::Smem | NormH16::Unit => None,
        }
    }

    /// Threads per block of `residual_norm_h16` for rows of `n` values (`n % 64 == 0`,
    /// `n <= 8 * norm_threads`, checked by the engine): `norm_threads` (the kernels'
    /// `NORM_THREADS`), with `Unit` one thread per 32 values rounded up to whole warps. The
    /// cluster twins' blocks: `cluster_for`'s count of `norm_threads / count` per token.
    pub fn block(self, n: usize, norm_threads: u32) -> u32 {
        match self {
            NormH16::Unit => ((n / 32) as u32).div_ceil(32) * 32,
            NormH16::Auto | NormH16::Shfl | NormH16::Smem | NormH16::Cl8 | NormH16::Cl16 => {
                norm_threads
            }
        }
    }
}

/// The cluster of `attn_combine_h16_cl` (`StepSwitches::combine_cl`) for `n_head` heads of
/// `hd_v` values: (blocks per token C, threads per block) — the most blocks (at most 8, the
/// portable cluster size) that divide the heads evenly with at most 1024 threads each (one warp
/// per 32-value group); `None` where no cluster fits (`hd_v % 32 != 0`, or a row wider than
/// 8 × 1024 values).
pub fn combine_cluster(n_head: usize, hd_v: usize) -> Option<(u32, u32)> {
    if hd_v == 0 || !hd_v.is_multiple_of(32) {
        return None;
    }
    [8usize, 4, 2, 1]
        .into_iter()
        .filter(|&c| n_head.is_multiple_of(c))
        .map(|c| (c, n_head / c * hd_v))
        .find(|&(_, threads)| threads <= 1024)
        .map(|(c, threads)| (c as u32, threads as u32))
}

/// The small steps' switches (`Registry::steps`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepSwitches {
    /// The f16 route's decode combine (`attn_combine_m_wide`, launched for decode steps; prefill
    /// keeps `attn_combine_m`) loads a chunk's 32 partials at once where a warp merges one
    /// 32-value group and the head has at least this many partials (`-DCOMBINE_WIDE`,
    /// `MUSER_CUDA_COMBINE_WIDE=0|1|8|16|32`, default 8, 0 = never;
    /// attention.cu `combine_head`): one round trip per 32 partials instead of per 4. The same
    /// multiply-adds in the same order: the same bits. Session 33 (full forge, compiled into
    /// every combine then): tg128 +0.6 / +0.6 / +0.6 / +2.6% at depth 0 / 2048 / 8192 / 32768,
    /// pp512 −1.3 / −1.0 / −1.0 / +0.5% — hence decode launches only. Session 34 (decode-only
    /// form, beside the default in one call): tg128 +0.0 / +0.2 / +0.6 / +1.6%; with
    /// `combine_pipe` −0.2 / +1.2 / +1.5 / +4.2%.
    pub combine_wide: u32,
    /// The wide combine requests the next chunk's 32 partials before the current chunk's
    /// multiply-adds (`-DCOMBINE_PIPE`, `MUSER_CUDA_COMBINE_PIPE=0|1`, default 1 with the wide
    /// combine, 0 without it; asking for 1 with `MUSER_CUDA_COMBINE_WIDE=0` is refused): one load
    /// round trip per head instead of one per 32 partials. The same bits; static SASS of
    /// `attn_combine_m_wide` 96 registers (115 without). Session 34: see `combine_wide`.
    pub combine_pipe: bool,
    /// Decode steps' combine and the f16 activations of its row as one launch
    /// (`attn_combine_h16_cl`, attention.cu; `MUSER_CUDA_COMBINE_CL=0|1`, default 0): each token's heads as a thread-block cluster whose blocks exchange their row
    /// maxima through distributed shared memory, then convert their own values — instead of
    /// `attn_combine_m_wide` → `act_h16_m` (one kernel boundary fewer per layer, ~2.5 µs in the
    /// graph). The same bits (session 37: `cuda_attention`, tiny logits). Not kept: full forge
    /// tg128 +0.5 / −0.2 / −0.1 / −1.7% at depth 0 / 2048 / 8192 / 32768 (session 37).
    pub combine_cl: bool,
    /// The fused f16 norm's thread layout (`MUSER_CUDA_NORM_H16=auto|shfl|smem|unit|cl8|cl16`).
    pub norm_h16: NormH16,
    /// The norm kernels' block reductions (norm.cu `block_rms`, and the fused f16 norm's row
    /// maximum) finish in warp 0 alone, the result broadcast through shared memory
    /// (`-DNORM_RED1`, `MUSER_CUDA_NORM_RED1=0|1`, default 1 since session 36; every route): the
    /// last butterfly and the f64 division, square root and reciprocal once instead of in each
    /// of 32 warps, which compete for the shuffle unit and the f64 pipe. The same tree and
    /// operations: the same bits. Session 36 (full forge, beside the old default in one call,
    /// the fused norm unclustered): tg128 +0.2 / −0.1 / +0.2 / +0.8% at depth 0 / 2048 / 8192 /
    /// 32768, pp512 +0.0 / +0.3 / +0.4 / +0.7% — small, never worse beyond the noise.
    pub norm_red1: bool,
    /// The clustered f16 norm (`residual_norm_h16_cl8` / `_cl16`: decode) takes H's f16 shift
    /// from its second cluster exchange when a bound decides it, instead of a third exchange of
    /// H's row maximum (`-DNORM_AMAX_BOUND`, `MUSER_CUDA_NORM_BOUND=0|1`, default 1 since
    /// session 45; norm.cu `h16_shift_bound`, host mirror `crate::norm_bound`): that exchange
    /// also carries max |fl(x·wn)| and max |wn|, which fix the exponent of max |H| unless the
    /// row is zero, non-finite or tiny or its estimate lies within 2^-20 of a power of two —
    /// then the third exchange runs as before. So the shift is always the exact one: the same
    /// bits. One cluster barrier of three fewer per norm, 103 norms per token. Static SASS
    /// (session 44): `residual_norm_h16_cl8` 56 registers, 1336 instructions (both paths)
    /// against 60 / 960; the exact kernel's SASS unchanged. Session 45 (full forge, alternating
    /// beside the default of then in one call): tg128 153.37 / 153.87 vs 151.57 / 152.48
    /// (+1.0%); the same bits (tiny logits 42813e6170d8a91f at chunk 512 and 1; the device
    /// test `norm_bound::device_tests` in both forms).
    pub norm_bound: bool,
    /// The tensor-core attention requests its K / V tiles that precede the step's written
    /// positions before the PDL wait, and its other first tiles before Q's loads
    /// (`-DATTN_EARLY`, `MUSER_CUDA_ATTN_EARLY=0|1`, default 1; attn_h16.cu). The same tiles into
    /// the same buffers: the same bits. Session 34 (full forge, beside the default in one call):
    /// tg128 +1.3 / +1.3 / +1.0 / +0.7% at depth 0 / 2048 / 8192 / 32768; with the piped wide
    /// combine +0.9 / +2.2 / +2.8 / +4.5%.
    pub attn_early: bool,
    /// The tensor-core attention's softmax `expf`s without branches (`-DATTN_FLAT_EXP`,
    /// `MUSER_CUDA_ATTN_FLAT_EXP=0|1`, default 1; attn_h16.cu): the plain form
    /// compiles to a branch around each of a row pair's 18 `expf`s per tile (static SASS: one
    /// `BSSY` region each, so one `MUFU.EX2` chain at a time); the flat form selects the
    /// argument (−inf where the plain form writes 0; expf(−inf) = +0) and runs them all. The
    /// same bits (`attn_h16_d128`'s tile 692 → 600 instructions, no branch left in its
    /// softmax). Session 35 (full forge, beside the default in one call): tg128 +0.9 / +1.5 /
    /// +2.0 / +1.9% at depth 0 / 2048 / 8192 / 32768, pp512 +0.6 / +0.9 / +1.1 / +2.3%; with
    /// `attn_rowcopy` tg128 +2.1 / +4.3 / +4.0 / +4.4%, pp512 +1.3 / +2.9 / +4.0 / +7.3%.
    pub attn_flat_exp: bool,
    /// The tensor-core attention issues a tile's copies row by row (`-DATTN_ROWCOPY`,
    /// `MUSER_CUDA_ATTN_ROWCOPY=0|1`, default 1; attn_h16.cu): 8 lanes per key
    /// row, the row's ring slot computed once, instead of one loop iteration and one signed
    /// division by the ring's size per 16 bytes (static SASS: ~60 instructions per 16 bytes
    /// before, ~55 per 64 now). The same bytes into the same places: the same bits. Session 35:
    /// tg128 +1.1 / +1.8 / +1.8 / +2.7%, pp512 +1.1 / +1.5 / +2.8 / +5.5%; with `attn_flat_exp`
    /// see there.
    pub attn_rowcopy: bool,
    /// `qk_norm_rope_kv` computes its cos / sin table before the PDL wait (`-DROPE_EARLY`,
    /// `MUSER_CUDA_ROPE_EARLY=0|1`, default 0; rope.cu; every route): the f64 `sincos` chain of
    /// the step's positions overlaps the projection before it. The same bits. Session 35: tg128
    /// −0.7 / −0.8 / −1.0 / −0.3% at depth 0 / 2048 / 8192 / 32768 (pp512 +0.5 / +0.2 / −0.5 /
    /// −0.1%): off.
    pub rope_early: bool,
    /// `qk_norm_rope_kv` requests each warp's head row before the cos / sin table and runs its
    /// norm before the block's barrier (`-DROPE_OVERLAP`, `MUSER_CUDA_ROPE_OVERLAP=0|1`, default
    /// 0; rope.cu; every route; refused with `MUSER_CUDA_ROPE_EARLY=1`, the other placement of
    /// the table): the row's round trip and the norm overlap the f64 `sincos` chain instead of
    /// following it. The same bits. Not kept (session 36, full forge tg128 −0.4 / −0.7 / −0.6 /
    /// −0.0% at depth 0 / 2048 / 8192 / 32768).
    pub rope_overlap: bool,
    /// Every kernel triggers its dependents' launch before its programmatic-dependent-launch
    /// wait instead of after it (`-DPDL_EARLY`, `MUSER_CUDA_PDL_EARLY=0|1`, default 0;
    /// common.cuh; every module): a matmul behind a small step can then become resident and
    /// request its first weight pieces during the previous matmul's tail, where now it launches
    /// only once the small step's wait has returned. Each kernel still waits for its predecessor
    /// to finish: the same reads and writes, the same bits. Refused without PDL (it would change
    /// nothing). Session 42 (H200, full forge, alternating): tg128 143.60 / 144.05 vs 148.99 /
    /// 149.42, at depth 2048 / 32768 140.83 / 134.55 vs 146.01 / 140.05, pp512 level — off.
    pub pdl_early: bool,
}

impl StepSwitches {
    /// The defaults (no variable set): the early tile requests and the piped wide combine from 8
    /// partials (session 34), the flat softmax `expf`s and the row-by-row tile copies (session
    /// 35), the clustered fused norm for decode launches and the one-warp reduction tails
    /// (session 36; measurements above).
    pub const DEFAULT: StepSwitches = StepSwitches {
        combine_wide: 8,
        combine_pipe: true,
        combine_cl: false,
        norm_h16: NormH16::Auto,
        norm_red1: true,
        norm_bound: true,
        attn_early: true,
        attn_flat_exp: true,
        attn_rowcopy: true,
        rope_early: false,
        rope_overlap: false,
        pdl_early: false,
    };

    pub(crate) fn from_env() -> Result<StepSwitches, CudaError> {
        let d = Self::DEFAULT;
        // A 0 / 1 variable, `default` when unset.
        let flag = |name: &str, default: bool| -> Result<bool, CudaError> {
            Ok(env_choice(name, u32::from(default), &[0, 1])? == 1)
        };
        let combine_wide = env_choice(
            "MUSER_CUDA_COMBINE_WIDE",
            d.combine_wide,
            &[0, 1, 8, 16, 32],
        )?;
        let s = StepSwitches {
            combine_wide,
            // Piped by default wherever the wide combine runs.
            combine_pipe: flag(
                "MUSER_CUDA_COMBINE_PIPE",
                d.combine_pipe && combine_wide > 0,
            )?,
            combine_cl: flag("MUSER_CUDA_COMBINE_CL", d.combine_cl)?,
            norm_h16: NormH16::from_env()?,
            norm_red1: flag("MUSER_CUDA_NORM_RED1", d.norm_red1)?,
            norm_bound: flag("MUSER_CUDA_NORM_BOUND", d.norm_bound)?,
            attn_early: flag("MUSER_CUDA_ATTN_EARLY", d.attn_early)?,
            attn_flat_exp: flag("MUSER_CUDA_ATTN_FLAT_EXP", d.attn_flat_exp)?,
            attn_rowcopy: flag("MUSER_CUDA_ATTN_ROWCOPY", d.attn_rowcopy)?,
            rope_early: flag("MUSER_CUDA_ROPE_EARLY", d.rope_early)?,
            rope_overlap: flag("MUSER_CUDA_ROPE_OVERLAP", d.rope_overlap)?,
            pdl_early: flag("MUSER_CUDA_PDL_EARLY", d.pdl_early)?,
        };
        s.checked()
    }

    /// `self`, or the error naming the two variables whose settings contradict each other.
    fn checked(self) -> Result<StepSwitches, CudaError> {
        if self.rope_early && self.rope_overlap {
            return Err(CudaError::Invalid(
                "MUSER_CUDA_ROPE_OVERLAP=1 and MUSER_CUDA_ROPE_EARLY=1 place the rope's cos / sin \
                 table in two different places: set one"
                    .into(),
            ));
        }
        if self.combine_pipe && self.combine_wide == 0 {
            return Err(CudaError::Invalid(
                "MUSER_CUDA_COMBINE_PIPE=1 pipelines the wide combine, which \
                 MUSER_CUDA_COMBINE_WIDE=0 turns off"
                    .into(),
            ));
        }
        Ok(self)
    }

    /// The compile defines of module `m`.
    pub(crate) fn defines(&self, m: Module) -> Vec<String> {
        let mut d = self.module_defines(m);
        if self.pdl_early {
            d.push("-DPDL_EARLY=1".to_string());
        }
        d
    }

    /// The defines of the switches that touch module `m` alone.
    fn module_defines(&self, m: Module) -> Vec<String> {
        match m {
            Module::Attention if self.combine_wide > 0 => {
                let mut d = vec![format!("-DCOMBINE_WIDE={}", self.combine_wide)];
                if self.combine_pipe {
                    d.push("-DCOMBINE_PIPE=1".to_string());
                }
                d
            }
            Module::Rope if self.rope_early => vec!["-DROPE_EARLY=1".to_string()],
            Module::Rope if self.rope_overlap => vec!["-DROPE_OVERLAP=1".to_string()],
            Module::Norm => {
                let mut d = Vec::new();
                if self.norm_h16.define() != 0 {
                    d.push(format!("-DNORM_H16={}", self.norm_h16.define()));
                }
                if self.norm_red1 {
                    d.push("-DNORM_RED1=1".to_string());
                }
                if self.norm_bound {
                    d.push("-DNORM_AMAX_BOUND=1".to_string());
                }
                d
            }
            Module::AttnH16 => {
                let mut d = Vec::new();
                if self.attn_early {
                    d.push("-DATTN_EARLY=1".to_string());
                }
                if self.attn_flat_exp {
                    d.push("-DATTN_FLAT_EXP=1".to_string());
                }
                if self.attn_rowcopy {
                    d.push("-DATTN_ROWCOPY=1".to_string());
                }
                d
            }
            _ => Vec::new(),
        }
    }

    /// The route-id suffix of the norm kernels (after `fuse=…`'s norm label): empty with the
    /// default one-warp reductions' last step, `-r0` without it; then `-ab0` without the
    /// clustered norm's shift from the bound (the default since session 45).
    pub fn norm_suffix(&self) -> &'static str {
        match (self.norm_red1, self.norm_bound) {
            (true, true) => "",
            (false, true) => "-r0",
            (true, false) => "-ab0",
            (false, false) => "-r0-ab0",
        }
    }

    /// The route-id suffix of the launch attribute (after `graph=on-pdl`): `e` with the
    /// triggers before the waits, empty by default.
    pub fn pdl_suffix(&self) -> &'static str {
        if self.pdl_early {
            "e"
        } else {
            ""
        }
    }

    /// The route-id suffix of the attention (`attn=…`), naming what differs from
    /// [`StepSwitches::DEFAULT`]: `-re` with the rope's table before the PDL wait, `-ro` with
    /// the rope's rows requested before its table, `-ccl` with the clustered decode combine, `-e0`
    /// without the early tile requests, `-fx` with the flat softmax `expf`s, `-rc` with the
    /// row-by-row tile copies, `-cw0` without the
    /// wide combine, `-cwN` / `-cwNp` with the wide combine from N partials, unpiped / piped.
    pub fn attn_suffix(&self) -> String {
        let d = Self::DEFAULT;
        let mut early = String::new();
        if self.rope_early != d.rope_early {
            early += if self.rope_early { "-re" } else { "-re0" };
        }
        if self.rope_overlap != d.rope_overlap {
            early += if self.rope_overlap { "-ro" } else { "-ro0" };
        }
        if self.attn_early != d.attn_early {
            early += if self.attn_early { "-e" } else { "-e0" };
        }
        if self.attn_flat_exp != d.attn_flat_exp {
            early += if self.attn_flat_exp { "-fx" } else { "-fx0" };
        }
        if self.attn_rowcopy != d.attn_rowcopy {
            early += if self.attn_rowcopy { "-rc" } else { "-rc0" };
        }
        if self.combine_cl != d.combine_cl {
            early += if self.combine_cl { "-ccl" } else { "-ccl0" };
        }
        let pipe = if self.combine_pipe { "p" } else { "" };
        if (self.combine_wide, self.combine_pipe) == (d.combine_wide, d.combine_pipe) {
            early
        } else {
            format!("{early}-cw{}{pipe}", self.combine_wide)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_block_is_whole_warps_of_units() {
        // Muse Glimmer's 6656 = 208 units -> 7 warps; gemma-3-270m's 640 = 20 units -> 1 warp.
        assert_eq!(NormH16::Unit.block(6656, 1024), 224);
        assert_eq!(NormH16::Unit.block(640, 1024), 32);
        assert_eq!(NormH16::Unit.block(8192, 1024), 256);
        assert_eq!(NormH16::Shfl.block(6656, 1024), 1024);
        assert_eq!(NormH16::Smem.block(640, 1024), 1024);
    }

    #[test]
    fn combine_cluster_divides_the_heads() {
        // Muse Glimmer: 32 heads of 128 -> 8 blocks of 4 heads (512 threads).
        assert_eq!(combine_cluster(32, 128), Some((8, 512)));
        // gemma-3-270m: 4 heads of 256 -> 4 blocks of one head.
        assert_eq!(combine_cluster(4, 256), Some((4, 256)));
        // 8 heads of 512: one head per block.
        assert_eq!(combine_cluster(8, 512), Some((8, 512)));
        // 6 heads: 2 blocks of 3.
        assert_eq!(combine_cluster(6, 128), Some((2, 384)));
        assert_eq!(combine_cluster(64, 256), None); // 16 384 values: wider than 8 x 1024
        assert_eq!(combine_cluster(32, 100), None);
        assert_eq!(combine_cluster(3, 0), None);
    }

    #[test]
    fn auto_clusters_few_token_launches_only() {
        assert_eq!(NormH16::Auto.cluster_for(1), Some(8));
        assert_eq!(NormH16::Auto.cluster_for(CL8_AUTO_MAX_TOKENS), Some(8));
        assert_eq!(NormH16::Auto.cluster_for(CL8_AUTO_MAX_TOKENS + 1), None);
        assert_eq!(NormH16::Auto.cluster_for(512), None);
        assert_eq!(NormH16::Cl8.cluster_for(512), Some(8));
        assert_eq!(NormH16::Cl16.cluster_for(1), Some(16));
        assert_eq!(NormH16::Cl16.cluster_for(512), None);
        for n in [NormH16::Shfl, NormH16::Smem, NormH16::Unit] {
            assert_eq!(n.cluster_for(1), None);
        }
        // Auto and Cl8 compile the default body; only the launch differs.
        assert_eq!(NormH16::Auto.define(), 0);
        assert_eq!(NormH16::Cl8.define(), 0);
        assert_eq!(NormH16::Cl16.define(), 0);
    }

    #[test]
    fn contradicting_settings_are_refused() {
        let d = StepSwitches::DEFAULT;
        assert_eq!(d.checked().ok(), Some(d));
        let both = StepSwitches {
            rope_early: true,
            rope_overlap: true,
            ..d
        };
        let e = both
            .checked()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("MUSER_CUDA_ROPE_OVERLAP=1") && e.contains("MUSER_CUDA_ROPE_EARLY=1"));
        let pipe = StepSwitches {
            combine_wide: 0,
            ..d
        };
        let e = pipe
            .checked()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("MUSER_CUDA_COMBINE_WIDE=0"), "{e}");
        let unpiped = StepSwitches {
            combine_wide: 0,
            combine_pipe: false,
            ..d
        };
        assert!(unpiped.checked().is_ok());
    }

    #[test]
    fn defaults_and_their_labels() {
        let d = StepSwitches::DEFAULT;
        let all = ["-DATTN_EARLY=1", "-DATTN_FLAT_EXP=1", "-DATTN_ROWCOPY=1"];
        assert_eq!(d.attn_suffix(), "");
        assert_eq!(d.defines(Module::AttnH16), all);
        assert_eq!(
            d.defines(Module::Attention),
            vec!["-DCOMBINE_WIDE=8", "-DCOMBINE_PIPE=1"]
        );
        assert_eq!(
            d.defines(Module::Norm),
            vec!["-DNORM_RED1=1", "-DNORM_AMAX_BOUND=1"]
        );
        assert!(d.defines(Module::MatvecH16).is_empty());
        assert!(d.defines(Module::Rope).is_empty());
        let late = StepSwitches {
            attn_early: false,
            ..d
        };
        assert_eq!(late.defines(Module::AttnH16), all[1..]);
        assert_eq!(late.attn_suffix(), "-e0");
        let branchy = StepSwitches {
            attn_flat_exp: false,
            ..d
        };
        assert_eq!(
            branchy.defines(Module::AttnH16),
            vec!["-DATTN_EARLY=1", "-DATTN_ROWCOPY=1"]
        );
        assert_eq!(branchy.attn_suffix(), "-fx0");
        let clustered = StepSwitches {
            combine_cl: true,
            ..d
        };
        assert_eq!(clustered.attn_suffix(), "-ccl");
        assert_eq!(
            clustered.defines(Module::Attention),
            d.defines(Module::Attention)
        );
        let chunky = StepSwitches {
            attn_rowcopy: false,
            ..d
        };
        assert_eq!(chunky.defines(Module::AttnH16), all[..2]);
        assert_eq!(chunky.attn_suffix(), "-rc0");
        let plain = StepSwitches {
            attn_early: false,
            attn_flat_exp: false,
            attn_rowcopy: false,
            ..d
        };
        assert!(plain.defines(Module::AttnH16).is_empty());
        assert_eq!(plain.attn_suffix(), "-e0-fx0-rc0");
        let rope = StepSwitches {
            rope_early: true,
            ..d
        };
        assert_eq!(rope.defines(Module::Rope), vec!["-DROPE_EARLY=1"]);
        assert_eq!(rope.attn_suffix(), "-re");
        let overlap = StepSwitches {
            rope_overlap: true,
            ..d
        };
        assert_eq!(overlap.defines(Module::Rope), vec!["-DROPE_OVERLAP=1"]);
        assert_eq!(overlap.attn_suffix(), "-ro");
        let unpiped = StepSwitches {
            combine_pipe: false,
            ..d
        };
        assert_eq!(unpiped.defines(Module::Attention), vec!["-DCOMBINE_WIDE=8"]);
        assert_eq!(unpiped.attn_suffix(), "-cw8");
        let narrow = StepSwitches {
            combine_wide: 0,
            combine_pipe: false,
            attn_early: false,
            ..d
        };
        assert!(narrow.defines(Module::Attention).is_empty());
        assert_eq!(narrow.attn_suffix(), "-e0-cw0");
        let s = StepSwitches {
            combine_wide: 16,
            combine_pipe: true,
            norm_h16: NormH16::Unit,
            ..d
        };
        assert_eq!(
            s.defines(Module::Attention),
            vec!["-DCOMBINE_WIDE=16", "-DCOMBINE_PIPE=1"]
        );
        assert_eq!(
            s.defines(Module::Norm),
            vec!["-DNORM_H16=2", "-DNORM_RED1=1", "-DNORM_AMAX_BOUND=1"]
        );
        assert_eq!(s.attn_suffix(), "-cw16p");
        assert_eq!(d.norm_suffix(), "");
        assert_eq!(
            d.defines(Module::Norm),
            vec!["-DNORM_RED1=1", "-DNORM_AMAX_BOUND=1"]
        );
        let red0 = StepSwitches {
            norm_red1: false,
            ..s
        };
        assert_eq!(
            red0.defines(Module::Norm),
            vec!["-DNORM_H16=2", "-DNORM_AMAX_BOUND=1"]
        );
        assert_eq!(red0.norm_suffix(), "-r0");
        assert_eq!(red0.attn_suffix(), "-cw16p");
        let exact = StepSwitches {
            norm_bound: false,
            ..d
        };
        assert_eq!(exact.defines(Module::Norm), vec!["-DNORM_RED1=1"]);
        assert_eq!(exact.norm_suffix(), "-ab0");
        assert_eq!(
            StepSwitches {
                norm_red1: false,
                ..exact
            }
            .norm_suffix(),
            "-r0-ab0"
        );
        assert_eq!(
            exact.defines(Module::Attention),
            d.defines(Module::Attention)
        );
    }

    #[test]
    fn the_early_trigger_reaches_every_module() {
        let d = StepSwitches::DEFAULT;
        assert_eq!(d.pdl_suffix(), "");
        let early = StepSwitches {
            pdl_early: true,
            ..d
        };
        assert_eq!(early.pdl_suffix(), "e");
        for m in Module::ALL {
            let (mut with, without) = (early.defines(m), d.defines(m));
            assert_eq!(with.pop().as_deref(), Some("-DPDL_EARLY=1"), "{m:?}");
            assert_eq!(with, without, "{m:?}");
        }
        // Not an attention or norm label: only the launch attribute's.
        assert_eq!(early.attn_suffix(), d.attn_suffix());
        assert_eq!(early.norm_suffix(), d.norm_suffix());
    }
}
