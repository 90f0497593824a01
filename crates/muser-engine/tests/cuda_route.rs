//! The CUDA route end to end. On a machine without a CUDA device (CI) the device tests print
//! "skipping: no CUDA device" and return, and the no-device behaviour is checked instead (an
//! explicit `cuda` is a typed error, `auto` picks the CPU and says so). On the H200 they run
//! (`scripts/device/cuda-tests.sh`).

mod common;
mod route_support;

use common::{tiny_model, tokens};
use muser_cuda::{CudaError, GraphMode};
use muser_engine::cpu::matmul::ActFormat;
use muser_engine::cpu::repack::Repack;
use muser_engine::cpu::{CpuOptions, CpuSession, Logits};
use muser_engine::cuda::{Acts, CudaOptions, CudaSession, L2Kind};
use muser_engine::session::Backend;
use muser_engine::{EngineError, Model, Oracle};
use route_support::{bits, forged_uniform, has_device, run, run_with, same_bits};

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
                run_with(&m, &toks, 512, |o| o.pdl = Some(true)),
            ),
            (
                "programmatic dependent launch, fused, chunk 1, decode graph",
                run_with(&m, &toks, 1, |o| {
                    o.pdl = Some(true);
                    o.fuse = true;
                }),
            ),
            (
                "programmatic dependent launch, chunk 1, eager",
                run_with(&m, &toks, 1, |o| {
                    o.pdl = Some(true);
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
                    o.pdl = Some(true);
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

/// The f16 route on the forged Q4_K_M mix: bit-identical logits across chunk sizes (its decode
/// kernels for chunks of up to 8 tokens, its prefill kernels above), decode graph or eager,
/// serial capture, one attention token per block, without the row maxima the element-wise
/// kernels fold (`MUSER_CUDA_H16_ROWMAX=0`: act_h16 rescans the row), the attention gate's
/// projection joined only before the combine (`MUSER_CUDA_GATE_LATE=1`), without programmatic
/// dependent launch (the f16 route's default), the FFN's gate, up and SwiGLU in two launches
/// and swiglu_m instead of one (`MUSER_CUDA_H16_GLU=0`; one by default), the attention
/// combine's last block writing the f16 activations (`MUSER_CUDA_H16_COMBINE_ACT=1`), the L2
/// prefetch branch (`MUSER_CUDA_L2_PREFETCH`: loads or hints whose values nobody reads), and the fused residual norm
/// (`residual_norm_h16`) and element-wise twins or act_h16 after the plain kernels; the same with
/// the f32 attention kernels (`MUSER_CUDA_H16_ATTN=f32`) instead of the tensor-core ones; far
/// closer to the f64 oracle than the A8 route (the f64 probe: KL 3.9e-5 on tiny with f16
/// activations and f16-rounded weights, A8 1.5e-2).
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
            (
                "attention one token per block (attn_mt off), chunk 512",
                f16(512, |o| o.attn_mt = false),
            ),
            (
                "no row maxima (act_h16 rescans), chunk 512",
                f16(512, |o| o.h16_rowmax = false),
            ),
            (
                "no row maxima, chunk 1, decode graph",
                f16(1, |o| o.h16_rowmax = false),
            ),
            (
                "gate, up and SwiGLU in two launches and swiglu_m, chunk 1, decode graph",
                f16(1, |o| o.h16_glu = Some(false)),
            ),
            (
                "gate, up and SwiGLU in two launches and swiglu_m, chunk 7, eager",
                f16(7, |o| {
                    o.h16_glu = Some(false);
                    o.graphs = false;
                }),
            ),
            (
                "the combine's last block writes the f16 activations, chunk 1, decode graph",
                f16(1, |o| o.h16_combine_act = true),
            ),
            (
                "the combine's last block writes the f16 activations, chunk 512",
                f16(512, |o| o.h16_combine_act = true),
            ),
            (
                "the combine's last block writes the f16 activations, chunk 7, eager",
                f16(7, |o| {
                    o.h16_combine_act = true;
                    o.graphs = false;
                }),
            ),
            (
                "the L2 prefetch branch (8 MiB per point), chunk 1, decode graph",
                f16(1, |o| o.l2_prefetch_mb = [8; 4]),
            ),
            (
                "the L2 prefetch branch as hints from 8 blocks, chunk 1, decode graph",
                f16(1, |o| {
                    o.l2_prefetch_mb = [4, 8, 0, 2];
                    o.l2_prefetch_kind = Some(L2Kind::Hint);
                    o.l2_prefetch_blocks = Some(8);
                }),
            ),
            (
                "the L2 prefetch branch, chunk 5, eager, serial capture of the projections",
                f16(5, |o| {
                    o.l2_prefetch_mb = [1, 2, 0, 1];
                    o.graphs = false;
                    o.mode = GraphMode::Serial;
                }),
            ),
            (
                "without programmatic dependent launch, chunk 1, decode graph",
                f16(1, |o| o.pdl = Some(false)),
            ),
            (
                "without programmatic dependent launch, chunk 512",
                f16(512, |o| o.pdl = Some(false)),
            ),
            (
                "two decode attention tiles in flight (MUSER_CUDA_ATTN_BUFS=2), chunk 1",
                f16(1, |o| o.attn_bufs = Some(2)),
            ),
            (
                "four warps per decode block's rows (MUSER_CUDA_ATTN_COLS=4), chunk 1",
                f16(1, |o| o.attn_cols = 4),
            ),
            (
                "four warps per decode block's rows, two tiles in flight, chunk 1, eager",
                f16(1, |o| {
                    o.attn_cols = 4;
                    o.attn_bufs = Some(2);
                    o.graphs = false;
                }),
            ),
            (
                "one decode attention tile in flight, chunk 1, eager",
                f16(1, |o| {
                    o.attn_bufs = Some(1);
                    o.graphs = false;
                }),
            ),
            (
                "the gate's branch joined early (MUSER_CUDA_GATE_LATE=0), chunk 1, decode graph",
                f16(1, |o| o.gate_late = false),
            ),
            (
                "the gate's branch joined early, chunk 512",
                f16(512, |o| o.gate_late = false),
            ),
            (
                "the gate's branch joined early, chunk 7, eager",
                f16(7, |o| {
                    o.gate_late = false;
                    o.graphs = false;
                }),
            ),
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
    // The f32 attention kernels instead of the tensor-core ones (other numbers, same contract).
    let no_mma = |o: &mut CudaOptions| o.h16_attn_mma = false;
    let env = route_support::mma_attention_env();
    let f32_attn = if env.is_empty() {
        let f32_attn = f16(512, no_mma);
        same_bits(
            &f32_attn,
            [
                ("f32 attention, chunk 1, decode graph", f16(1, no_mma)),
                ("f32 attention, chunk 9", f16(9, no_mma)),
            ],
            "f16 route, f32 attention",
        );
        Some(f32_attn)
    } else {
        eprintln!(
            "skipping the f32-attention variants: {} set (that attention refuses it)",
            env.join(", ")
        );
        None
    };
    let runs = [("tensor-core", Some(&base)), ("f32", f32_attn.as_ref())];
    for (what, got) in runs.into_iter().filter_map(|(w, g)| Some((w, g?))) {
        let c = muser_engine::metrics::compare(&want, got, nv);
        eprintln!(
            "f16 route vs oracle ({what} attention): KL {:.3e} top-1 {:.4}",
            c.mean_kl, c.top1
        );
        assert!(
            c.mean_kl < 1e-3,
            "f16 route ({what} attention) KL {}",
            c.mean_kl
        );
    }
}

/// The activation format's default is resolved per model before any device work: f16 where
/// the f16 route covers the model (the forged Q4_K_M mix: a switch it refuses is then refused
/// naming f16 as the default and how to get the integer kernels), A8 where every matmul weight
/// has A8 kernels but not f16 ones (Q5_K: an A8-only refusal names A8 as the default), A16 with
/// float matmul weights (both switches pass the checks and the session only fails for want of a
/// device). Runs everywhere.
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
    // A switch the f16 route refuses (the combine's activations without the row maxima) and
    // one the A8 route refuses (the unpipelined decode kernels); each acts on its route only.
    let refusal = |m: &Model| {
        let mut o = CudaOptions::new(256, 16);
        o.h16_rowmax = false;
        o.h16_combine_act = true;
        o.pipe = false;
        CudaSession::new(m, o, &mut |_, _| {})
            .err()
            .expect("no session without a device")
    };
    match refusal(&tiny_model(1)) {
        EngineError::Config(msg) => assert!(
            msg.contains("MUSER_CUDA_ACTS=f16")
                && msg.contains("f16 is the default")
                && msg.contains("MUSER_CUDA_ACTS=a8"),
            "{msg}"
        ),
        e => panic!("Q4_K_M mix: expected the f16 route's refusal, got {e}"),
    }
    match refusal(&forged_uniform(muser_gguf::GgmlType::Q5_K)) {
        EngineError::Config(msg) => assert!(
            msg.contains("MUSER_CUDA_ACTS=a8") && msg.contains("A8 is the default"),
            "{msg}"
        ),
        e => panic!("Q5_K weights: expected the A8 route's refusal, got {e}"),
    }
    match refusal(&forged_uniform(muser_gguf::GgmlType::F16)) {
        EngineError::Config(msg) => panic!("F16 weights must default to A16: {msg}"),
        e => eprintln!("F16 weights, default activations: {e} (no device; not a refusal)"),
    }
}

/// The A8 activation route (`MUSER_CUDA_ACTS=a8`, an A/B of issue 5): bit-identical logits
/// across chunk sizes, decode graph or eager, serial capture, staged or unstaged decode,
/// tensor-core or eight-token prefill (its decode and prefill kernels share one float chain),
/// fused or separate quantization and the gate's branch joined late (`MUSER_CUDA_GATE_LATE`);
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
            (
                "the gate's branch joined late (MUSER_CUDA_GATE_LATE=1: on the A8 route only \
                 when set), chunk 1",
                a8(1, |o| {
                    o.gate_late = true;
                    o.gate_late_explicit = true;
                }),
            ),
            (
                "the gate's branch joined late, fused, chunk 7, eager",
                a8(7, |o| {
                    o.gate_late = true;
                    o.gate_late_explicit = true;
                    o.fuse = true;
                    o.graphs = false;
                }),
            ),
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
