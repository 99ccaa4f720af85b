#!/usr/bin/env bash
# The file name of a fidelity workload: net:precision:mode:batch[:size] -> net-mode-precision-bBATCH[-sSIZE],
# a list's commas written as '_' (resnet50:fp16:infer:16:160,224 -> resnet50-infer-fp16-b16-s160_224).
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 net:precision:mode:batch[:size]" >&2; exit 2; }
IFS=: read -r net precision mode batch size <<<"$1"
echo "$net-$mode-$precision-b${batch//,/_}${size:+-s${size//,/_}}"
