#!/usr/bin/env python3
"""Replay fidelity: does a replay of a recording predict the live run on the same device?

For each stream: record the workload's problems with `convtune record`, then simulate every
standard flag setting live (each setting in its own process, so no setting finds plans or
primitives another one built) and from the recording, and compare the totals per setting.

    bench/sim/fidelity.py --cli build/cpu/tools/convtune --backend cpu --workload resnet50 \
        --batch 8 --streams fixed,resolution --iterations 20 --out fidelity-out

Writes <out>/fidelity.md (a table per stream) and <out>/fidelity.json, and keeps the recordings
and every simulate document. Exit status 0 when every setting is within --tolerance, 1 otherwise.
"""
import argparse
import json
import os
import subprocess
import sys
import time

SETTINGS = ["off", "on", "on+det", "adaptive", "pytorch"]


def run(cmd, out_path=None, timeout=None, allowed=(0,)):
    """Runs cmd; its stdout is returned (and kept in out_path). Exit codes outside `allowed` stop
    the script; `convtune simulate` exits 3 when a setting failed but still prints its document."""
    t0 = time.time()
    print("$ " + " ".join(cmd), file=sys.stderr, flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
    if p.stderr:
        sys.stderr.write(p.stderr[-4000:])
    if p.returncode not in allowed:
        if out_path:
            with open(out_path, "w") as f:
                f.write(p.stdout)
        sys.stderr.write(p.stdout[-4000:])
        raise SystemExit(f"fidelity: command failed with exit {p.returncode}: {' '.join(cmd)}")
    if out_path:
        with open(out_path, "w") as f:
            f.write(p.stdout)
    print(f"  ({time.time() - t0:.1f} s)", file=sys.stderr, flush=True)
    return p.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", required=True, help="the convtune executable")
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--workload", default="resnet50")
    ap.add_argument("--shapes-dir", help="folder of the benchdnn shape files (passed to convtune)")
    ap.add_argument("--batch", type=int)
    ap.add_argument("--dtype")
    ap.add_argument("--layout")
    ap.add_argument("--mode", default="infer")
    ap.add_argument("--streams", default="fixed,resolution")
    ap.add_argument("--scales", default="0.5,0.75,1")
    ap.add_argument("--batches", default="8,16,32")
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--samples", type=int, default=5, help="timed calls per algorithm and problem in the recording")
    ap.add_argument("--tolerance", type=float, default=0.15)
    ap.add_argument("--out", required=True)
    ap.add_argument("--timeout", type=float, default=900, help="seconds per convtune call")
    ap.add_argument("--reuse", action="store_true",
                    help="keep the recordings and live documents already in --out (measured on the device) and only replay "
                         "and compare again, e.g. on another machine")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)

    common = ["--workload", a.workload, "--mode", a.mode]
    for opt in ("shapes_dir", "batch", "dtype", "layout"):
        v = getattr(a, opt)
        if v is not None:
            common += ["--" + opt.replace("_", "-"), str(v)]

    results = {"backend": a.backend, "workload": a.workload, "mode": a.mode, "iterations": a.iterations,
               "tolerance": a.tolerance, "streams": []}
    md = ["# Replay fidelity", "",
          f"backend `{a.backend}`, workload `{a.workload}` ({a.mode}"
          + (f", batch {a.batch}" if a.batch else "") + (f", {a.dtype}" if a.dtype else "")
          + (f", {a.layout}" if a.layout else "") + f"), {a.iterations} iterations; "
          f"live = each setting in its own process; replay = the recording of the same problems.", ""]
    ok = True
    for stream in a.streams.split(","):
        sargs = ["--stream", stream, "--iterations", str(a.iterations)]
        if stream in ("resolution", "mixed"):
            sargs += ["--scales", a.scales]
        if stream in ("batch", "mixed"):
            sargs += ["--batches", a.batches]
        tag = stream.replace(":", "_").replace("/", "_")
        rec = os.path.join(a.out, f"rec-{tag}.json")
        t0 = time.time()
        if not (a.reuse and os.path.exists(rec)):
            run([a.cli, "record", "--backend", a.backend, *common, *sargs, "--samples", str(a.samples), "-o", rec], timeout=a.timeout)
        record_s = time.time() - t0
        live = {}
        for s in SETTINGS:
            path = os.path.join(a.out, f"live-{tag}-{s.replace('+', '_')}.json")
            if a.reuse and os.path.exists(path):
                with open(path) as f:
                    live[s] = json.load(f)["settings"][0]
                continue
            doc = json.loads(run([a.cli, "simulate", "--backend", a.backend, *common, *sargs, "--flags", s, "--repeats", "1", "--json"], path,
                                 timeout=a.timeout, allowed=(0, 3)))
            live[s] = doc["settings"][0]
            if live[s].get("failure"):
                print(f"  live {s}: {live[s]['failure']}", file=sys.stderr, flush=True)
        path = os.path.join(a.out, f"replay-{tag}.json")
        rdoc = json.loads(run([a.cli, "simulate", "--replay", rec, *common, *sargs, "--compare", "--json"], path,
                              timeout=a.timeout, allowed=(0, 3)))
        replay = {x["name"]: x for x in rdoc["settings"]}
        rows = []
        md += [f"## Stream `{stream}`", "",
               (f"recording: {record_s:.0f} s; " if record_s > 1 else "recording and live runs reused; ")
               + f"{rdoc.get('estimated_problems', 0)} problems estimated from a neighbour", "",
               "| setting | live total | replay total | error | live search | replay search | live exec | replay exec | within |",
               "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
        for s in SETTINGS:
            l, r = live[s], replay[s]
            failed = l.get("failure") or r.get("failure")
            err = r["total_ms"] / l["total_ms"] - 1 if l["total_ms"] > 0 and not failed else float("inf")
            within = abs(err) <= a.tolerance
            if failed:
                md.append(f"| {s} | failed: {failed} | | | | | | | NO |")
                ok = False
                rows.append({"setting": s, "failure": failed, "within": False})
                continue
            ok = ok and within
            rows.append({"setting": s, "live_total_ms": l["total_ms"], "replay_total_ms": r["total_ms"], "error": err,
                         "live_search_ms": l["search_ms"], "replay_search_ms": r["search_ms"], "live_exec_ms": l["exec_ms"],
                         "replay_exec_ms": r["exec_ms"], "within": within})
            md.append(f"| {s} | {l['total_ms']:.1f} ms | {r['total_ms']:.1f} ms | {100 * err:+.1f}% | {l['search_ms']:.1f} | "
                      f"{r['search_ms']:.1f} | {l['exec_ms']:.1f} | {r['exec_ms']:.1f} | {'yes' if within else 'NO'} |")
        md.append("")
        results["streams"].append({"stream": stream, "record_s": record_s, "rows": rows})
    with open(os.path.join(a.out, "fidelity.json"), "w") as f:
        json.dump(results, f, indent=1)
    with open(os.path.join(a.out, "fidelity.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
