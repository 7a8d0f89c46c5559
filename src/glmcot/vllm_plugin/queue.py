"""Free-block queues that replace vLLM v1's `FreeKVCacheBlockQueue` inside a `BlockPool`.

`LeveledFreeBlockQueue` (enforce) keeps one LRU list per class and hands out blocks from the
first non-empty one: blocks without a hash (they hold nothing reusable), then levels 4, 3, 2, 1.
Within a list, blocks leave in the order they were freed; vLLM frees a request's blocks tail first,
so tails go first inside each level. `ObservingFreeBlockQueue` (observe) is vLLM's own queue,
unchanged, that only counts the level of each block it evicts.

Both are handed the `LevelTable`; popping a block that still has a hash is an eviction, counted
by the block's level and forgotten in the table. Imports vLLM.
"""

from __future__ import annotations

import heapq
import itertools
from collections import OrderedDict
from typing import Iterator

from vllm.v1.core.kv_cache_utils import FreeKVCacheBlockQueue, KVCacheBlock

from glmcot.vllm_plugin.levels import P1, P2, P3, P4, LevelTable

UNHASHED = 0
ORDER = (UNHASHED, P4, P3, P2, P1)  # eviction order of the lists
NAMES = {UNHASHED: "unhashed", P1: "p1", P2: "p2", P3: "p3", P4: "p4"}


class EvictionCounts:
    """Evicted cached blocks per level (and unhashed blocks reused, which evict nothing)."""

    def __init__(self) -> None:
        self.by_level = {level: 0 for level in ORDER}

    def add(self, level: int) -> None:
        self.by_level[level] += 1

    def as_dict(self) -> dict[str, int]:
        return {NAMES[level]: count for level, count in self.by_level.items()}


class LeveledFreeBlockQueue(FreeKVCacheBlockQueue):
    """The free queue in GLM's order. Subclasses vLLM's queue for isinstance checks only: the
    linked-list fields of the blocks are not used (`iter_blocks_after` walks the lists)."""

    def __init__(self, blocks: list[KVCacheBlock], table: LevelTable, counts: EvictionCounts) -> None:
        # vLLM's __init__ is not called: it links the blocks through their prev/next fields
        self.table = table
        self.counts = counts
        self.lock = table.lock  # the stats writer reads from its own thread
        self._lists: dict[int, OrderedDict[int, KVCacheBlock]] = {level: OrderedDict() for level in ORDER}
        self._where: dict[int, int] = {}  # free block id -> its list
        self._seq: dict[int, int] = {}  # free block id -> when it was freed (LRU inside a list)
        self._clock = itertools.count()
        self.num_free_blocks = 0
        for block in blocks:
            self._file(block, front=False)

    # ---- vLLM's interface
    def popleft(self) -> KVCacheBlock:
        with self.lock:
            for level in ORDER:
                entries = self._lists[level]
                if entries:
                    block_id, block = entries.popitem(last=False)
                    self._taken(block_id, block, level)
                    return block
        raise ValueError("No free blocks available")

    def popleft_n(self, n: int) -> list[KVCacheBlock]:
        assert self.num_free_blocks >= n
        with self.lock:
            return [self.popleft() for _ in range(n)]

    def remove(self, block: KVCacheBlock) -> None:
        with self.lock:
            level = self._where.pop(block.block_id, None)
            if level is None:
                raise RuntimeError(f"remove() called on an invalid block: {block}")
            del self._lists[level][block.block_id]
            self._seq.pop(block.block_id, None)
            self.num_free_blocks -= 1

    def append(self, block: KVCacheBlock) -> None:
        with self.lock:
            self._file(block, front=False)

    def append_n(self, blocks: list[KVCacheBlock]) -> None:
        with self.lock:
            for block in blocks:
                self._file(block, front=False)

    def prepend_n(self, blocks: list[KVCacheBlock]) -> None:
        with self.lock:
            for block in reversed(blocks):
                self._file(block, front=True)

    def get_all_free_blocks(self) -> list[KVCacheBlock]:
        with self.lock:
            return [block for level in ORDER for block in self._lists[level].values()]

    def iter_blocks_after(self, cursor: KVCacheBlock | None) -> Iterator[KVCacheBlock]:
        blocks = self.get_all_free_blocks()
        start = 0
        if cursor is not None:
            start = next((i + 1 for i, block in enumerate(blocks) if block is cursor), len(blocks))
        yield from blocks[start:]

    # ---- levels
    def refile(self, block_ids: list[int]) -> None:
        """Blocks whose level changed while free move to their new list, keeping their LRU place."""
        moving: dict[int, list[tuple[int, int, KVCacheBlock]]] = {}
        for block_id in block_ids:
            level = self._where.get(block_id)
            if level is None or level == UNHASHED:
                continue
            block = self._lists[level][block_id]
            new = self.table.level(block_id)
            if new == level:
                continue
            del self._lists[level][block_id]
            moving.setdefault(new, []).append((self._seq[block_id], block_id, block))
        for level, entries in moving.items():
            entries.sort()
            old = self._lists[level]
            merged = heapq.merge(((self._seq[i], i, b) for i, b in old.items()), entries)
            self._lists[level] = OrderedDict((i, b) for _, i, b in merged)
            for _, block_id, _ in entries:
                self._where[block_id] = level

    def free_counts(self) -> dict[str, int]:
        with self.lock:
            return {NAMES[level]: len(self._lists[level]) for level in ORDER}

    def reset(self) -> None:
        """After vLLM's reset_prefix_cache: no block has a hash any more."""
        blocks = self.get_all_free_blocks()
        for entries in self._lists.values():
            entries.clear()
        self._where.clear()
        self._seq.clear()
        self.num_free_blocks = 0
        for block in blocks:
            self._file(block, front=False)

    # ---- internals
    def _file(self, block: KVCacheBlock, front: bool) -> None:
        block_id = block.block_id
        level = UNHASHED if block.block_hash is None else self.table.level(block_id)
        entries = self._lists[level]
        entries[block_id] = block
        seq = next(self._clock)
        if front:
            entries.move_to_end(block.block_id, last=False)
            seq = -seq  # ahead of everything filed so far (only unhashed blocks are prepended)
        self._where[block.block_id] = level
        self._seq[block.block_id] = seq
        self.num_free_blocks += 1

    def _taken(self, block_id: int, block: KVCacheBlock, level: int) -> None:
        del self._where[block_id]
        self._seq.pop(block_id, None)
        self.num_free_blocks -= 1
        if block.block_hash is not None:
            self.counts.add(level)
        self.table.forget(block_id)


class ObservingFreeBlockQueue(FreeKVCacheBlockQueue):
    """vLLM's own queue and order; counts the level each evicted block had."""

    def __init__(self, blocks: list[KVCacheBlock], table: LevelTable, counts: EvictionCounts) -> None:
        super().__init__(blocks)
        self.table = table
        self.counts = counts
        self.lock = table.lock  # the stats writer walks the list from its own thread

    def popleft(self) -> KVCacheBlock:
        with self.lock:
            block = super().popleft()
            self._taken(block)
            return block

    def popleft_n(self, n: int) -> list[KVCacheBlock]:
        with self.lock:
            blocks = super().popleft_n(n)
            for block in blocks:
                self._taken(block)
            return blocks

    def remove(self, block: KVCacheBlock) -> None:
        with self.lock:
            super().remove(block)

    def append(self, block: KVCacheBlock) -> None:
        with self.lock:
            super().append(block)

    def append_n(self, blocks: list[KVCacheBlock]) -> None:
        with self.lock:
            super().append_n(blocks)

    def prepend_n(self, blocks: list[KVCacheBlock]) -> None:
        with self.lock:
            super().prepend_n(blocks)

    def refile(self, block_ids: list[int]) -> None:
        """Levels never change the order here."""

    def free_counts(self) -> dict[str, int]:
        counts = {NAMES[level]: 0 for level in ORDER}
        with self.lock:
            blocks = self.get_all_free_blocks()
        for block in blocks:
            level = UNHASHED if block.block_hash is None else self.table.level(block.block_id)
            counts[NAMES[level]] += 1
        return counts

    def reset(self) -> None:
        """Order is vLLM's; nothing to re-file."""

    def _taken(self, block: KVCacheBlock) -> None:
        if block.block_hash is not None:
            self.counts.add(self.table.level(block.block_id))
        else:
            self.counts.add(UNHASHED)
        self.table.forget(block.block_id)
