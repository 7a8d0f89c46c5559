"""Per-request view of the block pool: block tables, prefix-cache lookup, slot allocation."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from glmcot.engine.cache.block_pool import BlockPool, KVBlock
from glmcot.engine.cache.eviction import EvictionPolicy

if TYPE_CHECKING:
    from glmcot.engine.core.request import Request

HashFn = Callable[[int, tuple[int, ...]], int]
ROOT_HASH = 0x9E3779B97F4A7C15


def chained_hash(parent: int, token_ids: tuple[int, ...]) -> int:
    return hash((parent, token_ids))


class KVCacheManager:
    def __init__(self, num_blocks: int, block_size: int, policy: EvictionPolicy,
                 enable_caching: bool = True, hash_fn: HashFn = chained_hash) -> None:
        self.pool = BlockPool(num_blocks, policy)
        self.block_size = block_size
        self.enable_caching = enable_caching
        self.hash_fn = hash_fn
        self.req_blocks: dict[str, list[KVBlock]] = {}
        self.num_cached_blocks: dict[str, int] = {}
        self.prefix_queries = 0  # tokens looked up (vLLM's queries)
        self.prefix_hits = 0  # tokens found

    def block_hashes(self, request: "Request") -> list[int]:
        """Chained hashes of the request's full blocks; kept on the request across preemption."""
        hashes, tokens, bs = request.block_hashes, request.all_token_ids, self.block_size
        while (len(hashes) + 1) * bs <= len(tokens):
            i = len(hashes)
            hashes.append(self.hash_fn(hashes[-1] if hashes else ROOT_HASH, tuple(tokens[i * bs : (i + 1) * bs])))
        return hashes

    def get_computed_blocks(self, request: "Request") -> tuple[list[KVBlock], int]:
        """The longest cached prefix of whole blocks, never the last token (it must be computed
        to give logits)."""
        if not self.enable_caching:
            return [], 0
        hashes, tokens, bs = self.block_hashes(request), request.all_token_ids, self.block_size
        hits: list[KVBlock] = []
        for i in range((request.num_tokens - 1) // bs):
            block = self.pool.lookup(hashes[i], tuple(tokens[i * bs : (i + 1) * bs]))
            if block is None:
                break
            hits.append(block)
        return hits, len(hits) * bs

    def record_lookup(self, num_tokens: int, num_hit: int) -> None:
        """Count a prefix lookup that was acted on (once per admission, in tokens)."""
        if self.enable_caching:
            self.prefix_queries += num_tokens
            self.prefix_hits += num_hit

    def allocate_slots(self, request: "Request", num_new_tokens: int, computed: Sequence[KVBlock] = ()) -> bool:
        """Make room for `num_new_tokens` after the request's computed tokens (plus `computed`
        prefix hits for a new request). False, changing nothing, when the pool is too full."""
        blocks = self.req_blocks.setdefault(request.request_id, [])
        total = request.num_computed_tokens + len(computed) * self.block_size + num_new_tokens
        need = -(-total // self.block_size) - len(blocks) - len(computed)
        reclaimed = sum(1 for b in computed if b.ref_count == 0)
        if need + reclaimed > self.pool.num_free_blocks:
            if not blocks:
                del self.req_blocks[request.request_id]
            return False
        if computed:
            self.pool.touch(computed, request.session)
            blocks.extend(computed)
            self.num_cached_blocks[request.request_id] = len(blocks)
        if need > 0:
            blocks.extend(self.pool.get_new_blocks(need))
        # Index the blocks this step fills now (vLLM does the same): a request admitted later in
        # the same step can then share them, because every sequence's new K/V is written before
        # any sequence attends.
        self.cache_blocks(request, total)
        return True

    def cache_blocks(self, request: "Request", num_tokens: int) -> None:
        """Index the request's blocks that are full within its first `num_tokens` tokens."""
        if not self.enable_caching:
            return
        rid, bs = request.request_id, self.block_size
        blocks = self.req_blocks.get(rid, [])
        done = self.num_cached_blocks.get(rid, 0)
        full = min(num_tokens // bs, len(blocks))
        if full <= done:
            return
        hashes, tokens = self.block_hashes(request), request.all_token_ids
        for i in range(done, full):
            block = blocks[i]
            if block.block_hash is None:
                self.pool.cache_block(block, hashes[i], tuple(tokens[i * bs : (i + 1) * bs]))
                block.level = request.level_of(i * bs, (i + 1) * bs)
                block.owner = request.session
        self.num_cached_blocks[rid] = full

    def free(self, request: "Request") -> None:
        blocks = self.req_blocks.pop(request.request_id, [])
        self.num_cached_blocks.pop(request.request_id, None)
        self.pool.free(reversed(blocks))

    def block_ids(self, request: "Request") -> list[int]:
        return [b.block_id for b in self.req_blocks.get(request.request_id, [])]

    def blocks_needed(self, num_tokens: int) -> int:
        return -(-num_tokens // self.block_size)

    def stats(self) -> dict[str, int]:
        return {**self.pool.stats(), "prefix_queries_tokens": self.prefix_queries, "prefix_hits_tokens": self.prefix_hits}
