#!/usr/bin/env bash
# The problem lists of the fidelity benchmark's workloads (bench/sim/data/<name>.json, <name> as
# bench/sim/workload-name.sh prints it): the network's convolutions captured by convtune.capture
# from one step on the CPU at batch 2, moved to the batch asked for (the batch is the `n=` field of
# each canonical line), and turned into `convtune parse --json` objects with the precision's dtype
# and layout (fp32/tf32: f32 nchw; amp/fp16: f16 nhwc, as autocast with channels_last runs them).
# A stream of changing shapes (BATCH and/or SIZE a comma-separated list that cycles, as
# torch_networks.py runs it) also gets <name>.trace: one iteration per step of the cycle, in order,
# which the fidelity comparison simulates; its .json holds the calls of the whole cycle.
#   bench/sim/make-problems.sh CONVTUNE_CLI WORKLOAD...     WORKLOAD = net:precision:mode:batch[:size]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cli=$1
shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for w in "$@"; do
  IFS=: read -r net precision mode batch size <<<"$w"
  name=$("$here/workload-name.sh" "$w")
  case $precision in
    fp32|tf32) over=(--dtype f32 --layout nchw) ;;
    amp|fp16) over=(--dtype f16 --layout nhwc) ;;
    *) echo "make-problems: unknown precision '$precision'" >&2; exit 2 ;;
  esac
  IFS=, read -r -a batches <<<"$batch"
  IFS=, read -r -a sizes <<<"${size:-0}"
  cycle=$(( ${#batches[@]} > ${#sizes[@]} ? ${#batches[@]} : ${#sizes[@]} ))
  echo "# convtune-trace 1" >"$tmp/stream.trace"
  for ((i = 0; i < cycle; i++)); do
    b=${batches[i % ${#batches[@]}]}
    s=${sizes[i % ${#sizes[@]}]}
    [ -f "$tmp/s$s.trace" ] || python3 "$here/torch_networks.py" trace --net "$net" --mode "$mode" --batch 2 \
      $([ "$s" = 0 ] || echo --size "$s") -o "$tmp/s$s.trace"
    [ "$i" -eq 0 ] || echo "# iteration" >>"$tmp/stream.trace"
    grep -v '^#' "$tmp/s$s.trace" | sed "s/,n=2,/,n=$b,/" >>"$tmp/stream.trace"
  done
  "$cli" parse --json "${over[@]}" "$tmp/stream.trace" | python3 -c 'import json,sys; json.dump(json.load(sys.stdin), sys.stdout, separators=(",", ":")); print()' \
    >"$here/data/$name.json"
  if [ "$cycle" -gt 1 ]; then
    python3 - "$here/data/$name.json" "$tmp/stream.trace" "$here/data/$name.trace" <<'PY'
import json, sys
# the stream's trace in the precision's dtype and layout: the parsed keys, iteration by iteration
keys = iter(p["key"] for p in json.load(open(sys.argv[1])))
out = ["# convtune-trace 1"]
for line in open(sys.argv[2]):
    line = line.strip()
    if line == "# iteration":
        out.append(line)
    elif line and not line.startswith("#"):
        reps = int(line.rsplit(" x", 1)[1]) if " x" in line else 1
        for _ in range(reps):
            out.append(next(keys))
open(sys.argv[3], "w").write("\n".join(out) + "\n")
PY
  fi
  echo "make-problems: $name.json$([ "$cycle" -gt 1 ] && echo " and $name.trace")"
done
