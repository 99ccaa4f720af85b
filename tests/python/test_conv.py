"""convtune.conv / conv_backward_data / conv_backward_filter on NumPy arrays."""

import itertools

import numpy as np
import pytest

import convtune
import convtune.backends.cudnn as cudnn
from _helpers import cli_error, run_python


def ref_conv(x, w, stride, pad_begin, pad_end, dilation, groups):
    """Direct convolution in float64 (cross-correlation, PyTorch's convention), N-D."""
    x = x.astype(np.float64)
    w = w.astype(np.float64)
    nd = x.ndim - 2
    xp = np.pad(x, [(0, 0), (0, 0)] + [(b, max(e, 0)) for b, e in zip(pad_begin, pad_end)])
    n, c = x.shape[:2]
    k = w.shape[0]
    cg, kg = c // groups, k // groups
    ker = w.shape[2:]
    out = [(x.shape[2 + i] + pad_begin[i] + pad_end[i] - ((ker[i] - 1) * dilation[i] + 1)) // stride[i] + 1 for i in range(nd)]
    y = np.zeros((n, k, *out))
    for g in range(groups):
        xs = xp[:, g * cg:(g + 1) * cg]
        for off in itertools.product(*[range(s) for s in ker]):
            sl = tuple(slice(off[i] * dilation[i], off[i] * dilation[i] + (out[i] - 1) * stride[i] + 1, stride[i]) for i in range(nd))
            patch = xs[(slice(None), slice(None)) + sl]  # n, cg, out...
            wk = w[(slice(g * kg, (g + 1) * kg), slice(None)) + off]  # kg, cg
            y[:, g * kg:(g + 1) * kg] += np.einsum("nc...,kc->nk...", patch, wk)
    return y


def assert_conv_close(got, ref, abs_sum, rel=2e-3):
    """|got - ref| <= rel * (the same sum over |terms|), element by element: the error model of a
    floating-point sum. A search may pick Winograd or FFT (fp32 error ~1e-4 of that sum) or, with
    allow_tf32 (the default), a TF32 algorithm (bound 2 * 2^-11 ~ 9.8e-4 plus the sum's own);
    an indexing bug is off by whole terms (1/L of the sum for a reduction of L <= 72 here)."""
    got = np.asarray(got, dtype=np.float64)
    assert got.shape == ref.shape
    err = np.abs(got - ref)
    bound = rel * abs_sum + 1e-6
    worst = np.unravel_index(np.argmax(err - bound), err.shape)
    assert np.all(err <= bound), f"error {err[worst]:.3g} above {bound[worst]:.3g} at {worst}"


def rand(shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed + len(shape) * 7 + sum(shape)).uniform(-1, 1, shape).astype(dtype)


CASES = [
    # x shape, w shape, stride, padding, dilation, groups
    ((2, 3, 17), (4, 3, 3), 1, 1, 1, 1),
    ((1, 4, 20), (6, 2, 5), 2, 2, 2, 2),
    ((2, 3, 9, 11), (5, 3, 3, 3), 1, 1, 1, 1),
    ((1, 8, 12, 10), (8, 2, 3, 2), (2, 1), (1, 0), (1, 2), 4),
    ((2, 6, 7, 7), (6, 1, 3, 3), 2, 1, 1, 6),  # depthwise
    ((1, 2, 5, 6, 7), (3, 2, 3, 3, 3), 1, 1, 1, 1),
    ((1, 4, 6, 6, 5), (4, 2, 1, 3, 3), (1, 2, 1), (0, 1, 1), 1, 2),
]


@pytest.mark.parametrize("xs,ws,stride,padding,dilation,groups", CASES)
def test_forward_matches_a_direct_loop(xs, ws, stride, padding, dilation, groups):
    x, w = rand(xs), rand(ws, seed=1)
    nd = len(xs) - 2
    t = lambda v: [v] * nd if isinstance(v, int) else list(v)
    y = convtune.conv(x, w, stride=stride, padding=padding, dilation=dilation, groups=groups)
    ref = ref_conv(x, w, t(stride), t(padding), t(padding), t(dilation), groups)
    assert y.dtype == np.float32 and y.shape == ref.shape
    assert_conv_close(y, ref, ref_conv(np.abs(x), np.abs(w), t(stride), t(padding), t(padding), t(dilation), groups))


@pytest.mark.parametrize("xs,ws,stride,padding,dilation,groups", CASES)
def test_backward_passes_are_the_adjoints_of_the_forward(xs, ws, stride, padding, dilation, groups):
    """<conv(x, w), dy> == <x, bwd_data(dy, w)> == <w, bwd_filter(x, dy)>."""
    x, w = rand(xs), rand(ws, seed=1)
    kw = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    y = convtune.conv(x, w, **kw)
    dy = rand(y.shape, seed=2)
    dx = convtune.conv_backward_data(x.shape, w, dy, **kw)
    dw = convtune.conv_backward_filter(x, w.shape, dy, **kw)
    assert dx.shape == x.shape and dw.shape == w.shape
    f64 = lambda a: a.astype(np.float64)
    lhs = np.vdot(f64(y), f64(dy))
    tol = 1e-3 * np.vdot(np.abs(f64(y)), np.abs(f64(dy)))  # relative to the sum of |terms|
    assert abs(np.vdot(f64(x), f64(dx)) - lhs) < tol
    assert abs(np.vdot(f64(w), f64(dw)) - lhs) < tol
    # One element of dx against the direct loop (the adjoint of a unit vector): catches an index
    # bug the inner products could hide.
    e = np.zeros_like(x)
    e.flat[x.size // 3] = 1
    nd = len(xs) - 2
    t = lambda v: [v] * nd if isinstance(v, int) else list(v)
    col = ref_conv(e, w, t(stride), t(padding), t(padding), t(dilation), groups)
    col_abs = ref_conv(e, np.abs(w), t(stride), t(padding), t(padding), t(dilation), groups)
    assert abs(np.vdot(col, f64(dy)) - dx.flat[x.size // 3]) <= 1e-3 * np.vdot(col_abs, np.abs(f64(dy))) + 1e-6


def test_padding_same_and_valid():
    x, w = rand((1, 2, 9, 8)), rand((3, 2, 4, 3), seed=3)  # even kernel: 'same' pads 1 before, 2 after
    ax, aw = np.abs(x), np.abs(w)
    y = convtune.conv(x, w, padding="same")
    assert y.shape == (1, 3, 9, 8)
    assert_conv_close(y, ref_conv(x, w, [1, 1], [1, 1], [2, 1], [1, 1], 1), ref_conv(ax, aw, [1, 1], [1, 1], [2, 1], [1, 1], 1))
    y = convtune.conv(x, w, padding="same", dilation=2)
    assert_conv_close(y, ref_conv(x, w, [1, 1], [3, 2], [3, 2], [2, 2], 1), ref_conv(ax, aw, [1, 1], [3, 2], [3, 2], [2, 2], 1))
    assert convtune.conv(x, w, padding="valid").shape == (1, 3, 6, 6)
    with pytest.raises(ValueError, match="padding='same' is not supported for strided convolutions"):
        convtune.conv(x, w, padding="same", stride=2)
    with pytest.raises(ValueError, match="Invalid padding string 'full'"):
        convtune.conv(x, w, padding="full")


def test_bias_and_float16():
    x, w = rand((2, 4, 8, 8), np.float16), rand((6, 4, 3, 3), np.float16, seed=4)
    b = np.arange(6, dtype=np.float16)
    y = convtune.conv(x, w, b, padding=1)
    assert y.dtype == np.float16
    ref = ref_conv(x, w, [1, 1], [1, 1], [1, 1], [1, 1], 1) + np.arange(6).reshape(1, 6, 1, 1)
    # fp16 output: one rounding of the result (2^-11 relative) plus accumulation error.
    abs_sum = ref_conv(np.abs(x), np.abs(w), [1, 1], [1, 1], [1, 1], [1, 1], 1) + np.arange(6).reshape(1, 6, 1, 1)
    assert_conv_close(y, ref, abs_sum, rel=4e-3)


def test_non_contiguous_input_is_accepted():
    x = rand((2, 3, 10, 12))[:, :, ::2, ::2]
    w = rand((4, 3, 3, 3), seed=5)
    y = convtune.conv(x, w)
    assert_conv_close(y, ref_conv(x, w, [1, 1], [0, 0], [0, 0], [1, 1], 1), ref_conv(np.abs(x), np.abs(w), [1, 1], [0, 0], [0, 0], [1, 1], 1))


@pytest.mark.parametrize("flags", [dict(), dict(benchmark=True), dict(benchmark=True, deterministic=True),
                                   dict(enabled=False), dict(benchmark=True, policy="pytorch", benchmark_limit=2),
                                   dict(benchmark=True, policy="adaptive"), dict(allow_tf32=False, benchmark=True)])
def test_results_under_every_flag_setting(flags):
    x, w = rand((2, 8, 14, 14)), rand((16, 8, 3, 3), seed=6)
    ref = ref_conv(x, w, [1, 1], [1, 1], [1, 1], [1, 1], 1)
    abs_sum = ref_conv(np.abs(x), np.abs(w), [1, 1], [1, 1], [1, 1], [1, 1], 1)
    with cudnn.flags(search_budget_ms=30.0, **flags):
        for _ in range(2):  # a miss, then a cache hit
            assert_conv_close(convtune.conv(x, w, padding=1), ref, abs_sum)


def test_backends_other_than_cpu():
    names = [b["name"] for b in convtune.list_backends() if b["available"]]
    x, w = rand((1, 4, 10, 10)), rand((8, 4, 3, 3), seed=7)
    ref = ref_conv(x, w, [1, 1], [1, 1], [1, 1], [1, 1], 1)
    abs_sum = ref_conv(np.abs(x), np.abs(w), [1, 1], [1, 1], [1, 1], [1, 1], 1)
    assert "cpu" in names
    for name in names:
        assert_conv_close(convtune.conv(x, w, padding=1, backend=name), ref, abs_sum)


def test_bias_is_checked_before_the_convolution_runs():
    x, w = rand((1, 2, 5, 5)), rand((3, 2, 3, 3))
    with pytest.raises(convtune.Error, match=r"bias: expected shape \(3,\), got \(2,\)"):
        convtune.conv(x, w, np.ones(2, np.float32), backend="nope")  # the bias error comes first


def test_type_errors():
    x, w = rand((1, 2, 5, 5)), rand((2, 2, 3, 3))
    with pytest.raises(TypeError, match="float32 or float16"):
        convtune.conv(x.astype(np.float64), w)
    with pytest.raises(TypeError, match="same dtype"):
        convtune.conv(x, w.astype(np.float16))
    with pytest.raises(TypeError, match="stride: must be an int or a tuple of ints"):
        convtune.conv(x, w, stride=1.5)
    with pytest.raises(TypeError, match="groups: expected an int"):
        convtune.conv(x, w, groups="1")


SIZE_CASES = [
    # (call, the argument the message must name)
    (lambda x, w, dy: convtune.conv_backward_data((2.7, 2, 5, 5), w, dy), r"input_size\[0\]: expected an int, got float 2\.7"),
    (lambda x, w, dy: convtune.conv_backward_data((1, 2, 5.0, 5), w, dy), r"input_size\[2\]: expected an int, got float 5\.0"),
    (lambda x, w, dy: convtune.conv_backward_data((1, "2", 5, 5), w, dy), r"input_size\[1\]: expected an int, got str '2'"),
    (lambda x, w, dy: convtune.conv_backward_data((True, 2, 5, 5), w, dy), r"input_size\[0\]: expected an int, got bool True"),
    (lambda x, w, dy: convtune.conv_backward_data("1255", w, dy), r"input_size: must be a sequence of ints, got str"),
    (lambda x, w, dy: convtune.conv_backward_filter(x, (2, 2, 3.0, 3), dy), r"weight_size\[2\]: expected an int, got float"),
    (lambda x, w, dy: convtune.conv_backward_filter(x, (2, 2, 3, np.float32(3)), dy), r"weight_size\[3\]: expected an int"),
    (lambda x, w, dy: convtune.problem((1, 2, 5, 5), (2, 2, 3, 3), stride=(1, 1.0)), r"stride\[1\]: expected an int, got float"),
    (lambda x, w, dy: convtune.conv(x, w, padding=(True, 0)), r"padding\[0\]: expected an int, got bool"),
    (lambda x, w, dy: convtune.conv(x, w, dilation="1"), r"dilation: must be an int or a tuple of ints, got str"),
    (lambda x, w, dy: convtune.conv(x, w, groups=1.0), r"groups: expected an int, got float"),
    (lambda x, w, dy: convtune.conv(x, w, groups=True), r"groups: expected an int, got bool"),
]


@pytest.mark.parametrize("case", range(len(SIZE_CASES)))
def test_sizes_that_are_not_ints_are_refused(case):
    """Floats, bools and strings are refused with convtune.Error naming the argument, never
    truncated (2.7 ran as 2) or converted ("2" ran as 2)."""
    call, message = SIZE_CASES[case]
    x, w, dy = rand((1, 2, 5, 5)), rand((2, 2, 3, 3)), rand((1, 2, 3, 3))
    with pytest.raises(convtune.Error, match=message) as e:
        call(x, w, dy)
    assert isinstance(e.value, TypeError)  # convtune.ArgumentTypeError: both
    # NumPy integers are ints.
    assert convtune.conv_backward_data((np.int64(1), 2, 5, 5), w, dy, groups=np.int32(1)).shape == (1, 2, 5, 5)


@pytest.mark.parametrize("kwargs,message", [
    (dict(stride=2**64), r"stride: must be <= 9223372036854775807 \(got 18446744073709551616\)"),
    (dict(padding=(-2**70, 0)), r"padding\[0\]: must be >= -9223372036854775808"),
    (dict(dilation=(1, 2**63)), r"dilation\[1\]: must be <= 9223372036854775807"),
    (dict(groups=2**100), r"groups: must be <= 9223372036854775807"),
])
def test_out_of_range_ints_raise_convtune_errors(kwargs, message):
    x, w = rand((1, 2, 5, 5)), rand((2, 2, 3, 3))
    with pytest.raises(convtune.Error, match=message):
        convtune.conv(x, w, **kwargs)
    with pytest.raises(convtune.Error, match=r"input_size\[3\]: must be <= 9223372036854775807"):
        convtune.conv_backward_data((1, 2, 5, 2**63), w, rand((1, 2, 3, 3)))


def test_out_of_range_ints_of_tune_simulate_and_flags():
    with pytest.raises(convtune.Error, match=r"batch: must be <= 9223372036854775807"):
        convtune.tune("n=1,c=1,k=1,in=4,ker=1", batch=2**63)
    with pytest.raises(convtune.Error, match=r"seed: must be >= 0 \(got -1\)"):
        convtune.simulate(workload="resnet50", iterations=1, seed=-1)
    with pytest.raises(convtune.Error, match=r"seed: must be <= 18446744073709551615"):
        convtune.simulate(workload="resnet50", iterations=1, seed=2**64)
    with pytest.raises(convtune.Error, match=r"iterations: must be <= 2147483647"):
        convtune.simulate(workload="resnet50", iterations=2**31)
    with pytest.raises(convtune.Error, match=r"iterations: expected an int, got float"):
        convtune.simulate(workload="resnet50", iterations=10.0)
    with pytest.raises(convtune.Error, match=r"workspace_limit must be >= 0 bytes and fit in 64 bits"):
        cudnn.workspace_limit = 2**64
    with pytest.raises(convtune.Error, match=r"benchmark_limit: must be <= 2147483647"):
        convtune.tune("n=1,c=1,k=1,in=4,ker=1", flags={"benchmark_limit": 2**31})
    with pytest.raises(convtune.Error, match=r"workspace_limit: must be <= 18446744073709551615"):
        convtune.tune("n=1,c=1,k=1,in=4,ker=1", flags={"workspace_limit": 2**64})


def test_memory_budget_is_checked_before_numpy_allocates(monkeypatch):
    """padding=100000 makes y 1 x 1 x 200003 x 200003 (149 GiB): refused by the budget, naming it,
    before NumPy is asked for the output."""
    x, w = rand((1, 1, 5, 5)), rand((1, 1, 3, 3))
    with pytest.raises(convtune.Error, match=r"memory budget: tensor x needs .*, y 149.0 GiB .* above the budget of"):
        convtune.conv(x, w, padding=100000)
    with pytest.raises(convtune.Error, match=r"memory budget: .* above the budget of"):
        convtune.conv_backward_data((1, 1, 400000, 400000), w, rand((1, 1, 3, 3)), stride=200000)
    monkeypatch.setenv("CONVTUNE_MAX_BYTES", "64K")  # read at each call
    with pytest.raises(convtune.Error, match=r"above the budget of 64.0 KiB"):
        convtune.conv_backward_filter(rand((1, 4, 64, 64)), (4, 4, 3, 3), rand((1, 4, 62, 62)))
    assert convtune.conv(rand((1, 2, 16, 16)), rand((2, 2, 3, 3))).shape == (1, 2, 14, 14)  # 3.4 KiB: within


def test_a_broadcast_input_is_checked_before_it_is_copied():
    """A 4 GiB broadcast view (no memory of its own) over a 256 MiB budget is refused at once: the
    check reads its shape, the copy never happens (the process's peak RSS stays far below 4 GiB)."""
    code = """
import resource, time, numpy as np, convtune
x = np.broadcast_to(np.float32(1), (16, 64, 1024, 1024))   # 4 GiB, not C-contiguous
w = np.ones((1, 64, 1, 1), np.float32)
t = time.monotonic()
try:
    convtune.conv(x, w)
    print("ran")
except convtune.Error as e:
    print("refused:", e)
print("seconds", time.monotonic() - t)
print("peak_mib", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
"""
    r = run_python(code, env={"CONVTUNE_MAX_BYTES": "256M"}, timeout=300)
    assert r.returncode == 0, r.stderr
    out = dict(line.split(" ", 1) for line in r.stdout.strip().splitlines())
    assert "refused:" in out and "tensor x needs 4.0 GiB" in out["refused:"] and "above the budget of 256.0 MiB" in out["refused:"], r.stdout
    assert float(out["seconds"]) < 5, r.stdout
    assert int(out["peak_mib"]) < 1024, r.stdout


def test_shape_errors_are_value_errors():
    x, w = rand((1, 4, 5, 5)), rand((2, 2, 3, 3))
    with pytest.raises(ValueError, match=r"Given groups=1, weight of size \[2, 2, 3, 3\], expected input\[1, 4, 5, 5\] to have 2 channels, but got 4 channels instead"):
        convtune.conv(x, w)
    with pytest.raises(ValueError, match="Expected 4-dimensional input for 4-dimensional weight"):
        convtune.conv(rand((1, 4, 5)), w)
    with pytest.raises(ValueError, match="expected 2 values"):
        convtune.conv(x, w, groups=2, stride=(1, 1, 1))
    with pytest.raises(convtune.Error, match=r"y: shape \(1, 2, 4, 4\) does not match the problem's \(1, 2, 3, 3\)"):
        convtune.conv_backward_data((1, 4, 5, 5), w, rand((1, 2, 4, 4)), groups=2)


def test_errors_carry_the_cli_message(cli):
    x, w = rand((1, 1, 5, 5)), rand((1, 1, 3, 3))
    cases = [
        (dict(stride=(0, 1)), "n=1,c=1,k=1,in=5x5,ker=3x3,stride=0x1"),
        (dict(dilation=(1, 0)), "n=1,c=1,k=1,in=5x5,ker=3x3,dil=1x0"),
        (dict(padding=(-1, 0)), "n=1,c=1,k=1,in=5x5,ker=3x3,pad=-1x0,pad_end=-1x0"),
    ]
    for kwargs, spec in cases:
        with pytest.raises(convtune.Error) as e:
            convtune.conv(x, w, **kwargs)
        assert str(e.value) == cli_error(cli("run", "--problem", spec)), kwargs
    # A kernel larger than the padded input.
    with pytest.raises(convtune.Error) as e:
        convtune.conv(rand((1, 1, 2, 2)), w)
    assert str(e.value) == cli_error(cli("run", "--problem", "n=1,c=1,k=1,in=2x2,ker=3x3"))
    # An unknown backend.
    with pytest.raises(convtune.Error) as e:
        convtune.conv(x, w, backend="nope")
    assert str(e.value) == cli_error(cli("run", "--problem", "n=1,c=1,k=1,in=5x5,ker=3x3", "--backend", "nope"))
    assert isinstance(e.value, ValueError)


def test_problem_helpers():
    p = convtune.problem((8, 64, 56, 56), (64, 64, 3, 3), padding=1)
    assert p["canonical"] == "dir=fwd,dtype=f32,layout=nchw,n=8,c=64,k=64,g=1,in=56x56,ker=3x3,stride=1x1,dil=1x1,pad=1x1,pad_end=1x1"
    assert p["y_shape"] == [8, 64, 56, 56] and p["macs"] == 8 * 64 * 64 * 56 * 56 * 9
    q = convtune.parse_problem("mb8ic64ih56oc64oh56kh3ph1")
    assert q["canonical"] == p["canonical"]
    assert convtune.problem((2, 3, 100), (4, 3, 5), stride=2, direction="bwd_filter", dtype="f16")["canonical"] == \
        "dir=bwd_filter,dtype=f16,layout=ncw,n=2,c=3,k=4,g=1,in=100,ker=5,stride=2,dil=1,pad=0,pad_end=0"


torch = None
try:
    import torch  # noqa: F811
except ImportError:
    pass


@pytest.mark.skipif(torch is None, reason="PyTorch (python3-torch) is not installed")
@pytest.mark.parametrize("xs,ws,stride,padding,dilation,groups", CASES)
def test_same_results_as_pytorch(xs, ws, stride, padding, dilation, groups):
    x, w = rand(xs), rand(ws, seed=1)
    kw = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    fn = {3: torch.nn.functional.conv1d, 4: torch.nn.functional.conv2d, 5: torch.nn.functional.conv3d}[len(xs)]

    def run(x, w, dy=None):  # PyTorch in float64: y, dx, dw
        tx = torch.from_numpy(x.astype(np.float64)).requires_grad_()
        tw = torch.from_numpy(w.astype(np.float64)).requires_grad_()
        ty = fn(tx, tw, **kw)
        if dy is None:
            dy = rand(tuple(ty.shape), seed=2)
        ty.backward(torch.from_numpy(dy.astype(np.float64)))
        return ty.detach().numpy(), tx.grad.numpy(), tw.grad.numpy(), dy

    y, dx, dw, dy = run(x, w)
    y_abs, dx_abs, dw_abs, _ = run(np.abs(x), np.abs(w), np.abs(dy))
    assert_conv_close(convtune.conv(x, w, **kw), y, y_abs)
    assert_conv_close(convtune.conv_backward_data(x.shape, w, dy, **kw), dx, dx_abs)
    assert_conv_close(convtune.conv_backward_filter(x, w.shape, dy, **kw), dw, dw_abs)
