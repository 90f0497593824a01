#!/usr/bin/env bash
# Start forging the full-size model ($HOME/full.gguf, `muser forge --preset full --seed 7`) in a
# detached session unless $HOME/forge.done says it is there; returns at once. Wait for it with
# `while [ ! -f $HOME/forge.done ]; do sleep 2; done`; a second call while it runs starts nothing
# ($HOME/forge.lock). $HOME/forge.log ends with the forge's wall time ("forge took N s"): copy it
# into the session's receipt — the forge is most of a cold call's device time.
# Usage: bash scripts/device/forge-bg.sh [MUSER]
m=${1:-.device/muser}
if [ ! -f "$HOME/forge.done" ] && mkdir "$HOME/forge.lock" 2> /dev/null; then
  setsid nohup bash -c \
    "t0=\$(date +%s); $m forge --preset full --seed 7 --no-sync -o $HOME/full.gguf > $HOME/forge.log 2>&1; echo \"forge took \$((\$(date +%s) - t0)) s on \$(nproc) CPUs\" >> $HOME/forge.log; touch $HOME/forge.done" \
    > /dev/null 2>&1 < /dev/null &
fi
