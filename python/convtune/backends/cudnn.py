"""convtune.backends.cudnn: torch.backends.cudnn's interface over convtune's process-wide flags.

    import convtune.backends.cudnn as cudnn
    cudnn.benchmark = True                 # what `torch.backends.cudnn.benchmark = True` does
    with cudnn.flags(deterministic=True):  # set for the block, restored after it
        ...

The five PyTorch flags keep PyTorch's names, types and defaults: enabled (True), benchmark
(False), benchmark_limit (10; 0 = time every candidate), deterministic (False), allow_tf32 (True).
They are convtune's process-wide flags (convtune::global_flags / set_global_flags), as
PyTorch's are process-wide: every convolution convtune runs, from Python or from C++ in this
process, on any thread, reads them. ``flags(..., scope="thread")`` gives one thread flags of its
own for a block (convtune::set_thread_flags); inside it the attributes read and set that thread's
flags.

convtune's own knobs are attributes too: policy ("convtune" by default; "pytorch" and
"pytorch-v7" emulate PyTorch's selection, "adaptive" searches a shape once it recurs,
"incremental" times a shape's own calls in turn until it pins one),
workspace_limit (bytes, None = unlimited), search_budget_ms, min_samples, max_samples, stable_rel, explore_slots,
adaptive_after.

A value of the wrong type raises FlagTypeError with PyTorch's message (PyTorch raises
RuntimeError; FlagTypeError is both a TypeError and a RuntimeError, so either ``except`` works);
a value out of range (benchmark_limit < 0) raises convtune.Error (a ValueError).

flags() differs from PyTorch's on purpose: parameters you do not pass keep their current values.
PyTorch's flags() gives every parameter a default, enabled=False among them, so
``with torch.backends.cudnn.flags(benchmark=True):`` also turns cuDNN off. Under the pytorch
policies (``flags(..., policy="pytorch")``, or with cudnn.policy set to "pytorch" or
"pytorch-v7") flags() reproduces PyTorch exactly, quirk included.
"""

import contextlib
import numbers
import sys
import threading
import types

from .. import _convtune
from .._args import INT_MAX as _INT_MAX, UINT64_MAX as _UINT64_MAX
from .._convtune import Error as _Error

__all__ = ["flags", "set_flags", "version", "is_available", "FlagTypeError"]


class FlagTypeError(TypeError, RuntimeError):
    """A flag set to a value of the wrong type. PyTorch raises RuntimeError with this message."""


# PyTorch's five flags, in the order of its set_flags() tuple; the other flags (their names from
# C++, convtune::flag_names) are convtune's knobs.
_TORCH_FLAGS = ("enabled", "benchmark", "benchmark_limit", "deterministic", "allow_tf32")
_KNOBS = tuple(k for k in _convtune.default_flags() if k not in _TORCH_FLAGS)
# Setter names in PyTorch's messages ("set_benchmark_cudnn expects a bool, but got int").
_BOOL_FLAGS = {k: f"set_{k}_cudnn" for k, v in _convtune.default_flags().items() if isinstance(v, bool)}
_POLICIES = tuple(_convtune.policies())  # the C++ registry's names
# What PyTorch's flags() sets for a parameter that is not passed.
_PYTORCH_FLAGS_DEFAULTS = {"enabled": False, "benchmark": False, "benchmark_limit": 10, "deterministic": False,
                           "allow_tf32": True}
# The numeric flags' lower bounds, from the one table in C++ (convtune::numeric_flags).
_LOWER_BOUNDS = _convtune.flag_lower_bounds()


def _typename(v):
    # PyTorch prints the C type name: "int", "str", "numpy.bool_".
    t = type(v)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__name__}"


def _check(name, value):
    """Validates one flag value the way PyTorch's setters do; returns the value to store."""
    if name in _BOOL_FLAGS:
        if not isinstance(value, bool):
            raise FlagTypeError(f"{_BOOL_FLAGS[name]} expects a bool, but got {_typename(value)}")
        return value
    if name == "benchmark_limit":
        if not isinstance(value, numbers.Integral) or isinstance(value, bool):
            raise FlagTypeError(f"set_benchmark_limit_cudnn expects an int, but got {_typename(value)}")
        value = int(value)
        if value < 0 or value > _INT_MAX:
            raise _Error(f"benchmark_limit must be >= 0 (0 = time every candidate) and fit in an int, got {value}")
        return value
    if name == "policy":
        if not isinstance(value, str):
            raise FlagTypeError(f"policy expects a str, but got {_typename(value)}")
        if value not in _POLICIES:
            raise _Error(f"policy: unknown policy '{value}' (expected {', '.join(_POLICIES)})")
        return value
    if name in ("workspace_limit",):
        if value is None:
            return None
        if not isinstance(value, numbers.Integral) or isinstance(value, bool):
            raise FlagTypeError(f"workspace_limit expects an int (bytes) or None, but got {_typename(value)}")
        if value < 0 or value > _UINT64_MAX:
            raise _Error(f"workspace_limit must be >= 0 bytes and fit in 64 bits, got {value}")
        return int(value)
    if name in ("min_samples", "max_samples", "explore_slots", "adaptive_after"):
        if not isinstance(value, numbers.Integral) or isinstance(value, bool):
            raise FlagTypeError(f"{name} expects an int, but got {_typename(value)}")
        lo = int(_LOWER_BOUNDS[name])  # adaptive_after=0: the automatic rule
        if value < lo or value > _INT_MAX:
            raise _Error(f"{name} must be >= {lo} and fit in an int, got {value}")
        return int(value)
    if name in ("search_budget_ms", "stable_rel"):
        if not isinstance(value, numbers.Real) or isinstance(value, bool):
            raise FlagTypeError(f"{name} expects a float, but got {_typename(value)}")
        lo = _LOWER_BOUNDS[name]
        if not value >= lo:
            raise _Error(f"{name} must be >= {lo:g}, got {value}")
        return float(value)
    raise AttributeError(f"convtune.backends.cudnn has no flag '{name}'")


def _thread_scoped():
    """Whether this thread has flags of its own (a flags(scope="thread") block, or a C++
    FlagsGuard): the module's attributes, set_flags() and flags() then read and write them."""
    return _convtune.get_thread_flags() is not None


def _set(values, scope=None):
    """Validates every value, then sets them all at once (nothing changes when one is bad): on
    this thread's own flags when it has them (or scope="thread"), else process-wide."""
    checked = {k: _check(k, v) for k, v in values.items()}
    if scope == "thread" or (scope is None and _thread_scoped()):
        _convtune.set_thread_flags(checked)
    else:
        _convtune.set_flags(checked)


def _get_all():
    """The flags in effect on this thread (its own when it has them, else the process-wide ones)."""
    return _convtune.current_flags()


def version():
    """The cuDNN version as an integer (e.g. 91900 for 9.19.0) when this build has a usable cuDNN
    backend, else None (as torch.backends.cudnn.version() without cuDNN)."""
    for b in _convtune.backends():
        if b["name"] == "cudnn" and b["available"]:
            digits = [int(p) for p in b.get("library", "").split()[-1].split(".") if p.isdigit()]
            if len(digits) >= 2:
                major, minor, patch = (digits + [0])[:3]
                return major * 10000 + minor * 100 + patch if major >= 9 else major * 1000 + minor * 100 + patch
    return None


def is_available():
    """Whether this build has a cuDNN backend that can run here. The flags work either way: they
    drive every backend (cpu, onednn, cudnn)."""
    return any(b["name"] == "cudnn" and b["available"] for b in _convtune.backends())


def set_flags(_enabled=None, _benchmark=None, _benchmark_limit=None, _deterministic=None, _allow_tf32=None):
    """torch.backends.cudnn.set_flags: sets the flags that are not None and returns the previous
    five as a tuple (enabled, benchmark, benchmark_limit, deterministic, allow_tf32)."""
    cur = _get_all()
    orig = tuple(cur[k] for k in _TORCH_FLAGS)
    new = {k: v for k, v in zip(_TORCH_FLAGS, (_enabled, _benchmark, _benchmark_limit, _deterministic, _allow_tf32)) if v is not None}
    _set(new)
    return orig


_KEEP = object()


_SCOPES = ("process", "thread")


@contextlib.contextmanager
def flags(enabled=_KEEP, benchmark=_KEEP, benchmark_limit=_KEEP, deterministic=_KEEP, allow_tf32=_KEEP, *, policy=_KEEP,
          scope=None, **knobs):
    """Sets flags for the ``with`` block and restores every flag after it (also on an exception).

    Parameters not passed (or passed as None) keep their current values, unless the policy in
    effect in the block is "pytorch" or "pytorch-v7": then, as PyTorch's flags(), they take
    enabled=False, benchmark=False, benchmark_limit=10, deterministic=False, allow_tf32=True.
    ``policy`` and convtune's other knobs (workspace_limit, search_budget_ms, ...) may be passed as
    keywords; those always keep their values when not passed.

    scope="process" (the default outside a thread-scoped block) sets the process-wide flags, as
    PyTorch's flags() does: every thread sees them, and blocks entered by two threads at once
    interleave (the one left last restores what the other set). scope="thread" gives this thread
    flags of its own for the block: other threads never see them, and leaving the block puts
    back exactly what this thread had. Inside a thread-scoped block the default scope is the
    thread, and the module's attributes read and set this thread's flags. Thread-scoped blocks
    of generators or asyncio tasks may end in any order: when the last one ends, the thread has
    the flags it had before the first (a block that ends while a later one is open takes its own
    values with it; the later one's stay).
    """
    for k in knobs:
        if k not in _KNOBS:
            raise TypeError(f"flags() got an unexpected keyword argument '{k}'")
    if scope is None:
        scope = "thread" if _thread_scoped() else "process"
    elif scope not in _SCOPES:
        raise _Error(f"scope: must be 'process' or 'thread' (got {scope!r})")
    if scope == "thread":
        saved = _convtune.get_thread_flags()  # None: the thread had no flags of its own
        current = _convtune.current_flags()
    else:
        saved = current = _convtune.get_flags()
    block_policy = current["policy"] if policy is _KEEP or policy is None else _check("policy", policy)
    pytorch_quirk = block_policy in ("pytorch", "pytorch-v7")
    given = dict(zip(_TORCH_FLAGS, (enabled, benchmark, benchmark_limit, deterministic, allow_tf32)))
    new = {}
    for k, v in given.items():
        if v is _KEEP and pytorch_quirk:
            new[k] = _PYTORCH_FLAGS_DEFAULTS[k]
        elif v is not _KEEP and v is not None:
            new[k] = v
    if policy is not _KEEP and policy is not None:
        new["policy"] = policy
    new.update({k: v for k, v in knobs.items() if v is not None})
    _set(new, scope)
    if scope == "thread":
        block = {"saved": saved, "changes": new}  # what it puts back, and what it set
        _open_blocks().append(block)
    try:
        yield
    finally:
        if scope == "thread":
            _close_thread_block(block)
        else:
            _convtune.set_flags(saved)


_thread_blocks = threading.local()


def _open_blocks():
    """This thread's open flags(scope="thread") blocks, in the order they were entered."""
    if not hasattr(_thread_blocks, "open"):
        _thread_blocks.open = []
    return _thread_blocks.open


def _close_thread_block(block):
    """Ends a thread-scoped block. Blocks of generators or asyncio tasks may end in any order. The
    innermost one puts back exactly what it found. One that ends while blocks entered after it are
    still open takes its own values with it: the thread's flags become what it found with the
    changes of those later blocks on top, and the next of them will put back what it found. So
    when the last block ends, the thread has the flags it had before the first (no override is
    left behind)."""
    blocks = _open_blocks()
    i = next((k for k, b in enumerate(blocks) if b is block), None)
    if i is None:  # ended on another thread than it began on (a generator closed elsewhere)
        _convtune.set_thread_flags(block["saved"])
        return
    del blocks[i]
    if i == len(blocks):
        _convtune.set_thread_flags(block["saved"])
        return
    blocks[i]["saved"] = block["saved"]
    flags = dict(block["saved"] if block["saved"] is not None else _convtune.get_flags())
    for later in blocks[i:]:
        flags.update(later["changes"])
    _convtune.set_thread_flags(flags)


class _Flag:
    """A module attribute backed by convtune's process-wide flags."""

    def __init__(self, name, doc):
        self.name = name
        self.__doc__ = doc

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return _get_all()[self.name]

    def __set__(self, obj, value):
        _set({self.name: value})


class _CudnnModule(types.ModuleType):
    enabled = _Flag("enabled", "Use the tuned path at all (bool, default True); False runs the backend's native fallback.")
    benchmark = _Flag("benchmark", "Time candidate algorithms on a cache miss and keep the fastest (bool, default False).")
    benchmark_limit = _Flag("benchmark_limit", "How many candidates that run are timed (int >= 0, default 10; 0 = all).")
    deterministic = _Flag("deterministic", "Only bitwise-reproducible algorithms (bool, default False).")
    allow_tf32 = _Flag("allow_tf32", "fp32 convolutions may use TF32 tensor cores (bool, default True).")
    policy = _Flag("policy", "Selection policy: 'convtune' (default) or another name of convtune's registry (an unknown one is refused with the list).")
    workspace_limit = _Flag("workspace_limit", "Largest workspace an algorithm may use, in bytes (None = unlimited).")
    search_budget_ms = _Flag("search_budget_ms", "convtune policy: timing budget per problem in ms.")
    min_samples = _Flag("min_samples", "convtune policy: samples per candidate before the median can be stable.")
    max_samples = _Flag("max_samples", "convtune policy: samples per candidate at most.")
    stable_rel = _Flag("stable_rel", "convtune policy: the median is stable when it moved less than this fraction.")
    explore_slots = _Flag("explore_slots", "convtune policy: of benchmark_limit, slots kept for candidates the heuristics do not suggest (default 3).")
    adaptive_after = _Flag("adaptive_after", "adaptive policy: search a shape on its N-th occurrence (0 = automatic: as many calls as its search costs).")


sys.modules[__name__].__class__ = _CudnnModule
