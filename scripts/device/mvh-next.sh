#!/usr/bin/env bash
# The one-token f16 matmuls' build switches A/B, one call; every line into $OUT/next.txt as it
# comes. VARIANTS (space-separated env assignments, "" = the default) picks them; unset, session
# 28's candidates (docs/cuda-f16-history.md, session 29): MUSER_CUDA_MVH_WHINT=1 / 2, MUSER_CUDA_MVH_XSTAGE=1.
#   1. mvh_persist (its floors and probes: stream/mvhx = loads + activation reads, mvh/noact =
#      MMAs without activation reads) at the default and each variant;
#   2. kernels_h16 with each variant (the mvh kernels against their references, every token
#      count the same bits);
#   3. the same logits: `muser eval --route cuda` on the tiny forge, chunk 512 and 1, per variant;
#   4. tg128 on the full forge (Muser only), the default and the variants alternating, twice.
# Carry .device/muser, .device/mvh_persist, .device/tests/kernels_h16.
# PERSIST=0 / KTESTS=0 skip steps 1 / 2 (switches that leave those kernels alone).
# Usage: [PERSIST=0] [KTESTS=0] [VARIANTS="MUSER_CUDA_MVH_MAXREG=80 MUSER_CUDA_MVH_MAXREG=96"] bash scripts/device/mvh-next.sh OUTDIR
#   Session 31's two-chains-per-warp candidate (same bits as the same S without it; its speed
#   A/B against the defaults runs with the chain counts doubled, a numbers change):
#   VARIANTS="MUSER_CUDA_MVH_PP=0 MUSER_CUDA_MVH_PAIR=1;MUSER_CUDA_H16_WIDE_S=4 MUSER_CUDA_H16_MID_S=8 MUSER_CUDA_H16_NARROW_S=16;MUSER_CUDA_H16_WIDE_S=4 MUSER_CUDA_H16_MID_S=8 MUSER_CUDA_H16_NARROW_S=16 MUSER_CUDA_MVH_PP=0 MUSER_CUDA_MVH_PAIR=1"
#   (~8 min with the forge and three variants)
set -uo pipefail
out=${1:?outdir}
log=$out/next.txt
bash scripts/device/forge-bg.sh
# VARIANTS: one env assignment per variant separated by spaces, or, where a variant sets
# several, variants separated by ';'.
# (MUSER_CUDA_MVH_PP is 3 by default since session 39: XSTAGE, PAIR, XSMEM, BULK and AHEAD=2 need
# MUSER_CUDA_MVH_PP=0 in their variant.)
v_in=${VARIANTS:-MUSER_CUDA_MVH_WHINT=1;MUSER_CUDA_MVH_WHINT=2;MUSER_CUDA_MVH_PP=0 MUSER_CUDA_MVH_XSTAGE=1}
if [[ $v_in == *";"* ]]; then IFS=';' read -r -a picked <<< "$v_in"; else read -r -a picked <<< "$v_in"; fi
variants=("" "${picked[@]}")
for v in "${variants[@]}"; do
  [ "${PERSIST:-1}" = 0 ] && break
  env $v timeout 60 .device/mvh_persist --layers 12 --reps 20 > "$out/persist.txt" 2>&1
  echo "persist ${v:-default} rc=$? $(grep -E '^(graph|stream/mat|stream/mvh |stream/mvhx |mvh/noact)' "$out/persist.txt" | tr -s ' ' | cut -d' ' -f1,2 | tr '\n' ';')" >> "$log"
done
for v in "${picked[@]}"; do
  [ "${KTESTS:-1}" = 0 ] && break
  env $v timeout 200 .device/tests/kernels_h16 --test-threads 1 > "$out/kernels_h16.txt" 2>&1
  echo "kernels_h16 $v rc=$? $(grep -E 'test result' "$out/kernels_h16.txt")" >> "$log"
  grep -A3 panicked "$out/kernels_h16.txt" | head -6 >> "$log"
done
.device/muser forge --preset tiny --seed 1 -o "$out/tiny.gguf" > /dev/null 2>&1
python3 -c "import json; print(json.dumps([(i * 37 + 11) % 500 + 1 for i in range(96)]))" > "$out/toks.json"
for c in 512 1; do
  for v in "${variants[@]}"; do
    env $v timeout 120 .device/muser eval -m "$out/tiny.gguf" --tokens "$out/toks.json" \
      --route cuda --chunk $c --dump-logits "$out/logits.f32" > "$out/eval.txt" 2>&1
    echo "eval chunk $c ${v:-default} rc=$? $(sha256sum < "$out/logits.f32" | cut -c1-16)" >> "$log"
  done
done
rm -f "$out/tiny.gguf" "$out/logits.f32"
while [ ! -f "$HOME/forge.done" ]; do sleep 2; done
for v in "${variants[@]}" "${variants[@]}"; do
  env $v timeout 90 .device/muser bench -m "$HOME/full.gguf" --backend cuda -p 0 -n 128 -r 2 \
    > "$out/bench.txt" 2>&1
  echo "${v:-default}: rc=$? $(grep -E "tg128" "$out/bench.txt" | tr -s ' ' | cut -d'(' -f1) $(grep -o "mv=[^,]*" "$out/bench.txt" | head -1)" >> "$log"
done
cat "$log"
