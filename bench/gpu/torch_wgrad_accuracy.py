#!/usr/bin/env python3
"""PyTorch's fp32 weight gradient (TF32 off) with cudnn.benchmark False or True: time and error
against a float64 reference, on the ResNet-50 layers where benchmark=True was faster than every
engine convtune accepts (docs/benchmarks-gpu.md). One process per benchmark value (PyTorch's
algorithm cache does not key on it):

    python3 torch_wgrad_accuracy.py --benchmark 0; python3 torch_wgrad_accuracy.py --benchmark 1

Error = max |dw - dw64| / max_i sum_j |dy_ij * x_ij| (the scale of the reduction), the measure
convtune's oracle tests use; compare the two benchmark values with each other (measured on the
H200: 1.0-1.7e-8 for both on every layer, docs/benchmarks-gpu.md).
"""
import argparse
import json

import torch
import torch.nn.functional as F

LAYERS = {  # name: (c, k, hw, kernel, stride, pad)
    "res2a_branch1": (64, 256, 56, 1, 1, 0),
    "res3a_branch2a": (256, 128, 56, 1, 1, 0),
    "res3a_branch2c": (128, 512, 28, 1, 1, 0),
    "res3b_branch2a": (512, 128, 28, 1, 1, 0),
    "res3a_branch2b": (128, 128, 56, 3, 2, 1),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--benchmark", type=int, required=True)
    ap.add_argument("--batch", type=int, default=32)
    a = ap.parse_args()
    torch.backends.cudnn.benchmark = bool(a.benchmark)
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = "cuda"
    out = []
    g = torch.Generator(device="cpu").manual_seed(7)
    for name, (c, k, hw, ks, st, pad) in LAYERS.items():
        x = (torch.rand(a.batch, c, hw, hw, generator=g) * 2 - 1).to(dev)
        w = (torch.rand(k, c, ks, ks, generator=g) * 2 - 1).to(dev)
        y = F.conv2d(x, w, stride=st, padding=pad)
        dy = (torch.rand(y.shape, generator=g) * 2 - 1).to(dev)

        def wgrad(xx, dyy, ww):
            return torch.ops.aten.convolution_backward(dyy, xx, ww, None, [st, st], [pad, pad], [1, 1], False, [0, 0], 1,
                                                       [False, True, False])[1]

        dw = wgrad(x, dy, w)  # first call: with benchmark=True, PyTorch's search
        torch.cuda.synchronize()
        times = []
        for _ in range(15):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(3):
                dw = wgrad(x, dy, w)
            e.record()
            torch.cuda.synchronize()
            times.append(s.elapsed_time(e) / 3)
        times.sort()
        ref = wgrad(x.double(), dy.double(), w.double())
        scale = wgrad(x.double().abs(), dy.double().abs(), w.double())  # sum |dy * x| per weight
        err = ((dw.double() - ref).abs().max() / scale.max()).item()
        L = a.batch * ((hw + 2 * pad - ks) // st + 1) ** 2
        out.append({"layer": name, "benchmark": a.benchmark, "steady_ms": times[len(times) // 2], "error": err, "L": L})
        print(f"benchmark={a.benchmark} {name:16s} {times[len(times) // 2]:.4f} ms  error {err:.3g}  (L = {L})", flush=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
