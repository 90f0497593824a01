#!/usr/bin/env python3
"""Full logit rows from the pinned llama.cpp, for accuracy measurements (BRIEF §2).

Evaluates a token-id sequence (teacher-forced, one llama_decode over the whole sequence in
n_batch chunks) with the sdist's own pure-Python ctypes bindings (`llama_cpp/` from
llama-cpp-python 0.3.36) against a libllama.so built from the same sdist, and writes every
position's logits as raw little-endian f32, `[n_tokens][n_vocab]`, plus a JSON receipt next to it.

The context is created with llama.cpp's *own* defaults (flash attention AUTO, f16 K/V cache), not
the Python wrapper's (which forces flash attention off): the wrapper's DISABLED constant is
re-pointed at AUTO before the model is built.

Usage:
  comparator-logits.py --lib DIR --model M.gguf --tokens T.json --out L.f32 [--threads N] [--gpu]
  DIR holds libllama.so (CPU: ~/.cache/muser/comparator-cpu/build/bin; CUDA: the unpacked prebuilt).
  T.json is a JSON array of token ids (what `muser eval --tokens` reads).
"""
import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def sdist_root() -> Path:
    cache = Path(os.environ.get("MUSER_CACHE", Path.home() / ".cache" / "muser"))
    out = subprocess.run(
        ["bash", "-c", f'source "{HERE}/lib/sdist.sh" && muser_fetch_sdist "{cache}/sdist"'],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    return Path(out)


def sha256(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--gpu", action="store_true", help="offload all layers (CUDA build)")
    ap.add_argument("--bindings", help="folder holding the sdist's llama_cpp/ (default: the sdist)")
    args = ap.parse_args()

    lib = Path(args.lib).resolve()
    os.environ["LLAMA_CPP_LIB_PATH"] = str(lib)
    os.environ["LD_LIBRARY_PATH"] = str(lib) + ":" + os.environ.get("LD_LIBRARY_PATH", "")
    sys.path.insert(0, args.bindings or str(sdist_root()))
    import llama_cpp  # noqa: E402

    # Build the context with llama.cpp's default flash-attention mode (AUTO).
    llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED = llama_cpp.LLAMA_FLASH_ATTN_TYPE_AUTO
    from llama_cpp import Llama  # noqa: E402

    ids = json.loads(Path(args.tokens).read_text())
    n = len(ids)
    llm = Llama(
        model_path=args.model,
        n_ctx=max(n, 16),
        n_batch=512,
        n_ubatch=512,
        n_threads=args.threads,
        n_threads_batch=args.threads,
        n_gpu_layers=99 if args.gpu else 0,
        logits_all=True,
        flash_attn=False,  # -> AUTO, see above
        verbose=False,
    )
    llm.eval(ids)
    scores = llm.scores[:n, :]
    import numpy as np  # noqa: E402  (after the model exists: see comparator/README)

    np.ascontiguousarray(scores, dtype="<f4").tofile(args.out)
    receipt = {
        "what": "llama.cpp logit rows (teacher-forced)",
        "model": str(Path(args.model).resolve()),
        "model_sha256": sha256(Path(args.model)),
        "tokens": n,
        "n_vocab": int(scores.shape[1]),
        "libllama": str(lib / "libllama.so"),
        "libllama_sha256": sha256(lib / "libllama.so"),
        "llama_cpp_commit": "0c1e57098bba43ac29e6e3b677cdceebdd22334f",
        "threads": args.threads,
        "gpu": args.gpu,
        "flash_attn": "auto (llama.cpp default)",
        "n_batch": 512,
        "host": platform.node(),
        "machine": platform.machine(),
    }
    Path(args.out + ".json").write_text(json.dumps(receipt, indent=2) + "\n")
    print(f"wrote {args.out}: {n} x {scores.shape[1]} logits")
    return 0


if __name__ == "__main__":
    sys.exit(main())
