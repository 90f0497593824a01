//! Causal, windowed, grouped-query softmax attention over the f16 KV cache, in f32.
//!
//! Owns: attention numerics of the CPU route. Q stays f32 (no conversion to the cache type),
//! scores, softmax and the V accumulation are f32 — finer than the comparator's f16 paths. The
//! inner loops are `f16math::{dot_f16, axpy_f16}` (fused multiply-adds in a fixed lane order,
//! SIMD bit-identical to scalar).
//!
//! Invariant: the output of a (token, head) pair depends only on its query and on the key/value
//! rows of the positions it may see, visited oldest to newest; whether those rows come from the
//! cache or from the chunk being evaluated makes no difference (both are f16), so chunked,
//! batched and one-at-a-time evaluation agree bit for bit. The inner loops run several keys or
//! output elements at once (`dots_f16`, `weighted_sum_f16`), each number by the one-key chain.

use half::f16;
use rayon::prelude::*;

use super::expf::expf_slice;
use super::f16math::{dots_f16, weighted_sum_f16};
use super::kv::LayerCache;

/// Where keys/values of the current chunk live until the chunk is committed to the cache.
pub struct ChunkKv<'a> {
    /// First position of the chunk.
    pub pos0: usize,
    /// `[n_tokens][kv_width]`.
    pub k: &'a [f16],
    /// `[n_tokens][v_width]`.
    pub v: &'a [f16],
}

/// Shapes and masking of one layer's attention.
pub struct AttnShape {
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim: usize,
    pub head_dim_v: usize,
    /// Sliding window (keys with `pos - pos_k < window` are visible), or `None`.
    pub window: Option<usize>,
    pub scale: f32,
}

/// `out[t][h*hdv..]` for every token `t` of the chunk. `q`: `[n_tokens][n_head * head_dim]`.
///
/// One task per (token, KV head): the group's query heads share every key and value row
/// (`dots_f16` / `weighted_sum_f16` convert each f16 row once per pass); each head's numbers are
/// exactly those of a head computed alone.
pub fn attention(
    s: &AttnShape,
    cache: &LayerCache,
    chunk: &ChunkKv<'_>,
    q: &[f32],
    out: &mut [f32],
) {
    let (hd, hdv) = (s.head_dim, s.head_dim_v);
    let kvw = s.n_head_kv * hd;
    let vw = s.n_head_kv * hdv;
    let group = s.n_head / s.n_head_kv;
    let level = muser_quant::simd_level();
    out.par_chunks_mut(group * hdv).enumerate().for_each_init(
        Vec::new,
        |scores: &mut Vec<f32>, (i, og)| {
            let (t, kh) = (i / s.n_head_kv, i % s.n_head_kv);
            let pos = chunk.pos0 + t;
            let first = s.window.map_or(0, |w| (pos + 1).saturating_sub(w));
            let n_keys = pos + 1 - first;
            let qbase = t * s.n_head * hd + kh * group * hd;
            let qs: Vec<&[f32]> = (0..group)
                .map(|g| &q[qbase + g * hd..qbase + (g + 1) * hd])
                .collect();
            let krow = |j: usize| -> &[f16] {
                if j >= chunk.pos0 {
                    let r = j - chunk.pos0;
                    &chunk.k[r * kvw + kh * hd..r * kvw + (kh + 1) * hd]
                } else {
                    &cache.k_row(j)[kh * hd..(kh + 1) * hd]
                }
            };
            let vrow = |j: usize| -> &[f16] {
                if j >= chunk.pos0 {
                    let r = j - chunk.pos0;
                    &chunk.v[r * vw + kh * hdv..r * vw + (kh + 1) * hdv]
                } else {
                    &cache.v_row(j)[kh * hdv..(kh + 1) * hdv]
                }
            };
            let keys: Vec<&[f16]> = (first..=pos).map(krow).collect();
            let vals: Vec<&[f16]> = (first..=pos).map(vrow).collect();
            // scores: [n_keys][group]
            scores.clear();
            scores.resize(n_keys * group, 0.0);
            dots_f16(level, &qs, &keys, scores);
            let mut max = vec![f32::NEG_INFINITY; group];
            for row in scores.chunks_mut(group) {
                for (sc, m) in row.iter_mut().zip(max.iter_mut()) {
                    *sc *= s.scale;
                    *m = m.max(*sc);
                }
            }
            for row in scores.chunks_mut(group) {
                for (sc, m) in row.iter_mut().zip(&max) {
                    *sc -= m;
                }
            }
            expf_slice(level, scores);
            let mut sum = vec![0f32; group];
            for row in scores.chunks(group) {
                for (sc, z) in row.iter().zip(sum.iter_mut()) {
                    *z += *sc;
                }
            }
            let mut outs: Vec<&mut [f32]> = og.chunks_mut(hdv).collect();
            weighted_sum_f16(level, &mut outs, scores, &vals);
            for (oh, z) in outs.iter_mut().zip(&sum) {
                let inv = 1.0 / z;
                oh.iter_mut().for_each(|o| *o *= inv);
            }
        },
    );
}
