//! The forged tokenizer: a real byte-level BPE vocabulary (llama.cpp model `gpt2`, pre-tokenizer
//! `llama4`) padded with control tokens to the requested vocabulary size.
//!
//! Owns: the vocabulary layout and the special-token table of forged models.
//!
//! Layout for a vocabulary of `n` tokens:
//! ```text
//! [0, 256)                 the 256 bytes (GPT-2 printable spelling), type NORMAL
//! [256, 256 + merges)      one token per new merge result, type NORMAL
//! [.., special_base)       <|reserved_special_token_K|>, type CONTROL (padding)
//! [special_base, n)        the special region: <|begin_of_text|>, <|end_of_text|>, ..., <|eot|>,
//!                          then more reserved tokens; type CONTROL
//! ```
//! `special_base = n - 2048` when `n >= 16384` (so the full preset's 202048 tokens put
//! `<|end_of_text|>` at 200001 and `<|eot|>` at 200008, as the real model's end-of-generation
//! ids), else `n - 16`.
//!
//! Invariant: the vocabulary depends only on `n`; token strings are unique.

use crate::{bpe, corpus, ForgeError};

/// llama.cpp token types (`llama_token_type`).
pub const TOKEN_TYPE_NORMAL: i32 = 1;
/// Control token type.
pub const TOKEN_TYPE_CONTROL: i32 = 3;

/// Names of the special region, by offset from `special_base`.
pub const SPECIALS: [&str; 13] = [
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|header_start|>",
    "<|header_end|>",
    "<|eom|>",
    "<|eot|>",
    "<|step|>",
    "<|python_start|>",
    "<|python_end|>",
    "<|finetune_right_pad|>",
];

/// Offsets into the special region.
pub const BOS_OFFSET: u32 = 0;
/// `<|end_of_text|>`.
pub const EOS_OFFSET: u32 = 1;
/// `<|eom|>`.
pub const EOM_OFFSET: u32 = 7;
/// `<|eot|>`.
pub const EOT_OFFSET: u32 = 8;

/// Smallest vocabulary the forge accepts.
pub const MIN_VOCAB: usize = 512;

/// Paragraphs of training corpus (frozen).
const CORPUS_PARAGRAPHS: usize = 6000;

/// A Llama-4-style chat template (llama.cpp recognises it by `<|header_start|>`).
pub const CHAT_TEMPLATE: &str = "{{- bos_token -}}\n\
{%- for message in messages -%}\n\
{{- '<|header_start|>' + message['role'] + '<|header_end|>\\n\\n' -}}\n\
{{- message['content'] | trim -}}\n\
{{- '<|eot|>' -}}\n\
{%- endfor -%}\n\
{%- if add_generation_prompt -%}\n\
{{- '<|header_start|>assistant<|header_end|>\\n\\n' -}}\n\
{%- endif -%}\n";

/// A complete forged vocabulary, ready for the GGUF `tokenizer.*` keys.
#[derive(Clone, Debug)]
pub struct ForgedVocab {
    /// Token strings (bytes in GPT-2 printable spelling), one per id.
    pub tokens: Vec<String>,
    /// llama.cpp token type per id.
    pub token_types: Vec<i32>,
    /// Merges in rank order, `"left right"`.
    pub merges: Vec<String>,
    /// First id of the special region.
    pub special_base: u32,
    /// Number of BPE (byte + merge) tokens.
    pub n_bpe: usize,
}

impl ForgedVocab {
    /// `<|begin_of_text|>`.
    pub fn bos(&self) -> u32 {
        self.special_base + BOS_OFFSET
    }
    /// `<|end_of_text|>`.
    pub fn eos(&self) -> u32 {
        self.special_base + EOS_OFFSET
    }
    /// `<|eot|>`.
    pub fn eot(&self) -> u32 {
        self.special_base + EOT_OFFSET
    }
    /// `<|eom|>`.
    pub fn eom(&self) -> u32 {
        self.special_base + EOM_OFFSET
    }
}

/// Size of the special region for a vocabulary of `n` tokens.
pub fn special_region(n: usize) -> usize {
    if n >= 16384 {
        2048
    } else {
        16
    }
}

/// Build the vocabulary of `n` tokens.
pub fn build(n: usize) -> Result<ForgedVocab, ForgeError> {
    if n < MIN_VOCAB || n > u32::MAX as usize / 2 {
        return Err(ForgeError::Config(format!(
            "vocab size {n} out of range: need {MIN_VOCAB} ..= {}",
            u32::MAX / 2
        )));
    }
    let special_base = n - special_region(n);
    // Leave at least a few padding tokens so every forged vocabulary has the same shape.
    let bpe_budget = special_base.saturating_sub(8).max(256);
    let text = corpus::corpus(CORPUS_PARAGRAPHS);
    let trained = bpe::train(&text, bpe_budget - 256, bpe_budget);
    let table = bpe::byte_to_char();

    let mut tokens: Vec<String> = trained
        .tokens
        .iter()
        .map(|t| bpe::spell(t, &table))
        .collect();
    let n_bpe = tokens.len();
    let mut token_types = vec![TOKEN_TYPE_NORMAL; n_bpe];
    let merges = trained
        .merges
        .iter()
        .map(|&(l, r)| format!("{} {}", tokens[l as usize], tokens[r as usize]))
        .collect();

    let mut reserved = 0usize;
    let mut push_reserved = |tokens: &mut Vec<String>, types: &mut Vec<i32>| {
        tokens.push(format!("<|reserved_special_token_{reserved}|>"));
        types.push(TOKEN_TYPE_CONTROL);
        reserved += 1;
    };
    while tokens.len() < special_base {
        push_reserved(&mut tokens, &mut token_types);
    }
    for s in SPECIALS {
        if tokens.len() < n {
            tokens.push(s.to_string());
            token_types.push(TOKEN_TYPE_CONTROL);
        }
    }
    while tokens.len() < n {
        push_reserved(&mut tokens, &mut token_types);
    }
    Ok(ForgedVocab {
        tokens,
        token_types,
        merges,
        special_base: special_base as u32,
        n_bpe,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn layout_and_uniqueness() {
        let v = build(2048).expect("vocab");
        assert_eq!(v.tokens.len(), 2048);
        assert_eq!(v.token_types.len(), 2048);
        assert_eq!(v.special_base, 2032);
        assert_eq!(v.tokens[v.eos() as usize], "<|end_of_text|>");
        assert_eq!(v.tokens[v.eot() as usize], "<|eot|>");
        assert!(v.n_bpe > 1000, "corpus supports a real BPE: {}", v.n_bpe);
        let set: HashSet<&String> = v.tokens.iter().collect();
        assert_eq!(set.len(), v.tokens.len(), "token strings are unique");
        assert!(
            v.merges.len() >= v.n_bpe - 256,
            "every new token came from a merge"
        );
    }

    #[test]
    fn merges_reference_tokens() {
        let v = build(1024).expect("vocab");
        let ids: HashSet<&str> = v.tokens.iter().map(String::as_str).collect();
        for m in &v.merges {
            let (l, r) = m.split_once(' ').expect("two sides");
            assert!(ids.contains(l) && ids.contains(r));
            assert!(ids.contains(format!("{l}{r}").as_str()));
        }
    }

    #[test]
    fn big_vocab_puts_end_tokens_where_the_real_model_has_them() {
        assert_eq!(202048 - special_region(202048), 200000);
    }

    #[test]
    fn rejects_tiny_vocab() {
        assert!(build(100).is_err());
    }
}
