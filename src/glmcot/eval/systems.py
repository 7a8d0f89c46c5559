"""Eval's side of the system: `EvalConfig` (the command line's settings) -> a typed
`SystemConfig` for glmcot.system's one builder, the answering methods (GLM, Graph-CoT, the
baselines) over a built system, the judge, and what a run reports of them."""

from __future__ import annotations

import os

import contextlib
import dataclasses
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from glmcot.eval.config import EvalConfig
from glmcot.data.questions import QuestionRecord
from glmcot.llm.spec import ENGINE_SERVER_KINDS, FORCING_SERVER_SPECS, BackendKind, BackendSpec, BackendSpecError, ServerOptions
from glmcot.system import SetupError, System, SystemConfig, build_system, check_backend, make_backend

__all__ = ["SetupError"]  # raised here, defined with the builder

# Qwen3-shaped, random weights: 4 layers, hidden 256, an 8k context that holds Graph-CoT's prompts
# (its 10k-Qwen-token cap counted in this model's smaller BPE).
DEFAULT_SCRIPTED_MODEL = "random:qwen3:small"


def disable_retrieve_cache(context: Any) -> None:
    """The RetrieveNode text -> node id caches off (for the ablation): every call searches."""
    context.retrieval.cache_size = 0
    inner = getattr(context.retrieval, "retriever", None)
    if inner is not None and hasattr(inner, "cache"):
        inner.cache = _NoCache()


class _NoCache:
    """Stands in for RetrieveNodeCache with nothing kept: every lookup computes."""

    def __len__(self) -> int:
        return 0

    def get(self, text: str) -> None:
        return None

    def put(self, text: str, node_id: str) -> None:
        pass

    def get_or_compute(self, text: str, compute: Callable[[str], str]) -> str:
        return compute(text)

    def clear(self) -> None:
        pass

    def stats(self) -> dict[str, int]:
        return {"size": 0, "hits": 0, "misses": 0}


# ---- LLM backends -------------------------------------------------------------------------------

def resolve_device(device: str) -> str:
    if device != "auto":
        return device
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:
        return "cpu"


def _server_options(config: EvalConfig) -> ServerOptions:
    return ServerOptions(model=config.llm_model, api_key=config.llm_api_key, timeout_s=config.llm_timeout,
                         max_retries=config.llm_retries)


def llm_spec(text: str, options: ServerOptions) -> BackendSpec:
    """--llm: an OpenAI-compatible server's URL, or vllm+glmcot:URL / sglang+glmcot:URL (vLLM with
    glmcot's plugin, SGLang's priority eviction)."""
    engine_servers = {kind.value for kind in ENGINE_SERVER_KINDS}
    if text.partition(":")[0].split("+")[0] in engine_servers:
        try:
            spec = BackendSpec.parse(text)
        except BackendSpecError as exc:
            raise SetupError(f"--llm {text!r}: {exc}") from None
        # the served model's tokenizer directory for exact level spans (unset: the server's /tokenize)
        return dataclasses.replace(spec, options=dataclasses.replace(
            options, tokenizer=os.environ.get("GLMCOT_LLM_TOKENIZER")))
    return BackendSpec(kind=BackendKind.OPENAI, target=text, options=options)


def backend_spec(config: EvalConfig, scripted: bool) -> BackendSpec:
    """The answering backend the settings name (the one place eval reads --model / --llm / --scripted)."""
    if scripted and config.llm and config.llm.startswith(FORCING_SERVER_SPECS):
        # forced through vLLM (the plugin's forcing logits processor)
        return dataclasses.replace(llm_spec(config.llm, _server_options(config)), scripted=True)
    if scripted:
        return BackendSpec(kind=BackendKind.NATIVE, target=config.model or DEFAULT_SCRIPTED_MODEL, scripted=True)
    if config.llm:
        return llm_spec(config.llm, _server_options(config))
    if config.model:
        # glmcot-mini is resolved (or a clear error with the build command) by the backend
        if (config.model != "glmcot-mini" and not config.model.startswith("random:")
                and not Path(config.model).expanduser().is_dir()):
            raise SetupError(f"--model must be a local checkpoint folder or random:qwen3:<size>; "
                             f"not found: {config.model}")
        return BackendSpec(kind=BackendKind.NATIVE, target=config.model)
    raise SetupError("no model: give --model PATH, --llm URL or --scripted")


def _is_mini(model: str) -> bool:
    from glmcot.mini.backend import wants_mini

    return wants_mini(model)


def describe_backend(config: EvalConfig, scripted: bool) -> str:
    if scripted and config.llm and config.llm.startswith(FORCING_SERVER_SPECS):
        return f"scripted policy force-decoded on {config.llm_model or 'the served model'} at {config.llm} (system measurement)"
    if scripted:
        return f"scripted policy on {config.model or DEFAULT_SCRIPTED_MODEL} (random weights: system measurement)"
    if config.llm:
        return f"{config.llm_model or 'server default model'} at {config.llm}"
    if not scripted and config.model and _is_mini(config.model):
        return f"native engine, {config.model} (glmcot-mini, trained on synthetic data)"
    return f"native engine, {config.model}"


def engine_options(config: EvalConfig) -> dict[str, Any]:
    return {"device": resolve_device(config.device), "dtype": config.dtype}


def system_config(config: EvalConfig, *, graph: Path | None = None, scripted_questions: Any = None,
                  engine: Mapping[str, Any] | None = None, agent_options: Mapping[str, Any] | None = None,
                  domain: str | None = None, grammar: Any = None) -> SystemConfig:
    """What to build for a run: the graph (none for the no-graph baselines), the answering
    backend (the scripted policy when `scripted_questions`: a questions.jsonl path or records),
    EngineConfig fields for a native model on top of the device and dtype, AgentConfig fields."""
    return SystemConfig(
        backend=backend_spec(config, scripted_questions is not None),
        graphs={"graph": Path(graph)} if graph is not None else {},
        domain=domain,
        workers=max(1, min(config.concurrency, 4)),
        engine={**engine_options(config), **(engine or {})},
        agent_options={"graphcot_max_steps": config.max_steps, **(agent_options or {})},
        scripted_questions=scripted_questions,
        grammar=grammar,
    )


@contextlib.contextmanager
def open_system(config: EvalConfig, **options: Any) -> Iterator[System]:
    """The built system for a run (see `system_config` for the options), closed on exit."""
    with build_system(system_config(config, **options)) as system:
        yield system


def judge_function(config: EvalConfig, answer_backend_: Any, options: Any) -> Callable[[QuestionRecord, str], tuple]:
    """Judge with the GPT4score protocol: a dedicated server if --judge-llm, else the answering model."""
    from glmcot.eval.metrics import judge

    if getattr(options, "scripted", False) and not config.judge_llm:
        raise SetupError("the scripted policy cannot judge answers; add --judge-llm URL or use --no-judge")
    backend = answer_backend_
    if config.judge_llm:
        options = dataclasses.replace(_server_options(config), model=config.judge_model or config.llm_model)
        backend = make_backend(BackendSpec(kind=BackendKind.OPENAI, target=config.judge_llm, options=options))
        try:
            check_backend(backend, f"the judge server {config.judge_llm}")
        except SetupError:
            backend.close()
            raise

    rule = getattr(config, "judge_rule", "original")

    def run(question: QuestionRecord, prediction: str) -> tuple[bool | None, str]:
        return judge(backend, question.question, prediction, question.answer, qid=question.qid, rule=rule)

    return run


def describe_judge(config: EvalConfig, options: Any) -> str:
    rule = getattr(config, "judge_rule", "original")
    protocol = ("GPT4score as Graph-CoT's eval.py scores (its prompt; only exactly 'Yes' is 1)" if rule == "original"
                else "lenient judge (glmcot's prompt, lenient yes/no, unreadable replies left out)")
    if config.judge_llm:
        return f"LLM judge {config.judge_model or config.llm_model or 'default model'} at {config.judge_llm}, {protocol}, not GPT-4"
    return f"LLM judge = the answering model ({describe_backend(config, False)}), {protocol}, not GPT-4"


# ---- methods -------------------------------------------------------------------------------------

def method_answer_fn(method: str, system: System, config: EvalConfig) -> Callable[[QuestionRecord], Any]:
    """A thread-safe function answering one question with the method on the built system."""
    if method in ("base", "text-rag", "graph-rag"):
        from glmcot.eval.baselines import Baseline

        context = system.context()
        graph = context.graph if context is not None else None
        retrieve = retriever_top_k(context) if context is not None else None
        baseline = Baseline(method, graph, system.backend, retrieve, top_k=config.top_k, hops=config.graph_rag_hops,
                            token_budget=config.graph_rag_tokens)
        return lambda q: baseline.answer(q.question, qid=q.qid)
    if method in ("glm", "graphcot", "graphcot-repaired"):
        agent = system.agent(method)
        return lambda q: agent.answer(q.question, qid=q.qid)
    raise SetupError(f"unknown method {method!r}")


def retriever_top_k(context: Any) -> Callable[[str, int], list[str]]:
    """Top-k node ids for a text: the graph's vector index when it has one, else RetrieveNode (top-1)."""
    inner = getattr(context.retrieval, "retriever", None)

    def top_k(text: str, k: int) -> list[str]:
        if inner is not None and hasattr(inner, "search"):
            return [node_id for node_id, _score in inner.search(text, k)]
        try:
            return [context.retrieval.resolve(text)]
        except LookupError:
            return []

    return top_k


def engine_stats(backend: Any) -> dict[str, Any] | None:
    """The native engine's counters behind a backend (scripted wrappers included), if any."""
    for candidate in (backend, getattr(backend, "inner", None), getattr(backend, "backend", None)):
        engine = getattr(candidate, "engine", None)
        if engine is not None and hasattr(engine, "stats"):
            try:
                return dict(engine.stats())
            except Exception:  # stats are informative; never fail a run over them
                return None
    return None


def warm_up(backend: Any) -> None:
    """One short request to the native engine behind a backend, so the first measured question does
    not pay for first-call setup (allocation, kernel selection)."""
    from glmcot.llm import LLMRequest, Segment

    for candidate in (getattr(backend, "inner", None), backend):
        if candidate is not None and getattr(candidate, "engine", None) is not None:
            candidate.complete(LLMRequest(segments=[Segment(text="Warm-up: the graph has nodes and edges.", level=4)],
                                          max_tokens=4, metadata={"agent": "warm-up"}))
            return
