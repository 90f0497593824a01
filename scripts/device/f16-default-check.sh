#!/usr/bin/env bash
# The f16 route as the default activation format where it covers the model: the device gates
# in one call, every line into $OUT/check.txt as it comes (a call cut short keeps them).
#   1. the launch-boundary experiment with its bandwidth floors (persist-experiment.sh);
#   2. every cuda_route test (its default-route tests now run f16 on the Q4_K_M forges);
#   3. cuda_batched's bad-request test (default route);
#   4. parity of the default route on tiny and small against llama.cpp CUDA (cuda-issue4.sh).
# Carry .device/muser, .device/mvh_persist, .device/tests/cuda_route,
# .device/tests/cuda_batched, .devllama. Usage: bash scripts/device/f16-default-check.sh OUTDIR
set -uo pipefail
out=${1:?outdir}
log=$out/check.txt
timeout 150 .device/mvh_persist --layers 12 --reps 20 > "$out/persist.txt" 2>&1
echo "mvh_persist rc=$?" >> "$log"
cat "$out/persist.txt" >> "$log"
MUSER_CUDA_DEADLINE_S=120 timeout 300 .device/tests/cuda_route --test-threads 1 \
  > "$out/cuda_route.txt" 2>&1
echo "cuda_route rc=$? $(grep -E 'test result' "$out/cuda_route.txt")" >> "$log"
grep -A4 panicked "$out/cuda_route.txt" | head -10 >> "$log"
MUSER_CUDA_DEADLINE_S=60 timeout 60 .device/tests/cuda_batched --test-threads 1 rejects \
  > "$out/cuda_batched.txt" 2>&1
echo "cuda_batched rejects rc=$? $(grep -E 'test result' "$out/cuda_batched.txt")" >> "$log"
FIXTURES=tiny,small timeout 300 bash scripts/device/cuda-issue4.sh "$out" parity > /dev/null 2>&1
echo "parity rc=$?" >> "$log"
grep -E "^\|" "$out/parity.log" | tail -16 >> "$log"
cat "$log"
