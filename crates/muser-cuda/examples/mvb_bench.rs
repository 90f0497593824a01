//! Kernel benchmark of packed decode (several sequences' tokens through one weight pass) on
//! Muse Glimmer's shapes, without a model file: per layer the matmuls of one decode step
//! (Q, K, V, attention gate, O, FFN gate/up/down, Q4_K_M types), over four distinct copies of
//! the layer's weights (~1.1 GB, far past the L2) in rotation, at 1, 2, 4 and 8 tokens per
//! launch. Prints the time of one layer's matmuls and the aggregate speed-up over one token
//! (`nt × t(1) / t(nt)`). A measurement tool, not a test: it asserts nothing.
//!
//! `cargo run --release -p muser-cuda --example mvb_bench [-- --unstaged | --default-smem |
//! --mmv [--pair]] [--pdl] [--q6pad]`  (`--pdl`: launches overlap as with `MUSER_CUDA_PDL=1`;
//! `--q6pad`: Q6_K in the aligned repack Q6_K-P, as the engine's default `MUSER_CUDA_Q6_PAD`;
//! `--a8`: on A8 activations (`matvec_a8.cu`, packed rows `matvec_packed_a8.cu`, with `--mmv`
//! `mmv_a8.cu`; implies `--q6pad`); `--a8r`: the one-token pass only, with the register-resident A8 kernels
//! (`mvr_*`) where K <= 8192).
//! The one-token pass also prints each matrix alone.
//! Packed rows launch as batched decode does (`Registry::packed_plan`: `MUSER_CUDA_MVB_WARPS`
//! warps, activations staged in up to 227 KiB of opt-in shared memory); `--default-smem`
//! stages only within the 48 KiB default, `--unstaged` never.

use std::time::Instant;

use muser_cuda::launch::{launch, A16Matmul, Dims, SMEM_DEFAULT_MAX};
use muser_cuda::{DeviceBuffer, Gpu, Kernel, Math, Module, Registry, MMV_PAIR_MAX_TOKENS};
use muser_gguf::GgmlType;

/// The decode kernel for `nt` tokens (`q6p`: Q6_K in Q6_K-P): (kernel, staged).
fn kernel(ty: GgmlType, nt: usize, staged: bool, q6p: bool) -> Kernel {
    use Kernel::*;
    if q6p {
        return match (nt, staged) {
            (1, true) => MvsQ6pT1,
            (1, false) => MvpQ6pT1,
            (2, true) => MvsQ6pT2,
            (2, false) => MvpQ6pT2,
            (4, true) => MvsQ6pT4,
            (4, false) => MvpQ6pT4,
            (_, true) => MvsQ6pT8,
            _ => MvpQ6pT8,
        };
    }
    match (ty, nt, staged) {
        (GgmlType::Q4_K, 1, true) => MvsQ4kT1,
        (GgmlType::Q4_K, 1, false) => MvpQ4kT1,
        (GgmlType::Q4_K, 2, true) => MvsQ4kT2,
        (GgmlType::Q4_K, 2, false) => MvpQ4kT2,
        (GgmlType::Q4_K, 4, true) => MvsQ4kT4,
        (GgmlType::Q4_K, 4, false) => MvpQ4kT4,
        (GgmlType::Q4_K, _, true) => MvsQ4kT8,
        (GgmlType::Q4_K, _, false) => MvpQ4kT8,
        (_, 1, true) => MvsQ6kT1,
        (_, 1, false) => MvpQ6kT1,
        (_, 2, true) => MvsQ6kT2,
        (_, 2, false) => MvpQ6kT2,
        (_, 4, true) => MvsQ6kT4,
        (_, 4, false) => MvpQ6kT4,
        (_, _, true) => MvsQ6kT8,
        _ => MvpQ6kT8,
    }
}

/// The A8 packed decode kernel for `nt` > 1 tokens (Q6_K in Q6_K-P).
fn kernel_a8(ty: GgmlType, nt: usize, staged: bool) -> Kernel {
    use Kernel::*;
    match (ty == GgmlType::Q4_K, nt, staged) {
        (true, 2, true) => MvsQ4kA8T2,
        (true, 2, false) => MvpQ4kA8T2,
        (true, 4, true) => MvsQ4kA8T4,
        (true, 4, false) => MvpQ4kA8T4,
        (true, _, true) => MvsQ4kA8T8,
        (true, _, false) => MvpQ4kA8T8,
        (false, 2, true) => MvsQ6pA8T2,
        (false, 2, false) => MvpQ6pA8T2,
        (false, 4, true) => MvsQ6pA8T4,
        (false, 4, false) => MvpQ6pA8T4,
        (false, _, true) => MvsQ6pA8T8,
        (false, _, false) => MvpQ6pA8T8,
    }
}

struct Mat {
    ty: GgmlType,
    k: usize,
    n_out: usize,
    row_bytes: usize,
    /// In Q6_K-P (`--q6pad`, Q6_K only): `copies` and `row_bytes` are the repack's.
    q6p: bool,
    copies: Vec<DeviceBuffer>,
}

fn main() {
    let unstaged = std::env::args().any(|a| a == "--unstaged");
    let default_smem = std::env::args().any(|a| a == "--default-smem");
    let mmv = std::env::args().any(|a| a == "--mmv");
    let pair = std::env::args().any(|a| a == "--pair");
    let pdl = std::env::args().any(|a| a == "--pdl");
    let a8r = std::env::args().any(|a| a == "--a8r");
    let a8 = a8r || std::env::args().any(|a| a == "--a8");
    let q6pad = a8 || std::env::args().any(|a| a == "--q6pad");
    match Gpu::probe() {
        Ok(Some(_)) => {}
        _ => {
            eprintln!("mvb_bench: no CUDA device");
            std::process::exit(2);
        }
    }
    let gpu = Gpu::open(0).expect("open GPU");
    gpu.set_pdl(pdl);
    let reg = Registry::build_modules(&gpu, &Module::ALL).expect("registry");
    let (e, q, kv, ff) = (6656usize, 4096usize, 256usize, 19968usize);
    let shapes = [
        (GgmlType::Q4_K, e, q),  // Q
        (GgmlType::Q4_K, e, kv), // K
        (GgmlType::Q6_K, e, kv), // V
        (GgmlType::Q4_K, e, q),  // attention gate
        (GgmlType::Q4_K, q, e),  // O
        (GgmlType::Q4_K, e, ff), // FFN gate
        (GgmlType::Q4_K, e, ff), // FFN up
        (GgmlType::Q6_K, ff, e), // FFN down (Q6_K on about half the layers)
    ];
    const COPIES: usize = 4;
    let mats: Vec<Mat> = shapes
        .iter()
        .map(|&(ty, k, n_out)| {
            let row_bytes = k / ty.block_size() * ty.type_size();
            // Random bytes with valid (small, finite) f16 scales: timing does not depend on
            // values, only NaN/Inf-free arithmetic matters.
            let mut seed = 0x9e37_79b9u64 ^ (k * n_out) as u64;
            let mut bytes = vec![0u8; n_out * row_bytes + 256];
            for b in bytes.iter_mut() {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                *b = (seed >> 56) as u8 & 0x3b;
            }
            let q6p = q6pad && ty == GgmlType::Q6_K;
            let (bytes, row_bytes) = if q6p {
                let mut p = muser_cuda::q6pad::repack(&bytes[..n_out * row_bytes], n_out, k)
                    .expect("repack");
                p.extend_from_slice(&[0u8; 256]);
                (p, muser_cuda::q6pad::row_bytes(k))
            } else {
                (bytes, row_bytes)
            };
            let copies = (0..COPIES)
                .map(|_| {
                    let d = gpu.alloc(bytes.len(), "weights").expect("alloc");
                    gpu.upload(d.ptr(), &bytes).expect("upload");
                    d
                })
                .collect();
            Mat {
                ty,
                k,
                n_out,
                row_bytes,
                q6p,
                copies,
            }
        })
        .collect();
    let (nmax, kmax) = (8usize, ff);
    let xq = gpu.alloc(nmax * kmax * 2, "xq").expect("alloc");
    let xs = gpu.alloc(nmax * kmax / 32 * 4, "xs").expect("alloc");
    let xsum = gpu.alloc(nmax * kmax / 32 * 4, "xsum").expect("alloc");
    let qv: Vec<i16> = (0..nmax * kmax)
        .map(|i| ((i * 7919) % 65535) as i16)
        .collect();
    gpu.upload(xq.ptr(), &qv).expect("upload");
    gpu.upload(xs.ptr(), &vec![1e-3f32; nmax * kmax / 32])
        .expect("upload");
    gpu.upload(xsum.ptr(), &vec![0i32; nmax * kmax / 32])
        .expect("upload");
    let y = gpu.alloc(nmax * ff * 4, "y").expect("alloc");
    let layer_bytes: usize = mats.iter().map(|m| m.n_out * m.row_bytes).sum();
    println!(
        "mvb_bench: warps {} (t1) / {} (packed), rows/warp {} (t1), units ahead {}/{} (t1 Q4_K/Q6_K-P), weight ring {}/{} stages (t1 Q4_K/Q6_K), one layer's decode matmuls = {:.1} MB, {} copies{}{}{}{}",
        reg.mva_warps,
        reg.mvb_warps,
        reg.mva_rows,
        reg.mva_ahead,
        reg.mva_ahead_q6p,
        reg.mva_wstages,
        reg.mva_wstages_q6,
        layer_bytes as f64 / 1e6,
        COPIES,
        if unstaged {
            ", unstaged"
        } else if default_smem {
            ", packed staging only within 48 KiB"
        } else {
            ""
        },
        if pdl { ", programmatic dependent launch" } else { "" },
        if q6pad { ", Q6_K in Q6_K-P" } else { "" },
        match (a8, a8r) {
            (_, true) => format!(", A8 activations (one token), register-resident rows {}", reg.mvr_rows),
            (true, _) => ", A8 activations".to_string(),
            _ => String::new(),
        }
    );
    let mut t1 = 0f64;
    for nt in [1usize, 2, 4, 8] {
        if a8r && nt > 1 {
            break; // register-resident rows: one token only
        }
        let rows = if reg.mva_rows as usize * nt <= 8 {
            reg.mva_rows
        } else {
            8 / nt as u32
        };
        let plan: Vec<(Kernel, Dims)> = mats
            .iter()
            .map(|m| {
                if a8 && nt > 1 && mmv {
                    // A8 packed rows on the tensor cores (mmv_a8.cu).
                    let km = if m.ty == GgmlType::Q4_K {
                        Kernel::MmvQ4kA8
                    } else {
                        Kernel::MmvQ6pA8
                    };
                    return (km, reg.mmv_dims(m.n_out, m.k));
                }
                if a8 && nt > 1 {
                    // The A8 packed rows (matvec_packed_a8.cu), launched as batched decode does
                    // (`Registry::packed_plan_a8`).
                    let mut p = reg.packed_plan_a8(m.n_out, m.k, nt);
                    let red = (reg.mvb_warps * rows) as usize * nt * 36 * 4;
                    if unstaged || (default_smem && p.dims.smem as usize + red > SMEM_DEFAULT_MAX) {
                        p.staged = false;
                        p.dims.smem = 0;
                    }
                    return (kernel_a8(m.ty, nt, p.staged), p.dims);
                }
                if a8 {
                    // The A8 one-token kernels (Q4_K, Q6_K-P), launched as their A16 twins; with
                    // `--a8r` the register-resident ones where they fit.
                    let (ks, kp, kr) = if m.ty == GgmlType::Q4_K {
                        (Kernel::MvsQ4kA8T1, Kernel::MvpQ4kA8T1, Kernel::MvrQ4kA8T1)
                    } else {
                        (Kernel::MvsQ6pA8T1, Kernel::MvpQ6pA8T1, Kernel::MvrQ6pA8T1)
                    };
                    if let Some(d) = reg.mvr_dims(m.n_out, m.k).filter(|_| a8r) {
                        return (kr, d);
                    }
                    let p = reg.t1_plan(kp, m.n_out, m.k, !unstaged);
                    return (if p.staged { ks } else { kp }, p.dims);
                }
                if nt == 1 {
                    // The engine's one-token kernel (4 warps by default), staged where it fits
                    // (`Registry::t1_plan`, weight ring included).
                    let p = reg.t1_plan(kernel(m.ty, 1, false, m.q6p), m.n_out, m.k, !unstaged);
                    return (kernel(m.ty, nt, p.staged, m.q6p), p.dims);
                }
                if mmv {
                    // Tensor-core packed rows (mmv_a16.cu); `--pair`: the paired tiles for at
                    // most 4 rows.
                    let (km, kpair) = match (m.ty, m.q6p) {
                        (GgmlType::Q4_K, _) => (Kernel::MmvQ4k, Kernel::MmvPairQ4k),
                        (_, true) => (Kernel::MmvQ6p, Kernel::MmvPairQ6p),
                        _ => (Kernel::MmvQ6k, Kernel::MmvPairQ6k),
                    };
                    if pair && nt <= MMV_PAIR_MAX_TOKENS {
                        return (kpair, reg.mmv_pair_dims(m.n_out, m.k));
                    }
                    return (km, reg.mmv_dims(m.n_out, m.k));
                }
                // Packed rows: batched decode's launch (`MUSER_CUDA_MVB_WARPS` warps, opt-in
                // shared memory), or the 48 KiB default with `--default-smem`.
                let mut p = reg.packed_plan(m.n_out, m.k, nt);
                let red = (reg.mvb_warps * rows) as usize * nt * 36 * 4;
                if unstaged || (default_smem && p.dims.smem as usize + red > SMEM_DEFAULT_MAX) {
                    p.staged = false;
                    p.dims.smem = 0;
                }
                (kernel(m.ty, nt, p.staged, m.q6p), p.dims)
            })
            .collect();
        // One matrix's launch on weight copy c.
        let one = |m: &Mat, kern: Kernel, dims: Dims, c: usize| {
            let (w, row_bytes) = (m.copies[c].ptr(), m.row_bytes);
            launch(
                reg.get(kern, Math::Strict),
                dims,
                gpu.stream(),
                A16Matmul {
                    w,
                    row_bytes,
                    xq: xq.ptr(),
                    xs: xs.ptr(),
                    xsum: xsum.ptr(),
                    k: m.k,
                    y: y.ptr(),
                    ldy: m.n_out,
                    n_out: m.n_out,
                    n_tok: nt,
                }
                .args(),
            )
            .expect("launch");
        };
        let pass = |c: usize| {
            for (m, &(kern, dims)) in mats.iter().zip(&plan) {
                one(m, kern, dims, c);
            }
        };
        for c in 0..COPIES {
            pass(c);
        }
        gpu.wait("warm-up").expect("wait");
        let mut us = Vec::new();
        for _ in 0..9 {
            let t = Instant::now();
            for r in 0..4 * COPIES {
                pass(r % COPIES);
            }
            gpu.wait("bench").expect("wait");
            us.push(t.elapsed().as_secs_f64() * 1e6 / (4 * COPIES) as f64);
        }
        us.sort_by(f64::total_cmp);
        let med = us[us.len() / 2];
        if nt == 1 {
            t1 = med;
        }
        let staged: Vec<&str> = plan
            .iter()
            .map(|(k, d)| match (k, d.smem > 0) {
                (Kernel::MmvQ4k | Kernel::MmvQ6k | Kernel::MmvQ6p, _) => "m",
                (Kernel::MmvPairQ4k | Kernel::MmvPairQ6k | Kernel::MmvPairQ6p, _) => "P",
                (Kernel::MvrQ4kA8T1 | Kernel::MvrQ6pA8T1, _) => "r",
                (_, true) => "s",
                _ => "p",
            })
            .collect();
        println!(
            "nt {nt}: {med:8.1} us per layer ({:.0} GB/s of weights), aggregate {:.2}x one token  [{}] (min {:.1}, max {:.1})",
            layer_bytes as f64 / med / 1e3,
            nt as f64 * t1 / med,
            staged.join(""),
            us[0],
            us[us.len() - 1]
        );
        if nt == 1 {
            // Each matrix alone (its launches back to back over the copies).
            for (m, &(kern, dims)) in mats.iter().zip(&plan) {
                let mut ts = Vec::new();
                for _ in 0..5 {
                    let t = Instant::now();
                    for r in 0..4 * COPIES {
                        one(m, kern, dims, r % COPIES);
                    }
                    gpu.wait("bench").expect("wait");
                    ts.push(t.elapsed().as_secs_f64() * 1e6 / (4 * COPIES) as f64);
                }
                ts.sort_by(f64::total_cmp);
                let t = ts[ts.len() / 2];
                println!(
                    "  {:?} {} -> {} ({}): {t:7.1} us ({:.0} GB/s)",
                    m.ty,
                    m.k,
                    m.n_out,
                    kern.symbol(),
                    (m.n_out * m.row_bytes) as f64 / t / 1e3
                );
            }
        }
    }
}
