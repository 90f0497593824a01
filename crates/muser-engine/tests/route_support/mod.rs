//! The end-to-end CUDA tests' shared harness (`cuda_route.rs`, `cuda_batched.rs`,
//! `cuda_refusals.rs`): the device probe, one-sequence sessions with explicit options,
//! bit-identity checks and forged models.
#![allow(dead_code)]

use muser_cuda::GraphMode;
use muser_engine::cpu::Logits;
use muser_engine::cuda::{Acts, CudaOptions, CudaSession};
use muser_engine::Model;

pub fn has_device() -> bool {
    matches!(muser_cuda::Gpu::probe(), Ok(Some(_)))
}

/// The tensor-core attention's switches set in the environment (a device A/B runs the tests
/// under one): sessions with the f32 attention, or off the f16 route, refuse them by design, so
/// the tests skip those sessions — saying so.
pub fn mma_attention_env() -> Vec<&'static str> {
    muser_engine::cuda::TENSOR_CORE_ATTENTION_ENV
        .into_iter()
        .filter(|v| std::env::var_os(v).is_some())
        .collect()
}

pub fn run(m: &Model, toks: &[u32], chunk: usize, graphs: bool, mode: GraphMode) -> Vec<f32> {
    run_with(m, toks, chunk, |o| {
        o.graphs = graphs;
        o.mode = mode;
    })
}

/// A one-sequence session's logits for `toks`: A16 activations (explicitly: the default is A8
/// where the model allows it) unless `set` says otherwise.
pub fn run_with(
    m: &Model,
    toks: &[u32],
    chunk: usize,
    set: impl FnOnce(&mut CudaOptions),
) -> Vec<f32> {
    let mut o = CudaOptions::new(256, chunk);
    a16(&mut o);
    o.fuse = false;
    o.fuse_explicit = true;
    o.pipe = true;
    o.xsmem = true;
    set(&mut o);
    let mut s = CudaSession::new(m, o, &mut |_, _| {}).expect("CUDA session");
    s.eval(toks, Logits::All).expect("eval")
}

/// Explicit A16 activations (the tests of the A16 kernels and switches).
pub fn a16(o: &mut CudaOptions) {
    o.acts = Acts::A16;
    o.acts_explicit = true;
}

/// Every `(name, logits)` variant bit-identical to `base` (chunk 512); `what` prefixes the
/// failure message.
pub fn same_bits<const N: usize>(base: &[f32], variants: [(&str, Vec<f32>); N], what: &str) {
    for (name, got) in variants {
        assert!(
            bits(&got) == bits(base),
            "{what}{}{name}: logits differ from chunk 512",
            if what.is_empty() { "" } else { ", " }
        );
    }
}

pub fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// The forged tiny model with every 2-D weight of type `ty`.
pub fn forged_uniform(ty: muser_gguf::GgmlType) -> Model {
    let mut cfg = muser_forge::ForgeConfig::preset("tiny").expect("tiny");
    cfg.mix = muser_forge::Mix::Uniform(ty);
    let mut bytes = Vec::new();
    muser_forge::forge(&cfg, &mut bytes, &mut |_| {}).expect("forge");
    Model::from_gguf(std::sync::Arc::new(
        muser_gguf::Gguf::from_bytes(bytes).expect("gguf"),
    ))
    .expect("model")
}
