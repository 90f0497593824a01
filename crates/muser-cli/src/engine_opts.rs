//! Engine options shared by the commands that run a model (`eval`, `generate`).

use clap::{Args, ValueEnum};
use muser_engine::cpu::matmul::ActFormat;
use muser_engine::cpu::repack::Repack;
use muser_engine::cpu::CpuOptions;
use muser_engine::session::{Backend, Session};
use muser_engine::Model;

/// `--backend`.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum BackendArg {
    /// The CPU route.
    Cpu,
    /// The CUDA route; an error when no CUDA device is present.
    Cuda,
    /// CUDA when a device is present, else CPU (says which on stderr).
    Auto,
}

#[derive(Args, Clone, Debug)]
pub struct EngineOpts {
    /// Worker threads (default: physical cores).
    #[arg(short, long)]
    pub threads: Option<usize>,
    /// Context size in tokens (default: the prompt plus what is generated, capped by the model).
    #[arg(long)]
    pub ctx: Option<usize>,
    /// Prefill chunk size (tokens evaluated together). Results do not depend on it.
    #[arg(long, default_value_t = 512)]
    pub chunk: usize,
    /// Backend: cpu, cuda or auto (CUDA if a device is present).
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: BackendArg,
}

/// Physical cores (logical CPUs when the topology cannot be read).
pub fn physical_cores() -> usize {
    let logical = std::thread::available_parallelism().map_or(1, |n| n.get());
    let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else {
        return logical;
    };
    let mut cores = std::collections::BTreeSet::new();
    let (mut phys, mut core) = (None, None);
    for line in info.lines() {
        if let Some((k, v)) = line.split_once(':') {
            match k.trim() {
                "physical id" => phys = v.trim().parse::<u32>().ok(),
                "core id" => core = v.trim().parse::<u32>().ok(),
                _ => {}
            }
        } else {
            if let (Some(p), Some(c)) = (phys, core) {
                cores.insert((p, c));
            }
            phys = None;
            core = None;
        }
    }
    if cores.is_empty() {
        logical
    } else {
        cores.len().min(logical)
    }
}

impl EngineOpts {
    pub fn threads(&self) -> usize {
        self.threads.unwrap_or_else(physical_cores).max(1)
    }

    /// CPU options for a context of at least `needed` tokens.
    pub fn cpu_options(&self, needed: usize) -> anyhow::Result<CpuOptions> {
        Ok(CpuOptions {
            threads: self.threads(),
            n_ctx: self.ctx.unwrap_or(needed).max(needed),
            chunk: self.chunk.max(1),
            acts: ActFormat::from_env()?,
            repack: Repack::from_env()?,
        })
    }
}

impl EngineOpts {
    /// Resolve the backend and open a session for a context of at least `needed` tokens.
    /// Prints the backend choice (and for CUDA the load report) to stderr.
    pub fn open_session<'m>(&self, model: &'m Model, needed: usize) -> anyhow::Result<Session<'m>> {
        self.open_session_seqs(model, needed, 1)
    }

    /// `open_session` with `n_seq` sequence slots (more than one: CUDA only).
    pub fn open_session_seqs<'m>(
        &self,
        model: &'m Model,
        needed: usize,
        n_seq: usize,
    ) -> anyhow::Result<Session<'m>> {
        let b = match self.backend {
            BackendArg::Cpu => Backend::Cpu,
            BackendArg::Cuda => Backend::Cuda,
            BackendArg::Auto => Backend::Auto,
        };
        let (b, why) = b.resolve()?;
        if self.backend == BackendArg::Auto {
            eprintln!("backend: {why}");
        }
        let opts = self.cpu_options(needed)?;
        let bar = indicatif::ProgressBar::new(0);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "uploading weights {bar:40} {bytes}/{total_bytes} {bytes_per_sec}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        let mut progress = |done: u64, total: u64| {
            bar.set_length(total);
            bar.set_position(done);
        };
        let s = Session::open(model, b, opts, n_seq, &mut progress)?;
        bar.finish_and_clear();
        if let Some(r) = s.load_report() {
            eprintln!("{r}");
        }
        Ok(s)
    }
}
