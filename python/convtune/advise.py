"""Does ``torch.backends.cudnn.benchmark = True`` pay for this script, on this GPU? One command:

    python3 -m convtune.advise [--iterations N] [--kernel-cache cold|warm|both] script.py [args...]

1. captures the script's convolutions (``convtune.capture``, in its own process) until the set of
   distinct problems has stopped growing for ``--stable-after`` iterations (default 20) or
   ``--capture-iterations`` are done (default 200), whichever comes first, and reports the coverage
   (a warning when new problems were still appearing); then times those steps in plain runs of
   the script (nothing intercepted, benchmark off, an empty CUDA kernel cache, the GPU
   synchronised at each step's end; ``--timing-runs`` processes, default 3, each step's time the
   median over them), so that the capture's own overhead is in no total;
2. measures PyTorch itself on this GPU for those problems (``pytorch_measure.py grid``: benchmark
   off and on, cold and warm CUDA kernel cache, a fresh process each; only cold with
   ``--kernel-cache cold``);
3. where this convtune has the cuDNN backend, records convtune's own algorithms on the same
   problems (``convtune record``), so that convtune's policies are compared too;
4. simulates N iterations (default 1000) with ``convtune simulate`` and prints the report, the
   recommendation and, with ``--plot``, the plot.

It prints how long each step is expected to take and shows progress; a step that runs past
``--timeout`` seconds (default 3600; a script that never finishes a step, say) is stopped with a
message. The convtune executable is
found through ``--cli``, ``$CONVTUNE_CLI`` or ``PATH``. Everything it writes goes to ``--keep DIR``
(default: a temporary folder, removed at the end).
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _say(msg):
    print(f"convtune.advise: {msg}", file=sys.stderr, flush=True)


def _run(cmd, what, timeout=None, **kw):
    t = time.time()
    # Its own process group, so that a stop at the timeout also ends what it started (the capture's
    # plain timing run, PyTorch's measurement processes).
    with subprocess.Popen(cmd, start_new_session=True, **kw) as p:
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            raise SystemExit(f"convtune.advise: {what} did not finish within --timeout {timeout:g} s and was stopped "
                             f"(a script that never completes a step?): {' '.join(map(str, cmd))}")
        except BaseException:
            os.killpg(p.pid, signal.SIGKILL)
            raise
    if p.returncode != 0:
        raise SystemExit(f"convtune.advise: {what} failed (exit {p.returncode}): {' '.join(map(str, cmd))}")
    _say(f"{what}: done in {time.time() - t:.1f} s")
    return p


def _find_cli(given):
    for c in (given, os.environ.get("CONVTUNE_CLI"), shutil.which("convtune")):
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def _cudnn_available(cli):
    p = subprocess.run([cli, "list", "--json"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    if p.returncode != 0:
        return False
    try:
        return any(b.get("name") == "cudnn" and b.get("available") for b in json.loads(p.stdout)["backends"])
    except (ValueError, AttributeError, KeyError, TypeError):
        return False


def _trace_flags(trace):
    """The torch.backends.cudnn flags of the trace's first `# flags` line (a dict of ints)."""
    with open(trace) as f:
        for line in f:
            if line.startswith("# flags "):
                return {k: int(v) for k, v in (kv.split("=") for kv in line.split()[2].split(","))}
    return {}


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m convtune.advise", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iterations", "-n", type=int, default=1000, help="iterations your job runs (default %(default)s)")
    ap.add_argument("--capture-iterations", type=int, default=200,
                    help="iterations of the script to capture at most (default %(default)s)")
    ap.add_argument("--stable-after", type=int, default=20,
                    help="stop capturing once this many iterations in a row brought no new problem (default %(default)s)")
    ap.add_argument("--timeout", type=float, default=3600,
                    help="seconds each step (the capture, the measurements, the simulation) may take (default %(default)s)")
    ap.add_argument("--kernel-cache", choices=["cold", "warm", "both"],
                    help="the CUDA kernel cache your job starts with: cold (e.g. a fresh container), warm, or both (default; "
                         "CUDA only: PyTorch's CPU convolutions have none)")
    ap.add_argument("--runs", type=int, default=2, help="fresh processes per PyTorch setting and cache state (default %(default)s)")
    ap.add_argument("--timing-runs", type=int, default=3,
                    help="plain runs of the script that time its steps, per cache state; each step's time is the median "
                         "over them (default %(default)s: identical processes can differ by up to 2x where the host bounds "
                         "the step)")
    ap.add_argument("--cli", help="the convtune executable (default: $CONVTUNE_CLI, then PATH)")
    ap.add_argument("--plot", help="write the plot of the cumulative time here (SVG)")
    ap.add_argument("--keep", help="keep the trace, measurements and recording in this folder")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                    help="cpu: measure PyTorch's CPU convolutions instead (no cuDNN involved: only to try the pipeline)")
    ap.add_argument("script")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    if min(a.iterations, a.capture_iterations, a.runs, a.stable_after, a.timing_runs) < 1:
        ap.error("--iterations, --capture-iterations, --stable-after, --runs and --timing-runs must be >= 1")
    if not a.timeout > 0:
        ap.error("--timeout: must be > 0 seconds")
    if not os.path.isfile(a.script):
        ap.error(f"script '{a.script}' does not exist")
    cli = _find_cli(a.cli)
    if cli is None:
        ap.error("the convtune executable was not found: pass --cli, set CONVTUNE_CLI, or put convtune on PATH")
    try:
        import torch
    except ImportError as e:
        ap.error(f"PyTorch is not importable: {e}")
    if a.device == "cuda" and not torch.cuda.is_available():
        ap.error("no CUDA GPU is visible to PyTorch: advise measures this GPU, so it needs one")
    if a.device == "cpu" and a.kernel_cache:
        ap.error("--kernel-cache: the CUDA kernel cache does not apply to --device cpu")
    # states: the cache states reported; caches: those measured. A warm measurement needs the cold
    # one before it (it is the second process on the cache folder the cold one filled); on the CPU
    # one fresh process per setting.
    if a.device == "cpu":
        states = caches = ["cold"]
    else:
        states = [a.kernel_cache] if a.kernel_cache in ("cold", "warm") else ["cold", "warm"]
        caches = ["cold"] if states == ["cold"] else ["cold", "warm"]

    work = a.keep or tempfile.mkdtemp(prefix="convtune-advise-")
    os.makedirs(work, exist_ok=True)
    trace, problems = os.path.join(work, "script.trace"), os.path.join(work, "problems.json")
    # The steps' wall times per kernel-cache state: the plain run on an empty kernel cache, and a
    # second one on the cache it filled (warm: a job's first step then compiles nothing).
    traces = {"cold": trace, "warm": os.path.join(work, "script-warm.trace")}
    measured, recording = os.path.join(work, "pytorch.json"), os.path.join(work, "convtune-cudnn.json")
    try:
        _say(f"step 1/4: running {a.script} to capture its convolutions until no new problem appears for "
             f"{a.stable_after} iterations (at most {a.capture_iterations}), then timing those steps in "
             + ("a plain run" if a.timing_runs == 1 else f"{a.timing_runs} plain runs")
             + (" on an empty kernel cache and again on the cache it filled" if a.device == "cuda" and "warm" in states else ""))
        capture = [sys.executable, os.path.join(HERE, "capture.py"), "--max-iterations", str(a.capture_iterations),
                   "--stable-after", str(a.stable_after), "--timing", "plain", "--timing-runs", str(a.timing_runs)]
        if a.device == "cuda":
            capture.append("--cold-kernel-cache")
            if "warm" in states:
                capture += ["--warm-out", traces["warm"]]
        _run(capture + ["-o", trace, a.script] + a.args, "capture", timeout=a.timeout)
        with open(problems, "w") as f:
            _run([cli, "parse", "--json", trace], "problem list", timeout=a.timeout, stdout=f)
        with open(problems) as f:
            n = len({p["key"] for p in json.load(f)["problems"]})
        flags = _trace_flags(trace)
        procs = 2 * a.runs * len(caches)
        # A fresh process costs a few seconds; a problem's first call with benchmark on about
        # 40 ms warm (fp32) to 400 ms cold (fp16, runtime-compiled kernels).
        _say(f"step 2/4: measuring PyTorch on the {n} distinct problems: {procs} fresh processes, "
             f"about {procs * 5 + a.runs * n * 0.5:.0f} s to {procs * 5 + a.runs * n * 2:.0f} s")
        _run([sys.executable, os.path.join(HERE, "pytorch_measure.py"), "grid", "--problems", problems,
              "--allow-tf32", str(flags.get("allow_tf32", 1)), "--runs", str(a.runs), "--caches", ",".join(caches),
              "--device", a.device,
              "--out", measured], "PyTorch measurements", timeout=a.timeout)
        replay = []
        if a.device == "cuda" and _cudnn_available(cli):
            _say(f"step 3/4: recording convtune's cuDNN algorithms on the {n} problems (about {n * 0.3:.0f} s)")
            _run([cli, "record", "--backend", "cudnn", "--stream", "trace:" + trace, "--progress", "--out", recording],
                 "convtune recording", timeout=a.timeout)
            replay = ["--replay", recording]
        elif a.device == "cpu":
            _say("step 3/4: skipped on --device cpu: only PyTorch's own settings are compared")
        else:
            _say("step 3/4: skipped: this convtune has no usable cuDNN backend, so only PyTorch's own settings are compared")
        _say("step 4/4: simulating")
        for state in states:
            timed = traces[state] if os.path.exists(traces[state]) else trace
            cmd = [cli, "simulate", "--stream", "trace:" + timed, "--iterations", str(a.iterations),
                   "--pytorch-measured", measured, "--kernel-cache", state] + replay
            if a.plot:
                root, ext = os.path.splitext(a.plot)
                cmd += ["--plot", a.plot if len(states) == 1 else f"{root}-{state}{ext or '.svg'}"]
            print("\n== PyTorch's CPU convolutions (no kernel cache) ==" if a.device == "cpu" else f"\n== {state} CUDA kernel cache ==",
                  flush=True)
            _run(cmd, f"simulation ({state} kernel cache)", timeout=a.timeout)
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            _say(f"kept in {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
