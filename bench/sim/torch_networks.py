#!/usr/bin/env python3
"""Real PyTorch runs of whole networks, the yardstick of the simulator's fidelity benchmark.

    torch_networks.py run --net resnet50 --precision fp32 --mode train --batch 32 --benchmark 1 \
        --iterations 30 --out run.json
    torch_networks.py trace --net unet --mode train --batch 8 -o unet.trace   # needs capture.py

`run` builds the network on the GPU and runs --iterations steps (a training step: forward, loss,
backward, SGD update; an inference step: forward under no_grad), synchronising after each, and
writes every step's wall time, the process's time to the first step's start and the flags. Run
one process per setting: PyTorch's algorithm cache lives for the process. A stream of changing
shapes: `--batch 1,2,4,8,16,32` and/or `--size 160,192,224` cycle, step i taking the (i mod
length)-th of each list (the inputs made before the first step); `cycle` in the output is the
length of that cycle (1 for a fixed shape).

`trace` runs one step on the CPU under convtune's capture (capture.py, standalone or from the
installed package) and writes the convolutions as a trace file (the batch of a trace is one
field of each canonical line, `n=`, so a trace taken at a small batch is rewritten to another): the problem list that
`convtune parse --json` turns into the input of pytorch_measure.py.

Precisions: fp32 = float32 with allow_tf32=False; tf32 = float32 with allow_tf32=True;
amp = float16 autocast with channels_last (the usual mixed-precision recipe); bf16 = the same with
bfloat16; fp16 = the network and its inputs in float16, channels_last (inference). 1-D networks
stay channels-first (`format` prints the dtype and layout a network runs in).
Networks (NETWORKS, random weights): torchvision's resnet50, mobilenet_v3_large, mobilenet_v2, efficientnet_b0,
convnext_tiny, resnext50_32x4d, regnet_y_400mf, deeplabv3_resnet50 and r3d_18 (3-D), and three
defined here: unet (a four-level U-Net with transposed convolutions), conv1d_encoder (1-D, strided)
and wavenet (dilated 1-D).
"""
import argparse
import json
import os
import sys
import time

T_IMPORT = time.time()
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402


class UNet(nn.Module):
    """The classic U-Net shape (Ronneberger et al.), padded 3x3 convolutions so the output has the
    input's size: four downsampling levels of two conv-BN-ReLU blocks, 2x2 transposed-convolution
    upsampling, skip concatenations, a 1x1 head."""

    def __init__(self, channels=3, classes=2, width=64):
        super().__init__()

        def block(i, o):
            return nn.Sequential(nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o), nn.ReLU(inplace=True),
                                 nn.Conv2d(o, o, 3, padding=1, bias=False), nn.BatchNorm2d(o), nn.ReLU(inplace=True))

        w = [width * 2**i for i in range(5)]
        self.down = nn.ModuleList([block(channels, w[0])] + [block(w[i], w[i + 1]) for i in range(4)])
        self.up = nn.ModuleList([nn.ConvTranspose2d(w[i + 1], w[i], 2, stride=2) for i in reversed(range(4))])
        self.dec = nn.ModuleList([block(w[i + 1], w[i]) for i in reversed(range(4))])
        self.head = nn.Conv2d(w[0], classes, 1)
        self.pool = nn.MaxPool2d(2)

    def forward(self, x):
        skips = []
        for i, d in enumerate(self.down):
            x = d(x if i == 0 else self.pool(x))
            skips.append(x)
        skips.pop()
        for up, dec in zip(self.up, self.dec):
            x = dec(torch.cat([up(x), skips.pop()], dim=1))
        return self.head(x)


class Conv1dEncoder(nn.Module):
    """A 1-D convolution encoder of raw audio (the shape of wav2vec 2.0's feature encoder): seven
    strided convolutions of 512 channels, GELU between them, then a linear classifier."""

    def __init__(self, classes=1000, width=512):
        super().__init__()
        spec = [(10, 5)] + [(3, 2)] * 4 + [(2, 2)] * 2
        layers, c = [], 1
        for k, s in spec:
            layers += [nn.Conv1d(c, width, k, stride=s, bias=False), nn.GroupNorm(1, width) if c == 1 else nn.Identity(),
                       nn.GELU()]
            c = width
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        return self.head(self.features(x).mean(dim=2))


class WaveNet(nn.Module):
    """Dilated 1-D convolutions (WaveNet's shape): a causal stack of gated residual blocks, dilation
    1, 2, 4, ..., 512 repeated twice, kernel 2, 1x1 residual and skip convolutions, a classifier."""

    def __init__(self, classes=256, channels=64, skip=128, stacks=2, layers=10):
        super().__init__()
        self.inp = nn.Conv1d(1, channels, 1)
        self.dil = nn.ModuleList()
        self.res = nn.ModuleList()
        self.skp = nn.ModuleList()
        for _ in range(stacks):
            for i in range(layers):
                d = 2 ** i
                self.dil.append(nn.Conv1d(channels, 2 * channels, 2, dilation=d, padding=d))
                self.res.append(nn.Conv1d(channels, channels, 1))
                self.skp.append(nn.Conv1d(channels, skip, 1))
        self.out = nn.Sequential(nn.ReLU(), nn.Conv1d(skip, skip, 1), nn.ReLU(), nn.Conv1d(skip, classes, 1))

    def forward(self, x):
        x = self.inp(x)
        total = 0
        for dil, res, skp in zip(self.dil, self.res, self.skp):
            h = dil(x)[..., :x.shape[-1]]  # causal: drop the look-ahead the padding adds
            a, b = h.chunk(2, dim=1)
            h = torch.tanh(a) * torch.sigmoid(b)
            x = x + res(h)
            total = total + skp(h)
        return self.out(total).mean(dim=2)


def _tv(name, **kw):
    def make():
        import torchvision.models as m
        import torchvision.models.segmentation as seg
        import torchvision.models.video as video
        for mod in (m, seg, video):
            if hasattr(mod, name):
                return getattr(mod, name)(**kw)
        raise SystemExit(f"torch_networks: this torchvision has no {name}")
    return make


class _Segmentation(nn.Module):
    """torchvision's segmentation models return a dict: its 'out'."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


NETWORKS = {
    # name: (constructor, default input shape (channels, spatial...), classes, per-pixel target)
    # What each adds to the benchmark: resnet50 plain 3x3/1x1; mobilenet_v3_large, mobilenet_v2, efficientnet_b0 and
    # convnext_tiny depthwise (3x3, 5x5, 7x7); resnext50_32x4d and regnet_y_400mf grouped; unet transposed;
    # deeplabv3_resnet50 dilated 2-D; r3d_18 3-D; conv1d_encoder 1-D strided; wavenet dilated 1-D.
    "resnet50": (_tv("resnet50"), (3, 224, 224), 1000, False),
    "mobilenet_v3_large": (_tv("mobilenet_v3_large"), (3, 224, 224), 1000, False),
    "mobilenet_v2": (_tv("mobilenet_v2"), (3, 224, 224), 1000, False),
    "efficientnet_b0": (_tv("efficientnet_b0"), (3, 224, 224), 1000, False),
    "convnext_tiny": (_tv("convnext_tiny"), (3, 224, 224), 1000, False),
    "resnext50_32x4d": (_tv("resnext50_32x4d"), (3, 224, 224), 1000, False),
    "regnet_y_400mf": (_tv("regnet_y_400mf"), (3, 224, 224), 1000, False),
    "unet": (lambda: UNet(), (3, 256, 256), 2, True),
    "deeplabv3_resnet50": (lambda: _Segmentation(_tv("deeplabv3_resnet50", num_classes=21, aux_loss=False, weights_backbone=None)()),
                           (3, 256, 256), 21, True),
    "r3d_18": (_tv("r3d_18"), (3, 16, 112, 112), 400, False),
    "conv1d_encoder": (lambda: Conv1dEncoder(), (1, 16000), 1000, False),
    "wavenet": (lambda: WaveNet(), (1, 16000), 256, False),
}


def channels_last(net, precision):
    """Whether the network runs channels-last: the reduced precisions (amp, fp16, bf16) on 2-D and
    3-D networks, as the usual mixed-precision recipe does; 1-D tensors have no such format."""
    return precision in ("amp", "fp16", "bf16") and len(NETWORKS[net][1]) >= 3


def _memory_format(ndim):
    return torch.channels_last if ndim == 4 else torch.channels_last_3d


def build(net, precision, device):
    make, shape, _, _ = NETWORKS[net]
    torch.manual_seed(0)
    model = make().to(device)
    if channels_last(net, precision):
        model = model.to(memory_format=_memory_format(len(shape) + 1))
    if precision == "fp16":
        model = model.half()
    return model, shape


def step_fn(model, precision, mode, x, target):
    opt = torch.optim.SGD(model.parameters(), lr=1e-3) if mode == "train" else None
    amp = precision in ("amp", "bf16")
    half = torch.bfloat16 if precision == "bf16" else torch.float16

    def step():
        if mode == "infer":
            with torch.no_grad(), torch.autocast("cuda", dtype=half, enabled=amp):
                return model(x)
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=half, enabled=amp):
            out = model(x)
            loss = torch.nn.functional.cross_entropy(out.float(), target)
        loss.backward()
        opt.step()
        return loss

    return step


PRECISIONS = ["fp32", "tf32", "amp", "fp16", "bf16"]


def int_list(text):
    """'32' -> [32]; '1,2,4' -> [1, 2, 4]."""
    try:
        values = [int(v) for v in str(text).split(",")]
    except ValueError:
        sys.exit(f"torch_networks: '{text}' is not a number or a comma-separated list of numbers")
    if not values or min(values) < 1:
        sys.exit(f"torch_networks: '{text}': every value must be 1 or more")
    return values


def cmd_run(a):
    t_start = time.time()
    batches, sizes = int_list(a.batch), int_list(a.size) if a.size else None  # checked before the GPU is touched
    if max(len(batches), len(sizes or [0])) % min(len(batches), len(sizes or [0])):
        sys.exit("torch_networks: --batch and --size lists must have lengths that divide the longer one")
    torch.backends.cudnn.benchmark = bool(a.benchmark)
    torch.backends.cudnn.allow_tf32 = a.precision != "fp32"
    torch.backends.cuda.matmul.allow_tf32 = a.precision != "fp32"
    model, shape = build(a.net, a.precision, "cuda")
    model.train(a.mode == "train")
    dtype = torch.float16 if a.precision == "fp16" else torch.float32
    _, _, classes, per_pixel = NETWORKS[a.net]
    sizes = sizes or [shape[-1]]
    cycle = max(len(batches), len(sizes))
    steps = []
    for i in range(cycle):
        n, s = batches[i % len(batches)], sizes[i % len(sizes)]
        dims = list(shape[1:-2]) + [s, s] if len(shape) >= 3 else [s]  # --size: the last two (one for 1-D)
        x = torch.randn([n, shape[0]] + dims, device="cuda", dtype=dtype)
        if channels_last(a.net, a.precision):
            x = x.contiguous(memory_format=_memory_format(x.dim()))
        target = torch.randint(0, classes, [n] + dims if per_pixel else [n], device="cuda")
        steps.append(step_fn(model, a.precision, a.mode, x, target))
    torch.cuda.synchronize()
    t_ready = time.time()
    times = []
    for i in range(a.iterations):
        t0 = time.perf_counter()
        steps[i % cycle]()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    doc = dict(format="convtune-torch-run", version=1, net=a.net, precision=a.precision, mode=a.mode,
               batch=batches[0] if len(batches) == 1 else batches, size=sizes[0] if len(sizes) == 1 else sizes, cycle=cycle,
               benchmark=a.benchmark, iterations_ms=times, setup_s=t_ready - t_start,
               import_s=t_start - T_IMPORT, torch=torch.__version__, cudnn=torch.backends.cudnn.version(),
               device=torch.cuda.get_device_name(), cuda_cache="set" if os.environ.get("CUDA_CACHE_PATH") else "default")
    text = json.dumps(doc)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    else:
        print(text)


def load_capture():
    try:
        from convtune import capture  # the installed package
        return capture
    except ImportError:
        import importlib.util
        here = os.path.dirname(os.path.abspath(__file__))
        for path in (os.path.join(here, "capture.py"), os.path.join(here, "..", "..", "python", "convtune", "capture.py")):
            if os.path.exists(path):
                spec = importlib.util.spec_from_file_location("capture", path)
                mod = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(mod)
                return mod
    sys.exit("torch_networks: capture.py not found (install convtune or keep the source tree)")


def cmd_trace(a):
    capture = load_capture()
    model, shape = build(a.net, "fp32", a.device)
    dims = list(shape[1:])
    if a.size:
        dims = dims[:-2] + [int(a.size)] * 2 if len(dims) >= 2 else [int(a.size)]
    x = torch.randn([int(a.batch), shape[0]] + dims, device=a.device)
    capture.capture(model, (x,), train=a.mode == "train", iterations=1, path=a.output)
    print(f"torch_networks: {a.net} {a.mode} batch {a.batch} -> {a.output}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    t = sub.add_parser("trace")
    for p in (r, t):
        p.add_argument("--net", choices=sorted(NETWORKS), required=True)
        p.add_argument("--mode", choices=["train", "infer"], default="train")
        p.add_argument("--batch", default="32", help="batch size (run: or a comma-separated list that cycles)")
        p.add_argument("--size", help="input height and width (default: the network's; run: or a list that cycles)")
    r.add_argument("--precision", choices=PRECISIONS, default="fp32")
    r.add_argument("--benchmark", type=int, choices=[0, 1], required=True)
    r.add_argument("--iterations", type=int, default=30)
    r.add_argument("--out")
    t.add_argument("-o", "--output", required=True)
    t.add_argument("--device", default="cpu")
    f = sub.add_parser("format", help="the dtype and layout a network's convolutions run in at a precision")
    f.add_argument("--net", choices=sorted(NETWORKS), required=True)
    f.add_argument("--precision", choices=PRECISIONS, required=True)
    a = ap.parse_args()
    if a.cmd == "format":
        dtype = {"fp32": "f32", "tf32": "f32", "amp": "f16", "fp16": "f16", "bf16": "bf16"}[a.precision]
        print(dtype, "nhwc" if channels_last(a.net, a.precision) else "nchw")
        return
    (cmd_run if a.cmd == "run" else cmd_trace)(a)


if __name__ == "__main__":
    main()
