"""python3 -m convtune.torch warm [--db F] [--policy P] [--device D] [--backend B] script.py [args...]

Runs the script under convtune.capture's recorder (its convolutions run as PyTorch runs them),
then tunes every distinct convolution it ran (forward and both backward directions, with the
flags each ran under and benchmark on) into the tuning database, one line of progress each, so
that a later ``convtune.torch.enable(db=F)`` run with torch.backends.cudnn.benchmark = True finds
every decision there and searches nothing. Transposed convolutions are skipped (convtune.torch
leaves them to PyTorch). Exit status: the script's when it failed, 2 for bad arguments, else 0.

python3 -m convtune.torch build-override [--force]

Compiles convtune.torch's C++ override for the torch this interpreter imports into the cache
folder ($CONVTUNE_CACHE_DIR, else $XDG_CACHE_HOME/convtune) and prints the built file's path:
ahead of time, on a machine with a compiler, for nodes that share the cache folder and have none.
Exit status 2 when it cannot be built (the compiler's first error lines on stderr).
"""

import argparse
import json
import os
import sys

from .. import _convtune
from .._tools import _tune_text
from ..capture import Recorder, run_script
from . import _DEVICES, _POLICIES, flag_values


def warm_calls(trace, device):
    """The distinct (problem, flags) pairs of a capture's calls on ``device`` (transposed ones
    left out), in first-call order."""
    seen = {}
    for c in trace.calls():
        if c.transposed or not c.device.startswith(device):
            continue
        key = (c.problem, tuple(sorted(c.flags.items())))
        seen.setdefault(key, c)
    return list(seen.values())


def warm(trace, db, policy="convtune", device="cuda", backend=None, out=sys.stderr):
    """Tunes the capture's distinct convolutions into ``db``; returns (tuned, searched, total search ms)."""
    backend = backend or _DEVICES[device][1]
    calls = warm_calls(trace, device)
    searched, total_ms = 0, 0.0
    for i, c in enumerate(calls, 1):
        flags = dict(_convtune.current_flags())
        flags.update(flag_values(c.flags, policy))
        flags["benchmark"] = True
        if flags.get("workspace_limit") is None:
            flags.pop("workspace_limit", None)
        rep = json.loads(_tune_text([c.problem], backend=backend, policy=policy, flags=flags, db=db))
        p = rep["problems"][0]
        searched += p["source"] == "search"
        total_ms += p["search_ms"]
        print(f"convtune.torch warm: [{i}/{len(calls)}] {c.problem} -> {p['algorithm']} ({p['source']}, "
              f"{p['search_ms']:.1f} ms)", file=out, flush=True)
    return len(calls), searched, total_ms


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m convtune.torch", description="convtune.torch's tools")
    sub = ap.add_subparsers(dest="command", required=True)
    w = sub.add_parser("warm", help="run a script, then tune the convolutions it ran into the tuning database")
    w.add_argument("--db", default=None, help="tuning database (default: $CONVTUNE_DB)")
    w.add_argument("--policy", default="convtune", choices=_POLICIES)
    w.add_argument("--device", default=None, choices=sorted(_DEVICES),
                   help="the convolutions to tune (default: cuda when PyTorch sees a GPU, else cpu)")
    w.add_argument("--backend", default=None, help="convtune backend (default: cudnn for cuda, cpu for cpu)")
    w.add_argument("script")
    w.add_argument("args", nargs=argparse.REMAINDER)
    b = sub.add_parser("build-override", help="compile convtune.torch's C++ override for this torch into the cache folder")
    b.add_argument("--force", action="store_true", help="compile again even when the cache has a valid build")
    a = ap.parse_args(argv)
    if a.command == "build-override":
        return build_override(a.force)
    db = a.db if a.db is not None else os.environ.get("CONVTUNE_DB", "")
    if not db:
        ap.error("--db: no tuning database (give --db or set CONVTUNE_DB)")
    if not os.path.isfile(a.script):
        ap.error(f"script '{a.script}' does not exist")
    import torch

    device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    rec = Recorder()
    status = run_script(a.script, a.args, rec)
    if status != 0:
        print(f"convtune.torch warm: {a.script} exited with status {status}; nothing tuned", file=sys.stderr)
        return status
    try:
        n, searched, ms = warm(rec.trace, db, a.policy, device, a.backend)
    except _convtune.Error as e:
        print(f"convtune.torch warm: error: {e}", file=sys.stderr)
        return 2
    if n == 0:
        print(f"convtune.torch warm: {a.script} ran no {device} convolution; nothing tuned", file=sys.stderr)
        return 1
    print(f"convtune.torch warm: {n} convolutions, {searched} searched ({ms:.0f} ms), {n - searched} already in {db}",
          file=sys.stderr)
    return 0


def build_override(force=False):
    import time

    from . import _build

    t0 = time.monotonic()
    try:
        path = _build.build(force=force)
    except _convtune.Error as e:
        print(f"convtune.torch build-override: error: {e}", file=sys.stderr)
        return 2
    print(f"convtune.torch build-override: {time.monotonic() - t0:.1f} s", file=sys.stderr)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
