"""Shared small graphs for the graph-layer tests."""

from __future__ import annotations

import numpy as np
import pytest

from glmcot.graph.storage.store import Graph
from glmcot.graph.storage.writer import StoreWriter

PAPERS = ["p1", "p2", "p3", "p4"]
AUTHORS = ["a1", "a2", "a3"]
VENUES = ["pub_1"]


def build_tiny(out_dir) -> None:
    """A DBLP-shaped graph: 4 papers, 3 authors, 1 venue (indices: papers 0-3, authors 4-6, venue 7)."""
    with StoreWriter(out_dir) as writer:
        writer.add_nodes(
            "paper",
            PAPERS,
            {
                "title": ["Graph Chain of Thought", "Vertex Caches for LLMs", "Paged Attention", "Zürich Graphs ✓"],
                "year": [2024, 2025, 2023, None],
                "keywords": [["graphs", "llm"], ["kv cache"], [], None],
            },
        )
        writer.add_nodes("author", AUTHORS, {"name": ["Ada Lovelace", "Alan Turing", "Grace Hopper"],
                                             "organization": ["Analytical", None, "Navy"]})
        writer.add_nodes("venue", VENUES, {"name": ["VLDB"]})
        # paper -author-> author ; author -paper-> paper ; paper -venue-> venue ; paper -cited_by-> paper
        writer.add_edges("paper", "author", np.array([0, 0, 1, 2, 2, 2]), np.array([4, 5, 4, 4, 5, 6]))
        writer.add_edges("author", "paper", np.array([4, 4, 4, 5, 5, 6]), np.array([0, 1, 2, 0, 2, 2]))
        writer.add_edges("paper", "venue", np.array([0, 1]), np.array([7, 7]))
        writer.add_edges("paper", "cited_by", np.array([2, 2, 0]), np.array([0, 1, 1]))
        writer.add_edges("venue", "paper", np.array([7, 7]), np.array([0, 1]))


@pytest.fixture(scope="session")
def tiny_builder():
    """The function that writes the tiny graph (for tests that need a fresh copy)."""
    return build_tiny


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny") / "store"
    build_tiny(out)
    return out


@pytest.fixture()
def tiny(tiny_dir) -> Graph:
    return Graph.open(tiny_dir)


@pytest.fixture(scope="session")
def embedder():
    """all-MiniLM-L6-v2, loaded once for the whole test session."""
    from glmcot.graph.index.retrieval import MiniLMEmbedder

    return MiniLMEmbedder()
