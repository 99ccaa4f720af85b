"""Record the convolutions a PyTorch program runs into a convtune trace file.

    python3 -m convtune.capture -o model.trace my_training_script.py [script args...]
    convtune simulate --stream trace:model.trace --compare

or from Python:

    from convtune.capture import capture
    trace = capture(model, example_inputs, train=True, iterations=2, path="model.trace")
    convtune.simulate(trace=trace, iterations=100)

Every convolution PyTorch dispatches is recorded, forward and backward, as convtune problems in
the order they run: a forward call as ``dir=fwd``; its backward as ``dir=bwd_data`` (only when
the input needs a gradient, so a network's first layer has none, as in PyTorch) then
``dir=bwd_filter`` (only when the weight needs one). Transposed convolutions are mapped onto the
convolution they transpose (forward = bwd_data, gradient of the input = fwd, of the weight =
bwd_filter). Modules, ``torch.nn.functional.conv*`` calls and anything else reaching
``aten::convolution`` are seen: recording happens at PyTorch's dispatcher (a TorchDispatchMode),
below autograd, so the backward calls are the ones autograd really makes. The values of
torch.backends.cudnn's flags at each call (backward calls read them at backward time, as
PyTorch does) are written as ``# flags ...`` comment lines whenever they change.

Threads: convolutions run by threads started while recording (threading.Thread,
concurrent.futures' thread pools) are recorded too, in the order they run.

Iterations: capture() separates its iterations itself. For a script, call
``convtune.capture.mark_iteration()`` at the start of each step; without marks, a new iteration
begins when a forward convolution follows a backward one, or when the first convolution is seen
again: the first convolution of the same module (the same ``nn.Module`` object, called again),
or, outside any module, the same weight tensor object. Objects are compared by identity, never by
address, so a weight freed and its memory reused by another tensor does not start an iteration.

The trace format is docs/simulation.md's: one canonical problem per line, iterations separated
by ``# iteration`` lines, other ``#`` lines are comments.

This file also works on its own, where only PyTorch is installed (a GPU server without
convtune's C++ module): load it as a standalone module, or run
``python3 path/to/capture.py -o model.trace script.py``. It then writes the problems with
:func:`_problem_py` instead of the C++ ``make_problem`` (the same canonical strings; the tests
compare the two), and convtune validates them when it reads the trace.
"""

import argparse
import os
import runpy
import stat
import sys
import threading
import time
import weakref
import dataclasses
from dataclasses import dataclass, field

# Run as a script from inside the convtune package (python3 .../convtune/capture.py, as
# convtune.advise runs it), the script's folder leads sys.path, and the package's convtune/torch
# would shadow PyTorch: that folder leaves the path.
if __name__ == "__main__" and not __package__ and sys.path and \
        os.path.realpath(sys.path[0] or os.curdir) == os.path.dirname(os.path.realpath(__file__)):
    del sys.path[0]

try:
    from . import _convtune
except ImportError:  # a standalone copy of this file: no package, no C++ module
    _convtune = None

__all__ = ["capture", "Recorder", "Trace", "Call", "StopCapture", "mark_iteration", "run_script", "main"]


_LAYOUT_NAMES = {"nchw": ("ncw", "nchw", "ncdhw"), "nhwc": ("nwc", "nhwc", "ndhwc")}


def _problem_py(direction, dtype, layout, n, c, k, groups, in_, kernel, stride, dilation, pad, pad_end):
    """What ``_convtune.make_problem`` returns (``canonical`` and ``y_shape``), in Python, for a
    standalone copy of this file. Checks only what the output size needs; convtune validates
    the rest when it reads the trace."""
    nd = len(in_)
    if not 1 <= nd <= 3 or not all(len(v) == nd for v in (kernel, stride, dilation, pad, pad_end)):
        raise ValueError(f"spatial_dims: must be 1, 2 or 3 with one value per dim (got {nd})")
    out = []
    for i in range(nd):
        if min(in_[i], kernel[i], stride[i], dilation[i]) < 1:
            raise ValueError(f"sizes, strides and dilations must be >= 1 (dim {i})")
        span = in_[i] + pad[i] + pad_end[i] - ((kernel[i] - 1) * dilation[i] + 1)
        if span < 0:
            raise ValueError(f"the kernel is larger than the padded input (dim {i})")
        out.append(span // stride[i] + 1)
    if min(n, c, k, groups) < 1 or c % groups or k % groups:
        raise ValueError(f"n, c, k, groups must be >= 1 and c, k divisible by groups (n={n}, c={c}, k={k}, g={groups})")
    j = lambda v: "x".join(str(int(a)) for a in v)
    canonical = (f"dir={direction},dtype={dtype},layout={_LAYOUT_NAMES[layout][nd - 1]},n={n},c={c},k={k},g={groups},"
                 f"in={j(in_)},ker={j(kernel)},stride={j(stride)},dil={j(dilation)},pad={j(pad)},pad_end={j(pad_end)}")
    return {"canonical": canonical, "y_shape": [n, k] + out}


def _make_problem(*args):
    return (_convtune.make_problem if _convtune is not None else _problem_py)(*args)


def _version():
    return _convtune.version() if _convtune is not None else "standalone capture.py, no C++ module"


@dataclass
class Call:
    """One convolution PyTorch ran."""

    problem: str  # canonical convtune problem string
    direction: str  # fwd, bwd_data or bwd_filter
    flags: dict  # torch.backends.cudnn's flags at the call
    device: str = "cpu"
    layer: str = ""  # the module's qualified name, when known
    transposed: bool = False  # part of a transposed convolution


@dataclass
class Trace:
    """Calls grouped into iterations."""

    iterations: list = field(default_factory=list)  # list of lists of Call
    # Per iteration: host wall time from its first convolution to the next iteration's first (the
    # whole step: the convolutions and everything else it does), or None where no next iteration
    # started inside the capture (the last one).
    wall_ms: list = field(default_factory=list)
    source: str = ""
    skipped: list = field(default_factory=list)  # (description, reason) of calls convtune cannot express
    torch_version: str = ""
    # How wall_ms was taken: "capture" (under the recorder, which slows each step) or a dict
    # {"source": "plain", "benchmark": 0|1, "kernel_cache": "cold"|None} (a plain run of the program).
    timing: object = "capture"
    # Where iterations start, for a plain run of the same program: ("module", K) = each call of the
    # K-th module object the program called (in first-call order), ("marks",) = mark_iteration()
    # calls, None = not reproducible (the first convolution ran outside any module).
    boundary: object = None
    new_problems: list = field(default_factory=list)  # per iteration: how many problems it saw first
    stable_after: int = 0  # the capture stopped once this many iterations in a row brought no new problem (0: not asked)
    notes: list = field(default_factory=list)  # comment lines (the capture's overhead, coverage warnings)

    def calls(self):
        return [c for it in self.iterations for c in it]

    def coverage(self):
        """(distinct problems, iteration of the last new one (1-based, 0 when none), iterations,
        still_growing): still_growing is True where the capture ended while new problems were
        still appearing (fewer than ``stable_after`` iterations, or 10 when not asked, without one)."""
        last = max((i + 1 for i, n in enumerate(self.new_problems) if n), default=0)
        window = self.stable_after or 10
        n = len(self.iterations)
        return len(set(self.problems())), last, n, last > 1 and n - last < window

    def problems(self, iteration=None):
        """The problem strings of one iteration (all iterations when None), in call order."""
        its = self.iterations if iteration is None else [self.iterations[iteration]]
        return [c.problem for it in its for c in it]

    def text(self):
        lines = ["# convtune-trace 1",
                 f"# captured by convtune.capture (convtune {_version()}, PyTorch {self.torch_version or '?'})"
                 + (f" from {self.source}" if self.source else ""),
                 f"# {len(self.iterations)} iterations, {len(self.calls())} convolutions, "
                 f"{len(set(self.problems()))} distinct problems"]
        if self.timing == "capture":
            lines.append("# timing capture")
        elif isinstance(self.timing, dict):
            lines.append(f"# timing plain benchmark={int(self.timing['benchmark'])}"
                         + (f" kernel_cache={self.timing['kernel_cache']}" if self.timing.get("kernel_cache") else ""))
        if self.new_problems:
            distinct, last, n, growing = self.coverage()
            lines.append(f"# coverage: {distinct} distinct problems, the last new one in iteration {last} of {n}")
            if growing:
                lines.append("# warning: the capture ended while new problems were still appearing: the stream may not be whole")
        lines += [f"# {note}" for note in self.notes]
        for desc, reason in self.skipped:
            lines.append(f"# skipped (not expressible as a convtune problem): {desc}: {reason}")
        last_flags = None
        for i, it in enumerate(self.iterations):
            wall = self.wall_ms[i] if i < len(self.wall_ms) else None
            lines.append(f"# iteration {i + 1}" + (f" wall_ms {wall:.3f}" if wall is not None else ""))
            for c in it:
                f = _flags_text(c.flags)
                if f != last_flags:
                    lines.append(f"# flags {f}")
                    last_flags = f
                what = c.direction + (" (transposed convolution)" if c.transposed else "")
                lines.append(f"# layer {c.layer} {what} on {c.device}" if c.layer else f"# {what} on {c.device}")
                lines.append(c.problem)
        return "\n".join(lines) + "\n"

    def write(self, path):
        _write_text(os.fspath(path), self.text())


def _write_text(path, text):
    """Writes the file whole or not at all: through the C++ module's write_file_atomic when it
    has one, else through a temporary file renamed over it."""
    atomic = getattr(_convtune, "write_file_atomic", None)
    if atomic is not None:
        atomic(path, text.encode())
        return
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def _output_problem(path):
    """Why ``path`` cannot take the trace (None when it can): it must be a regular file or not
    exist, in an existing folder this process may write in. Checked before the script runs."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        return f"cannot use '{path}': {e.strerror}"
    if st is not None and not stat.S_ISREG(st.st_mode):
        what = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file (a device, FIFO or socket)"
        return f"'{path}' is {what}; give the path of a file"
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        return f"the folder of '{path}' does not exist"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"cannot write in the folder of '{path}'"
    return None


def _flags_text(f):
    keys = ("enabled", "benchmark", "benchmark_limit", "deterministic", "allow_tf32")
    return ",".join(f"{k}={int(f[k]) if isinstance(f[k], bool) else f[k]}" for k in keys if f.get(k) is not None)


def _torch_flags():
    import torch

    c = torch.backends.cudnn
    limit = getattr(c, "benchmark_limit", None)
    return {
        "enabled": bool(c.enabled),
        "benchmark": bool(c.benchmark),
        "benchmark_limit": limit if isinstance(limit, int) and not isinstance(limit, bool) else None,
        # PyTorch's cuDNN path also honours torch.use_deterministic_algorithms(True).
        "deterministic": bool(c.deterministic) or bool(torch.are_deterministic_algorithms_enabled()),
        "allow_tf32": bool(c.allow_tf32),
    }


_DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64"}


def _layout(x, w):
    """PyTorch's rule: channels-last when the input or the weight is."""
    import torch

    fmt = {4: torch.channels_last, 5: torch.channels_last_3d}.get(x.dim())
    if fmt is None:
        return "nchw"
    for t in (x, w):
        if t.is_contiguous(memory_format=fmt) and not t.is_contiguous():
            return "nhwc"
    return "nchw"


def _expand(v, nd):
    v = list(v)
    return v * nd if len(v) == 1 else v


def _weight_key(w):
    return (w.device.type, w.device.index, w.data_ptr(), tuple(w.shape))


class StopCapture(BaseException):
    """Raised into the captured program once `max_iterations` iterations are complete, to end
    it early (a BaseException, so that the program's own `except Exception` does not catch it)."""


class Recorder:
    """A context manager recording every convolution PyTorch runs inside it (this thread and the
    autograd threads it starts). ``names`` maps weight tensors to layer names (see capture())."""

    _active = None

    def __init__(self, names=None, auto_iterations=True, max_iterations=None, stable_after=None):
        self._names = dict(names or {})
        self._max = max_iterations  # stop the program (raise StopCapture) once this many are complete
        # Stop once this many iterations in a row brought no problem not seen before (the stream is whole).
        self._stable = stable_after
        self._seen = set()  # distinct problems so far
        self._ordinals = weakref.WeakKeyDictionary()  # module -> its place in first-call order (1-based)
        self._t_start = None  # perf_counter at the current iteration's first convolution
        self._auto = auto_iterations
        self._explicit = False
        self.trace = Trace(stable_after=stable_after or 0)
        try:
            import torch
            self.trace.torch_version = torch.__version__
        except ImportError:
            pass
        self._current = []
        self._first = None  # (weakref to the first forward's module or weight, index in that module's call)
        self._last_backward = False
        self._mode = None
        self._lock = threading.RLock()  # calls arrive from every thread that runs convolutions
        self._closed = False
        self._tls = threading.local()  # per thread: the stack of [module, convolutions so far] being called
        self._undo = []

    # Iterations -----------------------------------------------------------------------------
    def mark_iteration(self):
        """Starts a new iteration (and turns the automatic boundaries off)."""
        with self._lock:
            self._explicit = True
            self.trace.boundary = ("marks",)
            self._flush()
            self._enough()

    def _flush(self, last=False):
        if self._current:
            fresh = {c.problem for c in self._current} - self._seen
            self._seen |= fresh
            self.trace.new_problems.append(len(fresh))
            self.trace.iterations.append(self._current)
            now = time.perf_counter()
            self.trace.wall_ms.append(None if last or self._t_start is None else (now - self._t_start) * 1e3)
            self._t_start = now if not last else None
        self._current = []

    def _call_site(self, weight):
        """(object, index) naming a forward convolution across iterations: the innermost module
        being called on this thread and how many convolutions it ran before this one in this
        call; outside any module, the weight tensor itself. Held by weak reference and compared
        by identity: an address reused after a free never matches."""
        stack = getattr(self._tls, "stack", None)
        if stack:
            entry = stack[-1]
            entry[1] += 1
            return entry[0], entry[1] - 1
        return weight, 0

    def _boundary(self, backward, weight):
        if backward:
            self._last_backward = True
            return
        obj, index = self._call_site(weight)
        if self._explicit or not self._auto:
            return
        if self._first is None:
            try:
                self._first = (weakref.ref(obj), index)
            except TypeError:  # not weak-referenceable: no automatic boundary from it
                self._first = (lambda: None, index)
            ordinal = self._ordinals.get(obj) if not _is_tensor(obj) else None
            self.trace.boundary = ("module", ordinal) if ordinal else None
        elif self._current and (self._last_backward or (self._first[0]() is obj and self._first[1] == index)):
            self._flush()
            self._last_backward = False
            self._enough()
        self._last_backward = False

    def _enough(self):
        n = len(self.trace.iterations)
        if self._max is not None and n >= self._max:
            self._closed = True
            raise StopCapture(f"{self._max} iterations captured")
        if self._stable and n >= self._stable and not any(self.trace.new_problems[n - self._stable:]):
            self._closed = True
            raise StopCapture(f"no new problem in the last {self._stable} iterations")

    def _module_enter(self, module, _inputs):
        if module not in self._ordinals:
            self._ordinals[module] = len(self._ordinals) + 1
        stack = getattr(self._tls, "stack", None)
        if stack is None:
            stack = self._tls.stack = []
        stack.append([module, 0])

    def _module_exit(self, module, _inputs, _output):
        stack = getattr(self._tls, "stack", None)
        # Pop up to this module: entries above it are calls that raised (no exit hook ran).
        while stack:
            if stack.pop()[0] is module:
                break

    # Recording -------------------------------------------------------------------------------
    def _record(self, direction, x_shape, w, y_shape, stride, padding, dilation, groups, dtype, layout, device, transposed):
        nd = len(x_shape) - 2
        name = self._names.get(_weight_key(w), "")
        stride, padding, dilation = _expand(stride, nd), _expand(padding, nd), _expand(dilation, nd)
        try:
            p = _make_problem(direction, dtype, layout, int(x_shape[0]), int(x_shape[1]), int(w.shape[0]), int(groups),
                                       [int(s) for s in x_shape[2:]], [int(s) for s in w.shape[2:]], [int(s) for s in stride],
                                       [int(s) for s in dilation], [int(s) for s in padding], [int(s) for s in padding])
        except (ValueError, KeyError) as e:  # convtune.Error is a ValueError
            desc = f"{direction} x{list(x_shape)} w{list(w.shape)} stride {list(stride)} pad {list(padding)} dil {list(dilation)} groups {groups}"
            self.trace.skipped.append((desc, str(e)))
            return
        if tuple(p["y_shape"]) != tuple(int(s) for s in y_shape):
            self.trace.skipped.append((p["canonical"], f"PyTorch's output {list(y_shape)} differs from convtune's {p['y_shape']}"))
            return
        if not self._current and self._t_start is None:
            self._t_start = time.perf_counter()
        self._current.append(Call(p["canonical"], direction, _torch_flags(), device, name, transposed))

    def _on_forward(self, x, w, stride, padding, dilation, transposed, groups, out):
        with self._lock:
            if not self._closed:
                self._on_forward_locked(x, w, stride, padding, dilation, transposed, groups, out)

    def _on_backward(self, *args):
        with self._lock:
            if not self._closed:
                self._on_backward_locked(*args)

    def _on_forward_locked(self, x, w, stride, padding, dilation, transposed, groups, out):
        self._boundary(False, w)
        dtype = _DTYPES.get(str(x.dtype).replace("torch.", ""))
        if dtype is None:
            self.trace.skipped.append((f"convolution of {x.dtype} data", "convtune has no such data type"))
            return
        layout = _layout(x, w)
        if not transposed:
            self._record("fwd", x.shape, w, out.shape, stride, padding, dilation, groups, dtype, layout, x.device.type, False)
        else:
            # y = conv_transpose(x): the backward data of the convolution from y's shape to x's.
            self._record("bwd_data", out.shape, w, x.shape, stride, padding, dilation, groups, dtype, layout, x.device.type, True)

    def _on_backward_locked(self, dy, x, w, stride, padding, dilation, transposed, groups, mask):
        self._boundary(True, w)
        dtype = _DTYPES.get(str(x.dtype).replace("torch.", ""))
        if dtype is None:
            return
        layout = _layout(x, w)
        dev = x.device.type
        if not transposed:
            if mask[0]:
                self._record("bwd_data", x.shape, w, dy.shape, stride, padding, dilation, groups, dtype, layout, dev, False)
            if mask[1]:
                self._record("bwd_filter", x.shape, w, dy.shape, stride, padding, dilation, groups, dtype, layout, dev, False)
        else:
            # Transposed: x is the transposed op's input (the convolution's output); dy its
            # output's gradient (shaped like the convolution's input).
            if mask[0]:
                self._record("fwd", dy.shape, w, x.shape, stride, padding, dilation, groups, dtype, layout, dev, True)
            if mask[1]:
                self._record("bwd_filter", dy.shape, w, x.shape, stride, padding, dilation, groups, dtype, layout, dev, True)

    def __enter__(self):
        import torch
        try:
            from torch.utils._python_dispatch import TorchDispatchMode
        except ImportError as e:  # pragma: no cover - very old PyTorch
            raise RuntimeError(f"convtune.capture needs PyTorch >= 1.13 (TorchDispatchMode): {e}") from None

        recorder = self
        aten = torch.ops.aten
        conv, conv_bwd = aten.convolution.default, aten.convolution_backward.default

        class _Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                if func is conv or func is conv_bwd:
                    if kwargs:
                        names = [a.name for a in func._schema.arguments]
                        args = list(args) + [kwargs[n] for n in names[len(args):] if n in kwargs]
                    try:
                        if func is conv:
                            x, w, _bias, stride, padding, dilation, transposed, _output_padding, groups = args[:9]
                            recorder._on_forward(x, w, stride, padding, dilation, transposed, groups, out)
                        else:
                            dy, x, w, _bias_sizes, stride, padding, dilation, transposed, _output_padding, groups, mask = args[:11]
                            recorder._on_backward(dy, x, w, stride, padding, dilation, transposed, groups, mask)
                    except Exception as e:  # never break the program being recorded
                        recorder.trace.skipped.append((str(func), f"not recorded: {type(e).__name__}: {e}"))
                return out

        if Recorder._active is not None:
            raise RuntimeError("convtune.capture: a Recorder is already active")
        self._mode = _Mode()
        self._mode.__enter__()
        Recorder._active = self
        self._closed = False
        self._undo = []
        try:
            mm = torch.nn.modules.module
            self._undo += [mm.register_module_forward_pre_hook(self._module_enter).remove,
                           mm.register_module_forward_hook(self._module_exit).remove]
        except AttributeError:  # no global module hooks: call sites are weights only
            pass
        # The dispatch mode is per thread: threads started from now on enter one of their own.
        original_start = threading.Thread.start

        def start(thread, *args, **kwargs):
            if Recorder._active is recorder and not getattr(thread, "_convtune_recorded", False):
                run = thread.run

                def run_recorded():
                    with _Mode():
                        run()

                try:
                    thread.run = run_recorded
                    thread._convtune_recorded = True
                except AttributeError:  # a Thread subclass with __slots__: not recorded
                    pass
            return original_start(thread, *args, **kwargs)

        threading.Thread.start = start

        def restore_start():
            threading.Thread.start = original_start

        self._undo.append(restore_start)
        return self

    def __exit__(self, *exc):
        Recorder._active = None
        for undo in reversed(self._undo):
            undo()
        self._undo = []
        self._mode.__exit__(*exc)
        self._mode = None
        with self._lock:
            self._closed = True  # threads still running record nothing more
            self._flush(last=True)
        return False


def mark_iteration():
    """Starts a new iteration of the active capture, or a new step of a plain timing run (no
    effect when neither is active)."""
    if Recorder._active is not None:
        Recorder._active.mark_iteration()
    elif StepTimer._active is not None:
        StepTimer._active.mark_iteration()


def _is_tensor(obj):
    try:
        import torch
        return isinstance(obj, torch.Tensor)
    except ImportError:
        return False


class StepTimer:
    """A plain run's step clock: no dispatch mode, nothing intercepted but one module's
    forward pre-hook. A step starts at each call of the boundary module (the ``K``-th module
    object the program calls, as the capture found it) or at each mark_iteration(); at each
    start the GPU is synchronised and the host clock read. Raises StopCapture once ``steps``
    steps are complete. torch.backends.cudnn.benchmark is held at ``benchmark`` for the whole
    run (the program's own assignments are counted in ``benchmark_sets`` and ignored)."""

    _active = None

    def __init__(self, boundary, steps, benchmark=False):
        self._boundary = boundary
        self._steps = steps
        self._benchmark = bool(benchmark)
        self.starts = []  # perf_counter at each step start (after the synchronisation)
        self.benchmark_sets = 0
        self._seen = 0
        self._undo = []

    def wall_ms(self):
        return [(b - a) * 1e3 for a, b in zip(self.starts, self.starts[1:])]

    def mark_iteration(self):
        import torch

        if torch.cuda.is_initialized():
            torch.cuda.synchronize()
        self.starts.append(time.perf_counter())
        if len(self.starts) > self._steps:
            raise StopCapture(f"{self._steps} steps timed")

    def _first_calls(self, module, _inputs):
        self._seen += 1
        if self._seen == self._boundary[1]:
            # The boundary module: from now on only its own hook runs.
            self._undo.pop()()
            self._undo.append(module.register_forward_pre_hook(lambda _m, _i: self.mark_iteration()).remove)
            self.mark_iteration()

    def __enter__(self):
        import torch

        if StepTimer._active is not None or Recorder._active is not None:
            raise RuntimeError("convtune.capture: a capture or timing run is already active")
        cudnn_cls = type(torch.backends.cudnn)
        original = cudnn_cls.__dict__.get("benchmark")
        timer = self

        class _Held:
            def __get__(self, obj, objtype=None):
                return timer._benchmark

            def __set__(self, obj, value):
                timer.benchmark_sets += 1

        torch.backends.cudnn.benchmark = self._benchmark
        if original is not None:
            setattr(cudnn_cls, "benchmark", _Held())
            self._undo.append(lambda: setattr(cudnn_cls, "benchmark", original))
        if self._boundary[0] == "module":
            ordinals = weakref.WeakKeyDictionary()

            def first_calls(module, inputs):
                if module not in ordinals:
                    ordinals[module] = True
                    self._first_calls(module, inputs)

            self._undo.append(torch.nn.modules.module.register_module_forward_pre_hook(first_calls).remove)
        StepTimer._active = self
        return self

    def __exit__(self, *exc):
        StepTimer._active = None
        for undo in reversed(self._undo):
            undo()
        self._undo = []
        return False


@dataclass
class PlainTiming:
    """What time_plain() measured: per step, the median over the runs of its wall time (ms), for
    the cold (or only) state and, with warm_too, the warm one; each run's own wall times; how often
    the script set the benchmark flag (ignored)."""

    wall_ms: list
    benchmark_sets: int
    runs: list  # per run, its wall times
    warm_wall_ms: list = None
    warm_runs: list = None


def _median_per_step(runs):
    """Each step's median over the runs that timed it (runs may time different numbers of steps)."""
    n = max((len(r) for r in runs), default=0)
    out = []
    for i in range(n):
        v = sorted(r[i] for r in runs if i < len(r) and r[i] is not None)
        out.append(None if not v else (v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2))
    return out


def _steady(walls):
    """The median step after the first of one run's wall times, or None."""
    v = sorted(w for w in walls[1:] if w is not None)
    return v[len(v) // 2] if v else None


def time_plain(script, args, boundary, steps, benchmark=False, cold_kernel_cache=False, warm_too=False, runs=1):
    """Runs ``script`` in a fresh process with nothing intercepted and times its first ``steps``
    steps, each synchronised at its end (StepTimer); returns a PlainTiming. ``cold_kernel_cache``:
    the run starts with an empty CUDA kernel cache (a new folder), as a fresh container would.
    ``warm_too`` (with ``cold_kernel_cache``): a second fresh process then runs on the folder the
    first filled, as a job's next start does on the same machine. ``runs``: that many such runs
    (each cold one on a new folder of its own), each step's time the median over them: the same
    program's steps vary between identical processes (up to 2x on a host-bound network), and one
    process is a single draw."""
    import json
    import subprocess
    import tempfile

    if warm_too and not cold_kernel_cache:
        raise ValueError("time_plain: warm_too needs cold_kernel_cache (the warm run reuses the cold run's folder)")
    if runs < 1:
        raise ValueError("time_plain: runs must be >= 1")
    cold, warm, sets = [], [], 0
    with tempfile.TemporaryDirectory(prefix="convtune-plain-") as tmp:
        for r in range(runs):
            env = dict(os.environ)
            if cold_kernel_cache:
                env["CUDA_CACHE_PATH"] = os.path.join(tmp, f"kernel-cache-{r}")
                env.pop("CUDA_CACHE_DISABLE", None)
            for i in range(2 if warm_too else 1):
                out = os.path.join(tmp, f"steps{r}-{i}.json")
                cmd = [sys.executable, os.path.abspath(__file__), "--_plain-run", json.dumps(list(boundary)), "--_steps",
                       str(steps), "--_benchmark", str(int(bool(benchmark))), "-o", out, script] + list(args)
                p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
                if p.returncode != 0 or not os.path.exists(out):
                    raise RuntimeError(f"the plain timing run{' on the warm kernel cache' if i else ''}"
                                       f"{f' ({r + 1} of {runs})' if runs > 1 else ''} failed (exit {p.returncode}): "
                                       f"{p.stdout[-2000:]}")
                with open(out) as f:
                    doc = json.load(f)
                (warm if i else cold).append(doc["wall_ms"])
                sets = max(sets, doc["benchmark_sets"])
    return PlainTiming(wall_ms=_median_per_step(cold), benchmark_sets=sets, runs=cold,
                       warm_wall_ms=_median_per_step(warm) if warm_too else None, warm_runs=warm if warm_too else None)


def _plain_run(a):
    """The child process of time_plain()."""
    import json

    boundary = tuple(json.loads(a.plain_run))
    timer = StepTimer(boundary, a.steps, benchmark=a.benchmark)
    run_script(a.script, a.args, timer)
    _write_text(a.out, json.dumps({"wall_ms": timer.wall_ms(), "benchmark_sets": timer.benchmark_sets}) + "\n")
    return 0


def _loss(out):
    """A scalar that depends on every floating-point tensor the model returned."""
    import torch

    if isinstance(out, torch.Tensor):
        return out.float().sum() if out.is_floating_point() else None
    items = out.values() if isinstance(out, dict) else out if isinstance(out, (list, tuple)) else []
    total = None
    for o in items:
        s = _loss(o)
        if s is not None:
            total = s if total is None else total + s
    return total


def capture(model, example_inputs, train=True, iterations=1, path=None, timing="plain"):
    """Runs ``model(*example_inputs)`` ``iterations`` times and records its convolutions.

    timing="plain" (default): the step wall times come from ``iterations`` plain steps run
    first, with nothing intercepted, benchmark off and the GPU synchronised at each step's end (the
    first pays the process's first calls as a job's first step does); timing="capture": from the
    captured steps themselves, slowed by the capture.

    train=True: model.train(), forward, then backward of the sum of the outputs (what a training
    step's convolutions are; no optimizer step). train=False: model.eval() under torch.no_grad().
    The model's mode, buffers (BatchNorm statistics) and gradients are restored afterwards.
    example_inputs: a tensor or a tuple of the model's positional arguments. Layer names come from
    model.named_modules(). Writes the trace to ``path`` when given; returns the Trace.
    """
    import torch

    inputs = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    names = {}
    for name, mod in model.named_modules():
        w = getattr(mod, "weight", None)
        if isinstance(mod, torch.nn.modules.conv._ConvNd) and isinstance(w, torch.Tensor):
            names[_weight_key(w)] = name or type(mod).__name__
    was_training = model.training
    buffers = {k: v.detach().clone() for k, v in model.named_buffers()}
    grads = {p: p.grad for p in model.parameters()}
    if timing not in ("plain", "capture"):
        raise ValueError(f"timing: must be 'plain' or 'capture' (got {timing!r})")
    rec = Recorder(names=names, auto_iterations=False)

    def step():
        if train:
            loss = _loss(model(*inputs))
            if loss is None:
                raise ValueError("capture(train=True): the model returned no floating-point tensor to differentiate")
            loss.backward()
        else:
            with torch.no_grad():
                model(*inputs)

    def sync():
        if torch.cuda.is_initialized():
            torch.cuda.synchronize()

    plain = []
    try:
        model.train(train)
        if timing == "plain":
            saved = torch.backends.cudnn.benchmark
            torch.backends.cudnn.benchmark = False
            try:
                sync()
                for _ in range(iterations):
                    t = time.perf_counter()
                    step()
                    sync()
                    plain.append((time.perf_counter() - t) * 1e3)
            finally:
                torch.backends.cudnn.benchmark = saved
        with rec:
            for i in range(iterations):
                if i:
                    rec.mark_iteration()
                step()
    finally:
        model.train(was_training)
        with torch.no_grad():
            for k, v in model.named_buffers():
                if k in buffers:
                    v.copy_(buffers[k])
        for p, g in grads.items():
            p.grad = g
    rec.trace.source = type(model).__name__ + (" training" if train else " inference")
    if timing == "plain":
        rec.trace.wall_ms = plain[:len(rec.trace.iterations)]
        rec.trace.timing = {"source": "plain", "benchmark": 0, "kernel_cache": None}
    if path is not None:
        rec.trace.write(path)
    return rec.trace


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="python3 -m convtune.capture",
        description="Run a PyTorch script and record the convolutions it runs into a trace for "
                    "`convtune simulate --stream trace:FILE`.")
    ap.add_argument("-o", "--out", default="convtune.trace", help="trace file to write (default: %(default)s)")
    ap.add_argument("--no-auto-iterations", action="store_true",
                    help="do not split iterations automatically (only at convtune.capture.mark_iteration() calls)")
    ap.add_argument("--max-iterations", type=int, metavar="N",
                    help="end the script once N iterations are complete (their wall times are all known)")
    ap.add_argument("--stable-after", type=int, metavar="K",
                    help="end the script once K iterations in a row brought no problem not seen before (the stream is "
                         "whole); with --max-iterations, whichever comes first")
    ap.add_argument("--timing", choices=["plain", "capture"], default="plain",
                    help="plain (default): the steps' wall times come from a second, plain run of the script (nothing "
                         "intercepted, benchmark off, the GPU synchronised at each step's end) over the iterations "
                         "captured; capture: from the captured run, which the capture slows")
    ap.add_argument("--cold-kernel-cache", action="store_true",
                    help="the plain run starts with an empty CUDA kernel cache (a new folder), and the trace says so")
    ap.add_argument("--warm-out", metavar="FILE",
                    help="with --cold-kernel-cache: a second plain run then starts on the kernel cache the first "
                         "filled, and FILE gets the trace with its wall times (a job started again on the same "
                         "machine: no kernel compiled again)")
    ap.add_argument("--timing-runs", type=int, default=1, metavar="K",
                    help="time the steps in K plain runs (fresh processes; with --cold-kernel-cache each on a new "
                         "kernel cache, and with --warm-out each again on the cache it filled), each step's wall time "
                         "the median over them (default %(default)s): identical processes can differ by up to 2x on a "
                         "network bound by the host")
    ap.add_argument("--_plain-run", dest="plain_run", help=argparse.SUPPRESS)
    ap.add_argument("--_steps", dest="steps", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--_benchmark", dest="benchmark", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("script", help="the Python script to run")
    ap.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")
    a = ap.parse_args(argv)
    if a.plain_run is not None:
        return _plain_run(a)
    if not os.path.isfile(a.script):
        ap.error(f"script '{a.script}' does not exist")
    if (why := _output_problem(a.out)) is not None:
        ap.error(f"-o: {why}")
    try:
        import torch  # noqa: F401
    except ImportError as e:
        print(f"convtune.capture: error: PyTorch is not importable: {e}", file=sys.stderr)
        return 2

    if a.max_iterations is not None and a.max_iterations < 1:
        ap.error("--max-iterations: must be >= 1")
    if a.stable_after is not None and a.stable_after < 1:
        ap.error("--stable-after: must be >= 1")
    if a.timing_runs < 1:
        ap.error("--timing-runs: must be >= 1")
    if a.timing_runs > 1 and a.timing != "plain":
        ap.error("--timing-runs: applies to the plain timing runs only (--timing plain)")
    if a.cold_kernel_cache and a.timing != "plain":
        ap.error("--cold-kernel-cache: applies to the plain timing run only (--timing plain)")
    if a.warm_out is not None:
        if not a.cold_kernel_cache:
            ap.error("--warm-out: needs --cold-kernel-cache (the warm run reuses the kernel cache the cold one filled)")
        if (why := _output_problem(a.warm_out)) is not None:
            ap.error(f"--warm-out: {why}")
        if os.path.abspath(a.warm_out) == os.path.abspath(a.out):
            ap.error("--warm-out: must differ from -o")
    rec = Recorder(auto_iterations=not a.no_auto_iterations, max_iterations=a.max_iterations, stable_after=a.stable_after)
    failed = True
    try:
        status = run_script(a.script, a.args, rec)
        failed = False
    finally:
        warm = None
        if not failed and a.timing == "plain" and rec.trace.calls():
            warm = _time_plain_into(rec.trace, a)
        _finish(rec.trace, a, failed)
        if warm is not None:
            warm.source = rec.trace.source
            warm.write(a.warm_out)
            print(f"convtune.capture: the same trace timed on a warm kernel cache -> {a.warm_out}", file=sys.stderr)
        elif a.warm_out is not None and rec.trace.calls():
            print(f"convtune.capture: warning: no warm timing, {a.warm_out} not written", file=sys.stderr)
    return status if rec.trace.calls() else (status or 1)


def _runs_note(runs):
    """The trace's line on how its steps were timed over several plain runs, or None for one."""
    if len(runs) < 2:
        return None
    each = [_steady(r) for r in runs]
    each = [e for e in each if e is not None]
    if not each or min(each) <= 0:
        return None
    return (f"plain runs: {len(runs)} processes, each step's wall time the median over them; the median step after the "
            f"first in each: {', '.join(f'{e:.3f}' for e in each)} ms ({max(each) / min(each):.2f}x from the fastest to "
            f"the slowest)")


def _time_plain_into(trace, a):
    """Replaces the trace's wall times by those of plain runs (time_plain), and notes the capture's
    overhead; with --warm-out, returns the trace timed by plain runs on the kernel caches the first
    ones filled (else None). Where the plain run cannot find the steps, keeps the capture's,
    saying so."""
    n = len(trace.iterations)
    if trace.boundary is None:
        print("convtune.capture: warning: the first convolution ran outside any nn.Module, so a plain run cannot find where "
              "steps start; the wall times are the capture's (slowed by it: an upper bound). Call "
              "convtune.capture.mark_iteration() at the start of each step to fix this.", file=sys.stderr)
        return None
    warm_too = a.warm_out is not None
    runs = a.timing_runs
    print(f"convtune.capture: timing {n} steps in {'a plain run' if runs == 1 else f'{runs} plain runs'} of "
          f"{os.path.basename(a.script)} (nothing intercepted, benchmark off"
          f"{', an empty CUDA kernel cache' if a.cold_kernel_cache else ''})"
          + (", each then again on the kernel cache it filled" if warm_too else ""), file=sys.stderr, flush=True)
    try:
        timed = time_plain(a.script, a.args, trace.boundary, n, benchmark=False, cold_kernel_cache=a.cold_kernel_cache,
                           warm_too=warm_too, runs=runs)
    except RuntimeError as e:
        print(f"convtune.capture: warning: {e}; the wall times are the capture's (an upper bound)", file=sys.stderr)
        return None
    walls, sets = timed.wall_ms, timed.benchmark_sets
    if not walls or (warm_too and not timed.warm_wall_ms):
        print("convtune.capture: warning: the plain run timed no complete step; the wall times are the capture's",
              file=sys.stderr)
        return None
    captured = [w for w in trace.wall_ms[1:] if w is not None]
    c, p = _steady([None] + captured), _steady(walls)
    if c is not None and p:
        note = (f"capture overhead: the median step after the first took {c:.3f} ms under the capture and {p:.3f} ms "
                f"in the plain run{'s' if runs > 1 else ''} ({c / p:.2f}x)")
        trace.notes.append(note)
        print(f"convtune.capture: {note}", file=sys.stderr)
    if sets:
        trace.notes.append(f"the script set torch.backends.cudnn.benchmark {sets} time(s); the plain run kept it off")
    warm_notes = list(trace.notes)
    for notes, state_runs in ((trace.notes, timed.runs), (warm_notes, timed.warm_runs or [])):
        if (note := _runs_note(state_runs)) is not None:
            notes.append(note)
    for state_runs, label in ((timed.runs, ""), (timed.warm_runs or [], " (warm kernel cache)")):
        each = [e for e in map(_steady, state_runs) if e is not None]
        if len(each) > 1 and max(each) > 1.25 * min(each):
            print(f"convtune.capture: warning: the step after the first took {min(each):.3f} to {max(each):.3f} ms in "
                  f"identical plain processes{label}: this machine's own spread, which every total predicted from one "
                  "trace carries", file=sys.stderr)
    trace.wall_ms = (walls + [None] * n)[:n]
    trace.timing = {"source": "plain", "benchmark": 0, "kernel_cache": "cold" if a.cold_kernel_cache else None}
    if not warm_too:
        return None
    return dataclasses.replace(trace, wall_ms=(timed.warm_wall_ms + [None] * n)[:n], notes=warm_notes,
                               timing={"source": "plain", "benchmark": 0, "kernel_cache": "warm"})


def run_script(script, args, recorder):
    """Runs ``script`` with ``args`` as ``python3 script args`` would, under ``recorder`` (a
    Recorder) and returns its exit status. An exception the script raises propagates once the
    recorder is closed (the trace of what ran stays in recorder.trace); a StopCapture
    (max_iterations reached) ends it with status 0."""
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [script] + list(args)
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    status = 0
    try:
        with recorder:
            try:
                runpy.run_path(script, run_name="__main__")
            except StopCapture:
                pass  # --max-iterations reached: the script was ended on purpose
            except SystemExit as e:
                # As Python exits: None is 0, an int its status, anything else is printed to
                # stderr and exits 1.
                if e.code is None:
                    status = 0
                elif isinstance(e.code, int):
                    status = e.code
                else:
                    print(e.code, file=sys.stderr, flush=True)
                    status = 1
    finally:
        sys.argv, sys.path = saved_argv, saved_path
    return status


def _finish(trace, a, failed):
    trace.source = os.path.basename(a.script)
    n = len(trace.calls())
    if n == 0:
        print(f"convtune.capture: error: {a.script} ran no convolution; no trace written", file=sys.stderr)
        return
    trace.write(a.out)
    distinct, last, its, growing = trace.coverage()
    print(f"convtune.capture: coverage: {distinct} distinct problems, the last new one in iteration {last} of {its}"
          + (" (stopped: none new in the last %d)" % trace.stable_after if trace.stable_after and not growing else ""),
          file=sys.stderr)
    if growing:
        print("convtune.capture: warning: new problems were still appearing when the capture ended: the stream may not be "
              "whole (run more iterations, or raise --stable-after / --max-iterations)", file=sys.stderr)
    print(f"convtune.capture: {n} convolutions in {len(trace.iterations)} iterations "
          f"({len(set(trace.problems()))} distinct problems) -> {a.out}"
          + (" (the script failed: the trace ends where it stopped)" if failed else "")
          + (f"; {len(trace.skipped)} skipped (see the file's comments)" if trace.skipped else ""), file=sys.stderr)
    print(f"convtune.capture: replay with: convtune simulate --stream trace:{a.out}", file=sys.stderr)


if __name__ == "__main__":
    # Run the package's module, not this __main__ copy, so that the script's
    # convtune.capture.mark_iteration() reaches the active Recorder. A standalone copy (no
    # convtune package) runs itself; iterations are then split automatically.
    if __package__:
        from convtune.capture import main as _main
    else:
        _main = main
    sys.exit(_main())
