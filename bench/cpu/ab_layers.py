#!/usr/bin/env python3
"""A/B timing of two convtune binaries on ResNet-50 v1.5's 3x3 layers (batch 8, NCHW, 1 thread on CPU 1).

Usage: ab_layers.py before=PATH,after=PATH ROUNDS REPEAT DIRS [s2]
Rounds interleave every (layer, direction, algorithm, binary); each cell is the median of the rounds'
`convtune run --repeat REPEAT` medians, with their min-max. onednn.auto runs from the first binary only.
One JSON line per cell on stdout."""
import json, subprocess, sys, os, statistics, itertools
bins = dict(a.split('=', 1) for a in sys.argv[1].split(','))   # name=path,...
rounds = int(sys.argv[2]); repeat = int(sys.argv[3])
dirs = sys.argv[4].split(',')
which = sys.argv[5] if len(sys.argv) > 5 else 'all'
layers = [("res2 64 56 s1", 64, 56, 1), ("res3 128 56 s2", 128, 56, 2), ("res3 128 28 s1", 128, 28, 1),
          ("res4 256 28 s2", 256, 28, 2), ("res4 256 14 s1", 256, 14, 1), ("res5 512 14 s2", 512, 14, 2),
          ("res5 512 7 s1", 512, 7, 1)]
if which == 's2': layers = [l for l in layers if l[3] == 2]
env = dict(os.environ, OMP_NUM_THREADS="1")
res = {}
for r in range(rounds):
    for (name, c, i, s), d in itertools.product(layers, dirs):
        algos = ["cpu.direct_blocked", "onednn.auto"]
        if s == 1 and d == "fwd": algos += ["cpu.winograd_f2x3", "cpu.winograd_f4x3"]
        for a in algos:
            for bn, bp in bins.items():
                if a.startswith("onednn") and bn != list(bins)[0]: continue
                p = f"dir={d},dtype=f32,layout=nchw,n=8,c={c},k={c},in={i}x{i},ker=3x3,stride={s}x{s},pad=1x1"
                cmd = ["taskset", "-c", "1", bp, "run", "-p", p, "-a", a, "--repeat", str(repeat), "--json"]
                out = subprocess.run(cmd, env=env, capture_output=True, text=True)
                try: j = json.loads(out.stdout)
                except Exception:
                    print("ERR", name, d, a, out.stderr[:200], file=sys.stderr)
                    continue
                res.setdefault((name, d, a, bn), []).append((j["median_ms"], j["gflops"] * j["median_ms"] / 1e3))
for (name, d, a, bn), v in res.items():
    ms = [x[0] for x in v]; gf = v[0][1]
    med = statistics.median(ms)
    print(json.dumps({"layer": name, "dir": d, "algo": a, "bin": bn, "median_ms": round(med, 3),
                      "min_ms": round(min(ms), 3), "max_ms": round(max(ms), 3), "gflops": round(gf / med * 1e3, 1)}))
