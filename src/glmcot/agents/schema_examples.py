"""A-Agent examples written from a graph's own schema, for graphs without a hand-written domain.

A user's graph has its own relation and feature names; examples that use GRBench's names teach
the model calls that fail. These examples take a real node type, relation, feature and node text
from the store, so the first question on a freshly imported graph sees working calls. The choice
is deterministic (store order), so the rendered prompt, a shared KV prefix, is stable.
"""

from __future__ import annotations

import json

SCAN_NODES = 1000  # nodes looked at per type to find one with a neighbour
MAX_TEXT = 60


def _quote(text: str) -> str:
    return json.dumps(" ".join(text.split())[:MAX_TEXT], ensure_ascii=False)


def _sample(graph, node_type: str):
    """(node index, relation, target type) of the first node of `node_type` with a neighbour."""
    start, end = graph.type_range(node_type)
    key = graph.text_key(node_type)
    if key is None:
        return None
    for index in range(start, min(end, start + SCAN_NODES)):
        if not graph.has_feature_at(index, key):
            continue
        for relation in graph.relation_names(node_type):
            neighbours = graph.neighbor_indices(index, relation)
            if len(neighbours):
                target = graph.type_of_index(int(neighbours[0]))
                if graph.text_key(target) is not None:
                    return index, relation, target
    return None


def schema_examples(graph) -> str:
    """Three Needed/code examples in the act prompt's format, or '' if the graph has no edges with texts."""
    for node_type in graph.node_types:
        found = _sample(graph, node_type)
        if found is None:
            continue
        index, relation, target = found
        text = _quote(graph.text_at(index))
        target_key = graph.text_key(target)
        examples = [
            f'Needed: the {target_key} of each {relation} neighbour of the {node_type} {text}\n'
            f"<code>\nnode = RetrieveNode({text})\n"
            f'print(", ".join(str(NodeFeature(n, "{target_key}")) for n in NeighbourCheck(node, "{relation}")))\n</code>'
        ]
        text_key = graph.text_key(node_type)
        others = [name for name in graph.features_at(index) if name != text_key]
        if others:
            examples.append(
                f"Needed: the {others[0]} of the {node_type} {text}\n"
                f'<code>\nnode = RetrieveNode({text})\nprint(NodeFeature(node, "{others[0]}"))\n</code>'
            )
        examples.append(
            f"Needed: the number of {relation} neighbours of the {node_type} {text}\n"
            f'<code>\nnode = RetrieveNode({text})\nprint(NodeDegree(node, "{relation}"))\n</code>'
        )
        return "\n".join(examples)
    return ""


__all__ = ["schema_examples"]
