//! The accuracy contract in CI (BRIEF §2): replays the forged fixtures recorded by
//! `scripts/parity.py` (docs/receipts/parity-cpu-{tiny,small}.json) — same forged file (checked
//! by SHA-256), same token ids — runs the f64 oracle and Muser's CPU route here, and checks
//! Muser against the llama.cpp CPU figures stored in the receipt: mean KL ≤ 1.10×, top-1 ≥
//! llama.cpp's − 0.01, max plausible-token error ≤ 1.25×. CI does not build llama.cpp; its
//! figures come from the receipt, which names the comparator build that produced them. Both
//! CPU activation routes are checked (A16, the default, and A8) on the same oracle logits.

use std::path::PathBuf;
use std::sync::Arc;

use muser_engine::cpu::matmul::ActFormat;
use muser_engine::cpu::repack::Repack;
use muser_engine::cpu::{CpuOptions, CpuSession, Logits};
use muser_engine::metrics::compare;
use muser_engine::{Model, Oracle};
use muser_forge::ForgeConfig;
use muser_gguf::Gguf;
use sha2::{Digest, Sha256};

fn receipt(fixture: &str) -> serde_json::Value {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs/receipts")
        .join(format!("parity-cpu-{fixture}.json"));
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).expect("receipt JSON")
}

fn check_fixture(fixture: &str, max_prompts: usize) {
    let r = receipt(fixture);
    let mut cfg = ForgeConfig::preset(fixture).expect("preset");
    cfg.seed = 7;
    let mut bytes = Vec::new();
    muser_forge::forge(&cfg, &mut bytes, &mut |_| {}).expect("forge");
    let sha = format!("{:x}", Sha256::digest(&bytes));
    assert_eq!(
        Some(sha.as_str()),
        r["model_sha256"].as_str(),
        "the forged {fixture} file differs from the one the receipt measured: rerun scripts/parity.py"
    );
    let model = Model::from_gguf(Arc::new(Gguf::from_bytes(bytes).expect("gguf"))).expect("model");
    let n_vocab = model.config.n_vocab;
    // Every activation route the CPU offers: A16 (the default) and A8.
    let routes = [ActFormat::A16, ActFormat::A8];
    let mut sums = [(0usize, 0.0, 0.0, 0.0f64); 2];
    let prompts = r["prompts"].as_array().expect("prompts");
    for p in prompts.iter().take(max_prompts) {
        let ids: Vec<u32> = p["tokens"]
            .as_array()
            .expect("tokens")
            .iter()
            .map(|v| v.as_u64().expect("id") as u32)
            .collect();
        let oracle: Vec<f32> = Oracle::new(&model)
            .eval(&ids)
            .expect("oracle")
            .into_iter()
            .flatten()
            .map(|v| v as f32)
            .collect();
        for (acts, (n, kl, top1, dmax)) in routes.iter().zip(sums.iter_mut()) {
            let opts = CpuOptions {
                threads: 2,
                n_ctx: ids.len(),
                chunk: 512,
                acts: *acts,
                repack: Repack::Auto,
            };
            let got = CpuSession::new(&model, opts)
                .expect("session")
                .eval(&ids, Logits::All)
                .expect("cpu");
            let c = compare(&oracle, &got, n_vocab);
            *n += ids.len();
            *kl += c.mean_kl * ids.len() as f64;
            *top1 += c.top1 * ids.len() as f64;
            *dmax = dmax.max(c.max_plausible_dlogp);
        }
    }
    let llama = &r["summary"]["llama-cpu"];
    let l_kl = llama["mean_kl"].as_f64().expect("kl");
    let l_top1 = llama["top1"].as_f64().expect("top1");
    let l_max = llama["max_plausible_dlogp"].as_f64().expect("max");
    for (acts, &(n, kl, top1, dmax)) in routes.iter().zip(sums.iter()) {
        let (kl, top1, route) = (kl / n as f64, top1 / n as f64, acts.name());
        eprintln!("{fixture} {route}: muser KL {kl:.3e} top-1 {top1:.4} max {dmax:.3e} | llama.cpp KL {l_kl:.3e} top-1 {l_top1:.4} max {l_max:.3e}");
        assert!(
            kl <= 1.10 * l_kl,
            "{fixture} {route}: mean KL {kl} vs llama.cpp {l_kl}"
        );
        assert!(
            top1 >= l_top1 - 0.01,
            "{fixture} {route}: top-1 {top1} vs llama.cpp {l_top1}"
        );
        assert!(
            dmax <= 1.25 * l_max,
            "{fixture} {route}: max plausible error {dmax} vs llama.cpp {l_max}"
        );
    }
}

#[test]
fn forged_tiny_meets_the_contract() {
    check_fixture("tiny", usize::MAX);
}

#[test]
fn forged_small_meets_the_contract() {
    // Every prompt wraps the 64-row ring more than three times; two prompts keep CI fast.
    check_fixture("small", 2);
}
