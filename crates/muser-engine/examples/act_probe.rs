//! Research tool (issue 5): what an activation format costs in accuracy on its own. The f64
//! oracle with every matmul input quantized by the format (`Oracle::with_act_probe`) against the
//! oracle proper, on the teacher-forced token ids of a parity receipt (`scripts/parity.py`'s
//! `prompts[].tokens`), pooled over its prompts as the parity tables are. Prints one row per
//! format and writes a JSON receipt. Not a route: the routes' own figures come from parity.py.
//!
//! `cargo run --release -p muser-engine --example act_probe -- MODEL RECEIPT.json OUT.json
//!  [a8/32,a8/64,a8/128,a8/256,a16/32]`   (FORMAT = a8 | a16, then the group size, or f16 (the
//!  input rows rounded to f16 through a power-of-two row scale); then optionally `+w16` (every
//!  matmul weight rounded to f16 after exact dequantization) and `-SITE.SITE…`: sites left
//!  unrounded — qkv, o, gateup, down, output; e.g. `a8/32-qkv` is A8 everywhere but the attention
//!  projections' input, `f16+w16` what f16 tensor-core products of dequantized weights see)

use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use muser_engine::metrics::{compare, Comparison};
use muser_engine::oracle::{ActProbe, Rounding, Site};
use muser_engine::{Model, Oracle};

fn parse_probe(s: &str) -> Result<ActProbe> {
    let (s, sites) = s.split_once('-').unwrap_or((s, ""));
    let mut skip = 0u8;
    for name in sites.split('.').filter(|n| !n.is_empty()) {
        let site = Site::ALL
            .into_iter()
            .find(|x| x.name() == name)
            .with_context(|| format!("unknown site {name} (qkv, o, gateup, down, output)"))?;
        skip |= site.bit();
    }
    let (s, weights_f16) = match s.strip_suffix("+w16") {
        Some(s) => (s, true),
        None => (s, false),
    };
    let rounding = if s == "f16" {
        Rounding::F16
    } else {
        let (f, g) = s
            .split_once('/')
            .context("a format is f16 or NAME/GROUP, e.g. a8/64")?;
        let qmax = match f {
            "a8" => 127.0,
            "a16" => 32767.0,
            other => bail!("unknown activation format {other} (a8, a16, f16)"),
        };
        let group: usize = g.parse().with_context(|| format!("group size {g}"))?;
        if group == 0 || !group.is_multiple_of(32) {
            bail!("group size {group}: a positive multiple of 32");
        }
        Rounding::Int { qmax, group }
    };
    Ok(ActProbe {
        rounding,
        weights_f16,
        skip,
    })
}

/// Logits of every prompt, concatenated (`[positions][n_vocab]`).
fn logits(model: &Model, prompts: &[Vec<u32>], probe: Option<ActProbe>) -> Result<Vec<f32>> {
    let mut all = Vec::new();
    for toks in prompts {
        let mut o = match probe {
            Some(p) => Oracle::with_act_probe(model, p),
            None => Oracle::new(model),
        };
        let rows = o.eval(toks)?;
        all.extend(rows.iter().flatten().map(|&v| v as f32));
    }
    Ok(all)
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        bail!("usage: act_probe MODEL RECEIPT.json OUT.json [a8/32,a8/64,...]");
    }
    let model = Model::load(Path::new(&args[1])).context("model")?;
    let receipt: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&args[2]).context("receipt")?)?;
    let prompts: Vec<Vec<u32>> = receipt["prompts"]
        .as_array()
        .context("receipt has no prompts")?
        .iter()
        .map(|p| {
            p["tokens"]
                .as_array()
                .context("prompt without tokens")?
                .iter()
                .map(|t| t.as_u64().map(|v| v as u32).context("token id"))
                .collect()
        })
        .collect::<Result<_>>()?;
    let specs = args
        .get(4)
        .map_or("a8/32,a8/64,a8/128,a8/256,a16/32", String::as_str);
    let probes: Vec<(&str, ActProbe)> = specs
        .split(',')
        .map(|spec| Ok((spec, parse_probe(spec)?)))
        .collect::<Result<_>>()?;
    let nv = model.config.n_vocab;
    let t = Instant::now();
    let want = logits(&model, &prompts, None)?;
    eprintln!(
        "oracle: {} positions in {:.1} s",
        want.len() / nv,
        t.elapsed().as_secs_f64()
    );
    let mut rows: Vec<(String, Comparison)> = Vec::new();
    println!("| format | mean KL | top-1 | max Δlogp (plausible) |");
    println!("|---|---:|---:|---:|");
    for (name, p) in probes {
        let t = Instant::now();
        let got = logits(&model, &prompts, Some(p))?;
        let c = compare(&want, &got, nv);
        println!(
            "| {name} | {:.3e} | {:.4} | {:.3} |   ({:.1} s)",
            c.mean_kl,
            c.top1,
            c.max_plausible_dlogp,
            t.elapsed().as_secs_f64()
        );
        rows.push((name.to_string(), c));
    }
    let out = serde_json::json!({
        "what": "activation-format probe: the f64 oracle with matmul inputs quantized, vs the oracle (examples/act_probe.rs)",
        "model": args[1],
        "token_ids_from": args[2],
        "fixture": receipt["fixture"],
        "model_sha256": receipt["model_sha256"],
        "positions": want.len() / nv,
        "probes": rows.iter().map(|(n, c)| serde_json::json!({"format": n, "vs_oracle": c})).collect::<Vec<_>>(),
    });
    std::fs::write(&args[3], serde_json::to_string_pretty(&out)? + "\n")?;
    Ok(())
}
