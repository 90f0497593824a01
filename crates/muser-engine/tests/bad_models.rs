//! Bad models and bad input are clear, typed errors, never panics (issue 3 §1, §9): an
//! unsupported architecture, a missing required key, a tensor of the wrong shape, a tensor of a
//! type Muser cannot compute with, a token id outside the vocabulary, a context overflow, and a
//! model without a tokenizer.

use std::sync::Arc;

use muser_engine::cpu::matmul::ActFormat;
use muser_engine::cpu::repack::Repack;
use muser_engine::cpu::{CpuOptions, CpuSession, Logits};
use muser_engine::{EngineError, Model, ModelError};
use muser_forge::ForgeConfig;
use muser_gguf::{GgmlType, Gguf, GgufBuilder, Value};

fn tiny() -> Gguf {
    let cfg = ForgeConfig::preset("tiny").expect("tiny");
    let mut bytes = Vec::new();
    muser_forge::forge(&cfg, &mut bytes, &mut |_| {}).expect("forge");
    Gguf::from_bytes(bytes).expect("gguf")
}

/// A copy of `g` with metadata passed through `kv` (None drops the key) and tensors through
/// `tensor` (None keeps the tensor as it is; Some gives a replacement shape, type and data),
/// loaded as a model.
fn build(
    g: &Gguf,
    kv: impl Fn(&str, &Value) -> Option<Value>,
    tensor: impl Fn(&str) -> Option<(Vec<u64>, GgmlType, Vec<u8>)>,
) -> Result<Model, ModelError> {
    let mut b = GgufBuilder::new();
    for (k, v) in g.metadata() {
        if let Some(v) = kv(k, v) {
            b.kv(k.clone(), v).expect("kv");
        }
    }
    let mut data: Vec<(String, Vec<u8>)> = Vec::new();
    for t in g.tensors() {
        let (shape, ty, bytes) =
            tensor(&t.name).unwrap_or_else(|| (t.shape.clone(), t.ty, g.tensor_data(t).to_vec()));
        b.tensor(t.name.clone(), &shape, ty).expect("tensor");
        data.push((t.name.clone(), bytes));
    }
    let refs: Vec<(&str, &[u8])> = data
        .iter()
        .map(|(n, d)| (n.as_str(), d.as_slice()))
        .collect();
    let bytes = muser_gguf::to_bytes(b, &refs).expect("write");
    Model::from_gguf(Arc::new(Gguf::from_bytes(bytes).expect("valid gguf")))
}

fn rebuild(
    g: &Gguf,
    kv: impl Fn(&str, &Value) -> Option<Value>,
    tensor: impl Fn(&str) -> Option<(Vec<u64>, GgmlType, Vec<u8>)>,
) -> Model {
    build(g, kv, tensor).unwrap_or_else(|e| panic!("expected a loadable model, got {e}"))
}

fn load_err(
    g: &Gguf,
    kv: impl Fn(&str, &Value) -> Option<Value>,
    tensor: impl Fn(&str) -> Option<(Vec<u64>, GgmlType, Vec<u8>)>,
) -> String {
    match build(g, kv, tensor) {
        Ok(_) => panic!("expected a load error"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn the_unmodified_copy_loads() {
    let g = tiny();
    let m = rebuild(&g, |_, v| Some(v.clone()), |_| None);
    assert_eq!(m.config.n_layer, 4);
}

#[test]
fn unsupported_architecture_is_named() {
    let g = tiny();
    let e = load_err(
        &g,
        |k, v| {
            Some(if k == "general.architecture" {
                Value::String("llama".into())
            } else {
                v.clone()
            })
        },
        |_| None,
    );
    assert!(e.contains("unsupported architecture 'llama'"), "{e}");
}

#[test]
fn missing_required_key_is_named() {
    let g = tiny();
    let e = load_err(
        &g,
        |k, v| (k != "muse-glimmer.block_count").then(|| v.clone()),
        |_| None,
    );
    assert!(e.contains("muse-glimmer.block_count"), "{e}");
}

#[test]
fn wrong_shape_is_named() {
    let g = tiny();
    let t = g.tensor("blk.1.attn_q_norm.weight").expect("tensor");
    let e = load_err(
        &g,
        |_, v| Some(v.clone()),
        |name| {
            (name == "blk.1.attn_q_norm.weight")
                .then(|| (vec![32], GgmlType::F32, g.tensor_data(t)[..128].to_vec()))
        },
    );
    assert!(
        e.contains("blk.1.attn_q_norm.weight") && e.contains("shape"),
        "{e}"
    );
}

#[test]
fn unsupported_weight_type_is_named() {
    let g = tiny();
    let t = g.tensor("blk.0.ffn_up.weight").expect("tensor");
    let n = t.n_elements;
    let bytes = vec![0u8; GgmlType::Q4_0.bytes_for(n).expect("size") as usize];
    let e = load_err(
        &g,
        |_, v| Some(v.clone()),
        |name| {
            (name == "blk.0.ffn_up.weight")
                .then(|| (t.shape.clone(), GgmlType::Q4_0, bytes.clone()))
        },
    );
    assert!(
        e.contains("blk.0.ffn_up.weight") && e.contains("q4_0"),
        "{e}"
    );
}

#[test]
fn out_of_range_tokens_and_context_overflow_are_errors() {
    let g = tiny();
    let m = rebuild(&g, |_, v| Some(v.clone()), |_| None);
    let opts = CpuOptions {
        threads: 1,
        n_ctx: 8,
        chunk: 4,
        acts: ActFormat::A16,
        repack: Repack::Auto,
    };
    let mut s = CpuSession::new(&m, opts).expect("session");
    assert!(matches!(
        s.eval(&[5, 99_999], Logits::Last),
        Err(EngineError::TokenOutOfRange { token: 99_999, .. })
    ));
    assert!(matches!(
        s.eval(&[1; 9], Logits::Last),
        Err(EngineError::ContextFull {
            requested: 9,
            n_ctx: 8
        })
    ));
    // The session is still usable after both errors.
    assert_eq!(
        s.eval(&[1, 2, 3], Logits::Last).expect("eval").len(),
        m.config.n_vocab
    );
}

#[test]
fn a_model_without_a_tokenizer_loads_but_has_no_tokenizer() {
    let g = tiny();
    let m = rebuild(
        &g,
        |k, v| (!k.starts_with("tokenizer.")).then(|| v.clone()),
        |_| None,
    );
    let e = muser_tokenizer::Tokenizer::from_gguf(m.gguf()).expect_err("no tokenizer");
    assert!(e.to_string().contains("tokenizer"), "{e}");
}

#[test]
fn model_error_is_a_typed_enum() {
    let g = tiny();
    let mut b = GgufBuilder::new();
    b.kv("general.architecture", Value::String("muse-glimmer".into()))
        .expect("kv");
    let bytes = muser_gguf::to_bytes(b, &[]).expect("write");
    let r = Model::from_gguf(Arc::new(Gguf::from_bytes(bytes).expect("gguf")));
    assert!(matches!(r, Err(ModelError::Config(_))), "{:?}", r.err());
    drop(g);
}
