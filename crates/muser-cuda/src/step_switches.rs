//! Switches of the small decode steps between the matmuls — the attention combine and the f16
//! route's fused norm — read once from the environment when the registry is built, turned into
//! compile defines of their modules. Each is a schedule choice with the same bits as its
//! default (the device checks: `cuda_route`'s f16 variants and the tiny logits,
//! `scripts/device/l2pf-super-ab.sh`); measurements in docs/cuda.md's switch rows.

use crate::error::CudaError;
use crate::registry::{env_choice, Module};

/// How `residual_norm_h16` (norm.cu, `-DNORM_H16`) lays the same arithmetic on threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NormH16 {
    /// A thread per run of 8 values (`NORM_THREADS` threads), each 32-value unit gathered onto
    /// its first lane by shuffles (the default).
    Shfl,
    /// The same threads, the units gathered through shared memory.
    Smem,
    /// A thread per 32-value unit (n / 32 threads rounded up to whole warps): no gather, fewer
    /// warps at each barrier.
    Unit,
}

impl NormH16 {
    fn from_env() -> Result<NormH16, CudaError> {
        if std::env::var_os("MUSER_CUDA_NORM_SMEM").is_some() {
            return Err(CudaError::Invalid(
                "MUSER_CUDA_NORM_SMEM is now MUSER_CUDA_NORM_H16=smem (shfl | smem | unit)".into(),
            ));
        }
        match std::env::var("MUSER_CUDA_NORM_H16").as_deref() {
            Err(_) | Ok("shfl") => Ok(NormH16::Shfl),
            Ok("smem") => Ok(NormH16::Smem),
            Ok("unit") => Ok(NormH16::Unit),
            Ok(v) => Err(CudaError::Invalid(format!(
                "MUSER_CUDA_NORM_H16={v}: expected shfl, smem or unit"
            ))),
        }
    }

    fn define(self) -> u32 {
        match self {
            NormH16::Shfl => 0,
            NormH16::Smem => 1,
            NormH16::Unit => 2,
        }
    }

    /// The route-id suffix of the fused norm (`fuse=norm…`): empty for the default.
    pub fn label(self) -> &'static str {
        match self {
            NormH16::Shfl => "",
            NormH16::Smem => "-smem",
            NormH16::Unit => "-unit",
        }
    }

    /// Threads per block of `residual_norm_h16` for rows of `n` values (`n % 64 == 0`,
    /// `n <= 8 * norm_threads`, checked by the engine): `norm_threads` (the kernels'
    /// `NORM_THREADS`), or with `Unit` one thread per 32 values rounded up to whole warps.
    pub fn block(self, n: usize, norm_threads: u32) -> u32 {
        match self {
            NormH16::Unit => ((n / 32) as u32).div_ceil(32) * 32,
            NormH16::Shfl | NormH16::Smem => norm_threads,
        }
    }
}

/// The small steps' switches (`Registry::steps`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepSwitches {
    /// The f16 route's decode combine (`attn_combine_m_wide`, launched for decode steps; prefill
    /// keeps `attn_combine_m`) loads a chunk's 32 partials at once where a warp merges one
    /// 32-value group and the head has at least this many partials (`-DCOMBINE_WIDE`,
    /// `MUSER_CUDA_COMBINE_WIDE=0|1|8|16|32`, 0 = never, the default until the device has run this
    /// decode-only form (then 8);
    /// attention.cu `combine_head`): one round trip per 32 partials instead of per 4. The same
    /// multiply-adds in the same order: the same bits. Session 33 (full forge, compiled into
    /// every combine then): tg128 +0.6 / +0.6 / +0.6 / +2.6% at depth 0 / 2048 / 8192 / 32768,
    /// pp512 −1.3 / −1.0 / −1.0 / +0.5% — hence decode launches only (built in session 33, not
    /// yet run on the device).
    pub combine_wide: u32,
    /// The wide combine requests the next chunk's 32 partials before the current chunk's
    /// multiply-adds (`-DCOMBINE_PIPE`, `MUSER_CUDA_COMBINE_PIPE=0|1`, default 0; only with
    /// `MUSER_CUDA_COMBINE_WIDE`, else refused): one load round trip per head instead of one
    /// per 32 partials. The same bits; static SASS of `attn_combine_m_wide` 96 registers (115
    /// without). Built in session 33, not yet run on the device.
    pub combine_pipe: bool,
    /// `residual_norm_h16`'s thread layout (`MUSER_CUDA_NORM_H16=shfl|smem|unit`).
    pub norm_h16: NormH16,
    /// The tensor-core attention requests its K / V tiles that precede the step's written
    /// positions before the PDL wait, and its other first tiles before Q's loads
    /// (`-DATTN_EARLY`, `MUSER_CUDA_ATTN_EARLY=0|1`, default 0; attn_h16.cu). The same tiles into
    /// the same buffers: the same bits. Built in session 33, not yet run on the device.
    pub attn_early: bool,
}

impl StepSwitches {
    pub(crate) fn from_env() -> Result<StepSwitches, CudaError> {
        let s = StepSwitches {
            combine_wide: env_choice("MUSER_CUDA_COMBINE_WIDE", 0, &[0, 1, 8, 16, 32])?,
            combine_pipe: env_choice("MUSER_CUDA_COMBINE_PIPE", 0, &[0, 1])? == 1,
            norm_h16: NormH16::from_env()?,
            attn_early: env_choice("MUSER_CUDA_ATTN_EARLY", 0, &[0, 1])? == 1,
        };
        if s.combine_pipe && s.combine_wide == 0 {
            return Err(CudaError::Invalid(
                "MUSER_CUDA_COMBINE_PIPE=1 pipelines the wide combine: set MUSER_CUDA_COMBINE_WIDE"
                    .into(),
            ));
        }
        Ok(s)
    }

    /// The compile defines of module `m` (none where these switches are the defaults).
    pub(crate) fn defines(&self, m: Module) -> Vec<String> {
        match m {
            Module::Attention if self.combine_wide > 0 => {
                let mut d = vec![format!("-DCOMBINE_WIDE={}", self.combine_wide)];
                if self.combine_pipe {
                    d.push("-DCOMBINE_PIPE=1".to_string());
                }
                d
            }
            Module::Norm if self.norm_h16 != NormH16::Shfl => {
                vec![format!("-DNORM_H16={}", self.norm_h16.define())]
            }
            Module::AttnH16 if self.attn_early => vec!["-DATTN_EARLY=1".to_string()],
            _ => Vec::new(),
        }
    }

    /// The route-id suffix of the attention (`attn=…`): `-e` with the early tile requests,
    /// `-cwN` with the wide combine from N partials.
    pub fn attn_suffix(&self) -> String {
        let early = if self.attn_early { "-e" } else { "" };
        let pipe = if self.combine_pipe { "p" } else { "" };
        match self.combine_wide {
            0 => early.to_string(),
            n => format!("{early}-cw{n}{pipe}"),
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
    fn defaults_define_nothing() {
        let s = StepSwitches {
            combine_wide: 0,
            combine_pipe: false,
            norm_h16: NormH16::Shfl,
            attn_early: false,
        };
        assert!(s.defines(Module::AttnH16).is_empty());
        let early = StepSwitches {
            attn_early: true,
            ..s
        };
        assert_eq!(early.defines(Module::AttnH16), vec!["-DATTN_EARLY=1"]);
        assert_eq!(early.attn_suffix(), "-e");
        assert!(s.defines(Module::Attention).is_empty());
        assert!(s.defines(Module::Norm).is_empty());
        assert_eq!(s.attn_suffix(), "");
        let wide = StepSwitches {
            combine_wide: 8,
            ..s
        };
        assert_eq!(wide.defines(Module::Attention), vec!["-DCOMBINE_WIDE=8"]);
        assert_eq!(wide.attn_suffix(), "-cw8");
        let piped = StepSwitches {
            combine_pipe: true,
            ..wide
        };
        assert_eq!(
            piped.defines(Module::Attention),
            vec!["-DCOMBINE_WIDE=8", "-DCOMBINE_PIPE=1"]
        );
        assert_eq!(piped.attn_suffix(), "-cw8p");
        let s = StepSwitches {
            combine_wide: 16,
            combine_pipe: false,
            norm_h16: NormH16::Unit,
            attn_early: false,
        };
        assert_eq!(s.defines(Module::Attention), vec!["-DCOMBINE_WIDE=16"]);
        assert_eq!(s.defines(Module::Norm), vec!["-DNORM_H16=2"]);
        assert!(s.defines(Module::MatvecH16).is_empty());
        assert_eq!(s.attn_suffix(), "-cw16");
        assert_eq!(NormH16::Unit.label(), "-unit");
    }
}
