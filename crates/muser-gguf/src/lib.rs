//! GGUF format crate: a memory-mapped, fully validated reader with zero-copy tensor views,
//! typed metadata access, and a streaming, deterministic writer. Format only — it never
//! computes on tensor data.
//!
//! Modules: [`types`] (ggml tensor types and sizes), [`value`] (metadata values), [`keys`]
//! (key strings, defined once), [`names`] (tensor names, defined once), [`error`] (the error type), [`reader`] ([`Gguf`],
//! [`TensorInfo`]), typed accessors on `Gguf` (in `access`), [`writer`] ([`GgufBuilder`],
//! [`TensorDataWriter`]).

mod access;
mod cursor;
pub mod error;
pub mod keys;
pub mod names;
pub mod reader;
pub mod types;
pub mod value;
pub mod writer;

pub use error::GgufError;
pub use keys::{arch, general, tokenizer, ArchKey, DEFAULT_ALIGNMENT, GGUF_MAGIC, GGUF_VERSION};
pub use reader::{Gguf, TensorInfo, MAX_ARRAY_DEPTH, MAX_DIMS, MAX_TENSOR_NAME_BYTES};
pub use types::{GgmlType, QK_K};
pub use value::{Array, Value, ValueType};
pub use writer::{to_bytes, GgufBuilder, TensorDataWriter};
