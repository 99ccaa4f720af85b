#!/usr/bin/env python3
"""Checks convtune.capture on a real network: torchvision's resnet50, captured on the GPU (or the
CPU), must give exactly the 53 convolutions of ResNet-50 v1.5, in forward order, with the right
shapes and layer names; with --train also the 52 bwd_data and 53 bwd_filter calls of a training
step.

Needs PyTorch and torchvision; convtune's C++ module is optional: without it (a GPU server where
only PyTorch is installed) python/convtune/capture.py is loaded as a standalone file. Run from a
checkout (no network needed: the model is built without pretrained weights):

    python3 tests/python/gpu_capture_check.py --device cuda --train -o resnet50.trace

Exit status 0 when everything matches, 1 with a list of the differences otherwise, 2 when
PyTorch or torchvision is missing. The expected list below is written from the architecture
(He et al. 2016 with the v1.5 change: the stride of a downsampling block sits on its 3x3
convolution), not from the model; tests/python/test_gpu_capture_check.py checks it against
benchdnn's shapes_resnet_50_v1_5 and runs these checks on a torchvision-free ResNet-50.
"""

import argparse
import collections
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def resnet50_v15_forward(n, size):
    """The 53 forward convolutions of ResNet-50 v1.5 for an n x 3 x size x size input, in the order
    torchvision's forward runs them, as dicts (name, c, k, in, ker, stride, pad); 2-D, square."""
    out = []

    def conv(name, c, k, hw, ker, stride, pad):
        out.append(dict(name=name, n=n, c=c, k=k, in_=hw, ker=ker, stride=stride, pad=pad))
        return (hw + 2 * pad - ker) // stride + 1

    hw = conv("conv1", 3, 64, size, 7, 2, 3)
    hw = (hw + 2 * 1 - 3) // 2 + 1  # maxpool 3x3, stride 2, padding 1
    c = 64
    for li, (width, blocks, stride) in enumerate([(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)], start=1):
        for b in range(blocks):
            s = stride if b == 0 else 1
            p = f"layer{li}.{b}"
            conv(p + ".conv1", c, width, hw, 1, 1, 0)
            hw2 = conv(p + ".conv2", width, width, hw, 3, s, 1)  # v1.5: the stride is here
            conv(p + ".conv3", width, 4 * width, hw2, 1, 1, 0)
            if b == 0:  # torchvision runs the shortcut's projection after conv3
                conv(p + ".downsample.0", c, 4 * width, hw, 1, s, 0)
            c, hw = 4 * width, hw2
    return out


def parse_canonical(text):
    """'dir=fwd,...,in=56x56,...' -> dict of its fields (sizes as tuples of ints)."""
    d = dict(item.split("=", 1) for item in text.split(","))
    for key in ("n", "c", "k", "g"):
        d[key] = int(d[key])
    for key in ("in", "ker", "stride", "dil", "pad", "pad_end"):
        d[key] = tuple(int(v) for v in d[key].split("x"))
    return d


def _key(e):
    """What identifies a layer's problem, comparable between expected and captured."""
    return (e["c"], e["k"], e["in"], e["ker"], e["stride"], e["pad"])


def _expected_key(e):
    return (e["c"], e["k"], (e["in_"],) * 2, (e["ker"],) * 2, (e["stride"],) * 2, (e["pad"],) * 2)


def check_forward(calls, n, size, dtype="f32", layout="nchw"):
    """Compares the captured forward calls of one iteration with ResNet-50 v1.5; returns a list
    of differences (empty when everything matches)."""
    errors = []
    expected = resnet50_v15_forward(n, size)
    fwd = [c for c in calls if c.direction == "fwd"]
    if len(fwd) != len(expected):
        errors.append(f"{len(fwd)} forward convolutions captured, expected {len(expected)}")
    for i, (call, e) in enumerate(zip(fwd, expected)):
        got = parse_canonical(call.problem)
        what = []
        if got["dir"] != "fwd" or got["dtype"] != dtype or got["layout"] != layout:
            what.append(f"dir/dtype/layout {got['dir']}/{got['dtype']}/{got['layout']}, expected fwd/{dtype}/{layout}")
        if got["n"] != n or got["g"] != 1 or got["dil"] != (1, 1) or got["pad_end"] != got["pad"]:
            what.append(f"n={got['n']} g={got['g']} dil={got['dil']} pad_end={got['pad_end']}")
        if _key(got) != _expected_key(e):
            what.append(f"shape {_key(got)}, expected {_expected_key(e)}")
        if call.layer and call.layer != e["name"]:
            what.append(f"layer '{call.layer}', expected '{e['name']}'")
        if what:
            errors.append(f"call {i + 1} ({e['name']}): " + "; ".join(what) + f"\n    captured: {call.problem}")
    return errors


def check_backward(calls, n, size):
    """The backward calls of one training step: bwd_data for every layer but conv1 (the input
    needs no gradient) and bwd_filter for all 53, each the problem of its layer (autograd's order
    among a block's branches is its own: compared as multisets)."""
    errors = []
    expected = resnet50_v15_forward(n, size)
    for direction, exp in (("bwd_data", expected[1:]), ("bwd_filter", expected)):
        got = collections.Counter(_key(parse_canonical(c.problem)) for c in calls if c.direction == direction)
        want = collections.Counter(_expected_key(e) for e in exp)
        if got != want:
            errors.append(f"{direction}: {sum(got.values())} calls captured, expected {sum(want.values())}; "
                          f"missing {dict(want - got)}, unexpected {dict(got - want)}")
    fwd_then_bwd = [c.direction == "fwd" for c in calls]
    if fwd_then_bwd != sorted(fwd_then_bwd, reverse=True):
        errors.append("a forward convolution was captured after a backward one within the step")
    return errors


def load_capture(standalone=False):
    """convtune.capture from the installed or built package when importable (and not
    standalone), else the standalone file python/convtune/capture.py of this checkout."""
    try:
        if standalone:
            raise ImportError("standalone asked for")
        import convtune.capture as cap
        return cap, "convtune package (" + os.path.dirname(cap.__file__) + ")"
    except ImportError:
        path = os.path.join(HERE, "..", "..", "python", "convtune", "capture.py")
        spec = importlib.util.spec_from_file_location("convtune_capture_standalone", path)
        cap = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = cap  # dataclasses look their module up there
        spec.loader.exec_module(cap)
        return cap, "standalone " + os.path.normpath(path)


def run_checks(cap, model, n, size, device, train):
    """Captures the model (one inference pass, and a training step with train) and checks it."""
    import torch

    x = torch.randn(n, 3, size, size, device=device)
    errors = []
    trace = cap.capture(model, x, train=False, iterations=1)
    if len(trace.iterations) != 1:
        errors.append(f"inference: {len(trace.iterations)} iterations captured, expected 1")
    calls = trace.calls()
    if any(c.direction != "fwd" for c in calls):
        errors.append("inference: backward convolutions captured under torch.no_grad()")
    errors += ["inference: " + e for e in check_forward(calls, n, size)]
    errors += [f"inference: skipped {s}" for s in trace.skipped]
    traces = [trace]
    if train:
        t = cap.capture(model, x, train=True, iterations=1)
        calls = t.calls()
        errors += ["training: " + e for e in check_forward(calls, n, size)]
        errors += ["training: " + e for e in check_backward(calls, n, size)]
        errors += [f"training: skipped {s}" for s in t.skipped]
        traces.append(t)
    return errors, traces


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--size", type=int, default=224, help="input height and width (default 224)")
    ap.add_argument("--train", action="store_true", help="also capture and check a training step")
    ap.add_argument("--benchmark", action="store_true", help="capture with torch.backends.cudnn.benchmark = True")
    ap.add_argument("-o", "--out", help="write the trace (the training step's with --train) to this file")
    ap.add_argument("--standalone", action="store_true", help="use python/convtune/capture.py even where the package is importable")
    a = ap.parse_args(argv)
    try:
        import torch
        import torchvision
    except ImportError as e:
        print(f"gpu_capture_check: needs PyTorch and torchvision: {e}", file=sys.stderr)
        return 2
    device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    cap, where = load_capture(a.standalone)
    torch.backends.cudnn.benchmark = a.benchmark
    try:
        model = torchvision.models.resnet50(weights=None)
    except TypeError:  # torchvision < 0.13
        model = torchvision.models.resnet50(pretrained=False)
    model = model.to(device)
    what = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    print(f"PyTorch {torch.__version__}, torchvision {torchvision.__version__}, device {device} ({what}), "
          f"cudnn.benchmark={torch.backends.cudnn.benchmark}, capture from {where}")
    errors, traces = run_checks(cap, model, a.batch, a.size, device, a.train)
    if a.out:
        traces[-1].write(a.out)
        print(f"trace written to {a.out}")
    for t in traces:
        counts = collections.Counter(c.direction for c in t.calls())
        print(f"{t.source}: {len(t.calls())} convolutions ({dict(counts)}), {len(set(t.problems()))} distinct problems, "
              f"devices {sorted({c.device for c in t.calls()})}")
    if errors:
        print(f"FAILED: {len(errors)} differences from ResNet-50 v1.5:")
        for e in errors:
            print("  " + e)
        return 1
    print(f"OK: the captured forward pass is the 53 convolutions of ResNet-50 v1.5 (batch {a.batch}, {a.size}x{a.size})"
          + ("; the training step adds 52 bwd_data + 53 bwd_filter" if a.train else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
