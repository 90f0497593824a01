//! Chat templates: our minijinja rendering + encoding gives the same prompt token ids as
//! llama.cpp's own template engine (golden-chat.jsonl, recorded with llama-completion) for
//! the forged GGUF template, Gemma 3's template and the ChatML fallback; multi-turn and error
//! cases, which llama-completion cannot produce in one shot, against hand-checked strings.

mod common;

use common::{data_dir, forged, gemma, require_models};
use muser_tokenizer::{ChatMessage, ChatTemplate, Tokenizer, TokenizerError, CHATML_TEMPLATE};

fn gemma_template_source() -> String {
    std::fs::read_to_string(data_dir().join("gemma3-chat-template.jinja")).expect("template")
}

fn messages(system: &str, user: &str) -> Vec<ChatMessage> {
    let mut m = Vec::new();
    if !system.is_empty() {
        m.push(ChatMessage::new("system", system));
    }
    m.push(ChatMessage::new("user", user));
    m
}

fn check_row(tok: &Tokenizer, tmpl: &ChatTemplate, row: &serde_json::Value) {
    let (system, user) = (
        row["system"].as_str().expect("system"),
        row["user"].as_str().expect("user"),
    );
    let want: Vec<u32> = row["ids"]
        .as_array()
        .expect("ids")
        .iter()
        .map(|x| x.as_u64().expect("id") as u32)
        .collect();
    let prompt = tmpl.render(&messages(system, user), true).expect("render");
    let what = format!(
        "{} / {} / {system:?} / {user:?}",
        row["model"], row["template"]
    );
    // The string llama.cpp rendered, recovered losslessly from its ids (minus the BOS it adds).
    assert_eq!(
        prompt,
        tok.decode(&want[1..], true),
        "prompt string: {what}"
    );
    assert_eq!(tok.encode(&prompt, true, true), want, "prompt ids: {what}");
}

fn golden_rows() -> Vec<serde_json::Value> {
    std::fs::read_to_string(data_dir().join("golden-chat.jsonl"))
        .expect("golden-chat.jsonl")
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_str(l).expect("row"))
        .collect()
}

#[test]
fn forged_template_matches_llama_cpp() {
    let (g, tok) = forged(2048);
    let tmpl = ChatTemplate::from_gguf(&g, &tok)
        .expect("compiles")
        .expect("forged GGUF has a template");
    let rows: Vec<_> = golden_rows()
        .into_iter()
        .filter(|r| r["model"] == "tiny")
        .collect();
    assert!(!rows.is_empty());
    for r in &rows {
        check_row(&tok, &tmpl, r);
    }
}

#[test]
fn gemma_templates_match_llama_cpp() {
    let Some((g, tok)) = gemma() else { return };
    assert!(
        ChatTemplate::from_gguf(&g, &tok).expect("ok").is_none(),
        "gemma-3-270m carries no template"
    );
    let gemma_tmpl = ChatTemplate::new(&gemma_template_source(), &tok).expect("compiles");
    let chatml = ChatTemplate::new(CHATML_TEMPLATE, &tok).expect("compiles");
    let mut n = 0;
    for r in golden_rows().iter().filter(|r| r["model"] == "gemma") {
        let tmpl = match r["template"].as_str() {
            Some("gemma3-chat-template.jinja") => &gemma_tmpl,
            Some("chatml-fallback") => &chatml,
            other => panic!("unknown template {other:?}"),
        };
        check_row(&tok, tmpl, r);
        n += 1;
    }
    assert!(n > 0 || !require_models());
}

#[test]
fn forged_template_multi_turn_by_hand() {
    let (g, tok) = forged(2048);
    let tmpl = ChatTemplate::from_gguf(&g, &tok)
        .expect("ok")
        .expect("template");
    let msgs = [
        ChatMessage::new("system", "Be nice."),
        ChatMessage::new("user", " Hi \n"),
        ChatMessage::new("assistant", "Hello!"),
        ChatMessage::new("user", "Bye"),
    ];
    let body = "<|header_start|>system<|header_end|>\n\nBe nice.<|eot|>\
                <|header_start|>user<|header_end|>\n\nHi<|eot|>\
                <|header_start|>assistant<|header_end|>\n\nHello!<|eot|>\
                <|header_start|>user<|header_end|>\n\nBye<|eot|>";
    let gen = "<|header_start|>assistant<|header_end|>\n\n";
    assert_eq!(tmpl.render(&msgs, false).expect("render"), body);
    assert_eq!(
        tmpl.render(&msgs, true).expect("render"),
        format!("{body}{gen}")
    );
    // The raw output keeps the BOS text that `render` drops (the tokenizer adds BOS).
    assert_eq!(
        tmpl.render_raw(&msgs, true).expect("render"),
        format!("<|begin_of_text|>{body}{gen}")
    );
}

#[test]
fn gemma_template_multi_turn_by_hand() {
    // Only the BOS/EOS texts matter here, so no model file is needed.
    let tmpl = ChatTemplate::with_tokens(&gemma_template_source(), "<bos>", "<eos>", true, false)
        .expect("compiles");
    let msgs = [
        ChatMessage::new("system", "Sys."),
        ChatMessage::new("user", "  Q1  "),
        ChatMessage::new("assistant", "A1"),
        ChatMessage::new("user", "Q2"),
    ];
    assert_eq!(
        tmpl.render(&msgs, true).expect("render"),
        "<start_of_turn>user\nSys.\n\nQ1<end_of_turn>\n\
         <start_of_turn>model\nA1<end_of_turn>\n\
         <start_of_turn>user\nQ2<end_of_turn>\n\
         <start_of_turn>model\n"
    );
    assert_eq!(
        tmpl.render_raw(&msgs[1..2], false).expect("render"),
        "<bos><start_of_turn>user\nQ1<end_of_turn>\n"
    );
    // Roles must alternate: the template's raise_exception becomes a typed error.
    let bad = [ChatMessage::new("user", "a"), ChatMessage::new("user", "b")];
    match tmpl.render(&bad, true) {
        Err(TokenizerError::TemplateRender(e)) => {
            assert!(format!("{e:#}").contains("must alternate"), "{e:#}")
        }
        other => panic!("expected a render error, got {other:?}"),
    }
}

#[test]
fn chatml_fallback_by_hand() {
    let tmpl = ChatTemplate::with_tokens(CHATML_TEMPLATE, "", "", false, false).expect("ok");
    let msgs = [
        ChatMessage::new("system", "S"),
        ChatMessage::new("user", "U"),
    ];
    assert_eq!(
        tmpl.render(&msgs, true).expect("render"),
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
    );
}
