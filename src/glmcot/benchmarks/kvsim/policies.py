"""The field's alternatives to GLM's levels, as eviction policies of the native cache.

Written from their published descriptions (no code of theirs): each plugs into the native block
pool through its one extension point, `EvictionPolicy` (engine/cache/eviction.py), so the cache
itself (hashing, hits, reference counts, preemption) stays the engine's own code.

- `PinningEviction`: free blocks are LRU; a pinned block goes only after every unpinned one, and
  its pin lapses at a deadline (then it is LRU again). Two drivers pin with it:
  * Continuum (vLLM RFC #37003, "tool-call-aware KV cache TTL"): when a call ends and the agent
    waits on a tool, the call's blocks are pinned for a TTL predicted from past tool times;
  * session hints (vLLM RFC #52113): every request of a session leaves its blocks retained for a
    fixed TTL after it ends; the session's end hint releases them at once.
- `StepsToUseEviction` (KVFlow, "steps-to-execution" over the agent step graph): each free block
  carries the number of agent steps until its next expected use (a caller-supplied estimate),
  the largest goes first, LRU among equals; the estimate is re-checked when a block is about to
  be evicted, so stale estimates never evict a block that became needed.
"""

from __future__ import annotations

import heapq
import itertools
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from glmcot.engine.cache.eviction import EvictionPolicy

if TYPE_CHECKING:
    from glmcot.engine.cache.block import KVBlock

NEVER = 1 << 30  # steps-to-use of a block nothing is expected to read again


def _holds(block: "KVBlock") -> bool:
    return block.block_hash is not None or block.key is not None


class PinningEviction(EvictionPolicy):
    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._empty: OrderedDict[int, KVBlock] = OrderedDict()
        self._lru: dict[int, KVBlock] = {}  # free, unpinned, holding content
        self._lru_heap: list[tuple[int, int]] = []  # (free order, block id), lazy
        self._pinned: dict[int, KVBlock] = {}  # free and pinned
        self._freed: dict[int, int] = {}  # free block id -> when it was freed (its LRU place, kept through a pin)
        self._deadlines: dict[int, float] = {}  # block id -> pin deadline (free or in use)
        self._heap: list[tuple[float, int, int]] = []  # (deadline, seq, block id), lazy
        self._seq = itertools.count()
        self.pinned_evictions = 0  # pinned blocks evicted because nothing else was free

    # ---- pins
    def pin(self, blocks: Iterable["KVBlock"], until: float) -> None:
        for block in blocks:
            if until <= self._deadlines.get(block.block_id, -1.0):
                continue
            self._deadlines[block.block_id] = until
            heapq.heappush(self._heap, (until, next(self._seq), block.block_id))
            if self._lru.pop(block.block_id, None) is not None:
                self._pinned[block.block_id] = block

    def release(self, blocks: Iterable["KVBlock"]) -> None:
        for block in blocks:
            if self._deadlines.pop(block.block_id, None) is not None:
                self._unpin(block.block_id)

    def _unpin(self, block_id: int) -> None:
        block = self._pinned.pop(block_id, None)
        if block is not None:  # back at its place in the LRU order
            self._lru[block_id] = block
            heapq.heappush(self._lru_heap, (self._freed[block_id], block_id))

    def _lapse(self) -> None:
        now = self.clock()
        while self._heap and self._heap[0][0] <= now:
            until, _, block_id = heapq.heappop(self._heap)
            if self._deadlines.get(block_id) != until:
                continue
            del self._deadlines[block_id]
            self._unpin(block_id)

    # ---- EvictionPolicy
    def add(self, block: "KVBlock") -> None:
        order = next(self._seq)
        self._freed[block.block_id] = order
        if not _holds(block):
            self._empty[block.block_id] = block
        elif block.block_id in self._deadlines:
            self._pinned[block.block_id] = block
        else:
            self._lru[block.block_id] = block
            heapq.heappush(self._lru_heap, (order, block.block_id))

    def remove(self, block: "KVBlock") -> None:
        for table in (self._lru, self._pinned, self._empty):
            if table.pop(block.block_id, None) is not None:
                del self._freed[block.block_id]
                return
        raise KeyError(f"block {block.block_id} is not free")

    def pop(self) -> "KVBlock":
        self._lapse()
        if self._empty:
            block = self._empty.popitem(last=False)[1]
        elif self._lru:
            while True:
                order, block_id = heapq.heappop(self._lru_heap)
                if block_id in self._lru and self._freed.get(block_id) == order:
                    break
            block = self._lru.pop(block_id)
        elif self._pinned:  # everything free is pinned: the pin that lapses first goes (rare: a scan)
            block_id = min(self._pinned, key=lambda i: (self._deadlines[i], self._freed[i]))
            block = self._pinned.pop(block_id)
            self.pinned_evictions += 1
        else:
            raise IndexError("no free KV blocks")
        del self._freed[block.block_id]
        self._deadlines.pop(block.block_id, None)
        return block

    def update(self, block: "KVBlock") -> None:
        if block.block_id in self._empty and _holds(block):
            del self._empty[block.block_id]
            del self._freed[block.block_id]
            self.add(block)
        elif not _holds(block) and block.block_id not in self._empty and block.block_id in self._freed:
            self._lru.pop(block.block_id, None)
            self._pinned.pop(block.block_id, None)
            self._deadlines.pop(block.block_id, None)
            self._empty[block.block_id] = block
            self._empty.move_to_end(block.block_id, last=False)

    def __len__(self) -> int:
        return len(self._empty) + len(self._lru) + len(self._pinned)


class StepsToUseEviction(EvictionPolicy):
    """Largest steps-to-next-use first; `steps(block)` is asked when a block becomes free and again
    before it is evicted."""

    def __init__(self, steps: Callable[["KVBlock"], int]) -> None:
        self.steps = steps
        self._empty: OrderedDict[int, KVBlock] = OrderedDict()
        self._buckets: dict[int, OrderedDict[int, KVBlock]] = {}
        self._bucket_of: dict[int, int] = {}
        self._order: list[int] = []  # bucket values, largest first (kept sorted, few values)

    def _file(self, block: "KVBlock", value: int) -> None:
        bucket = self._buckets.get(value)
        if bucket is None:
            bucket = self._buckets[value] = OrderedDict()
            self._order.append(value)
            self._order.sort(reverse=True)
        bucket[block.block_id] = block
        self._bucket_of[block.block_id] = value

    def add(self, block: "KVBlock") -> None:
        if not _holds(block):
            self._empty[block.block_id] = block
        else:
            self._file(block, self.steps(block))

    def remove(self, block: "KVBlock") -> None:
        if self._empty.pop(block.block_id, None) is not None:
            return
        value = self._bucket_of.pop(block.block_id)
        del self._buckets[value][block.block_id]

    def pop(self) -> "KVBlock":
        if self._empty:
            return self._empty.popitem(last=False)[1]
        while True:
            value = next((v for v in self._order if self._buckets[v]), None)
            if value is None:
                raise IndexError("no free KV blocks")
            block_id, block = self._buckets[value].popitem(last=False)
            del self._bucket_of[block_id]
            now = self.steps(block)
            if now >= value:
                return block
            self._file(block, now)  # needed sooner than when it was filed: keep it, look again

    def update(self, block: "KVBlock") -> None:
        if block.block_id in self._empty or block.block_id in self._bucket_of:
            self.remove(block)
            self.add(block)

    def __len__(self) -> int:
        return len(self._empty) + len(self._bucket_of)
