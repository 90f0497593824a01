//! Kernel modules and their compilation: the `.cu` families (`Module`, each with its embedded
//! source and shared headers), their numerics variants (`Math`), and `compile_module` — NVRTC
//! to PTX (and, for a real architecture such as `sm_90a`, the CUBIN NVRTC builds beside it),
//! with the module's identity (SHA-256 over the compiler version, options and source).
//! No device needed: CI compiles every module (`every_module_compiles_with_nvrtc`). Loading
//! the PTX and the kernel list are `registry`'s.

use std::ffi::CString;

use cudarc::nvrtc::{result as nvrtc, sys as nvrtc_sys, Ptx};
use sha2::{Digest, Sha256};

use crate::error::CudaError;

const COMMON: &str = include_str!("kernels/common.cuh");
const FORMATS: &str = include_str!("kernels/formats.cuh");
const FORMATS_A16: &str = include_str!("kernels/formats_a16.cuh");
const FORMATS_A8: &str = include_str!("kernels/formats_a8.cuh");
const MATVEC_PIPE: &str = include_str!("kernels/matvec_pipe.cuh");
const MMA_INT8: &str = include_str!("kernels/mma_int8.cuh");
const MMQ: &str = include_str!("kernels/mmq.cuh");
const MMV: &str = include_str!("kernels/mmv.cuh");
const ACT_H16: &str = include_str!("kernels/act_h16.cuh");
const FORMATS_H16: &str = include_str!("kernels/formats_h16.cuh");
const MVH_CHAIN: &str = include_str!("kernels/mvh_chain.cuh");
const CLUSTER: &str = include_str!("kernels/cluster.cuh");

/// Numerics of a compiled module variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Math {
    /// IEEE division/sqrt, no automatic FMA contraction (`--fmad=false`), denormals kept.
    Strict,
    /// `--use_fast_math`.
    Fast,
}

impl Math {
    pub fn label(self) -> &'static str {
        match self {
            Math::Strict => "strict",
            Math::Fast => "fast",
        }
    }
    fn options(self) -> Vec<String> {
        match self {
            Math::Strict => vec![
                "--fmad=false".into(),
                "--prec-div=true".into(),
                "--prec-sqrt=true".into(),
                "--ftz=false".into(),
            ],
            Math::Fast => vec!["--use_fast_math".into()],
        }
    }
}

/// One `.cu` kernel family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Module {
    Matvec,
    MatvecA16,
    /// Packed decode rows (benchmark and tests only until batched decode uses them; not in
    /// [`Module::ENGINE`], so the engine's start-up does not compile it).
    MatvecPacked,
    MmqA16,
    /// Packed decode rows on the tensor cores (built with [`Module::MatvecPacked`], for
    /// sessions with several sequences).
    MmvA16,
    /// The A8 activation side of the decode matvecs (`MUSER_CUDA_ACTS=a8`; not in
    /// [`Module::ENGINE`]: built for A8 sessions).
    MatvecA8,
    /// The tensor-core prefill matmul on A8 activations (built for A8 sessions).
    MmqA8,
    /// Packed decode rows on A8 activations (built for A8 sessions with several sequences).
    MatvecPackedA8,
    /// Packed decode rows on the tensor cores, A8 activations (built with
    /// [`Module::MatvecPackedA8`]).
    MmvA8,
    /// The f16 tensor-core route's activation step and matmul of up to 8 tokens per row pass
    /// (Q4H weights, `muser_cuda::q4h`; kernel tests and benchmarks until the engine runs it).
    MatvecH16,
    MmtH16,
    /// The f16 route's prefill tiles on the warpgroup MMA (`MUSER_CUDA_MMT=wg`; sm_90a).
    MmwH16,
    /// The f16 route's attention partials on the tensor cores (`MUSER_CUDA_H16_ATTN=mma`).
    AttnH16,
    /// Experiments' kernels (`probes_h16.cu`: the `mvh_persist` example), compiled after
    /// matvec_h16.cu's source; never built by a session.
    ProbesH16,
    Norm,
    Rope,
    Attention,
    Elementwise,
    /// L2 prefetch hints for the decode graph's side branch (`MUSER_CUDA_L2_PREFETCH`).
    Prefetch,
}

impl Module {
    /// Every module.
    pub const ALL: [Module; 19] = [
        Module::Matvec,
        Module::MatvecA16,
        Module::MatvecPacked,
        Module::MmqA16,
        Module::MmvA16,
        Module::MatvecA8,
        Module::MmqA8,
        Module::MatvecPackedA8,
        Module::MmvA8,
        Module::MatvecH16,
        Module::MmtH16,
        Module::MmwH16,
        Module::AttnH16,
        Module::ProbesH16,
        Module::Norm,
        Module::Rope,
        Module::Attention,
        Module::Elementwise,
        Module::Prefetch,
    ];
    /// The modules the engine launches from ([`Registry::build`]).
    pub const ENGINE: [Module; 7] = [
        Module::Matvec,
        Module::MatvecA16,
        Module::MmqA16,
        Module::Norm,
        Module::Rope,
        Module::Attention,
        Module::Elementwise,
    ];
    pub fn file(self) -> &'static str {
        match self {
            Module::Matvec => "matvec.cu",
            Module::MatvecA16 => "matvec_a16.cu",
            Module::MatvecPacked => "matvec_packed.cu",
            Module::MmqA16 => "mmq_a16.cu",
            Module::MmvA16 => "mmv_a16.cu",
            Module::MatvecA8 => "matvec_a8.cu",
            Module::MmqA8 => "mmq_a8.cu",
            Module::MatvecPackedA8 => "matvec_packed_a8.cu",
            Module::MmvA8 => "mmv_a8.cu",
            Module::MatvecH16 => "matvec_h16.cu",
            Module::MmtH16 => "mmt_h16.cu",
            Module::MmwH16 => "mmw_h16.cu",
            Module::AttnH16 => "attn_h16.cu",
            Module::ProbesH16 => "probes_h16.cu",
            Module::Norm => "norm.cu",
            Module::Rope => "rope.cu",
            Module::Attention => "attention.cu",
            Module::Elementwise => "elementwise.cu",
            Module::Prefetch => "prefetch.cu",
        }
    }
    /// Full source as compiled (shared headers first).
    pub fn source(self) -> String {
        let body = match self {
            Module::Matvec => include_str!("kernels/matvec.cu"),
            Module::MatvecA16 => include_str!("kernels/matvec_a16.cu"),
            Module::MatvecPacked => include_str!("kernels/matvec_packed.cu"),
            Module::MmqA16 => include_str!("kernels/mmq_a16.cu"),
            Module::MmvA16 => include_str!("kernels/mmv_a16.cu"),
            Module::MatvecA8 => include_str!("kernels/matvec_a8.cu"),
            Module::MmqA8 => include_str!("kernels/mmq_a8.cu"),
            Module::MatvecPackedA8 => include_str!("kernels/matvec_packed_a8.cu"),
            Module::MmvA8 => include_str!("kernels/mmv_a8.cu"),
            Module::MatvecH16 => include_str!("kernels/matvec_h16.cu"),
            Module::MmtH16 => include_str!("kernels/mmt_h16.cu"),
            Module::MmwH16 => include_str!("kernels/mmw_h16.cu"),
            Module::AttnH16 => include_str!("kernels/attn_h16.cu"),
            Module::ProbesH16 => include_str!("kernels/probes_h16.cu"),
            Module::Norm => include_str!("kernels/norm.cu"),
            Module::Rope => include_str!("kernels/rope.cu"),
            Module::Attention => include_str!("kernels/attention.cu"),
            Module::Elementwise => include_str!("kernels/elementwise.cu"),
            Module::Prefetch => include_str!("kernels/prefetch.cu"),
        };
        let formats = match self {
            Module::Matvec => FORMATS,
            Module::MatvecA16 | Module::MatvecPacked => {
                return format!("{COMMON}\n{FORMATS_A16}\n{MATVEC_PIPE}\n{body}")
            }
            Module::MatvecA8 | Module::MatvecPackedA8 => {
                return format!("{COMMON}\n{FORMATS_A16}\n{FORMATS_A8}\n{MATVEC_PIPE}\n{body}")
            }
            Module::MmqA16 | Module::MmqA8 => {
                return format!("{COMMON}\n{FORMATS_A16}\n{MMA_INT8}\n{MMQ}\n{body}")
            }
            Module::MmvA16 | Module::MmvA8 => {
                return format!("{COMMON}\n{FORMATS_A16}\n{MMA_INT8}\n{MMV}\n{body}")
            }
            Module::Norm | Module::Attention => {
                return format!("{COMMON}\n{ACT_H16}\n{CLUSTER}\n{body}")
            }
            Module::Elementwise => ACT_H16,
            Module::MatvecH16 => {
                return format!(
                    "{COMMON}\n{ACT_H16}\n{CLUSTER}\n{FORMATS_H16}\n{MVH_CHAIN}\n{body}"
                )
            }
            Module::ProbesH16 => {
                let mvh = include_str!("kernels/matvec_h16.cu");
                return format!(
                    "{COMMON}\n{ACT_H16}\n{CLUSTER}\n{FORMATS_H16}\n{MVH_CHAIN}\n{mvh}\n{body}"
                );
            }
            Module::MmtH16 | Module::MmwH16 | Module::AttnH16 => {
                return format!("{COMMON}\n{FORMATS_H16}\n{body}")
            }
            _ => "",
        };
        format!("{COMMON}\n{formats}\n{body}")
    }
    /// The math variants this module is compiled in.
    pub fn maths(self) -> &'static [Math] {
        match self {
            Module::Elementwise => &[Math::Strict, Math::Fast],
            _ => &[Math::Strict],
        }
    }
}

/// Compile one module variant to PTX (no device needed): the PTX, the full option list
/// (architecture included), the module's identity and the PTX's hash and size (`Compiled`).
pub fn compile_module(
    m: Module,
    math: Math,
    arch: &'static str,
    src: &str,
    extra: &[String],
) -> Result<Compiled, CudaError> {
    let mut options = math.options();
    options.extend(extra.iter().cloned());
    options.push("-std=c++17".into());
    options.push(format!("-DMUSER_MATH_{}", math.label().to_uppercase()));
    // NVRTC gets the architecture first (the order the sessions measured so far compiled
    // with); the identity lists it last.
    let argv: Vec<String> = std::iter::once(format!("--gpu-architecture={arch}"))
        .chain(options.iter().cloned())
        .collect();
    let (text, cubin) = nvrtc_build(m, math, src, &argv)?;
    options.push(format!("--gpu-architecture={arch}"));
    let mut h = Sha256::new();
    h.update(nvrtc_version().as_bytes());
    h.update([0]);
    for o in &options {
        h.update(o.as_bytes());
        h.update([0]);
    }
    h.update(src.as_bytes());
    let sha256 = hex(&h.finalize());
    Ok(Compiled {
        ptx_sha256: hex(&Sha256::digest(text.as_bytes())),
        ptx_bytes: text.len(),
        ptx: Ptx::from_src(text),
        cubin,
        options,
        sha256,
    })
}

/// One NVRTC compilation: the PTX text, and the CUBIN where the architecture is a real one
/// (`sm_*`: NVRTC assembles it in the same compile).
fn nvrtc_build(
    m: Module,
    math: Math,
    src: &str,
    options: &[String],
) -> Result<(String, Option<Vec<u8>>), CudaError> {
    let fail = |what: &str, log: String| CudaError::Compile {
        module: m.file().into(),
        options: options.join(" "),
        log: format!("{what}: {log}"),
    };
    let c_src = CString::new(src).map_err(|_| fail("source", "a NUL byte in the source".into()))?;
    let name = CString::new(format!("{}[{}]", m.file(), math.label()))
        .map_err(|_| fail("name", "a NUL byte in the name".into()))?;
    let prog = nvrtc::create_program(&c_src, Some(&name))
        .map_err(|e| fail("nvrtcCreateProgram", format!("{e:?}")))?;
    // NVRTC's PTX and log come back as NUL-terminated buffers (its sizes count the NUL).
    let text_of = |buf: &[std::ffi::c_char]| {
        // SAFETY: c_char and u8 have the same size and alignment; the slice is live.
        let b = unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), buf.len()) };
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        String::from_utf8_lossy(&b[..end]).into_owned()
    };
    // SAFETY: `prog` was created above and is destroyed once, at the end of this function;
    // every NVRTC call below gets it live, and the CUBIN buffer has the size NVRTC reported.
    let out = unsafe {
        let built = match nvrtc::compile_program(prog, options) {
            Ok(()) => Ok(()),
            Err(e) => {
                let log = nvrtc::get_program_log(prog)
                    .map(|l| text_of(&l))
                    .unwrap_or_else(|_| format!("{e:?} (no log)"));
                Err(fail("nvrtcCompileProgram", log))
            }
        };
        built.and_then(|()| {
            let ptx = nvrtc::get_ptx(prog).map_err(|e| fail("nvrtcGetPTX", format!("{e:?}")))?;
            let text = text_of(&ptx);
            let real = options
                .iter()
                .any(|o| o.starts_with("--gpu-architecture=sm_"));
            let cubin = if real {
                let mut n = 0usize;
                nvrtc_sys::nvrtcGetCUBINSize(prog, &mut n)
                    .result()
                    .map_err(|e| fail("nvrtcGetCUBINSize", format!("{e:?}")))?;
                let mut bin = vec![0u8; n];
                nvrtc_sys::nvrtcGetCUBIN(prog, bin.as_mut_ptr().cast())
                    .result()
                    .map_err(|e| fail("nvrtcGetCUBIN", format!("{e:?}")))?;
                Some(bin)
            } else {
                None
            };
            Ok((text, cubin))
        })
    };
    // SAFETY: created above, not destroyed before.
    let _ = unsafe { nvrtc::destroy_program(prog) };
    out
}

/// What `compile_module` returns. The identity `sha256` names the compiler, options and source;
/// the PTX itself is not reproducible across processes: NVRTC 13.0 orders some of its choices
/// by memory address (two compilations of the same module in two processes give different PTX
/// for `mmq_a16.cu` and `matvec_a16.cu` about half the time — an ordering of loads, or one
/// shared load reused — and identical PTX with address randomization off, `setarch -R`). The
/// arithmetic is fixed by the source (every float operation explicitly rounded), so the
/// numbers are not affected: the device determinism tests compare sessions that each compile.
pub struct Compiled {
    pub ptx: Ptx,
    /// The CUBIN NVRTC assembled in the same compile (a real architecture only), which
    /// `MUSER_CUDA_LOAD=cubin` loads instead of the PTX (no driver JIT).
    pub cubin: Option<Vec<u8>>,
    /// The options as given to NVRTC, then `--gpu-architecture`.
    pub options: Vec<String>,
    pub sha256: String,
    pub ptx_sha256: String,
    pub ptx_bytes: usize,
}

/// NVRTC's version as `major.minor` ("unknown" if the query fails).
pub fn nvrtc_version() -> String {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: two out-pointers to live locals; NVRTC is loaded (callers compile with it).
    let r = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    if r == cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS {
        format!("nvrtc {major}.{minor}")
    } else {
        "nvrtc unknown".into()
    }
}

/// Whether the NVRTC library can be loaded (kernels can be compiled without a device).
pub fn nvrtc_present() -> bool {
    // SAFETY: only tries to dlopen the library.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

pub(crate) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Kernel;

    /// Every module variant compiles with NVRTC for sm_90a and defines every kernel symbol the
    /// registry lists. Needs only libnvrtc (no GPU); CI installs it from PyPI
    /// (`nvidia-cuda-nvrtc`), elsewhere the test says loudly that it skipped.
    #[test]
    fn every_module_compiles_with_nvrtc() {
        if !nvrtc_present() {
            eprintln!("skipping: NVRTC (libnvrtc.so) not loadable; kernels not compiled");
            if std::env::var("MUSER_REQUIRE_NVRTC").as_deref() == Ok("1") {
                panic!("MUSER_REQUIRE_NVRTC=1 but libnvrtc is not loadable");
            }
            return;
        }
        for m in Module::ALL {
            for &math in m.maths() {
                let c = compile_module(m, math, "sm_90a", &m.source(), &[])
                    .unwrap_or_else(|e| panic!("{e}"));
                // NVRTC assembles the real architecture's CUBIN in the same compile (an ELF
                // image: what `MUSER_CUDA_LOAD=cubin` loads).
                let bin = c
                    .cubin
                    .as_deref()
                    .unwrap_or_else(|| panic!("{}: no cubin", m.file()));
                assert_eq!(bin.get(..4), Some(&b"\x7fELF"[..]), "{}: cubin", m.file());
                let (text, sha) = (c.ptx.to_src(), c.sha256);
                for &k in Kernel::ALL.iter().filter(|k| k.module() == m) {
                    assert!(
                        text.contains(&format!(".entry {}(", k.symbol())),
                        "{}[{}]: no entry {}",
                        m.file(),
                        math.label(),
                        k.symbol()
                    );
                }
                // Every entry point waits for its predecessor (programmatic dependent launch,
                // common.cuh): without the wait the `MUSER_CUDA_PDL` launch attribute would let
                // it race the previous kernel.
                for body in text.split(".entry ").skip(1) {
                    let name = body.split('(').next().unwrap_or("?");
                    assert!(
                        body.contains("griddepcontrol.wait"),
                        "{}[{}]: entry {name} never calls pdl_wait",
                        m.file(),
                        math.label()
                    );
                }
                assert_eq!(sha.len(), 64);
            }
        }
        // The A/B variants of the decode matvec module compile too.
        let m = Module::MatvecA16;
        let extra = [
            "-DMVA_R1=2".to_string(),
            "-DMVA_MINB=6".to_string(),
            "-DMVA_WARPS=8".to_string(),
            "-DMUSER_LD16_WINDOW=0".to_string(),
            "-DMVA_Q6_LAZY=0".to_string(),
            "-DMVA_STAGE_ASYNC=1".to_string(),
            "-DMVA_WSTAGES=3".to_string(),
            "-DMVA_WSTAGES_Q6=2".to_string(),
            "-DMVA_AHEAD_Q6P=2".to_string(),
        ];
        compile_module(m, Math::Strict, "sm_90a", &m.source(), &extra)
            .unwrap_or_else(|e| panic!("{e}"));
        // One more strict sm_90a build of module `m` with `defines`.
        let variant = |m: Module, defines: &[&str]| {
            let extra: Vec<String> = defines.iter().map(|d| d.to_string()).collect();
            compile_module(m, Math::Strict, "sm_90a", &m.source(), &extra)
                .unwrap_or_else(|e| panic!("{e}"));
        };
        variant(m, &["-DMVA_AHEAD=2"]);
        variant(Module::Norm, &["-DNORM_H16=1"]);
        variant(Module::Norm, &["-DNORM_H16=2"]);
        variant(Module::Norm, &["-DNORM_RED1=0"]);
        variant(Module::Norm, &["-DNORM_H16=1", "-DNORM_RED1=1"]);
        variant(Module::Norm, &["-DNORM_RED1=1", "-DNORM_AMAX_BOUND=1"]);
        variant(Module::Attention, &["-DCOMBINE_WIDE=16"]);
        variant(Module::Attention, &["-DCOMBINE_WIDE=8", "-DCOMBINE_PIPE=1"]);
        variant(Module::AttnH16, &["-DATTN_EARLY=1"]);
        variant(Module::AttnH16, &["-DATTN_EARLY=1", "-DATTN_FLAT_EXP=1"]);
        variant(
            Module::AttnH16,
            &["-DATTN_EARLY=1", "-DATTN_FLAT_EXP=1", "-DATTN_ROWCOPY=1"],
        );
        variant(Module::AttnH16, &["-DATTN_ROWCOPY=1"]);
        variant(Module::Rope, &["-DROPE_EARLY=1"]);
        variant(Module::Rope, &["-DROPE_OVERLAP=1"]);
        variant(Module::MatvecA8, &["-DMVR_ROWS=16", "-DMVR_AHEAD=1"]);
        // MUSER_CUDA_MVH_LEAN reaches the prefill tiles too (formats_h16.cuh's broadcasts).
        variant(Module::MmtH16, &["-DMVH_LEAN=1"]);
        variant(Module::MmwH16, &["-DMVH_LEAN=1"]);
        // Q4H's and Q6H's 8-bit scales (MUSER_CUDA_Q4H_SCALES / _Q6H_SCALES) in every module that reads them.
        for m in [
            Module::MatvecH16,
            Module::MmtH16,
            Module::MmwH16,
            Module::ProbesH16,
        ] {
            variant(m, &["-DQ4H_U8=1"]);
            variant(m, &["-DQ6H_U8=1"]);
        }
        for wg in ["-DMMT_WG=1", "-DMMT_WG=2"] {
            variant(Module::MmtH16, &[wg, "-DMMT_MINB=2", "-DMMT_STAGES=2"]);
        }
        for define in [
            "-DMVH_BULK=2",
            "-DMVH_BULK=4",
            "-DMVH_EARLY=0",
            "-DMVH_EARLY=4",
            "-DMVH_AHEAD=2",
            "-DMVH_XPF=1",
            "-DMVH_WHINT=0",
            "-DMVH_XSTAGE=1",
            "-DMVH_MAXREG=80",
            "-DMVH_MAXREG=96",
            "-DMVH_PP=1",
            "-DMVH_PAIR=1",
            "-DMVH_XSMEM=1",
            "-DMVH_LEAN=1",
            "-DMVH_LEAN=2",
            "-DMVH_LEAN=3",
            "-DMVH_XTOUCH=1",
        ] {
            variant(Module::MatvecH16, &[define]);
        }
        variant(Module::MatvecH16, &["-DMVH_XSMEM=1", "-DMVH_WBOUNDS=0"]);
        variant(Module::MatvecH16, &["-DMVH_PP=1", "-DMVH_WBOUNDS=0"]);
        variant(Module::MatvecH16, &["-DMVH_PP=2"]);
        variant(Module::MatvecH16, &["-DMVH_PP=3"]);
        variant(Module::MatvecH16, &["-DMVH_PP=3", "-DMVH_PP_SETS=3"]);
        variant(Module::MatvecH16, &["-DMVH_PP=3", "-DMVH_EARLY_PP=1"]);
        // The two-accumulator experiment (MUSER_CUDA_MVH_ACC2), in the kernels and the probes.
        variant(Module::MatvecH16, &["-DMVH_PP=3", "-DMVH_ACC2=1"]);
        variant(Module::ProbesH16, &["-DMVH_PP=3", "-DMVH_ACC2=1"]);
        variant(Module::MatvecH16, &["-DMVH_PP=3", "-DMVH_ACC2=2"]);
        variant(Module::MmtH16, &["-DMVH_ACC2=1", "-DQ4H_U8=1"]);
        variant(Module::MmwH16, &["-DMVH_ACC2=1", "-DQ4H_U8=1"]);
        variant(Module::MatvecH16, &["-DMVH_PP=3", "-DMVH_ACC2=3"]);
        variant(Module::MmtH16, &["-DMVH_ACC2=3", "-DQ4H_U8=1"]);
        variant(Module::MmwH16, &["-DMVH_ACC2=3", "-DQ4H_U8=1"]);
        variant(
            Module::MatvecH16,
            &["-DMVH_PP=1", "-DMVH_WBOUNDS=0", "-DMVH_XTOUCH=1"],
        );
        variant(Module::MmwH16, &["-DMMW_WG=2"]);
        variant(
            Module::MmqA16,
            &["-DMMQ_WN=2", "-DMMQ_MINB=2", "-DMMQ_CVT=0"],
        );
    }

    /// A module's identity names what was compiled: the same for two compilations (whose PTX
    /// NVRTC may order differently), different for another option or source.
    #[test]
    fn module_identity_is_reproducible() {
        if !nvrtc_present() {
            eprintln!("skipping: NVRTC (libnvrtc.so) not loadable; kernels not compiled");
            return;
        }
        let m = Module::Rope;
        let id = |src: &str, extra: &[String]| {
            compile_module(m, Math::Strict, "sm_90a", src, extra)
                .unwrap_or_else(|e| panic!("{e}"))
                .sha256
        };
        let src = m.source();
        let a = id(&src, &[]);
        assert_eq!(a, id(&src, &[]), "two compilations, one identity");
        assert_ne!(
            a,
            id(&src, &["-DMUSER_UNUSED=1".to_string()]),
            "options count"
        );
        assert_ne!(
            a,
            id(&format!("{src}\n// another source"), &[]),
            "source counts"
        );
        assert!(nvrtc_version().starts_with("nvrtc "));
    }

    /// A virtual architecture gives PTX only; a source NVRTC rejects is a typed error carrying
    /// its log.
    #[test]
    fn cubin_only_for_real_architectures_and_errors_carry_the_log() {
        if !nvrtc_present() {
            eprintln!("skipping: NVRTC (libnvrtc.so) not loadable; kernels not compiled");
            return;
        }
        let m = Module::Rope;
        let c = compile_module(m, Math::Strict, "compute_90a", &m.source(), &[])
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(c.cubin.is_none() && c.ptx.to_src().contains(".entry "));
        let bad = format!("{}\nthis is not C++;", m.source());
        match compile_module(m, Math::Strict, "sm_90a", &bad, &[]) {
            Err(CudaError::Compile { log, .. }) => assert!(log.contains("error"), "{log}"),
            other => panic!(
                "expected a compile error, got {:?}",
                other.map(|c| c.sha256)
            ),
        }
    }
}
