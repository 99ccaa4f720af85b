"""Measure what PyTorch itself does on this GPU for a list of convolution problems.

The simulator's `pytorch` setting is an emulation of PyTorch's algorithm search; this module
measures the real thing, so that recordings can carry PyTorch's own costs next to convtune's
per-algorithm times (docs/simulation.md, "PyTorch's own behaviour").

    convtune parse --json shapes.trace > problems.json      # a trace, or a shape file at its own batch
    python3 -m convtune.pytorch_measure grid --problems problems.json --out pytorch.json
    python3 path/to/pytorch_measure.py grid ...      # where only PyTorch is installed
    python3 path/to/pytorch_measure.py grid --problems capture.trace ...   # a trace capture wrote

One measurement is one fresh process with one setting of torch.backends.cudnn (benchmark,
allow_tf32, deterministic). In it, for the problems in the order given (the order of a
network's first iteration):
  * `context_ms`: the CUDA context (paid by any CUDA program, whatever its flags);
  * `startup_ms`: the cuDNN handle and a first 3x3 convolution of a shape outside the list,
    always with benchmark off (what the first convolution of a process pays once; files written
    before `context_ms` existed include the context in it, and files written before this probe
    ran with benchmark off searched its shape under benchmark=True: convtune reads every run's
    start-up from the benchmark-off runs);
  * per problem `first_ms`: the first call of the problem, synchronised (heuristics, plan
    builds, runtime kernel compiles and, with benchmark=True, PyTorch's timed search);
  * per problem `steady_ms`: median of `samples` timings (CUDA events) of `inner` back-to-back
    calls after two warm-up calls, with the minimum and maximum (the spread).
`grid` runs the settings x kernel-cache states x runs, each in its own process and rotating the
order of the settings between runs: `cold` is an empty CUDA kernel cache (CUDA_CACHE_PATH
pointed at a new folder), `warm` a second process on the folder the cold one filled.

Problems are `convtune parse --json` objects (key, dir, dtype, layout, n, c, k, groups, in, ker,
stride, dil, pad, pad_end, out): every field spelled out, so this file needs no parser of its own;
--problems takes that command's document (format 1, its "problems") or a JSON array of them.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

# Run as a script from inside the convtune package (python3 .../convtune/pytorch_measure.py, as
# convtune.advise runs it), the script's folder leads sys.path, and the package's convtune/torch
# would shadow PyTorch: that folder leaves the path.
if __name__ == "__main__" and not __package__ and sys.path and \
        os.path.realpath(sys.path[0] or os.curdir) == os.path.dirname(os.path.realpath(__file__)):
    del sys.path[0]

FORMAT = "convtune-pytorch-measurement"
VERSION = 1
SETTINGS = {"bm0": dict(benchmark=0), "bm1": dict(benchmark=1)}


def _torch_call(torch, p, device):
    """A zero-argument function running problem p once (tensors made here, outside the timing)."""
    nd = len(p["in"])
    dtype = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[p["dtype"]]
    fmt = torch.contiguous_format
    if p["layout"] == "nhwc" and nd in (2, 3):
        fmt = torch.channels_last if nd == 2 else torch.channels_last_3d
    g = p["groups"]
    x = torch.empty([p["n"], p["c"]] + list(p["in"]), device=device, dtype=dtype).uniform_(-1, 1)
    w = torch.empty([p["k"], p["c"] // g] + list(p["ker"]), device=device, dtype=dtype).uniform_(-1, 1)
    x, w = x.contiguous(memory_format=fmt), w.contiguous(memory_format=fmt)
    pad, pad_end = list(p["pad"]), list(p["pad_end"])
    if pad != pad_end:
        # PyTorch pads asymmetrically with an explicit pad of the input (as padding='same' does):
        # the convolution then runs on the padded input with no padding of its own.
        spec = []
        for b, e in zip(reversed(pad), reversed(pad_end)):
            spec += [b, e]
        x = torch.nn.functional.pad(x, spec).contiguous(memory_format=fmt)
        pad = [0] * nd
    stride, dil = list(p["stride"]), list(p["dil"])
    if p["dir"] == "fwd":
        conv = (torch.nn.functional.conv1d, torch.nn.functional.conv2d, torch.nn.functional.conv3d)[nd - 1]
        return lambda: conv(x, w, None, stride, pad, dil, g)
    dy = torch.empty([p["n"], p["k"]] + list(p["out"]), device=device, dtype=dtype).uniform_(-1, 1)
    dy = dy.contiguous(memory_format=fmt)
    mask = [p["dir"] == "bwd_data", p["dir"] == "bwd_filter", False]
    bwd = torch.ops.aten.convolution_backward
    return lambda: bwd(dy, x, w, None, stride, pad, dil, False, [0] * nd, g, mask)


def measure(problems, benchmark, allow_tf32=True, deterministic=False, samples=7, inner=3, device="cuda"):
    """Runs in this process; returns the measurement document (without the cache label)."""
    import torch

    t0 = time.perf_counter()
    # The probe runs with benchmark off in every setting: under benchmark=True it would search
    # its own shape (in f32, with TF32 when allowed), whose kernels no problem of the list needs.
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.allow_tf32 = bool(allow_tf32)
    torch.backends.cudnn.deterministic = bool(deterministic)
    cuda = device == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    # Start-up: a 3x3 convolution of a shape outside any network, so it fills no entry a
    # problem of the list could reuse.
    probe = torch.ones(1, 5, 13, 11, device=device)
    sync()
    context_ms = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    torch.nn.functional.conv2d(probe, torch.ones(7, 5, 3, 3, device=device))
    sync()
    startup_ms = (time.perf_counter() - t0) * 1e3
    torch.backends.cudnn.benchmark = bool(benchmark)

    seen, order = set(), []
    for p in problems:
        if p["key"] not in seen:
            seen.add(p["key"])
            order.append(p)
    results = []
    for p in order:
        call = _torch_call(torch, p, device)
        sync()
        t = time.perf_counter()
        call()
        sync()
        results.append({"key": p["key"], "first_ms": (time.perf_counter() - t) * 1e3})
        del call
    for p, r in zip(order, results):
        call = _torch_call(torch, p, device)
        call()
        call()
        times = []
        for _ in range(samples):
            if cuda:
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                for _ in range(inner):
                    call()
                b.record()
                b.synchronize()
                times.append(a.elapsed_time(b) / inner)
            else:
                t = time.perf_counter()
                for _ in range(inner):
                    call()
                times.append((time.perf_counter() - t) * 1e3 / inner)
        r.update(steady_ms=statistics.median(times), steady_min_ms=min(times), steady_max_ms=max(times))
        del call
        if cuda:
            torch.cuda.empty_cache()
    env = {"torch": torch.__version__, "cudnn": torch.backends.cudnn.version() if cuda else None,
           "device": torch.cuda.get_device_name() if cuda else "cpu"}
    return {"format": FORMAT, "version": VERSION, "environment": env,
            "setting": {"benchmark": int(benchmark), "allow_tf32": int(bool(allow_tf32)),
                        "deterministic": int(bool(deterministic))},
            "samples": samples, "inner": inner, "context_ms": context_ms, "startup_ms": startup_ms, "problems": results}


def _problems_from_trace(path):
    """The problems of a trace that convtune.capture wrote (its canonical lines, every field
    spelled out), as `convtune parse --json` objects: for a GPU machine with PyTorch and no
    convtune. A line capture would not write (a benchdnn descriptor, a field left out) is refused:
    give such a trace to `convtune parse --json` instead."""
    fields = ("dir", "dtype", "layout", "n", "c", "k", "g", "in", "ker", "stride", "dil", "pad", "pad_end")
    out = []
    with open(path) as f:
        for no, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            key = line.split()[0]
            kv = dict(item.split("=", 1) for item in key.split(",") if "=" in item)
            if set(kv) != set(fields):
                sys.exit(f"pytorch_measure: {path}:{no}: not a canonical problem with every field ({', '.join(fields)}); "
                         "turn the trace into a problem list with `convtune parse --json` instead")
            dims = lambda v: [int(x) for x in v.split("x")]
            p = {"key": key, "dir": kv["dir"], "dtype": kv["dtype"], "layout": "nhwc" if kv["layout"] in ("nwc", "nhwc", "ndhwc")
                 else "nchw", "n": int(kv["n"]), "c": int(kv["c"]), "k": int(kv["k"]), "groups": int(kv["g"]),
                 "in": dims(kv["in"]), "ker": dims(kv["ker"]), "stride": dims(kv["stride"]), "dil": dims(kv["dil"]),
                 "pad": dims(kv["pad"]), "pad_end": dims(kv["pad_end"])}
            p["out"] = [(i + a + b - (k - 1) * d - 1) // s + 1 for i, a, b, k, d, s in
                        zip(p["in"], p["pad"], p["pad_end"], p["ker"], p["dil"], p["stride"])]
            out.append(p)
    if not out:
        sys.exit(f"pytorch_measure: {path}: the trace has no problems")
    return out


def _load_problems(path):
    """The problems of `convtune parse --json`'s document (its "problems"), of a JSON array of
    such objects (the problem lists in bench/sim/data), or of a trace (any name but .json)."""
    if not path.endswith(".json"):
        return _problems_from_trace(path)
    with open(path) as f:
        doc = json.load(f)
    if isinstance(doc, dict) and doc.get("format") == 1:
        doc = doc.get("problems")
    if not isinstance(doc, list) or not all(isinstance(p, dict) and "key" in p for p in doc):
        sys.exit(f"pytorch_measure: {path}: expected the document of `convtune parse --json` or a JSON array of its "
                 "problems")
    return doc


def cmd_one(a):
    doc = measure(_load_problems(a.problems), a.benchmark, a.allow_tf32, a.deterministic, a.samples, a.inner, a.device)
    doc["cache"] = a.cache_label
    # The kernel cache this process was given (the folder's name only): a cold measurement's must
    # be a folder no earlier process used.
    folder = os.environ.get("CUDA_CACHE_PATH")
    doc["kernel_cache_folder"] = os.path.basename(folder.rstrip("/")) if folder else None
    with open(a.out, "w") as f:
        json.dump(doc, f)
        f.write("\n")


def cmd_grid(a):
    problems = _load_problems(a.problems)
    settings = a.settings.split(",")
    for s in settings:
        if s not in SETTINGS:
            sys.exit(f"pytorch_measure: --settings: unknown setting '{s}' (known: {', '.join(SETTINGS)})")
    caches = a.caches.split(",")
    if not set(caches) <= {"cold", "warm"} or (caches != ["cold"] and "cold" not in caches):
        sys.exit("pytorch_measure: --caches: cold, or cold,warm (a warm measurement follows a cold one)")
    runs = []
    work = tempfile.mkdtemp(prefix="pytorch-measure-")
    total, done, t_start = a.runs * len(settings) * len(caches), 0, time.time()
    for r in range(a.runs):
        rotated = settings[r % len(settings):] + settings[:r % len(settings)]
        for s in rotated:
            # A new, empty kernel cache for each cold state, which its warm state then reuses.
            cache_dir = tempfile.mkdtemp(prefix="convtune-kernel-cache-")
            for c in caches:
                out = os.path.join(work, f"{r}-{s}-{c}.json")
                env = dict(os.environ, CUDA_CACHE_PATH=cache_dir)
                env.pop("CUDA_CACHE_DISABLE", None)
                cmd = [sys.executable, os.path.abspath(__file__), "one", "--problems", a.problems, "--out", out,
                       "--benchmark", str(SETTINGS[s]["benchmark"]), "--allow-tf32", str(a.allow_tf32),
                       "--deterministic", str(a.deterministic), "--samples", str(a.samples), "--inner", str(a.inner),
                       "--cache-label", c, "--device", a.device]
                t = time.time()
                p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
                done += 1
                if p.returncode != 0:
                    sys.stderr.write(p.stdout[-3000:])
                    sys.exit(f"pytorch_measure: run {r} {s} {c} failed (exit {p.returncode})")
                with open(out) as f:
                    doc = json.load(f)
                doc.update(run=r, name=s, wall_s=time.time() - t)
                runs.append(doc)
                first = sum(x["first_ms"] for x in doc["problems"])
                left = (time.time() - t_start) / done * (total - done)
                print(f"[{done}/{total}] run {r} {s} {c}: first calls {first / 1e3:.2f} s, process {time.time() - t:.1f} s"
                      f" (about {left:.0f} s left)", file=sys.stderr, flush=True)
            shutil.rmtree(cache_dir, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
    out = {"format": FORMAT + "-grid", "version": VERSION, "problems": len({p['key'] for p in problems}),
           "measurements": runs}
    with open(a.out, "w") as f:
        json.dump(out, f)
        f.write("\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    one = sub.add_parser("one", help="one setting in this process")
    grid = sub.add_parser("grid", help="settings x cache states x runs, a fresh process each")
    for p in (one, grid):
        p.add_argument("--problems", required=True,
                       help="`convtune parse --json` output (.json), or a trace convtune.capture wrote (any other name)")
        p.add_argument("--out", required=True)
        p.add_argument("--allow-tf32", type=int, choices=[0, 1], default=1)
        p.add_argument("--deterministic", type=int, choices=[0, 1], default=0)
        p.add_argument("--samples", type=int, default=7)
        p.add_argument("--inner", type=int, default=3)
        p.add_argument("--device", default="cuda", help="cuda (the measurement) or cpu (to test this script)")
    one.add_argument("--benchmark", type=int, choices=[0, 1], required=True)
    one.add_argument("--cache-label", default="unknown")
    grid.add_argument("--settings", default="bm0,bm1")
    grid.add_argument("--caches", default="cold,warm")
    grid.add_argument("--runs", type=int, default=3)
    a = ap.parse_args(argv)
    (cmd_one if a.cmd == "one" else cmd_grid)(a)


if __name__ == "__main__":
    main()
