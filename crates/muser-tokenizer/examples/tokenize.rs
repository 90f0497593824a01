//! Tokenize text with a GGUF's tokenizer, like `llama-tokenize --ids`, and optionally time it.
//!
//! ```text
//! cargo run --release -p muser-tokenizer --example tokenize -- MODEL.gguf [options] [TEXT]
//!   --file PATH        read the text from a file (exact bytes, no escapes)
//!   --no-bos           encode with add_special = false
//!   --no-parse-special encode with parse_special = false
//!   --pieces           print one `id -> 'piece'` line per token instead of the id list
//!   --bench N          encode the text N times and print load/encode timings to stderr
//! ```

use std::io::Write;
use std::time::Instant;

use muser_gguf::Gguf;
use muser_tokenizer::Tokenizer;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let model = args
        .next()
        .ok_or("usage: tokenize MODEL.gguf [options] [TEXT]")?;
    let (mut text, mut add_special, mut parse_special, mut pieces, mut bench) =
        (String::new(), true, true, false, 0usize);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--file" => text = std::fs::read_to_string(args.next().ok_or("--file PATH")?)?,
            "--no-bos" => add_special = false,
            "--no-parse-special" => parse_special = false,
            "--pieces" => pieces = true,
            "--bench" => bench = args.next().ok_or("--bench N")?.parse()?,
            _ => text = a,
        }
    }
    let t0 = Instant::now();
    let g = Gguf::open(model.as_ref())?;
    let t1 = Instant::now();
    let tok = Tokenizer::from_gguf(&g)?;
    let t2 = Instant::now();
    let ids = tok.encode(&text, add_special, parse_special);
    if bench > 0 {
        let start = Instant::now();
        for _ in 0..bench {
            std::hint::black_box(tok.encode(&text, add_special, parse_special));
        }
        let per = start.elapsed().as_secs_f64() / bench as f64;
        eprintln!(
            "open {:.1} ms, tokenizer load {:.1} ms, encode {} bytes -> {} tokens: {:.3} ms \
             ({:.1} MB/s)",
            (t1 - t0).as_secs_f64() * 1e3,
            (t2 - t1).as_secs_f64() * 1e3,
            text.len(),
            ids.len(),
            per * 1e3,
            text.len() as f64 / per / 1e6
        );
    }
    let mut out = std::io::stdout().lock();
    // A closed pipe (e.g. `| head`) just ends the output.
    if pieces {
        for &id in &ids {
            let p = tok.token_to_piece(id, true);
            if writeln!(out, "{id:6} -> '{}'", String::from_utf8_lossy(&p)).is_err() {
                break;
            }
        }
    } else {
        let list: Vec<String> = ids.iter().map(u32::to_string).collect();
        let _ = writeln!(out, "[{}]", list.join(", "));
    }
    Ok(())
}
