#!/usr/bin/env python3
"""Measures the cold kernel-cache rows of a folder's PyTorch grids again, each process on an empty
kernel cache of its own, and puts them in place of the old ones (replace_cold.py). For grids
measured before `pytorch_measure.py grid` gave each process its own kernel cache (2026-12-07):
their cold measurements carry no `kernel_cache_folder`, and convtune leaves them out. On the GPU
machine, from the repository's root (PyTorch only; no convtune build needed):

    bench/sim/remeasure_cold.py bench/sim/results/h200 OUT [--runs 2] [--only NAME,...] [--all]

For each NAME-measure.json of the folder whose cold measurements lack their folder (every grid
with --all): the problems and allow_tf32 are read from the grid itself, `pytorch_measure.py grid
--caches cold` measures them again into OUT/NAME-cold.json (benchmark off and on, --runs fresh
processes each), and replace_cold.py writes OUT/NAME-measure.json (the new cold measurements with
the old warm ones) and OUT/NAME.json.gz (the recording library's compact copy). Copy those over
the folder's grid and the library's file (data/recordings/<gpu>/pytorch/) once they look right.
A grid whose measurement fails is reported and the others go on; the exit status is 1 if any
failed. --device cpu runs PyTorch's CPU convolutions instead (to test this script)."""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MEASURE = os.path.join(HERE, "..", "..", "python", "convtune", "pytorch_measure.py")


def needs_remeasure(grid):
    """True where some cold measurement of the grid has no kernel-cache folder of its own."""
    return any(m["cache"] == "cold" and not m.get("kernel_cache_folder") for m in grid["measurements"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results", help="a folder of NAME-measure.json grids")
    ap.add_argument("out", help="where the new files are written")
    ap.add_argument("--runs", type=int, default=2, help="fresh processes per setting (default %(default)s)")
    ap.add_argument("--only", default="", help="comma-separated NAMEs (default: every grid of the folder)")
    ap.add_argument("--all", action="store_true", help="also grids whose cold measurements have their own folder")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    a = ap.parse_args()
    if a.runs < 1:
        ap.error("--runs: must be >= 1")
    if not os.path.isdir(a.results):
        ap.error(f"{a.results}: not a folder")
    names = sorted(f[:-len("-measure.json")] for f in os.listdir(a.results) if f.endswith("-measure.json"))
    if a.only:
        wanted = a.only.split(",")
        unknown = [n for n in wanted if n not in names]
        if unknown:
            ap.error(f"--only: no grid {', '.join(unknown)} in {a.results} (it has: {', '.join(names) or 'none'})")
        names = wanted
    if not names:
        ap.error(f"{a.results}: no NAME-measure.json grid")
    os.makedirs(a.out, exist_ok=True)
    failed = []
    for i, name in enumerate(names, 1):
        old_path = os.path.join(a.results, f"{name}-measure.json")
        with open(old_path) as f:
            grid = json.load(f)
        if not a.all and not needs_remeasure(grid):
            print(f"[{i}/{len(names)}] {name}: its cold measurements have their own kernel caches already; skipped "
                  "(--all measures it anyway)", flush=True)
            continue
        first = grid["measurements"][0]
        allow_tf32 = first["setting"]["allow_tf32"]
        # The grid's problems as canonical lines (every field spelled out), which pytorch_measure
        # reads like a trace: the new grid then measures exactly the old one's problems.
        problems = os.path.join(a.out, f"{name}-problems.txt")
        with open(problems, "w") as f:
            f.write(f"# {name}: the problems of {os.path.basename(old_path)}\n")
            f.write("".join(p["key"] + "\n" for p in first["problems"]))
        new_path = os.path.join(a.out, f"{name}-cold.json")
        print(f"[{i}/{len(names)}] {name}: {len(first['problems'])} problems, allow_tf32={allow_tf32}, "
              f"{2 * a.runs} processes", flush=True)
        t = time.time()
        r = subprocess.run([sys.executable, MEASURE, "grid", "--problems", problems, "--allow-tf32", str(allow_tf32),
                            "--caches", "cold", "--runs", str(a.runs), "--device", a.device, "--out", new_path])
        if r.returncode != 0:
            print(f"[{i}/{len(names)}] {name}: the measurement failed (exit {r.returncode})", file=sys.stderr, flush=True)
            failed.append(name)
            continue
        r = subprocess.run([sys.executable, os.path.join(HERE, "replace_cold.py"), old_path, new_path,
                            os.path.join(a.out, f"{name}-measure.json"), os.path.join(a.out, f"{name}.json.gz")])
        if r.returncode != 0:
            failed.append(name)
            continue
        print(f"[{i}/{len(names)}] {name}: done in {time.time() - t:.0f} s", flush=True)
    if failed:
        print(f"remeasure_cold: failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
