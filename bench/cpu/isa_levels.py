#!/usr/bin/env python3
"""convtune's CPU algorithms in the portable build against the same algorithms built with
-march=native: one table, default / native time per algorithm and problem.

The portable build (the `cpu` preset) compiles the CPU algorithms for baseline x86-64, x86-64-v3
and x86-64-v4 and runs the highest level the CPU has; the `native` preset compiles them once for
the build host. Each case runs `convtune run --algo ID --problem P --repeat R --json` with each
binary, alternating which goes first, for a number of rounds; a round's ratio is the two medians'
quotient. Reported per case: the median over the rounds of each binary's median time, and the
median ratio default/native with the lowest and highest round's ratio (the spread from other
processes sharing the machine). With --baseline, a third column runs the portable binary at
CONVTUNE_CPU_ISA=baseline (what the portable build ran before it had the other levels).

  bench/cpu/isa_levels.py [--default build/cpu/tools/convtune] [--native build/native/tools/convtune]
                          [--rounds 7] [--repeat 5] [--threads 2] [--baseline] [--markdown]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

# (algorithm, problem): ResNet-50 v1.5 res3b_branch2b (3x3, 128 channels, 28x28) at batch 4, the
# demo's layer, in the directions each algorithm computes; a 1x1 layer for the GEMM and
# direct_blocked paths; a small problem for the naive reference.
LAYER = "mb4ic128ih28oc128oh28kh3ph1"
ONE_BY_ONE = "mb4ic256ih28oc128oh28kh1ph0"
CASES = [
    ("cpu.direct", "mb1ic32ih14oc32oh14kh3ph1", "fwd"),
    ("cpu.direct_blocked", LAYER, "fwd"),
    ("cpu.direct_blocked", LAYER, "bwd_data"),
    ("cpu.direct_blocked", LAYER, "bwd_filter"),
    ("cpu.direct_blocked", ONE_BY_ONE, "fwd"),
    ("cpu.im2col_gemm", LAYER, "fwd"),
    ("cpu.im2col_gemm", LAYER, "bwd_filter"),
    ("cpu.im2col_gemm", ONE_BY_ONE, "fwd"),
    ("cpu.im2col_gemm.tf32", LAYER, "fwd"),
    ("cpu.winograd_f2x3", LAYER, "fwd"),
    ("cpu.winograd_f4x3", LAYER, "fwd"),
    ("cpu.winograd_f4x3", LAYER, "bwd_data"),
    ("cpu.fft", LAYER, "fwd"),
    ("cpu.fft", LAYER, "bwd_filter"),
]


def run(cli, algo, problem, direction, repeat, env):
    cmd = [cli, "run", "--algo", algo, "--problem", problem, "--dir", direction, "--repeat", str(repeat), "--json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    doc = json.loads(out)
    if doc.get("status") != "ok":
        sys.exit(f"isa_levels.py: {' '.join(cmd)}: {doc.get('status')}")
    return doc["median_ms"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--default", default="build/cpu/tools/convtune", help="the portable build's convtune")
    ap.add_argument("--native", default="build/native/tools/convtune", help="the native build's convtune")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per process (convtune run --repeat)")
    ap.add_argument("--threads", type=int, default=2, help="OMP_NUM_THREADS")
    ap.add_argument("--baseline", action="store_true", help="also the portable build at CONVTUNE_CPU_ISA=baseline")
    ap.add_argument("--algos", default="", help="comma-separated substrings of the algorithm ids to run")
    args = ap.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    env.pop("CONVTUNE_CPU_ISA", None)
    base_env = dict(env, CONVTUNE_CPU_ISA="baseline")
    level = json.loads(subprocess.run([args.default, "list", "--json"], check=True, capture_output=True, text=True, env=env).stdout)
    active = next(b for b in level["backends"] if b["name"] == "cpu")["isa_levels"]["active"]
    print(f"portable build running {active}; {args.rounds} rounds, --repeat {args.repeat}, OMP_NUM_THREADS={args.threads}\n")
    head = "| algorithm | problem | dir | default ms | native ms | default / native (lowest-highest round) |"
    rule = "|---|---|---|---:|---:|---|"
    if args.baseline:
        head += " baseline ms | baseline / native |"
        rule += "---:|---:|"
    print(head + "\n" + rule, flush=True)
    wanted = [s for s in args.algos.split(",") if s]
    for algo, problem, direction in CASES:
        if wanted and not any(s in algo for s in wanted):
            continue
        d, n, b = [], [], []
        for r in range(args.rounds):
            order = [("d", env), ("n", env)] if r % 2 == 0 else [("n", env), ("d", env)]
            if args.baseline:
                order.append(("b", base_env))
            for which, e in order:
                cli = args.native if which == "n" else args.default
                {"d": d, "n": n, "b": b}[which].append(run(cli, algo, problem, direction, args.repeat, e))
        ratios = [x / y for x, y in zip(d, n)]
        row = (f"| {algo} | {problem} | {direction} | {statistics.median(d):.2f} | {statistics.median(n):.2f} | "
               f"{statistics.median(ratios):.3f} ({min(ratios):.2f}-{max(ratios):.2f}) |")
        if args.baseline:
            row += f" {statistics.median(b):.2f} | {statistics.median([x / y for x, y in zip(b, n)]):.2f} |"
        print(row, flush=True)


if __name__ == "__main__":
    main()
