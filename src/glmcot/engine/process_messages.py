"""The messages between ProcessEngine (the parent) and its engine process (the child): pickled
dataclasses over one multiprocessing Pipe. Commands go down, reports come up; errors cross as a
type name and a message, since an arbitrary exception may not unpickle in the other process."""

from __future__ import annotations

import builtins
import enum
from dataclasses import dataclass, field
from typing import Any

from glmcot.engine.core.prompts import PromptLimits
from glmcot.engine.core.request import SegmentSpan
from glmcot.engine.outputs import EngineClosedError, PromptTooLongError, RequestFailedError, RequestOutput
from glmcot.engine.sampling_params import SamplingParams


# ---- parent -> child ---------------------------------------------------------------------------
@dataclass(frozen=True)
class AddRequest:
    """A request, tokenised by the parent (the child does not tokenise it again)."""

    request_id: str
    prompt_token_ids: list[int]
    spans: list[SegmentSpan]
    sampling: SamplingParams
    session: str | None
    priority: int
    wants_deltas: bool   # send text deltas back (the caller gave on_delta)
    wants_lines: bool    # send completed lines back (the caller gave on_line)


@dataclass(frozen=True)
class AbortRequest:
    request_id: str


@dataclass(frozen=True)
class EndSession:
    session_id: str


@dataclass(frozen=True)
class Shutdown:
    """Abort whatever runs and exit."""


Command = AddRequest | AbortRequest | EndSession | Shutdown


# ---- child -> parent ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ErrorReport:
    """An exception as its type name and message."""

    type_name: str
    message: str

    @classmethod
    def of(cls, error: BaseException) -> "ErrorReport":
        return cls(type(error).__name__, str(error))

    def rebuild(self) -> Exception:
        """The same exception type when the parent knows it (the engine's own errors and Python's
        built-in ones), else a RuntimeError naming the type."""
        known = KNOWN_ERRORS.get(self.type_name) or getattr(builtins, self.type_name, None)
        if isinstance(known, type) and issubclass(known, Exception):
            try:
                return known(self.message)
            except Exception:  # a built-in whose constructor wants other arguments
                pass
        return RuntimeError(f"{self.type_name}: {self.message}")


KNOWN_ERRORS: dict[str, type[Exception]] = {
    error.__name__: error for error in (PromptTooLongError, RequestFailedError, EngineClosedError)}


@dataclass(frozen=True)
class Ready:
    """The engine is loaded and steps: the limits prompts must fit, and its first statistics."""

    pid: int
    limits: PromptLimits
    stats: dict[str, Any]


@dataclass(frozen=True)
class StartFailed:
    error: ErrorReport
    traceback: str


class StreamKind(enum.Enum):
    DELTA = "delta"
    LINE = "line"


@dataclass(frozen=True)
class RequestFailure:
    request_id: str
    error: ErrorReport


@dataclass
class StepReport:
    """Everything one pass of the child's loop (commands, then one engine step) produced, in order:
    the text events of every request, then the requests that ended. `stats`: a fresh snapshot, at
    most every STATS_INTERVAL_S and whenever the engine goes idle."""

    events: list[tuple[str, StreamKind, str]] = field(default_factory=list)   # (request id, kind, text)
    finished: list[RequestOutput] = field(default_factory=list)
    failures: list[RequestFailure] = field(default_factory=list)
    stats: dict[str, Any] | None = None

    def __bool__(self) -> bool:
        return bool(self.events or self.finished or self.failures or self.stats is not None)


Report = Ready | StartFailed | StepReport
