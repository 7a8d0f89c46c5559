"""The ablation's shared-vertex workload: questions that meet on a few hot entities, and on it the
counters that prove vertex reuse and pipelining acted (counters only, never timings)."""

from pathlib import Path

import pytest

from glmcot.eval.ablation import SHARED_VERTEX_KV_TOKENS, VARIANTS, run_ablation
from glmcot.eval.config import EvalConfig
from glmcot.eval.workload import DEMO_SCALE, DEMO_SEED, ensure_dataset, shared_vertex_questions


def test_shared_vertex_questions_meet_on_a_few_entities():
    questions = shared_vertex_questions("dblp", DEMO_SCALE, DEMO_SEED, 12)
    assert len(questions) == 12
    assert questions == shared_vertex_questions("dblp", DEMO_SCALE, DEMO_SEED, 12)  # seeded
    assert len({q.qid for q in questions}) == 12
    assert all(q.plan and q.plan.glm and q.plan.graphcot and not q.deterministic for q in questions)
    # every question is about one of at most three entities, and the most asked one recurs
    anchors = [next(iter(q.entities.values())) for q in questions if len(q.entities) == 1]
    assert len(set(anchors)) <= 3 and max(anchors.count(a) for a in anchors) >= 3
    assert len({q.template for q in questions}) >= 3  # several templates per entity, not one question repeated


@pytest.fixture(scope="module")
def dblp_dataset(tmp_path_factory) -> tuple[Path, EvalConfig]:
    cache = tmp_path_factory.mktemp("glmcot-cache")
    # One question at a time, so the engine's schedule, and with it every cache counter, is the
    # same on every run.
    config = EvalConfig(model="random:qwen3:small", cache_dir=cache, concurrency=1)
    return ensure_dataset("dblp", DEMO_SCALE, DEMO_SEED, cache), config


def _ablate(dblp_dataset, folder: Path, count: int, variant: str) -> tuple[dict, dict]:
    """The full GLM row and the row without `variant`'s feature, on `count` shared-vertex questions."""
    dataset, config = dblp_dataset
    questions = {"dblp": shared_vertex_questions("dblp", DEMO_SCALE, DEMO_SEED, count)}
    variants = tuple(v for v in VARIANTS if v.name in ("glm", variant))
    full, without = run_ablation({"dblp": dataset}, questions, config, folder, quiet=True,
                                 kv_cache_tokens=SHARED_VERTEX_KV_TOKENS, variants=variants)
    return full, without


def test_vertex_reuse_and_pipelining_act_on_shared_vertices(dblp_dataset, tmp_path: Path):
    full, without = _ablate(dblp_dataset, tmp_path / "ablation", 12, "no-vertex-reuse")
    assert full["full"] and without["variant"] == "no-vertex-reuse"
    # a vertex chunk one question computed was reused by a later one, at another position
    assert full["counters"]["chunk_hits_tokens"] > 0
    assert without["counters"].get("chunk_hits_tokens", 0) == 0
    assert without["feature"]["exercised"] is True and without["feature"]["counter"] == "chunk_hits_tokens"
    # the pool is under pressure, and a lookup met a search the A-Agent's stream had started
    assert full["counters"]["evictions"] > 0
    assert full["counters"].get("prefetch_hits", 0) + full["counters"].get("prefetch_ready", 0) > 0
    assert full["questions"] == without["questions"] == 12


def test_the_pipelining_variant_starts_no_search_early(dblp_dataset, tmp_path: Path):
    full, without = _ablate(dblp_dataset, tmp_path / "ablation", 3, "no-pipelining")
    assert full["counters"]["prefetches"] > 0 and without["counters"].get("prefetches", 0) == 0
    assert without["feature"]["counter"] == "prefetch_hits+prefetch_ready" and without["feature"]["variant"] == 0
