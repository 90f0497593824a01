//! The forge's deterministic training corpus for its byte-level BPE tokenizer.
//!
//! Owns: turning the frozen word list (`corpus/words.txt`) into a few hundred kilobytes of
//! varied text — prose with capitals and punctuation, contractions, numbers, dates, code lines,
//! whitespace runs, and non-Latin scripts and emoji — from a fixed PRNG stream.
//!
//! Invariant: the output depends on nothing but the word list and `CORPUS_SEED`; it is the
//! same on every machine and every run, so forged tokenizers are reproducible.

use crate::rng::Rng;

/// The frozen word list (rank order = sampling weight order).
const WORDS: &str = include_str!("../corpus/words.txt");

/// Seed of the corpus stream. Frozen: changing it changes every forged tokenizer.
const CORPUS_SEED: u64 = 0x4D55_5345_5247_4C4D; // "MUSERGLM"

/// Words of the list, comments removed, in rank order.
pub fn words() -> Vec<&'static str> {
    WORDS
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

/// Zipf-like sampler over ranks: weight(rank) = 1 / (rank + 2).
struct Zipf {
    cumulative: Vec<f64>,
}

impl Zipf {
    fn new(n: usize) -> Zipf {
        let mut acc = 0.0;
        let cumulative = (0..n)
            .map(|r| {
                acc += 1.0 / (r as f64 + 2.0);
                acc
            })
            .collect();
        Zipf { cumulative }
    }

    fn sample(&self, rng: &mut Rng) -> usize {
        let total = self.cumulative.last().copied().unwrap_or(0.0);
        let u = rng.uniform() * total;
        self.cumulative
            .partition_point(|&c| c <= u)
            .min(self.cumulative.len().saturating_sub(1))
    }
}

fn capitalize(w: &str) -> String {
    let mut c = w.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

fn sentence(rng: &mut Rng, words: &[&str], zipf: &Zipf, out: &mut String) {
    let n = 4 + rng.below(12) as usize;
    for i in 0..n {
        let w = words[zipf.sample(rng)];
        if i > 0 {
            out.push(' ');
        }
        match rng.below(40) {
            0 => {
                out.push('"');
                out.push_str(w);
                out.push('"');
            }
            1 => {
                out.push('(');
                out.push_str(w);
                out.push(')');
            }
            2 => {
                out.push_str(w);
                out.push_str("'s");
            }
            3 => out.push_str(&w.to_uppercase()),
            4 => {
                out.push_str(w);
                out.push(',');
            }
            5 => out.push_str(&rng.below(2030).to_string()),
            _ if i == 0 => out.push_str(&capitalize(w)),
            _ => out.push_str(w),
        }
    }
    let end = [".", ".", ".", "!", "?", "...", ";", ":"];
    out.push_str(end[rng.below(end.len() as u64) as usize]);
}

fn number_line(rng: &mut Rng, out: &mut String) {
    match rng.below(5) {
        0 => out.push_str(&format!(
            "{}-{:02}-{:02}",
            1900 + rng.below(130),
            1 + rng.below(12),
            1 + rng.below(28)
        )),
        1 => out.push_str(&format!("{}.{}", rng.below(1000), rng.below(100))),
        2 => out.push_str(&format!(
            "{},{:03},{:03}",
            1 + rng.below(999),
            rng.below(1000),
            rng.below(1000)
        )),
        3 => out.push_str(&format!("{}%", rng.below(101))),
        _ => out.push_str(&format!("0x{:08x}", rng.next_u64() as u32)),
    }
}

fn code_line(rng: &mut Rng, words: &[&str], out: &mut String) {
    let name = words[rng.below(words.len().min(200) as u64) as usize];
    match rng.below(6) {
        0 => out.push_str(&format!(
            "fn {name}(x: u32) -> u32 {{\n    x + {}\n}}",
            rng.below(100)
        )),
        1 => out.push_str(&format!(
            "def {name}(self, n):\n    return n * {}",
            rng.below(10)
        )),
        2 => out.push_str(&format!("let mut {name} = vec![0; {}];", rng.below(64))),
        3 => out.push_str(&format!("if ({name} != null) {{ return {name}; }}")),
        4 => out.push_str(&format!("\t{name}[i] = {name}[i - 1] + {name}[i - 2];")),
        _ => out.push_str(&format!("// {name}: {}", words[rng.below(60) as usize])),
    }
}

/// The training corpus: `n_paragraphs` paragraphs of mixed text.
pub fn corpus(n_paragraphs: usize) -> String {
    let words = words();
    let zipf = Zipf::new(words.len());
    let mut rng = Rng::new(CORPUS_SEED);
    let mut out = String::new();
    for _ in 0..n_paragraphs {
        let kind = rng.below(10);
        match kind {
            0 => code_line(&mut rng, &words, &mut out),
            1 => number_line(&mut rng, &mut out),
            _ => {
                let n = 1 + rng.below(5);
                for s in 0..n {
                    if s > 0 {
                        out.push_str(if rng.below(8) == 0 { "  " } else { " " });
                    }
                    sentence(&mut rng, &words, &zipf, &mut out);
                }
            }
        }
        out.push_str(if rng.below(4) == 0 { "\n\n" } else { "\n" });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corpus_is_deterministic_and_varied() {
        let a = corpus(300);
        assert_eq!(a, corpus(300));
        assert!(a.len() > 10_000);
        assert!(a.contains('\n'));
        assert!(!a.is_ascii(), "non-ASCII text present");
        assert!(a.chars().any(|c| c.is_ascii_digit()));
    }

    #[test]
    fn word_list_is_clean() {
        let w = words();
        assert!(w.len() > 400);
        assert!(w.iter().all(|x| !x.contains(char::is_whitespace)));
    }
}
