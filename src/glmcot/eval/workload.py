"""The demo's workload, shared by the demo and the ablation: cached synthetic datasets, the
questions chosen from them (spread over templates, or concentrated on a few hot vertices), and
one measured run of a method over them."""

from __future__ import annotations

import platform
import sys
from pathlib import Path
from typing import Any

from glmcot.data.questions import QuestionRecord
from glmcot.eval.config import EvalConfig
from glmcot.eval.runner import Prices, run_method, summarize

DEMO_SCALE = "tiny"
DEMO_SEED = 0

# What a run's questions are: `templates` spreads them over the question templates (one question
# per template in turn, the demo's Table-1 view: questions rarely meet on a vertex); `shared-vertices`
# asks several questions about each of a few hot entities, so their notebooks hold the same vertex
# chunks and look up the same names (what vertex reuse and the RetrieveNode cache are for).
WORKLOADS = ("templates", "shared-vertices")
HOT_ENTITIES = 3  # entities a shared-vertex workload asks about
HOT_CANDIDATES = 60  # most-connected anchors tried when choosing them


def ensure_dataset(domain: str, scale: str, seed: int, cache_dir: Path) -> Path:
    """A synthetic dataset folder (graph/, questions.jsonl, meta.json), generated once and cached."""
    from glmcot.data.synth import GENERATOR_VERSION, SynthConfig, generate
    from glmcot.graph.index.retrieval import RETRIEVAL_FORMAT_VERSION, MiniLMEmbedder, build_node_index
    from glmcot.graph.storage.store import Graph

    folder = Path(cache_dir) / "datasets" / (f"{domain}-{scale}-seed{seed}-gen{GENERATOR_VERSION}"
                                             f"-index{RETRIEVAL_FORMAT_VERSION}")
    if (folder / "ready").is_file():
        return folder
    staging = folder.with_name(folder.name + ".partial")
    generate(SynthConfig(domain=domain, scale=scale, seed=seed), staging, force=True)
    # RetrieveNode searches a real vector index (MiniLM + FAISS), as a user's graph would.
    build_node_index(Graph.open(staging / "graph"), MiniLMEmbedder())
    (staging / "ready").write_text("ok\n")
    if folder.exists():
        import shutil

        shutil.rmtree(folder)
    staging.rename(folder)
    return folder


def pick_questions(questions: list[QuestionRecord], n: int) -> list[QuestionRecord]:
    """n questions spread over templates (round robin in file order), with gold plans."""
    usable = [q for q in questions if q.plan is not None and q.plan.glm and q.plan.graphcot]
    by_template: dict[str, list[QuestionRecord]] = {}
    for q in usable:
        by_template.setdefault(q.template, []).append(q)
    picked: list[QuestionRecord] = []
    while len(picked) < n and any(by_template.values()):
        for bucket in by_template.values():
            if bucket and len(picked) < n:
                picked.append(bucket.pop(0))
    return picked


def shared_vertex_questions(domain: str, scale: str, seed: int, count: int, entities: int = HOT_ENTITIES,
                            exponent: float = 1.0) -> list[QuestionRecord]:
    """`count` questions about `entities` hot entities of the dataset ``ensure_dataset(domain,
    scale, seed)`` holds: each question picks its entity by a Zipf law (rank r with weight
    1/r**exponent), then the entity's next template in turn. Only non-deterministic templates
    (the ones whose notebooks hold vertex chunks) anchored on the node type most of them share,
    and only entities that at least three of those templates can ask about. Seeded: the same
    arguments give the same questions, with gold answers and plans as the dataset's own."""
    import zlib

    import numpy as np

    from glmcot.data.schemas import DOMAINS, canonical_domain
    from glmcot.data.synth.generate import build_graph
    from glmcot.data.templates import template_set
    from glmcot.data.templates.base import Ctx, Reject, fill, to_records, wordings

    domain = canonical_domain(domain)
    graph = build_graph(domain, scale, seed)  # the same arrays the cached dataset was written from
    notebook_templates = [t for t in template_set(domain).templates if not t.deterministic]
    anchors = [t.anchor for t in notebook_templates]
    anchor = max(sorted(set(anchors)), key=anchors.count)
    templates = [t for t in notebook_templates if t.anchor == anchor]
    # Popular vertices are the ones many questions meet on: candidates by total degree.
    degree = sum(graph.degrees(anchor, relation).astype(np.int64) for relation in graph.relations(anchor))
    candidates = [int(i) for i in np.argsort(-degree, kind="stable")[:HOT_CANDIDATES]]

    def instance(template, node: int, draw: int):
        rng = np.random.default_rng([int(seed), DOMAINS.index(domain), 3, zlib.crc32(template.template.encode()),
                                     node, draw])
        context = Ctx(graph, rng)
        try:
            built = template.build(context, node)
        except Reject:
            return None
        phrasings = wordings(domain)[template.template]
        return template, built, fill(phrasings[int(rng.integers(0, len(phrasings)))], built.params)

    hot: list[tuple[int, list]] = []  # (anchor node, the templates that can ask about it)
    for node in candidates:
        usable = [t for t in templates if instance(t, node, 0) is not None]
        if len(usable) >= min(3, len(templates)):
            hot.append((node, usable))
        if len(hot) == entities:
            break
    if not hot:
        return []
    weights = np.array([1.0 / (rank + 1) ** exponent for rank in range(len(hot))])
    rng = np.random.default_rng([int(seed), DOMAINS.index(domain), 4])
    picks = rng.choice(len(hot), size=count, p=weights / weights.sum())
    asked = [0] * len(hot)
    sampled = []
    for pick in picks:
        node, usable = hot[int(pick)]
        turn = asked[int(pick)]
        asked[int(pick)] += 1
        template = usable[turn % len(usable)]
        # a later round on the same template draws a new instance (other papers, other pairs)
        made = instance(template, node, turn // len(usable)) or instance(template, node, 0)
        sampled.append(made)
    records = to_records(domain, sampled)
    for record in records:
        record.qid = record.qid.replace(f"{domain}-", f"{domain}-hot-", 1)
    return records


# ---- running -------------------------------------------------------------------------------------

def measure(method: str, questions: list[QuestionRecord], dataset: Path, config: EvalConfig, out_file: Path,
            engine: dict[str, Any] | None = None, agent: dict[str, Any] | None = None,
            retrieve_cache: bool = True, on_done=None, prices: Prices | None = None) -> dict[str, Any]:
    """One method on one domain's questions with a fresh engine and a fresh agent context (cold
    caches), after one warm-up request; the summary plus the engine's counters."""
    from glmcot.eval import systems

    records = list(questions)
    with systems.open_system(config, graph=dataset, scripted_questions=records, engine=engine,
                             agent_options=agent) as system:
        context, backend = system.context(), system.backend
        if not retrieve_cache:
            systems.disable_retrieve_cache(context)
        systems.warm_up(backend)
        answer_fn = systems.method_answer_fn(method, system, config)
        outcome = run_method(method, questions, answer_fn, out_file, concurrency=config.concurrency,
                             resume=False, on_done=on_done)
        stats = systems.engine_stats(backend)
        retrieval = getattr(context, "retrieval", None)
        retrieval_stats = dict(getattr(retrieval, "stats", None) or {})
    summary = summarize(outcome.results, outcome.wall_s, outcome.new, prices)
    summary["engine_stats"] = stats
    summary["retrieval_stats"] = retrieval_stats
    summary["wall_s"] = outcome.wall_s
    return summary


def quiet_libraries() -> None:
    """Model-loading progress bars of transformers / huggingface_hub would drown the demo's own:
    the entry points' settings, and transformers' own switches should it be imported already."""
    from glmcot.offline import stay_offline

    stay_offline()
    try:
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()
        transformers_logging.set_verbosity_error()
    except ImportError:
        pass


def machine() -> dict[str, Any]:
    import os

    info = {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count()}
    try:
        import torch

        info["torch"] = torch.__version__
        info["cuda"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except ImportError:
        pass
    return info
