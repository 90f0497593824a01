#!/usr/bin/env bash
# Each decode kernel's marginal cost inside the replayed graph: tg128 on the 4-layer full-width
# forge (scripts/device/f4-ncu.sh) with `MUSER_CUDA_PROBE_DUP=<kernel>` (every launch of it
# enqueued twice; crate muser-cuda's probe module) against the plain route, plain runs between
# the probes to show drift. MODEL=full uses the 52-layer forge (forge-bg.sh; less host noise). µs per token = 1e6/tg(dup) − 1e6/tg(plain); divide by the launches
# per token (the forge has 4 layers). The outputs under a probe are not the model's — timing
# only. Then (STALLS=1, the default) ncu PC sampling of the small kernels (mvh-stalls.sh with
# a fine sampling interval). Every line into $OUT/dup.txt as it comes. Carry .device/muser.
# DEPTH (default 0) times the tokens after that many in the context (attention at depth).
# The default lists (probes and stalls) name the decode route's kernels (the clustered norm
# `_cl8`, the wide combine `_wide`); `residual_norm_h16` / `attn_combine_m` are prefill's.
# Usage: [MODEL=full] [DEPTH=32768] [KERNELS="residual_norm_h16 ..."] [STALLS=0] bash scripts/device/dup-probe.sh OUTDIR
set -uo pipefail
out=${1:?outdir}
log=$out/dup.txt
source scripts/device/f4-ncu.sh
if [ "${MODEL:-f4}" = full ]; then  # the 52-layer forge: host noise amortized over 7 ms tokens
  bash scripts/device/forge-bg.sh
  while [ ! -f "$HOME/forge.done" ]; do sleep 2; done
  F=$HOME/full.gguf
fi
tg() {
  env "$@" timeout 150 $M bench -m "$F" --backend cuda -p 0 -n 128 -d "${DEPTH:-0}" -r 3 \
    > "$out/bench.txt" 2>&1
  local rc=$?
  local v
  v=$(grep -E "tg128" "$out/bench.txt" | awk '{print $2}')
  echo "${*:-plain} rc=$rc tg128 $v us/token $(python3 -c "print(round(1e6/float('${v:-0}' or 'inf'), 2))" 2>/dev/null) $(grep -o "probe=[^ ,]*" "$out/bench.txt" | head -1)" >> "$log"
}
tg
n=0
for k in ${KERNELS:-residual_norm_h16_cl8 act_h16_m qk_norm_rope_kv attn_h16_d128 attn_combine_m_wide mvh_q4h_s8 mvh_q4h_s16 mvh_q6h_s16 mvh_glu_q4h_s2 mvh_q4h_s4 mvh_q6h_s4}; do
  tg MUSER_CUDA_PROBE_DUP=$k
  n=$((n + 1))
  [ $((n % 3)) = 0 ] && tg  # plain runs between probes: drift
done
tg
if [ "${STALLS:-1}" != 0 ]; then
  SAMPLE_INTERVAL=${SAMPLE_INTERVAL:-0} ACCOUNT=0 KERNELS="${STALL_KERNELS:-residual_norm_h16_cl8 qk_norm_rope_kv attn_combine_m_wide act_h16_m}" \
    bash scripts/device/mvh-stalls.sh "$out" > /dev/null 2>&1
  cat "$out/stalls.txt" >> "$log"
fi
cat "$log"
