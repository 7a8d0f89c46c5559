"""The plugin's counters as a JSON file, written by the engine-core process (where the plugin's
state lives; vLLM's Prometheus metrics live in the API server process and cannot see it).

The file is rewritten atomically at most every `interval_s` while something changed, by a daemon
thread, and read with `read_stats(path)`.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Callable

from glmcot.files import write_json_atomic


def read_stats(path: str | Path) -> dict[str, Any]:
    """The counters a running (or stopped) engine last wrote."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


class StatsWriter:
    """Writes `snapshot()` to `path` when marked dirty, at most every `interval_s`."""

    def __init__(self, path: Path, snapshot: Callable[[], dict[str, Any]], interval_s: float = 0.5) -> None:
        self.path = Path(path)
        self.snapshot = snapshot
        self.interval_s = interval_s
        self._dirty = threading.Event()
        self._stopped = threading.Event()
        self.failed: str | None = None
        self._thread = threading.Thread(target=self._run, name="glmcot-vllm-stats", daemon=True)
        self._thread.start()

    def mark(self) -> None:
        self._dirty.set()

    def flush(self) -> None:
        """Writes now (on the caller's thread)."""
        self._dirty.clear()
        try:
            write_json_atomic(self.path, self.snapshot(), sort_keys=True)
        except Exception as error:  # never let the counters break vLLM
            self.failed = f"{type(error).__name__}: {error}"

    def stop(self) -> None:
        self._stopped.set()
        self._dirty.set()

    def _run(self) -> None:
        while not self._stopped.is_set():
            self._dirty.wait()
            if self._stopped.is_set():
                break
            self.flush()
            self._stopped.wait(self.interval_s)
