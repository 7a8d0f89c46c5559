"""Segment helpers: wrap a segment list in a chat template without merging the segments.

The template is rendered once around a marker; the text before the marker (system turn, role
header) becomes a leading segment at the level of the first segment, the text after it
(end of turn, assistant header) a trailing P4 segment. The caller's segments keep their own
boundaries, levels and keys, so chunk reuse and per-level eviction still see them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from glmcot.contract import Level, Segment

_MARK = "\u2063GLMCOT-SEGMENTS\u2063"


def wrap_chat(tokenizer: Any, segments: Sequence[Segment], system: str | None = None, role: str = "user",
              add_generation_prompt: bool = True) -> list[Segment]:
    """`segments` as the content of one `role` message (after an optional system message)."""
    if not segments:
        raise ValueError("wrap_chat needs at least one segment")
    messages = ([{"role": "system", "content": system}] if system is not None else []) + [{"role": role, "content": _MARK}]
    rendered = tokenizer.apply_chat_template(messages, add_generation_prompt=add_generation_prompt)
    if rendered.count(_MARK) != 1:
        raise ValueError("the chat template does not insert the message content verbatim; join the segments instead")
    head, tail = rendered.split(_MARK)
    out = [Segment(head, segments[0].level, None)] if head else []
    out += list(segments)
    if tail:
        out.append(Segment(tail, Level.TRANSIENT, None))
    return out
