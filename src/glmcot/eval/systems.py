"""Where eval meets the packages below it: opening graphs, building LLM backends (native engine,
OpenAI-compatible server, scripted policy) and the answering methods (GLM, Graph-CoT, baselines).
Everything that depends on another package's constructor lives here, in one place."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from pathlib import Path
from typing import Any, Callable, Iterator

from glmcot.eval.config import EvalConfig
from glmcot.eval.questions import Question


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
    if (path / "graph").is_dir():
        return path / "graph"
    return path


def open_graph(path: Path) -> Any:
    from glmcot.graph.store import Graph

    folder = graph_dir(path)
    try:
        return Graph.open(folder)
    except (FileNotFoundError, ValueError) as exc:
        raise SetupError(f"{folder} is not a glmcot graph store ({exc}); build one with "
                         "`glmcot graph import` or `glmcot data synth`") from None


def make_retriever(graph: Any, config: EvalConfig) -> Any:
    from glmcot.graph.retrieval import NodeRetriever

    return NodeRetriever.open(graph) if hasattr(NodeRetriever, "open") else NodeRetriever(graph)


def make_tools(graph: Any, config: EvalConfig, retriever: Any = None) -> Any:
    from glmcot.graph.primitives import GraphTools

    return GraphTools(graph, retriever=retriever if retriever is not None else make_retriever(graph, config))


# ---- LLM backends -------------------------------------------------------------------------------

def resolve_device(device: str) -> str:
    if device != "auto":
        return device
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:
        return "cpu"


def backend_spec(config: EvalConfig, scripted: bool) -> str:
    if scripted:
        return f"scripted+native:{config.model or 'random:qwen3:tiny'}"
    if config.llm:
        return f"openai:{config.llm}"
    if config.model:
        if not config.model.startswith("random:") and not Path(config.model).expanduser().is_dir():
            raise SetupError(f"--model must be a local checkpoint folder or random:qwen3:<size>; "
                             f"not found: {config.model}")
        return f"native:{config.model}"
    raise SetupError("no model: give --model PATH, --llm URL or --scripted")


def describe_backend(config: EvalConfig, scripted: bool) -> str:
    if scripted:
        return f"scripted policy on {config.model or 'random:qwen3:tiny'} (random weights: system measurement)"
    if config.llm:
        return f"{config.api_model or 'server default model'} at {config.llm}"
    return f"native engine, {config.model}"


def engine_options(config: EvalConfig) -> dict[str, Any]:
    return {"device": resolve_device(config.device), "dtype": config.dtype}


@contextlib.contextmanager
def answer_backend(config: EvalConfig, scripted_questions: Any = None, graph: Any = None,
                   engine: dict[str, Any] | None = None) -> Iterator[Any]:
    """The answering backend, closed on exit. ``scripted_questions``: a questions.jsonl path or
    records for the scripted policy (the gold plans)."""
    from glmcot.llm import make_backend

    spec = backend_spec(config, scripted_questions is not None)
    options: dict[str, Any] = {}
    if spec.startswith("openai:"):
        options.update(model=config.api_model, api_key=config.api_key)
    else:
        options.update(engine_options(config))
        options.update(engine or {})
    if scripted_questions is not None:
        options["questions"] = (str(scripted_questions) if isinstance(scripted_questions, Path)
                                else scripted_questions)
        if graph is not None:
            options["code_runner"] = code_runner(graph, config)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    backend = make_backend(spec, **options)
    try:
        yield backend
    finally:
        backend.close()


def code_runner(graph: Any, config: EvalConfig) -> Callable[[str], str] | None:
    """Runs a GLM plan's snippet in the agents' sandbox (the scripted policy needs it for
    Graph-CoT's $answer)."""
    try:
        from glmcot.agents import sandbox_runner  # type: ignore[attr-defined]
    except ImportError:
        return None
    return sandbox_runner(make_tools(graph, config))


def judge_backend_spec(config: EvalConfig) -> str | None:
    if config.judge_llm:
        return f"openai:{config.judge_llm}"
    return None


def judge_function(config: EvalConfig, answer_backend_: Any, options: Any) -> Callable[[Question, str], tuple]:
    """Judge with the GPT4score protocol: a dedicated server if --judge-llm, else the answering model."""
    from glmcot.eval.metrics import judge

    if getattr(options, "scripted", False) and not config.judge_llm:
        raise SetupError("the scripted policy cannot judge answers; add --judge-llm URL or use --no-judge")
    backend = answer_backend_
    if config.judge_llm:
        from glmcot.llm import make_backend

        backend = make_backend(f"openai:{config.judge_llm}", model=config.judge_model or config.api_model,
                               api_key=config.api_key)

    def run(question: Question, prediction: str) -> tuple[bool | None, str]:
        return judge(backend, question.question, prediction, question.answer, qid=question.qid)

    return run


def describe_judge(config: EvalConfig, options: Any) -> str:
    if config.judge_llm:
        return f"LLM judge {config.judge_model or config.api_model or 'default model'} at {config.judge_llm} (GPT4score protocol, not GPT-4)"
    return f"LLM judge = the answering model ({describe_backend(config, False)}), GPT4score protocol, not GPT-4"


# ---- methods -------------------------------------------------------------------------------------

def method_answer_fn(method: str, graph: Any, backend: Any, config: EvalConfig,
                     tools: Any = None, agent_options: dict[str, Any] | None = None) -> Callable[[Question], Any]:
    """A function answering one question with the method."""
    if method in ("base", "text-rag", "graph-rag"):
        from glmcot.eval.baselines import Baseline

        retrieve = None
        if method != "base":
            retriever = make_retriever(graph, config)
            retrieve = retriever_top_k(retriever)
        baseline = Baseline(method, graph, backend, retrieve, top_k=config.top_k, hops=config.graph_rag_hops,
                            token_budget=config.graph_rag_tokens)
        return lambda q: baseline.answer(q.question, qid=q.qid)
    if method in ("glm", "graphcot"):
        agent = make_agent(method, graph, backend, config, tools=tools, options=agent_options)
        return lambda q: agent.answer(q.question, qid=q.qid)
    raise SetupError(f"unknown method {method!r}")


def retriever_top_k(retriever: Any) -> Callable[[str, int], list[str]]:
    def top_k(text: str, k: int) -> list[str]:
        hits = retriever.search(text, k)
        return [h[0] if isinstance(h, tuple) else getattr(h, "node_id", h) for h in hits]

    return top_k


def make_agent(method: str, graph: Any, backend: Any, config: EvalConfig, tools: Any = None,
               options: dict[str, Any] | None = None) -> Any:
    from glmcot.agents import AgentConfig, GLMAgent, GraphCoTAgent

    agent_config = AgentConfig(max_steps=config.max_steps, **(options or {}))
    cls = GLMAgent if method == "glm" else GraphCoTAgent
    return cls(tools if tools is not None else make_tools(graph, config), backend, agent_config)


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
