//! In-process A/B of the A8 prefill tiles on a model's matrices: one thread, the engine's
//! 32-row steps over a whole matrix, each (SIMD level, tile shape) in turn, many rounds,
//! best-of and median GMAC/s. Alternating in one process is the only comparison this shared VM
//! makes meaningful (its speed drifts by ±15% within minutes).
//!
//! Usage: cargo run --release -p muser-quant --example a8_tiles -- MODEL.gguf [tokens] [rounds]
//! `A8_SHAPES=avx2:2x4,avx512vnni:4x4,repack:4x4,…` picks the variants (default: every shape
//! each level this CPU runs, and the repacked weights of `a8_repack` at 4x4 where AVX-512 VNNI
//! is available; `repack` runs at the `avx512vnni` level); `A8_TENSORS=blk.0.ffn_up.weight,…`
//! the matrices.

use std::time::Instant;

use muser_quant::a8::{self, BlockA8, TileShape};
use muser_quant::{a8_repack, SimdLevel};

/// A variant's level and whether it runs on repacked weights (`repack` = AVX-512 VNNI on
/// `a8_repack` rows).
fn level(name: &str) -> Result<(SimdLevel, bool), String> {
    if name == "repack" {
        return Ok((SimdLevel::Avx512Vnni, true));
    }
    let l = SimdLevel::from_name(name).ok_or_else(|| format!("unknown level {name:?}"))?;
    Ok((l, false))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let path = args
        .get(1)
        .ok_or("usage: a8_tiles MODEL.gguf [tokens] [rounds]")?;
    let tokens: usize = args.get(2).map_or(Ok(128), |s| s.parse())?;
    let rounds: usize = args.get(3).map_or(Ok(7), |s| s.parse())?;
    let g = muser_gguf::Gguf::open(std::path::Path::new(path))?;
    let variants: Vec<((SimdLevel, bool), TileShape)> = match std::env::var("A8_SHAPES") {
        Ok(v) => v
            .split(',')
            .map(|s| {
                let (l, sh) = s.split_once(':').ok_or("A8_SHAPES: level:RxT")?;
                let (r, t) = sh.split_once('x').ok_or("A8_SHAPES: level:RxT")?;
                Ok((
                    level(l)?,
                    TileShape {
                        rows: r.parse().map_err(|e| format!("{e}"))?,
                        tokens: t.parse().map_err(|e| format!("{e}"))?,
                    },
                ))
            })
            .collect::<Result<_, String>>()?,
        Err(_) => [SimdLevel::Avx2, SimdLevel::Avx512Vnni]
            .into_iter()
            .filter(|l| l.is_available())
            .flat_map(|l| {
                [(2, 4), (4, 4), (4, 3), (4, 2)]
                    .into_iter()
                    .filter(move |&(r, _)| r <= 2 || l.vnni())
                    .map(move |(rows, tokens)| ((l, false), TileShape { rows, tokens }))
            })
            .chain(SimdLevel::Avx512Vnni.is_available().then_some((
                (SimdLevel::Avx512Vnni, true),
                TileShape { rows: 4, tokens: 4 },
            )))
            .collect(),
    };
    let names: Vec<String> = std::env::var("A8_TENSORS")
        .map(|v| v.split(',').map(str::to_string).collect())
        .unwrap_or_else(|_| {
            [
                "blk.0.attn_q.weight",
                "blk.0.ffn_up.weight",
                "blk.0.ffn_down.weight",
            ]
            .map(str::to_string)
            .to_vec()
        });
    for name in &names {
        let t = g.tensor(name).ok_or_else(|| format!("no tensor {name}"))?;
        let (n_in, n_out) = (t.row_len() as usize, t.n_rows() as usize);
        let w = g.try_tensor_data(t)?;
        let row_bytes = t.row_bytes() as usize;
        let (packed, prb) = match a8_repack::row_bytes(t.ty, n_in) {
            Some(prb) if variants.iter().any(|((_, r), _)| *r) => {
                let mut p = vec![0u8; prb * n_out];
                a8_repack::repack_rows(t.ty, w, row_bytes, &mut p)?;
                (p, prb)
            }
            _ => (Vec::new(), 1),
        };
        let acts: Vec<Vec<BlockA8>> = (0..tokens)
            .map(|k| {
                let x: Vec<f32> = (0..n_in)
                    .map(|i| (((i * 7919 + k * 104_729) % 2001) as f32 - 1000.0) * 1e-3)
                    .collect();
                let mut a = vec![bytemuck::Zeroable::zeroed(); a8::n_groups(n_in)];
                a8::quantize_row(&x, &mut a).map(|_| a)
            })
            .collect::<Result<_, _>>()?;
        let ar: Vec<&[BlockA8]> = acts.iter().map(|v| &v[..]).collect();
        let mut out = vec![0f32; 32 * tokens];
        let mut times = vec![Vec::new(); variants.len()];
        let mut check: Vec<Option<u64>> = vec![None; variants.len()];
        for _ in 0..rounds {
            for (vi, &((lvl, repacked), shape)) in variants.iter().enumerate() {
                let t0 = Instant::now();
                let mut sum = 0u64;
                let (src, rb) = if repacked {
                    (&packed[..], prb)
                } else {
                    (w, row_bytes)
                };
                for rows in src.chunks(32 * rb) {
                    let o = &mut out[..rows.len() / rb * tokens];
                    if repacked {
                        a8_repack::matmul_rows_at(lvl, t.ty, rows, rb, &ar, o, shape)?;
                    } else {
                        a8::matmul_rows_shaped(lvl, t.ty, rows, rb, &ar, o, shape)?;
                    }
                    sum = o
                        .iter()
                        .fold(sum, |s, v| s.wrapping_add(u64::from(v.to_bits())));
                }
                times[vi].push(t0.elapsed().as_secs_f64());
                if *check[vi].get_or_insert(sum) != sum {
                    return Err("results changed between rounds".into());
                }
            }
        }
        let macs = (n_in * n_out * tokens) as f64;
        println!(
            "{name} ({}, {n_in} x {n_out}), {tokens} tokens, {rounds} rounds:",
            t.ty
        );
        for (((lvl, repacked), shape), ts) in variants.iter().zip(&mut times) {
            ts.sort_by(f64::total_cmp);
            println!(
                "  {:>10} {}x{}  best {:6.2}  median {:6.2} GMAC/s",
                if *repacked { "repack" } else { lvl.name() },
                shape.rows,
                shape.tokens,
                macs / ts[0] / 1e9,
                macs / ts[ts.len() / 2] / 1e9
            );
        }
        if check.iter().flatten().any(|&c| Some(c) != check[0]) {
            return Err(format!("{name}: variants disagree").into());
        }
    }
    Ok(())
}
