"""Graph-CoT compatible observations, for the baseline agent (grbench.md §2).

``GraphCoTObserver.observe(tool, args)`` returns the sentence the original Graph-CoT appends
after a tool call: feature values and neighbour lists as Python ``str()`` of the value, with
neighbour lists never truncated, and the original's fixed sentences on errors. Parsing the
bracket action line stays with the agents package.
"""

from __future__ import annotations

from glmcot.graph.errors import GraphToolError
from glmcot.graph.graph_source import GraphSource, as_source

TOOLS = ("RetrieveNode", "NodeFeature", "NeighbourCheck", "NodeDegree")

NO_MATCH = "There is no information that can be matched in the database. Please try another query."
MISSING_KEY = "There is no information about this node, neighbor type or feature name in the graph. Please modify it."
INVALID_ACTION = (
    "Invalid Action. Valid Actions are RetrieveNode[<Content>] NeighbourCheck[<Node>] "
    "NodeFeature[<Node>] and Finish[<answer>]."
)


def _two_args_message(tool: str, second: str) -> str:
    return (
        f"There is something wrong with the arguments you passed to {tool}: it takes two values as "
        f"input, a node ID and a {second}. Please modify it."
    )


def _strip(argument: str) -> str:
    return argument.strip().strip("'\"").strip()


class GraphCoTObserver:
    """Observation sentences of the original Graph-CoT tools over a store."""

    def __init__(self, graph: GraphSource, retriever=None):
        self.source = as_source(graph)
        self.retriever = retriever

    def observe(self, tool: str, args: list[str]) -> str:
        args = [_strip(str(argument)) for argument in args]
        if tool == "RetrieveNode":
            return self._retrieve(", ".join(args))
        if tool not in TOOLS:
            return INVALID_ACTION
        second = "feature name" if tool == "NodeFeature" else "neighbor type"
        if len(args) != 2 or not all(args):
            return _two_args_message(tool, second)
        node_id, name = args
        index = self.source.resolve(node_id)
        if index is None:
            return MISSING_KEY
        try:
            if tool == "NodeFeature":
                value = self.source.feature(index, name)
                return f"The {name} feature of {node_id} are: {value}. "
            if tool == "NeighbourCheck":
                neighbours = self.source.neighbours(index, name).ids  # never truncated, dangling kept
                return f"The {name} neighbors of {node_id} are: {neighbours}. "
            degree = self.source.degree(index, name)
            return f"The {name} neighbor node degree of {node_id} are: {degree}. "
        except GraphToolError:
            return MISSING_KEY

    def _retrieve(self, text: str) -> str:
        if self.retriever is None or not text:
            return NO_MATCH
        try:
            node_id = self.retriever.retrieve(text)
        except Exception:  # the original turns any retrieval failure into this sentence
            return NO_MATCH
        return f"The ID of this retrieval target node is {node_id}."


__all__ = ["GraphCoTObserver", "GraphFunctions", "NO_MATCH", "MISSING_KEY", "INVALID_ACTION", "TOOLS"]


class GraphFunctions:
    """Graph-CoT's own graph functions (``tools/graph_funcs.py``) over a store, for the faithful
    baseline: each returns ``str()`` of what the original's ``graph_index[id][...]`` holds and
    raises KeyError wherever the original's dictionary lookup would. Nothing is stripped,
    truncated or explained: that is the repaired baseline's job (``GraphCoTObserver``)."""

    def __init__(self, graph: GraphSource):
        self.source = as_source(graph)

    def _index(self, node_id: str):
        index = self.source.resolve(node_id)
        if index is None:
            raise KeyError(node_id)
        return index

    def check_nodes(self, node_id: str, feature: str | None = None) -> str:
        index = self._index(node_id)
        if not feature:  # the original returns every feature for an empty name
            return str(self.source.features(index))
        try:
            return str(self.source.feature(index, feature))
        except GraphToolError:
            raise KeyError(feature) from None

    def check_neighbours(self, node_id: str, relation: str | None = None) -> str:
        index = self._index(node_id)
        source = self.source
        if not relation:
            node_type = source.node_type(index)
            return str({name: source.neighbours(index, name).ids for name in source.schema().type(node_type).relations
                        if source.has_relation_key(index, name)})
        try:
            if not source.has_relation_key(index, relation):
                raise KeyError(relation)
            return str(source.neighbours(index, relation).ids)
        except GraphToolError:
            raise KeyError(relation) from None

    def check_degree(self, node_id: str, relation: str) -> str:
        index = self._index(node_id)
        try:
            if not self.source.has_relation_key(index, relation):
                raise KeyError(relation)
            return str(self.source.degree(index, relation))
        except GraphToolError:
            raise KeyError(relation) from None
