//! The vocabulary as llama.cpp's `llama_vocab::impl::load` leaves it: token texts, scores,
//! attributes, special token ids, the add-BOS/EOS and space-prefix flags, and the
//! end-of-generation set.
//!
//! Owns: reading the `tokenizer.ggml.*` keys and every post-processing rule llama.cpp applies
//! to them (model defaults for special ids, out-of-range ids dropped, EOT/EOM/FIM detection by
//! token text, "unused" control tokens, the EOG list by token text, the gpt-oss and
//! `<|end|>`/`</s>` special cases). Invariants: `texts.len() == attrs.len() == scores.len()`
//! and fits in `u32`; token texts are unique and non-empty (an empty text becomes
//! `[EMPTY_<id>]`, as in llama.cpp); every stored special id is `< n_vocab`.

use std::collections::BTreeSet;

use muser_gguf::{tokenizer as key, Array, Gguf};

use crate::error::TokenizerError;
use crate::fxhash::FxMap;
use crate::pretok::PreTokenizer;

/// llama.cpp token attributes (`llama_token_attr`), as bits.
pub(crate) mod attr {
    pub const UNKNOWN: u16 = 1 << 0;
    pub const UNUSED: u16 = 1 << 1;
    pub const NORMAL: u16 = 1 << 2;
    pub const CONTROL: u16 = 1 << 3;
    pub const USER_DEFINED: u16 = 1 << 4;
    pub const BYTE: u16 = 1 << 5;
}

/// Which tokenizer algorithm the vocabulary uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelKind {
    /// `tokenizer.ggml.model = "llama"`: SentencePiece-style, score-driven merges with byte
    /// fallback (llama.cpp `LLAMA_VOCAB_TYPE_SPM`).
    Spm,
    /// `tokenizer.ggml.model = "gpt2"`: byte-level BPE with ranked merges and a
    /// pre-tokenizer (llama.cpp `LLAMA_VOCAB_TYPE_BPE`).
    Bpe(PreTokenizer),
}

/// Special token ids (each `None` when the model has none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpecialIds {
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub eot: Option<u32>,
    pub eom: Option<u32>,
    pub unk: Option<u32>,
    pub sep: Option<u32>,
    pub pad: Option<u32>,
    pub mask: Option<u32>,
    pub fim_pre: Option<u32>,
    pub fim_suf: Option<u32>,
    pub fim_mid: Option<u32>,
    pub fim_pad: Option<u32>,
    pub fim_rep: Option<u32>,
    pub fim_sep: Option<u32>,
}

/// The loaded vocabulary.
pub(crate) struct Vocab {
    pub kind: ModelKind,
    pub texts: Vec<String>,
    pub scores: Vec<f32>,
    pub attrs: Vec<u16>,
    pub to_id: FxMap<String, u32>,
    pub ids: SpecialIds,
    pub add_bos: bool,
    pub add_eos: bool,
    pub add_space_prefix: bool,
    pub eog: BTreeSet<u32>,
}

fn bad(key: &'static str, reason: impl Into<String>) -> TokenizerError {
    TokenizerError::BadKey {
        key,
        reason: reason.into(),
    }
}

/// Token texts llama.cpp takes as end-of-turn when `eot_token_id` is absent.
const EOT_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
];
const EOM_TEXTS: &[&str] = &["<|eom_id|>"];
const FIM_PRE_TEXTS: &[&str] = &[
    "<|fim_prefix|>",
    "<fim-prefix>",
    "<fim_prefix>",
    "<｜fim▁begin｜>",
    "<PRE>",
    "▁<PRE>",
    "<|code_prefix|>",
    "<|prefix|>",
];
const FIM_SUF_TEXTS: &[&str] = &[
    "<|fim_suffix|>",
    "<fim-suffix>",
    "<fim_suffix>",
    "<｜fim▁hole｜>",
    "<SUF>",
    "▁<SUF>",
    "<|code_suffix|>",
    "<|suffix|>",
];
const FIM_MID_TEXTS: &[&str] = &[
    "<|fim_middle|>",
    "<fim-middle>",
    "<fim_middle>",
    "<｜fim▁end｜>",
    "<MID>",
    "▁<MID>",
    "<|code_middle|>",
    "<|middle|>",
];
const FIM_PAD_TEXTS: &[&str] = &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"];
const FIM_REP_TEXTS: &[&str] = &[
    "<|fim_repo|>",
    "<|repo_name|>",
    "<fim-repo>",
    "<REPO>",
    "<reponame>",
];
const FIM_SEP_TEXTS: &[&str] = &["<|file_sep|>"];
/// Token texts llama.cpp always puts in the end-of-generation set.
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
];
/// Tokens llama.cpp forces to user-defined (always rendered), the gpt-oss hack.
const FORCED_USER_DEFINED: &[&str] = &["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"];

impl Vocab {
    /// Load from the GGUF's `tokenizer.*` keys.
    pub fn from_gguf(g: &Gguf) -> Result<Vocab, TokenizerError> {
        let model = g
            .opt_str(key::MODEL)?
            .ok_or(TokenizerError::MissingTokenizer { key: key::MODEL })?;
        let pre_name = g.opt_str(key::PRE)?;
        let kind = match model {
            "llama" => ModelKind::Spm,
            "gpt2" => ModelKind::Bpe(PreTokenizer::from_name(pre_name)?),
            other => {
                return Err(TokenizerError::UnknownModel {
                    model: other.to_owned(),
                })
            }
        };

        let tokens = g
            .opt_array(key::TOKENS)?
            .ok_or(TokenizerError::MissingTokenizer { key: key::TOKENS })?;
        let tokens = tokens
            .as_strings()
            .ok_or_else(|| bad(key::TOKENS, "not an array of strings"))?;
        let n = tokens.len();
        if n >= i32::MAX as usize {
            return Err(TokenizerError::VocabTooLarge { n });
        }

        let scores = read_scores(g, n)?;
        let types = read_types(g, n)?;

        let mut texts = Vec::with_capacity(n);
        let mut to_id: FxMap<String, u32> = FxMap::default();
        to_id.reserve(n);
        for (i, t) in tokens.iter().enumerate() {
            let text = if t.is_empty() {
                format!("[EMPTY_{i}]")
            } else {
                t.clone()
            };
            if let Some(&first) = to_id.get(&text) {
                return Err(TokenizerError::DuplicateToken {
                    id: i as u32,
                    first,
                    text,
                });
            }
            to_id.insert(text.clone(), i as u32);
            texts.push(text);
        }
        let attrs: Vec<u16> = match &types {
            None => vec![attr::NORMAL; n],
            Some(t) => t.iter().map(|&ty| type_to_attr(ty)).collect(),
        };

        // Model defaults, then the GGUF flags.
        let (mut ids, mut add_bos, mut add_space_prefix) = match kind {
            ModelKind::Spm => (
                SpecialIds {
                    bos: Some(1),
                    eos: Some(2),
                    unk: Some(0),
                    ..SpecialIds::default()
                },
                true,
                true,
            ),
            ModelKind::Bpe(pre) => (
                SpecialIds {
                    bos: Some(11),
                    eos: Some(11),
                    ..SpecialIds::default()
                },
                pre.default_add_bos(),
                false,
            ),
        };
        let mut add_eos = false;
        if let Some(v) = g.opt_bool(key::ADD_PREFIX)? {
            add_space_prefix = v;
        }
        read_special_ids(g, n, &mut ids)?;
        if let Some(v) = g.opt_bool(key::ADD_BOS)? {
            add_bos = v;
        }
        if let Some(v) = g.opt_bool(key::ADD_EOS)? {
            add_eos = v;
        }

        let mut v = Vocab {
            kind,
            texts,
            scores,
            attrs,
            to_id,
            ids,
            add_bos,
            add_eos,
            add_space_prefix,
            eog: BTreeSet::new(),
        };
        v.detect_by_text();
        v.mark_unused();
        v.build_eog();
        Ok(v)
    }

    pub fn n_vocab(&self) -> usize {
        self.texts.len()
    }

    pub fn attr(&self, id: u32) -> u16 {
        self.attrs.get(id as usize).copied().unwrap_or(0)
    }

    fn set_control(&mut self, id: u32) {
        if let Some(a) = self.attrs.get_mut(id as usize) {
            *a |= attr::CONTROL;
        }
    }

    /// EOT/EOM/FIM ids found by token text when their keys are absent; llama.cpp also makes
    /// each found token a control token. llama.cpp walks a hash map, so with several
    /// candidates its pick is unspecified; we take the lowest id.
    fn detect_by_text(&mut self) {
        type Slot = fn(&mut SpecialIds) -> &mut Option<u32>;
        let tables: [(&[&str], Slot); 8] = [
            (EOT_TEXTS, |s| &mut s.eot),
            (EOM_TEXTS, |s| &mut s.eom),
            (FIM_PRE_TEXTS, |s| &mut s.fim_pre),
            (FIM_SUF_TEXTS, |s| &mut s.fim_suf),
            (FIM_MID_TEXTS, |s| &mut s.fim_mid),
            (FIM_PAD_TEXTS, |s| &mut s.fim_pad),
            (FIM_REP_TEXTS, |s| &mut s.fim_rep),
            (FIM_SEP_TEXTS, |s| &mut s.fim_sep),
        ];
        for (texts, slot) in tables {
            if slot(&mut self.ids).is_some() {
                continue;
            }
            let found = texts
                .iter()
                .filter_map(|t| self.to_id.get(*t).copied())
                .min();
            if let Some(id) = found {
                *slot(&mut self.ids) = Some(id);
                self.set_control(id);
            }
        }
    }

    /// Control tokens whose text contains "unused" are also marked unused.
    fn mark_unused(&mut self) {
        for (a, t) in self.attrs.iter_mut().zip(&self.texts) {
            if *a & attr::CONTROL != 0 && t.contains("unused") {
                *a |= attr::UNUSED;
            }
        }
    }

    /// The end-of-generation set, built the way llama.cpp builds it.
    fn build_eog(&mut self) {
        let mut eog = BTreeSet::new();
        for id in [self.ids.fim_pad, self.ids.fim_rep, self.ids.fim_sep]
            .into_iter()
            .flatten()
        {
            eog.insert(id);
        }
        for t in EOG_TEXTS {
            if let Some(&id) = self.to_id.get(*t) {
                eog.insert(id);
                self.set_control(id);
            }
        }
        for t in FORCED_USER_DEFINED {
            if let Some(&id) = self.to_id.get(*t) {
                self.attrs[id as usize] = attr::USER_DEFINED;
            }
        }
        for id in [self.ids.eos, self.ids.eot, self.ids.eom]
            .into_iter()
            .flatten()
        {
            eog.insert(id);
        }
        // o200k_harmony / solar-open: `<|end|>` is not an end of generation there.
        let find = |eog: &BTreeSet<u32>, t: &str| {
            eog.iter().copied().find(|&id| self.texts[id as usize] == t)
        };
        let has = |eog: &BTreeSet<u32>, t: &str| find(eog, t).is_some();
        if let Some(end) = find(&eog, "<|end|>") {
            let call = has(&eog, "<|call|>") || has(&eog, "<|calls|>");
            if call && (has(&eog, "<|return|>") || has(&eog, "<|flush|>")) {
                eog.remove(&end);
                self.attrs[end as usize] = attr::USER_DEFINED;
            }
        }
        // gemma4 / plamo: `</s>` is a normal token there.
        if let Some(s) = find(&eog, "</s>") {
            if has(&eog, "<|tool_response>") || has(&eog, "<|plamo:eos|>") {
                eog.remove(&s);
                self.attrs[s as usize] = attr::NORMAL;
            }
        }
        self.eog = eog;
    }
}

/// llama.cpp's token type → attribute mapping.
fn type_to_attr(ty: i32) -> u16 {
    match ty {
        1 => attr::NORMAL,
        2 => attr::UNKNOWN,
        3 => attr::CONTROL,
        4 => attr::USER_DEFINED,
        5 => attr::UNUSED,
        6 => attr::BYTE,
        _ => 0,
    }
}

fn read_scores(g: &Gguf, n: usize) -> Result<Vec<f32>, TokenizerError> {
    let Some(a) = g.opt_array(key::SCORES)? else {
        return Ok(vec![0.0; n]);
    };
    let scores: Vec<f32> = match a {
        Array::F32(v) => v.clone(),
        Array::I32(v) => v.iter().map(|&x| x as f32).collect(),
        _ => return Err(bad(key::SCORES, "not an array of f32 or i32")),
    };
    if scores.len() < n {
        return Err(bad(
            key::SCORES,
            format!("{} scores for {n} tokens", scores.len()),
        ));
    }
    Ok(scores[..n].to_vec())
}

fn read_types(g: &Gguf, n: usize) -> Result<Option<Vec<i32>>, TokenizerError> {
    let Some(a) = g.opt_array(key::TOKEN_TYPE)? else {
        return Ok(None);
    };
    let t = a
        .as_i32s()
        .ok_or_else(|| bad(key::TOKEN_TYPE, "not an array of i32"))?;
    if t.len() < n {
        return Err(bad(
            key::TOKEN_TYPE,
            format!("{} token types for {n} tokens", t.len()),
        ));
    }
    Ok(Some(t[..n].to_vec()))
}

/// Special ids: a model default out of range is dropped; a GGUF value out of range is ignored
/// (the default stays), as llama.cpp does.
fn read_special_ids(g: &Gguf, n: usize, ids: &mut SpecialIds) -> Result<(), TokenizerError> {
    let slots: [(&'static str, &mut Option<u32>); 14] = [
        (key::BOS_ID, &mut ids.bos),
        (key::EOS_ID, &mut ids.eos),
        (key::EOT_ID, &mut ids.eot),
        (key::EOM_ID, &mut ids.eom),
        (key::UNK_ID, &mut ids.unk),
        (key::SEP_ID, &mut ids.sep),
        (key::PAD_ID, &mut ids.pad),
        (key::MASK_ID, &mut ids.mask),
        (key::FIM_PRE_ID, &mut ids.fim_pre),
        (key::FIM_SUF_ID, &mut ids.fim_suf),
        (key::FIM_MID_ID, &mut ids.fim_mid),
        (key::FIM_PAD_ID, &mut ids.fim_pad),
        (key::FIM_REP_ID, &mut ids.fim_rep),
        (key::FIM_SEP_ID, &mut ids.fim_sep),
    ];
    for (k, slot) in slots {
        if slot.is_some_and(|id| id as usize >= n) {
            *slot = None;
        }
        let value = match g.get(k) {
            None => continue,
            Some(v) => v,
        };
        if !value.is_integer() {
            return Err(TokenizerError::BadKey {
                key: k,
                reason: format!("expected an integer token id, found {}", value.value_type()),
            });
        }
        // A negative or huge id is out of range: ignored, like any out-of-range id.
        let id = value.as_u32();
        if let Some(id) = id {
            if (id as usize) < n {
                *slot = Some(id);
            }
        }
    }
    Ok(())
}
