"""convtune.tune and convtune.simulate: the CLI's `tune --json` and `simulate --json` as functions
returning the same documents as plain Python data. Both run convtune's application layer
(convtune::app), which writes the JSON text the CLI prints; these functions parse it. Their
arguments, once checked here, go to it by name: each is a field of the request's one table in C++
(app/include/convtune/app/fields.hpp), which the binding maps them through.
Errors name the arguments (``shapes_dir: ...``) where the CLI names its options (``--shapes-dir``)."""

import json
import os
import tempfile

from . import _convtune
from ._args import INT64_MAX, INT_MAX, UINT64_MAX, to_int


def _opt_str(name, v):
    if v is None:
        return ""
    if not isinstance(v, str):
        raise TypeError(f"{name} must be a str, got {type(v).__name__}")
    return v


def _path(name, v):
    """None -> "" (not given); a str or path -> its text, which must not be empty: "" is refused as
    the CLI refuses --replay "" (else it would silently mean "not given")."""
    if v is None:
        return ""
    if not isinstance(v, (str, os.PathLike)):
        raise TypeError(f"{name} must be a str or a path, got {type(v).__name__}")
    v = os.fspath(v)
    if v == "":
        raise _convtune.Error(f"{name}: must not be empty")
    return v


def _list_str(name, v):
    """None, a comma-separated string or a sequence of numbers -> the CLI's list syntax."""
    if v is None:
        return ""
    if isinstance(v, str):
        return v
    try:
        return ",".join(repr(x) if isinstance(x, float) else str(int(x)) for x in v)
    except TypeError:
        raise TypeError(f"{name} must be a str or a sequence of numbers, got {type(v).__name__}") from None


def _int(name, v, default=0, minimum=1, maximum=INT64_MAX):
    """None -> default; else v checked by the one int rule (convtune._args.to_int)."""
    return default if v is None else to_int(name, v, minimum, maximum)


def _words(name, v, path=False):
    """None, a comma-separated string or a sequence of strings (or paths) -> the CLI's list syntax."""
    if v is None:
        return ""
    if isinstance(v, str) or (path and isinstance(v, os.PathLike)):
        return os.fspath(v)
    if not isinstance(v, (list, tuple)):
        raise TypeError(f"{name} must be a str or a list of str, got {type(v).__name__}")
    out = []
    for x in v:
        if not (isinstance(x, str) or (path and isinstance(x, os.PathLike))):
            raise TypeError(f"{name} must be a str or a list of str, got a list holding {type(x).__name__}")
        out.append(os.fspath(x))
    return ",".join(out)


def _ints(name, v):
    """None, an int, a comma-separated string or a sequence of ints -> the CLI's list syntax."""
    if v is None or isinstance(v, str):
        return v or ""
    if isinstance(v, (list, tuple)):
        return ",".join(str(to_int(name, x, 1, INT64_MAX)) for x in v)
    return str(to_int(name, v, 1, INT64_MAX))


def _tune_text(problems=None, *, shapes=None, workload=None, mode=None, shapes_dir=None, backend="cpu", policy=None, flags=None,
               db=None, batch=None, dir=None, dtype=None, layout=None):
    """tune()'s JSON text, byte for byte what ``convtune tune --json`` prints."""
    if problems is None:
        plist = []
    elif isinstance(problems, str):
        plist = [problems]
    else:
        plist = list(problems)
        for p in plist:
            if not isinstance(p, str):
                raise TypeError(f"problems must be strings, got {type(p).__name__}")
    return _convtune.tune(**{
        "problems": plist, "shapes": _opt_str("shapes", shapes and os.fspath(shapes)),
        "workload": _words("workload", workload, path=True), "mode": _opt_str("mode", mode),
        "shapes_dir": _opt_str("shapes_dir", shapes_dir and os.fspath(shapes_dir)), "backend": backend,
        "policy": _opt_str("policy", policy), "flags": flags, "db": None if db is None else os.fspath(db),
        "batch": _ints("batch", batch), "dir": _opt_str("dir", dir), "dtype": _words("dtype", dtype),
        "layout": _opt_str("layout", layout)})


def tune(problems=None, *, shapes=None, workload=None, mode=None, shapes_dir=None, backend="cpu", policy=None, flags=None, db=None,
         batch=None, dir=None, dtype=None, layout=None):
    """Choose an algorithm for each problem and explain the choice, like ``convtune tune --json``.

    problems: one problem string (canonical or benchdnn) or a list of them; or ``shapes``: a shape
    file; or ``workload``: networks (built-in names such as "resnet50", shape or workload files;
    a list or a comma-separated string), their distinct problems, in ``mode`` "infer" (forward,
    the default) or "train" (forward, backward data and backward filter), the built-in names'
    files in ``shapes_dir`` (default: $CONVTUNE_SHAPES_DIR or the installed folder).
    ``batch`` (an int or a list of them) and ``dtype`` (a str or a list of them): every problem at
    each batch size and in each data type; a problem shared by several networks is tuned once.
    Flags start from the defaults with benchmark=1 (as in the CLI), then ``policy``
    ("pytorch", "pytorch-v7", "convtune", "adaptive", "incremental"), then
    ``flags`` ("key=value,..." or a dict).
    ``db``: tuning database file (default: $CONVTUNE_DB; none when unset).
    Returns {"format", "backend", "flags", "problems": [{"problem", "name", "algorithm", "source", "search_ms",
    "median_ms", "key", "candidates": [...]}, ...], "total_search_ms", "from_database", "not_tuned": [{"problem",
    "name", "reason"}, ...]}: a problem nothing could run is named in not_tuned, the others are tuned.
    """
    return json.loads(_tune_text(problems, shapes=shapes, workload=workload, mode=mode, shapes_dir=shapes_dir, backend=backend,
                                 policy=policy, flags=flags, db=db, batch=batch, dir=dir, dtype=dtype, layout=layout))


def _simulate_text(workload=None, *, stream="fixed", trace=None, iterations=None, mode=None, batch=None, batches=None,
                   scales=None, dtype=None, layout=None, seed=1, flags=None, compare=False, backend=None, replay=None, strict=False,
                   min_saving=0.02, shapes_dir=None, plot=None, repeats=None, pytorch_measured=None, kernel_cache=None):
    """simulate()'s JSON text, byte for byte what ``convtune simulate --json`` prints."""
    tmp = None
    try:
        if trace is not None:
            if hasattr(trace, "write"):
                fd, tmp = tempfile.mkstemp(prefix="convtune-trace-", suffix=".txt")
                os.close(fd)
                trace.write(tmp)
                path = tmp
            else:
                path = os.fspath(trace)
            stream = "trace:" + path
        if isinstance(flags, str):
            flags = [flags]
        flag_list = [] if flags is None else list(flags)
        for f in flag_list:
            if not isinstance(f, str):
                raise TypeError(f"flags must be strings, got {type(f).__name__}")
        iterations = _int("iterations", iterations, 0, 1, INT_MAX)
        return _convtune.simulate(**{
            "workload": _opt_str("workload", workload and os.fspath(workload)),
            "shapes_dir": _opt_str("shapes_dir", shapes_dir), "stream": stream, "iterations": iterations,
            "mode": _opt_str("mode", mode), "batch": _int("batch", batch, minimum=1),
            "batches": _list_str("batches", batches), "scales": _list_str("scales", scales),
            "dtype": _opt_str("dtype", dtype), "layout": _opt_str("layout", layout),
            "seed": _int("seed", seed, 1, 0, UINT64_MAX), "flags": flag_list, "compare": bool(compare),
            "backend": _opt_str("backend", backend), "replay": _path("replay", replay), "strict": bool(strict),
            "min_saving": float(min_saving), "plot": _path("plot", plot),
            "repeats": _int("repeats", repeats, 0, 1, INT_MAX),
            "pytorch_measured": _path("pytorch_measured", pytorch_measured),
            "kernel_cache": _opt_str("kernel_cache", kernel_cache)})
    finally:
        if tmp is not None:
            os.unlink(tmp)


def simulate(workload=None, *, stream="fixed", trace=None, iterations=None, mode=None, batch=None, batches=None, scales=None,
             dtype=None, layout=None, seed=1, flags=None, compare=False, backend=None, replay=None, strict=False, min_saving=0.02,
             shapes_dir=None, plot=None, repeats=None, pytorch_measured=None, kernel_cache=None):
    """Replay a workload's iterations under flag settings, like ``convtune simulate --json``.

    workload: a built-in name ("resnet50", ...), a shape file or a workload file; not needed for a
    trace. stream: "fixed", "batch", "resolution", "mixed" or "trace:FILE"; ``trace`` is a
    shortcut: a trace file path, or a convtune.capture.Trace. flags: a setting name ("off", "on",
    "on+det", "adaptive", "pytorch", "incremental"), "LABEL:key=value,..." or a list of them; the six standard
    settings when none is given or with compare=True. backend: run live on that backend (default
    cpu); replay: a recording from `convtune record` to replay instead, or a name of the recording
    library ("h200"; `convtune list recordings`); problems the recording lacks are estimated (and
    counted, with a range on every total) unless strict=True, which refuses them. A library name
    whose folder holds PyTorch's own measurements ("h100") takes the off and pytorch settings from
    them; pytorch_measured: a measurement file (pytorch_measure.py grid) instead; kernel_cache:
    "cold" or "warm" (default warm), the CUDA kernel cache those measurements start with. batches/scales:
    lists or comma-separated strings. plot: also write the SVG plot to this file. iterations:
    default the trace's length, else 100. mode: "infer" (default) or "train". On a trace, the flags
    it records are the baseline each setting changes only the named flags of, and mode, batch,
    batches, scales, dtype, layout and shapes_dir are refused (its problems are written out whole).
    repeats: runs of each setting in rotated order (default 3 live, 1 on a replay); a difference
    inside their spread never decides the recommendation.
    Returns the CLI's JSON document as a dict ("format", settings, totals, per-iteration series,
    comparisons and the recommendation).
    """
    return json.loads(_simulate_text(workload, stream=stream, trace=trace, iterations=iterations, mode=mode, batch=batch,
                                     batches=batches, scales=scales, dtype=dtype, layout=layout, seed=seed, flags=flags,
                                     compare=compare, backend=backend, replay=replay, strict=strict, min_saving=min_saving,
                                     shapes_dir=shapes_dir, plot=plot, repeats=repeats, pytorch_measured=pytorch_measured,
                                     kernel_cache=kernel_cache))
