//! Kernel benchmark of the f16 route's matmuls (`mvh_q4h_s*`, `mvh_q6h_s*`, matvec_h16.cu) on
//! Muse Glimmer's shapes at 1, 2, 4 and 8 tokens, over four copies of each matrix in rotation
//! (past the L2), with the chain count `Registry::mvh_plan` picks. Prints microseconds per call
//! and the bandwidth of the layout's bytes (Q4H 5, Q6H 7 bits per weight) and of the same matrix
//! in GGUF's format (Q4_K 4.5, Q6_K 6.5625). A measurement tool, not a test: it asserts nothing.
//! `mvb_bench --a8` gives the A8 kernels on the same shapes. Then the prefill kernels — rows
//! (`mmh_*`, `Registry::mmh_plan`) and shared-memory tiles (`mmt_*`, `Registry::mmt_plan`) — at
//! 128 and 512 tokens, with their f16 tensor-core TFLOPS (with `MUSER_CUDA_MMT=wg` the warpgroup
//! tiles `mmw_*`, fed the constant activations as they are: every value is 1.0, so fragment and
//! natural order are the same bytes; the engine's `h16_natural` pass before them is not timed;
//! with `MUSER_CUDA_MMW_SPLIT=1`, the default, the split tiles and their fold, timed together);
//! `mmq_bench --a8` gives the A8 prefill kernels.
//!
//! `cargo run --release -p muser-cuda --example mvh_bench [-- --decode]` (`--decode`: the decode
//! kernels only)

use muser_cuda::device::Event;
use muser_cuda::launch::launch;
use muser_cuda::{q4h, q6h, Gpu, HWeights, KArgs, Kernel, Math, Module, Registry};

const COPIES: usize = 4;

fn main() {
    match Gpu::probe() {
        Ok(Some(_)) => {}
        _ => {
            eprintln!("mvh_bench: no CUDA device");
            std::process::exit(2);
        }
    }
    // `--decode`: the decode kernels (1 to 8 tokens) only.
    let decode_only = std::env::args().any(|a| a == "--decode");
    let gpu = Gpu::open(0).expect("open GPU");
    let reg = Registry::build_modules(&gpu, &[Module::MatvecH16, Module::MmtH16, Module::MmwH16])
        .expect("registry");
    let (e, q, kv, ff) = (6656usize, 4096usize, 256usize, 19968usize);
    let shapes = [
        ("Q / attention gate", HWeights::Q4H, e, q),
        ("K", HWeights::Q4H, e, kv),
        ("V", HWeights::Q6H, e, kv),
        ("O", HWeights::Q4H, q, e),
        ("FFN gate / up", HWeights::Q4H, e, ff),
        ("FFN down (Q4_K)", HWeights::Q4H, ff, e),
        ("FFN down (Q6_K)", HWeights::Q6H, ff, e),
        ("output, 1/4 vocab", HWeights::Q6H, e, 65536),
    ];
    // Activations of up to 512 tokens in the route's format (values do not change the timing).
    let (kmax, tmax) = (ff, 512usize);
    let xh = gpu.alloc(tmax * kmax * 2, "xh").expect("alloc");
    let xs = gpu.alloc(tmax * kmax / 32 * 2, "xsum").expect("alloc");
    let xs16 = gpu.alloc(tmax * kmax / 16 * 2, "xsum16").expect("alloc");
    let inv = gpu.alloc(tmax * 4, "xinv").expect("alloc");
    gpu.upload(xh.ptr(), &vec![0x3c00u16; tmax * kmax])
        .expect("upload"); // 1.0
    gpu.upload(xs.ptr(), &vec![0x5000u16; tmax * kmax / 32])
        .expect("upload"); // 32.0
    gpu.upload(xs16.ptr(), &vec![0x4c00u16; tmax * kmax / 16])
        .expect("upload"); // 16.0
    gpu.upload(inv.ptr(), &vec![1f32; tmax]).expect("upload");
    let y = gpu.alloc(tmax * 65536 * 4, "y").expect("alloc");
    println!(
        "mvh_bench: f16 route matmuls, {COPIES} copies per matrix, decode weight ring {} \
         (MUSER_CUDA_MVH_BULK)",
        reg.h16.mvh_bulk
    );
    for (name, fmt, k, n_out) in shapes {
        // Random quant bytes and fixed scales: a valid layout needs no GGUF source.
        let (len, dsc_at, gguf_bits) = match fmt {
            HWeights::Q4H => {
                let sc = reg.h16.q4h_scales;
                (
                    q4h::bytes(n_out, k, sc),
                    q4h::part_offsets(n_out, k, sc).0,
                    4.5,
                )
            }
            HWeights::Q6H => (
                q6h::bytes(n_out, k, reg.h16.q6h_scales),
                q6h::part_offsets(n_out, k).1,
                6.5625,
            ),
        };
        let mut bytes = vec![0u8; len];
        let mut seed = 0x9e37_79b9u64 ^ (k * n_out) as u64;
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
        let prefill: &[usize] = if decode_only { &[] } else { &[128, 512] };
        let runs = [(1usize, 'd'), (2, 'd'), (4, 'd'), (8, 'd')]
            .into_iter()
            .chain(prefill.iter().flat_map(|&nt| [(nt, 'r'), (nt, 't')]));
        for (nt, kind) in runs {
            let (kernel, dims) = match kind {
                'd' => reg.mvh_plan(fmt, n_out, k, nt),
                'r' => reg.mmh_plan(fmt, n_out, nt),
                _ => reg.mmt_plan(fmt, n_out, nt),
            };
            // With MUSER_CUDA_MMW_SPLIT=1 (the default) the split tiles and their fold, timed together.
            let split = (kind == 't')
                .then(|| reg.mmw_split_plan(fmt, n_out, nt))
                .flatten();
            let scratch = split.map(|sp| {
                gpu.alloc(sp.scratch_floats * 4, "split sums")
                    .expect("alloc")
            });
            let (kernel, dims) = split.map_or((kernel, dims), |sp| (sp.kernel, sp.dims));
            let f = reg.get(kernel, Math::Strict);
            let go = |i: usize| {
                let mut args = KArgs::new()
                    .ptr(copies[i % COPIES].ptr())
                    .int(n_out)
                    .int(k)
                    .ptr(xh.ptr())
                    .ptr(xs.ptr())
                    .ptr(xs16.ptr())
                    .ptr(inv.ptr())
                    .f32(1.0)
                    .ptr(y.ptr())
                    .int(n_out)
                    .int(nt);
                if let (Some(sp), Some(p)) = (split, scratch.as_ref()) {
                    args = args.ptr(p.ptr());
                    launch(f, dims, gpu.stream(), args).expect("launch");
                    let fold = sp.fold_args(p.ptr(), k, n_out, nt, inv.ptr(), 1.0, y.ptr(), n_out);
                    let ff = reg.get(Kernel::MmwFold, Math::Strict);
                    launch(ff, sp.fold_dims, gpu.stream(), fold).expect("launch");
                    return;
                }
                launch(f, dims, gpu.stream(), args).expect("launch");
            };
            let reps = if nt > 8 { 10 } else { 200 };
            for i in 0..reps / 4 {
                go(i);
            }
            let (a, b) = (
                Event::new(true).expect("event"),
                Event::new(true).expect("event"),
            );
            a.record(gpu.stream()).expect("record");
            for i in 0..reps {
                go(i);
            }
            b.record(gpu.stream()).expect("record");
            gpu.wait("mvh_bench").expect("wait");
            let us = f64::from(b.since(&a).expect("elapsed")) * 1e3 / reps as f64;
            let h = bytes.len() as f64 / (us * 1e-6) / 1e9;
            let gguf = (n_out * k) as f64 * gguf_bits / 8.0 / (us * 1e-6) / 1e9;
            if nt > 8 {
                let tf = 2.0 * (n_out * k * nt) as f64 / (us * 1e-6) / 1e12;
                println!(
                    "{name:<20} {k:>5} -> {n_out:<5} {kernel:?} nt {nt}: {us:9.1} us  {tf:6.1} \
                     TFLOPS"
                );
            } else {
                println!(
                    "{name:<20} {k:>5} -> {n_out:<5} {kernel:?} nt {nt}: {us:7.2} us  {h:6.0} \
                     GB/s of its bytes  {gguf:6.0} GB/s as GGUF"
                );
            }
        }
    }
}
