#!/usr/bin/env bash
# Issue 5's arithmetic question (docs/decode-budget.md item 3, session 44): is each piece's
# chain of 17 dependent MMAs what the one-token matmuls' arithmetic costs? MUSER_CUDA_MVH_ACC2=1
# (an experiment the engine refuses: it changes the decode kernels' sums, not the prefill tiles')
# puts a piece's odd k-steps into a second accumulator, ~9 dependent MMAs instead of 17, at the
# same warps per SM (static SASS). Alternating twice, default then ACC2:
#   - mvh_persist (12 layers of the five matmul shapes): `graph` is the engine's form, `mvh/noact`
#     the kernel with its activations in registers (the arithmetic alone over the stream floor);
#   - mvh_bench --decode: the shapes' one-token kernels, µs per call.
# If `graph` drops by several µs per layer of its ~100, the two-accumulator order is worth the
# numbers change across decode and the prefill tiles (then parity and the determinism gates).
# Carry .device/mvh_persist and .device/mvh_bench (build-device.sh). ~3 min.
# Usage: bash scripts/device/acc2-experiment.sh OUTDIR
set -uo pipefail
out=${1:?outdir}
log=$out/acc2.txt
for r in 1 2; do
  for v in "" "MUSER_CUDA_MVH_ACC2=1"; do
    echo "== round $r ${v:-default}: mvh_persist" >> "$log"
    env $v timeout 150 .device/mvh_persist --layers 12 --reps 20 >> "$log" 2>&1
    echo "rc=$?" >> "$log"
    echo "== round $r ${v:-default}: mvh_bench --decode" >> "$log"
    env $v timeout 150 .device/mvh_bench --decode >> "$log" 2>&1
    echo "rc=$?" >> "$log"
  done
done
cat "$log"
