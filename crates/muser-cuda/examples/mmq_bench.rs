//! Kernel benchmark of the prefill matmuls on Muse Glimmer's shapes, without a model file:
//! times `mmq_*` (and, with `--t8`, the eight-token dp2a kernels) over 512 tokens and prints
//! microseconds and sub-block products per second. Route switches (`MUSER_CUDA_MMQ_*`) apply as
//! in the engine, so an A/B is two runs. A measurement tool, not a test: it asserts nothing.
//! `--q6pad`: Q6_K in the aligned repack (`mmq_q6p`); `--a8`: the A8 activation kernels
//! (`mmq_a8.cu`: `mmq_q4_k_a8`, `mmq_q6p_a8`; Q6_K in the repack), beside the A16 ones.
//!
//! `cargo run --release -p muser-cuda --example mmq_bench [-- --t8] [--q6pad] [--a8]`

use std::time::Instant;

use muser_cuda::launch::{launch, A16Matmul, Dims};
use muser_cuda::{Gpu, Kernel, Math, Module, Registry, MMQ_ROWS};
use muser_gguf::GgmlType;

fn main() {
    let t8 = std::env::args().any(|a| a == "--t8");
    let a8 = std::env::args().any(|a| a == "--a8");
    let q6pad = a8 || std::env::args().any(|a| a == "--q6pad");
    match Gpu::probe() {
        Ok(Some(_)) => {}
        _ => {
            eprintln!("mmq_bench: no CUDA device");
            std::process::exit(2);
        }
    }
    let gpu = Gpu::open(0).expect("open GPU");
    let mut modules = Module::ENGINE.to_vec();
    if a8 {
        modules.push(Module::MmqA8);
    }
    let reg = Registry::build_modules(&gpu, &modules).expect("registry");
    let n_tok = 512usize;
    // (label, type, K, N): attention Q, FFN gate/up, FFN down in both quantizations.
    let shapes = [
        ("attn_q  ", GgmlType::Q4_K, 6656usize, 4096usize),
        ("ffn_up  ", GgmlType::Q4_K, 6656, 19968),
        ("ffn_down", GgmlType::Q4_K, 19968, 6656),
        ("ffn_down", GgmlType::Q6_K, 19968, 6656),
        ("attn_v  ", GgmlType::Q6_K, 6656, 256),
    ];
    println!(
        "mmq_bench: tokens {n_tok}, tile {}x{}, minb {}, cvt {}, double-buffered staging {}",
        MMQ_ROWS, reg.mmq_tokens, reg.mmq_minb, reg.mmq_cvt, reg.mmq_db
    );
    for (label, ty, k, n_out) in shapes {
        // A few distinct quantized rows repeated: the timing does not depend on the values.
        let row_bytes = k / ty.block_size() * ty.type_size();
        let mut rows = vec![0u8; 8 * row_bytes];
        let mut seed = 12345u64;
        let vals: Vec<f32> = (0..8 * k)
            .map(|_| {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            })
            .collect();
        for (src, dst) in vals.chunks(k).zip(rows.chunks_mut(row_bytes)) {
            muser_quant::quantize(ty, src, dst).expect("quantize");
        }
        let q6p = q6pad && ty == GgmlType::Q6_K;
        let (rows, row_bytes) = if q6p {
            let p = muser_cuda::q6pad::repack(&rows, 8, k).expect("repack");
            (p, muser_cuda::q6pad::row_bytes(k))
        } else {
            (rows, row_bytes)
        };
        let mut w = Vec::with_capacity(n_out * row_bytes + 256);
        for r in 0..n_out {
            w.extend_from_slice(&rows[(r % 8) * row_bytes..(r % 8 + 1) * row_bytes]);
        }
        w.resize(w.len() + 256, 0);
        let wd = gpu.alloc(w.len(), "weights").expect("alloc");
        gpu.upload(wd.ptr(), &w).expect("upload");
        let xq = gpu.alloc(n_tok * k * 2, "xq").expect("alloc");
        let xs = gpu.alloc(n_tok * k / 32 * 4, "xs").expect("alloc");
        let xsum = gpu.alloc(n_tok * k / 32 * 4, "xsum").expect("alloc");
        let q: Vec<i16> = (0..n_tok * k)
            .map(|i| ((i * 7919) % 65535) as i16)
            .collect();
        gpu.upload(xq.ptr(), &q).expect("upload");
        gpu.upload(xs.ptr(), &vec![1e-3f32; n_tok * k / 32])
            .expect("upload");
        gpu.upload(xsum.ptr(), &vec![0i32; n_tok * k / 32])
            .expect("upload");
        let y = gpu.alloc(n_tok * n_out * 4, "y").expect("alloc");
        let mut kernels = vec![(
            "mmq",
            match (ty, q6p) {
                (GgmlType::Q4_K, _) => Kernel::MmqQ4k,
                (_, true) => Kernel::MmqQ6p,
                _ => Kernel::MmqQ6k,
            },
            reg.mmq_dims(n_out, n_tok),
        )];
        if a8 {
            // The A8 kernels read the same XQ buffer as bytes: any values time the same.
            kernels.push((
                "mmq-a8",
                match ty {
                    GgmlType::Q4_K => Kernel::MmqQ4kA8,
                    _ => Kernel::MmqQ6pA8,
                },
                reg.mmq_dims(n_out, n_tok),
            ));
        }
        if t8 && !q6p {
            kernels.push((
                "t8 ",
                match ty {
                    GgmlType::Q4_K => Kernel::MvaQ4kT8,
                    _ => Kernel::MvaQ6kT8,
                },
                Dims {
                    grid: (
                        (n_out as u32).div_ceil(reg.mva_warps),
                        (n_tok as u32).div_ceil(8),
                        1,
                    ),
                    block: 32 * reg.mva_warps,
                    smem: 0,
                },
            ));
        }
        for (name, kern, dims) in kernels {
            let run = || {
                launch(
                    reg.get(kern, Math::Strict),
                    dims,
                    gpu.stream(),
                    A16Matmul {
                        w: wd.ptr(),
                        row_bytes,
                        xq: xq.ptr(),
                        xs: xs.ptr(),
                        xsum: xsum.ptr(),
                        k,
                        y: y.ptr(),
                        ldy: n_out,
                        n_out,
                        n_tok,
                    }
                    .args(),
                )
                .expect("launch")
            };
            run();
            gpu.wait("warm-up").expect("wait");
            let mut us = Vec::new();
            for _ in 0..7 {
                let t = Instant::now();
                for _ in 0..5 {
                    run();
                }
                gpu.wait("bench").expect("wait");
                us.push(t.elapsed().as_secs_f64() * 1e6 / 5.0);
            }
            us.sort_by(f64::total_cmp);
            let med = us[us.len() / 2];
            // Products of one 32-value group of one row with one token.
            let groups = (n_out * k / 32 * n_tok) as f64;
            println!(
                "{label} {ty:?} K={k:5} N={n_out:5} {name}: {med:8.1} us  ({:.2} T group-products/s, {:.0} GB/s of weights)",
                groups / med / 1e6,
                (n_out * row_bytes) as f64 / med / 1e3
            );
        }
    }
}
