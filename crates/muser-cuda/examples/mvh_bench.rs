//! Kernel benchmark of the f16 route's matmul (`mvh_q4h_s*`, matvec_h16.cu) on Muse Glimmer's
//! Q4_K shapes at 1, 2, 4 and 8 tokens, over four copies of each matrix in rotation (past the
//! L2), with the chain count `Registry::mvh_plan` picks. Prints microseconds per call and the
//! bandwidth of the Q4H bytes (5 bits per weight) and of the same matrix as Q4_K (4.5). A
//! measurement tool, not a test: it asserts nothing. `mvb_bench --a8` gives the A8 kernels on
//! the same shapes.
//!
//! `cargo run --release -p muser-cuda --example mvh_bench`

use muser_cuda::device::Event;
use muser_cuda::launch::launch;
use muser_cuda::{q4h, Gpu, KArgs, Math, Module, Registry};

const COPIES: usize = 4;

fn main() {
    match Gpu::probe() {
        Ok(Some(_)) => {}
        _ => {
            eprintln!("mvh_bench: no CUDA device");
            std::process::exit(2);
        }
    }
    let gpu = Gpu::open(0).expect("open GPU");
    let reg = Registry::build_modules(&gpu, &[Module::MatvecH16]).expect("registry");
    let (e, q, kv, ff) = (6656usize, 4096usize, 256usize, 19968usize);
    let shapes = [
        ("Q / attention gate", e, q),
        ("K", e, kv),
        ("O", q, e),
        ("FFN gate / up", e, ff),
        ("FFN down (Q4_K)", ff, e),
    ];
    // Activations of 8 tokens in the route's format (values do not change the timing).
    let kmax = ff;
    let xh = gpu.alloc(8 * kmax * 2, "xh").expect("alloc");
    let xs = gpu.alloc(8 * kmax / 32 * 2, "xsum").expect("alloc");
    let inv = gpu.alloc(8 * 4, "xinv").expect("alloc");
    gpu.upload(xh.ptr(), &vec![0x3c00u16; 8 * kmax])
        .expect("upload"); // 1.0
    gpu.upload(xs.ptr(), &vec![0x5000u16; 8 * kmax / 32])
        .expect("upload"); // 32.0
    gpu.upload(inv.ptr(), &[1f32; 8]).expect("upload");
    let y = gpu.alloc(8 * ff * 4, "y").expect("alloc");
    println!("mvh_bench: f16 route matmul, Q4H weights, {COPIES} copies per matrix");
    for (name, k, n_out) in shapes {
        // Random quant bytes and fixed scales: a valid Q4H matrix needs no Q4_K source.
        let mut bytes = vec![0u8; q4h::bytes(n_out, k)];
        let mut seed = 0x9e37_79b9u64 ^ (k * n_out) as u64;
        let (dsc_at, _) = q4h::part_offsets(n_out, k);
        for b in bytes[..dsc_at].iter_mut() {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            *b = (seed >> 56) as u8;
        }
        for pair in bytes[dsc_at..].chunks_exact_mut(2) {
            pair.copy_from_slice(&0x3c00u16.to_le_bytes()); // scales and mins 1.0
        }
        let copies: Vec<_> = (0..COPIES)
            .map(|_| {
                let d = gpu.alloc(bytes.len(), "weights").expect("alloc");
                gpu.upload(d.ptr(), &bytes).expect("upload");
                d
            })
            .collect();
        for nt in [1usize, 2, 4, 8] {
            let (kernel, dims) = Registry::mvh_plan(n_out, nt);
            let f = reg.get(kernel, Math::Strict);
            let go = |i: usize| {
                let args = KArgs::new()
                    .ptr(copies[i % COPIES].ptr())
                    .int(n_out)
                    .int(k)
                    .ptr(xh.ptr())
                    .ptr(xs.ptr())
                    .ptr(inv.ptr())
                    .f32(1.0)
                    .ptr(y.ptr())
                    .int(n_out)
                    .int(nt);
                launch(f, dims, gpu.stream(), args).expect("launch");
            };
            for i in 0..50 {
                go(i);
            }
            let (a, b) = (
                Event::new(true).expect("event"),
                Event::new(true).expect("event"),
            );
            a.record(gpu.stream()).expect("record");
            const N: usize = 200;
            for i in 0..N {
                go(i);
            }
            b.record(gpu.stream()).expect("record");
            gpu.wait("mvh_bench").expect("wait");
            let us = f64::from(b.since(&a).expect("elapsed")) * 1e3 / N as f64;
            let h = bytes.len() as f64 / (us * 1e-6) / 1e9;
            let q4k = (n_out * k) as f64 * 4.5 / 8.0 / (us * 1e-6) / 1e9;
            println!(
                "{name:<20} {k:>5} -> {n_out:<5} {kernel:?} nt {nt}: {us:7.2} us  {h:6.0} GB/s Q4H  \
                 {q4k:6.0} GB/s as Q4_K"
            );
        }
    }
}
