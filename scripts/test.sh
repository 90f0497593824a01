#!/usr/bin/env bash
# Muser's test command (the README's second command; CI runs it from .ci/run).
#
# 1. fetches the default model (idempotent) so tests that read the real gemma-3-270m run;
# 2. fetches NVRTC (PyPI wheel) so the CUDA kernel sources are compiled even without a GPU;
#    GPU tests skip loudly ("skipping: no CUDA device") and run on the device;
# 2b. runs every crate's unit and integration tests;
# 3. cross-checks `muser inspect` against the pinned comparator's gguf-py on the real model,
#    a freshly forged tiny model, and the gguf-py-written fixtures.
# Tests that need the real model or the sdist fail (not skip) here: MUSER_REQUIRE_MODELS=1.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -c 'import numpy' 2>/dev/null || python3 -m pip install --quiet numpy
MODEL=$(scripts/fetch-default-model.sh)
# The pinned comparator sdist (gguf-py for interop tests), SHA-256 verified.
source scripts/lib/sdist.sh
muser_fetch_sdist "${MUSER_CACHE:-$HOME/.cache/muser}/sdist" >/dev/null
export MUSER_GEMMA_GGUF="$MODEL"
export MUSER_REQUIRE_MODELS=1
# NVRTC from PyPI (a library, no GPU needed): the kernel sources are compiled by the tests.
NVRTC_LIB=$(scripts/fetch-nvrtc.sh)
export LD_LIBRARY_PATH="$NVRTC_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export MUSER_REQUIRE_NVRTC=1

cargo test --workspace
# The GPU tests again, uncaptured: without a CUDA device each says "skipping: no CUDA device".
cargo test -q -p muser-cuda --test kernels -- --nocapture
cargo test -q -p muser-engine --test cuda_route -- --nocapture

cargo build --bin muser
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
target/debug/muser forge --preset tiny --seed 1 -o "$tmp/tiny.gguf"
python3 scripts/check-inspect.py target/debug/muser "$MODEL" "$tmp/tiny.gguf" crates/muser-gguf/tests/data/*.gguf
echo "all tests passed"
