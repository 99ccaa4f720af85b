"""Shared fixtures for the convtune Python tests (run by the test_python CTest test, which puts
the build tree's package on PYTHONPATH and names the CLI in CONVTUNE_CLI)."""

import os
import subprocess

import pytest

from convtune import _convtune


@pytest.fixture(autouse=True)
def restore_flags():
    """Every test starts from, and leaves, convtune's process-wide flags as they were."""
    saved = _convtune.get_flags()
    yield
    _convtune.set_flags(saved)


@pytest.fixture
def cli():
    """Runs the convtune CLI: cli(*args) -> CompletedProcess (text)."""
    exe = os.environ.get("CONVTUNE_CLI")
    if not exe or not os.path.exists(exe):
        pytest.skip("CONVTUNE_CLI does not name the convtune executable (run through ctest)")

    def run(*args, check=None):
        r = subprocess.run([exe, *args], capture_output=True, text=True, timeout=600)
        if check is not None:
            assert r.returncode == check, f"convtune {' '.join(args)}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
        return r

    run.path = exe
    return run
