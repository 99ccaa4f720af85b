"""bench/sim/remeasure_cold.py on the CPU (PyTorch's CPU convolutions stand in for the GPU): a grid
whose cold measurements have no kernel-cache folder of their own is measured again and its cold
rows replaced, the warm ones kept; a grid whose cold rows have their folders is left alone. Needs
PyTorch (Debian's python3-torch)."""

import gzip
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="PyTorch (python3-torch) is not installed")

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SCRIPT = os.path.join(ROOT, "bench", "sim", "remeasure_cold.py")
KEY = "dir=fwd,dtype=f32,layout=nchw,n=1,c=2,k=3,g=1,in=5x5,ker=3x3,stride=1x1,dil=1x1,pad=0x0,pad_end=0x0"
PROBLEM = {"key": KEY, "dir": "fwd", "dtype": "f32", "layout": "nchw", "n": 1, "c": 2, "k": 3, "groups": 1, "in": [5, 5],
           "ker": [3, 3], "stride": [1, 1], "dil": [1, 1], "pad": [0, 0], "pad_end": [0, 0], "out": [3, 3]}


def grid(tmp_path, out):
    import convtune.pytorch_measure as pm

    problems = tmp_path / "problems.json"
    problems.write_text(json.dumps([PROBLEM]))
    r = subprocess.run([sys.executable, pm.__file__, "grid", "--problems", str(problems), "--device", "cpu", "--runs", "1",
                        "--allow-tf32", "0", "--samples", "1", "--inner", "1", "--out", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(out.read_text())


def remeasure(*args):
    return subprocess.run([sys.executable, SCRIPT, *map(str, args)], capture_output=True, text=True, timeout=600)


def test_old_cold_rows_are_measured_again_and_replaced_the_warm_ones_kept(tmp_path):
    results, out = tmp_path / "results", tmp_path / "out"
    results.mkdir()
    old = grid(tmp_path, results / "net-measure.json")
    for m in old["measurements"]:  # as grids made before each process had its own kernel cache
        if m["cache"] == "cold":
            m.pop("kernel_cache_folder")
    (results / "net-measure.json").write_text(json.dumps(old))
    grid(tmp_path, results / "fresh-measure.json")  # already measured with a folder per cold process

    r = remeasure(results, out, "--runs", 1, "--device", "cpu")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "fresh: its cold measurements have their own kernel caches already; skipped" in r.stdout
    assert not (out / "fresh-cold.json").exists()

    new = json.loads((out / "net-cold.json").read_text())["measurements"]
    assert sorted((m["name"], m["cache"]) for m in new) == [("bm0", "cold"), ("bm1", "cold")]
    assert all(m["kernel_cache_folder"] for m in new)
    assert all(m["setting"]["allow_tf32"] == 0 for m in new)  # taken from the old grid
    assert all([p["key"] for p in m["problems"]] == [KEY] for m in new)

    merged = json.loads((out / "net-measure.json").read_text())["measurements"]
    assert [m for m in merged if m["cache"] == "cold"] == new
    assert [m for m in merged if m["cache"] == "warm"] == [m for m in old["measurements"] if m["cache"] == "warm"]
    with gzip.open(out / "net.json.gz", "rt") as f:
        library = json.load(f)
    assert len(library["measurements"]) == len(merged)


def test_refusals(tmp_path):
    r = remeasure(tmp_path / "missing", tmp_path / "out")
    assert r.returncode == 2 and "not a folder" in r.stderr
    r = remeasure(tmp_path, tmp_path / "out")
    assert r.returncode == 2 and "no NAME-measure.json grid" in r.stderr
    (tmp_path / "a-measure.json").write_text("{}")
    r = remeasure(tmp_path, tmp_path / "out", "--only", "b")
    assert r.returncode == 2 and "--only: no grid b" in r.stderr
    r = remeasure(tmp_path, tmp_path / "out", "--runs", 0)
    assert r.returncode == 2 and "--runs: must be >= 1" in r.stderr
