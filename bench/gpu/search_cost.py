#!/usr/bin/env python3
"""convtune's search over a network's problems in one process, against PyTorch's benchmark=True
first calls of the same problems (docs/benchmarks-gpu.md, "Search cost in one process").

    search_cost.py run --cli gpu-pkg/bin/convtune --out OUT [--runs fp32=10,tf32=3,amp=3] [--probe]
    search_cost.py summarize OUT [--recording REC.json.gz]

`run` (on the GPU machine, from the repository's root): for each precision, the distinct problems
of bench/sim/data/resnet50-train-<precision>-b32.json (the keys PyTorch's own training step runs)
searched by `convtune tune --backend cudnn --flags benchmark=1,allow_tf32=A --json` in fresh
processes, all with one CUDA kernel cache of their own (`CUDA_CACHE_PATH`: the first run finds it
empty, the later ones warm); then `pytorch_measure.py grid --runs 1` on the same problems (its own
caches, cold and warm). Writes OUT/tune/<precision>-<run>.json and OUT/pt-<precision>.json.

`summarize`: per precision, convtune's search (cold: run 1; warm: the median of the others, with
their range) against the sum of PyTorch's benchmark=True first calls, cold and warm; with
--recording (a `convtune record` of the same problems, f32 ones), the summed recorded median of
convtune's picks against the exhaustive best, and how often fresh processes picked the same
algorithm over the problems whose best leads the next by 5% or more in the recording; for every
precision with 3 runs or more, the same over the problems whose best leads by 5% or more in the
runs' own pooled medians (same_day_repeatability).
"""
import argparse
import collections
import gzip
import json
import os
import statistics
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "sim", "data")
TF32 = {"fp32": 0, "tf32": 1, "amp": 1}
# With --probe, each convtune process first searches this problem, outside every network: the same
# start-up convolution pytorch_measure.py runs (float32, 1x5x13x11 input, 7 3x3 filters) before it
# times PyTorch's first calls, so both sides' per-problem sums leave out the process's first use
# of cuDNN in the same way. Its search is reported apart, as start-up.
PROBE = "dir=fwd,dtype=f32,layout=nchw,n=1,c=5,k=7,g=1,in=13x11,ker=3x3,stride=1x1,dil=1x1,pad=0x0,pad_end=0x0"


def run(a):
    os.makedirs(os.path.join(a.out, "tune"), exist_ok=True)
    runs = dict(x.split("=") for x in a.runs.split(","))
    for prec, n in runs.items():
        problems = os.path.join(DATA, f"resnet50-train-{prec}-b32.json")
        with open(problems) as f:
            keys = list(dict.fromkeys(p["key"] for p in json.load(f)))
        with tempfile.TemporaryDirectory() as cache, tempfile.NamedTemporaryFile("w", suffix=".shapes") as shapes:
            shapes.write("\n".join(([PROBE] if a.probe else []) + keys) + "\n")
            shapes.flush()
            for r in range(1, int(n) + 1):
                out = os.path.join(a.out, "tune", f"{prec}-{r}.json")
                with open(out, "w") as f:
                    subprocess.run([a.cli, "tune", "--backend", "cudnn", "--shapes", shapes.name, "--flags",
                                    f"benchmark=1,allow_tf32={TF32[prec]}", "--json"], stdout=f, check=True, timeout=300,
                                   env=dict(os.environ, CUDA_CACHE_PATH=cache))
                with open(out) as f:
                    print(f"{prec} run {r}: search {json.load(f)['total_search_ms']:.0f} ms", flush=True)
        if a.skip_pytorch:
            continue
        subprocess.run(["python3", os.path.join(HERE, "..", "..", "python", "convtune", "pytorch_measure.py"), "grid", "--problems",
                        problems, "--allow-tf32", str(TF32[prec]), "--runs", "1", "--out", os.path.join(a.out, f"pt-{prec}.json")],
                       check=True, timeout=600)


def pytorch_first_calls(path):
    """(benchmark, cache) -> sum of first_ms over the measurement's problems."""
    with open(path) as f:
        m = json.load(f)
    return {(x["setting"]["benchmark"], x["cache"]): sum(p["first_ms"] for p in x["problems"]) for x in m["measurements"]}


def pytorch_startup(path):
    """cache -> startup_ms of the benchmark=True measurement."""
    with open(path) as f:
        m = json.load(f)
    return {x["cache"]: x.get("startup_ms", float("nan")) for x in m["measurements"] if x["setting"]["benchmark"]}


def same_day_repeatability(prec, runs):
    """How often the runs picked the same algorithm, over the problems whose best leads the next by
    5% or more in the runs' own measurement: per candidate the median over the runs of its median
    (candidates timed in at least half the runs). Made in the same call as the picks, so no other
    day's machine state decides which problems count; it needs no recording (fp16 has none)."""
    clear = ok = 0
    for j in range(len(runs[0]["problems"])):
        per = collections.defaultdict(list)
        for x in runs:
            for c in x["problems"][j]["candidates"]:
                if c["samples_ms"]:
                    per[c["id"]].append(c["median_ms"])
        ranked = sorted(statistics.median(v) for v in per.values() if len(v) >= len(runs) / 2)
        if len(ranked) < 2 or ranked[1] < 1.05 * ranked[0]:
            continue
        clear += 1
        n = collections.Counter(x["problems"][j]["algorithm"] for x in runs).most_common(1)[0][1]
        ok += n >= 0.9 * len(runs)
    return (f"{prec}: {len(runs)} runs; problems whose best leads by 5% or more in the runs' own pooled medians: {clear}, "
            f"the same pick in at least 90% of the runs: {ok}")


def summarize(a):
    rec = None
    if a.recording:
        with (gzip.open if a.recording.endswith(".gz") else open)(a.recording, "rt") as f:
            rec = json.load(f)
        notes = {x["id"]: x["notes"] for x in rec["algorithms"]}
        by_key = {p["problem"]: p for p in rec["problems"]}
    print("| precision | convtune, cold | convtune, warm: median (range, runs) | PyTorch bm=True cold | warm | ratio warm | ratio cold |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    picks_lines, repeat_lines = [], []
    for prec in TF32:
        runs = []
        r = 1
        while os.path.exists(os.path.join(a.out, "tune", f"{prec}-{r}.json")):
            with open(os.path.join(a.out, "tune", f"{prec}-{r}.json")) as f:
                x = json.load(f)
            probe = [p for p in x["problems"] if p["problem"] == PROBE]
            if probe:  # a --probe run: the start-up search apart, the network's problems alone
                x["problems"] = [p for p in x["problems"] if p["problem"] != PROBE]
                x["startup_search_ms"] = sum(p["search_ms"] for p in probe)
                x["total_search_ms"] -= x["startup_search_ms"]
            runs.append(x)
            r += 1
        pt_path = os.path.join(a.out, f"pt-{prec}.json")
        if not runs or not os.path.exists(pt_path):
            continue
        pt = pytorch_first_calls(pt_path)
        cold = runs[0]["total_search_ms"]
        warm = [x["total_search_ms"] for x in runs[1:]] or [cold]
        wm = statistics.median(warm)
        print(f"| {prec} | {cold:.0f} ms | {wm:.0f} ms ({min(warm):.0f}-{max(warm):.0f}, {len(warm)}) | {pt[(1, 'cold')]:.0f} ms | "
              f"{pt[(1, 'warm')]:.0f} ms | {wm / pt[(1, 'warm')]:.2f} ({min(warm) / pt[(1, 'warm')]:.2f}-{max(warm) / pt[(1, 'warm')]:.2f}) | "
              f"{cold / pt[(1, 'cold')]:.2f} |")
        if "startup_search_ms" in runs[0]:
            st = [x["startup_search_ms"] for x in runs]
            picks_lines.append(f"{prec}: start-up probe searched first in every run and left out above: {statistics.median(st):.0f} ms "
                               f"({min(st):.0f}-{max(st):.0f}); PyTorch's start-up with benchmark=True (its probe, left out of its "
                               f"first calls): " + ", ".join(f"{c} {v:.0f} ms" for c, v in pytorch_startup(pt_path).items()))
        if len(runs) >= 3:
            repeat_lines.append(same_day_repeatability(prec, runs))
        if rec is None or runs[0]["problems"][0]["problem"].find("dtype=f32") < 0:
            continue
        tf32 = TF32[prec] == 1
        medians = []
        for p in runs[0]["problems"]:
            rp = by_key[p["problem"]]
            medians.append({k: statistics.median(x["samples_ms"]) for k, x in rp["algorithms"].items()
                            if x.get("samples_ms") and k in rp["heuristic"] and (tf32 or "tensor_core" not in notes[k])})
        best = sum(min(m.values()) for m in medians)
        for i, x in enumerate(runs, 1):
            got = sum(m.get(p["algorithm"], float("nan")) for m, p in zip(medians, x["problems"]))
            picks_lines.append(f"{prec} run {i}: picks {got:.3f} ms, exhaustive {best:.3f} ms: {got / best:.4f}")
        if len(runs) >= 3:
            clear = ok = 0
            agree = collections.Counter()
            for j, m in enumerate(medians):
                n = collections.Counter(x["problems"][j]["algorithm"] for x in runs).most_common(1)[0][1]
                agree[n] += 1
                ranked = sorted(m.values())
                if len(ranked) > 1 and ranked[1] >= 1.05 * ranked[0]:
                    clear += 1
                    ok += n >= 0.9 * len(runs)
            repeat_lines.append(f"{prec}: {len(runs)} runs; problems whose best leads by 5% or more: {clear}, the same pick in at least 90% "
                                f"of the runs: {ok}; same pick in n runs (n: problems): {dict(sorted(agree.items()))}")
    for line in picks_lines + repeat_lines:
        print(line)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--cli", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--runs", default="fp32=10,tf32=3,amp=3")
    r.add_argument("--skip-pytorch", action="store_true", help="convtune's runs only (PyTorch's measured in another folder)")
    r.add_argument("--probe", action="store_true", help="search PyTorch's start-up convolution first in each convtune process "
                   "and leave it out of the search time (as pytorch_measure.py leaves it out of PyTorch's first calls)")
    s = sub.add_parser("summarize")
    s.add_argument("out")
    s.add_argument("--recording")
    a = ap.parse_args()
    run(a) if a.cmd == "run" else summarize(a)


if __name__ == "__main__":
    main()
