"""The KV block: the leaf record every cache structure points at (pool, policies, chunk index)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from glmcot.contract import Level


@dataclass(eq=False)
class KVBlock:
    block_id: int
    ref_count: int = 0
    block_hash: int | None = None  # set once the block is full and cached
    token_ids: tuple[int, ...] | None = None  # its content, compared on every hit
    level: Level = Level.TRANSIENT  # the most protective level any use of its content claimed
    key: str | None = None  # chunk key when the block belongs to a cached vertex chunk
    owner: str | None = None  # session of the request that filled it (None: no session)
    shared: bool = False  # read since by a request of another session (or by any, when owner is None)
    last_access: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    prev_free: "KVBlock | None" = field(default=None, repr=False)
    next_free: "KVBlock | None" = field(default=None, repr=False)

    def reset_content(self) -> None:
        self.block_hash, self.token_ids, self.key, self.level = None, None, None, Level.TRANSIENT
        self.owner, self.shared = None, False
        self.extra.clear()
