#!/usr/bin/env bash
# Session 26, call 2: the f16 row maxima with the block-merged atomics (elementwise.cu
# ew_row_max) — bit identity through cuda_route's f16 test, tg128 / pp512 with the switch off and
# on — then where a decode token's time goes inside the replayed graph on the full forge
# (nsys --cuda-graph-trace=node, scripts/device/nsys-graph.py), f16 route with row maxima.
# Carry .device/muser, .device/tests/cuda_route. Usage: bash scripts/device/decode-next.sh OUTDIR
set -uo pipefail
out=${1:?outdir}
bash scripts/device/forge-bg.sh
MUSER_CUDA_DEADLINE_S=120 timeout 200 .device/tests/cuda_route --test-threads 1 --nocapture f16 \
  > "$out/cuda_route.txt" 2>&1
echo "cuda_route f16 rc=$?"; grep -E "^test |test result|panicked|vs oracle" "$out/cuda_route.txt"
grep -A3 panicked "$out/cuda_route.txt" | head -12
while [ ! -f "$HOME/forge.done" ]; do sleep 2; done
for v in 0 1 0 1; do
  MUSER_CUDA_ACTS=f16 MUSER_CUDA_H16_ROWMAX=$v timeout 150 .device/muser bench -m "$HOME/full.gguf" \
    --backend cuda -p 512 -n 128 -r 2 > "$out/bench-rowmax$v.txt" 2>&1
  echo "bench rowmax $v rc=$?"; grep -E "pp512|tg128|route" "$out/bench-rowmax$v.txt"
done
NSYS=$(command -v nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems*/bin/nsys 2>/dev/null | head -1)
echo "nsys: ${NSYS:-none}"
[ -n "$NSYS" ] || exit 0
MUSER_CUDA_ACTS=f16 MUSER_CUDA_H16_ROWMAX=1 timeout 200 "$NSYS" profile --cuda-graph-trace=node \
  -t cuda -o "$HOME/dec" --force-overwrite true .device/muser bench -m "$HOME/full.gguf" \
  --backend cuda -p 0 -n 32 -r 1 > "$out/nsys-run.txt" 2>&1
echo "nsys profile rc=$?"; tail -3 "$out/nsys-run.txt"
timeout 200 "$NSYS" stats --report cuda_gpu_trace --format csv "$HOME/dec.nsys-rep" \
  > "$HOME/trace.csv" 2> "$out/nsys-stats-err.txt"
echo "nsys stats rc=$?"
python3 scripts/device/nsys-graph.py 16 < "$HOME/trace.csv" > "$out/nsys-graph.txt" 2>&1
echo "summary rc=$?"; head -90 "$out/nsys-graph.txt"
