//! The checks a CUDA session runs on the model's shapes and on the options' ranges before any
//! device work (`CudaSession::new` calls them first): each failure a configuration error naming
//! the shape or the switch. The route-specific refusals come after the activation format is
//! resolved (`h16::check_options`, `a8::check_switches`).

use super::options::{BatchMm, CudaOptions, L2Kind};
use crate::model::Model;
use crate::EngineError;
use muser_cuda::GraphMode;

/// The model's shapes the CUDA kernels need, and every option's range.
pub(super) fn shapes_and_ranges(model: &Model, opts: &CudaOptions) -> Result<(), EngineError> {
    let c = &model.config;
    if c.head_dim_v > 256
        || c.head_dim > 512
        || !c.head_dim.is_multiple_of(32)
        || !c.head_dim_v.is_multiple_of(32)
    {
        return Err(EngineError::Config(format!(
            "CUDA attention supports head dims that are multiples of 32 up to 256 (got {} / {})",
            c.head_dim, c.head_dim_v
        )));
    }
    if !c.n_embd.is_multiple_of(8) {
        return Err(EngineError::Config(format!(
            "the CUDA norms read rows in runs of 8 values: n_embd {} is not a multiple of 8",
            c.n_embd
        )));
    }
    let gqa = c.gqa_ratio();
    if gqa == 0 || gqa > 32 || !c.n_head.is_multiple_of(c.n_head_kv) {
        return Err(EngineError::Config(format!(
            "CUDA attention needs 1..=32 query heads per KV head (got {} / {})",
            c.n_head, c.n_head_kv
        )));
    }
    if opts.attn_super < 32 || opts.attn_super > 4096 || !opts.attn_super.is_multiple_of(32) {
        return Err(EngineError::Config(format!(
            "MUSER_CUDA_ATTN_SUPER must be a multiple of 32 in 32..=4096 (got {})",
            opts.attn_super
        )));
    }
    if opts.l2_prefetch_mb.iter().any(|&mb| mb > 48) {
        return Err(EngineError::Config(format!(
            "MUSER_CUDA_L2_PREFETCH is MiB per prefetch point in 0..=48, one number or four \
             separated by commas (got {})",
            match opts.l2_prefetch_mb {
                [usize::MAX, ..] => "an unreadable value".to_string(),
                mb => format!("{mb:?}"),
            }
        )));
    }
    let prefetching = opts.l2_prefetch_on();
    if !prefetching && (opts.l2_prefetch_kind.is_some() || opts.l2_prefetch_blocks.is_some()) {
        return Err(EngineError::Config(
            "MUSER_CUDA_L2_PREFETCH_KIND / _BLOCKS shape the L2 prefetch branch, which is off \
             (set MUSER_CUDA_L2_PREFETCH)"
                .into(),
        ));
    }
    if opts.l2_prefetch_kind == Some(L2Kind::Invalid) {
        return Err(EngineError::Config(
            "MUSER_CUDA_L2_PREFETCH_KIND must be hint or touch".into(),
        ));
    }
    if let Some(b) = opts.l2_prefetch_blocks.filter(|b| !(1..=1024).contains(b)) {
        return Err(EngineError::Config(format!(
            "MUSER_CUDA_L2_PREFETCH_BLOCKS must be in 1..=1024 (got {})",
            if b == usize::MAX {
                "an unreadable value".to_string()
            } else {
                b.to_string()
            }
        )));
    }
    match std::env::var("MUSER_CUDA_GATE_LATE").as_deref() {
        Err(_) | Ok("0" | "1") => {}
        Ok(v) => {
            return Err(EngineError::Config(format!(
                "MUSER_CUDA_GATE_LATE={v:?}: expected 0 or 1"
            )))
        }
    }
    if opts.gate_late && opts.gate_late_explicit && opts.mode == GraphMode::Serial {
        return Err(EngineError::Config(
            "MUSER_CUDA_GATE_LATE=1 joins the attention gate's branch late; with \
             MUSER_CUDA_SERIAL=1 nothing forks, so it would change nothing"
                .into(),
        ));
    }
    if opts.gate_late && opts.gate_late_explicit && !model.config.attn_gate {
        return Err(EngineError::Config(
            "MUSER_CUDA_GATE_LATE=1 joins the attention gate's branch late; this model has no \
             attention gate"
                .into(),
        ));
    }
    if opts.n_seq == 0 {
        return Err(EngineError::Config(
            "a CUDA session needs at least one sequence slot".into(),
        ));
    }
    if ![2, 4, 8].contains(&opts.batch_nt) {
        return Err(EngineError::Config(format!(
            "MUSER_CUDA_BATCH_NT must be 2, 4 or 8 (got {})",
            opts.batch_nt
        )));
    }
    if !(2..=9).contains(&opts.mmv_min) {
        return Err(EngineError::Config(format!(
            "MUSER_CUDA_MMV_MIN must be in 2..=9 (9: never; got {})",
            opts.mmv_min
        )));
    }
    if opts.batch_mm == BatchMm::Invalid {
        return Err(EngineError::Config(format!(
            "MUSER_CUDA_BATCH_MM={}: expected packed or mmq",
            std::env::var("MUSER_CUDA_BATCH_MM").unwrap_or_default()
        )));
    }
    if opts.attn_hpb != 0 && (opts.attn_hpb > gqa || !gqa.is_multiple_of(opts.attn_hpb)) {
        return Err(EngineError::Config(format!(
            "MUSER_CUDA_ATTN_HPB must divide the GQA ratio {gqa} (got {})",
            opts.attn_hpb
        )));
    }
    Ok(())
}
