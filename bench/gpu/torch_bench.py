#!/usr/bin/env python3
"""PyTorch's side of bench_gpu: the same ResNet-50 layers with torch.backends.cudnn.benchmark set
once for the whole process (run one process per setting, so neither inherits the other's cache).

Per layer, precision and direction: the time of the first call (cuDNN heuristics and plan
building, plus the timed search when benchmark=True) and the steady time (median of --samples
samples of --inner back-to-back calls, CUDA events), written as JSON for bench_gpu --torch.
fp32 = float32 NCHW with allow_tf32=False, tf32 = float32 NCHW with allow_tf32=True,
fp16 = float16 channels_last. Backward directions use aten.convolution_backward with one output.
"""
import argparse
import json
import re
import statistics
import sys
import time

import torch


def parse_shapes(path):
    layers = []
    for line in open(path):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.search(r'n"([^"]*)"', line)
        name, desc = (m.group(1), line[: m.start()]) if m else ("", line)
        repeat = 1
        hint = re.search(r"\*(\d+)$", name)
        if hint:
            repeat, name = int(hint.group(1)), name[: hint.start()]
        v = {k: int(x) for k, x in re.findall(r"([a-z]+)(\d+)", desc)}
        ih = v["ih"]
        iw = v.get("iw", ih)
        kh = v["kh"]
        kw = v.get("kw", kh)
        sh = v.get("sh", 1)
        sw = v.get("sw", sh)
        ph = v.get("ph", 0)
        pw = v.get("pw", ph)
        dh = v.get("dh", 0) + 1  # benchdnn dilation is 0-based
        dw = v.get("dw", dh - 1) + 1
        layers.append(dict(name=name, repeat=repeat, g=v.get("g", 1), ic=v["ic"], oc=v["oc"], ih=ih, iw=iw, kh=kh, kw=kw,
                           stride=(sh, sw), padding=(ph, pw), dilation=(dh, dw), oh=v.get("oh"), ow=v.get("ow")))
    return layers


PRECISIONS = {"fp32": (torch.float32, False, False), "tf32": (torch.float32, True, False), "fp16": (torch.float16, True, True)}


def make_call(layer, batch, dtype, channels_last, direction):
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    x = torch.empty(batch, layer["ic"], layer["ih"], layer["iw"], device="cuda", dtype=dtype).uniform_(-1, 1)
    w = torch.empty(layer["oc"], layer["ic"] // layer["g"], layer["kh"], layer["kw"], device="cuda", dtype=dtype).uniform_(-1, 1)
    x = x.contiguous(memory_format=fmt)
    w = w.contiguous(memory_format=fmt)
    args = dict(stride=layer["stride"], padding=layer["padding"], dilation=layer["dilation"], groups=layer["g"])
    # Output size computed, not obtained from a convolution call: that call would fill PyTorch's
    # algorithm cache before the first timed call.
    out = [(i + 2 * p - d * (k - 1) - 1) // s + 1 for i, p, d, k, s in
           zip((layer["ih"], layer["iw"]), layer["padding"], layer["dilation"], (layer["kh"], layer["kw"]), layer["stride"])]
    if layer["oh"] is not None and out[0] != layer["oh"]:
        sys.exit(f"{layer['name']}: output height {out[0]} != {layer['oh']}")
    if direction == "fwd":
        return lambda: torch.nn.functional.conv2d(x, w, **args)
    dy = torch.empty(batch, layer["oc"], out[0], out[1], device="cuda", dtype=dtype).uniform_(-1, 1).contiguous(memory_format=fmt)
    mask = [direction == "bwd_data", direction == "bwd_filter", False]
    conv_bwd = torch.ops.aten.convolution_backward
    return lambda: conv_bwd(dy, x, w, None, list(args["stride"]), list(args["padding"]), list(args["dilation"]), False, [0, 0],
                            args["groups"], mask)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", required=True)
    ap.add_argument("--benchmark", type=int, choices=[0, 1], required=True)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--precisions", default="fp32,tf32,fp16")
    ap.add_argument("--dirs", default="fwd")
    ap.add_argument("--samples", type=int, default=15)
    ap.add_argument("--inner", type=int, default=3)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    torch.backends.cudnn.enabled = True
    torch.backends.cudnn.benchmark = bool(a.benchmark)
    torch.backends.cuda.matmul.allow_tf32 = False
    layers = parse_shapes(a.shapes)

    # The first cuDNN call of a process loads libraries and kernels: not part of any layer.
    t0 = time.perf_counter()
    for prec in PRECISIONS.values():
        torch.backends.cudnn.allow_tf32 = prec[1]
        for d in a.dirs.split(","):
            make_call(dict(name="warm", repeat=1, g=1, ic=8, oc=8, ih=9, iw=9, kh=3, kw=3, stride=(1, 1), padding=(1, 1),
                           dilation=(1, 1), oh=None, ow=None), 2, prec[0], prec[2], d)()
    torch.cuda.synchronize()
    warm_ms = (time.perf_counter() - t0) * 1e3

    results = []
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for pname in a.precisions.split(","):
        dtype, tf32, cl = PRECISIONS[pname]
        torch.backends.cudnn.allow_tf32 = tf32
        for d in a.dirs.split(","):
            for layer in layers:
                call = make_call(layer, a.batch, dtype, cl, d)
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                call()
                torch.cuda.synchronize()
                first_ms = (time.perf_counter() - t0) * 1e3
                call()
                samples = []
                for _ in range(a.samples):
                    start.record()
                    for _ in range(a.inner):
                        call()
                    stop.record()
                    stop.synchronize()
                    samples.append(start.elapsed_time(stop) / a.inner)
                results.append(dict(precision=pname, dir=d, benchmark=bool(a.benchmark), layer=layer["name"], repeat=layer["repeat"],
                                    first_ms=first_ms, steady_ms=statistics.median(samples)))
                print(f"{pname} {d} bm={a.benchmark} {layer['name']:<32} first {first_ms:9.2f} ms  steady {results[-1]['steady_ms']:.4f} ms",
                      flush=True)
    meta = dict(torch=torch.__version__, cudnn=torch.backends.cudnn.version(), device=torch.cuda.get_device_name(),
                benchmark=bool(a.benchmark), warmup_ms=warm_ms, samples=a.samples, inner=a.inner, batch=a.batch)
    json.dump(dict(meta=meta, results=results), open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
