"""A `GraphSource` over a SPARQL 1.1 endpoint (tested against Oxigraph's server), and the export
that writes a store into one.

The layout (docs/contracts.md): a node is the IRI ``urn:glmcot:node:<percent-encoded id>`` with
`rdf:type <urn:glmcot:type:T>`, its main text as `rdfs:label`, each feature as a literal of
`<urn:glmcot:feature:NAME>` (lists and json values as JSON literals of datatype
`urn:glmcot:json`), and `glm:degree`, `glm:order`, `glm:absent`, `glm:null` as on FalkorDB. An
edge is the plain triple ``node <urn:glmcot:rel:R> target`` plus an `rdf:Statement` (subject,
predicate, object) carrying its place `glm:pos` and weight `glm:weight`, since RDF keeps no order.

SPARQL has no query parameters: every IRI put into a query is built here from a percent-encoded
id or a name checked against the schema (only unreserved characters and `%` reach the query text),
and literals never come from a caller.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.parse
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from glmcot.graph.live.cypher_source import MAX_ID_CHARS, relation_error
from glmcot.graph.graph_source import (ChunkRelation, ChunkView, LiveNodeRefs, Neighbours, Schema,
                                       SourceUnavailable)

NS = "urn:glmcot:"
NODE, TYPE, FEATURE, REL = NS + "node:", NS + "type:", NS + "feature:", NS + "rel:"
SCHEMA_IRI = NS + "schema"
JSON_TYPE = NS + "json"
RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
XSD = "http://www.w3.org/2001/XMLSchema#"
G = {name: NS + name for name in ("degree", "order", "absent", "null", "pos", "weight", "json", "version", "store")}
PREFIXES = (f"PREFIX rdf: <{RDF}> PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#> "
            f"PREFIX glm: <{NS}> ")


def _quote(text: str) -> str:
    return urllib.parse.quote(text.encode("utf-8", "surrogatepass"), safe="")


def node_iri(node_id: str) -> str:
    return NODE + _quote(node_id)


def name_iri(prefix: str, name: str) -> str:
    return prefix + _quote(name)


def iri_id(iri: str) -> str:
    if iri.startswith(NODE):
        return urllib.parse.unquote(iri[len(NODE):], errors="surrogatepass")
    return iri


@dataclass(frozen=True)
class SparqlLocation:
    query_url: str
    update_url: str
    store_url: str

    @property
    def url(self) -> str:
        return "sparql+" + self.query_url

    @classmethod
    def parse(cls, location: str) -> SparqlLocation:
        text = str(location)
        if not text.startswith(("sparql+http:", "sparql+https:")):
            raise ValueError(f"not a SPARQL location: {text!r}; expected sparql+http://HOST:PORT/PATH")
        text = text[len("sparql+"):]
        scheme, rest = text.split(":", 1)
        rest = "//" + rest.lstrip("/")
        parsed = urllib.parse.urlsplit(f"{scheme}:{rest}")
        if not parsed.hostname:
            raise ValueError(f"no host in the SPARQL location {location!r}")
        query = urllib.parse.parse_qs(parsed.query)
        path = parsed.path or "/query"
        base = f"{scheme}://{parsed.netloc}"
        query_url = base + path
        parent = path.rsplit("/", 1)[0]
        update_url = query.get("update", [base + parent + "/update"])[0]
        return cls(query_url, update_url, base + parent + "/store")


class SparqlClient:
    """SPARQL protocol over kept-alive HTTP connections (one per thread)."""

    def __init__(self, location: SparqlLocation, timeout: float = 30.0):
        self.location = location
        self.timeout = timeout
        self._local = threading.local()

    def _connection(self, url: str) -> tuple[http.client.HTTPConnection, str]:
        parsed = urllib.parse.urlsplit(url)
        key = (parsed.scheme, parsed.netloc)
        connections = getattr(self._local, "connections", None)
        if connections is None:
            connections = self._local.connections = {}
        connection = connections.get(key)
        if connection is None:
            factory = http.client.HTTPSConnection if parsed.scheme == "https" else http.client.HTTPConnection
            connection = connections[key] = factory(parsed.netloc, timeout=self.timeout)
        return connection, parsed.path + (f"?{parsed.query}" if parsed.query else "")

    def _post(self, url: str, body: bytes, content_type: str, accept: str | None = None) -> bytes:
        headers = {"Content-Type": content_type}
        if accept:
            headers["Accept"] = accept
        for attempt in range(2):  # a kept-alive connection the server closed is retried once
            connection, path = self._connection(url)
            try:
                connection.request("POST", path, body=body, headers=headers)
                response = connection.getresponse()
                data = response.read()
            except (OSError, http.client.HTTPException) as error:
                connection.close()
                self._local.connections.pop((urllib.parse.urlsplit(url).scheme, urllib.parse.urlsplit(url).netloc), None)
                if attempt == 0:
                    continue
                raise SourceUnavailable(f"the SPARQL endpoint {self.location.url} is unreachable: {error}") from None
            if response.status >= 400:
                raise SourceUnavailable(f"the SPARQL endpoint {self.location.url} answered {response.status}: "
                                        f"{data[:300].decode('utf-8', 'replace')}")
            return data
        raise AssertionError("unreachable")

    def select(self, query: str) -> list[dict[str, dict]]:
        data = self._post(self.location.query_url, (PREFIXES + query).encode("utf-8"), "application/sparql-query",
                          "application/sparql-results+json")
        return json.loads(data)["results"]["bindings"]

    def ask(self, query: str) -> bool:
        data = self._post(self.location.query_url, (PREFIXES + query).encode("utf-8"), "application/sparql-query",
                          "application/sparql-results+json")
        return bool(json.loads(data)["boolean"])

    def update(self, update: str) -> None:
        self._post(self.location.update_url, (PREFIXES + update).encode("utf-8"), "application/sparql-update")

    def load(self, ntriples: bytes) -> None:
        self._post(self.location.store_url + "?default", ntriples, "application/n-triples")

    def close(self) -> None:
        for connection in getattr(self._local, "connections", {}).values():
            connection.close()


def _value(term: dict) -> Any:
    """A literal of a results binding as the store's Python value."""
    value, datatype = term["value"], term.get("datatype")
    if datatype == JSON_TYPE:
        return json.loads(value)
    if datatype == XSD + "integer" or datatype == XSD + "long" or datatype == XSD + "int":
        return int(value)
    if datatype == XSD + "double" or datatype == XSD + "float" or datatype == XSD + "decimal":
        return float(value)
    if datatype == XSD + "boolean":
        return value in ("true", "1")
    return value


@dataclass(eq=False, frozen=True)
class SparqlNode:
    node_id: str
    iri: str
    node_type: str
    features: dict[str, Any]
    absent: frozenset[str]


class SparqlSource(LiveNodeRefs):
    """A `GraphSource` over a SPARQL endpoint laid out by `glmcot graph export`."""

    node_class = SparqlNode

    def __init__(self, client: SparqlClient):
        self.client = client
        self.location = client.location.url
        rows = client.select(f"SELECT ?json WHERE {{ <{SCHEMA_IRI}> glm:json ?json }}")
        if not rows:
            raise SourceUnavailable(f"{self.location}: no glmcot graph there (no {SCHEMA_IRI}); "
                                    "load one with `glmcot graph export STORE --to URL`")
        self._schema = Schema.from_json(json.loads(rows[0]["json"]["value"]))
        self._types = {name_iri(TYPE, entry.name): entry.name for entry in self._schema.types}

    def schema(self) -> Schema:
        return self._schema

    def refresh_schema(self) -> None:
        rows = self.client.select(f"SELECT ?json WHERE {{ <{SCHEMA_IRI}> glm:json ?json }}")
        if rows:
            self._schema = Schema.from_json(json.loads(rows[0]["json"]["value"]))
            self._types = {name_iri(TYPE, entry.name): entry.name for entry in self._schema.types}

    def version(self) -> str:
        rows = self.client.select(f"SELECT ?v ?s WHERE {{ <{SCHEMA_IRI}> glm:version ?v ; glm:store ?s }}")
        if not rows:
            raise SourceUnavailable(f"{self.location}: the glmcot schema is gone")
        return f"{rows[0]['s']['value']}@v{rows[0]['v']['value']}"

    def resolve(self, node_id: str) -> SparqlNode | None:
        if type(node_id) is not str or len(node_id) > MAX_ID_CHARS:
            return None
        iri = node_iri(node_id)
        rows = self.client.select(f"SELECT ?p ?o WHERE {{ <{iri}> ?p ?o FILTER(!STRSTARTS(STR(?p), \"{REL}\")) }}")
        node_type, features, absent, nulls = None, {}, set(), set()
        for row in rows:
            predicate, term = row["p"]["value"], row["o"]
            if predicate == RDF + "type":
                node_type = self._types.get(term["value"], node_type)
            elif predicate.startswith(FEATURE):
                features[urllib.parse.unquote(predicate[len(FEATURE):], errors="surrogatepass")] = _value(term)
            elif predicate == G["absent"]:
                absent.add(term["value"])
            elif predicate == G["null"]:
                nulls.add(term["value"])
        if node_type is None:
            return None
        for name in nulls:
            features[name] = None
        return SparqlNode(node_id, iri, node_type, features, frozenset(absent))

    def features(self, ref: SparqlNode) -> dict[str, Any]:
        node = self._ref(ref)
        order = self._schema.type(node.node_type).features
        return {name: node.features[name] for name in order if name in node.features}

    def _relation(self, node: SparqlNode, relation: str) -> str:
        if not isinstance(relation, str) or relation not in self._schema.type(node.node_type).relations:
            raise relation_error(node.node_type, node.node_id, relation, self._schema)
        return name_iri(REL, relation)

    def neighbours(self, ref: SparqlNode, relation: str, limit: int | None = None) -> Neighbours:
        node = self._ref(ref)
        predicate = self._relation(node, relation)
        rows = self.client.select(f"SELECT ?o WHERE {{ ?st rdf:subject <{node.iri}> ; rdf:predicate <{predicate}> ; "
                                  "rdf:object ?o ; glm:pos ?pos } ORDER BY ?pos")
        ids = [iri_id(row["o"]["value"]) for row in rows]
        return Neighbours(ids if limit is None else ids[: max(int(limit), 0)], len(ids))

    def degree(self, ref: SparqlNode, relation: str) -> int:
        node = self._ref(ref)
        predicate = self._relation(node, relation)
        rows = self.client.select(f"SELECT (COUNT(?st) AS ?c) WHERE {{ ?st rdf:subject <{node.iri}> ; "
                                  f"rdf:predicate <{predicate}> }}")
        return int(rows[0]["c"]["value"]) if rows else 0

    def has_relation_key(self, ref: SparqlNode, relation: str) -> bool:
        node = self._ref(ref)
        self._relation(node, relation)
        return relation not in node.absent

    def texts(self, node_ids: Sequence[str]) -> list[str]:
        wanted = [node_id for node_id in node_ids if type(node_id) is str and len(node_id) <= MAX_ID_CHARS]
        found: dict[str, str] = {}
        if wanted:
            values = " ".join(f"<{node_iri(node_id)}>" for node_id in wanted)
            for row in self.client.select(f"SELECT ?n ?text WHERE {{ VALUES ?n {{ {values} }} ?n rdfs:label ?text }}"):
                found[iri_id(row["n"]["value"])] = row["text"]["value"]
        return [found.get(node_id, node_id) for node_id in node_ids]

    def chunk_view(self, ref: SparqlNode, top_k: int) -> ChunkView:
        """Real neighbours ranked by the endpoint (weight, else out-degree; ties in stored order);
        SPARQL 1.1 has no per-group limit, so the first k of each relation are taken here."""
        node = self._ref(ref)
        rows = self.client.select(
            f"SELECT ?rel ?o ?text WHERE {{ ?st rdf:subject <{node.iri}> ; rdf:predicate ?rel ; rdf:object ?o ; "
            "glm:pos ?pos . ?o rdfs:label ?text ; glm:degree ?degree . OPTIONAL { ?st glm:weight ?weight } "
            "BIND(COALESCE(?weight, ?degree) AS ?score) } ORDER BY ?rel DESC(?score) ?pos")
        grouped: dict[str, list[tuple[str, str]]] = {}
        for row in rows:
            grouped.setdefault(row["rel"]["value"], []).append((iri_id(row["o"]["value"]), row["text"]["value"]))
        relations = []
        for relation in self._schema.type(node.node_type).relations:
            ranked = grouped.get(name_iri(REL, relation), [])
            relations.append(ChunkRelation(relation, len(ranked), ranked[: max(int(top_k), 0)]))
        return ChunkView(node.node_id, node.node_type, self.features(node), relations)

    def iter_nodes(self, batch: int = 4096) -> Iterator[list[tuple[str, str, str]]]:
        rows = self.client.select("SELECT (MAX(?order) AS ?m) WHERE { ?n glm:order ?order }")
        last = int(rows[0]["m"]["value"]) if rows and "m" in rows[0] else -1
        for start in range(0, last + 1, batch):
            part = self.client.select(
                f"SELECT ?n ?t ?text WHERE {{ ?n glm:order ?order ; rdf:type ?t ; rdfs:label ?text "
                f"FILTER(?order >= {int(start)} && ?order < {int(start + batch)}) }} ORDER BY ?order")
            yield [(iri_id(row["n"]["value"]), self._types.get(row["t"]["value"], ""), row["text"]["value"]) for row in part]

    def close(self) -> None:
        self.client.close()


def open_sparql(location: str) -> SparqlSource:
    parsed = SparqlLocation.parse(location)
    client = SparqlClient(parsed)
    try:
        return SparqlSource(client)
    except SourceUnavailable:
        client.close()
        raise
    except (OSError, http.client.HTTPException) as error:
        client.close()
        raise SourceUnavailable(f"cannot reach the SPARQL endpoint {parsed.url}: {error}") from None


# export ------------------------------------------------------------------------------------------

def _literal(value: Any, kind: str):
    from pyoxigraph import Literal, NamedNode

    if kind in ("list", "json") or not isinstance(value, (str, bool, int, float)):
        return Literal(json.dumps(value, ensure_ascii=False), datatype=NamedNode(JSON_TYPE))
    if isinstance(value, bool):
        return Literal("true" if value else "false", datatype=NamedNode(XSD + "boolean"))
    if isinstance(value, int):
        return Literal(str(value), datatype=NamedNode(XSD + "integer"))
    if isinstance(value, float):
        return Literal(repr(value), datatype=NamedNode(XSD + "double"))
    return Literal(value)


def _safe_text(text: str) -> str:
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def export_to_sparql(graph, location: str, overwrite: bool = False, progress=None):
    from pyoxigraph import BlankNode, Literal, NamedNode, RdfFormat, Triple, serialize

    from glmcot.graph.live.export_records import ExportReport, check_names, edge_records, node_records
    from glmcot.graph.graph_source import StoreSource

    started = time.perf_counter()
    parsed = SparqlLocation.parse(location)
    client = SparqlClient(parsed, timeout=300.0)
    try:
        try:
            exists = client.ask(f"ASK {{ <{SCHEMA_IRI}> ?p ?o }}")
        except SourceUnavailable as error:
            raise SourceUnavailable(f"cannot reach the SPARQL endpoint {parsed.url}: {error}") from None
        if exists:
            if not overwrite:
                raise FileExistsError(f"{parsed.url} already holds a glmcot graph; pass --overwrite to replace it")
            client.update("CLEAR DEFAULT")
        schema = StoreSource(graph).schema()
        check_names(schema)
        kinds = {entry.name: entry.features for entry in schema.types}
        total = sum(entry.count for entry in schema.types) + int(graph.num_edges)
        done = nodes = edges = dangling = 0
        rdf_type, label = NamedNode(RDF + "type"), NamedNode(RDFS_LABEL)
        terms = {name: NamedNode(iri) for name, iri in G.items()}
        subject_p, predicate_p, object_p = (NamedNode(RDF + name) for name in ("subject", "predicate", "object"))
        statement = NamedNode(RDF + "Statement")

        def send(triples: list) -> None:
            client.load(serialize(triples, format=RdfFormat.N_TRIPLES))

        for records in node_records(graph):
            triples = []
            for record in records:
                subject = NamedNode(node_iri(record.node_id))
                triples += [Triple(subject, rdf_type, NamedNode(name_iri(TYPE, record.node_type))),
                            Triple(subject, label, Literal(_safe_text(record.text))),
                            Triple(subject, terms["degree"], _literal(record.degree, "int")),
                            Triple(subject, terms["order"], _literal(record.order, "int"))]
                for relation in record.absent:
                    triples.append(Triple(subject, terms["absent"], Literal(relation)))
                for name, value in record.features.items():
                    if value is None:
                        triples.append(Triple(subject, terms["null"], Literal(name)))
                        continue
                    kind = kinds[record.node_type].get(name, "json")
                    value = _safe_text(value) if isinstance(value, str) else value
                    triples.append(Triple(subject, NamedNode(name_iri(FEATURE, name)), _literal(value, kind)))
            send(triples)
            nodes += len(records)
            done += len(records)
            if progress:
                progress(done, total)
        for records in edge_records(graph):
            triples = []
            for record in records:
                subject, target = NamedNode(node_iri(record.source)), NamedNode(node_iri(record.target))
                predicate = NamedNode(name_iri(REL, record.relation))
                node = BlankNode()
                triples += [Triple(subject, predicate, target), Triple(node, rdf_type, statement),
                            Triple(node, subject_p, subject), Triple(node, predicate_p, predicate),
                            Triple(node, object_p, target), Triple(node, terms["pos"], _literal(record.position, "int"))]
                if record.weight is not None:
                    triples.append(Triple(node, terms["weight"], _literal(float(record.weight), "float")))
                dangling += record.dangling
            send(triples)
            edges += len(records)
            done += len(records) - sum(1 for record in records if record.dangling)
            if progress:
                progress(min(done, total), total)
        schema_node = NamedNode(SCHEMA_IRI)
        send([Triple(schema_node, terms["json"], Literal(json.dumps(schema.to_json(), ensure_ascii=False))),
              Triple(schema_node, terms["version"], _literal(0, "int")),
              Triple(schema_node, terms["store"], Literal(graph.store_id))])
        if progress:
            progress(total, total)
    finally:
        client.close()
    return ExportReport(parsed.url, nodes, edges, dangling, time.perf_counter() - started)


__all__ = ["SparqlSource", "SparqlClient", "SparqlLocation", "open_sparql", "export_to_sparql", "node_iri", "iri_id"]
