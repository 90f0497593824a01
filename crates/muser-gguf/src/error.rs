//! The one error type of the GGUF crate.
//!
//! Owns: every way reading, validating, querying or writing a GGUF can fail. Invariant: each
//! distinct failure has its own variant, and every message names *what* is wrong and *where*
//! (absolute byte offset in the file, metadata key, or tensor name), so a corrupt file is
//! diagnosable from the message alone. Parsing never panics: all failures end up here.

use std::path::PathBuf;

use crate::types::GgmlType;
use crate::value::ValueType;

/// Everything that can go wrong with a GGUF file.
#[derive(thiserror::Error, Debug)]
#[non_exhaustive]
pub enum GgufError {
    // ---- I/O ----
    /// Opening, measuring or mapping the file failed.
    #[error("cannot read GGUF file {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The sink a writer streams into failed.
    #[error("writing GGUF data failed at byte {offset}: {source}")]
    WriteIo {
        offset: u64,
        #[source]
        source: std::io::Error,
    },

    // ---- header ----
    /// The first four bytes are not `GGUF`.
    #[error(
        "not a GGUF file: magic is {found:02x?} ({}), expected \"GGUF\"",
        String::from_utf8_lossy(found)
    )]
    BadMagic { found: [u8; 4] },
    /// GGUF v1 used 32-bit counts and is not supported.
    #[error("GGUF version 1 is not supported (32-bit counts); re-convert the model with a current converter")]
    VersionOneUnsupported,
    /// The version field looks byte-swapped: a big-endian GGUF.
    #[error("GGUF version field is {version:#010x}: this looks like a big-endian GGUF, only little-endian files are supported")]
    BigEndian { version: u32 },
    /// A version other than 2 or 3.
    #[error("unsupported GGUF version {version} (supported: 2, 3)")]
    UnsupportedVersion { version: u32 },

    // ---- structure ----
    /// A read ran past the end of the file.
    #[error(
        "truncated GGUF: {what} at byte {offset} needs {needed} bytes but only {available} remain"
    )]
    Truncated {
        what: String,
        offset: u64,
        needed: u64,
        available: u64,
    },
    /// A count (tensors, metadata entries, array elements) cannot possibly fit in the rest of
    /// the file, given the smallest possible encoding of one element.
    #[error("absurd {what} {count} at byte {offset}: at least {min_bytes_each} bytes each, but only {available} bytes remain")]
    CountTooLarge {
        what: String,
        offset: u64,
        count: u64,
        min_bytes_each: u64,
        available: u64,
    },
    /// A string's length prefix points past the end of the file.
    #[error(
        "string length {len} of {what} at byte {offset} exceeds the {available} bytes remaining"
    )]
    StringTooLong {
        what: String,
        offset: u64,
        len: u64,
        available: u64,
    },
    /// A string is not valid UTF-8.
    #[error(
        "{what} at byte {offset} is not valid UTF-8 (first bad byte at string index {valid_up_to})"
    )]
    InvalidUtf8 {
        what: String,
        offset: u64,
        valid_up_to: usize,
    },

    // ---- metadata ----
    /// A metadata key is the empty string.
    #[error("metadata entry #{index} at byte {offset} has an empty key")]
    EmptyKey { index: u64, offset: u64 },
    /// The same key appears twice.
    #[error("duplicate metadata key '{key}' at byte {offset}")]
    DuplicateKey { key: String, offset: u64 },
    /// A value type id outside 0..=12.
    #[error("metadata key '{key}': unknown value type id {type_id} at byte {offset}")]
    UnknownValueType {
        key: String,
        offset: u64,
        type_id: u32,
    },
    /// A bool stored as something other than 0 or 1.
    #[error("metadata key '{key}': bool at byte {offset} has byte value {byte}, expected 0 or 1")]
    InvalidBool { key: String, offset: u64, byte: u8 },
    /// Arrays nested deeper than [`crate::MAX_ARRAY_DEPTH`].
    #[error("metadata key '{key}': arrays nested deeper than {max} levels at byte {offset}")]
    ArrayTooDeep {
        key: String,
        offset: u64,
        max: usize,
    },
    /// `general.alignment` is present but not a u32.
    #[error("general.alignment must be u32 but is {found}")]
    BadAlignmentType { found: ValueType },
    /// An alignment that is zero, not a power of two, or does not fit in u32.
    #[error(
        "alignment {alignment} is invalid: it must be a non-zero power of two that fits in u32"
    )]
    BadAlignment { alignment: u64 },

    // ---- tensor infos ----
    /// A tensor name of 64 bytes or more (ggml's `GGML_MAX_NAME` is 64 including the NUL).
    #[error("tensor name '{name}' is {len} bytes long; ggml allows at most {max}")]
    TensorNameTooLong {
        name: String,
        len: usize,
        max: usize,
    },
    /// The same tensor name appears twice.
    #[error("duplicate tensor name '{name}'{}", at_offset(*offset))]
    DuplicateTensor { name: String, offset: Option<u64> },
    /// A dimension count of 0 or more than 4.
    #[error("tensor '{tensor}' has {n_dims} dimensions; must be 1..=4")]
    BadDimCount { tensor: String, n_dims: u64 },
    /// A dimension of size zero.
    #[error("tensor '{tensor}' has size 0 in dimension {dim} (shape {shape:?})")]
    ZeroDim {
        tensor: String,
        dim: usize,
        shape: Vec<u64>,
    },
    /// The product of the dimensions overflows.
    #[error("tensor '{tensor}': element count of shape {shape:?} overflows")]
    ElementCountOverflow { tensor: String, shape: Vec<u64> },
    /// A tensor type id that ggml does not define (or has removed).
    #[error("tensor '{tensor}' has unknown ggml type id {type_id}")]
    UnknownTensorType { tensor: String, type_id: u32 },
    /// `shape[0]` is not a whole number of the type's blocks.
    #[error("tensor '{tensor}' of type {ty}: row length {row_len} is not a multiple of the block size {block_size}")]
    RowNotBlockAligned {
        tensor: String,
        ty: GgmlType,
        row_len: u64,
        block_size: u64,
    },
    /// The byte size (or the data section's running size) overflows u64.
    #[error("tensor '{tensor}': byte size of shape {shape:?} ({ty}) overflows")]
    TensorByteSizeOverflow {
        tensor: String,
        shape: Vec<u64>,
        ty: GgmlType,
    },
    /// A tensor offset that is not a multiple of the alignment.
    #[error(
        "tensor '{tensor}': data offset {offset} is not a multiple of the alignment {alignment}"
    )]
    MisalignedTensor {
        tensor: String,
        offset: u64,
        alignment: u64,
    },
    /// A tensor's data extends past the end of the file.
    #[error("tensor '{tensor}': data at file bytes {start}..{end} extends beyond the end of the file ({file_size} bytes)")]
    TensorOutOfBounds {
        tensor: String,
        start: u64,
        end: u64,
        file_size: u64,
    },
    /// Two tensors share bytes.
    #[error("tensor '{tensor}' (data offset {offset}) overlaps tensor '{other}' (data bytes {other_start}..{other_end})")]
    TensorOverlap {
        tensor: String,
        offset: u64,
        other: String,
        other_start: u64,
        other_end: u64,
    },

    // ---- typed access ----
    /// A required key is absent.
    #[error("missing GGUF key '{key}'")]
    MissingKey { key: String },
    /// A key holds a value of the wrong type.
    #[error("GGUF key '{key}' should be {expected} but is {found}")]
    WrongKeyType {
        key: String,
        expected: &'static str,
        found: ValueType,
    },
    /// A key holds an integer that does not fit the requested type.
    #[error("GGUF key '{key}' holds {value}, which does not fit in {expected}")]
    ValueOutOfRange {
        key: String,
        expected: &'static str,
        value: String,
    },
    /// A [`crate::TensorInfo`] whose extent is not inside this file (it came from another file
    /// or was modified).
    #[error(
        "tensor '{tensor}' (bytes {start}..{end}) is not inside this file ({file_size} bytes)"
    )]
    ForeignTensor {
        tensor: String,
        start: u64,
        end: u64,
        file_size: u64,
    },

    // ---- writer ----
    /// A key that the writer refuses (empty).
    #[error("invalid metadata key {key:?}: {reason}")]
    InvalidKey { key: String, reason: &'static str },
    /// A value whose arrays nest deeper than [`crate::MAX_ARRAY_DEPTH`] (the reader would
    /// reject the file).
    #[error("metadata key '{key}': arrays nested {depth} levels deep; at most {max} are allowed")]
    ValueTooDeep {
        key: String,
        depth: usize,
        max: usize,
    },
    /// `kv` was called twice with the same key.
    #[error("metadata key '{key}' is already set in this builder")]
    KeyAlreadySet { key: String },
    /// Tensor data arrived for a tensor other than the next one in header order.
    #[error("tensor data out of order: expected '{}', got '{got}'", expected.as_deref().unwrap_or("<none: all tensors written>"))]
    WrongTensorOrder {
        expected: Option<String>,
        got: String,
    },
    /// `write_tensor` on a tensor that already received some bytes through `write_part`.
    #[error("tensor '{tensor}' already has {written} bytes written through write_part")]
    TensorAlreadyStarted { tensor: String, written: u64 },
    /// `write_tensor` with the wrong number of bytes.
    #[error("tensor '{tensor}' needs exactly {expected} bytes, got {got}")]
    TensorDataLength {
        tensor: String,
        expected: u64,
        got: u64,
    },
    /// `write_part` with more bytes than the current tensor has left.
    #[error("tensor '{tensor}' has {remaining} bytes left to write, got a part of {got} bytes")]
    TensorDataOverflow {
        tensor: String,
        remaining: u64,
        got: u64,
    },
    /// `write_part` after every tensor is complete.
    #[error("all tensors are complete; {got} more bytes were offered")]
    NoTensorPending { got: u64 },
    /// `finish` before every tensor was fully written.
    #[error("tensor '{tensor}' is incomplete: {written} of {expected} bytes written")]
    IncompleteTensorData {
        tensor: String,
        written: u64,
        expected: u64,
    },
}

fn at_offset(offset: Option<u64>) -> String {
    match offset {
        Some(o) => format!(" at byte {o}"),
        None => String::new(),
    }
}
