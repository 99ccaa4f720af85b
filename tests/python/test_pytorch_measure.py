"""pytorch_measure.py grid on the CPU (PyTorch's CPU convolutions stand in for the GPU): each
measurement runs in its own process with the kernel cache the grid gives it. Needs PyTorch
(Debian's python3-torch)."""

import json
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed")

PROBLEM = {"key": "n=1,c=2,k=2,in=5x5,ker=3x3", "dir": "fwd", "dtype": "f32", "layout": "nchw", "n": 1, "c": 2, "k": 2,
           "groups": 1, "in": [5, 5], "ker": [3, 3], "stride": [1, 1], "dil": [1, 1], "pad": [0, 0], "pad_end": [0, 0],
           "out": [3, 3]}


def test_each_cold_measurement_gets_a_new_kernel_cache_and_its_warm_one_reuses_it(tmp_path):
    import convtune.pytorch_measure as pm

    problems = tmp_path / "problems.json"
    problems.write_text(json.dumps([PROBLEM]))
    out = tmp_path / "grid.json"
    r = subprocess.run([sys.executable, pm.__file__, "grid", "--problems", str(problems), "--device", "cpu", "--runs", "2",
                        "--samples", "1", "--inner", "1", "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    runs = json.loads(out.read_text())["measurements"]
    assert len(runs) == 8  # 2 runs x bm0, bm1 x cold, warm
    folder = {(m["run"], m["name"], m["cache"]): m["kernel_cache_folder"] for m in runs}
    assert all(folder.values()), "a measurement process did not get CUDA_CACHE_PATH"
    colds = [f for (run, name, cache), f in folder.items() if cache == "cold"]
    assert len(set(colds)) == len(colds) == 4, "two cold measurements shared a kernel cache"
    for (run, name, cache), f in folder.items():
        if cache == "warm":
            assert f == folder[(run, name, "cold")], "a warm measurement did not reuse its cold one's kernel cache"
