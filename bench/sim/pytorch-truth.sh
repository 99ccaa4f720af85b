#!/usr/bin/env bash
# PyTorch's real behaviour on this GPU, for the simulator's fidelity benchmark (docs/simulation.md):
# per workload, (1) pytorch_measure.py's per-problem first-call and steady times, benchmark off and
# on, cold and warm kernel cache, a fresh process each; (2) the whole network run for real,
# benchmark off and on, cold and warm kernel cache, RUNS fresh processes each.
#   bench/sim/pytorch-truth.sh OUT WORKLOAD...      WORKLOAD = net:precision:mode:batch[:size]
# e.g. bench/sim/pytorch-truth.sh out resnet50:fp32:train:32 resnet50:amp:train:32
#      bench/sim/pytorch-truth.sh out resnet50:fp16:infer:16:160,192,224,256,288,320   (a stream:
#      a list of batches or sizes cycles, one entry per step)
# The problems of WORKLOAD come from bench/sim/data/<name>.json (bench/sim/workload-name.sh;
# made by bench/sim/make-problems.sh). Writes OUT/<workload>-measure.json (pytorch_measure's grid)
# and OUT/<workload>-runs.json (one line per network run). Environment: RUNS (default 3),
# MEASURE_RUNS (default 2; 0 skips the per-problem measurements), ITERATIONS (default 20).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$1
shift
mkdir -p "$out"
RUNS=${RUNS:-3}
MEASURE_RUNS=${MEASURE_RUNS:-2}
ITERATIONS=${ITERATIONS:-20}
export PYTHONUNBUFFERED=1
for w in "$@"; do
  IFS=: read -r net precision mode batch size <<<"$w"
  name=$("$here/workload-name.sh" "$w")
  problems="$here/data/$name.json"
  tf32=1
  [ "$precision" = fp32 ] && tf32=0
  if [ "$MEASURE_RUNS" -gt 0 ]; then
  echo "== $name: per-problem measurements ($(python3 -c "import json;print(len(json.load(open('$problems'))))") calls)"
  python3 "$here/../../python/convtune/pytorch_measure.py" grid --problems "$problems" --allow-tf32 $tf32 \
    --runs "$MEASURE_RUNS" --out "$out/$name-measure.json"
  fi
  echo "== $name: network runs"
  : >"$out/$name-runs.json"
  for r in $(seq 1 "$RUNS"); do
    order="0 1"
    [ $((r % 2)) -eq 0 ] && order="1 0"
    for bm in $order; do
      cache=$(mktemp -d)
      for state in cold warm; do
        CUDA_CACHE_PATH=$cache python3 "$here/torch_networks.py" run --net "$net" --precision "$precision" --mode "$mode" \
          --batch "$batch" ${size:+--size "$size"} --benchmark "$bm" --iterations "$ITERATIONS" --out "$out/run.json"
        python3 - "$out/run.json" "$state" "$r" >>"$out/$name-runs.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d.update(cache=sys.argv[2], run=int(sys.argv[3]))
it, c = d["iterations_ms"], d.get("cycle", 1)
print(json.dumps(d))
print(f"   run {d['run']} bm={d['benchmark']} {d['cache']}: first {'cycle' if c > 1 else 'step'} {sum(it[:c]):.0f} ms, "
      f"then {sorted(it[c:])[len(it[c:])//2]:.1f} ms per step,"
      f" setup {d['setup_s']:.1f} s", file=sys.stderr)
PY
      done
      rm -rf "$cache"
    done
  done
  rm -f "$out/run.json"
done
