//! The f16 route's kernels on the device (matvec_h16.cu, mmt_h16.cu): `act_h16` equals
//! `muser_cuda::h16::act_reference` bit for bit; `mvh_q4h_s*` and `mvh_q6h_s*` are within
//! f32-accumulation distance of the exact value of their own f16 operands
//! (`h16::mvh_reference_*`), close to the exact product of the GGUF weights and the f32
//! activations, and give each token the same bits whatever the token count and the other tokens
//! — and the prefill kernels (`mmh_*`, `mmt_*`, the warpgroup tiles `mmw_*` after `h16_natural`,
//! with `MUSER_CUDA_MMW_SPLIT=1` the split tiles `mmws_*` and `mmw_fold`) the same bits as the
//! decode ones. Without a
//! CUDA device every test says "skipping: no CUDA device" (CI); `scripts/device/cuda-tests.sh` runs it on the H200.

use muser_cuda::h16::{self, H16Row};
use muser_cuda::launch::launch;
use muser_cuda::{q4h, q6h, DeviceBuffer, Gpu, HWeights, KArgs, Kernel, Math, Registry};
use muser_gguf::GgmlType;

mod support;
use support::*;

/// `x` (`[n_tok][k]`) through `act_h16`: the device buffers (f16 fragments, 32- and 16-value
/// sums, inverses).
fn act_on_device(gpu: &Gpu, reg: &Registry, x: &[f32], k: usize) -> [DeviceBuffer; 4] {
    let n_tok = x.len() / k;
    let xd = upload_bytes(gpu, bytemuck_f32(x));
    let xh = gpu.alloc(n_tok * k * 2 + 256, "xh").expect("alloc");
    let xs = gpu.alloc(n_tok * k / 32 * 2 + 256, "xsum").expect("alloc");
    let xs16 = gpu
        .alloc(n_tok * k / 16 * 2 + 256, "xsum16")
        .expect("alloc");
    let inv = gpu.alloc(n_tok * 4 + 256, "xinv").expect("alloc");
    let args = KArgs::new()
        .ptr(xd.ptr())
        .int(k)
        .int(k)
        .int(n_tok)
        .ptr(xh.ptr())
        .ptr(xs.ptr())
        .ptr(xs16.ptr())
        .ptr(inv.ptr());
    launch(
        reg.get(Kernel::ActH16, Math::Strict),
        Registry::act_h16_dims(n_tok, k),
        gpu.stream(),
        args,
    )
    .expect("act_h16");
    gpu.wait("act_h16").expect("wait");
    [xh, xs, xs16, inv]
}

/// Token rows of `[n_tok][k]` values of magnitudes 10^-3 .. 10^3 (the row scale at work).
fn tokens(n_tok: usize, k: usize, seed: u64) -> Vec<f32> {
    let mut x = rand_vec(n_tok * k, seed);
    for (t, row) in x.chunks_mut(k).enumerate() {
        let m = 10f32.powi(t as i32 % 7 - 3);
        row.iter_mut().for_each(|v| *v *= m);
    }
    x
}

#[test]
fn act_h16_matches_the_reference_bit_for_bit() {
    let Some((gpu, reg)) = device() else { return };
    for (k, n_tok) in [(256, 3), (6656, 9), (19968, 2)] {
        let x = tokens(n_tok, k, 11 + k as u64);
        let [xh, xs, xs16, inv] = act_on_device(&gpu, &reg, &x, k);
        let mut h = vec![0u16; n_tok * k];
        let mut s = vec![0u16; n_tok * k / 32];
        let mut s16 = vec![0u16; n_tok * k / 16];
        let mut iv = vec![0f32; n_tok];
        gpu.download(&mut h, xh.ptr(), "xh").expect("dl");
        gpu.download(&mut s, xs.ptr(), "xsum").expect("dl");
        gpu.download(&mut s16, xs16.ptr(), "xsum16").expect("dl");
        gpu.download(&mut iv, inv.ptr(), "xinv").expect("dl");
        for t in 0..n_tok {
            let r = h16::act_reference(&x[t * k..(t + 1) * k]).expect("reference");
            assert_eq!(
                &h[t * k..(t + 1) * k],
                &r.xh[..],
                "k {k} token {t}: f16 values"
            );
            assert_eq!(
                &s[t * k / 32..(t + 1) * k / 32],
                &r.xsum[..],
                "k {k} token {t}: sums"
            );
            assert_eq!(
                &s16[t * k / 16..(t + 1) * k / 16],
                &r.xsum16[..],
                "k {k} token {t}: 16-value sums"
            );
            assert_eq!(iv[t].to_bits(), r.inv.to_bits(), "k {k} token {t}: inverse");
        }
    }
}

/// `n_tok` tokens through `mvh_*` (or with `prefill` `mmh_*`; the plan's kernel for the layout
/// and `n_out`): `[n_tok][n_out]`.
fn mvh_on_device(
    gpu: &Gpu,
    reg: &Registry,
    (fmt, w, exp): (HWeights, &DeviceBuffer, i32),
    (n_out, k): (usize, usize),
    acts: &[DeviceBuffer; 4],
    (n_tok, kind): (usize, Mm),
) -> Vec<f32> {
    let (kernel, dims) = match kind {
        Mm::Decode => reg.mvh_plan(fmt, n_out, k, n_tok),
        Mm::Rows => reg.mmh_plan(fmt, n_out, n_tok),
        Mm::Tile => reg.mmt_plan(fmt, n_out, n_tok),
    };
    let (y, yp) = guarded(gpu, n_tok * n_out);
    // With `MUSER_CUDA_MMW_SPLIT=1` (the default) the split tiles (scratch, then the fold).
    let split = matches!(kind, Mm::Tile)
        .then(|| reg.mmw_split_plan(fmt, n_out, n_tok))
        .flatten();
    // The warpgroup tiles (`MUSER_CUDA_MMT=wg`) read the activations in natural order.
    let natural = matches!(kind, Mm::Tile) && (reg.mmt_natural(n_out) || split.is_some());
    let xn = natural.then(|| {
        let xn = gpu.alloc(n_tok * k * 2 + 256, "xn").expect("alloc");
        let args = KArgs::new()
            .ptr(acts[0].ptr())
            .int(k)
            .int(n_tok)
            .ptr(xn.ptr());
        launch(
            reg.get(Kernel::H16Natural, Math::Strict),
            Registry::h16_natural_dims(n_tok, k),
            gpu.stream(),
            args,
        )
        .expect("h16_natural");
        xn
    });
    let args = KArgs::new()
        .ptr(w.ptr())
        .int(n_out)
        .int(k)
        .ptr(xn.as_ref().map_or(acts[0].ptr(), |x| x.ptr()))
        .ptr(acts[1].ptr())
        .ptr(acts[2].ptr())
        .ptr(acts[3].ptr())
        .f32(2f32.powi(-exp))
        .ptr(yp)
        .int(n_out)
        .int(n_tok);
    if let Some(sp) = split {
        let p = gpu
            .alloc(sp.scratch_floats * 4 + 256, "split sums")
            .expect("alloc");
        let args = args.ptr(p.ptr());
        launch(
            reg.get(sp.kernel, Math::Strict),
            sp.dims,
            gpu.stream(),
            args,
        )
        .expect("mmws");
        let fold = sp.fold_args(
            p.ptr(),
            k,
            n_out,
            n_tok,
            acts[3].ptr(),
            2f32.powi(-exp),
            yp,
            n_out,
        );
        launch(
            reg.get(Kernel::MmwFold, Math::Strict),
            sp.fold_dims,
            gpu.stream(),
            fold,
        )
        .expect("mmw_fold");
        gpu.wait("mmws").expect("wait");
        return read_guarded(gpu, &y, n_tok * n_out, "mvh output");
    }
    launch(reg.get(kernel, Math::Strict), dims, gpu.stream(), args).expect("mvh");
    gpu.wait("mvh").expect("wait");
    read_guarded(gpu, &y, n_tok * n_out, "mvh output")
}

/// Which f16 matmul kernel: decode (`mvh_*`), prefill rows (`mmh_*`) or prefill tiles (`mmt_*`).
#[derive(Clone, Copy, Debug)]
enum Mm {
    Decode,
    Rows,
    Tile,
}

/// A Q4_K or Q6_K matrix in its f16-route layout: (layout, bytes, exponent, reference).
type Reference = Box<dyn Fn(&H16Row) -> (Vec<f64>, Vec<f64>)>;

fn repacked(
    [sc, sc6]: [q4h::Scales; 2],
    ty: GgmlType,
    src: &[u8],
    n_out: usize,
    k: usize,
) -> (HWeights, Vec<u8>, i32, Reference) {
    match ty {
        GgmlType::Q4_K => {
            let h = q4h::repack(src, n_out, k, sc).expect("repack");
            let l = q4h::logical(&h.bytes, n_out, k, sc).expect("logical");
            let exp = h.exp;
            let f = Box::new(move |row: &H16Row| h16::mvh_reference_q4h(&l, exp, n_out, row));
            (HWeights::Q4H, h.bytes, exp, f)
        }
        _ => {
            let h = q6h::repack(src, n_out, k, sc6).expect("repack");
            let l = q6h::logical(&h.bytes, n_out, k, sc6).expect("logical");
            let exp = h.exp;
            let f = Box::new(move |row: &H16Row| h16::mvh_reference_q6h(&l, exp, n_out, row));
            (HWeights::Q6H, h.bytes, exp, f)
        }
    }
}

/// `mvh_*` / `mmh_*` / `mmt_*` on `ty`'s layout: the arithmetic, the exact product, batch invariance.
fn check_mvh(ty: GgmlType) {
    let Some((gpu, reg)) = device() else { return };
    // One shape per chain count: 16 row groups (S = 16), 128 (S = 8), 416 (S = 4) — chains
    // 4..7 and 2..3 of the last two empty —, 1025 (S = 2, or 4 with MUSER_CUDA_H16_WIDE_S=4;
    // a last tile of one group) and 25 groups (the same).
    for (n_out, k) in [
        (256, 6656),
        (2048, 1024),
        (6656, 512),
        (16400, 512),
        (400, 768),
    ] {
        let (src, row_bytes) = quantized_rows(ty, n_out, k, 5 + n_out as u64);
        let (fmt, bytes, exp, reference) =
            repacked([reg.h16.q4h_scales, reg.h16.q6h_scales], ty, &src, n_out, k);
        let w = upload_bytes(&gpu, &bytes);
        let n_tok = 20; // three blocks along y, the last one partly empty
        let x = tokens(n_tok, k, 3 + k as u64);
        let acts = act_on_device(&gpu, &reg, &x, k);
        let all = mvh_on_device(
            &gpu,
            &reg,
            (fmt, &w, exp),
            (n_out, k),
            &acts,
            (n_tok, Mm::Decode),
        );
        // The kernel against the exact value of its own operands.
        for (t, r) in x.chunks(k).enumerate() {
            let (want, abs) = reference(&h16::act_reference(r).expect("row"));
            for r in 0..n_out {
                let got = f64::from(all[t * n_out + r]);
                let err = (got - want[r]).abs();
                assert!(
                    err <= 5e-5 * abs[r] + 1e-30,
                    "{fmt:?} {n_out}×{k} token {t} row {r}: {got} vs {} (|terms| {})",
                    want[r],
                    abs[r]
                );
            }
        }
        // And close to the exact product of the GGUF weights and the f32 activations.
        let xf: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
        let exact = f64_products(ty, &src, row_bytes, &xf, k);
        for t in 0..n_tok {
            let (g, e) = (
                &all[t * n_out..(t + 1) * n_out],
                &exact[t * n_out..(t + 1) * n_out],
            );
            assert_close(
                &format!("{fmt:?} {n_out}×{k} token {t} vs exact"),
                g,
                e,
                4e-3,
                4e-3,
            );
        }
        // Batch invariance: each token alone, and the first 8 as one packed step, give the
        // bits of the 20-token pass.
        let bits_all = bits(&all);
        for t in [0usize, 5, 19] {
            let one = act_on_device(&gpu, &reg, &x[t * k..(t + 1) * k], k);
            let y = mvh_on_device(
                &gpu,
                &reg,
                (fmt, &w, exp),
                (n_out, k),
                &one,
                (1, Mm::Decode),
            );
            assert_eq!(
                bits(&y),
                &bits_all[t * n_out..(t + 1) * n_out],
                "{fmt:?} {n_out}×{k}: token {t} alone"
            );
        }
        let eight = act_on_device(&gpu, &reg, &x[..8 * k], k);
        let y = mvh_on_device(
            &gpu,
            &reg,
            (fmt, &w, exp),
            (n_out, k),
            &eight,
            (8, Mm::Decode),
        );
        assert_eq!(
            bits(&y),
            &bits_all[..8 * n_out],
            "{fmt:?} {n_out}×{k}: 8 tokens vs 20"
        );
        // The prefill kernels (rows: 32 tokens per block row; tiles: 128 rows × 64 tokens, the
        // chains one after another) give the same bits.
        for kind in [Mm::Rows, Mm::Tile] {
            let y = mvh_on_device(&gpu, &reg, (fmt, &w, exp), (n_out, k), &acts, (n_tok, kind));
            assert_eq!(
                bits(&y),
                bits_all,
                "{fmt:?} {n_out}×{k}: prefill kernel {kind:?} vs decode"
            );
        }
        // Tiles across two blocks of 64 tokens, the second partly empty.
        let n70 = 70;
        let x70 = tokens(n70, k, 9 + k as u64);
        let acts70 = act_on_device(&gpu, &reg, &x70, k);
        let dims = (n_out, k);
        let dec = mvh_on_device(&gpu, &reg, (fmt, &w, exp), dims, &acts70, (n70, Mm::Decode));
        let tile = mvh_on_device(&gpu, &reg, (fmt, &w, exp), dims, &acts70, (n70, Mm::Tile));
        assert_eq!(
            bits(&tile),
            bits(&dec),
            "{fmt:?} {n_out}×{k}: 70 tokens, tiles vs decode"
        );
    }
}

#[test]
fn mvh_q4h_is_its_arithmetic_and_every_token_count_gives_the_same_bits() {
    check_mvh(GgmlType::Q4_K);
}

#[test]
fn mvh_q6h_is_its_arithmetic_and_every_token_count_gives_the_same_bits() {
    check_mvh(GgmlType::Q6_K);
}
