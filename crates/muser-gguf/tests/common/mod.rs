//! Shared helpers for the integration tests: a small valid sample file built with the writer,
//! a raw byte-level assembler for crafting malformed files, and a tiny deterministic RNG.
#![allow(dead_code)]

use muser_gguf::{to_bytes, Array, GgmlType, GgufBuilder, Value};

/// xorshift64*: deterministic, dependency-free randomness for mutation loops.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    pub fn fill(&mut self, out: &mut [u8]) {
        for b in out {
            *b = self.next() as u8;
        }
    }
}

/// Deterministic pseudo-random bytes.
pub fn bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut r = Rng(seed | 1);
    let mut v = vec![0u8; n];
    r.fill(&mut v);
    v
}

/// A small valid GGUF touching every value type, a nested array and several tensor types.
/// Returns the file and the end of the last tensor's data (bytes after it are padding).
pub fn sample_file() -> (Vec<u8>, u64) {
    let mut b = GgufBuilder::new();
    b.kv("general.architecture", Value::String("gemma3".into()))
        .unwrap();
    b.kv("gemma3.block_count", Value::U32(2)).unwrap();
    b.kv("gemma3.attention.layer_norm_rms_epsilon", Value::F32(1e-6))
        .unwrap();
    b.kv("t.u8", Value::U8(7)).unwrap();
    b.kv("t.i8", Value::I8(-7)).unwrap();
    b.kv("t.u16", Value::U16(700)).unwrap();
    b.kv("t.i16", Value::I16(-700)).unwrap();
    b.kv("t.i32", Value::I32(-70000)).unwrap();
    b.kv("t.u64", Value::U64(1 << 40)).unwrap();
    b.kv("t.i64", Value::I64(-(1 << 40))).unwrap();
    b.kv("t.f64", Value::F64(0.25)).unwrap();
    b.kv("t.bool", Value::Bool(true)).unwrap();
    b.kv(
        "t.tokens",
        Value::Array(Array::String(vec!["<pad>".into(), "é".into(), "".into()])),
    )
    .unwrap();
    b.kv(
        "t.flags",
        Value::Array(Array::Bool(vec![true, false, true])),
    )
    .unwrap();
    b.kv(
        "t.nested",
        Value::Array(Array::Array(vec![
            Array::I32(vec![1, -2]),
            Array::String(vec!["x".into()]),
        ])),
    )
    .unwrap();
    b.tensor("a.f32", &[8, 2], GgmlType::F32).unwrap();
    b.tensor("b.q8_0", &[32, 1], GgmlType::Q8_0).unwrap();
    b.tensor("c.f16", &[3], GgmlType::F16).unwrap();
    let infos = b.tensor_infos().to_vec();
    let data: Vec<Vec<u8>> = infos
        .iter()
        .enumerate()
        .map(|(i, t)| bytes(i as u64 + 1, t.n_bytes as usize))
        .collect();
    let pairs: Vec<(&str, &[u8])> = infos
        .iter()
        .zip(&data)
        .map(|(t, d)| (t.name.as_str(), d.as_slice()))
        .collect();
    let data_offset = b.data_offset();
    let last = infos.last().unwrap();
    let end = data_offset + last.offset + last.n_bytes;
    (to_bytes(b, &pairs).unwrap(), end)
}

// ---- raw assembler for crafted (possibly invalid) files ----

pub fn header(version: u32, n_tensors: u64, n_kv: u64) -> Vec<u8> {
    let mut v = b"GGUF".to_vec();
    v.extend_from_slice(&version.to_le_bytes());
    v.extend_from_slice(&n_tensors.to_le_bytes());
    v.extend_from_slice(&n_kv.to_le_bytes());
    v
}

pub fn raw_str(s: &[u8]) -> Vec<u8> {
    let mut v = (s.len() as u64).to_le_bytes().to_vec();
    v.extend_from_slice(s);
    v
}

/// A metadata entry: key, type id, raw payload.
pub fn kv(key: &[u8], type_id: u32, payload: &[u8]) -> Vec<u8> {
    let mut v = raw_str(key);
    v.extend_from_slice(&type_id.to_le_bytes());
    v.extend_from_slice(payload);
    v
}

/// A tensor info: name, dims (ggml order), type id, offset.
pub fn ti(name: &[u8], dims: &[u64], type_id: u32, offset: u64) -> Vec<u8> {
    let mut v = raw_str(name);
    v.extend_from_slice(&(dims.len() as u32).to_le_bytes());
    for d in dims {
        v.extend_from_slice(&d.to_le_bytes());
    }
    v.extend_from_slice(&type_id.to_le_bytes());
    v.extend_from_slice(&offset.to_le_bytes());
    v
}

/// Header + entries + tensor infos, padded to `align`, then `data`.
pub fn assemble(kvs: &[Vec<u8>], tis: &[Vec<u8>], align: usize, data: &[u8]) -> Vec<u8> {
    let mut v = header(3, tis.len() as u64, kvs.len() as u64);
    for k in kvs {
        v.extend_from_slice(k);
    }
    for t in tis {
        v.extend_from_slice(t);
    }
    while !v.len().is_multiple_of(align) {
        v.push(0);
    }
    v.extend_from_slice(data);
    v
}
