# Sourced by the device profiling scripts: M (the carried muser), F (the 4-layer full-width
# forge, `muser forge --preset full --layers 4 --seed 7`, made here once per machine) and NCU.
M=$PWD/.device/muser
F=$HOME/f4.gguf
[ -f "$F" ] || $M forge --preset full --layers 4 --seed 7 -o "$F" > /dev/null 2>&1
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
