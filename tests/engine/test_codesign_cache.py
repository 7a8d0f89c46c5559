"""GLM co-design, cache level: the four-level priority policy, block levels and sessions, and the
chunk index inside the block pool (no model needed)."""

from __future__ import annotations

import pytest

from glmcot.engine import EngineConfig
from glmcot.engine.cache.block_pool import BlockPool
from glmcot.engine.cache.chunk_index import ChunkEntry
from glmcot.engine.cache.policies import make_eviction_policy
from glmcot.engine.cache.kv_cache_manager import KVCacheManager
from glmcot.engine.cache.priority import FreeQueue, PriorityEviction
from glmcot.engine.cache.sessions import SessionLevels
from glmcot.engine.core.request import Request, SegmentSpan
from glmcot.engine.sampling_params import SamplingParams


def cached_blocks(pool: BlockPool, levels: list[int]):
    """Take one block per level, mark it cached at that level."""
    blocks = pool.get_new_blocks(len(levels))
    for i, (block, level) in enumerate(zip(blocks, levels)):
        block.block_hash, block.token_ids, block.level = 1000 + i, (i,), level
    return blocks


def test_levels_are_evicted_p4_p3_p2_p1_and_empty_blocks_first():
    pool = BlockPool(6, PriorityEviction())
    b1, b2, b3, b4, b4b = cached_blocks(pool, [1, 2, 3, 4, 4])
    pool.free([b1])
    pool.free([b2])
    pool.free([b3])
    pool.free([b4])
    pool.free([b4b])
    # The sixth block was never used: it holds nothing and goes first.
    order = [b.block_id for b in pool.policy]
    assert order == [5, b4.block_id, b4b.block_id, b3.block_id, b2.block_id, b1.block_id]
    popped = pool.get_new_blocks(6)
    assert [b.block_id for b in popped] == order
    assert pool.stats()["evictions_p4"] == 2 and pool.stats()["evictions_p1"] == 1
    assert pool.stats()["evictions"] == 5  # the empty block was not an eviction


def test_lru_inside_a_level_and_tail_first_release():
    pool = BlockPool(6, PriorityEviction())
    older = cached_blocks(pool, [2, 2, 2])
    newer = cached_blocks(pool, [2, 2, 2])
    pool.free(reversed(older))  # a request releases its blocks tail first
    pool.free(reversed(newer))
    assert [b.block_id for b in pool.policy] == [b.block_id for b in (*reversed(older), *reversed(newer))]
    pool.touch([older[2]])  # a hit takes it out; freed again it is the most recent
    pool.free([older[2]])
    assert list(pool.policy)[-1] is older[2]


def test_p1_beyond_its_cap_ranks_as_p2_least_recent_first():
    pool = BlockPool(6, PriorityEviction(p1_cap_blocks=2))
    p2 = cached_blocks(pool, [2])[0]
    p1 = cached_blocks(pool, [1, 1, 1, 1])
    pool.free([p2])
    for block in p1:
        pool.free([block])
    order = list(pool.policy)
    # The two least recently used P1 blocks overflowed into P2 and keep their recency there.
    assert order == [pool.blocks[5], p2, p1[0], p1[1], p1[2], p1[3]]
    assert pool.policy.level_of_free(p1[0]) == 2 and pool.policy.level_of_free(p1[3]) == 1
    assert pool.policy.num_p1_overflow == 2


def test_zero_cap_never_protects_p1_and_nothing_wedges():
    pool = BlockPool(4, PriorityEviction(p1_cap_blocks=0))
    blocks = cached_blocks(pool, [1, 1, 1, 1])
    pool.free(blocks)
    assert all(pool.policy.level_of_free(b) == 2 for b in blocks)
    assert len(pool.get_new_blocks(4)) == 4  # every free block can always be taken


def test_glm_evicts_p3_prefix_blocks_no_other_session_read_first():
    for split in (True, False):
        pool = BlockPool(6, PriorityEviction(split_p3=split))
        blocks = cached_blocks(pool, [3, 3, 3, 3, 3])
        for block in blocks:
            block.owner = "A"
        blocks[4].key = "vertex:7"  # a vertex chunk serves any prompt that holds it: kept with the shared ones
        read_by_b, read_by_a, shared_first = blocks[0], blocks[1], blocks[3]
        pool.touch([read_by_b], "B")  # another question read it: worth keeping for the next one
        pool.touch([read_by_a], "A")  # its own session only
        pool.touch([shared_first], None)  # a request without a session counts as another reader
        assert read_by_b.shared and shared_first.shared and not read_by_a.shared
        for block in blocks:  # one release each, in this order: LRU order = block order
            pool.free([block] if block.ref_count == 1 else [block, block])
        order = [b for b in pool.policy if b is not pool.blocks[5]]
        if split:
            assert order == [blocks[1], blocks[2], blocks[0], blocks[3], blocks[4]]
        else:  # glm-paper: one LRU level
            assert order == blocks
        assert all(pool.policy.level_of_free(b) == 3 for b in blocks)
    (block,) = pool.get_new_blocks(1)
    block.block_hash, block.token_ids, block.owner, block.shared = 1, (1,), "A", True
    block.reset_content()
    assert block.owner is None and not block.shared  # new content starts unread


def test_cached_blocks_record_their_session_and_hits_by_others():
    kv = KVCacheManager(16, 4, PriorityEviction(split_p3=True))
    system = list(range(8))
    first = make_request("a", system + [50, 51, 52, 53, 54], [SegmentSpan(0, 8, 1, None), SegmentSpan(8, 13, 2, None)], "A")
    again = make_request("a2", system + [50, 51, 52, 53, 60], [SegmentSpan(0, 8, 1, None), SegmentSpan(8, 13, 2, None)], "A")
    other = make_request("b", system + [70, 71, 72, 73, 74], [SegmentSpan(0, 8, 1, None), SegmentSpan(8, 13, 4, None)], "B")
    levels = SessionLevels(kv.pool)
    run_prefill(kv, levels, first)
    blocks = list(kv.req_blocks["a"])
    assert [b.owner for b in blocks[:3]] == ["A", "A", "A"] and not any(b.shared for b in blocks)
    kv.free(first)
    run_prefill(kv, levels, again)  # its own session hits its notebook block: still unshared
    assert kv.req_blocks["a2"][:3] == blocks[:3] and not blocks[2].shared
    run_prefill(kv, levels, other)  # another session hits the shared prompt only
    assert blocks[0].shared and blocks[1].shared and not blocks[2].shared


def test_policy_option_and_config_validation():
    assert isinstance(make_eviction_policy("glm", 100, 0.1), PriorityEviction)
    assert make_eviction_policy("glm", 100, 0.1).p1_cap == 10
    assert make_eviction_policy("glm", 100, 0.1).split_p3 and not make_eviction_policy("glm-paper", 100, 0.1).split_p3
    assert EngineConfig(eviction_policy="glm-paper").eviction_policy == "glm-paper"
    with pytest.raises(ValueError, match="eviction_policy"):
        EngineConfig(eviction_policy="mru")
    with pytest.raises(ValueError, match="chunk_reuse"):
        EngineConfig(chunk_reuse="blend")
    with pytest.raises(ValueError, match="p1_cap_fraction"):
        EngineConfig(p1_cap_fraction=1.5)


def make_request(rid, tokens, spans, session=None):
    return Request(rid, tokens, SamplingParams(), spans, session=session)


def run_prefill(kv: KVCacheManager, levels: SessionLevels, request: Request) -> None:
    hits, n = kv.get_computed_blocks(request)
    assert kv.allocate_slots(request, request.num_tokens - n, hits)
    request.num_computed_tokens = request.num_tokens
    levels.tag_request(request, kv.req_blocks[request.request_id], kv.num_cached_blocks[request.request_id], kv.block_size)


def test_end_session_demotes_its_notebook_only_and_is_ordered_before_running_sessions():
    kv = KVCacheManager(32, 4, PriorityEviction())
    levels = SessionLevels(kv.pool)
    system = list(range(8))  # 2 blocks of P1
    a = make_request("a", system + list(range(100, 108)) + [1, 2, 3, 4, 5],
                     [SegmentSpan(0, 8, 1, None), SegmentSpan(8, 16, 2, None), SegmentSpan(16, 21, 4, None)], "A")
    b = make_request("b", system + list(range(200, 208)) + [6, 7, 8, 9, 10],
                     [SegmentSpan(0, 8, 1, None), SegmentSpan(8, 16, 2, None), SegmentSpan(16, 21, 4, None)], "B")
    run_prefill(kv, levels, a)
    run_prefill(kv, levels, b)
    blocks_a, blocks_b = list(kv.req_blocks["a"]), list(kv.req_blocks["b"])
    assert blocks_a[:2] == blocks_b[:2]  # the shared P1 prompt
    assert [blk.level for blk in blocks_a[:5]] == [1, 1, 2, 2, 4]
    kv.free(a)
    kv.free(b)
    assert levels.end_session("A") == 2
    assert [blk.level for blk in blocks_a[2:4]] == [3, 3] and [blk.level for blk in blocks_b[2:4]] == [2, 2]
    order = list(kv.pool.policy)
    position = {blk.block_id: i for i, blk in enumerate(order)}
    assert max(position[blk.block_id] for blk in blocks_a[2:4]) < min(position[blk.block_id] for blk in blocks_b[2:4])
    assert order[-2:] == [blocks_a[1], blocks_a[0]]  # P1 last, its head very last
    # A late request of the ended session claims P3, not P2; a new request of it revives it.
    levels.claim(blocks_a[4], 2, "A")
    assert blocks_a[4].level == 3
    levels.begin("A")
    levels.claim(blocks_a[4], 2, "A")
    assert blocks_a[4].level == 2


def test_a_block_shared_by_two_sessions_stays_p2_until_both_end():
    pool = BlockPool(4, PriorityEviction())
    levels = SessionLevels(pool)
    (block,) = pool.get_new_blocks(1)
    block.block_hash, block.token_ids = 7, (7,)
    levels.claim(block, 2, "A")
    levels.claim(block, 2, "B")
    assert levels.end_session("A") == 0 and block.level == 2
    assert levels.end_session("B") == 1 and block.level == 3


def test_a_prefix_is_never_less_important_than_what_follows_it():
    kv = KVCacheManager(16, 4, PriorityEviction())
    levels = SessionLevels(kv.pool)
    # A transient head followed by a shared prompt: evicting the head first would strand the rest.
    r = make_request("r", list(range(12)), [SegmentSpan(0, 4, 4, None), SegmentSpan(4, 12, 1, None)])
    run_prefill(kv, levels, r)
    assert [blk.level for blk in kv.req_blocks["r"]] == [1, 1, 1]


def test_evicting_one_block_of_a_chunk_drops_the_entry_and_empties_its_siblings():
    pool = BlockPool(4, PriorityEviction())
    blocks = pool.get_new_blocks(3)
    entry = ChunkEntry("v:1", (1, 2, 3, 4, 5, 6, 7, 8, 9), blocks)
    pool.chunks.register(entry)
    for block in blocks:
        block.level = 3
    pool.free(reversed(blocks))
    assert pool.chunks.lookup("v:1", entry.token_ids) is entry
    assert pool.chunks.lookup("v:1", (1, 2)) is None  # same key, other text: a miss
    pool.get_new_blocks(1)  # the never-used block
    (victim,) = pool.get_new_blocks(1)
    assert victim is blocks[2]  # tail first
    assert pool.chunks.lookup("v:1", entry.token_ids) is None and len(pool.chunks) == 0
    assert all(b.key is None for b in blocks)
    assert pool.policy.queue_of_free(blocks[0]) == FreeQueue.EMPTY  # now empty, reused before any cached block
    assert pool.stats()["evictions"] == 1 and pool.stats()["evictions_p3"] == 1
