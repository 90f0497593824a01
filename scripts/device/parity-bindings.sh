#!/usr/bin/env bash
# Prepare here (PyPI reachable) what scripts/parity.py needs on the device for llama.cpp CUDA's
# logits: .devllama/bindings/ (git-ignored, carried with the .devllama/ folder) holding the pinned
# sdist's pure-Python ctypes bindings `llama_cpp/` (scripts/lib/sdist.sh checks its SHA-256) and
# `diskcache` (which llama_cpp imports; the device has no internet). `cuda-final.sh` and
# `cuda-issue4.sh` pass it as `--bindings`; LD_LIBRARY_PATH there points at the prebuilt CUDA
# build's libllama.so (shared/comparator).
# Usage: bash scripts/device/parity-bindings.sh [CACHE]   (default: ${MUSER_CACHE:-~/.cache/muser})
set -euo pipefail
cd "$(dirname "$0")/../.."
cache=${1:-${MUSER_CACHE:-$HOME/.cache/muser}}
# shellcheck source=scripts/lib/sdist.sh
source scripts/lib/sdist.sh
root=$(muser_fetch_sdist "$cache/sdist")
dest=.devllama/bindings
rm -rf "$dest" && mkdir -p "$dest"
cp -r "$root/llama_cpp" "$dest/"
python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$cache/wheels" diskcache==5.6.3
python3 -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" \
  "$cache/wheels/diskcache-5.6.3-py3-none-any.whl" "$dest"
find "$dest" -name '__pycache__' -prune -exec rm -rf {} +
du -sh "$dest"
