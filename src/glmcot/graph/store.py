"""The on-disk graph store: typed CSR topology and columnar node features, memory-mapped.

Layout of a store directory (format ``glmcot.graph``, see ``STORE_FORMAT_VERSION``)::

    manifest.json                  types, features, relations, counts, warnings
    nodes/ids.blob                 all node ids, UTF-8, concatenated in global index order
    nodes/ids_offsets.npy          int64 [num_nodes + 1]
    nodes/id_hash.npy              uint64 sorted 64-bit hashes of the ids
    nodes/id_order.npy             int32|int64 global index of each sorted hash
    nodes/id_directory.npy         int32|int64 [2^bits + 1]: first sorted-hash position per
                                   top-bits bucket (1.1+; lookups skip the binary search)
    nodes/degree.npy               int32|int64 out-degree over all relations (chunk ranking)
    features/t<T>/f<F>.*           one column per (type, feature): mask + values by kind
    edges/r<R>.indptr.npy          CSR over the source type's nodes (local index)
    edges/r<R>.dst.npy             global indices of the destinations
    edges/r<R>.weight.npy          optional float32 edge weights

Id lookup needs no dictionary at open time: hash the id, binary-search the sorted hash array,
then verify the id string. Opening reads only the manifest and maps files lazily.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import mmap
import os
import shutil
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from glmcot.graph.errors import FeatureNotFound, GraphFormatError, NodeNotFound, RelationNotFound
from glmcot.graph.idhash import ID_HASH_NAME, find_duplicate, hash_id, hash_ids

STORE_FORMAT = "glmcot.graph"
STORE_FORMAT_VERSION = "1.1"  # 1.1 added nodes/id_directory.npy; 1.0 stores still open

# The feature each node type embeds for RetrieveNode, as Graph-CoT's NODE_TEXT_KEYS (first key).
NODE_TEXT_KEYS: dict[str, str] = {
    "paper": "title",
    "book": "title",
    "item": "title",
    "series": "title",
    "author": "name",
    "venue": "name",
    "brand": "name",
    "publisher": "name",
    "opinion": "plain_text",
    "opinion_cluster": "syllabus",
    "docket": "pacer_case_id",
    "court": "full_name",
}
_FALLBACK_TEXT_KEYS = ("title", "name", "full_name", "case_name")

FeatureValue = str | int | float | bool | list | dict

_ENCODING = "utf-8"
_ERRORS = "surrogatepass"  # JSON may carry lone surrogates; keep them round-trippable

# Value categories while staging a column.
_ABSENT, _STR, _INT, _FLOAT, _BOOL, _LIST, _OTHER = range(7)
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _blake2b_id_hash(data: bytes) -> int:
    # The id hash of stores written before "id_hash" was recorded in the manifest.
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


_ID_HASHES = {ID_HASH_NAME: hash_id, "blake2b64": _blake2b_id_hash}


def _directory_bits(num_nodes: int) -> int:
    """Top hash bits used to bucket ids: about one id per bucket, at most 2^28 buckets."""
    return min(max(int(num_nodes).bit_length() - 1, 0), 28)


def _index_dtype(max_value: int) -> np.dtype:
    return np.dtype(np.int32) if max_value < 2**31 - 1 else np.dtype(np.int64)


def _save(path: Path, array: np.ndarray) -> None:
    with open(path, "wb") as handle:
        np.save(handle, np.ascontiguousarray(array), allow_pickle=False)


def _load(path: Path) -> np.ndarray:
    if not path.is_file():
        raise GraphFormatError(f"{path} is missing: the store is incomplete; re-import the graph")
    if path.stat().st_size == 0:
        raise GraphFormatError(f"{path}: empty array file")
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except ValueError as error:
        # Zero-length arrays cannot be memory-mapped; numpy raises on them.
        array = np.load(path, allow_pickle=False)
        if array.size:
            raise GraphFormatError(f"{path}: {error}") from error
        return array


class _Blob:
    """A read-only byte blob: memory-mapped, or empty."""

    def __init__(self, path: Path):
        self._file = None
        if not path.is_file():
            raise GraphFormatError(f"{path} is missing: the store is incomplete; re-import the graph")
        size = path.stat().st_size
        if size == 0:
            self.data: bytes | mmap.mmap = b""
        else:
            self._file = open(path, "rb")
            self.data = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)

    def text(self, start: int, end: int) -> str:
        return self.data[start:end].decode(_ENCODING, _ERRORS)


# ---------------------------------------------------------------------------------------------
# Writing


class _Column:
    """Stages one feature column of one node type, then writes it in its final kind."""

    def __init__(self, stage_dir: Path, stem: str, rows_before: int):
        self.stage_dir = stage_dir
        self.stem = stem
        self.categories: list[np.ndarray] = []
        self.rows = 0
        self.str_lengths: list[int] = []
        self.ints: list[int] = []
        self.floats: list[float] = []
        self.bools: list[bool] = []
        self.list_counts: list[int] = []
        self.item_lengths: list[int] = []
        self.other_lengths: list[int] = []
        self.numeric_chunks: list[tuple[int, np.ndarray]] = []  # (category, values) fast path
        self._files: dict[str, Any] = {}
        self.pad(rows_before)

    def _file(self, name: str):
        if name not in self._files:
            self._files[name] = open(self.stage_dir / f"{self.stem}.{name}", "wb")
        return self._files[name]

    def pad(self, rows: int) -> None:
        if rows > self.rows:
            self.categories.append(np.zeros(rows - self.rows, dtype=np.uint8))
            self.rows = rows

    def _flush_scalars(self) -> None:
        # Keep the Python-list staging and the numpy fast path in row order.
        if self.ints:
            self.numeric_chunks.append((_INT, np.asarray(self.ints, dtype=np.int64)))
            self.ints = []
        if self.floats:
            self.numeric_chunks.append((_FLOAT, np.asarray(self.floats, dtype=np.float64)))
            self.floats = []
        if self.bools:
            self.numeric_chunks.append((_BOOL, np.asarray(self.bools, dtype=bool)))
            self.bools = []

    def extend(self, values: Sequence, where: str) -> None:
        count = len(values)
        if isinstance(values, np.ndarray) and values.dtype.kind in "iufb":
            category = {"i": _INT, "u": _INT, "f": _FLOAT, "b": _BOOL}[values.dtype.kind]
            if values.dtype.kind == "u" and values.size and int(values.max()) > _INT64_MAX:
                values = values.astype(object)
            else:
                self._flush_scalars()
                dtype = {_INT: np.int64, _FLOAT: np.float64, _BOOL: bool}[category]
                self.numeric_chunks.append((category, values.astype(dtype)))
                self.categories.append(np.full(count, category, dtype=np.uint8))
                self.rows += count
                return
        categories = np.zeros(count, dtype=np.uint8)
        text_out = None
        for row, value in enumerate(values):
            if value is None:
                continue
            kind = type(value)
            if kind is str:
                data = value.encode(_ENCODING, _ERRORS)
                if text_out is None:
                    text_out = self._file("str")
                text_out.write(data)
                self.str_lengths.append(len(data))
                categories[row] = _STR
            elif kind is bool or isinstance(value, np.bool_):
                self.bools.append(bool(value))
                categories[row] = _BOOL
            elif isinstance(value, (int, np.integer)) and _INT64_MIN <= int(value) <= _INT64_MAX:
                self.ints.append(int(value))
                categories[row] = _INT
            elif isinstance(value, (float, np.floating)):
                self.floats.append(float(value))
                categories[row] = _FLOAT
            elif isinstance(value, (list, tuple)) and all(type(item) is str for item in value):
                out = self._file("items")
                for item in value:
                    data = item.encode(_ENCODING, _ERRORS)
                    out.write(data)
                    self.item_lengths.append(len(data))
                self.list_counts.append(len(value))
                categories[row] = _LIST
            else:
                try:
                    data = json.dumps(value, ensure_ascii=False, default=_json_default).encode(_ENCODING, _ERRORS)
                except (TypeError, ValueError) as error:
                    raise GraphFormatError(f"{where}: unsupported feature value {value!r}: {error}") from None
                self._file("other").write(data)
                self.other_lengths.append(len(data))
                categories[row] = _OTHER
        self._flush_scalars()
        self.categories.append(categories)
        self.rows += count

    def finish(self, out_dir: Path, count: int) -> dict:
        """Write the column into ``out_dir`` and return its manifest entry."""
        self.pad(count)
        self._flush_scalars()
        for handle in self._files.values():
            handle.close()
        categories = np.concatenate(self.categories) if self.categories else np.zeros(0, np.uint8)
        used = set(np.unique(categories).tolist()) - {_ABSENT}
        mask = categories != _ABSENT
        _save(out_dir / f"{self.stem}.mask.npy", mask)
        if used <= {_STR}:
            kind = "str"
            self._write_text(categories, _STR, self.str_lengths, "str", out_dir)
        elif used == {_INT}:
            kind = "int"
            self._write_numeric(categories, np.int64, out_dir)
        elif used == {_FLOAT}:
            # Ints mixed with floats go to JSON below, so str(value) stays what json.load gives.
            kind = "float"
            self._write_numeric(categories, np.float64, out_dir)
        elif used == {_BOOL}:
            kind = "bool"
            self._write_numeric(categories, bool, out_dir)
        elif used == {_LIST}:
            kind = "list"
            counts = np.zeros(count, dtype=np.int64)
            counts[categories == _LIST] = np.asarray(self.list_counts, dtype=np.int64)
            _save(out_dir / f"{self.stem}.list_offsets.npy", _offsets(counts))
            _save(out_dir / f"{self.stem}.item_offsets.npy", _offsets(np.asarray(self.item_lengths, np.int64)))
            self._move_stage("items", out_dir / f"{self.stem}.blob")
        else:
            kind = "json"
            self._write_mixed(categories, out_dir)
        self._remove_stage()
        return {"kind": kind, "stem": self.stem, "present": int(mask.sum())}

    def _stage_path(self, name: str) -> Path:
        return self.stage_dir / f"{self.stem}.{name}"

    def _move_stage(self, name: str, target: Path) -> None:
        source = self._stage_path(name)
        if source.exists():
            os.replace(source, target)
        else:
            target.write_bytes(b"")

    def _remove_stage(self) -> None:
        for name in ("str", "items", "other"):
            path = self._stage_path(name)
            if path.exists():
                path.unlink()

    def _write_text(self, categories, category, lengths, stage, out_dir: Path) -> None:
        all_lengths = np.zeros(len(categories), dtype=np.int64)
        all_lengths[categories == category] = np.asarray(lengths, dtype=np.int64)
        _save(out_dir / f"{self.stem}.offsets.npy", _offsets(all_lengths))
        self._move_stage(stage, out_dir / f"{self.stem}.blob")

    def _numeric_values(self, category: int) -> np.ndarray:
        chunks = [values for kind, values in self.numeric_chunks if kind == category]
        return np.concatenate(chunks) if chunks else np.zeros(0)

    def _write_numeric(self, categories, dtype, out_dir: Path) -> None:
        values = np.zeros(len(categories), dtype=dtype)
        for category in (_INT, _FLOAT, _BOOL):
            rows = categories == category
            if rows.any():
                values[rows] = self._numeric_values(category).astype(dtype)
        _save(out_dir / f"{self.stem}.values.npy", values)

    def _write_mixed(self, categories: np.ndarray, out_dir: Path) -> None:
        """Several value kinds in one column: store every value as JSON text."""
        readers = {
            _STR: _StagedText(self._stage_path("str"), self.str_lengths),
            _OTHER: _StagedText(self._stage_path("other"), self.other_lengths),
        }
        items = _StagedText(self._stage_path("items"), self.item_lengths)
        numbers = {c: iter(self._numeric_values(c).tolist()) for c in (_INT, _FLOAT, _BOOL)}
        counts = iter(self.list_counts)
        lengths = np.zeros(len(categories), dtype=np.int64)
        with open(out_dir / f"{self.stem}.blob", "wb") as out:
            for row, category in enumerate(categories.tolist()):
                if category == _ABSENT:
                    continue
                if category == _STR:
                    value: Any = readers[_STR].next()
                elif category == _OTHER:
                    data = readers[_OTHER].next().encode(_ENCODING, _ERRORS)
                    out.write(data)
                    lengths[row] = len(data)
                    continue
                elif category == _LIST:
                    value = [items.next() for _ in range(next(counts))]
                else:
                    value = next(numbers[category])
                    if category == _BOOL:
                        value = bool(value)
                data = json.dumps(value, ensure_ascii=False).encode(_ENCODING, _ERRORS)
                out.write(data)
                lengths[row] = len(data)
        for reader in (*readers.values(), items):
            reader.close()
        _save(out_dir / f"{self.stem}.offsets.npy", _offsets(lengths))


class _StagedText:
    """Sequential reader over a staged blob of concatenated UTF-8 strings."""

    def __init__(self, path: Path, lengths: list[int]):
        self._handle = open(path, "rb") if path.exists() else None
        self._lengths = iter(lengths)

    def next(self) -> str:
        assert self._handle is not None
        return self._handle.read(next(self._lengths)).decode(_ENCODING, _ERRORS)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()


def _json_default(value: Any) -> Any:
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _offsets(lengths: np.ndarray) -> np.ndarray:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets


@dataclass
class _TypeBuilder:
    name: str
    start: int
    count: int = 0
    columns: dict[str, _Column] = field(default_factory=dict)
    relations: list[str] = field(default_factory=list)
    text_key: str | None = None


class StoreWriter:
    """Builds a store directory. Use as a context manager: the store appears only on success.

    Nodes get global indices in the order they are added, type by type; ids are unique across
    types. Edges use global indices and may be added in several calls per (type, relation).
    """

    def __init__(self, out_dir: str | os.PathLike, overwrite: bool = False, source: dict | None = None):
        self.out_dir = Path(out_dir)
        self.overwrite = overwrite
        self.source = dict(source or {})
        self.warnings: dict[str, Any] = {}
        self._types: dict[str, _TypeBuilder] = {}
        self._current: str | None = None
        self._num_nodes = 0
        self._edges: dict[tuple[str, str], list[tuple[np.ndarray, np.ndarray, np.ndarray | None]]] = {}
        self._tmp: Path | None = None
        self._id_blob = None
        self._id_lengths: list[np.ndarray] = []
        self._id_hashes: list[np.ndarray] = []

    # context management ------------------------------------------------------------------
    def __enter__(self) -> StoreWriter:
        if self.out_dir.exists() and not self.overwrite:
            raise FileExistsError(f"{self.out_dir} exists; pass overwrite=True (--force) to replace it")
        self.out_dir.parent.mkdir(parents=True, exist_ok=True)
        self._tmp = self.out_dir.parent / f".{self.out_dir.name}.tmp-{uuid.uuid4().hex[:8]}"
        for sub in ("nodes", "features", "edges", "stage"):
            (self._tmp / sub).mkdir(parents=True)
        self._id_blob = open(self._tmp / "nodes" / "ids.blob", "wb")
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                self._finish()
        finally:
            if self._id_blob is not None and not self._id_blob.closed:
                self._id_blob.close()
            if self._tmp is not None and self._tmp.exists():
                shutil.rmtree(self._tmp, ignore_errors=True)

    # building ----------------------------------------------------------------------------------
    @property
    def num_nodes(self) -> int:
        return self._num_nodes

    def add_nodes(self, node_type: str, ids: Sequence[str], features: dict[str, Sequence] | None = None) -> None:
        """Append nodes of ``node_type``; ``features`` maps a name to one value per node (None = absent)."""
        if self._tmp is None:
            raise RuntimeError("use StoreWriter as a context manager")
        if not isinstance(node_type, str) or not node_type:
            raise ValueError(f"node type must be a non-empty string, got {node_type!r}")
        builder = self._types.get(node_type)
        if builder is None:
            builder = self._types[node_type] = _TypeBuilder(node_type, start=self._num_nodes)
        elif self._current != node_type:
            raise ValueError(f"nodes of type {node_type!r} must be added contiguously (type by type)")
        self._current = node_type
        count = len(ids)
        features = features or {}
        for name, values in features.items():
            if len(values) != count:
                raise ValueError(f"feature {name!r} of {node_type!r}: {len(values)} values for {count} ids")
        encoded = []
        for node_id in ids:
            if type(node_id) is not str or not node_id:
                raise GraphFormatError(f"node ids must be non-empty strings, got {node_id!r} in {node_type!r}")
            encoded.append(node_id.encode(_ENCODING, _ERRORS))
        lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=count)
        batch = b"".join(encoded)
        self._id_blob.write(batch)
        self._id_lengths.append(lengths)
        self._id_hashes.append(hash_ids(batch, _offsets(lengths)))
        type_index = list(self._types).index(node_type)
        for name, values in features.items():
            if not isinstance(name, str) or not name:
                raise ValueError(f"feature names must be non-empty strings, got {name!r}")
            column = builder.columns.get(name)
            if column is None:
                stem = f"t{type_index}/f{len(builder.columns)}"
                (self._tmp / "stage" / f"t{type_index}").mkdir(exist_ok=True)
                column = builder.columns[name] = _Column(self._tmp / "stage", stem, builder.count)
            column.pad(builder.count)
            column.extend(values, where=f"{node_type}.{name}")
        builder.count += count
        self._num_nodes += count

    def add_edges(
        self,
        src_type: str,
        relation: str,
        src: np.ndarray,
        dst: np.ndarray,
        weight: np.ndarray | None = None,
    ) -> None:
        """Append edges ``src[i] -relation-> dst[i]`` (global indices); order per source is kept."""
        if not isinstance(relation, str) or not relation:
            raise ValueError(f"relation must be a non-empty string, got {relation!r}")
        src = np.asarray(src)
        dst = np.asarray(dst)
        if src.shape != dst.shape or src.ndim != 1:
            raise ValueError(f"src and dst must be 1-d arrays of one length, got {src.shape} and {dst.shape}")
        if src.size and (src.dtype.kind not in "iu" or dst.dtype.kind not in "iu"):
            raise ValueError("src and dst must be integer arrays of global node indices")
        if weight is not None:
            weight = np.asarray(weight, dtype=np.float32)
            if weight.shape != src.shape:
                raise ValueError("weight must have one value per edge")
        self._edges.setdefault((src_type, relation), []).append((src.astype(np.int64), dst.astype(np.int64), weight))

    def set_text_key(self, node_type: str, feature: str) -> None:
        """Choose the feature embedded for retrieval (default: Graph-CoT's NODE_TEXT_KEYS)."""
        if node_type not in self._types:
            raise ValueError(f"unknown node type {node_type!r}")
        self._types[node_type].text_key = feature

    # finishing ---------------------------------------------------------------------------------
    def _finish(self) -> None:
        tmp = self._tmp
        assert tmp is not None
        self._id_blob.close()
        num_nodes = self._num_nodes
        lengths = np.concatenate(self._id_lengths) if self._id_lengths else np.zeros(0, np.int64)
        _save(tmp / "nodes" / "ids_offsets.npy", _offsets(lengths))
        hashes = np.concatenate(self._id_hashes) if self._id_hashes else np.zeros(0, np.uint64)
        order = np.argsort(hashes, kind="stable")
        sorted_hashes = hashes[order]
        self._check_unique(sorted_hashes, order, tmp)
        _save(tmp / "nodes" / "id_hash.npy", sorted_hashes)
        _save(tmp / "nodes" / "id_order.npy", order.astype(_index_dtype(num_nodes)))
        bits = _directory_bits(num_nodes)
        buckets = np.arange(2**bits + 1, dtype=np.uint64)
        if bits:
            bucket_starts = np.searchsorted(sorted_hashes, buckets[:-1] << np.uint64(64 - bits))
        else:
            bucket_starts = np.zeros(1, dtype=np.int64)
        directory = np.append(bucket_starts, num_nodes).astype(_index_dtype(num_nodes + 1))
        _save(tmp / "nodes" / "id_directory.npy", directory)
        self._directory_bits = bits
        del hashes, order, sorted_hashes

        for src_type, _ in self._edges:
            if src_type not in self._types:
                raise GraphFormatError(f"edges from unknown node type {src_type!r}")
        degree = np.zeros(num_nodes, dtype=np.int64)
        relations_meta: dict[str, list[dict]] = {name: [] for name in self._types}
        num_edges = 0
        for relation_index, ((src_type, relation), chunks) in enumerate(self._edges.items()):
            builder = self._types[src_type]
            builder.relations.append(relation)
            meta = self._write_relation(tmp, relation_index, builder, relation, chunks, degree)
            relations_meta[src_type].append(meta)
            num_edges += meta["num_edges"]
        self._edges.clear()
        _save(tmp / "nodes" / "degree.npy", degree.astype(_index_dtype(int(degree.max(initial=0)))))

        types_meta = []
        for type_index, builder in enumerate(self._types.values()):
            (tmp / "features" / f"t{type_index}").mkdir(exist_ok=True)
            features = []
            for name, column in builder.columns.items():
                entry = column.finish(tmp / "features", builder.count)
                features.append({"name": name, **entry})
            types_meta.append(
                {
                    "name": builder.name,
                    "start": builder.start,
                    "count": builder.count,
                    "text_key": self._text_key(builder, features),
                    "features": features,
                    "relations": relations_meta[builder.name],
                }
            )
        shutil.rmtree(tmp / "stage")
        manifest = {
            "format": STORE_FORMAT,
            "version": STORE_FORMAT_VERSION,
            "store_id": uuid.uuid4().hex,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "num_nodes": num_nodes,
            "num_edges": num_edges,
            "id_hash": ID_HASH_NAME,
            "id_directory_bits": self._directory_bits,
            "node_types": types_meta,
            "warnings": self.warnings,
            "source": self.source,
        }
        with open(tmp / "manifest.json", "w", encoding="utf-8") as handle:
            json.dump(manifest, handle, indent=1, ensure_ascii=False)
        if self.out_dir.exists():
            trash = self.out_dir.parent / f".{self.out_dir.name}.old-{uuid.uuid4().hex[:8]}"
            os.replace(self.out_dir, trash)
            os.replace(tmp, self.out_dir)
            shutil.rmtree(trash, ignore_errors=True)
        else:
            os.replace(tmp, self.out_dir)

    def _check_unique(self, sorted_hashes: np.ndarray, order: np.ndarray, tmp: Path) -> None:
        offsets = np.load(tmp / "nodes" / "ids_offsets.npy")
        with open(tmp / "nodes" / "ids.blob", "rb") as handle:
            blob = handle.read() if offsets[-1] else b""
        pair = find_duplicate(sorted_hashes, order, lambda index: blob[offsets[index] : offsets[index + 1]])
        if pair is None:
            return
        first, second = pair
        starts = [builder.start for builder in self._types.values()]
        names = list(self._types)
        type_a = names[bisect.bisect_right(starts, first) - 1]
        type_b = names[bisect.bisect_right(starts, second) - 1]
        where = f"types {type_a!r} and {type_b!r}" if type_a != type_b else f"type {type_a!r} twice"
        node_id = blob[offsets[first] : offsets[first + 1]].decode(_ENCODING, _ERRORS)
        raise GraphFormatError(f"duplicate node id {node_id!r} in {where}")

    def _write_relation(self, tmp, relation_index, builder, relation, chunks, degree) -> dict:
        src = np.concatenate([chunk[0] for chunk in chunks])
        dst = np.concatenate([chunk[1] for chunk in chunks])
        weighted = any(chunk[2] is not None for chunk in chunks)
        weight = None
        if weighted:
            weight = np.concatenate(
                [chunk[2] if chunk[2] is not None else np.ones(len(chunk[0]), np.float32) for chunk in chunks]
            )
        local = src - builder.start
        if local.size and (local.min() < 0 or local.max() >= builder.count):
            bad = int(src[(local < 0) | (local >= builder.count)][0])
            raise GraphFormatError(
                f"relation {builder.name}.{relation}: source index {bad} is not a {builder.name!r} node"
            )
        if dst.size and (dst.min() < 0 or dst.max() >= self._num_nodes):
            bad = int(dst[(dst < 0) | (dst >= self._num_nodes)][0])
            raise GraphFormatError(f"relation {builder.name}.{relation}: destination index {bad} out of range")
        if local.size > 1 and np.any(local[1:] < local[:-1]):
            order = np.argsort(local, kind="stable")
            local, dst = local[order], dst[order]
            if weight is not None:
                weight = weight[order]
        counts = np.bincount(local, minlength=builder.count) if local.size else np.zeros(builder.count, np.int64)
        indptr = _offsets(counts)
        degree[builder.start : builder.start + builder.count] += counts
        stem = f"r{relation_index}"
        _save(tmp / "edges" / f"{stem}.indptr.npy", indptr.astype(_index_dtype(len(dst))))
        _save(tmp / "edges" / f"{stem}.dst.npy", dst.astype(_index_dtype(self._num_nodes)))
        if weight is not None:
            _save(tmp / "edges" / f"{stem}.weight.npy", weight)
        return {"name": relation, "stem": stem, "num_edges": int(len(dst)), "weighted": weighted}

    @staticmethod
    def _text_key(builder: _TypeBuilder, features: list[dict]) -> str | None:
        names = [entry["name"] for entry in features]
        if builder.text_key is not None:
            return builder.text_key
        preferred = NODE_TEXT_KEYS.get(builder.name)
        if preferred in names:
            return preferred
        for name in _FALLBACK_TEXT_KEYS:
            if name in names:
                return name
        for entry in features:
            if entry["kind"] == "str":
                return entry["name"]
        return None


# ---------------------------------------------------------------------------------------------
# Reading


class _FeatureColumn:
    def __init__(self, directory: Path, entry: dict):
        self.name = entry["name"]
        self.kind = entry["kind"]
        base = directory / "features"
        stem = entry["stem"]
        # memoryviews over the mapped arrays: scalar reads give Python values without numpy overhead
        self.mask = memoryview(_load(base / f"{stem}.mask.npy"))
        if self.kind in ("str", "json"):
            self.offsets = memoryview(_load(base / f"{stem}.offsets.npy"))
            self.blob = _Blob(base / f"{stem}.blob")
        elif self.kind == "list":
            self.list_offsets = memoryview(_load(base / f"{stem}.list_offsets.npy"))
            self.item_offsets = memoryview(_load(base / f"{stem}.item_offsets.npy"))
            self.blob = _Blob(base / f"{stem}.blob")
        else:
            self.values = memoryview(_load(base / f"{stem}.values.npy"))

    def has(self, local: int) -> bool:
        return self.mask[local]

    def get(self, local: int) -> Any:
        kind = self.kind
        if kind == "str":
            return self.blob.data[self.offsets[local] : self.offsets[local + 1]].decode(_ENCODING, _ERRORS)
        if kind == "int" or kind == "float" or kind == "bool":
            return self.values[local]
        if kind == "list":
            first, last = self.list_offsets[local], self.list_offsets[local + 1]
            bounds = self.item_offsets[first : last + 1].tolist()
            data = self.blob.data
            return [data[bounds[i] : bounds[i + 1]].decode(_ENCODING, _ERRORS) for i in range(last - first)]
        return json.loads(self.blob.text(self.offsets[local], self.offsets[local + 1]))


class _Relation:
    def __init__(self, directory: Path, entry: dict):
        base = directory / "edges"
        self.name = entry["name"]
        self.num_edges = entry["num_edges"]
        self.indptr = _load(base / f"{entry['stem']}.indptr.npy")
        self.dst = _load(base / f"{entry['stem']}.dst.npy")
        self.indptr_view = memoryview(self.indptr)
        self.dst_view = memoryview(self.dst)
        self.weight = _load(base / f"{entry['stem']}.weight.npy") if entry.get("weighted") else None


@dataclass
class _TypeInfo:
    name: str
    start: int
    count: int
    text_key: str | None
    features: dict[str, dict]
    relations: dict[str, dict]


class Graph:
    """A read-only, memory-mapped graph store. Open with ``Graph.open(dir)``."""

    def __init__(self, directory: Path, manifest: dict):
        self.directory = directory
        self.manifest = manifest
        self._types: dict[str, _TypeInfo] = {}
        for entry in manifest["node_types"]:
            self._types[entry["name"]] = _TypeInfo(
                name=entry["name"],
                start=int(entry["start"]),
                count=int(entry["count"]),
                text_key=entry.get("text_key"),
                features={feature["name"]: feature for feature in entry["features"]},
                relations={relation["name"]: relation for relation in entry["relations"]},
            )
        self._type_names = list(self._types)
        self._type_starts = [info.start for info in self._types.values()]
        nodes = directory / "nodes"
        self._id_offsets = _load(nodes / "ids_offsets.npy")
        self._ids = _Blob(nodes / "ids.blob")
        self._hashes = _load(nodes / "id_hash.npy")
        self._order = _load(nodes / "id_order.npy")
        self._offsets_view = memoryview(self._id_offsets)
        self._hashes_view = memoryview(self._hashes)
        self._order_view = memoryview(self._order)
        self._num_nodes = int(manifest["num_nodes"])
        hash_name = manifest.get("id_hash", "blake2b64")
        if hash_name not in _ID_HASHES:
            raise GraphFormatError(f"{directory}: unknown id hash {hash_name!r}; re-import the graph")
        self._hash = _ID_HASHES[hash_name]
        self._directory_bits = manifest.get("id_directory_bits")
        self._directory_view = None
        if self._directory_bits is not None:
            self._directory_view = memoryview(_load(nodes / "id_directory.npy"))
            self._directory_shift = 64 - int(self._directory_bits)
        self._degree_path = nodes / "degree.npy"
        self._total_degree: np.ndarray | None = None
        self._columns: dict[tuple[str, str], _FeatureColumn] = {}
        self._relations: dict[tuple[str, str], _Relation] = {}

    @classmethod
    def open(cls, directory: str | os.PathLike) -> Graph:
        directory = Path(directory)
        manifest_path = directory / "manifest.json"
        if not manifest_path.is_file():
            raise GraphFormatError(f"{directory} is not a graph store (no manifest.json); create one with `glmcot graph import`")
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as error:
            raise GraphFormatError(f"{manifest_path}: malformed manifest: {error}") from None
        if manifest.get("format") != STORE_FORMAT:
            raise GraphFormatError(f"{manifest_path}: format is {manifest.get('format')!r}, expected {STORE_FORMAT!r}")
        version = str(manifest.get("version", ""))
        if version.split(".")[0] != STORE_FORMAT_VERSION.split(".")[0]:
            raise GraphFormatError(
                f"{directory}: store format version {version} is not supported by this glmcot "
                f"(reads {STORE_FORMAT_VERSION.split('.')[0]}.x); re-import the graph with `glmcot graph import`"
            )
        return cls(directory, manifest)

    # schema --------------------------------------------------------------------------------------
    @property
    def store_id(self) -> str:
        return self.manifest["store_id"]

    @property
    def node_types(self) -> list[str]:
        return list(self._type_names)

    @property
    def num_nodes(self) -> int:
        return int(self.manifest["num_nodes"])

    @property
    def num_edges(self) -> int:
        return int(self.manifest["num_edges"])

    @property
    def warnings(self) -> dict:
        return dict(self.manifest.get("warnings", {}))

    def _type(self, node_type: str) -> _TypeInfo:
        try:
            return self._types[node_type]
        except KeyError:
            raise LookupError(f"no node type {node_type!r}; node types: {', '.join(self._type_names)}") from None

    def feature_names(self, node_type: str) -> list[str]:
        return list(self._type(node_type).features)

    def relation_names(self, node_type: str) -> list[str]:
        return list(self._type(node_type).relations)

    def text_key(self, node_type: str) -> str | None:
        return self._type(node_type).text_key

    def type_range(self, node_type: str) -> tuple[int, int]:
        """Global index range [start, stop) of a node type."""
        info = self._type(node_type)
        return info.start, info.start + info.count

    def count(self, node_type: str) -> int:
        return self._type(node_type).count

    def feature_kind(self, node_type: str, feature: str) -> str:
        return self._type(node_type).features[feature]["kind"]

    # ids -----------------------------------------------------------------------------------------
    def _find(self, node_id: str) -> int:
        if type(node_id) is not str:
            return -1
        data = node_id.encode(_ENCODING, _ERRORS)
        key = self._hash(data)
        directory = self._directory_view
        if directory is not None:
            bucket = key >> self._directory_shift
            position, size = directory[bucket], directory[bucket + 1]
            hashes = self._hashes_view
            while position < size and hashes[position] < key:
                position += 1
        else:
            position = int(self._hashes.searchsorted(np.uint64(key)))
            size = self._num_nodes
        hashes, order, offsets = self._hashes_view, self._order_view, self._offsets_view
        blob = self._ids.data
        while position < size and hashes[position] == key:
            index = order[position]
            if blob[offsets[index] : offsets[index + 1]] == data:
                return index
            position += 1
        return -1

    def has_node(self, node_id: str) -> bool:
        return self._find(node_id) >= 0

    def index(self, node_id: str) -> int:
        index = self._find(node_id)
        if index < 0:
            raise NodeNotFound(f"no such node: {node_id!r}")
        return index

    def node_id(self, index: int) -> str:
        if not 0 <= index < self._num_nodes:
            raise IndexError(f"node index {index} out of range [0, {self._num_nodes})")
        offsets = self._offsets_view
        return self._ids.data[offsets[index] : offsets[index + 1]].decode(_ENCODING, _ERRORS)

    def node_ids(self, indices: np.ndarray | Sequence[int]) -> list[str]:
        if isinstance(indices, np.ndarray):
            if len(indices) > 64:
                indices = np.asarray(indices, dtype=np.int64)
                starts = self._id_offsets[indices].tolist()
                ends = self._id_offsets[indices + 1].tolist()
                data = self._ids.data
                return [data[s:e].decode(_ENCODING, _ERRORS) for s, e in zip(starts, ends)]
            indices = indices.tolist()
        offsets = self._offsets_view
        data = self._ids.data
        try:
            if indices and (min(indices) < 0 or max(indices) >= self._num_nodes):
                raise IndexError
            return [data[offsets[index] : offsets[index + 1]].decode(_ENCODING, _ERRORS) for index in indices]
        except IndexError:
            bad = [index for index in indices if not 0 <= index < self._num_nodes]
            raise IndexError(f"node index {bad[0] if bad else '?'} out of range [0, {self._num_nodes})") from None

    def type_of_index(self, index: int) -> str:
        if not 0 <= index < self._num_nodes:
            raise IndexError(f"node index {index} out of range [0, {self._num_nodes})")
        return self._type_names[bisect.bisect_right(self._type_starts, index) - 1]

    def node_type(self, node_id: str) -> str:
        return self.type_of_index(self.index(node_id))

    # features ------------------------------------------------------------------------------------
    def _column(self, node_type: str, feature: str) -> _FeatureColumn:
        key = (node_type, feature)
        column = self._columns.get(key)
        if column is None:
            column = self._columns[key] = _FeatureColumn(self.directory, self._types[node_type].features[feature])
        return column

    def has_feature_at(self, index: int, feature: str) -> bool:
        info = self._types[self.type_of_index(index)]
        return feature in info.features and self._column(info.name, feature).has(index - info.start)

    def feature_at(self, index: int, feature: str) -> Any:
        """Feature value of the node at ``index``; raises FeatureNotFound if absent."""
        info = self._types[self.type_of_index(index)]
        if feature not in info.features:
            raise FeatureNotFound(
                f"{info.name} node {self.node_id(index)!r} has no feature {feature!r}; "
                f"{info.name} features: {', '.join(info.features) or '(none)'}"
            )
        column = self._column(info.name, feature)
        local = index - info.start
        if not column.has(local):
            present = [name for name in info.features if self._column(info.name, name).has(local)]
            raise FeatureNotFound(
                f"{info.name} node {self.node_id(index)!r} has no value for feature {feature!r}; "
                f"features present on this node: {', '.join(present) or '(none)'}"
            )
        return column.get(local)

    def feature(self, node_id: str, name: str) -> Any:
        return self.feature_at(self.index(node_id), name)

    def features_at(self, index: int) -> dict[str, Any]:
        """All present features of a node, in the type's feature order."""
        info = self._types[self.type_of_index(index)]
        local = index - info.start
        result = {}
        for name in info.features:
            column = self._column(info.name, name)
            if column.has(local):
                result[name] = column.get(local)
        return result

    def text_at(self, index: int) -> str:
        """The node's main text (its text key feature), or its id where it has none."""
        info = self._types[self.type_of_index(index)]
        key = info.text_key
        if key is not None and key in info.features:
            column = self._column(info.name, key)
            local = index - info.start
            if column.has(local):
                value = column.get(local)
                return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        return self.node_id(index)

    # topology ------------------------------------------------------------------------------------
    def _relation(self, node_type: str, relation: str) -> _Relation:
        key = (node_type, relation)
        loaded = self._relations.get(key)
        if loaded is None:
            loaded = self._relations[key] = _Relation(self.directory, self._types[node_type].relations[relation])
        return loaded

    def _relation_of(self, index: int, relation: str) -> tuple[_Relation, int]:
        info = self._types[self.type_of_index(index)]
        if relation not in info.relations:
            hint = " (that is a feature; use NodeFeature)" if relation in info.features else ""
            raise RelationNotFound(
                f"{info.name} node {self.node_id(index)!r} has no relation {relation!r}{hint}; "
                f"{info.name} relations: {', '.join(info.relations) or '(none)'}"
            )
        return self._relation(info.name, relation), index - info.start

    def neighbor_indices(self, index: int, relation: str) -> np.ndarray:
        loaded, local = self._relation_of(index, relation)
        indptr = loaded.indptr_view
        return loaded.dst[indptr[local] : indptr[local + 1]]

    def neighbor_index_list(self, index: int, relation: str) -> list[int]:
        """Like ``neighbor_indices`` but a list of Python ints (faster for short lists)."""
        loaded, local = self._relation_of(index, relation)
        indptr = loaded.indptr_view
        return loaded.dst_view[indptr[local] : indptr[local + 1]].tolist()

    def neighbor_weights(self, index: int, relation: str) -> np.ndarray | None:
        loaded, local = self._relation_of(index, relation)
        if loaded.weight is None:
            return None
        indptr = loaded.indptr
        return loaded.weight[int(indptr[local]) : int(indptr[local + 1])]

    def neighbors(self, node_id: str, relation: str) -> list[str]:
        return self.node_ids(self.neighbor_index_list(self.index(node_id), relation))

    def degree_at(self, index: int, relation: str) -> int:
        loaded, local = self._relation_of(index, relation)
        return loaded.indptr_view[local + 1] - loaded.indptr_view[local]

    def degree(self, node_id: str, relation: str) -> int:
        return self.degree_at(self.index(node_id), relation)

    def total_degree(self, indices: np.ndarray) -> np.ndarray:
        """Out-degree over all relations (ranks neighbours where edges carry no weight)."""
        if self._total_degree is None:
            self._total_degree = _load(self._degree_path)
        return self._total_degree[np.asarray(indices, dtype=np.int64)]

    # reporting -----------------------------------------------------------------------------------
    def info(self) -> dict:
        """Counts per type and relation, and bytes on disk."""
        topology = 0
        for path in (self.directory / "edges").glob("*.npy"):
            if not path.name.endswith(".weight.npy"):
                topology += path.stat().st_size
        total = sum(path.stat().st_size for path in self.directory.rglob("*") if path.is_file())
        types = []
        for info in self._types.values():
            types.append(
                {
                    "type": info.name,
                    "nodes": info.count,
                    "text_key": info.text_key,
                    "features": {name: entry["kind"] for name, entry in info.features.items()},
                    "relations": {name: entry["num_edges"] for name, entry in info.relations.items()},
                }
            )
        return {
            "directory": str(self.directory),
            "format": f"{STORE_FORMAT}/{self.manifest['version']}",
            "nodes": self.num_nodes,
            "edges": self.num_edges,
            "types": types,
            "bytes_on_disk": total,
            "topology_bytes": topology,
            "topology_bytes_per_edge": topology / self.num_edges if self.num_edges else 0.0,
            "warnings": self.warnings,
        }


__all__ = [
    "Graph",
    "StoreWriter",
    "GraphFormatError",
    "NODE_TEXT_KEYS",
    "STORE_FORMAT_VERSION",
]
