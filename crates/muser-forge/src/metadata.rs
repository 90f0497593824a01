//! GGUF metadata of a forged model: `general.*`, the `muse-glimmer.*` hyperparameters of
//! BRIEF §1, the tokenizer, and `muser.forge.*` provenance keys.
//!
//! Owns: the exact key set a forged file carries. End of generation is `<|end_of_text|>` (EOS)
//! and `<|eot|>` (EOT) — 200001 and 200008 in the full vocabulary, as in the real model. Invariant: the key set is the one the pinned
//! llama.cpp reads for arch `muse-glimmer` (its loader must accept forged files).

use muser_gguf::keys::{arch, general, tokenizer};
use muser_gguf::{Array, GgufBuilder, Value};

use crate::config::ForgeConfig;
use crate::vocab::{ForgedVocab, CHAT_TEMPLATE};
use crate::ForgeError;

/// The architecture name forged files declare.
pub const ARCH: &str = "muse-glimmer";

/// Provenance keys (not read by llama.cpp).
pub const KEY_FORGE_PRESET: &str = "muser.forge.preset";
/// The seed.
pub const KEY_FORGE_SEED: &str = "muser.forge.seed";
/// The mix.
pub const KEY_FORGE_MIX: &str = "muser.forge.mix";
/// Version of the forge's generation scheme; bump when bytes for a given config change.
pub const KEY_FORGE_VERSION: &str = "muser.forge.version";
/// Current generation scheme.
pub const FORGE_VERSION: u32 = 1;

fn u32v(x: usize) -> Value {
    Value::U32(x as u32)
}

/// Add every metadata key of a forged model to `b`.
pub fn add_metadata(
    b: &mut GgufBuilder,
    cfg: &ForgeConfig,
    vocab: &ForgedVocab,
) -> Result<(), ForgeError> {
    let a = |k: muser_gguf::keys::ArchKey| k.full(ARCH);
    b.kv(general::ARCHITECTURE, Value::String(ARCH.into()))?;
    b.kv(
        general::NAME,
        Value::String(format!(
            "Muse Glimmer (forged {}, seed {}, {})",
            cfg.preset,
            cfg.seed,
            cfg.mix.name()
        )),
    )?;
    b.kv(general::FILE_TYPE, Value::U32(cfg.mix.file_type()))?;
    b.kv(general::QUANTIZATION_VERSION, Value::U32(2))?;
    b.kv(KEY_FORGE_PRESET, Value::String(cfg.preset.clone()))?;
    b.kv(KEY_FORGE_SEED, Value::U64(cfg.seed))?;
    b.kv(KEY_FORGE_MIX, Value::String(cfg.mix.name()))?;
    b.kv(KEY_FORGE_VERSION, Value::U32(FORGE_VERSION))?;

    b.kv(a(arch::CONTEXT_LENGTH), u32v(cfg.n_ctx))?;
    b.kv(a(arch::EMBEDDING_LENGTH), u32v(cfg.n_embd))?;
    b.kv(a(arch::BLOCK_COUNT), u32v(cfg.n_layer))?;
    b.kv(a(arch::FEED_FORWARD_LENGTH), u32v(cfg.n_ff))?;
    b.kv(a(arch::HEAD_COUNT), u32v(cfg.n_head))?;
    b.kv(a(arch::HEAD_COUNT_KV), u32v(cfg.n_head_kv))?;
    b.kv(a(arch::KEY_LENGTH), u32v(cfg.head_dim))?;
    b.kv(a(arch::VALUE_LENGTH), u32v(cfg.head_dim))?;
    b.kv(a(arch::RMS_EPS), Value::F32(cfg.rms_eps))?;
    b.kv(a(arch::SLIDING_WINDOW), u32v(cfg.sliding_window))?;
    b.kv(
        a(arch::SLIDING_WINDOW_PATTERN),
        Value::Array(Array::Bool(cfg.swa_pattern.clone())),
    )?;
    b.kv(a(arch::ROPE_FREQ_BASE), Value::F32(cfg.rope_freq_base))?;
    if let Some(swa) = cfg.rope_freq_base_swa {
        b.kv(a(arch::ROPE_FREQ_BASE_SWA), Value::F32(swa))?;
    }
    if let Some(cap) = cfg.softcap {
        b.kv(a(arch::FINAL_LOGIT_SOFTCAPPING), Value::F32(cap))?;
    }
    b.kv(a(arch::LOGIT_SCALE), Value::F32(cfg.logit_scale))?;
    b.kv(a(arch::VOCAB_SIZE), u32v(cfg.n_vocab))?;

    b.kv(tokenizer::MODEL, Value::String("gpt2".into()))?;
    b.kv(tokenizer::PRE, Value::String("llama4".into()))?;
    b.kv(
        tokenizer::TOKENS,
        Value::Array(Array::String(vocab.tokens.clone())),
    )?;
    b.kv(
        tokenizer::TOKEN_TYPE,
        Value::Array(Array::I32(vocab.token_types.clone())),
    )?;
    b.kv(
        tokenizer::MERGES,
        Value::Array(Array::String(vocab.merges.clone())),
    )?;
    b.kv(tokenizer::BOS_ID, Value::U32(vocab.bos()))?;
    b.kv(tokenizer::EOS_ID, Value::U32(vocab.eos()))?;
    b.kv(tokenizer::EOT_ID, Value::U32(vocab.eot()))?;
    b.kv(tokenizer::ADD_BOS, Value::Bool(true))?;
    b.kv(tokenizer::ADD_EOS, Value::Bool(false))?;
    b.kv(
        tokenizer::CHAT_TEMPLATE,
        Value::String(CHAT_TEMPLATE.into()),
    )?;
    Ok(())
}
