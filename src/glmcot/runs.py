"""Resumable runs: answer many items with a few worker threads, append each result to a JSON
Lines file as it finishes, and on a rerun skip the items already in that file.

The agents' traces (`glmcot.agents.runner`) and the evaluation's result rows (`glmcot.eval.runner`)
are both this one runner with their own row codec."""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Generic, Sequence, TypeVar

from glmcot.files import RowWriter, read_rows, write_rows_atomic

Item = TypeVar("Item")
Result = TypeVar("Result")


@dataclass(frozen=True)
class Storage(Generic[Item, Result]):
    """How results become rows of the file and back."""
    encode: Callable[[Item, Result], dict[str, Any]]
    decode: Callable[[dict[str, Any]], Result]
    key: str = "qid"
    # a row of this run (a shared file may hold other runs' rows), and a stored row to answer again
    belongs: Callable[[dict[str, Any]], bool] = lambda row: True
    retry: Callable[[dict[str, Any]], bool] = lambda row: False


@dataclass
class RunOutcome(Generic[Result]):
    results: list[Result]   # one per item, in item order
    new: int                # items answered in this run
    skipped: int            # items found finished in the file
    wall_s: float           # wall time of this run's new items


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during a run: the results written so far are saved; a rerun resumes after them."""

    def __init__(self, name: str, path: Path | None, saved: int, total: int) -> None:
        where = f" in {path}" if path is not None else ""
        super().__init__(f"{name}: {saved} of {total} answers saved{where}")
        self.name, self.path, self.saved, self.total = name, path, saved, total


def run_resumable(items: Sequence[Item], answer: Callable[[Item], Result], *,
                  item_key: Callable[[Item], str | None], storage: Storage[Item, Result],
                  path: str | Path | None = None, name: str = "run", concurrency: int = 4, resume: bool = True,
                  on_start: Callable[[int], None] | None = None,
                  on_stored: Callable[[Result], None] | None = None,
                  on_done: Callable[[Result], None] | None = None) -> RunOutcome[Result]:
    """Answers the items not yet stored in `path` (all of them without a path), `concurrency` at a
    time. `on_start(skipped)` is told how many were already done, `on_stored` gets each of their
    results, and `on_done` is called in this thread as each new result is stored. An exception from `answer` stops the run and is raised
    here; Ctrl-C stops at once (items in flight are dropped) and raises RunInterrupted."""
    path = Path(path) if path is not None else None
    stored: dict[str, dict[str, Any]] = {}
    if path is not None:
        if not resume and path.exists():
            path.unlink()
        rows = read_rows(path, storage.key)
        again = {str(row[storage.key]) for row in rows if storage.belongs(row) and storage.retry(row)}
        if again:  # the file must not keep a failed row beside its retry
            write_rows_atomic(path, [row for row in rows if not (storage.belongs(row) and str(row[storage.key]) in again)])
        stored = {str(row[storage.key]): row for row in rows
                  if storage.belongs(row) and row[storage.key] is not None and str(row[storage.key]) not in again}
    keys = [item_key(item) for item in items]
    results: list[Any] = [None] * len(items)
    todo: list[int] = []
    found: list[int] = []
    for position, key in enumerate(keys):
        if key is not None and key in stored:
            results[position] = storage.decode(stored[key])
            found.append(position)
        else:
            todo.append(position)
    skipped = len(found)
    if on_start is not None:
        on_start(skipped)
    if on_stored is not None:
        for position in found:
            on_stored(results[position])

    stop = threading.Event()
    pending: queue.SimpleQueue = queue.SimpleQueue()
    finished: queue.SimpleQueue = queue.SimpleQueue()
    for position in todo:
        pending.put(position)

    def worker() -> None:
        while not stop.is_set():
            try:
                position = pending.get_nowait()
            except queue.Empty:
                return
            try:
                finished.put((position, answer(items[position]), None))
            except BaseException as error:  # noqa: BLE001 - raised again by the main thread
                finished.put((position, None, error))

    # Daemon workers, not a ThreadPoolExecutor: on Ctrl-C the process must not wait for the items
    # in flight (an executor joins its threads at exit).
    threads = [threading.Thread(target=worker, name=f"glmcot-{name}-{index}", daemon=True)
               for index in range(min(max(1, int(concurrency)), max(1, len(todo))))]
    started = time.perf_counter()
    writer = RowWriter(path) if path is not None else None
    received = 0
    try:
        for thread in threads:
            thread.start()
        while received < len(todo):
            try:
                position, result, error = finished.get(timeout=0.2)  # a timeout keeps Ctrl-C deliverable
            except queue.Empty:
                continue
            received += 1
            if error is not None:
                raise error
            if writer is not None:
                writer.write(storage.encode(items[position], result))
            results[position] = result
            if on_done is not None:
                on_done(result)
    except KeyboardInterrupt:
        stop.set()
        raise RunInterrupted(name, path, skipped + received, len(items)) from None
    finally:
        stop.set()
        if writer is not None:
            writer.close()
    return RunOutcome(results=results, new=len(todo), skipped=skipped, wall_s=time.perf_counter() - started)
