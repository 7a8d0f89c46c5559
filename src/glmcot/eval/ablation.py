"""The ablation (paper Fig. 15): GLM with each co-design feature switched off in turn, and
Graph-CoT on an LRU prefix-cached engine (what a vLLM user gets today), on the same questions in
the same run."""

from __future__ import annotations

import dataclasses
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from glmcot.eval.config import EvalConfig
from glmcot.eval.progress import console as make_console, progress as make_progress
from glmcot.data.questions import QuestionRecord
from glmcot.eval.runner import Prices, summarize
from glmcot.files import write_json_atomic


@dataclass(frozen=True)
class Variant:
    name: str
    label: str
    method: str
    engine: dict[str, Any] = field(default_factory=dict)   # EngineConfig overrides
    agent: dict[str, Any] = field(default_factory=dict)    # AgentConfig overrides
    retrieve_cache: bool = True
    full: bool = False


# The GLM engine: four-level priority eviction ("glm") and vertex-chunk reuse ("pic"); each variant
# turns one feature off. Graph-CoT runs on what a vLLM user has: LRU eviction, exact prefix caching.
# A switch the installed engine lacks is reported as unavailable, never silently ignored.
GLM_ENGINE = {"eviction_policy": "glm", "chunk_reuse": "pic", "enable_prefix_caching": True}
VLLM_LIKE_ENGINE = {"eviction_policy": "lru", "chunk_reuse": "exact", "enable_prefix_caching": True}
VARIANTS = (
    Variant("glm", "GLM (all features)", "glm", GLM_ENGINE, full=True),
    Variant("no-vertex-reuse", "GLM without vertex reuse", "glm", {**GLM_ENGINE, "chunk_reuse": "exact"}),
    Variant("no-priority-eviction", "GLM without priority eviction (LRU)", "glm", {**GLM_ENGINE, "eviction_policy": "lru"}),
    Variant("no-pipelining", "GLM without pipelining", "glm", GLM_ENGINE, {"pipelining": False}),
    Variant("no-retrieve-cache", "GLM without RetrieveNode cache", "glm", GLM_ENGINE, retrieve_cache=False),
    Variant("graphcot-lru", "Graph-CoT (faithful), LRU prefix cache", "graphcot", VLLM_LIKE_ENGINE),
)

# The counter that proves each switched-off feature acted in the full GLM run: a variant whose
# feature never acted there measures noise, and its row says "not exercised".
# Pipelining acted when a snippet's lookup met a search the stream had started: still running
# (prefetch_hits) or already done (prefetch_ready, the usual case when a search is faster than
# decoding the rest of the snippet); several counters are summed.
FEATURE_COUNTERS = {
    "no-vertex-reuse": ("vertex reuse", ("chunk_hits_tokens",)),
    "no-priority-eviction": ("priority eviction", ("evictions",)),
    "no-pipelining": ("pipelining", ("prefetch_hits", "prefetch_ready")),
    "no-retrieve-cache": ("RetrieveNode cache", ("cache_hits",)),
}
COUNTERS = ("evictions", "evictions_p1", "evictions_p2", "evictions_p3", "evictions_p4", "chunk_hits_tokens",
            "prefix_hits_tokens", "prefetches", "prefetch_hits", "prefetch_ready", "cache_hits")


def add_counters(total: dict[str, int], *sources: dict[str, Any] | None) -> None:
    """Sums the evidence counters of one run (engine and RetrieveNode service) into ``total``."""
    for source in sources:
        for key in COUNTERS:
            value = (source or {}).get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                total[key] = total.get(key, 0) + int(value)


def evidence(rows: list[dict[str, Any]]) -> None:
    """Adds to each row the counter of the feature it switches off, in the full run and in its own,
    and whether that feature was exercised at all (its counter above zero in the full run)."""
    full = next((r for r in rows if r.get("full")), None)
    for row in rows:
        named = FEATURE_COUNTERS.get(row.get("variant"))
        if named is None or full is None or row.get("unavailable"):
            continue
        feature, keys = named
        in_full = sum(int((full.get("counters") or {}).get(key, 0)) for key in keys)
        here = sum(int((row.get("counters") or {}).get(key, 0)) for key in keys)
        row["feature"] = {"name": feature, "counter": "+".join(keys), "full": in_full, "variant": here,
                          "exercised": in_full > 0}


SIMULATION = "glmcot bench kvsim"  # where the serving effects are measured at scale (simulated)


def throughput_verdict(rows: list[dict[str, Any]]) -> None:
    """Adds to each row whether its throughput difference from full GLM is established here: only
    when every repeat of one lies above (or below) every repeat of the other. With one repeat, or
    overlapping spreads, it is not, and the row points to the simulation for the effect at scale."""
    full = next((r for r in rows if r.get("full")), None)
    mine = [v for v in (full or {}).get("throughput_by_repeat") or [] if v is not None]
    for row in rows:
        if row is full or row.get("unavailable") or full is None:
            continue
        values = [v for v in row.get("throughput_by_repeat") or [] if v is not None]
        if len(values) < 2 or len(mine) < 2:
            row["throughput_effect"] = f"not established (one repeat; at scale: {SIMULATION})"
        elif max(values) < min(mine) or min(values) > max(mine):
            row["throughput_effect"] = "established (repeats do not overlap)"
        else:
            row["throughput_effect"] = f"not established (repeats overlap; at scale: {SIMULATION})"


# A KV pool small enough that eviction matters with several questions in flight (the paper's
# priority-eviction gains are under memory pressure).
ABLATION_KV_TOKENS = 8192
# The shared-vertex workload's pool: still under pressure (P3/P4 blocks, and some P2, are evicted
# with 4 questions in flight) but large enough that a vertex chunk indexed for one question lives
# until a third question reads it; at 8,192 tokens on dblp every indexed chunk was evicted before
# its first hit (0 chunk-hit tokens in 24 questions), at 12,288 they were reused.
SHARED_VERTEX_KV_TOKENS = 12288
WORKLOAD_KV_TOKENS = {"templates": ABLATION_KV_TOKENS, "shared-vertices": SHARED_VERTEX_KV_TOKENS}


CHUNK_REUSE_MODES = ("exact", "pic", "pic0")


def engine_support() -> tuple[set[str], set[str]]:
    """EngineConfig field names and eviction policy names of the installed engine."""
    from glmcot.engine import EngineConfig

    fields = {f.name for f in dataclasses.fields(EngineConfig)}
    try:
        from glmcot.engine.cache.policies import POLICIES

        policies = set(POLICIES)
    except ImportError:
        policies = {"lru"}
    return fields, policies


def resolve_variant(variant: Variant) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """The engine and agent settings this installation can honour, and what it cannot."""
    from glmcot.agents import AgentConfig

    fields, policies = engine_support()
    agent_fields = {f.name for f in dataclasses.fields(AgentConfig)}
    engine: dict[str, Any] = {}
    missing: list[str] = []
    for key, value in variant.engine.items():
        if key not in fields:
            if value not in (False, None):
                missing.append(f"engine has no {key}")
            continue
        if key == "eviction_policy" and value not in policies:
            missing.append(f"engine has no {value!r} eviction policy")
            continue
        if key == "chunk_reuse" and value not in CHUNK_REUSE_MODES:
            missing.append(f"engine has no {value!r} chunk reuse")
            continue
        engine[key] = value
    agent = {k: v for k, v in variant.agent.items() if k in agent_fields}
    missing += [f"agents have no {k}" for k in variant.agent if k not in agent_fields]
    return engine, agent, missing


def effective_engine(engine: dict[str, Any]) -> tuple:
    """The settings the engine will run with for the switches any variant touches (unset ones at
    their defaults), so two variants that differ only in an unavailable switch compare equal."""
    from glmcot.engine import EngineConfig

    defaults = EngineConfig()
    keys = sorted({k for v in VARIANTS for k in v.engine if hasattr(defaults, k)})
    return tuple((k, engine.get(k, getattr(defaults, k))) for k in keys)


def run_ablation(datasets: dict[str, Path], questions: dict[str, list[QuestionRecord]], config: EvalConfig,
                 out: Path, *, quiet: bool = False, prices: Prices | None = None,
                 kv_cache_tokens: int | None = ABLATION_KV_TOKENS, repeats: int = 1,
                 variants: tuple[Variant, ...] = VARIANTS) -> list[dict[str, Any]]:
    """Runs every variant over every domain's questions; one summary row per variant (domains and
    repeats pooled: throughput = questions / summed wall time). With repeats > 1 the variant order
    alternates (forward, backward, ...) so slow drift of a shared machine hits every variant alike.
    A variant whose switch this engine lacks is listed as unavailable instead of run."""
    from glmcot.eval.workload import measure
    from glmcot.files import read_rows

    console = make_console(quiet)
    plans: list[tuple[Variant, dict[str, Any], dict[str, Any], list[str]]] = []
    unavailable: dict[str, list[str]] = {}
    full_settings = None
    for variant in variants:
        engine, agent, missing = resolve_variant(variant)
        settings = (variant.method, effective_engine(engine), tuple(sorted(agent.items())), variant.retrieve_cache)
        if variant.full:
            full_settings = settings
        elif settings == full_settings:  # its switch is not in this installation
            unavailable[variant.name] = missing or ["its switch is not in this engine"]
            console.print(f"[yellow]ablation: {variant.label} skipped: {'; '.join(unavailable[variant.name])}[/]")
            continue
        plans.append((variant, engine, agent, missing))
    per_variant = sum(len(q) for q in questions.values()) * repeats
    pooled_rows: dict[str, list[dict[str, Any]]] = {v.name: [] for v, *_ in plans}
    walls: dict[str, float] = {v.name: 0.0 for v, *_ in plans}
    stats: dict[str, dict[str, Any]] = {v.name: {} for v, *_ in plans}
    counters: dict[str, dict[str, int]] = {v.name: {} for v, *_ in plans}
    repeat_walls: dict[str, list[float]] = {v.name: [0.0] * repeats for v, *_ in plans}
    repeat_counts: dict[str, list[int]] = {v.name: [0] * repeats for v, *_ in plans}
    with make_progress(quiet) as bar:
        tasks = {v.name: bar.add_task(f"ablation: {v.label}", total=per_variant) for v, *_ in plans}
        for repeat in range(repeats):
            order = plans if repeat % 2 == 0 else list(reversed(plans))
            for variant, engine, agent, _missing in order:
                for domain, dataset in datasets.items():
                    engine_options = dict(engine)
                    if kv_cache_tokens:
                        engine_options["kv_cache_tokens"] = kv_cache_tokens
                    path = out / variant.name / (f"{domain}.jsonl" if repeats == 1 else f"{domain}-r{repeat}.jsonl")
                    summary = measure(variant.method, questions[domain], dataset, config, path,
                                      engine=engine_options, agent=agent, retrieve_cache=variant.retrieve_cache,
                                      prices=prices, on_done=lambda _r, t=tasks[variant.name]: bar.advance(t))
                    stats[variant.name][f"{domain}#{repeat}"] = summary.get("engine_stats")
                    add_counters(counters[variant.name], summary.get("engine_stats"), summary.get("retrieval_stats"))
                    walls[variant.name] += summary["wall_s"]
                    repeat_walls[variant.name][repeat] += summary["wall_s"]
                    repeat_counts[variant.name][repeat] += len(questions[domain])
                    pooled_rows[variant.name] += read_rows(path)
    rows: list[dict[str, Any]] = []
    planned = {v.name: (engine, agent, missing) for v, engine, agent, missing in plans}
    for variant in variants:
        if variant.name in unavailable:
            rows.append({"variant": variant.name, "label": variant.label + " (n/a)", "method": variant.method,
                         "full": False, "unavailable": unavailable[variant.name]})
            continue
        engine, agent, missing = planned[variant.name]
        pooled = summarize(pooled_rows[variant.name], walls[variant.name], len(pooled_rows[variant.name]), prices)
        rows.append({"variant": variant.name, "label": variant.label, "method": variant.method,
                     "full": variant.full, "engine": engine, "agent": agent,
                     "retrieve_cache": variant.retrieve_cache, "not_in_this_engine": missing,
                     "domains": list(datasets), "repeats": repeats, **pooled,
                     "engine_stats": stats[variant.name], "counters": counters[variant.name],
                     # throughput of each repeat: the spread the figure shows
                     "throughput_by_repeat": [count / wall if wall else None for count, wall in
                                              zip(repeat_counts[variant.name], repeat_walls[variant.name])]})
    evidence(rows)
    throughput_verdict(rows)
    full = next((r for r in rows if r.get("full")), None)
    for row in rows:
        if full and full.get("throughput_qps") and row.get("throughput_qps"):
            row["throughput_vs_full"] = row["throughput_qps"] / full["throughput_qps"]
    return rows


def ablation_questions(workload: str, datasets: dict[str, Path], per_domain: int) -> dict[str, list[QuestionRecord]]:
    """Each domain's questions for the ablation: spread over templates (the demo's questions), or
    `per_domain` questions about a few hot entities (eval/workload.py, shared_vertex_questions)."""
    from glmcot.data.questions import read_questions
    from glmcot.eval.workload import DEMO_SCALE, DEMO_SEED, WORKLOADS, pick_questions, shared_vertex_questions

    if workload not in WORKLOADS:
        raise ValueError(f"unknown workload {workload!r}; choose from {', '.join(WORKLOADS)}")
    if workload == "shared-vertices":
        return {d: shared_vertex_questions(d, DEMO_SCALE, DEMO_SEED, per_domain) for d in datasets}
    return {d: pick_questions(read_questions(p / "questions.jsonl"), per_domain) for d, p in datasets.items()}


def ablation_subtitle(model: str, workload: str, domains: list[str], per_domain: int, repeats: int,
                      kv_cache_tokens: int) -> str:
    """What the figure and table measured: the policy, the workload, domains, questions, repeats."""
    return (f"scripted policy on {model} (random weights): system figures, not accuracy; workload {workload}, "
            f"domain{'s' if len(domains) != 1 else ''} {', '.join(domains)}, {per_domain} questions each, "
            f"{repeats} repeat{'s' if repeats != 1 else ''}, KV pool {kv_cache_tokens:,} tokens")


def run_ablation_command(*, out: Path, model: str, questions: int | None, quick: bool, config: EvalConfig,
                         quiet: bool = False, domains: list[str] | None = None, repeats: int = 1,
                         workload: str = "shared-vertices") -> dict[str, Any]:
    """`glmcot bench ablation`: synthetic domains (cached), the same questions for every variant."""
    from datetime import datetime, timezone

    from glmcot.eval.workload import DEMO_SCALE, DEMO_SEED, ensure_dataset
    from glmcot.eval.plots import plot_ablation
    from glmcot.eval.report import SCRIPTED_NOTICE, ablation_markdown, ablation_rich

    from glmcot.eval.workload import quiet_libraries

    console = make_console(quiet)
    quiet_libraries()
    console.print(f"[bold yellow]{SCRIPTED_NOTICE}[/]")
    config = dataclasses.replace(config, model=model)
    shared = workload == "shared-vertices"
    # The shared-vertex workload needs several questions per hot entity for a chunk to be indexed
    # (second reader) and reused (third), so one domain and more questions per domain by default.
    domains = domains or (["dblp"] if shared else ["dblp", "amazon"] if quick else
                          ["dblp", "amazon", "goodreads", "biomedical", "legal"])
    # (at 16 questions on dblp the full GLM run had no chunk hit in any of 3 repeats; at 24 it had)
    per_domain = questions or ((8 if quick else 24) if shared else (3 if quick else 8))
    kv_cache_tokens = WORKLOAD_KV_TOKENS[workload]
    datasets = {d: ensure_dataset(d, DEMO_SCALE, DEMO_SEED, config.cache_dir) for d in domains}
    chosen = ablation_questions(workload, datasets, per_domain)
    started = time.perf_counter()
    rows = run_ablation(datasets, chosen, config, out / "ablation", quiet=quiet, repeats=repeats,
                        kv_cache_tokens=kv_cache_tokens,
                        prices=Prices(config.price_input, config.price_cached_input, config.price_output))
    subtitle = ablation_subtitle(model, workload, domains, per_domain, repeats, kv_cache_tokens)
    figure = plot_ablation(rows, out / "fig15_ablation.png", subtitle)
    result = {"format": "glmcot.ablation/1", "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "notice": SCRIPTED_NOTICE, "model": model, "workload": workload, "domains": domains,
              "questions_per_domain": per_domain, "qids": {d: [q.qid for q in qs] for d, qs in chosen.items()},
              "concurrency": config.concurrency, "kv_cache_tokens": kv_cache_tokens, "repeats": repeats,
              "command": "glmcot " + " ".join(sys.argv[1:]), "rows": rows,
              "figure": str(figure), "wall_s": time.perf_counter() - started}
    write_json_atomic(out / "ablation.json", result)
    (out / "ablation.md").write_text(ablation_markdown(rows) + "\n", encoding="utf-8")
    if not quiet:
        console.print(ablation_rich(rows, title=f"Ablation ({subtitle})"))
        console.print(f"wrote {out / 'ablation.json'}, {out / 'ablation.md'}, {figure}")
    return result
