"""Hostile input through the Python module: each refused with convtune.Error naming the field,
never a crash, a truncated message or hours of work (docs/reliability.md)."""

import pytest

import convtune


def test_a_nul_byte_is_shown_escaped_not_cut():
    with pytest.raises(convtune.Error) as e:
        convtune.parse_problem("n=1\x00,c=1")
    assert "'1\\0'" in str(e.value), str(e.value)
