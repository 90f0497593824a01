//! What the CUDA route refuses before any device work — switches that would change nothing on
//! the route asked for, values out of range, weights and shapes a route has no kernels for: each a
//! configuration error naming what was wrong (fail closed: never a fallback to another route).
//! These run everywhere, CI included. Split out of `cuda_route.rs` (session 40).

// (Only its tiny model here.)
#[allow(dead_code)]
mod common;
mod route_support;

use common::tiny_model;
use muser_engine::cuda::{Acts, CudaOptions, CudaSession, L2Kind};
use muser_engine::{EngineError, Model};
use route_support::{a16, forged_uniform};

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
/// kernels for: weights other than Q4_K / Q6_K, heads its tensor-core attention has no kernel
/// for; its element-wise twins and L2 prefetch branch are refused elsewhere (and the branch past
/// its ceiling, its kind and blocks without it, blocks out of range, an unknown kind).
#[test]
fn f16_route_refuses_what_it_has_no_kernels_for() {
    let env = route_support::mma_attention_env();
    if !env.is_empty() {
        eprintln!(
            "skipping: {} set (the refusals below then name it first)",
            env.join(", ")
        );
        return;
    }
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
    // Heads of 256 values: the tensor-core attention has kernels for 64 and 128 only.
    let wide_heads = {
        let mut cfg = muser_forge::ForgeConfig::preset("tiny").expect("tiny");
        cfg.head_dim = 256;
        let mut bytes = Vec::new();
        muser_forge::forge(&cfg, &mut bytes, &mut |_| {}).expect("forge");
        let gguf = muser_gguf::Gguf::from_bytes(bytes).expect("gguf");
        Model::from_gguf(std::sync::Arc::new(gguf)).expect("model")
    };
    refused(
        &wide_heads,
        &|_| {},
        "heads of 256",
        "MUSER_CUDA_H16_ATTN=f32",
    );
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
    // So would the L2 prefetch branch; and it has a ceiling.
    refused(
        &tiny_model(1),
        &|o| {
            o.acts = Acts::A16;
            o.l2_prefetch_mb = [8; 4];
        },
        "the L2 prefetch branch on A16",
        "MUSER_CUDA_L2_PREFETCH",
    );
    // The decode attention's tiles in flight: 1..=4, and only on the tensor-core attention.
    refused(
        &tiny_model(1),
        &|o| o.attn_bufs = Some(5),
        "five decode attention tiles in flight",
        "MUSER_CUDA_ATTN_BUFS",
    );
    refused(
        &tiny_model(1),
        &|o| {
            o.attn_bufs = Some(2);
            o.h16_attn_mma = false;
        },
        "decode attention tiles with the f32 attention",
        "MUSER_CUDA_ATTN_BUFS",
    );
    // Four warps per decode block's rows: 1 or 4, and only on the tensor-core attention.
    refused(
        &tiny_model(1),
        &|o| o.attn_cols = 2,
        "two warps per decode block's rows",
        "MUSER_CUDA_ATTN_COLS",
    );
    refused(
        &tiny_model(1),
        &|o| {
            o.attn_cols = 4;
            o.h16_attn_mma = false;
        },
        "four warps per decode block's rows with the f32 attention",
        "MUSER_CUDA_ATTN_COLS",
    );
    let mut o = CudaOptions::new(256, 16);
    o.l2_prefetch_mb = [49; 4];
    match CudaSession::new(&tiny_model(1), o, &mut |_, _| {}) {
        Err(EngineError::Config(msg)) => assert!(msg.contains("0..=48"), "{msg}"),
        Err(e) => panic!("49 MiB of prefetch: unexpected error {e}"),
        Ok(_) => panic!("49 MiB of prefetch must be refused"),
    }
    // The branch's shape without the branch would change nothing; its blocks have a range; its
    // kinds are two.
    type Set<'a> = &'a dyn Fn(&mut CudaOptions);
    let cases: [(&str, &str, Set); 4] = [
        (
            "a prefetch kind without the branch",
            "_KIND / _BLOCKS",
            &|o| o.l2_prefetch_kind = Some(L2Kind::Hint),
        ),
        (
            "prefetch blocks without the branch",
            "_KIND / _BLOCKS",
            &|o| o.l2_prefetch_blocks = Some(8),
        ),
        ("a prefetch launch of no blocks", "in 1..=1024", &|o| {
            o.l2_prefetch_mb = [8; 4];
            o.l2_prefetch_blocks = Some(0);
        }),
        ("an unknown prefetch kind", "hint or touch", &|o| {
            o.l2_prefetch_mb = [0, 8, 0, 0];
            o.l2_prefetch_kind = Some(L2Kind::Invalid);
        }),
    ];
    for (what, needle, set) in cases {
        let mut o = CudaOptions::new(256, 16);
        set(&mut o);
        match CudaSession::new(&tiny_model(1), o, &mut |_, _| {}) {
            Err(EngineError::Config(msg)) => assert!(msg.contains(needle), "{what}: {msg}"),
            Err(e) => panic!("{what}: unexpected error {e}"),
            Ok(_) => panic!("{what} must be refused"),
        }
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

/// `MUSER_CUDA_GATE_LATE=1` joins the attention gate's branch late: serially nothing forks and
/// a model without the gate has no such branch, so both are configuration errors — before any
/// device work, so this runs everywhere.
#[test]
fn the_late_gate_is_refused_where_it_would_change_nothing() {
    let refused = |m: &Model, set: &dyn Fn(&mut CudaOptions), what: &str, needle: &str| {
        let mut o = CudaOptions::new(64, 16);
        o.gate_late = true;
        o.gate_late_explicit = true;
        set(&mut o);
        match CudaSession::new(m, o, &mut |_, _| {}) {
            Err(EngineError::Config(msg)) => {
                assert!(
                    msg.contains("MUSER_CUDA_GATE_LATE") && msg.contains(needle),
                    "{what}: {msg}"
                )
            }
            Err(e) => panic!("{what}: unexpected error {e}"),
            Ok(_) => panic!("{what} must be refused"),
        }
    };
    let m = tiny_model(1);
    refused(
        &m,
        &|o| o.mode = muser_cuda::GraphMode::Serial,
        "serial capture",
        "MUSER_CUDA_SERIAL=1",
    );
    let mut no_gate = tiny_model(1);
    no_gate.config.attn_gate = false;
    refused(
        &no_gate,
        &|_| {},
        "a model without the gate",
        "no attention gate",
    );
    // The default (on, not set) is no refusal there: the session turns it off. Without a
    // device the session then fails opening it; with one it opens.
    let not_refused = |m: &Model, set: &dyn Fn(&mut CudaOptions), what: &str| {
        let mut o = CudaOptions::new(64, 16);
        o.gate_late = true;
        o.gate_late_explicit = false;
        set(&mut o);
        if let Err(EngineError::Config(msg)) = CudaSession::new(m, o, &mut |_, _| {}) {
            assert!(!msg.contains("MUSER_CUDA_GATE_LATE"), "{what}: {msg}");
        }
    };
    not_refused(
        &m,
        &|o| o.mode = muser_cuda::GraphMode::Serial,
        "serial, by default",
    );
    not_refused(&no_gate, &|_| {}, "no gate, by default");
}
