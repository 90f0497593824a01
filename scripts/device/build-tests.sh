#!/usr/bin/env bash
# Build the CUDA test executables here (the device has no Rust) and put stripped copies in
# .device/tests/ for `scripts/device/cuda-tests.sh` to run on the GPU machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .device/tests
cargo test --release -p muser-cuda -p muser-engine --no-run --message-format=json 2>/dev/null \
  | python3 -c '
import json, sys, shutil, subprocess
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] in ("kernels", "kernels_a8", "kernels_h16", "cuda_route", "cuda_batched", "cuda_kernels", "cuda_attention", "muser_cuda"):
        dst = ".device/tests/" + m["target"]["name"]
        subprocess.run(["strip", "-o", dst, m["executable"]], check=True)
        print(dst)
'
