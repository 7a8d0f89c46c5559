"""Numbered versions of a store: updates write a delta, compaction writes a new base.

Layout inside a store directory (its own files are version 0's base)::

    CURRENT.json          {"version": N, "base": "." | "bases/vN", "delta": "deltas/vN.json" | null}
    deltas/vN.json        the cumulative delta of version N against its base (graph/updates/delta.py)
    bases/vN/             a base written by compaction (the usual store layout)

Every step writes new files first and commits by replacing ``CURRENT.json`` (write, fsync,
rename), so a crash at any point leaves the last committed version readable and complete; files
of an uncommitted step are ignored and removed by the next one. One writer at a time (a lock
file); readers never wait: they read ``CURRENT.json`` once and keep the version they opened.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from glmcot.files import write_json_atomic
from glmcot.graph.updates.delta import ApplyReport, Delta, DeltaBuilder, Operation
from glmcot.graph.errors import GraphFormatError
from glmcot.graph.storage.store import Graph
from glmcot.graph.storage.writer import NULL, StoreWriter

CURRENT = "CURRENT.json"
VERSIONS_FORMAT = "glmcot.graph-versions/1"
_BATCH = 20_000

CrashHook = Callable[[str], None]  # called with a step name between steps (tests inject crashes)


def _no_crash(step: str) -> None:
    return None


@dataclass
class VersionInfo:
    version: int
    base: str
    delta: str | None

    @classmethod
    def read(cls, root: Path) -> VersionInfo:
        path = root / CURRENT
        if not path.is_file():
            return cls(0, ".", None)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as error:
            raise GraphFormatError(f"{path}: malformed ({error})") from None
        if data.get("format") != VERSIONS_FORMAT:
            raise GraphFormatError(f"{path}: not a glmcot versions file")
        return cls(int(data["version"]), str(data["base"]), data.get("delta"))

    def write(self, root: Path) -> None:
        write_json_atomic(root / CURRENT, {"format": VERSIONS_FORMAT, **asdict(self),
                                           "committed": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, indent=None)


def open_version(root: str | os.PathLike, info: VersionInfo | None = None) -> Graph:
    """The committed version of a store (or the version ``info`` names): a plain `Graph` before
    any update, else a `MergedGraph`. Its ``pinned_version`` names the files it was opened from,
    so another process can open exactly the same version (graph/updates/versions.py pins)."""
    from glmcot.graph.updates.merged import MergedGraph

    root = Path(root)
    info = info or VersionInfo.read(root)
    base = Graph.open(root / info.base, follow_updates=False)
    if info.delta is None and info.version == 0:
        base.pinned_version = info
        return base
    if info.delta is None:
        delta = Delta(base.store_id)
    else:
        path = root / info.delta
        try:
            delta = Delta.from_json(json.loads(path.read_text(encoding="utf-8")), str(path))
        except (OSError, json.JSONDecodeError) as error:
            raise GraphFormatError(f"{path}: cannot read the delta of version {info.version}: {error}") from None
        if delta.base_store_id != base.store_id:
            raise GraphFormatError(f"{path}: the delta belongs to another base store")
    graph = MergedGraph(base.directory, base.manifest, delta, info.version, root)
    graph.pinned_version = info
    return graph


def version_of(graph: Graph) -> VersionInfo:
    """The files a graph was opened from (a store opened before any update: version 0's base)."""
    return getattr(graph, "pinned_version", None) or VersionInfo(0, ".", None)


READERS = "readers"  # pins: {"pid", "base", "delta"} files of readers that may still open a version


def pin_version(root: str | os.PathLike, info: VersionInfo) -> Path | None:
    """Keep a version's files on disk while this process may still open it (a sandbox worker
    started in the middle of a question opens the question's version, not the newest). Updates
    and compactions remove the files of older versions, except those a live process pinned.
    Returns the pin's path, for `unpin`; None on a read-only store, which no update can change."""
    directory = Path(root) / READERS
    path = directory / f"{os.getpid()}-{uuid.uuid4().hex[:12]}.json"
    try:
        directory.mkdir(exist_ok=True)
        write_json_atomic(path, {"pid": os.getpid(), **asdict(info)}, indent=None)
    except OSError:  # read-only (or not ours to write): no update can remove its files either
        return None
    return path


def unpin(path: Path | None) -> None:
    if path is not None:
        Path(path).unlink(missing_ok=True)


def _pinned(root: Path) -> set[str]:
    """Files that live readers pinned; pins of processes that are gone are removed."""
    keep: set[str] = set()
    directory = root / READERS
    if not directory.is_dir():
        return keep
    for path in directory.glob("*.json"):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            pid = int(data["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # being written, or not ours: left alone
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            path.unlink(missing_ok=True)
            continue
        except PermissionError:
            pass  # alive, another user's
        for key in ("base", "delta"):
            if isinstance(data.get(key), str):
                keep.add(data[key])
    return keep


@contextlib.contextmanager
def _writer_lock(root: Path):
    with open(root / ".update.lock", "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise GraphFormatError(f"{root}: another update or compaction is running") from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class _BaseView:
    def __init__(self, graph: Graph):
        self.graph = graph

    def base_node(self, node_id: str):
        index = Graph._find(self.graph, node_id)  # the base, ignoring any delta
        if index < 0:
            return None
        return Graph.type_of_index(self.graph, index), Graph.features_at(self.graph, index)

    def base_neighbours(self, node_id: str, relation: str):
        index = Graph._find(self.graph, node_id)
        if index < 0:  # not a base node: nothing to copy
            return []
        node_type = Graph.type_of_index(self.graph, index)
        if relation not in Graph.relation_names(self.graph, node_type):
            return []
        targets = Graph.neighbor_indices(self.graph, index, relation)
        weights = Graph.neighbor_weights(self.graph, index, relation)
        real = list(zip(Graph.node_ids(self.graph, targets),
                        weights.tolist() if weights is not None else [None] * len(targets)))
        # The full list keeps the ids that name no node (dangling), in their places.
        result, position = [], 0
        for node_id in Graph.neighbor_id_list(self.graph, index, relation):
            if position < len(real) and real[position][0] == node_id:
                result.append(real[position])
                position += 1
            else:
                result.append((node_id, None))
        return result


def reverse_suffix_of(graph: Graph) -> str:
    """The suffix of the reverse edges a store was imported with ('' for none): updates keep them."""
    return str((graph.manifest.get("source") or {}).get("reverse_suffix") or "")


# An update rewrites the cumulative delta, so its cost grows with the delta; past this size the
# update compacts the store (base + delta -> a new base), which makes the next delta empty again.
DEFAULT_AUTO_COMPACT_BYTES = 16 << 20


@dataclass
class UpdateResult:
    version: int
    report: ApplyReport
    seconds: float
    embedded: int = 0  # node texts embedded for the node index
    compacted: bool = False  # the delta passed the auto-compaction size: `version` is the compacted one
    delta_bytes: int = 0  # size of the delta this update wrote


def _clean(root: Path, keep: set[str]) -> None:
    """Remove delta files and bases that no committed version names (left by a crash or superseded)
    and no live reader pinned."""
    keep = keep | _pinned(root)
    for folder in ("deltas", "bases"):
        directory = root / folder
        if not directory.is_dir():
            continue
        for path in directory.iterdir():
            relative = f"{folder}/{path.name}"
            if relative in keep:
                continue
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)


def apply_update(root: str | os.PathLike, operations: Iterable[Operation], crash: CrashHook = _no_crash,
                 embedder=None, auto_compact_bytes: int = DEFAULT_AUTO_COMPACT_BYTES) -> UpdateResult:
    """Apply operations as one new version. Bad operations raise before anything is committed.
    When the cumulative delta passes ``auto_compact_bytes`` (0: never), the store is compacted
    right after, so an update's cost stays bounded by that size plus its own."""
    started = time.perf_counter()
    root = Path(root)
    result = _apply_update(root, operations, crash, embedder)
    if auto_compact_bytes > 0 and result.delta_bytes > auto_compact_bytes:
        result.version = compact(root, crash)
        result.compacted = True
    result.seconds = time.perf_counter() - started
    return result


def _apply_update(root: Path, operations: Iterable[Operation], crash: CrashHook, embedder) -> UpdateResult:
    started = time.perf_counter()
    with _writer_lock(root):
        info = VersionInfo.read(root)
        current = open_version(root)
        base = Graph.open(root / info.base, follow_updates=False)
        delta = getattr(current, "delta", None)
        delta = Delta.from_json(json.loads(json.dumps(delta.to_json())), "delta") if delta else Delta(base.store_id)
        merged_view = current

        def text_key(node_type: str, features: dict) -> str | None:
            if node_type in merged_view.node_types:
                key = merged_view.text_key(node_type)
                if key is not None:
                    return key
            from glmcot.graph.storage.domains import default_text_key

            return default_text_key(node_type, [{"name": name, "kind": "str" if isinstance(value, str) else "x"}
                                                 for name, value in features.items()])

        def column_kind(node_type: str, name: str) -> str | None:
            if node_type in merged_view.node_types and name in merged_view.feature_names(node_type):
                return merged_view.feature_kind(node_type, name)
            return None

        builder = DeltaBuilder(delta, _BaseView(base), text_key, column_kind, reverse_suffix_of(base))
        report = builder.apply_all(operations)
        version = info.version + 1
        (root / "deltas").mkdir(exist_ok=True)
        delta_name = f"deltas/v{version:06d}.json"
        write_json_atomic(root / delta_name, delta.to_json(), indent=None)
        delta_bytes = (root / delta_name).stat().st_size
        crash("delta-written")
        new_info = VersionInfo(version, info.base, delta_name)
        from glmcot.graph.index.index_updates import has_node_index, update_node_index
        from glmcot.graph.updates.merged import MergedGraph

        embedded = 0
        if has_node_index(base):  # the node index follows: embed only new and renamed nodes
            after = MergedGraph(base.directory, base.manifest, delta, version, root)
            embedded = update_node_index(current, after, report, embedder)
        crash("before-commit")
        new_info.write(root)
        crash("committed")
        _clean(root, {delta_name, info.base})
    return UpdateResult(version, report, time.perf_counter() - started, embedded, delta_bytes=delta_bytes)


def compact(root: str | os.PathLike, crash: CrashHook = _no_crash) -> int:
    """Write the committed version as a new base (no delta); returns the new version number."""
    root = Path(root)
    with _writer_lock(root):
        info = VersionInfo.read(root)
        graph = open_version(root)
        version = info.version + 1
        base_name = f"bases/v{version:06d}"
        (root / "bases").mkdir(exist_ok=True)
        mapping = write_merged(graph, root / base_name)
        from glmcot.graph.index.index_updates import compact_node_index

        compact_node_index(graph, Graph.open(root / base_name, follow_updates=False), mapping)
        crash("base-written")
        VersionInfo(version, base_name, None).write(root)
        crash("committed")
        _clean(root, {base_name, info.base})  # the previous base stays for readers still on it
    return version


def write_merged(graph: Graph, out_dir: Path) -> np.ndarray:
    """Write any graph view (a merged version) as a new store, atomically; returns old -> new index (-1: gone)."""
    live_types = [(node_type, _live_indices(graph, node_type)) for node_type in graph.node_types]
    mapping = np.full(graph.num_nodes, -1, dtype=np.int64)
    position = 0
    for _, indices in live_types:
        mapping[indices] = np.arange(position, position + len(indices))
        position += len(indices)
    source = {"compacted_from": str(graph.directory), "version": getattr(graph, "version", 0)}
    if reverse_suffix_of(graph):
        source["reverse_suffix"] = reverse_suffix_of(graph)
    with StoreWriter(out_dir, overwrite=True, source=source) as writer:
        for node_type, indices in live_types:
            writer.add_nodes(node_type, [], {})
            names = graph.feature_names(node_type)
            for first in range(0, len(indices), _BATCH):
                batch = indices[first : first + _BATCH].tolist()
                rows = [graph.features_at(index) for index in batch]
                # a null feature exists with the value None (store 1.2), unlike an absent one
                features = {name: [NULL if name in row and row[name] is None else row.get(name) for row in rows]
                            for name in names}
                features = {name: values for name, values in features.items() if any(v is not None for v in values)}
                writer.add_nodes(node_type, graph.node_ids(batch), features)
            key = graph.text_key(node_type)
            if key is not None:
                writer.set_text_key(node_type, key)
        for node_type, indices in live_types:
            for relation in graph.relation_names(node_type):
                sources, targets, weights, weighted = [], [], [], False
                dangling_src, dangling_pos, dangling_ids = [], [], []
                edge_names = graph.edge_feature_names(node_type, relation)
                edge_features: dict[str, list] = {name: [] for name in edge_names}
                for index in indices.tolist():
                    if graph.dangling_count_at(index, relation):  # ids naming no node keep their places
                        for position, node_id in enumerate(graph.neighbor_id_list(index, relation)):
                            if not graph.has_node(node_id):
                                dangling_src.append(mapping[index])
                                dangling_pos.append(position)
                                dangling_ids.append(node_id)
                    neighbours = graph.neighbor_indices(index, relation)
                    weight = graph.neighbor_weights(index, relation)
                    sources.append(np.full(len(neighbours), mapping[index], dtype=np.int64))
                    targets.append(mapping[np.asarray(neighbours, dtype=np.int64)])
                    weighted = weighted or weight is not None
                    weights.append(np.ones(len(neighbours), np.float32) if weight is None else np.asarray(weight, np.float32))
                    if edge_names:  # edge features carry over (an updated list's edges have none)
                        rows = graph.edge_features_at(index, relation)
                        for name in edge_names:
                            edge_features[name].extend(row.get(name) for row in rows)
                src = np.concatenate(sources) if sources else np.zeros(0, np.int64)
                dst = np.concatenate(targets) if targets else np.zeros(0, np.int64)
                if len(src):
                    writer.add_edges(node_type, relation, src, dst, np.concatenate(weights) if weighted else None,
                                     edge_features or None)
                if dangling_ids:
                    writer.add_dangling(node_type, relation, np.asarray(dangling_src), np.asarray(dangling_pos), dangling_ids)
                absent = [mapping[index] for index in indices.tolist() if not _has_relation_key(graph, index, relation)]
                if absent:
                    writer.add_absent(node_type, relation, np.asarray(absent, dtype=np.int64))
    return mapping


def _has_relation_key(graph: Graph, index: int, relation: str) -> bool:
    """Whether a node's source had the relation key (nodes an update added always do)."""
    try:
        return graph.has_relation_key_at(index, relation)
    except (IndexError, KeyError, ValueError):
        return True


def _live_indices(graph: Graph, node_type: str) -> np.ndarray:
    if hasattr(graph, "type_indices"):
        return graph.type_indices(node_type)
    start, stop = graph.type_range(node_type)
    return np.arange(start, stop, dtype=np.int64)


Graph.open_committed_version = staticmethod(open_version)

__all__ = ["open_version", "apply_update", "compact", "write_merged", "VersionInfo", "UpdateResult", "CURRENT",
           "version_of", "pin_version", "unpin", "reverse_suffix_of", "READERS", "DEFAULT_AUTO_COMPACT_BYTES"]
