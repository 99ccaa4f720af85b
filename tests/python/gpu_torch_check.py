"""convtune.torch on a GPU (label gpu: ctest -L gpu in a `cuda` build on a machine with a GPU and
PyTorch with CUDA): PyTorch's CUDA convolutions through convtune's cuDNN backend.

- a small network (1-D, 2-D with groups, dilation, stride, channels_last, 3-D) trained a few
  steps with and without convtune, fp32 with TF32 off: losses and gradients within the bound of
  docs/python.md ("convtune.torch");
- AMP (float16 autocast) with channels_last runs through convtune with no fallback;
- a deterministic run (torch.use_deterministic_algorithms(True)) is bitwise the same in two
  processes;
- a warm database: the second process searches nothing.

Each test runs against both overrides (the C++ one, compiled for the torch of this machine at
the first enable(), and the Python one): test_torch's `override` fixture.

Not collected by the CPU suite (the file name does not start with test_)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device visible to PyTorch", allow_module_level=True)

import convtune.torch as ct  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from test_torch import Net  # noqa: E402,F401  the same network and training loop as the CPU test
from test_torch import override  # noqa: E402,F401  the fixture: CONVTUNE_TORCH_OVERRIDE=cpp, then python
from test_torch import train as shared_train  # noqa: E402


@pytest.fixture(autouse=True)
def restore():
    saved = (torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32, torch.are_deterministic_algorithms_enabled())
    yield
    ct.disable()
    torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32 = saved[:2]
    torch.use_deterministic_algorithms(saved[2])


def train(enable, steps=3):
    return shared_train(enable, steps, dtype=torch.float32, device="cuda")


# fp32 without TF32: each convolution of convtune's cuDNN algorithms (plain sums) and of PyTorch's
# (assumed the same: its heuristic picks implicit GEMMs here) is within
# (64 L + 1) 2^-24 of the exact result relative to sum |a*b| (cudnn_error_bound, docs/gpu.md;
# L <= 108), so they differ by at most 2 (64 * 108 + 1) 2^-24 < 8.3e-4 of sum|a*b| per
# convolution; 2e-3 of each tensor's largest magnitude covers the few layers and three steps.
REL = 2e-3


def test_training_matches_pytorch_fp32(override):
    # Heuristic choices on both sides; convtune limited to algorithms without workspace (plain
    # sums: no FFT or Winograd, whose own bounds are larger; docs/gpu.md).
    import convtune.backends.cudnn as knobs

    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    ref_l, ref_g = train(False)
    with knobs.flags(workspace_limit=0):
        l, g = train(True)
    st = ct.stats()
    assert st["override"] == override, st
    assert st["convtune"] == {"fwd": 12, "bwd_data": 9, "bwd_filter": 12}, st
    assert st["fallback"] == {}, st
    for a, b in zip(l, ref_l):
        assert abs(a - b) <= REL * abs(b)
    for gs, rs in zip(g, ref_g):
        for x, r in zip(gs, rs):
            assert (x - r).abs().max().item() <= REL * r.abs().max().item()


def test_amp_channels_last_runs_through_convtune(override):
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(16, 32, 3, padding=1).cuda().to(memory_format=torch.channels_last)
    x = torch.randn(4, 16, 28, 28, device="cuda").contiguous(memory_format=torch.channels_last)
    with ct.enabled(device="cuda", db=""):
        with torch.autocast("cuda", dtype=torch.float16):
            y = conv(x)
        y.float().sum().backward()
        st = ct.stats()
    assert y.dtype == torch.float16 and y.is_contiguous(memory_format=torch.channels_last)
    assert st["convtune"]["fwd"] == 1 and st["convtune"]["bwd_filter"] == 1, st
    assert st["fallback"] == {}, st


_DETERMINISTIC = textwrap.dedent("""
    import hashlib, sys, torch
    sys.path.insert(0, sys.argv[1])
    from test_torch import Net
    import convtune.torch as ct
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = True
    ct.enable(device="cuda", db="")
    torch.manual_seed(0)
    net = Net().cuda()
    h = hashlib.sha256()
    for _ in range(3):
        net.zero_grad()
        loss = net(torch.randn(2, 3, 64, device="cuda"))
        loss.backward()
        for p in net.parameters():
            h.update(p.grad.cpu().numpy().tobytes())
    assert ct.stats()["fallback"] == {}, ct.stats()
    print(h.hexdigest())
""")


def test_deterministic_run_is_bitwise_reproducible_across_processes(override):
    outs = []
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", _DETERMINISTIC, os.path.dirname(__file__)], capture_output=True, text=True,
                           timeout=600)
        assert r.returncode == 0, r.stderr
        outs.append(r.stdout.strip().splitlines()[-1])
    assert outs[0] == outs[1]


_WARM = textwrap.dedent("""
    import json, sys, torch
    sys.path.insert(0, sys.argv[2])
    from test_torch import Net
    import convtune.torch as ct
    torch.backends.cudnn.benchmark = True
    ct.enable(device="cuda", db=sys.argv[1])
    torch.manual_seed(0)
    net = Net().cuda()
    net(torch.randn(2, 3, 64, device="cuda")).backward()
    torch.cuda.synchronize()
    print(json.dumps(ct.stats()))
""")


def test_warm_database_searches_nothing(tmp_path, override):
    db = str(tmp_path / "tune.json")
    stats = []
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", _WARM, db, os.path.dirname(__file__)], capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
        stats.append(json.loads(r.stdout.strip().splitlines()[-1]))
    assert stats[0]["sources"].get("search", 0) > 0, stats[0]
    assert "search" not in stats[1]["sources"], stats[1]
