"""convtune.backends.cudnn: PyTorch's flag names, types, defaults, validation and flags()."""

import inspect
import json

import numpy as np
import pytest

import convtune
import convtune.backends.cudnn as cudnn
from convtune import _convtune
from _helpers import run_python

TORCH_FLAGS = ("enabled", "benchmark", "benchmark_limit", "deterministic", "allow_tf32")


def test_defaults_in_a_fresh_process():
    r = run_python("import json, convtune.backends.cudnn as c; "
                   "print(json.dumps({k: getattr(c, k) for k in ('enabled', 'benchmark', 'benchmark_limit', 'deterministic', "
                   "'allow_tf32', 'policy')}))")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got == {"enabled": True, "benchmark": False, "benchmark_limit": 10, "deterministic": False, "allow_tf32": True,
                   "policy": "convtune"}


def test_types_of_the_values():
    for k in ("enabled", "benchmark", "deterministic", "allow_tf32"):
        assert type(getattr(cudnn, k)) is bool
    assert type(cudnn.benchmark_limit) is int


@pytest.mark.parametrize("name,value", [("enabled", False), ("benchmark", True), ("deterministic", True),
                                        ("allow_tf32", False), ("benchmark_limit", 0), ("benchmark_limit", 3)])
def test_set_reaches_the_cpp_flags(name, value):
    setattr(cudnn, name, value)
    assert getattr(cudnn, name) == value
    # The C++ side (convtune::global_flags) sees the value.
    assert _convtune.get_flags()[name] == value
    text = _convtune.flags_string({})
    assert f"{name}={int(value)}" in text.split(",")


def test_bool_flags_reject_other_types_like_pytorch():
    for name, setter in [("enabled", "set_enabled_cudnn"), ("benchmark", "set_benchmark_cudnn"),
                         ("deterministic", "set_deterministic_cudnn"), ("allow_tf32", "set_allow_tf32_cudnn")]:
        before = getattr(cudnn, name)
        for bad, tname in [(1, "int"), ("yes", "str"), (None, "NoneType"), (np.bool_(True), "numpy.bool_")]:
            with pytest.raises(cudnn.FlagTypeError) as e:
                setattr(cudnn, name, bad)
            assert str(e.value) == f"{setter} expects a bool, but got {tname}"
            # Catchable the Python way and the PyTorch way.
            assert isinstance(e.value, TypeError) and isinstance(e.value, RuntimeError)
            assert getattr(cudnn, name) == before


def test_benchmark_limit_validation():
    cudnn.benchmark_limit = 4
    for bad, tname in [("3", "str"), (True, "bool"), (2.0, "float"), (None, "NoneType")]:
        with pytest.raises(cudnn.FlagTypeError) as e:
            cudnn.benchmark_limit = bad
        assert str(e.value) == f"set_benchmark_limit_cudnn expects an int, but got {tname}"
    for bad in (-1, 2**31):
        with pytest.raises(ValueError, match="benchmark_limit must be >= 0"):
            cudnn.benchmark_limit = bad
    assert cudnn.benchmark_limit == 4
    cudnn.benchmark_limit = np.int64(0)  # NumPy integers are ints, as in PyTorch
    assert cudnn.benchmark_limit == 0 and type(cudnn.benchmark_limit) is int


def test_convtune_knobs():
    cudnn.policy = "adaptive"
    assert cudnn.policy == "adaptive" and _convtune.get_flags()["policy"] == "adaptive"
    with pytest.raises(ValueError, match="unknown policy 'fast'"):
        cudnn.policy = "fast"
    cudnn.workspace_limit = 1 << 20
    assert cudnn.workspace_limit == 1 << 20
    cudnn.workspace_limit = None
    assert cudnn.workspace_limit is None
    with pytest.raises(ValueError):
        cudnn.min_samples = 0
    # adaptive_after: 0 is the automatic rule (the default), a negative count is refused.
    assert cudnn.adaptive_after == 0
    cudnn.adaptive_after = 5
    assert _convtune.get_flags()["adaptive_after"] == 5
    cudnn.adaptive_after = 0
    with pytest.raises(ValueError, match="adaptive_after must be >= 0"):
        cudnn.adaptive_after = -1
    assert cudnn.explore_slots == 3
    cudnn.explore_slots = 0
    assert _convtune.get_flags()["explore_slots"] == 0
    cudnn.explore_slots = 3
    with pytest.raises(ValueError, match="explore_slots must be >= 0"):
        cudnn.explore_slots = -2
    with pytest.raises(TypeError):
        cudnn.search_budget_ms = "10"
    # The bounds come from the C++ table (convtune::numeric_flags), NaN included.
    assert _convtune.flag_lower_bounds()["min_samples"] == 1
    with pytest.raises(ValueError, match="stable_rel must be >= 0"):
        cudnn.stable_rel = -0.5
    with pytest.raises(ValueError, match="stable_rel must be >= 0"):
        cudnn.stable_rel = float("nan")
    # max_samples < min_samples is refused by the C++ side, naming the rule.
    cudnn.min_samples = 3
    with pytest.raises(convtune.Error, match="max_samples: must be >= min_samples"):
        cudnn.max_samples = 2


def test_flags_keeps_unspecified_values_and_restores():
    cudnn.enabled, cudnn.benchmark, cudnn.deterministic, cudnn.benchmark_limit = True, False, False, 7
    with cudnn.flags(benchmark=True):
        assert cudnn.benchmark is True
        assert cudnn.enabled is True  # PyTorch's flags() would have turned this off
        assert cudnn.benchmark_limit == 7
        with cudnn.flags(deterministic=True, benchmark_limit=0):
            assert (cudnn.benchmark, cudnn.deterministic, cudnn.benchmark_limit) == (True, True, 0)
        assert (cudnn.deterministic, cudnn.benchmark_limit) == (False, 7)
    assert (cudnn.enabled, cudnn.benchmark, cudnn.deterministic, cudnn.benchmark_limit) == (True, False, False, 7)


def test_flags_restores_after_an_exception_and_values_set_inside():
    cudnn.allow_tf32 = True
    with pytest.raises(KeyError):
        with cudnn.flags(allow_tf32=False):
            cudnn.benchmark = True  # set inside the block: restored too, as in PyTorch
            raise KeyError("x")
    assert cudnn.allow_tf32 is True and cudnn.benchmark is False


def test_flags_with_a_bad_value_changes_nothing():
    before = _convtune.get_flags()
    with pytest.raises(cudnn.FlagTypeError):
        with cudnn.flags(benchmark=True, deterministic="yes"):
            pass
    with pytest.raises(ValueError):
        with cudnn.flags(benchmark=True, benchmark_limit=-2):
            pass
    with pytest.raises(TypeError, match="unexpected keyword argument 'fast'"):
        with cudnn.flags(fast=True):
            pass
    assert _convtune.get_flags() == before


def test_flags_pytorch_policy_reproduces_the_quirk():
    cudnn.enabled, cudnn.deterministic, cudnn.benchmark_limit = True, True, 3
    with cudnn.flags(benchmark=True, policy="pytorch"):
        # PyTorch's defaults for everything not passed: enabled=False turns the tuned path off.
        assert (cudnn.enabled, cudnn.benchmark, cudnn.benchmark_limit, cudnn.deterministic, cudnn.allow_tf32) == (
            False, True, 10, False, True)
        assert cudnn.policy == "pytorch"
    assert (cudnn.enabled, cudnn.deterministic, cudnn.benchmark_limit, cudnn.policy) == (True, True, 3, "convtune")
    # The same when the pytorch policy is already in effect.
    cudnn.policy = "pytorch-v7"
    with cudnn.flags(deterministic=True):
        assert (cudnn.enabled, cudnn.benchmark, cudnn.deterministic) == (False, False, True)
    assert cudnn.enabled is True


def test_set_flags_returns_the_previous_values():
    cudnn.enabled, cudnn.benchmark, cudnn.benchmark_limit, cudnn.deterministic, cudnn.allow_tf32 = True, False, 10, False, True
    orig = cudnn.set_flags(None, True, 5, None, False)
    assert orig == (True, False, 10, False, True)
    assert (cudnn.benchmark, cudnn.benchmark_limit, cudnn.allow_tf32, cudnn.enabled) == (True, 5, False, True)


def test_version_and_is_available_agree_with_the_build():
    backends = {b["name"]: b for b in convtune.list_backends()}
    assert "cpu" in backends and backends["cpu"]["available"]
    has = "cudnn" in backends and backends["cudnn"]["available"]
    assert cudnn.is_available() is has
    v = cudnn.version()
    if has:
        assert isinstance(v, int) and v > 0
    else:
        assert v is None
    assert convtune.version() == convtune.__version__ and convtune.__version__.count(".") == 2


def test_flags_reach_convolutions_in_cpp(tmp_path):
    """benchmark=True through the Python attribute makes convtune::convolution search and store
    the result in the tuning database; benchmark=False does not search."""
    code = """
import numpy as np, convtune, convtune.backends.cudnn as cudnn
cudnn.benchmark = {bench}
cudnn.min_samples = 1; cudnn.max_samples = 2  # fewer than three samples: stored whatever the noise (docs/autotuning.md)
cudnn.search_budget_ms = 50.0
x = np.ones((1, 4, 12, 12), np.float32); w = np.ones((8, 4, 3, 3), np.float32)
y = convtune.conv(x, w, padding=1)
assert y.shape == (1, 8, 12, 12) and y[0, 0, 5, 5] == 36.0, y[0, 0, 5, 5]
"""
    for bench in (False, True):
        db = tmp_path / f"db_{bench}.json"
        r = run_python(code.format(bench=bench), env={"CONVTUNE_DB": str(db)})
        assert r.returncode == 0, r.stderr
        entries = []
        if db.exists():
            doc = json.loads(db.read_text())
            entries = [k for e in doc["environments"] for k in e["entries"]]
        if bench:
            assert len(entries) == 1 and "in=12x12" in entries[0], db.read_text() if db.exists() else "no database"
        else:
            assert entries == []


torch = None
try:
    import torch  # noqa: F811
except ImportError:
    pass


@pytest.mark.skipif(torch is None, reason="PyTorch (python3-torch) is not installed")
def test_same_errors_as_pytorch():
    tc = torch.backends.cudnn
    saved = (tc.enabled, tc.benchmark, tc.deterministic)
    saved_tf32 = tc.allow_tf32
    try:
        for name in ("enabled", "benchmark", "deterministic", "allow_tf32"):
            for bad in (1, "x", None, 2.0, np.bool_(True)):
                with pytest.raises(RuntimeError) as theirs:
                    setattr(tc, name, bad)
                with pytest.raises(RuntimeError) as ours:
                    setattr(cudnn, name, bad)
                # allow_tf32: PyTorch's message names its cuBLAS setter (docs/python.md).
                assert str(ours.value) == str(theirs.value).replace("set_allow_tf32_cublas", "set_allow_tf32_cudnn")
        # And both take real bools.
        for name in ("enabled", "benchmark", "deterministic", "allow_tf32"):
            setattr(tc, name, True)
            setattr(cudnn, name, True)
            assert getattr(tc, name) is getattr(cudnn, name) is True
    finally:
        tc.enabled, tc.benchmark, tc.deterministic = saved
        tc.allow_tf32 = saved_tf32


@pytest.mark.skipif(torch is None, reason="PyTorch (python3-torch) is not installed")
def test_pytorch_policy_uses_pytorchs_flags_defaults():
    """The values the pytorch policy gives unspecified flags() parameters are the defaults of the
    installed PyTorch's flags()."""
    sig = inspect.signature(inspect.unwrap(torch.backends.cudnn.flags))
    theirs = {k: p.default for k, p in sig.parameters.items() if k in TORCH_FLAGS}
    assert theirs["enabled"] is False  # the quirk
    with cudnn.flags(policy="pytorch"):
        ours = {k: getattr(cudnn, k) for k in theirs}
    assert ours == theirs


def _two_threads(body):
    """Runs body(i, barrier) in two threads at once; returns what each returned (re-raising a
    failure)."""
    import threading

    barrier = threading.Barrier(2, timeout=30)
    results, errors = [None, None], []

    def run(i):
        try:
            results[i] = body(i, barrier)
        except BaseException as e:  # noqa: B902 - reported below
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def test_thread_scoped_flags_do_not_leak_between_threads():
    """Two threads each in a flags(scope="thread") block, interleaved: each sees only its own
    flags (what convtune::convolution reads on that thread, current_flags), the process-wide
    flags never change, and after both blocks nothing is left set on any thread."""
    cudnn.benchmark, cudnn.deterministic = False, False
    before = _convtune.get_flags()

    def body(i, barrier):
        seen = []
        with cudnn.flags(benchmark=(i == 0), deterministic=(i == 1), benchmark_limit=i + 1, scope="thread"):
            barrier.wait()  # both blocks entered
            seen.append(_convtune.current_flags())
            seen.append((cudnn.benchmark, cudnn.deterministic, cudnn.benchmark_limit))
            cudnn.allow_tf32 = False  # an assignment inside the block is this thread's only
            barrier.wait()
            if i == 1:
                barrier.wait()  # thread 0 has left its block; this one is still inside
                seen.append(_convtune.current_flags())
        if i == 0:
            barrier.wait()
        barrier.wait()  # both blocks left
        seen.append(_convtune.get_thread_flags())
        seen.append(_convtune.current_flags())
        return seen

    (in0, attrs0, left0, after0), (in1, attrs1, later1, left1, after1) = _two_threads(body)
    assert later1 == dict(in1, allow_tf32=False)  # thread 0 leaving its block changed nothing here
    assert (in0["benchmark"], in0["deterministic"], in0["benchmark_limit"]) == (True, False, 1)
    assert (in1["benchmark"], in1["deterministic"], in1["benchmark_limit"]) == (False, True, 2)
    assert attrs0 == (True, False, 1) and attrs1 == (False, True, 2)
    assert left0 is None and left1 is None
    assert after0 == before and after1 == before
    assert _convtune.get_flags() == before and _convtune.get_thread_flags() is None
    assert cudnn.allow_tf32 is True


def test_thread_scoped_flags_restore_in_any_order():
    """A thread-scoped block left out of order (two generators) puts back values, not pointers:
    nothing dangles; a block that ends first takes its own values with it, and when the last one
    ends the thread has no flags of its own."""
    def gen(**kw):
        with cudnn.flags(scope="thread", **kw):
            yield
    a, b = gen(benchmark=True), gen(deterministic=True)
    next(a)
    next(b)
    assert _convtune.current_flags()["deterministic"] and _convtune.current_flags()["benchmark"]
    with pytest.raises(StopIteration):
        next(a)  # a leaves first: its benchmark=True goes with it, b's deterministic=True stays
    assert _convtune.get_thread_flags()["benchmark"] is False
    assert _convtune.get_thread_flags()["deterministic"] is True
    with pytest.raises(StopIteration):
        next(b)  # the last block ends: no override left (issue 32, D4: a's used to stay)
    assert _convtune.get_thread_flags() is None
    assert _convtune.current_flags() == _convtune.get_flags()
    with pytest.raises(convtune.Error, match="scope: must be 'process' or 'thread'"):
        with cudnn.flags(scope="global"):
            pass


def test_process_wide_flags_are_seen_by_every_thread():
    """flags() without scope is process-wide, as PyTorch's: a block entered on one thread changes
    what another thread reads (docs/python.md says so; scope="thread" is the isolated form)."""
    cudnn.benchmark = False

    def body(i, barrier):
        if i == 0:
            with cudnn.flags(benchmark=True):
                barrier.wait()  # thread 1 reads while the block is open
                barrier.wait()
            return None
        barrier.wait()
        seen = (cudnn.benchmark, _convtune.current_flags()["benchmark"])
        barrier.wait()
        return seen

    assert _two_threads(body)[1] == (True, True)
    assert cudnn.benchmark is False


def test_thread_scoped_flags_reach_convolutions(tmp_path):
    """benchmark=True in a thread-scoped block makes that thread's convolution search (stored in
    the tuning database); the main thread's convolution, run while the block is open, does not."""
    code = """
import threading, numpy as np, convtune, convtune.backends.cudnn as cudnn
cudnn.search_budget_ms = 50.0
cudnn.min_samples = 1; cudnn.max_samples = 2  # fewer than three samples: stored whatever the noise
inside, done = threading.Event(), threading.Event()
def worker():
    with cudnn.flags(benchmark=True, scope="thread"):
        inside.set()
        done.wait(60)
        convtune.conv(np.ones((1, 4, 12, 12), np.float32), np.ones((8, 4, 3, 3), np.float32), padding=1)
t = threading.Thread(target=worker); t.start(); inside.wait(60)
convtune.conv(np.ones((1, 4, 10, 10), np.float32), np.ones((8, 4, 3, 3), np.float32), padding=1)
done.set(); t.join()
"""
    db = tmp_path / "db.json"
    r = run_python(code, env={"CONVTUNE_DB": str(db)})
    assert r.returncode == 0, r.stderr
    doc = json.loads(db.read_text())
    entries = [k for e in doc["environments"] for k in e["entries"]]
    assert len(entries) == 1 and "in=12x12" in entries[0], entries
