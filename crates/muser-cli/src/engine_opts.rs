//! Engine options shared by the commands that run a model (`eval`, `generate`).

use clap::Args;
use muser_engine::cpu::matmul::ActFormat;
use muser_engine::cpu::CpuOptions;

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
        })
    }
}

/// The CPU route's identity: what produced the numbers.
pub fn cpu_route_identity(o: &CpuOptions) -> String {
    format!(
        "cpu:acts={},kv=f16,attn=f32,simd={}",
        o.acts.name(),
        muser_quant::simd_level().name()
    )
}
