"""The C interface of convtune._convtune (python/src/convtune_framework_api.h), called as a C
extension calls it (through ctypes here): convtune::app::run_framework on plain structs, PyTorch's
flags applied on top of the current flags, fallbacks as values, errors as -1 with the message."""

import ctypes

import numpy as np
import pytest

from convtune import _convtune
from convtune import _framework_api as capi

FLAGS = {"enabled": True, "benchmark": False, "deterministic": False, "allow_tf32": True, "benchmark_limit": None}


def reference(x, w, pad):
    """A plain f64 convolution (stride 1, groups 1)."""
    n, c, h, wd = x.shape
    k, _, r, s = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = h + 2 * pad - r + 1, wd + 2 * pad - s + 1
    y = np.zeros((n, k, oh, ow))
    for i in range(r):
        for j in range(s):
            y += np.einsum("nchw,kc->nkhw", xp[:, :, i:i + oh, j:j + ow], w[:, :, i, j])
    return y


def desc(a, strides=None):
    strides = strides or [s // a.itemsize for s in a.strides]
    return capi.tensor(a.shape, strides, a.ctypes.data, a.nbytes)


def run(ctx, c):
    r = capi.Result()
    rc = capi.api().run(ctx._address(), c, r)
    return rc, r


def test_the_capsule_is_versioned():
    a = capi.api()
    assert a.version == capi.VERSION and a.struct_size == ctypes.sizeof(capi.Api) == 24
    with pytest.raises(ValueError):  # another name (another version) is refused by PyCapsule_GetPointer
        get = ctypes.pythonapi.PyCapsule_GetPointer
        get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        get(_convtune._framework_api(), b"convtune._convtune.framework_api.v0")


def test_forward_runs_on_the_callers_memory():
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((2, 3, 6, 5)), rng.standard_normal((4, 3, 3, 3))
    y = np.zeros((2, 4, 6, 5))
    ctx = _convtune.FrameworkContext("")
    c = capi.call("fwd", "f64", desc(x), desc(w), desc(y), [1, 1], [1, 1], [1, 1], 1, "cpu", FLAGS)
    rc, r = run(ctx, c)
    assert rc == 0 and r.ran == 1, r.detail
    assert r.source == b"heuristic" and r.algorithm.startswith(b"cpu.")
    np.testing.assert_allclose(y, reference(x, w, 1), rtol=0, atol=1e-12)
    # benchmark=1 (PyTorch's flag, applied on top of convtune's): a search, then the memory.
    c2 = capi.call("fwd", "f64", desc(x), desc(w), desc(y), [1, 1], [1, 1], [1, 1], 1, "cpu", dict(FLAGS, benchmark=True))
    assert run(ctx, c2)[1].source == b"search"
    assert run(ctx, c2)[1].source == b"memory"


def test_a_fallback_is_a_value():
    x, w, y = np.zeros((1, 2, 5, 5)), np.zeros((3, 2, 3, 3)), np.zeros((1, 3, 3, 3))
    ctx = _convtune.FrameworkContext("")
    # x's strides are neither channels-first nor channels-last
    c = capi.call("fwd", "f64", desc(x, [50, 1, 10, 2]), desc(w), desc(y), [1, 1], [0, 0], [1, 1], 1, "cpu", FLAGS)
    rc, r = run(ctx, c)
    assert rc == 0 and r.ran == 0 and r.fallback == b"layout", r.detail
    assert b"strides must be those of one dense layout" in r.detail


@pytest.mark.parametrize("change,message", [
    ({"backend": "nosuch"}, b"nosuch"),
    ({"policy": "fastest"}, b"fastest"),
    ({"benchmark_limit": 2**40}, b"benchmark_limit: must be <= 2147483647"),
])
def test_errors_return_minus_one_with_the_message(change, message):
    x, w, y = np.zeros((1, 2, 5, 5)), np.zeros((3, 2, 3, 3)), np.zeros((1, 3, 3, 3))
    flags = dict(FLAGS, **{k: v for k, v in change.items() if k == "benchmark_limit"})
    c = capi.call("fwd", "f64", desc(x), desc(w), desc(y), [1, 1], [0, 0], [1, 1], 1, change.get("backend", "cpu"), flags,
                  policy=change.get("policy", "convtune"))
    rc, r = run(_convtune.FrameworkContext(""), c)
    assert rc == -1 and r.ran == 0
    assert message in r.detail, r.detail


def operand(device="cpu", index=-1, layout="torch.strided", dtype="torch.float32"):
    return capi.Operand(device=device.encode(), index=index, layout=layout.encode(), dtype=dtype.encode())


def test_refuse_decides_from_the_frameworks_names():
    # convtune::app::framework_refusal through the C interface: what both convtune.torch overrides ask.
    home = ctypes.c_int32(-1)
    q = capi.Request(device=b"cuda", x=operand("cuda", 1), w=operand("cuda", 1), transposed=0, enabled=1,
                     home=ctypes.pointer(home))
    r = capi.Refusal()
    assert capi.api().refuse(q, r) == 0 and r.category is None and r.detail == b""
    assert home.value == 1  # the first call taken claims its device
    q.x = operand("cuda", 0)
    assert capi.api().refuse(q, r) == 0 and r.category == b"device", r.detail
    assert r.detail == b"cuda:0: convtune's cuDNN handles live on cuda:1, the first device it ran on"
    q.x = operand("cuda", 1)
    q.groups = q.channels = q.out_channels = 4  # depthwise, contiguous, f32: PyTorch's own CUDA kernel
    assert capi.api().refuse(q, r) == 0 and r.category == b"pytorch_kernel", r.detail
    q.channels_last = 1
    assert capi.api().refuse(q, r) == 0 and r.category is None, r.detail
    q = capi.Request(device=b"cpu", x=operand(), w=operand(dtype="torch.float64"), transposed=0, enabled=1)
    assert capi.api().refuse(q, r) == 0 and (r.category, r.detail) == (b"dtype", b"torch.float32 / torch.float64")
    q.w, q.enabled = operand(), 0
    assert capi.api().refuse(q, r) == 0 and r.category == b"cudnn_disabled"
    q.x.layout = None  # a missing name is an error, not a refusal
    assert capi.api().refuse(q, r) == -1 and r.category is None and b"x: missing" in r.detail


def test_the_python_module_asks_the_same_rules():
    cat, detail, home = _convtune.framework_refusal("cpu", ("cpu", -1, "torch.strided", "torch.float32"),
                                                    ("cpu", -1, "torch.strided", "torch.float32"), True, True, -1)
    assert (cat, home) == ("transposed", -1) and "transposed" in detail
    assert _convtune.framework_refusal("cuda", ("cuda", 2, "torch.strided", "torch.float16"),
                                       ("cuda", 2, "torch.strided", "torch.float16"), False, True, -1) == (None, "", 2)
    # A depthwise f32 convolution in the contiguous format: PyTorch's own kernel on the GPU, not on the CPU.
    f32 = "torch.float32"
    cat, detail, _ = _convtune.framework_refusal("cuda", ("cuda", 0, "torch.strided", f32), ("cuda", 0, "torch.strided", f32),
                                                 False, True, -1, groups=8, channels=8, out_channels=16)
    assert cat == "pytorch_kernel" and "depthwise" in detail
    assert _convtune.framework_refusal("cuda", ("cuda", 0, "torch.strided", f32), ("cuda", 0, "torch.strided", f32), False,
                                       True, -1, groups=8, channels=8, out_channels=16, channels_last=True)[0] is None
    assert _convtune.framework_refusal("cpu", ("cpu", -1, "torch.strided", f32), ("cpu", -1, "torch.strided", f32), False,
                                       True, -1, groups=8, channels=8, out_channels=16)[0] is None
    assert set(_convtune.framework_fallback_categories()) == {"device", "layout", "dtype", "transposed", "cudnn_disabled",
                                                               "pytorch_kernel", "problem", "unsupported", "failed"}


def test_the_frameworks_dtype_names_run():
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((1, 2, 5, 5)), rng.standard_normal((3, 2, 3, 3))
    y = np.zeros((1, 3, 3, 3))
    c = capi.call("fwd", "torch.float64", desc(x), desc(w), desc(y), [1, 1], [0, 0], [1, 1], 1, "cpu", FLAGS)
    rc, r = run(_convtune.FrameworkContext(""), c)
    assert rc == 0 and r.ran == 1, r.detail
    np.testing.assert_allclose(y, reference(x, w, 0), rtol=0, atol=1e-12)
