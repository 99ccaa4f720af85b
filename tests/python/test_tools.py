"""convtune.tune and convtune.simulate return what `convtune tune --json` / `simulate --json` print."""

import inspect
import json

import pytest

import convtune
from convtune import _convtune
from _helpers import cli_error

PROBLEMS = ["n=2,c=8,k=16,in=12x12,ker=3x3,pad=1x1", "mb2ic16ih6oc16oh6kh1"]


def test_tune_matches_the_cli_without_benchmark(cli):
    ours = convtune.tune(PROBLEMS, flags="benchmark=0")
    theirs = json.loads(cli("tune", "--problem", PROBLEMS[0], "--flags", "benchmark=0", "--json", check=0).stdout)
    assert ours["flags"] == theirs["flags"] and ours["backend"] == theirs["backend"] == "cpu"
    assert len(ours["problems"]) == 2 and ours["from_database"] == 0
    a, b = ours["problems"][0], theirs["problems"][0]
    assert set(a) == set(b)
    # Nothing is timed without benchmark: the whole decision is deterministic and must agree.
    for key in ("problem", "algorithm", "source", "key"):
        assert a[key] == b[key], key
    assert [(c["id"], c["state"], c["reason"]) for c in a["candidates"]] == [(c["id"], c["state"], c["reason"]) for c in b["candidates"]]
    assert ours["problems"][1]["problem"] == convtune.parse_problem(PROBLEMS[1])["canonical"]


def test_tune_searches_with_benchmark(tmp_path):
    db = tmp_path / "db.json"
    r = convtune.tune(PROBLEMS[0], flags={"search_budget_ms": 20.0}, db=db)
    (d,) = r["problems"]
    assert r["flags"].startswith("enabled=1,benchmark=1,")
    assert d["source"] == "search" and d["algorithm"]
    timed = [c for c in d["candidates"] if c["state"] == "timed"]
    assert any(c["id"] == d["algorithm"] for c in timed) and all(c["samples_ms"] for c in timed)
    # The choice was stored: a second call finds it in the database.
    again = convtune.tune(PROBLEMS[0], flags={"search_budget_ms": 20.0}, db=db)
    assert again["from_database"] == 1 and again["problems"][0]["algorithm"] == d["algorithm"]


def test_tune_overrides_and_shapes_file(tmp_path):
    shapes = tmp_path / "shapes.txt"
    shapes.write_text("# two layers\nic4ih8oc4oh8kh3ph1n\"a\"\nic4ih8oc8oh4kh3sh2ph1n\"b\"\n")
    r = convtune.tune(shapes=shapes, flags="benchmark=0", batch=3, dir="bwd_data", dtype="f16")
    assert [p["name"] for p in r["problems"]] == ["a", "b"]
    assert all(p["problem"].startswith("dir=bwd_data,dtype=f16,") and ",n=3," in p["problem"] for p in r["problems"])


def test_tune_errors_carry_the_cli_message(cli):
    for bad in ["c=3,k=4,g=2,in=5,ker=3", "ic3ih5oc4kh9"]:
        with pytest.raises(convtune.Error) as e:
            convtune.tune(bad)
        assert str(e.value) == cli_error(cli("tune", "--problem", bad))
    with pytest.raises(convtune.Error) as e:
        convtune.tune(PROBLEMS[0], flags="benchmark_limit=-1")
    assert str(e.value) == cli_error(cli("tune", "--problem", PROBLEMS[0], "--flags", "benchmark_limit=-1"))
    with pytest.raises(convtune.Error) as e:
        convtune.tune(PROBLEMS[0], policy="fastest")
    assert str(e.value) == cli_error(cli("tune", "--problem", PROBLEMS[0], "--policy", "fastest"))
    with pytest.raises(convtune.Error, match="give exactly one of problems, shapes or workload"):
        convtune.tune()


TRACE = """# convtune-trace 1
dir=fwd,dtype=f32,layout=nchw,n=2,c=3,k=8,in=16x16,ker=3x3,pad=1x1
dir=fwd,dtype=f32,layout=nchw,n=2,c=8,k=8,in=16x16,ker=3x3,pad=1x1 x2
# iteration
dir=fwd,dtype=f32,layout=nchw,n=4,c=3,k=8,in=16x16,ker=3x3,pad=1x1
dir=fwd,dtype=f32,layout=nchw,n=4,c=8,k=8,in=16x16,ker=3x3,pad=1x1 x2
"""


def test_simulate_matches_the_cli(cli, tmp_path):
    trace = tmp_path / "t.trace"
    trace.write_text(TRACE)
    args = dict(iterations=4, flags=["off", "lim1:benchmark=1,benchmark_limit=1,search_budget_ms=5"])
    ours = convtune.simulate(stream=f"trace:{trace}", **args)
    theirs = json.loads(cli("simulate", "--stream", f"trace:{trace}", "--iterations", "4", "--flags", args["flags"][0], "--flags",
                            args["flags"][1], "--json", check=0).stdout)
    assert set(ours) == set(theirs)
    for key in ("title", "engine", "backend", "iterations", "baseline"):
        assert ours[key] == theirs[key], key
    assert [s["name"] for s in ours["settings"]] == [s["name"] for s in theirs["settings"]] == ["off", "lim1"]
    for a, b in zip(ours["settings"], theirs["settings"]):
        assert a["flags"] == b["flags"]
        # Timings differ run to run; what was called does not.
        for key in ("calls", "misses", "distinct_shapes", "searches"):
            assert a[key] == b[key], (a["name"], key)
        assert [i["calls"] for i in a["per_iteration"]] == [3, 3, 3, 3]
    off, lim1 = ours["settings"]
    assert off["distinct_shapes"] == 4 and off["searches"] == 0 and lim1["searches"] == 4
    # Which of the two is recommended follows from the reported numbers: lim1 when it saves at
    # least min_saving (2%) against off beyond the noise of the live runs (their ranges of totals
    # do not overlap), else off.
    saving = lim1["saving_vs_baseline"]
    assert off["saving_vs_baseline"] == 0
    assert lim1["within_noise"] == (lim1["range_ms"][0] <= off["range_ms"][1] and off["range_ms"][0] <= lim1["range_ms"][1])
    expected = "lim1" if saving >= 0.02 and not lim1["within_noise"] else "off"
    assert ours["recommendation"]["setting"] == expected, (saving, ours["recommendation"])
    assert ours["recommendation"]["saving"] == (saving if expected == "lim1" else 0)
    # The trace= shortcut is the same stream.
    again = convtune.simulate(trace=trace, iterations=2, flags="off")
    assert again["settings"][0]["calls"] == 6


def test_simulate_a_trace_is_the_users_run(cli, tmp_path):
    trace = tmp_path / "t.trace"
    trace.write_text("# flags enabled=1,benchmark=0,benchmark_limit=10,deterministic=0,allow_tf32=0\n" + TRACE)
    # As long as the trace by default; its recorded flags are the baseline the setting changes.
    r = convtune.simulate(trace=trace, flags="off", repeats=1)
    assert r["iterations"] == 2 and r["trace_iterations"] == 2 and r["repeats"] == 1
    assert r["trace_flags"].startswith("enabled=1,benchmark=0,benchmark_limit=10,deterministic=0,allow_tf32=0")
    assert "allow_tf32=0" in r["settings"][0]["flags"]
    assert r["step_time"]["totals"] == "convolutions"
    # Options a trace does not take are refused, naming the argument here and the option there.
    for name, value, option, text in [("batch", 4, "--batch", "4"), ("mode", "train", "--mode", "train"),
                                      ("dtype", "f16", "--dtype", "f16"), ("layout", "nhwc", "--layout", "nhwc"),
                                      ("batches", [1, 2], "--batches", "1,2"), ("scales", [0.5], "--scales", "0.5"),
                                      ("shapes_dir", str(tmp_path), "--shapes-dir", str(tmp_path))]:
        with pytest.raises(convtune.Error, match=f"^{name}: does not apply to a trace stream"):
            convtune.simulate(trace=trace, flags="off", **{name: value})
        assert cli_error(cli("simulate", "--stream", f"trace:{trace}", "--flags", "off", option, text)).startswith(
            f"{option}: does not apply to a trace stream")


def test_simulate_default_settings_and_plot(tmp_path):
    trace = tmp_path / "t.trace"
    trace.write_text(TRACE)
    plot = tmp_path / "p.svg"
    r = convtune.simulate(trace=trace, iterations=2, plot=plot)
    assert [s["name"] for s in r["settings"]] == ["off", "on", "on+det", "adaptive", "pytorch", "incremental"]
    assert plot.read_text().lstrip().startswith("<")


def test_simulate_errors_carry_the_cli_message(cli, tmp_path):
    # The same messages; Python names the argument (stream) where the CLI names its option (--stream).
    with pytest.raises(convtune.Error) as e:
        convtune.simulate(stream="sideways")
    assert "--" + str(e.value) == cli_error(cli("simulate", "--stream", "sideways"))
    with pytest.raises(convtune.Error) as e:
        convtune.simulate(trace=tmp_path / "missing.trace")
    assert "--" + str(e.value) == cli_error(cli("simulate", "--stream", f"trace:{tmp_path / 'missing.trace'}"))
    bad = tmp_path / "bad.trace"
    bad.write_text("dir=fwd,c=3,k=4,in=5,ker=9\n")
    with pytest.raises(convtune.Error) as e:
        convtune.simulate(trace=bad)
    assert str(e.value) == cli_error(cli("simulate", "--stream", f"trace:{bad}"))
    # An unwritable plot is refused before anything runs, as in the CLI.
    good = tmp_path / "t.trace"
    good.write_text(TRACE)
    plot = tmp_path / "missing" / "p.svg"
    with pytest.raises(convtune.Error) as e:
        convtune.simulate(trace=good, iterations=1, plot=plot)
    assert "--" + str(e.value) == cli_error(cli("simulate", "--stream", f"trace:{good}", "--iterations", "1", "--plot", str(plot)))
    for bad_batch in (0, -3):
        with pytest.raises(convtune.Error, match=f"batch: must be >= 1 \\(got {bad_batch}\\)"):
            convtune.simulate(trace=good, batch=bad_batch)
        with pytest.raises(convtune.Error, match=f"batch: must be >= 1 \\(got {bad_batch}\\)"):
            convtune.tune(PROBLEMS[0], batch=bad_batch)


def test_requests_are_filled_by_name_through_the_field_table():
    """The binding fills a request from keyword arguments through its one field table in C++."""
    # Every argument of tune() and simulate() is a field of the request (trace= is simulate's stream).
    assert set(inspect.signature(convtune.tune).parameters) <= set(_convtune.fields("tune"))
    assert set(inspect.signature(convtune.simulate).parameters) - {"trace"} <= set(_convtune.fields("simulate"))
    with pytest.raises(TypeError) as e:
        _convtune.tune(problem=PROBLEMS[0])
    assert str(e.value) == "problem: not a field of tune (its fields: " + ", ".join(_convtune.fields("tune")) + ")"
    with pytest.raises(TypeError, match="^iterations: expected an int, got str$"):
        _convtune.simulate(iterations="3")
    with pytest.raises(TypeError, match="^problems: expected a list of str, got str$"):
        _convtune.tune(problems=PROBLEMS[0])
    with pytest.raises(TypeError, match="^strict: expected a bool, got int$"):
        _convtune.simulate(strict=1)
    with pytest.raises(TypeError, match="^flags: expected None, a 'key=value,...' string or a dict$"):
        _convtune.tune(problems=PROBLEMS, flags=3)
    with pytest.raises(convtune.Error, match="^seed: must be >= 0 \\(got -1\\)$"):
        _convtune.simulate(seed=-1)
    # A dict of flags applies over what the other fields give (benchmark=1, then the policy); None is the default.
    doc = json.loads(_convtune.tune(problems=PROBLEMS[:1], policy="pytorch", flags={"benchmark": False}, db=None))
    assert doc["flags"].startswith("enabled=1,benchmark=0,") and "policy=pytorch" in doc["flags"]
