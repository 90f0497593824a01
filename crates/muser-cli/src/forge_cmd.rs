//! `muser forge`: write a deterministic synthetic Muse Glimmer GGUF (presets tiny, small, full,
//! every dimension overridable), with a progress bar, the SHA-256 computed while streaming, and
//! an atomic rename at the end (a half-written file never carries the final name).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use muser_forge::config::parse_pattern;
use muser_forge::{forge, ForgeConfig, Mix};
use sha2::{Digest, Sha256};

#[derive(Args)]
pub struct ForgeArgs {
    /// Preset: tiny (unit tests), small (head_dim 128, 2 KV heads, small window), full (30B).
    #[arg(long, default_value = "tiny")]
    preset: String,
    /// Output path.
    #[arg(short, long)]
    output: PathBuf,
    /// Replace an existing output file.
    #[arg(long)]
    force: bool,
    /// Do not wait for the file to reach the disk (`fsync`) before renaming it into place: for
    /// scratch models on a machine with memory to hold them (the device scripts), where the sync
    /// can take longer than the forge. The file is complete either way; only a crash right after
    /// could lose it.
    #[arg(long)]
    no_sync: bool,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    #[arg(long)]
    layers: Option<usize>,
    #[arg(long)]
    n_embd: Option<usize>,
    #[arg(long)]
    heads: Option<usize>,
    #[arg(long)]
    kv_heads: Option<usize>,
    #[arg(long)]
    head_dim: Option<usize>,
    #[arg(long)]
    n_ff: Option<usize>,
    #[arg(long)]
    vocab: Option<usize>,
    /// Training context length written to the file.
    #[arg(long)]
    ctx: Option<usize>,
    /// Sliding-window size.
    #[arg(long)]
    window: Option<usize>,
    /// Layer pattern, repeated over the layers: S = sliding, F = full (default SSSF).
    #[arg(long)]
    pattern: Option<String>,
    /// Final logit softcap, or `none`.
    #[arg(long)]
    softcap: Option<String>,
    #[arg(long)]
    logit_scale: Option<f32>,
    #[arg(long)]
    rope_base: Option<f32>,
    /// RoPE base for sliding layers (written as rope.freq_base_swa).
    #[arg(long)]
    rope_base_swa: Option<f32>,
    /// Weight types: q4_k_m (default) or one type for all weights (f32, f16, bf16, q8_0, q5_0, q4_k, q5_k, q6_k).
    #[arg(long)]
    mix: Option<String>,
    /// Worker threads (default: all cores). The output does not depend on it.
    #[arg(long)]
    threads: Option<usize>,
}

/// A writer that hashes what passes through it.
struct HashingWriter<W: Write> {
    inner: W,
    hash: Sha256,
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

fn build_config(a: &ForgeArgs) -> anyhow::Result<ForgeConfig> {
    let mut c = ForgeConfig::preset(&a.preset)?;
    let custom = a.layers.is_some()
        || a.n_embd.is_some()
        || a.heads.is_some()
        || a.kv_heads.is_some()
        || a.head_dim.is_some()
        || a.n_ff.is_some()
        || a.vocab.is_some()
        || a.ctx.is_some()
        || a.window.is_some()
        || a.pattern.is_some()
        || a.softcap.is_some()
        || a.logit_scale.is_some()
        || a.rope_base.is_some()
        || a.rope_base_swa.is_some();
    if custom {
        c.preset = format!("{}+custom", a.preset);
    }
    c.seed = a.seed;
    c.n_layer = a.layers.unwrap_or(c.n_layer);
    c.n_embd = a.n_embd.unwrap_or(c.n_embd);
    c.n_head = a.heads.unwrap_or(c.n_head);
    c.n_head_kv = a.kv_heads.unwrap_or(c.n_head_kv);
    c.head_dim = a.head_dim.unwrap_or(c.head_dim);
    c.n_ff = a.n_ff.unwrap_or(c.n_ff);
    c.n_vocab = a.vocab.unwrap_or(c.n_vocab);
    c.n_ctx = a.ctx.unwrap_or(c.n_ctx);
    c.sliding_window = a.window.unwrap_or(c.sliding_window);
    c.swa_pattern = parse_pattern(a.pattern.as_deref().unwrap_or("SSSF"), c.n_layer)?;
    if let Some(s) = &a.softcap {
        c.softcap = if s.eq_ignore_ascii_case("none") {
            None
        } else {
            Some(
                s.parse()
                    .with_context(|| format!("--softcap '{s}' is not a number or 'none'"))?,
            )
        };
    }
    c.logit_scale = a.logit_scale.unwrap_or(c.logit_scale);
    c.rope_freq_base = a.rope_base.unwrap_or(c.rope_freq_base);
    c.rope_freq_base_swa = a.rope_base_swa.or(c.rope_freq_base_swa);
    if let Some(m) = &a.mix {
        c.mix = Mix::parse(m)?;
    }
    c.validate()?;
    Ok(c)
}

pub fn run(a: ForgeArgs) -> anyhow::Result<ExitCode> {
    let cfg = build_config(&a)?;
    if a.output.exists() && !a.force {
        anyhow::bail!("{} exists; pass --force to replace it", a.output.display());
    }
    if let Some(n) = a.threads {
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build_global()
            .context("setting up the thread pool")?;
    }
    let partial = a.output.with_extension("gguf.partial");
    let file = File::create(&partial).with_context(|| format!("creating {}", partial.display()))?;
    let mut out = HashingWriter {
        inner: BufWriter::with_capacity(8 << 20, file),
        hash: Sha256::new(),
    };

    eprintln!(
        "forging {} (seed {}, {} layers, n_embd {}, vocab {}, mix {}, {} parameters) -> {}",
        cfg.preset,
        cfg.seed,
        cfg.n_layer,
        cfg.n_embd,
        cfg.n_vocab,
        cfg.mix.name(),
        cfg.n_params(),
        a.output.display()
    );
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template(
            "{bar:40} {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta} {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let start = Instant::now();
    let result = forge(&cfg, &mut out, &mut |p| {
        bar.set_length(p.bytes_total);
        bar.set_position(p.bytes_done);
        bar.set_message(p.tensor.to_string());
    });
    bar.finish_and_clear();
    let written = match result {
        Ok(n) => n,
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            return Err(e.into());
        }
    };
    out.flush()?;
    let HashingWriter { inner, hash } = out;
    let file = inner.into_inner().map_err(|e| e.into_error())?;
    let generated = start.elapsed().as_secs_f64();
    if !a.no_sync {
        file.sync_all()?;
    }
    drop(file);
    std::fs::rename(&partial, &a.output)
        .with_context(|| format!("renaming {} to {}", partial.display(), a.output.display()))?;
    let secs = start.elapsed().as_secs_f64();
    println!(
        "wrote {} ({} bytes) in {:.1} s ({:.1} s generated and written, {})",
        a.output.display(),
        written,
        secs,
        generated,
        if a.no_sync {
            "not synced".to_string()
        } else {
            format!("{:.1} s to sync", secs - generated)
        }
    );
    println!("sha256 {:x}", hash.finalize());
    Ok(ExitCode::SUCCESS)
}
