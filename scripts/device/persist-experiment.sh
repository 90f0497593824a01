#!/usr/bin/env bash
# Issue 5's launch-boundary experiment (crates/muser-cuda/examples/mvh_persist.rs): the same
# chain of one-token f16 matmuls as separate launches (eager, PDL), as one captured graph, and as
# one persistent launch with a grid barrier per matrix — first piece before the wait (the
# default) and after it, and the bandwidth floors (probes_h16.cu). Carry .device/mvh_persist. Usage: bash scripts/device/persist-experiment.sh OUTDIR  (~1 min)
set -uo pipefail
out=${1:?outdir}
for v in "" "MUSER_CUDA_MVH_EARLY=0"; do
  echo "== ${v:-default}" >> "$out/persist.txt"
  env $v timeout 120 .device/mvh_persist --layers 12 --reps 20 >> "$out/persist.txt" 2>&1
  echo "rc=$?" >> "$out/persist.txt"
done
cat "$out/persist.txt"
