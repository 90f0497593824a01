#!/usr/bin/env python3
"""Generate muser-quant's golden fixtures from the pinned llama.cpp's gguf-py.

Usage:  python3 scripts/gen-quant-golden.py            (from the repository root)

What it writes into crates/muser-quant/tests/golden/:
  manifest.json   one entry per (operation, type): the edge-case fixture file names and a
                  "stream" description (PRNG seed, size, SHA-256 of the generated input and
                  of gguf-py's output). The Rust test regenerates each stream with the same
                  PRNG and compares digests, so thousands of blocks are covered without
                  storing them.
  *.bin / *.f32   edge-case inputs and gguf-py's outputs, stored in full (small).
  receipt.json    sdist SHA-256, gguf-py version, numpy/python versions, the command.

PRNG (mirrored in crates/muser-quant/tests/golden.rs): splitmix64; bytes are successive
outputs in little-endian order. Raw weight blocks are random bytes whose f16 fields are
made finite (an exponent of 31 is replaced by 15). Float inputs: per group of 32 values an
exponent k = (next % 41) - 20, then each value is (2*(next >> 40) - 2^24) * 2^(k-24), which
is exact in f32.

Requires python3 with numpy. gguf-py comes from the pinned sdist, unpacked under
${MUSER_CACHE:-$HOME/.cache/muser}/sdist (fetched and SHA-verified by scripts/lib/sdist.sh
when missing).
"""

import hashlib
import json
import os
import platform
import subprocess
import sys

SDIST_NAME = "llama_cpp_python-0.3.36"
SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(REPO, "crates", "muser-quant", "tests", "golden")
MASK = (1 << 64) - 1


def sdist_root():
    cache = os.environ.get("MUSER_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "muser")
    sdist_dir = os.path.join(cache, "sdist")
    # Fetches if missing and always verifies the tarball's SHA-256.
    helper = os.path.join(REPO, "scripts", "lib", "sdist.sh")
    root = subprocess.run(
        ["bash", "-c", 'source "$1" && muser_fetch_sdist "$2"', "sdist", helper, sdist_dir],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    tarball = os.path.join(sdist_dir, SDIST_NAME + ".tar.gz")
    with open(tarball, "rb") as f:
        got = hashlib.sha256(f.read()).hexdigest()
    if got != SDIST_SHA256:
        sys.exit(f"refusing: {tarball} has SHA-256 {got}, expected {SDIST_SHA256}")
    return root


ROOT = sdist_root()
GGUF_PY = os.path.join(ROOT, "vendor", "llama.cpp", "gguf-py")
sys.path.insert(0, GGUF_PY)

import numpy as np  # noqa: E402
import gguf  # noqa: E402
from gguf import quants  # noqa: E402

T = gguf.GGMLQuantizationType


class SplitMix64:
    def __init__(self, seed):
        self.s = seed & MASK

    def next(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & MASK
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def bytes(self, n):
        out = bytearray()
        while len(out) < n:
            out += self.next().to_bytes(8, "little")
        return bytes(out[:n])


# Block size in bytes and the byte offsets of f16 fields inside one block.
FORMATS = {
    "f16": (T.F16, 2, [0]),
    "bf16": (T.BF16, 2, []),
    "q8_0": (T.Q8_0, 34, [0]),
    "q5_0": (T.Q5_0, 22, [0]),
    "q4_K": (T.Q4_K, 144, [0, 2]),
    "q5_K": (T.Q5_K, 176, [0, 2]),
    "q6_K": (T.Q6_K, 210, [208]),
}


def sanitize(raw, name):
    """Make every f16 (or bf16) field finite: exponent all-ones -> 15 (bf16: 127)."""
    _, size, offs = FORMATS[name]
    b = bytearray(raw)
    for base in range(0, len(b), size):
        if name == "bf16":
            v = b[base] | (b[base + 1] << 8)
            if (v >> 7) & 0xFF == 0xFF:
                v = (v & 0x807F) | (0x7F << 7)
            b[base:base + 2] = v.to_bytes(2, "little")
        for o in offs:
            v = b[base + o] | (b[base + o + 1] << 8)
            if (v >> 10) & 0x1F == 0x1F:
                v = (v & 0x83FF) | (0x0F << 10)
            b[base + o:base + o + 2] = v.to_bytes(2, "little")
    return bytes(b)


def floats(rng, n):
    """n exact f32 values, scaled per group of 32 by 2^k, k in [-20, 20]."""
    out = np.empty(n, dtype=np.float32)
    for g in range(0, n, 32):
        k = rng.next() % 41 - 20
        for i in range(g, min(g + 32, n)):
            m = 2 * (rng.next() >> 40) - (1 << 24)
            out[i] = np.float32(m * 2.0 ** (k - 24))
    return out


def float_bits(rng, n, allow_nan):
    """n random f32 bit patterns (low 32 bits of each output); NaN replaced unless allowed."""
    out = np.empty(n, dtype=np.uint32)
    for i in range(n):
        v = rng.next() & 0xFFFFFFFF
        if not allow_nan and (v >> 23) & 0xFF == 0xFF and (v & 0x7FFFFF) != 0:
            v = (v & 0x807FFFFF) | (0x7E << 23)
        out[i] = v
    return out.view(np.float32)


def h16(v):
    return int(v).to_bytes(2, "little")


def edge_blocks(name):
    """Hand-picked blocks: zero, max/min codes, extreme and subnormal scales."""
    _, size, offs = FORMATS[name]
    blocks = []

    if name == "f16":
        vals = [0x0000, 0x8000, 0x3C00, 0xBC00, 0x7BFF, 0xFBFF, 0x0001, 0x8001, 0x03FF, 0x0400,
                0x7C00, 0xFC00, 0x3555, 0x1234]
        return b"".join(h16(v) for v in vals)
    if name == "bf16":
        vals = [0x0000, 0x8000, 0x3F80, 0xBF80, 0x7F7F, 0xFF7F, 0x0001, 0x8001, 0x007F, 0x0080,
                0x7F80, 0xFF80, 0x3EAB, 0x1234]
        return b"".join(h16(v) for v in vals)
    # (fill byte or "ramp" from a start byte, f16 field values; the first n fields are used)
    cases = [
        (0x00, [0x3C00, 0x3C00]),            # zero codes, unit scales
        (0xFF, [0x3C00, 0x3C00]),            # max codes
        (0xFF, [0xBC00, 0x7BFF]),            # negative d, largest dmin
        (0x55, [0x7BFF, 0xBC00]),            # largest d, negative dmin
        (0xAA, [0x0001, 0x8001]),            # subnormal scales
        (0xFF, [0x0000, 0x0000]),            # zero scales, max codes
        (("ramp", 0), [0x3555, 0x3C00]),
        (("ramp", 128), [0x7BFF, 0x0001]),
    ]
    for fill, f16s in cases:
        if isinstance(fill, tuple):
            b = bytearray((fill[1] + i) & 0xFF for i in range(size))
        else:
            b = bytearray([fill] * size)
        for o, v in zip(offs, f16s):
            b[o:o + 2] = h16(v)
        blocks.append(bytes(b))
    return b"".join(blocks)


def dequant(name, raw):
    qtype, size, _ = FORMATS[name]
    arr = np.frombuffer(raw, dtype=np.uint8).reshape(-1, size)
    if name in ("f16", "bf16"):
        arr = arr.reshape(1, -1)
    out = quants.dequantize(arr, qtype).astype(np.float32, copy=False)
    return out.reshape(-1).astype("<f4").tobytes()


def quant(name, x):
    qtype = FORMATS[name][0]
    out = quants.quantize(np.ascontiguousarray(x, dtype=np.float32).reshape(1, -1), qtype)
    return np.ascontiguousarray(out).view(np.uint8).reshape(-1).tobytes()


def sha(b):
    return hashlib.sha256(b).hexdigest()


def edge_inputs(name):
    """Quantizer edge cases, in groups of 32 values."""
    g = []
    z = [0.0] * 32
    g.append(z)
    ties = [127.0] + [k + 0.5 for k in range(-15, 16)]  # amax 127: d = 1, exact ties
    g.append(ties)
    g.append([-16.0] + [k + 0.5 for k in range(-15, 16)])  # q5_0: max = -16, d = 1
    g.append([16.0] + [-(k + 0.49) for k in range(-15, 16)])
    one = [0.0] * 32
    one[7] = -3.0
    g.append(one)
    g.append([1e-30] * 16 + [-1e-30] * 16)
    g.append([65504.0, 65519.0, 65520.0, -70000.0, 1e-8, 6e-8, 5.96e-8, -2.98e-8] * 4)
    g.append([1.0 + k / 4096.0 for k in range(32)])
    g.append([3.0e38, -3.0e38] + [1.0] * 30)
    return np.array([v for grp in g for v in grp], dtype=np.float32)


def main():
    np.seterr(over="ignore")  # f16 overflow to inf is part of the edge cases
    os.makedirs(OUT, exist_ok=True)
    manifest = {"dequantize": [], "quantize": []}
    # Dequantize: edge blocks stored in full, plus a PRNG stream checked by digest.
    stream_blocks = {"f16": 32768, "bf16": 32768, "q8_0": 2048, "q5_0": 2048,
                     "q4_K": 512, "q5_K": 512, "q6_K": 512}
    for i, name in enumerate(FORMATS):
        _, size, _ = FORMATS[name]
        edge = edge_blocks(name)
        edge_out = dequant(name, edge)
        with open(os.path.join(OUT, f"{name}.edge.bin"), "wb") as f:
            f.write(edge)
        with open(os.path.join(OUT, f"{name}.edge.f32"), "wb") as f:
            f.write(edge_out)
        seed = 0x5EED_0000 + i
        raw = sanitize(SplitMix64(seed).bytes(stream_blocks[name] * size), name)
        manifest["dequantize"].append({
            "type": name,
            "edge_input": f"{name}.edge.bin",
            "edge_output": f"{name}.edge.f32",
            "stream": {"seed": seed, "bytes": len(raw), "input_sha256": sha(raw),
                       "output_sha256": sha(dequant(name, raw))},
        })
    # Quantize: the types gguf-py implements and Muser follows bit for bit.
    for i, name in enumerate(["q8_0", "q5_0", "f16", "bf16"]):
        x = edge_inputs(name)
        xb = x.astype("<f4").tobytes()
        with open(os.path.join(OUT, f"{name}.qedge.f32"), "wb") as f:
            f.write(xb)
        with open(os.path.join(OUT, f"{name}.qedge.bin"), "wb") as f:
            f.write(quant(name, x))
        seed = 0x0A0A_0000 + i
        xs = floats(SplitMix64(seed), 32 * 2048)
        entry = {
            "type": name,
            "edge_input": f"{name}.qedge.f32",
            "edge_output": f"{name}.qedge.bin",
            "stream": {"seed": seed, "values": len(xs), "input_sha256": sha(xs.astype("<f4").tobytes()),
                       "output_sha256": sha(quant(name, xs))},
        }
        if name in ("f16", "bf16"):
            bits_seed = 0x0B0B_0000 + i
            xr = float_bits(SplitMix64(bits_seed), 32 * 1024, allow_nan=(name == "bf16"))
            entry["bits_stream"] = {"seed": bits_seed, "values": len(xr), "allow_nan": name == "bf16",
                                    "input_sha256": sha(xr.astype("<f4").tobytes()),
                                    "output_sha256": sha(quant(name, xr))}
        manifest["quantize"].append(entry)
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    with open(os.path.join(GGUF_PY, "pyproject.toml")) as f:
        version = next((line.split('"')[1] for line in f if line.startswith("version")), "unknown")
    with open(os.path.join(GGUF_PY, "gguf", "quants.py"), "rb") as f:
        quants_sha = sha(f.read())
    receipt = {
        "generator": "scripts/gen-quant-golden.py",
        "command": "python3 scripts/gen-quant-golden.py",
        "sdist": SDIST_NAME + ".tar.gz",
        "sdist_sha256": SDIST_SHA256,
        "llama_cpp_commit": "0c1e57098bba43ac29e6e3b677cdceebdd22334f",
        "gguf_py_version": version,
        "gguf_py_quants_py_sha256": quants_sha,
        "numpy_version": np.__version__,
        "python_version": platform.python_version(),
    }
    with open(os.path.join(OUT, "receipt.json"), "w") as f:
        json.dump(receipt, f, indent=1)
        f.write("\n")
    total = sum(os.path.getsize(os.path.join(OUT, p)) for p in os.listdir(OUT))
    print(f"wrote {OUT} ({total} bytes)")


if __name__ == "__main__":
    main()
