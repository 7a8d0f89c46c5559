"""Block levels and sessions, keyed by vLLM block id (vLLM's `KVCacheBlock` has slots: no new fields).

A block's level is the most protective (lowest) level any request claimed for it. A level-2 claim
made for a running session is remembered per session; when the session ends (a flag on a
request, or no request for `session_timeout_s`), its level-2 blocks fall to level 3 unless another
running session still claims them. Within a request levels are pushed toward the head, so a parent
block is never less protected than its child, and level 1 is capped at a share of the pool: the
blocks beyond the cap (always a request's tail part of its level-1 run) rank as level 2.
Pure Python; no vLLM import.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Callable, Sequence

from glmcot.contract import Level

P1, P2, P3, P4 = int(Level.SHARED_PROMPT), int(Level.NOTEBOOK), int(Level.FINISHED_NOTEBOOK), int(Level.TRANSIENT)


def block_levels(spans: Sequence[tuple[int, int]], num_prompt_tokens: int, num_blocks: int, block_size: int) -> list[int]:
    """The level of each of a request's first `num_blocks` blocks (head to tail).

    A block takes the most protective level among the spans that overlap it (tokens after the
    spans and generated tokens are level 4, the default), then each block takes the minimum of its
    own and all later blocks' levels, so the sequence never rises toward the head."""
    levels = [P4] * num_blocks
    start = 0
    for level, count in spans:
        end = min(start + count, num_prompt_tokens)
        if level < P4 and start < end:  # level 4 never lowers a minimum
            for block in range(start // block_size, min((end - 1) // block_size + 1, num_blocks)):
                if levels[block] > level:
                    levels[block] = level
        start += count
        if start >= num_prompt_tokens:
            break
    for i in range(num_blocks - 2, -1, -1):  # a parent is never less protected than its child
        if levels[i + 1] < levels[i]:
            levels[i] = levels[i + 1]
    return levels


class LevelTable:
    """Levels of cached blocks and the sessions that hold level-2 claims. Thread-safe (the stats
    writer reads it from its own thread)."""

    def __init__(self, num_blocks: int, p1_share: float = 0.5, session_timeout_s: float = 900.0,
                 max_sessions: int = 65536, clock: Callable[[], float] = time.monotonic) -> None:
        self.p1_cap = int(p1_share * num_blocks)
        self.session_timeout_s = session_timeout_s
        self.max_sessions = max_sessions
        self.clock = clock
        self.lock = threading.RLock()
        self._base: dict[int, int] = {}  # block id -> lowest level claimed without a running session
        self._holders: dict[int, set[str]] = {}  # block id -> running sessions claiming it at level 2
        self._by_session: dict[str, set[int]] = {}
        self._live: OrderedDict[str, float] = OrderedDict()  # running session -> last activity (oldest first)
        self._ended: OrderedDict[str, None] = OrderedDict()  # recently ended sessions, bounded
        self.num_p1 = 0
        self.p1_overflow = 0  # level-1 claims that ranked as level 2 because of the cap
        self.demoted = 0  # blocks that fell from level 2 to level 3
        self.sessions_ended = 0
        self.sessions_timed_out = 0

    # ---- reading
    def level(self, block_id: int) -> int:
        if self._holders.get(block_id):
            return min(P2, self._base.get(block_id, P4))
        return self._base.get(block_id, P4)

    def has(self, block_id: int) -> bool:
        return block_id in self._base or block_id in self._holders

    def counts(self) -> dict[int, int]:
        """Tagged blocks per level (free or in use)."""
        with self.lock:
            counts = {P1: 0, P2: 0, P3: 0, P4: 0}
            for block_id in set(self._base) | set(self._holders):
                counts[self.level(block_id)] += 1
            return counts

    @property
    def live_sessions(self) -> int:
        return len(self._live)

    # ---- writing
    def claim(self, block_ids: Sequence[int], levels: Sequence[int], session: str | None) -> list[int]:
        """Claims levels (head to tail, as from `block_levels`) for a request's cached blocks.
        Level-2 claims without a session are permanent level 2 for the block. Returns the ids whose
        level changed."""
        changed = []
        with self.lock:
            if session is not None:
                self._touch(session)
            running = session is not None and session not in self._ended
            capped = False
            for block_id, level in zip(block_ids, levels):
                before = self.level(block_id)
                base = self._base.get(block_id, P4)
                if level == P1 and base != P1:
                    if capped or self.num_p1 >= self.p1_cap:
                        capped = True  # the rest of this request's level-1 run ranks as level 2
                        self.p1_overflow += 1
                        level = P2
                        if base > P2:
                            self._set_base(block_id, P2)
                    else:
                        self._set_base(block_id, P1)
                elif level == P2 and session is not None:
                    if running:
                        self._holders.setdefault(block_id, set()).add(session)
                        self._by_session.setdefault(session, set()).add(block_id)
                    elif base > P3:
                        self._set_base(block_id, P3)  # a late request of an ended session
                elif level < base:
                    self._set_base(block_id, level)
                if self.level(block_id) != before:
                    changed.append(block_id)
        return changed

    def end_session(self, session: str) -> list[int]:
        """The session ended: its level-2 blocks that no other running session holds become level 3.
        Returns their ids."""
        with self.lock:
            return self._end(session)

    def expire(self) -> list[int]:
        """Ends sessions idle for longer than the timeout; returns the blocks that changed level."""
        changed: list[int] = []
        with self.lock:
            now = self.clock()
            while self._live:
                session, seen = next(iter(self._live.items()))
                if now - seen < self.session_timeout_s:
                    break
                self.sessions_timed_out += 1
                changed += self._end(session)
        return changed

    def forget(self, block_id: int) -> None:
        """The block's content is gone (evicted or reset)."""
        with self.lock:
            if self._base.pop(block_id, P4) == P1:
                self.num_p1 -= 1
            for session in self._holders.pop(block_id, ()):
                held = self._by_session.get(session)
                if held is not None:
                    held.discard(block_id)

    def reset(self) -> None:
        with self.lock:
            self._base.clear()
            self._holders.clear()
            for held in self._by_session.values():
                held.clear()
            self.num_p1 = 0

    # ---- internals
    def _set_base(self, block_id: int, level: int) -> None:
        old = self._base.get(block_id, P4)
        if old == P1 and level != P1:
            self.num_p1 -= 1
        elif level == P1 and old != P1:
            self.num_p1 += 1
        self._base[block_id] = level

    def _touch(self, session: str) -> None:
        if session in self._ended:
            return
        self._live[session] = self.clock()
        self._live.move_to_end(session)
        while len(self._live) > self.max_sessions:  # bounded: the least recently active ends first
            oldest = next(iter(self._live))
            self.sessions_timed_out += 1
            self._end(oldest)

    def _end(self, session: str) -> list[int]:
        self._live.pop(session, None)
        if session not in self._ended:
            self.sessions_ended += 1
        self._ended[session] = None
        self._ended.move_to_end(session)
        while len(self._ended) > self.max_sessions:
            self._ended.popitem(last=False)
        changed = []
        for block_id in self._by_session.pop(session, ()):
            holders = self._holders.get(block_id)
            if holders is None:
                continue
            holders.discard(session)
            if holders:
                continue
            del self._holders[block_id]
            if self._base.get(block_id, P4) > P3:
                self._set_base(block_id, P3)
            if self.level(block_id) == P3:
                self.demoted += 1
                changed.append(block_id)
        return changed
