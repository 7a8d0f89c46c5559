"""GLM's four-level priority eviction (policy `glm`).

Free blocks are evicted in this order: blocks that hold nothing cached, then P4 (transient), P3
(notebooks of finished sessions), P2 (notebooks of running sessions) and last P1 (shared agent
prompts); least recently used first inside a level, and a request's tail before its head (the
pool frees a request's blocks tail first, so equal access times are broken by free order).

P3 is kept for other questions: a finished session never reads its notebook again. A vertex
chunk (a block with a chunk key) serves any prompt that holds the vertex, at any position; a
prefix block serves only prompts that begin the same way. So with `split_p3` (policy `glm`),
P3 prefix blocks that no other session has read (`KVBlock.shared` unset) go first, then the
rest of P3, LRU inside each part. `glm-paper` keeps P3 as one LRU level, as the paper has it.

Only free blocks (no running request holds them) are ever candidates, and every free block is a
candidate: protection is an order, not a lock, so the pool cannot wedge. P1 protection is
capped: beyond `p1_cap_blocks` free P1 blocks, the least recently used ones are ordered as P2.

The level of a block is kept on the block (`KVBlock.level`); `update(block)` re-files a free
block whose level changed (a session ended, a hit with a more important segment). Heaps with lazy
deletion: add/pop O(log n), remove O(1).
"""

from __future__ import annotations

import enum
import heapq
import itertools
from typing import TYPE_CHECKING

from glmcot.contract import Level
from glmcot.engine.cache.eviction import EvictionPolicy

if TYPE_CHECKING:
    from glmcot.engine.cache.block import KVBlock

class FreeQueue(enum.IntEnum):
    """The policy's free lists, in eviction order: a lower queue is emptied first. Not levels:
    two of them (EMPTY, UNSHARED_FINISHED) are states of a block, not levels agents assign."""

    EMPTY = 0  # no cached content
    TRANSIENT = 1
    UNSHARED_FINISHED = 2  # a P3 prefix block only its own session has read (with split_p3)
    FINISHED_NOTEBOOK = 3
    NOTEBOOK = 4
    SHARED_PROMPT = 5


QUEUE_OF_LEVEL = {level: FreeQueue[level.name] for level in Level}
LEVEL_OF_QUEUE = {queue: level for level, queue in QUEUE_OF_LEVEL.items()} | {
    FreeQueue.UNSHARED_FINISHED: Level.FINISHED_NOTEBOOK}


class _Entry:
    __slots__ = ("key", "block", "live", "heap")

    def __init__(self, key: tuple[float, int], block: "KVBlock", heap: FreeQueue) -> None:
        self.key, self.block, self.live, self.heap = key, block, True, heap

    def __lt__(self, other: "_Entry") -> bool:
        return self.key < other.key


def holds_content(block: "KVBlock") -> bool:
    return block.block_hash is not None or block.key is not None


class PriorityEviction(EvictionPolicy):
    def __init__(self, p1_cap_blocks: int | None = None, split_p3: bool = False) -> None:
        if p1_cap_blocks is not None and p1_cap_blocks < 0:
            raise ValueError("p1_cap_blocks must be >= 0")
        self.p1_cap = p1_cap_blocks
        self.split_p3 = split_p3
        self._heaps: dict[FreeQueue, list[_Entry]] = {queue: [] for queue in FreeQueue}
        self._live: dict[FreeQueue, int] = {queue: 0 for queue in FreeQueue}
        self._entries: dict[int, _Entry] = {}  # block_id -> its live entry
        self._seq = itertools.count()
        self.num_p1_overflow = 0  # P1 blocks ordered as P2 because the cap was reached

    def add(self, block: "KVBlock") -> None:
        if block.block_id in self._entries:
            raise ValueError(f"block {block.block_id} is already free")
        queue = self._queue_of(block)
        protected = FreeQueue.SHARED_PROMPT
        if queue == protected and self.p1_cap is not None and self._live[protected] >= self.p1_cap:
            if self.p1_cap == 0:
                queue = FreeQueue.NOTEBOOK
            else:  # the least recently used protected P1 block makes room
                oldest = self._pop_live(protected)
                self._push(oldest.block, FreeQueue.NOTEBOOK, oldest.key)
                self.num_p1_overflow += 1
        self._push(block, queue, (block.last_access, next(self._seq)))

    def remove(self, block: "KVBlock") -> None:
        entry = self._entries.pop(block.block_id)
        entry.live = False
        self._live[entry.heap] -= 1

    def pop(self) -> "KVBlock":
        for queue in FreeQueue:
            if self._live[queue]:
                entry = self._pop_live(queue)
                del self._entries[entry.block.block_id]
                return entry.block
        raise IndexError("no free KV blocks")

    def update(self, block: "KVBlock") -> None:
        """Re-file a free block after its level or content changed (keeps its recency)."""
        entry = self._entries.get(block.block_id)
        if entry is None:
            return
        self.remove(block)
        self._push(block, self._queue_of(block), entry.key)

    def level_of_free(self, block: "KVBlock") -> Level | None:
        """The level a free block is ordered at (a P1 block past the cap reads as P2); None when it
        is in use or holds nothing cached."""
        queue = self.queue_of_free(block)
        return None if queue is None else LEVEL_OF_QUEUE.get(queue)

    def queue_of_free(self, block: "KVBlock") -> FreeQueue | None:
        """The free list a block sits in; None if it is in use."""
        entry = self._entries.get(block.block_id)
        return None if entry is None else entry.heap

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, block: "KVBlock") -> bool:
        return block.block_id in self._entries

    def __iter__(self):
        """Free blocks in eviction order (a snapshot)."""
        for queue in FreeQueue:
            for entry in sorted(e for e in self._heaps[queue] if e.live):
                yield entry.block

    # ---- heaps ------------------------------------------------------------------------------
    def _queue_of(self, block: "KVBlock") -> FreeQueue:
        if not holds_content(block):
            return FreeQueue.EMPTY
        if (block.level == Level.FINISHED_NOTEBOOK and self.split_p3 and block.key is None
                and not block.shared):
            return FreeQueue.UNSHARED_FINISHED
        return QUEUE_OF_LEVEL[block.level]

    def _push(self, block: "KVBlock", queue: FreeQueue, key: tuple[float, int]) -> None:
        entry = _Entry(key, block, queue)
        self._entries[block.block_id] = entry
        self._live[queue] += 1
        heap = self._heaps[queue]
        heapq.heappush(heap, entry)
        if len(heap) > 64 and len(heap) > 4 * self._live[queue]:  # drop dead entries now and then
            self._heaps[queue] = heap = [e for e in heap if e.live]
            heapq.heapify(heap)

    def _pop_live(self, queue: FreeQueue) -> _Entry:
        heap = self._heaps[queue]
        while True:
            entry = heapq.heappop(heap)
            if entry.live:
                entry.live = False
                self._live[queue] -= 1
                return entry
