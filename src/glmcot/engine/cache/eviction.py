"""Eviction policies: which free block is reused (and its cached content dropped) next.

The pool hands every block whose reference count falls to zero to the policy, in release order
(a request releases its blocks tail first), takes blocks back on a cache hit, and pops a victim
when it needs a fresh block. All three operations are O(1) for LRU.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from glmcot.engine.cache.block_pool import KVBlock


class EvictionPolicy(ABC):
    @abstractmethod
    def add(self, block: "KVBlock") -> None:
        """The block became free (reference count 0); it stays cached until popped."""

    @abstractmethod
    def remove(self, block: "KVBlock") -> None:
        """The free block is in use again (a prefix-cache hit)."""

    @abstractmethod
    def pop(self) -> "KVBlock":
        """Take the next block to reuse. Raises IndexError when no block is free."""

    @abstractmethod
    def __len__(self) -> int: ...

    def update(self, block: "KVBlock") -> None:
        """A free block's level or content changed (policies that order by level re-file it)."""


class LRUEviction(EvictionPolicy):
    """vLLM's order: least recently freed first; a request's tail blocks are freed (and so
    evicted) before its head. An intrusive doubly linked list over the blocks themselves."""

    def __init__(self) -> None:
        self._head: KVBlock | None = None
        self._tail: KVBlock | None = None
        self._size = 0

    def add(self, block: "KVBlock") -> None:
        block.prev_free, block.next_free = self._tail, None
        if self._tail is None:
            self._head = block
        else:
            self._tail.next_free = block
        self._tail = block
        self._size += 1

    def remove(self, block: "KVBlock") -> None:
        if block.prev_free is None:
            self._head = block.next_free
        else:
            block.prev_free.next_free = block.next_free
        if block.next_free is None:
            self._tail = block.prev_free
        else:
            block.next_free.prev_free = block.prev_free
        block.prev_free = block.next_free = None
        self._size -= 1

    def pop(self) -> "KVBlock":
        if self._head is None:
            raise IndexError("no free KV blocks")
        block = self._head
        self.remove(block)
        return block

    def __len__(self) -> int:
        return self._size

    def __iter__(self):
        block = self._head
        while block is not None:
            yield block
            block = block.next_free


def _priority(split_p3: bool) -> Callable[[int, float], EvictionPolicy]:
    def make(num_blocks: int, p1_cap_fraction: float) -> EvictionPolicy:
        from glmcot.engine.cache.priority import PriorityEviction

        return PriorityEviction(int(p1_cap_fraction * num_blocks), split_p3=split_p3)

    return make


# four-level priority (P4 first, P1 last), LRU inside a level; P3 prefix blocks no other session
# has read go before the rest of P3 (cache/priority.py)
_GLM = _priority(split_p3=True)
POLICIES: dict[str, Callable[..., EvictionPolicy]] = {
    "lru": lambda num_blocks, p1_cap_fraction: LRUEviction(),
    "glm": _GLM,
    "glm-paper": _priority(split_p3=False),  # the four levels exactly as the paper describes them
    "priority": _GLM,  # another name for glm
}


def make_eviction_policy(name: str, num_blocks: int = 0, p1_cap_fraction: float = 0.25) -> EvictionPolicy:
    """`p1_cap_fraction`: for `glm`, the share of the pool that P1 blocks may hold protected."""
    if name not in POLICIES:
        raise ValueError(f"unknown eviction policy {name!r}; known: {', '.join(POLICIES)}")
    return POLICIES[name](num_blocks, p1_cap_fraction)
