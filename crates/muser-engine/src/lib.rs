//! Muser's model layer and engine, on top of `muser-gguf` (format) and `muser-quant` (block math):
//!
//! - `config`: typed hyperparameters for `muse-glimmer` and `gemma3`;
//! - `model`: the mapped GGUF with every weight bound and validated;
//! - `oracle`: the f64 reference forward pass (BRIEF §2);
//! - `cpu`: the fast CPU route (quantized-activation matmuls, f16 KV cache, threads);
//! - `cuda`: the CUDA route (kernels from `muser-cuda`, decode as one CUDA graph per token);
//! - `session`: backend choice (`cpu|cuda|auto`) and one type over both routes.
//!
//! Invariant: model code (config, weights, tokenizer, sampling) never depends on a backend;
//! backends implement the forward pass behind `Route`.

pub mod config;
pub mod cpu;
pub mod cuda;
pub mod metrics;
pub mod model;
pub mod oracle;
pub mod sampling;
pub mod session;

pub use config::{Arch, ConfigError, FfnActivation, ModelConfig, RopeMode};
pub use model::{Model, ModelError};
pub use oracle::Oracle;

/// Errors while evaluating tokens.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("token id {token} is outside the vocabulary (n_vocab = {n_vocab})")]
    TokenOutOfRange { token: u32, n_vocab: usize },
    #[error("context full: {requested} tokens requested, context holds {n_ctx}")]
    ContextFull { requested: usize, n_ctx: usize },
    #[error("configuration: {0}")]
    Config(String),
    #[error("thread pool: {0}")]
    Threads(String),
    #[error("shape mismatch: {0}")]
    Shape(String),
    #[error(transparent)]
    Cuda(#[from] muser_cuda::CudaError),
    #[error("quantized math on '{tensor}': {source}")]
    Quant {
        tensor: String,
        source: muser_quant::QuantError,
    },
}

/// The checks every route makes before evaluating `tokens` after `n_past` others: the context
/// holds them and every id is in the vocabulary.
pub(crate) fn check_eval(
    tokens: &[u32],
    n_past: usize,
    n_ctx: usize,
    n_vocab: usize,
) -> Result<(), EngineError> {
    if n_past + tokens.len() > n_ctx {
        return Err(EngineError::ContextFull {
            requested: n_past + tokens.len(),
            n_ctx,
        });
    }
    match tokens.iter().find(|&&t| t as usize >= n_vocab) {
        Some(&token) => Err(EngineError::TokenOutOfRange { token, n_vocab }),
        None => Ok(()),
    }
}

impl EngineError {
    pub(crate) fn quant(tensor: &str, source: muser_quant::QuantError) -> EngineError {
        EngineError::Quant {
            tensor: tensor.to_string(),
            source,
        }
    }
}
