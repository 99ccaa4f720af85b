"""Smoke test of an installed convtune wheel, run by scripts/test-wheel with the interpreter of a
fresh virtual environment that has only the wheel (and its dependencies) installed, from a
folder outside the source tree:

    python smoke.py --source SOURCE_DIR --cudnn ON|OFF

--cudnn is what the wheel's CMake configure decided (its "convtune: cuDNN backend:" line). Each
check prints its name; the last line counts them ("smoke: N passed, M failed"); exit 1 on any
failure."""

import argparse
import importlib.metadata
import os
import shutil
import subprocess
import sys
import sysconfig
import traceback

ap = argparse.ArgumentParser()
ap.add_argument("--source", required=True, help="the source tree the wheel was built from")
ap.add_argument("--cudnn", required=True, choices=["ON", "OFF"], help="whether the build found CUDA and cuDNN")
args = ap.parse_args()
assert "CONVTUNE_SHAPES_DIR" not in os.environ, "run without CONVTUNE_SHAPES_DIR: the package's default is tested"
assert "CONVTUNE_RECORDINGS_DIR" not in os.environ, "run without CONVTUNE_RECORDINGS_DIR: the package's default is tested"

import numpy as np  # noqa: E402

import convtune  # noqa: E402

PKG = os.path.dirname(os.path.abspath(convtune.__file__))
SITE = os.path.realpath(sysconfig.get_paths()["platlib"])
checks = []


def check(fn):
    checks.append(fn)
    return fn


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


@check
def imported_from_the_environment():
    assert os.path.realpath(PKG).startswith(SITE + os.sep), f"convtune imported from {PKG}, not from {SITE}"
    assert os.path.realpath(sys.prefix) != os.path.realpath(sys.base_prefix), "not a virtual environment"


@check
def version_is_the_projects():
    # The wheel's metadata reads project(convtune VERSION ...); the C++ library is compiled with it.
    assert importlib.metadata.version("convtune") == convtune.__version__ == convtune.version(), (
        importlib.metadata.version("convtune"), convtune.version())


@check
def every_python_file_and_subpackage_is_shipped():
    src = os.path.join(args.source, "python", "convtune")
    missing = []
    for root, _dirs, files in os.walk(src):
        for f in files:
            if f.endswith((".py", ".cpp")):  # .cpp: convtune.torch's C++ override, compiled where it runs
                rel = os.path.relpath(os.path.join(root, f), src)
                if not os.path.isfile(os.path.join(PKG, rel)):
                    missing.append(rel)
    assert not missing, f"not in the installed package: {missing}"
    assert any(n.startswith("_convtune") for n in os.listdir(PKG)), "no extension module"
    # The C interface's header, which the override compiles against, beside it.
    assert os.path.isfile(os.path.join(PKG, "torch", "convtune_framework_api.h")), "convtune/torch/convtune_framework_api.h missing"


@check
def shipped_data_is_found_in_the_package():
    for rel in ("shapes/benchdnn/LICENSE", "shapes/benchdnn/shapes_resnet_50_v1_5"):
        assert os.path.isfile(os.path.join(PKG, "data", rel)), f"convtune/data/{rel} missing"
    shapes = os.environ.get("CONVTUNE_SHAPES_DIR", "")
    assert shapes == os.path.join(PKG, "data", "shapes", "benchdnn"), f"CONVTUNE_SHAPES_DIR={shapes!r} after import"
    # A built-in workload name, resolved in that folder, on the recorded CPU timings.
    sim = convtune.simulate(workload="resnet50", stream="fixed", iterations=5,
                            replay=os.path.join(args.source, "tests", "data", "resnet50_cpu_infer.json"))
    assert sim["recommendation"]["text"], sim["recommendation"]
    # The recording library (`replay="h200"`) from the package's own copy.
    assert os.path.isdir(os.path.join(PKG, "data", "recordings", "h200")), "convtune/data/recordings/h200 missing"
    recordings = os.environ.get("CONVTUNE_RECORDINGS_DIR", "")
    assert recordings == os.path.join(PKG, "data", "recordings"), f"CONVTUNE_RECORDINGS_DIR={recordings!r} after import"
    sim = convtune.simulate(workload="resnet50", stream="fixed", iterations=3, dtype="f16", layout="nhwc", batch=32, replay="h200")
    assert sim["engine"] == "replay" and sim["estimated_problems"] == 0, sim["details"]
    # PyTorch's measured library ships too (h100/pytorch/): the off and pytorch rows from it.
    sim = convtune.simulate(workload="resnet50", stream="fixed", iterations=3, replay="h100", kernel_cache="cold", flags=["off", "pytorch"])
    assert sim["pytorch_library"]["name"] == "h100" and [s["source"] for s in sim["settings"]] == ["measured", "measured"], sim["details"]


@check
def tiny_convolution():
    x = np.arange(2 * 3 * 5 * 5, dtype=np.float32).reshape(2, 3, 5, 5) / 50
    w = np.ones((4, 3, 3, 3), dtype=np.float32)
    y = convtune.conv(x, w, padding=1)
    ref = sum(np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))[:, :, i:i + 5, j:j + 5].sum(axis=1)
              for i in range(3) for j in range(3))[:, None]
    assert y.shape == (2, 4, 5, 5), y.shape
    # Every term is >= 0, so ref is also sum |x*w|; 2e-3 covers a TF32 algorithm's bound (2 * 2^-11).
    assert np.all(np.abs(y - ref) <= 2e-3 * ref + 1e-6), np.abs(y - ref).max()


@check
def bad_input_raises_convtune_error():
    try:
        convtune.conv(np.zeros((1, 3, 4, 4), np.float32), np.zeros((2, 4, 3, 3), np.float32))
    except convtune.Error as e:
        assert str(e), "empty message"
    else:
        raise AssertionError("channel mismatch accepted")


@check
def backends_match_the_build():
    names = {b["name"]: b for b in convtune.list_backends()}
    assert "cpu" in names and names["cpu"]["available"], names.get("cpu")
    if args.cudnn == "ON":
        assert "cudnn" in names, f"the build found cuDNN but the wheel has no cudnn backend: {sorted(names)}"
        b = names["cudnn"]
        assert b["available"] or b["reason"], b  # here without a GPU: unavailable, saying why
        print(f"    cudnn backend: {'available' if b['available'] else 'unavailable: ' + b['reason']}")
    else:
        assert "cudnn" not in names, "the build found no cuDNN but the wheel has a cudnn backend"


@check
def advise_help():
    p = run([sys.executable, "-m", "convtune.advise", "--help"])
    assert p.returncode == 0 and "usage" in p.stdout.lower(), p.stdout


@check
def cli_on_path():
    exe = shutil.which("convtune")
    assert exe and os.path.realpath(os.path.dirname(exe)) == os.path.realpath(os.path.join(sys.prefix, "bin")), exe
    env = {k: v for k, v in os.environ.items() if k not in ("CONVTUNE_SHAPES_DIR", "CONVTUNE_RECORDINGS_DIR")}
    p = run([exe, "list"], env=env)
    assert p.returncode == 0 and "cpu.direct" in p.stdout, p.stdout
    # A built-in workload through the CLI: the command finds the package's shape files.
    p = run([exe, "simulate", "--workload", "resnet50", "--stream", "fixed", "--iterations", "5", "--json",
             "--replay", os.path.join(args.source, "tests", "data", "resnet50_cpu_infer.json")], env=env)
    assert p.returncode == 0 and '"recommendation"' in p.stdout, p.stdout[-2000:]
    p = run([exe, "list", "recordings"], env=env)   # the package's recording library
    assert p.returncode == 0 and "h200  (--replay h200)" in p.stdout, p.stdout
    p = run([exe, "run", "--problem", "n=0"], env=env)   # bad input: exit 2, passed through the script
    assert p.returncode == 2, (p.returncode, p.stdout)


passed = failed = 0
for fn in checks:
    try:
        fn()
        passed += 1
        print(f"ok   {fn.__name__}")
    except Exception:
        failed += 1
        print(f"FAIL {fn.__name__}")
        traceback.print_exc(file=sys.stdout)
print(f"smoke: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
