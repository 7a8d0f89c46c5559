"""Pieces shared by the table and triple importers: the report, dangling-edge accounting and
handing resolved edges to the `StoreWriter` grouped by source type and relation."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from dataclasses import dataclass, field

import numpy as np

from glmcot.graph.storage.writer import StoreWriter

DANGLING_EXAMPLES = 10
# Tables and triples store each edge backwards too, as <relation>_reverse, so every relation can
# be walked from either end (NeighbourCheck follows stored edges); '' turns it off (--no-reverse).
DEFAULT_REVERSE_SUFFIX = "_reverse"

ProgressCallback = Callable[[str, int, int], None]  # (phase, done, total): bytes, or files for a phase in FILE_PHASES
FILE_PHASES = ("node tables", "edge tables")  # phases that count files, not bytes


def import_paths(path: str | os.PathLike, out_dir: str | os.PathLike, overwrite: bool) -> tuple[Path, Path]:
    """An importer's input file and output store, checked before any work: the input exists, and
    the output is new unless `overwrite` (the store is replaced atomically at the end)."""
    path, out_dir = Path(path), Path(out_dir)
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    if out_dir.exists() and not overwrite:
        raise FileExistsError(f"{out_dir} exists; pass --force to replace it")
    return path, out_dir


class CountingReader:
    """A binary file that reports how many bytes its parser has consumed (progress for every
    importer, gzip input included: it counts the compressed bytes read)."""

    def __init__(self, handle, phase: str, total: int, progress: ProgressCallback | None):
        self._handle = handle
        self._phase = phase
        self._total = total
        self._progress = progress
        self.position = 0

    def read(self, size: int = -1) -> bytes:
        data = self._handle.read(size)
        self.position += len(data)
        if self._progress is not None:
            self._progress(self._phase, self.position, self._total)
        return data

    def readable(self) -> bool:
        return True


@dataclass
class ImportSummary:
    """What an import wrote; the same fields as the JSON importer's report, plus the input size."""

    out_dir: str
    nodes: int
    edges: int
    node_types: dict[str, int]
    dangling_neighbors: int
    dangling_examples: list[str] = field(default_factory=list)
    seconds: float = 0.0
    format: str = ""
    input_bytes: int = 0
    rows: int = 0  # table rows or triples read
    warnings: dict = field(default_factory=dict)
    text_keys: dict[str, str | None] = field(default_factory=dict)  # each type's text key, as chosen


class Dangling:
    """Counts edges whose endpoint names no node, keeping a few examples for the report."""

    def __init__(self) -> None:
        self.count = 0
        self.examples: list[str] = []

    def add(self, count: int, describe: Callable[[int], str], rows: np.ndarray) -> None:
        self.count += count
        for row in rows[: max(DANGLING_EXAMPLES - len(self.examples), 0)].tolist():
            self.examples.append(describe(row))

    def record(self, writer: StoreWriter) -> None:
        if self.count:
            writer.warnings["dangling_neighbors"] = self.count
            writer.warnings["dangling_examples"] = list(self.examples)


class TypeRanges:
    """Global index ranges of the node types, in writing order, to find an edge's source type."""

    def __init__(self, counts: list[tuple[str, int]]):
        self.names = [name for name, _ in counts]
        starts = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum([count for _, count in counts], out=starts[1:])
        self.starts = starts

    def type_numbers(self, indices: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.starts, indices, side="right") - 1


def add_grouped_edges(
    writer: StoreWriter,
    ranges: TypeRanges,
    relations: np.ndarray,
    relation_names: list[str],
    src: np.ndarray,
    dst: np.ndarray,
    weight: np.ndarray | None,
    reverse_suffix: str = "",
    features: dict[str, list] | None = None,
) -> int:
    """Add edges (``relations`` index into ``relation_names``) to the writer; returns edges added.

    With ``reverse_suffix``, every edge is also added backwards as ``<relation><suffix>`` so the
    agents can walk it from either end (NeighbourCheck follows outgoing edges only); ``features``
    (name -> one value per edge) go with both directions.
    """
    added = 0
    directions = [(src, dst, "")]
    if reverse_suffix:
        directions.append((dst, src, reverse_suffix))
    for sources, targets, suffix in directions:
        source_types = ranges.type_numbers(sources)
        keys = source_types.astype(np.int64) * (len(relation_names) + 1) + relations
        order = np.argsort(keys, kind="stable")
        sorted_keys = keys[order]
        bounds = np.flatnonzero(np.diff(sorted_keys)) + 1
        for group in np.split(order, bounds):
            if not group.size:
                continue
            first = int(group[0])
            node_type = ranges.names[int(source_types[first])]
            relation = relation_names[int(relations[first])] + suffix
            rows = group.tolist()
            chosen = {name: [values[row] for row in rows] for name, values in (features or {}).items()}
            writer.add_edges(node_type, relation, sources[group], targets[group], None if weight is None else weight[group],
                             chosen or None)
            added += int(group.size)
    return added


__all__ = ["import_paths", "CountingReader", "ImportSummary", "Dangling", "TypeRanges", "add_grouped_edges", "DANGLING_EXAMPLES", "DEFAULT_REVERSE_SUFFIX", "FILE_PHASES", "ProgressCallback"]
