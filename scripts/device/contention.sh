#!/usr/bin/env bash
# Bit-identity with the GPU shared (docs/cuda.md, Tests, "Bit-identity under GPU contention"):
# the muser_cuda unit tests (among them the alloc-zeroing order test), cuda_route + cuda_batched
# alone, then two such processes at once on the one GPU — every bit-identity check must hold in all three.
# Test executables from scripts/device/build-device.sh (.device/tests). ~8 minutes.
# Usage: bash scripts/device/contention.sh OUTDIR
set -uo pipefail
out=${1:?outdir}
T=.device/tests
MUSER_CUDA_DEADLINE_S=120 timeout 150 $T/muser_cuda --test-threads 1 > "$out/unit.txt" 2>&1
echo "muser_cuda rc=$?"
grep -E "zeroed|test result|panicked" "$out/unit.txt"
ROUTE="$T/cuda_route --test-threads 1; $T/cuda_batched --test-threads 1"  # the two end-to-end binaries
MUSER_CUDA_DEADLINE_S=120 timeout 450 bash -c "$ROUTE" > "$out/route-alone.txt" 2>&1
echo "cuda_route alone rc=$?"
for i in 1 2; do
  (MUSER_CUDA_DEADLINE_S=300 timeout 600 bash -c "$ROUTE" > "$out/route-pair$i.txt" 2>&1
   echo "rc=$?" >> "$out/route-pair$i.txt") &
done
wait
for f in "$out"/route-*.txt; do
  echo "== $f"
  grep -E "test result|panicked|differ|^rc=" "$f"
done
