"""Agent prompts: package data files (prompts/*.yaml) filled with a domain's graph definition and
few-shot examples. The rendered P-I text of an agent is fixed per (agent, domain), so it is the
shared, never-evicted prefix of every call."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

import numpy as np
import yaml

AGENTS = ("classify", "reason", "act", "graphcot")


@lru_cache(maxsize=None)
def _load(agent: str) -> dict:
    text = resources.files("glmcot.agents").joinpath("prompts", f"{agent}.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    if not isinstance(data, dict) or "template" not in data:
        raise ValueError(f"prompts/{agent}.yaml has no template")
    return data


def graph_definition(domain: str | None, graph=None) -> str:
    """The domain's definition from glmcot.data.schemas, else one derived from the graph itself."""
    if domain:
        try:
            from glmcot.data.schemas import UnknownDomainError, graph_definition as schema_definition

            try:
                return schema_definition(domain)
            except UnknownDomainError:
                pass
        except ImportError:
            pass
    if graph is None:
        return "A knowledge graph of typed nodes with features, linked by named relations."
    return describe_graph(graph)


SCHEMA_NAMES_SHOWN = 30  # features or relations per type in a derived definition; rarer ones are counted


def _common_first(graph, node_type: str, features: list[str], relations: list[str]) -> tuple[list[str], list[str], int, int]:
    """An imported table or RDF graph's features and relations, those most nodes have first, at
    most SCHEMA_NAMES_SHOWN of each (and how many were left out); other stores keep their order."""
    source = getattr(graph, "manifest", {}).get("source", {})
    if source.get("empty_relations", "shown") == "shown":
        return features, relations, 0, 0
    entries = graph._types[node_type] if node_type in getattr(graph, "_types", {}) else None
    if entries is None:
        return features, relations, 0, 0
    present = {name: int(entries.features.get(name, {}).get("present", 0)) for name in features}
    covered = {}
    for relation in relations:
        try:
            covered[relation] = int(np.count_nonzero(np.diff(graph._relation(node_type, relation).indptr)))
        except (KeyError, AttributeError):
            covered[relation] = 0
    features = sorted(features, key=lambda name: -present[name])  # stable: ties keep the stored order
    relations = sorted(relations, key=lambda name: -covered[name])
    return (features[:SCHEMA_NAMES_SHOWN], relations[:SCHEMA_NAMES_SHOWN],
            max(len(features) - SCHEMA_NAMES_SHOWN, 0), max(len(relations) - SCHEMA_NAMES_SHOWN, 0))


def describe_graph(graph) -> str:
    """A definition in the style of the schema ones, read from a store (for unknown domains); a
    live source gives its schema's names (without the relations' target types). Sentences on
    reverse relations and edge features appear only where the store has them."""
    if not hasattr(graph, "type_range"):
        schema = graph.schema()
        parts = [f"A knowledge graph with node types {', '.join(schema.node_types)}."]
        for entry in schema.types:
            sentence = f"{entry.name} nodes have the features {', '.join(entry.features) or 'none'}"
            if entry.relations:
                sentence += f" and link through {', '.join(entry.relations)}"
            parts.append(sentence + ".")
        return " ".join(parts)
    parts = [f"A knowledge graph with node types {', '.join(graph.node_types)}."]
    edge_sentences = []
    for node_type in graph.node_types:
        features, relations, more_features, more_relations = _common_first(
            graph, node_type, graph.feature_names(node_type), graph.relation_names(node_type))
        for relation in relations:
            names = graph.edge_feature_names(node_type, relation) if hasattr(graph, "edge_feature_names") else []
            if names:
                edge_sentences.append(f"{node_type} {relation} edges carry {', '.join(names)}")
        start, end = graph.type_range(node_type)
        links = []
        for relation in relations:
            target = None
            for index in range(start, min(end, start + 50)):
                neighbours = graph.neighbor_indices(index, relation)
                if len(neighbours):
                    target = graph.type_of_index(int(neighbours[0]))
                    break
            links.append(f"{relation} (to {target} nodes)" if target else relation)
        sentence = f"{node_type} nodes have the features {', '.join(features) or 'none'}"
        if more_features:
            sentence += f" (and {more_features} rarer ones)"
        if links:
            sentence += f" and link through {', '.join(links)}"
        if more_relations:
            sentence += f" (and {more_relations} rarer relations)"
        parts.append(sentence + ".")
    suffix = getattr(graph, "manifest", {}).get("source", {}).get("reverse_suffix")
    if suffix:
        parts.append(f"Every relation R is stored from both ends: R{suffix} is R read backwards, so A R B holds "
                     f"exactly when B R{suffix} A does.")
    if edge_sentences:
        parts.append(f"Edge features: {'; '.join(edge_sentences)}. NeighbourCheck(node, relation, edge_feature) gives "
                     f"each neighbour's edge value; NodeInfo shows them in braces after each neighbour.")
    return " ".join(parts)


def graphcot_traces(domain: str | None) -> list[str]:
    """The Graph-CoT worked traces of a domain (prompts/graphcot.yaml), one string each."""
    examples = _examples(_load("graphcot"), domain)
    return [trace.strip("\n") for trace in re.split(r"\n\s*\n", examples) if trace.strip()]


def _examples(data: dict, domain: str | None) -> str:
    examples = data.get("examples") or {}
    key = domain if domain in examples else "default"
    return str(examples.get(key, "")).rstrip("\n")


@dataclass(frozen=True)
class PromptSet:
    """The rendered prompts of every agent for one domain."""

    domain: str | None
    definition: str
    classify: str
    classify_plan: str
    reason: str
    act: str
    graphcot: str
    graphcot_question: str
    act_retry: str
    hints: dict = field(default_factory=dict)

    def name(self, agent: str) -> str:
        text = getattr(self, agent)
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
        return f"{agent}/{self.domain or 'default'}@{digest}"


def load_prompts(domain: str | None = None, graph=None, *, graphcot_examples: bool = True) -> PromptSet:
    definition = graph_definition(domain, graph)
    canonical = domain
    if domain:
        try:
            from glmcot.data.schemas import canonical_domain

            canonical = canonical_domain(domain)
        except Exception:
            canonical = domain
    rendered = {}
    for agent in AGENTS:
        data = _load(agent)
        examples = _examples(data, canonical)
        if agent == "act" and graph is not None and canonical not in (data.get("examples") or {}):
            from glmcot.agents.schema_examples import schema_examples

            if hasattr(graph, "type_range"):  # a store: examples with the graph's own names, not GRBench's
                examples = schema_examples(graph) or examples
        fields = {"graph": definition, "examples": examples}
        if agent == "graphcot":
            # The original repeats the graph definition before every worked trace.
            traces = [t.strip("\n") for t in re.split(r"\n\s*\n", examples) if t.strip()]
            examples = "\n".join(f"Definition of the graph: {definition}\n{t}" for t in traces)
            fields["examples"] = examples if graphcot_examples else "(none)"
        if agent == "classify":
            plain = re.sub(r"<missing>.*?</missing>", "", examples)
            rendered["classify_plan"] = data["template"].format(reply=data["reply_plan"], **fields).rstrip("\n") + "\n"
            fields.update(examples=plain, reply=data["reply_label"])
        rendered[agent] = data["template"].format(**fields).rstrip("\n") + "\n"
    act = _load("act")
    return PromptSet(
        domain=canonical,
        definition=definition,
        classify=rendered["classify"],
        classify_plan=rendered["classify_plan"],
        reason=rendered["reason"],
        act=rendered["act"],
        graphcot=rendered["graphcot"],
        graphcot_question=_load("graphcot")["question"],
        act_retry=act["retry"],
        hints=dict(act.get("hints") or {}),
    )
