#!/usr/bin/env bash
# Repeatability of `convtune tune`: runs it N times per problem, each in a fresh process with an
# empty tuning database, and prints per problem how often the modal (most frequent) pick was
# chosen. The target (docs/autotuning.md, "Measurement"): on problems where the best candidate
# leads by 5% or more, the same pick at least 9 times out of 10.
#
# The default problems are ResNet-50 v1.5 layers on which the cpu backend's best algorithm leads
# the next one by 14-33% at batch 8 (docs/benchmarks.md, run D): two 3x3 layers (Winograd F(4,3)
# ahead of F(2,3)) and two 1x1 layers (im2col+GEMM ahead of its TF32 variant). Each run's own
# lead (the runner-up's median over the winner's, minus 1) is printed too, as the median over
# the runs, so that the premise can be checked on the machine at hand.
#
# A timing benchmark: run it on an otherwise idle machine.
#
#   bench/cpu/repeatability.sh [-n RUNS] [-b BATCH] [-B BACKEND] [-p PROBLEM]... [-f FLAGS] [-c CLI]
#     -n RUNS     runs per problem (default 10)
#     -b BATCH    batch size of the default problems (default 8)
#     -B BACKEND  backend (default cpu)
#     -p PROBLEM  a problem (canonical or benchdnn; repeatable) instead of the default ones
#     -f FLAGS    extra flags for `convtune tune --flags` (e.g. policy=pytorch)
#     -c CLI      the convtune binary (default build/cpu/tools/convtune)
set -euo pipefail

runs=10 batch=8 backend=cpu flags="" cli=build/cpu/tools/convtune
problems=()
while getopts "n:b:B:p:f:c:h" opt; do
    case $opt in
        n) runs=$OPTARG ;;
        b) batch=$OPTARG ;;
        B) backend=$OPTARG ;;
        p) problems+=("$OPTARG") ;;
        f) flags=$OPTARG ;;
        c) cli=$OPTARG ;;
        *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2 ;;
    esac
done
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "repeatability.sh: -n: must be a positive integer (got '$runs')" >&2; exit 2; }
[[ $batch =~ ^[1-9][0-9]*$ ]] || { echo "repeatability.sh: -b: must be a positive integer (got '$batch')" >&2; exit 2; }
[[ -x $cli ]] || { echo "repeatability.sh: -c: '$cli' is not an executable convtune binary (build it first)" >&2; exit 2; }
if [[ ${#problems[@]} -eq 0 ]]; then
    problems=(
        "n=$batch,c=64,k=64,in=56x56,ker=3x3,pad=1x1"     # res2a_branch2b
        "n=$batch,c=128,k=128,in=28x28,ker=3x3,pad=1x1"   # res3b_branch2b
        "n=$batch,c=64,k=64,in=56x56,ker=1x1"             # res2a_branch2a
        "n=$batch,c=256,k=64,in=56x56,ker=1x1"            # res2b_branch2a
    )
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

printf '%-48s %-28s %7s %9s\n' problem "modal pick" chosen "lead"
for p in "${problems[@]}"; do
    : >"$work/picks"
    for ((r = 1; r <= runs; ++r)); do
        db="$work/db-$r.json"
        rm -f "$db"
        args=(tune --problem "$p" --backend "$backend" --db "$db" --json)
        [[ -n $flags ]] && args+=(--flags "$flags")
        "$cli" "${args[@]}" >"$work/run.json"
        # One line per run: the pick, and its lead over the runner-up (the next fastest median).
        python3 - "$work/run.json" >>"$work/picks" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))["problems"][0]
timed = sorted(c["median_ms"] for c in d["candidates"] if c["state"] == "timed" and c["median_ms"] > 0)
win = next((c["median_ms"] for c in d["candidates"] if c["id"] == d["algorithm"]), 0)
others = [m for m in timed if m != win] or [0]
lead = others[0] / win - 1 if win > 0 and others[0] > 0 else float("nan")
print(d["algorithm"], lead)
EOF
    done
    python3 - "$p" "$runs" "$work/picks" <<'EOF'
import collections, math, statistics, sys
problem, runs, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rows = [l.split() for l in open(path) if l.strip()]
count = collections.Counter(r[0] for r in rows)
pick, n = count.most_common(1)[0]
leads = [float(r[1]) for r in rows if not math.isnan(float(r[1]))]
lead = f"{100 * statistics.median(leads):.1f}%" if leads else "n/a"
others = ", ".join(f"{a} x{c}" for a, c in count.most_common()[1:])
print(f"{problem:<48} {pick:<28} {n:>3}/{runs:<3} {lead:>9}" + (f"   (also: {others})" if others else ""))
EOF
done
