"""Changes to a store: operations, and the delta they build on top of an immutable base.

A delta is the cumulative difference between the base store and one version: for each changed
node its type and its complete feature set (or a deletion mark), and for each changed (node,
relation) its complete neighbour list. Readers merge it over the base (graph/updates/merged.py); a
compaction writes base + delta as a new base (graph/updates/versions.py).

Operations, one JSON object per line in an update file (``.jsonl``)::

    {"op": "upsert_node", "id": "m7", "type": "Movie", "features": {"title": "Heat", "year": 1995}}
    {"op": "delete_node", "id": "m3"}
    {"op": "upsert_edge", "source": "m7", "relation": "director", "target": "p2", "weight": 1.0}
    {"op": "delete_edge", "source": "m7", "relation": "director", "target": "p9"}

``upsert_node`` on an existing node sets the given features (a ``null`` value removes one) and
keeps the others; ``"replace": true`` replaces the whole feature set. A deleted node disappears
with its outgoing edges, and edges from other nodes to it are no longer returned.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from glmcot.graph.errors import GraphFormatError
from glmcot.graph.storage.values import has_lone_surrogate, value_kind, value_problem

OPS = ("upsert_node", "delete_node", "upsert_edge", "delete_edge")
DELTA_FORMAT = "glmcot.graph-delta/1"


@dataclass(frozen=True)
class Operation:
    op: str
    id: str = ""  # node ops
    type: str | None = None
    features: dict[str, Any] | None = None
    replace: bool = False
    type_is_hint: bool = False  # from a file name: names the type of a new node, not checked for old ones
    source: str = ""  # edge ops
    relation: str = ""
    target: str = ""
    weight: float | None = None
    where: str = ""  # file and line, for errors


# The fields each operation may have; any other field is refused (a misspelt "replace" must not
# silently do nothing).
FIELDS = {
    "upsert_node": ("op", "id", "type", "features", "replace"),
    "delete_node": ("op", "id", "type"),
    "upsert_edge": ("op", "source", "relation", "target", "weight"),
    "delete_edge": ("op", "source", "relation", "target"),
}


def _text(raw: dict, key: str, where: str) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or value == "":
        raise GraphFormatError(f"{where}: field '{key}' must be a non-empty string, got {value!r}")
    return value


def parse_operation(raw: Any, where: str) -> Operation:
    """One operation from its JSON object. Every field has one exact JSON type (a JSON boolean is
    the only boolean, a JSON string the only id); anything else raises, naming the field."""
    if not isinstance(raw, dict):
        raise GraphFormatError(f"{where}: an operation must be a JSON object, got {type(raw).__name__}")
    op = raw.get("op")
    if op not in OPS:
        raise GraphFormatError(f"{where}: field 'op' must be one of {', '.join(OPS)}, got {op!r}")
    unknown = [key for key in raw if key not in FIELDS[op]]
    if unknown:
        raise GraphFormatError(f"{where}: {op} has no field {unknown[0]!r}; its fields: {', '.join(FIELDS[op])}")
    if op in ("upsert_node", "delete_node"):
        node_type = raw.get("type")
        if node_type is not None and (not isinstance(node_type, str) or not node_type):
            raise GraphFormatError(f"{where}: field 'type' must be a non-empty string, got {node_type!r}")
        features = raw.get("features", {} if op == "upsert_node" else None)
        replace = raw.get("replace", False)
        if op == "upsert_node":
            if not isinstance(features, dict):
                raise GraphFormatError(f"{where}: field 'features' must be an object, got {type(features).__name__}")
            if type(replace) is not bool:
                raise GraphFormatError(f"{where}: field 'replace' must be true or false (a JSON boolean), got {replace!r}")
        operation = Operation(op, id=_text(raw, "id", where), type=node_type, features=features,
                              replace=bool(replace), where=where)
    else:
        weight = raw.get("weight")
        if weight is not None and (isinstance(weight, bool) or not isinstance(weight, (int, float))):
            raise GraphFormatError(f"{where}: field 'weight' must be a finite number, got {weight!r}")
        try:
            weight = None if weight is None else float(weight)
        except OverflowError:  # an integer beyond a double
            raise GraphFormatError(f"{where}: field 'weight' must be a finite number, got {weight!r}") from None
        operation = Operation(op, source=_text(raw, "source", where), relation=_text(raw, "relation", where),
                              target=_text(raw, "target", where), weight=weight, where=where)
    check_operation(operation)
    return operation


def check_operation(operation: Operation) -> None:
    """The checks every operation passes, whatever file or request it came from: valid Unicode
    text, non-empty names, finite weights and storable feature values."""
    where = operation.where
    texts = {"id": operation.id, "type": operation.type, "source": operation.source,
             "relation": operation.relation, "target": operation.target}
    for key, text in texts.items():
        if text and has_lone_surrogate(text):
            raise GraphFormatError(f"{where}: field '{key}' holds a lone surrogate {text!r} (text must be valid Unicode)")
    if operation.weight is not None and not math.isfinite(operation.weight):
        raise GraphFormatError(f"{where}: field 'weight' must be a finite number, got {operation.weight!r}")
    for name, value in (operation.features or {}).items():
        if not isinstance(name, str) or not name.strip():
            raise GraphFormatError(f"{where}: field 'features' has an empty feature name {name!r}")
        if has_lone_surrogate(name):
            raise GraphFormatError(f"{where}: feature name {name!r} holds a lone surrogate (text must be valid Unicode)")
        problem = value_problem(value)
        if problem is not None:
            raise GraphFormatError(f"{where}: feature {name!r} {problem}")


def read_operations(path: Path) -> Iterator[Operation]:
    """Operations of a JSON Lines file, streaming; a bad line names the file and line."""
    with open(path, "rb") as handle:
        for number, data in enumerate(handle, 1):
            where = f"{path}: line {number}"
            try:
                line = data.decode("utf-8")
            except UnicodeDecodeError as error:
                raise GraphFormatError(f"{where}: not UTF-8 (byte {error.start + 1})") from None
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
            except json.JSONDecodeError as error:
                raise GraphFormatError(f"{where}: not JSON ({error.msg} at column {error.colno})") from None
            yield parse_operation(raw, where)


class BaseView(Protocol):
    """What applying operations needs to know about the base store."""

    def base_node(self, node_id: str) -> tuple[str, dict[str, Any]] | None: ...  # (type, features)

    def base_neighbours(self, node_id: str, relation: str) -> list[tuple[str, float | None]]: ...


@dataclass
class Delta:
    """The cumulative change of one version against its base (JSON-serialisable)."""

    base_store_id: str
    nodes: dict[str, dict] = field(default_factory=dict)  # id -> {"type", "features"} | {"deleted": True}
    edges: dict[str, dict[str, list]] = field(default_factory=dict)  # id -> relation -> [[target, weight], ...]
    new_nodes: list[str] = field(default_factory=list)  # ids not in the base, in the order they appeared

    def to_json(self) -> dict:
        return {"format": DELTA_FORMAT, "base_store_id": self.base_store_id, "nodes": self.nodes,
                "edges": self.edges, "new_nodes": self.new_nodes}

    @classmethod
    def from_json(cls, data: dict, where: str) -> Delta:
        if data.get("format") != DELTA_FORMAT:
            raise GraphFormatError(f"{where}: not a glmcot delta (format {data.get('format')!r})")
        return cls(data["base_store_id"], data.get("nodes", {}), data.get("edges", {}), data.get("new_nodes", []))

    @property
    def size(self) -> int:
        return len(self.nodes) + sum(len(relations) for relations in self.edges.values())


@dataclass
class ApplyReport:
    upserted_nodes: int = 0
    deleted_nodes: int = 0
    upserted_edges: int = 0
    deleted_edges: int = 0
    text_changed: list[str] = field(default_factory=list)  # ids whose text is new or changed
    deleted: list[str] = field(default_factory=list)


class DeltaBuilder:
    """Applies operations to a delta, checking them against the base."""

    def __init__(self, delta: Delta, base: BaseView, text_key, column_kind=None, reverse_suffix: str = ""):
        self.delta = delta
        self.base = base
        self.text_key = text_key  # (node type, features) -> the text feature's name or None
        self.column_kind = column_kind or (lambda node_type, name: None)  # the version's kind of a column, or None
        self.reverse_suffix = reverse_suffix  # a store imported with reverse edges keeps them
        self._kinds: dict[tuple[str, str], str] = {}  # columns this update started
        self.report = ApplyReport()

    def _current(self, node_id: str) -> tuple[str, dict] | None:
        entry = self.delta.nodes.get(node_id)
        if entry is not None:
            return None if entry.get("deleted") else (entry["type"], entry["features"])
        return self.base.base_node(node_id)

    def _exists(self, node_id: str) -> bool:
        return self._current(node_id) is not None

    def apply(self, operation: Operation) -> None:
        if operation.op not in OPS:
            raise GraphFormatError(f"{operation.where}: 'op' must be one of {', '.join(OPS)}, got {operation.op!r}")
        check_operation(operation)
        getattr(self, f"_{operation.op}")(operation)

    def _checked_value(self, operation: Operation, node_type: str, name: str, value: Any) -> Any:
        """The value as its column stores it. A column keeps one kind (graph/storage/values.py): a json
        column takes any value, a float column takes whole numbers as floats, and any other
        mismatch is refused (compaction would otherwise retype the whole column)."""
        kind = value_kind(value)
        expected = self._kinds.get((node_type, name)) or self.column_kind(node_type, name)
        if expected is None:
            self._kinds[(node_type, name)] = kind
            return value
        if kind == expected or expected == "json":
            return value
        if expected == "float" and kind == "int":
            return float(value)
        raise GraphFormatError(f"{operation.where}: feature {name!r} of {node_type!r} nodes holds {expected} values; "
                               f"{value!r} is a {kind} value (a feature keeps one kind of value)")

    def apply_all(self, operations: Iterable[Operation]) -> ApplyReport:
        for operation in operations:
            self.apply(operation)
        return self.report

    def _upsert_node(self, operation: Operation) -> None:
        current = self._current(operation.id)
        if current is None:
            if operation.type is None:
                raise GraphFormatError(f"{operation.where}: new node {operation.id!r} needs a 'type'")
            node_type, features = operation.type, {}
            in_base = self.base.base_node(operation.id)
            if in_base is not None and in_base[0] != node_type:
                raise GraphFormatError(f"{operation.where}: {operation.id!r} was a {in_base[0]!r} in the base store; "
                                       f"compact before adding it again as a {node_type!r}")
            if in_base is None and operation.id not in self.delta.new_nodes:
                self.delta.new_nodes.append(operation.id)
        else:
            node_type, features = current
            if operation.type is not None and operation.type != node_type and not operation.type_is_hint:
                raise GraphFormatError(f"{operation.where}: node {operation.id!r} is a {node_type!r}, not a "
                                       f"{operation.type!r}; delete it and add it again to change its type")
        old_text = self._text(node_type, features)
        merged = {} if operation.replace else dict(features)
        for name, value in (operation.features or {}).items():
            if value is None:
                merged.pop(name, None)
            else:
                merged[name] = self._checked_value(operation, node_type, name, value)
        entry = {"type": node_type, "features": merged}
        previous = self.delta.nodes.get(operation.id)
        if current is None or (previous is not None and previous.get("fresh")):
            entry["fresh"] = True  # added again after a delete: none of its base edges come back
            self.delta.edges.setdefault(operation.id, {})
        self.delta.nodes[operation.id] = entry
        if current is None or self._text(node_type, merged) != old_text:
            self.report.text_changed.append(operation.id)
        self.report.upserted_nodes += 1

    def _text(self, node_type: str, features: dict) -> Any:
        key = self.text_key(node_type, features)
        return features.get(key) if key else None

    def _delete_node(self, operation: Operation) -> None:
        if not self._exists(operation.id):
            raise GraphFormatError(f"{operation.where}: cannot delete {operation.id!r}: no such node")
        self.delta.nodes[operation.id] = {"deleted": True, "type": self._current(operation.id)[0]}
        self.delta.edges.pop(operation.id, None)
        self.report.deleted.append(operation.id)
        self.report.deleted_nodes += 1

    def _neighbours(self, source: str, relation: str) -> list:
        relations = self.delta.edges.setdefault(source, {})
        if relation not in relations and not self.delta.nodes.get(source, {}).get("fresh"):
            relations[relation] = [[target, weight] for target, weight in self.base.base_neighbours(source, relation)]
        return relations.setdefault(relation, [])

    def _upsert_edge(self, operation: Operation) -> None:
        for end in (operation.source, operation.target):
            if not self._exists(end):
                raise GraphFormatError(f"{operation.where}: edge {operation.source} -{operation.relation}-> "
                                       f"{operation.target}: no node {end!r} (add nodes before their edges)")
        self._set_edge(operation.source, operation.relation, operation.target, operation.weight)
        if self.reverse_suffix:
            self._set_edge(operation.target, operation.relation + self.reverse_suffix, operation.source, operation.weight)
        self.report.upserted_edges += 1

    def _set_edge(self, source: str, relation: str, target: str, weight: float | None) -> None:
        neighbours = self._neighbours(source, relation)
        for pair in neighbours:
            if pair[0] == target:
                pair[1] = weight if weight is not None else pair[1]
                break
        else:
            neighbours.append([target, weight])

    def _delete_edge(self, operation: Operation) -> None:
        if not self._exists(operation.source):
            raise GraphFormatError(f"{operation.where}: no edge {operation.source} -{operation.relation}-> "
                                   f"{operation.target}: no node {operation.source!r}")
        if not self._remove_edge(operation.source, operation.relation, operation.target):
            raise GraphFormatError(f"{operation.where}: no edge {operation.source} -{operation.relation}-> {operation.target}")
        if self.reverse_suffix and self._exists(operation.target):
            self._remove_edge(operation.target, operation.relation + self.reverse_suffix, operation.source)
        self.report.deleted_edges += 1

    def _remove_edge(self, source: str, relation: str, target: str) -> bool:
        neighbours = self._neighbours(source, relation)
        kept = [pair for pair in neighbours if pair[0] != target]
        if len(kept) == len(neighbours):
            return False
        neighbours[:] = kept
        return True


__all__ = ["Operation", "Delta", "DeltaBuilder", "ApplyReport", "parse_operation", "check_operation",
           "read_operations", "OPS", "FIELDS", "DELTA_FORMAT"]
