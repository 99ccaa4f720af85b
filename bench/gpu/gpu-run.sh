#!/usr/bin/env bash
# Runs the GPU tests and/or the GPU benchmark from a package made by scripts/gpu-check, on a
# machine with an NVIDIA GPU, CUDA 13 and a Python whose site-packages hold nvidia-cudnn-cu13
# (and PyTorch, for the benchmark's comparison).
#   gpu-pkg/run.sh tests|bench|probe|refused|sim|torch|all [output-folder]   (default output folder: gpu-pkg/out)
# `refused` (not part of `all`) re-measures the engines refused for f32 after measurement (fwd
# eng72, bwd_filter eng69/eng70) against the f64 oracle: test_gpu_cudnn's disabled case
# gpu/refused_engines_probe, one "probe: <id> PASS|FAIL|UNSUPPORTED(..)|RUNFAIL(..) ..." line per
# (engine, problem) in refused.log.
# Environment: PRECISIONS (default fp32,tf32,fp16), DIRS (default fwd; e.g. fwd,bwd_data,bwd_filter),
#   BENCH_ARGS (extra bench_gpu options), TEST_ARGS (extra Boost.Test options, e.g.
#   --run_test=gpu/awkward_shapes_against_oracle), *_TIMEOUT (seconds per step),
#   SIM_* for `sim` (replay fidelity, bench/sim/fidelity.py): SIM_BATCH (32), SIM_DTYPE (f16),
#   SIM_LAYOUT (nhwc), SIM_MODE (infer), SIM_STREAMS (fixed,resolution), SIM_ITERATIONS (20),
#   SIM_SCALES (0.5,0.75,1), SIM_SAMPLES (5), SIM_REUSE=1 (keep the recordings and live documents
#   already in the output folder's sim/, e.g. a recording copied there from an earlier call).
# `torch` (not part of `all`; needs a package made with GPU_PYTHON set): convtune.torch's GPU check
#   (tests/python/gpu_torch_check.py, pytest) then bench/gpu/torch_convtune.py (TORCH_CONFIGS,
#   TORCH_ITERATIONS, TORCH_RUNS, TORCH_BENCH_TIMEOUT) into torch_convtune.json.
set -uo pipefail
what=${1:-all}
PKG=$(cd "$(dirname "$0")" && pwd)
OUTDIR=${2:-$PKG/out}
mkdir -p "$OUTDIR"

PY=${PYTHON:-python3}
NV=$($PY -c "import nvidia; print(list(nvidia.__path__)[0])" 2>/dev/null) || { echo "no Python 'nvidia' packages (nvidia-cudnn-cu13) found"; exit 1; }
LIBS=""
for d in "$NV"/*/lib; do [ -d "$d" ] && LIBS="$LIBS$d:"; done
export LD_LIBRARY_PATH="$LIBS$PKG/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CONVTUNE_SHAPES_DIR="$PKG/shapes"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}

{
  echo "== environment"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"; ldd "$PKG/bin/test_gpu_cudnn" | grep -E "not found|cudnn" ; $PY -c "import torch; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())" 2>&1
} > "$OUTDIR/environment.log" 2>&1
cat "$OUTDIR/environment.log"

rc=0
if [ "$what" = tests ] || [ "$what" = all ]; then
  echo "== tests (log: $OUTDIR/tests.log)"
  start=$(date +%s)
  timeout "${TEST_TIMEOUT:-480}" "$PKG/bin/test_gpu_cudnn" --log_level=test_suite --report_level=detailed ${TEST_ARGS:-} > "$OUTDIR/tests.log" 2>&1
  trc=$?
  echo "test_gpu_cudnn exit $trc after $(( $(date +%s) - start )) s"
  grep -E "Test module|test cases|assertions|error|skipped" "$OUTDIR/tests.log" | tail -40
  [ $trc -ne 0 ] && rc=$trc
fi
if [ "$what" = probe ]; then
  echo "== probe (log: $OUTDIR/probe.log)"
  timeout "${PROBE_TIMEOUT:-120}" "$PKG/bin/bench_gpu" --shapes "$PKG/shapes/shapes_resnet_50_v1_5" --probe > "$OUTDIR/probe.log" 2>&1
  echo "probe exit $?"; grep -E "^(dir|  supported)" "$OUTDIR/probe.log" | head -40
fi
if [ "$what" = refused ]; then
  echo "== refused engines against the oracle (log: $OUTDIR/refused.log)"
  start=$(date +%s)
  timeout "${REFUSED_TIMEOUT:-420}" "$PKG/bin/test_gpu_cudnn" --run_test=gpu/refused_engines_probe --log_level=message \
    --color_output=no > "$OUTDIR/refused.log" 2>&1
  frc=$?
  echo "test_gpu_cudnn --run_test=gpu/refused_engines_probe exit $frc after $(( $(date +%s) - start )) s"
  [ $frc -eq 124 ] && echo "timed out (REFUSED_TIMEOUT=${REFUSED_TIMEOUT:-420}): the lines so far are in the log, the summary is not"
  for v in PASS FAIL 'UNSUPPORTED(' 'RUNFAIL('; do
    echo "${v%(}: $(grep -c "^probe: [^ ]* $v" "$OUTDIR/refused.log")"
  done
  grep -E "^probe: [^ ]* FAIL " "$OUTDIR/refused.log"
  grep -E "^summary: |^skipped: |error: in " "$OUTDIR/refused.log" | tail -20
  [ $frc -ne 0 ] && rc=$frc
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  echo "== bench (logs: $OUTDIR/torch-bm*.log, $OUTDIR/bench.log)"
  shapes="$PKG/shapes/shapes_resnet_50_v1_5"
  for bm in 0 1; do
    timeout "${TORCH_TIMEOUT:-240}" env PYTHONUNBUFFERED=1 $PY "$PKG/bench/torch_bench.py" --shapes "$shapes" --benchmark $bm \
      --precisions "${PRECISIONS:-fp32,tf32,fp16}" --dirs "${DIRS:-fwd}" --out "$OUTDIR/torch-bm$bm.json" > "$OUTDIR/torch-bm$bm.log" 2>&1
    echo "torch_bench benchmark=$bm exit $?"; tail -2 "$OUTDIR/torch-bm$bm.log"
  done
  start=$(date +%s)
  timeout "${BENCH_TIMEOUT:-420}" "$PKG/bin/bench_gpu" --shapes "$shapes" --torch "$OUTDIR/torch-bm0.json" "$OUTDIR/torch-bm1.json" \
    --markdown "$OUTDIR/bench.md" --json "$OUTDIR/bench.json" \
    --precisions "${PRECISIONS:-fp32,tf32,fp16}" --dirs "${DIRS:-fwd}" ${BENCH_ARGS:-} > "$OUTDIR/bench.log" 2>&1
  brc=$?
  echo "bench_gpu exit $brc after $(( $(date +%s) - start )) s"; tail -5 "$OUTDIR/bench.log"
  [ $brc -ne 0 ] && rc=$brc
fi
if [ "$what" = sim ] || [ "$what" = all ]; then
  echo "== sim: replay fidelity (log: $OUTDIR/sim.log, results: $OUTDIR/sim/)"
  start=$(date +%s)
  timeout "${SIM_TIMEOUT:-540}" $PY "$PKG/bench/fidelity.py" --cli "$PKG/bin/convtune" --backend cudnn --workload resnet50 \
    --shapes-dir "$PKG/shapes" --batch "${SIM_BATCH:-32}" --dtype "${SIM_DTYPE:-f16}" --layout "${SIM_LAYOUT:-nhwc}" \
    --mode "${SIM_MODE:-infer}" --streams "${SIM_STREAMS:-fixed,resolution}" --iterations "${SIM_ITERATIONS:-20}" \
    --scales "${SIM_SCALES:-0.5,0.75,1}" --samples "${SIM_SAMPLES:-5}" ${SIM_REUSE:+--reuse} --out "$OUTDIR/sim" > "$OUTDIR/sim.log" 2>&1
  src=$?
  echo "fidelity exit $src after $(( $(date +%s) - start )) s"; tail -30 "$OUTDIR/sim.log"
  [ $src -gt 1 ] && rc=$src
fi
if [ "$what" = torch ]; then
  [ -d "$PKG/python" ] || { echo "no convtune Python module in $PKG (make the package with GPU_PYTHON set)"; exit 1; }
  export PYTHONPATH="$PKG/python${PYTHONPATH:+:$PYTHONPATH}"
  echo "== convtune.torch GPU check (log: $OUTDIR/torch-check.log)"
  start=$(date +%s)
  timeout "${TORCH_CHECK_TIMEOUT:-240}" env PYTHONUNBUFFERED=1 $PY -m pytest -v -p no:cacheprovider "$PKG/tests/gpu_torch_check.py" > "$OUTDIR/torch-check.log" 2>&1
  crc=$?
  echo "gpu_torch_check exit $crc after $(( $(date +%s) - start )) s"; grep -E "PASSED|FAILED|ERROR|passed|failed" "$OUTDIR/torch-check.log" | tail -20
  [ $crc -ne 0 ] && rc=$crc
  echo "== convtune.torch benchmark (log: $OUTDIR/torch-convtune.log)"
  start=$(date +%s)
  timeout "${TORCH_BENCH_TIMEOUT:-400}" env PYTHONUNBUFFERED=1 $PY "$PKG/bench/torch_convtune.py" --out "$OUTDIR/torch_convtune.json" \
    --iterations "${TORCH_ITERATIONS:-40}" --runs "${TORCH_RUNS:-1}" ${TORCH_CONFIGS:+--configs $TORCH_CONFIGS} > "$OUTDIR/torch-convtune.log" 2>&1
  echo "torch_convtune exit $? after $(( $(date +%s) - start )) s"; tail -40 "$OUTDIR/torch-convtune.log"
fi
exit $rc
