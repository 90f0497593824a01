//! The real gemma-3-270m Q4_K_M GGUF (253 MB, not in the repo): opened through mmap, with its
//! architecture, tensor inventory, a few shapes/types and the byte accounting of every tensor
//! checked. Skips (with a note on stderr) when the file is absent.

use std::path::PathBuf;

use muser_gguf::{arch, general, tokenizer, GgmlType, Gguf, GgufBuilder};

fn gemma_path() -> PathBuf {
    if let Some(p) = std::env::var_os("MUSER_GEMMA_GGUF") {
        return PathBuf::from(p);
    }
    let home = std::env::var_os("HOME").unwrap_or_default();
    PathBuf::from(home).join(".cache/muser/models/gemma-3-270m-q4_k_m.gguf")
}

#[test]
fn gemma_3_270m_opens_and_accounts_for_every_byte() {
    let path = gemma_path();
    if !path.is_file() {
        assert!(
            std::env::var_os("MUSER_REQUIRE_MODELS").is_none(),
            "MUSER_REQUIRE_MODELS is set but this test's external input is missing"
        );
        eprintln!(
            "skipping: gemma-3-270m not found at {}; run scripts/fetch-default-model.sh",
            path.display()
        );
        return;
    }
    let g = Gguf::open(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(g.version(), 3);
    assert_eq!(g.architecture(), Some("gemma3"));
    assert_eq!(g.alignment(), 32);
    assert_eq!(g.metadata().len(), 33);
    assert_eq!(g.tensors().len(), 236);

    // Hyperparameters through the arch-prefixed accessors.
    assert_eq!(g.arch_u32(arch::BLOCK_COUNT).unwrap(), 18);
    assert_eq!(g.arch_u32(arch::EMBEDDING_LENGTH).unwrap(), 640);
    assert_eq!(g.arch_u32(arch::FEED_FORWARD_LENGTH).unwrap(), 2048);
    assert_eq!(g.arch_u32(arch::HEAD_COUNT).unwrap(), 4);
    assert_eq!(g.arch_u32(arch::HEAD_COUNT_KV).unwrap(), 1);
    assert_eq!(g.arch_u32(arch::KEY_LENGTH).unwrap(), 256);
    assert_eq!(g.arch_u32(arch::SLIDING_WINDOW).unwrap(), 512);
    assert_eq!(g.arch_u32(arch::CONTEXT_LENGTH).unwrap(), 32768);
    assert_eq!(g.arch_f32(arch::ROPE_FREQ_BASE).unwrap(), 1e6);
    assert_eq!(g.arch_f32(arch::RMS_EPS).unwrap(), 1e-6);
    assert_eq!(g.opt_arch_f32(arch::FINAL_LOGIT_SOFTCAPPING).unwrap(), None);
    assert_eq!(
        g.opt_arch_array(arch::SLIDING_WINDOW_PATTERN).unwrap(),
        None
    );
    assert_eq!(g.get_u32(general::FILE_TYPE).unwrap(), 15);

    // Tokenizer.
    assert_eq!(g.get_str(tokenizer::MODEL).unwrap(), "llama");
    let tokens = g.get_array(tokenizer::TOKENS).unwrap();
    assert_eq!(tokens.len(), 262_144);
    assert_eq!(
        &tokens.as_strings().unwrap()[..3],
        ["<pad>", "<eos>", "<bos>"]
    );
    assert_eq!(
        g.get_array(tokenizer::SCORES)
            .unwrap()
            .as_f32s()
            .unwrap()
            .len(),
        262_144
    );
    assert_eq!(
        g.get_array(tokenizer::TOKEN_TYPE)
            .unwrap()
            .as_i32s()
            .unwrap()
            .len(),
        262_144
    );
    assert_eq!(g.get_u32(tokenizer::BOS_ID).unwrap(), 2);
    assert_eq!(g.get_u32(tokenizer::EOS_ID).unwrap(), 1);
    assert!(g.get_bool(tokenizer::ADD_BOS).unwrap());
    let shown = g.get(tokenizer::TOKENS).unwrap().to_string();
    assert_eq!(
        shown,
        r#"[string; 262144] ["<pad>", "<eos>", "<bos>", ...]"#
    );

    // A few tensors.
    let t = g.tensor("token_embd.weight").unwrap();
    assert_eq!(
        (t.ty, t.shape.as_slice()),
        (GgmlType::Q8_0, &[640, 262_144][..])
    );
    assert_eq!(t.n_bytes, 178_257_920);
    assert_eq!((t.row_len(), t.n_rows()), (640, 262_144));
    let t = g.tensor("output_norm.weight").unwrap();
    assert_eq!((t.ty, t.shape.as_slice()), (GgmlType::F32, &[640][..]));
    let t = g.tensor("blk.0.attn_k.weight").unwrap();
    assert_eq!(
        (t.ty, t.shape.as_slice()),
        (GgmlType::Q5_0, &[640, 256][..])
    );
    assert!(
        g.tensor("output.weight").is_none(),
        "gemma3 ties the output embedding"
    );
    let mut by_type = std::collections::BTreeMap::new();
    for t in g.tensors() {
        *by_type.entry(t.ty.name()).or_insert(0) += 1;
    }
    let expect = [
        ("f32", 109),
        ("q4_K", 27),
        ("q5_0", 81),
        ("q6_K", 9),
        ("q8_0", 10),
    ];
    assert_eq!(by_type.into_iter().collect::<Vec<_>>(), expect);

    // Byte accounting: every extent in bounds, aligned, disjoint, and together with the
    // padding they tile the data section exactly.
    let mut extents: Vec<(u64, u64)> = g
        .tensors()
        .iter()
        .map(|t| {
            let start = t.absolute_offset(g.data_offset());
            assert_eq!(start % 32, 0, "{}", t.name);
            assert_eq!(g.tensor_data(t).len() as u64, t.n_bytes);
            (start, start + t.n_bytes)
        })
        .collect();
    extents.sort();
    let mut cursor = g.data_offset();
    for (start, end) in extents {
        assert_eq!(start, cursor.div_ceil(32) * 32);
        cursor = end;
    }
    assert_eq!(cursor.div_ceil(32) * 32, g.file_size());
    let total: u64 = g.tensors().iter().map(|t| t.n_bytes).sum();
    assert!(total <= g.file_size() - g.data_offset());

    // The writer reproduces the header byte for byte.
    let b = GgufBuilder::from_gguf_header(&g).unwrap();
    assert_eq!(b.data_offset(), g.data_offset());
    assert_eq!(b.file_size(), g.file_size());
    assert_eq!(b.tensor_infos(), g.tensors());
    let mut header = Vec::new();
    let w = b.write_header(&mut header).unwrap();
    assert_eq!(w.bytes_written(), g.data_offset());
    drop(w);
    assert!(header[..] == g.as_bytes()[..header.len()], "header differs");
}
