"""Shared fixtures for the data tests: tiny datasets (built once) and one MiniLM embedder."""

from __future__ import annotations

import pytest

from glmcot.data.schemas import DOMAINS


@pytest.fixture(scope="session")
def embedder():
    from glmcot.graph.index.retrieval import MiniLMEmbedder

    return MiniLMEmbedder()


@pytest.fixture(scope="session")
def tiny_datasets(tmp_path_factory):
    """Each domain at the tiny scale, written in both formats (graph/ and graph.json)."""
    from glmcot.data.synth.generate import SynthConfig, generate

    root = tmp_path_factory.mktemp("tiny")
    out = {}
    for domain in DOMAINS:
        generate(SynthConfig(domain, "tiny", 0, 10, ("store", "grbench")), root / domain)
        out[domain] = root / domain
    return out
