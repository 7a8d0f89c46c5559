"""glmcot.llm: the one interface agents call, with native, OpenAI-compatible, scripted-policy and
replay backends. `Level` and `Segment` are the co-design contract's (glmcot.contract)."""

from glmcot.contract import Level, Segment, join_segments
from glmcot.llm.factory import SPEC_HELP, make_backend
from glmcot.llm.types import LLMBackend, LLMError, LLMRequest, LLMResponse

__all__ = [
    "Level", "Segment", "LLMRequest", "LLMResponse", "LLMBackend", "LLMError", "make_backend", "join_segments",
    "SPEC_HELP",
]
