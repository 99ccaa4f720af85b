"""convtune.torch: PyTorch's convolutions run through convtune's selector and tuning database.

    import convtune.torch
    torch.backends.cudnn.benchmark = True          # searched once per shape, then from the database
    convtune.torch.enable(db="tuning.json")        # PyTorch's CUDA convolutions -> convtune's cuDNN backend
    ... train ...
    print(convtune.torch.stats())                  # what ran through convtune, what fell back and why
    convtune.torch.disable()                       # PyTorch exactly as before

    with convtune.torch.enabled(device="cpu"):     # CPU convolutions -> convtune's CPU backend
        ...

How: kernels of ``aten::convolution`` whose forward and both backward directions run through
``convtune::app::run_framework`` (one C++ entry point) on PyTorch's tensors, on PyTorch's current
stream, with workspace from PyTorch's allocator. The C++ override (below) registers
``convolution`` and ``convolution_backward`` at the device's key (CUDA, CPU), under PyTorch's own
autograd kernel: a convolution's graph node is PyTorch's ``ConvolutionBackward0``, whose backward
(and double backward) calls convtune's ``convolution_backward``. The Python override registers
``convolution`` at the device's autograd key (AutogradCUDA, AutogradCPU) as an autograd Function,
and a forward-only kernel at the device's key for calls that skip autograd
(torch.inference_mode()). The flags are read
at each call from ``torch.backends.cudnn`` (enabled, benchmark, deterministic, allow_tf32,
benchmark_limit where PyTorch has it) and ``torch.are_deterministic_algorithms_enabled()``
(:func:`flag_values`); the policy comes from ``enable(policy=...)``.

Two implementations of that override, with the same rules: which calls convtune takes at all
(``convtune::app::framework_refusal``) and what PyTorch's flags mean as convtune's
(``convtune::app::flags_from_torch``) are convtune's C++ code, which both call; each keeps only
its glue (what needs PyTorch's objects: FakeTensor, tensor subclasses, autograd). ``override="cpp"`` (the default where
it can be built) is a C++ extension (_override.cpp) compiled once per torch build into a cache
folder (convtune/torch/_build.py) that registers C++ kernels through a ``torch::Library`` and
calls convtune through the C interface of convtune._convtune; ``override="python"`` is this
module's ``torch.library`` kernels and ``torch.autograd.Function``. ``override="auto"`` uses the
C++ one and, when it cannot be built or loaded, warns once and uses the Python one.

Anything convtune cannot run falls through to PyTorch's own path (``aten::_convolution``, which
has PyTorch's own derivative, or ``aten::convolution_backward`` for one backward direction),
counted per reason in :func:`stats`: ``dtype``, ``device``, ``layout``, ``transposed``,
``fake_tensor`` (torch.compile's tracing), ``tensor_subclass``, ``cudnn_disabled``
(torch.backends.cudnn.enabled is False), ``double_backward`` (Python override: a backward with
create_graph=True),
``problem``, ``unsupported``, ``failed``. ``disable()`` unregisters the override (PyTorch's kernel
runs again, nothing is counted any more).

``python3 -m convtune.torch warm script.py [args]`` runs a script under convtune.capture's
recorder and tunes the convolutions it ran into the database (see :mod:`convtune.torch.__main__`).
"""

import contextlib
import os
import threading
import warnings

import torch

from .. import _convtune
from .._convtune import Error
from ..capture import _layout, _torch_flags

__all__ = ["enable", "disable", "enabled", "is_enabled", "stats", "reset_stats", "flag_values", "torch_flags", "Error"]

# device type -> (the autograd dispatch key the override sits on, convtune's default backend)
_DEVICES = {"cuda": ("AutogradCUDA", "cudnn"), "cpu": ("AutogradCPU", "cpu")}
_POLICIES = tuple(_convtune.policies())  # the C++ registry's names

_OVERRIDES = ("auto", "cpp", "python")

_lock = threading.Lock()
_state = None  # the active _State, or None


class _State:
    def __init__(self, device, backend, policy, db, override):
        self.device = device
        self.backend = backend
        self.policy = policy
        self.db = db
        self.override = override  # "cpp" or "python": which kernels run ("none": no usable GPU)
        self.context = _convtune.FrameworkContext(db)
        self.library = None  # python: the torch.library.Library
        self.cpp = None  # cpp: the loaded convtune.torch._override module
        self.handle = None  # cpp: its state's handle (stats)
        self.cuda_index = -1  # the CUDA device convtune's handles live on (the first one used; -1: none yet)
        self.stats = _new_stats()
        self.passthrough = None  # (reason, message): every call runs PyTorch's own kernels, counted


def _new_stats():
    return {"convtune": {"fwd": 0, "bwd_data": 0, "bwd_filter": 0}, "fallback": {}, "sources": {}, "algorithms": {},
            "search_ms": 0.0, "details": {}}


def torch_flags():
    """torch.backends.cudnn's flags now, as a dict (enabled, benchmark, benchmark_limit (None where
    PyTorch has no such flag), deterministic (also True under torch.use_deterministic_algorithms),
    allow_tf32): convtune.capture reads them the same way."""
    return _torch_flags()


def flag_values(tflags, policy="convtune"):
    """The convtune flags (a dict for convtune.backends.cudnn's keys) that PyTorch's flags
    ``tflags`` (as torch_flags() returns them) and ``policy`` mean: enabled, benchmark,
    deterministic and allow_tf32 carry over; benchmark_limit too where PyTorch has it (else
    convtune's current value stays); ``policy`` is convtune's selection policy."""
    return _convtune.framework_flags(tflags, policy)  # convtune::app::flags_from_torch


_flag_memo = {}  # (PyTorch's flags, policy) -> flag_values(...): a handful of entries per process


def _flag_values_memo(tflags, policy):
    key = (tuple(tflags.values()), policy)
    f = _flag_memo.get(key)
    if f is None:
        f = _flag_memo[key] = flag_values(tflags, policy)
    return f


try:  # the current stream's handle without making a torch.cuda.Stream object (PyTorch >= 1.10)
    _raw_stream = torch._C._cuda_getCurrentRawStream
    _current_device = torch._C._cuda_getDevice
except AttributeError:
    _raw_stream = None


def _stream_of(index):
    """The current CUDA stream's handle on device ``index`` (the Python override's calls; the C++
    override asks it where its PyTorch has no c10::Stream::native_handle)."""
    if _raw_stream:
        return _raw_stream(index)
    return torch.cuda.current_stream(index).cuda_stream


def _count(section, key, detail=None):
    s = _state
    if s is None:
        return
    with _lock:
        d = s.stats[section]
        d[key] = d.get(key, 0) + 1
        if detail and section == "fallback":
            s.stats["details"].setdefault(key, detail)


def _python_refusal(x, w):
    """The refusals that need Python to see: a FakeTensor, a tensor subclass (None: neither).
    The C++ override asks this for tensors that carry the Python dispatch key."""
    for t in (x, w):
        if _is_fake(t):
            return "fake_tensor", "a FakeTensor (torch.compile tracing): PyTorch traces its own kernel"
        if type(t) not in (torch.Tensor, torch.nn.Parameter):
            return "tensor_subclass", f"a {type(t).__name__}"
    return None


# The reasons a call falls back, in both overrides: the Python-key ones above, double_backward and
# an output of size 0 ("problem") from the glue, the rest from convtune::app (framework_refusal,
# run_framework: _convtune.framework_fallback_categories()). tests/python/test_torch.py produces
# each that a CPU can under both overrides.
FALLBACK_REASONS = ("fake_tensor", "tensor_subclass", "device", "layout", "dtype", "transposed", "cudnn_disabled",
                    "pytorch_kernel", "double_backward", "problem", "unsupported", "failed")


def _operand(t):
    """x or w as convtune::app::framework_refusal reads them: PyTorch's names."""
    index = t.device.index
    return t.device.type, -1 if index is None else index, str(t.layout), str(t.dtype)


def _convtune_refusal(x, w, transposed, groups, s, tflags):
    """convtune::app::framework_refusal: whether convtune takes the call (None) or (reason, detail)."""
    category, detail, s.cuda_index = _convtune.framework_refusal(
        s.device, _operand(x), _operand(w), transposed, tflags["enabled"], s.cuda_index, groups,
        x.shape[1] if x.dim() > 1 else 0, w.shape[0] if w.dim() > 0 else 0,
        x.layout == torch.strided and w.layout == torch.strided and _layout(x, w) == "nhwc")
    return None if category is None else (category, detail)


def _refusal(x, w, transposed, groups, s, tflags):
    """Why convtune does not take this call at all (None: it may)."""
    why = _python_refusal(x, w)
    if why is not None:
        return why
    return _convtune_refusal(x, w, transposed, groups, s, tflags)


try:
    from torch._subclasses.fake_tensor import FakeTensor as _FakeTensor
except ImportError:  # a PyTorch without FakeTensor
    _FakeTensor = ()


def _is_fake(t):
    return isinstance(t, _FakeTensor)


def _memory_format(x, w):
    if _layout(x, w) == "nhwc":
        return torch.channels_last if x.dim() == 4 else torch.channels_last_3d
    return torch.contiguous_format


def _desc(t):
    return (list(t.shape), list(t.stride()), t.data_ptr(), t.numel() * t.element_size())


def _run(s, direction, x, w, y, stride, padding, dilation, groups, tflags):
    """One call of convtune::app::run_framework; the result dict (ran, fallback, detail, ...)."""
    dev = x.device
    cuda = dev.type == "cuda"
    stream = _stream_of(dev.index) if cuda else 0

    def alloc(nbytes):
        t = torch.empty(nbytes, dtype=torch.uint8, device=dev)
        return t, t.data_ptr()

    args = (direction, str(x.dtype), _desc(x), _desc(w), _desc(y), stride, padding, dilation, int(groups),
            s.backend, _flag_values_memo(tflags, s.policy), stream, alloc)
    # The thread's cuDNN handle is made on the current device: switch only when it is another.
    if cuda and not (_raw_stream and _current_device() == dev.index):
        with torch.cuda.device(dev):
            r = s.context.run(*args)
    else:
        r = s.context.run(*args)
    with _lock:
        if r["ran"]:
            s.stats["convtune"][direction] += 1
            s.stats["sources"][r["source"]] = s.stats["sources"].get(r["source"], 0) + 1
            s.stats["algorithms"][r["algorithm"]] = s.stats["algorithms"].get(r["algorithm"], 0) + 1
            s.stats["search_ms"] += r["search_ms"]
    if not r["ran"]:
        _count("fallback", r["fallback"], r["detail"])
    return r


def _spatial(v, nd):
    v = list(v)
    return v * nd if len(v) == 1 else v


def _forward(x, w, b, stride, padding, dilation, groups, s, tflags):
    """The forward convolution through convtune (PyTorch's aten::_convolution when convtune
    cannot run it), in PyTorch's memory format for x and w; no autograd."""
    nd = x.dim() - 2
    fmt = _memory_format(x, w)
    out = [x.shape[0], w.shape[0]]
    for i in range(nd):
        out.append((x.shape[2 + i] + 2 * padding[i] - dilation[i] * (w.shape[2 + i] - 1) - 1) // stride[i] + 1)
    if min(out) >= 1:
        xc, wc = x.contiguous(memory_format=fmt), w.contiguous(memory_format=fmt)
        y = torch.empty(out, dtype=x.dtype, device=x.device, memory_format=fmt)
        if _run(s, "fwd", xc, wc, y, stride, padding, dilation, groups, tflags)["ran"]:
            if b is not None:
                y.add_(b.view([1, -1] + [1] * nd))
            return y
    else:
        _count("fallback", "problem", f"output size {out}")
    return _pytorch_convolution(x, w, b, stride, padding, dilation, False, [0] * nd, groups, tflags)


class _Conv(torch.autograd.Function):
    """aten::convolution (not transposed) through convtune: forward, backward data and filter."""

    @staticmethod
    def forward(ctx, x, w, b, stride, padding, dilation, groups, s, tflags):
        nd = x.dim() - 2
        stride, padding, dilation = _spatial(stride, nd), _spatial(padding, nd), _spatial(dilation, nd)
        ctx.geometry = (stride, padding, dilation, groups)
        ctx.state = s
        ctx.fmt = _memory_format(x, w)
        ctx.has_bias = b is not None
        ctx.save_for_backward(x, w)
        return _forward(x, w, b, stride, padding, dilation, groups, s, tflags)

    @staticmethod
    def backward(ctx, gy):
        x, w = ctx.saved_tensors
        stride, padding, dilation, groups = ctx.geometry
        s = ctx.state
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        nd = x.dim() - 2
        dx = dw = db = None
        mask = [need_x, need_w, need_b and ctx.has_bias]
        if torch.is_grad_enabled():
            # create_graph=True: PyTorch's differentiable backward, so that a second derivative exists.
            _count("fallback", "double_backward", "a backward with create_graph=True runs aten::convolution_backward")
            dx, dw, db = _pytorch_backward(gy, x, w, stride, padding, dilation, groups, mask)
            return dx, dw, db, None, None, None, None, None, None
        tflags = _torch_flags() if _active(s) else None
        # The forward took x and w: what could refuse them now is PyTorch's flags (cudnn_disabled).
        why = None if tflags is None else _convtune_refusal(x, w, False, groups, s, tflags)
        fmt = ctx.fmt
        gyc = gy.contiguous(memory_format=fmt)
        todo = []
        # bwd_data writes dx from w and gy, bwd_filter dw from x and gy: tensors in (x, w, y) order.
        grads = [None, None]
        for i, (need, direction) in enumerate(((need_x, "bwd_data"), (need_w, "bwd_filter"))):
            if not need:
                continue
            like = (x, w)[i]
            xw = [None, None]
            xw[i] = torch.empty(like.shape, dtype=like.dtype, device=like.device, memory_format=fmt)
            xw[1 - i] = (x, w)[1 - i].contiguous(memory_format=fmt)
            if tflags is not None and why is None and _run(s, direction, xw[0], xw[1], gyc, stride, padding, dilation,
                                                           groups, tflags)["ran"]:
                grads[i] = xw[i]
            else:
                todo.append(i)
        dx, dw = grads
        if todo:
            if why is not None:
                _count("fallback", *why)
            m = [i in todo for i in range(2)] + [False]
            r = _pytorch_backward(gy, x, w, stride, padding, dilation, groups, m)
            dx = r[0] if 0 in todo else dx
            dw = r[1] if 1 in todo else dw
        if mask[2]:
            db = gy.sum(dim=[0] + list(range(2, 2 + nd)))
        return dx, dw, db, None, None, None, None, None, None


def _active(s):
    return s is not None and _state is s


def _pytorch_convolution(x, w, b, stride, padding, dilation, transposed, output_padding, groups, tflags):
    """PyTorch's own convolution with its own derivative (aten::_convolution), under its flags."""
    return torch.ops.aten._convolution(x, w, b, stride, padding, dilation, transposed, output_padding, groups, tflags["benchmark"],
                                       tflags["deterministic"], tflags["enabled"], tflags["allow_tf32"])


def _pytorch_backward(gy, x, w, stride, padding, dilation, groups, mask):
    nd = x.dim() - 2
    return torch.ops.aten.convolution_backward(gy, x, w, [w.shape[0]] if mask[2] else None, stride, padding, dilation, False,
                                               [0] * nd, groups, mask)


def _dispatch(x, w, b, stride, padding, dilation, transposed, output_padding, groups, run):
    s = _state
    tflags = _torch_flags()
    why = None if s is None else s.passthrough or _refusal(x, w, transposed, groups, s, tflags)
    if s is None or why is not None:
        if why is not None:
            _count("fallback", *why)
        return _pytorch_convolution(x, w, b, list(stride), list(padding), list(dilation), transposed, list(output_padding), groups,
                                    tflags)
    return run(x, w, b, list(stride), list(padding), list(dilation), groups, s, tflags)


def _kernel(x, w, b, stride, padding, dilation, transposed, output_padding, groups):
    """The override of aten::convolution at the device's autograd key: forward and backward."""
    return _dispatch(x, w, b, stride, padding, dilation, transposed, output_padding, groups, _Conv.apply)


def _below_autograd_kernel(x, w, b, stride, padding, dilation, transposed, output_padding, groups):
    """The override of aten::convolution at the device's own key (CPU, CUDA): what reaches
    it bypassed autograd (torch.inference_mode(), graphs that AOTAutograd compiled), so it is a
    forward only."""
    def run(x, w, b, stride, padding, dilation, groups, s, tflags):
        nd = x.dim() - 2
        return _forward(x, w, b, _spatial(stride, nd), _spatial(padding, nd), _spatial(dilation, nd), groups, s, tflags)

    return _dispatch(x, w, b, stride, padding, dilation, transposed, output_padding, groups, run)


_cpp = None  # the loaded C++ override module, once loaded
_cpp_failure = None  # why it could not be built or loaded ("auto" warned once)


def _load_cpp():
    """The C++ override's module, built and loaded on first use; raises convtune.Error saying why not."""
    global _cpp
    if _cpp is not None:
        return _cpp
    from . import _build

    try:
        path = _build.build()
        try:
            m = _build.load(path)
        except ImportError:
            # A file that passed its checksum but does not load (another torch under the same
            # key cannot happen; a damaged cache can): build it again, once.
            path = _build.build(force=True)
            m = _build.load(path)
    except Error as e:
        raise Error(f"override: the C++ override cannot be built: {e}") from None
    except (ImportError, OSError) as e:
        raise Error(f"override: the C++ override cannot be loaded: {e}") from None
    _cpp = m
    return m


def _resolve_override(override):
    """("cpp", module) or ("python", None) for enable(override=...)."""
    global _cpp_failure
    mode = override if override is not None else (os.environ.get("CONVTUNE_TORCH_OVERRIDE") or "auto")
    if mode not in _OVERRIDES:
        src = "override" if override is not None else "CONVTUNE_TORCH_OVERRIDE"
        raise Error(f"{src}: must be one of {', '.join(_OVERRIDES)} (got {mode!r})")
    if mode == "python":
        return "python", None
    if mode == "auto" and _cpp_failure is not None:
        return "python", None
    try:
        return "cpp", _load_cpp()
    except Error as e:
        if mode == "cpp":
            raise
        _cpp_failure = str(e)
        warnings.warn(f"convtune.torch: using the Python override (slower per call): {e}", RuntimeWarning, stacklevel=3)
        return "python", None


def enable(db=None, policy="convtune", device="cuda", backend=None, override=None):
    """Runs PyTorch's convolutions on ``device`` ("cuda" or "cpu") through convtune's ``backend``
    (default: "cudnn" for cuda, "cpu" for cpu) from now on, selecting under ``policy`` with the
    tuning database ``db`` (a path; default $CONVTUNE_DB; "" for none). ``override`` picks the
    kernels: "cpp" (the C++ override, compiled once for this torch; convtune.Error when it cannot
    be built or loaded), "python" (torch.library kernels), "auto" (cpp, else python with one
    warning saying why); default $CONVTUNE_TORCH_OVERRIDE, else "auto". Enabling again replaces
    the previous settings (and starts new stats). device="cuda" on a machine without a usable GPU
    (no CUDA device, or a convtune without cuDNN) warns once and lets PyTorch run every
    convolution, counting each as fallback "no_gpu" (stats()["override"] is "none"), so that one
    script runs on a laptop and on the cluster."""
    global _state
    if device not in _DEVICES:
        raise Error(f"device: must be one of {', '.join(_DEVICES)} (got {device!r})")
    if policy not in _POLICIES:
        raise Error(f"policy: unknown policy '{policy}' (expected {', '.join(_POLICIES)})")
    key, default_backend = _DEVICES[device]
    backend = backend or default_backend
    names = {b["name"]: b for b in _convtune.backends()}
    no_gpu = None
    if device == "cuda" and backend == "cudnn":
        if backend not in names:
            no_gpu = "this convtune was built without the cuDNN backend"
        elif not names[backend]["available"]:
            no_gpu = names[backend]["reason"]
        elif not torch.cuda.is_available():
            no_gpu = "PyTorch sees no CUDA device"
    if no_gpu is None and backend not in names:
        raise Error(f"backend: unknown backend '{backend}' (this build has {', '.join(names)})")
    if no_gpu is None and not names[backend]["available"]:
        raise Error(f"backend: '{backend}' is unavailable here: {names[backend]['reason']}")
    if backend == "cudnn" and device != "cuda" or backend != "cudnn" and device == "cuda":
        raise Error(f"backend: '{backend}' does not run {device} tensors")
    db = os.environ.get("CONVTUNE_DB", "") if db is None else os.fspath(db)
    if no_gpu is not None:
        # No usable GPU (a laptop running the cluster's script): PyTorch runs every convolution,
        # on whatever device its tensors are, and each call is counted as a fallback.
        disable()
        warnings.warn(f"convtune.torch: no usable GPU ({no_gpu}): PyTorch runs every convolution itself", RuntimeWarning,
                      stacklevel=2)
        s = _State(device, backend, policy, db, "none")
        s.passthrough = ("no_gpu", f"no usable GPU ({no_gpu}): PyTorch's own kernels")
        lib = torch.library.Library("aten", "IMPL")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for key in ("AutogradCPU", "AutogradCUDA"):
                lib.impl("convolution", _kernel, key)
        s.library = lib
        _state = s
        return
    mode, cpp = _resolve_override(override)
    disable()
    s = _State(device, backend, policy, db, mode)
    if cpp is not None:
        s.cpp = cpp
        s.handle = cpp.enable(_convtune._framework_api(), s.context._address(), device, backend, policy, _python_refusal,
                              _stream_of if device == "cuda" else None)
        _state = s
        return
    lib = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Overriding a previously registered kernel": that is the point
        lib.impl("convolution", _kernel, key)
        lib.impl("convolution", _below_autograd_kernel, device.upper())
    s.library = lib
    _state = s


def disable():
    """Unregisters the override: PyTorch's own convolution runs again, exactly as before enable().
    The stats of the last enable() stay readable until the next one."""
    global _state, _last_stats
    s = _state
    if s is None:
        return
    _state = None
    if s.cpp is not None:
        s.cpp.disable()  # destroys its torch::Library: PyTorch's kernels again
        _last_stats = _stats_of(s)
        return
    _last_stats = _stats_of(s)
    lib, s.library = s.library, None
    if hasattr(lib, "_destroy"):
        lib._destroy()
    del lib


_last_stats = None


def is_enabled():
    return _state is not None


@contextlib.contextmanager
def enabled(db=None, policy="convtune", device="cuda", backend=None, override=None):
    """enable() for the ``with`` block, disable() after it (also on an exception)."""
    enable(db=db, policy=policy, device=device, backend=backend, override=override)
    try:
        yield
    finally:
        disable()


def _backend_work(backend):
    """The backend's preparation work in this process; none for a backend this build does not have
    (enable() on a machine without it ran PyTorch's own kernels)."""
    try:
        return _convtune.backend_work(backend)
    except Error:
        return {}


def _stats_of(s):
    settings = {"device": s.device, "backend": s.backend, "policy": s.policy, "db": s.db, "override": s.override,
                "backend_work": _backend_work(s.backend)}
    if s.cpp is not None:
        return {**s.cpp.stats(s.handle), **settings}
    with _lock:
        st = s.stats
        return {"convtune": dict(st["convtune"]), "fallback": dict(st["fallback"]), "sources": dict(st["sources"]),
                "algorithms": dict(st["algorithms"]), "search_ms": st["search_ms"], "details": dict(st["details"]),
                **settings}


def stats():
    """What the current (or, after disable(), the last) enable() did: ``convtune`` (calls run per
    direction), ``sources`` (where their decisions came from: search, database, memory,
    heuristic, ...), ``algorithms`` (calls per algorithm id), ``search_ms`` (time spent
    searching), ``fallback`` (calls PyTorch ran itself, per reason) with one ``details`` message
    per reason, and the settings (``override``: "cpp" or "python", the kernels that ran).
    ``backend_work``: the preparation the backend has done in this process so far, by kind (cuDNN:
    ``heuristic_queries``, ``engine_builds``, ``plan_builds``, ``note_probes``, ``legacy_v7_queries``,
    ``legacy_workspace_queries``; empty for a backend that prepares nothing), counted process-wide, not
    per enable() and not reset by reset_stats(). Before any successful enable(): the same dict, every
    count zero and the settings None."""
    s = _state
    if s is not None:
        return _stats_of(s)
    if _last_stats is None:
        return {**_new_stats(), "device": None, "backend": None, "policy": None, "db": None, "override": None,
                "backend_work": {}}
    return _last_stats


def reset_stats():
    s = _state
    if s is not None and s.cpp is not None:
        s.cpp.reset_stats(s.handle)
    elif s is not None:
        with _lock:
            s.stats = _new_stats()
