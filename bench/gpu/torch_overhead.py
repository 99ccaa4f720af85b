#!/usr/bin/env python3
"""convtune.torch's per-call overhead: one tiny convolution (so that the device's time is
negligible) called --calls times, forward only and forward + backward, as CPU microseconds per
call (the host time of the loop; median of --repeats repeats, with their min and max) for:

  pytorch   PyTorch alone (convtune.torch disabled)
  python    convtune.torch with the Python override (torch.library kernels + autograd.Function)
  cpp       convtune.torch with the C++ override (torch::Library kernels at the device's key, under
            PyTorch's own autograd node)
  bare      convtune._convtune.FrameworkContext.run itself on prepared tensors (forward: one call;
            forward + backward: fwd, bwd_data and bwd_filter): the Python override's convtune call
  c_api     the C interface's run (convtune_framework_api.h, through ctypes) on prepared structs,
            the same calls: what the C++ override's convtune call costs, plus ctypes' own

torch.backends.cudnn.benchmark is on and every decision is in convtune's memory after the
warm-up calls, so no call searches. Prints a table and writes JSON (--out). With --profile N,
also prints where the host time of N forward + backward calls goes, per operation (torch.profiler,
CPU activity; the profiler's own cost inflates each operation alike), for pytorch and cpp.

  python3 bench/gpu/torch_overhead.py --device cpu --out overhead.json
  python3 bench/gpu/torch_overhead.py --device cuda --out overhead.json
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time

import torch

import convtune
import convtune.torch as ct
from convtune import _convtune
from convtune import _framework_api as capi

SHAPE = {"x": (1, 4, 8, 8), "w": (4, 4, 3, 3), "padding": 1}


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def timed(fn, calls, repeats, device):
    """Microseconds per call of fn (which makes `calls` calls): median, min, max over the repeats."""
    fn()  # warm-up: decisions into memory, allocator caches filled
    sync(device)
    per = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
        sync(device)
        per.append((t1 - t0) / calls * 1e6)
    return {"median": statistics.median(per), "min": min(per), "max": max(per)}


def conv_loops(device, calls):
    x = torch.randn(*SHAPE["x"], device=device)
    w = torch.randn(*SHAPE["w"], device=device)
    xg = x.clone().requires_grad_()
    wg = w.clone().requires_grad_()
    gy = torch.ones(SHAPE["x"][0], SHAPE["w"][0], *SHAPE["x"][2:], device=device)
    conv = torch.nn.functional.conv2d

    def fwd():
        for _ in range(calls):
            conv(x, w, padding=SHAPE["padding"])

    def fwd_bwd():
        for _ in range(calls):
            conv(xg, wg, padding=SHAPE["padding"]).backward(gy)

    return fwd, fwd_bwd


def _loops(run, calls, keep):
    """The forward loop and the forward + backward loop over run(direction); `keep` stays alive with them."""
    def fwd():
        for _ in range(calls):
            run("fwd")

    def fwd_bwd():
        for _ in range(calls):
            run("fwd")
            run("bwd_data")
            run("bwd_filter")

    fwd.keep = fwd_bwd.keep = keep
    return fwd, fwd_bwd


def bare_loops(device, backend, calls):
    x = torch.randn(*SHAPE["x"], device=device)
    w = torch.randn(*SHAPE["w"], device=device)
    y = torch.empty(SHAPE["x"][0], SHAPE["w"][0], *SHAPE["x"][2:], device=device)
    ctx = _convtune.FrameworkContext("")
    flags = ct.flag_values(ct.torch_flags())
    stream = torch.cuda.current_stream().cuda_stream if device == "cuda" else 0

    def desc(t):
        return (list(t.shape), list(t.stride()), t.data_ptr(), t.numel() * t.element_size())

    def alloc(nbytes):
        t = torch.empty(nbytes, dtype=torch.uint8, device=device)
        return t, t.data_ptr()

    dx, dw, dy = desc(x), desc(w), desc(y)
    geo = ([1, 1], [SHAPE["padding"]] * 2, [1, 1], 1)

    def run(direction):
        r = ctx.run(direction, "f32", dx, dw, dy, *geo, backend, flags, stream, alloc)
        if not r["ran"]:
            raise SystemExit(f"torch_overhead: the bare {direction} call did not run: {r['fallback']}: {r['detail']}")

    return _loops(run, calls, (x, w, y))  # keeps the tensors the descriptors point at


def c_api_loops(device, backend, calls):
    x = torch.randn(*SHAPE["x"], device=device)
    w = torch.randn(*SHAPE["w"], device=device)
    y = torch.empty(SHAPE["x"][0], SHAPE["w"][0], *SHAPE["x"][2:], device=device)
    ctx = _convtune.FrameworkContext("")
    api = capi.api()
    stream = torch.cuda.current_stream().cuda_stream if device == "cuda" else None
    tf = ct.torch_flags()

    def desc(t):
        return capi.tensor(list(t.shape), list(t.stride()), t.data_ptr(), t.numel() * t.element_size())

    dx, dw, dy = desc(x), desc(w), desc(y)
    p = SHAPE["padding"]
    # No workspace callback: the backend's own allocator (the C++ override passes PyTorch's).
    calls_ = {d: capi.call(d, "f32", dx, dw, dy, [1, 1], [p, p], [1, 1], 1, backend, tf, stream=stream)
              for d in ("fwd", "bwd_data", "bwd_filter")}
    result = capi.Result()
    address = ctx._address()

    def run(direction):
        if api.run(address, calls_[direction], result) != 0 or not result.ran:
            raise SystemExit(f"torch_overhead: the C interface's {direction} call did not run: {result.detail.decode()}")

    return _loops(run, calls, (x, w, y, ctx))  # keeps the tensors and the context the structs point at


def profile(device, calls):
    """Host time per operation over `calls` forward + backward calls (torch.profiler, CPU activity):
    printed as a table, returned as {operation: [calls, self us per fwd+bwd, total us per fwd+bwd]}."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    _, fwd_bwd = conv_loops(device, calls)
    fwd_bwd()
    sync(device)
    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        fwd_bwd()
        sync(device)
    events = prof.key_averages()
    print(events.table(sort_by="self_cpu_time_total", row_limit=30))
    return {e.key: [e.count, e.self_cpu_time_total / calls, e.cpu_time_total / calls] for e in events}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--calls", type=int, default=2000, help="calls per repeat (default 2000)")
    ap.add_argument("--repeats", type=int, default=7, help="repeats; the median is reported (default 7)")
    ap.add_argument("--modes", default="pytorch,python,cpp,bare,c_api")
    ap.add_argument("--out", help="write the results as JSON here")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="also profile N forward + backward calls of pytorch and cpp per operation")
    a = ap.parse_args(argv)
    if a.calls < 1 or a.repeats < 1:
        ap.error("--calls and --repeats must be >= 1")
    modes = a.modes.split(",")
    bad = [m for m in modes if m not in ("pytorch", "python", "cpp", "bare", "c_api")]
    if bad:
        ap.error(f"--modes: unknown {bad}")
    backend = "cudnn" if a.device == "cuda" else "cpu"
    torch.backends.cudnn.benchmark = True
    results = {}
    for mode in modes:
        if mode in ("python", "cpp"):
            ct.enable(db="", device=a.device, override=mode)
        if mode == "bare":
            fwd, fwd_bwd = bare_loops(a.device, backend, a.calls)
        elif mode == "c_api":
            fwd, fwd_bwd = c_api_loops(a.device, backend, a.calls)
        else:
            fwd, fwd_bwd = conv_loops(a.device, a.calls)
        results[mode] = {"fwd": timed(fwd, a.calls, a.repeats, a.device), "fwd_bwd": timed(fwd_bwd, a.calls, a.repeats, a.device)}
        if a.profile > 0 and mode in ("pytorch", "cpp"):
            results[mode]["profile"] = profile(a.device, a.profile)
        if mode in ("python", "cpp"):
            st = ct.stats()
            ct.disable()
            if st["override"] != mode or sum(st["fallback"].values()):
                raise SystemExit(f"torch_overhead: {mode}: ran {st['override']}, fallbacks {st['fallback']}")
            results[mode]["stats"] = {"convtune": st["convtune"], "sources": st["sources"]}
    dev = torch.cuda.get_device_name() if a.device == "cuda" else platform.processor() or platform.machine()
    print(f"convtune.torch per-call overhead: {a.device} ({dev}), torch {torch.__version__}, conv x{SHAPE['x']} "
          f"w{SHAPE['w']}, {a.calls} calls x {a.repeats} repeats; us per call, median [min-max]")
    print(f"{'':10}{'forward':>26}{'forward + backward':>30}")
    for mode, r in results.items():
        cell = lambda t: f"{t['median']:8.1f} [{t['min']:.1f}-{t['max']:.1f}]"  # noqa: E731
        print(f"{mode:10}{cell(r['fwd']):>26}{cell(r['fwd_bwd']):>30}")
    if a.out:
        # The command without the machine's paths: file names only.
        argv = [os.path.basename(sys.executable), os.path.basename(sys.argv[0])]
        argv += [os.path.basename(x) if os.path.isabs(x) else x for x in sys.argv[1:]]
        doc = {"command": " ".join(argv), "device": a.device, "device_name": dev,
               "torch": torch.__version__, "convtune": convtune.__version__, "shape": SHAPE, "calls": a.calls,
               "repeats": a.repeats, "unit": "us per call", "results": results}
        with open(a.out, "w") as f:
            json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
