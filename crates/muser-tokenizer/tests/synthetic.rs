//! Tokenizers built from small hand-made GGUFs (always available, no model files): typed
//! errors for missing or malformed tokenizer keys, and the llama.cpp rules that are easy to
//! see on a toy vocabulary (merge order, byte fallback, space prefix, special splitting,
//! EOG detection, streaming over split UTF-8).

use muser_gguf::{to_bytes, tokenizer as key, Array, Gguf, GgufBuilder, Value};
use muser_tokenizer::{StreamDecoder, Tokenizer, TokenizerError};

fn gguf(kvs: Vec<(&str, Value)>) -> Gguf {
    let mut b = GgufBuilder::new();
    b.kv("general.architecture", Value::String("test".into()))
        .expect("kv");
    for (k, v) in kvs {
        b.kv(k, v).expect("kv");
    }
    Gguf::from_bytes(to_bytes(b, &[]).expect("bytes")).expect("parse")
}

fn strings(v: &[&str]) -> Value {
    Value::Array(Array::String(v.iter().map(|s| s.to_string()).collect()))
}

fn err(kvs: Vec<(&str, Value)>) -> TokenizerError {
    Tokenizer::from_gguf(&gguf(kvs)).expect_err("must fail")
}

#[test]
fn no_tokenizer_keys_is_a_typed_error() {
    let e = err(vec![]);
    assert!(
        matches!(e, TokenizerError::MissingTokenizer { key: k } if k == key::MODEL),
        "{e}"
    );
    let e = err(vec![(key::MODEL, Value::String("gpt2".into()))]);
    assert!(
        matches!(e, TokenizerError::MissingTokenizer { key: k } if k == key::TOKENS),
        "{e}"
    );
}

#[test]
fn unknown_model_and_pre() {
    let e = err(vec![
        (key::MODEL, Value::String("bert".into())),
        (key::TOKENS, strings(&["a"])),
    ]);
    assert!(
        matches!(e, TokenizerError::UnknownModel { ref model } if model == "bert"),
        "{e}"
    );
    let e = err(vec![
        (key::MODEL, Value::String("gpt2".into())),
        (key::PRE, Value::String("qwen2".into())),
        (key::TOKENS, strings(&["a"])),
    ]);
    assert!(
        matches!(e, TokenizerError::UnknownPre { ref pre } if pre == "qwen2"),
        "{e}"
    );
}

#[test]
fn malformed_keys() {
    let base = |extra: Vec<(&'static str, Value)>| {
        let mut v = vec![
            (key::MODEL, Value::String("llama".into())),
            (key::TOKENS, strings(&["<unk>", "<s>", "</s>", "a"])),
        ];
        v.extend(extra);
        v
    };
    let e = err(vec![
        (key::MODEL, Value::String("llama".into())),
        (key::TOKENS, Value::Array(Array::I32(vec![1, 2]))),
    ]);
    assert!(
        matches!(e, TokenizerError::BadKey { key: k, .. } if k == key::TOKENS),
        "{e}"
    );
    let e = err(base(vec![(
        key::SCORES,
        Value::Array(Array::F32(vec![0.0])),
    )]));
    assert!(
        matches!(e, TokenizerError::BadKey { key: k, .. } if k == key::SCORES),
        "{e}"
    );
    let e = err(base(vec![(
        key::TOKEN_TYPE,
        Value::Array(Array::F32(vec![1.0; 4])),
    )]));
    assert!(
        matches!(e, TokenizerError::BadKey { key: k, .. } if k == key::TOKEN_TYPE),
        "{e}"
    );
    let e = err(base(vec![(key::BOS_ID, Value::String("1".into()))]));
    assert!(
        matches!(e, TokenizerError::BadKey { key: k, .. } if k == key::BOS_ID),
        "{e}"
    );
    let e = err(vec![
        (key::MODEL, Value::String("llama".into())),
        (key::TOKENS, strings(&["a", "b", "a"])),
    ]);
    assert!(
        matches!(
            e,
            TokenizerError::DuplicateToken {
                id: 2,
                first: 0,
                ..
            }
        ),
        "{e}"
    );
    let e = err(vec![
        (key::MODEL, Value::String("gpt2".into())),
        (key::TOKENS, strings(&["a"])),
    ]);
    assert!(matches!(e, TokenizerError::MissingMerges), "{e}");
    let e = err(vec![
        (key::MODEL, Value::String("gpt2".into())),
        (key::TOKENS, strings(&["a"])),
        (key::MERGES, Value::Array(Array::U8(vec![1]))),
    ]);
    assert!(
        matches!(e, TokenizerError::BadKey { key: k, .. } if k == key::MERGES),
        "{e}"
    );
}

/// A byte-level BPE vocab: all 256 byte tokens plus a few merges.
fn toy_bpe(pre: &str) -> Tokenizer {
    let table = gpt2_chars();
    let mut tokens: Vec<String> = table.iter().map(|c| c.to_string()).collect();
    let merges = [
        "h e", "l l", "he ll", "hell o", "Ġ w", "Ġw o", "Ġwo r", "Ġwor l", "Ġworl d",
    ];
    for m in merges {
        tokens.push(m.replace(' ', ""));
    }
    tokens.push("<|eot|>".into());
    tokens.push("<|begin_of_text|>".into());
    let n = tokens.len();
    let mut types = vec![1i32; n];
    types[n - 2] = 3;
    types[n - 1] = 3;
    let g = gguf(vec![
        (key::MODEL, Value::String("gpt2".into())),
        (key::PRE, Value::String(pre.into())),
        (key::TOKENS, Value::Array(Array::String(tokens))),
        (key::TOKEN_TYPE, Value::Array(Array::I32(types))),
        (key::MERGES, strings(&merges)),
        (key::BOS_ID, Value::U32(n as u32 - 1)),
        (key::EOS_ID, Value::U32(n as u32 - 2)),
        (key::ADD_BOS, Value::Bool(true)),
    ]);
    Tokenizer::from_gguf(&g).expect("toy bpe")
}

fn gpt2_chars() -> Vec<char> {
    let mut next = 0x100u32;
    (0u32..256)
        .map(|b| {
            if matches!(b, 0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF) {
                char::from_u32(b).expect("latin-1")
            } else {
                next += 1;
                char::from_u32(next - 1).expect("mapped")
            }
        })
        .collect()
}

#[test]
fn toy_bpe_merges_specials_and_bos() {
    let t = toy_bpe("llama4");
    let hello = t.token_id("hello").expect("hello");
    let world = t.token_id("Ġworld").expect("Ġworld");
    let eot = t.token_id("<|eot|>").expect("eot");
    let bos = t.bos().expect("bos");
    assert_eq!(t.encode("hello world", false, true), vec![hello, world]);
    assert_eq!(t.encode("hello world", true, true), vec![bos, hello, world]);
    assert_eq!(t.encode("hello<|eot|>", false, true), vec![hello, eot]);
    // Without parse_special the control token's text is plain bytes.
    let ids = t.encode("<|eot|>", false, false);
    assert_eq!(ids.len(), 7);
    assert_eq!(t.decode(&ids, false), "<|eot|>");
    assert_eq!(t.decode(&[eot], false), "");
    assert_eq!(t.decode(&[eot], true), "<|eot|>");
    // "<|eot|>" is not an EOG text, but it is the EOS id here; BOS is not EOG.
    assert!(t.is_eog(eot));
    assert!(!t.is_eog(bos));
    // Bytes of a multi-byte character stream as one character.
    let ids = t.encode("é€😀", false, true);
    assert_eq!(ids.len(), 2 + 3 + 4);
    let mut d = StreamDecoder::new(&t);
    let parts: Vec<String> = ids.iter().map(|&i| d.push(i)).collect();
    assert_eq!(parts.concat() + &d.finish(), "é€😀");
    assert_eq!(parts.iter().filter(|p| !p.is_empty()).count(), 3);
}

#[test]
fn toy_bpe_default_and_llama3_pre() {
    for pre in ["default", "llama3", "gpt-2"] {
        let t = toy_bpe(pre);
        let ids = t.encode("hello world 12345", false, true);
        assert_eq!(t.decode(&ids, true), "hello world 12345", "{pre}");
    }
    // llama3 family defaults add_bos to true; the key (true here) decides anyway.
    assert!(toy_bpe("llama3").add_bos());
}

/// A SentencePiece vocab with byte fallback.
fn toy_spm(add_space_prefix: bool) -> Tokenizer {
    let mut tokens: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
    let mut types = vec![2, 3, 3];
    let mut scores = vec![0.0f32; 3];
    for b in 0..256 {
        tokens.push(format!("<0x{b:02X}>"));
        types.push(6);
        scores.push(0.0);
    }
    for (t, s) in [
        ("▁", -1.0),
        ("a", -2.0),
        ("b", -2.0),
        ("ab", -1.5),
        ("▁ab", -1.0),
        ("▁a", -3.0),
        ("<end_of_turn>", 0.0),
        ("\n\n", 0.0),
    ] {
        tokens.push(t.into());
        types.push(match t {
            "<end_of_turn>" => 3,
            "\n\n" => 4,
            _ => 1,
        });
        scores.push(s);
    }
    let g = gguf(vec![
        (key::MODEL, Value::String("llama".into())),
        (key::TOKENS, Value::Array(Array::String(tokens))),
        (key::TOKEN_TYPE, Value::Array(Array::I32(types))),
        (key::SCORES, Value::Array(Array::F32(scores))),
        (key::ADD_PREFIX, Value::Bool(add_space_prefix)),
    ]);
    Tokenizer::from_gguf(&g).expect("toy spm")
}

#[test]
fn toy_spm_prefix_fallback_and_user_defined() {
    let t = toy_spm(true);
    let id = |s: &str| t.token_id(s).expect(s);
    assert_eq!(t.bos(), Some(1), "SPM default BOS");
    assert!(t.add_bos(), "SPM default add_bos");
    // Space prefix: "ab" → "▁ab".
    assert_eq!(t.encode("ab", false, true), vec![id("▁ab")]);
    assert_eq!(t.encode("ab", true, true), vec![1, id("▁ab")]);
    // Byte fallback for "é" (C3 A9).
    assert_eq!(
        t.encode("é", false, true),
        vec![id("▁"), id("<0xC3>"), id("<0xA9>")]
    );
    // After a special token the space prefix is added again; "\n\n" is user-defined and
    // splits even without parse_special.
    assert_eq!(
        t.encode("ab<end_of_turn>ab", false, true),
        vec![id("▁ab"), id("<end_of_turn>"), id("▁ab")]
    );
    assert_eq!(
        t.encode("a\n\nb", false, false),
        vec![id("▁a"), id("\n\n"), id("▁"), id("b")]
    );
    assert!(t.is_eog(id("<end_of_turn>")), "EOT found by text");
    assert_eq!(t.eot(), Some(id("<end_of_turn>")));
    // decode drops the leading space the prefix added.
    assert_eq!(t.decode(&t.encode("ab ab", false, true), false), "ab ab");
    let t = toy_spm(false);
    assert_eq!(
        t.encode("ab", false, true),
        vec![t.token_id("ab").expect("ab")]
    );
}

#[test]
fn stream_decoder_never_splits_characters() {
    let t = toy_spm(false);
    let s = "a é € 😀 👨\u{200d}👩 b";
    let ids = t.encode(s, false, true);
    let mut d = StreamDecoder::new(&t);
    let mut out = String::new();
    for &i in &ids {
        let p = d.push(i);
        assert!(!p.contains('\u{FFFD}'), "broken UTF-8 emitted: {p:?}");
        out.push_str(&p);
    }
    assert_eq!(d.pending_bytes(), 0);
    out.push_str(&d.finish());
    assert_eq!(out, s);
    // An invalid byte sequence becomes U+FFFD exactly as in decode.
    let bad: Vec<u32> = ["<0xE2>", "<0x82>", "a", "<0xFF>", "<0xF0>"]
        .iter()
        .map(|s| t.token_id(s).expect(s))
        .collect();
    let mut d = StreamDecoder::new(&t);
    let mut out = String::new();
    for &i in &bad {
        out.push_str(&d.push(i));
    }
    out.push_str(&d.finish());
    assert_eq!(out, t.decode(&bad, false));
    assert_eq!(out, "\u{FFFD}a\u{FFFD}\u{FFFD}");
}
