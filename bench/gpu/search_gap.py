#!/usr/bin/env python3
"""Where a live convtune search spends time its recording does not account for.

Replays the problems of `convtune tune --json` runs (search_cost.py's tune/<precision>-N.json,
each made in a fresh process on the GPU) with the `on` setting of `convtune simulate`, in the
runs' own order, and compares per problem the replayed search with the live one (the median
over the runs). The replayed search of problem i is the difference of the simulated search over
the first i and the first i-1 problems (a search learns from the ones before it, and cuDNN's first
use falls on the first), so the two sides see the same history. Prints the totals per direction
and the problems where live and replay differ most.

    python3 bench/gpu/search_gap.py --cli build/cpu/tools/convtune \
        --recording bench/sim/results/h200/resnet50-train-f32-b32-listings-recording.json.gz \
        --flags enabled=1,benchmark=1,benchmark_limit=10,deterministic=0,allow_tf32=0 \
        bench/gpu/results/h200/search-cost-v3/tune/fp32-{2,3,4,5}.json --skip-first

--skip-first leaves out each run's first problem (search_cost.py --probe's start-up problem).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--recording", required=True)
    ap.add_argument("--flags", required=True, help="the flags the live runs searched under (a trace's '# flags' line)")
    ap.add_argument("--skip-first", action="store_true")
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("runs", nargs="+")
    a = ap.parse_args()
    runs = []
    for path in a.runs:
        with open(path) as f:
            probs = json.load(f)["problems"]
        runs.append(probs[1:] if a.skip_first else probs)
    order = [p["problem"] for p in runs[0]]
    if any([p["problem"] for p in r] != order for r in runs):
        sys.exit("search_gap: the runs list other problems or another order")
    live = [statistics.median(r[i]["search_ms"] for r in runs) for i in range(len(order))]
    cum = [0.0]
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "prefix.trace")
        for i in range(1, len(order) + 1):
            with open(trace, "w") as f:
                f.write("# convtune-trace 1\n# flags " + a.flags + "\n" + "\n".join(order[:i]) + "\n")
            p = subprocess.run([a.cli, "simulate", "--stream", "trace:" + trace, "--replay", a.recording, "--iterations", "1", "--json"],
                               capture_output=True, text=True)
            if p.returncode != 0:
                sys.exit(f"search_gap: simulate failed ({p.returncode}): {p.stderr[-2000:]}")
            on = [s for s in json.loads(p.stdout)["settings"] if s["name"] == "on"][0]
            cum.append(on["per_iteration"][0]["search_ms"])
    replay = [cum[i + 1] - cum[i] for i in range(len(order))]
    print(f"{len(order)} problems, {len(runs)} live runs: live (median per problem) {sum(live):.0f} ms, replay {sum(replay):.0f} ms")
    by = {}
    for p, r, l in zip(order, replay, live):
        d = p.split(",")[0].split("=")[1]
        t = by.setdefault(d, [0.0, 0.0, 0])
        t[0] += l
        t[1] += r
        t[2] += 1
    print("| direction | problems | live ms | replay ms | live - replay per problem |")
    print("|---|---:|---:|---:|---:|")
    for d, (l, r, n) in by.items():
        print(f"| {d} | {n} | {l:.0f} | {r:.0f} | {(l - r) / n:+.1f} |")
    worst = sorted(range(len(order)), key=lambda i: -abs(live[i] - replay[i]))[:a.top]
    print("largest differences (live, replay, ms):")
    for i in worst:
        print(f"  {i:3} {order[i]}: {live[i]:.1f}, {replay[i]:.1f}")


if __name__ == "__main__":
    main()
