"""`glmcot graph export STORE --to URL`: load a store (any version of it) into a graph database,
in the layout its source reads (graph/live/cypher_source.py, graph/live/sparql_source.py)."""

from __future__ import annotations

import json

from glmcot.graph.live.cypher_source import DANGLING_LABEL, NODE_LABEL, SCHEMA_LABEL
from glmcot.graph.live.export_records import ExportReport, Progress, check_names, edge_records, node_records
from glmcot.graph.graph_source import StoreSource

def _cypher_name(name: str) -> str:
    return "`" + name + "`"  # names are checked by check_names first: no backtick inside


def export_to_falkordb(graph, location: str, overwrite: bool = False, progress: Progress | None = None) -> ExportReport:
    import time

    from glmcot.graph.live.falkordb_source import FalkorLocation, FalkorRunner

    started = time.perf_counter()
    target = FalkorLocation.parse(location)
    runner = FalkorRunner(target, timeout=120.0)
    try:
        if runner.exists():
            if not overwrite:
                raise FileExistsError(f"{target.url} already holds a graph; pass --overwrite to replace it")
            runner.delete()
        source = StoreSource(graph)
        schema = source.schema()
        check_names(schema)
        kinds = {entry.name: entry.features for entry in schema.types}
        total = sum(entry.count for entry in schema.types) + int(graph.num_edges)
        done = 0
        for label, key in ((NODE_LABEL, "_id"), (NODE_LABEL, "_order"), (DANGLING_LABEL, "_id")):
            runner.write(f"CREATE INDEX FOR (n:{label}) ON (n.{key})")
        nodes = edges = dangling = 0
        for records in node_records(graph):
            by_type: dict[str, list[dict]] = {}
            for record in records:
                row = {"_id": record.node_id, "_type": record.node_type, "_text": record.text,
                       "_degree": record.degree, "_order": record.order}
                if record.absent:
                    row["_absent"] = record.absent
                nulls = [name for name, value in record.features.items() if value is None]
                if nulls:
                    row["_nulls"] = nulls
                for name, value in record.features.items():
                    if value is None:
                        continue
                    kind = kinds[record.node_type].get(name, "json")
                    row[name] = json.dumps(value, ensure_ascii=False) if kind == "json" else value
                by_type.setdefault(record.node_type, []).append(row)
            for node_type, rows in by_type.items():
                label = f":{_cypher_name(node_type)}" if "`" not in node_type and node_type else ""
                runner.write(f"UNWIND $rows AS row CREATE (n:{NODE_LABEL}{label}) SET n = row", {"rows": rows})
            nodes += len(records)
            done += len(records)
            if progress:
                progress(done, total)
        for records in edge_records(graph):
            groups: dict[tuple[str, bool], list[dict]] = {}
            for record in records:
                row = {"s": record.source, "t": record.target, "p": record.position}
                if record.weight is not None:
                    row["w"] = record.weight
                groups.setdefault((record.relation, record.dangling), []).append(row)
            for (relation, is_dangling), rows in groups.items():
                name = _cypher_name(relation)
                if is_dangling:
                    runner.write(f"UNWIND $rows AS row MERGE (d:{DANGLING_LABEL} {{_id: row.t}})", {"rows": rows})
                    runner.write(f"UNWIND $rows AS row MATCH (a:{NODE_LABEL} {{_id: row.s}}), (b:{DANGLING_LABEL} {{_id: row.t}}) "
                                 f"CREATE (a)-[:{name} {{_pos: row.p}}]->(b)", {"rows": rows})
                    dangling += len(rows)
                else:
                    runner.write(f"UNWIND $rows AS row MATCH (a:{NODE_LABEL} {{_id: row.s}}), (b:{NODE_LABEL} {{_id: row.t}}) "
                                 f"CREATE (a)-[:{name} {{_pos: row.p, _w: row.w}}]->(b)", {"rows": rows})
            edges += len(records)
            done += len(records) - sum(1 for record in records if record.dangling)
            if progress:
                progress(min(done, total), total)
        runner.write(f"CREATE (:{SCHEMA_LABEL} {{json: $json, version: 0, store: $store}})",
                     {"json": json.dumps(schema.to_json(), ensure_ascii=False), "store": graph.store_id})
        if progress:
            progress(total, total)
    finally:
        runner.close()
    return ExportReport(target.url, nodes, edges, dangling, time.perf_counter() - started)


def export_graph(graph, location: str, overwrite: bool = False, progress: Progress | None = None) -> ExportReport:
    """Load the store view `graph` into the database at `location` (a FalkorDB or SPARQL URL)."""
    from glmcot.graph.opener import LocationKind, location_kind

    kind = location_kind(location)
    if kind is LocationKind.FALKORDB:
        return export_to_falkordb(graph, location, overwrite, progress)
    if kind is LocationKind.SPARQL:
        from glmcot.graph.live.sparql_source import export_to_sparql

        return export_to_sparql(graph, location, overwrite, progress)
    raise ValueError(f"export writes to a database: give falkordb://HOST:PORT/GRAPH or sparql+http://HOST:PORT/..., got {location!r}")


__all__ = ["export_graph", "export_to_falkordb"]
