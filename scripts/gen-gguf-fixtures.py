#!/usr/bin/env python3
"""GGUF interop fixtures written by gguf-py, the reference Python implementation.

Uses gguf-py from the pinned llama-cpp-python 0.3.36 sdist (fetched and SHA-256-verified by
scripts/lib/sdist.sh) to write small GGUF files covering every metadata value type, nested
arrays, several tensor types (raw Q4_K/Q6_K/Q8_0/Q5_0/BF16 bytes included) and non-default
alignments, then records with gguf-py's GGUFReader what it reads back, as JSON. The Rust test
crates/muser-gguf/tests/interop_gguf_py.rs checks Muser's reader against that JSON and Muser's
writer against the files byte for byte.

Usage:
  scripts/gen-gguf-fixtures.py              regenerate crates/muser-gguf/tests/data/
  scripts/gen-gguf-fixtures.py --read FILE  print gguf-py's reading of FILE as JSON (the reverse
                                            direction: check a file Muser wrote)

Needs python3 with numpy. MUSER_CACHE (default ~/.cache/muser) holds the sdist.
"""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "crates" / "muser-gguf" / "tests" / "data"
SDIST_NAME = "llama_cpp_python-0.3.36.tar.gz"


def cache_dir() -> Path:
    return Path(os.environ.get("MUSER_CACHE", Path.home() / ".cache" / "muser"))


def fetch_sdist() -> Path:
    """Fetch/verify/unpack the pinned sdist with the shared bash helper; return its root."""
    sdist_dir = cache_dir() / "sdist"
    root = subprocess.run(
        ["bash", "-c", 'source "$1/scripts/lib/sdist.sh" && muser_fetch_sdist "$2"', "_",
         str(REPO), str(sdist_dir)],
        check=True, capture_output=True, text=True,
    ).stdout.strip().splitlines()[-1]
    return Path(root)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def import_gguf():
    root = fetch_sdist()
    sys.path.insert(0, str(root / "vendor" / "llama.cpp" / "gguf-py"))
    import gguf  # noqa: E402

    return gguf, root


def canonical(gguf, parts, idx, gtype):
    """Decode one value from GGUFReader's raw field parts, keeping array nesting (gguf-py's
    own contents() flattens nested arrays). Returns (json value, next part index)."""
    T = gguf.GGUFValueType
    if gtype == T.STRING:
        return {"type": "STRING", "value": bytes(parts[idx + 1]).decode("utf-8")}, idx + 2
    if gtype == T.ARRAY:
        itype = T(int(parts[idx][0]))
        n = int(parts[idx + 1][0])
        idx += 2
        items = []
        for _ in range(n):
            item, idx = canonical(gguf, parts, idx, itype)
            items.append(item)
        return {"type": "ARRAY", "elem": itype.name, "items": items}, idx
    arr = parts[idx]
    v = arr[0]
    if gtype in (T.FLOAT32, T.FLOAT64):
        bits = int(arr.view("<u4" if gtype == T.FLOAT32 else "<u8")[0])
        return {"type": gtype.name, "bits": bits, "approx": repr(float(v))}, idx + 1
    if gtype == T.BOOL:
        return {"type": "BOOL", "value": bool(v)}, idx + 1
    return {"type": gtype.name, "value": int(v)}, idx + 1


def describe(gguf, path: Path) -> dict:
    """Everything GGUFReader reads from `path`, as JSON-able data."""
    r = gguf.GGUFReader(path)
    metadata = []
    for key, field in r.fields.items():
        if key.startswith("GGUF."):
            continue
        value, end = canonical(gguf, field.parts, 3, gguf.GGUFValueType(int(field.parts[2][0])))
        assert end == len(field.parts), f"{key}: decoded {end} of {len(field.parts)} parts"
        metadata.append({"key": key, "value": value})
    tensors = []
    for t in r.tensors:
        data = t.data.tobytes()
        assert len(data) == t.n_bytes
        tensors.append({
            "name": t.name,
            "type": t.tensor_type.name,
            "type_id": int(t.tensor_type),
            "shape": [int(d) for d in t.shape],
            "n_elements": int(t.n_elements),
            "n_bytes": int(t.n_bytes),
            "data_offset": int(t.data_offset),
            "sha256": hashlib.sha256(data).hexdigest(),
        })
    version = int(r.fields["GGUF.version"].parts[0][0])
    return {
        "file": path.name,
        "size": path.stat().st_size,
        "sha256": sha256_file(path),
        "version": version,
        "alignment": int(r.alignment),
        "data_offset": int(r.data_offset),
        "metadata": metadata,
        "tensors": tensors,
    }


def raw(rng, np, n_rows, bytes_per_row):
    return rng.integers(0, 256, size=(n_rows, bytes_per_row), dtype=np.uint8)


def write_all_types(gguf, np, path: Path):
    T = gguf.GGUFValueType
    Q = gguf.GGMLQuantizationType
    rng = np.random.default_rng(20261130)
    w = gguf.GGUFWriter(path, "testarch")
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -100)
    w.add_uint16("t.u16", 65535)
    w.add_int16("t.i16", -32768)
    w.add_uint32("t.u32", 4294967295)
    w.add_int32("t.i32", -2147483648)
    w.add_float32("t.f32", 1e-6)
    w.add_uint64("t.u64", 18446744073709551615)
    w.add_int64("t.i64", -9223372036854775808)
    w.add_float64("t.f64", 3.141592653589793)
    w.add_bool("t.bool.true", True)
    w.add_bool("t.bool.false", False)
    w.add_string("t.string", "héllo ✓ \"quoted\"\n")
    w.add_float32("t.f32.nan", float("nan"))
    w.add_float64("t.f64.neginf", float("-inf"))
    w.add_uint32("testarch.block_count", 2)
    w.add_float32("testarch.attention.layer_norm_rms_epsilon", 1e-5)
    arrays = {
        T.UINT8: [0, 1, 255], T.INT8: [-128, 0, 127], T.UINT16: [0, 65535],
        T.INT16: [-32768, 32767], T.UINT32: [0, 4294967295], T.INT32: [-5, 5, 0],
        T.FLOAT32: [0.5, -2.25, 1e30], T.BOOL: [True, False, True],
        T.STRING: ["<pad>", "", "日本", "a b"], T.UINT64: [18446744073709551615, 0],
        T.INT64: [-9223372036854775808, 9223372036854775807], T.FLOAT64: [1e-300, -0.0],
    }
    for t, vals in arrays.items():
        w.add_key_value(f"t.array.{t.name.lower()}", vals, T.ARRAY, sub_type=t)
    w.add_array("t.nested.i32", [[1, 2, 3], [4, 5]])
    w.add_array("t.nested.mixed", [[1, 2], ["x", "y"], [True]])
    w.add_array("t.nested.deep", [[[1.5]], [[2.5, 3.5], [4.5]]])
    w.add_array("tokenizer.ggml.tokens", ["<pad>", "<eos>", "<bos>", "▁the", "\u00e9"])
    w.add_tensor("t.f32", rng.standard_normal((3, 4)).astype(np.float32))
    w.add_tensor("t.f16", rng.standard_normal((2, 8)).astype(np.float16))
    w.add_tensor("t.f64", rng.standard_normal(5).astype(np.float64))
    w.add_tensor("t.i8", rng.integers(-128, 127, (2, 2, 2), dtype=np.int8))
    w.add_tensor("t.i16", rng.integers(-1000, 1000, 3, dtype=np.int16))
    w.add_tensor("t.i32", rng.integers(-1000, 1000, (2, 3, 2, 2), dtype=np.int32))
    w.add_tensor("t.i64", rng.integers(-1000, 1000, 2, dtype=np.int64))
    w.add_tensor("t.q8_0", raw(rng, np, 2, 34 * 2), raw_dtype=Q.Q8_0)
    w.add_tensor("t.q5_0", raw(rng, np, 1, 22), raw_dtype=Q.Q5_0)
    w.add_tensor("t.q4_k", raw(rng, np, 3, 144), raw_dtype=Q.Q4_K)
    w.add_tensor("t.q6_k", raw(rng, np, 2, 210 * 2), raw_dtype=Q.Q6_K)
    w.add_tensor("t.bf16", raw(rng, np, 2, 2 * 3), raw_dtype=Q.BF16)
    finish(w)


def write_aligned(gguf, np, path: Path, alignment: int):
    Q = gguf.GGMLQuantizationType
    rng = np.random.default_rng(alignment)
    w = gguf.GGUFWriter(path, "testarch")
    w.add_custom_alignment(alignment)
    w.add_string("general.name", f"alignment {alignment}")
    w.add_tensor("a.f32", rng.standard_normal(3).astype(np.float32))
    w.add_tensor("b.q8_0", raw(rng, np, 1, 34), raw_dtype=Q.Q8_0)
    w.add_tensor("c.f16", rng.standard_normal((5, 1)).astype(np.float16))
    w.add_tensor("d.q4_k", raw(rng, np, 1, 144), raw_dtype=Q.Q4_K)
    finish(w)


def write_meta_only(gguf, np, path: Path):
    w = gguf.GGUFWriter(path, "testarch")
    w.add_string("general.name", "metadata only")
    w.add_array("t.scores", [0.0, -1.5])
    finish(w)


def finish(w):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    gguf, root = import_gguf()
    if len(sys.argv) == 3 and sys.argv[1] == "--read":
        json.dump(describe(gguf, Path(sys.argv[2])), sys.stdout, indent=1, ensure_ascii=False)
        print()
        return
    if len(sys.argv) != 1:
        sys.exit(__doc__)
    import numpy as np

    OUT.mkdir(parents=True, exist_ok=True)
    files = {
        "gguf_py_all_types.gguf": lambda p: write_all_types(gguf, np, p),
        "gguf_py_align64.gguf": lambda p: write_aligned(gguf, np, p, 64),
        "gguf_py_align1.gguf": lambda p: write_aligned(gguf, np, p, 1),
        "gguf_py_meta_only.gguf": lambda p: write_meta_only(gguf, np, p),
    }
    rows = []
    for name, write in files.items():
        path = OUT / name
        write(path)
        desc = describe(gguf, path)
        with open(path.with_suffix(".json"), "w", encoding="utf-8") as f:
            json.dump(desc, f, indent=1, ensure_ascii=False)
            f.write("\n")
        rows.append(f"| `{name}` | {desc['size']} | `{desc['sha256']}` |")

    tarball = cache_dir() / "sdist" / SDIST_NAME
    gguf_version = next(
        line.split('"')[1]
        for line in (root / "vendor/llama.cpp/gguf-py/pyproject.toml").read_text().splitlines()
        if line.startswith("version")
    )
    receipt = "\n".join([
        "# GGUF interop fixtures — receipt",
        "",
        "Written by gguf-py's `GGUFWriter` and read back by its `GGUFReader` (the `.json` next to",
        "each file). Regenerate with `python3 scripts/gen-gguf-fixtures.py` (needs numpy); the",
        "output is deterministic.",
        "",
        f"- sdist: `{SDIST_NAME}`, SHA-256 `{sha256_file(tarball)}`",
        "- llama.cpp commit: `0c1e57098bba43ac29e6e3b677cdceebdd22334f` (vendored in the sdist)",
        f"- gguf-py version: {gguf_version} (`vendor/llama.cpp/gguf-py`)",
        f"- numpy version: {np.__version__}; python {sys.version.split()[0]}",
        "- command: `python3 scripts/gen-gguf-fixtures.py`",
        "",
        "| file | bytes | SHA-256 |",
        "| --- | --- | --- |",
        *rows,
        "",
    ])
    (OUT / "RECEIPT.md").write_text(receipt, encoding="utf-8")
    print(receipt)


if __name__ == "__main__":
    main()
