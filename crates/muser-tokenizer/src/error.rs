//! The crate's error type.
//!
//! Owns: every way loading a tokenizer or rendering a chat template can fail. Invariant: each
//! variant names what was wrong (the GGUF key, the token id, the template error), so a caller
//! can print it as-is; nothing in this crate panics on bad input instead of returning one.

use thiserror::Error;

/// Why a tokenizer or chat template could not be built or used.
#[derive(Debug, Error)]
pub enum TokenizerError {
    /// The GGUF has no `tokenizer.ggml.model` (or no token list): it carries no tokenizer.
    #[error("GGUF has no tokenizer: missing key {key}")]
    MissingTokenizer { key: &'static str },

    /// `tokenizer.ggml.model` names a tokenizer this crate does not implement.
    #[error("unsupported tokenizer model {model:?} (supported: \"gpt2\", \"llama\")")]
    UnknownModel { model: String },

    /// `tokenizer.ggml.pre` names a pre-tokenizer this crate does not implement.
    #[error(
        "unsupported pre-tokenizer {pre:?} for model gpt2 (supported: llama4/gpt-4o, \
         llama3/llama-bpe family, gpt-2 family, default)"
    )]
    UnknownPre { pre: String },

    /// A tokenizer key is present with the wrong type or shape.
    #[error("bad tokenizer key {key}: {reason}")]
    BadKey { key: &'static str, reason: String },

    /// Two tokens share one text (llama.cpp aborts on this too).
    #[error("token {id} has the same text {text:?} as token {first}")]
    DuplicateToken { id: u32, first: u32, text: String },

    /// The vocabulary has more tokens than a token id can address.
    #[error("vocabulary of {n} tokens is too large")]
    VocabTooLarge { n: usize },

    /// A byte-level BPE vocabulary has no merges key.
    #[error("gpt2 tokenizer without tokenizer.ggml.merges")]
    MissingMerges,

    /// Reading a GGUF key failed.
    #[error(transparent)]
    Gguf(#[from] muser_gguf::GgufError),

    /// The chat template does not parse.
    #[error("chat template does not compile: {0:#}")]
    TemplateSyntax(minijinja::Error),

    /// The chat template failed while rendering (including `raise_exception`).
    #[error("chat template failed to render: {0:#}")]
    TemplateRender(minijinja::Error),
}
