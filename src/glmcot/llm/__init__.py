"""glmcot.llm: the one interface agents call, with native, OpenAI-compatible, scripted-policy and
replay backends."""

from glmcot.llm.factory import SPEC_HELP, make_backend
from glmcot.llm.types import (
    FINISHED_NOTEBOOK,
    NOTEBOOK,
    SHARED_PROMPT,
    TRANSIENT,
    LLMBackend,
    LLMError,
    LLMRequest,
    LLMResponse,
    Segment,
    join_segments,
)

__all__ = [
    "Segment", "LLMRequest", "LLMResponse", "LLMBackend", "LLMError", "make_backend", "join_segments",
    "SHARED_PROMPT", "NOTEBOOK", "FINISHED_NOTEBOOK", "TRANSIENT", "SPEC_HELP",
]
