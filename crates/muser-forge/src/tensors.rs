//! The forged model's tensor plan (names, shapes, types, initial distributions) and the
//! deterministic generation of each tensor's rows.
//!
//! Owns: which tensors a Muse Glimmer GGUF holds (BRIEF §1), their shapes in ggml order
//! (`shape[0]` is the row length, the input dimension of a projection), and the distribution
//! each is drawn from:
//! - projections: N(0, 1/fan_in), so activations stay near unit scale;
//! - `token_embd`: N(0, 1) (the model normalises the looked-up row);
//! - `output`: N(0, s) with `s` chosen so final logits have a standard deviation of about
//!   `OUTPUT_LOGIT_STD` nats after `logit_scale`, i.e. a peaked, informative distribution;
//! - norm weights: 1 + N(0, 0.1) (they already include Muse's +1 shift); `attn_q_norm` carries
//!   the qk scale: 3.87 · (1 + N(0, 0.05)); `attn_k_norm` is exactly ones, as in the real model.
//!
//! Invariant: row `r` of tensor `name` is a pure function of (seed, name, r), so the output is
//! identical whatever the thread count or batch size.

use muser_gguf::names::{GlobalTensor, LayerTensor};
use muser_gguf::GgmlType;

use crate::config::{use_more_bits, ForgeConfig, Mix};
use crate::rng::{derive, fnv1a, Rng};

/// Target standard deviation of the final logits (nats, after `logit_scale`).
pub const OUTPUT_LOGIT_STD: f64 = 4.0;

/// The qk scale carried by `attn_q_norm` (BRIEF §1: "~3.87").
pub const Q_NORM_SCALE: f64 = 3.87;

/// How a tensor's values are drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Init {
    /// N(0, std).
    Normal { std: f64 },
    /// mean · (1 + N(0, rel_std)).
    Around { mean: f64, rel_std: f64 },
    /// All ones.
    Ones,
}

/// One tensor of the plan.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedTensor {
    pub name: String,
    /// ggml order: `[row_len]` or `[row_len, n_rows]`.
    pub shape: Vec<u64>,
    pub ty: GgmlType,
    pub init: Init,
}

impl PlannedTensor {
    /// Elements per row.
    pub fn row_len(&self) -> usize {
        self.shape[0] as usize
    }
    /// Number of rows.
    pub fn n_rows(&self) -> usize {
        self.shape.iter().skip(1).product::<u64>() as usize
    }
    /// Bytes per row in the tensor's type.
    pub fn row_bytes(&self) -> usize {
        self.row_len() / self.ty.block_size() * self.ty.type_size()
    }
}

fn weight_type(
    cfg: &ForgeConfig,
    role: Option<LayerTensor>,
    layer: usize,
    global: Option<GlobalTensor>,
) -> GgmlType {
    match cfg.mix {
        Mix::Uniform(t) => t,
        Mix::Q4KM => match (role, global) {
            (_, Some(GlobalTensor::Output | GlobalTensor::TokenEmbd)) => GgmlType::Q6_K,
            (Some(LayerTensor::AttnV), _) => GgmlType::Q6_K,
            (Some(LayerTensor::FfnDown), _) if use_more_bits(layer, cfg.n_layer) => GgmlType::Q6_K,
            _ => GgmlType::Q4_K,
        },
    }
}

/// Every tensor of the model, in file order: `token_embd`, the layers, `output_norm`, `output`.
pub fn plan(cfg: &ForgeConfig) -> Vec<PlannedTensor> {
    let e = cfg.n_embd as u64;
    let (qw, kvw, ff, hd, nv) = (
        cfg.q_width() as u64,
        cfg.kv_width() as u64,
        cfg.n_ff as u64,
        cfg.head_dim as u64,
        cfg.n_vocab as u64,
    );
    let norm = Init::Around {
        mean: 1.0,
        rel_std: 0.1,
    };
    let proj = |fan_in: u64| Init::Normal {
        std: 1.0 / (fan_in as f64).sqrt(),
    };
    let mut out = Vec::new();
    out.push(PlannedTensor {
        name: GlobalTensor::TokenEmbd.name(),
        shape: vec![e, nv],
        ty: weight_type(cfg, None, 0, Some(GlobalTensor::TokenEmbd)),
        init: Init::Normal { std: 1.0 },
    });
    for layer in 0..cfg.n_layer {
        for role in LayerTensor::ALL {
            let (shape, init) = match role {
                LayerTensor::AttnNorm
                | LayerTensor::PostAttentionNorm
                | LayerTensor::FfnNorm
                | LayerTensor::PostFfwNorm => (vec![e], norm),
                LayerTensor::AttnQNorm => (
                    vec![hd],
                    Init::Around {
                        mean: Q_NORM_SCALE,
                        rel_std: 0.05,
                    },
                ),
                LayerTensor::AttnKNorm => (vec![hd], Init::Ones),
                LayerTensor::AttnQ | LayerTensor::AttnGate => (vec![e, qw], proj(e)),
                LayerTensor::AttnK | LayerTensor::AttnV => (vec![e, kvw], proj(e)),
                LayerTensor::AttnOutput => (vec![qw, e], proj(qw)),
                LayerTensor::FfnGate | LayerTensor::FfnUp => (vec![e, ff], proj(e)),
                LayerTensor::FfnDown => (vec![ff, e], proj(ff)),
            };
            let ty = if role.is_norm() {
                GgmlType::F32
            } else {
                weight_type(cfg, Some(role), layer, None)
            };
            out.push(PlannedTensor {
                name: role.name(layer),
                shape,
                ty,
                init,
            });
        }
    }
    out.push(PlannedTensor {
        name: GlobalTensor::OutputNorm.name(),
        shape: vec![e],
        ty: GgmlType::F32,
        init: norm,
    });
    let out_std = OUTPUT_LOGIT_STD / ((e as f64).sqrt() * f64::from(cfg.logit_scale));
    out.push(PlannedTensor {
        name: GlobalTensor::Output.name(),
        shape: vec![e, nv],
        ty: weight_type(cfg, None, 0, Some(GlobalTensor::Output)),
        init: Init::Normal { std: out_std },
    });
    out
}

/// Fill `out` with row `row` of tensor `t` as f32 values.
pub fn generate_row(seed: u64, t: &PlannedTensor, row: usize, out: &mut [f32]) {
    let mut rng = Rng::new(derive(&[seed, fnv1a(t.name.as_bytes()), row as u64]));
    match t.init {
        Init::Normal { std } => {
            for v in out.iter_mut() {
                *v = (rng.normal() * std) as f32;
            }
        }
        Init::Around { mean, rel_std } => {
            for v in out.iter_mut() {
                *v = (mean * (1.0 + rel_std * rng.normal())) as f32;
            }
        }
        Init::Ones => out.fill(1.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_matches_the_architecture() {
        let c = ForgeConfig::preset("tiny").expect("tiny");
        let p = plan(&c);
        assert_eq!(p.len(), 3 + 14 * c.n_layer);
        let q = p
            .iter()
            .find(|t| t.name == "blk.0.attn_q.weight")
            .expect("q");
        assert_eq!(q.shape, vec![256, 256]);
        let k = p
            .iter()
            .find(|t| t.name == "blk.0.attn_k.weight")
            .expect("k");
        assert_eq!(k.shape, vec![256, 128]);
        let o = p
            .iter()
            .find(|t| t.name == "output.weight")
            .expect("output");
        assert_eq!(o.ty, GgmlType::Q6_K);
        let v = p
            .iter()
            .find(|t| t.name == "blk.2.attn_v.weight")
            .expect("v");
        assert_eq!(v.ty, GgmlType::Q6_K);
        let n = p
            .iter()
            .find(|t| t.name == "blk.1.ffn_norm.weight")
            .expect("norm");
        assert_eq!(n.ty, GgmlType::F32);
    }

    #[test]
    fn rows_are_pure_functions_of_seed_name_row() {
        let c = ForgeConfig::preset("tiny").expect("tiny");
        let p = plan(&c);
        let t = &p[1];
        let mut a = vec![0f32; t.row_len()];
        let mut b = vec![0f32; t.row_len()];
        generate_row(5, t, 3, &mut a);
        generate_row(5, t, 3, &mut b);
        assert_eq!(a, b);
        generate_row(6, t, 3, &mut b);
        assert_ne!(a, b);
        let kn = p.iter().find(|t| t.init == Init::Ones).expect("k norm");
        let mut ones = vec![0f32; kn.row_len()];
        generate_row(5, kn, 0, &mut ones);
        assert!(ones.iter().all(|&x| x == 1.0));
    }
}
