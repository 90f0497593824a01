#!/usr/bin/env bash
# Start forging the full-size model ($HOME/full.gguf, `muser forge --preset full --seed 7`) in a
# detached session unless $HOME/forge.done says it is there; returns at once. Wait for it with
# `while [ ! -f $HOME/forge.done ]; do sleep 2; done`; a second call while it runs starts nothing
# ($HOME/forge.lock). Usage: bash scripts/device/forge-bg.sh [MUSER]
m=${1:-.device/muser}
if [ ! -f "$HOME/forge.done" ] && mkdir "$HOME/forge.lock" 2> /dev/null; then
  setsid nohup bash -c \
    "$m forge --preset full --seed 7 -o $HOME/full.gguf > $HOME/forge.log 2>&1; touch $HOME/forge.done" \
    > /dev/null 2>&1 < /dev/null &
fi
