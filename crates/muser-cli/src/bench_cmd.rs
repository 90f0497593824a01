//! `muser bench`: llama-bench-style throughput of the CPU route — prompt processing (`pp N`:
//! N tokens in one eval, logits of the last only) and text generation (`tg N`: N single-token
//! evals) — with a warm-up run, several repetitions, median and spread, peak RSS, and the route
//! identity. `--json` prints one JSON document (the receipts in docs/ are built from it by
//! `scripts/bench-cpu.py`, which runs the pinned llama-bench in the same run).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use muser_engine::cpu::Logits;
use muser_engine::Model;
use serde_json::json;

use crate::engine_opts::EngineOpts;

#[derive(Args)]
pub struct BenchArgs {
    /// GGUF model (default: the default model).
    #[arg(short, long)]
    model: Option<PathBuf>,
    /// Prompt lengths to time (comma separated; empty = none).
    #[arg(short = 'p', long, value_delimiter = ',', default_value = "128,512")]
    pp: Vec<usize>,
    /// Generated tokens to time (comma separated; empty = none).
    #[arg(short = 'n', long, value_delimiter = ',', default_value = "128")]
    tg: Vec<usize>,
    /// Context depths: each test runs after this many tokens already in the context
    /// (prefilled untimed, like llama-bench's `-d`).
    #[arg(short = 'd', long, value_delimiter = ',', default_value = "0")]
    depth: Vec<usize>,
    /// Batched decode: for each listed row count B, the `tg` tests run B sequences together
    /// (one token of each per step, packed rows of one graph; CUDA only) and report the
    /// aggregate tok/s and its ratio to B = 1 (comma separated; empty = none).
    #[arg(short = 'b', long, value_delimiter = ',')]
    batch: Vec<usize>,
    /// Repetitions (after one warm-up).
    #[arg(short, long, default_value_t = 3)]
    reps: usize,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    engine: EngineOpts,
}

/// Peak resident set size of this process in bytes (Linux `ru_maxrss`).
pub fn peak_rss_bytes() -> u64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/status") else {
        return 0;
    };
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn tokens(n: usize, n_vocab: usize, seed: usize) -> Vec<u32> {
    // Ordinary token ids away from the special ranges at either end of the vocabulary.
    let span = (n_vocab / 2).max(1);
    (0..n)
        .map(|i| (100 + (i * 7919 + seed * 104_729) % span) as u32)
        .collect()
}

fn stats(samples: &[f64]) -> (f64, f64) {
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    let median = s[s.len() / 2];
    let mean = s.iter().sum::<f64>() / s.len() as f64;
    let sd = (s.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / s.len() as f64).sqrt();
    (median, sd)
}

pub fn run(a: BenchArgs) -> anyhow::Result<ExitCode> {
    let path = match &a.model {
        Some(p) => p.clone(),
        None => crate::paths::default_model()?,
    };
    let model = Model::load(&path).with_context(|| format!("loading {}", path.display()))?;
    let n_vocab = model.config.n_vocab;
    let max_depth = a.depth.iter().copied().max().unwrap_or(0);
    let max_len = a.pp.iter().chain(&a.tg).copied().max().unwrap_or(1) + max_depth;
    let opts = a.engine.cpu_options(max_len)?;
    let n_seq = a.batch.iter().copied().max().unwrap_or(1).max(1);
    // One session for all tests (the CUDA route uploads weights once); cleared per repetition.
    let mut s = a.engine.open_session_seqs(&model, max_len, n_seq)?;
    let route = s.route_identity();
    let reps = a.reps.max(1);
    let mut results = Vec::new();
    for &d in &a.depth {
        let ctx = tokens(d, n_vocab, 5);
        let tests =
            a.pp.iter()
                .filter(|&&n| n > 0)
                .map(|&n| (true, n))
                .chain(a.tg.iter().filter(|&&n| n > 0).map(|&n| (false, n)));
        for (prompt, n) in tests {
            let name = match (prompt, d) {
                (true, 0) => format!("pp{n}"),
                (false, 0) => format!("tg{n}"),
                (true, _) => format!("pp{n}@d{d}"),
                (false, _) => format!("tg{n}@d{d}"),
            };
            let mut tps = Vec::new();
            let mut fill_s = Vec::new();
            let mut gaps = Vec::new();
            for rep in 0..=reps {
                s.clear();
                if d > 0 {
                    let t = Instant::now();
                    s.eval(&ctx, Logits::Last)?;
                    fill_s.push(t.elapsed().as_secs_f64());
                }
                let toks = tokens(n, n_vocab, rep + if prompt { 0 } else { 17 });
                if rep == reps {
                    s.profile_reset(); // the report covers this repetition's timed part only
                }
                s.take_step_times(); // the device clock (MUSER_CUDA_STEP_TIMES=1) from here
                let t = Instant::now();
                // The rows are borrowed, not copied (as a decode loop reads them).
                if prompt {
                    s.eval_ref(&toks, Logits::Last)?;
                } else {
                    for &tok in &toks {
                        s.eval_ref(&[tok], Logits::Last)?;
                    }
                }
                let secs = t.elapsed().as_secs_f64();
                if let (Some((gpu_s, steps)), true) = (s.take_step_times(), rep > 0) {
                    gaps.push(host_gap(secs, gpu_s, steps));
                }
                if rep == reps {
                    if let Some(r) = s.profile_report() {
                        eprintln!("phase profile, {name} (last repetition, timed part):\n{r}");
                    }
                }
                if rep > 0 {
                    tps.push(n as f64 / secs);
                }
            }
            let (median, sd) = stats(&tps);
            let mut r = json!({"test": name, "n_tokens": n, "depth": d, "tok_per_s": median, "stddev": sd, "samples": tps});
            if d > 0 {
                // The untimed context fill (prefill of `d` tokens), per repetition incl. warm-up.
                r["fill_seconds"] = json!(fill_s);
            }
            if !gaps.is_empty() {
                r["step_times"] = json!(gaps);
            }
            results.push(r);
        }
    }
    results.extend(batched_tests(&a, &mut s, n_vocab)?);
    // Peak RSS before the bandwidth measurement (the CPU one reads a 1 GiB buffer of its own).
    let peak_rss = peak_rss_bytes();
    let bw = s.bandwidth_facts()?;
    for r in results
        .iter_mut()
        .filter(|r| r["test"].as_str().is_some_and(|t| t.starts_with("tg")))
    {
        // Decode reads every weight once per step (one token of each of `batch` sequences).
        let steps = r["tok_per_s"].as_f64().unwrap_or(0.0) / r["batch"].as_f64().unwrap_or(1.0);
        let gbps = bw.decode_weight_bytes as f64 * steps / 1e9;
        r["weight_gb_per_s"] = json!(gbps);
        r[format!("pct_of_{}_bandwidth", bw.kind)] = json!(100.0 * gbps / bw.gb_per_s);
    }
    let mut doc = json!({
        "engine": "muser",
        "commit": env!("MUSER_GIT_COMMIT"),
        "model": path.display().to_string(),
        "route": route,
        "load_report": s.load_report(),
        "decode_weight_bytes": bw.decode_weight_bytes,
        "kernel_modules": s.module_fingerprints(),
        "threads": opts.threads,
        "reps": reps,
        "peak_rss_bytes": peak_rss,
        "results": results,
    });
    // "copy_gb_per_s" (CUDA device copy) or "read_gb_per_s" (CPU parallel read).
    doc[format!("{}_gb_per_s", bw.kind)] = json!(bw.gb_per_s);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        println!("route {route}, threads {}", opts.threads);
        for r in &results {
            let bw = match (
                r["weight_gb_per_s"].as_f64(),
                r[format!("pct_of_{}_bandwidth", bw.kind)].as_f64(),
            ) {
                (Some(g), Some(p)) => {
                    format!(
                        "  ({g:.1} GB/s of weights, {p:.0}% of {} bandwidth)",
                        bw.kind
                    )
                }
                _ => String::new(),
            };
            let fill = match r["fill_seconds"].as_array().and_then(|f| f.last()) {
                Some(f) => format!("  (context filled in {:.2} s)", f.as_f64().unwrap_or(0.0)),
                None => String::new(),
            };
            let test = match r["batch"].as_u64() {
                Some(b) => format!("{} x{b}", r["test"].as_str().unwrap_or("?")),
                None => r["test"].as_str().unwrap_or("?").to_string(),
            };
            let speedup = match r["speedup_vs_batch1"].as_f64() {
                Some(x) => format!("  ({x:.2}x one sequence)"),
                None => String::new(),
            };
            // MUSER_CUDA_STEP_TIMES=1: the last repetition's split of a step.
            let split = match r["step_times"].as_array().and_then(|g| g.last()) {
                Some(g) => format!(
                    "  (per step: device {:.1} µs, host {:.1} µs)",
                    g["device_us_per_step"].as_f64().unwrap_or(0.0),
                    g["host_us_per_step"].as_f64().unwrap_or(0.0)
                ),
                None => String::new(),
            };
            println!(
                "{:>14} {:>10.2} ± {:.2} tok/s{bw}{fill}{speedup}{split}",
                test,
                r["tok_per_s"].as_f64().unwrap_or(0.0),
                r["stddev"].as_f64().unwrap_or(0.0)
            );
        }
        println!("peak RSS {:.1} MiB", peak_rss as f64 / (1u64 << 20) as f64);
    }
    Ok(ExitCode::SUCCESS)
}

/// Per timed repetition with `MUSER_CUDA_STEP_TIMES=1`: the steps' device time (events around
/// each graph or step's launches) and the wall time's rest per step — the host's share: its
/// wake-up after the step, the copies, the next launch.
fn host_gap(wall_s: f64, gpu_s: f64, steps: u64) -> serde_json::Value {
    let per = |x: f64| 1e6 * x / steps.max(1) as f64;
    json!({"steps": steps, "device_us_per_step": per(gpu_s), "host_us_per_step": per(wall_s - gpu_s)})
}

/// The batched decode tests (`--batch`): per depth, `tg` length and row count B, B sequences
/// (each filled to the depth, untimed) decode `n` tokens each in `n` packed steps; tok/s is
/// the aggregate (B·n / seconds).
fn batched_tests(
    a: &BenchArgs,
    s: &mut muser_engine::session::Session<'_>,
    n_vocab: usize,
) -> anyhow::Result<Vec<serde_json::Value>> {
    let reps = a.reps.max(1);
    let mut out = Vec::new();
    for &d in &a.depth {
        let ctx = tokens(d, n_vocab, 5);
        for &n in a.tg.iter().filter(|&&n| n > 0) {
            let mut one = None;
            for &bsz in a.batch.iter().filter(|&&b| b > 0) {
                let name = match d {
                    0 => format!("tg{n}"),
                    _ => format!("tg{n}@d{d}"),
                };
                let (mut tps, mut gaps) = (Vec::new(), Vec::new());
                for rep in 0..=reps {
                    s.clear();
                    if d > 0 {
                        for seq in 0..bsz {
                            s.eval_seq(seq, &ctx, Logits::Last)?;
                        }
                    }
                    // Each sequence its own tokens.
                    let toks: Vec<Vec<u32>> = (0..bsz)
                        .map(|seq| tokens(n, n_vocab, rep + 17 + 31 * seq))
                        .collect();
                    s.take_step_times();
                    let t = Instant::now();
                    for i in 0..n {
                        let rows: Vec<(usize, u32)> = toks
                            .iter()
                            .enumerate()
                            .map(|(seq, t)| (seq, t[i]))
                            .collect();
                        s.decode_batch_ref(&rows)?;
                    }
                    let secs = t.elapsed().as_secs_f64();
                    if let (Some((gpu_s, steps)), true) = (s.take_step_times(), rep > 0) {
                        gaps.push(host_gap(secs, gpu_s, steps));
                    }
                    if rep > 0 {
                        tps.push((bsz * n) as f64 / secs);
                    }
                }
                let (median, sd) = stats(&tps);
                let mut r = json!({"test": name, "batch": bsz, "n_tokens": n, "depth": d,
                    "tok_per_s": median, "stddev": sd, "samples": tps,
                    "per_sequence_tok_per_s": median / bsz as f64});
                if !gaps.is_empty() {
                    r["step_times"] = json!(gaps);
                }
                if bsz == 1 {
                    one = Some(median);
                }
                if let Some(o) = one {
                    r["speedup_vs_batch1"] = json!(median / o);
                }
                out.push(r);
            }
        }
    }
    Ok(out)
}
