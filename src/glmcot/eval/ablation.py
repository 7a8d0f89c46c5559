"""The ablation (paper Fig. 15): GLM with each co-design feature switched off in turn, and
Graph-CoT on an LRU prefix-cached engine (what a vLLM user gets today), on the same questions in
the same run."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from glmcot.eval.config import EvalConfig
from glmcot.eval.progress import console as make_console, progress as make_progress
from glmcot.eval.questions import Question
from glmcot.eval.runner import Prices, run_method, summarize, write_json_atomic


@dataclass(frozen=True)
class Variant:
    name: str
    label: str
    method: str
    engine: dict[str, Any] = field(default_factory=dict)   # EngineConfig overrides
    agent: dict[str, Any] = field(default_factory=dict)    # AgentConfig overrides
    full: bool = False


# The GLM engine runs the priority policy with chunk reuse; each variant turns one thing off.
GLM_ENGINE = {"eviction_policy": "priority", "enable_chunk_reuse": True, "enable_prefix_caching": True}
VARIANTS = (
    Variant("glm", "GLM (all features)", "glm", GLM_ENGINE, {}, full=True),
    Variant("no-vertex-reuse", "GLM without vertex reuse", "glm", {**GLM_ENGINE, "enable_chunk_reuse": False}),
    Variant("no-priority-eviction", "GLM without priority eviction (LRU)", "glm", {**GLM_ENGINE, "eviction_policy": "lru"}),
    Variant("no-pipelining", "GLM without pipelining", "glm", GLM_ENGINE, {"pipeline": False}),
    Variant("no-retrieve-cache", "GLM without RetrieveNode cache", "glm", GLM_ENGINE, {"retrieve_cache": False}),
    Variant("graphcot-lru", "Graph-CoT, LRU prefix cache", "graphcot",
            {"eviction_policy": "lru", "enable_chunk_reuse": False, "enable_prefix_caching": True}),
)

# A KV pool small enough that eviction matters with several questions in flight (the paper's
# priority-eviction gains are under memory pressure).
ABLATION_KV_TOKENS = 6144


def run_ablation(datasets: dict[str, Path], questions: dict[str, list[Question]], config: EvalConfig,
                 out: Path, *, quiet: bool = False, prices: Prices | None = None,
                 kv_cache_tokens: int | None = ABLATION_KV_TOKENS,
                 variants: tuple[Variant, ...] = VARIANTS) -> list[dict[str, Any]]:
    """Runs every variant over every domain's questions; one summary row per variant (all domains
    pooled: throughput = questions / summed wall time)."""
    from glmcot.eval import systems

    graphs = {d: systems.open_graph(p) for d, p in datasets.items()}
    total = sum(len(q) for q in questions.values())
    rows: list[dict[str, Any]] = []
    with make_progress(quiet) as bar:
        for variant in variants:
            task = bar.add_task(f"ablation: {variant.label}", total=total)
            all_rows: list[dict[str, Any]] = []
            wall = 0.0
            stats: dict[str, Any] = {}
            for domain, graph in graphs.items():
                engine = dict(variant.engine)
                if kv_cache_tokens:
                    engine["kv_cache_tokens"] = kv_cache_tokens
                engine = systems.supported_engine_options(engine)
                agent = systems.supported_agent_options(variant.agent)
                records = [q.record for q in questions[domain]]
                with systems.answer_backend(config, scripted_questions=records, graph=graph, engine=engine) as backend:
                    answer_fn = systems.method_answer_fn(variant.method, graph, backend, config, agent_options=agent)
                    outcome = run_method(variant.method, questions[domain], answer_fn,
                                         out / variant.name / f"{domain}.jsonl", concurrency=config.concurrency,
                                         resume=False, on_done=lambda _r, t=task: bar.advance(t))
                    stats[domain] = systems.engine_stats(backend)
                all_rows += outcome.rows
                wall += outcome.wall_s
            summary = summarize(all_rows, wall, len(all_rows), prices)
            rows.append({"variant": variant.name, "label": variant.label, "method": variant.method,
                         "full": variant.full, "engine": variant.engine, "agent": variant.agent,
                         "domains": list(graphs), **summary, "engine_stats": stats})
    full = next((r for r in rows if r["full"]), None)
    for row in rows:
        if full and full.get("throughput_qps") and row.get("throughput_qps"):
            row["throughput_vs_full"] = row["throughput_qps"] / full["throughput_qps"]
    return rows


def run_ablation_command(*, out: Path, model: str, questions: int | None, quick: bool, config: EvalConfig,
                         quiet: bool = False) -> dict[str, Any]:
    """`glmcot bench ablation`: synthetic domains (cached), the same questions for every variant."""
    from datetime import datetime, timezone

    from glmcot.eval.demo import DEMO_SCALE, DEMO_SEED, ensure_dataset, pick_questions
    from glmcot.eval.plots import plot_ablation
    from glmcot.eval.questions import load_questions
    from glmcot.eval.report import SCRIPTED_NOTICE, ablation_markdown, ablation_rich

    console = make_console(quiet)
    console.print(f"[bold yellow]{SCRIPTED_NOTICE}[/]")
    config = dataclasses.replace(config, model=model)
    domains = ["dblp", "amazon"] if quick else ["dblp", "amazon", "goodreads", "biomedical", "legal"]
    per_domain = questions or (3 if quick else 8)
    datasets = {d: ensure_dataset(d, DEMO_SCALE, DEMO_SEED, config.cache_dir) for d in domains}
    chosen = {d: pick_questions(load_questions(p / "questions.jsonl"), per_domain) for d, p in datasets.items()}
    started = time.perf_counter()
    rows = run_ablation(datasets, chosen, config, out / "ablation", quiet=quiet)
    subtitle = f"scripted policy on {model} (random weights): system measurement"
    figure = plot_ablation(rows, out / "fig15_ablation.png", subtitle)
    result = {"format": "glmcot.ablation/1", "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "notice": SCRIPTED_NOTICE, "model": model, "domains": domains, "questions_per_domain": per_domain,
              "concurrency": config.concurrency, "kv_cache_tokens": ABLATION_KV_TOKENS, "rows": rows,
              "figure": str(figure), "wall_s": time.perf_counter() - started}
    write_json_atomic(out / "ablation.json", result)
    (out / "ablation.md").write_text(ablation_markdown(rows) + "\n", encoding="utf-8")
    if not quiet:
        console.print(ablation_rich(rows, title=f"Ablation ({subtitle})"))
        console.print(f"wrote {out / 'ablation.json'}, {out / 'ablation.md'}, {figure}")
    return result
