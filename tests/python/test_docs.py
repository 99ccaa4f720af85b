"""The Python examples of README.md and docs/python.md run as written (from the repository root,
where the README's replay file lives)."""

import os
import re
import subprocess
import sys

import pytest

REPO = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))


def python_blocks(doc):
    with open(os.path.join(REPO, doc)) as f:
        return re.findall(r"```python\n(.*?)```", f.read(), re.S)


@pytest.mark.parametrize("doc,index", [("README.md", 0), ("docs/python.md", 0), ("docs/python.md", 3)])
def test_example_runs(doc, index):
    blocks = python_blocks(doc)
    assert len(blocks) > index, f"{doc} has no Python example {index}"
    r = subprocess.run([sys.executable, "-c", blocks[index]], capture_output=True, text=True, cwd=REPO, timeout=600,
                       env=dict(os.environ, CONVTUNE_DB=""))
    assert r.returncode == 0, f"{doc} example {index} failed:\n{blocks[index]}\n{r.stderr}"
