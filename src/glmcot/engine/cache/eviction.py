"""Eviction policies: which free block is reused (and its cached content dropped) next.

The pool hands every block whose reference count falls to zero to the policy, in release order
(a request releases its blocks tail first), takes blocks back on a cache hit, and pops a victim
when it needs a fresh block. All three operations are O(1) for LRU.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from glmcot.engine.cache.block import KVBlock


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
