//! Property tests: writer → reader round trips of random metadata (every value type, nested
//! arrays, NaN payloads) and random tensors (several ggml types, 1–4 dims, alignments
//! 1/8/32/64); streaming in random parts equals writing whole tensors; rebuilding from a
//! parsed header reproduces the file byte for byte; and random mutations of valid files never
//! panic.

mod common;

use muser_gguf::{to_bytes, Array, GgmlType, Gguf, GgufBuilder, TensorInfo, Value};
use proptest::prelude::*;

fn arb_string() -> impl Strategy<Value = String> {
    prop_oneof![Just(String::new()), "[a-z<>]{1,6}", "\\PC{0,5}"]
}

fn arb_f32() -> impl Strategy<Value = f32> {
    prop_oneof![any::<f32>(), any::<u32>().prop_map(f32::from_bits)]
}

fn arb_f64() -> impl Strategy<Value = f64> {
    prop_oneof![any::<f64>(), any::<u64>().prop_map(f64::from_bits)]
}

fn arb_flat_array() -> impl Strategy<Value = Array> {
    let n = 0..5usize;
    prop_oneof![
        prop::collection::vec(any::<u8>(), n.clone()).prop_map(Array::U8),
        prop::collection::vec(any::<i8>(), n.clone()).prop_map(Array::I8),
        prop::collection::vec(any::<u16>(), n.clone()).prop_map(Array::U16),
        prop::collection::vec(any::<i16>(), n.clone()).prop_map(Array::I16),
        prop::collection::vec(any::<u32>(), n.clone()).prop_map(Array::U32),
        prop::collection::vec(any::<i32>(), n.clone()).prop_map(Array::I32),
        prop::collection::vec(arb_f32(), n.clone()).prop_map(Array::F32),
        prop::collection::vec(any::<bool>(), n.clone()).prop_map(Array::Bool),
        prop::collection::vec(arb_string(), n.clone()).prop_map(Array::String),
        prop::collection::vec(any::<u64>(), n.clone()).prop_map(Array::U64),
        prop::collection::vec(any::<i64>(), n.clone()).prop_map(Array::I64),
        prop::collection::vec(arb_f64(), n).prop_map(Array::F64),
    ]
}

fn arb_array() -> impl Strategy<Value = Array> {
    arb_flat_array().prop_recursive(3, 24, 4, |inner| {
        prop::collection::vec(inner, 0..4).prop_map(Array::Array)
    })
}

fn arb_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<u8>().prop_map(Value::U8),
        any::<i8>().prop_map(Value::I8),
        any::<u16>().prop_map(Value::U16),
        any::<i16>().prop_map(Value::I16),
        any::<u32>().prop_map(Value::U32),
        any::<i32>().prop_map(Value::I32),
        arb_f32().prop_map(Value::F32),
        any::<bool>().prop_map(Value::Bool),
        arb_string().prop_map(Value::String),
        any::<u64>().prop_map(Value::U64),
        any::<i64>().prop_map(Value::I64),
        arb_f64().prop_map(Value::F64),
        arb_array().prop_map(Value::Array),
    ]
}

const TYPES: [GgmlType; 12] = [
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::I8,
    GgmlType::I32,
    GgmlType::F64,
    GgmlType::Q8_0,
    GgmlType::Q4_0,
    GgmlType::Q5_0,
    GgmlType::Q4_K,
    GgmlType::Q6_K,
    GgmlType::IQ4_XS,
];

#[derive(Debug, Clone)]
struct TensorSpec {
    ty: GgmlType,
    shape: Vec<u64>,
    seed: u64,
}

fn arb_tensor() -> impl Strategy<Value = TensorSpec> {
    (
        0..TYPES.len(),
        1..=3u64,
        prop::collection::vec(1..=3u64, 0..=3),
        any::<u64>(),
    )
        .prop_map(|(t, blocks, rest, seed)| {
            let ty = TYPES[t];
            let mut shape = vec![blocks * ty.block_size() as u64];
            shape.extend(rest);
            TensorSpec { ty, shape, seed }
        })
}

#[derive(Debug, Clone)]
struct FileSpec {
    alignment: u64,
    metadata: Vec<(String, Value)>,
    tensors: Vec<TensorSpec>,
}

fn arb_file() -> impl Strategy<Value = FileSpec> {
    (
        prop::sample::select(vec![1u64, 8, 32, 64]),
        prop::collection::vec(("[a-z_.]{1,10}", arb_value()), 0..8),
        prop::collection::vec(arb_tensor(), 0..5),
    )
        .prop_map(|(alignment, kvs, tensors)| FileSpec {
            alignment,
            // Prefix with the index: unique, and never "general.alignment".
            metadata: kvs
                .into_iter()
                .enumerate()
                .map(|(i, (k, v))| (format!("k{i}.{k}"), v))
                .collect(),
            tensors,
        })
}

/// Bitwise equality (NaN payloads included).
fn val_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::F32(x), Value::F32(y)) => x.to_bits() == y.to_bits(),
        (Value::F64(x), Value::F64(y)) => x.to_bits() == y.to_bits(),
        (Value::Array(x), Value::Array(y)) => arr_eq(x, y),
        _ => a == b,
    }
}

fn arr_eq(a: &Array, b: &Array) -> bool {
    match (a, b) {
        (Array::F32(x), Array::F32(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits())
        }
        (Array::F64(x), Array::F64(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits())
        }
        (Array::Array(x), Array::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| arr_eq(p, q))
        }
        _ => a == b,
    }
}

fn build(spec: &FileSpec) -> (GgufBuilder, Vec<Vec<u8>>) {
    let mut b = GgufBuilder::new();
    b.set_alignment(spec.alignment).unwrap();
    for (k, v) in &spec.metadata {
        b.kv(k.clone(), v.clone()).unwrap();
    }
    for (i, t) in spec.tensors.iter().enumerate() {
        b.tensor(format!("blk.{i}.w"), &t.shape, t.ty).unwrap();
    }
    let data = b
        .tensor_infos()
        .iter()
        .zip(&spec.tensors)
        .map(|(info, t)| common::bytes(t.seed, info.n_bytes as usize))
        .collect();
    (b, data)
}

fn write_whole(b: GgufBuilder, data: &[Vec<u8>]) -> Vec<u8> {
    let names: Vec<String> = b.tensor_infos().iter().map(|t| t.name.clone()).collect();
    let pairs: Vec<(&str, &[u8])> = names
        .iter()
        .zip(data)
        .map(|(n, d)| (n.as_str(), d.as_slice()))
        .collect();
    to_bytes(b, &pairs).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn writer_reader_round_trip(spec in arb_file(), chunk in 1usize..40) {
        let (b, data) = build(&spec);
        let infos: Vec<TensorInfo> = b.tensor_infos().to_vec();
        let (data_offset, file_size) = (b.data_offset(), b.file_size());
        let bytes = write_whole(b.clone(), &data);
        prop_assert_eq!(bytes.len() as u64, file_size);

        // Streaming in parts of `chunk` bytes gives the same file.
        let mut w = b.write_header(Vec::new()).unwrap();
        for d in &data {
            for part in d.chunks(chunk) {
                w.write_part(part).unwrap();
            }
        }
        prop_assert_eq!(&w.finish().unwrap(), &bytes);

        let g = Gguf::from_bytes(bytes.clone()).unwrap();
        prop_assert_eq!(g.version(), 3);
        prop_assert_eq!(g.alignment(), spec.alignment);
        prop_assert_eq!(g.data_offset(), data_offset);
        prop_assert_eq!(g.data_offset() % spec.alignment, 0);
        let mut expected = spec.metadata.clone();
        if spec.alignment != 32 {
            expected.insert(0, ("general.alignment".into(), Value::U32(spec.alignment as u32)));
        }
        prop_assert_eq!(g.metadata().len(), expected.len());
        for ((k1, v1), (k2, v2)) in g.metadata().iter().zip(&expected) {
            prop_assert_eq!(k1, k2);
            prop_assert!(val_eq(v1, v2), "{k1}: {v1:?} != {v2:?}");
            prop_assert!(std::ptr::eq(g.get(k1).unwrap(), v1));
        }
        prop_assert_eq!(g.tensors(), &infos[..]);
        for (t, d) in g.tensors().iter().zip(&data) {
            prop_assert_eq!(g.tensor_data(t), &d[..]);
            prop_assert_eq!(t.offset % spec.alignment, 0);
            prop_assert_eq!(t.n_elements, t.shape.iter().product::<u64>());
        }

        // Rebuild from the parsed header: byte-identical (deterministic writer).
        let rebuilt = GgufBuilder::from_gguf_header(&g).unwrap();
        let again: Vec<Vec<u8>> = g.tensors().iter().map(|t| g.tensor_data(t).to_vec()).collect();
        prop_assert_eq!(write_whole(rebuilt, &again), bytes);
    }

    #[test]
    fn mutated_files_never_panic(spec in arb_file(), muts in prop::collection::vec((any::<u64>(), any::<u8>()), 1..6), cut in any::<u64>()) {
        let (b, data) = build(&spec);
        let mut bytes = write_whole(b, &data);
        for (pos, val) in muts {
            let i = (pos % bytes.len() as u64) as usize;
            bytes[i] = val;
        }
        if cut % 3 == 0 {
            bytes.truncate((cut / 3 % (bytes.len() as u64 + 1)) as usize);
        }
        if let Ok(g) = Gguf::from_bytes(bytes) {
            for t in g.tensors() {
                prop_assert!(g.data_offset() + t.offset + t.n_bytes <= g.file_size());
                prop_assert_eq!(g.tensor_data(t).len() as u64, t.n_bytes);
            }
        }
    }
}
