//! Typed model configuration read from GGUF metadata for the architectures Muser runs:
//! `muse-glimmer` (BRIEF §1) and `gemma3`.
//!
//! Owns: turning `general.architecture` and the `{arch}.*` keys into a `ModelConfig`, with every
//! architecture difference (RoPE mode and bases, NoPE on full layers, post-norm epsilon,
//! embedding scale/norm, FFN activation, attention gate, softcap, logit scale, layer pattern)
//! made explicit as a field, so the forward pass never branches on the architecture name.
//!
//! Invariant: a `ModelConfig` that `from_gguf` returned is internally consistent (GQA divides,
//! one pattern entry per layer, positive dimensions); a missing required key or an unsupported
//! architecture is a `ConfigError` naming it.

use muser_gguf::keys::{arch, tokenizer, ArchKey};
use muser_gguf::names::GlobalTensor;
use muser_gguf::{Gguf, GgufError};

/// Architectures Muser implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    MuseGlimmer,
    Gemma3,
}

impl Arch {
    /// The `general.architecture` string.
    pub fn gguf_name(self) -> &'static str {
        match self {
            Arch::MuseGlimmer => "muse-glimmer",
            Arch::Gemma3 => "gemma3",
        }
    }

    /// Parse `general.architecture`.
    pub fn from_gguf_name(s: &str) -> Option<Arch> {
        match s {
            "muse-glimmer" => Some(Arch::MuseGlimmer),
            "gemma3" => Some(Arch::Gemma3),
            _ => None,
        }
    }
}

/// Which elements RoPE rotates together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeMode {
    /// Adjacent pairs (2i, 2i+1) — llama.cpp's "normal" mode (Muse Glimmer).
    Norm,
    /// Halves (i, i + d/2) — NEOX mode (Gemma 3).
    Neox,
}

/// Gated-FFN activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FfnActivation {
    /// silu(gate) * up (Muse Glimmer).
    Silu,
    /// gelu_tanh(gate) * up (Gemma 3).
    GeluTanh,
}

/// Errors building a configuration; each names the key or value at fault.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("GGUF has no general.architecture key")]
    NoArchitecture,
    #[error("unsupported architecture '{0}': Muser runs muse-glimmer and gemma3")]
    UnsupportedArchitecture(String),
    #[error("metadata: {0}")]
    Metadata(#[from] GgufError),
    #[error("required tensor '{0}' is missing")]
    MissingTensor(String),
    #[error("inconsistent hyperparameters: {0}")]
    Inconsistent(String),
}

/// Everything the forward pass needs to know about the model's shape and numerics.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelConfig {
    pub arch: Arch,
    pub n_layer: usize,
    pub n_embd: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    /// Per-head width of Q and K.
    pub head_dim: usize,
    /// Per-head width of V.
    pub head_dim_v: usize,
    pub n_ff: usize,
    pub n_vocab: usize,
    /// Training context length (`context_length`).
    pub n_ctx_train: usize,
    pub rms_eps: f32,
    /// Epsilon of the post-attention / post-FFN norms (1e-8 hard-coded for Muse Glimmer).
    pub post_norm_eps: f32,
    /// Sliding-window size; 0 when the model has none.
    pub sliding_window: usize,
    /// Per layer: true = sliding-window layer.
    pub swa_layers: Vec<bool>,
    pub rope_mode: RopeMode,
    /// RoPE base on full-attention layers.
    pub rope_base: f32,
    /// RoPE base on sliding layers.
    pub rope_base_swa: f32,
    /// Whether full-attention layers apply RoPE (false = NoPE, Muse Glimmer).
    pub rope_on_full_layers: bool,
    /// Scale applied to q·k.
    pub attn_scale: f32,
    /// `final_logit_softcapping`, if any.
    pub softcap: Option<f32>,
    /// Multiplier on the output logits (1 when absent).
    pub logit_scale: f32,
    /// Multiplier on the looked-up embedding row (sqrt(n_embd) for Gemma 3).
    pub embd_scale: f32,
    /// Whether the embedding row is RMS-normalised (no weight) before layer 0.
    pub embd_norm: bool,
    pub ffn_activation: FfnActivation,
    /// Whether attention output is multiplied by sigmoid(W_gate h).
    pub attn_gate: bool,
    /// True when the model has no `output.weight` and reuses `token_embd`.
    pub tied_output: bool,
}

/// Muse Glimmer's hard-coded post-norm epsilon (BRIEF §1).
pub const MUSE_POST_NORM_EPS: f32 = 1e-8;

fn req(g: &Gguf, k: ArchKey) -> Result<usize, ConfigError> {
    Ok(g.arch_u32(k)? as usize)
}

impl ModelConfig {
    /// Read the configuration of `g`.
    pub fn from_gguf(g: &Gguf) -> Result<ModelConfig, ConfigError> {
        let name = g.architecture().ok_or(ConfigError::NoArchitecture)?;
        let arch = Arch::from_gguf_name(name)
            .ok_or_else(|| ConfigError::UnsupportedArchitecture(name.to_string()))?;

        let n_layer = req(g, arch::BLOCK_COUNT)?;
        let n_embd = req(g, arch::EMBEDDING_LENGTH)?;
        let n_head = req(g, arch::HEAD_COUNT)?;
        let n_head_kv = g
            .opt_arch_u32(arch::HEAD_COUNT_KV)?
            .map_or(n_head, |v| v as usize);
        let head_dim = g
            .opt_arch_u32(arch::KEY_LENGTH)?
            .map_or(n_embd.checked_div(n_head).unwrap_or(0), |v| v as usize);
        let head_dim_v = g
            .opt_arch_u32(arch::VALUE_LENGTH)?
            .map_or(head_dim, |v| v as usize);
        let n_ff = req(g, arch::FEED_FORWARD_LENGTH)?;
        let n_ctx_train = req(g, arch::CONTEXT_LENGTH)?;
        let rms_eps = g.arch_f32(arch::RMS_EPS)?;
        let rope_base = g.opt_arch_f32(arch::ROPE_FREQ_BASE)?.unwrap_or(10_000.0);
        let softcap = g
            .opt_arch_f32(arch::FINAL_LOGIT_SOFTCAPPING)?
            .filter(|&c| c != 0.0);

        let embd = g
            .tensor(&GlobalTensor::TokenEmbd.name())
            .ok_or_else(|| ConfigError::MissingTensor(GlobalTensor::TokenEmbd.name()))?;
        let n_vocab = embd.shape.get(1).copied().unwrap_or(0) as usize;
        let tied_output = g.tensor(&GlobalTensor::Output.name()).is_none();

        let pattern_from_key = |default_period: usize| -> Result<Vec<bool>, ConfigError> {
            match g.opt_arch_array(arch::SLIDING_WINDOW_PATTERN)? {
                Some(a) => {
                    let b = a.as_bools().ok_or_else(|| {
                        ConfigError::Inconsistent(format!(
                            "{name}.attention.sliding_window_pattern is not a bool array"
                        ))
                    })?;
                    Ok(b.to_vec())
                }
                None => {
                    let period = g
                        .opt_arch_u32(arch::SLIDING_WINDOW_PATTERN)?
                        .map_or(default_period, |v| v as usize);
                    Ok((0..n_layer)
                        .map(|il| period == 0 || il % period < period - 1)
                        .collect())
                }
            }
        };

        let cfg = match arch {
            Arch::MuseGlimmer => {
                let sliding_window = req(g, arch::SLIDING_WINDOW)?;
                ModelConfig {
                    arch,
                    n_layer,
                    n_embd,
                    n_head,
                    n_head_kv,
                    head_dim,
                    head_dim_v,
                    n_ff,
                    n_vocab,
                    n_ctx_train,
                    rms_eps,
                    post_norm_eps: MUSE_POST_NORM_EPS,
                    sliding_window,
                    swa_layers: pattern_from_key(4)?,
                    rope_mode: RopeMode::Norm,
                    rope_base,
                    rope_base_swa: g
                        .opt_arch_f32(arch::ROPE_FREQ_BASE_SWA)?
                        .unwrap_or(rope_base),
                    rope_on_full_layers: false,
                    attn_scale: 1.0 / (head_dim as f32).sqrt(),
                    softcap,
                    logit_scale: g.arch_f32(arch::LOGIT_SCALE)?,
                    embd_scale: 1.0,
                    embd_norm: true,
                    ffn_activation: FfnActivation::Silu,
                    attn_gate: true,
                    tied_output,
                }
            }
            Arch::Gemma3 => {
                let sliding_window = g.opt_arch_u32(arch::SLIDING_WINDOW)?.unwrap_or(0) as usize;
                let swa_layers = if sliding_window > 0 {
                    pattern_from_key(6)?
                } else {
                    vec![false; n_layer]
                };
                ModelConfig {
                    arch,
                    n_layer,
                    n_embd,
                    n_head,
                    n_head_kv,
                    head_dim,
                    head_dim_v,
                    n_ff,
                    n_vocab,
                    n_ctx_train,
                    rms_eps,
                    post_norm_eps: rms_eps,
                    sliding_window,
                    swa_layers,
                    rope_mode: RopeMode::Neox,
                    rope_base,
                    rope_base_swa: g
                        .opt_arch_f32(arch::ROPE_FREQ_BASE_SWA)?
                        .unwrap_or(10_000.0),
                    rope_on_full_layers: true,
                    attn_scale: 1.0 / (head_dim as f32).sqrt(),
                    softcap,
                    logit_scale: 1.0,
                    embd_scale: (n_embd as f32).sqrt(),
                    embd_norm: false,
                    ffn_activation: FfnActivation::GeluTanh,
                    attn_gate: false,
                    tied_output,
                }
            }
        };
        cfg.check()?;
        if let Some(tokens) = g.opt_array(tokenizer::TOKENS)? {
            if tokens.len() != cfg.n_vocab {
                return Err(ConfigError::Inconsistent(format!(
                    "tokenizer has {} tokens but token_embd has {} rows",
                    tokens.len(),
                    cfg.n_vocab
                )));
            }
        }
        Ok(cfg)
    }

    fn check(&self) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError::Inconsistent(m));
        for (k, v) in [
            ("block_count", self.n_layer),
            ("embedding_length", self.n_embd),
            ("head_count", self.n_head),
            ("head_count_kv", self.n_head_kv),
            ("key_length", self.head_dim),
            ("value_length", self.head_dim_v),
            ("feed_forward_length", self.n_ff),
            ("vocab (token_embd rows)", self.n_vocab),
        ] {
            if v == 0 {
                return bad(format!("{k} is 0"));
            }
        }
        if !self.n_head.is_multiple_of(self.n_head_kv) {
            return bad(format!(
                "head_count {} is not a multiple of head_count_kv {}",
                self.n_head, self.n_head_kv
            ));
        }
        if self.swa_layers.len() != self.n_layer {
            return bad(format!(
                "sliding_window_pattern has {} entries for {} layers",
                self.swa_layers.len(),
                self.n_layer
            ));
        }
        if !self.head_dim.is_multiple_of(2) {
            return bad(format!(
                "key_length {} is odd; RoPE needs pairs",
                self.head_dim
            ));
        }
        if self.swa_layers.iter().any(|&s| s) && self.sliding_window == 0 {
            return bad("sliding layers present but sliding_window is 0".into());
        }
        Ok(())
    }

    /// Width of the concatenated query heads.
    pub fn q_width(&self) -> usize {
        self.n_head * self.head_dim
    }

    /// Width of the concatenated key (or value) heads.
    pub fn kv_width(&self) -> usize {
        self.n_head_kv * self.head_dim
    }

    /// Query heads per KV head.
    pub fn gqa_ratio(&self) -> usize {
        self.n_head / self.n_head_kv
    }

    /// Whether layer `il` uses RoPE, and with which base.
    pub fn rope_for_layer(&self, il: usize) -> Option<f32> {
        let swa = self.swa_layers.get(il).copied().unwrap_or(false);
        if swa {
            Some(self.rope_base_swa)
        } else if self.rope_on_full_layers {
            Some(self.rope_base)
        } else {
            None
        }
    }
}
