"""convtune.torch on the CPU with the real PyTorch: PyTorch's CPU convolutions through convtune's
CPU backend (enable(device="cpu")), end to end. The CUDA path is the same code with the cuDNN
backend; its tests are gpu_torch_check.py (label gpu). The functional tests run against both
overrides (the `override` fixture: the C++ one, compiled here once per torch build into
$CONVTUNE_CACHE_DIR, and the Python one)."""

import contextlib
import os
import shutil
import sys
import textwrap
import warnings

import pytest

torch = pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed: convtune.torch needs it")

import convtune.backends.cudnn  # noqa: E402
import convtune.torch as ct  # noqa: E402


@pytest.fixture(autouse=True)
def restore_torch():
    """Every test leaves convtune.torch disabled and PyTorch's flags as they were."""
    saved = (torch.backends.cudnn.enabled, torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic,
             torch.are_deterministic_algorithms_enabled())
    yield
    ct.disable()
    torch.backends.cudnn.enabled, torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = saved[:3]
    torch.use_deterministic_algorithms(saved[3])


@pytest.fixture(params=["cpp", "python"])
def override(request, monkeypatch):
    """Runs the test against one override: enable()'s default comes from CONVTUNE_TORCH_OVERRIDE."""
    monkeypatch.setenv("CONVTUNE_TORCH_OVERRIDE", request.param)
    return request.param


class Net(torch.nn.Module):
    """1-D, 2-D (groups, dilation, stride, channels_last) and 3-D convolutions, with and without bias."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv1d(3, 4, 3, padding=1)
        self.c2 = torch.nn.Conv2d(4, 6, 3, stride=2, padding=2, dilation=2, groups=2)
        self.c3 = torch.nn.Conv2d(6, 6, 1, bias=False)
        self.c4 = torch.nn.Conv3d(6, 2, (2, 3, 3), padding=(0, 1, 1), stride=(1, 2, 1))

    def forward(self, x):
        n = x.shape[0]
        a = torch.relu(self.c1(x.reshape(n, 3, -1)))                          # (n, 4, 64)
        b = torch.relu(self.c2(a.reshape(n, 4, 8, 8)))                        # (n, 6, 4, 4)
        b = torch.tanh(self.c3(b.contiguous(memory_format=torch.channels_last)))  # channels_last
        c = self.c4(b.contiguous().reshape(n, 6, 1, 4, 4).expand(n, 6, 2, 4, 4))  # (n, 2, 1, 2, 4)
        return c.pow(2).mean()


def train(enable, steps=3, dtype=torch.float64, device="cpu"):
    """Losses and gradients of `steps` SGD steps of Net, through convtune when `enable`."""
    torch.manual_seed(0)
    net = Net().to(device=device, dtype=dtype)
    data = [torch.randn(2, 3, 64, dtype=dtype, device=device) for _ in range(steps)]
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    losses, grads = [], []
    with ct.enabled(device=device, db="") if enable else contextlib.nullcontext():
        for x in data:
            opt.zero_grad()
            loss = net(x)
            loss.backward()
            losses.append(loss.item())
            grads.append([p.grad.clone() for p in net.parameters()])
            opt.step()
    return losses, grads


# The bound for the training comparison (docs/python.md, "convtune.torch"): in f64 each
# convolution of convtune (plain sums: checked) and of PyTorch is within (64 L + 1) u of the
# exact result relative to sum |a*b| (docs/algorithms.md; a plain sum's bound is L u + u, 64 L
# caps even a Winograd transform; L <= 108 here, u = 2^-53), so the two
# differ by at most 2 (64 * 108 + 1) 2^-53 < 1.6e-12 per convolution; three steps of a network of
# four layers (eight backward convolutions, tanh and ReLU are 1-Lipschitz, lr 0.1) compose a few
# dozen such differences. 1e-9 relative to the largest magnitude of each tensor leaves a margin
# of over 10 against that sum, and is still 2^20 times tighter than an f32 result would meet.
REL = 1e-9


def test_training_matches_pytorch_within_the_bound(override):
    ref_losses, ref_grads = train(False)
    losses, grads = train(True)
    st = ct.stats()
    assert st["override"] == override
    # Every convolution of the net ran through convtune: 4 forward, 3 backward-data (c1's input
    # needs no gradient), 4 backward-filter per step.
    assert st["convtune"] == {"fwd": 12, "bwd_data": 9, "bwd_filter": 12}, st
    assert st["fallback"] == {}, st
    # f64 runs on plain sums only (cpu.direct), within the bound used here.
    assert set(st["algorithms"]) <= {"cpu.direct", "cpu.im2col_gemm"}, st["algorithms"]
    for a, b in zip(losses, ref_losses):
        assert abs(a - b) <= REL * abs(b), (a, b)
    for gs, rs in zip(grads, ref_grads):
        for g, r in zip(gs, rs):
            assert torch.isfinite(g).all()
            assert (g - r).abs().max().item() <= REL * r.abs().max().item()


def test_f32_and_channels_last_output_format(override):
    torch.manual_seed(1)
    conv = torch.nn.Conv2d(4, 8, 3, padding=1).to(memory_format=torch.channels_last)
    x = torch.randn(2, 4, 9, 9).contiguous(memory_format=torch.channels_last).requires_grad_()
    ref = conv(x)
    # workspace_limit=0 (convtune's knob): only algorithms without workspace, plain sums (checked
    # below), whose bound is derived here; Winograd's would be its own (docs/algorithms.md).
    with ct.enabled(device="cpu", db=""), convtune.backends.cudnn.flags(workspace_limit=0):
        y = conv(x)
        algos = ct.stats()["algorithms"]  # the forward's
        y.sum().backward()
    assert y.is_contiguous(memory_format=torch.channels_last)
    assert set(algos) <= {"cpu.direct", "cpu.direct_blocked", "cpu.im2col_gemm"}, algos
    # f32: plain sums (those algorithms, and PyTorch's) are within (L + 2) u <= (64 L + 1) u of
    # the exact result relative to sum|a*b| (L = 36, u = 2^-24; docs/algorithms.md), and
    # sum|a*b| <= 36 * max|x| * max|w| + |b|.
    bound = 2 * (64 * 36 + 1) * 2.0**-24 * (36 * x.abs().max() * conv.weight.abs().max() + conv.bias.abs().max())
    assert (y - ref).abs().max().item() <= bound.item()
    assert ct.stats()["convtune"] == {"fwd": 1, "bwd_data": 1, "bwd_filter": 1}


def test_autocast_bfloat16_channels_last_runs_through_convtune(override):
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(4, 8, 3, padding=1).to(memory_format=torch.channels_last)
    x = torch.randn(2, 4, 9, 9).contiguous(memory_format=torch.channels_last)
    with ct.enabled(device="cpu", db=""):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = conv(x)
        y.float().sum().backward()
        st = ct.stats()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ref = conv(x)
    assert y.dtype == torch.bfloat16 and y.is_contiguous(memory_format=torch.channels_last)
    assert st["convtune"] == {"fwd": 1, "bwd_data": 0, "bwd_filter": 1} and st["fallback"] == {}, st
    # Both round an f32 sum (within (64 L + 1) 2^-24 of exact relative to sum|a*b|, L = 36) to
    # bfloat16 (u = 2^-8): they differ by at most 2^-7 |y| + 2.1 (64 L + 1) 2^-24 sum|a*b|.
    xb, wb = x.bfloat16().float(), conv.weight.bfloat16().float()
    m = 36 * xb.abs().max() * wb.abs().max() + conv.bias.abs().max()
    bound = 2.0**-7 * ref.float().abs().max() + 2.1 * (64 * 36 + 1) * 2.0**-24 * m
    assert (y.float() - ref.float()).abs().max().item() <= bound.item()


def test_inference_mode_runs_through_convtune(override):
    # torch.inference_mode() skips the autograd key: the override at the device's own key runs it.
    conv = torch.nn.Conv3d(2, 3, 3, padding=1, groups=1)
    x = torch.randn(1, 2, 4, 5, 6)
    ref = conv(x).detach()
    with ct.enabled(device="cpu", db=""), torch.inference_mode(), convtune.backends.cudnn.flags(workspace_limit=0):
        y = conv(x)
        st = ct.stats()
    assert st["convtune"] == {"fwd": 1, "bwd_data": 0, "bwd_filter": 0} and st["fallback"] == {}, st
    assert set(st["algorithms"]) <= {"cpu.direct", "cpu.direct_blocked"}, st["algorithms"]
    # Plain sums in f32 (L = 54), as in test_f32_and_channels_last_output_format.
    m = 54 * x.abs().max() * conv.weight.abs().max() + conv.bias.abs().max()
    assert y.shape == ref.shape
    assert (y - ref).abs().max().item() <= (2 * (64 * 54 + 1) * 2.0**-24 * m).item()


def test_no_grad_forward_runs_through_convtune_without_a_graph(override):
    # Nothing to differentiate: the forward runs through convtune and leaves no autograd node.
    conv = torch.nn.Conv2d(2, 3, 3, padding=1).double()
    x = torch.randn(1, 2, 5, 5, dtype=torch.float64)
    ref = conv(x).detach()
    with ct.enabled(device="cpu", db=""):
        with torch.no_grad():
            y = conv(x)
        z = torch.nn.functional.conv2d(x, conv.weight.detach(), conv.bias.detach(), padding=1)
        st = ct.stats()
    assert y.grad_fn is None and z.grad_fn is None and not z.requires_grad
    assert st["convtune"] == {"fwd": 2, "bwd_data": 0, "bwd_filter": 0} and st["fallback"] == {}, st
    assert torch.allclose(y, ref, rtol=1e-12, atol=1e-12) and torch.allclose(z, ref, rtol=1e-12, atol=1e-12)


def test_threads_share_the_override(override):
    # Two Python threads (PyTorch's kernels run without the GIL) through one override: every call counted.
    import threading

    conv = torch.nn.Conv2d(2, 3, 3, padding=1).double()
    errors = []

    def work():
        try:
            for _ in range(5):
                conv(torch.randn(2, 2, 6, 6, dtype=torch.float64, requires_grad=True)).sum().backward()
        except Exception as e:  # reported below
            errors.append(e)

    with ct.enabled(device="cpu", db=""):
        threads = [threading.Thread(target=work) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        st = ct.stats()
    assert not errors, errors
    assert st["convtune"] == {"fwd": 10, "bwd_data": 10, "bwd_filter": 10} and st["fallback"] == {}, st


def test_gradcheck_through_convtune(override):
    # convtune's CPU backend runs f64 (cpu.direct, im2col): PyTorch's numerical gradient check.
    x = torch.randn(1, 2, 5, 4, dtype=torch.float64, requires_grad=True)
    w = torch.randn(3, 2, 3, 2, dtype=torch.float64, requires_grad=True)
    b = torch.randn(3, dtype=torch.float64, requires_grad=True)
    with ct.enabled(device="cpu", db=""):
        assert torch.autograd.gradcheck(lambda x, w, b: torch.nn.functional.conv2d(x, w, b, padding=1, stride=(2, 1)), (x, w, b))
        st = ct.stats()
    assert st["convtune"]["fwd"] > 0 and st["convtune"]["bwd_data"] > 0 and st["convtune"]["bwd_filter"] > 0, st
    assert st["fallback"] == {}, st


def test_fallbacks_are_counted_per_reason(override):
    x = torch.randn(1, 2, 6, 6, requires_grad=True)
    with ct.enabled(device="cpu", db=""):
        torch.nn.functional.conv_transpose2d(x, torch.randn(2, 3, 3, 3))
        with torch.backends.cudnn.flags(enabled=False):
            torch.nn.functional.conv2d(x, torch.randn(3, 2, 3, 3))
        st = ct.stats()
        assert st["fallback"] == {"transposed": 1, "cudnn_disabled": 1}, st
        assert "transposed" in st["details"]["transposed"]
        # Double backward. Python override: create_graph=True runs PyTorch's differentiable backward
        # (whose own backward then runs transposed convolutions: PyTorch's too), counted. C++
        # override: PyTorch's own graph node calls convolution_backward through convtune, and
        # records its own node for the second derivative.
        x = x.detach().double().requires_grad_()
        w = torch.randn(3, 2, 3, 3, dtype=torch.float64, requires_grad=True)
        y = torch.nn.functional.conv2d(x, w)
        before = ct.stats()["convtune"]["bwd_filter"]
        (g,) = torch.autograd.grad(y.pow(2).sum(), w, create_graph=True)
        if override == "python":
            assert ct.stats()["fallback"]["double_backward"] == 1
        else:
            assert "double_backward" not in ct.stats()["fallback"] and ct.stats()["convtune"]["bwd_filter"] == before + 1
        g.sum().backward()
    # The second derivative is PyTorch's.
    ref = torch.autograd.grad(torch.autograd.grad(torch.nn.functional.conv2d(x, w).pow(2).sum(), w, create_graph=True)[0].sum(), w)
    assert torch.allclose(w.grad, ref[0], rtol=1e-9, atol=0)  # f64: the forward differs by ~1e-15 relative


def test_flag_mapping():
    f = ct.flag_values({"enabled": True, "benchmark": True, "benchmark_limit": 3, "deterministic": False, "allow_tf32": False},
                       "pytorch")
    assert f == {"enabled": True, "benchmark": True, "benchmark_limit": 3, "deterministic": False, "allow_tf32": False,
                 "policy": "pytorch"}
    # No benchmark_limit in this PyTorch: convtune's own value stays (the key is absent).
    f = ct.flag_values({"enabled": False, "benchmark": False, "benchmark_limit": None, "deterministic": True, "allow_tf32": True})
    assert f == {"enabled": False, "benchmark": False, "deterministic": True, "allow_tf32": True, "policy": "convtune"}
    with pytest.raises(ct.Error, match="policy"):
        ct.flag_values(ct.torch_flags(), "fastest")
    # torch.use_deterministic_algorithms(True) is deterministic, as in PyTorch's cuDNN path.
    torch.backends.cudnn.deterministic = False
    torch.use_deterministic_algorithms(True)
    assert ct.flag_values(ct.torch_flags())["deterministic"] is True
    torch.use_deterministic_algorithms(False)
    assert ct.flag_values(ct.torch_flags())["deterministic"] is False
    torch.backends.cudnn.benchmark = True
    assert ct.flag_values(ct.torch_flags())["benchmark"] is True


def test_disable_restores_pytorch(override):
    x = torch.randn(1, 2, 5, 5, requires_grad=True)
    w = torch.randn(3, 2, 3, 3, requires_grad=True)
    plain = type(torch.nn.functional.conv2d(x, w).grad_fn).__name__
    with ct.enabled(device="cpu", db=""):
        y = torch.nn.functional.conv2d(x, w)
        if override == "python":
            assert type(y.grad_fn).__name__ != plain  # convtune's autograd Function
        else:
            assert type(y.grad_fn).__name__ == plain  # PyTorch's own node, whose backward calls convtune's kernel
        assert ct.stats()["convtune"]["fwd"] == 1
        assert ct.is_enabled()
    assert not ct.is_enabled()
    before = ct.stats()
    y = torch.nn.functional.conv2d(x, w)
    y.sum().backward()
    assert type(y.grad_fn).__name__ == plain  # PyTorch's own kernel and derivative again
    with torch.inference_mode():
        torch.nn.functional.conv2d(x, w)
    assert ct.stats() == before  # nothing counted any more
    assert before["override"] == override
    # The context manager disables on an exception too.
    with pytest.raises(RuntimeError, match="boom"):
        with ct.enabled(device="cpu", db=""):
            raise RuntimeError("boom")
    assert not ct.is_enabled()


def test_every_refusal_reason_under_both_overrides(override):
    # The refusal rules (convtune::app::framework_refusal, reached by both overrides, and each
    # override's glue): each reason that a CPU can produce is produced, and counted. ("device" needs a
    # CUDA device: enable(device="cuda") with a CPU tensor; its rule is the same code path.) The C++
    # override's kernels sit at the CPU key, below the keys of sparse tensors (PyTorch's own sparse
    # kernels run, and raise), of FakeTensor (its mode runs meta kernels) and of tensor subclasses
    # (LoggingTensor unwraps its tensors and calls again: convtune runs that call).
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.testing._internal.logging_tensor import LoggingTensor

    x, w = torch.randn(1, 2, 6, 6), torch.randn(3, 2, 3, 3)
    with ct.enabled(device="cpu", db=""):
        with pytest.raises(RuntimeError):  # PyTorch's own error, after the fallback
            torch.nn.functional.conv2d(x, w.double())
        with pytest.raises(RuntimeError):  # an output of size 0: PyTorch says why
            torch.nn.functional.conv2d(torch.randn(1, 2, 2, 2), w)
        with pytest.raises((RuntimeError, NotImplementedError)):  # no sparse convolution in PyTorch either
            torch.nn.functional.conv2d(x.to_sparse(), w)
        with FakeTensorMode() as mode:
            torch.nn.functional.conv2d(mode.from_tensor(x), mode.from_tensor(w))
        torch.nn.functional.conv2d(LoggingTensor(x), LoggingTensor(w))
        st = ct.stats()
    assert st["override"] == override
    assert set(st["fallback"]) <= set(ct.FALLBACK_REASONS)
    assert "torch.float32 / torch.float64" in st["details"]["dtype"]
    assert "output size [1, 3, 0, 0]" in st["details"]["problem"]
    if override == "python":
        assert st["fallback"] == {"dtype": 1, "problem": 1, "layout": 1, "fake_tensor": 1, "tensor_subclass": 1}, st
        assert "FakeTensor" in st["details"]["fake_tensor"] and "LoggingTensor" in st["details"]["tensor_subclass"]
        assert sum(st["convtune"].values()) == 0
    else:
        assert st["fallback"] == {"dtype": 1, "problem": 1}, st
        assert st["convtune"] == {"fwd": 1, "bwd_data": 0, "bwd_filter": 0}, st  # LoggingTensor's inner call


def test_both_overrides_name_the_same_reasons():
    # The refusal rules are convtune's (convtune::app::framework_refusal and run_framework, asked
    # by both overrides): the reasons each override's glue names itself are the same set, none of
    # convtune's refusals among them, and with convtune's categories and the Python side's
    # classification of Python-key tensors, they are FALLBACK_REASONS.
    import re

    here = os.path.dirname(ct.__file__)
    cpp = open(os.path.join(here, "_override.cpp")).read()
    py = open(os.path.join(here, "__init__.py")).read()
    cpp_reasons = set(re.findall(r'std::string\("([a-z_]+)"\)|count_fallback\(\*?s, "([a-z_]+)"', cpp))
    cpp_reasons = {a or b for a, b in cpp_reasons}
    py_reasons = {a or b or c for a, b, c in re.findall(r'return "([a-z_]+)", f?"|_count\("fallback", "([a-z_]+)"|why = \("([a-z_]+)"', py)}
    python_key = {"fake_tensor", "tensor_subclass"}  # classified by Python for both overrides
    # double_backward: the Python override's autograd Function only (the C++ override's backward is
    # PyTorch's own node, whose double backward calls convolution_backward through convtune again).
    assert cpp_reasons == py_reasons - python_key - {"double_backward"}, (cpp_reasons, py_reasons)
    app = set(convtune._convtune.framework_fallback_categories())
    assert not cpp_reasons & (app - {"problem"}), cpp_reasons  # "problem": the glue's output of size 0
    assert cpp_reasons | python_key | {"double_backward"} | app == set(ct.FALLBACK_REASONS)


def test_stats_report_the_backends_preparation_work(override):
    # The CPU backend prepares nothing ahead of a run (cuDNN counts its heuristic queries and
    # engine and plan builds there: gpu_torch_check.py); the key is there either way.
    assert ct.stats()["backend_work"] == {}
    with ct.enabled(device="cpu", db=""):
        torch.nn.functional.conv2d(torch.randn(1, 2, 7, 7), torch.randn(3, 2, 3, 3))
        assert ct.stats()["backend_work"] == {} == convtune._convtune.backend_work("cpu")
    assert ct.stats()["backend_work"] == {}


def test_pytorch_flags_are_read_at_each_call(override):
    # benchmark off: convtune's heuristic; on (read at the next call, in C++ or Python): a search.
    torch.backends.cudnn.benchmark = False
    x, w = torch.randn(1, 2, 7, 7), torch.randn(3, 2, 3, 3)
    with ct.enabled(device="cpu", db=""), convtune.backends.cudnn.flags(min_samples=1, max_samples=2):
        torch.nn.functional.conv2d(x, w)
        assert ct.stats()["sources"] == {"heuristic": 1}
        torch.backends.cudnn.benchmark = True
        torch.nn.functional.conv2d(torch.randn(1, 2, 8, 8), w)
        assert ct.stats()["sources"] == {"heuristic": 1, "search": 1}, ct.stats()
        ct.reset_stats()
        assert ct.stats()["sources"] == {} and ct.stats()["convtune"] == {"fwd": 0, "bwd_data": 0, "bwd_filter": 0}


def _dispatch_dump():
    return torch._C._dispatch_dump("aten::convolution") + torch._C._dispatch_dump("aten::convolution_backward")


def test_cpp_override_is_the_one_running_and_disable_restores_the_dispatcher():
    before = _dispatch_dump()
    x = torch.randn(1, 2, 5, 5, requires_grad=True)
    with ct.enabled(device="cpu", db="", override="cpp"):
        during = _dispatch_dump()
        y = torch.nn.functional.conv2d(x, torch.randn(3, 2, 3, 3))
        assert type(y.grad_fn).__name__ == "ConvolutionBackward0"  # PyTorch's own node, no custom Function
        y.sum().backward()
        assert ct.stats()["override"] == "cpp" and ct.stats()["convtune"] == {"fwd": 1, "bwd_data": 1, "bwd_filter": 0}
    # Its kernels at CPU, for convolution and convolution_backward, were registered from
    # _override.cpp, and are gone after disable().
    assert "_override.cpp" not in before
    assert [l.split(":")[0] for l in during.splitlines() if "_override.cpp" in l] == ["CPU", "CPU"], during
    assert _dispatch_dump() == before
    mod = sys.modules["convtune.torch._override"]
    assert mod.torch_version.split("+")[0] in torch.__version__
    # The CUDA stream's handle from c10::Stream::native_handle() where this torch has it (its Python
    # side has torch.Stream.native_handle then), else from Python.
    assert mod.native_stream_handle == hasattr(torch.Stream, "native_handle")


def test_cache_key_changes_and_a_corrupt_build_is_rebuilt(tmp_path, monkeypatch):
    from convtune.torch import _build

    monkeypatch.setenv("CONVTUNE_CACHE_DIR", str(tmp_path / "cache"))
    key = _build.cache_key()
    assert _build.cache_key(torch_version="9.9.9") != key
    assert _build.cache_key(python_version="3.99") != key
    assert _build.cache_key(compiler_id="another compiler") != key
    assert _build.cache_key() == key  # and the same inputs give the same key
    # Another source: another key, another file, which build() compiles.
    src = tmp_path / "_override.cpp"
    src.write_bytes(open(_build.SOURCE, "rb").read() + b"\n// another revision\n")
    monkeypatch.setattr(_build, "SOURCE", str(src))
    monkeypatch.setattr(_build, "_HERE", os.path.dirname(_build.HEADER))  # the header stays where it is
    key2 = _build.cache_key()
    assert key2 != key and _build.built_path(key2) != _build.built_path(key)
    path = _build.built_path()
    # A half-written file under that name (no checksum, or a stale one) is not loaded but rebuilt.
    os.makedirs(os.path.dirname(path))
    with open(path, "wb") as f:
        f.write(b"\x7fELF" + b"\0" * 100)
    assert not _build.is_valid(path)
    with open(path + ".sha256", "w") as f:
        f.write("0" * 64)
    assert not _build.is_valid(path)
    assert _build.build(quiet=True) == path
    assert _build.is_valid(path) and os.path.getsize(path) > 10000
    assert sorted(os.listdir(os.path.dirname(path))) == sorted([os.path.basename(path), os.path.basename(path) + ".sha256"])


@pytest.fixture
def no_cpp(tmp_path, monkeypatch):
    """A process state in which the C++ override is not loaded yet and the cache is empty."""
    monkeypatch.setenv("CONVTUNE_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(ct, "_cpp", None)
    monkeypatch.setattr(ct, "_cpp_failure", None)


def test_cpp_without_a_compiler_raises(no_cpp, monkeypatch):
    monkeypatch.setenv("CXX", "/nonexistent/c++")
    with pytest.raises(ct.Error, match=r"override: .*compiler: cannot run /nonexistent/c\+\+.*set CXX"):
        ct.enable(device="cpu", db="", override="cpp")
    assert not ct.is_enabled()
    # A compiler that fails: its first error lines are in the message.
    monkeypatch.setenv("CXX", "c++ -include /nonexistent/missing.h")
    with pytest.raises(ct.Error, match=r"(?s)building convtune.torch's C\+\+ override failed.*missing.h"):
        ct.enable(device="cpu", db="", override="cpp")
    # build-override says so and exits 2.
    import subprocess

    r = subprocess.run([sys.executable, "-m", "convtune.torch", "build-override"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 2 and "missing.h" in r.stderr and r.stdout == "", r


def test_auto_falls_back_to_python_with_one_warning(no_cpp, monkeypatch):
    monkeypatch.setenv("CXX", "/nonexistent/c++")
    monkeypatch.delenv("CONVTUNE_TORCH_OVERRIDE", raising=False)
    with pytest.warns(RuntimeWarning, match=r"Python override.*compiler: cannot run /nonexistent"):
        ct.enable(device="cpu", db="")
    torch.nn.functional.conv2d(torch.randn(1, 2, 5, 5), torch.randn(3, 2, 3, 3))
    assert ct.stats()["override"] == "python" and ct.stats()["convtune"]["fwd"] == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once: the second enable() does not warn again
        ct.enable(device="cpu", db="", override="auto")
    assert ct.stats()["override"] == "python"
    with pytest.raises(ct.Error, match="CONVTUNE_TORCH_OVERRIDE: must be one of auto, cpp, python"):
        monkeypatch.setenv("CONVTUNE_TORCH_OVERRIDE", "rust")
        ct.enable(device="cpu", db="")
    with pytest.raises(ct.Error, match="override: must be one of"):
        ct.enable(device="cpu", db="", override="c")


def test_build_override_ahead_of_time(tmp_path):
    # python3 -m convtune.torch build-override: the file a later enable() finds (no compiler needed then).
    import subprocess

    env = dict(os.environ, CONVTUNE_CACHE_DIR=str(tmp_path / "cache"))
    src = os.environ.get("CONVTUNE_CACHE_DIR")
    if src and os.path.isdir(src):  # the suite's cache already holds this torch's build: copied, not compiled again
        shutil.copytree(src, env["CONVTUNE_CACHE_DIR"])
    r = subprocess.run([sys.executable, "-m", "convtune.torch", "build-override"], capture_output=True, text=True, env=env,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    path = r.stdout.strip().splitlines()[-1]
    assert path.startswith(env["CONVTUNE_CACHE_DIR"]) and os.path.exists(path)
    # A node without a compiler loads that file.
    env["CXX"] = "/nonexistent/c++"
    code = ("import torch, convtune.torch as ct; ct.enable(device='cpu', db='', override='cpp');"
            "torch.nn.functional.conv2d(torch.randn(1, 1, 3, 3), torch.randn(1, 1, 2, 2)); s = ct.stats();"
            "print(s['override'], s['convtune']['fwd'])")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["cpp", "1"], r.stdout
    assert "compiling" not in r.stderr


def test_enable_checks_its_arguments():
    with pytest.raises(ct.Error, match="device"):
        ct.enable(device="tpu")
    with pytest.raises(ct.Error, match="policy"):
        ct.enable(device="cpu", policy="fastest")
    with pytest.raises(ct.Error, match="backend"):
        ct.enable(device="cpu", backend="nosuch")
    assert not ct.is_enabled()


def test_every_registered_policy_is_accepted(override):
    # The policies are the C++ registry's (the list was typed in twice and lacked `incremental`).
    from convtune import _convtune

    names = _convtune.policies()
    assert {"pytorch", "pytorch-v7", "convtune", "adaptive", "incremental"} <= set(names)
    conv = torch.nn.Conv2d(2, 3, 3, padding=1).double()
    x = torch.randn(1, 2, 6, 6, dtype=torch.float64, requires_grad=True)
    for name in names:
        with ct.enabled(device="cpu", db="", policy=name):
            conv(x).sum().backward()
            assert ct.stats()["convtune"]["fwd"] == 1, name



def test_in_band_policy_through_the_override_pins_and_persists(override, tmp_path):
    # The incremental policy with benchmark on, through convtune.torch: a shape's real calls tune
    # it (docs/autotuning.md, "In-band tuning"), with no search. Every step must match PyTorch
    # within the training bound (REL; fixed weights, so the steps do not compound), every shape
    # must end pinned with its decision in the database, and a later enable() on that database
    # must read them back. (In f64 the CPU backend's pacing pins these small shapes on the
    # heuristic's pick; the rotation itself is proved on the scripted backend,
    # tests/test_policy.cpp, suite incremental.)
    steps = 40
    torch.manual_seed(0)
    net = Net().double()
    data = [torch.randn(2, 3, 64, dtype=torch.float64) for _ in range(steps)]

    def run():
        out = []
        for x in data:
            net.zero_grad()
            loss = net(x)
            loss.backward()
            out.append((loss.item(), [p.grad.clone() for p in net.parameters()]))
        return out

    reference = run()  # PyTorch's own
    db = str(tmp_path / "inband.json")
    torch.backends.cudnn.benchmark = True
    stats = []
    for _ in range(2):
        # see _STORE_ALL: every pinned decision is stored
        with convtune.backends.cudnn.flags(min_samples=1, max_samples=2), \
                ct.enabled(device="cpu", db=db, policy="incremental"):
            got = run()
            stats.append(ct.stats())
        for (loss, grads), (ref_loss, ref_grads) in zip(got, reference):
            assert abs(loss - ref_loss) <= REL * abs(ref_loss)
            for g, r in zip(grads, ref_grads):
                assert (g - r).abs().max().item() <= REL * r.abs().max().item()
    first, second = stats
    assert first["fallback"] == {} and second["fallback"] == {}, stats
    assert first["search_ms"] == 0 and "search" not in first["sources"], first  # in-band: no search
    assert "database" not in first["sources"], first
    # 4 fwd, 3 bwd_data, 4 bwd_filter shapes, every one pinned in the first run and read back.
    assert second["sources"].get("database") == 11, second
    assert set(second["sources"]) == {"database", "memory"}, second

_SCRIPT = textwrap.dedent("""
    import torch
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(8, 4, 3, stride=2))
    for _ in range(2):
        net(torch.randn(2, 3, 12, 12)).sum().backward()
""")

# The convtune policy does not store a decision whose samples spread above 50% (a loaded
# machine: docs/autotuning.md); with at most two samples there is no spread to judge, so every
# decision is stored and the tests of persistence do not depend on the machine's load.
_STORE_ALL = "min_samples=1, max_samples=2"

_RUN = textwrap.dedent("""
    import json, runpy, sys, torch
    import convtune.torch as ct
    import convtune.backends.cudnn as knobs
    knobs.min_samples, knobs.max_samples = 1, 2  # see _STORE_ALL
    torch.backends.cudnn.benchmark = True
    ct.enable(device="cpu", db=sys.argv[1])
    runpy.run_path(sys.argv[2])
    print(json.dumps(ct.stats()))
""")


def _stats_of_run(db, script):
    import json
    import subprocess

    r = subprocess.run([sys.executable, "-c", _RUN, db, script], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_database_persists_across_processes(tmp_path):
    db, script = str(tmp_path / "tune.json"), tmp_path / "train.py"
    script.write_text(_SCRIPT)
    first = _stats_of_run(db, str(script))
    assert first["sources"].get("search", 0) == 5, first  # 2 fwd, 1 bwd_data, 2 bwd_filter shapes
    assert first["fallback"] == {}
    second = _stats_of_run(db, str(script))
    assert "search" not in second["sources"], second
    assert second["sources"]["database"] == 5, second
    assert second["search_ms"] == 0
    assert sum(second["convtune"].values()) == sum(first["convtune"].values())


def test_warm_fills_the_database(tmp_path):
    import subprocess

    db, script = str(tmp_path / "tune.json"), tmp_path / "train.py"
    script.write_text(_SCRIPT)
    warm = ("import sys; import convtune.backends.cudnn as knobs; knobs.min_samples, knobs.max_samples = 1, 2\n"
            "from convtune.torch.__main__ import main; sys.exit(main(sys.argv[1:]))")  # _STORE_ALL
    r = subprocess.run([sys.executable, "-c", warm, "warm", "--db", db, "--device", "cpu", str(script)], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "[5/5]" in r.stderr, r.stderr
    assert os.path.exists(db)
    after = _stats_of_run(db, str(script))
    assert "search" not in after["sources"], after
    assert after["sources"]["database"] == 5, after


def test_warm_needs_a_database(tmp_path):
    import subprocess

    script = tmp_path / "train.py"
    script.write_text(_SCRIPT)
    env = dict(os.environ, CONVTUNE_DB="")
    r = subprocess.run([sys.executable, "-m", "convtune.torch", "warm", str(script)], capture_output=True, text=True, env=env,
                       timeout=600)
    assert r.returncode == 2
    assert "--db" in r.stderr


_ONE = textwrap.dedent("""
    import json, sys, torch
    import convtune.torch as ct
    import convtune.backends.cudnn as knobs
    knobs.min_samples, knobs.max_samples = 1, 2  # see _STORE_ALL
    torch.backends.cudnn.benchmark = True
    ct.enable(device="cpu", db=sys.argv[1])
    for c in sys.argv[2:]:
        x = torch.randn(2, int(c), 10, 10, requires_grad=True)
        torch.nn.functional.conv2d(x, torch.randn(4, int(c), 3, 3, requires_grad=True)).sum().backward()
    print(json.dumps(ct.stats()))
""")


def test_concurrent_processes_share_one_database(tmp_path):
    # Two processes (two ranks) tune different shapes into one database at the same time: the
    # database's lock and merge keep both; a third process finds all of them.
    import json
    import subprocess

    db = str(tmp_path / "tune.json")
    procs = [subprocess.Popen([sys.executable, "-c", _ONE, db, c], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for c in ("3", "5")]
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        assert json.loads(out.strip().splitlines()[-1])["sources"] == {"search": 3}
    r = subprocess.run([sys.executable, "-c", _ONE, db, "3", "5"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["sources"] == {"database": 6}


def test_without_a_usable_gpu_enable_falls_through_with_one_warning_and_counts():
    # The script written for the cluster (enable() with its default device "cuda") on a machine
    # without a usable GPU: one warning, PyTorch runs every convolution, each call is counted.
    import torch.nn.functional as F
    if torch.cuda.is_available() and convtune.backends.cudnn.is_available():
        pytest.skip("this machine has a usable GPU: enable() runs convtune there")
    x, w = torch.randn(1, 2, 6, 6, requires_grad=True), torch.randn(3, 2, 3, 3, requires_grad=True)
    expected = F.conv2d(x, w, padding=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ct.enable(db="")
    assert [str(c.message) for c in caught if "no usable GPU" in str(c.message)] != [] and len(caught) == 1
    assert ct.is_enabled()
    y = F.conv2d(x, w, padding=1)
    assert torch.equal(y, expected)
    y.sum().backward()  # PyTorch's own backward: the gradients exist
    assert x.grad is not None and w.grad is not None
    F.conv2d(x.detach(), w.detach())
    st = ct.stats()
    assert st["fallback"].get("no_gpu") == 2 and sum(st["convtune"].values()) == 0
    assert "no usable GPU" in st["details"]["no_gpu"] and st["override"] == "none"
    ct.disable()
    assert not ct.is_enabled()
