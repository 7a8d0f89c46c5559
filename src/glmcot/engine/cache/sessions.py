"""Block levels and sessions: which priority level each cached block carries.

A block's level is the most important (lowest) level any use has claimed for it: the segments
whose tokens it holds, in every request that computed or hit it. A P2 claim made on behalf of a
session is remembered; when the session ends its P2 blocks fall to P3, unless another running
session still claims them. Levels are also pushed toward a request's head: a block is never less
important than the blocks after it in the same prefix chain, so eviction (least important first,
tail first inside a level) never strands a cached block whose prefix is gone.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from typing import TYPE_CHECKING

from glmcot.contract import Level

# Ended sessions remembered (a late request of one still claims P3, not P2). Bounded, oldest
# forgotten first: a server sees an unbounded stream of session ids.
MAX_ENDED_SESSIONS = 4096

if TYPE_CHECKING:
    from glmcot.engine.cache.block import KVBlock
    from glmcot.engine.cache.block_pool import BlockPool
    from glmcot.engine.core.request import Request


class SessionLevels:
    def __init__(self, pool: "BlockPool", max_ended: int = MAX_ENDED_SESSIONS) -> None:
        self.pool = pool
        self.holders: dict[int, set[str]] = {}  # block id -> sessions claiming it at P2
        self.by_session: dict[str, set["KVBlock"]] = {}
        self.ended: OrderedDict[str, None] = OrderedDict()  # used as a bounded, ordered set
        self.max_ended = max_ended
        self.num_demoted = 0
        pool.listeners.append(self.forget)

    def begin(self, session: str | None) -> None:
        """A request of this session arrived: the session runs (again)."""
        if session is not None:
            self.ended.pop(session, None)

    def claim(self, block: "KVBlock", level: Level, session: str | None) -> None:
        if level == Level.NOTEBOOK and session is not None:
            if session in self.ended:
                level = Level.FINISHED_NOTEBOOK
            else:
                self.holders.setdefault(block.block_id, set()).add(session)
                self.by_session.setdefault(session, set()).add(block)
        if level < block.level:
            block.level = level
            self.pool.refile(block)

    def claim_blocks(self, blocks: Iterable["KVBlock"], level: Level, session: str | None) -> None:
        for block in blocks:
            self.claim(block, level, session)

    def tag_request(self, request: "Request", blocks: list["KVBlock"], num_cached: int, block_size: int) -> None:
        """Claim levels for the request's first `num_cached` blocks (the ones indexed so far),
        walking tail to head so every block is at least as important as its successors."""
        done = getattr(request, "levels_tagged", 0)
        if num_cached <= done:
            return
        carried = Level.TRANSIENT
        for i in range(num_cached - 1, -1, -1):
            if i >= done:
                carried = min(carried, request.level_of(i * block_size, (i + 1) * block_size))
            elif blocks[i].level < carried or (blocks[i].level == carried and carried != Level.NOTEBOOK):
                break  # the older part was tagged before and is already as important
            self.claim(blocks[i], carried, request.session)
        request.levels_tagged = num_cached

    def end_session(self, session: str) -> int:
        """Demote the session's P2 blocks to P3; returns how many were demoted."""
        self.ended[session] = None
        self.ended.move_to_end(session)
        while len(self.ended) > self.max_ended:
            self.ended.popitem(last=False)
        demoted = 0
        for block in self.by_session.pop(session, ()):
            holders = self.holders.get(block.block_id)
            if holders is not None:
                holders.discard(session)
                if holders:
                    continue
                del self.holders[block.block_id]
            if block.level == Level.NOTEBOOK:
                block.level = Level.FINISHED_NOTEBOOK
                self.pool.refile(block)
                demoted += 1
        self.num_demoted += demoted
        return demoted

    def forget(self, block: "KVBlock") -> None:
        """The block's content is gone (evicted): drop its session claims."""
        for session in self.holders.pop(block.block_id, ()):
            blocks = self.by_session.get(session)
            if blocks is not None:
                blocks.discard(block)
                if not blocks:   # nothing left to demote: forget the session
                    del self.by_session[session]
