#!/usr/bin/env python3
"""Cross-check `muser inspect --json` against the pinned comparator's own GGUF reader (gguf-py
from the llama-cpp-python 0.3.36 sdist, BRIEF §2).

For each GGUF given, both readers must agree on: GGUF version, alignment, data offset, every
metadata key in order with its value type and value (arrays: element type, length, and every
element of arrays up to 64 long / the first 8 otherwise), and every tensor's name, type, shape,
element count, byte size and absolute offset.

Usage: scripts/check-inspect.py MUSER_BINARY FILE.gguf [FILE.gguf ...]
Needs numpy; gguf-py is taken from the sdist (fetched and SHA-verified by scripts/lib/sdist.sh).
Exit status 0 when everything agrees, 1 with a list of differences otherwise.
"""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def gguf_py_path() -> Path:
    cache = Path(os.environ.get("MUSER_CACHE", Path.home() / ".cache" / "muser"))
    root = subprocess.run(
        ["bash", "-c", f'source "{HERE}/lib/sdist.sh" && muser_fetch_sdist "{cache}/sdist"'],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    return Path(root) / "vendor" / "llama.cpp" / "gguf-py"


sys.path.insert(0, str(gguf_py_path()))
from gguf import GGUFReader, GGUFValueType  # noqa: E402

TYPE_NAMES = {
    GGUFValueType.UINT8: "u8", GGUFValueType.INT8: "i8", GGUFValueType.UINT16: "u16",
    GGUFValueType.INT16: "i16", GGUFValueType.UINT32: "u32", GGUFValueType.INT32: "i32",
    GGUFValueType.FLOAT32: "f32", GGUFValueType.BOOL: "bool", GGUFValueType.STRING: "string",
    GGUFValueType.ARRAY: "array", GGUFValueType.UINT64: "u64", GGUFValueType.INT64: "i64",
    GGUFValueType.FLOAT64: "f64",
}


def same_scalar(a, b) -> bool:
    if isinstance(a, list) or isinstance(b, list):
        return (isinstance(a, list) and isinstance(b, list) and len(a) == len(b)
                and all(same_scalar(x, y) for x, y in zip(a, b)))
    if isinstance(a, str) and a in ("NaN", "inf", "-inf") and not isinstance(b, str):
        return a == ("NaN" if math.isnan(b) else "inf" if b > 0 else "-inf") if not math.isfinite(b) else False
    if isinstance(a, float) or isinstance(b, float):
        a, b = float(a), float(b)
        return a == b or (math.isnan(a) and math.isnan(b)) or abs(a - b) <= 1e-6 * max(abs(a), abs(b))
    return a == b


def check(binary: str, path: str) -> list[str]:
    out = subprocess.run([binary, "inspect", "--json", path], check=True, capture_output=True, text=True).stdout
    ours = json.loads(out)
    r = GGUFReader(path)
    diffs: list[str] = []

    def expect(what, a, b):
        differ = a != b if isinstance(a, (list, dict)) else not same_scalar(a, b)
        if differ:
            diffs.append(f"{path}: {what}: muser {a!r} vs gguf-py {b!r}")

    expect("version", ours["gguf_version"], int(r.fields["GGUF.version"].parts[0][0]))
    expect("alignment", ours["alignment"], int(r.alignment))
    expect("data_offset", ours["data_offset"], int(r.data_offset))

    theirs_kv = [(k, f) for k, f in r.fields.items() if not k.startswith("GGUF.")]
    expect("metadata key count", len(ours["metadata"]), len(theirs_kv))
    for mine, (key, field) in zip(ours["metadata"], theirs_kv):
        expect("key order", mine["key"], key)
        ty = TYPE_NAMES[field.types[0]]
        expect(f"{key} type", mine["type"], ty)
        value = field.contents()
        if ty != "array":
            expect(f"{key} value", mine["value"], value)
            continue
        n = len(field.data)
        mv = mine["value"]
        if len(field.types) > 2 and isinstance(mv, list):
            # gguf-py's reader flattens nested arrays to their leaves (see its FIXME in
            # ReaderField.contents); compare our nested value flattened the same way.
            def flat(x):
                return [z for y in x for z in flat(y)] if isinstance(x, list) else [x]
            mv = flat(mv)
        if isinstance(mv, dict):
            expect(f"{key} length", mv["len"], n)
            expect(f"{key} element type", mv["element_type"], TYPE_NAMES[field.types[-1]])
            head = mv["head"]
            theirs_head = value[: len(head)] if isinstance(value, list) else []
        else:
            expect(f"{key} length", len(mv), n)
            head, theirs_head = mv, value if isinstance(value, list) else []
        for i, (x, y) in enumerate(zip(head, theirs_head)):
            if len(field.types) > 2 and isinstance(x, str):
                continue  # gguf-py returns raw bytes for strings nested in arrays
            if not same_scalar(x, y):
                diffs.append(f"{path}: {key}[{i}]: muser {x!r} vs gguf-py {y!r}")
                break

    expect("tensor count", len(ours["tensors"]), len(r.tensors))
    for mine, t in zip(ours["tensors"], r.tensors):
        expect("tensor order", mine["name"], t.name)
        expect(f"{t.name} type", mine["type"].lower(), t.tensor_type.name.lower())
        expect(f"{t.name} shape", mine["shape"], [int(d) for d in t.shape])
        expect(f"{t.name} elements", mine["elements"], int(t.n_elements))
        expect(f"{t.name} bytes", mine["bytes"], int(t.n_bytes))
        expect(f"{t.name} offset", mine["offset"], int(t.data_offset))
    total = sum(int(t.n_bytes) for t in r.tensors)
    expect("total bytes", ours["totals"]["bytes"], total)
    return diffs


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    binary, files = sys.argv[1], sys.argv[2:]
    all_diffs = []
    for f in files:
        d = check(binary, f)
        if d:
            print(f"DIFF {f}: {len(d)} differences")
        else:
            print(f"OK   {f}: muser inspect agrees with gguf-py")
        all_diffs += d
    for d in all_diffs[:50]:
        print("  " + d)
    return 1 if all_diffs else 0


if __name__ == "__main__":
    sys.exit(main())
