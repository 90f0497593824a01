//! Determinism on the real gemma-3-270m (BRIEF §2, part 3): the CPU route's logits are
//! bit-identical run to run, across thread counts (1, 2, all cores), prefill chunk sizes, and
//! batched vs one-at-a-time evaluation — for both activation routes (A16 and A8).

use std::path::PathBuf;

use muser_engine::cpu::matmul::ActFormat;
use muser_engine::cpu::repack::Repack;
use muser_engine::cpu::{CpuOptions, CpuSession, Logits};
use muser_engine::Model;

fn gemma() -> Option<Model> {
    let path = std::env::var_os("MUSER_GEMMA_GGUF")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME").unwrap_or_default();
            PathBuf::from(home).join(".cache/muser/models/gemma-3-270m-q4_k_m.gguf")
        });
    if !path.is_file() {
        assert!(
            std::env::var_os("MUSER_REQUIRE_MODELS").is_none(),
            "MUSER_REQUIRE_MODELS is set but {} is missing",
            path.display()
        );
        eprintln!(
            "skipping: gemma-3-270m not found at {}; run scripts/fetch-default-model.sh",
            path.display()
        );
        return None;
    }
    Some(Model::load(&path).expect("gemma loads"))
}

#[test]
fn gemma_logits_are_bit_identical_across_threads_chunks_and_batching() {
    let Some(m) = gemma() else { return };
    let toks: Vec<u32> = vec![
        2, 818, 5279, 529, 7001, 563, 236764, 532, 506, 5279, 529, 9405, 563, 9405, 236761, 107,
    ];
    let all = std::thread::available_parallelism().map_or(2, |n| n.get());
    let run_with = |acts: ActFormat,
                    repack: Repack,
                    threads: usize,
                    chunk: usize,
                    one_by_one: bool|
     -> Vec<u32> {
        let opts = CpuOptions {
            threads,
            n_ctx: 64,
            chunk,
            acts,
            repack,
        };
        let mut s = CpuSession::new(&m, opts).expect("session");
        let logits: Vec<f32> = if one_by_one {
            toks.iter()
                .flat_map(|&t| s.eval(&[t], Logits::All).expect("eval"))
                .collect()
        } else {
            s.eval(&toks, Logits::All).expect("eval")
        };
        logits.iter().map(|v| v.to_bits()).collect()
    };
    let run =
        |acts, threads, chunk, one_by_one| run_with(acts, Repack::Auto, threads, chunk, one_by_one);
    if muser_quant::SimdLevel::Avx512Vnni.is_available() {
        let mapped = run_with(ActFormat::A8, Repack::Off, 2, 512, false);
        for (chunk, one) in [(512, false), (5, false), (512, true)] {
            let got = run_with(ActFormat::A8, Repack::On, 2, chunk, one);
            assert_eq!(mapped, got, "repacked, chunk {chunk}, one at a time: {one}");
        }
    } else {
        eprintln!("skipping the repacked-weights comparison: no AVX-512 VNNI on this CPU");
    }
    for acts in [ActFormat::A16, ActFormat::A8] {
        let name = acts.name();
        let reference = run(acts, 1, 512, false);
        assert_eq!(reference, run(acts, 2, 512, false), "{name}: 2 threads");
        assert_eq!(reference, run(acts, all, 512, false), "{name}: all cores");
        assert_eq!(reference, run(acts, 2, 5, false), "{name}: chunks of 5");
        assert_eq!(
            reference,
            run(acts, 2, 512, true),
            "{name}: one token at a time"
        );
        assert_eq!(reference, run(acts, 1, 512, false), "{name}: run to run");
    }
}
