//! The attention kernels (attention.cu, attn_h16.cu) on the device: split attention and its
//! combines against an f64 softmax over the f16 cache, the decode and prefill kernels against each
//! other bit for bit, the fused combines against the unfused pairs. Harness and what the guards catch:
//! `cuda_support` (and `cuda_kernels.rs`'s header). Without a CUDA device the test prints
//! "skipping: no CUDA device" and returns (CI).

mod cuda_support;

use half::f16;
use muser_cuda::attn_h16::AttnH16Shape;
use muser_cuda::launch::{AttnShape, ATTN_MT_TOKENS, SMEM_DEFAULT_MAX};
use muser_cuda::step_switches::combine_cluster;
use muser_cuda::{DeviceBuffer, KArgs, Kernel};

use cuda_support::*;

/// The steps every attention test runs, (window, cap, pos0, n_tok): full attention over a long
/// cache (many tiles and key blocks), over a short one, and a 16-key window whose ring (64 rows)
/// wraps in the step; prefill steps of 45 and 40 tokens: blocks of several tokens whose causal
/// and window edges fall inside tiles, partial last blocks.
const STEPS: [(usize, usize, usize, usize); 5] = [
    (0, 1100, 1040, 3),
    (0, 64, 61, 3),
    (16, 64, 190, 3),
    (0, 1100, 1000, 45),
    (16, 64, 190, 40),
];

/// The arguments every attention partial kernel starts with: Q, K cache, V cache, cap, window,
/// scale, heads, KV heads.
fn partial_head(
    (q, k, v): (&DeviceBuffer, &DeviceBuffer, &DeviceBuffer),
    cap: usize,
    window: usize,
    scale: f32,
    (nh, nkv): (usize, usize),
) -> KArgs {
    KArgs::new()
        .ptr(q.ptr())
        .ptr(k.ptr())
        .ptr(v.ptr())
        .int(cap)
        .int(window)
        .f32(scale)
        .int(nh)
        .int(nkv)
}

/// `n` cache values in [-1, 1), rounded to f16.
fn f16_cache(n: usize, seed: u64) -> Vec<f16> {
    rand_vec(n, seed, -1.0, 1.0)
        .into_iter()
        .map(f16::from_f32)
        .collect()
}

/// softmax(scale · q·k) · v in f64 over positions lo..=pos (cache row p % cap), per token and
/// head: `[n_tok][nh * hdv]`.
fn reference(
    q: &[f32],
    kc: &[f16],
    vc: &[f16],
    (nh, nkv, hd, hdv): (usize, usize, usize, usize),
    (window, cap, pos0, n_tok): (usize, usize, usize, usize),
) -> Vec<f32> {
    let (gqa, kvw, vw, aw) = (nh / nkv, nkv * hd, nkv * hdv, nh * hdv);
    let scale = 1.0 / (hd as f32).sqrt();
    let mut want = vec![0f32; n_tok * aw];
    let win = if window > 0 { window } else { usize::MAX };
    for t in 0..n_tok {
        let pos = pos0 + t;
        let lo = (pos + 1).saturating_sub(win);
        for h in 0..nh {
            let kh = h / gqa;
            let qh = &q[(t * nh + h) * hd..(t * nh + h + 1) * hd];
            let s: Vec<f64> = (lo..=pos)
                .map(|p| {
                    let kr = &kc[(p % cap) * kvw + kh * hd..][..hd];
                    let prod = |(&a, b): (&f32, &f16)| f64::from(a) * f64::from(b.to_f32());
                    f64::from(scale) * qh.iter().zip(kr).map(prod).sum::<f64>()
                })
                .collect();
            let m = s.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v));
            let e: Vec<f64> = s.iter().map(|v| (v - m).exp()).collect();
            let z: f64 = e.iter().sum();
            for j in 0..hdv {
                let v = |p: usize| f64::from(vc[(p % cap) * vw + kh * hdv + j].to_f32());
                let acc: f64 = (lo..=pos).zip(&e).map(|(p, &w)| w * v(p)).sum();
                want[t * aw + h * hdv + j] = (acc / z) as f32;
            }
        }
    }
    want
}

/// attn_partial + attn_combine against an f64 softmax over the f16 cache, for key-block sizes
/// 32 and 512 and every heads-per-block that divides the GQA ratio (bit-identical to each
/// other); the prefill kernel attn_partial_mt (eight tokens per block, tiles shared across
/// tokens whose visible ranges differ) bit-identical to attn_partial in every head shape;
/// attn_combine_q without a gate == attn_combine + A16, with one == attn_combine →
/// sigmoid_gate_q; attn_combine_m the same outputs and each row's largest magnitude, and so
/// attn_combine_m_wide (one warp per head or per 32-value group);
/// attn_combine_h16 those and, from each token's last block, the row's f16 activations as
/// `muser_cuda::h16::act_reference` makes them.
#[test]
fn attention_matches_an_f64_softmax_and_fused_combines_are_exact() {
    let Some(d) = device() else { return };
    for (nh, nkv, hd, hdv) in [(8usize, 2usize, 128usize, 128usize), (6, 2, 64, 96)] {
        let gqa = nh / nkv;
        let (kvw, vw, aw) = (nkv * hd, nkv * hdv, nh * hdv);
        let scale = 1.0 / (hd as f32).sqrt();
        for (window, cap, pos0, n_tok) in STEPS {
            let q = rand_vec(n_tok * nh * hd, 21, -4.0, 4.0);
            let (kc, vc) = (f16_cache(cap * kvw, 22), f16_cache(cap * vw, 23));
            let gate = rand_vec(n_tok * aw, 24, -4.0, 4.0);
            let (qd, kd, vd, gd) = (d.input(&q), d.input(&kc), d.input(&vc), d.input(&gate));
            let sp = d.step(pos0, n_tok);
            let want = reference(&q, &kc, &vc, (nh, nkv, hd, hdv), (window, cap, pos0, n_tok));
            let want_scale = row_max(&want, hdv);
            for super_len in [32usize, 512] {
                let n_super = (pos0 + n_tok - 1) / super_len + 2; // one block past the last visible
                let slots = n_tok * nh * n_super;
                let what = format!(
                    "attention, heads {nh}/{nkv} of {hd}/{hdv}, window {window}, cap {cap}, \
                     pos {pos0}+{n_tok}, super {super_len}"
                );
                let partial_args = |op: u64, mp: u64, lp: u64, bufs: usize| {
                    partial_head((&qd, &kd, &vd), cap, window, scale, (nh, nkv))
                        .int(hd)
                        .int(hdv)
                        .int(n_super)
                        .int(super_len)
                        .ptr(op)
                        .ptr(mp)
                        .ptr(lp)
                        .ptr(sp.ptr())
                        .int(bufs)
                };
                let mut first: Option<Vec<u32>> = None;
                let mut parts = None;
                for hpb in (1..=gqa).rev().filter(|&g| gqa % g == 0) {
                    let op = d.guarded(slots * hdv * 4);
                    let (mp, lp) = (d.guarded(slots * 4), d.guarded(slots * 4));
                    let shape = AttnShape::decode(hpb, hd, hdv);
                    let args = partial_args(op.ptr, mp.ptr, lp.ptr, shape.bufs);
                    let grid = [n_super, nh / hpb, n_tok + SPARE];
                    d.go(
                        Kernel::AttnPartial,
                        grid,
                        32 * hpb,
                        shape.smem(hd, hdv),
                        args,
                    );
                    let mut got: Vec<u32> = d.read(&op, "Op");
                    got.extend(d.read::<u32>(&mp, "Mp"));
                    got.extend(d.read::<u32>(&lp, "Lp"));
                    let msg = format!("Op|Mp|Lp, {hpb} vs {gqa} heads per block, {what}");
                    match &first {
                        None => first = Some(got),
                        Some(f0) => same(&got, f0, &msg),
                    }
                    parts = Some((op, mp, lp));
                }
                let first = first.expect("at least one block shape");
                let mt_heads = (1..=gqa.min(4)).filter(|&g| gqa % g == 0);
                let mut mt_runs = 0;
                for shape in mt_heads.map(|heads| AttnShape {
                    heads,
                    tokens: ATTN_MT_TOKENS,
                    bufs: 1,
                }) {
                    if shape.smem(hd, hdv) > SMEM_DEFAULT_MAX {
                        continue;
                    }
                    let op = d.guarded(slots * hdv * 4);
                    let (mp, lp) = (d.guarded(slots * 4), d.guarded(slots * 4));
                    let args = partial_args(op.ptr, mp.ptr, lp.ptr, shape.bufs);
                    let dims = shape.dims(n_super, nh, n_tok + SPARE, hd, hdv);
                    let grid = [dims.grid.0, dims.grid.1, dims.grid.2].map(|v| v as usize);
                    d.go(
                        Kernel::AttnPartialMt,
                        grid,
                        dims.block as usize,
                        dims.smem as usize,
                        args,
                    );
                    let mut got: Vec<u32> = d.read(&op, "Op (mt)");
                    got.extend(d.read::<u32>(&mp, "Mp (mt)"));
                    got.extend(d.read::<u32>(&lp, "Lp (mt)"));
                    let msg =
                        format!("Op|Mp|Lp, attn_partial_mt {shape:?} vs attn_partial, {what}");
                    same(&got, &first, &msg);
                    mt_runs += 1;
                }
                assert!(mt_runs > 0, "no attn_partial_mt shape fits, {what}");
                eprintln!("{what}: attn_partial_mt == attn_partial ({mt_runs} shapes)");
                let (op, mp, lp) = parts.expect("at least one block shape");
                let combine_args = || {
                    KArgs::new()
                        .ptr(op.ptr)
                        .ptr(mp.ptr)
                        .ptr(lp.ptr)
                        .int(window)
                        .int(nh)
                        .int(hdv)
                        .int(n_super)
                        .int(super_len)
                };
                let cgrid = [nh, n_tok + SPARE, 1];
                let a = d.guarded(n_tok * aw * 4);
                let args = combine_args().ptr(a.ptr).ptr(sp.ptr());
                d.go(Kernel::AttnCombine, cgrid, 32, 0, args);
                let ga = d.read::<f32>(&a, "A");
                close(&ga, &want, 1e-5, |i| want_scale[i], &what);
                for gated in [false, true] {
                    let (aq, qq) = (d.guarded(n_tok * aw * 4), d.quants(n_tok, aw));
                    let args = combine_args()
                        .ptr(aq.ptr)
                        .ptr(if gated { gd.ptr() } else { 0 })
                        .ptr(sp.ptr())
                        .ptr(qq.xq.ptr)
                        .ptr(qq.xs.ptr)
                        .ptr(qq.xsum.ptr);
                    d.go(Kernel::AttnCombineQ, cgrid, 32, 0, args);
                    let what = format!("attn_combine_q gated={gated}, {what}");
                    let (gaq, quants) = (d.read::<f32>(&aq, &what), d.read_quants(&qq, &what));
                    let (want_a, want_q) = if gated {
                        let (ab, qs) = (d.guarded_from(&ga), d.quants(n_tok, aw));
                        let args = KArgs::new().ptr(ab.ptr).ptr(gd.ptr()).int(aw).ptr(sp.ptr());
                        d.ewq(Kernel::SigmoidGateQ, args, &qs, aw, n_tok);
                        (d.read::<f32>(&ab, &what), d.read_quants(&qs, &what))
                    } else {
                        (
                            ga.clone(),
                            d.read_quants(&d.quant_a16(a.ptr, aw, n_tok), &what),
                        )
                    };
                    same_f32(&gaq, &want_a, &what);
                    same_quants(&quants, &want_q, &what);
                    same_quants(&quants, &cpu_a16(&gaq, aw), &format!("{what} (CPU)"));
                    // attn_combine_m: the same outputs, and each row's largest magnitude; so
                    // attn_combine_m_wide (the decode launches' combine; MUSER_CUDA_COMBINE_WIDE=N,
                    // default 8, piped unless MUSER_CUDA_COMBINE_PIPE=0) on one warp per head and
                    // on one warp per 32-value group — where a head has N partials or more (the
                    // steps at 1000+ with 32-key partials), the path that loads 32 partials at
                    // once. With MUSER_CUDA_COMBINE_WIDE=0 that path is compiled out and this
                    // checks the plain one.
                    let want_m: Vec<u32> = want_a
                        .chunks(aw)
                        .map(|row| {
                            let max =
                                row.iter()
                                    .fold(0f32, |m, v| if v.is_nan() { m } else { m.max(v.abs()) });
                            max.to_bits()
                        })
                        .collect();
                    for (kernel, name, threads) in [
                        (Kernel::AttnCombineM, "attn_combine_m", 32),
                        (Kernel::AttnCombineMWide, "attn_combine_m_wide", 32),
                        (Kernel::AttnCombineMWide, "attn_combine_m_wide", hdv),
                    ] {
                        let (am, m) = (
                            d.guarded(n_tok * aw * 4),
                            d.guarded_from(&vec![0u32; n_tok]),
                        );
                        let args = combine_args()
                            .ptr(am.ptr)
                            .ptr(if gated { gd.ptr() } else { 0 })
                            .ptr(sp.ptr())
                            .ptr(m.ptr);
                        d.go(kernel, cgrid, threads, 0, args);
                        let what = format!("{name} ({threads} threads), {what}");
                        same_f32(&d.read::<f32>(&am, &what), &want_a, &what);
                        same(&d.read::<u32>(&m, &what), &want_m, &what);
                    }
                    // attn_combine_h16: the same outputs and maxima, one ticket per block of a
                    // token, and the token's last block writes the row's f16 activations —
                    // act_h16's format (its host mirror, bit for bit).
                    let zeros = vec![0u32; n_tok];
                    let (ah, mh, tk) = (
                        d.guarded(n_tok * aw * 4),
                        d.guarded_from(&zeros),
                        d.guarded_from(&zeros),
                    );
                    let acts = H16Acts::new(&d, n_tok, aw);
                    let args = combine_args()
                        .ptr(ah.ptr)
                        .ptr(if gated { gd.ptr() } else { 0 })
                        .ptr(sp.ptr())
                        .ptr(mh.ptr)
                        .ptr(tk.ptr)
                        .ptr(acts.xh.ptr)
                        .ptr(acts.xs.ptr)
                        .ptr(acts.xs16.ptr)
                        .ptr(acts.xinv.ptr);
                    d.go(Kernel::AttnCombineH16, cgrid, 32, 0, args);
                    let what = format!("attn_combine_h16, {what}");
                    same_f32(&d.read::<f32>(&ah, &what), &want_a, &what);
                    same(&d.read::<u32>(&mh, &what), &want_m, &what);
                    same(&d.read::<u32>(&tk, &what), &vec![nh as u32; n_tok], &what);
                    acts.check(&d, &want_a, aw, &what);
                    // attn_combine_h16_cl (MUSER_CUDA_COMBINE_CL, decode): the same outputs
                    // and f16 activations from one cluster of blocks per token, the row maximum
                    // exchanged between them (M is not written).
                    let (cl, threads) =
                        combine_cluster(nh, hdv).expect("the test's heads fit a cluster");
                    let ac = d.guarded(n_tok * aw * 4);
                    let acts = H16Acts::new(&d, n_tok, aw);
                    let args = combine_args()
                        .ptr(ac.ptr)
                        .ptr(if gated { gd.ptr() } else { 0 })
                        .ptr(sp.ptr())
                        .ptr(acts.xh.ptr)
                        .ptr(acts.xs.ptr)
                        .ptr(acts.xs16.ptr)
                        .ptr(acts.xinv.ptr);
                    let grid = [cl as usize, n_tok + SPARE, 1];
                    d.go_cluster(Kernel::AttnCombineH16Cl, grid, threads as usize, cl, args);
                    let what = format!("attn_combine_h16_cl ({cl} blocks of {threads}), {what}");
                    same_f32(&d.read::<f32>(&ac, &what), &want_a, &what);
                    acts.check(&d, &want_a, aw, &what);
                }
                eprintln!("{what}: fused combines ok");
            }
        }
    }
}

/// The f16 route's tensor-core partials (`attn_h16_*`, attn_h16.cu): one token per block
/// (decode) and every prefill shape (several tokens per block sharing each K/V tile, tokens
/// whose visible ranges differ inside one warp when the GQA ratio is below 16, two warps a token
/// above), with 1, 2 or 4 tiles in flight, give the same Op / Mp / Lp bits; combined by `attn_combine`, within 4e-3 of each
/// row's largest value of the f64 softmax (f16 queries and probabilities, f32 sums).
#[test]
fn attention_h16_decode_and_prefill_agree_bit_for_bit() {
    let Some(d) = device() else { return };
    for (nh, nkv, hd) in [
        (32usize, 2usize, 128usize),
        (8, 2, 128),
        (4, 2, 64),
        (32, 1, 64),
    ] {
        let gqa = nh / nkv;
        let (kvw, aw) = (nkv * hd, nh * hd);
        let scale = 1.0 / (hd as f32).sqrt();
        // STEPS, then a 70-token prefill from position 0 (blocks of several tokens whose causal
        // edges cut tiles from the first key on).
        for (window, cap, pos0, n_tok) in STEPS.into_iter().chain([(0, 600, 0, 70)]) {
            let q = rand_vec(n_tok * nh * hd, 31, -4.0, 4.0);
            let (kc, vc) = (f16_cache(cap * kvw, 32), f16_cache(cap * kvw, 33));
            let (qd, kd, vd) = (d.input(&q), d.input(&kc), d.input(&vc));
            let sp = d.step(pos0, n_tok);
            let want = reference(&q, &kc, &vc, (nh, nkv, hd, hd), (window, cap, pos0, n_tok));
            let want_scale = row_max(&want, hd);
            for super_len in [32usize, 128, 512] {
                let n_super = (pos0 + n_tok - 1) / super_len + 2;
                let slots = n_tok * nh * n_super;
                let what = format!(
                    "attn_h16, heads {nh}/{nkv} of {hd}, window {window}, cap {cap}, \
                     pos {pos0}+{n_tok}, super {super_len}"
                );
                let dec = AttnH16Shape::decode(gqa, hd, hd).expect("64 / 128");
                let pre = AttnH16Shape::prefill(gqa, hd, hd).expect("64 / 128");
                // Decode with 2 tiles in flight, the prefill shapes: the default, one token per
                // block on the prefill warps, 4 and 1 tiles in flight.
                // Where the rows fit, decode on four warps per 16 rows (a quarter of the output
                // columns each), with 4 and 2 tiles in flight.
                let cols = dec.with_cols(gqa);
                let shapes = [
                    dec,
                    dec.with_bufs(2),
                    pre,
                    pre.one_token_per_block(),
                    pre.with_bufs(4),
                    pre.with_bufs(1),
                ]
                .into_iter()
                .chain(cols)
                .chain(cols.map(|c| c.with_bufs(2)));
                let mut first: Option<Vec<u32>> = None;
                let mut parts = None;
                for shape in shapes {
                    let op = d.guarded(slots * hd * 4);
                    let (mp, lp) = (d.guarded(slots * 4), d.guarded(slots * 4));
                    let args = partial_head((&qd, &kd, &vd), cap, window, scale, (nh, nkv))
                        .int(n_super)
                        .int(super_len)
                        .int(shape.tokens)
                        .int(shape.bufs)
                        .ptr(op.ptr)
                        .ptr(mp.ptr)
                        .ptr(lp.ptr)
                        .ptr(sp.ptr());
                    let dims = shape.dims(n_super, nkv, n_tok + SPARE);
                    let grid = [dims.grid.0, dims.grid.1, dims.grid.2].map(|v| v as usize);
                    d.go(
                        shape.kernel,
                        grid,
                        dims.block as usize,
                        dims.smem as usize,
                        args,
                    );
                    let mut got: Vec<u32> = d.read(&op, "Op");
                    got.extend(d.read::<u32>(&mp, "Mp"));
                    got.extend(d.read::<u32>(&lp, "Lp"));
                    match &first {
                        None => first = Some(got),
                        Some(f0) => {
                            same(&got, f0, &format!("Op|Mp|Lp, {shape:?} vs decode, {what}"))
                        }
                    }
                    parts.get_or_insert((op, mp, lp));
                }
                let (op, mp, lp) = parts.expect("a shape ran");
                let a = d.guarded(n_tok * aw * 4);
                let args = KArgs::new()
                    .ptr(op.ptr)
                    .ptr(mp.ptr)
                    .ptr(lp.ptr)
                    .int(window)
                    .int(nh)
                    .int(hd)
                    .int(n_super)
                    .int(super_len)
                    .ptr(a.ptr)
                    .ptr(sp.ptr());
                d.go(Kernel::AttnCombine, [nh, n_tok + SPARE, 1], 32, 0, args);
                let ga = d.read::<f32>(&a, "A");
                close(&ga, &want, 4e-3, |i| want_scale[i], &what);
                eprintln!("{what}: decode == prefill shapes, close to f64");
            }
        }
    }
}

/// The f16 route's activation outputs of `n_tok` rows of `width` values (XH, XSUM, XSUM16,
/// XINV), as guarded device buffers.
struct H16Acts {
    xh: Guarded,
    xs: Guarded,
    xs16: Guarded,
    xinv: Guarded,
}

impl H16Acts {
    fn new(d: &Dev, n_tok: usize, width: usize) -> H16Acts {
        H16Acts {
            xh: d.guarded(n_tok * width * 2),
            xs: d.guarded(n_tok * width / 32 * 2),
            xs16: d.guarded(n_tok * width / 16 * 2),
            xinv: d.guarded(n_tok * 4),
        }
    }

    /// Each row of `want` (rows of `width`) in act_h16's format — its host mirror — bit for bit.
    fn check(&self, d: &Dev, want: &[f32], width: usize, what: &str) {
        let (gh, gs, gs16, gi) = (
            d.read::<u16>(&self.xh, what),
            d.read::<u16>(&self.xs, what),
            d.read::<u16>(&self.xs16, what),
            d.read::<f32>(&self.xinv, what),
        );
        let w = width;
        for (t, row) in want.chunks(w).enumerate() {
            let r = muser_cuda::h16::act_reference(row).expect("a row of 64s");
            let msg = format!("{what}, token {t}");
            same(&gh[t * w..(t + 1) * w], &r.xh, &msg);
            same(&gs[t * w / 32..(t + 1) * w / 32], &r.xsum, &msg);
            same(&gs16[t * w / 16..(t + 1) * w / 16], &r.xsum16, &msg);
            same(&[gi[t].to_bits()], &[r.inv.to_bits()], &msg);
        }
    }
}
