//! `muser parity`: compare logit dumps (from `muser eval` and `scripts/comparator-logits.py`)
//! against the oracle's, with the metrics of BRIEF §2 (`muser_engine::metrics`).
//!
//! Prints a table and, with `--json`, writes one JSON document: for each route its distance to
//! the oracle, and for every pair of routes their agreement.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use muser_engine::metrics::{compare, Comparison};
use serde_json::json;

#[derive(Args)]
pub struct ParityArgs {
    /// Oracle logits (f32 LE rows).
    #[arg(long)]
    oracle: PathBuf,
    /// Route logits as NAME=FILE (repeatable), e.g. muser-cpu=cpu.f32 llama-cpu=llama.f32.
    #[arg(long = "route", required = true)]
    routes: Vec<String>,
    /// Number of positions (rows) in every file.
    #[arg(long)]
    positions: usize,
    /// Write the results here as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
}

fn read_f32(p: &PathBuf) -> anyhow::Result<Vec<f32>> {
    let b = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?;
    anyhow::ensure!(
        b.len() % 4 == 0,
        "{}: not a whole number of f32",
        p.display()
    );
    Ok(b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

pub fn run(a: ParityArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(a.positions > 0, "--positions must be > 0");
    let oracle = read_f32(&a.oracle)?;
    anyhow::ensure!(
        oracle.len() % a.positions == 0,
        "{}: {} values are not {} whole rows",
        a.oracle.display(),
        oracle.len(),
        a.positions
    );
    let n_vocab = oracle.len() / a.positions;
    let mut routes = Vec::new();
    for r in &a.routes {
        let (name, file) = r
            .split_once('=')
            .with_context(|| format!("--route '{r}': expected NAME=FILE"))?;
        let v = read_f32(&PathBuf::from(file))?;
        anyhow::ensure!(
            v.len() == oracle.len(),
            "{file}: {} values, the oracle has {}",
            v.len(),
            oracle.len()
        );
        routes.push((name.to_string(), v));
    }
    let vs_oracle: Vec<(String, Comparison)> = routes
        .iter()
        .map(|(n, v)| (n.clone(), compare(&oracle, v, n_vocab)))
        .collect();
    let mut pairs = Vec::new();
    for i in 0..routes.len() {
        for j in i + 1..routes.len() {
            pairs.push((
                routes[i].0.clone(),
                routes[j].0.clone(),
                compare(&routes[i].1, &routes[j].1, n_vocab),
            ));
        }
    }
    println!(
        "{:<16} {:>12} {:>12} {:>8} {:>14} {:>10}",
        "vs oracle", "mean KL", "max KL", "top-1", "max |dlogp|", "1st div"
    );
    for (n, c) in &vs_oracle {
        println!(
            "{:<16} {:>12.4e} {:>12.4e} {:>8.4} {:>14.4e} {:>10}",
            n,
            c.mean_kl,
            c.max_kl,
            c.top1,
            c.max_plausible_dlogp,
            c.first_divergence.map_or("-".into(), |p| p.to_string())
        );
    }
    for (x, y, c) in &pairs {
        println!(
            "{:<16} {:>12.4e} {:>12.4e} {:>8.4} {:>14.4e} {:>10}",
            format!("{x}~{y}"),
            c.mean_kl,
            c.max_kl,
            c.top1,
            c.max_plausible_dlogp,
            c.first_divergence.map_or("-".into(), |p| p.to_string())
        );
    }
    if let Some(p) = &a.json {
        let doc = json!({
            "positions": a.positions,
            "n_vocab": n_vocab,
            "vs_oracle": vs_oracle.iter().map(|(n, c)| json!({"route": n, "metrics": c})).collect::<Vec<_>>(),
            "pairs": pairs.iter().map(|(x, y, c)| json!({"a": x, "b": y, "metrics": c})).collect::<Vec<_>>(),
        });
        std::fs::write(p, serde_json::to_string_pretty(&doc)? + "\n")?;
    }
    Ok(ExitCode::SUCCESS)
}
