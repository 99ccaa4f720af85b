#!/usr/bin/env bash
# The problem lists of the fidelity benchmark's workloads (bench/sim/data/<net>-<mode>-<precision>-b<batch>.json):
# the network's convolutions captured by convtune.capture from one step on the CPU at batch 2,
# moved to the batch asked for (the batch is the `n=` field of each canonical line), and turned
# into `convtune parse --json` objects with the precision's dtype and layout (fp32/tf32: f32 nchw;
# amp/fp16: f16 nhwc, as autocast with channels_last runs them).
#   bench/sim/make-problems.sh CONVTUNE_CLI WORKLOAD...     WORKLOAD = net:precision:mode:batch
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cli=$1
shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for w in "$@"; do
  IFS=: read -r net precision mode batch <<<"$w"
  case $precision in
    fp32|tf32) over=(--dtype f32 --layout nchw) ;;
    amp|fp16) over=(--dtype f16 --layout nhwc) ;;
    *) echo "make-problems: unknown precision '$precision'" >&2; exit 2 ;;
  esac
  python3 "$here/torch_networks.py" trace --net "$net" --mode "$mode" --batch 2 -o "$tmp/t.trace"
  sed "s/,n=2,/,n=$batch,/" "$tmp/t.trace" >"$tmp/b.trace"
  "$cli" parse --json "${over[@]}" "$tmp/b.trace" | python3 -c 'import json,sys; json.dump(json.load(sys.stdin), sys.stdout, separators=(",", ":")); print()' \
    >"$here/data/$net-$mode-$precision-b$batch.json"
  echo "make-problems: $net-$mode-$precision-b$batch.json"
done
