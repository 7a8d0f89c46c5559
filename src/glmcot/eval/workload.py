"""The demo's workload, shared by the demo and the ablation: cached synthetic datasets, the
questions chosen from them, and one measured run of a method over them."""

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



def ensure_dataset(domain: str, scale: str, seed: int, cache_dir: Path) -> Path:
    """A synthetic dataset folder (graph/, questions.jsonl, meta.json), generated once and cached."""
    from glmcot.data.synth import GENERATOR_VERSION, SynthConfig, generate
    from glmcot.graph.retrieval import RETRIEVAL_FORMAT_VERSION, MiniLMEmbedder, build_node_index
    from glmcot.graph.store import Graph

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
