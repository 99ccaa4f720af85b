"""convtune: convolution algorithms and the autotuning behind ``torch.backends.cudnn.benchmark``.

    import convtune
    convtune.backends.cudnn.benchmark = True          # PyTorch's flags, PyTorch's names
    y = convtune.conv(x, w, padding=1)                 # NumPy in, NumPy out, the flags apply
    with convtune.backends.cudnn.flags(deterministic=True):
        dx = convtune.conv_backward_data(x.shape, w, dy, padding=1)
    report = convtune.tune("n=32,c=64,k=64,in=56x56,ker=3x3,pad=1x1")
    sim = convtune.simulate(workload="resnet50", stream="resolution", iterations=50)

``python3 -m convtune.capture script.py`` records the convolutions a PyTorch program runs into a
trace file for ``convtune simulate --stream trace:FILE`` (see convtune.capture).
Bad input raises :class:`convtune.Error` (a ValueError) with the CLI's message; a size or other
int of the wrong type raises :class:`convtune.ArgumentTypeError` (both an Error and a TypeError).
"""

from . import _paths

_paths.set_default_env()  # an installed package's shape files, unless CONVTUNE_SHAPES_DIR is set
from . import _convtune
from ._convtune import Error

Error.__module__ = "convtune"
from ._args import ArgumentTypeError

ArgumentTypeError.__module__ = "convtune"
from . import backends
from ._conv import conv, conv_backward_data, conv_backward_filter, problem, parse_problem
from ._tools import tune, simulate

__version__ = _convtune.version()

__all__ = [
    "Error",
    "ArgumentTypeError",
    "backends",
    "conv",
    "conv_backward_data",
    "conv_backward_filter",
    "problem",
    "parse_problem",
    "tune",
    "simulate",
    "version",
    "build_info",
    "list_backends",
]


def version():
    """convtune's version string, e.g. '0.1.0' (build_info()["version"])."""
    return _convtune.build_info()["version"]


def build_info():
    """What this build is, as `convtune --version` prints it (one C++ build_info()): ``version``,
    ``arch`` (the -march value, "" = portable), ``isa`` (instruction sets the code was compiled
    for), ``cpu_levels`` (the instruction-set levels the CPU algorithms are compiled for: baseline,
    x86-64-v3, x86-64-v4), ``cpu_level`` (the one they run at: the highest this CPU has, or the
    lower one CONVTUNE_CPU_ISA names), ``backends`` (compiled in, available here or not), ``compiler``, and ``text``."""
    return _convtune.build_info()


def list_backends():
    """The backends compiled into this build: a list of dicts with name, available, reason,
    library, device, driver (when available) and the ids of their algorithms."""
    return _convtune.backends()
