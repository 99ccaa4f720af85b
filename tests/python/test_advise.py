"""python3 -m convtune.advise end to end on the CPU (--device cpu: PyTorch's CPU convolutions
stand in for the GPU, so the pipeline — capture, PyTorch measurements, simulation — is exercised
without one), and its refusals. Needs PyTorch (Debian's python3-torch)."""

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed: advise cannot be tested")

SCRIPT = """
import torch
m = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(8, 8, 3, stride=2))
for step in range(100000):
    m(torch.randn(2, 3, 12, 12)).sum().backward()
print("the script ran to its end")
"""


def advise(cli, *args):
    env = dict(os.environ, CONVTUNE_CLI=cli.path)
    return subprocess.run([sys.executable, "-m", "convtune.advise", *map(str, args)], capture_output=True, text=True,
                          timeout=900, env=env)


def test_advise_runs_the_whole_pipeline(cli, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    keep = tmp_path / "kept"
    r = advise(cli, "--device", "cpu", "--runs", "1", "--iterations", "50", "--capture-iterations", "2", "--keep", keep, script)
    assert r.returncode == 0, r.stderr
    assert "the script ran to its end" not in r.stdout
    for step in ("step 1/4", "step 2/4", "step 3/4", "step 4/4"):
        assert step in r.stderr
    # The report, once (the CPU has no kernel cache): both measured rows, and a recommendation.
    assert r.stdout.count("== PyTorch's CPU convolutions (no kernel cache) ==") == 1 and "CUDA kernel cache" not in r.stdout
    assert r.stdout.count("measured: PyTorch itself") == 2
    assert "recommendation:" in r.stdout
    # The measurements cover exactly the captured problems (5 distinct: 2 forward, 1 bwd_data, 2 bwd_filter - the
    # first layer has no bwd_data), with both settings, one fresh process each.
    problems = json.loads((keep / "problems.json").read_text())["problems"]
    grid = json.loads((keep / "pytorch.json").read_text())
    keys = {p["key"] for p in problems}
    assert len(keys) == 5
    assert sorted((m["name"], m["cache"]) for m in grid["measurements"]) == [("bm0", "cold"), ("bm1", "cold")]
    for m in grid["measurements"]:
        assert {p["key"] for p in m["problems"]} == keys
    lines = (keep / "script.trace").read_text().splitlines()
    walls = [line for line in lines if line.startswith("# iteration")]
    assert len(walls) == 2 and all("wall_ms" in w for w in walls)
    # the steps timed in the default 3 plain runs, said in step 1 and in the trace
    assert "then timing those steps in 3 plain runs" in r.stderr
    assert sum(line.startswith("# plain runs: 3 processes") for line in lines) == 1


def test_advise_refusals(cli, tmp_path):
    r = advise(cli, "--device", "cpu", tmp_path / "missing.py")
    assert r.returncode == 2 and "does not exist" in r.stderr
    script = tmp_path / "s.py"
    script.write_text(SCRIPT)
    r = advise(cli, "--device", "cpu", "--runs", "0", script)
    assert r.returncode == 2 and "--runs" in r.stderr
    r = advise(cli, "--device", "cpu", "--timing-runs", "0", script)
    assert r.returncode == 2 and "--timing-runs must be >= 1" in r.stderr
    r = advise(cli, "--device", "cpu", "--kernel-cache", "cold", script)
    assert r.returncode == 2 and "--kernel-cache: the CUDA kernel cache does not apply to --device cpu" in r.stderr
    env = dict(os.environ, CONVTUNE_CLI="", PATH="/nonexistent")
    r = subprocess.run([sys.executable, "-m", "convtune.advise", "--device", "cpu", str(script)], capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 2 and "convtune executable was not found" in r.stderr
