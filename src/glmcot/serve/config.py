"""The server's one configuration dataclass."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

API_KEY_ENV = "GLMCOT_API_KEY"
UPSTREAM_KEY_ENV = "GLMCOT_LLM_API_KEY"


@dataclass
class ServeConfig:
    """Everything `create_app` needs. Defaults are the safe ones: loopback, bounded everything."""

    graphs: dict[str, Path] = field(default_factory=dict)  # name -> graph store directory
    model: str | None = None          # native engine: "random:qwen3:tiny" or a checkpoint dir
    llm_url: str | None = None        # or an upstream OpenAI-compatible server
    llm_model: str | None = None      # model name to ask the upstream for
    llm_api_key: str | None = None    # key for the upstream (never logged)
    llm_timeout_s: float = 120.0      # per HTTP request to the upstream
    llm_retries: int = 4              # retries of a transient upstream failure
    scripted: Path | None = None      # questions.jsonl: answer with the scripted policy
    retriever: str = "auto"           # RetrieveNode: auto (embedding index if built) | lexical
    engine_options: dict = field(default_factory=dict)  # extra EngineConfig fields
    # Native engine's step loop in a child process (ProcessEngine) rather than on a thread of the
    # server's process (AsyncEngine), so the event loop never waits for the engine's GIL; the
    # default since it served the same rates with a lower TTFT tail and TPOT (docs/benchmarks.md).
    engine_process: bool = True
    agent_options: dict = field(default_factory=dict)   # extra AgentConfig fields
    served_model_name: str | None = None
    host: str = "127.0.0.1"
    port: int = 8000
    api_key: str | None = None        # required on every endpoint but /health when set
    public_docs: bool = False         # serve /docs and /openapi.json without the key
    keys_file: Path | None = None     # per-graph keys (glmcot.serve.keys); re-read when it changes
    max_graph_calls: int = 32         # primitive calls in one POST /v1/graphs/{name}/call
    watch_graphs_s: float | None = None  # reopen a store whose version another process committed (poll period)
    max_concurrency: int = 8          # /v1/ask questions doing work at once (agent threads)
    # Engine requests (OpenAI endpoints: prompts x n) admitted at once. None: the engine's batch
    # capacity (max_num_seqs), so no request waits at the door while the engine has a free
    # batch slot; a lower cap queued the bursts of an open-loop load and made the TTFT tail.
    max_engine_requests: int | None = None
    max_queue: int = 64               # requests allowed to wait for a slot; beyond: 429
    timeout_s: float = 300.0          # per request, queueing included
    max_body_bytes: int = 1 << 20
    max_question_chars: int = 4000
    max_prompt_chars: int = 200_000   # completions / chat prompt text
    max_tokens_limit: int = 4096      # upper bound on a request's max_tokens
    max_prompts: int = 32             # prompts in one /v1/completions request
    max_n: int = 8                    # choices (n) per prompt
    max_session_chars: int = 256      # length of a session id
    shutdown_grace_s: float = 10.0    # in-flight requests get this long on shutdown
    warmup: bool = True               # one tiny generation at start, before reporting ready

    def __post_init__(self) -> None:
        self.graphs = {name: Path(path) for name, path in self.graphs.items()}
        if self.scripted is not None:
            self.scripted = Path(self.scripted)
        if self.keys_file is not None:
            self.keys_file = Path(self.keys_file)
        if self.watch_graphs_s is not None and self.watch_graphs_s <= 0:
            raise ValueError("watch_graphs_s must be positive (or None: no watching)")
        if self.api_key is None:
            self.api_key = os.environ.get(API_KEY_ENV) or None
        if self.llm_url and self.llm_api_key is None:
            self.llm_api_key = os.environ.get(UPSTREAM_KEY_ENV) or None
        if self.model and self.llm_url:
            raise ValueError("give either a native model or an upstream --llm URL, not both")
        if self.scripted is not None and self.llm_url:
            raise ValueError("the scripted policy force-decodes its text, which needs the native "
                             "engine (--model); an upstream --llm server cannot force-decode")
        if self.retriever not in ("auto", "embedding", "lexical"):
            raise ValueError(f"retriever must be auto, embedding or lexical, not "
                             f"{self.retriever!r}")
        if self.max_engine_requests is None:
            self.max_engine_requests = self.engine_batch_capacity
        for name in ("max_concurrency", "max_engine_requests", "max_body_bytes", "max_question_chars", "max_prompt_chars",
                     "max_tokens_limit", "max_prompts", "max_n", "max_session_chars", "max_graph_calls"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.max_queue < 0:
            raise ValueError("max_queue must be 0 or more")
        if self.llm_timeout_s <= 0 or self.llm_retries < 0:
            raise ValueError("llm_timeout_s must be positive and llm_retries 0 or more")
        if self.timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        for name in self.graphs:
            if not name or not name.replace("-", "").replace("_", "").isalnum():
                raise ValueError(f"graph name {name!r}: use letters, digits, '-' and '_'")

    @property
    def engine_batch_capacity(self) -> int:
        """The native engine's max_num_seqs: its --engine-option when given, else EngineConfig's
        default (a light import: the dataclass, not the engine)."""
        from glmcot.engine.config import EngineConfig

        return int(self.engine_options.get("max_num_seqs", EngineConfig.max_num_seqs))

    @property
    def policy(self) -> str:
        """How answers are produced, as labelled in responses and metrics."""
        return "scripted policy" if self.scripted is not None else "model"

    @property
    def model_name(self) -> str:
        if self.served_model_name:
            return self.served_model_name
        if self.model:
            return self.model
        if self.llm_model:
            return self.llm_model
        return "scripted" if self.scripted is not None else "none"
