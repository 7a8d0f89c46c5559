"""APOC's one-file CSV export (``CALL apoc.export.csv.all("graph.csv", {})``) read as a node
table and an edge table in Neo4j's bulk-import headers.

APOC writes one header for both: ``_id,_labels,<properties...>,_start,_end,_type``. A row with
``_start`` is a relationship, any other row a node; ``_labels`` is ``:Person:Actor`` (the first
label is the type, as with ``:LABEL``). APOC writes every value as text, so each property column
gets the kind all its values have, separately for nodes and relationships: whole numbers → int,
other numbers → float, true/false → boolean, JSON arrays of text (APOC's lists) → ``string[]``,
anything else text. The node id is APOC's ``_id`` (the database's id when exported).
"""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

from glmcot.graph.errors import GraphFormatError

APOC_COLUMNS = ("_id", "_labels", "_start", "_end", "_type")
_ARRAY_DELIMITER = ";"


def is_apoc_header(names: list[str]) -> bool:
    return all(name in names for name in APOC_COLUMNS)


def _open(path: Path):
    if path.name.lower().endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


def _text_list(value: str) -> list[str] | None:
    if not value.startswith("["):
        return None
    try:
        items = json.loads(value)
    except ValueError:
        return None
    if isinstance(items, list) and all(isinstance(item, str) and _ARRAY_DELIMITER not in item for item in items):
        return items
    return None


def _value_kind(value: str) -> str:
    try:
        int(value)
        return "int"
    except ValueError:
        pass
    try:
        float(value)
        return "float"
    except ValueError:
        pass
    if value in ("true", "false"):
        return "boolean"
    if _text_list(value) is not None:
        return "string[]"
    return "string"


def _merge(kinds: set[str]) -> str:
    if kinds <= {"int"}:
        return "int"
    if kinds <= {"int", "float"}:
        return "float"
    if len(kinds) == 1:
        return kinds.pop()
    return "string"


def split_apoc(path: Path, folder: Path) -> list[tuple[Path, str]]:
    """Write ``path``'s nodes and relationships as two bulk-import CSVs in ``folder``; returns
    them with their default names (the file's stem, for rows without a label or type)."""
    with _open(path) as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None or not is_apoc_header(header):
            raise GraphFormatError(f"{path}: not an APOC CSV export (its header needs {', '.join(APOC_COLUMNS)})")
        at = {name: position for position, name in enumerate(header)}
        properties = [(position, name) for position, name in enumerate(header) if name not in APOC_COLUMNS]
        node_kinds: dict[int, set[str]] = {position: set() for position, _ in properties}
        edge_kinds: dict[int, set[str]] = {position: set() for position, _ in properties}
        for row_number, row in enumerate(reader, 2):
            if len(row) != len(header):
                raise GraphFormatError(f"{path}: row {row_number} has {len(row)} columns, the header {len(header)}")
            kinds = edge_kinds if row[at["_start"]] else node_kinds
            for position, _ in properties:
                if row[position] != "":
                    kinds[position].add(_value_kind(row[position]))
    stem = path.name.split(".")[0]
    node_columns = [(position, name, _merge(node_kinds[position])) for position, name in properties if node_kinds[position]]
    edge_columns = [(position, name, _merge(edge_kinds[position])) for position, name in properties if edge_kinds[position]]
    nodes_path, edges_path = folder / f"{stem}.nodes.csv", folder / f"{stem}.relationships.csv"
    with _open(path) as handle, open(nodes_path, "w", encoding="utf-8", newline="") as nodes_out, \
            open(edges_path, "w", encoding="utf-8", newline="") as edges_out:
        reader = csv.reader(handle)
        next(reader)
        nodes, edges = csv.writer(nodes_out), csv.writer(edges_out)
        nodes.writerow([":ID", ":LABEL"] + [f"{name}:{kind}" for _, name, kind in node_columns])
        edges.writerow([":START_ID", ":END_ID", ":TYPE"] + [f"{name}:{kind}" for _, name, kind in edge_columns])
        for row in reader:
            if row[at["_start"]]:
                edges.writerow([row[at["_start"]], row[at["_end"]], row[at["_type"]]]
                               + [_cell(row[position], kind) for position, _, kind in edge_columns])
            else:
                labels = _ARRAY_DELIMITER.join(label for label in row[at["_labels"]].split(":") if label)
                nodes.writerow([row[at["_id"]], labels] + [_cell(row[position], kind) for position, _, kind in node_columns])
    return [(nodes_path, stem), (edges_path, stem)]


def _cell(value: str, kind: str) -> str:
    if kind == "string[]" and value:
        return _ARRAY_DELIMITER.join(_text_list(value) or [])
    return value


__all__ = ["is_apoc_header", "split_apoc", "APOC_COLUMNS"]
