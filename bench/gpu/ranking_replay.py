#!/usr/bin/env python3
"""Replays search rules against the times bench_gpu measured, without a GPU.

bench_gpu --json records, per layer, every candidate its exhaustive search timed: the position
in convtune's heuristic order, the time, and where cuDNN's heuristics list it (mode A, the
fallback list, mode B; -1 = not listed). This script asks, for each table (precision x
direction): if a search timed only the first L candidates a rule puts first, how close would its
pick be to the exhaustive search's? It prints, per rule and L, the sum over the layers of the
best time among those candidates divided by the sum of the exhaustive bests (1.000 = the search
finds what the exhaustive one finds).

Rules:
  order       the first L eligible candidates in heuristic order (explore_slots=0)
  explore=U   the selector's rule with explore_slots=U: the first L-U suggested candidates
              (listed by a heuristic), then up to U that no heuristic lists, the slots they leave
              going back to the suggested ones in order
  pytorch     everything mode A or the fallback list holds (PyTorch's candidates), no limit

The times are the exhaustive search's (median of --search-samples single runs), so a rule is
judged on the same numbers for every rule. Usage: ranking_replay.py bench.json [--limits 6,8,10,12]
"""
import argparse
import json


def listed(e):
    # Legacy algorithms ranked by cudnnGet*_v7 count as suggested in the selector; bench_gpu
    # records the graph heuristics only, and legacy algorithms never reach the first slots here.
    return max(e["mode_a"], e["fallback"], e["mode_b"]) >= 0


def explore(order, limit, slots):
    slots = min(slots, limit - 1)
    sug = [e for e in order if listed(e)]
    uns = [e for e in order if not listed(e)]
    first = sug[: max(limit - slots, limit - len(uns))]
    return first + uns[: limit - len(first)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bench_json")
    ap.add_argument("--limits", default="6,8,10,12")
    ap.add_argument("--explore", default="0,2,3,4", help="explore_slots values to replay")
    a = ap.parse_args()
    limits = [int(x) for x in a.limits.split(",")]
    slots = [int(x) for x in a.explore.split(",")]
    doc = json.load(open(a.bench_json))
    for t in doc["tables"]:
        rows = [r for r in t["rows"] if r.get("exhaustive_times")]
        if not rows:
            continue
        best = 0.0
        sums = {}
        for r in rows:
            cands = sorted((e for e in r["exhaustive_times"] if e["ms"] is not None), key=lambda e: e["rank"])
            if not cands:
                continue
            best += min(e["ms"] for e in cands)
            torch = [e for e in cands if e["mode_a"] >= 0 or e["fallback"] >= 0] or cands
            sums[("pytorch", 0)] = sums.get(("pytorch", 0), 0) + min(e["ms"] for e in torch)
            for limit in limits:
                for u in slots:
                    key = ("order" if u == 0 else f"explore={u}", limit)
                    sums[key] = sums.get(key, 0) + min(e["ms"] for e in explore(cands, limit, u))
        print(f"{t['precision']} {t['dir']} ({len(rows)} layers, exhaustive best {best:.3f} ms): pytorch {sums[('pytorch', 0)] / best:.3f}")
        for u in slots:
            name = "order" if u == 0 else f"explore={u}"
            print(f"  {name:10} " + " ".join(f"L{l}:{sums[(name, l)] / best:.3f}" for l in limits))


if __name__ == "__main__":
    main()
