"""The application layer behind the CLI and the Python module: one JSON text for both, errors that
name request fields, and a tune report whose memory does not grow with the number of problems."""

import json
import os
import re
import subprocess
import sys

import pytest

import convtune
from convtune import _convtune, _tools
from _helpers import cli_error, run_python

PROBLEMS = ["n=2,c=8,k=16,in=12x12,ker=3x3,pad=1x1", "mb2ic16ih6oc16oh6kh1"]
DATA = os.path.join(os.path.dirname(__file__), "..", "data")


def test_tune_json_is_the_clis_byte_for_byte(cli, tmp_path):
    shapes = tmp_path / "shapes.txt"
    shapes.write_text("ic4ih8oc4oh8kh3ph1n\"a\"\nic4ih8oc8oh4kh3sh2ph1n\"b\"\n" + "\n".join(PROBLEMS) + "\n")
    # benchmark=0 times nothing: the whole report is deterministic.
    ours = _tools._tune_text(shapes=shapes, flags="benchmark=0", batch=3, dtype="f16")
    theirs = cli("tune", "--shapes", str(shapes), "--flags", "benchmark=0", "--batch", "3", "--dtype", "f16", "--json", check=0).stdout
    assert ours == theirs
    doc = json.loads(ours)
    assert doc["format"] == 1 and len(doc["problems"]) == 4
    assert convtune.tune(shapes=shapes, flags="benchmark=0", batch=3, dtype="f16") == doc
    # No problem at all is still one document.
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing\n")
    assert _tools._tune_text(shapes=empty) == cli("tune", "--shapes", str(empty), "--json", check=0).stdout
    assert json.loads(_tools._tune_text(shapes=empty))["problems"] == []


def _without_wall_clock(text):
    # wall_ms is the host wall clock of the calls, which no two runs share; everything else of a
    # replay (virtual clock, seeded draws) is deterministic.
    return re.sub(r'("wall_ms": )[0-9.e+-]+', r"\1<wall>", text)


def test_simulate_json_is_the_clis_byte_for_byte(cli, tmp_path):
    rec = os.path.join(DATA, "resnet50_cpu_infer.json")
    trace = tmp_path / "t.trace"
    # Two problems of the recording (ResNet-50's stem and a 3x3 of stage 1, batch 1 and 2).
    trace.write_text("# convtune-trace 1\n"
                     "dir=fwd,dtype=f32,layout=nchw,n=1,c=64,k=64,in=56x56,ker=3x3,pad=1x1 x2\n# iteration\n"
                     "dir=fwd,dtype=f32,layout=nchw,n=2,c=64,k=64,in=56x56,ker=3x3,pad=1x1\n")
    args = dict(stream=f"trace:{trace}", iterations=6, replay=rec, flags=["off", "on", "lim1:benchmark=1,benchmark_limit=1"])
    ours = _tools._simulate_text(**args)
    theirs = cli("simulate", "--stream", f"trace:{trace}", "--iterations", "6", "--replay", rec, "--flags", "off", "--flags", "on",
                 "--flags", "lim1:benchmark=1,benchmark_limit=1", "--json", check=0).stdout
    assert '"wall_ms"' in ours
    assert _without_wall_clock(ours) == _without_wall_clock(theirs)
    doc = json.loads(ours)
    assert doc["format"] == 1 and doc["engine"] == "replay"
    assert [s["name"] for s in doc["settings"]] == ["off", "on", "lim1"]


def test_errors_name_the_field_in_python_and_the_option_in_the_cli(cli, tmp_path):
    with pytest.raises(convtune.Error) as e:
        convtune.simulate(stream="sideways")
    assert str(e.value).startswith("stream: unknown stream 'sideways'")
    assert cli_error(cli("simulate", "--stream", "sideways")) == "--" + str(e.value)
    with pytest.raises(convtune.Error) as e:
        convtune.simulate(workload="resnet50", shapes_dir=str(tmp_path))
    assert str(e.value).startswith("workload: built-in 'resnet50' needs ") and "(set shapes_dir or CONVTUNE_SHAPES_DIR)" in str(e.value)
    theirs = cli_error(cli("simulate", "--workload", "resnet50", "--shapes-dir", str(tmp_path)))
    assert theirs.startswith("--workload: built-in 'resnet50' needs ") and "(set --shapes-dir or CONVTUNE_SHAPES_DIR)" in theirs
    with pytest.raises(convtune.Error) as e:
        convtune.simulate(workload="tiny", stream="batch", batches="1,x")
    assert str(e.value).startswith("batches: '")
    with pytest.raises(convtune.Error) as e:
        convtune.simulate(replay=tmp_path / "missing.json", stream="fixed", workload=os.path.join(DATA, "tiny.workload"))
    assert str(e.value).startswith(f"replay: {tmp_path / 'missing.json'}: cannot open recording")
    with pytest.raises(convtune.Error) as e:
        convtune.tune()
    assert str(e.value) == "problems: give exactly one of problems, shapes or workload"
    assert cli_error(cli("tune")) == "--problem: give exactly one of --problem, --shapes or --workload"
    with pytest.raises(convtune.Error) as e:
        convtune.tune(workload="resnet50", dir="bwd_data")
    assert str(e.value).startswith("dir: with workload the directions come from mode")
    assert cli_error(cli("tune", "--workload", "resnet50", "--dir", "bwd_data")) == "--dir: with --workload the directions come from --mode" + \
        str(e.value)[len("dir: with workload the directions come from mode"):]

    # explain decides one problem: a list of data types is refused, not cut to its first entry
    assert cli_error(cli("explain", "--problem", PROBLEMS[0], "--dtype", "f32,f16")) == "--dtype: explain takes one data type (got 'f32,f16')"


def test_tune_workload_catalogue_is_the_clis_byte_for_byte(cli, tmp_path):
    """tune(workload=[...], mode="train", batch=[...], dtype=[...]): the CLI's catalogue, the same text."""
    workload = os.path.join(DATA, "tiny.workload")
    ours = _tools._tune_text(workload=[workload, "resnet50"], mode="train", batch=[1, 4], dtype=["f32", "bf16"], flags="benchmark=0")
    theirs = cli("tune", "--workload", workload + ",resnet50", "--mode", "train", "--batch", "1,4", "--dtype", "f32,bf16",
                 "--flags", "benchmark=0", "--json", check=0).stdout
    assert ours == theirs
    problems = json.loads(ours)["problems"]
    keys = [p["problem"] for p in problems]
    assert len(keys) == len(set(keys))
    # Every network, direction, data type and batch size of the catalogue is there.
    assert {p["name"] for p in problems} == {"tiny_cnn", "resnet50"}
    for part in ["dir=fwd", "dir=bwd_data", "dir=bwd_filter", "dtype=f32", "dtype=bf16", "n=1,", "n=4,"]:
        assert any(part in k for k in keys), part
    # The order: network by network, then data type, then batch.
    first = [(p["name"], re.search(r"dtype=(\w+)", p["problem"])[1], re.search(r"n=(\d+)", p["problem"])[1]) for p in problems]
    assert first == sorted(first, key=lambda t: (["tiny_cnn", "resnet50"].index(t[0]), ["f32", "bf16"].index(t[1]), int(t[2])))


def test_tune_json_memory_does_not_grow_with_the_problems(cli, tmp_path):
    """`tune --json` streams its report: 20000 problems need little more memory than 2000."""
    shapes = tmp_path / "many.txt"
    # Distinct problems (every one a separate decision): sizes 8..207 x channels 1..100.
    lines = [f"n=1,c={c},k=4,in={s}x{s},ker=3x3,pad=1x1" for s in range(8, 208) for c in range(1, 101)]
    shapes.write_text("\n".join(lines) + "\n")
    small = tmp_path / "few.txt"
    small.write_text("\n".join(lines[:2000]) + "\n")
    code = """
import resource, subprocess, sys
subprocess.run([sys.argv[1], "tune", "--shapes", sys.argv[2], "--flags", "benchmark=0", "--json"], check=True,
               stdout=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""

    def peak_kib(path):
        r = subprocess.run([sys.executable, "-c", code, cli.path, str(path)], capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
        return int(r.stdout)

    few, many = peak_kib(small), peak_kib(shapes)
    # Before the report was streamed, every decision's JSON was held to the end: about 30 KiB a
    # problem, over 500 MiB more for the 18000 extra problems.
    assert many - few < 96 * 1024, (few, many)


def test_explain_and_db_reports_have_one_json_form(cli, tmp_path):
    explained = json.loads(cli("explain", "--problem", PROBLEMS[0], "--flags", "benchmark=0", "--json", check=0).stdout)
    tuned = convtune.tune(PROBLEMS[0], flags="benchmark=0")
    assert explained["format"] == 1 and explained["backend"] == "cpu" and explained["flags"] == tuned["flags"]
    assert {k: v for k, v in explained.items() if k not in ("format", "backend", "flags")} == tuned["problems"][0]
    db = tmp_path / "db.json"
    convtune.tune(PROBLEMS, flags={"search_budget_ms": 5.0, "min_samples": 1, "max_samples": 2}, db=db)
    shown = json.loads(cli("db", "show", str(db), "--json", check=0).stdout)
    assert shown["format"] == 1 and len(shown["environments"]) == 1
    assert sorted(e["key"] for e in shown["environments"][0]["entries"]) == sorted(p["key"] for p in convtune.tune(PROBLEMS, db=db)["problems"])
    checked = json.loads(cli("db", "check", str(db), "--json", check=0).stdout)
    assert checked == {"format": 1, "path": str(db), "valid": True, "environments": 1, "entries": 2, "unknown": []}
    merged = json.loads(cli("db", "merge", str(tmp_path / "merged.json"), str(db), "--json", check=0).stdout)
    assert merged == {"format": 1, "out": str(tmp_path / "merged.json"), "environments": 1, "entries": 2}


def test_run_list_and_parse_json_are_the_clis_byte_for_byte(cli, tmp_path):
    """run, list and parse are application operations too: one JSON text (format 1) for both."""
    shapes = tmp_path / "shapes.txt"
    shapes.write_text("ic4ih8oc4oh8kh3ph1n\"a*2\"\n" + PROBLEMS[0] + "\n")
    ours = _convtune.parse(file=str(shapes), dtype="f16")
    assert ours == cli("parse", str(shapes), "--dtype", "f16", "--json", check=0).stdout
    doc = json.loads(ours)
    assert doc["format"] == 1 and doc["file"] == str(shapes)
    assert [(p["name"], p["repeat"], p["dtype"]) for p in doc["problems"]] == [("a", 2, "f16"), ("", 1, "f16")]
    # An untimed run is deterministic: the heuristic's algorithm, the same output bits, the same check.
    ours = _convtune.run(problem=PROBLEMS[1], dir="bwd_filter", check=True)
    assert ours == cli("run", "--problem", PROBLEMS[1], "--dir", "bwd_filter", "--check", "--json", check=0).stdout
    doc = json.loads(ours)
    assert doc["format"] == 1 and doc["status"] == "ok" and doc["selected_by"] == "heuristic" and doc["check"]["passed"]
    ours = _convtune.list()
    assert ours == cli("list", "--json", check=0).stdout
    doc = json.loads(ours)
    assert doc["format"] == 1
    # convtune.list_backends() is the same operation's backends.
    assert [(b["name"], b["available"], [a["id"] for a in b["algorithms"]]) for b in doc["backends"]] == \
        [(b["name"], b["available"], b["algorithms"]) for b in convtune.list_backends()]
    ours = _convtune.list(what="recordings")
    assert ours == cli("list", "recordings", "--json", check=0).stdout
    assert json.loads(ours)["format"] == 1 and [e["name"] for e in json.loads(ours)["recordings"]] == ["h100", "h200"]
    # Errors name the request's fields here and the options there.
    with pytest.raises(convtune.Error) as e:
        _convtune.run(problem=PROBLEMS[0], algo="cpu.direct", flags="benchmark=1")
    assert str(e.value) == "algo: give algo or flags, not both"
    assert cli_error(cli("run", "--problem", PROBLEMS[0], "--algo", "cpu.direct", "--flags", "benchmark=1")) == \
        "--algo: give --algo or --flags, not both"
    with pytest.raises(convtune.Error, match="^what: 'everything' is neither backends nor recordings$"):
        _convtune.list(what="everything")


def test_replay_by_library_name_estimates_and_strict():
    # --replay NAME from Python: the recordings shipped in the library, merged.
    common = dict(workload="resnet50", stream="fixed", dtype="f16", layout="nhwc", iterations=3, flags=["off", "on"])
    doc = convtune.simulate(replay="h200", batch=32, **common)
    assert "replay of h200 on backend cudnn" in doc["details"] and doc["estimated_problems"] == 0
    # Batch 8 was not recorded: estimated, counted, with a range on every total ...
    doc = convtune.simulate(replay="h200", batch=8, **common)
    # (the nearest recorded problem is at most 4x the work away: ResNet-50's own layer at batch 32,
    # or a closer one of another network in the library)
    assert doc["estimates"]["problems"] == 23 and 1.0 < doc["estimates"]["max_extrapolation"] <= 4.0 + 1e-9
    # (off is PyTorch's measured cost from h200's pytorch/ library, not a replay of the recording)
    assert [s.get("source") for s in doc["settings"]] == ["measured", None]
    assert all(s["estimate_range_ms"][0] < s["total_ms"] < s["estimate_range_ms"][1] for s in doc["settings"] if "source" not in s)
    # ... unless strict, which refuses as the CLI's --strict does.
    with pytest.raises(convtune.Error) as e:
        convtune.simulate(replay="h200", batch=8, strict=True, **common)
    assert str(e.value).startswith("replay: the recording has no timings for 23 of the 23 problems") and "(strict: none is estimated)" in str(e.value)
    with pytest.raises(convtune.Error) as e:
        convtune.simulate(replay="a100", **common)
    assert str(e.value).startswith("replay: 'a100' is neither a recording file nor a name in the recording library (names: h100, h200;")
    # h100 holds PyTorch's own measurements only: its off and pytorch settings, the problems it
    # never measured predicted by its model (batch 32's ResNet-50 is not among its networks').
    doc = convtune.simulate(replay="h100", kernel_cache="cold", **dict(common, flags=["off", "pytorch"]))
    assert [s["name"] for s in doc["settings"]] == ["off", "pytorch"]
    assert doc["pytorch_library"]["name"] == "h100" and doc["pytorch_library"]["kernel_cache"] == "cold"
    assert 0 < len(doc["pytorch_library"]["predicted"]) <= doc["pytorch_library"]["problems"]


def test_cold_measurements_without_their_kernel_cache_folder_are_refused(tmp_path):
    """A grid's cold measurements made before each process got its own kernel cache (no
    kernel_cache_folder) are not replayed: --kernel-cache cold is refused, saying why; warm runs."""
    key = "dir=fwd,dtype=f32,layout=nchw,n=2,c=4,k=8,g=1,in=8x8,ker=3x3,stride=1x1,dil=1x1,pad=1x1,pad_end=1x1"

    def run(bm, cache):
        return {"setting": {"benchmark": bm, "allow_tf32": 1, "deterministic": 0}, "cache": cache, "startup_ms": 50,
                "environment": {"device": "GPU X", "torch": "2.11", "cudnn": 91900},
                "problems": [{"key": key, "first_ms": 5.0 + 20 * bm, "steady_ms": 1.0}]}

    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps({"format": "convtune-pytorch-measurement-grid", "version": 1,
                                "measurements": [run(0, "cold"), run(1, "cold"), run(0, "warm"), run(1, "warm")]}))
    trace = tmp_path / "t.trace"
    trace.write_text("# convtune-trace 1\n" + key + "\n")
    common = dict(stream="trace:" + str(trace), pytorch_measured=str(grid), iterations=3, flags=["off", "pytorch"])
    with pytest.raises(convtune.Error) as e:
        convtune.simulate(kernel_cache="cold", **common)
    assert str(e.value).startswith("kernel_cache: cold: the 2 cold kernel-cache measurements of ") and "kernel_cache_folder" in str(e.value)
    doc = convtune.simulate(kernel_cache="warm", **common)
    assert [s["name"] for s in doc["settings"]] == ["off", "pytorch"]


def test_version_and_build_info_are_the_clis(cli):
    """convtune.version() and build_info() come from the one C++ build_info(), as --version."""
    info = convtune.build_info()
    assert convtune.version() == info["version"] == convtune.__version__
    assert "cpu" in info["backends"] and isinstance(info["isa"], list) and isinstance(info["arch"], str)
    assert info["cpu_level"] in info["cpu_levels"]
    assert cli("--version", check=0).stdout == info["text"]
