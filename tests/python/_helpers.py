"""Helpers shared by the convtune Python tests."""

import os
import subprocess
import sys


def cli_error(result):
    """The message of a CLI failure: stderr's 'convtune: error: MESSAGE'."""
    assert result.returncode == 2, result
    line = result.stderr.strip().splitlines()[-1]
    prefix = "convtune: error: "
    assert line.startswith(prefix), result.stderr
    return line[len(prefix):]


def run_python(code, env=None, timeout=600):
    """Runs code in a fresh interpreter with this test's environment (plus env)."""
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=timeout)
