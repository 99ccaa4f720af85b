#!/usr/bin/env python3
"""The run time of a catalogue tuned over N ranks (docs/distributed.md, "A catalogue on 8 and 64
GPUs: a model"), computed from measurements only:

  COSTS    a `convtune tune --json` report made on ONE rank of the target device (e.g. one H200:
           `convtune tune --backend cudnn --workload ... --json > costs.json`): each problem's
           search_ms is what deciding it costs there. Problems taken from a database cost nothing
           and are counted apart (tune the costs without a database).
  SCALING  the rows `OUT=scaling.json bench/dist/scaling.sh` wrote on the same kind of host
           (optional): the start-up of a job (the `startup` catalogue: one problem, nothing timed)
           and the machinery's cost per problem (the `replay` catalogue at one rank: hand-out,
           messages, database writes, with searches that cost next to nothing).

The hand-out is dynamic (a rank that finishes takes the next problem), so the model replays it:
the problems in the report's order, each to the rank that is free first, each costing its
search plus the machinery's per-problem cost. T(N) = start-up + that schedule's length. With
--problems P the measured costs stand for a catalogue of P problems (cycled in order: the report
is taken as a sample of it).

Usage: model.py COSTS.json [--scaling SCALING.json] [--problems P] [--ranks 1,8,64]
"""
import argparse
import heapq
import json
import statistics
import sys


def fail(msg):
    print(f"model.py: {msg}", file=sys.stderr)
    sys.exit(2)


def costs_of(path):
    try:
        with open(path) as f:
            doc = json.load(f)
        problems = doc["problems"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        fail(f"{path}: not a `convtune tune --json` report ({e})")
    searched = [p["search_ms"] for p in problems if p.get("source") == "search"]
    other = len(problems) - len(searched)
    if not searched:
        fail(f"{path}: no problem was searched (tune without a database, with benchmark=1)")
    return doc, searched, other


def machinery_of(path):
    """(start-up s by ranks, per-problem machinery ms, replay rows) from scaling.sh's rows."""
    try:
        with open(path) as f:
            rows = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: cannot read scaling.sh's rows ({e})")
    startup = {r["ranks"]: r["wall_s"] for r in rows if r["catalogue"] == "startup"}
    replay = {r["ranks"]: r for r in rows if r["catalogue"] == "replay"}
    if 1 not in startup or 1 not in replay:
        fail(f"{path}: needs the startup and replay rows at 1 rank (bench/dist/scaling.sh runs them)")
    one = replay[1]
    per_problem_ms = max(0.0, (one["wall_s"] - startup[1]) * 1000 / one["problems"])
    return startup, per_problem_ms, replay


def schedule(costs_ms, ranks):
    """The length (ms) of the dynamic hand-out: each problem, in order, to the rank free first."""
    free = [0.0] * ranks
    for c in costs_ms:
        heapq.heapreplace(free, free[0] + c)
    return max(free)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("costs")
    ap.add_argument("--scaling")
    ap.add_argument("--problems", type=int, default=0, help="the catalogue's size (default: the report's searched problems)")
    ap.add_argument("--ranks", default="1,8,64")
    a = ap.parse_args()
    try:
        ranks = [int(x) for x in a.ranks.split(",")]
    except ValueError:
        fail(f"--ranks: '{a.ranks}' is not a comma-separated list of integers")
    if any(n < 1 for n in ranks) or a.problems < 0:
        fail("--ranks must be >= 1 and --problems >= 0")

    doc, measured, from_db = costs_of(a.costs)
    n = a.problems or len(measured)
    costs = [measured[i % len(measured)] for i in range(n)]
    q = statistics.quantiles(measured, n=10, method="inclusive") if len(measured) > 1 else [measured[0]] * 9
    print(f"costs: {a.costs}: backend {doc.get('backend')}, {len(measured)} problems searched"
          + (f" ({from_db} taken from a database, left out)" if from_db else "")
          + f"; search ms per problem: median {statistics.median(measured):.1f}, mean {statistics.fmean(measured):.1f}, "
          f"p10 {q[0]:.1f}, p90 {q[-1]:.1f}, max {max(measured):.1f}; sum {sum(measured) / 1000:.1f} s")
    startup, machinery, replay = {}, 0.0, {}
    if a.scaling:
        startup, machinery, replay = machinery_of(a.scaling)
        starts = ", ".join(f"{k} rank{'s' if k > 1 else ''} {v:.2f} s" for k, v in sorted(startup.items()))
        print(f"machinery: {a.scaling}: start-up {starts}; {machinery:.2f} ms a problem (replay at 1 rank, start-up taken off)")
    else:
        print("machinery: not given (--scaling): start-up and per-problem machinery count as 0")
    print(f"catalogue: {n} problems" + (f" (the {len(measured)} measured costs cycled)" if n != len(measured) else ""))
    print()
    print(f"| ranks | start-up s | schedule s | T(N) s | T({ranks[0]}) / T(N) | problems/s rank 0 must sustain |")
    print("|---|---|---|---|---|---|")
    base = None
    for r in ranks:
        # Start-up at a rank count not measured: the largest measured one below it (a lower bound).
        known = [k for k in startup if k <= r]
        t0 = startup[max(known)] if known else 0.0
        span = schedule([c + machinery for c in costs], r) / 1000
        total = t0 + span
        base = base or total
        note = "" if not startup or r in startup else f" (as at {max(known)})" if known else ""
        print(f"| {r} | {t0:.2f}{note} | {span:.2f} | {total:.2f} | {base / total:.2f}x | {n / span:.1f} |")
    if replay:
        best = max(replay.values(), key=lambda x: x["ranks"])
        rate = best["problems"] / max(1e-9, best["wall_s"] - startup.get(best["ranks"], 0.0))
        print(f"\nthe replay at {best['ranks']} rank{'s' if best['ranks'] > 1 else ''} ran {rate:.0f} problems/s with searches that cost "
              "next to nothing: rank 0 has been seen to sustain that much, no more; a row that needs more may be bounded by rank 0")


if __name__ == "__main__":
    main()
