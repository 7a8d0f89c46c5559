"""Writing a graph store: `StoreWriter` stages nodes, features and edges, then writes the
layout (graph/storage/layout.py) into a temporary directory renamed into place on success."""

from __future__ import annotations

import bisect
import json
import os
import shutil
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from glmcot.graph.storage.domains import default_text_key
from glmcot.graph.errors import GraphFormatError
from glmcot.graph.storage.idhash import ID_HASH_NAME, find_duplicate, hash_ids
from glmcot.graph.storage.layout import (
    ENCODING,
    ENCODING_ERRORS,
    STORE_FORMAT,
    STORE_FORMAT_VERSION,
    directory_bits,
    index_dtype,
    offsets_from_lengths,
    save_array,
)

# Value categories while staging a column.
_ABSENT, _STR, _INT, _FLOAT, _BOOL, _LIST, _OTHER, _NULL = range(8)
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class _Null:
    """The JSON ``null`` of a feature that exists (``None`` in a feature sequence means absent)."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NULL"


NULL = _Null()  # pass it in add_nodes' feature values for a present feature whose value is null

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
            if value is NULL:
                categories[row] = _NULL
                continue
            kind = type(value)
            if kind is str:
                data = value.encode(ENCODING, ENCODING_ERRORS)
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
                    data = item.encode(ENCODING, ENCODING_ERRORS)
                    out.write(data)
                    self.item_lengths.append(len(data))
                self.list_counts.append(len(value))
                categories[row] = _LIST
            else:
                try:
                    data = json.dumps(value, ensure_ascii=False, default=_json_default).encode(ENCODING, ENCODING_ERRORS)
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
        used = set(np.unique(categories).tolist()) - {_ABSENT, _NULL}
        mask = categories != _ABSENT
        save_array(out_dir / f"{self.stem}.mask.npy", mask)
        nulls = categories == _NULL
        null_count = int(nulls.sum())
        if null_count:  # 1.2: present features whose value is JSON null
            save_array(out_dir / f"{self.stem}.null.npy", nulls)
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
            save_array(out_dir / f"{self.stem}.list_offsets.npy", offsets_from_lengths(counts))
            save_array(out_dir / f"{self.stem}.item_offsets.npy", offsets_from_lengths(np.asarray(self.item_lengths, np.int64)))
            self._move_stage("items", out_dir / f"{self.stem}.blob")
        else:
            kind = "json"
            self._write_mixed(categories, out_dir)
        self._remove_stage()
        entry = {"kind": kind, "stem": self.stem, "present": int(mask.sum())}
        if null_count:
            entry["nulls"] = null_count
        return entry

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
        save_array(out_dir / f"{self.stem}.offsets.npy", offsets_from_lengths(all_lengths))
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
        save_array(out_dir / f"{self.stem}.values.npy", values)

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
                if category == _ABSENT or category == _NULL:
                    continue
                if category == _STR:
                    value: Any = readers[_STR].next()
                elif category == _OTHER:
                    data = readers[_OTHER].next().encode(ENCODING, ENCODING_ERRORS)
                    out.write(data)
                    lengths[row] = len(data)
                    continue
                elif category == _LIST:
                    value = [items.next() for _ in range(next(counts))]
                else:
                    value = next(numbers[category])
                    if category == _BOOL:
                        value = bool(value)
                data = json.dumps(value, ensure_ascii=False).encode(ENCODING, ENCODING_ERRORS)
                out.write(data)
                lengths[row] = len(data)
        for reader in (*readers.values(), items):
            reader.close()
        save_array(out_dir / f"{self.stem}.offsets.npy", offsets_from_lengths(lengths))


class _StagedText:
    """Sequential reader over a staged blob of concatenated UTF-8 strings."""

    def __init__(self, path: Path, lengths: list[int]):
        self._handle = open(path, "rb") if path.exists() else None
        self._lengths = iter(lengths)

    def next(self) -> str:
        assert self._handle is not None
        return self._handle.read(next(self._lengths)).decode(ENCODING, ENCODING_ERRORS)

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


@dataclass
class _TypeBuilder:
    name: str
    start: int
    count: int = 0
    columns: dict[str, _Column] = field(default_factory=dict)
    relations: list[str] = field(default_factory=list)
    text_key: str | None = None


def store_manifest(path: str | os.PathLike) -> dict | None:
    """The manifest of the glmcot store at ``path``, or None when it is not one (the only kind of
    folder an import with --force may replace)."""
    manifest = Path(path) / "manifest.json"
    if not Path(path).is_dir() or not manifest.is_file():
        return None
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("format") == STORE_FORMAT else None


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
        self._dangling: dict[tuple[str, str], list[tuple[np.ndarray, np.ndarray, list[str]]]] = {}
        self._absent: dict[tuple[str, str], list[np.ndarray]] = {}
        self._tmp: Path | None = None
        self._id_blob = None
        self._id_lengths: list[np.ndarray] = []
        self._id_hashes: list[np.ndarray] = []

    # context management ------------------------------------------------------------------
    def __enter__(self) -> StoreWriter:
        if self.out_dir.exists() and not self.overwrite:
            raise FileExistsError(f"{self.out_dir} exists; pass overwrite=True (--force) to replace it")
        if self.out_dir.exists() and store_manifest(self.out_dir) is None:
            raise FileExistsError(f"{self.out_dir} exists and is not a glmcot store (no glmcot manifest.json); "
                                  f"--force replaces only a store: choose another output or remove it yourself")
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
            encoded.append(node_id.encode(ENCODING, ENCODING_ERRORS))
        lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=count)
        batch = b"".join(encoded)
        self._id_blob.write(batch)
        self._id_lengths.append(lengths)
        self._id_hashes.append(hash_ids(batch, offsets_from_lengths(lengths)))
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
        features: dict[str, Sequence] | None = None,
    ) -> None:
        """Append edges ``src[i] -relation-> dst[i]`` (global indices); order per source is kept.
        ``features`` maps an edge feature (a relationship property) to one value per edge (None:
        absent)."""
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
        edge_features = {}
        for name, values in (features or {}).items():
            if not isinstance(name, str) or not name:
                raise ValueError(f"edge feature names must be non-empty strings, got {name!r}")
            values = values.tolist() if isinstance(values, np.ndarray) else list(values)
            if len(values) != len(src):
                raise ValueError(f"edge feature {name!r} of {src_type}.{relation}: {len(values)} values for {len(src)} edges")
            if any(value is not None for value in values):
                edge_features[name] = values
        self._edges.setdefault((src_type, relation), []).append(
            (src.astype(np.int64), dst.astype(np.int64), weight, edge_features))

    def add_dangling(
        self,
        src_type: str,
        relation: str,
        src: np.ndarray,
        positions: np.ndarray,
        ids: Sequence[str],
    ) -> None:
        """Keep neighbour ids that name no node (GRBench's lists have them; Graph-CoT lists and
        counts them): ``ids[i]`` sits at ``positions[i]`` of ``src[i]``'s full ``relation`` list
        (edges from ``add_edges`` fill the other positions in their order)."""
        if not isinstance(relation, str) or not relation:
            raise ValueError(f"relation must be a non-empty string, got {relation!r}")
        src = np.asarray(src, dtype=np.int64)
        positions = np.asarray(positions, dtype=np.int64)
        if src.shape != positions.shape or src.ndim != 1 or len(ids) != len(src):
            raise ValueError("src, positions and ids must have one entry per dangling neighbour")
        for node_id in ids:
            if type(node_id) is not str or not node_id:
                raise GraphFormatError(f"dangling neighbour ids must be non-empty strings, got {node_id!r}")
        self._edges.setdefault((src_type, relation), [])
        self._dangling.setdefault((src_type, relation), []).append((src, positions, list(ids)))

    def add_absent(self, src_type: str, relation: str, src: np.ndarray) -> None:
        """Mark nodes (global indices) whose source file has no ``relation`` key at all, where other
        nodes of the type have it: Graph-CoT's lookup raises there instead of answering []."""
        if not isinstance(relation, str) or not relation:
            raise ValueError(f"relation must be a non-empty string, got {relation!r}")
        self._edges.setdefault((src_type, relation), [])
        self._absent.setdefault((src_type, relation), []).append(np.asarray(src, dtype=np.int64))

    def feature_names(self, node_type: str) -> list[str]:
        """The features of ``node_type`` added so far, in order."""
        if node_type not in self._types:
            raise ValueError(f"unknown node type {node_type!r}")
        return list(self._types[node_type].columns)

    def text_features(self, node_type: str) -> list[str]:
        """The features of ``node_type`` added so far that hold text on some node, in order (an
        importer chooses a text key among them)."""
        if node_type not in self._types:
            raise ValueError(f"unknown node type {node_type!r}")
        return [name for name, column in self._types[node_type].columns.items() if column.str_lengths]

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
        save_array(tmp / "nodes" / "ids_offsets.npy", offsets_from_lengths(lengths))
        hashes = np.concatenate(self._id_hashes) if self._id_hashes else np.zeros(0, np.uint64)
        order = np.argsort(hashes, kind="stable")
        sorted_hashes = hashes[order]
        self._check_unique(sorted_hashes, order, tmp)
        save_array(tmp / "nodes" / "id_hash.npy", sorted_hashes)
        save_array(tmp / "nodes" / "id_order.npy", order.astype(index_dtype(num_nodes)))
        bits = directory_bits(num_nodes)
        buckets = np.arange(2**bits + 1, dtype=np.uint64)
        if bits:
            bucket_starts = np.searchsorted(sorted_hashes, buckets[:-1] << np.uint64(64 - bits))
        else:
            bucket_starts = np.zeros(1, dtype=np.int64)
        directory = np.append(bucket_starts, num_nodes).astype(index_dtype(num_nodes + 1))
        save_array(tmp / "nodes" / "id_directory.npy", directory)
        self._directory_bits = bits
        del hashes, order, sorted_hashes

        for src_type, _ in self._edges:
            if src_type not in self._types:
                raise GraphFormatError(f"edges from unknown node type {src_type!r}")
        degree = np.zeros(num_nodes, dtype=np.int64)
        relations_meta: dict[str, list[dict]] = {name: [] for name in self._types}
        num_edges = 0
        num_dangling = 0
        for relation_index, ((src_type, relation), chunks) in enumerate(self._edges.items()):
            builder = self._types[src_type]
            builder.relations.append(relation)
            meta = self._write_relation(tmp, relation_index, builder, relation, chunks, degree)
            dangling = self._dangling.get((src_type, relation))
            if dangling:
                meta["num_dangling"] = self._write_dangling(tmp, meta, builder, relation, dangling)
                num_dangling += meta["num_dangling"]
            absent = self._absent.get((src_type, relation))
            if absent:
                local = np.unique(np.concatenate(absent)) - builder.start
                if local.size and (local.min() < 0 or local.max() >= builder.count):
                    raise GraphFormatError(f"relation {builder.name}.{relation}: an absent-key node is not a {builder.name!r} node")
                save_array(tmp / "edges" / f"{meta['stem']}.absent.npy", local.astype(index_dtype(builder.count)))
                meta["num_absent"] = int(local.size)
            relations_meta[src_type].append(meta)
            num_edges += meta["num_edges"]
        self._edges.clear()
        self._dangling.clear()
        self._absent.clear()
        save_array(tmp / "nodes" / "degree.npy", degree.astype(index_dtype(int(degree.max(initial=0)))))

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
                    "text_key": builder.text_key or default_text_key(builder.name, features),
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
            "num_dangling": num_dangling,
            "id_hash": ID_HASH_NAME,
            "id_directory_bits": self._directory_bits,
            "node_types": types_meta,
            "warnings": self.warnings,
            "source": self.source,
        }
        text = json.dumps(manifest, indent=1, ensure_ascii=False)
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:  # a name with a lone surrogate (json.load keeps them): as \u escapes
            data = json.dumps(manifest, indent=1, ensure_ascii=True).encode("ascii")
        with open(tmp / "manifest.json", "wb") as handle:
            handle.write(data)
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
        node_id = blob[offsets[first] : offsets[first + 1]].decode(ENCODING, ENCODING_ERRORS)
        raise GraphFormatError(f"duplicate node id {node_id!r} in {where}")

    def _write_dangling(self, tmp: Path, meta: dict, builder: _TypeBuilder, relation: str, chunks) -> int:
        """Store dangling ids of one relation, sorted by (source, position); returns their count."""
        src = np.concatenate([chunk[0] for chunk in chunks]) - builder.start
        positions = np.concatenate([chunk[1] for chunk in chunks])
        ids = [node_id for chunk in chunks for node_id in chunk[2]]
        where = f"relation {builder.name}.{relation}"
        if src.size and (src.min() < 0 or src.max() >= builder.count):
            raise GraphFormatError(f"{where}: a dangling neighbour's source is not a {builder.name!r} node")
        order = np.lexsort((positions, src))
        src, positions = src[order], positions[order]
        ids = [ids[i] for i in order.tolist()]
        real = np.diff(np.load(tmp / "edges" / f"{meta['stem']}.indptr.npy"))
        dangling_counts = np.bincount(src, minlength=builder.count)
        if positions.size and (
            positions.min() < 0
            or np.any(positions >= real[src] + dangling_counts[src])
            or np.any((src[1:] == src[:-1]) & (positions[1:] == positions[:-1]))
        ):
            raise GraphFormatError(f"{where}: dangling neighbour positions must be distinct places in each list")
        encoded = [node_id.encode(ENCODING, ENCODING_ERRORS) for node_id in ids]
        stem = meta["stem"]
        save_array(tmp / "edges" / f"{stem}.dangling_src.npy", src.astype(index_dtype(builder.count)))
        save_array(tmp / "edges" / f"{stem}.dangling_pos.npy", positions.astype(np.int64))
        save_array(tmp / "edges" / f"{stem}.dangling_offsets.npy",
                   offsets_from_lengths(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))))
        (tmp / "edges" / f"{stem}.dangling.blob").write_bytes(b"".join(encoded))
        return len(ids)

    def _write_relation(self, tmp, relation_index, builder, relation, chunks, degree) -> dict:
        if not chunks:  # a relation whose every neighbour is dangling
            chunks = [(np.zeros(0, np.int64), np.zeros(0, np.int64), None, {})]
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
        order = None
        if local.size > 1 and np.any(local[1:] < local[:-1]):
            order = np.argsort(local, kind="stable")
            local, dst = local[order], dst[order]
            if weight is not None:
                weight = weight[order]
        counts = np.bincount(local, minlength=builder.count) if local.size else np.zeros(builder.count, np.int64)
        indptr = offsets_from_lengths(counts)
        degree[builder.start : builder.start + builder.count] += counts
        stem = f"r{relation_index}"
        save_array(tmp / "edges" / f"{stem}.indptr.npy", indptr.astype(index_dtype(len(dst))))
        save_array(tmp / "edges" / f"{stem}.dst.npy", dst.astype(index_dtype(self._num_nodes)))
        if weight is not None:
            save_array(tmp / "edges" / f"{stem}.weight.npy", weight)
        meta = {"name": relation, "stem": stem, "num_edges": int(len(dst)), "weighted": weighted}
        names = list(dict.fromkeys(name for chunk in chunks for name in chunk[3]))
        if names:  # edge features: one column per feature, a row per edge in CSR order
            meta["features"] = []
            for number, name in enumerate(names):
                values = [value for chunk in chunks for value in chunk[3].get(name, [None] * len(chunk[0]))]
                if order is not None:
                    values = [values[position] for position in order.tolist()]
                column = _Column(tmp / "stage", f"e{relation_index}f{number}", 0)
                column.extend(values, where=f"{builder.name}.{relation} edge feature {name}")
                meta["features"].append({"name": name, **column.finish(tmp / "features", len(dst))})
        return meta
