#!/usr/bin/env bash
# Build the pinned llama.cpp CPU comparator from the PyPI sdist (BRIEF §2).
#
# - Verifies the sdist SHA-256 and refuses on mismatch.
# - Never overwrites an existing build or receipt: pick a new DEST to rebuild.
# - Writes DEST/receipt.json: sdist SHA, llama.cpp commit, compiler, flags, binary SHA-256s.
#
# Usage: scripts/build-comparator-cpu.sh [DEST]   (default: ${MUSER_CACHE:-~/.cache/muser}/comparator-cpu)
#
# MUSER_COMPARATOR_NO_AMX=1 compiles ggml without AMX (-mno-amx-tile -mno-amx-int8
# -mno-amx-bf16 next to GGML_NATIVE's -march=native; GCC keeps explicit -mno-* over -march). For
# VMs whose CPU advertises AMX but faults on tile instructions: there the native build dies with
# SIGILL in `tinygemm_kernel_amx` at its first prompt batch (seen 2026-12-01 on a Sapphire
# Rapids VM). The receipt records the flags.
set -euo pipefail

SDIST_VERSION=0.3.36
SDIST_NAME="llama_cpp_python-${SDIST_VERSION}.tar.gz"
SDIST_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
LLAMA_COMMIT=0c1e57098bba43ac29e6e3b677cdceebdd22334f
SDIST_URL="https://files.pythonhosted.org/packages/ec/e9/e7de2b0463ea3ffbf0ede6cb21b58c1258a8f6521aae45ca773a59fe7cf3/${SDIST_NAME}"

CACHE="${MUSER_CACHE:-$HOME/.cache/muser}"
DEST="${1:-$CACHE/comparator-cpu}"
TARGETS=(llama-bench llama-completion llama-tokenize llama-cli llama-perplexity)

if [ -e "$DEST/receipt.json" ] || [ -e "$DEST/build" ]; then
  echo "refusing: $DEST already holds a build or receipt; choose another DEST to rebuild" >&2
  exit 1
fi
mkdir -p "$DEST" "$CACHE/sdist"

for tool in cmake ninja cc c++ sha256sum curl; do
  command -v "$tool" >/dev/null || { echo "missing tool: $tool (apt-get install cmake ninja-build build-essential curl)" >&2; exit 1; }
done

# shellcheck source=scripts/lib/sdist.sh
source "$(dirname "$0")/lib/sdist.sh"
SRC_ROOT=$(muser_fetch_sdist "$CACHE/sdist")
SRC="$SRC_ROOT/vendor/llama.cpp"

FLAGS=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF
       -DLLAMA_BUILD_TESTS=OFF -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=ON)
if [ "${MUSER_COMPARATOR_NO_AMX:-0}" = 1 ]; then
  NO_AMX="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
  FLAGS+=("-DCMAKE_C_FLAGS=$NO_AMX" "-DCMAKE_CXX_FLAGS=$NO_AMX")
fi
cmake -S "$SRC" -B "$DEST/build" "${FLAGS[@]}"
cmake --build "$DEST/build" -j"$(nproc)" --target "${TARGETS[@]}"

BIN="$DEST/build/bin"
{
  echo "{"
  echo "  \"what\": \"pinned llama.cpp CPU comparator\","
  echo "  \"built_at\": \"$(date -u +%Y-%m-%dT%H:%M:%SZ)\","
  echo "  \"host\": \"$(uname -srm)\","
  echo "  \"cpu\": \"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')\","
  echo "  \"sdist\": \"$SDIST_NAME\","
  echo "  \"sdist_sha256\": \"$SDIST_SHA256\","
  echo "  \"llama_cpp_commit\": \"$LLAMA_COMMIT\","
  echo "  \"compiler\": \"$(c++ --version | head -1)\","
  echo "  \"cmake_flags\": \"${FLAGS[*]}\","
  echo "  \"binaries\": {"
  first=1
  for f in "$BIN"/llama-* "$BIN"/*.so*; do
    [ -f "$f" ] || continue
    [ $first -eq 1 ] || echo ","
    first=0
    printf '    "%s": "%s"' "$(basename "$f")" "$(sha256sum "$f" | cut -d' ' -f1)"
  done
  echo
  echo "  }"
  echo "}"
} > "$DEST/receipt.json"
echo "comparator built: $BIN (receipt: $DEST/receipt.json)"
