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


def test_thread_scoped_flags_blocks_ended_out_of_order_leave_no_override():
    import asyncio

    import convtune.backends.cudnn as cudnn
    from convtune import _convtune

    def block(v):
        with cudnn.flags(benchmark=v, scope="thread"):
            yield

    assert _convtune.get_thread_flags() is None
    for first, second in ((True, False), (False, True)):
        a, b = block(first), block(second)
        next(a)
        next(b)
        assert cudnn.benchmark is second
        a.close()  # the outer block ends first
        assert _convtune.get_thread_flags() is not None  # b is still open
        b.close()
        assert _convtune.get_thread_flags() is None
        assert cudnn.benchmark is False
    # Three, ended middle, outer, inner: the same.
    g = [block(v) for v in (True, False, True)]
    for x in g:
        next(x)
    for k in (1, 0, 2):
        g[k].close()
    assert _convtune.get_thread_flags() is None

    # asyncio tasks on one thread, each in a block, ending in the order they entered.
    async def task(v, entered, release):
        with cudnn.flags(benchmark=v, scope="thread"):
            entered.set()
            await release.wait()

    async def main():
        e1, e2, r1, r2 = asyncio.Event(), asyncio.Event(), asyncio.Event(), asyncio.Event()
        t1 = asyncio.ensure_future(task(True, e1, r1))
        await e1.wait()
        t2 = asyncio.ensure_future(task(False, e2, r2))
        await e2.wait()
        r1.set()
        await t1
        r2.set()
        await t2

    asyncio.run(main())
    assert _convtune.get_thread_flags() is None


def test_a_tune_of_more_problems_than_the_caps_is_refused_before_anything_runs(tmp_path):
    import time

    t0 = time.monotonic()
    # The case: 10^6 batch sizes of a network (5 x 10^6 problems; bad_alloc before).
    with pytest.raises(convtune.Error, match=r"^batch: 1000000 batch sizes, above the limit of 4096 for one tune"):
        convtune.tune(workload="alexnet", batch=list(range(1, 10**6 + 1)))
    # 3001 problems x 3 data types x 4000 batch sizes: above the 10^6 problems of one tune.
    shapes = tmp_path / "many.txt"
    shapes.write_text("".join(f"n=1,c={c},k=1,in=8,ker=3\n" for c in range(1, 3002)))
    with pytest.raises(convtune.Error, match=r"^batch: the request makes 36012000 problems or more, above the limit of 1000000"):
        convtune.tune(shapes=str(shapes), batch=list(range(1, 4001)), dtype=["f32", "f16", "bf16"])
    assert time.monotonic() - t0 < 60
