#!/usr/bin/env python3
"""Fidelity against real PyTorch: does `convtune simulate` predict what whole networks really cost?

For each workload of bench/sim/pytorch-truth.sh's output (OUT/<w>-measure.json: PyTorch's
per-problem measurements; OUT/<w>-runs.json: the network run for real, benchmark off and on,
cold and warm kernel cache, several fresh processes each):

  * the prediction: `convtune simulate --stream trace:<the network's convolutions>
    --pytorch-measured OUT/<w>-measure.json --kernel-cache C --iterations N --json`, plus the
    non-convolution part of a step (`other_ms`), which a user's capture measures: here the
    steady step time of the FIRST benchmark-off run minus the predicted steady convolution time
    of `off` (one number per workload, the same for every setting and cache state);
  * the measurement: per run, the measured steps plus (N - measured steps) x that run's median
    step; the median over runs and their range;
  * break-even: the iteration from which benchmark on's cumulative time stays at or below off's,
    predicted (from the simulated per-iteration totals + other_ms) and measured (from the
    medians of the runs' first steps and steady steps).

    bench/sim/pytorch_fidelity.py --cli build/cpu/tools/convtune --results bench/sim/results/h200 \
        --problems bench/sim/data --iterations 100,1000 --out fidelity.md

The per-problem measurements and the network runs are separate processes, so the prediction
never sees the runs it is checked against (except other_ms, from the first off run, as above).
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile

SETTING_OF = {0: "off", 1: "pytorch"}


def load_runs(path):
    runs = []
    with open(path) as f:
        for line in f:
            if line.strip():
                runs.append(json.loads(line))
    return runs


def measured_total(run, n):
    it = run["iterations_ms"]
    steady = statistics.median(it[1:])
    if n <= len(it):
        return sum(it[:n])
    return sum(it) + (n - len(it)) * steady


def simulate(cli, trace, measure, cache, n):
    cmd = [cli, "simulate", "--stream", "trace:" + trace, "--pytorch-measured", measure, "--kernel-cache", cache,
           "--iterations", str(n), "--json"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode not in (0,):
        sys.exit(f"pytorch_fidelity: {' '.join(cmd)} failed ({p.returncode}): {p.stderr[-2000:]}")
    doc = json.loads(p.stdout)
    out = {}
    for s in doc["settings"]:
        if s.get("failure"):
            sys.exit(f"pytorch_fidelity: {s['name']} failed: {s['failure']}")
        per = [x["search_ms"] + x["exec_ms"] for x in s["per_iteration"]]
        out[s["name"]] = dict(total=s["total_ms"], per=per, lo=s["range_ms"][0], hi=s["range_ms"][1])
    return out


def break_even(first0, steady0, first1, steady1):
    if steady1 >= steady0:
        return None
    return max(1, int((first1 - first0) / (steady0 - steady1)) + 2)


def predicted_break_even(per0, per1, other):
    c0 = c1 = 0.0
    last_above = 0
    for i, (a, b) in enumerate(zip(per0, per1)):
        c0 += a + other
        c1 += b + other
        if c1 > c0:
            last_above = i + 1
    if last_above == len(per0):
        # not reached: project with the steady gain of the second half
        h = len(per0) // 2
        gain = statistics.mean(per0[h:]) - statistics.mean(per1[h:])
        return None if gain <= 0 else int(len(per0) + (c1 - c0) / gain) + 1
    return last_above + 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--results", required=True, help="folder with <w>-measure.json and <w>-runs.json")
    ap.add_argument("--problems", required=True, help="folder with <w>.json (bench/sim/make-problems.sh)")
    ap.add_argument("--iterations", default="100,1000")
    ap.add_argument("--tolerance", type=float, default=0.15)
    ap.add_argument("--out")
    a = ap.parse_args()
    ns = [int(x) for x in a.iterations.split(",")]
    lines = ["| workload | cache | setting | N | predicted | predicted range | measured median | measured range | error | in range |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---|"]
    be_lines = ["| workload | cache | predicted break-even | measured break-even | error |", "|---|---|---:|---:|---:|"]
    worst, outside = 0.0, 0
    tmp = tempfile.mkdtemp()
    for measure in sorted(glob.glob(os.path.join(a.results, "*-measure.json"))):
        w = os.path.basename(measure)[: -len("-measure.json")]
        runs_path = os.path.join(a.results, w + "-runs.json")
        if not os.path.exists(runs_path) or os.path.getsize(runs_path) == 0:
            print(f"pytorch_fidelity: {w}: no network runs, skipped", file=sys.stderr)
            continue
        runs = load_runs(runs_path)
        with open(os.path.join(a.problems, w + ".json")) as f:
            problems = json.load(f)
        trace = os.path.join(tmp, w + ".trace")
        with open(trace, "w") as f:
            f.write("# convtune-trace 1\n" + "\n".join(p["key"] for p in problems) + "\n")
        # other_ms: the first off run's steady step minus off's predicted steady convolutions.
        first_off = next(r for r in runs if r["benchmark"] == 0)
        probe = simulate(a.cli, trace, measure, first_off["cache"], 2)
        other = statistics.median(first_off["iterations_ms"][1:]) - probe["off"]["per"][1]
        for cache in ("cold", "warm"):
            sel = {bm: [r for r in runs if r["benchmark"] == bm and r["cache"] == cache] for bm in (0, 1)}
            sims = {n: simulate(a.cli, trace, measure, cache, n) for n in ns}
            for n in ns:
                sim = sims[n]
                for bm in (0, 1):
                    s = sim[SETTING_OF[bm]]
                    pred = s["total"] + n * other
                    lo, hi = s["lo"] + n * other, s["hi"] + n * other
                    meas = [measured_total(r, n) for r in sel[bm]]
                    med = statistics.median(meas)
                    err = (pred - med) / med
                    inside = all(lo * (1 - 1e-9) <= m <= hi * (1 + 1e-9) for m in meas)
                    worst = max(worst, abs(err))
                    outside += 0 if inside else 1
                    lines.append(f"| {w} | {cache} | {SETTING_OF[bm]} | {n} | {pred / 1e3:.2f} s | {lo / 1e3:.2f}-{hi / 1e3:.2f} s | "
                                 f"{med / 1e3:.2f} s | {min(meas) / 1e3:.2f}-{max(meas) / 1e3:.2f} s | {100 * err:+.1f}% | "
                                 f"{'yes' if inside else 'no'} |")
            sim = sims[max(ns)]
            pbe = predicted_break_even(sim["off"]["per"], sim["pytorch"]["per"], other)
            med = lambda xs: statistics.median(xs)
            mbe = break_even(med([r["iterations_ms"][0] for r in sel[0]]), med([med(r["iterations_ms"][1:]) for r in sel[0]]),
                             med([r["iterations_ms"][0] for r in sel[1]]), med([med(r["iterations_ms"][1:]) for r in sel[1]]))
            e = "-" if not (pbe and mbe) else f"{100 * (pbe - mbe) / mbe:+.0f}%"
            be_lines.append(f"| {w} | {cache} | {pbe or 'never'} | {mbe or 'never'} | {e} |")
        print(f"pytorch_fidelity: {w}: other_ms {other:.1f}", file=sys.stderr)
    text = ("Totals (predicted = simulate's total + N x other_ms):\n\n" + "\n".join(lines) +
            "\n\nBreak-even of benchmark=True against benchmark=False:\n\n" + "\n".join(be_lines) +
            f"\n\nworst error {100 * worst:.1f}% (tolerance {100 * a.tolerance:.0f}%); measured runs outside the predicted range: {outside}\n")
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    print(text)
    sys.exit(0 if worst <= a.tolerance else 1)


if __name__ == "__main__":
    main()
