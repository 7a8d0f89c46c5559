"""Where eval meets the packages below it: opening graphs, building LLM backends (native engine,
OpenAI-compatible server, scripted policy) and the answering methods (GLM, Graph-CoT, baselines).
Everything that depends on another package's constructor lives here, in one place."""

from __future__ import annotations

import os

import contextlib
import dataclasses
from pathlib import Path
from typing import Any, Callable, Iterator

from glmcot.eval.config import EvalConfig
from glmcot.data.questions import QuestionRecord


# Qwen3-shaped, random weights: 4 layers, hidden 256, an 8k context that holds Graph-CoT's prompts
# (its 10k-Qwen-token cap counted in this model's smaller BPE).
DEFAULT_SCRIPTED_MODEL = "random:qwen3:small"


class SetupError(Exception):
    """A needed input or component is missing; the message says what to give."""


# ---- graphs --------------------------------------------------------------------------------------

def graph_dir(path: Path) -> Path:
    """A graph store folder, or a dataset folder holding one under graph/."""
    path = Path(path).expanduser()
    if not path.exists():
        raise SetupError(f"graph folder not found: {path}")
    if not path.is_dir():
        raise SetupError(f"--graph must be a folder (a graph store), got a file: {path}")
    from glmcot.graph.store import store_directory

    return store_directory(path)


def open_graph(path: Path) -> Any:
    from glmcot.graph.store import Graph

    folder = graph_dir(path)
    try:
        return Graph.open(folder)
    except (FileNotFoundError, ValueError) as exc:
        raise SetupError(f"{folder} is not a glmcot graph store ({exc}); build one with "
                         "`glmcot graph import` or `glmcot data synth`") from None


@contextlib.contextmanager
def agent_context(path: Path, config: EvalConfig, domain: str | None = None) -> Iterator[Any]:
    """The agents' shared context for one graph (graph, RetrieveNode service, sandbox pool)."""
    from glmcot.agents import AgentContext

    folder = graph_dir(path)
    open_graph(folder)  # a clear message for a folder that is not a store
    context = AgentContext(folder, domain=domain, workers=max(1, min(config.concurrency, 4)))
    try:
        yield context
    finally:
        context.close()


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


ENGINE_SERVER_SPECS = ("vllm+glmcot:", "sglang+glmcot:")
FORCING_SERVER_SPECS = ("vllm+glmcot:",)  # engine servers that can force-decode the scripted policy


def backend_spec(config: EvalConfig, scripted: bool) -> str:
    if scripted and config.llm and config.llm.startswith(FORCING_SERVER_SPECS):
        return f"scripted+{config.llm}"  # forced through vLLM (the plugin's forcing logits processor)
    if scripted:
        return f"scripted+native:{config.model or DEFAULT_SCRIPTED_MODEL}"
    if config.llm:
        if config.llm.startswith(ENGINE_SERVER_SPECS):  # vLLM with glmcot's plugin, or SGLang's priority eviction
            return config.llm
        return f"openai:{config.llm}"
    if config.model:
        if config.model == "glmcot-mini":  # resolved (or a clear error with the build command) by the backend
            return "native:glmcot-mini"
        if not config.model.startswith("random:") and not Path(config.model).expanduser().is_dir():
            raise SetupError(f"--model must be a local checkpoint folder or random:qwen3:<size>; "
                             f"not found: {config.model}")
        return f"native:{config.model}"
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


@contextlib.contextmanager
def answer_backend(config: EvalConfig, scripted_questions: Any = None, context: Any = None,
                   engine: dict[str, Any] | None = None) -> Iterator[Any]:
    """The answering backend, closed on exit. ``scripted_questions``: a questions.jsonl path or
    records for the scripted policy (the gold plans); ``context`` gives it the sandbox to run them."""
    from glmcot.agents import make_backend

    spec = backend_spec(config, scripted_questions is not None)
    options: dict[str, Any] = {}
    if spec.startswith("openai:"):
        options.update(model=config.llm_model, api_key=config.llm_api_key, timeout_s=config.llm_timeout,
                       max_retries=config.llm_retries)
    elif spec.removeprefix("scripted+").startswith(ENGINE_SERVER_SPECS):
        # the served model's tokenizer directory for exact level spans (unset: the server's /tokenize)
        options.update(model=config.llm_model, api_key=config.llm_api_key, timeout_s=config.llm_timeout,
                       max_retries=config.llm_retries, tokenizer=os.environ.get("GLMCOT_LLM_TOKENIZER"))
    else:
        options.update(engine_options(config))
        options.update(engine or {})
    if scripted_questions is not None:
        options["questions"] = (str(scripted_questions) if isinstance(scripted_questions, Path)
                                else scripted_questions)
    try:
        if spec.startswith("native:") and _is_mini(spec.partition(":")[2]):
            from glmcot.mini.backend import mini_backend  # its compact prompts over the native engine

            backend = mini_backend(spec.partition(":")[2], **options)
        else:
            backend = make_backend(spec, context=context, **options)
    except (ValueError, OSError) as exc:
        raise SetupError(f"cannot start the LLM backend {spec}: {exc}") from None
    try:
        check_backend(backend, f"the LLM server {config.llm}" if config.llm else "the LLM backend")
        yield backend
    finally:
        backend.close()


def check_backend(backend: Any, what: str) -> None:
    """Fails before a run, in one line, when the backend cannot answer at all (nothing listening,
    a URL without /v1, an unknown model), instead of failing every question one by one."""
    check = getattr(backend, "check", None)
    if check is None:
        return
    from glmcot.llm.types import LLMError

    try:
        check()
    except LLMError as exc:
        raise SetupError(f"{what} cannot answer: {exc}") from None


def judge_backend_spec(config: EvalConfig) -> str | None:
    if config.judge_llm:
        return f"openai:{config.judge_llm}"
    return None


def judge_function(config: EvalConfig, answer_backend_: Any, options: Any) -> Callable[[QuestionRecord, str], tuple]:
    """Judge with the GPT4score protocol: a dedicated server if --judge-llm, else the answering model."""
    from glmcot.eval.metrics import judge

    if getattr(options, "scripted", False) and not config.judge_llm:
        raise SetupError("the scripted policy cannot judge answers; add --judge-llm URL or use --no-judge")
    backend = answer_backend_
    if config.judge_llm:
        from glmcot.llm import make_backend

        backend = make_backend(f"openai:{config.judge_llm}", model=config.judge_model or config.llm_model,
                               api_key=config.llm_api_key, timeout_s=config.llm_timeout,
                               max_retries=config.llm_retries)
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

def method_answer_fn(method: str, context: Any, backend: Any, config: EvalConfig,
                     agent_options: dict[str, Any] | None = None) -> Callable[[QuestionRecord], Any]:
    """A thread-safe function answering one question with the method."""
    if method in ("base", "text-rag", "graph-rag"):
        from glmcot.eval.baselines import Baseline

        graph = context.graph if context is not None else None
        retrieve = retriever_top_k(context) if context is not None else None
        baseline = Baseline(method, graph, backend, retrieve, top_k=config.top_k, hops=config.graph_rag_hops,
                            token_budget=config.graph_rag_tokens)
        return lambda q: baseline.answer(q.question, qid=q.qid)
    if method in ("glm", "graphcot", "graphcot-repaired"):
        from glmcot.agents import AgentConfig
        from glmcot.agents.runner import make_agent

        settings = {"graphcot_max_steps": config.max_steps, **(agent_options or {})}
        agent = make_agent(method, backend, context, AgentConfig(**settings))
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


def supported_engine_options(options: dict[str, Any]) -> dict[str, Any]:
    """Keeps the EngineConfig fields this engine has (a feature switch it lacks cannot be ablated)."""
    from glmcot.engine import EngineConfig

    names = {f.name for f in dataclasses.fields(EngineConfig)}
    return {k: v for k, v in options.items() if k in names}


def supported_agent_options(options: dict[str, Any]) -> dict[str, Any]:
    from glmcot.agents import AgentConfig

    names = {f.name for f in dataclasses.fields(AgentConfig)}
    return {k: v for k, v in options.items() if k in names}


def warm_up(backend: Any) -> None:
    """One short request to the native engine behind a backend, so the first measured question does
    not pay for first-call setup (allocation, kernel selection)."""
    from glmcot.llm import LLMRequest, Segment

    for candidate in (getattr(backend, "inner", None), backend):
        if candidate is not None and getattr(candidate, "engine", None) is not None:
            candidate.complete(LLMRequest(segments=[Segment(text="Warm-up: the graph has nodes and edges.", level=4)],
                                          max_tokens=4, metadata={"agent": "warm-up"}))
            return
