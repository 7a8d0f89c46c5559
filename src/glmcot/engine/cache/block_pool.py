"""The block pool: every KV block of the preallocated cache, the prefix-hash index and the free
blocks (ordered by an eviction policy). It knows nothing about requests."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from glmcot.contract import Level
from glmcot.engine.cache.block import KVBlock
from glmcot.engine.cache.chunk_index import ChunkIndex
from glmcot.engine.cache.eviction import EvictionPolicy


class BlockPool:
    def __init__(self, num_blocks: int, policy: EvictionPolicy) -> None:
        if num_blocks < 1:
            raise ValueError("the KV pool needs at least one block")
        self.blocks = [KVBlock(i) for i in range(num_blocks)]
        self.policy = policy
        self.cached: dict[int, KVBlock] = {}
        self.chunks = ChunkIndex()  # vertex chunks, cached by content key in these same blocks
        self.listeners: list[Callable[[KVBlock], None]] = []  # told before a block's content is dropped
        self.num_evictions = 0
        self.evictions_by_level = {level: 0 for level in Level}
        for block in self.blocks:
            policy.add(block)

    @property
    def num_blocks(self) -> int:
        return len(self.blocks)

    @property
    def num_free_blocks(self) -> int:
        return len(self.policy)

    def get_new_blocks(self, n: int) -> list[KVBlock]:
        if n > len(self.policy):
            raise ValueError(f"asked for {n} blocks, {len(self.policy)} free")
        now = time.monotonic()
        out = []
        for _ in range(n):
            block = self.policy.pop()
            if block.block_hash is not None or block.key is not None:
                if block.block_hash is not None and self.cached.get(block.block_hash) is block:
                    del self.cached[block.block_hash]
                self.num_evictions += 1
                self.evictions_by_level[block.level] += 1
                for sibling in self.chunks.evicted(block):  # the rest of its chunk is useless now
                    self.drop_content(sibling)
                self.drop_content(block)
            block.ref_count = 1
            block.last_access = now
            out.append(block)
        return out

    def lookup(self, block_hash: int, token_ids: tuple[int, ...]) -> KVBlock | None:
        """A cached block with this hash AND these tokens (a hash collision is a miss)."""
        block = self.cached.get(block_hash)
        if block is None or block.token_ids != token_ids:
            return None
        return block

    def touch(self, blocks: Iterable[KVBlock], session: str | None = None) -> None:
        """Take a reference on cached blocks for a request of `session` (a hit)."""
        now = time.monotonic()
        for block in blocks:
            if block.ref_count == 0:
                self.policy.remove(block)
            block.ref_count += 1
            block.last_access = now
            if block.owner is None or block.owner != session:
                block.shared = True

    def free(self, blocks: Iterable[KVBlock]) -> None:
        """Release blocks in the given order (callers pass a request's blocks tail first)."""
        now = time.monotonic()
        for block in blocks:
            block.ref_count -= 1
            block.last_access = now
            if block.ref_count == 0:
                self.policy.add(block)

    def drop_content(self, block: KVBlock) -> None:
        for listener in self.listeners:
            listener(block)
        block.reset_content()
        self.refile(block)

    def refile(self, block: KVBlock) -> None:
        """A free block's level or content changed: let the policy re-order it."""
        if block.ref_count == 0:
            self.policy.update(block)

    def cache_block(self, block: KVBlock, block_hash: int, token_ids: tuple[int, ...]) -> None:
        block.block_hash, block.token_ids = block_hash, token_ids
        # Keep the first block registered under a hash; a duplicate (or a colliding block with
        # other tokens) stays usable by its owner but is not indexed.
        self.cached.setdefault(block_hash, block)

    def stats(self) -> dict[str, int]:
        free = self.num_free_blocks
        return {"blocks_total": self.num_blocks, "blocks_used": self.num_blocks - free, "blocks_free": free,
                "blocks_cached": len(self.cached), "evictions": self.num_evictions,
                "chunks_cached": len(self.chunks), "chunk_blocks_cached": self.chunks.num_blocks(),
                **{f"evictions_p{level}": self.evictions_by_level[level] for level in range(1, 5)}}
