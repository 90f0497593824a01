//! What the A8 activation route (`MUSER_CUDA_ACTS=a8`, issue 5's A/B of the activation format)
//! can run, checked before a session starts: its kernels (matvec_a8.cu, mmq_a8.cu,
//! matvec_packed_a8.cu) exist for Q4_K and Q6_K-P weights (one-token decode, pipelined and
//! staged or not, or register-resident; packed decode rows, on the tensor cores or not;
//! tensor-core or eight-token multi-token matmuls) and for Q5_K, Q8_0 and Q5_0 (the plain one- and eight-token kernels); the
//! fused quantization kernels have A8 twins (`*_q8`). F16 / F32 matmul weights are refused: A8
//! would round their activations to 8 bits where A16 keeps 16 (and llama.cpp, f16). Anything
//! else is a configuration error naming what to change — never a silent switch to another route
//! — and so is a kernel switch the A8 kernels would not read.

use muser_cuda::Registry;
use muser_gguf::GgmlType;

use super::options::{Acts, CudaOptions};
use crate::{EngineError, Model};

/// A configuration error of the A8 route: `what` it cannot do, and (A8 being the default) how
/// to run the A16 kernels instead.
fn refuse(opts: &CudaOptions, what: impl std::fmt::Display) -> Result<(), EngineError> {
    let how = if opts.acts_explicit {
        ""
    } else {
        " (A8 is the default for this model; MUSER_CUDA_ACTS=a16 selects the A16 kernels)"
    };
    Err(EngineError::Config(format!(
        "MUSER_CUDA_ACTS=a8: {what}{how}"
    )))
}

/// Whether every matmul weight of `model` has A8 kernels (the default activation format's
/// second choice, `cuda::resolve_default_acts`).
pub fn fits(model: &Model) -> bool {
    weights_fit(model).is_ok()
}

/// Every matmul weight of `model` has A8 kernels; else the first that does not, as a message.
fn weights_fit(model: &Model) -> Result<(), String> {
    let w = &model.weights;
    for m in w.matrices() {
        let ok = match m.ty {
            GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q8_0 | GgmlType::Q5_0 => true,
            GgmlType::Q6_K => m.n_in.is_multiple_of(256),
            _ => false,
        };
        if !ok {
            return Err(format!(
                "tensor '{}' is {:?} with {} inputs; the A8 kernels take Q4_K, Q5_K, Q6_K (whole \
                 blocks), Q8_0 and Q5_0 weights (float weights keep 16-bit activations: \
                 MUSER_CUDA_ACTS=a16)",
                m.name, m.ty, m.n_in
            ));
        }
    }
    Ok(())
}

/// The options and the model's matmul weights against what the A8 route has kernels for.
pub fn check_options(model: &Model, opts: &CudaOptions) -> Result<(), EngineError> {
    if opts.acts != Acts::A8 {
        if opts.mvr {
            return Err(EngineError::Config(
                "MUSER_CUDA_MVR=1 selects A8 decode kernels: it needs MUSER_CUDA_ACTS=a8".into(),
            ));
        }
        return Ok(());
    }
    if !opts.q6_pad {
        return refuse(
            opts,
            "Q6_K weights are read in Q6_K-P only (not with MUSER_CUDA_Q6_PAD=0)",
        );
    }
    if !opts.pipe {
        return refuse(
            opts,
            "the one-token kernels are the pipelined ones (not with MUSER_CUDA_PIPE=0)",
        );
    }
    if opts.mmv_pair {
        return refuse(
            opts,
            "there are no paired tensor-core packed rows on A8 (MUSER_CUDA_MMV_PAIR applies to A16 \
             only)",
        );
    }
    weights_fit(model).or_else(|e| refuse(opts, e))
}

/// Registry switches that act only on kernels this session does not launch: the A16 decode
/// kernels' on the A8 route, the register-resident A8 kernels' anywhere else.
pub fn check_switches(reg: &Registry, opts: &CudaOptions) -> Result<(), EngineError> {
    if !(opts.acts == Acts::A8 && opts.mvr) && (reg.mvr_rows != 4 || reg.mvr_ahead != 0) {
        return Err(EngineError::Config(
            "MUSER_CUDA_MVR_ROWS / MUSER_CUDA_MVR_AHEAD apply to the register-resident A8 kernels only (MUSER_CUDA_ACTS=a8 with MUSER_CUDA_MVR=1)".into(),
        ));
    }
    // The A16 decode kernels run on the A8 route too where the attention projections keep
    // 16-bit input (`qkv_acts`): their switches then act.
    if opts.acts != Acts::A8 || opts.qkv() == Acts::A16 {
        return Ok(());
    }
    for (set, name) in [
        (reg.mva_ahead != 1, "MUSER_CUDA_MVA_AHEAD"),
        (reg.mva_ahead_q6p != 1, "MUSER_CUDA_MVA_AHEAD_Q6P"),
        (reg.mva_wstages != 0, "MUSER_CUDA_MVA_WSTAGES"),
    ] {
        if set {
            return refuse(
                opts,
                format!("{name} applies to the A16 decode kernels only"),
            );
        }
    }
    Ok(())
}
