//! The f64 oracle (BRIEF §2, part 1): the function the quantized model defines, computed
//! without avoidable rounding. Weights are dequantized exactly into f64, activations are never
//! quantized, K/V are kept in f64, softmax/norms/RoPE/activations are evaluated in f64.
//!
//! Owns: the reference forward pass every fast route is measured against. It is deliberately
//! plain: one function per step of BRIEF §1's recipe, driven by `ModelConfig` fields. Slow is
//! fine (small models only); it is parallel over output rows, and each output is a sequential
//! f64 sum, so results do not depend on the thread count.
//!
//! Invariant: `eval` appends to the sequence; logits for every evaluated token are returned.
//!
//! A research probe (`Oracle::with_act_probe`, not a route): every matmul's input rows
//! quantized as an activation format would quantize them (`ActProbe`) and everything else
//! exact, so the accuracy an activation format costs can be measured on its own.

use rayon::prelude::*;

use crate::config::{FfnActivation, ModelConfig, RopeMode};
use crate::model::{Matrix, Model};
use crate::EngineError;

/// Per-layer K/V history in f64: `[n_tokens][kv_width]`, flattened.
#[derive(Default, Clone)]
struct LayerKv {
    k: Vec<f64>,
    v: Vec<f64>,
}

/// An oracle session over one sequence.
pub struct Oracle<'m> {
    model: &'m Model,
    kv: Vec<LayerKv>,
    n_past: usize,
    probe: Option<ActProbe>,
}

/// A rounding for the oracle's probe: what the matmul inputs (and, with `weights_f16`, the
/// matmul weights) go through before the exact f64 products.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ActProbe {
    pub rounding: Rounding,
    /// Every matmul weight, exactly dequantized, rounded to the nearest f16 (ties to even): the
    /// weights a route would hand to f16 tensor-core products after dequantizing in f32.
    pub weights_f16: bool,
    /// Matmul sites the probe leaves unrounded, inputs and weights (a bit per `Site::bit`; 0:
    /// none).
    pub skip: u8,
}

/// How the probe rounds a matmul input row.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rounding {
    /// Groups of `group` consecutive values, each quantized as the integer formats do — in f32,
    /// `amax = max|x|`, `q = round_ties_even(x · (qmax / amax))` clamped to ±qmax, value
    /// `q · (amax / qmax)` (all 0 when amax is 0 or not finite). `qmax` 127 with `group` 32 is
    /// A8 (`muser_quant::a8`), 32767 with 32 is A16.
    Int { qmax: f32, group: usize },
    /// Each value in f32, multiplied by the row's power of two `2^(14 − e)` (`e = ⌊log2 amax⌋`,
    /// so the row's largest magnitude lands in [2^14, 2^15) and nothing overflows f16's 65504),
    /// rounded to the nearest f16 (ties to even) and scaled back — exact but for the f16
    /// rounding: an 11-bit significand per value (values below amax · 2^-28 lose bits as f16
    /// subnormals).
    F16,
}

/// Where a matmul sits in the model, for probes that quantize the inputs of some sites only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Site {
    /// Q / K / V (and attention gate) projections: one input, the attention norm's output.
    Qkv,
    /// The attention output projection.
    AttnOut,
    /// FFN gate and up projections.
    GateUp,
    /// FFN down projection.
    Down,
    /// The output (vocabulary) projection.
    Output,
}

impl Site {
    pub const ALL: [Site; 5] = [
        Site::Qkv,
        Site::AttnOut,
        Site::GateUp,
        Site::Down,
        Site::Output,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Site::Qkv => "qkv",
            Site::AttnOut => "o",
            Site::GateUp => "gateup",
            Site::Down => "down",
            Site::Output => "output",
        }
    }

    pub fn bit(self) -> u8 {
        1 << self as u8
    }
}

impl ActProbe {
    /// Whether `site`'s inputs are rounded by this probe.
    pub fn rounds(&self, site: Site) -> bool {
        self.skip & site.bit() == 0
    }

    /// `row` as the format rounds it (a trailing partial group is its own group).
    pub fn apply(&self, row: &[f64]) -> Vec<f64> {
        let (qmax, group) = match self.rounding {
            Rounding::Int { qmax, group } => (qmax, group),
            Rounding::F16 => return f16_row(row),
        };
        let mut out = Vec::with_capacity(row.len());
        for g in row.chunks(group) {
            let xs: Vec<f32> = g.iter().map(|&v| v as f32).collect();
            let amax = xs.iter().fold(0f32, |m, v| m.max(v.abs()));
            if amax == 0.0 || !amax.is_finite() {
                out.extend(std::iter::repeat_n(0.0, g.len()));
                continue;
            }
            let (id, d) = (qmax / amax, amax / qmax);
            out.extend(xs.iter().map(|&v| {
                // Through an integer, as the formats store it (so -0 is 0).
                let q = (v * id).round_ties_even().clamp(-qmax, qmax) as i32;
                f64::from(q) * f64::from(d)
            }));
        }
        out
    }
}

/// `Rounding::F16` of one row (a row of zeros or with a non-finite value is returned as f32).
fn f16_row(row: &[f64]) -> Vec<f64> {
    let xs: Vec<f32> = row.iter().map(|&v| v as f32).collect();
    let amax = xs.iter().fold(0f32, |m, v| m.max(v.abs()));
    if amax == 0.0 || !amax.is_finite() {
        return xs.into_iter().map(f64::from).collect();
    }
    let e = amax.log2().floor() as i32;
    let (up, down) = (2f32.powi(14 - e), 2f32.powi(e - 14));
    xs.into_iter()
        .map(|v| f64::from(half::f16::from_f32(v * up).to_f32() * down))
        .collect()
}

/// `y[t][r] = Σ_c W[r][c] · x[t][c]` in f64 for every token `t`; each row is dequantized once.
/// With a probe, each row of `x` is first rounded by it (and with `weights_f16` each weight).
fn matmul_rows(
    model: &Model,
    w: &Matrix,
    x: &[Vec<f64>],
    probe: Option<ActProbe>,
) -> Result<Vec<Vec<f64>>, EngineError> {
    let quantized: Vec<Vec<f64>>;
    let x = match probe {
        Some(p) => {
            quantized = x.iter().map(|r| p.apply(r)).collect();
            &quantized[..]
        }
        None => x,
    };
    let g = model.gguf();
    let rows: Vec<Vec<f64>> = (0..w.n_out)
        .into_par_iter()
        .map_init(
            || vec![0f64; w.n_in],
            |wrow, r| -> Result<Vec<f64>, EngineError> {
                muser_quant::dequantize_f64(w.ty, w.row(g, r), wrow)
                    .map_err(|e| EngineError::quant(&w.name, e))?;
                if probe.is_some_and(|p| p.weights_f16) {
                    for v in wrow.iter_mut() {
                        *v = half::f16::from_f64(*v).to_f64();
                    }
                }
                Ok(x.iter()
                    .map(|xt| wrow.iter().zip(xt).map(|(a, b)| a * b).sum())
                    .collect())
            },
        )
        .collect::<Result<_, _>>()?;
    // Transpose [row][token] -> [token][row].
    Ok((0..x.len())
        .map(|t| rows.iter().map(|col| col[t]).collect())
        .collect())
}

fn rmsnorm(x: &[f64], eps: f64) -> Vec<f64> {
    let ms = x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64;
    let s = 1.0 / (ms + eps).sqrt();
    x.iter().map(|v| v * s).collect()
}

fn rmsnorm_w(x: &[f64], w: &[f32], eps: f64) -> Vec<f64> {
    rmsnorm(x, eps)
        .iter()
        .zip(w)
        .map(|(a, &b)| a * f64::from(b))
        .collect()
}

/// RoPE on one head in place.
fn rope(x: &mut [f64], pos: usize, base: f64, mode: RopeMode) {
    let d = x.len();
    let half = d / 2;
    for i in 0..half {
        let theta = pos as f64 * base.powf(-2.0 * i as f64 / d as f64);
        let (s, c) = theta.sin_cos();
        let (a, b) = match mode {
            RopeMode::Norm => (2 * i, 2 * i + 1),
            RopeMode::Neox => (i, i + half),
        };
        let (x0, x1) = (x[a], x[b]);
        x[a] = x0 * c - x1 * s;
        x[b] = x0 * s + x1 * c;
    }
}

fn gelu_tanh(x: f64) -> f64 {
    let k = (2.0 / std::f64::consts::PI).sqrt();
    0.5 * x * (1.0 + (k * (x + 0.044715 * x * x * x)).tanh())
}

fn silu(x: f64) -> f64 {
    x / (1.0 + (-x).exp())
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

impl<'m> Oracle<'m> {
    /// A fresh session.
    pub fn new(model: &'m Model) -> Oracle<'m> {
        Oracle {
            model,
            kv: vec![LayerKv::default(); model.config.n_layer],
            n_past: 0,
            probe: None,
        }
    }

    /// A fresh session whose matmul inputs are quantized by `probe` (a measurement of the
    /// activation format alone; the oracle proper is `new`).
    pub fn with_act_probe(model: &'m Model, probe: ActProbe) -> Oracle<'m> {
        Oracle {
            probe: Some(probe),
            ..Oracle::new(model)
        }
    }

    /// Tokens evaluated so far.
    pub fn n_past(&self) -> usize {
        self.n_past
    }

    /// Evaluate `tokens` (appended to the sequence); returns one logit row per token.
    pub fn eval(&mut self, tokens: &[u32]) -> Result<Vec<Vec<f64>>, EngineError> {
        let m = self.model;
        let c = &m.config;
        let w = &m.weights;
        let g = m.gguf();
        let eps = f64::from(c.rms_eps);
        let eps_post = f64::from(c.post_norm_eps);
        let probe = self.probe;
        let matmul = |site: Site, w: &Matrix, x: &[Vec<f64>]| {
            matmul_rows(m, w, x, probe.filter(|p| p.rounds(site)))
        };

        // Embedding.
        let mut x: Vec<Vec<f64>> = Vec::with_capacity(tokens.len());
        for &tok in tokens {
            if tok as usize >= c.n_vocab {
                return Err(EngineError::TokenOutOfRange {
                    token: tok,
                    n_vocab: c.n_vocab,
                });
            }
            let mut row = vec![0f64; c.n_embd];
            muser_quant::dequantize_f64(
                w.token_embd.ty,
                w.token_embd.row(g, tok as usize),
                &mut row,
            )
            .map_err(|e| EngineError::quant(&w.token_embd.name, e))?;
            if c.embd_norm {
                row = rmsnorm(&row, eps);
            }
            let scale = (c.n_embd as f64).sqrt();
            if c.embd_scale != 1.0 {
                row.iter_mut().for_each(|v| *v *= scale);
            }
            x.push(row);
        }

        for (il, lw) in w.layers.iter().enumerate() {
            let h: Vec<Vec<f64>> = x
                .iter()
                .map(|xt| rmsnorm_w(xt, &lw.attn_norm, eps))
                .collect();
            let mut q = matmul(Site::Qkv, &lw.wq, &h)?;
            let mut k = matmul(Site::Qkv, &lw.wk, &h)?;
            let v = matmul(Site::Qkv, &lw.wv, &h)?;
            let gate = match &lw.wgate {
                Some(wg) => Some(matmul(Site::Qkv, wg, &h)?),
                None => None,
            };
            let rope_base = c.rope_for_layer(il).map(f64::from);
            for (t, (qt, kt)) in q.iter_mut().zip(k.iter_mut()).enumerate() {
                let pos = self.n_past + t;
                for head in qt.chunks_mut(c.head_dim) {
                    let n = rmsnorm_w(head, &lw.q_norm, eps);
                    head.copy_from_slice(&n);
                    if let Some(base) = rope_base {
                        rope(head, pos, base, c.rope_mode);
                    }
                }
                for head in kt.chunks_mut(c.head_dim) {
                    let n = rmsnorm_w(head, &lw.k_norm, eps);
                    head.copy_from_slice(&n);
                    if let Some(base) = rope_base {
                        rope(head, pos, base, c.rope_mode);
                    }
                }
            }
            let kv = &mut self.kv[il];
            for (kt, vt) in k.iter().zip(&v) {
                kv.k.extend_from_slice(kt);
                kv.v.extend_from_slice(vt);
            }
            let attn = attention(c, il, &q, kv, self.n_past);
            let attn: Vec<Vec<f64>> = match &gate {
                Some(gt) => attn
                    .iter()
                    .zip(gt)
                    .map(|(a, g)| a.iter().zip(g).map(|(a, g)| a * sigmoid(*g)).collect())
                    .collect(),
                None => attn,
            };
            let o = matmul(Site::AttnOut, &lw.wo, &attn)?;
            for (xt, ot) in x.iter_mut().zip(&o) {
                let n = rmsnorm_w(ot, &lw.post_attn_norm, eps_post);
                xt.iter_mut().zip(&n).for_each(|(a, b)| *a += b);
            }
            let f: Vec<Vec<f64>> = x
                .iter()
                .map(|xt| rmsnorm_w(xt, &lw.ffn_norm, eps))
                .collect();
            let fg = matmul(Site::GateUp, &lw.ffn_gate, &f)?;
            let fu = matmul(Site::GateUp, &lw.ffn_up, &f)?;
            let act: Vec<Vec<f64>> = fg
                .iter()
                .zip(&fu)
                .map(|(g, u)| {
                    g.iter()
                        .zip(u)
                        .map(|(&g, &u)| match c.ffn_activation {
                            FfnActivation::Silu => silu(g) * u,
                            FfnActivation::GeluTanh => gelu_tanh(g) * u,
                        })
                        .collect()
                })
                .collect();
            let d = matmul(Site::Down, &lw.ffn_down, &act)?;
            for (xt, dt) in x.iter_mut().zip(&d) {
                let n = rmsnorm_w(dt, &lw.post_ffw_norm, eps_post);
                xt.iter_mut().zip(&n).for_each(|(a, b)| *a += b);
            }
        }

        let xn: Vec<Vec<f64>> = x
            .iter()
            .map(|xt| rmsnorm_w(xt, &w.output_norm, eps))
            .collect();
        let mut logits = matmul(Site::Output, &w.output, &xn)?;
        let scale = f64::from(c.logit_scale);
        for row in &mut logits {
            for v in row.iter_mut() {
                *v *= scale;
                if let Some(cap) = c.softcap {
                    let cap = f64::from(cap);
                    *v = cap * (*v / cap).tanh();
                }
            }
        }
        self.n_past += tokens.len();
        Ok(logits)
    }
}

/// Causal (and, on sliding layers, windowed) softmax attention with GQA, all in f64.
fn attention(
    c: &ModelConfig,
    il: usize,
    q: &[Vec<f64>],
    kv: &LayerKv,
    n_past: usize,
) -> Vec<Vec<f64>> {
    let hd = c.head_dim;
    let hdv = c.head_dim_v;
    let kvw = c.kv_width();
    let vw = c.n_head_kv * hdv;
    let window = if c.swa_layers[il] {
        Some(c.sliding_window)
    } else {
        None
    };
    let scale = f64::from(c.attn_scale);
    q.iter()
        .enumerate()
        .map(|(t, qt)| {
            let pos = n_past + t;
            let first = match window {
                Some(w) => (pos + 1).saturating_sub(w),
                None => 0,
            };
            let mut out = vec![0f64; c.n_head * hdv];
            for h in 0..c.n_head {
                let kh = h / c.gqa_ratio();
                let qh = &qt[h * hd..(h + 1) * hd];
                let scores: Vec<f64> = (first..=pos)
                    .map(|j| {
                        let kj = &kv.k[j * kvw + kh * hd..j * kvw + (kh + 1) * hd];
                        qh.iter().zip(kj).map(|(a, b)| a * b).sum::<f64>() * scale
                    })
                    .collect();
                let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let exps: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                let sum: f64 = exps.iter().sum();
                let oh = &mut out[h * hdv..(h + 1) * hdv];
                for (j, e) in (first..=pos).zip(&exps) {
                    let vj = &kv.v[j * vw + kh * hdv..j * vw + (kh + 1) * hdv];
                    let p = e / sum;
                    oh.iter_mut().zip(vj).for_each(|(o, v)| *o += p * v);
                }
            }
            out
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{ActProbe, Rounding};
    use bytemuck::Zeroable;

    fn int(qmax: f32, group: usize) -> ActProbe {
        ActProbe {
            rounding: Rounding::Int { qmax, group },
            weights_f16: false,
            skip: 0,
        }
    }

    /// The A8 and A16 probes quantize a row exactly as muser_quant's formats do.
    #[test]
    fn act_probes_match_the_activation_formats() {
        let x: Vec<f32> = (0..512)
            .map(|i| {
                ((i * 7919 % 1000) as f32 / 250.0 - 2.0) * if i % 97 == 0 { 40.0 } else { 1.0 }
            })
            .collect();
        let xd: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
        let mut a8 = vec![muser_quant::a8::BlockA8::zeroed(); muser_quant::a8::n_groups(x.len())];
        muser_quant::a8::quantize_row(&x, &mut a8).expect("a8");
        let mut a16 =
            vec![muser_quant::a16::BlockA16::zeroed(); muser_quant::a16::n_groups(x.len())];
        muser_quant::a16::quantize_row(&x, &mut a16).expect("a16");
        let p8 = int(127.0, 32).apply(&xd);
        let p16 = int(32767.0, 32).apply(&xd);
        for i in 0..x.len() {
            let (b, j) = (i / 256, i % 256);
            let want8 = f64::from(a8[b].qs[j]) * f64::from(a8[b].d[j / 32]);
            let want16 = f64::from(a16[b].qs[j]) * f64::from(a16[b].d[j / 32]);
            assert_eq!(p8[i].to_bits(), want8.to_bits(), "A8 value {i}");
            assert_eq!(p16[i].to_bits(), want16.to_bits(), "A16 value {i}");
        }
        // Coarser groups round coarser: the probe with one scale per 256 is not per-32's.
        assert_ne!(int(127.0, 256).apply(&xd), p8);
    }

    /// The f16 probe keeps 11 significant bits of each value whatever the row's scale, and
    /// overflows nowhere.
    #[test]
    fn the_f16_probe_rounds_to_eleven_bits_without_overflow() {
        let p = ActProbe {
            rounding: Rounding::F16,
            weights_f16: false,
            skip: 0,
        };
        for scale in [1e-6, 1.0, 3.0e5] {
            let xd: Vec<f64> = (0..300)
                .map(|i| scale * ((i * 7919 % 1000) as f64 / 250.0 - 2.0 + 1.0 / 3.0))
                .collect();
            let r = p.apply(&xd);
            let amax = xd.iter().fold(0f64, |m, v| m.max(v.abs()));
            let mut exact = 0;
            for (a, b) in xd.iter().zip(&r) {
                assert!(b.is_finite(), "scale {scale}: {a} -> {b}");
                // f32 then f16: relative error at most 2^-11 (+ f32's), or an absolute error
                // below a subnormal step when the value is far below amax.
                let err = (a - b).abs();
                assert!(
                    err <= a.abs() * (2f64.powi(-11) + 2f64.powi(-23))
                        || err <= amax * 2f64.powi(-38),
                    "scale {scale}: {a} -> {b}"
                );
                exact += usize::from(err == 0.0);
            }
            // The values are thirds: f16 cannot hold them, so the rounding really happened.
            assert!(
                exact < xd.len() / 2,
                "scale {scale}: {exact} values unrounded"
            );
        }
    }
}
