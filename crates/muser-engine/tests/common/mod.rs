//! Helpers shared by the engine's integration tests: an in-memory forged tiny model and a fixed
//! token sequence.

use std::sync::Arc;

use muser_engine::Model;
use muser_forge::ForgeConfig;
use muser_gguf::Gguf;

/// Forged tiny Muse Glimmer (window 16), in memory.
pub fn tiny_model(seed: u64) -> Model {
    let mut cfg = ForgeConfig::preset("tiny").expect("tiny");
    cfg.seed = seed;
    let mut bytes = Vec::new();
    muser_forge::forge(&cfg, &mut bytes, &mut |_| {}).expect("forge");
    Model::from_gguf(Arc::new(Gguf::from_bytes(bytes).expect("gguf"))).expect("model")
}

/// `n` ordinary token ids, away from the special tokens at the end of the vocabulary.
pub fn tokens(n: usize, n_vocab: usize) -> Vec<u32> {
    (0..n)
        .map(|i| ((i * 7919 + 13) % (n_vocab - 64)) as u32)
        .collect()
}
