//! Streaming a forged model to any `Write`: header first, then each tensor in batches of rows
//! generated and quantized in parallel, written in order.
//!
//! Owns: the forge's I/O loop. Invariants: bytes depend only on the config (rows are generated
//! independently and concatenated in row order); memory is bounded by three batches of
//! `BATCH_BYTES` (one being generated, one queued, one being written: the writes run on their
//! own thread so the disk and the generation overlap; the generation stays on the caller's
//! thread, inside whatever rayon pool it runs in).

use std::io::Write;
use std::sync::mpsc::sync_channel;

use rayon::prelude::*;

use crate::config::ForgeConfig;
use crate::tensors::{generate_row, plan};
use crate::{metadata, vocab, ForgeError};
use muser_gguf::GgufBuilder;

/// Upper bound on the bytes of one batch of quantized rows held in memory.
pub const BATCH_BYTES: usize = 64 << 20;

/// Progress report passed to the caller's callback after each batch.
#[derive(Clone, Debug)]
pub struct ForgeProgress<'a> {
    /// Tensor being written.
    pub tensor: &'a str,
    /// Tensor-data bytes generated so far (handed to the writer) / in total.
    pub bytes_done: u64,
    pub bytes_total: u64,
}

/// Forge the model described by `cfg` into `out`. Returns the total number of bytes written.
pub fn forge<W: Write + Send>(
    cfg: &ForgeConfig,
    out: W,
    progress: &mut dyn FnMut(ForgeProgress<'_>),
) -> Result<u64, ForgeError> {
    cfg.validate()?;
    let vocab = vocab::build(cfg.n_vocab)?;
    let tensors = plan(cfg);

    let mut builder = GgufBuilder::new();
    metadata::add_metadata(&mut builder, cfg, &vocab)?;
    for t in &tensors {
        builder.tensor(t.name.clone(), &t.shape, t.ty)?;
    }
    let bytes_total: u64 = builder.tensor_infos().iter().map(|t| t.n_bytes).sum();
    let mut w = builder.write_header(out)?;

    std::thread::scope(|scope| {
        // One batch queued while the writer writes the one before.
        let (tx, rx) = sync_channel::<Vec<u8>>(1);
        let writer = scope.spawn(move || -> Result<u64, ForgeError> {
            for batch in rx {
                w.write_part(&batch)?;
            }
            let total = w.bytes_written();
            w.finish()?;
            Ok(total)
        });
        let generated = (|| -> Result<(), ForgeError> {
            let mut bytes_done = 0u64;
            for t in &tensors {
                let row_bytes = t.row_bytes();
                let rows_per_batch = (BATCH_BYTES / row_bytes.max(1)).max(1);
                let mut row = 0;
                while row < t.n_rows() {
                    let n = rows_per_batch.min(t.n_rows() - row);
                    let mut batch = vec![0u8; n * row_bytes];
                    batch
                        .par_chunks_mut(row_bytes)
                        .enumerate()
                        .try_for_each_init(
                            || vec![0f32; t.row_len()],
                            |scratch, (i, dst)| {
                                generate_row(cfg.seed, t, row + i, scratch);
                                muser_quant::quantize(t.ty, scratch, dst).map_err(|source| {
                                    ForgeError::Quant {
                                        tensor: t.name.clone(),
                                        source,
                                    }
                                })
                            },
                        )?;
                    bytes_done += batch.len() as u64;
                    if tx.send(batch).is_err() {
                        return Ok(()); // the writer stopped: its error is returned below
                    }
                    row += n;
                    progress(ForgeProgress {
                        tensor: &t.name,
                        bytes_done,
                        bytes_total,
                    });
                }
            }
            Ok(())
        })();
        drop(tx);
        let written = writer
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        generated?;
        written
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use muser_gguf::Gguf;

    fn forge_tiny(seed: u64) -> Vec<u8> {
        let mut cfg = ForgeConfig::preset("tiny").expect("tiny");
        cfg.seed = seed;
        let mut out = Vec::new();
        forge(&cfg, &mut out, &mut |_| {}).expect("forge");
        out
    }

    #[test]
    fn same_seed_same_bytes_any_thread_count() {
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .expect("pool")
            .install(|| forge_tiny(3));
        let three = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .expect("pool")
            .install(|| forge_tiny(3));
        assert_eq!(one, three);
        assert_ne!(one, forge_tiny(4), "the seed changes the weights");
    }

    #[test]
    fn forged_file_reads_back_with_the_planned_tensors() {
        let bytes = forge_tiny(0);
        let g = Gguf::from_bytes(bytes).expect("valid GGUF");
        let cfg = ForgeConfig::preset("tiny").expect("tiny");
        let plan = plan(&cfg);
        assert_eq!(g.tensors().len(), plan.len());
        for (t, p) in g.tensors().iter().zip(&plan) {
            assert_eq!(t.name, p.name);
            assert_eq!(t.shape, p.shape);
            assert_eq!(t.ty, p.ty);
        }
        assert_eq!(g.architecture(), Some("muse-glimmer"));
        let tokens = g
            .get(muser_gguf::keys::tokenizer::TOKENS)
            .and_then(|v| v.as_array())
            .expect("tokens");
        assert_eq!(tokens.len(), cfg.n_vocab);
    }

    #[test]
    fn weights_have_the_planned_magnitude() {
        let g = Gguf::from_bytes(forge_tiny(0)).expect("valid GGUF");
        let cfg = ForgeConfig::preset("tiny").expect("tiny");
        for p in plan(&cfg) {
            let t = g.tensor(&p.name).expect("tensor");
            let mut x = vec![0f32; t.n_elements as usize];
            muser_quant::dequantize(t.ty, g.tensor_data(t), &mut x).expect("dequantize");
            let n = x.len() as f64;
            let mean = x.iter().map(|&v| f64::from(v)).sum::<f64>() / n;
            let rms = (x.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>() / n).sqrt();
            match p.init {
                crate::tensors::Init::Normal { std } => {
                    assert!(mean.abs() < 0.1 * std, "{}: mean {mean}", p.name);
                    assert!(
                        (rms / std - 1.0).abs() < 0.1,
                        "{}: rms {rms} vs {std}",
                        p.name
                    );
                }
                crate::tensors::Init::Around { mean: m, .. } => {
                    assert!(
                        (mean / m - 1.0).abs() < 0.05,
                        "{}: mean {mean} vs {m}",
                        p.name
                    );
                }
                crate::tensors::Init::Ones => assert!(x.iter().all(|&v| v == 1.0)),
            }
        }
    }
}
