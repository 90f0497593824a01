//! The CUDA route end to end. On a machine without a CUDA device (CI) the device tests print
//! "skipping: no CUDA device" and return, and the no-device behaviour is checked instead (an
//! explicit `cuda` is a typed error, `auto` picks the CPU and says so). On the H200 they run
//! (`scripts/device/cuda-tests.sh`).

mod common;

use common::{tiny_model, tokens};
use muser_cuda::{CudaError, GraphMode};
use muser_engine::cpu::Logits;
use muser_engine::cuda::{CudaOptions, CudaSession};
use muser_engine::session::Backend;
use muser_engine::{EngineError, Model, Oracle};

fn has_device() -> bool {
    matches!(muser_cuda::Gpu::probe(), Ok(Some(_)))
}

#[test]
fn without_a_device_cuda_is_an_error_and_auto_picks_the_cpu() {
    if has_device() {
        eprintln!("a CUDA device is present: the no-device checks do not apply here");
        return;
    }
    let m = tiny_model(1);
    let err = CudaSession::new(&m, CudaOptions::new(64, 16), &mut |_, _| {})
        .err()
        .expect("an explicit CUDA session without a device must fail");
    assert!(
        matches!(err, EngineError::Cuda(CudaError::NoDevice(_))),
        "unexpected error: {err}"
    );
    let (b, why) = Backend::Auto.resolve().expect("resolve");
    assert_eq!(b, Backend::Cpu);
    assert!(why.contains("no CUDA device"), "{why}");
}

fn run(m: &Model, toks: &[u32], chunk: usize, graphs: bool, mode: GraphMode) -> Vec<f32> {
    run_with(m, toks, chunk, |o| {
        o.graphs = graphs;
        o.mode = mode;
    })
}

fn run_with(m: &Model, toks: &[u32], chunk: usize, set: impl FnOnce(&mut CudaOptions)) -> Vec<f32> {
    let mut o = CudaOptions::new(256, chunk);
    o.fuse = false;
    o.fuse_explicit = true;
    o.pipe = true;
    o.xsmem = true;
    set(&mut o);
    let mut s = CudaSession::new(m, o, &mut |_, _| {}).expect("CUDA session");
    s.eval(toks, Logits::All).expect("eval")
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Accuracy against the oracle, and bit-identical logits across runs, chunk sizes, decode graph
/// vs eager, parallel vs serial capture, fused vs separate quantization, pipelined vs plain
/// decode kernels and tensor-core vs dp2a prefill matmuls — on a prompt that wraps the 16-row window 5 times.
#[test]
fn cuda_route_tracks_the_oracle_and_is_deterministic() {
    if !has_device() {
        eprintln!("skipping: no CUDA device");
        return;
    }
    let m = tiny_model(1);
    let toks = tokens(80, m.config.n_vocab);
    let want = Oracle::new(&m).eval(&toks).expect("oracle");
    let want: Vec<f32> = want.iter().flatten().map(|&v| v as f32).collect();
    let base = run(&m, &toks, 512, true, GraphMode::Parallel);
    let cmp = muser_engine::metrics::compare(&want, &base, m.config.n_vocab);
    assert!(cmp.mean_kl < 1e-4, "mean KL {}", cmp.mean_kl);
    assert!(cmp.top1 >= 0.98, "top-1 {}", cmp.top1);
    for (name, got) in [
        ("second run", run(&m, &toks, 512, true, GraphMode::Parallel)),
        (
            "chunk 1, decode graph",
            run(&m, &toks, 1, true, GraphMode::Parallel),
        ),
        (
            "chunk 1, eager",
            run(&m, &toks, 1, false, GraphMode::Parallel),
        ),
        (
            "chunk 7, serial capture",
            run(&m, &toks, 7, true, GraphMode::Serial),
        ),
        (
            "chunk 1, serial graph",
            run(&m, &toks, 1, true, GraphMode::Serial),
        ),
        (
            "fused quantization, chunk 512",
            run_with(&m, &toks, 512, |o| o.fuse = true),
        ),
        (
            "fused quantization, chunk 1",
            run_with(&m, &toks, 1, |o| o.fuse = true),
        ),
        (
            "plain decode matvec, chunk 1",
            run_with(&m, &toks, 1, |o| o.pipe = false),
        ),
        (
            "unstaged pipelined decode matvec, chunk 1",
            run_with(&m, &toks, 1, |o| o.xsmem = false),
        ),
        (
            "eight-token dp2a prefill matmuls (no tensor cores), chunk 512",
            run_with(&m, &toks, 512, |o| o.mmq = false),
        ),
        (
            "one head per attention block, chunk 3",
            run_with(&m, &toks, 3, |o| o.attn_hpb = 1),
        ),
    ] {
        assert!(
            bits(&got) == bits(&base),
            "{name}: logits differ from chunk 512"
        );
    }
    // Another key partition is other numerics, but again accurate and chunk-independent.
    let s32 = |chunk: usize| run_with(&m, &toks, chunk, |o| o.attn_super = 32);
    let a = s32(512);
    let cmp = muser_engine::metrics::compare(&want, &a, m.config.n_vocab);
    assert!(cmp.mean_kl < 1e-4, "super 32: mean KL {}", cmp.mean_kl);
    assert!(bits(&s32(1)) == bits(&a), "super 32: chunk 1 differs");
    assert!(
        bits(&run_with(&m, &toks, 1, |o| {
            o.attn_super = 32;
            o.fuse = true;
        })) == bits(&a),
        "super 32: fused chunk 1 differs"
    );
}

/// Bad input on the CUDA route: token ids out of range and a full context are typed errors.
#[test]
fn cuda_route_rejects_bad_input() {
    if !has_device() {
        eprintln!("skipping: no CUDA device");
        return;
    }
    let m = tiny_model(1);
    let mut s = CudaSession::new(&m, CudaOptions::new(8, 4), &mut |_, _| {}).expect("session");
    let n_vocab = m.config.n_vocab as u32;
    assert!(matches!(
        s.eval(&[n_vocab], Logits::Last),
        Err(EngineError::TokenOutOfRange { .. })
    ));
    assert!(matches!(
        s.eval(&[1; 9], Logits::Last),
        Err(EngineError::ContextFull { .. })
    ));
}
