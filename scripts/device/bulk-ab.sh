#!/usr/bin/env bash
# The f16 decode matmuls' bulk-copy weight ring (MUSER_CUDA_MVH_BULK=D, matvec_h16.cu
# mvh_bulk_body): bits (kernels_h16 with D=3 against the reference and the prefill kernels),
# per matrix µs (mvh_bench --decode at D = 0, 2, 3, 4), then tg128 on the full forge with D = 0
# and the others, alternating (Muser only). Carry .device/muser, .device/mvh_bench,
# .device/tests/kernels_h16, .device/tests/cuda_route. Usage: bash scripts/device/bulk-ab.sh OUTDIR
set -uo pipefail
# The alternating register sets (MUSER_CUDA_MVH_PP, 3 by default since session 39) do not combine
# with this switch: its A/B (both arms, so its baseline is PP=0, not the current default) runs on the
# plain schedule.
export MUSER_CUDA_MVH_PP=0
out=${1:?outdir}
bash scripts/device/forge-bg.sh
MUSER_CUDA_MVH_BULK=3 MUSER_CUDA_DEADLINE_S=120 timeout 200 .device/tests/kernels_h16 --test-threads 1 \
  > "$out/kernels_h16-bulk3.txt" 2>&1
echo "kernels_h16 bulk3 rc=$?"; grep -E "^test |test result|panicked" -A2 "$out/kernels_h16-bulk3.txt" | head -20
for d in ${DS:-0 2 3 4}; do
  MUSER_CUDA_MVH_BULK=$d timeout 120 .device/mvh_bench --decode > "$out/mvh-bulk$d.txt" 2>&1
  echo "== mvh_bench bulk $d rc=$?"; grep -E "nt 1:|ring" "$out/mvh-bulk$d.txt"
done
MUSER_CUDA_MVH_BULK=3 MUSER_CUDA_DEADLINE_S=120 timeout 200 .device/tests/cuda_route --test-threads 1 --nocapture f16 \
  > "$out/cuda_route-bulk3.txt" 2>&1
echo "cuda_route f16 bulk3 rc=$?"; grep -E "^test |test result|panicked" "$out/cuda_route-bulk3.txt"
while [ ! -f "$HOME/forge.done" ]; do sleep 2; done
for d in ${TG_DS:-0 3 2 4 0 3}; do
  MUSER_CUDA_ACTS=f16 MUSER_CUDA_MVH_BULK=$d timeout 120 .device/muser bench -m "$HOME/full.gguf" \
    --backend cuda -p 0 -n 128 -r 2 > "$out/tg-bulk$d.txt" 2>&1
  echo "tg bulk $d rc=$?: $(grep -E "tg128" "$out/tg-bulk$d.txt") $(grep -o "mv=[^,]*" "$out/tg-bulk$d.txt")"
done
