//! The model's weights on the device: every matrix and norm vector planned into one arena
//! (`muser_cuda::arena`), uploaded once from the mapped file with progress, addressed as views.
//! A matrix shared by two roles (Gemma's tied output = token_embd) is uploaded once per layout:
//! the token table stays in GGUF's (the embedding kernels read it), Q6_K matmul weights go up
//! in Q6_K-P on the A16 route (`muser_cuda::q6pad`; `MUSER_CUDA_Q6_PAD=0`: GGUF's), and on the
//! f16 route (`h16`) Q4_K / Q6_K matmul weights go up in Q4H / Q6H (`muser_cuda::q4h` / `q6h`).

use std::collections::HashMap;

use muser_cuda::arena::{plan, Arena, ArenaSlice, Part};
use muser_cuda::{q4h, q6h, Gpu, HWeights, Kernel};
use muser_gguf::GgmlType;

use crate::model::{Matrix, Model};
use crate::EngineError;

/// A matrix on the device.
#[derive(Clone, Copy, Debug)]
pub struct DevMatrix {
    pub ptr: u64,
    pub ty: GgmlType,
    pub n_in: usize,
    pub n_out: usize,
    /// Bytes per row on the device (GGUF's, or Q6_K-P's when `q6p`).
    pub row_bytes: usize,
    /// A Q6_K matrix held in the aligned repack Q6_K-P (`muser_cuda::q6pad`; the A16 route's
    /// default, `MUSER_CUDA_Q6_PAD`) — the only device copy; `q6p_kernels` read it.
    pub q6p: bool,
    /// A matrix of the f16 route in its layout (Q4H / Q6H) with its power of two E (outputs
    /// times 2^-E); `mvh_*` / `mmh_*` read it.
    pub h16: Option<(HWeights, i32)>,
}

impl DevMatrix {
    /// The kernels that read this matrix in its device layout.
    pub fn kernels(&self) -> Option<TypeKernels> {
        if self.q6p {
            Some(q6p_kernels())
        } else {
            kernels_for(self.ty)
        }
    }
}

/// One layer's device views (norm vectors are f32 pointers).
pub struct DevLayer {
    pub attn_norm: u64,
    pub wq: DevMatrix,
    pub wk: DevMatrix,
    pub wv: DevMatrix,
    pub wgate: Option<DevMatrix>,
    pub q_norm: u64,
    pub k_norm: u64,
    pub wo: DevMatrix,
    pub post_attn_norm: u64,
    pub ffn_norm: u64,
    pub ffn_gate: DevMatrix,
    pub ffn_up: DevMatrix,
    pub ffn_down: DevMatrix,
    pub post_ffw_norm: u64,
}

pub struct DevWeights {
    pub arena: Arena,
    pub token_embd: DevMatrix,
    pub output: DevMatrix,
    pub output_norm: u64,
    pub layers: Vec<DevLayer>,
}

/// The kernels of one weight type.
#[derive(Clone, Copy, Debug)]
pub struct TypeKernels {
    /// f32 activations (`MUSER_CUDA_ACTS=f32`): one token, eight tokens per row pass (none
    /// for Q6_K-P: that route keeps GGUF's layout).
    pub t1: Option<Kernel>,
    pub t8: Option<Kernel>,
    /// A16 activations (the default route): one token, eight tokens.
    pub a16_t1: Kernel,
    /// One token, software-pipelined (Q4_K, Q6_K; A/B `MUSER_CUDA_PIPE=0`).
    pub a16_pipe: Option<Kernel>,
    /// One token, pipelined, activations staged in shared memory (Q4_K, Q6_K; A/B
    /// `MUSER_CUDA_XSMEM=0`).
    pub a16_smem: Option<Kernel>,
    pub a16_t8: Kernel,
    /// Several tokens on the int8 tensor cores (Q4_K, Q6_K; A/B `MUSER_CUDA_MMQ=0`).
    pub a16_mmq: Option<Kernel>,
    /// Packed decode rows (batched decode; Q4_K, Q6_K): per tokens-per-launch 2, 4, 8 the
    /// (staged, unstaged) kernels of matvec_packed.cu.
    pub a16_packed: Option<[(Kernel, Kernel); 3]>,
    /// Packed decode rows on the tensor cores (Q4_K, Q6_K; from `MUSER_CUDA_MMV_MIN` rows):
    /// (8-column tiles, up to 8 rows per launch; paired tiles, up to 4).
    pub a16_mmv: Option<(Kernel, Kernel)>,
    /// Embedding-row dequantization (GGUF layouts: the token table is never repacked).
    pub embed: Option<Kernel>,
    /// A8 activations (`MUSER_CUDA_ACTS=a8`; Q4_K, Q5_K, Q6_K-P, Q8_0, Q5_0).
    pub a8: Option<A8Kernels>,
}

/// The A8 kernels of one weight layout (matvec_a8.cu, mmq_a8.cu, matvec_packed_a8.cu).
#[derive(Clone, Copy, Debug)]
pub struct A8Kernels {
    /// One token: the pipelined kernels (staged, unstaged) for Q4_K and Q6_K-P, the plain
    /// one (`mva_*_a8_t1`, `MUSER_CUDA_MVA_ROWS` rows per warp) for the others.
    pub t1: A8OneToken,
    /// Eight tokens per row pass (`MUSER_CUDA_MMQ=0`, and every multi-token matmul of the
    /// formats without tensor-core kernels).
    pub t8: Kernel,
    /// Several tokens on the tensor cores (Q4_K, Q6_K-P).
    pub mmq: Option<Kernel>,
    /// One token, activations held in registers (K <= 8192; `MUSER_CUDA_MVR=1`; Q4_K, Q6_K-P).
    pub mvr: Option<Kernel>,
    /// Packed decode rows (batched decode; Q4_K, Q6_K-P): per tokens-per-launch 2, 4, 8 the
    /// (staged, unstaged) kernels.
    pub packed: Option<[(Kernel, Kernel); 3]>,
    /// Packed decode rows on the tensor cores (Q4_K, Q6_K-P; from `MUSER_CUDA_MMV_MIN` rows).
    pub mmv: Option<Kernel>,
}

/// The one-token A8 kernel(s) of a weight layout.
#[derive(Clone, Copy, Debug)]
pub enum A8OneToken {
    /// Software-pipelined: (activations staged in shared memory, read from global memory).
    Pipe(Kernel, Kernel),
    /// The plain body.
    Plain(Kernel),
}

/// The A8 kernels of a weight type in GGUF's layout (`None`: not on the A8 route — F16 / F32
/// weights keep 16-bit activations, Q6_K runs in Q6_K-P: `q6p_kernels`).
fn a8_kernels_for(ty: GgmlType) -> Option<A8Kernels> {
    use Kernel::*;
    let plain = |t1, t8| A8Kernels {
        t1: A8OneToken::Plain(t1),
        t8,
        mmq: None,
        mvr: None,
        packed: None,
        mmv: None,
    };
    match ty {
        GgmlType::Q4_K => Some(A8Kernels {
            t1: A8OneToken::Pipe(MvsQ4kA8T1, MvpQ4kA8T1),
            t8: MvaQ4kA8T8,
            mmq: Some(MmqQ4kA8),
            mvr: Some(MvrQ4kA8T1),
            packed: Some([
                (MvsQ4kA8T2, MvpQ4kA8T2),
                (MvsQ4kA8T4, MvpQ4kA8T4),
                (MvsQ4kA8T8, MvpQ4kA8T8),
            ]),
            mmv: Some(MmvQ4kA8),
        }),
        GgmlType::Q5_K => Some(plain(MvaQ5kA8T1, MvaQ5kA8T8)),
        GgmlType::Q8_0 => Some(plain(MvaQ80A8T1, MvaQ80A8T8)),
        GgmlType::Q5_0 => Some(plain(MvaQ50A8T1, MvaQ50A8T8)),
        _ => None,
    }
}

/// The kernels for a weight type (`None`: the CUDA route cannot use this type).
pub fn kernels_for(ty: GgmlType) -> Option<TypeKernels> {
    use Kernel::*;
    let (t1, t8, a16_t1, a16_t8, embed) = match ty {
        GgmlType::Q4_K => (MvQ4kT1, MvQ4kT8, MvaQ4kT1, MvaQ4kT8, EmbedQ4k),
        GgmlType::Q5_K => (MvQ5kT1, MvQ5kT8, MvaQ5kT1, MvaQ5kT8, EmbedQ5k),
        GgmlType::Q6_K => (MvQ6kT1, MvQ6kT8, MvaQ6kT1, MvaQ6kT8, EmbedQ6k),
        GgmlType::Q8_0 => (MvQ80T1, MvQ80T8, MvaQ80T1, MvaQ80T8, EmbedQ80),
        GgmlType::Q5_0 => (MvQ50T1, MvQ50T8, MvaQ50T1, MvaQ50T8, EmbedQ50),
        GgmlType::F16 => (MvF16T1, MvF16T8, MvaF16T1, MvaF16T8, EmbedF16),
        GgmlType::F32 => (MvF32T1, MvF32T8, MvaF32T1, MvaF32T8, EmbedF32),
        _ => return None,
    };
    let a16_pipe = match ty {
        GgmlType::Q4_K => Some(MvpQ4kT1),
        GgmlType::Q6_K => Some(MvpQ6kT1),
        _ => None,
    };
    let a16_smem = match ty {
        GgmlType::Q4_K => Some(MvsQ4kT1),
        GgmlType::Q6_K => Some(MvsQ6kT1),
        _ => None,
    };
    let a16_mmq = match ty {
        GgmlType::Q4_K => Some(MmqQ4k),
        GgmlType::Q6_K => Some(MmqQ6k),
        _ => None,
    };
    let a16_packed = match ty {
        GgmlType::Q4_K => Some([
            (MvsQ4kT2, MvpQ4kT2),
            (MvsQ4kT4, MvpQ4kT4),
            (MvsQ4kT8, MvpQ4kT8),
        ]),
        GgmlType::Q6_K => Some([
            (MvsQ6kT2, MvpQ6kT2),
            (MvsQ6kT4, MvpQ6kT4),
            (MvsQ6kT8, MvpQ6kT8),
        ]),
        _ => None,
    };
    Some(TypeKernels {
        t1: Some(t1),
        t8: Some(t8),
        a16_t1,
        a16_pipe,
        a16_smem,
        a16_t8,
        a16_mmq,
        a16_packed,
        a16_mmv: match ty {
            GgmlType::Q4_K => Some((MmvQ4k, MmvPairQ4k)),
            GgmlType::Q6_K => Some((MmvQ6k, MmvPairQ6k)),
            _ => None,
        },
        embed: Some(embed),
        a8: a8_kernels_for(ty),
    })
}

/// The kernels of a Q6_K matrix in Q6_K-P (`muser_cuda::q6pad`): the A16 route's every
/// kernel, the same arithmetic as the Q6_K ones bit for bit (device test `kernels`).
pub fn q6p_kernels() -> TypeKernels {
    use Kernel::*;
    TypeKernels {
        t1: None,
        t8: None,
        a16_t1: MvaQ6pT1,
        a16_pipe: Some(MvpQ6pT1),
        a16_smem: Some(MvsQ6pT1),
        a16_t8: MvaQ6pT8,
        a16_mmq: Some(MmqQ6p),
        a16_packed: Some([
            (MvsQ6pT2, MvpQ6pT2),
            (MvsQ6pT4, MvpQ6pT4),
            (MvsQ6pT8, MvpQ6pT8),
        ]),
        a16_mmv: Some((MmvQ6p, MmvPairQ6p)),
        embed: None,
        a8: Some(A8Kernels {
            t1: A8OneToken::Pipe(MvsQ6pA8T1, MvpQ6pA8T1),
            t8: MvaQ6pA8T8,
            mmq: Some(MmqQ6pA8),
            mvr: Some(MvrQ6pA8T1),
            packed: Some([
                (MvsQ6pA8T2, MvpQ6pA8T2),
                (MvsQ6pA8T4, MvpQ6pA8T4),
                (MvsQ6pA8T8, MvpQ6pA8T8),
            ]),
            mmv: Some(MmvQ6pA8),
        }),
    }
}

/// The device layouts of the matmul weights: Q6_K in Q6_K-P (`q6_pad`), or every Q4_K / Q6_K
/// matmul weight in Q4H / Q6H (`h16`: the f16 route, which `cuda::h16` checked).
#[derive(Clone, Copy, Debug)]
pub struct Layouts {
    pub q6_pad: bool,
    pub h16: bool,
    /// The Q4H and Q6H layouts' scales (`CudaOptions::q4h_scales`, `q6h_scales`).
    pub q4h: q4h::Scales,
    pub q6h: q6h::Scales,
}

/// Bytes the arena will need (for the VRAM plan).
pub fn arena_bytes(model: &Model, lay: Layouts) -> usize {
    let (_, total, _) = layout(model, lay);
    total
}

/// The f16 route's layout of matmul weight `m` (Q4_K → Q4H, Q6_K → Q6H).
fn h16_layout(m: &Matrix, lay: Layouts) -> Option<HWeights> {
    match m.ty {
        GgmlType::Q4_K if lay.h16 => Some(HWeights::Q4H),
        GgmlType::Q6_K if lay.h16 => Some(HWeights::Q6H),
        _ => None,
    }
}

/// A matmul weight's device layout, as a plan key.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Dev {
    Gguf,
    Q6p,
    H(HWeights),
}

fn dev_layout(m: &Matrix, lay: Layouts) -> Dev {
    match h16_layout(m, lay) {
        Some(h) => Dev::H(h),
        None if padded(m, lay.q6_pad) => Dev::Q6p,
        None => Dev::Gguf,
    }
}

/// Whether matmul weight `m` goes up in Q6_K-P: Q6_K with whole blocks, when asked for.
fn padded(m: &Matrix, q6_pad: bool) -> bool {
    q6_pad && m.ty == GgmlType::Q6_K && m.n_in.is_multiple_of(256)
}

enum Src<'a> {
    File(usize, usize),
    Floats(&'a [f32]),
    /// The Q6_K-P repack of a file range: (offset, length, rows, values per row).
    Q6Pad(usize, usize, usize, usize),
    /// The Q4H / Q6H repack of a file range: (layout, offset, length, rows, values per row).
    H16(HWeights, usize, usize, usize, usize),
}

/// Plan: the distinct byte sources and their arena slices.
fn layout(model: &Model, lay: Layouts) -> (Vec<ArenaSlice>, usize, Vec<Src<'_>>) {
    let w = &model.weights;
    let mut srcs: Vec<Src<'_>> = Vec::new();
    let mut seen: HashMap<(usize, usize, Dev), usize> = HashMap::new();
    let mut add = |m: &Matrix, dev: Dev, srcs: &mut Vec<Src<'_>>| {
        let r = m.file_range();
        if let std::collections::hash_map::Entry::Vacant(e) = seen.entry((r.0, r.1, dev)) {
            e.insert(srcs.len());
            srcs.push(match dev {
                Dev::Q6p => Src::Q6Pad(r.0, r.1, m.n_out, m.n_in),
                Dev::H(h) => Src::H16(h, r.0, r.1, m.n_out, m.n_in),
                Dev::Gguf => Src::File(r.0, r.1),
            });
        }
    };
    // The token table is read by the embedding kernels only (GGUF layout); every other
    // matrix feeds the matmuls, in Q6_K-P where `padded` (a tied output = the token table then
    // goes up twice, once per layout).
    add(&w.token_embd, Dev::Gguf, &mut srcs);
    for m in w.matrices() {
        add(m, dev_layout(m, lay), &mut srcs);
    }
    srcs.push(Src::Floats(&w.output_norm));
    for l in &w.layers {
        for v in [
            &l.attn_norm,
            &l.q_norm,
            &l.k_norm,
            &l.post_attn_norm,
            &l.ffn_norm,
            &l.post_ffw_norm,
        ] {
            srcs.push(Src::Floats(v));
        }
    }
    let lens: Vec<usize> = srcs
        .iter()
        .map(|s| match s {
            Src::File(_, len) => *len,
            Src::Floats(v) => v.len() * 4,
            Src::Q6Pad(_, _, rows, n_in) => rows * muser_cuda::q6pad::row_bytes(*n_in),
            Src::H16(HWeights::Q4H, _, _, rows, n_in) => q4h::bytes(*rows, *n_in, lay.q4h),
            Src::H16(HWeights::Q6H, _, _, rows, n_in) => q6h::bytes(*rows, *n_in, lay.q6h),
        })
        .collect();
    let (slices, total) = plan(&lens);
    (slices, total, srcs)
}

/// Upload every weight; `progress(done, total)` is called as bytes go up.
pub fn upload(
    gpu: &Gpu,
    model: &Model,
    progress: &mut dyn FnMut(u64, u64),
    lay: Layouts,
) -> Result<DevWeights, EngineError> {
    let (slices, total, srcs) = layout(model, lay);
    let bytes = model.gguf().as_bytes();
    // Q6_K-P parts are repacked one at a time as the upload reaches them.
    let parts: Vec<(ArenaSlice, Part<'_>)> = slices
        .iter()
        .zip(&srcs)
        .map(|(s, src)| {
            let part = match src {
                Src::File(off, len) => Part::Bytes(&bytes[*off..*off + *len]),
                Src::Floats(v) => Part::Bytes(bytemuck::cast_slice(v)),
                &Src::Q6Pad(off, len, rows, n_in) => Part::Make(Box::new(move || {
                    muser_cuda::q6pad::repack(&bytes[off..off + len], rows, n_in)
                })),
                &Src::H16(h, off, len, rows, n_in) => Part::Make(Box::new(move || {
                    let src = &bytes[off..off + len];
                    Ok(match h {
                        HWeights::Q4H => q4h::repack(src, rows, n_in, lay.q4h)?.bytes,
                        HWeights::Q6H => q6h::repack(src, rows, n_in, lay.q6h)?.bytes,
                    })
                })),
            };
            (*s, part)
        })
        .collect();
    let arena = Arena::upload(gpu, total, &parts, progress)?;
    // Resolve views in the same order the plan was made.
    let mut file_ptr: HashMap<(usize, usize), u64> = HashMap::new();
    let mut pad_ptr: HashMap<(usize, usize), u64> = HashMap::new();
    let mut h16_ptr: HashMap<(usize, usize), (u64, HWeights, i32)> = HashMap::new();
    let mut float_ptrs = Vec::new();
    for (s, src) in slices.iter().zip(&srcs) {
        match src {
            Src::File(off, len) => {
                file_ptr.insert((*off, *len), arena.ptr(*s));
            }
            Src::Q6Pad(off, len, _, _) => {
                pad_ptr.insert((*off, *len), arena.ptr(*s));
            }
            &Src::H16(h, off, len, rows, n_in) => {
                // The power of two is the repack's (read again from the file's scales).
                let src = &bytes[off..off + len];
                let exp = match h {
                    HWeights::Q4H => q4h::exponent(src, rows, n_in)?,
                    HWeights::Q6H => q6h::exponent(src, rows, n_in)?,
                };
                h16_ptr.insert((off, len), (arena.ptr(*s), h, exp));
            }
            Src::Floats(_) => float_ptrs.push(arena.ptr(*s)),
        }
    }
    // A matrix in the device layout the plan gave it.
    let view = |m: &Matrix, dev: Dev| -> Result<DevMatrix, EngineError> {
        if kernels_for(m.ty).is_none() {
            return Err(EngineError::Config(format!(
                "tensor '{}' has type {:?}, which the CUDA route has no kernel for",
                m.name, m.ty
            )));
        }
        let (ptr, row_bytes, h16) = match dev {
            Dev::Gguf => (file_ptr[&m.file_range()], m.row_bytes, None),
            Dev::Q6p => (
                pad_ptr[&m.file_range()],
                muser_cuda::q6pad::row_bytes(m.n_in),
                None,
            ),
            Dev::H(_) => {
                let (p, h, exp) = h16_ptr[&m.file_range()];
                // A Q4H / Q6H matrix has no row stride: rows are interleaved by 16.
                (p, 0, Some((h, exp)))
            }
        };
        Ok(DevMatrix {
            ptr,
            ty: m.ty,
            n_in: m.n_in,
            n_out: m.n_out,
            row_bytes,
            q6p: dev == Dev::Q6p,
            h16,
        })
    };
    // A matmul weight.
    let dm = |m: &Matrix| view(m, dev_layout(m, lay));
    let w = &model.weights;
    let mut fl = float_ptrs.into_iter();
    let mut next = || fl.next().expect("float plan and upload agree");
    let output_norm = next();
    let mut layers = Vec::with_capacity(w.layers.len());
    for l in &w.layers {
        let (attn_norm, q_norm, k_norm, post_attn_norm, ffn_norm, post_ffw_norm) =
            (next(), next(), next(), next(), next(), next());
        layers.push(DevLayer {
            attn_norm,
            wq: dm(&l.wq)?,
            wk: dm(&l.wk)?,
            wv: dm(&l.wv)?,
            wgate: l.wgate.as_ref().map(dm).transpose()?,
            q_norm,
            k_norm,
            wo: dm(&l.wo)?,
            post_attn_norm,
            ffn_norm,
            ffn_gate: dm(&l.ffn_gate)?,
            ffn_up: dm(&l.ffn_up)?,
            ffn_down: dm(&l.ffn_down)?,
            post_ffw_norm,
        });
    }
    Ok(DevWeights {
        token_embd: view(&w.token_embd, Dev::Gguf)?,
        output: dm(&w.output)?,
        output_norm,
        layers,
        arena,
    })
}
