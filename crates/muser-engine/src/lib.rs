//! Muser's model layer and engine: typed model configuration (`config`), and — as the engine
//! grows — weights, KV cache and the forward pass, on top of `muser-gguf` and `muser-quant`.

pub mod config;

pub use config::{Arch, ConfigError, FfnActivation, ModelConfig, RopeMode};
