//! `muser eval`: evaluate a fixed token sequence (teacher-forced) and dump every position's
//! full logit row — the input of the parity tools and of external checks.
//!
//! Output: raw little-endian f32, `[n_tokens][n_vocab]`, and `OUT.json` with the route
//! identity, model, token count and timings.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::{Args, ValueEnum};
use muser_engine::cpu::Logits;
use muser_engine::{Model, Oracle};
use serde_json::json;

use crate::engine_opts::{BackendArg, EngineOpts};

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum EvalRoute {
    /// The fast CPU route.
    Cpu,
    /// The CUDA route (error without a device).
    Cuda,
    /// The f64 oracle (slow; small models).
    Oracle,
}

#[derive(Args)]
pub struct EvalArgs {
    /// GGUF model (default: the default model).
    #[arg(short, long)]
    model: Option<PathBuf>,
    /// Token ids: a JSON array, or whitespace/comma separated integers.
    #[arg(long)]
    tokens: PathBuf,
    /// Where to write the logit rows (f32 LE).
    #[arg(long)]
    dump_logits: PathBuf,
    #[arg(long, value_enum, default_value = "cpu")]
    route: EvalRoute,
    #[command(flatten)]
    engine: EngineOpts,
}

/// Parse a token file: a JSON array or integers separated by whitespace or commas.
pub fn read_tokens(path: &PathBuf) -> anyhow::Result<Vec<u32>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let t = text.trim();
    if t.starts_with('[') {
        return serde_json::from_str(t)
            .with_context(|| format!("{}: not a JSON array of token ids", path.display()));
    }
    t.split(|c: char| c.is_whitespace() || c == ',')
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<u32>()
                .with_context(|| format!("{}: '{s}' is not a token id", path.display()))
        })
        .collect()
}

pub fn run(a: EvalArgs) -> anyhow::Result<ExitCode> {
    let path = match a.model {
        Some(p) => p,
        None => crate::paths::default_model()?,
    };
    let tokens = read_tokens(&a.tokens)?;
    anyhow::ensure!(!tokens.is_empty(), "{}: no tokens", a.tokens.display());
    let t0 = Instant::now();
    let model = Model::load(&path).with_context(|| format!("loading {}", path.display()))?;
    let load_s = t0.elapsed().as_secs_f64();
    let n_vocab = model.config.n_vocab;
    let t1 = Instant::now();
    let (logits, route) = match a.route {
        EvalRoute::Cpu | EvalRoute::Cuda => {
            let mut engine = a.engine.clone();
            engine.backend = match a.route {
                EvalRoute::Cuda => BackendArg::Cuda,
                _ => BackendArg::Cpu,
            };
            let mut s = engine.open_session(&model, tokens.len().max(a.engine.ctx.unwrap_or(0)))?;
            let route = s.route_identity();
            (s.eval(&tokens, Logits::All)?, route)
        }
        EvalRoute::Oracle => {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(a.engine.threads())
                .build()
                .context("thread pool")?;
            let rows = pool.install(|| Oracle::new(&model).eval(&tokens))?;
            let flat: Vec<f32> = rows.iter().flatten().map(|&v| v as f32).collect();
            (flat, "oracle:f64".to_string())
        }
    };
    let eval_s = t1.elapsed().as_secs_f64();
    let mut f = std::io::BufWriter::new(
        std::fs::File::create(&a.dump_logits)
            .with_context(|| format!("creating {}", a.dump_logits.display()))?,
    );
    for v in &logits {
        f.write_all(&v.to_le_bytes())?;
    }
    f.flush()?;
    let receipt = json!({
        "what": "muser logit rows (teacher-forced)",
        "model": path.display().to_string(),
        "route": route,
        "tokens": tokens.len(),
        "n_vocab": n_vocab,
        "threads": a.engine.threads(),
        "load_s": load_s,
        "eval_s": eval_s,
    });
    let side = PathBuf::from(format!("{}.json", a.dump_logits.display()));
    std::fs::write(&side, serde_json::to_string_pretty(&receipt)? + "\n")?;
    eprintln!(
        "{}: {} x {} logits, route {route}, eval {eval_s:.2} s",
        a.dump_logits.display(),
        tokens.len(),
        n_vocab
    );
    Ok(ExitCode::SUCCESS)
}
