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
  for ((i = 0; i < cycle; i++)); do
    b=${batches[i % ${#batches[@]}]}
    s=${sizes[i % ${#sizes[@]}]}
    [ -f "$tmp/$net-$mode-s$s.trace" ] || python3 "$here/torch_networks.py" trace --net "$net" --mode "$mode" --batch 2 \
      $([ "$s" = 0 ] || echo --size "$s") -o "$tmp/$net-$mode-s$s.trace"
    sed "s/,n=2,/,n=$b,/" "$tmp/$net-$mode-s$s.trace" >"$tmp/step.trace"
    "$cli" parse --json "${over[@]}" "$tmp/step.trace" >"$tmp/step$i.json"
  done
  # The steps' problems in order; a stream also gets its trace, the parsed keys step by step.
  python3 - "$here/data/$name.json" "$here/data/$name.trace" "$cycle" "$tmp" <<'PY'
import json, sys
out, trace, cycle = sys.argv[1], sys.argv[2], int(sys.argv[3])
steps = [json.load(open(f"{sys.argv[4]}/step{i}.json"))["problems"] for i in range(cycle)]
with open(out, "w") as f:
    json.dump([p for step in steps for p in step], f, separators=(",", ":"))
    f.write("\n")
if cycle > 1:
    with open(trace, "w") as f:
        f.write("# convtune-trace 1\n" + "# iteration\n".join("".join(p["key"] + "\n" for p in step) for step in steps))
PY
  echo "make-problems: $name.json$([ "$cycle" -gt 1 ] && echo " and $name.trace")"
done
