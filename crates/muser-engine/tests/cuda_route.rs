//! The CUDA route end to end. On a machine without a CUDA device (CI) the device tests print
//! "skipping: no CUDA device" and return, and the no-device behaviour is checked instead (an
//! explicit `cuda` is a typed error, `auto` picks the CPU and says so). On the H200 they run
//! (`scripts/device/cuda-tests.sh`).

mod common;

use common::{tiny_model, tokens};
use muser_cuda::{CudaError, GraphMode};
use muser_engine::cpu::matmul::ActFormat;
use muser_engine::cpu::repack::Repack;
use muser_engine::cpu::{CpuOptions, CpuSession, Logits};
use muser_engine::cuda::{Acts, CudaOptions, CudaSession};
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

/// A one-sequence session's logits for `toks`: A16 activations (explicitly: the default is A8
/// where the model allows it) unless `set` says otherwise.
fn run_with(m: &Model, toks: &[u32], chunk: usize, set: impl FnOnce(&mut CudaOptions)) -> Vec<f32> {
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
fn a16(o: &mut CudaOptions) {
    o.acts = Acts::A16;
    o.acts_explicit = true;
}

/// Every `(name, logits)` variant bit-identical to `base` (chunk 512); `what` prefixes the
/// failure message.
fn same_bits<const N: usize>(base: &[f32], variants: [(&str, Vec<f32>); N], what: &str) {
    for (name, got) in variants {
        assert!(
            bits(&got) == bits(base),
            "{what}{}{name}: logits differ from chunk 512",
            if what.is_empty() { "" } else { ", " }
        );
    }
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Accuracy against the oracle, and bit-identical logits across runs, chunk sizes, decode graph
/// vs eager, parallel vs serial capture, fused vs separate quantization, pipelined vs plain
/// decode kernels, tensor-core vs dp2a prefill matmuls, programmatic dependent launch on or
/// off and Q6_K weights in Q6_K-P or GGUF's layout — on a prompt that wraps the 16-row window 5 times.
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
    same_bits(
        &base,
        [
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
            (
                "programmatic dependent launch, chunk 512",
                run_with(&m, &toks, 512, |o| o.pdl = true),
            ),
            (
                "programmatic dependent launch, fused, chunk 1, decode graph",
                run_with(&m, &toks, 1, |o| {
                    o.pdl = true;
                    o.fuse = true;
                }),
            ),
            (
                "programmatic dependent launch, chunk 1, eager",
                run_with(&m, &toks, 1, |o| {
                    o.pdl = true;
                    o.graphs = false;
                }),
            ),
            (
                "Q6_K in GGUF's layout, chunk 512",
                run_with(&m, &toks, 512, |o| o.q6_pad = false),
            ),
            (
                "Q6_K in GGUF's layout, chunk 1, decode graph",
                run_with(&m, &toks, 1, |o| o.q6_pad = false),
            ),
            (
                "Q6_K in GGUF's layout, chunk 1, eager, unstaged",
                run_with(&m, &toks, 1, |o| {
                    o.q6_pad = false;
                    o.graphs = false;
                    o.xsmem = false;
                }),
            ),
            (
                "Q6_K in GGUF's layout, plain decode matvec and dp2a prefill, chunk 5",
                run_with(&m, &toks, 5, |o| {
                    o.q6_pad = false;
                    o.pipe = false;
                    o.mmq = false;
                }),
            ),
            (
                "programmatic dependent launch, chunk 1, serial graph",
                run_with(&m, &toks, 1, |o| {
                    o.pdl = true;
                    o.mode = GraphMode::Serial;
                }),
            ),
        ],
        "",
    );
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

/// What the A8 route cannot run is refused before any device work (so this runs everywhere):
/// Q6_K outside Q6_K-P, the unpipelined decode kernels, the paired tensor-core packed rows (A16
/// only), float matmul weights — each a configuration error naming the switch.
#[test]
fn a8_route_refuses_what_it_has_no_kernels_for() {
    let m = tiny_model(1);
    let refused = |m: &Model, set: &dyn Fn(&mut CudaOptions), what: &str| {
        let mut o = CudaOptions::new(256, 16);
        o.acts = Acts::A8;
        o.acts_explicit = true;
        set(&mut o);
        match CudaSession::new(m, o, &mut |_, _| {}) {
            Err(EngineError::Config(msg)) => {
                assert!(msg.contains("MUSER_CUDA_ACTS=a8"), "{what}: {msg}")
            }
            Err(e) => panic!("A8 with {what}: unexpected error {e}"),
            Ok(_) => panic!("A8 with {what} must be refused"),
        }
    };
    refused(&m, &|o| o.q6_pad = false, "Q6_K in GGUF's layout");
    refused(&m, &|o| o.pipe = false, "plain decode kernels");
    let mut o = CudaOptions::new(256, 16);
    a16(&mut o);
    o.mvr = true;
    match CudaSession::new(&m, o, &mut |_, _| {}) {
        Err(EngineError::Config(msg)) => assert!(msg.contains("MUSER_CUDA_MVR"), "{msg}"),
        Err(e) => panic!("MUSER_CUDA_MVR=1 on A16: unexpected error {e}"),
        Ok(_) => panic!("MUSER_CUDA_MVR=1 on A16 must be refused"),
    }
    refused(
        &m,
        &|o| {
            o.n_seq = 2;
            o.mmv_pair = true;
        },
        "paired tensor-core packed rows",
    );
    refused(
        &forged_uniform(muser_gguf::GgmlType::F16),
        &|_| {},
        "F16 weights",
    );
}

/// The f16 route (`MUSER_CUDA_ACTS=f16`) refuses, before any device work, what it has no
/// kernels for: weights other than Q4_K / Q6_K; its element-wise twins are refused elsewhere.
#[test]
fn f16_route_refuses_what_it_has_no_kernels_for() {
    let refused = |m: &Model, set: &dyn Fn(&mut CudaOptions), what: &str, needle: &str| {
        let mut o = CudaOptions::new(256, 16);
        o.acts = Acts::F16;
        o.acts_explicit = true;
        set(&mut o);
        match CudaSession::new(m, o, &mut |_, _| {}) {
            Err(EngineError::Config(msg)) => assert!(
                msg.contains("MUSER_CUDA_ACTS=f16") && msg.contains(needle),
                "{what}: {msg}"
            ),
            Err(e) => panic!("f16 with {what}: unexpected error {e}"),
            Ok(_) => panic!("f16 with {what} must be refused"),
        }
    };
    for ty in [
        muser_gguf::GgmlType::Q8_0,
        muser_gguf::GgmlType::Q5_K,
        muser_gguf::GgmlType::F16,
    ] {
        refused(
            &forged_uniform(ty),
            &|_| {},
            &format!("{ty:?} weights"),
            "Q4_K and Q6_K",
        );
    }
    // The f16 twins' switch on another route would change nothing.
    refused(
        &tiny_model(1),
        &|o| {
            o.acts = Acts::A16;
            o.h16_ew_fused = true;
        },
        "the element-wise twins on A16",
        "element-wise twins",
    );
}

/// The f16 route on the forged Q4_K_M mix: bit-identical logits across chunk sizes (its decode
/// kernels for chunks of up to 8 tokens, its prefill kernels above), decode graph or eager,
/// serial capture, and the fused residual norm (`residual_norm_h16`) and element-wise twins or
/// act_h16 after the plain kernels; far closer to the f64 oracle than the A8 route (the f64 probe: KL 3.9e-5 on
/// tiny with f16 activations and f16-rounded weights, A8 1.5e-2).
#[test]
fn cuda_f16_route_is_deterministic_and_tracks_the_oracle() {
    if !has_device() {
        eprintln!("skipping: no CUDA device");
        return;
    }
    let m = tiny_model(1);
    let nv = m.config.n_vocab;
    let toks = tokens(80, nv);
    let want = Oracle::new(&m).eval(&toks).expect("oracle");
    let want: Vec<f32> = want.iter().flatten().map(|&v| v as f32).collect();
    let f16 = |chunk: usize, set: fn(&mut CudaOptions)| {
        run_with(&m, &toks, chunk, |o| {
            o.acts = Acts::F16;
            set(o);
        })
    };
    let base = f16(512, |_| {});
    same_bits(
        &base,
        [
            ("chunk 1, decode graph", f16(1, |_| {})),
            ("chunk 1, eager", f16(1, |o| o.graphs = false)),
            (
                "chunk 7, serial capture",
                f16(7, |o| o.mode = GraphMode::Serial),
            ),
            ("chunk 9 (prefill kernels on 9 tokens)", f16(9, |_| {})),
            ("fused norm, chunk 512", f16(512, |o| o.fuse = true)),
            (
                "fused norm, chunk 1, decode graph",
                f16(1, |o| o.fuse = true),
            ),
            (
                "fused norm, chunk 3, eager",
                f16(3, |o| {
                    o.fuse = true;
                    o.graphs = false;
                }),
            ),
            (
                "fused norm and element-wise twins, chunk 512",
                f16(512, |o| {
                    o.fuse = true;
                    o.h16_ew_fused = true;
                }),
            ),
            (
                "fused norm and element-wise twins, chunk 1",
                f16(1, |o| {
                    o.fuse = true;
                    o.h16_ew_fused = true;
                }),
            ),
        ],
        "f16 route",
    );
    let c = muser_engine::metrics::compare(&want, &base, nv);
    eprintln!(
        "f16 route vs oracle: KL {:.3e} top-1 {:.4}",
        c.mean_kl, c.top1
    );
    assert!(c.mean_kl < 1e-3, "f16 route KL {} vs the oracle", c.mean_kl);
}

/// The activation format's default is resolved per model before any device work: A8 where every
/// matmul weight has A8 kernels (the forged Q4_K_M mix: an A16-only switch is then refused,
/// naming A8 as the default and how to get A16), A16 with float matmul weights (the same switch
/// passes the A8 checks and the session only fails for want of a device). Runs everywhere.
#[test]
fn the_default_activation_format_follows_the_weights() {
    if has_device() {
        eprintln!("skipping: needs a machine without a CUDA device (it checks the error path)");
        return;
    }
    if std::env::var("MUSER_CUDA_ACTS").is_ok() {
        eprintln!("skipping: MUSER_CUDA_ACTS is set");
        return;
    }
    let unpiped = |m: &Model| {
        let mut o = CudaOptions::new(256, 16);
        o.pipe = false;
        CudaSession::new(m, o, &mut |_, _| {})
            .err()
            .expect("no session without a device")
    };
    match unpiped(&tiny_model(1)) {
        EngineError::Config(msg) => assert!(
            msg.contains("MUSER_CUDA_ACTS=a8") && msg.contains("A8 is the default"),
            "{msg}"
        ),
        e => panic!("Q4_K_M mix: expected the A8 route's refusal, got {e}"),
    }
    match unpiped(&forged_uniform(muser_gguf::GgmlType::F16)) {
        EngineError::Config(msg) => panic!("F16 weights must default to A16: {msg}"),
        e => eprintln!("F16 weights, default activations: {e} (no device; not an A8 refusal)"),
    }
}

/// The forged tiny model with every 2-D weight of type `ty`.
fn forged_uniform(ty: muser_gguf::GgmlType) -> Model {
    let mut cfg = muser_forge::ForgeConfig::preset("tiny").expect("tiny");
    cfg.mix = muser_forge::Mix::Uniform(ty);
    let mut bytes = Vec::new();
    muser_forge::forge(&cfg, &mut bytes, &mut |_| {}).expect("forge");
    Model::from_gguf(std::sync::Arc::new(
        muser_gguf::Gguf::from_bytes(bytes).expect("gguf"),
    ))
    .expect("model")
}

/// The A8 activation route (`MUSER_CUDA_ACTS=a8`, an A/B of issue 5): bit-identical logits
/// across chunk sizes, decode graph or eager, serial capture, staged or unstaged decode,
/// tensor-core or eight-token prefill (its decode and prefill kernels share one float chain)
/// and fused or separate quantization;
/// as close to the f64 oracle as the CPU's A8 route (the same activation format, another
/// summation order) within 2× the KL and 0.02 of top-1.
#[test]
fn cuda_a8_route_is_deterministic_and_tracks_the_cpu_a8_route() {
    if !has_device() {
        eprintln!("skipping: no CUDA device");
        return;
    }
    a8_route_case("tiny (Q4_K_M mix)", &tiny_model(1));
}

/// The same for the formats the A8 route runs on its plain kernels (Q5_K, Q8_0, Q5_0: every
/// matmul weight of one type; the output projection too), decode and prefill.
#[test]
fn cuda_a8_route_on_the_plain_formats() {
    if !has_device() {
        eprintln!("skipping: no CUDA device");
        return;
    }
    use muser_gguf::GgmlType;
    for ty in [GgmlType::Q5_K, GgmlType::Q8_0, GgmlType::Q5_0] {
        a8_route_case(&format!("tiny, all {ty:?}"), &forged_uniform(ty));
    }
}

fn a8_route_case(what: &str, m: &Model) {
    let nv = m.config.n_vocab;
    let toks = tokens(80, nv);
    let want = Oracle::new(m).eval(&toks).expect("oracle");
    let want: Vec<f32> = want.iter().flatten().map(|&v| v as f32).collect();
    // The A8 route as it runs by default: the attention projections' input in A16.
    let a8 = |chunk: usize, set: fn(&mut CudaOptions)| {
        run_with(m, &toks, chunk, |o| {
            o.acts = Acts::A8;
            set(o);
        })
    };
    // Every matmul input in A8 (`MUSER_CUDA_QKV_ACTS=a8`): the CPU A8 route's formats.
    let all8 = |chunk: usize, set: fn(&mut CudaOptions)| {
        run_with(m, &toks, chunk, |o| {
            o.acts = Acts::A8;
            o.qkv_acts = Acts::A8;
            set(o);
        })
    };
    let base8 = all8(512, |_| {});
    same_bits(
        &base8,
        [
            ("chunk 1, decode graph", all8(1, |_| {})),
            (
                "chunk 7, fused, eager",
                all8(7, |o| {
                    o.fuse = true;
                    o.graphs = false;
                }),
            ),
            (
                "eight-token prefill kernels, chunk 512",
                all8(512, |o| o.mmq = false),
            ),
        ],
        &format!("A8 with A8 attention projections ({what})"),
    );
    let base = a8(512, |_| {});
    same_bits(
        &base,
        [
            ("chunk 1, decode graph", a8(1, |_| {})),
            ("chunk 1, eager", a8(1, |o| o.graphs = false)),
            (
                "chunk 7, serial capture",
                a8(7, |o| o.mode = GraphMode::Serial),
            ),
            ("chunk 1, unstaged decode", a8(1, |o| o.xsmem = false)),
            ("fused quantization, chunk 512", a8(512, |o| o.fuse = true)),
            ("fused quantization, chunk 1", a8(1, |o| o.fuse = true)),
            ("register-resident decode, chunk 1", a8(1, |o| o.mvr = true)),
            (
                "register-resident decode, fused, eager, chunk 1",
                a8(1, |o| {
                    o.mvr = true;
                    o.fuse = true;
                    o.graphs = false;
                }),
            ),
            (
                "eight-token prefill kernels, chunk 512",
                a8(512, |o| o.mmq = false),
            ),
        ],
        &format!("A8 ({what})"),
    );
    let mut cpu = CpuSession::new(
        m,
        CpuOptions {
            threads: 2,
            n_ctx: 256,
            chunk: 512,
            acts: ActFormat::A8,
            repack: Repack::Auto,
        },
    )
    .expect("CPU session");
    let cpu = cpu.eval(&toks, Logits::All).expect("cpu");
    let (g, g8, c) = (
        muser_engine::metrics::compare(&want, &base, nv),
        muser_engine::metrics::compare(&want, &base8, nv),
        muser_engine::metrics::compare(&want, &cpu, nv),
    );
    eprintln!(
        "A8 ({what}) vs oracle: CUDA KL {:.3e} top-1 {:.4} (A8 attention projections: {:.3e} \
         {:.4}); CPU KL {:.3e} top-1 {:.4}",
        g.mean_kl, g.top1, g8.mean_kl, g8.top1, c.mean_kl, c.top1
    );
    // The all-A8 CUDA route rounds as the CPU's A8 route does (in another summation order);
    // A16 attention inputs only take rounding away. Mean KL is the accuracy gate; top-1 over
    // these few positions moves by whole positions under any change of rounding (on the H200 at
    // a2b8ed5, all-Q5_0 with A16 attention inputs: KL 0.39× the CPU's, top-1 three positions
    // lower), so it may trail the CPU's by at most four positions.
    let top1_slack = 4.0 / toks.len() as f64;
    for (name, r) in [("A8", &g8), ("A8 with A16 attention projections", &g)] {
        assert!(
            r.mean_kl <= 2.0 * c.mean_kl,
            "{what}: CUDA {name} KL {} vs CPU A8 {}",
            r.mean_kl,
            c.mean_kl
        );
        assert!(
            r.top1 >= c.top1 - top1_slack,
            "{what}: CUDA {name} top-1 {} vs CPU A8 {}",
            r.top1,
            c.top1
        );
    }
}

/// An unknown `MUSER_CUDA_ACTS` value is a configuration error before any device work (fail
/// closed: it never falls back to the default route), so this runs everywhere.
#[test]
fn an_unknown_activation_format_is_refused() {
    let m = tiny_model(1);
    let mut o = CudaOptions::new(64, 16);
    o.acts = muser_engine::cuda::Acts::Invalid;
    match CudaSession::new(&m, o, &mut |_, _| {}) {
        Err(EngineError::Config(msg)) => assert!(msg.contains("MUSER_CUDA_ACTS"), "{msg}"),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("an unknown activation format must be refused"),
    }
}

/// `MUSER_CUDA_QKV_ACTS` acts on the A8 route only: on A16 it would change nothing, so it is a
/// configuration error, and so is a value other than a16 / a8 — before any device work, so this
/// runs everywhere.
#[test]
fn the_attention_input_switch_is_refused_where_it_would_change_nothing() {
    let m = tiny_model(1);
    let refused = |set: &dyn Fn(&mut CudaOptions), what: &str| {
        let mut o = CudaOptions::new(64, 16);
        set(&mut o);
        match CudaSession::new(&m, o, &mut |_, _| {}) {
            Err(EngineError::Config(msg)) => {
                assert!(msg.contains("MUSER_CUDA_QKV_ACTS"), "{what}: {msg}")
            }
            Err(e) => panic!("{what}: unexpected error {e}"),
            Ok(_) => panic!("{what} must be refused"),
        }
    };
    refused(
        &|o| {
            a16(o);
            o.qkv_acts = Acts::A8;
            o.qkv_acts_explicit = true;
        },
        "MUSER_CUDA_QKV_ACTS=a8 on the A16 route",
    );
    refused(
        &|o| {
            a16(o);
            o.qkv_acts_explicit = true;
        },
        "MUSER_CUDA_QKV_ACTS=a16 on the A16 route",
    );
    refused(
        &|o| {
            o.acts = Acts::A8;
            o.acts_explicit = true;
            o.qkv_acts = Acts::Invalid;
            o.qkv_acts_explicit = true;
        },
        "an unknown MUSER_CUDA_QKV_ACTS",
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

/// Per sequence: the prompt's last logits, then each continuation token's logits, decoding
/// alone in a one-sequence session.
fn alone(m: &Model, prompt: &[u32], cont: &[u32], set: impl Fn(&mut CudaOptions)) -> Vec<Vec<f32>> {
    let mut o = CudaOptions::new(256, 512);
    a16(&mut o);
    set(&mut o);
    let mut s = CudaSession::new(m, o, &mut |_, _| {}).expect("CUDA session");
    let mut out = vec![s.eval(prompt, Logits::Last).expect("prefill")];
    for &t in cont {
        out.push(s.eval(&[t], Logits::Last).expect("decode"));
    }
    out
}

/// Batched decode: packed rows of several sequences give every row exactly the logits that
/// sequence gets decoding alone — for every batch composition (1 to 8 rows, odd counts, rows
/// in any order, sequences joining and leaving), graph and eager, packed (2, 4 or 8 rows per
/// launch), tensor-core packed rows from 2, 3 (default) or no rows, and the prefill
/// matmuls, with A16 activations and with A8 — with prompts of different lengths (positions
/// differ per row, sliding windows wrap), each prefilled into its own slot.
#[test]
fn batched_decode_equals_each_sequence_alone() {
    if !has_device() {
        eprintln!("skipping: no CUDA device");
        return;
    }
    let m = tiny_model(2);
    let nv = m.config.n_vocab;
    let n_seq = 8;
    let prompts: Vec<Vec<u32>> = [20usize, 37, 5, 50, 12, 1, 64, 29]
        .iter()
        .enumerate()
        .map(|(i, &n)| tokens(n + 3 * i, nv)[3 * i..].to_vec())
        .collect();
    let steps = 24;
    let conts: Vec<Vec<u32>> = (0..n_seq)
        .map(|i| tokens(steps + 11 * i, nv)[11 * i..].to_vec())
        .collect();
    // Which sequences decode at step k (in this row order): all eight, subsets of every size,
    // reversed orders, a sequence alone.
    let pattern = |k: usize| -> Vec<usize> {
        match k % 6 {
            0 => (0..8).collect(),
            1 => vec![5, 2, 7],
            2 => vec![1],
            3 => vec![6, 4, 3, 0, 1],
            4 => (0..8).rev().collect(),
            _ => vec![2, 3, 5, 7, 6, 4],
        }
    };
    for (name, set) in [
        (
            "packed, graphs",
            (|_o: &mut CudaOptions| {}) as fn(&mut CudaOptions),
        ),
        ("packed, eager", |o: &mut CudaOptions| o.graphs = false),
        ("packed, eight rows per launch", |o: &mut CudaOptions| {
            o.batch_nt = 8
        }),
        ("packed, two rows per launch", |o: &mut CudaOptions| {
            o.batch_nt = 2
        }),
        (
            "tensor-core packed rows (mmv) from two rows",
            |o: &mut CudaOptions| o.mmv_min = 2,
        ),
        (
            "paired tensor-core tiles (<= 4 rows)",
            |o: &mut CudaOptions| {
                o.mmv_min = 2;
                o.mmv_pair = true
            },
        ),
        ("no tensor-core packed rows", |o: &mut CudaOptions| {
            o.mmv_min = 9
        }),
        (
            "packed, programmatic dependent launch",
            |o: &mut CudaOptions| o.pdl = true,
        ),
        ("packed, Q6_K in GGUF's layout", |o: &mut CudaOptions| {
            o.q6_pad = false
        }),
        (
            "tensor-core packed rows from two rows, Q6_K in GGUF's layout",
            |o: &mut CudaOptions| {
                o.mmv_min = 2;
                o.q6_pad = false
            },
        ),
        (
            "paired tensor-core tiles, Q6_K in GGUF's layout",
            |o: &mut CudaOptions| {
                o.mmv_min = 2;
                o.mmv_pair = true;
                o.q6_pad = false
            },
        ),
        (
            "tensor-core packed rows from two rows, programmatic dependent launch",
            |o: &mut CudaOptions| {
                o.mmv_min = 2;
                o.pdl = true
            },
        ),
        ("tensor-core matmuls, graphs", |o: &mut CudaOptions| {
            o.batch_mm = muser_engine::cuda::BatchMm::Mmq
        }),
        ("packed, unfused, serial", |o: &mut CudaOptions| {
            o.fuse = false;
            o.fuse_explicit = true;
            o.mode = GraphMode::Serial;
        }),
        ("A8, packed, graphs", |o: &mut CudaOptions| {
            o.acts = Acts::A8
        }),
        ("A8, packed, eager", |o: &mut CudaOptions| {
            o.acts = Acts::A8;
            o.graphs = false
        }),
        (
            "A8, packed, eight rows per launch",
            |o: &mut CudaOptions| {
                o.acts = Acts::A8;
                o.batch_nt = 8
            },
        ),
        (
            "A8, packed, two rows per launch, unstaged",
            |o: &mut CudaOptions| {
                o.acts = Acts::A8;
                o.batch_nt = 2;
                o.xsmem = false
            },
        ),
        (
            "A8, tensor-core packed rows (mmv) from two rows",
            |o: &mut CudaOptions| {
                o.acts = Acts::A8;
                o.mmv_min = 2
            },
        ),
        ("A8, no tensor-core packed rows", |o: &mut CudaOptions| {
            o.acts = Acts::A8;
            o.mmv_min = 9
        }),
        ("A8, tensor-core matmuls", |o: &mut CudaOptions| {
            o.acts = Acts::A8;
            o.batch_mm = muser_engine::cuda::BatchMm::Mmq
        }),
        (
            "A8 with A8 attention projections, packed, graphs",
            |o: &mut CudaOptions| {
                o.acts = Acts::A8;
                o.qkv_acts = Acts::A8
            },
        ),
        (
            "A8 with A8 attention projections, tensor-core packed rows from two rows",
            |o: &mut CudaOptions| {
                o.acts = Acts::A8;
                o.qkv_acts = Acts::A8;
                o.mmv_min = 2
            },
        ),
        ("f16, graphs", |o: &mut CudaOptions| o.acts = Acts::F16),
        ("f16, eager", |o: &mut CudaOptions| {
            o.acts = Acts::F16;
            o.graphs = false
        }),
    ] {
        let want: Vec<Vec<Vec<f32>>> = (0..n_seq)
            .map(|i| alone(&m, &prompts[i], &conts[i], set))
            .collect();
        let mut o = CudaOptions::new(256, 512);
        o.n_seq = n_seq;
        a16(&mut o);
        set(&mut o);
        let mut s = CudaSession::new(&m, o, &mut |_, _| {}).expect("CUDA session");
        // Prefill in a scrambled order, each into its own slot.
        for i in [3usize, 0, 7, 1, 6, 2, 5, 4] {
            let got = s.eval_seq(i, &prompts[i], Logits::Last).expect("prefill");
            assert!(
                bits(&got) == bits(&want[i][0]),
                "{name}: sequence {i}'s prefill differs from its own session"
            );
        }
        let mut next = vec![0usize; n_seq];
        let mut checked = 0;
        for k in 0.. {
            let seqs: Vec<usize> = pattern(k)
                .into_iter()
                .filter(|&i| next[i] < steps)
                .collect();
            if next.iter().all(|&n| n >= steps) {
                break;
            }
            if seqs.is_empty() {
                continue;
            }
            let rows: Vec<(usize, u32)> = seqs.iter().map(|&i| (i, conts[i][next[i]])).collect();
            let got = s.decode_batch(&rows).expect("batched decode");
            assert_eq!(got.len(), rows.len() * nv);
            for (r, &i) in seqs.iter().enumerate() {
                assert!(
                    bits(&got[r * nv..(r + 1) * nv]) == bits(&want[i][next[i] + 1]),
                    "{name}: step {k}, row {r} (sequence {i}, token {}) differs from the sequence alone",
                    next[i]
                );
                next[i] += 1;
                checked += 1;
                assert_eq!(s.n_past_seq(i), prompts[i].len() + next[i]);
            }
        }
        assert_eq!(checked, n_seq * steps);
        eprintln!("{name}: {checked} batched rows bit-identical to the sequences alone");
    }
}

/// Bad batched-decode requests are typed errors that change nothing: a sequence twice, a slot
/// that does not exist, too many rows, a token out of range, a full context.
#[test]
fn batched_decode_rejects_bad_requests() {
    if !has_device() {
        eprintln!("skipping: no CUDA device");
        return;
    }
    let m = tiny_model(1);
    let mut o = CudaOptions::new(8, 4);
    o.n_seq = 2;
    let mut s = CudaSession::new(&m, o, &mut |_, _| {}).expect("session");
    let nv = m.config.n_vocab as u32;
    for rows in [
        vec![(0usize, 1u32), (0, 2)],
        vec![(2, 1)],
        vec![],
        (0..9).map(|i| (i, 1)).collect(),
        vec![(0, 1), (1, nv)],
    ] {
        assert!(
            matches!(
                s.decode_batch(&rows),
                Err(EngineError::Config(_) | EngineError::TokenOutOfRange { .. })
            ),
            "{rows:?} must be refused"
        );
        assert_eq!(
            (s.n_past_seq(0), s.n_past_seq(1)),
            (0, 0),
            "{rows:?} changed a sequence"
        );
    }
    s.eval_seq(1, &[1; 8], Logits::Last)
        .expect("fill sequence 1");
    assert!(matches!(
        s.decode_batch(&[(0, 1), (1, 1)]),
        Err(EngineError::ContextFull { .. })
    ));
    assert_eq!((s.n_past_seq(0), s.n_past_seq(1)), (0, 8));
    s.decode_batch(&[(0, 1)]).expect("sequence 0 still decodes");
}
