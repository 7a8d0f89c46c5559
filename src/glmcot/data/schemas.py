"""GRBench graph schemas for the five GLM domains (package data: resources/schemas/<domain>.json).

Node types, feature names, relation names and retrieval text keys follow grbench.md §1 exactly;
the definition text is ours and is what agent prompts show as "Definition of the graph".
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

DOMAINS: tuple[str, ...] = ("dblp", "amazon", "goodreads", "biomedical", "legal")

_ALIASES = {
    "academic": "dblp", "e-commerce": "amazon", "ecommerce": "amazon", "literature": "goodreads",
    "healthcare": "biomedical", "hetionet": "biomedical", "law": "legal",
}


class UnknownDomainError(ValueError):
    pass


def canonical_domain(name: str) -> str:
    """Map a domain code or GLM alias (academic, e-commerce, literature, healthcare) to its code."""
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in DOMAINS:
        raise UnknownDomainError(
            f"unknown domain {name!r}; expected one of {', '.join(DOMAINS)} "
            f"(aliases: {', '.join(sorted(_ALIASES))})")
    return key


@dataclass(frozen=True)
class NodeTypeSchema:
    name: str
    text_key: str
    features: dict[str, str]          # feature name -> kind: str | int | float | list
    relations: dict[str, str]         # relation name -> target node type


@dataclass(frozen=True)
class DomainSchema:
    domain: str
    definition: str
    node_types: dict[str, NodeTypeSchema]
    aliases: tuple[str, ...] = ()
    metaedges: tuple[dict, ...] = field(default=())

    def relation_target(self, node_type: str, relation: str) -> str:
        return self.node_types[node_type].relations[relation]

    def text_key(self, node_type: str) -> str:
        return self.node_types[node_type].text_key


@lru_cache(maxsize=None)
def load_schema(domain: str) -> DomainSchema:
    domain = canonical_domain(domain)
    path = resources.files("glmcot.data").joinpath("resources", "schemas", f"{domain}.json")
    raw = json.loads(path.read_text(encoding="utf-8"))
    types = {
        name: NodeTypeSchema(name, spec["text_key"], dict(spec["features"]), dict(spec["relations"]))
        for name, spec in raw["node_types"].items()
    }
    return DomainSchema(raw["domain"], raw["definition"], types, tuple(raw.get("aliases", ())),
                        tuple(raw.get("metaedges", ())))


def graph_definition(domain: str) -> str:
    """The 2-3 sentence graph definition shown to agents."""
    return load_schema(domain).definition
