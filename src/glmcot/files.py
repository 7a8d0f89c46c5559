"""Crash-safe files: JSON written atomically, and JSON Lines appended one whole line at a time.

A reader of a JSON Lines file cuts a torn last line (a crash mid-write) so the next append starts
on a line of its own; a malformed line anywhere else is an error that names the line."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any, Iterable


def write_json_atomic(path: str | Path, data: Any, *, indent: int | None = 2, sort_keys: bool = False) -> None:
    """Writes to a temporary file beside `path`, fsyncs it, then renames it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, indent=indent, sort_keys=sort_keys, ensure_ascii=False, default=str) + "\n"
    _replace_with(path, text.encode("utf-8"))


def write_rows_atomic(path: str | Path, rows: Iterable[dict[str, Any]]) -> None:
    """Replaces a JSON Lines file with `rows` in one atomic step."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _replace_with(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode("utf-8"))


def write_text_atomic(path: str | Path, text: str) -> None:
    """Replaces a text file (UTF-8) in one atomic step."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _replace_with(path, text.encode("utf-8"))


def _replace_with(path: Path, data: bytes) -> None:
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    with open(temporary, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def read_rows(path: str | Path, key: str = "qid") -> list[dict[str, Any]]:
    """The finished rows of a JSON Lines file (objects holding `key`). A torn last line is cut off
    the file; a last line without its newline but whole gets one."""
    path = Path(path)
    if not path.exists():
        return []
    data = path.read_bytes()
    complete, _, tail = data.rpartition(b"\n") if b"\n" in data else (b"", b"", data)
    rows: list[dict[str, Any]] = []
    for number, raw in enumerate(complete.split(b"\n") if complete else [], 1):
        if not raw.strip():
            continue
        row = _parse_row(raw, key)
        if row is None:
            raise ValueError(f"{path}:{number}: malformed row (not a JSON object with {key!r}); fix or remove that line")
        rows.append(row)
    if tail.strip():
        row = _parse_row(tail, key)
        if row is None:  # torn by a crash: drop it, its question runs again
            with path.open("r+b") as handle:
                handle.truncate(len(data) - len(tail))
                handle.flush()
                os.fsync(handle.fileno())
        else:
            with path.open("ab") as handle:
                handle.write(b"\n")
            rows.append(row)
    return rows


def _parse_row(raw: bytes, key: str) -> dict[str, Any] | None:
    try:
        row = json.loads(raw)
    except ValueError:
        return None
    return row if isinstance(row, dict) and key in row else None


class RowWriter:
    """Appends one JSON object per line with a single write() on an O_APPEND descriptor, then
    fsync, so a crash leaves at most one torn line at the end (which read_rows cuts off)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, row: dict[str, Any]) -> None:
        data = (json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8")
        with self._lock:
            os.write(self._fd, data)
            os.fsync(self._fd)

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def __enter__(self) -> "RowWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
