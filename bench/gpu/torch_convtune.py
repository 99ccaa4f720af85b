#!/usr/bin/env python3
"""convtune.torch against PyTorch's own cuDNN selection on training (issue: PyTorch with benchmark
speed and no warm-up). Run on the GPU machine with the convtune package importable (a `cuda`
build's python folder on PYTHONPATH, or installed) and torchvision:

    python3 bench/gpu/torch_convtune.py --out torch_convtune.json [--iterations 60] [--batch 32] [--runs R]

Networks and precisions (CONFIGS): torchvision ResNet-50 in fp32 (TF32 off), TF32, and AMP (float16
autocast) channels_last; MobileNetV2 (depthwise and 1x1 convolutions) in fp32 (TF32 off) and AMP
channels_last; and ResNet-50 AMP channels_last whose input size changes every iteration (160, 192,
224, 256 in turn: PyTorch's benchmark mode searches again on each new shape).
Settings, each in a fresh process: PyTorch benchmark=False, PyTorch benchmark=True, convtune
with a cold (empty) tuning database, convtune with the warm database the cold run left (both
with benchmark=True, policy convtune); with --settings also the same two with the incremental
policy (in-band tuning: no search, the shape's calls run its candidates in turn); each with a
cold CUDA kernel cache (CUDA_CACHE_PATH an empty folder) and a warm one (the folder the previous
run of that setting filled).

Per run: the first iteration's wall time (forward, backward, optimizer step, synchronised),
the steady ms per iteration (median of the iterations after the first 5), the host's time to
issue a steady iteration before its final synchronisation (the same median; near the steady
time when the step is bound by the CPU) and the totals over 300
and 1000 iterations, extrapolated as: the measured iterations, then the steady time for the rest.
convtune runs also report convtune.torch.stats() (calls per direction, decision sources, search
time, fallbacks by reason). Written for the H200; not run on a machine without a GPU.
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

# name: (torchvision network, precision, input sizes cycled one per iteration)
CONFIGS = {
    "resnet50-fp32": ("resnet50", "fp32", (224,)),
    "resnet50-tf32": ("resnet50", "tf32", (224,)),
    "resnet50-amp-cl": ("resnet50", "amp", (224,)),
    "mobilenet_v2-fp32": ("mobilenet_v2", "fp32", (224,)),
    "mobilenet_v2-amp-cl": ("mobilenet_v2", "amp", (224,)),
    # A job whose input size changes: PyTorch searches again on each new shape.
    "resnet50-amp-cl-sizes": ("resnet50", "amp", (160, 192, 224, 256)),
}
SETTINGS = ("torch-off", "torch-on", "convtune-cold", "convtune-warm")
# convtune's settings: (policy, database). "cold": an empty database; "warm": the database the
# same policy's empty-database run (cold kernel cache) of this repeat left. The incremental policy
# searches nothing: the shape's own calls run its candidates in turn (docs/autotuning.md).
CONVTUNE_SETTINGS = {"convtune-cold": ("convtune", "cold"), "convtune-warm": ("convtune", "warm"),
                     "incremental-cold": ("incremental", "cold"), "incremental-warm": ("incremental", "warm")}


def child(a):
    import torch
    import torchvision

    net_name, prec, sizes = CONFIGS[a.config]
    torch.backends.cudnn.allow_tf32 = prec == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = prec == "tf32"
    torch.backends.cudnn.benchmark = a.setting != "torch-off"
    if a.setting in CONVTUNE_SETTINGS:
        import convtune.backends.cudnn as ct_flags
        import convtune.torch as ct

        for k, v in flag_dict(a.convtune_flags).items():  # convtune's process-wide knobs
            setattr(ct_flags, k, v)
        ct.enable(db=a.db, policy=CONVTUNE_SETTINGS[a.setting][0], device="cuda")
    torch.manual_seed(0)
    net = getattr(torchvision.models, net_name)(num_classes=1000).cuda()
    fmt = torch.channels_last if prec == "amp" else torch.contiguous_format
    net = net.to(memory_format=fmt)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.cuda.amp.GradScaler(enabled=prec == "amp")
    xs = [torch.randn(a.batch, 3, s, s, device="cuda").contiguous(memory_format=fmt) for s in sizes]
    target = torch.randint(0, 1000, (a.batch,), device="cuda")
    # Under bench/sim/cudnn_calls.cpp (LD_PRELOAD, CUDNN_CALLS_OUT set), the first iteration is cut
    # into phases, each synchronised and dumped with its wall time and cuDNN calls; the other
    # iterations run as usual.
    calls = None
    if os.environ.get("CUDNN_CALLS_OUT"):
        import ctypes

        calls = ctypes.CDLL(None).cudnn_calls_dump
        calls.argtypes = [ctypes.c_char_p, ctypes.c_double]
        torch.cuda.synchronize()
        calls(f"{a.setting} {a.kernel_cache} setup".encode(), 0.0)

    def phase(name, t):
        if calls and not times:
            torch.cuda.synchronize()
            calls(f"{a.setting} {a.kernel_cache} {name}".encode(), (time.perf_counter() - t) * 1e3)
            return time.perf_counter()
        return t

    times, issued = [], []

    def step(i):
        x = xs[i % len(xs)]
        t = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16, enabled=prec == "amp"):
            loss = torch.nn.functional.cross_entropy(net(x), target)
        t = phase("forward", t)
        scaler.scale(loss).backward()
        t = phase("backward", t)
        scaler.step(opt)
        scaler.update()
        phase("step", t)

    for i in range(a.iterations):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        step(i)
        issued.append((time.perf_counter() - t0) * 1e3)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    later = times[5:]
    if len(xs) > 1:  # a changing input size: the mean over the whole cycles after the first 5 iterations
        steady = statistics.mean(later[:len(later) // len(xs) * len(xs)])
    else:
        steady = statistics.median(later)
    # issue: the host's time to hand the step to the GPU (the step's time before its final
    # synchronisation); a step whose issue time is close to its whole time is bound by the CPU.
    out = {"config": a.config, "setting": a.setting, "kernel_cache": a.kernel_cache, "first_ms": times[0], "steady_ms": steady,
           "steady_issue_ms": statistics.median(issued[5:]), "measured_ms": times, "issued_ms": issued}
    for n in (300, 1000):
        out[f"total_{n}_ms"] = sum(times[:n]) + max(0, n - len(times)) * steady
    if a.setting in CONVTUNE_SETTINGS:
        import convtune.torch as ct

        out["convtune"] = ct.stats()
        out["convtune_flags"] = a.convtune_flags
        out["convtune"]["db"] = os.path.basename(out["convtune"]["db"])  # a scratch file: its name, not the machine's path
    if a.profile_steps:
        out["profile"] = profile_steps(torch, step, a.iterations, a.profile_steps)
    out["torch"] = torch.__version__
    out["cudnn"] = torch.backends.cudnn.version()
    out["device"] = torch.cuda.get_device_name()
    print(json.dumps(out))


def flag_dict(text):
    """'explore_slots=0,max_samples=5' -> {"explore_slots": 0, "max_samples": 5} (numbers as numbers)."""
    d = {}
    for item in filter(None, text.split(",")):
        k, _, v = item.partition("=")
        try:
            d[k] = int(v)
        except ValueError:
            try:
                d[k] = float(v)
            except ValueError:
                d[k] = v
    return d


def profile_steps(torch, step, first, n):
    """n more steady steps under torch.profiler: the GPU's busy time per step (kernels and copies,
    summed) against the host's, and the kernels that take most of it; says whether a step is bound
    by the device or by the host, and whether two settings' kernels differ."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i in range(first, first + n):
            step(i)
        torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) * 1e3 / n
    kernels = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            kernels.setdefault(e.name, [0, 0.0])
            kernels[e.name][0] += 1
            kernels[e.name][1] += (e.time_range.end - e.time_range.start) / 1e3  # us -> ms
    top = sorted(kernels.items(), key=lambda kv: -kv[1][1])
    return {"steps": n, "wall_ms_per_step": wall, "gpu_busy_ms_per_step": sum(v[1] for v in kernels.values()) / n,
            "top_kernels": [{"name": k[:160], "calls_per_step": v[0] / n, "ms_per_step": v[1] / n} for k, v in top[:25]]}


def run(config, setting, kernel_cache, cache_dir, db, a):
    env = dict(os.environ, CUDA_CACHE_PATH=cache_dir)
    cmd = [sys.executable, __file__, "--child", "--config", config, "--setting", setting, "--kernel-cache", kernel_cache, "--db", db,
           "--iterations", str(a.iterations), "--batch", str(a.batch), "--profile-steps", str(a.profile_steps),
           "--convtune-flags", a.convtune_flags]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:  # reported and kept: the other runs still say something
        print(f"{config} {setting} kernel cache {kernel_cache}: FAILED (exit {r.returncode})\n{r.stderr[-3000:]}", flush=True)
        return {"config": config, "setting": setting, "kernel_cache": kernel_cache, "failed": r.returncode, "stderr": r.stderr[-3000:]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def summary(results):
    """Per (config, setting, kernel cache): median, min and max of each measure over the runs."""
    groups = {}
    for r in results:
        if "failed" not in r:
            groups.setdefault((r["config"], r["setting"], r["kernel_cache"]), []).append(r)
    rows = []
    for (config, setting, kc), rs in groups.items():
        stats = {}
        for k in ("first_ms", "steady_ms", "steady_issue_ms", "total_300_ms", "total_1000_ms"):
            v = [r[k] for r in rs]
            stats[k] = {"median": statistics.median(v), "min": min(v), "max": max(v), "runs": len(v)}
        rows.append({"config": config, "setting": setting, "kernel_cache": kc, "stats": stats})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="torch_convtune.json")
    ap.add_argument("--iterations", type=int, default=60, help="measured iterations per run (>= 10)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--settings", default=",".join(SETTINGS), help="comma-separated, of " +
                    ", ".join(("torch-off", "torch-on") + tuple(CONVTUNE_SETTINGS)) + " (default: the first four)")
    ap.add_argument("--runs", type=int, default=1, help="fresh processes per (setting, kernel cache); the summary gives the "
                    "median and range over them")
    ap.add_argument("--profile-steps", type=int, default=0, help="after the measured iterations, this many more under "
                    "torch.profiler: the GPU's busy time per step and its top kernels (not in the totals)")
    ap.add_argument("--convtune-flags", default="", help="convtune flags for its settings, e.g. explore_slots=0 "
                    "(convtune.backends.cudnn's knobs; PyTorch's flags still come from torch.backends)")
    ap.add_argument("--keep-db", default="", help="copy each convtune database the runs wrote into this folder")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--config", help=argparse.SUPPRESS)
    ap.add_argument("--setting", help=argparse.SUPPRESS)
    ap.add_argument("--kernel-cache", help=argparse.SUPPRESS)
    ap.add_argument("--db", default="", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.iterations < 10:
        ap.error("--iterations: must be >= 10")
    if a.runs < 1:
        ap.error("--runs: must be >= 1")
    if a.child:
        return child(a)
    configs = a.configs.split(",")
    for c in configs:
        if c not in CONFIGS:
            ap.error(f"--configs: unknown '{c}' (expected some of {', '.join(CONFIGS)})")
    settings = a.settings.split(",")
    for st in settings:
        if st not in ("torch-off", "torch-on") and st not in CONVTUNE_SETTINGS:
            ap.error(f"--settings: unknown '{st}'")
    for warm in (st for st in settings if st.endswith("-warm")):
        cold = warm[:-len("warm")] + "cold"  # its empty-database twin
        if cold not in settings or settings.index(cold) > settings.index(warm):
            ap.error(f"--settings: {warm} reads the database {cold} writes: list {cold} before it")
    results = []

    def save():  # after every run: a run cut short keeps what it measured
        with open(a.out, "w") as f:
            # The command as run, without the machine's folders (results are kept in the repository).
            command = " ".join([os.path.basename(sys.argv[0])] + [os.path.basename(x) if os.path.isabs(x) else x for x in sys.argv[1:]])
            json.dump({"command": command, "results": results, "summary": summary(results)}, f, indent=1)

    with tempfile.TemporaryDirectory() as tmp:
        for config in configs:
            for rep in range(a.runs):
                # PyTorch's two settings swap places between repeats; a warm-database run always
                # after the empty-database run whose database it reads.
                order = list(settings)
                if rep % 2 == 1 and "torch-off" in order and "torch-on" in order:
                    i, j = order.index("torch-off"), order.index("torch-on")
                    order[i], order[j] = order[j], order[i]
                for setting in order:
                    policy, state = CONVTUNE_SETTINGS.get(setting, ("", ""))
                    db = os.path.join(tmp, f"{config}-{rep}-{policy}.json")
                    cache_dir = os.path.join(tmp, f"kcache-{config}-{setting}-{rep}")
                    for kc in ("cold", "warm"):  # cold: an empty folder; warm: the one the cold run filled
                        # an empty-database setting starts from an empty database each time; its warm-database
                        # twin uses the database of this repeat's first (cold kernel cache) empty-database run.
                        run_db = db + (".cold-" + kc if state == "cold" else ".cold-cold")
                        r = run(config, setting, kc, cache_dir, run_db if policy else "", a)
                        r["repeat"] = rep
                        if a.keep_db and state == "cold" and os.path.exists(run_db):
                            os.makedirs(a.keep_db, exist_ok=True)
                            shutil.copy(run_db, os.path.join(a.keep_db, os.path.basename(run_db)))
                        results.append(r)
                        save()
                        if "failed" in r:
                            continue
                        print(f"{config:18} {setting:14} kernel cache {kc:4} (run {rep + 1}/{a.runs}): first {r['first_ms']:8.0f} ms, "
                              f"steady {r['steady_ms']:7.2f} ms (issued in {r['steady_issue_ms']:6.2f}), 300 it {r['total_300_ms'] / 1e3:6.1f} s, "
                              f"1000 it {r['total_1000_ms'] / 1e3:6.1f} s", flush=True)
    if a.runs > 1:
        print("median (min-max) over the runs:")
        for row in summary(results):
            print(f"{row['config']:18} {row['setting']:14} kernel cache {row['kernel_cache']:4}: " +
                  ", ".join(f"{k} {v['median']:.1f} ({v['min']:.1f}-{v['max']:.1f})" for k, v in row["stats"].items()))
    print(f"-> {a.out}")


if __name__ == "__main__":
    main()
