"""Write a store back out as a GRBench ``graph.json`` (for the original Graph-CoT code, or for
checking an import), streaming, one node at a time, atomically."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from glmcot.graph.importers.importer import TYPE_SUFFIX
from glmcot.graph.storage.store import Graph


def export_graph_json(
    graph: Graph,
    path: str | os.PathLike,
    progress: Callable[[int, int], None] | None = None,
    indent: int | None = None,
) -> Path:
    """Write ``graph`` as GRBench JSON; ``progress(nodes done, total)``. Returns the path."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    dumps = json.dumps
    done = 0
    try:
        with open(tmp, "w", encoding="utf-8", errors="surrogatepass") as out:
            out.write("{")
            for type_number, node_type in enumerate(graph.node_types):
                start, stop = graph.type_range(node_type)
                relations = graph.relation_names(node_type)
                out.write(("," if type_number else "") + "\n" + dumps(node_type + TYPE_SUFFIX) + ": {")
                for index in range(start, stop):
                    node = {
                        "features": graph.features_at(index),
                        "neighbors": {relation: graph.neighbor_id_list(index, relation) for relation in relations
                                      if graph.has_relation_key_at(index, relation)},
                    }
                    text = dumps(node, ensure_ascii=False, indent=indent)
                    out.write(("," if index > start else "") + "\n" + dumps(graph.node_id(index), ensure_ascii=False) + ": " + text)
                    done += 1
                    if progress is not None and done % 10_000 == 0:
                        progress(done, graph.num_nodes)
                out.write("\n}")
            out.write("\n}\n")
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    if progress is not None:
        progress(done, graph.num_nodes)
    return path


__all__ = ["export_graph_json"]
