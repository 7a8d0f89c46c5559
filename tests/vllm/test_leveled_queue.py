"""The plugin's leveled free queue inside vLLM's own KVCacheManager / BlockPool (no engine)."""

from __future__ import annotations

import pytest

from tests.vllm.conftest import BLOCK, Harness, needs_vllm, tokens

needs_vllm()

P1, P2, P3, P4 = 1, 2, 3, 4


def test_eviction_order_across_levels_is_p4_p3_p2_p1_and_tail_first():
    h = Harness(num_blocks=12)
    shared, _ = h.run(tokens(1, 2 * BLOCK + 1), [(P1, 2 * BLOCK)])  # 2 cached blocks of level 1
    notebook, _ = h.run(tokens(2, 2 * BLOCK + 1), [(P2, 2 * BLOCK)], session="running")
    finished, _ = h.run(tokens(3, 2 * BLOCK + 1), [(P2, 2 * BLOCK)], session="done", end=True)
    transient, _ = h.run(tokens(4, 2 * BLOCK + 1), [(P4, 2 * BLOCK + 1)])
    order = h.cached_order()
    # each request's third block holds one token: never hashed, so it is reused before any cached one
    expected = transient[1::-1] + finished[1::-1] + notebook[1::-1] + shared[1::-1]
    assert order == expected
    free = h.free_order()
    assert all(h.pool.blocks[i].block_hash is None for i in free[: len(free) - len(expected)])
    # evicting goes in that order, and is counted by level
    fresh = len(free) - len(expected)
    taken = h.evict(fresh + 5)
    assert taken[fresh:] == expected[:5]
    assert h.controller.evictions.as_dict() == {"unhashed": 0, "p4": 2, "p3": 2, "p2": 1, "p1": 0}
    assert h.controller.table.demoted == 2


def test_lru_within_a_level_and_tail_first_within_a_request():
    h = Harness(num_blocks=12)
    first, _ = h.run(tokens(1, 3 * BLOCK), [(P4, 3 * BLOCK)])
    second, _ = h.run(tokens(2, 3 * BLOCK), [(P4, 3 * BLOCK)])
    cached = h.cached_order()
    assert cached == first[::-1] + second[::-1]  # three full blocks each


def test_hit_takes_a_block_out_of_the_queue_and_refcounts_stay_right():
    h = Harness(num_blocks=12)
    prompt = tokens(1, 2 * BLOCK)
    ids, _ = h.run(prompt + tokens(2, BLOCK + 1), [(P1, 2 * BLOCK), (P4, BLOCK + 1)])
    request, cached = h.start(prompt + tokens(3, BLOCK + 1), [(P1, 2 * BLOCK), (P4, BLOCK + 1)])
    assert cached == 2 * BLOCK
    assert not set(ids[:2]) & set(h.free_order())  # hit blocks are in use, not free
    assert [h.pool.blocks[i].ref_cnt for i in ids[:2]] == [1, 1]
    h.finish(request)
    assert all(h.pool.blocks[i].ref_cnt == 0 for i in h.free_order())
    assert h.pool.get_num_free_blocks() == 12
    assert h.controller.table.level(ids[0]) == P1


def test_shared_block_takes_the_most_protective_level():
    h = Harness(num_blocks=12)
    prompt = tokens(1, 2 * BLOCK)
    first, hold = h.start(prompt + [7], [(P4, 2 * BLOCK + 1)])
    second, _ = h.start(prompt + [8], [(P1, 2 * BLOCK), (P4, 1)])  # shares the two blocks
    shared = [b.block_id for b in h.manager.coordinator.get_blocks(second.request_id)[0][:2]]
    assert [h.pool.blocks[i].ref_cnt for i in shared] == [2, 2]
    h.finish(second)
    h.finish(first)  # the last user says level 4; the block keeps level 1
    assert [h.controller.table.level(i) for i in shared] == [P1, P1]
    assert h.cached_order()[-2:] == shared[::-1]


def test_parent_is_never_less_protected_than_its_child():
    h = Harness(num_blocks=12)
    # a transient head before a notebook: the head block rises to level 2 with it
    ids, _ = h.run(tokens(1, 3 * BLOCK + 1), [(P4, BLOCK), (P2, 2 * BLOCK)], session="s")
    assert [h.controller.table.level(i) for i in ids[:3]] == [P2, P2, P2]
    # a block that mixes level 1 and level 4 tokens takes level 1 (most protective)
    ids, _ = h.run(tokens(2, 2 * BLOCK + 1), [(P1, BLOCK + 2), (P4, BLOCK - 1)])
    assert [h.controller.table.level(i) for i in ids[:2]] == [P1, P1]


def test_p1_is_capped_and_the_rest_ranks_as_p2():
    h = Harness(num_blocks=10, p1_share=0.2)  # 2 blocks of level 1 at most
    ids, _ = h.run(tokens(1, 4 * BLOCK + 1), [(P1, 4 * BLOCK + 1)])
    levels = [h.controller.table.level(i) for i in ids[:4]]
    assert levels == [P1, P1, P2, P2]  # the head keeps level 1, so parents stay more protected
    assert h.controller.table.num_p1 == 2
    assert h.controller.table.p1_overflow == 2
    assert h.cached_order() == [ids[3], ids[2], ids[1], ids[0]]
    # once level-1 blocks are evicted, the cap makes room again
    h.evict(h.pool.get_num_free_blocks())
    assert h.controller.table.num_p1 == 0
    ids, _ = h.run(tokens(2, 2 * BLOCK + 1), [(P1, 2 * BLOCK + 1)])
    assert [h.controller.table.level(i) for i in ids[:2]] == [P1, P1]


def test_session_end_demotes_only_blocks_no_running_session_holds():
    h = Harness(num_blocks=16)
    notebook = tokens(1, 2 * BLOCK)
    a, _ = h.run(notebook + tokens(2, BLOCK + 1), [(P2, 2 * BLOCK), (P4, BLOCK + 1)], session="a")
    b, _ = h.run(notebook + tokens(3, BLOCK + 1), [(P2, 3 * BLOCK)], session="b")  # shares a's two blocks
    assert a[:2] == b[:2]
    h.run(tokens(9, 2), [(P4, 2)], session="a", end=True)
    table = h.controller.table
    assert [table.level(i) for i in a[:2]] == [P2, P2]  # b still runs
    assert table.level(a[2]) == P4
    assert table.level(b[2]) == P2
    h.run(tokens(9, 2), [(P4, 2)], session="b", end=True)
    assert [table.level(i) for i in b[:3]] == [P3, P3, P3]
    # demoted while free: now evicted after level 4, before levels 2 and 1
    order = h.cached_order()
    assert order.index(a[2]) < order.index(b[2])
    assert table.sessions_ended == 2 and table.live_sessions == 0
    # a late level-2 request of an ended session claims level 3
    late, _ = h.run(tokens(5, BLOCK + 1), [(P2, BLOCK + 1)], session="a")
    assert table.level(late[0]) == P3


def test_session_end_only_when_the_request_finished():
    h = Harness(num_blocks=12)
    ids, _ = h.run(tokens(1, BLOCK + 1), [(P2, BLOCK + 1)], session="s")
    request, _ = h.start(tokens(2, 2), [(P4, 2)], session="s", end=True)
    h.manager.free(request)  # freed but not finished: a preemption
    assert h.controller.table.level(ids[0]) == P2
    h.run(tokens(3, 2), [(P4, 2)], session="s", end=True)
    assert h.controller.table.level(ids[0]) == P3


def test_idle_sessions_time_out_and_sessions_are_bounded():
    h = Harness(num_blocks=16, session_timeout_s=10.0, max_sessions=2)
    now = [0.0]
    h.controller.table.clock = lambda: now[0]
    ids, _ = h.run(tokens(1, BLOCK + 1), [(P2, BLOCK + 1)], session="idle")
    now[0] = 11.0
    h.run(tokens(2, 2), [(P4, 2)], session="other")  # any free checks the timeouts
    assert h.controller.table.level(ids[0]) == P3
    assert h.controller.table.sessions_timed_out == 1
    # more running sessions than the bound: the least recently active one ends
    first, _ = h.run(tokens(3, BLOCK + 1), [(P2, BLOCK + 1)], session="x")
    h.run(tokens(4, BLOCK + 1), [(P2, BLOCK + 1)], session="y")
    h.run(tokens(5, BLOCK + 1), [(P2, BLOCK + 1)], session="z")
    assert h.controller.table.live_sessions == 2
    assert h.controller.table.level(first[0]) == P3


def test_p2_without_a_session_times_out_too():
    h = Harness(num_blocks=12, session_timeout_s=5.0)
    now = [0.0]
    h.controller.table.clock = lambda: now[0]
    ids, _ = h.run(tokens(1, BLOCK + 1), [(P2, BLOCK + 1)])
    assert h.controller.table.level(ids[0]) == P2
    now[0] = 6.0
    h.run(tokens(2, 2), [(P4, 2)])
    assert h.controller.table.level(ids[0]) == P3


def test_untagged_and_malformed_requests_are_level_4_and_still_freed():
    h = Harness(num_blocks=12)
    plain, _ = h.run(tokens(1, BLOCK + 1))
    bad, _ = h.run(tokens(2, BLOCK + 1), xargs={"glmcot_wire": 1, "glmcot_levels": [1, 2], "glmcot_tokens": [4]})
    future, _ = h.run(tokens(3, BLOCK + 1), xargs={"glmcot_wire": 99})
    assert h.controller.requests.untagged == 1
    assert h.controller.requests.malformed == 2
    assert "glmcot_wire=99" in h.controller.last_error
    assert [h.controller.table.level(i[0]) for i in (plain, bad, future)] == [P4, P4, P4]
    assert h.pool.get_num_free_blocks() == 12


def test_observe_mode_keeps_vllms_order_and_counts_levels():
    def scenario(h: Harness) -> list[int]:
        h.run(tokens(1, 2 * BLOCK + 1), [(P1, 2 * BLOCK + 1)])
        h.run(tokens(2, 3 * BLOCK + 1), [(P4, 3 * BLOCK + 1)])
        h.run(tokens(3, 2 * BLOCK + 1), [(P2, 2 * BLOCK + 1)], session="s")
        taken = h.evict(h.pool.get_num_free_blocks() - 2)
        return taken

    stock = Harness(num_blocks=12, attach=False)
    observe = Harness(num_blocks=12, mode="observe")
    assert type(stock.pool.free_block_queue).__name__ == "FreeKVCacheBlockQueue"
    assert scenario(observe) == scenario(stock)
    assert observe.free_order() == stock.free_order()
    counts = observe.controller.evictions.as_dict()
    assert counts["p1"] == 2 and counts["p4"] == 3 and counts["p2"] == 0  # LRU evicted the level-1 prompt
    enforce = Harness(num_blocks=12)
    scenario(enforce)
    assert enforce.controller.evictions.as_dict()["p1"] == 0


def test_prefix_cache_counters_match_vllms_own():
    h = Harness(num_blocks=12)
    prompt = tokens(1, 2 * BLOCK)
    h.run(prompt + [1, 2], [(P1, 2 * BLOCK + 2)])
    h.run(prompt + [3, 4], [(P1, 2 * BLOCK), (P4, 2)])
    h.run(tokens(5, 9))
    ours = h.controller.prefix
    theirs = h.manager.make_prefix_cache_stats()
    assert (ours["requests"], ours["queries"], ours["hits"]) == (theirs.requests, theirs.queries, theirs.hits)
    assert ours["hits"] == 2 * BLOCK


def test_reset_prefix_cache_clears_levels():
    h = Harness(num_blocks=12)
    h.run(tokens(1, 2 * BLOCK + 1), [(P1, 2 * BLOCK + 1)])
    assert h.manager.reset_prefix_cache()
    assert h.controller.table.counts() == {1: 0, 2: 0, 3: 0, 4: 0}
    assert h.cached_order() == []
    assert h.pool.get_num_free_blocks() == 12


def test_snapshot_is_json_with_the_documented_fields(tmp_path):
    import json

    h = Harness(num_blocks=12)
    h.run(tokens(1, 2 * BLOCK + 1), [(P1, 2 * BLOCK + 1)], session="s", end=True)
    snapshot = json.loads(json.dumps(h.controller.snapshot()))
    assert snapshot["mode"] == "enforce" and snapshot["wire_version"] == 1
    assert snapshot["free_blocks"]["p1"] == 2
    assert snapshot["tagged_blocks"]["p1"] == 2
    assert snapshot["requests"]["session_ends"] == 1
    assert set(snapshot["evictions"]) == {"unhashed", "p1", "p2", "p3", "p4"}


def test_unsupported_setups_raise_unsupported():
    import torch
    from vllm.v1.kv_cache_interface import SlidingWindowSpec

    from glmcot.vllm_plugin.hooks import Unsupported

    spec = SlidingWindowSpec(block_size=BLOCK, num_kv_heads=1, head_size=1, dtype=torch.float32, sliding_window=8)
    with pytest.raises(Unsupported, match="SlidingWindowSpec|hybrid"):
        Harness(num_blocks=12, spec=spec)
    h = Harness(num_blocks=12, attach=False)
    h.run(tokens(1, BLOCK + 1))
    from glmcot.vllm_plugin.hooks import attach
    from glmcot.vllm_plugin.settings import Mode, Settings

    h.start(tokens(2, BLOCK + 1))
    with pytest.raises(Unsupported, match="in use"):
        attach(h.manager, Settings(mode=Mode.ENFORCE), write_stats=False)
    assert type(h.pool.free_block_queue).__name__ == "FreeKVCacheBlockQueue"


def test_unknown_vllm_version_leaves_stock_behaviour(monkeypatch):
    import vllm
    from vllm.v1.core.sched.scheduler import Scheduler

    import glmcot.vllm_plugin as plugin
    from glmcot.vllm_plugin.hooks import Unsupported, check_version

    monkeypatch.setattr(vllm, "__version__", "0.99.1")
    with pytest.raises(Unsupported, match="0.99.1"):
        check_version()
    monkeypatch.setenv("GLMCOT_VLLM_PLUGIN", "enforce")
    monkeypatch.setitem(plugin._state, "registered", False)
    before = Scheduler.__init__
    plugin.register()  # never raises
    assert plugin.status().startswith("unsupported: vLLM 0.99.1")
    assert Scheduler.__init__ is before


def test_changed_queue_interface_is_detected(monkeypatch):
    from vllm.v1.core import kv_cache_utils

    from glmcot.vllm_plugin.hooks import Unsupported, check_version

    monkeypatch.setattr(kv_cache_utils.FreeKVCacheBlockQueue, "pop_tail", lambda self: None, raising=False)
    with pytest.raises(Unsupported, match="pop_tail"):
        check_version()


def test_bad_settings_do_not_raise_from_register(monkeypatch):
    import glmcot.vllm_plugin as plugin

    monkeypatch.setenv("GLMCOT_VLLM_PLUGIN", "sometimes")
    monkeypatch.setitem(plugin._state, "registered", False)
    plugin.register()
    assert "GLMCOT_VLLM_PLUGIN='sometimes'" in plugin.status()


def test_requests_over_the_span_or_session_bounds_run_untagged_and_are_counted():
    """A session id of any length was kept per session (10,000 x 100 KB ids held 884 MB), and a
    request with 10^6 spans was walked at each free: over the bounds, a request runs untagged,
    nothing of it is kept, and `over_limit` counts it."""
    h = Harness(num_blocks=12, max_spans=8, max_session_chars=16)
    long_session, _ = h.run(tokens(1, BLOCK + 1), [(P2, BLOCK + 1)], session="s" * 100_000)
    many = {"glmcot_wire": 1, "glmcot_levels": [2, 4] * 500_000, "glmcot_tokens": [0, 0] * 500_000}
    many_spans, _ = h.run(tokens(2, BLOCK + 1), xargs=many)
    fine, _ = h.run(tokens(3, BLOCK + 1), [(P2, BLOCK + 1)], session="s" * 16)
    assert h.controller.requests.over_limit == 2 and h.controller.requests.malformed == 0
    assert h.controller.requests.tagged == 1
    assert "1000000 spans; at most 8" in h.controller.last_error
    assert h.controller.table.level(long_session[0]) == P4 and h.controller.table.level(many_spans[0]) == P4
    assert h.controller.table.level(fine[0]) == P2
    assert h.controller.table.live_sessions == 1   # only the session within the bound is kept
    assert h.controller.snapshot()["requests"]["over_limit"] == 2
    assert h.pool.get_num_free_blocks() == 12


def test_a_long_request_id_is_kept_as_a_digest_for_a_notebook_without_a_session():
    h = Harness(num_blocks=12, max_session_chars=32)
    h._count = 10**3000 - 1   # the harness names requests r<count>: this one's id has 3,002 characters
    request, _ = h.start(tokens(1, BLOCK + 1), [(P2, BLOCK + 1)])
    assert len(request.request_id) == 3002
    h.finish(request)
    (session,) = list(h.controller.table._live)
    assert session.startswith("request:") and len(session) == len("request:") + 32
