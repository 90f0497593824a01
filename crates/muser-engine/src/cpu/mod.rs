//! The fast CPU route: quantized-activation matmuls over the mapped weights, an f16 KV cache
//! (rings of exactly `window` rows on sliding layers), f32 everywhere else, a fixed-size rayon
//! pool, and chunked prefill.
//!
//! Owns: `CpuSession`, one sequence's state and its forward pass. Invariant (BRIEF §2, part 3):
//! the logits of a token are bit-identical whatever the thread count, the prefill chunk size,
//! and whether tokens were evaluated one at a time or in batches — every kernel below computes
//! each output element by one fixed sequence of operations.

pub mod attention;
pub mod expf;
pub mod f16math;
pub mod kv;
pub mod matmul;
pub mod membw;
pub mod ops;
pub mod profile;
pub mod repack;

use std::sync::Arc;

use rayon::prelude::*;

use half::f16;
use half::slice::HalfFloatSliceExt;

use crate::config::FfnActivation;
use crate::model::Model;
use crate::EngineError;
use attention::{AttnShape, ChunkKv};
use kv::LayerCache;
use matmul::{matmul, matmul_many, ActFormat, Acts, WeightSource};
use ops::Rope;

/// Tokens per task of the per-token norms (`ops::rmsnorm_rows` interleaves eight rows).
const NORM_ROWS: usize = 8;

/// Which logit rows `eval` returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Logits {
    /// One row per evaluated token.
    All,
    /// Only the last token's row.
    Last,
}

/// Options of a CPU session.
#[derive(Clone, Debug)]
pub struct CpuOptions {
    /// Worker threads.
    pub threads: usize,
    /// Context size (maximum positions).
    pub n_ctx: usize,
    /// Prefill chunk: tokens evaluated together.
    pub chunk: usize,
    /// Activation format of the matmuls.
    pub acts: ActFormat,
    /// Repacked weights (`repack`): same logits, faster A8 decode.
    pub repack: repack::Repack,
}

/// One sequence on the CPU route.
pub struct CpuSession<'m> {
    model: &'m Model,
    cache: Vec<LayerCache>,
    ropes: Vec<Option<Rope>>,
    pool: Arc<rayon::ThreadPool>,
    /// The model's repacked weights (`repack`), when this session uses them.
    repacked: Option<Arc<repack::Repacked>>,
    opts: CpuOptions,
    n_past: usize,
    profile: profile::PhaseProfile,
}

impl<'m> CpuSession<'m> {
    pub fn new(model: &'m Model, opts: CpuOptions) -> Result<CpuSession<'m>, EngineError> {
        let c = &model.config;
        // Kernel switches fail here, typed, rather than as a panic at the first matmul.
        muser_quant::init_simd().map_err(|e| EngineError::Config(e.to_string()))?;
        muser_quant::init_prefetch().map_err(|e| EngineError::Config(e.to_string()))?;
        muser_quant::init_tile_tokens(muser_quant::simd_level())
            .map_err(|e| EngineError::Config(e.to_string()))?;
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(opts.threads.max(1))
            .build()
            .map_err(|e| EngineError::Threads(e.to_string()))?;
        let pool = Arc::new(pool);
        let repacked = if opts.repack.resolve(opts.acts, muser_quant::simd_level())? {
            Some(model.cpu_repacked(&pool)?)
        } else {
            None
        };
        let cache = (0..c.n_layer)
            .map(|il| {
                let ring = c.swa_layers[il].then_some(c.sliding_window.min(opts.n_ctx));
                LayerCache::new(c.kv_width(), c.n_head_kv * c.head_dim_v, ring)
            })
            .collect();
        let ropes = (0..c.n_layer)
            .map(|il| {
                c.rope_for_layer(il)
                    .map(|b| Rope::new(c.head_dim, b, c.rope_mode))
            })
            .collect();
        Ok(CpuSession {
            model,
            cache,
            ropes,
            pool,
            repacked,
            opts,
            n_past: 0,
            profile: profile::PhaseProfile::from_env(),
        })
    }

    /// What produces this session's numbers.
    pub fn route_identity(&self) -> String {
        let level = muser_quant::simd_level();
        // Prefill tile: weight rows x tokens.
        let (rows, tokens) = if self.opts.acts == ActFormat::A8 {
            (
                muser_quant::tile_rows_a8(level),
                muser_quant::tile_tokens_a8(level),
            )
        } else {
            (2, muser_quant::tile_tokens(level))
        };
        format!(
            "cpu:acts={},kv=f16,attn=f32,simd={},pf={},tile={rows}x{tokens},repack={}",
            self.opts.acts.name(),
            level.name(),
            muser_quant::prefetch_mode().name(),
            if self.repacked.is_some() { "on" } else { "off" },
        )
    }

    /// Tokens evaluated so far.
    pub fn n_past(&self) -> usize {
        self.n_past
    }

    /// The model this session runs.
    pub fn model(&self) -> &'m Model {
        self.model
    }

    /// Memory read bandwidth (GB/s) with this session's worker threads (`membw`).
    pub fn read_bandwidth_gbps(&self) -> f64 {
        membw::read_bandwidth_gbps(&self.pool, 1 << 30, 3)
    }

    /// Forget the phase profile accumulated so far.
    pub fn profile_reset(&mut self) {
        self.profile.reset();
    }

    /// The phase profile (`MUSER_CPU_PROFILE=1`), if enabled.
    pub fn profile_report(&self) -> Option<String> {
        self.profile.enabled().then(|| self.profile.report())
    }

    /// Forget the sequence.
    pub fn clear(&mut self) {
        self.n_past = 0;
        self.cache.iter_mut().for_each(LayerCache::clear);
    }

    /// Evaluate `tokens` after the ones already seen; returns the requested logit rows
    /// (`[rows][n_vocab]`, flattened).
    pub fn eval(&mut self, tokens: &[u32], which: Logits) -> Result<Vec<f32>, EngineError> {
        let n_vocab = self.model.config.n_vocab;
        crate::check_eval(tokens, self.n_past, self.opts.n_ctx, n_vocab)?;
        let pool = Arc::clone(&self.pool);
        let chunk = self.opts.chunk.max(1);
        let result = pool.install(|| {
            let mut out = Vec::new();
            let n_chunks = tokens.len().div_ceil(chunk);
            for (i, part) in tokens.chunks(chunk).enumerate() {
                let want = match which {
                    Logits::All => ChunkLogits::All,
                    Logits::Last if i + 1 == n_chunks => ChunkLogits::Last,
                    Logits::Last => ChunkLogits::None,
                };
                out.extend(self.eval_chunk(part, want)?);
            }
            Ok(out)
        });
        result
    }

    fn eval_chunk(&mut self, tokens: &[u32], want: ChunkLogits) -> Result<Vec<f32>, EngineError> {
        let m = self.model;
        let c = &m.config;
        let w = &m.weights;
        let g = m.gguf();
        let src = WeightSource {
            g,
            repacked: self.repacked.as_deref(),
        };
        let n = tokens.len();
        let e = c.n_embd;
        let pos0 = self.n_past;

        self.profile.start();
        // x: [n][n_embd]
        let mut x = vec![0f32; n * e];
        for (t, &tok) in tokens.iter().enumerate() {
            let row = &mut x[t * e..(t + 1) * e];
            muser_quant::dequantize(w.token_embd.ty, w.token_embd.row(g, tok as usize), row)
                .map_err(|err| EngineError::quant(&w.token_embd.name, err))?;
            if c.embd_norm {
                let src = row.to_vec();
                ops::rmsnorm(&src, None, c.rms_eps, row);
            }
            if c.embd_scale != 1.0 {
                row.iter_mut().for_each(|v| *v *= c.embd_scale);
            }
        }

        let (qw, kvw) = (c.q_width(), c.kv_width());
        let vw = c.n_head_kv * c.head_dim_v;
        let aw = c.n_head * c.head_dim_v;
        let mut h = vec![0f32; n * e];
        let mut q = vec![0f32; n * qw];
        let mut k = vec![0f32; n * kvw];
        let mut v = vec![0f32; n * vw];
        let mut gate = vec![0f32; n * aw];
        let mut a = vec![0f32; n * aw];
        let mut o = vec![0f32; n * e];
        let mut fg = vec![0f32; n * c.n_ff];
        let mut fu = vec![0f32; n * c.n_ff];

        for (il, lw) in w.layers.iter().enumerate() {
            // Per-token work below runs in parallel over tokens (norms over blocks of `NORM_ROWS`
            // tokens, `ops::rmsnorm_rows`): each token's numbers are computed alone, so the
            // split never changes them.
            h.par_chunks_mut(NORM_ROWS * e)
                .zip(x.par_chunks(NORM_ROWS * e))
                .for_each(|(h, x)| ops::rmsnorm_rows(x, e, Some(&lw.attn_norm), c.rms_eps, h));
            self.profile.mark("norms+embed");
            let mut acts = Acts::new(&h, e, self.opts.acts);
            match &lw.wgate {
                Some(wg) => matmul_many(
                    src,
                    &mut acts,
                    &mut [
                        (&lw.wq, &mut q),
                        (&lw.wk, &mut k),
                        (&lw.wv, &mut v),
                        (wg, &mut gate),
                    ],
                )?,
                None => matmul_many(
                    src,
                    &mut acts,
                    &mut [(&lw.wq, &mut q), (&lw.wk, &mut k), (&lw.wv, &mut v)],
                )?,
            }
            drop(acts);
            self.profile.mark("matmul qkv+gate");
            let rope = &self.ropes[il];
            q.par_chunks_mut(qw)
                .zip(k.par_chunks_mut(kvw))
                .enumerate()
                .for_each(|(t, (qt, kt))| {
                    ops::rmsnorm_heads(qt, &lw.q_norm, c.rms_eps);
                    ops::rmsnorm_heads(kt, &lw.k_norm, c.rms_eps);
                    if let Some(r) = rope {
                        r.apply(qt, pos0 + t);
                        r.apply(kt, pos0 + t);
                    }
                });
            // At least 4096 values per task: a per-value split woke both threads for a single
            // decode token (18 µs per layer).
            // Slices at a time (`half`'s vectorised conversion, round to nearest even like
            // `f16::from_f32`; one value at a time it was a feature check and a call each).
            let to_f16 = |x: &[f32]| -> Vec<f16> {
                let mut h = vec![f16::ZERO; x.len()];
                h.par_chunks_mut(4096)
                    .zip(x.par_chunks(4096))
                    .for_each(|(h, x)| h.convert_from_f32_slice(x));
                h
            };
            let (k16, v16) = (to_f16(&k), to_f16(&v));
            let shape = AttnShape {
                n_head: c.n_head,
                n_head_kv: c.n_head_kv,
                head_dim: c.head_dim,
                head_dim_v: c.head_dim_v,
                window: c.swa_layers[il].then_some(c.sliding_window),
                scale: c.attn_scale,
            };
            let chunk_kv = ChunkKv {
                pos0,
                k: &k16,
                v: &v16,
            };
            self.profile.mark("qk-norm+rope+f16");
            attention::attention(&shape, &self.cache[il], &chunk_kv, &q, &mut a);
            self.profile.mark("attention");
            for t in 0..n {
                self.cache[il].append(
                    pos0 + t,
                    &k16[t * kvw..(t + 1) * kvw],
                    &v16[t * vw..(t + 1) * vw],
                );
            }
            if lw.wgate.is_some() {
                ops::sigmoid_gate(&mut a, &gate);
            }
            let mut acts = Acts::new(&a, aw, self.opts.acts);
            matmul(src, &lw.wo, &mut acts, &mut o)?;
            drop(acts);
            self.profile.mark("matmul o");
            x.par_chunks_mut(NORM_ROWS * e)
                .zip(o.par_chunks(NORM_ROWS * e))
                .zip(h.par_chunks_mut(NORM_ROWS * e))
                .for_each(|((x, o), h)| {
                    // `h` holds the normed attention output first, then the FFN input.
                    ops::rmsnorm_rows(o, e, Some(&lw.post_attn_norm), c.post_norm_eps, h);
                    x.iter_mut().zip(h.iter()).for_each(|(x, d)| *x += d);
                    ops::rmsnorm_rows(x, e, Some(&lw.ffn_norm), c.rms_eps, h);
                });
            let mut acts = Acts::new(&h, e, self.opts.acts);
            matmul_many(
                src,
                &mut acts,
                &mut [(&lw.ffn_gate, &mut fg), (&lw.ffn_up, &mut fu)],
            )?;
            drop(acts);
            self.profile.mark("matmul gate+up");
            match c.ffn_activation {
                FfnActivation::Silu => ops::swiglu(&mut fg, &fu),
                FfnActivation::GeluTanh => ops::geglu(&mut fg, &fu),
            }
            let mut acts = Acts::new(&fg, c.n_ff, self.opts.acts);
            self.profile.mark("ffn activation");
            matmul(src, &lw.ffn_down, &mut acts, &mut o)?;
            drop(acts);
            self.profile.mark("matmul down");
            x.par_chunks_mut(NORM_ROWS * e)
                .zip(o.par_chunks(NORM_ROWS * e))
                .zip(h.par_chunks_mut(NORM_ROWS * e))
                .for_each(|((x, o), h)| {
                    ops::rmsnorm_rows(o, e, Some(&lw.post_ffw_norm), c.post_norm_eps, h);
                    x.iter_mut().zip(h.iter()).for_each(|(x, d)| *x += d);
                });
        }
        self.n_past += n;

        let rows: Vec<usize> = match want {
            ChunkLogits::All => (0..n).collect(),
            ChunkLogits::Last => vec![n - 1],
            ChunkLogits::None => return Ok(Vec::new()),
        };
        let mut xn = vec![0f32; rows.len() * e];
        for (i, &t) in rows.iter().enumerate() {
            ops::rmsnorm(
                &x[t * e..(t + 1) * e],
                Some(&w.output_norm),
                c.rms_eps,
                &mut xn[i * e..(i + 1) * e],
            );
        }
        let mut logits = vec![0f32; rows.len() * c.n_vocab];
        let mut acts = Acts::new(&xn, e, self.opts.acts);
        self.profile.mark("norms+embed");
        matmul(src, &w.output, &mut acts, &mut logits)?;
        self.profile.mark("matmul output");
        ops::scale_softcap(&mut logits, c.logit_scale, c.softcap);
        self.profile.mark("softcap");
        Ok(logits)
    }
}

#[derive(Clone, Copy)]
enum ChunkLogits {
    All,
    Last,
    None,
}
