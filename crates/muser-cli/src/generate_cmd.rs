//! `muser generate`: tokenize a prompt (optionally through the chat template), prefill it,
//! then sample and stream tokens until `-n` tokens or an end-of-generation token.
//!
//! Prints text to stdout as it is generated (never broken UTF-8), and load time, prompt tok/s
//! and decode tok/s to stderr; `--json` prints one JSON document instead, with every generated
//! token's id, text and log-probability.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use muser_engine::cpu::Logits;
use muser_engine::metrics::log_softmax_at;
use muser_engine::sampling::{Sampler, SamplerConfig};
use muser_engine::{Arch, Model};
use muser_tokenizer::{ChatMessage, ChatTemplate, StreamDecoder, Tokenizer, CHATML_TEMPLATE};
use serde_json::json;

use crate::engine_opts::EngineOpts;

/// A Gemma-style template for GGUFs that carry none (the real gemma-3-270m file has none).
const GEMMA_TEMPLATE: &str = "{{- bos_token -}}\n\
{%- for m in messages -%}\n\
{{- '<start_of_turn>' + ('model' if m.role == 'assistant' else m.role) + '\\n' + (m.content | trim) + '<end_of_turn>\\n' -}}\n\
{%- endfor -%}\n\
{%- if add_generation_prompt -%}\n\
{{- '<start_of_turn>model\\n' -}}\n\
{%- endif -%}";

#[derive(Args)]
pub struct GenerateArgs {
    /// GGUF model (default: the default model).
    #[arg(short, long)]
    model: Option<PathBuf>,
    /// The prompt.
    #[arg(short, long)]
    prompt: String,
    /// Tokens to generate at most.
    #[arg(short = 'n', long, default_value_t = 128)]
    n_predict: usize,
    /// Temperature (0 = greedy).
    #[arg(long, default_value_t = 0.8)]
    temp: f32,
    #[arg(long, default_value_t = 40)]
    top_k: usize,
    #[arg(long, default_value_t = 0.95)]
    top_p: f32,
    #[arg(long, default_value_t = 0.05)]
    min_p: f32,
    #[arg(long, default_value_t = 1.0)]
    repeat_penalty: f32,
    #[arg(long, default_value_t = 64)]
    repeat_last_n: usize,
    /// Sampling seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Treat the prompt as a user message and apply the chat template.
    #[arg(long)]
    chat: bool,
    /// Chat template when the GGUF has none: `chatml`, `gemma`, or a file with a Jinja template.
    #[arg(long)]
    chat_template: Option<String>,
    /// Print one JSON document (token ids, texts, logprobs, timings) instead of streaming text.
    #[arg(long)]
    json: bool,
    /// Print the route identity and tokenization details to stderr.
    #[arg(short, long)]
    verbose: bool,
    #[command(flatten)]
    engine: EngineOpts,
}

fn chat_template(a: &GenerateArgs, model: &Model, tok: &Tokenizer) -> anyhow::Result<ChatTemplate> {
    let named = |name: &str| -> anyhow::Result<ChatTemplate> {
        let src = match name {
            "chatml" => CHATML_TEMPLATE.to_string(),
            "gemma" => GEMMA_TEMPLATE.to_string(),
            path => std::fs::read_to_string(path).with_context(|| {
                format!("--chat-template '{path}': not chatml, gemma, or a readable file")
            })?,
        };
        Ok(ChatTemplate::new(&src, tok)?)
    };
    if let Some(name) = &a.chat_template {
        return named(name);
    }
    if let Some(t) = ChatTemplate::from_gguf(model.gguf(), tok)? {
        return Ok(t);
    }
    match model.config.arch {
        Arch::Gemma3 => {
            eprintln!("chat template: the GGUF has none; using Muser's built-in gemma template");
            named("gemma")
        }
        Arch::MuseGlimmer => anyhow::bail!(
            "--chat: the GGUF has no tokenizer.chat_template; pass --chat-template chatml|gemma|FILE"
        ),
    }
}

pub fn run(a: GenerateArgs) -> anyhow::Result<ExitCode> {
    let path = match &a.model {
        Some(p) => p.clone(),
        None => crate::paths::default_model()?,
    };
    let t0 = Instant::now();
    let model = Model::load(&path).with_context(|| format!("loading {}", path.display()))?;
    let tok = Tokenizer::from_gguf(model.gguf())
        .with_context(|| format!("{}: tokenizer", path.display()))?;

    anyhow::ensure!(!a.prompt.is_empty(), "the prompt is empty");
    let text = if a.chat {
        chat_template(&a, &model, &tok)?
            .render(&[ChatMessage::new("user", a.prompt.clone())], true)?
    } else {
        a.prompt.clone()
    };
    let prompt = tok.encode(&text, true, true);
    anyhow::ensure!(!prompt.is_empty(), "the prompt tokenized to nothing");
    let n_ctx_train = model.config.n_ctx_train;
    let needed = prompt.len() + a.n_predict;
    let n_ctx = a
        .engine
        .ctx
        .unwrap_or(needed.min(n_ctx_train.max(prompt.len())));
    anyhow::ensure!(
        prompt.len() <= n_ctx,
        "the prompt is {} tokens but the context holds {n_ctx} (model trained on {n_ctx_train}); use a shorter prompt or a larger --ctx",
        prompt.len()
    );
    let mut session = a.engine.open_session(&model, n_ctx)?;
    // Load time: from opening the file until the session is ready (the CPU route's weight
    // repacking, the CUDA route's upload and kernel compilation included).
    let load_s = t0.elapsed().as_secs_f64();
    let route = session.route_identity();
    if a.verbose {
        eprintln!(
            "route {route}, threads {}, ctx {n_ctx}, prompt {} tokens: {prompt:?}",
            a.engine.threads(),
            prompt.len()
        );
        for m in session.module_fingerprints() {
            eprintln!("  kernel module {m}");
        }
    }
    let mut sampler = Sampler::new(SamplerConfig {
        temp: a.temp,
        top_k: a.top_k,
        top_p: a.top_p,
        min_p: a.min_p,
        repeat_penalty: a.repeat_penalty,
        repeat_last_n: a.repeat_last_n,
        seed: a.seed,
    });
    prompt.iter().for_each(|&t| sampler.accept(t));

    // The rows are borrowed from the session (no copy): each token is sampled before the next
    // eval.
    // The token's log-probability only where it is printed (--json): it reads the whole row.
    let json_out = a.json;
    let pick = |l: &[f32], sampler: &mut Sampler| {
        let id = sampler.sample(l);
        (id, json_out.then(|| log_softmax_at(l, id as usize)))
    };
    let mut out = std::io::stdout().lock();
    let mut stream = StreamDecoder::new(&tok);
    let mut generated = Vec::new();
    let t1 = Instant::now();
    let first = session.eval_ref(&prompt, Logits::Last)?;
    let prompt_s = t1.elapsed().as_secs_f64();
    // Decode time counts every sampling, the first one (from the prompt's row) included.
    let t2 = Instant::now();
    let mut next = pick(&first, &mut sampler);
    drop(first);
    let mut stop = "length";
    for _ in 0..a.n_predict {
        let (id, logprob) = next;
        if tok.is_eog(id) {
            generated.push((id, String::new(), logprob));
            stop = "eog";
            break;
        }
        let piece = stream.push(id);
        if !a.json {
            out.write_all(piece.as_bytes())?;
            out.flush()?;
        }
        generated.push((
            id,
            String::from_utf8_lossy(&tok.token_to_piece(id, false)).into_owned(),
            logprob,
        ));
        if session.n_past() >= n_ctx {
            stop = "context";
            break;
        }
        next = pick(&session.eval_ref(&[id], Logits::Last)?, &mut sampler);
    }
    let tail = stream.finish();
    let decode_s = t2.elapsed().as_secs_f64();
    let n_decoded = generated.len();
    let prompt_tps = prompt.len() as f64 / prompt_s.max(1e-9);
    let decode_tps = n_decoded as f64 / decode_s.max(1e-9);
    if a.json {
        let doc = json!({
            "model": path.display().to_string(),
            "route": route,
            "prompt_tokens": prompt,
            "tokens": generated.iter().map(|(id, t, lp)| json!({"id": id, "text": t, "logprob": lp})).collect::<Vec<_>>(),
            "text": tok.decode(&generated.iter().map(|g| g.0).filter(|&i| !tok.is_eog(i)).collect::<Vec<_>>(), false),
            "stop": stop,
            "timings": {"load_s": load_s, "prompt_s": prompt_s, "prompt_tok_per_s": prompt_tps, "decode_s": decode_s, "decode_tok_per_s": decode_tps},
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
    } else {
        out.write_all(tail.as_bytes())?;
        writeln!(out)?;
        eprintln!(
            "\nload {load_s:.2} s | prompt {} tokens, {prompt_tps:.1} tok/s | decode {n_decoded} tokens, {decode_tps:.1} tok/s | stop: {stop}",
            prompt.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}
