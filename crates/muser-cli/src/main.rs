//! `muser`: the command-line front of the Muser inference engine.
//!
//! Subcommands: `inspect` (what a GGUF holds and whether Muser can run it) and `forge`
//! (deterministic synthetic Muse Glimmer models). Each lives in its own module.

use clap::{Parser, Subcommand};

mod bench_cmd;
mod engine_opts;
mod eval_cmd;
mod forge_cmd;
mod generate_cmd;
mod inspect;
mod inspect_text;
mod output;
mod parity_cmd;
mod paths;
mod tokenize_cmd;

#[derive(Parser)]
#[command(
    name = "muser",
    version = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("MUSER_GIT_COMMIT"), ")"),
    about = "Muser: an inference engine for Muse Glimmer (GGUF, k-quants)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show a GGUF file's architecture, hyperparameters, tokenizer, tensors and validation verdict.
    Inspect(inspect::InspectArgs),
    /// Generate a deterministic synthetic Muse Glimmer GGUF.
    Forge(Box<forge_cmd::ForgeArgs>),
    /// Evaluate token ids teacher-forced and dump every position's logits (f32 LE).
    Eval(eval_cmd::EvalArgs),
    /// Generate text from a prompt.
    Generate(Box<generate_cmd::GenerateArgs>),
    /// Show a text's token ids.
    Tokenize(tokenize_cmd::TokenizeArgs),
    /// Time prompt processing and generation (llama-bench style).
    Bench(bench_cmd::BenchArgs),
    /// Compare logit dumps with the oracle's (accuracy metrics of the contract).
    Parity(parity_cmd::ParityArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Inspect(a) => inspect::run(a),
        Command::Forge(a) => forge_cmd::run(*a),
        Command::Eval(a) => eval_cmd::run(a),
        Command::Generate(a) => generate_cmd::run(*a),
        Command::Parity(a) => parity_cmd::run(a),
        Command::Bench(a) => bench_cmd::run(a),
        Command::Tokenize(a) => tokenize_cmd::run(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}
