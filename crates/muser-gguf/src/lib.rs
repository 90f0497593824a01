//! GGUF format crate: reads and writes GGUF files. Format only — it never computes on tensor data.

pub mod types;

pub use types::{GgmlType, QK_K};
