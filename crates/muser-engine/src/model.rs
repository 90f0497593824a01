//! A loaded model: the memory-mapped GGUF, its typed configuration, and every weight bound as
//! a zero-copy view into the mapping.
//!
//! Owns: loading and validating weights against the configuration. Invariants after
//! `Model::load`: every tensor the architecture needs exists with exactly the expected shape,
//! every matrix has a type `muser-quant` can dot and dequantize, norm vectors are f32 copies
//! (they are tiny), and matrices are byte ranges into the mapped file (resident memory stays
//! near the file size). A problem is a `ModelError` naming the tensor.

use std::path::Path;
use std::sync::Arc;

use muser_gguf::names::{GlobalTensor, LayerTensor};
use muser_gguf::{GgmlType, Gguf, GgufError, TensorInfo};

use crate::config::{ConfigError, ModelConfig};

/// Errors loading a model.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("reading GGUF: {0}")]
    Gguf(#[from] GgufError),
    #[error("model configuration: {0}")]
    Config(#[from] ConfigError),
    #[error("required tensor '{0}' is missing")]
    MissingTensor(String),
    #[error("tensor '{name}' has shape {found:?}, expected {expected:?}")]
    WrongShape {
        name: String,
        found: Vec<u64>,
        expected: Vec<u64>,
    },
    #[error("tensor '{name}' has type {ty}, which Muser cannot compute with")]
    UnsupportedType { name: String, ty: GgmlType },
    #[error("norm tensor '{name}' has type {ty}; norms must be f32, f16 or bf16")]
    BadNormType { name: String, ty: GgmlType },
    #[error("dequantizing '{name}': {source}")]
    Quant {
        name: String,
        source: muser_quant::QuantError,
    },
}

/// A weight matrix: `n_out` rows of `n_in` elements in type `ty`, stored at `offset..offset+len`
/// of the mapped file. ggml shape `[n_in, n_out]`.
#[derive(Clone, Debug)]
pub struct Matrix {
    pub name: String,
    pub ty: GgmlType,
    pub n_in: usize,
    pub n_out: usize,
    /// Bytes per row.
    pub row_bytes: usize,
    offset: usize,
    len: usize,
}

impl Matrix {
    /// All bytes of the matrix.
    pub fn bytes<'a>(&self, g: &'a Gguf) -> &'a [u8] {
        &g.as_bytes()[self.offset..self.offset + self.len]
    }

    /// Byte range of the matrix in the mapped file: `(offset, len)`.
    pub fn file_range(&self) -> (usize, usize) {
        (self.offset, self.len)
    }

    /// Bytes of row `r` (`r < n_out`).
    pub fn row<'a>(&self, g: &'a Gguf, r: usize) -> &'a [u8] {
        let start = self.offset + r * self.row_bytes;
        &g.as_bytes()[start..start + self.row_bytes]
    }
}

/// One layer's weights.
#[derive(Clone, Debug)]
pub struct LayerWeights {
    pub attn_norm: Vec<f32>,
    pub wq: Matrix,
    pub wk: Matrix,
    pub wv: Matrix,
    /// Attention output gate (Muse Glimmer only).
    pub wgate: Option<Matrix>,
    pub q_norm: Vec<f32>,
    pub k_norm: Vec<f32>,
    pub wo: Matrix,
    pub post_attn_norm: Vec<f32>,
    pub ffn_norm: Vec<f32>,
    pub ffn_gate: Matrix,
    pub ffn_up: Matrix,
    pub ffn_down: Matrix,
    pub post_ffw_norm: Vec<f32>,
}

impl LayerWeights {
    /// Every weight matrix of the layer (the attention gate when present).
    pub fn matrices(&self) -> impl Iterator<Item = &Matrix> {
        [
            &self.wq,
            &self.wk,
            &self.wv,
            &self.wo,
            &self.ffn_gate,
            &self.ffn_up,
            &self.ffn_down,
        ]
        .into_iter()
        .chain(self.wgate.as_ref())
    }
}

/// All weights of a model.
#[derive(Clone, Debug)]
pub struct Weights {
    pub token_embd: Matrix,
    /// The output projection (a copy of `token_embd`'s view when tied).
    pub output: Matrix,
    pub output_norm: Vec<f32>,
    pub layers: Vec<LayerWeights>,
}

impl Weights {
    /// Every matmul weight: the output projection, then each layer's matrices.
    pub fn matrices(&self) -> impl Iterator<Item = &Matrix> {
        std::iter::once(&self.output).chain(self.layers.iter().flat_map(|l| l.matrices()))
    }
}

/// A loaded model.
pub struct Model {
    pub gguf: Arc<Gguf>,
    pub config: ModelConfig,
    pub weights: Weights,
    /// The CPU route's repacked weights, built by the first session that uses them
    /// (`cpu::repack`) and shared by every later one.
    pub(crate) cpu_repacked: std::sync::Mutex<Option<Arc<crate::cpu::repack::Repacked>>>,
}

struct Binder<'a> {
    g: &'a Gguf,
}

impl Binder<'_> {
    fn info(&self, name: &str) -> Result<&TensorInfo, ModelError> {
        self.g
            .tensor(name)
            .ok_or_else(|| ModelError::MissingTensor(name.to_string()))
    }

    fn matrix(&self, name: &str, n_in: usize, n_out: usize) -> Result<Matrix, ModelError> {
        let t = self.info(name)?;
        let expected = vec![n_in as u64, n_out as u64];
        if t.shape != expected {
            return Err(ModelError::WrongShape {
                name: name.to_string(),
                found: t.shape.clone(),
                expected,
            });
        }
        if !muser_quant::is_supported(t.ty) || muser_quant::vec_dot_type(t.ty).is_err() {
            return Err(ModelError::UnsupportedType {
                name: name.to_string(),
                ty: t.ty,
            });
        }
        Ok(Matrix {
            name: name.to_string(),
            ty: t.ty,
            n_in,
            n_out,
            row_bytes: t.row_bytes() as usize,
            offset: t.absolute_offset(self.g.data_offset()) as usize,
            len: t.n_bytes as usize,
        })
    }

    fn norm(&self, name: &str, n: usize) -> Result<Vec<f32>, ModelError> {
        let t = self.info(name)?;
        if t.shape != [n as u64] {
            return Err(ModelError::WrongShape {
                name: name.to_string(),
                found: t.shape.clone(),
                expected: vec![n as u64],
            });
        }
        if !matches!(t.ty, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16) {
            return Err(ModelError::BadNormType {
                name: name.to_string(),
                ty: t.ty,
            });
        }
        let mut out = vec![0f32; n];
        muser_quant::dequantize(t.ty, self.g.tensor_data(t), &mut out).map_err(|source| {
            ModelError::Quant {
                name: name.to_string(),
                source,
            }
        })?;
        Ok(out)
    }
}

impl Model {
    /// Memory-map and bind the model at `path`.
    pub fn load(path: &Path) -> Result<Model, ModelError> {
        Model::from_gguf(Arc::new(Gguf::open(path)?))
    }

    /// Bind an already-open GGUF.
    pub fn from_gguf(gguf: Arc<Gguf>) -> Result<Model, ModelError> {
        let config = ModelConfig::from_gguf(&gguf)?;
        let b = Binder { g: &gguf };
        let c = &config;
        let token_embd = b.matrix(&GlobalTensor::TokenEmbd.name(), c.n_embd, c.n_vocab)?;
        let output = if c.tied_output {
            token_embd.clone()
        } else {
            b.matrix(&GlobalTensor::Output.name(), c.n_embd, c.n_vocab)?
        };
        let output_norm = b.norm(&GlobalTensor::OutputNorm.name(), c.n_embd)?;
        let mut layers = Vec::with_capacity(c.n_layer);
        for il in 0..c.n_layer {
            let n = |t: LayerTensor| t.name(il);
            let qw = c.q_width();
            let kvw = c.kv_width();
            let vw = c.n_head_kv * c.head_dim_v;
            layers.push(LayerWeights {
                attn_norm: b.norm(&n(LayerTensor::AttnNorm), c.n_embd)?,
                wq: b.matrix(&n(LayerTensor::AttnQ), c.n_embd, qw)?,
                wk: b.matrix(&n(LayerTensor::AttnK), c.n_embd, kvw)?,
                wv: b.matrix(&n(LayerTensor::AttnV), c.n_embd, vw)?,
                wgate: if c.attn_gate {
                    Some(b.matrix(&n(LayerTensor::AttnGate), c.n_embd, c.n_head * c.head_dim_v)?)
                } else {
                    None
                },
                q_norm: b.norm(&n(LayerTensor::AttnQNorm), c.head_dim)?,
                k_norm: b.norm(&n(LayerTensor::AttnKNorm), c.head_dim)?,
                wo: b.matrix(
                    &n(LayerTensor::AttnOutput),
                    c.n_head * c.head_dim_v,
                    c.n_embd,
                )?,
                post_attn_norm: b.norm(&n(LayerTensor::PostAttentionNorm), c.n_embd)?,
                ffn_norm: b.norm(&n(LayerTensor::FfnNorm), c.n_embd)?,
                ffn_gate: b.matrix(&n(LayerTensor::FfnGate), c.n_embd, c.n_ff)?,
                ffn_up: b.matrix(&n(LayerTensor::FfnUp), c.n_embd, c.n_ff)?,
                ffn_down: b.matrix(&n(LayerTensor::FfnDown), c.n_ff, c.n_embd)?,
                post_ffw_norm: b.norm(&n(LayerTensor::PostFfwNorm), c.n_embd)?,
            });
        }
        let weights = Weights {
            token_embd,
            output,
            output_norm,
            layers,
        };
        Ok(Model {
            gguf,
            config,
            weights,
            cpu_repacked: std::sync::Mutex::new(None),
        })
    }

    /// Weight bytes one decode token reads: every layer matrix, the output matrix and one
    /// embedding row (norm vectors are negligible). Benchmarks divide it by the token time.
    pub fn decode_weight_bytes(&self) -> u64 {
        let w = &self.weights;
        let total: u64 = w.matrices().map(|m| m.file_range().1 as u64).sum();
        total + w.token_embd.row_bytes as u64
    }

    /// The mapped file.
    pub fn gguf(&self) -> &Gguf {
        &self.gguf
    }
}
