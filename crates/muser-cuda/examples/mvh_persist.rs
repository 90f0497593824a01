//! Experiment (issue 5, `docs/cuda-f16.md`): what do the kernel boundaries of one-token decode
//! cost? Runs the same chain of f16-route matmuls (Q4H, one token, 4 chains per row group) over
//! `--layers` copies of a layer's matrices (Q 6656→4096, O 4096→6656, FFN gate and up 6656→19968,
//! FFN down 19968→6656: the full model's shapes, past the L2) three ways:
//! - `launches`: one `mvh_q4h_s4` launch per matrix, queued eagerly, programmatic dependent
//!   launch on;
//! - `graph`: the same launches captured in one CUDA graph (PDL edges), as the engine replays a
//!   token;
//! - `persist`: one launch of `mvh_persist_q4h_s4` (probes_h16.cu), as many blocks as the SMs keep
//!   resident, each matrix a phase behind a grid barrier instead of a kernel boundary;
//! - bandwidth floors, the same bytes read with no arithmetic (`stream_phases`, probes_h16.cu;
//!   `--stream-blocks` blocks of 256 threads, 4 per SM by default), each captured in a graph:
//!   `stream/mat` one dependent launch per matrix (the engine's chain of waits), `stream/lay`
//!   one launch per layer, `stream/free` one launch per matrix that reads before its PDL wait
//!   (launches overlap: no boundary at all), `stream/mvh` mvh_q4h_s4's grid and loads without
//!   its arithmetic (`stream_chains_q4h_s4`), one launch per matrix, at its own occupancy and
//!   at mvh's 5 blocks per SM (`stream/mvh5`); `stream/mvhx`, the same with mvh's activation
//!   and sum reads (`stream_chains_x_q4h_s4`); `mvh/noact`, mvh's weights, dequantization, MMAs
//!   and fold with the activations in registers instead of read (`mvh_noact_q4h_s4`; persist's
//!   outputs are compared before it overwrites them).
//!
//! Every output of `persist` and `graph` is compared bit for bit with `launches` (the same chains
//! and fold). Prints microseconds per layer and GB/s of the layout's bytes. With
//! `MUSER_CUDA_MVH_EARLY=0` the first piece of a phase is requested after the wait instead of
//! before it (in every variant). A measurement tool, not a test: it asserts nothing; a
//! difference or a barrier timeout is printed.
//!
//! `cargo run --release -p muser-cuda --example mvh_persist [-- --layers N --reps R]`

use cudarc::driver::result;
use muser_cuda::device::Event;
use muser_cuda::launch::{launch, Dims};
use muser_cuda::{q4h, Gpu, Graph, HWeights, KArgs, Kernel, Math, Module, Registry};

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Random Q4H quants with every scale and min 1.0 (a valid layout needs no GGUF source).
fn q4h_bytes(n_out: usize, k: usize, seed: u64, sc: q4h::Scales) -> Vec<u8> {
    let (len, dsc_at) = (q4h::bytes(n_out, k, sc), q4h::part_offsets(n_out, k, sc).0);
    let mut bytes = vec![0u8; len];
    let mut s = seed;
    for b in bytes[..dsc_at].iter_mut() {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *b = (s >> 56) as u8;
    }
    for pair in bytes[dsc_at..].chunks_exact_mut(2) {
        pair.copy_from_slice(&0x3c00u16.to_le_bytes());
    }
    bytes
}

fn main() {
    match Gpu::probe() {
        Ok(Some(_)) => {}
        _ => {
            eprintln!("mvh_persist: no CUDA device");
            std::process::exit(2);
        }
    }
    let (layers, reps) = (arg("--layers", 12), arg("--reps", 20));
    let gpu = Gpu::open(0).expect("open GPU");
    let reg =
        Registry::build_modules(&gpu, &[Module::MatvecH16, Module::ProbesH16]).expect("registry");
    let (e, q, ff) = (6656usize, 4096usize, 19968usize);
    // (K, n_out) of a layer's matrices.
    let shapes = [(e, q), (q, e), (e, ff), (e, ff), (ff, e)];
    // Activations: every value 1.0 (sums 32 / 16), one token.
    let xh = gpu.alloc(ff * 2, "xh").expect("alloc");
    let xs = gpu.alloc(ff / 32 * 2, "xsum").expect("alloc");
    let xs16 = gpu.alloc(ff / 16 * 2, "xsum16").expect("alloc");
    let inv = gpu.alloc(4, "xinv").expect("alloc");
    gpu.upload(xh.ptr(), &vec![0x3c00u16; ff]).expect("upload");
    gpu.upload(xs.ptr(), &vec![0x5000u16; ff / 32])
        .expect("upload");
    gpu.upload(xs16.ptr(), &vec![0x4c00u16; ff / 16])
        .expect("upload");
    gpu.upload(inv.ptr(), &[1f32]).expect("upload");
    // Phases: every layer's five matrices, each its own weights and output.
    let mut phases = Vec::new(); // (weights, K, n_out, output for launches, for persist)
    let mut bytes_per_layer = 0usize;
    for l in 0..layers {
        for (i, &(k, n_out)) in shapes.iter().enumerate() {
            let b = q4h_bytes(
                n_out,
                k,
                0x9e37_79b9 ^ (l * 8 + i) as u64,
                reg.h16.q4h_scales,
            );
            if l == 0 {
                bytes_per_layer += b.len();
            }
            let w = gpu.alloc(b.len(), "weights").expect("alloc");
            gpu.upload(w.ptr(), &b).expect("upload");
            let ya = gpu.alloc(n_out * 4, "y").expect("alloc");
            let yb = gpu.alloc(n_out * 4, "y").expect("alloc");
            let yc = gpu.alloc(n_out * 4, "y").expect("alloc");
            phases.push((w, k, n_out, ya, yb, yc));
        }
    }
    let f = reg.get(Kernel::MvhQ4hS4, Math::Strict);
    gpu.set_pdl(true);
    let queue = |pick: usize| {
        for (w, k, n_out, ya, yb, _) in &phases {
            let y = if pick == 0 { ya.ptr() } else { yb.ptr() };
            let args = KArgs::new()
                .ptr(w.ptr())
                .int(*n_out)
                .int(*k)
                .ptr(xh.ptr())
                .ptr(xs.ptr())
                .ptr(xs16.ptr())
                .ptr(inv.ptr())
                .f32(1.0)
                .ptr(y)
                .int(*n_out)
                .int(1);
            let dims = Dims {
                grid: ((*n_out / 16) as u32, 1, 1),
                // S = 4 chains: 4 warps, 2 with MUSER_CUDA_MVH_PAIR=1.
                block: 32 * reg.mvh_warps(4),
                // MUSER_CUDA_MVH_XSTAGE's / _XSMEM's staged activations (0 without them).
                smem: (reg.mvh_xstage_smem(4, 1) + reg.mvh_xsmem_smem(HWeights::Q4H, *k, 1)) as u32,
            };
            launch(f, dims, gpu.stream(), args)?;
        }
        Ok(())
    };
    let graph = Graph::capture(&gpu, "mvh_persist", || queue(1)).expect("capture");
    // The persistent kernel: its phase table, barrier counter and error flag.
    let desc: Vec<u64> = phases
        .iter()
        .flat_map(|(w, k, n_out, _, _, yc)| [w.ptr(), *n_out as u64, *k as u64, yc.ptr()])
        .collect();
    let d_desc = gpu.alloc(desc.len() * 8, "phases").expect("alloc");
    gpu.upload(d_desc.ptr(), &desc).expect("upload");
    // [0]: the barrier's arrivals (zeroed before each launch), [1]: the timeout flag (once).
    let bar = gpu.alloc(8, "barrier").expect("alloc");
    gpu.zero(bar.ptr(), 8).expect("zero");
    let fp = reg.get(Kernel::MvhPersistQ4hS4, Math::Strict);
    // SAFETY: `fp` is a loaded kernel of this context (the registry's); 128 threads, no dynamic
    // shared memory — the launch below.
    let per_sm =
        unsafe { result::occupancy::max_active_block_per_multiprocessor(fp.cu_function(), 128, 0) }
            .expect("occupancy");
    // SAFETY: device 0 exists (Gpu::open(0) succeeded); a plain attribute query.
    let sms = unsafe {
        result::device::get_attribute(
            result::device::get(0).expect("device"),
            cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
        )
    }
    .expect("SM count");
    let blocks = (arg("--per-sm", per_sm as usize) * sms as usize) as u32;
    let persist = || {
        gpu.zero(bar.ptr(), 4)?;
        let args = KArgs::new()
            .ptr(d_desc.ptr())
            .int(phases.len())
            .ptr(xh.ptr())
            .ptr(xs.ptr())
            .ptr(xs16.ptr())
            .ptr(inv.ptr())
            .ptr(bar.ptr())
            .ptr(bar.ptr() + 4);
        let dims = Dims {
            grid: (blocks, 1, 1),
            block: 128,
            smem: 0,
        };
        launch(fp, dims, gpu.stream(), args)
    };
    println!(
        "mvh_persist: {layers} layers x {} matrices, {:.1} MB per layer (Q4H), persist grid {blocks} \
         ({per_sm} per SM x {sms} SMs), early first piece {} (MUSER_CUDA_MVH_EARLY), ahead {}, \
         L1 hints {}, staged activations {}, register ceiling {} (MUSER_CUDA_MVH_MAXREG), alternating register sets {} (MUSER_CUDA_MVH_PP) x {} (MUSER_CUDA_MVH_PP_SETS), two chains per warp {} (MUSER_CUDA_MVH_PAIR), activation row in shared memory {} (MUSER_CUDA_MVH_XSMEM), activation touch {} (MUSER_CUDA_MVH_XTOUCH), warps-per-SM bounds {} (MUSER_CUDA_MVH_WBOUNDS)",
        shapes.len(),
        bytes_per_layer as f64 / 1e6,
        reg.h16.mvh_early,
        reg.h16.mvh_ahead,
        reg.h16.mvh_whint,
        reg.h16.mvh_xstage,
        reg.h16.mvh_maxreg,
        reg.h16.mvh_pp,
        reg.h16.mvh_pp_sets,
        reg.h16.mvh_pair,
        reg.h16.mvh_xsmem,
        reg.h16.mvh_xtouch,
        reg.h16.mvh_wbounds
    );
    let time = |name: &str, go: &dyn Fn() -> Result<(), muser_cuda::CudaError>| {
        for _ in 0..3 {
            go().expect("warm-up");
        }
        let (a, b) = (
            Event::new(true).expect("event"),
            Event::new(true).expect("event"),
        );
        a.record(gpu.stream()).expect("record");
        for _ in 0..reps {
            go().expect("run");
        }
        b.record(gpu.stream()).expect("record");
        gpu.wait("mvh_persist").expect("wait");
        let us = f64::from(b.since(&a).expect("elapsed")) * 1e3 / (reps * layers) as f64;
        println!(
            "{name:<11} {us:8.2} us per layer  {:6.0} GB/s",
            bytes_per_layer as f64 / (us * 1e-6) / 1e9
        );
    };
    time("launches", &|| queue(0));
    time("graph", &|| graph.launch());
    time("persist", &persist);
    let mut flag = [0u32; 2];
    gpu.download(&mut flag, bar.ptr(), "barrier")
        .expect("download");
    if flag[1] != 0 {
        println!(
            "persist: a barrier wait timed out in some run (blocks not all resident?): its \
             figures and outputs are void"
        );
    }
    let mut differ = [0usize; 2];
    for (_, _, n_out, ya, yb, yc) in &phases {
        let (mut a, mut b, mut c) = (vec![0u32; *n_out], vec![0u32; *n_out], vec![0u32; *n_out]);
        gpu.download(&mut a, ya.ptr(), "y").expect("download");
        gpu.download(&mut b, yb.ptr(), "y").expect("download");
        gpu.download(&mut c, yc.ptr(), "y").expect("download");
        differ[0] += a.iter().zip(&b).filter(|(x, y)| x != y).count();
        differ[1] += a.iter().zip(&c).filter(|(x, y)| x != y).count();
    }
    println!(
        "outputs not bit-identical to the launches: graph {}, persist {}",
        differ[0], differ[1]
    );
    // The floors: desc rows of one phase each (per matrix) or of a layer's five.
    let sblocks = (arg("--stream-blocks", 4 * sms as usize)) as u32;
    // stream_phases' table: each matrix's weights and their size in bytes (Q4H's size depends
    // on its scales' format).
    let sdesc: Vec<u64> = phases
        .iter()
        .flat_map(|(w, ..)| [w.ptr(), w.bytes() as u64])
        .collect();
    let d_sdesc = gpu.alloc(sdesc.len() * 8, "stream phases").expect("alloc");
    gpu.upload(d_sdesc.ptr(), &sdesc).expect("upload");
    let sout = gpu
        .alloc(sblocks.max(1024) as usize * 4, "stream out")
        .expect("alloc");
    let streams = |kernel: Kernel, per: usize| {
        Graph::capture(&gpu, "stream", || {
            for first in (0..phases.len()).step_by(per) {
                let args = KArgs::new()
                    .ptr(d_sdesc.ptr() + (first * 2 * 8) as u64)
                    .int(per)
                    .ptr(sout.ptr());
                let dims = Dims {
                    grid: (sblocks, 1, 1),
                    block: 256,
                    smem: 0,
                };
                launch(reg.get(kernel, Math::Strict), dims, gpu.stream(), args)?;
            }
            Ok(())
        })
        .expect("capture")
    };
    let (per_mat, per_layer, free) = (
        streams(Kernel::StreamPhases, 1),
        streams(Kernel::StreamPhases, shapes.len()),
        streams(Kernel::StreamPhasesFree, 1),
    );
    time("stream/mat", &|| per_mat.launch());
    time("stream/lay", &|| per_layer.launch());
    time("stream/free", &|| free.launch());
    // One launch per matrix of a probe on mvh_q4h_s4's grid: `stream_chains_*` at their own
    // occupancy (64 registers: 8 blocks per SM) and at mvh_q4h_s4's 5 (40 KiB of unused dynamic
    // shared memory per block); `mvh_noact_q4h_s4` (its own outputs).
    let probe = |kernel: Kernel, smem: u32| {
        Graph::capture(&gpu, "probe", || {
            for (w, k, n_out, .., yc) in &phases {
                let args = KArgs::new().ptr(w.ptr()).int(*n_out).int(*k);
                let args = if kernel == Kernel::MvhNoactQ4hS4 {
                    args.ptr(yc.ptr())
                } else {
                    args.ptr(xh.ptr()).ptr(xs.ptr()).ptr(sout.ptr())
                };
                let dims = Dims {
                    grid: ((*n_out / 16) as u32, 1, 1),
                    block: 128,
                    smem,
                };
                launch(reg.get(kernel, Math::Strict), dims, gpu.stream(), args)?;
            }
            Ok(())
        })
        .expect("capture")
    };
    for (name, kernel, smem) in [
        ("stream/mvh", Kernel::StreamChainsQ4hS4, 0),
        ("stream/mvh5", Kernel::StreamChainsQ4hS4, 40 * 1024),
        ("stream/mvhx", Kernel::StreamChainsXQ4hS4, 0),
        ("stream/mvhx5", Kernel::StreamChainsXQ4hS4, 40 * 1024),
        ("mvh/noact", Kernel::MvhNoactQ4hS4, 0),
    ] {
        let g = probe(kernel, smem);
        time(name, &|| g.launch());
    }
}
