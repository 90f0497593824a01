#!/usr/bin/env bash
# Syntax-check standalone CUDA programs (host and device code) on a machine without nvcc — the
# device experiments under scripts/device/experiments/ are compiled by nvcc only on the device,
# where a typo costs device time. Uses clang's CUDA front end with the CUDA 12 headers from PyPI
# (nvidia-cuda-runtime-cu12, -cccl-cu12, -nvcc-cu12: headers and libdevice only) in
# $MUSER_CACHE/cuda-headers (default ~/.cache/muser). Installs clang with apt if missing.
# Checks syntax and types only (device side for sm_80: clang 14 knows no sm_90a; inline PTX is
# not checked). The Muser kernels themselves are checked by NVRTC: `muser-cuda`'s compile test.
# Usage: bash scripts/cuda-syntax-check.sh FILE.cu...
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 FILE.cu..." >&2; exit 2; }
cache=${MUSER_CACHE:-$HOME/.cache/muser}/cuda-headers
if ! command -v clang++ > /dev/null; then
  apt-get install -y -q clang > /dev/null
fi
if [ ! -f "$cache/cuda/nvvm/libdevice/libdevice.10.bc" ]; then
  rm -rf "$cache" && mkdir -p "$cache/whl" "$cache/x"
  pip download -q --no-deps -d "$cache/whl" nvidia-cuda-runtime-cu12 nvidia-cuda-cccl-cu12 \
    nvidia-cuda-nvcc-cu12
  for w in "$cache"/whl/*.whl; do (cd "$cache/x" && unzip -qo "$w"); done
  c=$cache/cuda
  mkdir -p "$c/include" "$c/bin" "$c/lib64" "$c/nvvm/libdevice" "$c/stub"
  for d in cuda_runtime cuda_cccl cuda_nvcc; do cp -r "$cache/x/nvidia/$d/include/." "$c/include/"; done
  cp "$cache/x/nvidia/cuda_nvcc/nvvm/libdevice/libdevice.10.bc" "$c/nvvm/libdevice/"
  # clang looks for these; CUDA 12 dropped or moved them (texture references, curand).
  touch "$c/bin/ptxas" "$c/stub/curand_mtgp32_kernel.h"
  chmod +x "$c/bin/ptxas"
fi
rc=0
for f in "$@"; do
  if clang++ -std=c++17 -x cuda --cuda-path="$cache/cuda" --cuda-gpu-arch=sm_80 \
    -Wno-unknown-cuda-version -D__CLANG_CUDA_TEXTURE_INTRINSICS_H__ -I"$cache/cuda/stub" \
    -Xclang -fcuda-allow-variadic-functions -fsyntax-only "$f"; then
    echo "ok: $f"
  else
    echo "FAILED: $f"
    rc=1
  fi
done
exit $rc
