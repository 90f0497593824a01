//! Typed identities of the GGUF metadata keys Muser reads or writes, defined once.
//!
//! Owns: the exact key strings, checked against `gguf-py/gguf/constants.py` of the pinned
//! llama.cpp (commit 0c1e570). Invariant: no other crate spells a key as a string literal;
//! architecture-scoped keys are [`ArchKey`] suffixes that only become full keys through
//! [`ArchKey::full`] (or the reader's `arch_*` accessors, which use `general.architecture`).

/// The GGUF magic bytes.
pub const GGUF_MAGIC: [u8; 4] = *b"GGUF";
/// The GGUF version the writer produces.
pub const GGUF_VERSION: u32 = 3;
/// Alignment of the data section and of every tensor when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;

/// An architecture-scoped key suffix, e.g. `ArchKey("context_length")` is
/// `"{arch}.context_length"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ArchKey(pub &'static str);

impl ArchKey {
    /// The full key for an architecture: `ArchKey("block_count").full("gemma3")` is
    /// `"gemma3.block_count"`.
    pub fn full(&self, arch: &str) -> String {
        format!("{arch}.{}", self.0)
    }

    /// The suffix after `"{arch}."`.
    pub fn suffix(&self) -> &'static str {
        self.0
    }
}

/// `general.*` keys.
pub mod general {
    pub const TYPE: &str = "general.type";
    pub const ARCHITECTURE: &str = "general.architecture";
    pub const QUANTIZATION_VERSION: &str = "general.quantization_version";
    pub const ALIGNMENT: &str = "general.alignment";
    pub const FILE_TYPE: &str = "general.file_type";
    pub const NAME: &str = "general.name";
    pub const AUTHOR: &str = "general.author";
    pub const VERSION: &str = "general.version";
    pub const ORGANIZATION: &str = "general.organization";
    pub const FINETUNE: &str = "general.finetune";
    pub const BASENAME: &str = "general.basename";
    pub const DESCRIPTION: &str = "general.description";
    pub const QUANTIZED_BY: &str = "general.quantized_by";
    pub const SIZE_LABEL: &str = "general.size_label";
    pub const LICENSE: &str = "general.license";
    pub const URL: &str = "general.url";
    pub const TAGS: &str = "general.tags";
    pub const LANGUAGES: &str = "general.languages";
}

/// `tokenizer.*` keys.
pub mod tokenizer {
    pub const MODEL: &str = "tokenizer.ggml.model";
    pub const PRE: &str = "tokenizer.ggml.pre";
    pub const TOKENS: &str = "tokenizer.ggml.tokens";
    pub const TOKEN_TYPE: &str = "tokenizer.ggml.token_type";
    pub const TOKEN_TYPE_COUNT: &str = "tokenizer.ggml.token_type_count";
    pub const SCORES: &str = "tokenizer.ggml.scores";
    pub const MERGES: &str = "tokenizer.ggml.merges";
    pub const BOS_ID: &str = "tokenizer.ggml.bos_token_id";
    pub const EOS_ID: &str = "tokenizer.ggml.eos_token_id";
    pub const EOT_ID: &str = "tokenizer.ggml.eot_token_id";
    pub const EOM_ID: &str = "tokenizer.ggml.eom_token_id";
    pub const UNK_ID: &str = "tokenizer.ggml.unknown_token_id";
    /// Sic: llama.cpp spells it "seperator".
    pub const SEP_ID: &str = "tokenizer.ggml.seperator_token_id";
    pub const PAD_ID: &str = "tokenizer.ggml.padding_token_id";
    pub const MASK_ID: &str = "tokenizer.ggml.mask_token_id";
    pub const ADD_BOS: &str = "tokenizer.ggml.add_bos_token";
    pub const ADD_EOS: &str = "tokenizer.ggml.add_eos_token";
    pub const ADD_SEP: &str = "tokenizer.ggml.add_sep_token";
    pub const ADD_PREFIX: &str = "tokenizer.ggml.add_space_prefix";
    pub const REMOVE_EXTRA_WS: &str = "tokenizer.ggml.remove_extra_whitespaces";
    pub const PRECOMPILED_CHARSMAP: &str = "tokenizer.ggml.precompiled_charsmap";
    pub const CHAT_TEMPLATE: &str = "tokenizer.chat_template";
    pub const FIM_PRE_ID: &str = "tokenizer.ggml.fim_pre_token_id";
    pub const FIM_SUF_ID: &str = "tokenizer.ggml.fim_suf_token_id";
    pub const FIM_MID_ID: &str = "tokenizer.ggml.fim_mid_token_id";
    pub const FIM_PAD_ID: &str = "tokenizer.ggml.fim_pad_token_id";
    pub const FIM_REP_ID: &str = "tokenizer.ggml.fim_rep_token_id";
    pub const FIM_SEP_ID: &str = "tokenizer.ggml.fim_sep_token_id";
}

/// Architecture-scoped keys (`"{arch}.<suffix>"`).
pub mod arch {
    use super::ArchKey;

    pub const VOCAB_SIZE: ArchKey = ArchKey("vocab_size");
    pub const CONTEXT_LENGTH: ArchKey = ArchKey("context_length");
    pub const EMBEDDING_LENGTH: ArchKey = ArchKey("embedding_length");
    pub const BLOCK_COUNT: ArchKey = ArchKey("block_count");
    pub const FEED_FORWARD_LENGTH: ArchKey = ArchKey("feed_forward_length");
    pub const USE_PARALLEL_RESIDUAL: ArchKey = ArchKey("use_parallel_residual");
    pub const EXPERT_COUNT: ArchKey = ArchKey("expert_count");
    pub const EXPERT_USED_COUNT: ArchKey = ArchKey("expert_used_count");
    pub const POOLING_TYPE: ArchKey = ArchKey("pooling_type");
    pub const LOGIT_SCALE: ArchKey = ArchKey("logit_scale");
    pub const ATTN_LOGIT_SOFTCAPPING: ArchKey = ArchKey("attn_logit_softcapping");
    pub const FINAL_LOGIT_SOFTCAPPING: ArchKey = ArchKey("final_logit_softcapping");
    pub const RESIDUAL_SCALE: ArchKey = ArchKey("residual_scale");
    pub const EMBEDDING_SCALE: ArchKey = ArchKey("embedding_scale");

    pub const HEAD_COUNT: ArchKey = ArchKey("attention.head_count");
    pub const HEAD_COUNT_KV: ArchKey = ArchKey("attention.head_count_kv");
    pub const KEY_LENGTH: ArchKey = ArchKey("attention.key_length");
    pub const VALUE_LENGTH: ArchKey = ArchKey("attention.value_length");
    pub const LAYER_NORM_EPS: ArchKey = ArchKey("attention.layer_norm_epsilon");
    pub const RMS_EPS: ArchKey = ArchKey("attention.layer_norm_rms_epsilon");
    pub const CAUSAL: ArchKey = ArchKey("attention.causal");
    pub const SLIDING_WINDOW: ArchKey = ArchKey("attention.sliding_window");
    pub const SLIDING_WINDOW_PATTERN: ArchKey = ArchKey("attention.sliding_window_pattern");
    pub const ATTENTION_SCALE: ArchKey = ArchKey("attention.scale");
    pub const KEY_LENGTH_SWA: ArchKey = ArchKey("attention.key_length_swa");
    pub const VALUE_LENGTH_SWA: ArchKey = ArchKey("attention.value_length_swa");

    pub const ROPE_DIMENSION_COUNT: ArchKey = ArchKey("rope.dimension_count");
    pub const ROPE_DIMENSION_COUNT_SWA: ArchKey = ArchKey("rope.dimension_count_swa");
    pub const ROPE_FREQ_BASE: ArchKey = ArchKey("rope.freq_base");
    pub const ROPE_FREQ_BASE_SWA: ArchKey = ArchKey("rope.freq_base_swa");
    pub const ROPE_SCALING_TYPE: ArchKey = ArchKey("rope.scaling.type");
    pub const ROPE_SCALING_FACTOR: ArchKey = ArchKey("rope.scaling.factor");
    pub const ROPE_SCALING_ATTN_FACTOR: ArchKey = ArchKey("rope.scaling.attn_factor");
    pub const ROPE_SCALING_ORIG_CTX_LEN: ArchKey = ArchKey("rope.scaling.original_context_length");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_keys_expand() {
        assert_eq!(arch::CONTEXT_LENGTH.full("gemma3"), "gemma3.context_length");
        assert_eq!(
            arch::RMS_EPS.full("muse-glimmer"),
            "muse-glimmer.attention.layer_norm_rms_epsilon"
        );
        assert_eq!(
            arch::SLIDING_WINDOW_PATTERN.full("x"),
            "x.attention.sliding_window_pattern"
        );
    }
}
