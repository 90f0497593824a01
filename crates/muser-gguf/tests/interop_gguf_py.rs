//! Interop with gguf-py (the reference Python implementation, pinned sdist): files written by
//! gguf-py's GGUFWriter must read back exactly as gguf-py's GGUFReader reads them (recorded in
//! tests/data/*.json by scripts/gen-gguf-fixtures.py), and Muser's writer, given the same
//! metadata and tensors, must reproduce those files byte for byte. Optionally (when python3
//! with numpy and the unpacked sdist are present) gguf-py reads a file Muser wrote.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use muser_gguf::{to_bytes, Array, Gguf, GgufBuilder, Value};
use serde_json::Value as J;
use sha2::{Digest, Sha256};

const FIXTURES: [&str; 4] = [
    "gguf_py_all_types",
    "gguf_py_align64",
    "gguf_py_align1",
    "gguf_py_meta_only",
];

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("data")
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn u(j: &J) -> u64 {
    j.as_u64().unwrap_or_else(|| panic!("not a u64: {j}"))
}

fn i(j: &J) -> i64 {
    j.as_i64().unwrap_or_else(|| panic!("not an i64: {j}"))
}

/// gguf-py's canonical JSON value (see the script) → a Muser value.
fn to_value(j: &J) -> Value {
    let v = &j["value"];
    match j["type"].as_str().unwrap() {
        "UINT8" => Value::U8(u(v) as u8),
        "INT8" => Value::I8(i(v) as i8),
        "UINT16" => Value::U16(u(v) as u16),
        "INT16" => Value::I16(i(v) as i16),
        "UINT32" => Value::U32(u(v) as u32),
        "INT32" => Value::I32(i(v) as i32),
        "UINT64" => Value::U64(u(v)),
        "INT64" => Value::I64(i(v)),
        "FLOAT32" => Value::F32(f32::from_bits(u(&j["bits"]) as u32)),
        "FLOAT64" => Value::F64(f64::from_bits(u(&j["bits"]))),
        "BOOL" => Value::Bool(v.as_bool().unwrap()),
        "STRING" => Value::String(v.as_str().unwrap().to_owned()),
        "ARRAY" => Value::Array(to_array(j)),
        other => panic!("unknown type {other}"),
    }
}

fn to_array(j: &J) -> Array {
    let items: Vec<Value> = j["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(to_value)
        .collect();
    macro_rules! collect {
        ($variant:ident) => {
            Array::$variant(
                items
                    .into_iter()
                    .map(|v| match v {
                        Value::$variant(x) => x,
                        other => panic!("mixed array: {other:?}"),
                    })
                    .collect(),
            )
        };
    }
    match j["elem"].as_str().unwrap() {
        "UINT8" => collect!(U8),
        "INT8" => collect!(I8),
        "UINT16" => collect!(U16),
        "INT16" => collect!(I16),
        "UINT32" => collect!(U32),
        "INT32" => collect!(I32),
        "UINT64" => collect!(U64),
        "INT64" => collect!(I64),
        "FLOAT32" => collect!(F32),
        "FLOAT64" => collect!(F64),
        "BOOL" => collect!(Bool),
        "STRING" => collect!(String),
        "ARRAY" => collect!(Array),
        other => panic!("unknown element type {other}"),
    }
}

/// Bitwise equality (the fixtures hold a NaN).
fn val_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::F32(x), Value::F32(y)) => x.to_bits() == y.to_bits(),
        (Value::F64(x), Value::F64(y)) => x.to_bits() == y.to_bits(),
        _ => a == b,
    }
}

/// Check a parsed file against gguf-py's description of it.
fn check_against(g: &Gguf, desc: &J, file: &[u8]) {
    let name = desc["file"].as_str().unwrap();
    assert_eq!(u(&desc["size"]), g.file_size(), "{name}");
    assert_eq!(desc["sha256"].as_str().unwrap(), sha256(file), "{name}");
    assert_eq!(u(&desc["version"]), u64::from(g.version()), "{name}");
    assert_eq!(u(&desc["alignment"]), g.alignment(), "{name}");
    assert_eq!(u(&desc["data_offset"]), g.data_offset(), "{name}");

    let md = desc["metadata"].as_array().unwrap();
    assert_eq!(md.len(), g.metadata().len(), "{name}: metadata count");
    for (j, (key, value)) in md.iter().zip(g.metadata()) {
        assert_eq!(j["key"].as_str().unwrap(), key, "{name}: key order");
        let expected = to_value(&j["value"]);
        assert!(
            val_eq(&expected, value),
            "{name}: {key}: gguf-py {expected:?}, muser {value:?}"
        );
    }

    let ts = desc["tensors"].as_array().unwrap();
    assert_eq!(ts.len(), g.tensors().len(), "{name}: tensor count");
    for (j, t) in ts.iter().zip(g.tensors()) {
        assert_eq!(j["name"].as_str().unwrap(), t.name);
        assert_eq!(u(&j["type_id"]), u64::from(t.ty.id()), "{}", t.name);
        assert!(
            j["type"]
                .as_str()
                .unwrap()
                .eq_ignore_ascii_case(t.ty.name()),
            "{}",
            t.name
        );
        let shape: Vec<u64> = j["shape"].as_array().unwrap().iter().map(u).collect();
        assert_eq!(shape, t.shape, "{}", t.name);
        assert_eq!(u(&j["n_elements"]), t.n_elements, "{}", t.name);
        assert_eq!(u(&j["n_bytes"]), t.n_bytes, "{}", t.name);
        assert_eq!(
            u(&j["data_offset"]),
            t.absolute_offset(g.data_offset()),
            "{}",
            t.name
        );
        assert_eq!(
            j["sha256"].as_str().unwrap(),
            sha256(g.tensor_data(t)),
            "{}",
            t.name
        );
    }
}

fn load(stem: &str) -> (Gguf, J, Vec<u8>) {
    let dir = data_dir();
    let path = dir.join(format!("{stem}.gguf"));
    let g = Gguf::open(&path).unwrap_or_else(|e| panic!("{e}"));
    let desc: J =
        serde_json::from_str(&std::fs::read_to_string(dir.join(format!("{stem}.json"))).unwrap())
            .unwrap();
    let bytes = std::fs::read(&path).unwrap();
    (g, desc, bytes)
}

#[test]
fn muser_reads_what_gguf_py_reads() {
    for stem in FIXTURES {
        let (g, desc, bytes) = load(stem);
        check_against(&g, &desc, &bytes);
    }
}

#[test]
fn fixtures_cover_every_value_type_and_nesting() {
    let (g, _, _) = load("gguf_py_all_types");
    let mut seen = std::collections::HashSet::new();
    for (_, v) in g.metadata() {
        seen.insert(v.value_type());
        if let Value::Array(a) = v {
            seen.insert(a.element_type());
        }
    }
    assert_eq!(seen.len(), 13, "{seen:?}");
    let mixed = g.get_array("t.nested.mixed").unwrap().as_arrays().unwrap();
    assert_eq!(mixed[1].as_strings().unwrap(), ["x", "y"]);
    assert_eq!(g.get_array("t.nested.deep").unwrap().depth(), 3);
    assert!(g.get("t.f32.nan").unwrap().as_f32().unwrap().is_nan());
    assert_eq!(g.get_str("t.string").unwrap(), "héllo ✓ \"quoted\"\n");
    assert_eq!(g.get_u64("t.u64").unwrap(), u64::MAX);
    assert_eq!(g.arch_u32(muser_gguf::arch::BLOCK_COUNT).unwrap(), 2);
    let tys: Vec<&str> = g.tensors().iter().map(|t| t.ty.name()).collect();
    for want in [
        "f32", "f16", "f64", "i8", "i16", "i32", "i64", "q8_0", "q5_0", "q4_K", "q6_K",
    ] {
        assert!(tys.contains(&want), "{want} missing from {tys:?}");
    }
}

#[test]
fn muser_writer_reproduces_gguf_py_files_byte_for_byte() {
    for stem in FIXTURES {
        let (g, _, bytes) = load(stem);
        let b = GgufBuilder::from_gguf_header(&g).unwrap();
        assert_eq!(b.tensor_infos(), g.tensors(), "{stem}: layout");
        let data: Vec<(&str, &[u8])> = g
            .tensors()
            .iter()
            .map(|t| (t.name.as_str(), g.tensor_data(t)))
            .collect();
        let ours = to_bytes(b, &data).unwrap();
        assert!(
            ours == bytes,
            "{stem}: Muser's writer output differs from gguf-py's"
        );
    }
}

/// The reverse direction: gguf-py reads a file Muser wrote. Skipped unless python3 with numpy
/// and the unpacked pinned sdist are available (the script would otherwise download it).
#[test]
fn gguf_py_reads_what_muser_writes() {
    let cache = std::env::var_os("MUSER_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/muser")));
    let gguf_py = cache.map(|c| c.join("sdist/llama_cpp_python-0.3.36/vendor/llama.cpp/gguf-py"));
    let has_numpy = Command::new("python3")
        .args(["-c", "import numpy"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_numpy || !gguf_py.as_ref().is_some_and(|p| p.is_dir()) {
        assert!(
            std::env::var_os("MUSER_REQUIRE_MODELS").is_none(),
            "MUSER_REQUIRE_MODELS is set but this test's external input is missing"
        );
        eprintln!("skipping: python3 with numpy and the unpacked sdist gguf-py are needed");
        return;
    }
    let (file, _) = common::sample_file();
    let dir = std::env::temp_dir().join(format!("muser-gguf-reverse-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("muser_sample.gguf");
    std::fs::write(&path, &file).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/gen-gguf-fixtures.py");
    let out = Command::new("python3")
        .arg(script)
        .arg("--read")
        .arg(&path)
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        out.status.success(),
        "gguf-py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let desc: J = serde_json::from_slice(&out.stdout).unwrap();
    let g = Gguf::from_bytes(file.clone()).unwrap();
    check_against(&g, &desc, &file);
}
