//! Batched decode on the CUDA route end to end: packed rows of several sequences against each
//! sequence decoding alone, and bad batch requests. On a machine without a CUDA device (CI) the
//! device test prints "skipping: no CUDA device" and returns; the request checks run
//! everywhere they can. On the H200: `scripts/device/cuda-tests.sh`.

mod common;
mod route_support;

use common::{tiny_model, tokens};
use muser_cuda::GraphMode;
use muser_engine::cpu::Logits;
use muser_engine::cuda::{Acts, CudaOptions, CudaSession};
use muser_engine::{EngineError, Model};
use route_support::{a16, bits, has_device};

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
            |o: &mut CudaOptions| o.pdl = Some(true),
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
                o.pdl = Some(true)
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
        (
            "f16, the combine's last block writes the activations",
            |o: &mut CudaOptions| {
                o.acts = Acts::F16;
                o.h16_combine_act = true
            },
        ),
        (
            "f16, the gate's branch joined early (MUSER_CUDA_GATE_LATE=0)",
            |o: &mut CudaOptions| {
                o.acts = Acts::F16;
                o.gate_late = false
            },
        ),
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

/// The page-locked staging (`MUSER_CUDA_HOST_STAGE`, host_io.rs) lands every row where the
/// pageable path does, bit for bit: all rows of a prompt that fits the staging (one chunk, and
/// three chunks landing at row offsets), the last row of a longer prompt (several chunks),
/// all rows past the staging (the pageable fallback), decode steps and packed rows; f16 and
/// A16 routes, graphs and eager.
#[test]
fn staged_rows_equal_pageable_rows() {
    if !has_device() {
        eprintln!("skipping: no CUDA device");
        return;
    }
    let m = tiny_model(3);
    let nv = m.config.n_vocab;
    let toks = tokens(40, nv);
    for (name, acts, graphs) in [
        ("f16, graphs", Acts::F16, true),
        ("f16, eager", Acts::F16, false),
        ("A16, graphs", Acts::A16, true),
    ] {
        let run = |stage: bool| -> Vec<Vec<f32>> {
            let mut o = CudaOptions::new(256, 3);
            o.n_seq = 2;
            a16(&mut o);
            o.acts = acts;
            o.graphs = graphs;
            o.host_stage = stage;
            let mut s = CudaSession::new(&m, o, &mut |_, _| {}).expect("CUDA session");
            let mut out = vec![
                // 3 rows in one chunk; 7 rows over three chunks (staged at offsets 0, 3, 6).
                s.eval_seq_ref(0, &toks[..3], Logits::All)
                    .expect("3")
                    .into_owned(),
                s.eval_seq_ref(0, &toks[3..10], Logits::All)
                    .expect("7")
                    .into_owned(),
                // 20 tokens over 7 chunks, the last row only; 9 rows (past the staging).
                s.eval_seq_ref(1, &toks[10..30], Logits::Last)
                    .expect("20")
                    .into_owned(),
                s.eval_seq_ref(1, &toks[30..39], Logits::All)
                    .expect("9")
                    .into_owned(),
            ];
            for k in 0..4 {
                out.push(
                    s.eval_seq_ref(0, &[toks[k]], Logits::Last)
                        .expect("step")
                        .into_owned(),
                );
                let rows = [(1, toks[k + 5]), (0, toks[k + 9])];
                out.push(s.decode_batch_ref(&rows).expect("rows").into_owned());
            }
            out
        };
        let (staged, pageable) = (run(true), run(false));
        let rows: Vec<usize> = staged.iter().map(|v| v.len() / nv).collect();
        assert_eq!(rows, [3, 7, 1, 9, 1, 2, 1, 2, 1, 2, 1, 2], "{name}");
        for (i, (a, b)) in staged.iter().zip(&pageable).enumerate() {
            assert!(bits(a) == bits(b), "{name}: eval {i}'s staged rows differ");
        }
        eprintln!("{name}: staged rows equal the pageable path's");
    }
}

/// `MUSER_CUDA_STEP_TIMES` (`CudaOptions::step_times`): every timed step counts once with a
/// positive device time, the count restarts at each take, and without it there is no clock.
#[test]
fn step_times_count_every_step() {
    if !has_device() {
        eprintln!("skipping: no CUDA device");
        return;
    }
    let m = tiny_model(1);
    let toks = tokens(12, m.config.n_vocab);
    for graphs in [true, false] {
        let mut o = CudaOptions::new(64, 4);
        o.step_times = true;
        o.graphs = graphs;
        let mut s = CudaSession::new(&m, o, &mut |_, _| {}).expect("CUDA session");
        s.eval(&toks[..9], Logits::Last).expect("prefill"); // three steps of 4, 4, 1
        let (secs, steps) = s.take_step_times().expect("a clock");
        assert_eq!(steps, 3, "graphs {graphs}");
        assert!(secs > 0.0, "graphs {graphs}: {secs}");
        for &t in &toks[9..] {
            s.eval(&[t], Logits::Last).expect("decode");
        }
        let (secs, steps) = s.take_step_times().expect("a clock");
        assert_eq!(steps, 3, "graphs {graphs}");
        assert!(secs > 0.0, "graphs {graphs}: {secs}");
        assert_eq!(s.take_step_times(), Some((0.0, 0)));
    }
    let mut o = CudaOptions::new(64, 4);
    o.step_times = false;
    let mut s = CudaSession::new(&m, o, &mut |_, _| {}).expect("CUDA session");
    s.eval(&toks[..2], Logits::Last).expect("prefill");
    assert_eq!(s.take_step_times(), None);
}
