//! Encode many strings at once: reads a file of JSON strings (one per line) and prints one
//! JSON array of token ids per line. Used for differential runs against llama-tokenize.
//!
//! ```text
//! cargo run --release -p muser-tokenizer --example encode_lines -- MODEL.gguf LINES.jsonl \
//!     [--bos] [--no-parse-special]
//! ```

use std::io::Write;

use muser_gguf::Gguf;
use muser_tokenizer::Tokenizer;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (model, lines) = match args.as_slice() {
        [m, l, ..] => (m, l),
        _ => {
            return Err(
                "usage: encode_lines MODEL.gguf LINES.jsonl [--bos] [--no-parse-special]".into(),
            )
        }
    };
    let add_special = args.iter().any(|a| a == "--bos");
    let parse_special = !args.iter().any(|a| a == "--no-parse-special");
    let g = Gguf::open(model.as_ref())?;
    let tok = Tokenizer::from_gguf(&g)?;
    let text = std::fs::read_to_string(lines)?;
    let mut out = std::io::stdout().lock();
    for line in text.split('\n').filter(|l| !l.is_empty()) {
        let s: String = serde_json::from_str(line)?;
        let ids: Vec<String> = tok
            .encode(&s, add_special, parse_special)
            .iter()
            .map(u32::to_string)
            .collect();
        if writeln!(out, "[{}]", ids.join(", ")).is_err() {
            break;
        }
    }
    Ok(())
}
