//! `muser tokenize`: a prompt's token ids (and pieces), as the model's tokenizer makes them —
//! the same ids llama.cpp's `llama-tokenize` prints (see crates/muser-tokenizer tests).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use muser_gguf::Gguf;
use muser_tokenizer::Tokenizer;

#[derive(Args)]
pub struct TokenizeArgs {
    /// GGUF model (default: the default model).
    #[arg(short, long)]
    model: Option<PathBuf>,
    /// Text to tokenize.
    #[arg(short, long)]
    prompt: String,
    /// Do not add BOS/EOS even if the model asks for them.
    #[arg(long)]
    no_special: bool,
    /// Treat special-token text (e.g. `<|eot|>`) as plain text.
    #[arg(long)]
    no_parse_special: bool,
    /// Print a JSON array of ids only.
    #[arg(long)]
    ids: bool,
}

pub fn run(a: TokenizeArgs) -> anyhow::Result<ExitCode> {
    let path = match &a.model {
        Some(p) => p.clone(),
        None => crate::paths::default_model()?,
    };
    let g = Gguf::open(&path).with_context(|| format!("opening {}", path.display()))?;
    let tok = Tokenizer::from_gguf(&g).with_context(|| format!("{}: tokenizer", path.display()))?;
    let ids = tok.encode(&a.prompt, !a.no_special, !a.no_parse_special);
    if a.ids {
        crate::output::write_stdout(&(serde_json::to_string(&ids)? + "\n"))?;
    } else {
        let mut s = String::new();
        for id in &ids {
            let piece = String::from_utf8_lossy(&tok.token_to_piece(*id, true)).into_owned();
            s.push_str(&format!("{id:>8} -> {piece:?}\n"));
        }
        crate::output::write_stdout(&s)?;
    }
    Ok(ExitCode::SUCCESS)
}
