"""glmcot.llm: the one interface agents call, with native, OpenAI-compatible and replay backends,
and `BackendSpec`, the typed name of one (glmcot.system.make_backend builds it). `Level` and
`Segment` are the co-design contract's (glmcot.contract)."""

from glmcot.contract import Level, Segment, join_segments
from glmcot.llm.spec import SPEC_HELP, BackendKind, BackendSpec, BackendSpecError, ServerOptions
from glmcot.llm.types import LLMBackend, LLMError, LLMRequest, LLMResponse

__all__ = [
    "Level", "Segment", "LLMRequest", "LLMResponse", "LLMBackend", "LLMError", "join_segments",
    "BackendKind", "BackendSpec", "BackendSpecError", "ServerOptions", "SPEC_HELP",
]
