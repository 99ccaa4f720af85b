#!/usr/bin/env python3
"""How far convtune's emulation of PyTorch's search is from PyTorch's measured search, per direction.

    bench/sim/emulation_check.py --cli build/cpu/tools/convtune --recording REC.json \\
        --measured bench/sim/results/h200/resnet50-train-fp32-b32-measure.json \\
        [--frontend-logs DIR --problems bench/sim/data/resnet50-train-fp32-b32.json] [--kernel-cache warm]

PyTorch's search of a problem is its benchmark=True first call minus its benchmark=False first call
(the medians over the measured runs of `pytorch_measure.py grid`, one kernel-cache state). The
emulation's is the `pytorch` row's first iteration minus the `off` row's, `convtune simulate
--replay REC --iterations 1` over a trace of the same problems with the measured flags (TF32 as
measured). Only problems the recording holds exactly are compared (the others would be estimated).

--frontend-logs: a folder of cudnn-frontend logs of PyTorch's search (`CUDNN_FRONTEND_LOG_INFO=1`,
one `fe-<dir>.log` (or `.log.gz`) per direction, made by `pytorch_anatomy.py run` over --problems' problems of that
direction, in that order after its start-up problem): the configurations PyTorch timed twice in a
problem are written into a copy of the recording as its `listings` (2), for recordings made before
convtune's cuDNN ranking counted them, and the emulation is compared with and without them.
"""
import argparse
import gzip
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

DIRS = ("fwd", "bwd_data", "bwd_filter")


def measured_search(measured, cache):
    """problem key -> PyTorch's search (ms): median bm1 first call minus median bm0 first call."""
    runs = [m for m in measured["measurements"] if m.get("cache") == cache]
    if not runs:
        sys.exit(f"no runs with kernel cache '{cache}' in the measurement file")
    firsts = {}
    for m in runs:
        for p in m["problems"]:
            firsts.setdefault((m["setting"]["benchmark"], p["key"]), []).append(p["first_ms"])
    keys = {k for (_, k) in firsts}
    return {k: statistics.median(firsts[(1, k)]) - statistics.median(firsts[(0, k)]) for k in keys
            if (1, k) in firsts and (0, k) in firsts}, runs[0]["setting"].get("allow_tf32", 1)


def repeated_plans(log_path):
    """Per problem (in the log's order, the start-up problem first), the plan tags timed twice."""
    out, cur = [], None
    if not os.path.exists(log_path) and os.path.exists(log_path + ".gz"):
        log_path += ".gz"
    with (gzip.open if log_path.endswith(".gz") else open)(log_path, "rt") as f:
        for line in f:
            m = re.match(r"\[cudnn_frontend\] Plan (\S+) took", line)
            if m:
                if cur is None:
                    cur = []
                    out.append(cur)
                cur.append(m.group(1))
            elif "Auto-tuning returns" in line:
                cur = None
    return [[t for i, t in enumerate(p) if t in p[:i]] for p in out]


def tag_to_id(direction, tag):
    """A default-knob tag (ConvFwd_eng0) -> convtune's id (cudnn.graph.fwd.eng0); None with knobs."""
    m = re.fullmatch(r"Conv\w+?_eng(\d+)", tag)
    return f"cudnn.graph.{direction}.eng{m.group(1)}" if m else None


def with_listings(rec, logs_dir, problems):
    patched = 0
    by_key = {p["problem"]: p for p in rec["problems"]}
    for d in DIRS:
        keys = list(dict.fromkeys(p["key"] for p in problems if p["dir"] == d))
        reps = repeated_plans(os.path.join(logs_dir, f"fe-{d}.log"))[1:]  # after the start-up problem
        if len(reps) != len(keys):
            sys.exit(f"fe-{d}.log has {len(reps)} searches after the start-up, the problem list {len(keys)}")
        for k, tags in zip(keys, reps):
            pr = by_key.get(k)
            for t in tags:
                i = tag_to_id(d, t)
                if pr and i and i in pr["heuristic"]:
                    pr.setdefault("listings", {})[i] = pr.get("listings", {}).get(i, 1) + 1
                    patched += 1
    return patched


def emulated(cli, rec_path, keys, allow_tf32):
    with tempfile.NamedTemporaryFile("w", suffix=".trace", delete=False) as f:
        f.write(f"# convtune-trace 1\n# flags enabled=1,benchmark=0,deterministic=0,allow_tf32={allow_tf32}\n" + "\n".join(keys) + "\n")
        trace = f.name
    try:
        out = subprocess.run([cli, "simulate", "--stream", "trace:" + trace, "--replay", rec_path, "--iterations", "1", "--json"],
                             capture_output=True, text=True, check=True).stdout
    finally:
        os.unlink(trace)
    s = {x["name"]: x for x in json.loads(out)["settings"]}
    return s["pytorch"]["first_iteration_ms"] - s["off"]["first_iteration_ms"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cli", required=True)
    ap.add_argument("--recording", required=True)
    ap.add_argument("--measured", required=True)
    ap.add_argument("--kernel-cache", default="warm", choices=("warm", "cold"))
    ap.add_argument("--frontend-logs")
    ap.add_argument("--problems")
    a = ap.parse_args()
    with open(a.measured) as f:
        search, tf32 = measured_search(json.load(f), a.kernel_cache)
    with (gzip.open if a.recording.endswith(".gz") else open)(a.recording, "rt") as f:
        rec = json.load(f)
    held = {p["problem"] for p in rec["problems"]}
    tmp = None
    recs = [("emulation", a.recording)]
    if a.frontend_logs:
        if not a.problems:
            sys.exit("--frontend-logs needs --problems")
        with open(a.problems) as f:
            n = with_listings(rec, a.frontend_logs, json.load(f))
        tmp = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
        json.dump(rec, tmp)
        tmp.close()
        recs.append((f"emulation with PyTorch's repeated plans ({n} listings)", tmp.name))
    print(f"| direction | problems | PyTorch's search ({a.kernel_cache}) | " + " | ".join(f"{n} (PyTorch / it)" for n, _ in recs) + " |")
    print("|---|---:|---:|" + "---:|" * len(recs))
    try:
        for d in DIRS:
            keys = [k for k in search if k.startswith(f"dir={d},") and k in held]
            if not keys:
                continue
            pt = sum(search[k] for k in keys)
            cells = [f"{e:.0f} ms ({pt / e:.2f})" for e in (emulated(a.cli, path, keys, tf32) for _, path in recs)]
            print(f"| {d} | {len(keys)} | {pt:.0f} ms | " + " | ".join(cells) + " |")
    finally:
        if tmp:
            os.unlink(tmp.name)


if __name__ == "__main__":
    main()
