//! The CPU route against the f64 oracle and against itself (determinism), on a forged tiny
//! Muse Glimmer whose prompt wraps the sliding-window ring several times.

mod common;

use common::{tiny_model, tokens};
use muser_engine::cpu::matmul::ActFormat;
use muser_engine::cpu::repack::Repack;
use muser_engine::cpu::{CpuOptions, CpuSession, Logits};
use muser_engine::Oracle;

fn log_softmax(x: &[f64]) -> Vec<f64> {
    let max = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let lse = x.iter().map(|v| (v - max).exp()).sum::<f64>().ln() + max;
    x.iter().map(|v| v - lse).collect()
}

#[test]
fn cpu_route_tracks_the_oracle() {
    let m = tiny_model(1);
    let toks = tokens(80, m.config.n_vocab); // window 16: the ring wraps 5 times
    let mut oracle = Oracle::new(&m);
    let want = oracle.eval(&toks).expect("oracle");
    let opts = CpuOptions {
        threads: 2,
        n_ctx: 256,
        chunk: 32,
        acts: ActFormat::A16,
        repack: Repack::Auto,
    };
    let mut s = CpuSession::new(&m, opts).expect("session");
    let got = s.eval(&toks, Logits::All).expect("cpu");
    let nv = m.config.n_vocab;
    let mut kl_sum = 0.0;
    let mut top1 = 0;
    for (t, w) in want.iter().enumerate() {
        let p = log_softmax(w);
        let r: Vec<f64> = got[t * nv..(t + 1) * nv]
            .iter()
            .map(|&v| f64::from(v))
            .collect();
        let q = log_softmax(&r);
        kl_sum += p
            .iter()
            .zip(&q)
            .map(|(a, b)| a.exp() * (a - b))
            .sum::<f64>();
        let am = |v: &[f64]| {
            (0..v.len())
                .max_by(|&i, &j| v[i].total_cmp(&v[j]))
                .unwrap_or(0)
        };
        if am(&p) == am(&q) {
            top1 += 1;
        }
    }
    let kl = kl_sum / want.len() as f64;
    eprintln!("mean KL {kl:.3e}, top-1 {top1}/{}", want.len());
    assert!(kl < 1e-3, "mean KL {kl}");
    assert!(top1 as f64 >= 0.95 * want.len() as f64);
}

#[test]
fn cpu_route_is_deterministic_across_threads_chunks_and_batching() {
    let m = tiny_model(2);
    let toks = tokens(50, m.config.n_vocab);
    let run_with = |acts: ActFormat,
                    repack: Repack,
                    threads: usize,
                    chunk: usize,
                    one_by_one: bool|
     -> Vec<u32> {
        let mut s = CpuSession::new(
            &m,
            CpuOptions {
                threads,
                n_ctx: 128,
                chunk,
                acts,
                repack,
            },
        )
        .expect("session");
        let logits = if one_by_one {
            toks.iter()
                .flat_map(|&t| s.eval(&[t], Logits::All).expect("eval"))
                .collect::<Vec<f32>>()
        } else {
            s.eval(&toks, Logits::All).expect("eval")
        };
        logits.iter().map(|v| v.to_bits()).collect()
    };
    let run =
        |acts, threads, chunk, one_by_one| run_with(acts, Repack::Auto, threads, chunk, one_by_one);
    for acts in [ActFormat::A16, ActFormat::A8] {
        let reference = run(acts, 1, 512, false);
        let name = acts.name();
        assert_eq!(reference, run(acts, 2, 512, false), "{name}: threads");
        assert_eq!(reference, run(acts, 3, 7, false), "{name}: chunk size");
        assert_eq!(reference, run(acts, 2, 16, true), "{name}: one at a time");
        assert_eq!(reference, run(acts, 1, 512, false), "{name}: run to run");
    }
    // Repacked weights give the mapped weights' bits, batched and one token at a time.
    if muser_quant::SimdLevel::Avx512Vnni.is_available() {
        let mapped = run_with(ActFormat::A8, Repack::Off, 2, 512, false);
        for (chunk, one) in [(512, false), (7, false), (16, true)] {
            let got = run_with(ActFormat::A8, Repack::On, 2, chunk, one);
            assert_eq!(mapped, got, "repacked, chunk {chunk}, one at a time: {one}");
        }
    } else {
        eprintln!("skipping the repacked-weights comparison: no AVX-512 VNNI on this CPU");
        assert!(CpuSession::new(
            &m,
            CpuOptions {
                threads: 1,
                n_ctx: 8,
                chunk: 8,
                acts: ActFormat::A8,
                repack: Repack::On,
            },
        )
        .is_err());
    }
    // The two formats are different routes: their logits differ.
    assert_ne!(
        run(ActFormat::A16, 1, 512, false),
        run(ActFormat::A8, 1, 512, false)
    );
}

/// The backend-neutral session on the CPU route: one sequence only — several slots are a typed
/// error at open, another slot in `eval_seq` / `decode_batch` is refused without touching the
/// sequence, and a one-row `decode_batch` of sequence 0 is exactly `eval` of that token.
#[test]
fn cpu_session_runs_one_sequence_and_refuses_batches() {
    use muser_engine::session::{Backend, Session};
    let m = tiny_model(3);
    let opts = || CpuOptions {
        threads: 2,
        n_ctx: 64,
        chunk: 16,
        acts: ActFormat::A16,
        repack: Repack::Auto,
    };
    let err = Session::open(&m, Backend::Cpu, opts(), 2, &mut |_, _| {})
        .err()
        .expect("two sequence slots on the CPU must be refused");
    assert!(err.to_string().contains("one sequence"), "{err}");
    let toks = tokens(12, m.config.n_vocab);
    let mut a = Session::open(&m, Backend::Cpu, opts(), 1, &mut |_, _| {}).expect("session");
    let mut b = Session::open(&m, Backend::Cpu, opts(), 1, &mut |_, _| {}).expect("session");
    a.eval(&toks[..11], Logits::Last).expect("prefill a");
    b.eval_seq(0, &toks[..11], Logits::Last).expect("prefill b");
    assert!(b.eval_seq(1, &toks[..1], Logits::Last).is_err());
    assert!(b.decode_batch(&[(0, toks[11]), (1, toks[11])]).is_err());
    assert!(b.decode_batch(&[(1, toks[11])]).is_err());
    assert_eq!(b.n_past(), 11, "a refused request moved the sequence");
    let want = a.eval(&toks[11..], Logits::Last).expect("decode a");
    let got = b.decode_batch(&[(0, toks[11])]).expect("decode b");
    assert_eq!(
        got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        want.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
}
