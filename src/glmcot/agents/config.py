"""One dataclass of agent options (GLM and the Graph-CoT baseline)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Callable


@dataclass
class AgentConfig:
    domain: str | None = None  # prompt examples and graph definition; None: read from the dataset
    # GLM
    # Classify-and-plan: a non-deterministic label comes with the first missing information, so
    # the first R-Agent call is skipped (one call fewer per non-deterministic question). False
    # gives the paper's flow, C -> R -> A.
    plan_in_classify: bool = True
    max_rounds: int = 4  # R/A rounds before "step_limit"
    max_code_retries: int = 2  # extra A-Agent attempts per missing fact after a failed snippet
    max_format_retries: int = 1  # extra R-Agent attempts after an unreadable reply
    pipelining: bool = True  # start RetrieveNode searches from the A-Agent's stream
    classify_max_tokens: int = 128
    reason_max_tokens: int = 1024  # answers can be long lists (GRBench has 2.4k-character ones)
    act_max_tokens: int = 1024
    temperature: float = 0.0
    # Graph-CoT baseline (grbench.md §3: 10 steps in the shipped script, 10k-token prompt cap)
    graphcot_max_steps: int = 10
    graphcot_token_cap: int = 10_000
    graphcot_max_tokens: int = 300
    graphcot_examples: bool = True  # False: the zero-shot variant
    # Called with each trace event as it happens (from the question's thread; keep it quick and
    # do not raise). Servers stream agent steps with it. Not part of to_dict().
    on_event: Callable[[dict[str, Any]], None] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.max_rounds < 1:
            raise ValueError("max_rounds must be at least 1")
        if self.max_code_retries < 0 or self.max_format_retries < 0:
            raise ValueError("retry counts must be >= 0")
        if self.graphcot_max_steps < 1:
            raise ValueError("graphcot_max_steps must be at least 1")

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "on_event"}
