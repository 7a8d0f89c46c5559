"""The co-design contract between the agents and any serving engine: priority levels and segments.

A leaf module (it imports nothing of glmcot), so the native engine, the LLM layer, the server
schemas and engine plugins (vLLM) all take `Level` and `Segment` from here. DESIGN.md, "segments".
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Level(enum.IntEnum):
    """How long a prompt piece's KV is worth keeping; a lower value is evicted later.

    Engines compare levels as integers (a block shared by several requests takes the minimum,
    the most protective one); the names are the paper's four levels.
    """

    SHARED_PROMPT = 1  # P-I: agent instructions and examples, shared by every question
    NOTEBOOK = 2  # P-II: the running session's notebook
    FINISHED_NOTEBOOK = 3  # P-III: notebooks of finished sessions (set by engines, never by agents)
    TRANSIENT = 4  # P-IV: question, missing information, generated code

    @classmethod
    def parse(cls, value: object) -> "Level":
        """A level from an int 1..4, a Level, or its name (case-insensitive); ValueError otherwise."""
        if isinstance(value, cls):
            return value
        if isinstance(value, bool):
            raise ValueError(f"a segment level is 1..4 or a level name, got {value!r}")
        if isinstance(value, int):
            try:
                return cls(value)
            except ValueError:
                raise ValueError(f"a segment level is 1..4, got {value!r}") from None
        if isinstance(value, str) and value.strip().upper() in cls.__members__:
            return cls[value.strip().upper()]
        raise ValueError(f"a segment level is 1..4 or one of {', '.join(m.lower() for m in cls.__members__)}, "
                         f"got {value!r}")


@dataclass(frozen=True)
class Segment:
    """One piece of a prompt: its text, its level and an optional content key (a vertex chunk's
    reuse key) for position-independent KV reuse."""

    text: str
    level: Level = Level.TRANSIENT
    key: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise TypeError(f"segment text must be str, got {type(self.text).__name__}")
        object.__setattr__(self, "level", Level.parse(self.level))
        if self.key is not None and not isinstance(self.key, str):
            raise TypeError(f"segment key must be str or None, got {type(self.key).__name__}")


def join_segments(segments: "list[Segment] | tuple[Segment, ...]") -> str:
    """The flat prompt text: segments concatenated in order, nothing added."""
    return "".join(segment.text for segment in segments)
