//! Malformed input must give a typed error naming what and where — never a panic, never an
//! out-of-bounds read, never a huge allocation. Truncation at every offset, random bit and byte
//! corruption of a valid file, and one crafted file per validation rule.

mod common;

use common::{assemble, bytes, header, kv, raw_str, sample_file, ti, Rng};
use muser_gguf::{Gguf, GgufError};

fn err(bytes: Vec<u8>) -> GgufError {
    match Gguf::from_bytes(bytes) {
        Ok(g) => panic!("expected an error, parsed {g:?}"),
        Err(e) => e,
    }
}

/// Whatever parsed must satisfy the reader's documented invariants.
fn check_invariants(g: &Gguf) {
    assert!(g.alignment().is_power_of_two());
    assert!(g.data_offset() <= g.file_size());
    for t in g.tensors() {
        let start = g.data_offset() + t.offset;
        assert_eq!(start % g.alignment(), g.data_offset() % g.alignment());
        assert!(start + t.n_bytes <= g.file_size());
        assert_eq!(g.tensor_data(t).len() as u64, t.n_bytes);
        assert_eq!(g.tensor(&t.name), Some(t));
    }
    for (k, v) in g.metadata() {
        assert!(std::ptr::eq(g.get(k).unwrap(), v)); // (NaN-safe)
    }
}

#[test]
fn truncation_at_every_offset_is_an_error() {
    let (file, data_end) = sample_file();
    assert!(file.len() < 4096, "keep the sample small: {}", file.len());
    check_invariants(&Gguf::from_bytes(file.clone()).unwrap());
    for cut in 0..file.len() {
        let r = Gguf::from_bytes(file[..cut].to_vec());
        if (cut as u64) < data_end {
            let e = r.expect_err("truncated file parsed");
            assert!(!e.to_string().is_empty());
        } else {
            // Only trailing padding is missing: still a complete file.
            check_invariants(&r.unwrap());
        }
    }
}

#[test]
fn truncating_the_gguf_py_fixtures_at_every_offset_is_an_error() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut n_files = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("gguf") {
            continue;
        }
        n_files += 1;
        let file = std::fs::read(&path).unwrap();
        let g = Gguf::from_bytes(file.clone()).unwrap();
        check_invariants(&g);
        // Below this, something the file needs is missing (for a metadata-only file: the
        // header; its trailing padding is optional).
        let needed = g
            .tensors()
            .iter()
            .map(|t| g.data_offset() + t.offset + t.n_bytes)
            .max()
            .unwrap_or(24);
        for cut in 0..file.len() {
            match Gguf::from_bytes(file[..cut].to_vec()) {
                Ok(g) => {
                    assert!(
                        cut as u64 >= needed,
                        "{}: cut at {cut} parsed",
                        path.display()
                    );
                    check_invariants(&g);
                }
                Err(e) => assert!(!e.to_string().is_empty()),
            }
        }
    }
    assert_eq!(n_files, 4);
}

#[test]
fn validate_agrees_with_from_bytes() {
    let (file, _) = sample_file();
    assert!(Gguf::validate(&file).is_ok());
    for cut in [0, 3, 30, 100, 300, file.len() / 2] {
        let a = Gguf::validate(&file[..cut]).unwrap_err().to_string();
        let b = Gguf::from_bytes(file[..cut].to_vec())
            .unwrap_err()
            .to_string();
        assert_eq!(a, b);
    }
}

#[test]
fn random_bit_flips_never_panic() {
    let (file, _) = sample_file();
    let mut rng = Rng(0x5eed);
    let (mut ok, mut bad) = (0, 0);
    for _ in 0..10_000 {
        let mut f = file.clone();
        let n_flips = 1 + rng.below(3);
        for _ in 0..n_flips {
            let i = rng.below(f.len() as u64) as usize;
            f[i] ^= 1 << rng.below(8);
        }
        match Gguf::from_bytes(f) {
            Ok(g) => {
                check_invariants(&g);
                ok += 1;
            }
            Err(_) => bad += 1,
        }
    }
    assert!(
        bad > 1000,
        "most header flips should be caught ({ok} ok, {bad} err)"
    );
}

#[test]
fn random_byte_overwrites_and_splices_never_panic() {
    let (file, _) = sample_file();
    let mut rng = Rng(0xfeed_beef);
    for round in 0..6000 {
        let mut f = file.clone();
        match round % 3 {
            0 => {
                // Overwrite a run of bytes with random or extreme values.
                let i = rng.below(f.len() as u64) as usize;
                let n = (1 + rng.below(8) as usize).min(f.len() - i);
                let fill = [0x00, 0xff, 0x7f, 0x80][rng.below(4) as usize];
                for b in &mut f[i..i + n] {
                    *b = if rng.below(2) == 0 {
                        fill
                    } else {
                        rng.next() as u8
                    };
                }
            }
            1 => {
                // Delete a range.
                let i = rng.below(f.len() as u64) as usize;
                let n = (1 + rng.below(16) as usize).min(f.len() - i);
                f.drain(i..i + n);
            }
            _ => {
                // Insert random bytes.
                let i = rng.below(f.len() as u64) as usize;
                let ins = bytes(rng.next(), 1 + rng.below(16) as usize);
                f.splice(i..i, ins);
            }
        }
        if let Ok(g) = Gguf::from_bytes(f) {
            check_invariants(&g);
        }
    }
}

#[test]
fn absurd_u64_fields_in_every_position_never_panic() {
    // Overwrite every 8-byte window of the header with extreme values.
    let (file, _) = sample_file();
    let g = Gguf::from_bytes(file.clone()).unwrap();
    let header_end = g.data_offset() as usize;
    for i in 0..header_end.saturating_sub(8) {
        for v in [u64::MAX, u64::MAX / 2, 1 << 40, 1 << 32, 0] {
            let mut f = file.clone();
            f[i..i + 8].copy_from_slice(&v.to_le_bytes());
            if let Ok(g) = Gguf::from_bytes(f) {
                check_invariants(&g);
            }
        }
    }
}

#[test]
fn magic_and_version() {
    assert!(matches!(
        err(vec![]),
        GgufError::Truncated { offset: 0, .. }
    ));
    assert!(matches!(err(b"GGU".to_vec()), GgufError::Truncated { .. }));
    let mut f = header(3, 0, 0);
    f[3] = b'G';
    assert!(matches!(err(f), GgufError::BadMagic { found } if &found == b"GGUG"));
    assert!(matches!(
        err(header(1, 0, 0)),
        GgufError::VersionOneUnsupported
    ));
    assert!(matches!(
        err(header(0, 0, 0)),
        GgufError::UnsupportedVersion { version: 0 }
    ));
    assert!(matches!(
        err(header(4, 0, 0)),
        GgufError::UnsupportedVersion { version: 4 }
    ));
    assert!(matches!(
        err(header(0x0300_0000, 0, 0)),
        GgufError::BigEndian { .. }
    ));
    for v in [2, 3] {
        let g = Gguf::from_bytes(header(v, 0, 0)).unwrap();
        assert_eq!(
            (g.version(), g.tensors().len(), g.metadata().len()),
            (v, 0, 0)
        );
        assert_eq!(g.data_offset(), 24);
    }
    // Header cut inside the counts.
    let e = err(header(3, 0, 0)[..20].to_vec());
    assert!(e.to_string().contains("metadata count"), "{e}");
}

#[test]
fn absurd_counts_are_rejected_before_allocating() {
    let e = err(header(3, u64::MAX, 0));
    assert!(
        matches!(
            e,
            GgufError::CountTooLarge {
                count: u64::MAX,
                offset: 8,
                ..
            }
        ),
        "{e}"
    );
    let e = err(header(3, 0, 1 << 60));
    assert!(
        matches!(e, GgufError::CountTooLarge { offset: 16, .. }),
        "{e}"
    );

    // Huge string length in a key and in a value.
    let mut f = header(3, 0, 1);
    f.extend_from_slice(&u64::MAX.to_le_bytes());
    f.extend_from_slice(b"abcdefgh");
    assert!(matches!(
        err(f),
        GgufError::StringTooLong {
            offset: 24,
            len: u64::MAX,
            ..
        }
    ));
    let mut payload = (1u64 << 62).to_le_bytes().to_vec();
    payload.extend_from_slice(b"xyz");
    let e = err(assemble(&[kv(b"k.s", 8, &payload)], &[], 1, &[]));
    assert!(matches!(e, GgufError::StringTooLong { .. }), "{e}");
    assert!(e.to_string().contains("k.s"), "{e}");

    // Huge array counts for several element types, and in a nested array.
    for (elem, min) in [(0u32, 1u64), (6, 4), (8, 8), (9, 12), (12, 8)] {
        let mut p = elem.to_le_bytes().to_vec();
        p.extend_from_slice(&(u64::MAX / 3).to_le_bytes());
        p.extend_from_slice(&[0; 16]);
        let e = err(assemble(&[kv(b"arr", 9, &p)], &[], 1, &[]));
        match e {
            GgufError::CountTooLarge {
                min_bytes_each,
                ref what,
                ..
            } => {
                assert_eq!(min_bytes_each, min);
                assert!(what.contains("arr"), "{what}");
            }
            other => panic!("{other}"),
        }
    }
    let mut p = 9u32.to_le_bytes().to_vec(); // array of arrays
    p.extend_from_slice(&1u64.to_le_bytes());
    p.extend_from_slice(&8u32.to_le_bytes()); // inner: strings
    p.extend_from_slice(&(1u64 << 40).to_le_bytes());
    assert!(matches!(
        err(assemble(&[kv(b"n", 9, &p)], &[], 1, &[])),
        GgufError::CountTooLarge { .. }
    ));

    // A tensor count that fits the u64 but not the file.
    let mut f = header(3, 1000, 0);
    f.extend_from_slice(&[0; 64]);
    assert!(matches!(
        err(f),
        GgufError::CountTooLarge { count: 1000, .. }
    ));
}

#[test]
fn metadata_rules() {
    // Duplicate key.
    let e = err(assemble(
        &[kv(b"a", 4, &[1, 0, 0, 0]), kv(b"a", 4, &[2, 0, 0, 0])],
        &[],
        1,
        &[],
    ));
    assert!(
        matches!(e, GgufError::DuplicateKey { ref key, offset: 41 } if key == "a"),
        "{e}"
    );
    // Empty key.
    assert!(matches!(
        err(assemble(&[kv(b"", 0, &[1])], &[], 1, &[])),
        GgufError::EmptyKey {
            index: 0,
            offset: 24
        }
    ));
    // Bad UTF-8 in a key, a string value, and a string array element.
    assert!(matches!(
        err(assemble(&[kv(b"k\xff", 0, &[1])], &[], 1, &[])),
        GgufError::InvalidUtf8 { offset: 32, .. }
    ));
    let e = err(assemble(
        &[kv(b"s", 8, &raw_str(b"ok\xc3\x28"))],
        &[],
        1,
        &[],
    ));
    assert!(
        matches!(e, GgufError::InvalidUtf8 { valid_up_to: 2, .. }),
        "{e}"
    );
    let mut p = 8u32.to_le_bytes().to_vec();
    p.extend_from_slice(&2u64.to_le_bytes());
    p.extend_from_slice(&raw_str(b"fine"));
    p.extend_from_slice(&raw_str(b"\xe2\x82"));
    let e = err(assemble(&[kv(b"toks", 9, &p)], &[], 1, &[]));
    assert!(e.to_string().contains("element 1 of key 'toks'"), "{e}");
    // Unknown value types, top level and as array element type.
    let e = err(assemble(&[kv(b"u", 13, &[0; 8])], &[], 1, &[]));
    assert!(
        matches!(
            e,
            GgufError::UnknownValueType {
                type_id: 13,
                offset: 33,
                ..
            }
        ),
        "{e}"
    );
    let mut p = 0xdead_u32.to_le_bytes().to_vec();
    p.extend_from_slice(&0u64.to_le_bytes());
    assert!(matches!(
        err(assemble(&[kv(b"u", 9, &p)], &[], 1, &[])),
        GgufError::UnknownValueType {
            type_id: 0xdead,
            ..
        }
    ));
    // Bool other than 0/1, scalar and in an array.
    assert!(matches!(
        err(assemble(&[kv(b"b", 7, &[2])], &[], 1, &[])),
        GgufError::InvalidBool { byte: 2, .. }
    ));
    let mut p = 7u32.to_le_bytes().to_vec();
    p.extend_from_slice(&2u64.to_le_bytes());
    p.extend_from_slice(&[1, 0xff]);
    assert!(matches!(
        err(assemble(&[kv(b"b", 9, &p)], &[], 1, &[])),
        GgufError::InvalidBool { byte: 0xff, .. }
    ));
    // Nesting deeper than MAX_ARRAY_DEPTH.
    let mut p = Vec::new();
    for _ in 0..muser_gguf::MAX_ARRAY_DEPTH + 1 {
        p.extend_from_slice(&9u32.to_le_bytes());
        p.extend_from_slice(&1u64.to_le_bytes());
    }
    p.extend_from_slice(&0u32.to_le_bytes());
    p.extend_from_slice(&0u64.to_le_bytes());
    assert!(matches!(
        err(assemble(&[kv(b"deep", 9, &p)], &[], 1, &[])),
        GgufError::ArrayTooDeep { .. }
    ));
    // A million-deep nesting attempt must not overflow the stack.
    let mut p = Vec::new();
    for _ in 0..100_000 {
        p.extend_from_slice(&9u32.to_le_bytes());
        p.extend_from_slice(&1u64.to_le_bytes());
    }
    assert!(matches!(
        err(assemble(&[kv(b"deep", 9, &p)], &[], 1, &[])),
        GgufError::ArrayTooDeep { .. }
    ));
}

#[test]
fn alignment_rules() {
    for bad in [0u32, 3, 48] {
        let e = err(assemble(
            &[kv(b"general.alignment", 4, &bad.to_le_bytes())],
            &[],
            1,
            &[],
        ));
        assert!(
            matches!(e, GgufError::BadAlignment { alignment } if alignment == bad as u64),
            "{e}"
        );
    }
    let e = err(assemble(
        &[kv(b"general.alignment", 10, &64u64.to_le_bytes())],
        &[],
        1,
        &[],
    ));
    assert!(matches!(e, GgufError::BadAlignmentType { .. }), "{e}");
    // A misaligned tensor offset under alignment 64.
    let k = kv(b"general.alignment", 4, &64u32.to_le_bytes());
    let t = ti(b"w", &[4], 0, 32);
    let e = err(assemble(std::slice::from_ref(&k), &[t], 64, &[0; 128]));
    assert!(
        matches!(e, GgufError::MisalignedTensor { offset: 32, alignment: 64, ref tensor } if tensor == "w"),
        "{e}"
    );
    let g = Gguf::from_bytes(assemble(&[k], &[ti(b"w", &[4], 0, 64)], 64, &[0; 128])).unwrap();
    assert_eq!((g.alignment(), g.data_offset() % 64), (64, 0));
}

#[test]
fn tensor_info_rules() {
    let one = |t: Vec<u8>| err(assemble(&[], &[t], 32, &[0; 64]));
    assert!(matches!(
        one(ti(b"t", &[], 0, 0)),
        GgufError::BadDimCount { n_dims: 0, .. }
    ));
    let mut huge_dims = raw_str(b"t");
    huge_dims.extend_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(
        one(huge_dims),
        GgufError::BadDimCount {
            n_dims: 4294967295,
            ..
        }
    ));
    assert!(matches!(
        one(ti(b"t", &[1, 1, 1, 1, 1], 0, 0)),
        GgufError::BadDimCount { n_dims: 5, .. }
    ));
    assert!(matches!(
        one(ti(b"t", &[4, 0], 0, 0)),
        GgufError::ZeroDim { dim: 1, .. }
    ));
    let e = one(ti(b"t", &[1 << 32, 1 << 32], 0, 0));
    assert!(matches!(e, GgufError::ElementCountOverflow { .. }), "{e}");
    let e = one(ti(b"t", &[1 << 62, 2], 0, 0));
    assert!(matches!(e, GgufError::ElementCountOverflow { .. }), "{e}");
    let e = one(ti(b"t", &[u64::MAX / 2], 0, 0));
    assert!(matches!(e, GgufError::TensorByteSizeOverflow { .. }), "{e}");
    for id in [4u32, 5, 31, 32, 33, 43, 1000] {
        assert!(
            matches!(one(ti(b"t", &[256], id, 0)), GgufError::UnknownTensorType { type_id, .. } if type_id == id)
        );
    }
    let e = one(ti(b"t", &[100], 12, 0)); // Q4_K row of 100
    assert!(
        matches!(
            e,
            GgufError::RowNotBlockAligned {
                row_len: 100,
                block_size: 256,
                ..
            }
        ),
        "{e}"
    );
    let e = one(ti(b"t", &[16], 0, 64)); // 64 bytes at data offset 64 of a 64-byte section
    assert!(
        matches!(e, GgufError::TensorOutOfBounds { ref tensor, .. } if tensor == "t"),
        "{e}"
    );
    let e = one(ti(b"t", &[16], 0, u64::MAX - 31)); // offset arithmetic overflows
    assert!(
        matches!(e, GgufError::TensorOutOfBounds { end: u64::MAX, .. }),
        "{e}"
    );
    let long = vec![b'n'; 64];
    assert!(matches!(
        one(ti(&long, &[1], 0, 0)),
        GgufError::TensorNameTooLong {
            len: 64,
            max: 63,
            ..
        }
    ));
    assert!(matches!(
        one(ti(b"\xff", &[1], 0, 0)),
        GgufError::InvalidUtf8 { .. }
    ));
    // The tensor data section itself is cut off.
    let e = err(assemble(&[], &[ti(b"t", &[1], 0, 0)], 1, &[]));
    assert!(
        matches!(
            e,
            GgufError::Truncated { .. } | GgufError::TensorOutOfBounds { .. }
        ),
        "{e}"
    );
}

#[test]
fn tensor_set_rules() {
    let e = err(assemble(
        &[],
        &[ti(b"a", &[8], 0, 0), ti(b"a", &[8], 0, 32)],
        32,
        &[0; 64],
    ));
    assert!(
        matches!(e, GgufError::DuplicateTensor { ref name, offset: Some(_) } if name == "a"),
        "{e}"
    );
    // Overlap: b starts inside a (a is 64 bytes).
    let e = err(assemble(
        &[],
        &[ti(b"a", &[16], 0, 0), ti(b"b", &[8], 0, 32)],
        32,
        &[0; 96],
    ));
    match e {
        GgufError::TensorOverlap {
            ref tensor,
            ref other,
            offset: 32,
            other_end: 64,
            ..
        } => {
            assert_eq!((tensor.as_str(), other.as_str()), ("b", "a"));
            assert!(e.to_string().contains("'b'") && e.to_string().contains("'a'"));
        }
        other => panic!("{other}"),
    }
    // Same offset; listed out of order is fine when disjoint.
    assert!(matches!(
        err(assemble(
            &[],
            &[ti(b"a", &[8], 0, 0), ti(b"b", &[8], 0, 0)],
            32,
            &[0; 64]
        )),
        GgufError::TensorOverlap { .. }
    ));
    let g = Gguf::from_bytes(assemble(
        &[],
        &[ti(b"a", &[8], 0, 32), ti(b"b", &[8], 0, 0)],
        32,
        &[0; 64],
    ))
    .unwrap();
    check_invariants(&g);
    assert_eq!(g.tensors()[0].name, "a");
}

#[test]
fn errors_name_what_and_where() {
    let (file, _) = sample_file();
    let g = Gguf::from_bytes(file.clone()).unwrap();
    // Corrupt the type id of tensor "b.q8_0" and see its name in the message.
    let name_pos = file.windows(6).position(|w| w == b"b.q8_0").unwrap();
    let mut f = file.clone();
    let type_pos = name_pos + 6 + 4 + 16; // name, n_dims, two dims
    f[type_pos..type_pos + 4].copy_from_slice(&77u32.to_le_bytes());
    let e = err(f);
    assert_eq!(e.to_string(), "tensor 'b.q8_0' has unknown ggml type id 77");
    // Truncated inside the value of a key: the message has the key and the offset.
    let key_pos = file.windows(6).position(|w| w == b"t.u64\x0a").unwrap();
    let e = err(file[..key_pos + 5 + 4 + 3].to_vec());
    let msg = e.to_string();
    assert!(
        msg.contains("value of key 't.u64'") && msg.contains(&format!("byte {}", key_pos + 9)),
        "{msg}"
    );
    drop(g);
}

#[test]
fn open_reports_io_errors_and_maps_files() {
    let dir = std::env::temp_dir().join(format!("muser-gguf-open-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let missing = dir.join("missing.gguf");
    match Gguf::open(&missing) {
        Err(GgufError::Io { path, .. }) => assert_eq!(path, missing),
        other => panic!("{other:?}"),
    }
    let empty = dir.join("empty.gguf");
    std::fs::write(&empty, b"").unwrap();
    assert!(matches!(
        Gguf::open(&empty),
        Err(GgufError::Truncated { .. })
    ));
    let (file, _) = sample_file();
    let path = dir.join("sample.gguf");
    std::fs::write(&path, &file).unwrap();
    let g = Gguf::open(&path).unwrap();
    assert_eq!(g.as_bytes(), &file[..]);
    assert_eq!(g.path(), Some(path.as_path()));
    check_invariants(&g);
    // mmap'd tensor data is aligned in memory as well as in the file.
    for t in g.tensors() {
        assert_eq!(g.tensor_data(t).as_ptr() as usize % 32, 0);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
