//! `muser inspect FILE`: architecture, hyperparameters, tokenizer summary, metadata, tensor
//! table, totals and the validation verdict of a GGUF file — a human table by default, one JSON
//! document with `--json`.
//!
//! Owns: the report's content and both renderings. Exit status: 0 when the file is valid GGUF,
//! 1 when it is not (the verdict says why).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use muser_engine::ModelConfig;
use muser_gguf::keys::tokenizer;
use muser_gguf::{Array, Gguf, Value};
use serde::Serialize;
use serde_json::json;
use sha2::{Digest, Sha256};

#[derive(Args)]
pub struct InspectArgs {
    /// GGUF file (default: the default model, see README).
    file: Option<PathBuf>,
    /// Emit one JSON document instead of tables.
    #[arg(long)]
    json: bool,
    /// Also compute the file's SHA-256 (reads the whole file).
    #[arg(long)]
    sha256: bool,
    /// Print every tensor (the human table otherwise elides the middle of long lists).
    #[arg(long)]
    all: bool,
}

#[derive(Serialize)]
struct Verdict {
    /// The file is well-formed GGUF (every structural check passed).
    valid: bool,
    /// Muser can run it: supported architecture, consistent hyperparameters, supported types.
    runnable: bool,
    problems: Vec<String>,
}

#[derive(Serialize)]
pub(crate) struct TensorRow {
    pub(crate) name: String,
    #[serde(rename = "type")]
    pub(crate) ty: String,
    pub(crate) shape: Vec<u64>,
    pub(crate) elements: u64,
    pub(crate) bytes: u64,
    pub(crate) offset: u64,
}

#[derive(Serialize)]
pub(crate) struct TypeTotal {
    pub(crate) tensors: usize,
    pub(crate) parameters: u64,
    pub(crate) bytes: u64,
}

#[derive(Serialize)]
pub(crate) struct Totals {
    pub(crate) tensors: usize,
    pub(crate) parameters: u64,
    pub(crate) bytes: u64,
    pub(crate) bits_per_weight: f64,
    pub(crate) by_type: BTreeMap<String, TypeTotal>,
}

/// JSON has no NaN or infinity: those floats become the strings "NaN", "inf", "-inf".
fn float_json(x: f64) -> serde_json::Value {
    if x.is_finite() {
        json!(x)
    } else if x.is_nan() {
        json!("NaN")
    } else if x > 0.0 {
        json!("inf")
    } else {
        json!("-inf")
    }
}

fn value_json(v: &Value) -> serde_json::Value {
    match v {
        Value::U8(x) => json!(x),
        Value::I8(x) => json!(x),
        Value::U16(x) => json!(x),
        Value::I16(x) => json!(x),
        Value::U32(x) => json!(x),
        Value::I32(x) => json!(x),
        Value::U64(x) => json!(x),
        Value::I64(x) => json!(x),
        Value::F32(x) => float_json(f64::from(*x)),
        Value::F64(x) => float_json(*x),
        Value::Bool(x) => json!(x),
        Value::String(s) => json!(s),
        Value::Array(a) => array_json(a),
    }
}

/// Arrays up to 64 elements in full; longer ones as a summary with the first 8.
fn array_json(a: &Array) -> serde_json::Value {
    const FULL: usize = 64;
    const HEAD: usize = 8;
    let take = if a.len() <= FULL { a.len() } else { HEAD };
    let items: Vec<serde_json::Value> = match a {
        Array::U8(v) => v.iter().take(take).map(|x| json!(x)).collect(),
        Array::I8(v) => v.iter().take(take).map(|x| json!(x)).collect(),
        Array::U16(v) => v.iter().take(take).map(|x| json!(x)).collect(),
        Array::I16(v) => v.iter().take(take).map(|x| json!(x)).collect(),
        Array::U32(v) => v.iter().take(take).map(|x| json!(x)).collect(),
        Array::I32(v) => v.iter().take(take).map(|x| json!(x)).collect(),
        Array::U64(v) => v.iter().take(take).map(|x| json!(x)).collect(),
        Array::I64(v) => v.iter().take(take).map(|x| json!(x)).collect(),
        Array::F32(v) => v
            .iter()
            .take(take)
            .map(|&x| float_json(f64::from(x)))
            .collect(),
        Array::F64(v) => v.iter().take(take).map(|&x| float_json(x)).collect(),
        Array::Bool(v) => v.iter().take(take).map(|x| json!(x)).collect(),
        Array::String(v) => v.iter().take(take).map(|x| json!(x)).collect(),
        Array::Array(v) => v.iter().take(take).map(array_json).collect(),
    };
    if a.len() <= FULL {
        serde_json::Value::Array(items)
    } else {
        json!({ "element_type": format!("{:?}", a.element_type()).to_lowercase(), "len": a.len(), "head": items })
    }
}

fn tokenizer_summary(g: &Gguf) -> Option<serde_json::Value> {
    let model = g.get(tokenizer::MODEL)?.as_str()?.to_string();
    let tokens = g.get(tokenizer::TOKENS).and_then(Value::as_array);
    let strings = tokens.and_then(Array::as_strings);
    let n_tokens = tokens.map_or(0, Array::len);
    let types = g
        .get(tokenizer::TOKEN_TYPE)
        .and_then(Value::as_array)
        .and_then(Array::as_i32s);
    let count_type = |t: i32| types.map_or(0, |v| v.iter().filter(|&&x| x == t).count());
    let special = |key: &str| -> serde_json::Value {
        match g.get(key).and_then(Value::as_u64) {
            Some(id) => {
                let text = strings.and_then(|s| s.get(id as usize)).cloned();
                json!({ "id": id, "text": text })
            }
            None => serde_json::Value::Null,
        }
    };
    Some(json!({
        "model": model,
        "pre": g.get(tokenizer::PRE).and_then(Value::as_str),
        "tokens": n_tokens,
        "merges": g.get(tokenizer::MERGES).and_then(Value::as_array).map_or(0, Array::len),
        "scores": g.get(tokenizer::SCORES).is_some(),
        "normal_tokens": count_type(1),
        "control_tokens": count_type(3),
        "byte_tokens": count_type(6),
        "user_defined_tokens": count_type(4),
        "bos": special(tokenizer::BOS_ID),
        "eos": special(tokenizer::EOS_ID),
        "eot": special(tokenizer::EOT_ID),
        "add_bos": g.get(tokenizer::ADD_BOS).and_then(Value::as_bool),
        "chat_template_chars": g.get(tokenizer::CHAT_TEMPLATE).and_then(Value::as_str).map(str::len),
    }))
}

fn hyper_json(c: &ModelConfig) -> serde_json::Value {
    let n_swa = c.swa_layers.iter().filter(|&&s| s).count();
    let pattern: String = c
        .swa_layers
        .iter()
        .map(|&s| if s { 'S' } else { 'F' })
        .collect();
    json!({
        "layers": c.n_layer,
        "n_embd": c.n_embd,
        "n_ff": c.n_ff,
        "heads": c.n_head,
        "kv_heads": c.n_head_kv,
        "head_dim": c.head_dim,
        "head_dim_v": c.head_dim_v,
        "vocab": c.n_vocab,
        "context_length": c.n_ctx_train,
        "rms_eps": c.rms_eps,
        "post_norm_eps": c.post_norm_eps,
        "sliding_window": c.sliding_window,
        "sliding_layers": n_swa,
        "full_layers": c.n_layer - n_swa,
        "layer_pattern": pattern,
        "rope_mode": format!("{:?}", c.rope_mode).to_lowercase(),
        "rope_base": c.rope_base,
        "rope_base_swa": c.rope_base_swa,
        "rope_on_full_layers": c.rope_on_full_layers,
        "attn_scale": c.attn_scale,
        "final_logit_softcapping": c.softcap,
        "logit_scale": c.logit_scale,
        "embd_scale": c.embd_scale,
        "ffn_activation": format!("{:?}", c.ffn_activation).to_lowercase(),
        "attn_gate": c.attn_gate,
        "tied_output": c.tied_output,
    })
}

fn sha256_file(path: &PathBuf) -> anyhow::Result<String> {
    let mut f = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(format!("{:x}", h.finalize()))
}

fn totals(g: &Gguf) -> Totals {
    let mut by_type: BTreeMap<String, TypeTotal> = BTreeMap::new();
    let (mut params, mut bytes) = (0u64, 0u64);
    for t in g.tensors() {
        params += t.n_elements;
        bytes += t.n_bytes;
        let e = by_type.entry(t.ty.name().to_string()).or_insert(TypeTotal {
            tensors: 0,
            parameters: 0,
            bytes: 0,
        });
        e.tensors += 1;
        e.parameters += t.n_elements;
        e.bytes += t.n_bytes;
    }
    Totals {
        tensors: g.tensors().len(),
        parameters: params,
        bytes,
        bits_per_weight: if params > 0 {
            bytes as f64 * 8.0 / params as f64
        } else {
            0.0
        },
        by_type,
    }
}

pub fn run(a: InspectArgs) -> anyhow::Result<ExitCode> {
    let path = match a.file {
        Some(p) => p,
        None => crate::paths::default_model()?,
    };
    let sha = if a.sha256 {
        Some(sha256_file(&path)?)
    } else {
        None
    };
    let g = match Gguf::open(&path) {
        Ok(g) => g,
        Err(e) => {
            if a.json {
                let doc = json!({
                    "file": path.display().to_string(),
                    "sha256": sha,
                    "verdict": { "valid": false, "runnable": false, "problems": [e.to_string()] },
                });
                println!("{}", serde_json::to_string_pretty(&doc)?);
            } else {
                println!("file     {}", path.display());
                println!("verdict  INVALID: {e}");
            }
            return Ok(ExitCode::from(1));
        }
    };

    let mut problems = Vec::new();
    let config = match ModelConfig::from_gguf(&g) {
        Ok(c) => Some(c),
        Err(e) => {
            problems.push(e.to_string());
            None
        }
    };
    for t in g.tensors() {
        if !muser_quant::is_supported(t.ty) {
            problems.push(format!(
                "tensor {} has type {}, which Muser has no kernels for",
                t.name, t.ty
            ));
        }
    }
    let verdict = Verdict {
        valid: true,
        runnable: problems.is_empty(),
        problems,
    };
    let tensors: Vec<TensorRow> = g
        .tensors()
        .iter()
        .map(|t| TensorRow {
            name: t.name.clone(),
            ty: t.ty.name().to_string(),
            shape: t.shape.clone(),
            elements: t.n_elements,
            bytes: t.n_bytes,
            offset: t.absolute_offset(g.data_offset()),
        })
        .collect();
    let totals = totals(&g);
    let tok = tokenizer_summary(&g);

    if a.json {
        let metadata: Vec<serde_json::Value> = g
            .metadata()
            .iter()
            .map(|(k, v)| json!({ "key": k, "type": format!("{:?}", v.value_type()).to_lowercase(), "value": value_json(v) }))
            .collect();
        let doc = json!({
            "file": path.display().to_string(),
            "file_bytes": g.file_size(),
            "sha256": sha,
            "gguf_version": g.version(),
            "alignment": g.alignment(),
            "data_offset": g.data_offset(),
            "architecture": g.architecture(),
            "hyperparameters": config.as_ref().map(hyper_json),
            "tokenizer": tok,
            "metadata": metadata,
            "tensors": tensors,
            "totals": totals,
            "verdict": verdict,
        });
        crate::output::write_stdout(&(serde_json::to_string_pretty(&doc)? + "\n"))?;
        return Ok(ExitCode::SUCCESS);
    }

    let text = crate::inspect_text::render(crate::inspect_text::TextReport {
        path: &path,
        g: &g,
        sha: sha.as_deref(),
        hyper: config.as_ref().map(hyper_json),
        tok,
        tensors: &tensors,
        totals: &totals,
        verdict_valid: verdict.valid,
        verdict_runnable: verdict.runnable,
        problems: &verdict.problems,
        all: a.all,
    });
    crate::output::write_stdout(&text)?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn human_bytes(b: u64) -> String {
    const U: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut x = b as f64;
    let mut i = 0;
    while x >= 1024.0 && i < U.len() - 1 {
        x /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{b} B")
    } else {
        format!("{x:.2} {}", U[i])
    }
}
