#!/usr/bin/env bash
# The adaptive rule's table in docs/autotuning.md: replays of the H200 recordings in tests/data
# (ResNet-50 v1.5, batch 32, 1000 iterations), total time of each setting against benchmark off.
#   bench/sim/adaptive_rule.sh [path/to/convtune]     (default: build/cpu/tools/convtune)
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build/cpu/tools/convtune}
echo "| recording, stream | on | pytorch | auto | a3 | a10 | a30 | a100 |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
row() {  # label recording mode tf32 stream [extra options...]
  local label=$1 rec=$2 mode=$3 tf=$4 stream=$5
  shift 5
  local f="allow_tf32=$tf"
  "$B" simulate --replay "tests/data/$rec" --workload resnet50 --mode "$mode" --batch 32 --stream "$stream" --iterations 1000 "$@" \
    --flags "off:$f,benchmark=0" --flags "on:$f,benchmark=1" --flags "pytorch:$f,benchmark=1,policy=pytorch" \
    --flags "auto:$f,benchmark=1,policy=adaptive" --flags "a3:$f,benchmark=1,policy=adaptive,adaptive_after=3" \
    --flags "a10:$f,benchmark=1,policy=adaptive,adaptive_after=10" --flags "a30:$f,benchmark=1,policy=adaptive,adaptive_after=30" \
    --flags "a100:$f,benchmark=1,policy=adaptive,adaptive_after=100" --json |
    python3 -c '
import json, sys
s = {x["name"]: x["total_ms"] for x in json.load(sys.stdin)["settings"]}
print("| " + sys.argv[1] + " | " + " | ".join("%+.1f%%" % (100 * (s[k] / s["off"] - 1)) for k in ["on", "pytorch", "auto", "a3", "a10", "a30", "a100"]) + " |")' "$label, $stream"
}
for st in fixed resolution batch; do row "f32 train (TF32 off)" resnet50_h200_f32_train.json train 0 $st --batches 8,16,32; done
for st in fixed resolution batch; do row "f16 infer" resnet50_h200_f16_infer.json infer 1 $st --batches 8,16,32 --dtype f16 --layout nhwc; done
