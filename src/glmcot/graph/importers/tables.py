"""Import node and edge tables (CSV, CSV.gz, Parquet) into a store, streaming with pyarrow.

A table is a node table if it has an id column (``:ID``, ``name:ID(Space)`` or ``id``) and an
edge table if it has ``:START_ID``/``:END_ID`` (or ``source``/``target``) columns. Headers follow
Neo4j's bulk-import conventions (docs/graph-formats.md): ``:LABEL`` (the first label is the node
type), ``:TYPE`` (the relation), typed columns ``year:int``, ``score:float``, ``ok:boolean``,
arrays ``tags:string[]`` (split on ``;``), ``:IGNORE``; an edge column ``weight`` ranks vertex
chunk neighbours. Without a label or type column, the type or relation is the file's name, or
its folder's name when the file lies in a subfolder (a folder of part files per type).

Two passes over the node tables (ids and labels first, so edge endpoints and global indices are
known; then features type by type), one over the edge tables. Memory holds the ids and the
edges (as the writer does), never a whole table. Errors name the file, row and column; rows
count the header as row 1, as a spreadsheet shows them.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from glmcot.graph.importers.apoc import is_apoc_header, split_apoc
from glmcot.graph.errors import GraphFormatError
from glmcot.graph.importers.idindex import IdIndex, encode_ids
from glmcot.graph.importers.loading import DEFAULT_REVERSE_SUFFIX, Dangling, ImportSummary, ProgressCallback, TypeRanges, add_grouped_edges
from glmcot.graph.importers.text_keys import COMPOSITE_FEATURE, TextKeyChoice, choose_text_key, composite_parts, join_parts
from glmcot.graph.storage.writer import StoreWriter

TABLE_SUFFIXES = (".csv", ".csv.gz", ".tsv", ".tsv.gz", ".parquet", ".pq")
ARRAY_DELIMITER = ";"
CSV_BLOCK_BYTES = 16 << 20  # one CSV row (a long abstract) must fit in a block
_KINDS = {
    "int": "int", "long": "int", "short": "int", "byte": "int",
    "float": "float", "double": "float",
    "boolean": "bool", "bool": "bool",
    "string": "str", "char": "str", "date": "str", "datetime": "str", "localdatetime": "str",
    "time": "str", "localtime": "str", "duration": "str", "point": "str",
}
_ROLES = {"id": "id", "label": "label", "start_id": "start", "end_id": "end", "type": "type", "ignore": "ignore"}
_ARROW_KIND = {"int": pa.int64(), "float": pa.float64(), "bool": pa.bool_(), "str": pa.string()}


@dataclass(frozen=True)
class ColumnSpec:
    """One column of a table header, parsed."""

    header: str  # as written in the file
    name: str  # feature name ('' for a role column without a name)
    role: str  # id, label, start, end, type, weight, feature, ignore
    kind: str | None = None  # str, int, float, bool; None: as the file types it (CSV: str)
    array: bool = False
    space: str = ""  # an id column's ID space (``:ID(Product)``); '' is the global space


def spaced_id(space: str, value: str) -> str:
    """The stored id of ``value`` in an ID space: ``Space:value`` (the value itself in the global
    space), so ids unique per space stay unique in the store, readable and the same every import."""
    return f"{space}:{value}" if space else value


def parse_header(header: str) -> ColumnSpec:
    """Parse one Neo4j-style header (``name:kind``, ``:ID(Space)``, ``tags:string[]``); Neo4j 5's
    options in braces (``id:ID(Genre){id-type:string}``) are read past."""
    text = header
    if text.endswith("}") and "{" in text:
        text = text[: text.rindex("{")]
    name, _, suffix = text.rpartition(":")
    if not _:
        name, suffix = text, ""
    tag, opened, rest = suffix.partition("(")
    tag = tag.strip()
    space = rest.strip().removesuffix(")").strip() if opened else ""
    array = tag.endswith("[]")
    tag = tag.removesuffix("[]").lower()
    if _ and tag in _ROLES and not array:
        role = _ROLES[tag]
        return ColumnSpec(header, name, role, "str", space=space if role in ("id", "start", "end") else "")
    if _ and tag in _KINDS:
        return ColumnSpec(header, name, "feature", _KINDS[tag], array)
    return ColumnSpec(header, header, "feature", None, False)


@dataclass
class TableLayout:
    """A table file, what it holds, and its columns by role."""

    path: Path
    default_name: str  # the type (node table) or relation (edge table) when no column says
    kind: str  # nodes or edges
    fmt: str  # csv or parquet
    columns: list[ColumnSpec]
    id: ColumnSpec | None = None
    label: ColumnSpec | None = None
    start: ColumnSpec | None = None
    end: ColumnSpec | None = None
    relation: ColumnSpec | None = None
    weight: ColumnSpec | None = None
    features: list[ColumnSpec] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    column_names: list[str] | None = None  # unique names to read a CSV by (repeated ':IGNORE' headers)


def _format_of(path: Path) -> str:
    name = path.name.lower()
    if name.endswith((".parquet", ".pq")):
        return "parquet"
    if name.endswith((".csv", ".csv.gz", ".tsv", ".tsv.gz")):
        return "csv"
    raise GraphFormatError(f"{path}: not a table file (expected one of {', '.join(TABLE_SUFFIXES)})")


def _stem(path: Path) -> str:
    name = path.name
    for suffix in sorted(TABLE_SUFFIXES, key=len, reverse=True):
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return path.stem


def find_tables(source: Path) -> list[tuple[Path, str]]:
    """Table files under ``source`` (a file or a folder) with each one's default type name."""
    if source.is_file():
        return [(source, _stem(source))]
    if not source.is_dir():
        raise FileNotFoundError(f"no such file or folder: {source}")
    found = []
    for path in sorted(source.rglob("*")):
        if path.is_file() and path.name.lower().endswith(TABLE_SUFFIXES) and not path.name.startswith("."):
            parent = path.parent
            found.append((path, parent.name if parent != source else _stem(path)))
    if not found:
        raise GraphFormatError(f"{source}: no table files ({', '.join(TABLE_SUFFIXES)})")
    return found


def _csv_options(path: Path, names: list[str] | None = None):
    delimiter = "\t" if ".tsv" in path.name.lower() else ","
    read = pa_csv.ReadOptions(use_threads=False, block_size=CSV_BLOCK_BYTES)
    convert = None
    if names is not None:
        # Every column as text: conversion is ours, so a bad value is reported by row and column.
        convert = pa_csv.ConvertOptions(column_types={name: pa.string() for name in names}, strings_can_be_null=False)
    return read, pa_csv.ParseOptions(delimiter=delimiter), convert


def _arrow_error(path: Path, error: Exception) -> GraphFormatError:
    message = " ".join(str(error).split())
    if "straddling" in message or "block" in message.lower() and "size" in message.lower():
        message += f" (a row is longer than {CSV_BLOCK_BYTES >> 20} MiB)"
    return GraphFormatError(f"{path}: {message}")


def _column_names(path: Path, fmt: str) -> list[str]:
    handler = _RowError()
    try:
        if fmt == "parquet":
            return list(pq.ParquetFile(path).schema_arrow.names)
        read, parse, _ = _csv_options(path)
        parse = pa_csv.ParseOptions(delimiter=parse.delimiter, invalid_row_handler=handler, newlines_in_values=True)
        with pa_csv.open_csv(pa.input_stream(path, compression="detect"), read_options=read, parse_options=parse) as reader:
            return list(reader.schema.names)
    except (pa.ArrowException, OSError) as error:
        if handler.first is not None:
            raise GraphFormatError(f"{path}: {handler.first}") from None
        raise _arrow_error(path, error) from None


class _RowTooLong(Exception):
    pass


def check_csv_rows(path: Path, names: list[str], limit: int = CSV_BLOCK_BYTES) -> None:
    """Raise, naming the row and column, where a quoted value is never closed (it would swallow
    every row after it into one field) or a row is longer than ``limit`` bytes. pyarrow takes
    both silently, so every CSV is read once more here, by Python's C csv reader."""
    import csv
    import gzip

    delimiter = "\t" if ".tsv" in path.name.lower() else ","
    csv.field_size_limit(max(csv.field_size_limit(), limit + 1))  # the row bound below is ours
    state = {"line": 0, "bytes": 0, "start": 1, "ended": False}
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    with opener(path, "rb") as handle:
        def lines() -> Iterator[str]:
            while True:
                data = handle.readline(limit + 1)
                if not data:
                    state["ended"] = True
                    return
                state["line"] += 1
                state["bytes"] += len(data)
                if state["bytes"] > limit:
                    raise _RowTooLong
                text = data.decode("utf-8", "surrogateescape")
                # The last line gets its line end, so only a value still open at the end of the
                # file completes a row after the input ran out.
                yield text if text.endswith(("\n", "\r")) else text + "\n"

        reader = csv.reader(lines(), delimiter=delimiter)
        row = 0
        try:
            for row, record in enumerate(reader, 1):
                if state["ended"]:
                    column = max(len(record), 1)
                    name = names[column - 1] if column <= len(names) else f"#{column}"
                    raise GraphFormatError(
                        f"{path}: row {row}, column {column} ({name!r}): a quoted value opens on line {state['start']} "
                        f"and is never closed (the file ends inside it)")
                state["bytes"], state["start"] = 0, state["line"] + 1
        except _RowTooLong:
            raise GraphFormatError(
                f"{path}: row {row + 1} (from line {state['start']}) is longer than {limit >> 20} MiB, the limit of "
                f"one row (or a quoted value in it is never closed)") from None
        except csv.Error as error:
            raise GraphFormatError(f"{path}: row {row + 1} (line {state['line']}): {error}") from None


def read_layout(path: Path, default_name: str) -> TableLayout:
    fmt = _format_of(path)
    names = _column_names(path, fmt)
    if fmt == "csv":
        check_csv_rows(path, names)
    specs = [parse_header(name) for name in names]
    renamed = None
    if len(set(names)) != len(names):
        duplicate = next((name for name in names if names.count(name) > 1 and parse_header(name).role != "ignore"), None)
        if duplicate is not None:
            raise GraphFormatError(f"{path}: column {duplicate!r} appears twice in the header")
        # neo4j-admin allows any number of ':IGNORE' columns: each gets a unique name to be read by.
        renamed, seen = [], {}
        for name in names:
            seen[name] = seen.get(name, 0) + 1
            renamed.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
        specs = [dataclasses.replace(spec, header=unique) for unique, spec in zip(renamed, specs)]
    by_role: dict[str, list[ColumnSpec]] = {}
    for spec in specs:
        by_role.setdefault(spec.role, []).append(spec)
    plain = {spec.header.lower(): spec for spec in specs if spec.role == "feature" and spec.kind is None}

    def single(role: str, fallback: str | None = None) -> ColumnSpec | None:
        found = by_role.get(role, [])
        if len(found) > 1:
            raise GraphFormatError(f"{path}: {len(found)} columns have the role {role!r}: {[s.header for s in found]}")
        if found:
            return found[0]
        if fallback is not None and fallback in plain:
            spec = plain[fallback]
            return ColumnSpec(spec.header, "", role, "str")
        return None

    start, end = single("start", "source"), single("end", "target")
    identifier = single("id", None if start or end else "id")
    if start is not None and end is not None:
        kind = "edges"
    elif identifier is not None and start is None and end is None:
        kind = "nodes"
    else:
        raise GraphFormatError(
            f"{path}: cannot tell nodes from edges: a node table needs an ':ID' (or 'id') column, an edge "
            f"table ':START_ID' and ':END_ID' (or 'source' and 'target'); columns: {names}"
        )
    layout = TableLayout(path, default_name, kind, fmt, specs, id=identifier, start=start, end=end, column_names=renamed)
    used = {spec.header for spec in (identifier, start, end) if spec is not None}
    if kind == "nodes":
        layout.label = single("label")
        used |= {layout.label.header} if layout.label else set()
        if identifier.name:
            # Neo4j keeps the named id column as a property too.
            layout.features.append(ColumnSpec(identifier.header, identifier.name, "feature", "str"))
    else:
        layout.relation = single("type", "relation")
        used |= {layout.relation.header} if layout.relation else set()
        weights = [spec for spec in specs if spec.role == "feature" and spec.name.lower() == "weight"]
        if weights:
            layout.weight = ColumnSpec(weights[0].header, "weight", "weight", weights[0].kind or "float")
            used.add(weights[0].header)
    for spec in specs:
        if spec.header in used:
            continue
        if spec.role == "ignore":
            layout.ignored.append(spec.header)
        elif spec.role == "feature":
            if not spec.name:
                raise GraphFormatError(f"{path}: column {spec.header!r} has a type but no name")
            layout.features.append(spec)
        else:
            raise GraphFormatError(f"{path}: column {spec.header!r} ({spec.role}) does not belong in a {kind} table")
    return layout


class _RowError:
    """Remembers the first malformed CSV row pyarrow reports, to name it in the error."""

    def __init__(self) -> None:
        self.first: str | None = None

    def __call__(self, row) -> str:
        if self.first is None:
            text = row.text if len(row.text) <= 120 else row.text[:117] + "..."
            number = f"row {row.number}" if row.number is not None else "a row"
            self.first = f"{number} has {row.actual_columns} columns, the header {row.expected_columns}: {text!r}"
        return "error"


def iter_batches(layout: TableLayout, columns: list[str] | None, batch_rows: int) -> Iterator[tuple[int, pa.RecordBatch]]:
    """(row number of the batch's first row, batch) over the table, header = row 1."""
    path = layout.path
    row = 2 if layout.fmt == "csv" else 1
    handler = _RowError()
    try:
        if layout.fmt == "parquet":
            batches = pq.ParquetFile(path).iter_batches(batch_size=batch_rows, columns=columns)
            for batch in batches:
                yield row, batch
                row += batch.num_rows
            return
        names = [spec.header for spec in layout.columns]
        read, parse, convert = _csv_options(path, names)
        if layout.column_names is not None:
            read = pa_csv.ReadOptions(use_threads=False, block_size=CSV_BLOCK_BYTES, column_names=layout.column_names,
                                      skip_rows=1)
        parse = pa_csv.ParseOptions(delimiter=parse.delimiter, invalid_row_handler=handler, newlines_in_values=True)
        if columns is not None:
            convert.include_columns = columns
        with pa_csv.open_csv(pa.input_stream(path, compression="detect"), read_options=read, parse_options=parse,
                             convert_options=convert) as reader:
            for batch in reader:
                for start in range(0, batch.num_rows, batch_rows):
                    piece = batch.slice(start, batch_rows)
                    yield row, piece
                    row += piece.num_rows
    except (pa.ArrowException, OSError) as error:
        if handler.first is not None:
            raise GraphFormatError(f"{path}: {handler.first}") from None
        raise _arrow_error(path, error) from None


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _bad_value(layout: TableLayout, spec: ColumnSpec, first_row: int, values: list, kind: str) -> GraphFormatError:
    target = _ARROW_KIND[kind]
    for offset, row_value in enumerate(values):
        for value in row_value if isinstance(row_value, list) else [row_value]:  # an array column: each item
            if value is None:
                continue
            try:
                pc.cast(pa.array([value.lower() if kind == "bool" and isinstance(value, str) else value]), target)
                continue
            except (pa.ArrowException, OverflowError):
                pass
            what = {"int": "a whole number in the 64-bit range", "float": "a number", "bool": "true or false"}[kind]
            return GraphFormatError(
                f"{layout.path}: row {first_row + offset}, column {spec.header!r}: {_show(value)} is not {what}"
            )
    return GraphFormatError(f"{layout.path}: rows from {first_row}, column {spec.header!r}: cannot read as {kind}")


def _blank_to_null(array: pa.Array) -> pa.Array:
    if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
        blank = pc.equal(pc.utf8_length(array), 0)
        if pc.any(blank).as_py():
            return pc.if_else(blank, pa.scalar(None, array.type), array)
    return array


def _cast(array: pa.Array, kind: str, layout: TableLayout, spec: ColumnSpec, first_row: int) -> pa.Array:
    target = _ARROW_KIND[kind]
    if array.type == target:
        return array
    source = array
    if kind == "bool" and pa.types.is_string(array.type):
        array = pc.utf8_lower(array)
    try:
        return pc.cast(array, target)
    except (pa.ArrowException, OverflowError):
        values = source.to_pylist()
        raise _bad_value(layout, spec, first_row, values, kind) from None


def column_values(array: pa.Array, spec: ColumnSpec, layout: TableLayout, first_row: int) -> Any:
    """A column as writer values: a numpy array when numeric and complete, else a list (None = absent)."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    array = _blank_to_null(array)
    if spec.array and (pa.types.is_string(array.type) or pa.types.is_large_string(array.type)):
        array = pc.split_pattern(array, ARRAY_DELIMITER)
        if spec.kind not in (None, "str"):
            try:
                array = pc.cast(array, pa.list_(_ARROW_KIND[spec.kind]))
            except (pa.ArrowException, OverflowError):
                raise _bad_value(layout, spec, first_row, array.to_pylist(), spec.kind) from None
        return array.to_pylist()
    if spec.kind is not None and not pa.types.is_list(array.type):
        array = _cast(array, spec.kind, layout, spec, first_row)
    kind = array.type
    if pa.types.is_floating(kind):
        nan = pc.is_nan(array)
        if pc.any(nan).as_py():  # a NaN is a missing value (pandas writes missing floats so)
            array = pc.if_else(nan, pa.scalar(None, kind), array)
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind):
        if array.null_count == 0:
            if pa.types.is_unsigned_integer(kind) and len(array) and pc.max(array).as_py() >= 2**63:
                return array.to_pylist()
            return array.to_numpy(zero_copy_only=False)
        return array.to_pylist()
    if pa.types.is_decimal(kind):
        return pc.cast(array, pa.float64()).to_pylist()
    if pa.types.is_temporal(kind):
        return pc.cast(array, pa.string()).to_pylist()
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_fixed_size_binary(kind):
        raise GraphFormatError(f"{layout.path}: column {spec.header!r} holds binary values ({kind}); store text or numbers")
    if pa.types.is_dictionary(kind):
        return array.cast(kind.value_type).to_pylist() if hasattr(array, "cast") else array.to_pylist()
    return array.to_pylist()


def _id_strings(array: pa.Array, spec: ColumnSpec, layout: TableLayout, first_row: int) -> list[str]:
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if not (pa.types.is_string(array.type) or pa.types.is_large_string(array.type)):
        if not (pa.types.is_integer(array.type) or pa.types.is_string(array.type)):
            raise GraphFormatError(f"{layout.path}: column {spec.header!r}: ids must be text or whole numbers, not {array.type}")
        array = pc.cast(array, pa.string())
    ids = array.to_pylist()
    missing = pc.or_kleene(pc.is_null(array), pc.equal(pc.utf8_length(array), 0))
    if pc.any(missing).as_py():
        offset = int(pc.index(missing, True).as_py())
        raise GraphFormatError(f"{layout.path}: row {first_row + offset}, column {spec.header!r}: empty id")
    if spec.space:
        return [spaced_id(spec.space, node_id) for node_id in ids]
    return ids


def _labels(array: pa.Array | None, default: str, count: int) -> list[list[str]] | None:
    """Each row's labels (the first is its type), or None when the table has no label column."""
    if array is None:
        return None
    values = array.to_pylist()
    result = []
    for value in values:
        labels = [label for label in (value or "").split(ARRAY_DELIMITER) if label] or [default]
        result.append(labels)
    return result


@dataclass
class _TypeIds:
    name: str
    blobs: list[bytes] = field(default_factory=list)
    lengths: list[np.ndarray] = field(default_factory=list)
    origins: list[tuple[int, np.ndarray]] = field(default_factory=list)  # (table number, row numbers)
    files: list[int] = field(default_factory=list)  # node tables holding rows of this type
    count: int = 0


def _scan_nodes(layouts: list[TableLayout], batch_rows: int, progress: ProgressCallback | None) -> dict[str, _TypeIds]:
    types: dict[str, _TypeIds] = {}
    for number, layout in enumerate(layouts):
        wanted = [layout.id.header] + ([layout.label.header] if layout.label else [])
        for first_row, batch in iter_batches(layout, wanted, batch_rows):
            ids = _id_strings(batch.column(layout.id.header), layout.id, layout, first_row)
            labels = _labels(batch.column(layout.label.header) if layout.label else None, layout.default_name, len(ids))
            rows = np.arange(first_row, first_row + len(ids), dtype=np.int64)
            if labels is None:
                groups = {layout.default_name: np.arange(len(ids))}
            else:
                firsts = np.array([row_labels[0] for row_labels in labels], dtype=object)
                groups = {name: np.flatnonzero(firsts == name) for name in dict.fromkeys(firsts.tolist())}
            for name, positions in groups.items():
                entry = types.setdefault(name, _TypeIds(name))
                chosen = [ids[position] for position in positions.tolist()]
                blob, lengths = encode_ids(chosen)
                entry.blobs.append(blob)
                entry.lengths.append(lengths)
                entry.origins.append((number, rows[positions]))
                if not entry.files or entry.files[-1] != number:
                    entry.files.append(number)
                entry.count += len(chosen)
        if progress is not None:
            progress("node tables", number + 1, len(layouts))
    return types


def _check_unique(index: IdIndex, types: dict[str, _TypeIds], layouts: list[TableLayout]) -> None:
    pair = index.duplicate()
    if pair is None:
        return
    places = []
    for global_index in pair:
        position = global_index
        for entry in types.values():
            if position < entry.count:
                for number, rows in entry.origins:
                    if position < len(rows):
                        places.append(f"{layouts[number].path} row {int(rows[position])}")
                        break
                    position -= len(rows)
                break
            position -= entry.count
    raise GraphFormatError(f"duplicate node id {index.id_at(pair[0])!r}: {' and '.join(places)} (ids must be unique within an ID space)")


def _type_text_columns(entry: _TypeIds, layouts: list[TableLayout]) -> list[str]:
    """The text-typed feature columns of the tables holding a type, in column order."""
    names: dict[str, None] = {}
    for number in entry.files:
        for spec in layouts[number].features:
            if spec.kind in (None, "str") and not spec.array:
                names.setdefault(spec.name, None)
    return list(names)


def _write_type(writer: StoreWriter, entry: _TypeIds, layouts: list[TableLayout], batch_rows: int,
                composite: tuple[str, ...] = ()) -> int:
    written = 0
    writer.add_nodes(entry.name, [], {})  # a type whose rows all lack features still exists
    for number in entry.files:
        layout = layouts[number]
        for first_row, batch in iter_batches(layout, None, batch_rows):
            ids = _id_strings(batch.column(layout.id.header), layout.id, layout, first_row)
            labels = _labels(batch.column(layout.label.header) if layout.label else None, layout.default_name, len(ids))
            keep = None
            if labels is not None:
                keep = np.array([row_labels[0] == entry.name for row_labels in labels], dtype=bool)
                if not keep.any():
                    continue
                batch = batch.filter(pa.array(keep))
                ids = [node_id for node_id, wanted in zip(ids, keep.tolist()) if wanted]
                labels = [row_labels for row_labels, wanted in zip(labels, keep.tolist()) if wanted]
            features: dict[str, Any] = {}
            for spec in layout.features:
                column = batch.column(spec.header)
                if column.null_count == len(column):
                    continue
                # Row numbers of a filtered batch are not contiguous: convert unfiltered on error.
                try:
                    features[spec.name] = column_values(column, spec, layout, first_row)
                except GraphFormatError:
                    if keep is None:
                        raise
                    raise _locate_filtered(layout, spec, first_row, keep) from None
            if labels is not None and any(len(row_labels) > 1 for row_labels in labels):
                features["labels"] = [row_labels if len(row_labels) > 1 else None for row_labels in labels]
            if composite and COMPOSITE_FEATURE not in features:
                by_name = {spec.name: spec for spec in layout.features}
                parts = [batch.column(by_name[part].header).to_pylist() if part in by_name else [None] * len(ids)
                         for part in composite]
                joined = [join_parts(values) for values in zip(*parts)]
                if any(value is not None for value in joined):
                    features[COMPOSITE_FEATURE] = joined
            writer.add_nodes(entry.name, ids, features)
            written += len(ids)
    if written != entry.count:
        raise GraphFormatError(f"node tables of type {entry.name!r} changed during the import ({entry.count} then {written} rows)")
    return written


def _locate_filtered(layout: TableLayout, spec: ColumnSpec, first_row: int, keep: np.ndarray) -> GraphFormatError:
    for row, batch in iter_batches(layout, [spec.header], len(keep)):
        if row == first_row:
            try:
                column_values(batch.column(spec.header), spec, layout, first_row)
            except GraphFormatError as error:
                return error
    return GraphFormatError(f"{layout.path}: column {spec.header!r}: a value cannot be read")


def _edge_tables(writer: StoreWriter, layouts: list[TableLayout], index: IdIndex, ranges: TypeRanges,
                 batch_rows: int, reverse_suffix: str, dangling: Dangling, progress: ProgressCallback | None) -> tuple[int, int]:
    relation_names: list[str] = []
    relation_numbers: dict[str, int] = {}
    edges = rows_read = 0
    for number, layout in enumerate(layouts):
        wanted = [spec.header for spec in (layout.start, layout.end, layout.relation, layout.weight) if spec is not None]
        wanted += [spec.header for spec in layout.features]
        for first_row, batch in iter_batches(layout, wanted, batch_rows):
            rows_read += batch.num_rows
            starts = _id_strings(batch.column(layout.start.header), layout.start, layout, first_row)
            ends = _id_strings(batch.column(layout.end.header), layout.end, layout, first_row)
            if layout.relation is not None:
                names = [value or layout.default_name for value in batch.column(layout.relation.header).to_pylist()]
            else:
                names = [layout.default_name] * len(starts)
            codes = np.empty(len(names), dtype=np.int64)
            for position, name in enumerate(names):
                code = relation_numbers.get(name)
                if code is None:
                    code = relation_numbers[name] = len(relation_names)
                    relation_names.append(name)
                codes[position] = code
            weight = None
            if layout.weight is not None:
                values = column_values(batch.column(layout.weight.header), layout.weight, layout, first_row)
                weight = np.asarray([1.0 if value is None else value for value in values] if isinstance(values, list) else values,
                                    dtype=np.float32)
                if not np.isfinite(weight).all():
                    offset = int(np.flatnonzero(~np.isfinite(weight))[0])
                    raise GraphFormatError(f"{layout.path}: row {first_row + offset}, column {layout.weight.header!r}: "
                                           f"weight {values[offset]!r} is not a finite number")
            features = {}
            for spec in layout.features:  # relationship properties: edge features
                column = batch.column(spec.header)
                if column.null_count < len(column):
                    values = column_values(column, spec, layout, first_row)
                    features[spec.name] = values.tolist() if isinstance(values, np.ndarray) else values
            src, dst = index.resolve_strings(starts), index.resolve_strings(ends)
            valid = (src >= 0) & (dst >= 0)
            if not valid.all():
                missing = np.flatnonzero(~valid)
                dangling.add(len(missing), lambda row: f"{starts[row]} -{names[row]}-> {ends[row]} "
                             f"({layout.path.name} row {first_row + row})", missing)
            kept = np.flatnonzero(valid).tolist()
            features = {name: [values[row] for row in kept] for name, values in features.items()}
            edges += add_grouped_edges(writer, ranges, codes[valid], relation_names, src[valid], dst[valid],
                                       None if weight is None else weight[valid], reverse_suffix, features)
        if progress is not None:
            progress("edge tables", number + 1, len(layouts))
    return edges, rows_read


def import_tables(
    sources: list[str | os.PathLike] | str | os.PathLike,
    out_dir: str | os.PathLike,
    overwrite: bool = False,
    batch_rows: int = 65_536,
    reverse_suffix: str = DEFAULT_REVERSE_SUFFIX,
    text_keys: dict[str, str] | None = None,
    progress: ProgressCallback | None = None,
) -> ImportSummary:
    """Import node and edge tables (files or folders of CSV/Parquet) into a store at ``out_dir``."""
    started = time.perf_counter()
    out_dir = Path(out_dir)
    if out_dir.exists() and not overwrite:
        raise FileExistsError(f"{out_dir} exists; pass --force to replace it")
    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    found = [item for source in sources for item in find_tables(Path(source))]
    scratch = out_dir.parent / f".{out_dir.name}.apoc-{uuid.uuid4().hex[:8]}"
    try:
        readable = _split_apoc_exports(found, scratch)
        return _import_found(found, readable, sources, out_dir, overwrite, batch_rows, reverse_suffix, text_keys,
                             progress, started)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _split_apoc_exports(found: list[tuple[Path, str]], scratch: Path) -> list[tuple[Path, str]]:
    """The tables to read: an APOC one-file export becomes a node and an edge table in ``scratch``."""
    readable = []
    for path, name in found:
        if _format_of(path) == "csv" and is_apoc_header(_column_names(path, "csv")):
            scratch.mkdir(parents=True, exist_ok=True)
            readable.extend(split_apoc(path, scratch))
        else:
            readable.append((path, name))
    return readable


def _import_found(found, readable, sources, out_dir: Path, overwrite: bool, batch_rows: int, reverse_suffix: str,
                  text_keys: dict[str, str] | None, progress: ProgressCallback | None, started: float) -> ImportSummary:
    layouts = [read_layout(path, name) for path, name in readable]
    node_layouts = [layout for layout in layouts if layout.kind == "nodes"]
    edge_layouts = [layout for layout in layouts if layout.kind == "edges"]
    if not node_layouts:
        raise GraphFormatError(f"no node tables among {[str(path) for path, _ in readable]} (a node table has an ':ID' column)")
    types = _scan_nodes(node_layouts, batch_rows, progress)
    order = list(types.values())
    index = IdIndex.build(b"".join(blob for entry in order for blob in entry.blobs),
                          np.concatenate([lengths for entry in order for lengths in entry.lengths] or [np.zeros(0, np.int64)]))
    _check_unique(index, types, node_layouts)
    for entry in order:
        entry.blobs, entry.lengths = [], []
    ranges = TypeRanges([(entry.name, entry.count) for entry in order])
    ignored = {str(layout.path): layout.ignored for layout in layouts if layout.ignored}
    total_bytes = sum(path.stat().st_size for path, _ in found)
    dangling = Dangling()
    source = {"paths": [str(Path(item).resolve()) for item in sources], "bytes": total_bytes, "importer": "tables",
              "empty_relations": "left out"}  # vertex chunks leave out relations a node has no neighbour on
    if reverse_suffix:
        source["reverse_suffix"] = reverse_suffix  # updates add and delete the reverse edges too
    text_keys = dict(text_keys or {})
    unknown = sorted(set(text_keys) - set(types))
    if unknown:
        raise GraphFormatError(f"--text-key names node types {unknown} that the tables do not have; types: {sorted(types)}")
    composites = {}
    for entry in order:
        override = text_keys.get(entry.name)
        if override is not None:
            composites[entry.name] = tuple(part.strip() for part in override.split("+")) if "+" in override else ()
        else:
            composites[entry.name] = composite_parts(_type_text_columns(entry, node_layouts))
    chosen: dict[str, TextKeyChoice] = {}
    with StoreWriter(out_dir, overwrite=overwrite, source=source) as writer:
        node_rows = sum(_write_type(writer, entry, node_layouts, batch_rows, composites[entry.name]) for entry in order)
        id_features = {layout.id.name for layout in node_layouts if layout.id.name}
        for entry in order:
            override = text_keys.get(entry.name)
            present = writer.text_features(entry.name)
            if override is not None and "+" not in override:
                if override not in writer.feature_names(entry.name):
                    raise GraphFormatError(f"--text-key {entry.name}={override}: {entry.name} has no feature {override!r}; "
                                           f"its features: {', '.join(writer.feature_names(entry.name)) or '(none)'}")
                chosen[entry.name] = TextKeyChoice(override, reason="--text-key")
            elif composites[entry.name] and COMPOSITE_FEATURE in present:
                chosen[entry.name] = TextKeyChoice(COMPOSITE_FEATURE, composites[entry.name], reason="first and last name")
            else:
                chosen[entry.name] = choose_text_key(present, id_features=id_features)
            if chosen[entry.name].feature is not None:
                writer.set_text_key(entry.name, chosen[entry.name].feature)
        joined = {name: list(choice.parts) for name, choice in chosen.items() if choice.parts}
        if joined:
            writer.source["composite_text_keys"] = joined
        edges, edge_rows = _edge_tables(writer, edge_layouts, index, ranges, batch_rows, reverse_suffix, dangling, progress)
        dangling.record(writer)
        if ignored:
            writer.warnings["ignored_columns"] = ignored
        warnings = dict(writer.warnings)
    return ImportSummary(
        out_dir=str(out_dir), nodes=len(index), edges=edges, node_types={entry.name: entry.count for entry in order},
        dangling_neighbors=dangling.count, dangling_examples=dangling.examples, seconds=time.perf_counter() - started,
        format="tables", input_bytes=total_bytes, rows=node_rows + edge_rows, warnings=warnings,
        text_keys={name: choice.describe() for name, choice in chosen.items()},
    )


__all__ = ["import_tables", "parse_header", "read_layout", "find_tables", "ColumnSpec", "TableLayout", "TABLE_SUFFIXES"]
