//! Byte-level BPE training for forged tokenizers (the GPT-2 scheme llama.cpp calls `gpt2`).
//!
//! Owns: the GPT-2 byte↔printable-character map, a simple pre-split of training text into
//! words, and the greedy merge trainer.
//!
//! Vocabulary layout produced here: ids 0..256 are the 256 single bytes in byte order (each
//! spelled as its GPT-2 printable character), then one token per merge that produced a new byte
//! string, in merge order. Every merge's two sides and its result are tokens of the vocabulary.
//!
//! Invariants: training is a pure function of (text, number of merges); ties between equally
//! frequent pairs go to the pair with the smaller (left id, right id), so the result never depends
//! on hash-map iteration order.

use std::collections::{BTreeMap, HashMap};

/// The GPT-2 byte → char map: printable Latin-1 bytes map to themselves, the other 68 bytes
/// map to U+0100.. in byte order.
pub fn byte_to_char() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut next = 256u32;
    for b in 0..=255u8 {
        let printable = matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
        let cp = if printable {
            u32::from(b)
        } else {
            let cp = next;
            next += 1;
            cp
        };
        table[usize::from(b)] = char::from_u32(cp).unwrap_or('\u{FFFD}');
    }
    table
}

/// Spell raw bytes in the GPT-2 printable alphabet.
pub fn spell(bytes: &[u8], table: &[char; 256]) -> String {
    bytes.iter().map(|&b| table[usize::from(b)]).collect()
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Letter,
    Digit,
    Newline,
    Space,
    Other,
}

fn class(c: char) -> Class {
    if c == '\n' || c == '\r' {
        Class::Newline
    } else if c.is_whitespace() {
        Class::Space
    } else if c.is_alphabetic() || c == '\'' {
        Class::Letter
    } else if c.is_numeric() {
        Class::Digit
    } else {
        Class::Other
    }
}

/// Split text into training words, roughly as a GPT-4-style pre-tokenizer would: a letter run
/// with at most one leading space or punctuation char, digit runs of up to three, punctuation
/// runs with an optional leading space, newline runs, and other whitespace runs. Only the
/// trainer uses this; the runtime tokenizer applies the model's own pre-tokenizer.
pub fn pre_split(text: &str) -> Vec<&str> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let start = chars[i].0;
        let c = chars[i].1;
        let mut j = i + 1;
        let next_class = chars.get(i + 1).map(|&(_, c)| class(c));
        match class(c) {
            Class::Letter => {
                while j < chars.len() && class(chars[j].1) == Class::Letter {
                    j += 1;
                }
            }
            Class::Digit => {
                while j < chars.len() && j - i < 3 && class(chars[j].1) == Class::Digit {
                    j += 1;
                }
            }
            Class::Newline => {
                while j < chars.len() && class(chars[j].1) == Class::Newline {
                    j += 1;
                }
            }
            Class::Space | Class::Other if next_class == Some(Class::Letter) => {
                while j < chars.len() && class(chars[j].1) == Class::Letter {
                    j += 1;
                }
            }
            Class::Space => {
                while j < chars.len() && class(chars[j].1) == Class::Space {
                    j += 1;
                }
            }
            Class::Other => {
                while j < chars.len() && class(chars[j].1) == Class::Other {
                    j += 1;
                }
            }
        }
        let end = chars.get(j).map_or(text.len(), |&(p, _)| p);
        out.push(&text[start..end]);
        i = j;
    }
    out
}

/// The result of training.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bpe {
    /// Byte string of every token; `tokens[b] == [b]` for b < 256.
    pub tokens: Vec<Vec<u8>>,
    /// Merges in rank order, as (left token id, right token id).
    pub merges: Vec<(u32, u32)>,
}

/// Train up to `max_merges` merges on `text`, stopping early when no pair occurs twice or when
/// `max_tokens` tokens exist.
pub fn train(text: &str, max_merges: usize, max_tokens: usize) -> Bpe {
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    for w in pre_split(text) {
        *counts.entry(w).or_insert(0) += 1;
    }
    let mut words: Vec<(Vec<u32>, u64)> = counts
        .into_iter()
        .map(|(w, n)| (w.bytes().map(u32::from).collect(), n))
        .collect();

    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    let mut by_bytes: HashMap<Vec<u8>, u32> = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.clone(), i as u32))
        .collect();
    let mut merges = Vec::new();

    while merges.len() < max_merges && tokens.len() < max_tokens {
        let mut pairs: HashMap<(u32, u32), u64> = HashMap::new();
        for (syms, n) in &words {
            for p in syms.windows(2) {
                *pairs.entry((p[0], p[1])).or_insert(0) += n;
            }
        }
        let best = pairs
            .into_iter()
            .filter(|&(_, n)| n >= 2)
            .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)));
        let Some(((l, r), _)) = best else { break };
        let mut merged = tokens[l as usize].clone();
        merged.extend_from_slice(&tokens[r as usize]);
        let id = match by_bytes.get(&merged) {
            Some(&id) => id,
            None => {
                let id = tokens.len() as u32;
                by_bytes.insert(merged.clone(), id);
                tokens.push(merged);
                id
            }
        };
        merges.push((l, r));
        for (syms, _) in &mut words {
            let mut k = 0;
            while k + 1 < syms.len() {
                if syms[k] == l && syms[k + 1] == r {
                    syms[k] = id;
                    syms.remove(k + 1);
                }
                k += 1;
            }
        }
    }
    Bpe { tokens, merges }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_map_is_a_bijection_onto_printable_chars() {
        let t = byte_to_char();
        let mut seen: Vec<char> = t.to_vec();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 256);
        assert_eq!(t[usize::from(b'A')], 'A');
        assert_eq!(t[usize::from(b' ')], 'Ġ');
        assert_eq!(t[usize::from(b'\n')], 'Ċ');
        assert!(t.iter().all(|c| !c.is_whitespace() && !c.is_control()));
    }

    #[test]
    fn pre_split_keeps_every_byte() {
        let s = "Hello, world!  It's 2026-11-30.\n\nfn x() {}\tcafé 🙂";
        let parts = pre_split(s);
        assert_eq!(parts.concat(), s);
        assert!(parts.contains(&" world"));
        assert!(parts.contains(&"202"));
    }

    #[test]
    fn training_is_deterministic_and_consistent() {
        let text = "the cat the hat the bat that then there the the the\n".repeat(20);
        let a = train(&text, 50, 1000);
        assert_eq!(a, train(&text, 50, 1000));
        assert!(!a.merges.is_empty());
        for &(l, r) in &a.merges {
            let mut m = a.tokens[l as usize].clone();
            m.extend_from_slice(&a.tokens[r as usize]);
            assert!(a.tokens.contains(&m), "merge result is a token");
        }
        assert!(a.tokens.iter().any(|t| t == b" the"));
    }

    #[test]
    fn training_respects_limits() {
        let text = "abcdefgh ".repeat(50);
        assert!(train(&text, 3, 1000).merges.len() <= 3);
        assert!(train(&text, 100, 258).tokens.len() <= 258);
    }
}
