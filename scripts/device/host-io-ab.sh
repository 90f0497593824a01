#!/usr/bin/env bash
# The host side of a step (session 43): page-locked staging of the step's inputs and logit rows
# (MUSER_CUDA_HOST_STAGE, engine cuda/host_io.rs), the waits' back-to-back polling window
# (MUSER_CUDA_WAIT_SPIN_MS, muser_cuda::device), and loading NVRTC's cubins instead of the PTX
# (MUSER_CUDA_LOAD=cubin, muser_cuda::registry::Load). Every line into $OUT/ab.txt.
#   0. the fresh machine's first kernel init, NVRTC's cubin against the driver's JIT;
#   1. muser_cuda's host:: test, cuda_batched (with staged_rows_equal_pageable_rows: the staged
#      rows against the pageable path's, bit for bit) and cuda_route's f16 test;
#   2. `muser eval` on the tiny forge (ab-lib.sh ab_tiny_logits): default, HOST_STAGE=1,
#      LOAD=cubin — and
#      the binary in $BASE (.device/muser-base: d3760f1, the commit before the change; build it
#      from a worktree and strip it there) — equal shas;
#   3. tg128 on the full forge, alternating twice: $BASE, the default (both switches off: the
#      refactor alone against $BASE), and each of TG;
#   4. the step's split (MUSER_CUDA_STEP_TIMES=1): device µs per step vs the host's rest, for
#      the default and both switches.
# Session 44 added the clustered norm's shift from a bound (MUSER_CUDA_NORM_BOUND=1, norm.cu
# h16_shift_bound: its device test, muser_cuda norm_bound::, default and bound) and the
# attention gate's branch joined late (MUSER_CUDA_GATE_LATE=1: cuda_route's f16 test and
# cuda_batched have variants of it), and the clusters for the S = 16 launches alone
# (MUSER_CUDA_MVH_CLUSTER=16: K and V): all in PART=1's tiny logits, and with the cubin load in
# PART=3's tg128 (PART=2 keeps the host switches and the step split).
# Built in sessions 43-44, first run in session 45 (docs/receipts/cuda-session45.txt), which made
# HOST_STAGE=1, WAIT_SPIN_MS=50, NORM_BOUND=1 and GATE_LATE=1 the defaults: the variants below
# now set them off (=0) against the default.
# Three calls (each under 600 s on a fresh machine): PART=1 runs steps 0-2, PART=2 steps 3-4
# for the host switches, PART=3 step 3 for the graph's switches (the forge started by PART=1 is
# then there if the machine stayed warm; else it is made again).
# Usage: PART=1|2|3 [BASE=.device/muser-base] [TG="...;..."] bash scripts/device/host-io-ab.sh OUTDIR
set -uo pipefail
out=${1:?outdir}
log=$out/ab.txt
base=${BASE:-.device/muser-base}
source scripts/device/ab-lib.sh
bash scripts/device/forge-bg.sh
# 0. Where a fresh machine's first kernel init goes (session 41: ~110 s once, then 0.5-1 s):
#    the first process loads NVRTC's cubins (MUSER_CUDA_LOAD=cubin: no driver JIT), the second
#    the PTX as by default (the driver JIT on an empty compute cache), then cubins again; the
#    three logit shas must agree. Run this first.
part=${PART:-1}
w=$HOME/ab-tiny
mkdir -p "$w"
[ "$part" = 1 ] && {
.device/muser forge --preset tiny --seed 1 -o "$w/tiny.gguf" > /dev/null 2>&1
echo "[1, 2, 3, 4, 5]" > "$w/init-toks.json"
for v in MUSER_CUDA_LOAD=cubin "" MUSER_CUDA_LOAD=cubin; do
  t0=$(date +%s.%N)
  rm -f "$w/init.f32"
  env $v timeout 300 .device/muser eval -m "$w/tiny.gguf" --tokens "$w/init-toks.json" \
    --ctx 64 --route cuda --dump-logits "$w/init.f32" > "$out/init.txt" 2>&1
  echo "init ${v:-ptx (default)}: rc=$? $(echo "$(date +%s.%N) - $t0" | bc) s; $(grep -o "kernels compiled in [0-9]* ms ([^)]*)" "$out/init.txt"); logits $(sha256sum < "$w/init.f32" | cut -c1-16)" >> "$log"
done
}
if [ "$part" = 1 ]; then
  # (Not cuda_route with NORM_BOUND set: its sessions run the unfused norm, which refuses the
  # switch set explicitly; the kernel test and the tiny logits at chunk 1 — the clustered norm —
  # check it.)
  for t in "muser_cuda host::" "muser_cuda norm_bound::" "MUSER_CUDA_NORM_BOUND=0 muser_cuda norm_bound::" \
      "cuda_batched" "cuda_route f16"; do
    set -- $t
    e=""
    [[ $1 == *=* ]] && e=$1 && shift
    env $e MUSER_CUDA_DEADLINE_S=120 timeout 300 .device/tests/$1 --test-threads 1 --nocapture \
      ${2:-} > "$out/$1.txt" 2>&1
    echo "$t rc=$? $(grep -E 'test result' "$out/$1.txt" | tail -1)" >> "$log"
    grep -E "norm module|rows equal" "$out/$1.txt" >> "$log"
    grep -A4 panicked "$out/$1.txt" | head -8 >> "$log"
  done
  ab_tiny_logits "$log" "$out" "" "MUSER_CUDA_HOST_STAGE=0" "MUSER_CUDA_LOAD=cubin" \
    "MUSER_CUDA_NORM_BOUND=0" "MUSER_CUDA_GATE_LATE=0" "MUSER_CUDA_MVH_CLUSTER=16"
  # The same tokens through the binary before the change (its sha must equal the lines above).
  for c in 512 1; do
    rm -f "$w/logits.f32"
    MUSER_CUDA_ATTN_SUPER=32 timeout 200 $base eval -m "$w/tiny.gguf" --tokens "$w/toks.json" \
      --ctx 2048 --route cuda --chunk $c --dump-logits "$w/logits.f32" > "$out/eval.txt" 2>&1
    echo "eval chunk $c base rc=$? $(sha256sum < "$w/logits.f32" | cut -c1-16)" >> "$log"
  done
  cat "$log"
  exit 0
fi
while [ ! -f "$HOME/forge.done" ]; do sleep 2; done
# PART=2: the host switches (then the step split below); PART=3: the graph's switches.
if [ "$part" = 2 ]; then
  dflt="MUSER_CUDA_HOST_STAGE=0 MUSER_CUDA_WAIT_SPIN_MS=0;MUSER_CUDA_HOST_STAGE=0;MUSER_CUDA_WAIT_SPIN_MS=0"
else
  dflt="MUSER_CUDA_LOAD=cubin;MUSER_CUDA_NORM_BOUND=0;MUSER_CUDA_GATE_LATE=0;MUSER_CUDA_MVH_CLUSTER=16"
fi
IFS=';' read -r -a tg <<< "${TG:-$dflt}"
for r in 1 2; do
  for v in base "" "${tg[@]}"; do
    bin=.device/muser
    [ "$v" = base ] && bin=$base && v=""
    env $v timeout 90 $bin bench -m "$HOME/full.gguf" --backend cuda -p 0 -n 128 -r 2 \
      > "$out/bench.txt" 2>&1
    echo "$bin ${v:-default}: rc=$? $(grep -E "tg128" "$out/bench.txt" | tr -s ' ' | cut -d'(' -f1)" >> "$log"
  done
done
# The step's split (MUSER_CUDA_STEP_TIMES=1: device time per step from events around the graph,
# the rest of the wall time the host's): the default and both switches.
[ "$part" = 2 ] && for v in "" "MUSER_CUDA_HOST_STAGE=0 MUSER_CUDA_WAIT_SPIN_MS=0"; do
  env $v MUSER_CUDA_STEP_TIMES=1 timeout 90 .device/muser bench -m "$HOME/full.gguf" \
    --backend cuda -p 0 -n 128 -r 2 > "$out/bench.txt" 2>&1
  echo "step times ${v:-default}: rc=$? $(grep -E "tg128" "$out/bench.txt" | tr -s ' ')" >> "$log"
done
cat "$log"
