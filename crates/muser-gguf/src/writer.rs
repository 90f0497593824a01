//! The streaming GGUF writer: declare metadata and tensors on a [`GgufBuilder`], write the
//! header, then stream each tensor's bytes (whole or in parts) through a [`TensorDataWriter`].
//!
//! Owns: the on-disk encoding of headers and values, and the data layout. Invariants:
//! - output is GGUF v3, little-endian, and a pure function of the calls made (no timestamps,
//!   no hash-map iteration order): the same inputs give byte-identical files;
//! - the builder accepts exactly what the reader accepts (same tensor validation, unique
//!   non-empty keys, unique names, valid alignment, bounded array nesting), so every file it
//!   writes reads back;
//! - tensors are laid out in declaration order, each at an offset that is a multiple of the
//!   alignment, padded with zeros after every tensor (as ggml and gguf-py do);
//! - the data writer never holds more than one caller-provided chunk: 17 GB models stream.

use std::collections::HashSet;
use std::io::Write;

use crate::error::GgufError;
use crate::keys::{general, DEFAULT_ALIGNMENT, GGUF_MAGIC, GGUF_VERSION};
use crate::reader::{align_up, validate_tensor_shape, Gguf, TensorInfo, MAX_ARRAY_DEPTH};
use crate::types::GgmlType;
use crate::value::{Array, Value};

/// Declares a GGUF's metadata and tensors before anything is written.
#[derive(Clone, Debug)]
pub struct GgufBuilder {
    alignment: u64,
    metadata: Vec<(String, Value)>,
    keys: HashSet<String>,
    tensors: Vec<TensorInfo>,
    names: HashSet<String>,
    /// End of the data section (padded) after the declared tensors.
    data_size: u64,
}

impl Default for GgufBuilder {
    fn default() -> Self {
        GgufBuilder::new()
    }
}

impl GgufBuilder {
    /// An empty GGUF v3 with alignment 32.
    pub fn new() -> Self {
        GgufBuilder {
            alignment: DEFAULT_ALIGNMENT,
            metadata: Vec::new(),
            keys: HashSet::new(),
            tensors: Vec::new(),
            names: HashSet::new(),
            data_size: 0,
        }
    }

    /// A builder declaring the same metadata (in order) and tensors (in order) as `g`. With a
    /// file whose tensors are packed in order (as ggml and this writer produce), writing it with
    /// the same tensor bytes reproduces `g` byte for byte.
    pub fn from_gguf_header(g: &Gguf) -> Result<Self, GgufError> {
        let mut b = GgufBuilder::new();
        for (k, v) in g.metadata() {
            b.kv(k.clone(), v.clone())?;
        }
        for t in g.tensors() {
            b.tensor(t.name.clone(), &t.shape, t.ty)?;
        }
        Ok(b)
    }

    /// Set the data alignment (a non-zero power of two that fits in u32). Also sets
    /// `general.alignment` when it differs from 32 (or was already set). Tensor offsets are
    /// reassigned.
    pub fn set_alignment(&mut self, alignment: u64) -> Result<&mut Self, GgufError> {
        if !alignment.is_power_of_two() || alignment > u64::from(u32::MAX) {
            return Err(GgufError::BadAlignment { alignment });
        }
        let (offsets, data_size) = layout(&self.tensors, alignment)?;
        for (t, off) in self.tensors.iter_mut().zip(offsets) {
            t.offset = off;
        }
        self.data_size = data_size;
        self.alignment = alignment;
        let value = Value::U32(alignment as u32);
        if let Some(entry) = self
            .metadata
            .iter_mut()
            .find(|(k, _)| k == general::ALIGNMENT)
        {
            entry.1 = value;
        } else if alignment != DEFAULT_ALIGNMENT {
            self.keys.insert(general::ALIGNMENT.to_owned());
            self.metadata.push((general::ALIGNMENT.to_owned(), value));
        }
        Ok(self)
    }

    /// The data alignment.
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// Add a metadata entry (written in call order). A duplicate key is an error;
    /// `general.alignment` must be a valid u32 alignment and takes effect as
    /// [`GgufBuilder::set_alignment`].
    pub fn kv(&mut self, key: impl Into<String>, value: Value) -> Result<&mut Self, GgufError> {
        let key = key.into();
        if key.is_empty() {
            return Err(GgufError::InvalidKey {
                key,
                reason: "keys must not be empty",
            });
        }
        if self.keys.contains(&key) {
            return Err(GgufError::KeyAlreadySet { key });
        }
        if let Value::Array(a) = &value {
            if a.depth() > MAX_ARRAY_DEPTH {
                return Err(GgufError::ValueTooDeep {
                    key,
                    depth: a.depth(),
                    max: MAX_ARRAY_DEPTH,
                });
            }
        }
        if key == general::ALIGNMENT {
            match value {
                Value::U32(a) => {
                    // Validates, relayouts, and records the key when a != 32.
                    self.set_alignment(a.into())?;
                    if self.keys.insert(key.clone()) {
                        self.metadata.push((key, value));
                    }
                    return Ok(self);
                }
                ref other => {
                    return Err(GgufError::BadAlignmentType {
                        found: other.value_type(),
                    })
                }
            }
        }
        self.keys.insert(key.clone());
        self.metadata.push((key, value));
        Ok(self)
    }

    /// Declare a tensor (data written later, in declaration order). Validates the name (unique,
    /// < 64 bytes), 1..=4 non-zero dims, and that `shape[0]` is whole blocks of `ty`.
    pub fn tensor(
        &mut self,
        name: impl Into<String>,
        shape: &[u64],
        ty: GgmlType,
    ) -> Result<&mut Self, GgufError> {
        let name = name.into();
        let (n_elements, n_bytes) = validate_tensor_shape(&name, shape, ty)?;
        if self.names.contains(&name) {
            return Err(GgufError::DuplicateTensor { name, offset: None });
        }
        let offset = self.data_size;
        let overflow = || GgufError::TensorByteSizeOverflow {
            tensor: name.clone(),
            shape: shape.to_vec(),
            ty,
        };
        let end = offset.checked_add(n_bytes).ok_or_else(overflow)?;
        let data_size = align_up(end, self.alignment).ok_or_else(overflow)?;
        self.data_size = data_size;
        self.names.insert(name.clone());
        self.tensors.push(TensorInfo {
            name,
            shape: shape.to_vec(),
            ty,
            offset,
            n_elements,
            n_bytes,
        });
        Ok(self)
    }

    /// Metadata declared so far, in order.
    pub fn metadata(&self) -> &[(String, Value)] {
        &self.metadata
    }

    /// Tensors declared so far, with their data offsets already assigned.
    pub fn tensor_infos(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// The encoded header (magic through the last tensor info), without padding.
    fn header_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&GGUF_MAGIC);
        out.extend_from_slice(&GGUF_VERSION.to_le_bytes());
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (k, v) in &self.metadata {
            put_str(&mut out, k);
            out.extend_from_slice(&v.value_type().id().to_le_bytes());
            encode_value(&mut out, v);
        }
        for t in &self.tensors {
            put_str(&mut out, &t.name);
            out.extend_from_slice(&(t.shape.len() as u32).to_le_bytes());
            for d in &t.shape {
                out.extend_from_slice(&d.to_le_bytes());
            }
            out.extend_from_slice(&t.ty.id().to_le_bytes());
            out.extend_from_slice(&t.offset.to_le_bytes());
        }
        out
    }

    /// Absolute offset where tensor data will start (encodes the header to measure it).
    pub fn data_offset(&self) -> u64 {
        align_up(self.header_bytes().len() as u64, self.alignment).unwrap_or(u64::MAX)
    }

    /// Size of the complete file.
    pub fn file_size(&self) -> u64 {
        self.data_offset().saturating_add(self.data_size)
    }

    /// Write the header (padded to the alignment) and return the writer for tensor data.
    pub fn write_header<W: Write>(self, mut w: W) -> Result<TensorDataWriter<W>, GgufError> {
        let header = self.header_bytes();
        w.write_all(&header)
            .map_err(|source| GgufError::WriteIo { offset: 0, source })?;
        let mut out = TensorDataWriter {
            w,
            tensors: self.tensors,
            alignment: self.alignment,
            next: 0,
            written: 0,
            bytes_written: header.len() as u64,
        };
        let padded = align_up(out.bytes_written, out.alignment).unwrap_or(out.bytes_written);
        out.put_zeros(padded - out.bytes_written)?;
        Ok(out)
    }
}

/// Offsets for `tensors` packed in order at `alignment`, and the padded data size.
fn layout(tensors: &[TensorInfo], alignment: u64) -> Result<(Vec<u64>, u64), GgufError> {
    let mut offsets = Vec::with_capacity(tensors.len());
    let mut end = 0u64;
    for t in tensors {
        offsets.push(end);
        end = end
            .checked_add(t.n_bytes)
            .and_then(|e| align_up(e, alignment))
            .ok_or_else(|| GgufError::TensorByteSizeOverflow {
                tensor: t.name.clone(),
                shape: t.shape.clone(),
                ty: t.ty,
            })?;
    }
    Ok((offsets, end))
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// Encode a value's payload (not its type id).
fn encode_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::U8(x) => out.push(*x),
        Value::I8(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::Bool(x) => out.push(u8::from(*x)),
        Value::String(s) => put_str(out, s),
        Value::Array(a) => encode_array(out, a),
        Value::U64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F64(x) => out.extend_from_slice(&x.to_le_bytes()),
    }
}

/// Encode an array: element type id, u64 length, elements (inner arrays carry their own type).
fn encode_array(out: &mut Vec<u8>, a: &Array) {
    out.extend_from_slice(&a.element_type().id().to_le_bytes());
    out.extend_from_slice(&(a.len() as u64).to_le_bytes());
    macro_rules! le {
        ($v:expr) => {
            for x in $v {
                out.extend_from_slice(&x.to_le_bytes());
            }
        };
    }
    match a {
        Array::U8(v) => out.extend_from_slice(v),
        Array::I8(v) => le!(v),
        Array::U16(v) => le!(v),
        Array::I16(v) => le!(v),
        Array::U32(v) => le!(v),
        Array::I32(v) => le!(v),
        Array::F32(v) => le!(v),
        Array::Bool(v) => out.extend(v.iter().map(|&b| u8::from(b))),
        Array::String(v) => v.iter().for_each(|s| put_str(out, s)),
        Array::U64(v) => le!(v),
        Array::I64(v) => le!(v),
        Array::F64(v) => le!(v),
        Array::Array(v) => v.iter().for_each(|inner| encode_array(out, inner)),
    }
}

/// Streams tensor data after the header, in header order, padding after each tensor.
pub struct TensorDataWriter<W: Write> {
    w: W,
    tensors: Vec<TensorInfo>,
    alignment: u64,
    /// Index of the tensor whose bytes come next.
    next: usize,
    /// Bytes of `tensors[next]` already written.
    written: u64,
    bytes_written: u64,
}

impl<W: Write> TensorDataWriter<W> {
    /// The tensor whose bytes come next (`None` when all are complete).
    pub fn current(&self) -> Option<&TensorInfo> {
        self.tensors.get(self.next)
    }

    /// All tensor infos, in write order.
    pub fn tensor_infos(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// Total bytes written so far, header included.
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written
    }

    /// Write a whole tensor. `name` must be [`TensorDataWriter::current`], no part of it may
    /// have been written yet, and `data` must be exactly its byte size.
    pub fn write_tensor(&mut self, name: &str, data: &[u8]) -> Result<(), GgufError> {
        let Some(t) = self.current() else {
            return Err(GgufError::WrongTensorOrder {
                expected: None,
                got: name.to_owned(),
            });
        };
        if t.name != name {
            return Err(GgufError::WrongTensorOrder {
                expected: Some(t.name.clone()),
                got: name.to_owned(),
            });
        }
        if self.written != 0 {
            return Err(GgufError::TensorAlreadyStarted {
                tensor: t.name.clone(),
                written: self.written,
            });
        }
        if data.len() as u64 != t.n_bytes {
            return Err(GgufError::TensorDataLength {
                tensor: t.name.clone(),
                expected: t.n_bytes,
                got: data.len() as u64,
            });
        }
        self.write_part(data)
    }

    /// Append bytes to the current tensor. When it is complete, its padding is written and
    /// the next tensor becomes current. A part longer than what the current tensor still needs
    /// is an error (parts never span tensors).
    pub fn write_part(&mut self, data: &[u8]) -> Result<(), GgufError> {
        if data.is_empty() {
            return Ok(());
        }
        let got = data.len() as u64;
        let Some(t) = self.tensors.get(self.next) else {
            return Err(GgufError::NoTensorPending { got });
        };
        let remaining = t.n_bytes - self.written.min(t.n_bytes);
        if got > remaining {
            return Err(GgufError::TensorDataOverflow {
                tensor: t.name.clone(),
                remaining,
                got,
            });
        }
        let n_bytes = t.n_bytes;
        self.put(data)?;
        self.written += got;
        if self.written == n_bytes {
            let padded = align_up(n_bytes, self.alignment).unwrap_or(n_bytes);
            self.put_zeros(padded - n_bytes)?;
            self.next += 1;
            self.written = 0;
        }
        Ok(())
    }

    fn put(&mut self, data: &[u8]) -> Result<(), GgufError> {
        let offset = self.bytes_written;
        self.w
            .write_all(data)
            .map_err(|source| GgufError::WriteIo { offset, source })?;
        self.bytes_written += data.len() as u64;
        Ok(())
    }

    fn put_zeros(&mut self, mut n: u64) -> Result<(), GgufError> {
        const ZEROS: [u8; 4096] = [0; 4096];
        while n > 0 {
            let k = n.min(ZEROS.len() as u64) as usize;
            self.put(ZEROS.get(..k).unwrap_or(&ZEROS))?;
            n -= k as u64;
        }
        Ok(())
    }

    /// Flush and return the sink. Fails, naming the tensor, if any tensor is incomplete.
    pub fn finish(mut self) -> Result<W, GgufError> {
        if let Some(t) = self.current() {
            return Err(GgufError::IncompleteTensorData {
                tensor: t.name.clone(),
                written: self.written,
                expected: t.n_bytes,
            });
        }
        let offset = self.bytes_written;
        self.w
            .flush()
            .map_err(|source| GgufError::WriteIo { offset, source })?;
        Ok(self.w)
    }
}

/// Write a complete GGUF into memory: `data` gives each tensor's bytes, in declaration order.
pub fn to_bytes(builder: GgufBuilder, data: &[(&str, &[u8])]) -> Result<Vec<u8>, GgufError> {
    let mut w = builder.write_header(Vec::new())?;
    for (name, bytes) in data {
        w.write_tensor(name, bytes)?;
    }
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_tensors() -> GgufBuilder {
        let mut b = GgufBuilder::new();
        b.kv(general::ARCHITECTURE, Value::String("t".into()))
            .unwrap();
        b.tensor("a", &[3], GgmlType::F32).unwrap();
        b.tensor("b", &[32, 2], GgmlType::Q8_0).unwrap();
        b
    }

    #[test]
    fn layout_is_aligned_and_matches_the_reader() {
        let b = two_tensors();
        let infos = b.tensor_infos().to_vec();
        assert_eq!((infos[0].offset, infos[0].n_bytes), (0, 12));
        assert_eq!((infos[1].offset, infos[1].n_bytes), (32, 68));
        let (data_offset, file_size) = (b.data_offset(), b.file_size());
        let bytes = to_bytes(b, &[("a", &[1; 12]), ("b", &[2; 68])]).unwrap();
        assert_eq!(bytes.len() as u64, file_size);
        assert_eq!(file_size, data_offset + 32 + 96);
        let g = Gguf::from_bytes(bytes).unwrap();
        assert_eq!(g.tensors(), &infos[..]);
        assert_eq!(g.data_offset(), data_offset);
        assert_eq!(g.tensor_bytes("b"), Some(&[2u8; 68][..]));
    }

    #[test]
    fn parts_stream_identically_to_whole_tensors() {
        let whole = to_bytes(two_tensors(), &[("a", &[1; 12]), ("b", &[2; 68])]).unwrap();
        let mut w = two_tensors().write_header(Vec::new()).unwrap();
        assert_eq!(w.current().map(|t| t.name.as_str()), Some("a"));
        w.write_part(&[1; 5]).unwrap();
        w.write_part(&[]).unwrap();
        w.write_part(&[1; 7]).unwrap();
        assert_eq!(w.current().map(|t| t.name.as_str()), Some("b"));
        for _ in 0..68 {
            w.write_part(&[2]).unwrap();
        }
        assert!(w.current().is_none());
        assert_eq!(w.bytes_written(), whole.len() as u64);
        assert_eq!(w.finish().unwrap(), whole);
    }

    #[test]
    fn streams_large_tensors_without_buffering() {
        /// Counts bytes; keeps none.
        struct Count(u64);
        impl Write for Count {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0 += b.len() as u64;
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut b = GgufBuilder::new();
        b.tensor("big", &[4096, 4096], GgmlType::F32).unwrap(); // 64 MiB
        b.tensor("q", &[256, 8193], GgmlType::Q4_K).unwrap();
        let expected = b.file_size();
        let infos = b.tensor_infos().to_vec();
        let mut w = b.write_header(Count(0)).unwrap();
        let chunk = vec![0u8; 1 << 20];
        for t in &infos {
            let mut left = t.n_bytes;
            while left > 0 {
                assert_eq!(w.current(), Some(t));
                let n = left.min(chunk.len() as u64);
                w.write_part(&chunk[..n as usize]).unwrap();
                left -= n;
            }
        }
        assert!(w.current().is_none());
        assert_eq!(w.finish().unwrap().0, expected);
    }

    #[test]
    fn data_writer_errors() {
        let mut w = two_tensors().write_header(Vec::new()).unwrap();
        let e = w.write_tensor("b", &[0; 68]).unwrap_err();
        assert!(matches!(e, GgufError::WrongTensorOrder { expected: Some(ref x), .. } if x == "a"));
        let e = w.write_tensor("a", &[0; 11]).unwrap_err();
        assert!(matches!(
            e,
            GgufError::TensorDataLength {
                expected: 12,
                got: 11,
                ..
            }
        ));
        w.write_part(&[0; 4]).unwrap();
        let e = w.write_tensor("a", &[0; 12]).unwrap_err();
        assert!(matches!(
            e,
            GgufError::TensorAlreadyStarted { written: 4, .. }
        ));
        let e = w.write_part(&[0; 9]).unwrap_err();
        assert!(matches!(
            e,
            GgufError::TensorDataOverflow {
                remaining: 8,
                got: 9,
                ..
            }
        ));
        w.write_part(&[0; 8]).unwrap();
        w.write_part(&[0; 60]).unwrap();
        let e = w.finish().unwrap_err();
        assert_eq!(
            e.to_string(),
            "tensor 'b' is incomplete: 60 of 68 bytes written"
        );

        let mut w = two_tensors().write_header(Vec::new()).unwrap();
        w.write_tensor("a", &[0; 12]).unwrap();
        w.write_tensor("b", &[0; 68]).unwrap();
        assert!(matches!(
            w.write_part(&[1]),
            Err(GgufError::NoTensorPending { got: 1 })
        ));
        assert!(matches!(
            w.write_tensor("c", &[1]),
            Err(GgufError::WrongTensorOrder { expected: None, .. })
        ));
        w.finish().unwrap();
    }

    #[test]
    fn builder_validation() {
        let mut b = GgufBuilder::new();
        b.kv("k", Value::U8(1)).unwrap();
        assert!(matches!(
            b.kv("k", Value::U8(2)),
            Err(GgufError::KeyAlreadySet { .. })
        ));
        assert!(matches!(
            b.kv("", Value::U8(2)),
            Err(GgufError::InvalidKey { .. })
        ));
        let mut deep = Array::U8(vec![]);
        for _ in 0..MAX_ARRAY_DEPTH {
            deep = Array::Array(vec![deep]);
        }
        assert!(matches!(
            b.kv("deep", Value::Array(deep)),
            Err(GgufError::ValueTooDeep { .. })
        ));
        b.tensor("t", &[256, 2], GgmlType::Q4_K).unwrap();
        assert!(matches!(
            b.tensor("t", &[256], GgmlType::Q4_K),
            Err(GgufError::DuplicateTensor { offset: None, .. })
        ));
        assert!(matches!(
            b.tensor("u", &[128], GgmlType::Q4_K),
            Err(GgufError::RowNotBlockAligned { .. })
        ));
        assert!(matches!(
            b.tensor("u", &[], GgmlType::F32),
            Err(GgufError::BadDimCount { .. })
        ));
        assert!(matches!(
            b.tensor("u", &[1, 1, 1, 1, 1], GgmlType::F32),
            Err(GgufError::BadDimCount { n_dims: 5, .. })
        ));
        assert!(matches!(
            b.tensor("u", &[2, 0], GgmlType::F32),
            Err(GgufError::ZeroDim { .. })
        ));
        assert!(matches!(
            b.tensor("x".repeat(64), &[1], GgmlType::F32),
            Err(GgufError::TensorNameTooLong { .. })
        ));
        assert!(matches!(
            b.set_alignment(0),
            Err(GgufError::BadAlignment { .. })
        ));
        assert!(matches!(
            b.set_alignment(24),
            Err(GgufError::BadAlignment { .. })
        ));
        assert!(matches!(
            b.set_alignment(1 << 32),
            Err(GgufError::BadAlignment { .. })
        ));
        assert!(matches!(
            b.kv(general::ALIGNMENT, Value::U64(64)),
            Err(GgufError::BadAlignmentType { .. })
        ));
        // Nothing above changed the builder.
        assert_eq!(b.metadata().len(), 1);
        assert_eq!(b.tensor_infos().len(), 1);
    }

    #[test]
    fn alignment_key_and_relayout() {
        let mut b = two_tensors();
        b.set_alignment(64).unwrap();
        assert_eq!(b.tensor_infos()[1].offset, 64);
        assert_eq!(
            b.metadata().last(),
            Some(&(general::ALIGNMENT.to_owned(), Value::U32(64)))
        );
        b.set_alignment(32).unwrap(); // key stays, now 32
        assert_eq!(b.metadata().last().map(|kv| &kv.1), Some(&Value::U32(32)));
        let g = Gguf::from_bytes(to_bytes(b, &[("a", &[0; 12]), ("b", &[0; 68])]).unwrap());
        assert_eq!(g.unwrap().alignment(), 32);

        // Via kv: alignment 1 packs tensors back to back.
        let mut b = GgufBuilder::new();
        b.kv(general::ALIGNMENT, Value::U32(1)).unwrap();
        b.tensor("a", &[3], GgmlType::F32).unwrap();
        b.tensor("b", &[1], GgmlType::I8).unwrap();
        assert_eq!(b.tensor_infos()[1].offset, 12);
        assert!(matches!(
            b.kv(general::ALIGNMENT, Value::U32(8)),
            Err(GgufError::KeyAlreadySet { .. })
        ));
        let bytes = to_bytes(b, &[("a", &[7; 12]), ("b", &[9])]).unwrap();
        let g = Gguf::from_bytes(bytes.clone()).unwrap();
        assert_eq!(g.alignment(), 1);
        assert_eq!(g.file_size(), g.data_offset() + 13);
        // Rebuilding from the header reproduces the file byte for byte.
        let rebuilt = to_bytes(
            GgufBuilder::from_gguf_header(&g).unwrap(),
            &[
                ("a", g.tensor_bytes("a").unwrap()),
                ("b", g.tensor_bytes("b").unwrap()),
            ],
        )
        .unwrap();
        assert_eq!(rebuilt, bytes);
    }

    #[test]
    fn metadata_only_file_and_write_errors() {
        let mut b = GgufBuilder::new();
        b.kv("x", Value::Bool(false)).unwrap();
        let bytes = to_bytes(b, &[]).unwrap();
        assert_eq!(bytes.len() % 32, 0);
        let g = Gguf::from_bytes(bytes).unwrap();
        assert!(!g.get_bool("x").unwrap());

        struct Broken;
        impl Write for Broken {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::Error::other("disk full"))
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let e = two_tensors().write_header(Broken).err().unwrap();
        assert!(e.to_string().contains("disk full"), "{e}");
    }
}
