#!/usr/bin/env bash
# Problems per second of `convtune tune` against MPI ranks (docs/distributed.md), two catalogues:
#   cpu     24 x $CPU_COPIES (default 4) convolutions, batch $CPU_BATCH (default 64) and the next sizes, tuned live on the CPU backend, one single-threaded rank per core
#           (OMP_NUM_THREADS=1, --bind-to core): the search itself scaling with ranks;
#   replay  ResNet-50 H200 training problems at batch sizes 1-30 (2040 problems) replayed from
#           tests/data (a search costs next to nothing): what rank 0's hand-out and database
#           writes can sustain, the ceiling of the model in docs/distributed.md.
#   startup one problem, nothing timed (benchmark=0) on $BACKEND (default cpu; cudnn on a GPU host):
#           mpirun, the processes, the backend's start-up and the database hand-out, once per job.
# Each row: catalogue, ranks, problems, wall seconds (mpirun start-up included), problems/s. The load (uptime) is
# printed first: on a shared machine the numbers are indicative only. With OUT=FILE the rows are also
# written to FILE as JSON, what bench/dist/model.py reads (--scaling) for the start-up and the machinery's
# cost per problem.
# Usage: [OUT=scaling.json] [BACKEND=cudnn] bench/dist/scaling.sh [BUILD_DIR (build/cpu)] [RANKS... (1 2)]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/cpu}
[ $# -gt 0 ] && shift
ranks=("$@")
[ ${#ranks[@]} -gt 0 ] || ranks=(1 2)
cli=$build/tools/convtune
[ -x "$cli" ] || { echo "no $cli: build the cpu preset first" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
backend=${BACKEND:-cpu}
out=${OUT:-}
: > "$work/rows.jsonl"

python3 - "$work" "${CPU_BATCH:-64}" "${CPU_COPIES:-4}" <<'PY'
import json, sys
work, batch, copies = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(f"{work}/cpu.shapes", "w") as f:
    for n in range(batch, batch + copies):
        for c, k, h in [(16, 16, 28), (16, 32, 28), (32, 32, 28), (32, 64, 14), (64, 64, 14), (64, 32, 14)]:
            for ker, pad in [(3, 1), (1, 0)]:
                for d in ["fwd", "bwd_data"]:
                    f.write(f"dir={d},n={n},c={c},k={k},in={h}x{h},ker={ker}x{ker},pad={pad}x{pad}\n")
rec = json.load(open("tests/data/resnet50_h200_f32_train.json"))
with open(f"{work}/replay.shapes", "w") as f:
    for b in range(1, 31):
        for p in rec["problems"]:
            f.write(",".join(f"n={b}" if kv.startswith("n=") else kv for kv in p["problem"].split(",")) + "\n")
PY

echo "machine: $(nproc) cores; load: $(uptime)"
run() {  # name ranks args...
  local name=$1 n=$2
  shift 2
  rm -f "$work/$name.db"*
  local t0 t1
  t0=$(date +%s.%N)
  OMP_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe --bind-to core -np "$n" "$cli" tune "$@" --db "$work/$name.db" --json \
    > "$work/out.json" 2> "$work/err.txt" || { cat "$work/err.txt" >&2; exit 1; }
  t1=$(date +%s.%N)
  python3 - "$work/out.json" "$t0" "$t1" "$name" "$n" "$work/rows.jsonl" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1])); t0, t1 = float(sys.argv[2]), float(sys.argv[3])
n = len(doc["problems"]); wall = t1 - t0
print(f"{sys.argv[4]:<7} ranks {sys.argv[5]:>2}  problems {n:>5}  wall {wall:7.2f} s  {n / wall:8.1f} problems/s")
with open(sys.argv[6], "a") as f:
    f.write(json.dumps({"catalogue": sys.argv[4], "ranks": int(sys.argv[5]), "problems": n, "wall_s": wall,
                        "backend": doc["backend"]}) + "\n")
PY
}
for n in "${ranks[@]}"; do run startup "$n" --backend "$backend" --problem n=1,c=8,k=8,in=8x8,ker=3x3,pad=1x1 --flags benchmark=0; done
for n in "${ranks[@]}"; do run cpu "$n" --shapes "$work/cpu.shapes" --flags search_budget_ms=200,max_samples=5; done
for n in "${ranks[@]}"; do run replay "$n" --replay tests/data/resnet50_h200_f32_train.json --shapes "$work/replay.shapes"; done
if [ -n "$out" ]; then
  python3 -c 'import json, sys; json.dump([json.loads(l) for l in open(sys.argv[1])], open(sys.argv[2], "w"), indent=1)' "$work/rows.jsonl" "$out"
  echo "rows written to $out (bench/dist/model.py COSTS.json --scaling $out)"
fi
