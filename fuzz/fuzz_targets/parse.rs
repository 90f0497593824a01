//! Fuzz target for the GGUF parser: any input must give `Ok` or a typed `Err` — no panic, no
//! out-of-bounds read, no runaway allocation. On `Ok`, the documented invariants must hold and
//! the writer must accept and reproduce the file's contents (the builder accepts exactly what
//! the reader accepts).
#![no_main]

use libfuzzer_sys::fuzz_target;
use muser_gguf::{to_bytes, Gguf, GgufBuilder, Value};

/// Bitwise value equality (NaN-safe) via the short and full renderings plus the type.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::F32(x), Value::F32(y)) => x.to_bits() == y.to_bits(),
        (Value::F64(x), Value::F64(y)) => x.to_bits() == y.to_bits(),
        _ => a.value_type() == b.value_type() && format!("{a:#}") == format!("{b:#}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(g) = Gguf::from_bytes(data.to_vec()) else {
        return;
    };
    assert!(g.alignment().is_power_of_two());
    assert!(g.data_offset() <= g.file_size());
    for t in g.tensors() {
        assert_eq!(g.tensor_data(t).len() as u64, t.n_bytes);
        assert_eq!(g.tensor(&t.name), Some(t));
    }
    for (k, v) in g.metadata() {
        let _ = v.to_string();
        let _ = g.get_u32(k);
        let _ = g.get_f32(k);
        let _ = g.opt_str(k);
    }
    let _ = g.arch_u32(muser_gguf::arch::BLOCK_COUNT);

    // Writer round trip: what the reader accepted, the writer must accept and reproduce.
    let b = GgufBuilder::from_gguf_header(&g).expect("builder rejects a file the reader accepted");
    let pairs: Vec<(&str, &[u8])> = g
        .tensors()
        .iter()
        .map(|t| (t.name.as_str(), g.tensor_data(t)))
        .collect();
    let bytes = to_bytes(b, &pairs).expect("writing an accepted file failed");
    let h = Gguf::from_bytes(bytes).expect("re-reading a written file failed");
    assert_eq!(g.metadata().len(), h.metadata().len());
    for ((k1, v1), (k2, v2)) in g.metadata().iter().zip(h.metadata()) {
        assert_eq!(k1, k2);
        assert!(same(v1, v2), "{k1}: {v1:?} vs {v2:?}");
    }
    assert_eq!(g.tensors().len(), h.tensors().len());
    for (t, u) in g.tensors().iter().zip(h.tensors()) {
        assert_eq!((&t.name, &t.shape, t.ty), (&u.name, &u.shape, u.ty));
        assert_eq!(g.tensor_data(t), h.tensor_data(u));
    }
});
