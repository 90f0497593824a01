# Shared steps of the device A/B scripts (sourced; each appends its lines to the log as they
# come). Variants are env assignments ("" = the default; one variant may set several).
#
# variants NAME LIST: the array NAME from LIST — split on ';' when LIST has one (a variant may then
#   set several variables, and an empty entry is the default), else on spaces.
variants() {
  local -n arr=$1
  if [[ $2 == *";"* ]]; then IFS=';' read -r -a arr <<< "$2"; else read -r -a arr <<< "$2"; fi
}

# ab_tiny_logits LOG OUT VARIANT...: `muser eval --route cuda` of the tiny forge (seed 1),
#   1100 tokens, MUSER_CUDA_ATTN_SUPER=32 (35 partials per late token), chunk 512 and 1, per
#   variant: the logits' sha — every line must agree for switches that keep the bits.
#   The model, tokens and logits live in $HOME/ab-tiny (not $OUT: a call cut short must not
#   leave them among the files that come back — session 36 lost a receipt beside them).
ab_tiny_logits() {
  local log=$1 out=$2 w=$HOME/ab-tiny c v
  shift 2
  mkdir -p "$w"
  .device/muser forge --preset tiny --seed 1 -o "$w/tiny.gguf" > /dev/null 2>&1
  python3 -c "import json; print(json.dumps([(i * 37 + 11) % 500 + 1 for i in range(1100)]))" \
    > "$w/toks.json"
  for c in 512 1; do
    for v in "$@"; do
      rm -f "$w/logits.f32" "$w/logits.f32.json"  # a failed run must not report the previous sha
      env MUSER_CUDA_ATTN_SUPER=32 $v timeout 200 .device/muser eval -m "$w/tiny.gguf" \
        --tokens "$w/toks.json" --ctx 2048 --route cuda --chunk $c \
        --dump-logits "$w/logits.f32" > "$out/eval.txt" 2>&1
      local rc=$? sha="no logits (see eval.txt)"
      [ -f "$w/logits.f32" ] && sha=$(sha256sum < "$w/logits.f32" | cut -c1-16)
      echo "eval chunk $c ${v:-default} rc=$rc $sha" >> "$log"
    done
  done
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
