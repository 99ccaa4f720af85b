"""convtune._convtune.write_file_atomic: the CLI's output rules from Python (docs/reliability.md, Files)."""
import os

import pytest

import convtune
from convtune import _convtune


def test_writes_bytes_and_replaces_a_regular_file(tmp_path):
    out = tmp_path / "out.trace"
    _convtune.write_file_atomic(str(out), b"first\n")
    _convtune.write_file_atomic(str(out), b"second\n")
    assert out.read_bytes() == b"second\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.trace"]


def test_refuses_a_directory_and_a_fifo_naming_them(tmp_path):
    d = tmp_path / "folder"
    d.mkdir()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, kind in ((d, "a directory"), (fifo, "a FIFO")):
        with pytest.raises(convtune.Error, match=f"{path}: cannot write here: {kind} stands there"):
            _convtune.write_file_atomic(str(path), b"x")
    assert d.is_dir() and fifo.is_fifo()


def test_never_writes_through_a_link_planted_at_the_temporary_name(tmp_path):
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    out = tmp_path / "out.trace"
    os.symlink(victim, tmp_path / f"out.trace.tmp.{os.getpid()}")
    _convtune.write_file_atomic(str(out), b"trace")
    assert victim.read_bytes() == b"precious" and out.read_bytes() == b"trace"
