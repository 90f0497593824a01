//! Shared helpers of the tokenizer integration tests: the corpus, the golden files, locating
//! (or skipping) model files, and comparing our ids with llama-tokenize's.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use muser_gguf::Gguf;
use muser_tokenizer::Tokenizer;

pub fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("data")
}

/// The corpus strings (one JSON string per line; split on `\n` only).
pub fn corpus() -> Vec<String> {
    let text = std::fs::read_to_string(data_dir().join("corpus.jsonl")).expect("corpus.jsonl");
    text.split('\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_str::<String>(l).expect("corpus line is a JSON string"))
        .collect()
}

/// One golden line: ids with `parse_special` on and off.
pub struct Golden {
    pub ids: Vec<u32>,
    pub ids_no_special: Vec<u32>,
}

/// `tests/data/golden-<name>.jsonl`, if present.
pub fn golden(name: &str) -> Option<Vec<Golden>> {
    let text = std::fs::read_to_string(data_dir().join(format!("golden-{name}.jsonl"))).ok()?;
    let ids = |v: &serde_json::Value, k: &str| -> Vec<u32> {
        v[k].as_array()
            .expect("ids array")
            .iter()
            .map(|x| x.as_u64().expect("id") as u32)
            .collect()
    };
    Some(
        text.lines()
            .filter(|l| !l.is_empty())
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).expect("golden line");
                Golden {
                    ids: ids(&v, "ids"),
                    ids_no_special: ids(&v, "ids_no_special"),
                }
            })
            .collect(),
    )
}

/// Whether missing models must fail the test instead of skipping it.
pub fn require_models() -> bool {
    std::env::var("MUSER_REQUIRE_MODELS").is_ok_and(|v| v == "1")
}

/// The gemma-3-270m GGUF: `MUSER_GEMMA_GGUF` or the default cache path. `None` (after
/// printing why) when absent and models are not required; panics when they are.
pub fn gemma_path() -> Option<PathBuf> {
    let path = std::env::var_os("MUSER_GEMMA_GGUF")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .map(|h| PathBuf::from(h).join(".cache/muser/models/gemma-3-270m-q4_k_m.gguf"))
        })?;
    if path.exists() {
        return Some(path);
    }
    let msg = format!(
        "skipping: gemma-3-270m not found at {} (set MUSER_GEMMA_GGUF)",
        path.display()
    );
    assert!(!require_models(), "MUSER_REQUIRE_MODELS=1 but {msg}");
    eprintln!("{msg}");
    None
}

/// Load the gemma tokenizer, or `None` when skipping.
pub fn gemma() -> Option<(Gguf, Tokenizer)> {
    let path = gemma_path()?;
    let g = Gguf::open(&path).expect("open gemma GGUF");
    let t = Tokenizer::from_gguf(&g).expect("gemma tokenizer");
    Some((g, t))
}

/// Escape a string for messages.
pub fn show(s: &str) -> String {
    let short: String = s.chars().take(120).collect();
    format!(
        "{short:?}{}",
        if s.chars().count() > 120 { "…" } else { "" }
    )
}

/// Compare every corpus string with the golden ids (both special modes). Returns the number
/// of exact matches per mode and prints up to 20 mismatches.
pub fn compare(name: &str, tok: &Tokenizer, corpus: &[String], gold: &[Golden]) -> (usize, usize) {
    assert_eq!(
        corpus.len(),
        gold.len(),
        "golden-{name} is stale: regenerate it"
    );
    let mut ok = (0, 0);
    let mut shown = 0;
    for (i, (s, g)) in corpus.iter().zip(gold).enumerate() {
        for (special, want, count) in [
            (true, &g.ids, &mut ok.0),
            (false, &g.ids_no_special, &mut ok.1),
        ] {
            let got = tok.encode(s, true, special);
            if &got == want {
                *count += 1;
            } else if shown < 20 {
                shown += 1;
                eprintln!(
                    "[{name}] #{i} parse_special={special} {}\n   want {want:?}\n    got {got:?}",
                    show(s)
                );
            }
        }
    }
    eprintln!(
        "[{name}] exact matches: {}/{} (parse_special) {}/{} (no parse_special)",
        ok.0,
        corpus.len(),
        ok.1,
        corpus.len()
    );
    ok
}

/// The tokenizer part of a forged Muse Glimmer GGUF with `n_vocab` tokens: exactly the
/// metadata `muser forge --preset tiny --vocab N` writes (made by the forge crate's own
/// metadata code), without tensors. The tokenizer does not depend on the seed.
pub fn forged(n_vocab: usize) -> (Gguf, Tokenizer) {
    let mut cfg = muser_forge::ForgeConfig::preset("tiny").expect("tiny preset");
    cfg.n_vocab = n_vocab;
    let vocab = muser_forge::vocab::build(n_vocab).expect("forged vocab");
    let mut b = muser_gguf::GgufBuilder::new();
    muser_forge::metadata::add_metadata(&mut b, &cfg, &vocab).expect("metadata");
    let bytes = muser_gguf::to_bytes(b, &[]).expect("gguf bytes");
    let g = Gguf::from_bytes(bytes).expect("parse forged gguf");
    let t = Tokenizer::from_gguf(&g).expect("forged tokenizer");
    (g, t)
}
