//! What the f16 route (`MUSER_CUDA_ACTS=f16`; docs/cuda.md "The f16 route") can run, checked
//! before a session starts: its matmul kernels (`mvh_*` for 1–8 tokens and packed rows, `mmw_*`
//! / `mmt_*` / `mmh_*` for prefill; matvec_h16.cu, mmt_h16.cu, mmw_h16.cu) read Q4_K and Q6_K
//! weights in the Q4H / Q6H layouts, whole 256-value blocks, rows in groups of 16; the
//! activations go through
//! `act_h16` or the fused twins (`MUSER_CUDA_FUSE`): `residual_norm_h16`, and with
//! `MUSER_CUDA_H16_EW=fused` also `sigmoid_gate_h16`, `swiglu_h16` / `geglu_h16`; the attention
//! combine has none. Attention runs on the tensor cores (`attn_h16_*`, heads of 64 or 128;
//! `MUSER_CUDA_H16_ATTN=f32`: the f32 kernels). Anything else — another weight type, other head
//! sizes on the tensor-core attention, a switch of the integer routes' kernels — is a
//! configuration error naming what to change, never a silent switch to another route.

use muser_cuda::attn_h16::AttnH16Shape;
use muser_cuda::plan_h16::H16Switches;
use muser_cuda::Math;
use muser_gguf::GgmlType;

use super::options::{Acts, CudaOptions};
use crate::config::FfnActivation;
use crate::{EngineError, Model};

/// The integer routes' switches: each acts on kernels the f16 route never launches.
const INTEGER_ROUTE_SWITCHES: [&str; 18] = [
    "MUSER_CUDA_Q6_PAD",
    "MUSER_CUDA_PIPE",
    "MUSER_CUDA_XSMEM",
    "MUSER_CUDA_MMQ",
    "MUSER_CUDA_MMQ_WN",
    "MUSER_CUDA_MMQ_MINB",
    "MUSER_CUDA_MMQ_CVT",
    "MUSER_CUDA_MMQ_DB",
    "MUSER_CUDA_MVA_ROWS",
    "MUSER_CUDA_MVA_MINB",
    "MUSER_CUDA_MVA_WSTAGES",
    "MUSER_CUDA_MVA_AHEAD",
    "MUSER_CUDA_MVB_WARPS",
    "MUSER_CUDA_MMV_MIN",
    "MUSER_CUDA_MMV_PAIR",
    "MUSER_CUDA_BATCH_MM",
    "MUSER_CUDA_BATCH_NT",
    "MUSER_CUDA_MVR",
];

/// The tensor-core attention's compile switches (`muser_cuda::step_switches`): with the f32
/// attention (`MUSER_CUDA_H16_ATTN=f32`) they would change nothing, so setting one is refused.
pub const TENSOR_CORE_ATTENTION_ENV: [&str; 3] = [
    "MUSER_CUDA_ATTN_EARLY",
    "MUSER_CUDA_ATTN_FLAT_EXP",
    "MUSER_CUDA_ATTN_ROWCOPY",
];

/// The f16 route's own switches beside its chains' (`H16Switches::ENV`) and the tensor-core
/// attention's (`TENSOR_CORE_ATTENTION_ENV`): on another route they would change nothing.
const F16_ROUTE_SWITCHES: [&str; 19] = [
    "MUSER_CUDA_H16_ATTN",
    "MUSER_CUDA_MVH_ACC2_TIMING",
    "MUSER_CUDA_NORM_BOUND",
    "MUSER_CUDA_COMBINE_PIPE",
    "MUSER_CUDA_COMBINE_CL",
    "MUSER_CUDA_ATTN_COLS",
    "MUSER_CUDA_COMBINE_WIDE",
    "MUSER_CUDA_ATTN_BUFS",
    "MUSER_CUDA_NORM_H16",
    "MUSER_CUDA_L2_PREFETCH",
    "MUSER_CUDA_L2_PREFETCH_KIND",
    "MUSER_CUDA_L2_PREFETCH_BLOCKS",
    "MUSER_CUDA_H16_ROWMAX",
    "MUSER_CUDA_MMT",
    "MUSER_CUDA_MMW_MIN",
    "MUSER_CUDA_MMW_WG",
    "MUSER_CUDA_MMW_SPLIT",
    "MUSER_CUDA_H16_GLU",
    "MUSER_CUDA_H16_COMBINE_ACT",
];

/// A configuration error of the f16 route: `what` it cannot do, and (where f16 is this model's
/// default rather than asked for) how to run the integer kernels instead.
fn refuse(opts: &CudaOptions, what: impl std::fmt::Display) -> Result<(), EngineError> {
    let how = if opts.acts_explicit {
        ""
    } else {
        " (f16 is the default for this model; MUSER_CUDA_ACTS=a8 selects the integer kernels)"
    };
    Err(EngineError::Config(format!(
        "MUSER_CUDA_ACTS=f16: {what}{how}"
    )))
}

/// Whether the f16 route covers `model` as `opts` would run it: every matmul weight has f16
/// kernels (`weights_fit`) and, with the tensor-core attention, the heads are of a size it has
/// kernels for. The default activation format's test (`cuda::resolve_default_acts`); the
/// switches are checked afterwards, by `check_options`.
pub fn fits(model: &Model, opts: &CudaOptions) -> bool {
    let c = &model.config;
    weights_fit(model).is_ok()
        && (!opts.h16_attn_mma || AttnH16Shape::supports(c.head_dim, c.head_dim_v))
}

/// Every matmul weight of `model` has f16 kernels (Q4_K / Q6_K, whole 256-value blocks, rows
/// in groups of 16); else the first that does not, as a message.
fn weights_fit(model: &Model) -> Result<(), String> {
    for m in model.weights.matrices() {
        let ok = matches!(m.ty, GgmlType::Q4_K | GgmlType::Q6_K)
            && m.n_in.is_multiple_of(256)
            && m.n_out.is_multiple_of(16);
        if !ok {
            return Err(format!(
                "tensor '{}' is {:?}, {} × {}; the f16 kernels take Q4_K and Q6_K weights with \
                 rows of whole 256-value blocks, in groups of 16 (MUSER_CUDA_ACTS=a8 runs it)",
                m.name, m.ty, m.n_out, m.n_in
            ));
        }
    }
    Ok(())
}

/// The options and the model's matmul weights against what the f16 route has kernels for;
/// resolves the route's fixed choice (no Q6_K-P).
pub fn check_options(model: &Model, opts: &mut CudaOptions) -> Result<(), EngineError> {
    // An unreadable MUSER_CUDA_Q4H_SCALES / _Q6H_SCALES (read as auto by CudaOptions::new), by
    // its name.
    muser_cuda::q4h::scales_from_env()?;
    muser_cuda::q6h::scales_from_env()?;
    match std::env::var("MUSER_CUDA_H16_EW").as_deref() {
        Err(_) => {}
        Ok("plain" | "fused") if opts.acts == Acts::F16 => {}
        Ok(v @ ("plain" | "fused")) => {
            return Err(EngineError::Config(format!(
                "MUSER_CUDA_H16_EW={v} acts on the f16 route only (MUSER_CUDA_ACTS=f16)"
            )))
        }
        Ok(v) => {
            return Err(EngineError::Config(format!(
                "MUSER_CUDA_H16_EW={v}: expected plain or fused"
            )))
        }
    }
    if opts.h16_ew_fused && opts.acts != Acts::F16 {
        return Err(EngineError::Config(
            "the f16 element-wise twins act on the f16 route only (MUSER_CUDA_ACTS=f16)".into(),
        ));
    }
    if opts.acts != Acts::F16 {
        if let Some(name) = F16_ROUTE_SWITCHES
            .iter()
            .chain(TENSOR_CORE_ATTENTION_ENV.iter())
            .chain(H16Switches::ENV.iter())
            .find(|n| std::env::var_os(n).is_some())
        {
            return Err(EngineError::Config(format!(
                "{name} acts on the f16 route's kernels only (MUSER_CUDA_ACTS=f16)"
            )));
        }
        return Ok(());
    }
    if let Some(name) = INTEGER_ROUTE_SWITCHES
        .iter()
        .find(|n| std::env::var_os(n).is_some())
    {
        return refuse(
            opts,
            format!(
                "{name} acts on the integer routes' kernels only (unset it, or MUSER_CUDA_ACTS=a8)"
            ),
        );
    }
    // An experiment: the two-accumulator order changes every f16 matmul's sums (decode and,
    // since session 45, the prefill tiles alike), and that they still agree across kernels is
    // not yet checked on the device. `MUSER_CUDA_MVH_ACC2_TIMING=1` lets a timing run (`muser
    // bench`, the device tests) have it — the route id says `-acc2` / `-acc2q4` / `-acc2q4s4`,
    // and the load report says TIMING ONLY. (Other values of the switch: `H16Switches`.)
    let acc2 = matches!(
        std::env::var("MUSER_CUDA_MVH_ACC2").as_deref(),
        Ok("1" | "2" | "3")
    );
    match std::env::var("MUSER_CUDA_MVH_ACC2_TIMING").as_deref() {
        Err(_) | Ok("0") if acc2 => {
            return refuse(
                opts,
                "MUSER_CUDA_MVH_ACC2 is an experiment: it changes the f16 matmuls' sums, \
                 and that decode, batched rows and prefill still agree bit for bit is not \
                 yet checked on a device (MUSER_CUDA_MVH_ACC2_TIMING=1 allows it for timing \
                 runs)",
            );
        }
        Err(_) | Ok("0") => {}
        Ok("1") if acc2 => {}
        Ok(v) => {
            let what = format!(
                "MUSER_CUDA_MVH_ACC2_TIMING={v:?}: expected 0, or 1 with \
                 MUSER_CUDA_MVH_ACC2=1|2|3"
            );
            return refuse(opts, what);
        }
    }
    for name in ["MUSER_CUDA_NORM_H16", "MUSER_CUDA_NORM_BOUND"] {
        if !opts.fuse && std::env::var_os(name).is_some() {
            return refuse(
                opts,
                format!("{name} shapes the fused residual norm (MUSER_CUDA_FUSE, on by default)"),
            );
        }
    }
    // The bound lives in the clustered norm only (decode launches under `auto`).
    if std::env::var_os("MUSER_CUDA_NORM_BOUND").is_some()
        && matches!(
            std::env::var("MUSER_CUDA_NORM_H16").as_deref(),
            Ok("shfl" | "smem" | "unit")
        )
    {
        return refuse(
            opts,
            "MUSER_CUDA_NORM_BOUND acts on the clustered norm (MUSER_CUDA_NORM_H16=auto, cl8 or \
             cl16), which MUSER_CUDA_NORM_H16=shfl / smem / unit never launches",
        );
    }
    match std::env::var("MUSER_CUDA_H16_ROWMAX").as_deref() {
        Err(_) | Ok("0" | "1") => {}
        Ok(v) => return refuse(opts, format!("MUSER_CUDA_H16_ROWMAX={v}: expected 0 or 1")),
    }
    if std::env::var("MUSER_CUDA_H16_ROWMAX").as_deref() == Ok("1") && opts.h16_ew_fused {
        return refuse(
            opts,
            "MUSER_CUDA_H16_ROWMAX=1 acts on the plain element-wise kernels; the fused twins \
             (MUSER_CUDA_H16_EW=fused) write the f16 format themselves",
        );
    }
    match std::env::var("MUSER_CUDA_H16_GLU").as_deref() {
        Err(_) | Ok("0" | "1") => {}
        Ok(v) => return refuse(opts, format!("MUSER_CUDA_H16_GLU={v}: expected 0 or 1")),
    }
    // The fused FFN launch's epilogue is swiglu_m's: it needs the row maxima, strict math and
    // a SwiGLU FFN. Asked for where it could never run, refused; unset, on where it can.
    let glu_blocker = if !opts.h16_rowmax_on() {
        Some(
            "MUSER_CUDA_H16_GLU=1 folds the row maxima (MUSER_CUDA_H16_ROWMAX, on by default, with the \
             plain element-wise kernels)",
        )
    } else if opts.act_math != Math::Strict {
        Some("MUSER_CUDA_H16_GLU=1 applies the SwiGLU in strict math (unset MUSER_CUDA_FAST_ACT)")
    } else if model.config.ffn_activation != FfnActivation::Silu {
        Some("MUSER_CUDA_H16_GLU=1 fuses SwiGLU; this model's FFN is GeGLU")
    } else {
        None
    };
    match (opts.h16_glu, glu_blocker) {
        (Some(true), Some(why)) => return refuse(opts, why),
        (None, blocker) => opts.h16_glu = Some(blocker.is_none()),
        _ => {}
    }
    match std::env::var("MUSER_CUDA_H16_COMBINE_ACT").as_deref() {
        Err(_) | Ok("0" | "1") => {}
        Ok(v) => {
            return refuse(
                opts,
                format!("MUSER_CUDA_H16_COMBINE_ACT={v}: expected 0 or 1"),
            )
        }
    }
    if opts.h16_combine_act && !opts.h16_combine_act_on() {
        return refuse(
            opts,
            "MUSER_CUDA_H16_COMBINE_ACT=1 extends the combine that folds the row maxima (on by \
             default, with the plain element-wise kernels) in strict math (unset \
             MUSER_CUDA_FAST_ACT)",
        );
    }
    // The wide combine is a path of the decode combine that folds the row maxima
    // (`attn_combine_m_wide`): asked for where that combine does not run, refused.
    let combine_m = opts.h16_rowmax_on() && opts.act_math == Math::Strict;
    for name in ["MUSER_CUDA_COMBINE_WIDE", "MUSER_CUDA_COMBINE_CL"] {
        if std::env::var_os(name).is_some() && (!combine_m || opts.h16_combine_act_on()) {
            return refuse(
                opts,
                format!(
                    "{name} shapes the decode combine that folds the row maxima (on by default, \
                     with the plain element-wise kernels, strict math and without \
                     MUSER_CUDA_H16_COMBINE_ACT=1)"
                ),
            );
        }
    }
    match std::env::var("MUSER_CUDA_H16_ATTN").as_deref() {
        Err(_) | Ok("mma" | "f32") => {}
        Ok(v) => {
            return refuse(
                opts,
                format!("MUSER_CUDA_H16_ATTN={v}: expected mma or f32"),
            )
        }
    }
    if opts.attn_bufs.is_some_and(|b| !(1..=4).contains(&b)) {
        return refuse(
            opts,
            "MUSER_CUDA_ATTN_BUFS is the decode attention's tiles in flight, 1..=4",
        );
    }
    if !matches!(opts.attn_cols, 1 | 4) {
        return refuse(
            opts,
            "MUSER_CUDA_ATTN_COLS is the warps sharing a decode block's 16 rows: 1 or 4",
        );
    }
    // The tensor-core attention's switches, asked for with the f32 attention: refused.
    if !opts.h16_attn_mma {
        let asked = [
            ("MUSER_CUDA_ATTN_BUFS", opts.attn_bufs.is_some()),
            ("MUSER_CUDA_ATTN_COLS", opts.attn_cols != 1),
        ]
        .into_iter()
        .chain(TENSOR_CORE_ATTENTION_ENV.map(|v| (v, std::env::var_os(v).is_some())))
        .find(|&(_, on)| on);
        if let Some((var, _)) = asked {
            return refuse(
                opts,
                format!(
                    "{var} shapes the tensor-core attention only (unset MUSER_CUDA_H16_ATTN=f32)"
                ),
            );
        }
    }
    let c = &model.config;
    if opts.h16_attn_mma {
        if !AttnH16Shape::supports(c.head_dim, c.head_dim_v) {
            return refuse(
                opts,
                format!(
                    "heads of {} keys / {} values: the tensor-core attention takes 64 / 64 or \
                 128 / 128 (MUSER_CUDA_H16_ATTN=f32 runs the f32 kernels)",
                    c.head_dim, c.head_dim_v
                ),
            );
        }
        if std::env::var_os("MUSER_CUDA_ATTN_HPB").is_some() {
            return refuse(
                opts,
                "MUSER_CUDA_ATTN_HPB shapes the f32 attention kernels only (the tensor-core \
                 attention puts a token's heads in one MMA; or MUSER_CUDA_H16_ATTN=f32)",
            );
        }
    }
    opts.q6_pad = false; // Q6_K goes up in Q6H
    weights_fit(model).or_else(|e| refuse(opts, e))
}

/// `MUSER_CUDA_Q4H_SCALES=auto` (unset) on the f16 route: u8 where every Q4_K matrix of the
/// model can take it exactly (`q4h::u8_check`, the repack's own check), else f16 — and a note
/// for the load report saying which, how long the check took (it reads every block's header)
/// and the matrix that could not. `MUSER_CUDA_Q6H_SCALES=auto` is f16 (u8 measured slower;
/// `q6h::u8_check` is the repack's check under an explicit u8). Other routes and explicit
/// values are left as they are.
pub fn resolve_h16_scales(model: &Model, opts: &mut CudaOptions) -> Option<String> {
    use muser_cuda::q4h::{self, Scales};
    if opts.acts != Acts::F16 {
        return None;
    }
    opts.q6h_scales.get_or_insert(Scales::F16);
    if opts.q4h_scales.is_some() {
        return None;
    }
    let t = std::time::Instant::now();
    let g = model.gguf();
    let refused = model
        .weights
        .matrices()
        .filter(|m| m.ty == GgmlType::Q4_K)
        .find_map(|m| {
            q4h::u8_check(m.bytes(g), m.n_out, m.n_in)
                .err()
                .map(|e| format!("{}: {e}", m.name))
        });
    opts.q4h_scales = Some(if refused.is_some() {
        Scales::F16
    } else {
        Scales::U8
    });
    let ms = t.elapsed().as_secs_f64() * 1e3;
    Some(match refused {
        None => format!("Q4H scales u8 (auto, checked in {ms:.0} ms)"),
        Some(why) => format!("Q4H scales f16 (auto, {ms:.0} ms: {why})"),
    })
}
