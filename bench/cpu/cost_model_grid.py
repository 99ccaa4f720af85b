#!/usr/bin/env python3
"""Checks the cpu backend's cost model against a bench/cpu run: for each (layout, layer) of the
run's JSON, the algorithm the model ranks first (benchmark off) against the fastest own algorithm
measured, for the model's current efficiencies and for every point of a grid.

    bench/cpu/cost_model_grid.py run.json

The estimate below mirrors estimate() in backends/cpu/cpu_backend.cpp (direct_blocked,
im2col+GEMM and the Winograd variants; cpu.fft and the naive reference are left out, as they
never win); change both together. The bench prints the current model's result too ("cost model
(benchmark off) picks ..."), which is how this copy is checked.
"""
import itertools
import json
import math
import sys

CURRENT = dict(dbh=0.45, dbc=0.30, g=0.55, gt=0.45, w=0.35)  # cpu_backend.cpp's Efficiency
GRID = dict(dbh=[0.5, 0.6, 0.7, 0.8], dbc=[0.4, 0.5, 0.6], g=[0.5, 0.55, 0.6, 0.65], gt=[0.45, 0.55, 0.6], w=[0.3, 0.35, 0.4, 0.5])


def parse(s):
    kv = dict(x.split("=") for x in s.split(","))
    dims = lambda v: [int(t) for t in v.split("x")]
    return dict(n=int(kv["n"]), c=int(kv["c"]), k=int(kv["k"]), g=int(kv["g"]), i=dims(kv["in"]), ker=dims(kv["ker"]),
                st=dims(kv["stride"]), pad=dims(kv["pad"]), pe=dims(kv["pad_end"]), layout=kv["layout"])


def out(p, a):
    return (p["i"][a] + p["pad"][a] + p["pe"][a] - p["ker"][a]) // p["st"][a] + 1


def estimate(algo, p, e):
    ks = math.prod(p["ker"])
    osp = math.prod(out(p, a) for a in range(len(p["i"])))
    macs = p["n"] * p["k"] * (p["c"] // p["g"]) * ks * osp
    es, bytes_per_mac = 4, 0.25
    if algo == "cpu.direct_blocked":
        return macs / (e["dbh"] if p["layout"] == "nhwc" else e["dbc"])
    if algo.startswith("cpu.im2col_gemm"):
        one = ks == 1 and all(s == 1 for s in p["st"]) and all(v == 0 for v in p["pad"])
        col = 0 if one else 2.0 * p["n"] * p["c"] * ks * osp * es
        return macs / (e["g"] if algo == "cpu.im2col_gemm" else e["gt"]) + col * bytes_per_mac
    if algo.startswith("cpu.winograd"):
        m = 2 if "f2x3" in algo else 4
        alpha = m + 2
        tiles = p["n"] * math.ceil(out(p, 0) / m) * math.ceil(out(p, 1) / m)
        gemm = tiles * alpha * alpha * p["k"] * (p["c"] // p["g"])
        return gemm / e["w"] + tiles * (p["c"] + p["k"]) * alpha * alpha * 4 * es * bytes_per_mac
    return None


def score(cases, e):
    picked = fastest = 0.0
    right = 0
    for m in cases.values():
        pick = min((estimate(a, p, e), a) for a, (t, p) in m.items() if estimate(a, p, e) is not None)[1]
        best = min(m, key=lambda a: m[a][0])
        picked += m[pick][0]
        fastest += m[best][0]
        right += pick == best
    return picked / fastest, right


def main():
    doc = json.load(open(sys.argv[1]))
    cases = {}
    for r in doc["results"]:
        if "median_ms" in r and r["algorithm"].startswith("cpu.") and r["algorithm"] != "cpu.direct":
            key = (r["threads"], r["direction"], r["layout"], r["layer"])
            cases.setdefault(key, {})[r["algorithm"]] = (r["median_ms"], parse(r["problem"]))
    ratio, right = score(cases, CURRENT)
    print(f"current efficiencies {CURRENT}: fastest on {right}/{len(cases)}, picks take {ratio:.3f}x the fastest in total")
    results = []
    for values in itertools.product(*GRID.values()):
        e = dict(zip(GRID, values))
        results.append((score(cases, e), e))
    results.sort(key=lambda x: (x[0][0], -x[0][1]))
    for (ratio, right), e in results[:5]:
        print(f"grid {e}: fastest on {right}/{len(cases)}, {ratio:.3f}x")


if __name__ == "__main__":
    main()
