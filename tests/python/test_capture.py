"""convtune.capture: PyTorch's convolutions, forward and backward, recorded as a trace that
`convtune simulate --stream trace:FILE` replays. Needs PyTorch (Debian's python3-torch)."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed: capture cannot be tested")
nn = torch.nn

import convtune  # noqa: E402
from convtune.capture import Recorder, capture  # noqa: E402


def small_net():
    """conv-bn-relu x3: a plain 3x3 conv, a strided one and a grouped one."""
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
        nn.Conv2d(32, 32, 3, padding=1, groups=4, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
    )


def layer_problems(model, x_shape, direction):
    """The convtune problem of each Conv layer, computed from the layer's own attributes and the
    shape flowing through the network (independently of the capture code)."""
    out = []
    shape = list(x_shape)
    for name, m in model.named_modules():
        if isinstance(m, nn.Conv2d):
            p = convtune.problem(shape, m.weight.shape, stride=m.stride, padding=m.padding, dilation=m.dilation, groups=m.groups,
                                 direction=direction)
            out.append((name, p["canonical"]))
            shape = p["y_shape"]
    return out


def expected_training_step(model, x_shape):
    """Forward in layer order; backward in reverse order, bwd_data then bwd_filter per layer, and
    no bwd_data for the first layer (the input needs no gradient) — what PyTorch runs."""
    fwd = [p for _, p in layer_problems(model, x_shape, "fwd")]
    bd = [p for _, p in layer_problems(model, x_shape, "bwd_data")]
    bf = [p for _, p in layer_problems(model, x_shape, "bwd_filter")]
    back = []
    for i in reversed(range(len(fwd))):
        if i > 0:
            back.append(bd[i])
        back.append(bf[i])
    return fwd + back


def test_training_capture_matches_the_layers(tmp_path):
    model = small_net()
    x = torch.randn(2, 3, 32, 32)
    bn_before = model[1].running_mean.clone()
    trace = capture(model, x, train=True, iterations=2, path=tmp_path / "net.trace")
    expected = expected_training_step(model, x.shape)
    assert len(expected) == 3 + 5
    assert len(trace.iterations) == 2
    assert trace.problems(0) == expected and trace.problems(1) == expected
    assert [c.layer for c in trace.iterations[0][:3]] == ["0", "3", "6"]
    assert [c.direction for c in trace.iterations[0]] == ["fwd"] * 3 + ["bwd_data", "bwd_filter"] * 2 + ["bwd_filter"]
    assert trace.skipped == []
    # capture() leaves the model as it found it.
    assert torch.equal(model[1].running_mean, bn_before) and model[0].weight.grad is None and model.training
    # The file is a trace the simulator reads: same problems, two iterations.
    text = (tmp_path / "net.trace").read_text()
    assert text.startswith("# convtune-trace 1\n")
    lines = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    assert lines == expected * 2
    assert "# flags enabled=1,benchmark=0," in text


def test_inference_capture():
    model = small_net()
    trace = capture(model, torch.randn(1, 3, 20, 24), train=False, iterations=3)
    assert len(trace.iterations) == 3
    assert trace.problems(2) == [p for _, p in layer_problems(model, (1, 3, 20, 24), "fwd")]
    assert not model[1].running_mean.any()  # eval + no_grad: statistics untouched


def test_replay_with_convtune_simulate(cli, tmp_path):
    model = small_net()
    path = tmp_path / "net.trace"
    capture(model, torch.randn(2, 3, 16, 16), train=True, iterations=2, path=path)
    r = cli("simulate", "--stream", f"trace:{path}", "--iterations", "4", "--flags", "off",
            "--flags", "on:benchmark=1,search_budget_ms=5", "--json", check=0)
    doc = json.loads(r.stdout)
    off, on = doc["settings"]
    assert [i["calls"] for i in off["per_iteration"]] == [8, 8, 8, 8]
    assert off["distinct_shapes"] == 8 and off["misses"] == 8 and off["hits"] == 24
    assert on["searches"] == 8
    # The Python API replays a Trace object directly.
    trace = capture(model, torch.randn(2, 3, 16, 16), train=True)
    sim = convtune.simulate(trace=trace, iterations=2, flags="off")
    assert sim["settings"][0]["calls"] == 16


class Mixed(nn.Module):
    """1-D, 3-D, functional, dilated and transposed convolutions."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.c1 = nn.Conv1d(4, 6, 5, stride=2, padding=2, dilation=1)
        self.c3 = nn.Conv3d(2, 4, 3, padding=(1, 0, 1), dilation=(1, 1, 2))
        self.up = nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1)
        self.w = nn.Parameter(torch.randn(8, 4, 3, 3) * 0.1)

    def forward(self, a, b, c):
        y1 = self.c1(a)
        y3 = self.c3(b)
        y2 = torch.nn.functional.conv2d(c, self.w, padding=2, dilation=2)
        return y1.sum() + y3.sum() + self.up(y2).sum()


def test_functional_1d_3d_and_transposed():
    m = Mixed()
    a, b, c = torch.randn(2, 4, 33), torch.randn(1, 2, 5, 6, 9), torch.randn(1, 4, 7, 7)
    trace = capture(m, (a, b, c), train=True)
    (calls,) = trace.iterations
    got = [(c.direction, c.transposed, c.problem.split(",layout=")[1].split(",")[0]) for c in calls]
    assert got[:4] == [("fwd", False, "ncw"), ("fwd", False, "ncdhw"), ("fwd", False, "nchw"), ("bwd_data", True, "nchw")]
    assert sorted(got[4:]) == sorted([("fwd", True, "nchw"), ("bwd_filter", True, "nchw"),  # up: grad input, grad weight
                                      ("bwd_filter", False, "nchw"), ("bwd_filter", False, "ncdhw"), ("bwd_filter", False, "ncw")])
    # The transposed convolution's forward is the bwd_data of the recorded problem: convtune
    # computes exactly PyTorch's output from it.
    up = calls[3]
    p = convtune.parse_problem(up.problem)
    y2 = torch.nn.functional.conv2d(c, m.w, padding=2, dilation=2).detach()
    ref = torch.nn.functional.conv_transpose2d(y2, m.up.weight.detach(), stride=2, padding=1, output_padding=1)
    assert list(ref.shape) == p["x_shape"]
    got_dx = convtune.conv_backward_data(p["x_shape"], m.up.weight.detach().numpy(), y2.numpy(), stride=p["stride"], padding=p["pad"])
    np.testing.assert_allclose(got_dx, ref.numpy(), rtol=1e-4, atol=1e-4)


def test_flags_are_recorded_at_each_call():
    model = small_net()
    x = torch.randn(1, 3, 8, 8)
    saved = torch.backends.cudnn.benchmark
    try:
        with Recorder(auto_iterations=False) as rec:
            model(x)
            torch.backends.cudnn.benchmark = True
            model(x)
    finally:
        torch.backends.cudnn.benchmark = saved
    calls = rec.trace.calls()
    assert [c.flags["benchmark"] for c in calls] == [saved] * 3 + [True] * 3
    text = rec.trace.text()
    assert text.count("# flags ") == (2 if not saved else 1)


SCRIPT = """
import sys
import torch
from torch import nn
torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, stride=2, padding=1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
steps = int(sys.argv[1])
for step in range(steps):
    x = torch.randn(4, 3, 16, 16)
    loss = model(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("trained", steps)
"""


def test_python_m_capture_runs_a_script(cli, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(SCRIPT))
    out = tmp_path / "train.trace"
    r = subprocess.run([sys.executable, "-m", "convtune.capture", "-o", str(out), str(script), "3"],
                       capture_output=True, text=True, timeout=600, env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    assert "trained 3" in r.stdout
    assert "convtune.capture: 15 convolutions in 3 iterations (5 distinct problems)" in r.stderr
    text = out.read_text()
    assert text.count("# iteration ") == 3
    doc = json.loads(cli("simulate", "--stream", f"trace:{out}", "--iterations", "3", "--flags", "off", "--json", check=0).stdout)
    assert [i["calls"] for i in doc["settings"][0]["per_iteration"]] == [5, 5, 5]


SHARED = """
import torch, convtune.capture
from torch import nn
torch.manual_seed(0)
conv = nn.Conv2d(4, 4, 3, padding=1)  # used twice per step: the automatic boundaries would split here
for step in range(2):
    convtune.capture.mark_iteration()
    x = torch.randn(1, 4, 8, 8)
    conv(torch.relu(conv(x))).sum().backward()
"""


def test_mark_iteration_in_a_script(tmp_path):
    script = tmp_path / "shared.py"
    script.write_text(textwrap.dedent(SHARED))
    out = tmp_path / "shared.trace"
    r = subprocess.run([sys.executable, "-m", "convtune.capture", "-o", str(out), str(script)], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    # Per step: 2 fwd, then bwd_data + bwd_filter of the second use, bwd_filter of the first.
    assert "convtune.capture: 10 convolutions in 2 iterations" in r.stderr, r.stderr


def test_python_m_capture_errors(tmp_path):
    r = subprocess.run([sys.executable, "-m", "convtune.capture", str(tmp_path / "nope.py")], capture_output=True, text=True)
    assert r.returncode == 2 and "does not exist" in r.stderr
    empty = tmp_path / "empty.py"
    empty.write_text("print('no convolutions here')\n")
    r = subprocess.run([sys.executable, "-m", "convtune.capture", "-o", str(tmp_path / "e.trace"), str(empty)],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "ran no convolution" in r.stderr and not (tmp_path / "e.trace").exists()


def run_capture(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "convtune.capture", *map(str, args)], capture_output=True, text=True, timeout=600,
                          cwd=cwd)


CONV_THEN_EXIT = """
import sys, torch
torch.nn.functional.conv2d(torch.randn(1, 2, 6, 6), torch.randn(3, 2, 3, 3))
sys.exit({code})
"""


def test_sys_exit_with_a_message_prints_it_and_exits_1(tmp_path):
    script = tmp_path / "exits.py"
    out = tmp_path / "exits.trace"
    for code, status, printed in [('"training diverged at step 3"', 1, "training diverged at step 3"), ("4", 4, None),
                                  ("None", 0, None)]:
        script.write_text(CONV_THEN_EXIT.format(code=code))
        r = run_capture("-o", out, script)
        assert r.returncode == status, (code, r.stderr)
        lines = r.stderr.splitlines()
        if printed is not None:
            assert printed in lines, r.stderr  # printed on a line of its own, as Python does
        assert "convtune.capture: 1 convolutions in 1 iterations" in r.stderr
        assert out.read_text().count("dir=fwd,") == 1


def test_convolutions_in_worker_threads_are_recorded():
    import threading
    from concurrent.futures import ThreadPoolExecutor

    conv = nn.Conv2d(2, 4, 3)
    x = torch.randn(1, 2, 8, 8)
    start = threading.Thread.start
    with Recorder(auto_iterations=False) as rec:
        conv(x)  # this thread
        t = threading.Thread(target=lambda: conv(torch.randn(1, 2, 10, 10)))
        t.start()
        t.join()
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(lambda n: conv(torch.randn(n, 2, 8, 8)).sum().backward(), [2, 3]))
    assert threading.Thread.start is start  # put back on exit
    problems = rec.trace.problems()
    assert problems[:2] == [convtune.problem((1, 2, 8, 8), (4, 2, 3, 3))["canonical"],
                            convtune.problem((1, 2, 10, 10), (4, 2, 3, 3))["canonical"]]
    # The pool's two forward + two bwd_filter calls (the inputs need no gradient).
    rest = sorted(problems[2:])
    assert rest == sorted(convtune.problem((n, 2, 8, 8), (4, 2, 3, 3), direction=d)["canonical"]
                          for n in (2, 3) for d in ("fwd", "bwd_filter")), problems
    # After the recorder: threads are not recorded any more.
    t = threading.Thread(target=lambda: conv(x))
    t.start()
    t.join()
    assert len(rec.trace.calls()) == 6


THREADED_SCRIPT = """
import threading, torch
def work():
    torch.nn.functional.conv2d(torch.randn(1, 2, 6, 6), torch.randn(3, 2, 3, 3))
t = threading.Thread(target=work); t.start(); t.join()
"""


def test_python_m_capture_records_a_scripts_threads(tmp_path):
    script = tmp_path / "threaded.py"
    script.write_text(THREADED_SCRIPT)
    r = run_capture("-o", tmp_path / "t.trace", script)
    assert r.returncode == 0 and "convtune.capture: 1 convolutions in 1 iterations" in r.stderr, r.stderr


MARKER = """
import pathlib, torch
pathlib.Path({marker!r}).write_text("ran")
torch.nn.functional.conv2d(torch.randn(1, 2, 6, 6), torch.randn(3, 2, 3, 3))
"""


def test_output_is_checked_before_the_script_runs(tmp_path):
    marker = tmp_path / "ran.txt"
    script = tmp_path / "marks.py"
    script.write_text(MARKER.format(marker=str(marker)))
    (tmp_path / "adir").mkdir()
    cases = [(tmp_path / "adir", "is a directory"), ("/dev/null", "not a regular file"),
             (tmp_path / "missing" / "x.trace", "does not exist")]
    for out, message in cases:
        r = run_capture("-o", out, script)
        assert r.returncode == 2, (out, r.stderr)
        assert "error: -o: " in r.stderr and message in r.stderr, r.stderr
        assert not marker.exists(), f"the script ran before -o {out} was refused"
    assert os.path.exists("/dev/null") and not os.path.isfile("/dev/null")
    # A regular file (or nothing) is fine, and is replaced.
    (tmp_path / "old.trace").write_text("old")
    r = run_capture("-o", tmp_path / "old.trace", script)
    assert r.returncode == 0 and marker.exists(), r.stderr
    assert (tmp_path / "old.trace").read_text().startswith("# convtune-trace 1\n")


def test_output_in_an_unwritable_folder_is_refused_before_the_script_runs(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("running as root, which may write in any folder: an unwritable folder cannot be made")
    marker = tmp_path / "ran.txt"
    script = tmp_path / "marks.py"
    script.write_text(MARKER.format(marker=str(marker)))
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        r = run_capture("-o", locked / "x.trace", script)
    finally:
        locked.chmod(0o700)
    assert r.returncode == 2 and "error: -o: cannot write in the folder" in r.stderr, r.stderr
    assert not marker.exists()


REUSED = """
import torch
from torch import nn

# A caching allocator (CUDA's) hands a freed block to the next request of its size at once; this
# block stands for it, deterministically: every temporary weight below lives at its address.
BLOCK = torch.empty(4 * 4 * 3 * 3)


class Scaled(nn.Module):
    # A convolution whose weight is computed at each call (as weight normalization does) into
    # memory freed after the call, which the next layer's weight reuses.
    def __init__(self):
        super().__init__()
        self.v = nn.Parameter(torch.randn(4, 4, 3, 3))

    def forward(self, x):
        w = torch.empty(0).set_(BLOCK.storage(), 0, (4, 4, 3, 3))  # a new tensor at the reused address
        torch.mul(self.v, 0.5, out=w)
        return nn.functional.conv2d(x, w, padding=1)


torch.manual_seed(0)
model = nn.Sequential(Scaled(), Scaled(), Scaled())
with torch.no_grad():
    for step in range(3):
        model(torch.randn(1, 4, 8, 8))
"""


def test_iterations_are_not_split_when_a_freed_weights_address_is_reused(tmp_path):
    """Every layer's weight has the first layer's address (and shape): an iteration used to end at
    each layer (9 iterations of 1). The module called, compared by identity, marks them."""
    script = tmp_path / "reused.py"
    script.write_text(REUSED)
    r = run_capture("-o", tmp_path / "r.trace", script)
    assert r.returncode == 0, r.stderr
    assert "convtune.capture: 9 convolutions in 3 iterations" in r.stderr, r.stderr


def test_iterations_outside_modules_follow_the_weight_object():
    """Functional calls outside any module: the first weight object (not its address) marks the
    iteration; a temporary weight never starts one."""
    w0, w1 = torch.randn(4, 4, 3, 3), torch.randn(4, 4, 3, 3)
    x = torch.randn(1, 4, 8, 8)
    with torch.no_grad(), Recorder() as rec:
        for _ in range(3):
            y = torch.nn.functional.conv2d(x, w0, padding=1)
            y = torch.nn.functional.conv2d(y, w1 * 1.0, padding=1)  # a temporary: freed at once
            torch.nn.functional.conv2d(y, w1 * 1.0, padding=1)
    assert [len(it) for it in rec.trace.iterations] == [3, 3, 3]


ENDLESS = """
import time, torch
m = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Conv2d(8, 4, 3))
for step in range(100000):
    m(torch.randn(2, 3, 12, 12)).sum().backward()
    time.sleep(0.03)
print("ran to the end")
"""


def test_max_iterations_ends_the_script_and_every_iteration_has_its_wall_time(tmp_path):
    script = tmp_path / "endless.py"
    script.write_text(ENDLESS)
    out = tmp_path / "e.trace"
    r = run_capture("--max-iterations", 3, "-o", out, script)
    assert r.returncode == 0, r.stderr
    assert "ran to the end" not in r.stdout
    walls = [line.split() for line in out.read_text().splitlines() if line.startswith("# iteration ")]
    assert len(walls) == 3
    for w in walls:
        assert w[3] == "wall_ms"
        # each step sleeps 30 ms after its convolutions: the wall time is the whole step's
        assert 30.0 <= float(w[4]) < 10000.0


def test_warm_out_times_the_steps_again_on_the_kernel_cache_the_first_run_filled(cli, tmp_path):
    script = tmp_path / "endless.py"
    script.write_text(ENDLESS)
    cold, warm = tmp_path / "cold.trace", tmp_path / "warm.trace"
    r = run_capture("--max-iterations", 3, "--cold-kernel-cache", "--warm-out", warm, "-o", cold, script)
    assert r.returncode == 0, r.stderr
    cold_lines, warm_lines = cold.read_text().splitlines(), warm.read_text().splitlines()
    assert "# timing plain benchmark=0 kernel_cache=cold" in cold_lines
    assert "# timing plain benchmark=0 kernel_cache=warm" in warm_lines
    # the same problems in the same iterations; only the wall times (two separate plain runs) differ
    strip = lambda lines: [line for line in lines if not line.startswith(("# iteration ", "# timing "))]
    assert strip(cold_lines) == strip(warm_lines)
    for lines in (cold_lines, warm_lines):
        walls = [float(line.split()[4]) for line in lines if line.startswith("# iteration ")]
        assert len(walls) == 3 and all(30.0 <= w < 10000.0 for w in walls)
    # the simulator reads the warm trace, and its report says how the steps were timed
    rep = cli("simulate", "--stream", f"trace:{warm}", "--iterations", "5", "--json", check=0)
    assert '"timing_kernel_cache":"warm"' in rep.stdout.replace(" ", "")


# Each process of the script sleeps its own time per step (argv[2], seconds, comma-separated), by
# the order the processes start in (a counter file): the capture's own run first, then the plain
# runs. The sleeps are far apart: a loaded machine adds up to a few hundred ms to a step.
PER_PROCESS = """
import os, sys, time, torch
counter, delays = sys.argv[1], [float(d) for d in sys.argv[2].split(",")]
n = int(open(counter).read()) if os.path.exists(counter) else 0
open(counter, "w").write(str(n + 1))
delay = delays[n] if n < len(delays) else 0.01
m = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Conv2d(8, 4, 3))
for step in range(100000):
    m(torch.randn(2, 3, 12, 12)).sum().backward()
    time.sleep(delay)
"""


def test_timing_runs_time_each_step_as_the_median_over_identical_processes(tmp_path):
    script, counter = tmp_path / "per_process.py", tmp_path / "counter"
    script.write_text(PER_PROCESS)
    out = tmp_path / "t.trace"
    r = run_capture("--max-iterations", 4, "--timing-runs", 3, "-o", out, script, counter, "0.01,1.5,0.03,0.2")
    assert r.returncode == 0, r.stderr
    assert counter.read_text() == "4"  # the capture's run and three plain ones
    lines = out.read_text().splitlines()
    walls = [float(line.split()[4]) for line in lines if line.startswith("# iteration ")]
    assert len(walls) == 4
    # the plain runs slept 1500, 30 and 200 ms a step: every step's median is the 200 ms run's
    # step (their mean would be over 576 ms)
    for w in walls[1:]:
        assert 200.0 <= w < 500.0, walls
    note = [line for line in lines if line.startswith("# plain runs: 3 processes")]
    assert len(note) == 1, lines[:12]
    each = sorted(float(x) for x in note[0].split("in each: ")[1].split(" ms")[0].split(", "))
    assert 30.0 <= each[0] < 200.0 <= each[1] < 1500.0 <= each[2], each
    assert "warning: the step after the first took" in r.stderr and "identical plain processes" in r.stderr


def test_timing_runs_with_warm_out_time_each_state_over_its_own_runs(tmp_path):
    script, counter = tmp_path / "per_process.py", tmp_path / "counter"
    script.write_text(PER_PROCESS)
    cold, warm = tmp_path / "cold.trace", tmp_path / "warm.trace"
    r = run_capture("--max-iterations", 3, "--timing-runs", 2, "--cold-kernel-cache", "--warm-out", warm, "-o", cold,
                    script, counter, "0.01,0.6,0.01,0.2,0.03")
    assert r.returncode == 0, r.stderr
    # capture, then (cold, warm) per run: the cold runs slept 600 and 200 ms, the warm ones 10 and 30 ms
    assert counter.read_text() == "5"
    med = lambda path: [float(line.split()[4]) for line in path.read_text().splitlines() if line.startswith("# iteration ")]
    assert all(400.0 <= w < 900.0 for w in med(cold)[1:]), med(cold)  # (600 + 200) / 2
    assert all(20.0 <= w < 350.0 for w in med(warm)[1:]), med(warm)   # (10 + 30) / 2
    for path in (cold, warm):
        assert sum(line.startswith("# plain runs: 2 processes") for line in path.read_text().splitlines()) == 1


def test_timing_runs_are_refused_below_one_or_without_plain_timing(tmp_path):
    script = tmp_path / "endless.py"
    script.write_text(ENDLESS)
    r = run_capture("--max-iterations", 2, "--timing-runs", 0, "-o", tmp_path / "c.trace", script)
    assert r.returncode == 2 and "--timing-runs: must be >= 1" in r.stderr
    r = run_capture("--max-iterations", 2, "--timing", "capture", "--timing-runs", 2, "-o", tmp_path / "c.trace", script)
    assert r.returncode == 2 and "--timing-runs: applies to the plain timing runs only" in r.stderr


def test_warm_out_is_refused_without_a_cold_kernel_cache_or_onto_the_trace(tmp_path):
    script = tmp_path / "endless.py"
    script.write_text(ENDLESS)
    r = run_capture("--max-iterations", 2, "--warm-out", tmp_path / "w.trace", "-o", tmp_path / "c.trace", script)
    assert r.returncode == 2 and "--warm-out: needs --cold-kernel-cache" in r.stderr
    r = run_capture("--max-iterations", 2, "--cold-kernel-cache", "--warm-out", tmp_path / "c.trace", "-o", tmp_path / "c.trace",
                    script)
    assert r.returncode == 2 and "--warm-out: must differ from -o" in r.stderr
    assert not (tmp_path / "w.trace").exists() and not (tmp_path / "c.trace").exists()


def test_the_last_iteration_of_a_finished_script_has_no_wall_time(tmp_path):
    script = tmp_path / "short.py"
    script.write_text(ENDLESS.replace("range(100000)", "range(2)"))
    out = tmp_path / "s.trace"
    r = run_capture("-o", out, script)
    assert r.returncode == 0, r.stderr
    marks = [line for line in out.read_text().splitlines() if line.startswith("# iteration ")]
    assert len(marks) == 2
    assert "wall_ms" in marks[0] and "wall_ms" not in marks[1]


def test_max_iterations_must_be_positive(tmp_path):
    script = tmp_path / "endless.py"
    script.write_text(ENDLESS)
    r = run_capture("--max-iterations", 0, "-o", tmp_path / "x.trace", script)
    assert r.returncode == 2 and "--max-iterations" in r.stderr
