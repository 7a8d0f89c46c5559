"""A `GraphSource` over an openCypher database, driver-agnostic.

`CypherSource` holds the queries; a `CypherRunner` (one method: run a query with parameters, give
rows) connects them to a driver: FalkorDB's in graph/live/falkordb_source.py. A Bolt runner (Neo4j,
Memgraph) would be the same few lines over the `neo4j` driver; none ships, because no test here
could run it against a real server.

The graph layout `glmcot graph export` writes (graph/live/db_export.py), documented in docs/contracts.md:
- `(:GlmcotSchema {json, version, store})`: the schema (graph_source.Schema as JSON), a version
  counter that every update through glmcot raises, and the exported store's id;
- every node `(:Node:<type> {_id, _type, _text, _degree, _order, _absent, _nulls, <features>})`:
  `_text` its main text, `_degree` its out-degree over all relations (the chunk ranking of
  unweighted relations), `_order` its place in the store (iteration order), `_absent` relations its
  source record lacked, `_nulls` features whose value is null, json-kind features as JSON text;
- ids a neighbour list names but no node has: `(:Dangling {_id})`;
- every edge `[:<relation> {_pos, _w}]`: its place in the node's neighbour list, and its weight on
  weighted relations.

Node ids, feature and relation names reach the database only as query parameters; relation and
feature names are checked against the schema first, so an unknown one is a RelationNotFound or
FeatureNotFound with the valid choices, as on the store.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from glmcot.graph.errors import RelationNotFound
from glmcot.graph.graph_source import (ChunkRelation, ChunkView, LiveNodeRefs, Neighbours, Schema,
                                       SourceUnavailable)

SCHEMA_LABEL = "GlmcotSchema"
NODE_LABEL = "Node"
DANGLING_LABEL = "Dangling"
MAX_ID_CHARS = 100_000  # longer ids are no node anywhere; they never travel to the database


class CypherRunner(Protocol):
    def run(self, query: str, parameters: dict[str, Any] | None = None) -> list[list[Any]]:
        """Rows of the query's result; raises SourceUnavailable when the database cannot be reached."""
        ...

    def close(self) -> None: ...


Q_SCHEMA = f"MATCH (s:{SCHEMA_LABEL}) RETURN s.json, s.version, s.store"
Q_VERSION = f"MATCH (s:{SCHEMA_LABEL}) RETURN s.version, s.store"
Q_NODE = f"MATCH (n:{NODE_LABEL} {{_id: $id}}) RETURN properties(n)"
Q_ALL_NEIGHBOURS = (f"MATCH (n:{NODE_LABEL} {{_id: $id}})-[r]->(m) WHERE type(r) = $relation "
                    "WITH r, m ORDER BY r._pos WITH collect(m._id) AS ids, count(r) AS total RETURN ids, total")
Q_NEIGHBOURS = (f"MATCH (n:{NODE_LABEL} {{_id: $id}})-[r]->(m) WHERE type(r) = $relation "
                "WITH r, m ORDER BY r._pos WITH collect(m._id) AS ids, count(r) AS total RETURN ids[0..$limit], total")
Q_DEGREE = f"MATCH (n:{NODE_LABEL} {{_id: $id}})-[r]->() WHERE type(r) = $relation RETURN count(r)"
# The chunk's ranking, where the data lives: edge weight (weighted relations) or the neighbour's
# out-degree, ties in stored order; only real nodes, as the store ranks them.
Q_CHUNK = (f"MATCH (n:{NODE_LABEL} {{_id: $id}})-[r]->(m:{NODE_LABEL}) "
           "WITH type(r) AS relation, r, m ORDER BY coalesce(r._w, m._degree) DESC, r._pos ASC "
           "WITH relation, count(m) AS total, collect([m._id, m._text]) AS ranked RETURN relation, total, ranked[0..$k]")
Q_TEXTS = f"UNWIND $ids AS i MATCH (n:{NODE_LABEL} {{_id: i}}) RETURN n._id, n._text"
Q_ITER = (f"MATCH (n:{NODE_LABEL}) WHERE n._order >= $start AND n._order < $stop "
          "RETURN n._id, n._type, n._text ORDER BY n._order")
Q_MAX_ORDER = f"MATCH (n:{NODE_LABEL}) RETURN max(n._order)"


@dataclass(eq=False, frozen=True)
class CypherNode:
    """A resolved node: its id, type and properties as one read fetched them."""

    node_id: str
    node_type: str
    properties: dict[str, Any]


def relation_error(node_type: str, node_id: str, relation: str, schema: Schema) -> RelationNotFound:
    """The store's message for an unknown relation, word for word (graph/storage/store.py)."""
    entry = schema.type(node_type)
    hint = " (that is a feature; use NodeFeature)" if relation in entry.features else ""
    return RelationNotFound(f"{node_type} node {node_id!r} has no relation {relation!r}{hint}; "
                            f"{node_type} relations: {', '.join(entry.relations) or '(none)'}")


def decode_feature(kind: str, value: Any) -> Any:
    if kind == "json" and isinstance(value, str):
        return json.loads(value)
    if kind == "float" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def valid_id(node_id: Any) -> bool:
    """Whether an id can name a node at all (a str that encodes, of sane length): anything else is
    'no such node' without a round trip."""
    if type(node_id) is not str or len(node_id) > MAX_ID_CHARS or "\x00" in node_id:
        return False  # a NUL cuts the client's parameter header: no stored id holds one
    try:
        node_id.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: no database id holds one
        return False
    return True


class CypherSource(LiveNodeRefs):
    """A `GraphSource` over a database laid out by `glmcot graph export` (see the module docstring)."""

    node_class = CypherNode

    def __init__(self, runner: CypherRunner, location: str):
        self.runner = runner
        self.location = location
        rows = runner.run(Q_SCHEMA)
        if not rows:
            raise SourceUnavailable(f"{location}: no glmcot graph there (no {SCHEMA_LABEL} node); "
                                    "load one with `glmcot graph export STORE --to URL`")
        self._schema = Schema.from_json(json.loads(rows[0][0]))

    # schema and version ------------------------------------------------------------------------
    def schema(self) -> Schema:
        return self._schema

    def version(self) -> str:
        rows = self.runner.run(Q_VERSION)
        if not rows:
            raise SourceUnavailable(f"{self.location}: the glmcot schema node is gone")
        return f"{rows[0][1]}@v{rows[0][0]}"

    def refresh_schema(self) -> None:
        rows = self.runner.run(Q_SCHEMA)
        if rows:
            self._schema = Schema.from_json(json.loads(rows[0][0]))

    # nodes -------------------------------------------------------------------------------------
    def resolve(self, node_id: str) -> CypherNode | None:
        if not valid_id(node_id):
            return None
        rows = self.runner.run(Q_NODE, {"id": node_id})
        if not rows:
            return None
        properties = rows[0][0]
        return CypherNode(node_id, properties["_type"], dict(properties))

    def features(self, ref: CypherNode) -> dict[str, Any]:
        node = self._ref(ref)
        kinds = self._schema.type(node.node_type).features
        properties = node.properties
        nulls = set(properties.get("_nulls") or ())
        result: dict[str, Any] = {}
        for name, kind in kinds.items():
            if name in nulls:
                result[name] = None
            elif name in properties:
                result[name] = decode_feature(kind, properties[name])
        return result

    def _relation(self, node: CypherNode, relation: str) -> None:
        if not isinstance(relation, str) or relation not in self._schema.type(node.node_type).relations:
            raise relation_error(node.node_type, node.node_id, relation, self._schema)

    def neighbours(self, ref: CypherNode, relation: str, limit: int | None = None) -> Neighbours:
        node = self._ref(ref)
        self._relation(node, relation)
        if limit is None:  # the whole list (a slice bound past 2^31 gives FalkorDB's empty list)
            rows = self.runner.run(Q_ALL_NEIGHBOURS, {"id": node.node_id, "relation": relation})
        else:
            rows = self.runner.run(Q_NEIGHBOURS, {"id": node.node_id, "relation": relation, "limit": max(int(limit), 0)})
        ids, total = (rows[0][0] or [], rows[0][1]) if rows else ([], 0)
        return Neighbours(list(ids), int(total))

    def degree(self, ref: CypherNode, relation: str) -> int:
        node = self._ref(ref)
        self._relation(node, relation)
        rows = self.runner.run(Q_DEGREE, {"id": node.node_id, "relation": relation})
        return int(rows[0][0]) if rows else 0

    def has_relation_key(self, ref: CypherNode, relation: str) -> bool:
        node = self._ref(ref)
        self._relation(node, relation)
        return relation not in (node.properties.get("_absent") or ())

    def texts(self, node_ids: Sequence[str]) -> list[str]:
        wanted = [node_id for node_id in node_ids if valid_id(node_id)]
        found = dict(self.runner.run(Q_TEXTS, {"ids": wanted})) if wanted else {}
        return [found.get(node_id, node_id) for node_id in node_ids]

    def chunk_view(self, ref: CypherNode, top_k: int) -> ChunkView:
        node = self._ref(ref)
        rows = self.runner.run(Q_CHUNK, {"id": node.node_id, "k": max(int(top_k), 0)})
        ranked = {row[0]: (int(row[1]), [(pair[0], pair[1]) for pair in row[2]]) for row in rows}
        relations = []
        for relation in self._schema.type(node.node_type).relations:
            total, top = ranked.get(relation, (0, []))
            relations.append(ChunkRelation(relation, total, top))
        return ChunkView(node.node_id, node.node_type, self.features(node), relations)

    def iter_nodes(self, batch: int = 4096) -> Iterator[list[tuple[str, str, str]]]:
        rows = self.runner.run(Q_MAX_ORDER)
        last = rows[0][0] if rows and rows[0][0] is not None else -1
        for start in range(0, int(last) + 1, batch):
            part = self.runner.run(Q_ITER, {"start": start, "stop": start + batch})
            if part:
                yield [(row[0], row[1], row[2]) for row in part]

    def close(self) -> None:
        self.runner.close()


__all__ = ["CypherSource", "CypherRunner", "CypherNode", "SCHEMA_LABEL", "NODE_LABEL", "DANGLING_LABEL",
           "relation_error", "valid_id"]
