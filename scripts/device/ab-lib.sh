# Shared steps of the device A/B scripts (sourced; each appends its lines to the log as they
# come). Variants are env assignments ("" = the default; one variant may set several).
#
# ab_tiny_logits LOG OUT VARIANT...: `muser eval --route cuda` of the tiny forge (seed 1),
#   1100 tokens, MUSER_CUDA_ATTN_SUPER=32 (35 partials per late token), chunk 512 and 1, per
#   variant: the logits' sha — every line must agree for switches that keep the bits.
ab_tiny_logits() {
  local log=$1 out=$2 c v
  shift 2
  .device/muser forge --preset tiny --seed 1 -o "$out/tiny.gguf" > /dev/null 2>&1
  python3 -c "import json; print(json.dumps([(i * 37 + 11) % 500 + 1 for i in range(1100)]))" \
    > "$out/toks.json"
  for c in 512 1; do
    for v in "$@"; do
      rm -f "$out/logits.f32"  # a failed run must not report the previous one's sha
      env MUSER_CUDA_ATTN_SUPER=32 $v timeout 200 .device/muser eval -m "$out/tiny.gguf" \
        --tokens "$out/toks.json" --ctx 2048 --route cuda --chunk $c \
        --dump-logits "$out/logits.f32" > "$out/eval.txt" 2>&1
      local rc=$? sha="no logits (see eval.txt)"
      [ -f "$out/logits.f32" ] && sha=$(sha256sum < "$out/logits.f32" | cut -c1-16)
      echo "eval chunk $c ${v:-default} rc=$rc $sha" >> "$log"
    done
  done
  rm -f "$out/tiny.gguf" "$out/logits.f32"
}

# ab_tg LOG OUT VARIANT...: tg128 on the full forge ($HOME/full.gguf, waited for), the variants
#   in turn, twice; each line with the route fields that name the switches.
ab_tg() {
  local log=$1 out=$2 r v
  shift 2
  while [ ! -f "$HOME/forge.done" ]; do sleep 2; done
  for r in 1 2; do
    for v in "$@"; do
      env $v timeout 90 .device/muser bench -m "$HOME/full.gguf" \
        --backend cuda -p 0 -n 128 -r 2 > "$out/bench.txt" 2>&1
      echo "${v:-default}: rc=$? $(grep -E "tg128" "$out/bench.txt" | tr -s ' ' | cut -d'(' -f1) $(grep -o "fuse=[^,]*\|mode=[^,]*\|attn=[^,]*" "$out/bench.txt" | head -3 | tr '\n' ' ')" >> "$log"
    done
  done
}
