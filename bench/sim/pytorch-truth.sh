#!/usr/bin/env bash
# PyTorch's real behaviour on this GPU, for the simulator's fidelity benchmark and the library of
# PyTorch's measured costs (docs/simulation.md). Per workload, on the GPU machine (PyTorch only;
# no convtune build needed):
#   (1) the advise way: the network's run captured by convtune.capture on this GPU, its steps timed
#       in a plain run (nothing intercepted, benchmark off, an empty CUDA kernel cache):
#       OUT/<workload>.trace, and in a second plain run on the kernel cache the first filled:
#       OUT/<workload>-warm.trace;
#   (2) pytorch_measure.py's per-problem first-call and steady times for the trace's problems,
#       benchmark off and on, cold and warm kernel cache, a fresh process each: OUT/<workload>-measure.json;
#   (3) the whole network run for real, benchmark off and on, cold and warm kernel cache, RUNS fresh
#       processes each: OUT/<workload>-runs.json (one line per run).
#   bench/sim/pytorch-truth.sh OUT WORKLOAD...      WORKLOAD = net:precision:mode:batch[:size]
# e.g. bench/sim/pytorch-truth.sh out resnet50:fp32:train:32 convnext_tiny:tf32:train:32
#      bench/sim/pytorch-truth.sh out resnet50:fp16:infer:16:160,192,224,256,288,320   (a stream:
#      a list of batches or sizes cycles, one entry per step)
# Environment: RUNS (default 3), MEASURE_RUNS (default 2; 0 skips (2)), ITERATIONS (default 20),
# TIMING_RUNS (plain runs timing the steps in (1), each step the median over them; default 3),
# STEPS: "runs" for (3) only, "capture" for (1) only, "measure" for (2) only from the trace
# already in OUT (default all three).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
capture=$here/../../python/convtune/capture.py
measure=$here/../../python/convtune/pytorch_measure.py
out=$1
shift
mkdir -p "$out"
RUNS=${RUNS:-3}
MEASURE_RUNS=${MEASURE_RUNS:-2}
ITERATIONS=${ITERATIONS:-20}
TIMING_RUNS=${TIMING_RUNS:-3}
export PYTHONUNBUFFERED=1
for w in "$@"; do
  IFS=: read -r net precision mode batch size <<<"$w"
  name=$("$here/workload-name.sh" "$w")
  args=(--net "$net" --precision "$precision" --mode "$mode" --batch "$batch" ${size:+--size "$size"})
  tf32=1
  [ "$precision" = fp32 ] && tf32=0
  IFS=, read -r -a nb <<<"$batch"
  IFS=, read -r -a ns <<<"${size:-0}"
  cycle=$(( ${#nb[@]} > ${#ns[@]} ? ${#nb[@]} : ${#ns[@]} ))
  steps=${STEPS:-all}
  if [ "$steps" = all ] || [ "$steps" = capture ]; then
    echo "== $name: capture, steps timed in plain runs (cold, then warm kernel cache)"
    python3 "$capture" --max-iterations $((2 * cycle + 4)) --timing plain --timing-runs "$TIMING_RUNS" --cold-kernel-cache \
      --warm-out "$out/$name-warm.trace" -o "$out/$name.trace" \
      "$here/torch_networks.py" run "${args[@]}" --benchmark 0 --iterations 100000
  fi
  if [ "$steps" = all ] || [ "$steps" = measure ]; then
    if [ "$MEASURE_RUNS" -gt 0 ]; then
      echo "== $name: per-problem measurements"
      python3 "$measure" grid --problems "$out/$name.trace" --allow-tf32 $tf32 --runs "$MEASURE_RUNS" --out "$out/$name-measure.json"
    fi
  fi
  [ "$steps" = all ] || [ "$steps" = runs ] || continue
  echo "== $name: network runs"
  : >"$out/$name-runs.json"
  for r in $(seq 1 "$RUNS"); do
    order="0 1"
    [ $((r % 2)) -eq 0 ] && order="1 0"
    for bm in $order; do
      cache=$(mktemp -d)
      for state in cold warm; do
        CUDA_CACHE_PATH=$cache python3 "$here/torch_networks.py" run "${args[@]}" --benchmark "$bm" --iterations "$ITERATIONS" \
          --out "$out/run.json"
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
