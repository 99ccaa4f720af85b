"""gpu_capture_check.py (the ResNet-50 capture check run on the GPU machine) and the standalone
capture.py it falls back to where convtune's C++ module is not installed.

Here, without torchvision: the script's expected layer list is checked against benchdnn's
shapes_resnet_50_v1_5, and its checks run on a ResNet-50 built in this file with torchvision's
module names (they must accept v1.5 and reject v1)."""

import collections
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed: capture cannot be tested")
nn = torch.nn

import gpu_capture_check as gcc  # noqa: E402
from convtune import _convtune  # noqa: E402

REPO = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))


def test_expected_list_is_benchdnn_resnet_50_v1_5(cli):
    """The script's own list (53 calls in forward order) is, as a multiset, benchdnn's ResNet-50
    v1.5 layer list (23 distinct layers with their repeat counts)."""
    shapes_dir = os.environ.get("CONVTUNE_SHAPES_DIR", "")
    path = os.path.join(shapes_dir, "shapes_resnet_50_v1_5")
    if not os.path.isfile(path):
        pytest.skip(f"benchdnn shape file not found: {path!r} (CONVTUNE_SHAPES_DIR)")
    expected = gcc.resnet50_v15_forward(2, 224)
    assert len(expected) == 53 and len({e["name"] for e in expected}) == 53
    theirs = collections.Counter()
    for line in cli("parse", path, check=0).stdout.splitlines():
        if not line.startswith("dir="):
            continue
        canonical, _, comment = line.partition("  # ")
        count = int(comment.rsplit(" x", 1)[1]) if " x" in comment else 1
        p = gcc.parse_canonical(canonical)
        # benchdnn derives pad_end from the output size (conv1: pad_end=2x2 where PyTorch pads 3):
        # compare the output size instead.
        out = tuple(_convtune.parse_problem(canonical)["out"])
        theirs[(p["c"], p["k"], p["in"], p["ker"], p["stride"], p["pad"], out)] += count
    ours = collections.Counter(
        gcc._expected_key(e) + (((e["in_"] + 2 * e["pad"] - e["ker"]) // e["stride"] + 1,) * 2,) for e in expected)
    assert sum(theirs.values()) == 53
    assert ours == theirs


class Bottleneck(nn.Module):
    def __init__(self, cin, width, stride, v15):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, width, 1, stride=1 if v15 else stride, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride if v15 else 1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, 4 * width, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(4 * width)
        self.downsample = None
        if stride != 1 or cin != 4 * width:
            self.downsample = nn.Sequential(nn.Conv2d(cin, 4 * width, 1, stride=stride, bias=False), nn.BatchNorm2d(4 * width))

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        out = torch.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return torch.relu(out + (x if self.downsample is None else self.downsample(x)))


class ResNet50(nn.Module):
    """torchvision's resnet50 structure and module names, without torchvision."""

    def __init__(self, v15=True, blocks=(3, 4, 6, 3)):
        super().__init__()
        torch.manual_seed(0)
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        cin = 64
        for i, (width, n, stride) in enumerate(zip((64, 128, 256, 512), blocks, (1, 2, 2, 2)), start=1):
            layers = []
            for b in range(n):
                layers.append(Bottleneck(cin, width, stride if b == 0 else 1, v15))
                cin = 4 * width
            setattr(self, f"layer{i}", nn.Sequential(*layers))
        self.fc = nn.Linear(2048, 10)

    def forward(self, x):
        x = self.maxpool(torch.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


# 32x32 inputs keep it cheap (Debian's PyTorch takes seconds for a 64x64 training step here):
# the spatial sizes run 16, 8, 8, 4, 2, 1 through the network (batch 2: BatchNorm trains on 1x1).
@pytest.mark.parametrize("standalone", [False, True])
def test_checks_accept_resnet50_v15(standalone):
    cap, where = gcc.load_capture(standalone)
    assert (cap._convtune is None) == standalone, where
    errors, traces = gcc.run_checks(cap, ResNet50(), 2, 32, "cpu", train=not standalone)
    assert errors == []
    if not standalone:
        counts = collections.Counter(c.direction for c in traces[1].calls())
        assert counts == {"fwd": 53, "bwd_data": 52, "bwd_filter": 53}


def test_checks_reject_other_networks():
    cap, _ = gcc.load_capture()
    errors, _ = gcc.run_checks(cap, ResNet50(v15=False), 1, 32, "cpu", train=False)  # v1: stride on the 1x1
    assert errors and all("shape" in e for e in errors), errors
    # The first block of layers 2-4: its 1x1 has the stride, so its 3x3 sees a smaller input.
    assert [e.split(" (")[1].split(")")[0] for e in errors] == [
        f"layer{i}.0.{c}" for i in (2, 3, 4) for c in ("conv1", "conv2")], errors
    errors, _ = gcc.run_checks(cap, ResNet50(blocks=(3, 4, 5, 3)), 1, 32, "cpu", train=False)  # ResNet-50 minus a block
    assert errors and errors[0] == "inference: 50 forward convolutions captured, expected 53", errors


def test_standalone_problems_equal_the_cpp_ones():
    """capture.py without the C++ module writes the same canonical strings and output shapes."""
    cap, _ = gcc.load_capture(standalone=True)
    cases = [
        ("fwd", "f32", "nchw", 2, 3, 8, 1, [17], [3], [2], [1], [1], [1]),
        ("bwd_data", "f16", "nhwc", 1, 4, 6, 2, [9, 11], [3, 2], [1, 2], [2, 1], [1, 0], [1, 0]),
        ("bwd_filter", "bf16", "nchw", 3, 6, 6, 6, [5, 6, 7], [3, 3, 1], [1, 2, 1], [1, 1, 1], [1, 0, 0], [1, 0, 0]),
        ("fwd", "f64", "nhwc", 1, 2, 4, 1, [4, 5, 6], [2, 2, 2], [1, 1, 3], [1, 2, 1], [0, 1, 2], [0, 1, 2]),
        ("fwd", "f32", "nchw", 4, 64, 256, 1, [56, 56], [1, 1], [2, 2], [1, 1], [0, 0], [0, 0]),
    ]
    for args in cases:
        theirs = _convtune.make_problem(*args)
        ours = cap._problem_py(*args)
        assert ours["canonical"] == theirs["canonical"]
        assert ours["y_shape"] == theirs["y_shape"]
    with pytest.raises(ValueError):
        cap._problem_py("fwd", "f32", "nchw", 1, 1, 1, 1, [2, 2], [3, 3], [1, 1], [1, 1], [0, 0], [0, 0])


SCRIPT = """
import torch
from torch import nn
torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, stride=2, padding=1))
for step in range(2):
    model(torch.randn(2, 3, 16, 16)).sum().backward()
"""


def test_standalone_capture_py_as_a_script(cli, tmp_path):
    """python3 capture.py on a machine without convtune's package (PYTHONPATH cleared) writes a
    trace that the convtune CLI replays."""
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(SCRIPT))
    out = tmp_path / "train.trace"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([sys.executable, os.path.join(REPO, "python", "convtune", "capture.py"), "-o", str(out), str(script)],
                       capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "convtune.capture: 10 convolutions in 2 iterations (5 distinct problems)" in r.stderr, r.stderr
    text = out.read_text()
    assert "(convtune standalone capture.py, no C++ module, PyTorch" in text
    r = cli("simulate", "--stream", f"trace:{out}", "--iterations", "2", "--flags", "off", "--json", check=0)
    assert '"calls": 5' in r.stdout
