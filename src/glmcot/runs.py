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
from typing import Any, Callable, Generic, Mapping, Sequence, TypeVar

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
    # What the rows' answers depend on (graph, method, backend...): each new row records it under
    # SETTINGS_FIELD, and a resumed run refuses rows recorded with other settings (None: not checked)
    settings: Mapping[str, Any] | None = None
    # why a stored row no longer fits its item though the settings match (e.g. its question text
    # changed), or None when it fits
    stale: Callable[[Any, dict[str, Any]], str | None] = lambda item, row: None
    # how to go on when resuming is refused (the caller's words: a CLI option, an argument)
    on_mismatch: str = "start over without resuming, or write to another file"


SETTINGS_FIELD = "settings"


class ResumeMismatch(ValueError):
    """The results file holds rows written with other settings (another graph, method, backend):
    resuming would mix two runs' answers under one name, so the run refuses before answering."""

    def __init__(self, path: Path, reasons: Sequence[str], rows: int, hint: str) -> None:
        shown = "; ".join(reasons[:3]) + (f" (and {len(reasons) - 3} more)" if len(reasons) > 3 else "")
        super().__init__(f"{path}: {rows} stored row(s) do not belong to this run ({shown}), so they "
                         f"are not resumed; {hint}")
        self.path, self.reasons, self.rows = path, list(reasons), rows


def _setting_differences(recorded: Any, settings: Mapping[str, Any]) -> list[str]:
    if not isinstance(recorded, dict):
        return ["the rows record no settings (written by an older glmcot), so what they answered "
                "cannot be checked"]
    return [f"{name} was {recorded.get(name)!r}, now {value!r}" for name, value in settings.items()
            if recorded.get(name) != value]


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
        stored = {str(row[storage.key]): row for row in rows
                  if storage.belongs(row) and row[storage.key] is not None and str(row[storage.key]) not in again}
        # refused before anything is rewritten or answered: a refused run changes nothing
        _check_settings(path, rows, storage)
        stale = [f"{key}: {reason}" for item in items for key in [item_key(item)]
                 if key is not None and key in stored for reason in [storage.stale(item, stored[key])] if reason]
        if stale:
            raise ResumeMismatch(path, stale, len(stale), storage.on_mismatch)
        if again:  # the file must not keep a failed row beside its retry
            write_rows_atomic(path, [row for row in rows if not (storage.belongs(row) and str(row[storage.key]) in again)])
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
                row = storage.encode(items[position], result)
                if storage.settings is not None:
                    row = {**row, SETTINGS_FIELD: dict(storage.settings)}
                writer.write(row)
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


def _check_settings(path: Path, rows: Sequence[dict[str, Any]], storage: Storage) -> None:
    """Raises ResumeMismatch when a row of this run was recorded with other settings."""
    if storage.settings is None:
        return
    reasons: dict[str, None] = {}
    count = 0
    for row in rows:
        if not storage.belongs(row):
            continue
        found = _setting_differences(row.get(SETTINGS_FIELD), storage.settings)
        if found:
            count += 1
            reasons.update(dict.fromkeys(found))
    if count:
        raise ResumeMismatch(path, list(reasons), count, storage.on_mismatch)
