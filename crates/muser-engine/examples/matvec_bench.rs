//! Times the CPU route's matmul on a model's matrices (decode: one token; prefill: 64 tokens)
//! and a plain memory-read pass, to see how close the kernels are to memory bandwidth.
//! Usage: cargo run --release -p muser-engine --example matvec_bench -- MODEL.gguf [threads]
//! Environment: `BENCH_ACTS=a16,a8` (activation formats, alternated per matrix), `BENCH_TOKENS=64`
//! (the prefill batch), `BENCH_NOISE=1` (random activations instead of a ramp), `BENCH_FFN=1`
//! (in-cache tests on the FFN up matrix instead of the output projection).

use std::time::Instant;

use muser_engine::cpu::matmul::{matmul, ActFormat, Acts, WeightSource};
use muser_engine::Model;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let path = args
        .get(1)
        .ok_or("usage: matvec_bench MODEL.gguf [threads]")?;
    let threads: usize = args.get(2).map_or(Ok(1), |s| s.parse())?;
    let model = Model::load(std::path::Path::new(path))?;
    let g = model.gguf();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()?;
    let bytes = g.as_bytes();
    use rayon::prelude::*;
    for pass in 0..3 {
        let t = Instant::now();
        let sum: u64 = pool.install(|| {
            bytes
                .par_chunks(1 << 20)
                .map(|c| {
                    c.chunks(64)
                        .map(|l| u64::from(l[0]) + u64::from(l[l.len() - 1]))
                        .sum::<u64>()
                })
                .sum()
        });
        let dt = t.elapsed().as_secs_f64();
        println!(
            "read pass {pass}: {:.2} GB/s (checksum {sum})",
            bytes.len() as f64 / dt / 1e9
        );
    }
    let w = &model.weights;
    {
        // In-cache kernel throughput: one row, many times.
        let m = if std::env::var_os("BENCH_FFN").is_some() {
            &w.layers[0].ffn_up
        } else {
            &w.output
        };
        let row = m.row(g, 0);
        let x: Vec<f32> = (0..m.n_in)
            .map(|i| ((i * 7919) % 1000) as f32 * 1e-3 - 0.5)
            .collect();
        let mut a = vec![bytemuck::Zeroable::zeroed(); muser_quant::a16::n_groups(m.n_in)];
        muser_quant::a16::quantize_row(&x, &mut a)?;
        let n = 200_000;
        let t = Instant::now();
        let mut s = 0f32;
        for _ in 0..n {
            s += muser_quant::a16::dot(m.ty, std::hint::black_box(row), &a)?;
        }
        let dt = t.elapsed().as_secs_f64();
        println!(
            "in-cache {} dot: {:.1} ns/row, {:.2} GMAC/s ({s})",
            m.ty,
            dt / n as f64 * 1e9,
            (m.n_in * n) as f64 / dt / 1e9
        );
        // In-cache tile throughput: 256 rows (L2-resident) through the 4-row decode tile.
        let rows = 256;
        let wr = &m.bytes(g)[..rows * m.row_bytes];
        let mut out = vec![0f32; rows];
        let reps = 2000;
        let t = Instant::now();
        for _ in 0..reps {
            muser_quant::a16::matmul_rows(
                m.ty,
                std::hint::black_box(wr),
                m.row_bytes,
                &[&a],
                &mut out,
            )?;
        }
        let dt = t.elapsed().as_secs_f64();
        println!(
            "in-cache {} 4-row tiles: {:.2} GB/s, {:.2} GMAC/s",
            m.ty,
            (wr.len() * reps) as f64 / dt / 1e9,
            (m.n_in * rows * reps) as f64 / dt / 1e9
        );
    }
    let mats = [
        &w.output,
        &w.layers[0].wq,
        &w.layers[0].ffn_up,
        &w.layers[0].ffn_down,
        &w.layers[0].wv,
    ];
    // Activation formats to compare, alternating per matrix (`BENCH_ACTS=a16,a8`; default both).
    let formats: Vec<ActFormat> = std::env::var("BENCH_ACTS")
        .unwrap_or_else(|_| "a16,a8".into())
        .split(',')
        .map(|f| match f {
            "a8" => Ok(ActFormat::A8),
            "a16" => Ok(ActFormat::A16),
            "q8" => Ok(ActFormat::Q8),
            other => Err(format!(
                "BENCH_ACTS: unknown format {other:?} (a16, a8, q8)"
            )),
        })
        .collect::<Result<_, _>>()?;
    // Prefill batch size (`BENCH_TOKENS`, default 64).
    let prefill: usize = std::env::var("BENCH_TOKENS").map_or(Ok(64), |s| s.parse())?;
    let noise = std::env::var_os("BENCH_NOISE").is_some();
    for n_tok in [1usize, prefill] {
        for (m, fmt) in mats
            .iter()
            .flat_map(|m| formats.iter().map(move |f| (*m, *f)))
        {
            // `BENCH_NOISE=1`: pseudo-random activations with a wide range instead of a ramp.
            let x: Vec<f32> = (0..m.n_in * n_tok)
                .map(|i| {
                    if noise {
                        let h = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
                        let u = h as f32 / (1u64 << 24) as f32 - 0.5;
                        u * u * u * 40.0
                    } else {
                        ((i * 7919) % 1000) as f32 * 1e-3 - 0.5
                    }
                })
                .collect();
            let mut out = vec![0f32; m.n_out * n_tok];
            let reps = if n_tok == 1 { 5 } else { 2 };
            let t = Instant::now();
            for _ in 0..reps {
                let mut acts = Acts::new(&x, m.n_in, fmt);
                pool.install(|| matmul(WeightSource::mapped(g), m, &mut acts, &mut out))?;
            }
            let dt = t.elapsed().as_secs_f64() / reps as f64;
            let wbytes = (m.row_bytes * m.n_out) as f64;
            println!(
                "{:<34} {:>6} tok  {:>8.2} ms  {:>7.2} GB/s weights  {:>7.2} GMAC/s",
                format!("{} ({}, {})", m.name, m.ty, fmt.name()),
                n_tok,
                dt * 1e3,
                wbytes / dt / 1e9,
                (m.n_in * m.n_out * n_tok) as f64 / dt / 1e9
            );
        }
    }
    Ok(())
}
