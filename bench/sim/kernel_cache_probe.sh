#!/usr/bin/env bash
# Which cache makes a second "cold" PyTorch process warm? One workload's problems, benchmark on, each
# process with a new CUDA_CACHE_PATH: PROBE_BASIC=1 (default) started from this shell in several ways,
# PROBE_GRID=1 through pytorch_measure.py grid and from Python. Run on the GPU machine from the repository root.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
T=bench/sim/results/h100/resnext50_32x4d-train-tf32-b32.trace
M=python/convtune/pytorch_measure.py
export PYTHONUNBUFFERED=1
total() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('first %.2f s startup %.0f ms' % (sum(p['first_ms'] for p in d['problems'])/1e3, d['startup_ms']))" "$1"; }
one() { # name cachedir [env...]
  local n=$1 d=$2; shift 2
  local t0=$(date +%s%N)
  env "$@" CUDA_CACHE_PATH=$d python3 $M one --problems $T --benchmark 1 --allow-tf32 1 --out $OUT/$n.json >/dev/null 2>&1
  echo "$n ($d $*): $(total $OUT/$n.json), process $(( ($(date +%s%N) - t0) / 1000000 )) ms"
}
if [ "${PROBE_BASIC:-1}" = 1 ]; then
echo "== env"; env | grep -i -E "cuda|nv|cache|home|tmp" | sort; id; ls -la ~ ~/.nv ~/.cache 2>&1 | head -30; df -h /tmp ~ | cat
nvidia-smi --query-gpu=name,driver_version,persistence_mode --format=csv
touch /tmp/marker; sleep 1
one p1 $(mktemp -d)
echo "== files written by p1 (outside /proc,/sys,/dev,/tmp/tmp.*)"
find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path "$OUT" \) -prune -o -type f -newer /tmp/marker -print 2>/dev/null | grep -v "^/tmp/tmp\." | head -40
echo "== p1's cache dir"; du -sh /tmp/tmp.* 2>/dev/null | head
one p2 $(mktemp -d)
one p3_disable /tmp/none CUDA_CACHE_DISABLE=1
d=$(mktemp -d); one p4_new_then_same $d; one p5_same $d
CUDA_CACHE_PATH=$(mktemp -d) python3 bench/sim/torch_networks.py run --net resnext50_32x4d --precision tf32 --mode train --batch 32 --benchmark 1 --iterations 3 --out $OUT/net1.json >/dev/null 2>&1
python3 -c "import json; d=json.load(open('$OUT/net1.json')); print('network new dir: first step %.0f ms' % d['iterations_ms'][0])"
one p6_after_net $(mktemp -d)
h=$(mktemp -d); one p7_new_home $(mktemp -d) HOME=$h XDG_CACHE_HOME=$h/.cache
t=$(mktemp -d); one p8_new_tmpdir $(mktemp -d) TMPDIR=$t
echo "== ~/.nv and ~/.cache now"; find ~/.nv ~/.cache -newer /tmp/marker -type f 2>/dev/null | head; du -sh ~/.nv ~/.cache 2>/dev/null
fi
if [ "${PROBE_GRID:-0}" = 1 ]; then
  echo "== the grid itself: benchmark on, cold only, two runs"
  python3 $M grid --problems $T --settings bm1 --caches cold --runs 2 --allow-tf32 1 --out $OUT/gridA.json 2>&1 | tail -3
  du -sh ~/.nv 2>&1
  mkdir -p /tmp/pm-x/cache-b; one pB_grid_shaped_path /tmp/pm-x/cache-b
  for quiet in 0 1; do  # started from Python, a new mkdtemp folder: output piped (as the grid), then to /dev/null
    python3 - "$M" "$T" "$OUT/pC$quiet.json" $quiet <<'PY'
import os, subprocess, sys, tempfile, time, json
d, quiet = tempfile.mkdtemp(), sys.argv[4] == "1"
t = time.time()
sink = subprocess.DEVNULL if quiet else subprocess.PIPE
subprocess.run([sys.executable, os.path.abspath(sys.argv[1]), "one", "--problems", sys.argv[2], "--benchmark", "1", "--allow-tf32", "1",
                "--out", sys.argv[3]], env=dict(os.environ, CUDA_CACHE_PATH=d), stdout=sink, stderr=sink)
doc = json.load(open(sys.argv[3]))
print("pC python-launched, output %s (%s): first %.2f s startup %.0f ms, process %.0f ms" % (
    "to /dev/null" if quiet else "piped", d, sum(p["first_ms"] for p in doc["problems"]) / 1e3, doc["startup_ms"], (time.time() - t) * 1e3))
PY
  done
  du -sh ~/.nv 2>&1; ls -la ~/.nv 2>&1
fi
