"""Admission control: bounded concurrency, a bounded wait queue, deadlines, graceful drain.

The server has two lanes, each an `Admission`: /v1/ask questions (agent threads,
--max-concurrency) and the OpenAI endpoints' engine requests (--max-engine-requests, by default
the engine's batch capacity: a smaller door than the batch made bursts wait outside while the
engine had free slots, which was the TTFT tail under an open-loop load).

A request takes slots before doing work: one per engine request it will make (prompts x n). When every slot is taken it may wait in a queue of
bounded length; when that is full too it gets 429 at once (the server never piles up unbounded
work). While shutting down, new requests get 503 and in-flight ones are drained, then cancelled.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from glmcot.serve import errors


@dataclass(eq=False)
class Ticket:
    """One admitted request. `release` is idempotent; `cancel` callbacks run on forced shutdown."""

    admission: "Admission"
    endpoint: str
    arrived: float
    deadline: float
    queue_s: float = 0.0
    units: int = 1   # admission units held: one per engine request, at most all of them
    released: bool = False
    on_cancel: list[Callable[[], None]] = field(default_factory=list)

    def remaining(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.admission._release(self)


class Admission:
    """`max_concurrency` units of work; a request costs one unit per engine request it makes
    (prompts x n), at most all of them, so a many-choice request cannot hide behind one slot.
    Waiters are served first come, first served."""

    def __init__(self, max_concurrency: int, max_queue: int, timeout_s: float) -> None:
        self.max_concurrency = max_concurrency
        self.max_queue = max_queue
        self.timeout_s = timeout_s
        self.waiting = 0
        self.closing = False
        self.active: set[Ticket] = set()
        self.in_use = 0   # units held by the active tickets
        self.rejected: dict[str, int] = {"busy": 0, "shutting_down": 0, "queue_timeout": 0}
        self._queue: list[tuple[Ticket, asyncio.Future]] = []   # waiters, in arrival order
        self._idle: asyncio.Event | None = None

    @property
    def running(self) -> int:
        return len(self.active)

    def _ensure(self) -> None:
        if self._idle is None:   # created inside the server's event loop
            self._idle = asyncio.Event()
            self._idle.set()

    async def acquire(self, endpoint: str, cost: int = 1) -> Ticket:
        """Waits for `cost` units (engine requests). Raises 503 while shutting down, 429 when
        full, 504 on deadline."""
        self._ensure()
        arrived = time.monotonic()
        if self.closing:
            self.rejected["shutting_down"] += 1
            raise errors.unavailable()
        if self.running + self.waiting >= self.max_concurrency + self.max_queue:
            self.rejected["busy"] += 1
            raise errors.busy(f"server is full ({self.running} running, "
                              f"{self.waiting} waiting); retry later")
        ticket = Ticket(self, endpoint, arrived, arrived + self.timeout_s)
        ticket.units = max(1, min(cost, self.max_concurrency))
        self.waiting += 1
        try:
            if self._queue or self.in_use + ticket.units > self.max_concurrency:
                turn = asyncio.get_running_loop().create_future()
                self._queue.append((ticket, turn))
                try:
                    await asyncio.wait_for(asyncio.shield(turn), timeout=self.timeout_s)
                except BaseException:
                    if turn.done() and not turn.cancelled():   # granted just as we gave up
                        self._give_back(ticket.units)
                    else:
                        self._queue = [(t, f) for t, f in self._queue if t is not ticket]
                        self._wake()
                    raise
            else:
                self.in_use += ticket.units
        except (TimeoutError, asyncio.TimeoutError):
            self.rejected["queue_timeout"] += 1
            raise errors.timeout(self.timeout_s) from None
        finally:
            self.waiting -= 1
        if self.closing:
            self._give_back(ticket.units)
            self.rejected["shutting_down"] += 1
            raise errors.unavailable()
        ticket.queue_s = time.monotonic() - arrived
        self.active.add(ticket)
        self._idle.clear()
        return ticket

    def _give_back(self, units: int) -> None:
        self.in_use -= units
        self._wake()

    def _wake(self) -> None:
        """Grants units to waiters in order while they fit (the head blocks those behind it)."""
        while self._queue:
            ticket, turn = self._queue[0]
            if turn.done():
                self._queue.pop(0)
                continue
            if self.in_use + ticket.units > self.max_concurrency:
                break
            self._queue.pop(0)
            self.in_use += ticket.units
            turn.set_result(None)

    def _release(self, ticket: Ticket) -> None:
        if ticket in self.active:
            self.active.discard(ticket)
            self._give_back(ticket.units)
            if not self.active:
                self._idle.set()

    async def drain(self, grace_s: float) -> int:
        """Stops admitting, waits up to `grace_s` for in-flight work, cancels what is left.

        Returns how many requests had to be cancelled.
        """
        self.closing = True
        if self._idle is None or not self.active:
            return 0
        try:
            await asyncio.wait_for(self._idle.wait(), timeout=grace_s)
            return 0
        except (TimeoutError, asyncio.TimeoutError):
            pass
        left = list(self.active)
        for ticket in left:
            for cancel in ticket.on_cancel:
                try:
                    cancel()
                except Exception:  # one failed cancel must not stop the others
                    pass
            ticket.release()
        return len(left)
