"""Hostile input through the Python module: each refused with convtune.Error naming the field,
never a crash, a truncated message or hours of work (docs/reliability.md)."""

import pytest

import convtune


def test_a_nul_byte_is_shown_escaped_not_cut():
    with pytest.raises(convtune.Error) as e:
        convtune.parse_problem("n=1\x00,c=1")
    assert "'1\\0'" in str(e.value), str(e.value)


def test_an_empty_replay_or_plot_is_refused_not_taken_as_not_given(tmp_path):
    w = tmp_path / "one.workload"
    w.write_text("convtune-workload 1\nlayer a x1 n=1,c=3,k=4,in=8x8,ker=3x3\n")
    for kw, name in (({"replay": ""}, "replay"), ({"plot": ""}, "plot")):
        with pytest.raises(convtune.Error, match=f"^{name}: must not be empty"):
            convtune.simulate(str(w), iterations=1, **kw)


def test_torch_stats_before_enable_is_a_dict_of_zero_counts():
    # convtune.torch imports without PyTorch; stats() reads no PyTorch state.
    import convtune.torch as ct

    assert not ct.is_enabled()
    s = ct.stats()
    assert isinstance(s, dict), s
    assert s["convtune"] == {"fwd": 0, "bwd_data": 0, "bwd_filter": 0}
    assert s["search_ms"] == 0 and s["fallback"] == {} and s["sources"] == {} and s["algorithms"] == {}
