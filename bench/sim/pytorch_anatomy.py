#!/usr/bin/env python3
"""What a convolution search is made of, counted and timed call by call (docs/simulation.md,
"What PyTorch's search is made of").

Run under bench/sim/cudnn_calls.cpp's LD_PRELOAD library, which counts and times the process's
cuDNN backend-API calls (plan builds, heuristics queries, executions) and CUDA synchronisations:

    c++ -O2 -shared -fPIC -o cudnn_calls.so bench/sim/cudnn_calls.cpp -ldl
    CUDNN_CALLS_OUT=bm1.jsonl LD_PRELOAD=$PWD/cudnn_calls.so \
        python3 bench/sim/pytorch_anatomy.py run --problems P.json --dir fwd --benchmark 1 --allow-tf32 0
    CUDNN_CALLS_OUT=emu.jsonl LD_PRELOAD=$PWD/cudnn_calls.so \
        convtune tune --backend cudnn --shapes fwd.txt --policy pytorch --flags benchmark=1,allow_tf32=0
    python3 bench/sim/pytorch_anatomy.py summarize bm0.jsonl bm1.jsonl emu.jsonl

`run` times, in one fresh process, PyTorch's first call of each problem of the list (`convtune
parse --json` objects, as pytorch_measure.py takes; --dir keeps one direction), synchronised,
after a start-up convolution outside the list; it writes one line per problem (its wall time and
the calls made during it). `summarize` adds the lines of each file (the problems; `exit` lines,
what a process without per-problem labels made, count as one) and prints per file: the wall
time, plan builds (execution-plan finalisations, ok and failed), heuristics (engine-heuristics
finalisations and attribute queries), other descriptor work, executions, and the time waited on
the GPU.
"""
import argparse
import ctypes
import importlib.util
import json
import os
import sys
import time

PLAN, HEUR = "5", "4"  # cudnnBackendDescriptorType_t: EXECUTION_PLAN, ENGINEHEUR


def _measure_module():
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "..", "python", "convtune", "pytorch_measure.py")
    spec = importlib.util.spec_from_file_location("pytorch_measure", path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def cmd_run(a):
    import torch

    pm = _measure_module()
    problems = [p for p in pm._load_problems(a.problems) if a.dir in (None, p["dir"])]
    seen, todo = set(), []
    for p in problems:
        if p["key"] not in seen:
            seen.add(p["key"])
            todo.append(p)
    torch.backends.cudnn.benchmark = bool(a.benchmark)
    torch.backends.cudnn.allow_tf32 = bool(a.allow_tf32)
    dump = ctypes.CDLL(None).cudnn_calls_dump
    dump.argtypes = [ctypes.c_char_p, ctypes.c_double]
    start = {"key": "startup", "dir": "fwd", "dtype": todo[0]["dtype"], "layout": todo[0]["layout"], "n": 1, "c": 8, "k": 8,
             "groups": 1, "in": [9, 9], "ker": [3, 3], "stride": [1, 1], "dil": [1, 1], "pad": [1, 1], "pad_end": [1, 1],
             "out": [9, 9]}
    for p in [start] + todo:
        call = pm._torch_call(torch, p, "cuda")
        torch.cuda.synchronize()
        dump(b"between", 0.0)
        t0 = time.perf_counter()
        call()
        torch.cuda.synchronize()
        dump(p["key"].encode(), (time.perf_counter() - t0) * 1e3)


def _add(total, line):
    for k, v in line.items():
        if k in ("label", "wall_ms"):
            continue
        if isinstance(v, list):
            t = total.setdefault(k, [0, 0.0])
            t[0] += v[0]
            t[1] += v[1]
        else:
            d = total.setdefault(k, {})
            for ty, (n, ms) in v.items():
                t = d.setdefault(ty, [0, 0.0])
                t[0] += n
                t[1] += ms


def summarize(path):
    total, wall, problems = {}, 0.0, 0
    with open(path) as f:
        for raw in f:
            line = json.loads(raw)
            if line["label"] in ("between", "startup") or line["label"] == "exit" and problems:
                continue
            problems += 1
            wall += line["wall_ms"]
            _add(total, line)

    def get(kind, ty=None):
        v = total.get(kind, {} if ty else [0, 0.0])
        return v.get(ty, [0, 0.0]) if ty else v

    plans, plans_failed = get("finalize", PLAN), get("finalize_failed", PLAN)
    heur = [get("finalize", HEUR)[0], get("finalize", HEUR)[1] + get("get_attribute", HEUR)[1]]
    other = sum(ms for kind in ("create", "finalize", "finalize_failed", "get_attribute") for ty, (n, ms) in total.get(kind, {}).items()
                if not (ty in (PLAN, HEUR) and kind in ("finalize", "finalize_failed")) and not (ty == HEUR and kind == "get_attribute"))
    return {"file": path, "problems": problems, "wall_ms": wall, "plans": plans, "plans_failed": plans_failed, "heuristics": heur,
            "other_descriptor_ms": other, "execute": get("execute"), "execute_failed": get("execute_failed"),
            "gpu_wait_ms": get("event_sync")[1] + get("device_sync")[1], "syncs": get("event_sync")[0] + get("device_sync")[0]}


def cmd_summarize(a):
    rows = [summarize(p) for p in a.files]
    if a.json:
        print(json.dumps(rows, indent=1))
        return
    print("| file | problems | wall ms | plan builds ok (ms) | failed (ms) | heuristics queries (ms) | other descriptors ms |"
          " executions (ms CPU) | GPU waits (ms) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {os.path.basename(r['file'])} | {r['problems']} | {r['wall_ms']:.0f} | {r['plans'][0]} ({r['plans'][1]:.0f}) |"
              f" {r['plans_failed'][0]} ({r['plans_failed'][1]:.0f}) | {r['heuristics'][0]} ({r['heuristics'][1]:.0f}) |"
              f" {r['other_descriptor_ms']:.0f} | {r['execute'][0]} ({r['execute'][1]:.0f}) | {r['syncs']} ({r['gpu_wait_ms']:.0f}) |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="PyTorch's first call of each problem, in this process")
    r.add_argument("--problems", required=True)
    r.add_argument("--dir", choices=("fwd", "bwd_data", "bwd_filter"))
    r.add_argument("--benchmark", type=int, choices=(0, 1), required=True)
    r.add_argument("--allow-tf32", type=int, choices=(0, 1), default=1)
    r.set_defaults(fn=cmd_run)
    s = sub.add_parser("summarize", help="the calls of each file, added up")
    s.add_argument("files", nargs="+")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_summarize)
    a = ap.parse_args(argv)
    a.fn(a)


if __name__ == "__main__":
    main()
