"""The chunk index: vertex chunks (keyed segments) cached by content, in the block pool.

A chunk's KV is computed once in isolation (positions 0..n-1, nothing before it) into blocks of
its own, starting at a block boundary. The entry maps the segment key to those blocks and the
chunk's token ids (compared on every hit, so a reused key with new text is a miss). The blocks
are ordinary pool blocks: one reference count and one eviction order with the prefix cache. A
block that is evicted takes its whole entry with it; the entry's other blocks then hold nothing
and are filed as empty, to be reused first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from glmcot.engine.cache.block import KVBlock


@dataclass(eq=False)
class ChunkEntry:
    key: str
    token_ids: tuple[int, ...]
    blocks: list["KVBlock"]
    hits: int = 0

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)


class ChunkIndex:
    def __init__(self) -> None:
        self.entries: dict[str, ChunkEntry] = {}

    def __len__(self) -> int:
        return len(self.entries)

    def lookup(self, key: str, token_ids: tuple[int, ...]) -> ChunkEntry | None:
        entry = self.entries.get(key)
        if entry is None or entry.token_ids != token_ids:
            return None
        if any(block.key != key for block in entry.blocks):  # content reset behind our back
            self.entries.pop(key, None)
            return None
        return entry

    def register(self, entry: ChunkEntry, owner: str | None = None) -> list["KVBlock"]:
        """Index the entry's blocks, filled for session `owner`; returns the blocks of an older
        entry under the same key, which no longer hold anything."""
        stale = self.drop(self.entries[entry.key]) if entry.key in self.entries else []
        for block in entry.blocks:
            block.key, block.owner = entry.key, owner
        self.entries[entry.key] = entry
        return stale

    def drop(self, entry: ChunkEntry) -> list["KVBlock"]:
        if self.entries.get(entry.key) is entry:
            del self.entries[entry.key]
        released = [b for b in entry.blocks if b.key == entry.key]
        for block in released:
            block.key = None
        return released

    def evicted(self, block: "KVBlock") -> list["KVBlock"]:
        """`block` is being reused: drop its entry; returns the entry's other blocks."""
        entry = self.entries.get(block.key) if block.key is not None else None
        if entry is None or not any(b is block for b in entry.blocks):
            return []
        return [b for b in self.drop(entry) if b is not block]

    def num_blocks(self) -> int:
        return sum(len(e.blocks) for e in self.entries.values())
