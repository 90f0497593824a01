#!/usr/bin/env bash
# Fetch NVIDIA's NVRTC (the runtime CUDA compiler library, no GPU needed) from PyPI so tests can
# compile Muser's kernel sources on machines without CUDA (CI): `registry::tests::
# every_module_compiles_with_nvrtc`. Downloads the pinned wheel (SHA-256 verified), unpacks its
# libraries into the cache, prints the library folder. Idempotent.
set -euo pipefail
VERSION=13.0.88
WHEEL=nvidia_cuda_nvrtc-$VERSION-py3-none-manylinux2010_x86_64.manylinux_2_12_x86_64.whl
SHA256=ad9b6d2ead2435f11cbb6868809d2adeeee302e9bb94bcf0539c7a40d80e8575
CACHE="${MUSER_CACHE:-$HOME/.cache/muser}/nvrtc-$VERSION"
LIB="$CACHE/nvidia/cu13/lib"
if [ -f "$LIB/libnvrtc.so.13" ]; then echo "$LIB"; exit 0; fi
mkdir -p "$CACHE"
if [ ! -f "$CACHE/$WHEEL" ]; then
  "${PYTHON:-python3}" -m pip download --quiet --no-deps --only-binary=:all: \
    --platform manylinux_2_12_x86_64 --python-version 3.12 -d "$CACHE" "nvidia-cuda-nvrtc==$VERSION" >&2
fi
got=$(sha256sum "$CACHE/$WHEEL" | cut -d' ' -f1)
if [ "$got" != "$SHA256" ]; then
  echo "refusing: $CACHE/$WHEEL has SHA-256 $got, expected $SHA256" >&2
  exit 1
fi
"${PYTHON:-python3}" - "$CACHE/$WHEEL" "$CACHE" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for m in z.namelist():
        if m.startswith("nvidia/cu13/lib/"):
            z.extract(m, sys.argv[2])
PY
echo "$LIB"
