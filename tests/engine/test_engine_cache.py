"""Block pool, eviction policy and KV-cache manager invariants."""

from __future__ import annotations

import pytest

from glmcot.engine.cache.block_pool import BlockPool
from glmcot.engine.cache.eviction import LRUEviction
from glmcot.engine.cache.policies import make_eviction_policy
from glmcot.engine.cache.kv_cache_manager import KVCacheManager
from glmcot.engine.core.request import Request, SegmentSpan
from glmcot.engine.sampling_params import SamplingParams


def request(rid: str, tokens: list[int], spans=None) -> Request:
    return Request(rid, tokens, SamplingParams(), spans)


def test_lru_pops_least_recently_freed_and_removes_in_o1():
    pool = BlockPool(4, LRUEviction())
    a, b, c, d = pool.get_new_blocks(4)
    assert pool.num_free_blocks == 0
    pool.free([c, a, d, b])
    assert [x.block_id for x in pool.policy] == [c.block_id, a.block_id, d.block_id, b.block_id]
    pool.touch([d])  # a hit takes it out of the middle
    assert [x.block_id for x in pool.policy] == [c.block_id, a.block_id, b.block_id]
    assert pool.get_new_blocks(1) == [c]
    with pytest.raises(ValueError):
        pool.get_new_blocks(3)


def test_unknown_policy_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown eviction policy"):
        make_eviction_policy("mru")


def test_prefix_hits_refcounts_and_tail_first_release():
    kv = KVCacheManager(8, 4, LRUEviction())
    r1 = request("a", list(range(10)))  # 2 full blocks + 2 tokens
    assert kv.get_computed_blocks(r1) == ([], 0)
    assert kv.allocate_slots(r1, 10)
    r1.num_computed_tokens = 10
    kv.cache_blocks(r1, r1.num_computed_tokens)
    assert kv.pool.stats()["blocks_cached"] == 2
    r2 = request("b", list(range(8)) + [99, 98, 97])
    hits, n = kv.get_computed_blocks(r2)
    assert n == 8 and [b.block_id for b in hits] == kv.block_ids(r1)[:2]
    assert kv.allocate_slots(r2, 3, hits)
    assert [b.ref_count for b in hits] == [2, 2]
    kv.free(r1)
    assert [b.ref_count for b in hits] == [1, 1]
    kv.free(r2)
    order = [b.block_id for b in kv.pool.policy]
    # r2 released its tail first, then its shared head: the head blocks are evicted last.
    assert order[-2:] == [hits[1].block_id, hits[0].block_id]


def test_last_token_is_never_a_hit():
    kv = KVCacheManager(8, 4, LRUEviction())
    r1 = request("a", list(range(8)))
    kv.allocate_slots(r1, 8)
    r1.num_computed_tokens = 8
    kv.cache_blocks(r1, r1.num_computed_tokens)
    _, n = kv.get_computed_blocks(request("b", list(range(8))))
    assert n == 4  # block 2 holds the last token, which must be recomputed for logits


def test_hash_collision_is_a_miss():
    kv = KVCacheManager(8, 4, LRUEviction(), hash_fn=lambda parent, tokens: 1)
    r1 = request("a", [1, 2, 3, 4, 5])
    kv.allocate_slots(r1, 5)
    r1.num_computed_tokens = 5
    kv.cache_blocks(r1, r1.num_computed_tokens)
    _, n = kv.get_computed_blocks(request("b", [9, 9, 9, 9, 5]))
    assert n == 0
    _, n = kv.get_computed_blocks(request("c", [1, 2, 3, 4, 7]))
    assert n == 4


def test_allocation_failure_changes_nothing_and_eviction_is_counted():
    kv = KVCacheManager(3, 4, LRUEviction())
    r1 = request("a", list(range(8)))
    kv.allocate_slots(r1, 8)
    r1.num_computed_tokens = 8
    kv.cache_blocks(r1, r1.num_computed_tokens)
    kv.free(r1)
    r2 = request("b", list(range(100, 116)))
    assert not kv.allocate_slots(r2, 16)
    assert kv.pool.num_free_blocks == 3 and "b" not in kv.req_blocks
    assert kv.allocate_slots(r2, 12)
    assert kv.pool.stats()["evictions"] == 2  # r1's two cached blocks made room
    assert kv.get_computed_blocks(request("c", list(range(9))))[1] == 0
    assert kv.pool.stats()["blocks_cached"] == 3  # r2's blocks, indexed as they are allocated


def test_blocks_carry_segment_levels():
    kv = KVCacheManager(8, 4, LRUEviction())
    r = request("a", list(range(12)), [SegmentSpan(0, 6, 1, "sys"), SegmentSpan(6, 12, 2, None)])
    kv.allocate_slots(r, 12)
    r.num_computed_tokens = 12
    kv.cache_blocks(r, r.num_computed_tokens)
    assert [b.level for b in kv.req_blocks["a"]] == [1, 1, 2]
    assert all(b.last_access > 0 for b in kv.req_blocks["a"])
