//! The GGUF reader: memory-maps (or owns) a file, parses and validates the whole header, and
//! hands out zero-copy views of tensor data.
//!
//! Owns: [`Gguf`] and [`TensorInfo`]. Invariants, all established by [`Gguf::open`] /
//! [`Gguf::from_bytes`] before a `Gguf` exists:
//! - magic `GGUF`, version 2 or 3 (v1 and big-endian files are rejected with their own errors);
//! - every count was checked against the bytes remaining before anything was allocated from it;
//! - strings are in bounds and valid UTF-8; keys are non-empty and unique; tensor names are
//!   unique and shorter than ggml's 64-byte limit; arrays nest at most [`MAX_ARRAY_DEPTH`] deep;
//! - `general.alignment`, if present, is a u32 non-zero power of two;
//! - every tensor has 1..=4 non-zero dims whose product fits in i64, a known ggml type, a row
//!   length (`shape[0]`) that is a whole number of blocks, and `n_bytes` = shape × type;
//! - every tensor offset is a multiple of the alignment, its extent lies inside the file, and no
//!   two tensors overlap.
//!
//! So [`Gguf::tensor_data`] can slice without further checks, and nothing downstream has to
//! re-validate the container.

use std::collections::HashMap;
use std::fmt;
use std::fs::File;
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use crate::cursor::Cursor;
use crate::error::GgufError;
use crate::keys::{general, DEFAULT_ALIGNMENT, GGUF_MAGIC};
use crate::types::GgmlType;
use crate::value::{Array, Value, ValueType};

/// Deepest array nesting accepted (an array of arrays is depth 2).
pub const MAX_ARRAY_DEPTH: usize = 8;
/// Longest tensor name in bytes (ggml's `GGML_MAX_NAME` is 64 including the NUL).
pub const MAX_TENSOR_NAME_BYTES: usize = 63;
/// Most tensor dimensions (ggml's `GGML_MAX_DIMS`).
pub const MAX_DIMS: usize = 4;

/// Smallest encoding of one metadata entry: 8-byte key length + 4-byte type + 1-byte value
/// (keys must be non-empty, but an empty one should fail as `EmptyKey`, not as a bad count).
const MIN_KV_BYTES: u64 = 13;
/// Smallest encoding of one tensor info: name length 8 + n_dims 4 + one dim 8 + type 4 + offset 8.
const MIN_TENSOR_INFO_BYTES: u64 = 32;

/// One tensor's header entry, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    pub name: String,
    /// ggml order: `shape[0]` is the contiguous (row) dimension.
    pub shape: Vec<u64>,
    pub ty: GgmlType,
    /// Offset of the data relative to the start of the data section.
    pub offset: u64,
    pub n_elements: u64,
    pub n_bytes: u64,
}

impl TensorInfo {
    /// Offset of the data from the start of the file.
    pub fn absolute_offset(&self, data_offset: u64) -> u64 {
        data_offset.saturating_add(self.offset)
    }

    /// Elements per row (`shape[0]`).
    pub fn row_len(&self) -> u64 {
        self.shape.first().copied().unwrap_or(1)
    }

    /// Number of rows: the product of every dimension but the first.
    pub fn n_rows(&self) -> u64 {
        self.shape.iter().skip(1).product()
    }

    /// Bytes per row.
    pub fn row_bytes(&self) -> u64 {
        self.ty.bytes_for(self.row_len()).unwrap_or(0)
    }
}

/// Validate a tensor's name, shape and type; returns `(n_elements, n_bytes)`. Shared by the
/// reader and the writer so both accept exactly the same tensors.
pub(crate) fn validate_tensor_shape(
    name: &str,
    shape: &[u64],
    ty: GgmlType,
) -> Result<(u64, u64), GgufError> {
    if name.len() > MAX_TENSOR_NAME_BYTES {
        return Err(GgufError::TensorNameTooLong {
            name: name.to_owned(),
            len: name.len(),
            max: MAX_TENSOR_NAME_BYTES,
        });
    }
    if shape.is_empty() || shape.len() > MAX_DIMS {
        return Err(GgufError::BadDimCount {
            tensor: name.to_owned(),
            n_dims: shape.len() as u64,
        });
    }
    if let Some(dim) = shape.iter().position(|&d| d == 0) {
        return Err(GgufError::ZeroDim {
            tensor: name.to_owned(),
            dim,
            shape: shape.to_vec(),
        });
    }
    let n_elements = shape
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .filter(|&n| n <= i64::MAX as u64)
        .ok_or_else(|| GgufError::ElementCountOverflow {
            tensor: name.to_owned(),
            shape: shape.to_vec(),
        })?;
    let block = ty.block_size() as u64;
    let row_len = shape.first().copied().unwrap_or(1);
    if !row_len.is_multiple_of(block) {
        return Err(GgufError::RowNotBlockAligned {
            tensor: name.to_owned(),
            ty,
            row_len,
            block_size: block,
        });
    }
    let n_bytes = ty
        .bytes_for(n_elements)
        .ok_or_else(|| GgufError::TensorByteSizeOverflow {
            tensor: name.to_owned(),
            shape: shape.to_vec(),
            ty,
        })?;
    Ok((n_elements, n_bytes))
}

/// Round `x` up to a multiple of the power of two `align`; `None` on overflow.
pub(crate) fn align_up(x: u64, align: u64) -> Option<u64> {
    let mask = align.checked_sub(1)?;
    x.checked_add(mask).map(|v| v & !mask)
}

/// A 64-byte-aligned chunk, so owned storage gives tensor data the same alignment guarantees
/// (up to 64) as a page-aligned mmap.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Block64([u8; 64]);

/// Where the file's bytes live.
enum Storage {
    Mmap(Mmap),
    Owned { blocks: Vec<Block64>, len: usize },
}

impl Storage {
    fn owned(bytes: &[u8]) -> Storage {
        let mut blocks = vec![Block64([0; 64]); bytes.len().div_ceil(64)];
        for (block, chunk) in blocks.iter_mut().zip(bytes.chunks(64)) {
            if let Some(dst) = block.0.get_mut(..chunk.len()) {
                dst.copy_from_slice(chunk);
            }
        }
        Storage::Owned {
            blocks,
            len: bytes.len(),
        }
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Storage::Mmap(m) => m,
            Storage::Owned { blocks, len } => {
                let len = (*len).min(blocks.len() * 64);
                // SAFETY: `blocks` is one contiguous, initialized allocation of
                // `blocks.len() * 64` bytes (Block64 is repr(C) around [u8; 64], so it has no
                // padding and u8 has no invalid values); `len` is clamped to that size; the
                // returned slice borrows `self`, so the allocation outlives it and is not
                // mutated while borrowed. For an empty Vec the pointer is dangling but non-null
                // and aligned, which is valid for a zero-length slice.
                unsafe { std::slice::from_raw_parts(blocks.as_ptr().cast::<u8>(), len) }
            }
        }
    }
}

/// A validated GGUF file. See the module docs for what validation guarantees.
pub struct Gguf {
    storage: Storage,
    path: Option<PathBuf>,
    version: u32,
    alignment: u64,
    data_offset: u64,
    metadata: Vec<(String, Value)>,
    key_index: HashMap<String, usize>,
    tensors: Vec<TensorInfo>,
    tensor_index: HashMap<String, usize>,
}

impl fmt::Debug for Gguf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gguf")
            .field("path", &self.path)
            .field("version", &self.version)
            .field("file_size", &self.file_size())
            .field("alignment", &self.alignment)
            .field("data_offset", &self.data_offset)
            .field("n_metadata", &self.metadata.len())
            .field("n_tensors", &self.tensors.len())
            .finish()
    }
}

impl Gguf {
    /// Memory-map and validate a GGUF file.
    pub fn open(path: &Path) -> Result<Gguf, GgufError> {
        let io = |source| GgufError::Io {
            path: path.to_owned(),
            source,
        };
        let file = File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        if len == 0 {
            // An empty file cannot be mapped; it fails validation the same way as empty bytes.
            return Gguf::from_bytes(Vec::new());
        }
        // SAFETY: the map is read-only and Muser never writes to a model file while it is
        // open. As with every mmap-based loader, another process truncating or rewriting the
        // file while it is mapped is outside what we can defend against (it may SIGBUS);
        // model files are treated as immutable.
        let map = unsafe { Mmap::map(&file) }.map_err(io)?;
        let mut g = Gguf::parse(Storage::Mmap(map))?;
        g.path = Some(path.to_owned());
        Ok(g)
    }

    /// Validate a GGUF held in memory (tests, fuzzing). The bytes are copied into 64-byte
    /// aligned storage.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Gguf, GgufError> {
        Gguf::parse(Storage::owned(&bytes))
    }

    /// Validate a GGUF without keeping it (fuzzing, quick checks).
    pub fn validate(bytes: &[u8]) -> Result<(), GgufError> {
        parse_header(bytes).map(|_| ())
    }

    fn parse(storage: Storage) -> Result<Gguf, GgufError> {
        let h = parse_header(storage.bytes())?;
        Ok(Gguf {
            storage,
            path: None,
            version: h.version,
            alignment: h.alignment,
            data_offset: h.data_offset,
            metadata: h.metadata,
            key_index: h.key_index,
            tensors: h.tensors,
            tensor_index: h.tensor_index,
        })
    }

    /// The path this was opened from (`None` for [`Gguf::from_bytes`]).
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    pub fn version(&self) -> u32 {
        self.version
    }

    /// Data alignment (`general.alignment` or 32).
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// Absolute offset of the data section.
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }

    pub fn file_size(&self) -> u64 {
        self.storage.bytes().len() as u64
    }

    /// The whole file.
    pub fn as_bytes(&self) -> &[u8] {
        self.storage.bytes()
    }

    /// A hint that bytes `offset..offset + len` will not be read soon: a mapped file's pages
    /// in that range (widened to whole pages) leave the process's resident set; a later read
    /// faults them back from the file with the same contents. Nothing for owned storage. An
    /// out-of-range request is an error.
    pub fn release_range(&self, offset: usize, len: usize) -> std::io::Result<()> {
        let end = offset.checked_add(len);
        if end.is_none_or(|e| e > self.as_bytes().len()) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("range {offset}+{len} is outside the file"),
            ));
        }
        match &self.storage {
            #[cfg(unix)]
            Storage::Mmap(m) if len > 0 => {
                // SAFETY: the map is a read-only view of a file (`Mmap::map`, shared); dropping
                // its resident pages changes no byte any reference can observe — the next read
                // faults the page back from the file, as the first read did. (Another process
                // rewriting the file is the caveat every mmap loader shares; see `open`.)
                unsafe { m.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, offset, len) }
            }
            _ => Ok(()),
        }
    }

    /// Metadata in file order.
    pub fn metadata(&self) -> &[(String, Value)] {
        &self.metadata
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        let i = *self.key_index.get(key)?;
        self.metadata.get(i).map(|(_, v)| v)
    }

    /// `general.architecture`, if present and a string.
    pub fn architecture(&self) -> Option<&str> {
        self.get(general::ARCHITECTURE).and_then(Value::as_str)
    }

    /// Tensor infos in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        let i = *self.tensor_index.get(name)?;
        self.tensors.get(i)
    }

    /// The tensor's bytes, zero-copy. Use [`Gguf::try_tensor_data`] for a `TensorInfo` that
    /// may not come from this file.
    ///
    /// # Panics
    /// If `t` is not one of this file's tensor infos and its extent is outside the file (a
    /// programming error; every `TensorInfo` from [`Gguf::tensors`] is in bounds).
    pub fn tensor_data(&self, t: &TensorInfo) -> &[u8] {
        match self.try_tensor_data(t) {
            Ok(d) => d,
            Err(e) => panic!("{e}"),
        }
    }

    /// The tensor's bytes, or [`GgufError::ForeignTensor`] if its extent is not in this file.
    pub fn try_tensor_data(&self, t: &TensorInfo) -> Result<&[u8], GgufError> {
        let bytes = self.storage.bytes();
        let start = t.absolute_offset(self.data_offset);
        let end = start.saturating_add(t.n_bytes);
        usize::try_from(start)
            .ok()
            .zip(usize::try_from(end).ok())
            .and_then(|(s, e)| bytes.get(s..e))
            .ok_or_else(|| GgufError::ForeignTensor {
                tensor: t.name.clone(),
                start,
                end,
                file_size: bytes.len() as u64,
            })
    }

    /// The named tensor's bytes.
    pub fn tensor_bytes(&self, name: &str) -> Option<&[u8]> {
        self.tensor(name).map(|t| self.tensor_data(t))
    }
}

/// The result of parsing: everything in [`Gguf`] but the storage.
struct Header {
    version: u32,
    alignment: u64,
    data_offset: u64,
    metadata: Vec<(String, Value)>,
    key_index: HashMap<String, usize>,
    tensors: Vec<TensorInfo>,
    tensor_index: HashMap<String, usize>,
}

fn parse_header(bytes: &[u8]) -> Result<Header, GgufError> {
    let mut c = Cursor::new(bytes);
    let magic = c.array::<4>(|| "magic".into())?;
    if magic != GGUF_MAGIC {
        return Err(GgufError::BadMagic { found: magic });
    }
    let version = c.u32(|| "version".into())?;
    match version {
        2 | 3 => {}
        1 => return Err(GgufError::VersionOneUnsupported),
        v if v & 0xFFFF == 0 && v != 0 => return Err(GgufError::BigEndian { version: v }),
        v => return Err(GgufError::UnsupportedVersion { version: v }),
    }
    let n_tensors_offset = c.pos();
    let n_tensors = c.u64(|| "tensor count".into())?;
    let n_kv_offset = c.pos();
    let n_kv = c.u64(|| "metadata count".into())?;

    // Metadata.
    let n_kv = c.check_count(n_kv, MIN_KV_BYTES, n_kv_offset, || "metadata count".into())?;
    let mut metadata = Vec::with_capacity(n_kv);
    let mut key_index = HashMap::with_capacity(n_kv);
    for i in 0..n_kv {
        let key_offset = c.pos();
        let key = c.string(|| format!("key of metadata entry #{i}"))?;
        if key.is_empty() {
            return Err(GgufError::EmptyKey {
                index: i as u64,
                offset: key_offset,
            });
        }
        if key_index.contains_key(key) {
            return Err(GgufError::DuplicateKey {
                key: key.to_owned(),
                offset: key_offset,
            });
        }
        let value = read_value(&mut c, key)?;
        key_index.insert(key.to_owned(), metadata.len());
        metadata.push((key.to_owned(), value));
    }

    let alignment = match key_index
        .get(general::ALIGNMENT)
        .and_then(|&i| metadata.get(i))
    {
        None => DEFAULT_ALIGNMENT,
        Some((_, Value::U32(a))) => u64::from(*a),
        Some((_, other)) => {
            return Err(GgufError::BadAlignmentType {
                found: other.value_type(),
            })
        }
    };
    if !alignment.is_power_of_two() {
        return Err(GgufError::BadAlignment { alignment });
    }

    // Tensor infos.
    let n_tensors = c.check_count(n_tensors, MIN_TENSOR_INFO_BYTES, n_tensors_offset, || {
        "tensor count".into()
    })?;
    let mut tensors = Vec::with_capacity(n_tensors);
    let mut tensor_index = HashMap::with_capacity(n_tensors);
    for i in 0..n_tensors {
        let t = read_tensor_info(&mut c, i, &tensor_index)?;
        tensor_index.insert(t.name.clone(), tensors.len());
        tensors.push(t);
    }

    // Data section.
    let infos_end = c.pos();
    let file_size = bytes.len() as u64;
    let aligned = align_up(infos_end, alignment).unwrap_or(u64::MAX);
    let data_offset = if tensors.is_empty() {
        // Writers pad here too, but a metadata-only file needs no data section.
        aligned.min(file_size)
    } else {
        c.seek(aligned, || "padding before the tensor data section".into())?;
        aligned
    };
    validate_extents(&tensors, data_offset, alignment, file_size)?;

    Ok(Header {
        version,
        alignment,
        data_offset,
        metadata,
        key_index,
        tensors,
        tensor_index,
    })
}

fn read_tensor_info(
    c: &mut Cursor<'_>,
    index: usize,
    seen: &HashMap<String, usize>,
) -> Result<TensorInfo, GgufError> {
    let name_offset = c.pos();
    let name = c.string(|| format!("name of tensor #{index}"))?;
    if name.len() > MAX_TENSOR_NAME_BYTES {
        return Err(GgufError::TensorNameTooLong {
            name: name.to_owned(),
            len: name.len(),
            max: MAX_TENSOR_NAME_BYTES,
        });
    }
    if seen.contains_key(name) {
        return Err(GgufError::DuplicateTensor {
            name: name.to_owned(),
            offset: Some(name_offset),
        });
    }
    let n_dims = c.u32(|| format!("dimension count of tensor '{name}'"))?;
    if n_dims == 0 || n_dims as usize > MAX_DIMS {
        return Err(GgufError::BadDimCount {
            tensor: name.to_owned(),
            n_dims: n_dims.into(),
        });
    }
    let mut shape = Vec::with_capacity(n_dims as usize);
    for d in 0..n_dims {
        shape.push(c.u64(|| format!("dimension {d} of tensor '{name}'"))?);
    }
    let type_id = c.u32(|| format!("type of tensor '{name}'"))?;
    let ty = GgmlType::from_id(type_id).ok_or_else(|| GgufError::UnknownTensorType {
        tensor: name.to_owned(),
        type_id,
    })?;
    let offset = c.u64(|| format!("data offset of tensor '{name}'"))?;
    let (n_elements, n_bytes) = validate_tensor_shape(name, &shape, ty)?;
    Ok(TensorInfo {
        name: name.to_owned(),
        shape,
        ty,
        offset,
        n_elements,
        n_bytes,
    })
}

/// Alignment, bounds and overlap of every tensor's data.
fn validate_extents(
    tensors: &[TensorInfo],
    data_offset: u64,
    alignment: u64,
    file_size: u64,
) -> Result<(), GgufError> {
    for t in tensors {
        if !t.offset.is_multiple_of(alignment) {
            return Err(GgufError::MisalignedTensor {
                tensor: t.name.clone(),
                offset: t.offset,
                alignment,
            });
        }
        let start = data_offset.checked_add(t.offset);
        let end = start.and_then(|s| s.checked_add(t.n_bytes));
        match end {
            Some(end) if end <= file_size => {}
            _ => {
                return Err(GgufError::TensorOutOfBounds {
                    tensor: t.name.clone(),
                    start: data_offset.saturating_add(t.offset),
                    end: end.unwrap_or(u64::MAX),
                    file_size,
                })
            }
        }
    }
    let mut order: Vec<&TensorInfo> = tensors.iter().collect();
    order.sort_by_key(|t| t.offset);
    for pair in order.windows(2) {
        if let [prev, next] = pair {
            // In bounds (checked above), so this cannot overflow.
            let prev_end = prev.offset.saturating_add(prev.n_bytes);
            if next.offset < prev_end {
                return Err(GgufError::TensorOverlap {
                    tensor: next.name.clone(),
                    offset: next.offset,
                    other: prev.name.clone(),
                    other_start: prev.offset,
                    other_end: prev_end,
                });
            }
        }
    }
    Ok(())
}

fn read_value(c: &mut Cursor<'_>, key: &str) -> Result<Value, GgufError> {
    let type_offset = c.pos();
    let type_id = c.u32(|| format!("value type of key '{key}'"))?;
    let ty = ValueType::from_id(type_id).ok_or_else(|| GgufError::UnknownValueType {
        key: key.to_owned(),
        offset: type_offset,
        type_id,
    })?;
    let what = || format!("value of key '{key}'");
    Ok(match ty {
        ValueType::U8 => Value::U8(c.array::<1>(what)?[0]),
        ValueType::I8 => Value::I8(i8::from_le_bytes(c.array(what)?)),
        ValueType::U16 => Value::U16(u16::from_le_bytes(c.array(what)?)),
        ValueType::I16 => Value::I16(i16::from_le_bytes(c.array(what)?)),
        ValueType::U32 => Value::U32(u32::from_le_bytes(c.array(what)?)),
        ValueType::I32 => Value::I32(i32::from_le_bytes(c.array(what)?)),
        ValueType::F32 => Value::F32(f32::from_le_bytes(c.array(what)?)),
        ValueType::U64 => Value::U64(u64::from_le_bytes(c.array(what)?)),
        ValueType::I64 => Value::I64(i64::from_le_bytes(c.array(what)?)),
        ValueType::F64 => Value::F64(f64::from_le_bytes(c.array(what)?)),
        ValueType::Bool => {
            let offset = c.pos();
            Value::Bool(to_bool(c.array::<1>(what)?[0], key, offset)?)
        }
        ValueType::String => Value::String(c.string(what)?.to_owned()),
        ValueType::Array => Value::Array(read_array(c, key, 1)?),
    })
}

fn to_bool(byte: u8, key: &str, offset: u64) -> Result<bool, GgufError> {
    match byte {
        0 => Ok(false),
        1 => Ok(true),
        byte => Err(GgufError::InvalidBool {
            key: key.to_owned(),
            offset,
            byte,
        }),
    }
}

/// Decode `n` fixed-size little-endian elements.
fn fixed<const N: usize, T>(
    c: &mut Cursor<'_>,
    n: usize,
    key: &str,
    conv: fn([u8; N]) -> T,
) -> Result<Vec<T>, GgufError> {
    // `n` was checked against the remaining bytes with the element size N, so this is exact.
    let bytes = c.take((n as u64).saturating_mul(N as u64), || {
        format!("array elements of key '{key}'")
    })?;
    Ok(bytes
        .chunks_exact(N)
        .map(|ch| conv(ch.try_into().unwrap_or([0u8; N])))
        .collect())
}

fn read_array(c: &mut Cursor<'_>, key: &str, depth: usize) -> Result<Array, GgufError> {
    let type_offset = c.pos();
    if depth > MAX_ARRAY_DEPTH {
        return Err(GgufError::ArrayTooDeep {
            key: key.to_owned(),
            offset: type_offset,
            max: MAX_ARRAY_DEPTH,
        });
    }
    let type_id = c.u32(|| format!("array element type of key '{key}'"))?;
    let elem = ValueType::from_id(type_id).ok_or_else(|| GgufError::UnknownValueType {
        key: key.to_owned(),
        offset: type_offset,
        type_id,
    })?;
    let count_offset = c.pos();
    let count = c.u64(|| format!("array length of key '{key}'"))?;
    let n = c.check_count(count, elem.min_encoded_size(), count_offset, || {
        format!("array length of key '{key}' ({elem} elements)")
    })?;
    Ok(match elem {
        ValueType::U8 => Array::U8(fixed(c, n, key, |b: [u8; 1]| b[0])?),
        ValueType::I8 => Array::I8(fixed(c, n, key, i8::from_le_bytes)?),
        ValueType::U16 => Array::U16(fixed(c, n, key, u16::from_le_bytes)?),
        ValueType::I16 => Array::I16(fixed(c, n, key, i16::from_le_bytes)?),
        ValueType::U32 => Array::U32(fixed(c, n, key, u32::from_le_bytes)?),
        ValueType::I32 => Array::I32(fixed(c, n, key, i32::from_le_bytes)?),
        ValueType::F32 => Array::F32(fixed(c, n, key, f32::from_le_bytes)?),
        ValueType::U64 => Array::U64(fixed(c, n, key, u64::from_le_bytes)?),
        ValueType::I64 => Array::I64(fixed(c, n, key, i64::from_le_bytes)?),
        ValueType::F64 => Array::F64(fixed(c, n, key, f64::from_le_bytes)?),
        ValueType::Bool => {
            let start = c.pos();
            let raw = fixed(c, n, key, |b: [u8; 1]| b[0])?;
            let mut out = Vec::with_capacity(n);
            for (i, b) in raw.into_iter().enumerate() {
                out.push(to_bool(b, key, start + i as u64)?);
            }
            Array::Bool(out)
        }
        ValueType::String => {
            let mut out = Vec::with_capacity(n);
            for i in 0..n {
                out.push(
                    c.string(|| format!("element {i} of key '{key}'"))?
                        .to_owned(),
                );
            }
            Array::String(out)
        }
        ValueType::Array => {
            let mut out = Vec::with_capacity(n);
            for _ in 0..n {
                out.push(read_array(c, key, depth + 1)?);
            }
            Array::Array(out)
        }
    })
}
