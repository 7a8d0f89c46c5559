"""Which feature of a node type is its text: embedded for RetrieveNode and shown first in its
vertex chunk. GRBench's domains use Graph-CoT's choice (its NODE_TEXT_KEYS, first key); other
graphs fall back to a common name, then to the first text feature."""

from __future__ import annotations

from collections.abc import Sequence

# The feature each GRBench node type embeds for RetrieveNode, as Graph-CoT's NODE_TEXT_KEYS (first key).
NODE_TEXT_KEYS: dict[str, str] = {
    "paper": "title",
    "book": "title",
    "item": "title",
    "series": "title",
    "author": "name",
    "venue": "name",
    "brand": "name",
    "publisher": "name",
    "opinion": "plain_text",
    "opinion_cluster": "syllabus",
    "docket": "pacer_case_id",
    "court": "full_name",
}
FALLBACK_TEXT_KEYS = ("title", "name", "full_name", "case_name")


def default_text_key(node_type: str, features: Sequence[dict]) -> str | None:
    """The text feature of `node_type`, given its features' manifest entries (name, kind)."""
    names = [entry["name"] for entry in features]
    preferred = NODE_TEXT_KEYS.get(node_type)
    if preferred in names:
        return preferred
    for name in FALLBACK_TEXT_KEYS:
        if name in names:
            return name
    for entry in features:
        if entry["kind"] == "str":
            return entry["name"]
    return None
