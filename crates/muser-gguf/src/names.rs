//! Tensor names: the GGUF naming convention for the tensors Muser's architectures use
//! (`token_embd.weight`, `blk.{i}.attn_q.weight`, ...), defined once as typed identities.
//!
//! Owns: the mapping between a typed tensor role and its string name in a GGUF file.
//! Invariant: `name()` is the exact string llama.cpp's loader looks up (`LLM_TENSOR_NAMES` in the
//! pinned llama.cpp); `LayerTensor::ALL` lists every per-layer role Muser knows.

/// Tensors that occur once per model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GlobalTensor {
    TokenEmbd,
    OutputNorm,
    Output,
}

impl GlobalTensor {
    /// Every global role.
    pub const ALL: [GlobalTensor; 3] = [
        GlobalTensor::TokenEmbd,
        GlobalTensor::OutputNorm,
        GlobalTensor::Output,
    ];

    /// The stem, without `.weight`.
    pub fn stem(self) -> &'static str {
        match self {
            GlobalTensor::TokenEmbd => "token_embd",
            GlobalTensor::OutputNorm => "output_norm",
            GlobalTensor::Output => "output",
        }
    }

    /// The full GGUF tensor name (`token_embd.weight`).
    pub fn name(self) -> String {
        format!("{}.weight", self.stem())
    }
}

/// Tensors that occur once per layer (`blk.{i}.{stem}.weight`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LayerTensor {
    AttnNorm,
    AttnQ,
    AttnK,
    AttnV,
    AttnGate,
    AttnQNorm,
    AttnKNorm,
    AttnOutput,
    PostAttentionNorm,
    FfnNorm,
    FfnGate,
    FfnUp,
    FfnDown,
    PostFfwNorm,
}

impl LayerTensor {
    /// Every per-layer role, in the order Muser writes them.
    pub const ALL: [LayerTensor; 14] = [
        LayerTensor::AttnNorm,
        LayerTensor::AttnQ,
        LayerTensor::AttnK,
        LayerTensor::AttnV,
        LayerTensor::AttnGate,
        LayerTensor::AttnQNorm,
        LayerTensor::AttnKNorm,
        LayerTensor::AttnOutput,
        LayerTensor::PostAttentionNorm,
        LayerTensor::FfnNorm,
        LayerTensor::FfnGate,
        LayerTensor::FfnUp,
        LayerTensor::FfnDown,
        LayerTensor::PostFfwNorm,
    ];

    /// The stem inside `blk.{i}.`, without `.weight`.
    pub fn stem(self) -> &'static str {
        match self {
            LayerTensor::AttnNorm => "attn_norm",
            LayerTensor::AttnQ => "attn_q",
            LayerTensor::AttnK => "attn_k",
            LayerTensor::AttnV => "attn_v",
            LayerTensor::AttnGate => "attn_gate",
            LayerTensor::AttnQNorm => "attn_q_norm",
            LayerTensor::AttnKNorm => "attn_k_norm",
            LayerTensor::AttnOutput => "attn_output",
            LayerTensor::PostAttentionNorm => "post_attention_norm",
            LayerTensor::FfnNorm => "ffn_norm",
            LayerTensor::FfnGate => "ffn_gate",
            LayerTensor::FfnUp => "ffn_up",
            LayerTensor::FfnDown => "ffn_down",
            LayerTensor::PostFfwNorm => "post_ffw_norm",
        }
    }

    /// The full GGUF tensor name for layer `layer` (`blk.3.attn_q.weight`).
    pub fn name(self, layer: usize) -> String {
        format!("blk.{layer}.{}.weight", self.stem())
    }

    /// True for the 1-D norm weights.
    pub fn is_norm(self) -> bool {
        matches!(
            self,
            LayerTensor::AttnNorm
                | LayerTensor::AttnQNorm
                | LayerTensor::AttnKNorm
                | LayerTensor::PostAttentionNorm
                | LayerTensor::FfnNorm
                | LayerTensor::PostFfwNorm
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_gguf_convention() {
        assert_eq!(GlobalTensor::TokenEmbd.name(), "token_embd.weight");
        assert_eq!(LayerTensor::AttnQ.name(7), "blk.7.attn_q.weight");
        assert_eq!(
            LayerTensor::PostAttentionNorm.name(0),
            "blk.0.post_attention_norm.weight"
        );
        assert_eq!(
            LayerTensor::PostFfwNorm.name(51),
            "blk.51.post_ffw_norm.weight"
        );
    }
}
