//! Forge configuration: the hyperparameters of a synthetic Muse Glimmer model, its presets,
//! its tensor-type mix, and validation.
//!
//! Owns: `ForgeConfig` and the presets `tiny`, `small`, `full` (BRIEF §1 dimensions).
//! Invariant: a config that passes `validate()` yields tensors whose row lengths are whole
//! numbers of blocks of their types, and GQA divides evenly.

use muser_gguf::GgmlType;

use crate::{vocab, ForgeError};

/// Which weight type each tensor gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mix {
    /// llama.cpp-Q4_K_M-like: Q4_K for most projections, Q6_K for `token_embd`, `output`,
    /// every `attn_v`, and the `ffn_down` of the layers llama.cpp gives more bits (the first
    /// and last eighth, and every third layer between). With Q6_K embeddings the full preset
    /// is 16.09 GiB, the size of the file the BRIEF's llama.cpp figures were measured on.
    Q4KM,
    /// One type for every 2-D weight (norms stay F32).
    Uniform(GgmlType),
}

impl Mix {
    /// Parse `q4_k_m` or a ggml type name (`q8_0`, `f16`, ...).
    pub fn parse(s: &str) -> Result<Mix, ForgeError> {
        if s.eq_ignore_ascii_case("q4_k_m") {
            return Ok(Mix::Q4KM);
        }
        match GgmlType::from_name(s) {
            Some(
                t @ (GgmlType::F32
                | GgmlType::F16
                | GgmlType::BF16
                | GgmlType::Q8_0
                | GgmlType::Q5_0
                | GgmlType::Q4_K
                | GgmlType::Q5_K
                | GgmlType::Q6_K),
            ) => Ok(Mix::Uniform(t)),
            _ => Err(ForgeError::Config(format!(
                "unknown mix '{s}': use q4_k_m, f32, f16, bf16, q8_0, q5_0, q4_k, q5_k or q6_k"
            ))),
        }
    }

    /// The name used in metadata.
    pub fn name(self) -> String {
        match self {
            Mix::Q4KM => "q4_k_m".to_string(),
            Mix::Uniform(t) => t.name().to_string(),
        }
    }

    /// llama.cpp's `general.file_type` (`llama_ftype`) for this mix.
    pub fn file_type(self) -> u32 {
        match self {
            Mix::Q4KM => 15,
            Mix::Uniform(t) => match t {
                GgmlType::F32 => 0,
                GgmlType::F16 => 1,
                GgmlType::Q8_0 => 7,
                GgmlType::Q5_0 => 8,
                GgmlType::Q4_K => 14,
                GgmlType::Q5_K => 16,
                GgmlType::Q6_K => 18,
                GgmlType::BF16 => 32,
                _ => 0,
            },
        }
    }
}

/// llama.cpp's rule for which layers get more bits in the *_M mixes.
pub fn use_more_bits(layer: usize, n_layer: usize) -> bool {
    let eighth = n_layer / 8;
    match layer.checked_sub(eighth) {
        None => true,
        Some(k) => layer >= 7 * n_layer / 8 || k % 3 == 2,
    }
}

/// Everything that determines a forged file.
#[derive(Clone, Debug, PartialEq)]
pub struct ForgeConfig {
    /// Preset name recorded in metadata (`tiny`, `small`, `full`, or `custom`).
    pub preset: String,
    pub n_layer: usize,
    pub n_embd: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim: usize,
    pub n_ff: usize,
    pub n_vocab: usize,
    /// Training context length written to `context_length`.
    pub n_ctx: usize,
    pub sliding_window: usize,
    /// Per layer: true = sliding-window layer.
    pub swa_pattern: Vec<bool>,
    pub rope_freq_base: f32,
    /// Written as `rope.freq_base_swa` when set.
    pub rope_freq_base_swa: Option<f32>,
    /// `final_logit_softcapping`; `None` omits the key.
    pub softcap: Option<f32>,
    pub logit_scale: f32,
    pub rms_eps: f32,
    pub seed: u64,
    pub mix: Mix,
}

/// Expand a pattern string like `SSSF` (S = sliding, F = full) periodically over `n_layer`.
pub fn parse_pattern(p: &str, n_layer: usize) -> Result<Vec<bool>, ForgeError> {
    let period: Vec<bool> = p
        .chars()
        .map(|c| match c {
            'S' | 's' => Ok(true),
            'F' | 'f' => Ok(false),
            _ => Err(ForgeError::Config(format!(
                "layer pattern '{p}': use S (sliding) and F (full), e.g. SSSF"
            ))),
        })
        .collect::<Result<_, _>>()?;
    if period.is_empty() {
        return Err(ForgeError::Config("layer pattern is empty".into()));
    }
    Ok((0..n_layer).map(|i| period[i % period.len()]).collect())
}

impl ForgeConfig {
    /// A named preset with seed 0.
    pub fn preset(name: &str) -> Result<ForgeConfig, ForgeError> {
        let base = ForgeConfig {
            preset: name.to_string(),
            n_layer: 52,
            n_embd: 6656,
            n_head: 32,
            n_head_kv: 2,
            head_dim: 128,
            n_ff: 19968,
            n_vocab: 202048,
            n_ctx: 131072,
            sliding_window: 2048,
            swa_pattern: Vec::new(),
            rope_freq_base: 500_000.0,
            rope_freq_base_swa: None,
            softcap: Some(20.0),
            logit_scale: 1.0 / 26f32.sqrt(),
            rms_eps: 1e-5,
            seed: 0,
            mix: Mix::Q4KM,
        };
        let mut c = match name {
            "full" => base,
            "small" => ForgeConfig {
                n_layer: 8,
                n_embd: 1024,
                n_head: 8,
                n_head_kv: 2,
                head_dim: 128,
                n_ff: 2816,
                n_vocab: 8192,
                n_ctx: 8192,
                sliding_window: 64,
                ..base
            },
            "tiny" => ForgeConfig {
                n_layer: 4,
                n_embd: 256,
                n_head: 4,
                n_head_kv: 2,
                head_dim: 64,
                n_ff: 512,
                n_vocab: 2048,
                n_ctx: 2048,
                sliding_window: 16,
                ..base
            },
            _ => {
                return Err(ForgeError::Config(format!(
                    "unknown preset '{name}': use tiny, small or full"
                )))
            }
        };
        c.swa_pattern = parse_pattern("SSSF", c.n_layer)?;
        Ok(c)
    }

    /// Width of the query / gate projection (`n_head * head_dim`).
    pub fn q_width(&self) -> usize {
        self.n_head * self.head_dim
    }

    /// Width of the key / value projection (`n_head_kv * head_dim`).
    pub fn kv_width(&self) -> usize {
        self.n_head_kv * self.head_dim
    }

    /// Check the configuration; the error says which field is wrong.
    pub fn validate(&self) -> Result<(), ForgeError> {
        let bad = |m: String| Err(ForgeError::Config(m));
        for (name, v) in [
            ("layers", self.n_layer),
            ("n_embd", self.n_embd),
            ("heads", self.n_head),
            ("kv heads", self.n_head_kv),
            ("head_dim", self.head_dim),
            ("n_ff", self.n_ff),
            ("context", self.n_ctx),
            ("sliding window", self.sliding_window),
        ] {
            if v == 0 {
                return bad(format!("{name} must be > 0"));
            }
            if v > 1 << 24 {
                return bad(format!("{name} = {v} is absurdly large"));
            }
        }
        if !self.n_head.is_multiple_of(self.n_head_kv) {
            return bad(format!(
                "heads ({}) must be a multiple of kv heads ({})",
                self.n_head, self.n_head_kv
            ));
        }
        if !self.head_dim.is_multiple_of(2) {
            return bad(format!(
                "head_dim ({}) must be even for RoPE",
                self.head_dim
            ));
        }
        if self.swa_pattern.len() != self.n_layer {
            return bad(format!(
                "layer pattern has {} entries for {} layers",
                self.swa_pattern.len(),
                self.n_layer
            ));
        }
        if !(self.logit_scale.is_finite() && self.logit_scale > 0.0) {
            return bad(format!(
                "logit scale {} must be finite and > 0",
                self.logit_scale
            ));
        }
        if let Some(c) = self.softcap {
            if !(c.is_finite() && c > 0.0) {
                return bad(format!("softcap {c} must be finite and > 0"));
            }
        }
        if !(self.rope_freq_base.is_finite() && self.rope_freq_base > 0.0) {
            return bad(format!(
                "rope base {} must be finite and > 0",
                self.rope_freq_base
            ));
        }
        if self.n_vocab < vocab::MIN_VOCAB {
            return bad(format!(
                "vocab {} is below the minimum {}",
                self.n_vocab,
                vocab::MIN_VOCAB
            ));
        }
        for t in crate::tensors::plan(self) {
            let row = t.shape[0] as usize;
            if !row.is_multiple_of(t.ty.block_size()) {
                return bad(format!(
                    "tensor {} has rows of {row} elements, not a multiple of the {} block size {}; \
                     choose dimensions that are multiples of {} or another --mix",
                    t.name,
                    t.ty,
                    t.ty.block_size(),
                    t.ty.block_size()
                ));
            }
        }
        Ok(())
    }

    /// Total number of parameters.
    pub fn n_params(&self) -> u64 {
        crate::tensors::plan(self)
            .iter()
            .map(|t| t.shape.iter().product::<u64>())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_validate() {
        for p in ["tiny", "small", "full"] {
            ForgeConfig::preset(p)
                .expect("preset")
                .validate()
                .expect("valid");
        }
        assert!(ForgeConfig::preset("huge").is_err());
    }

    #[test]
    fn full_preset_has_the_real_parameter_count() {
        let c = ForgeConfig::preset("full").expect("full");
        assert_eq!(c.n_params(), 27_854_794_240);
        assert_eq!(c.q_width(), 4096);
        assert_eq!(c.kv_width(), 256);
        assert_eq!(
            c.swa_pattern[..8],
            [true, true, true, false, true, true, true, false]
        );
    }

    #[test]
    fn bad_configs_are_named() {
        let mut c = ForgeConfig::preset("tiny").expect("tiny");
        c.n_head_kv = 3;
        assert!(c.validate().unwrap_err().to_string().contains("kv heads"));
        let mut c = ForgeConfig::preset("tiny").expect("tiny");
        c.n_ff = 300;
        assert!(c.validate().unwrap_err().to_string().contains("ffn"));
        let mut c = ForgeConfig::preset("tiny").expect("tiny");
        c.n_ff = 300;
        c.mix = Mix::Uniform(GgmlType::F16);
        c.validate().expect("f16 has no block constraint");
    }

    #[test]
    fn pattern_and_mix_parse() {
        assert_eq!(parse_pattern("SF", 3).expect("ok"), vec![true, false, true]);
        assert!(parse_pattern("SX", 3).is_err());
        assert_eq!(Mix::parse("Q4_K_M").expect("ok"), Mix::Q4KM);
        assert_eq!(
            Mix::parse("q8_0").expect("ok"),
            Mix::Uniform(GgmlType::Q8_0)
        );
        assert!(Mix::parse("iq2_xxs").is_err());
    }

    #[test]
    fn full_preset_is_the_size_of_the_briefs_file() {
        let c = ForgeConfig::preset("full").expect("full");
        let bytes: u64 = crate::tensors::plan(&c)
            .iter()
            .map(|t| (t.row_bytes() * t.n_rows()) as u64)
            .sum();
        let gib = bytes as f64 / (1u64 << 30) as f64;
        assert!((gib - 16.09).abs() < 0.01, "{gib:.3} GiB");
    }

    #[test]
    fn more_bits_rule() {
        let n = 52;
        let picked: Vec<usize> = (0..n).filter(|&i| use_more_bits(i, n)).collect();
        assert!(picked.contains(&0) && picked.contains(&51));
        // llama.cpp's rule picks exactly half of 52 layers.
        assert_eq!(picked.len(), 26);
    }
}
