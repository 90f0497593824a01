//! Muser's forge: a deterministic generator of synthetic Muse Glimmer GGUF files with the exact
//! topology and metadata keys of the real model (BRIEF §1), random weights of sane magnitude,
//! and a real byte-level BPE tokenizer.
//!
//! Owns: configurations and presets (`config`), the tensor plan and weight generation
//! (`tensors`), the tokenizer (`bpe`, `corpus`, `vocab`), metadata (`metadata`), and streaming
//! the file out (`write`).
//!
//! Invariants: the same `ForgeConfig` gives a byte-identical file on any machine with any thread
//! count; memory use is bounded by one batch of rows (`write::BATCH_BYTES`) plus the vocabulary.

pub mod bpe;
pub mod config;
pub mod corpus;
pub mod metadata;
pub mod rng;
pub mod tensors;
pub mod vocab;
pub mod write;

pub use config::{ForgeConfig, Mix};
pub use write::{forge, ForgeProgress};

/// Everything that can go wrong while forging.
#[derive(Debug, thiserror::Error)]
pub enum ForgeError {
    /// The configuration is invalid; the message names the field.
    #[error("invalid forge configuration: {0}")]
    Config(String),
    /// The GGUF writer refused something.
    #[error("GGUF writer: {0}")]
    Gguf(#[from] muser_gguf::GgufError),
    /// Quantizing a tensor failed.
    #[error("quantizing {tensor}: {source}")]
    Quant {
        tensor: String,
        source: muser_quant::QuantError,
    },
}
