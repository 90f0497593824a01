//! Backend choice and one session type over the routes. `auto` picks CUDA when a device is
//! present and says so; an explicit `cuda` without a device is an error, never a CPU run.

use std::borrow::Cow;

use crate::cpu::{CpuOptions, CpuSession, Logits};
use crate::cuda::{CudaOptions, CudaSession};
use crate::model::Model;
use crate::EngineError;

/// `--backend`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Cpu,
    Cuda,
    Auto,
}

impl Backend {
    pub fn parse(s: &str) -> Option<Backend> {
        match s {
            "cpu" => Some(Backend::Cpu),
            "cuda" => Some(Backend::Cuda),
            "auto" => Some(Backend::Auto),
            _ => None,
        }
    }

    /// Resolve `auto`: CUDA if a device is present. Returns the backend and why.
    pub fn resolve(self) -> Result<(Backend, String), EngineError> {
        match self {
            Backend::Cpu => Ok((Backend::Cpu, "cpu (requested)".into())),
            Backend::Cuda => Ok((Backend::Cuda, "cuda (requested)".into())),
            Backend::Auto => match muser_cuda::Gpu::probe()? {
                Some(info) => Ok((
                    Backend::Cuda,
                    format!(
                        "cuda (auto: found {} with {:.0} GiB)",
                        info.name,
                        info.total_mem as f64 / (1u64 << 30) as f64
                    ),
                )),
                None => Ok((Backend::Cpu, "cpu (auto: no CUDA device)".into())),
            },
        }
    }
}

/// A sequence on either route.
pub enum Session<'m> {
    Cpu(Box<CpuSession<'m>>),
    Cuda(Box<CudaSession<'m>>),
}

impl<'m> Session<'m> {
    /// Open a session on a resolved backend (`Auto` must be resolved first) with `n_seq`
    /// sequence slots (more than one: CUDA only, for `decode_batch`).
    pub fn open(
        model: &'m Model,
        backend: Backend,
        cpu: CpuOptions,
        n_seq: usize,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Session<'m>, EngineError> {
        match backend {
            Backend::Cpu if n_seq != 1 => Err(EngineError::Config(format!(
                "the CPU route runs one sequence per session (asked for {n_seq}); batched decode needs the CUDA route"
            ))),
            Backend::Cpu => Ok(Session::Cpu(Box::new(CpuSession::new(model, cpu)?))),
            Backend::Cuda => {
                let mut opts = CudaOptions::new(cpu.n_ctx, cpu.chunk);
                opts.n_seq = n_seq;
                Ok(Session::Cuda(Box::new(CudaSession::new(
                    model, opts, progress,
                )?)))
            }
            Backend::Auto => Err(EngineError::Config(
                "backend 'auto' must be resolved before opening a session".into(),
            )),
        }
    }

    pub fn eval(&mut self, tokens: &[u32], which: Logits) -> Result<Vec<f32>, EngineError> {
        self.eval_seq_ref(0, tokens, which).map(Cow::into_owned)
    }

    /// `eval`, the rows borrowed where the route can lend them (CUDA: from the page-locked
    /// staging, up to `MAX_BATCH` rows) — the decode loop's form: no copy of the rows.
    pub fn eval_ref(
        &mut self,
        tokens: &[u32],
        which: Logits,
    ) -> Result<Cow<'_, [f32]>, EngineError> {
        self.eval_seq_ref(0, tokens, which)
    }

    /// `eval` on sequence `seq` (CPU: only sequence 0 exists).
    pub fn eval_seq(
        &mut self,
        seq: usize,
        tokens: &[u32],
        which: Logits,
    ) -> Result<Vec<f32>, EngineError> {
        self.eval_seq_ref(seq, tokens, which).map(Cow::into_owned)
    }

    /// `eval_seq`, the rows borrowed where the route can lend them (see `eval_ref`).
    pub fn eval_seq_ref(
        &mut self,
        seq: usize,
        tokens: &[u32],
        which: Logits,
    ) -> Result<Cow<'_, [f32]>, EngineError> {
        match self {
            Session::Cpu(s) if seq == 0 => s.eval(tokens, which).map(Cow::Owned),
            Session::Cpu(_) => Err(EngineError::Config(format!(
                "sequence {seq} does not exist (the CPU route runs one sequence per session)"
            ))),
            Session::Cuda(s) => s.eval_seq_ref(seq, tokens, which),
        }
    }

    /// One token of each of several sequences in one step (CUDA; see
    /// `CudaSession::decode_batch`). Returns `rows.len() × n_vocab` logits.
    pub fn decode_batch(&mut self, rows: &[(usize, u32)]) -> Result<Vec<f32>, EngineError> {
        self.decode_batch_ref(rows).map(Cow::into_owned)
    }

    /// `decode_batch`, the rows borrowed where the route can lend them (see `eval_ref`).
    pub fn decode_batch_ref(
        &mut self,
        rows: &[(usize, u32)],
    ) -> Result<Cow<'_, [f32]>, EngineError> {
        match self {
            Session::Cpu(s) if rows.len() == 1 && rows[0].0 == 0 => {
                s.eval(&[rows[0].1], Logits::Last).map(Cow::Owned)
            }
            Session::Cpu(_) => Err(EngineError::Config(
                "batched decode of several sequences needs the CUDA route".into(),
            )),
            Session::Cuda(s) => s.decode_batch_ref(rows),
        }
    }

    pub fn n_past(&self) -> usize {
        match self {
            Session::Cpu(s) => s.n_past(),
            Session::Cuda(s) => s.n_past(),
        }
    }

    pub fn clear(&mut self) {
        match self {
            Session::Cpu(s) => s.clear(),
            Session::Cuda(s) => s.clear(),
        }
    }

    /// The route identity (printed by `--verbose`, written into every receipt).
    pub fn route_identity(&self) -> String {
        match self {
            Session::Cpu(s) => s.route_identity(),
            Session::Cuda(s) => s.route_identity(),
        }
    }

    /// Per compiled kernel module: `file[math] identity (PTX sha, ms, options)` (CUDA only).
    pub fn module_fingerprints(&self) -> Vec<String> {
        match self {
            Session::Cpu(_) => Vec::new(),
            Session::Cuda(s) => s
                .registry()
                .modules()
                .iter()
                .map(|m| {
                    format!(
                        "{}[{}] {} (PTX {}{}, {} ms, {})",
                        m.module.file(),
                        m.math.label(),
                        m.sha256,
                        &m.ptx_sha256[..16],
                        match m.load {
                            muser_cuda::registry::Load::Ptx => "",
                            muser_cuda::registry::Load::Cubin => "; its cubin loaded",
                        },
                        m.compile_ms.round(),
                        m.options.join(" ")
                    )
                })
                .collect(),
        }
    }

    /// Weight bytes read per decode token, and the measured bandwidth decode runs against:
    /// the device-to-device copy bandwidth on CUDA, the parallel memory read bandwidth with the
    /// session's threads on the CPU (a 1 GiB buffer, best of 3).
    pub fn bandwidth_facts(&self) -> Result<BandwidthFacts, EngineError> {
        let (model, gb_per_s, kind) = match self {
            Session::Cpu(s) => (s.model(), s.read_bandwidth_gbps(), "read"),
            Session::Cuda(s) => (s.model(), s.gpu().copy_bandwidth(1 << 30, 5)?, "copy"),
        };
        Ok(BandwidthFacts {
            decode_weight_bytes: model.decode_weight_bytes(),
            gb_per_s,
            kind,
        })
    }

    /// Load report of the CUDA route (compile time, upload GB/s); `None` on CPU.
    pub fn load_report(&self) -> Option<&str> {
        match self {
            Session::Cpu(_) => None,
            Session::Cuda(s) => Some(&s.load_report),
        }
    }

    /// Forget the phase profile accumulated so far (e.g. a benchmark's untimed context fill).
    /// (device seconds, steps) since the last call where the route times its steps (CUDA with
    /// `MUSER_CUDA_STEP_TIMES=1`); else None.
    pub fn take_step_times(&mut self) -> Option<(f64, u64)> {
        match self {
            Session::Cpu(_) => None,
            Session::Cuda(s) => s.take_step_times(),
        }
    }

    pub fn profile_reset(&mut self) {
        match self {
            Session::Cpu(s) => s.profile_reset(),
            Session::Cuda(s) => s.profile_reset(),
        }
    }

    /// Phase profile, when the route's profiler is enabled.
    pub fn profile_report(&self) -> Option<String> {
        match self {
            Session::Cpu(s) => s.profile_report(),
            Session::Cuda(s) => s.profile_report(),
        }
    }
}

/// What decode speed is measured against (`Session::bandwidth_facts`).
#[derive(Clone, Copy, Debug)]
pub struct BandwidthFacts {
    /// Weight bytes one decode token reads.
    pub decode_weight_bytes: u64,
    /// Measured bandwidth, GB/s.
    pub gb_per_s: f64,
    /// "copy" (CUDA device-to-device copy) or "read" (CPU parallel read).
    pub kind: &'static str,
}
