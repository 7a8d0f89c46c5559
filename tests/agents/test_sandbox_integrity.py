"""What crosses into a sandbox worker cannot be changed by a snippet for any later snippet, and a
pool pinned to a version keeps it for workers started after an update (issue 30)."""

import dataclasses

import numpy as np
import pytest

from glmcot.agents.context import AgentContext
from glmcot.agents.sandbox import SandboxExecutor, SandboxLimits
from glmcot.graph.updates.delta import parse_operation
from glmcot.graph.updates.versions import READERS, apply_update
from glmcot.graph.storage.writer import StoreWriter

LIMITS = SandboxLimits(wall_s=60, cpu_s=20, startup_s=120)


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "store"
    with StoreWriter(path) as writer:
        writer.add_nodes("movie", ["m1", "m2"], {"title": ["Heat", "Alien"], "tags": [["crime"], ["space"]]})
        writer.add_nodes("person", ["p1"], {"name": ["Al Pacino"]})
        writer.add_edges("movie", "actor", np.array([0, 1]), np.array([2, 2]))
    return path


def update(store, *rows):
    return apply_update(store, [parse_operation(row, f"op {n}") for n, row in enumerate(rows, 1)])


MUTATE = """
k = NodeFeature("m1", "tags")
k.append("FORGED")
d = NodeFeature("m1", "meta")
d.update({"studio": "FORGED"})
d["cast"].append("FORGED")
n = NeighbourCheck("m1", "actor")
n.append("FORGED")
print(k, d)
"""

READ = """
print(NodeFeature("m1", "tags"), NodeFeature("m1", "meta"), NeighbourCheck("m1", "actor"))
print(NodeInfo("m1"))
"""


def test_a_snippet_cannot_poison_later_snippets_in_the_same_worker(store):
    update(store, {"op": "upsert_node", "id": "m1", "features": {"tags": ["crime", "heist"],
                                                                  "meta": {"cast": ["Al"], "studio": "Warner"}}})
    with SandboxExecutor(store, workers=1, limits=LIMITS) as executor:
        mutated = executor.run(MUTATE)
        assert mutated.ok, mutated.error
        assert "FORGED" in mutated.output
        for _ in range(3):
            clean = executor.run(READ)
            assert clean.ok, clean.error
            assert "FORGED" not in clean.output and "'crime', 'heist'" in clean.output
            assert "studio: " not in clean.output or "Warner" in clean.output
            assert all("FORGED" not in chunk for _, chunk in clean.chunks)
        assert len(executor.worker_pids()) == 1  # the same long-lived worker answered every snippet


def test_a_context_keeps_its_version_for_workers_started_after_an_update(store):
    update(store, {"op": "upsert_node", "id": "m1", "features": {"title": "Heat v1"}})
    context = AgentContext(store, retriever="lexical", workers=1, limits=LIMITS)
    try:
        assert context.version.version == 1 and len(list((store / READERS).iterdir())) == 1
        assert context.executor.run('print(NodeFeature("m1", "title"))').output == "Heat v1\n"
        update(store, {"op": "upsert_node", "id": "m1", "features": {"title": "Heat v2"}})
        update(store, {"op": "upsert_node", "id": "m1", "features": {"title": "Heat v3"}})
        for worker in list(context.executor._all):  # gone: the next snippet starts a new worker
            worker.process.kill()
            worker.process.wait(30)
        result = context.executor.run('print(NodeFeature("m1", "title"))')
        assert result.ok, result.error
        assert result.output == "Heat v1\n"  # still the context's version, not the newest
        assert context.executor.replaced == 1
        assert context.chunk_key("m1") == context.chunk_key("m1") and "Heat v1" in context.graph.text_at(0)
    finally:
        context.close()
    assert not list((store / READERS).iterdir())  # the pin goes with the context
    fresh = AgentContext(store, retriever="lexical", workers=1, limits=LIMITS)
    try:
        assert fresh.executor.run('print(NodeFeature("m1", "title"))').output == "Heat v3\n"
        assert dataclasses.asdict(fresh.version)["version"] == 3
    finally:
        fresh.close()
