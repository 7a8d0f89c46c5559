"""The wire format between glmcot's clients and the vLLM plugin (version 1).

Carried in an OpenAI request's `vllm_xargs` (vLLM copies them into `SamplingParams.extra_args`;
only flat values are allowed, so spans are two parallel integer lists):

    glmcot_wire         1                        the format version; other versions are ignored
    glmcot_levels       [1, 2, 4]                the level (1..4, `contract.Level`) of each span
    glmcot_tokens       [310, 96, 22]            the number of prompt tokens in each span, from the
                                                 prompt's first token; tokens after the last span
                                                 and generated tokens are transient (4)
    glmcot_session      "q17"                    optional; else vLLM's own `session_id`
    glmcot_end_session  1                        optional; the session ended with this request:
                                                 its notebook (level 2) becomes level 3
    glmcot_forced       [791, 11, 4019]          optional; forced decoding (the scripted policy):
                                                 the i-th generated token is the i-th id, then
                                                 end of sequence (`glmcot.vllm_plugin.forcing`,
                                                 loaded with `--logits-processors`)

A request may carry levels, forced ids or both; `glmcot_forced` is an optional key of version 1
(an engine without the forcing processor ignores it, so the client checks the returned token ids).

Spans are in tokens of the served model's tokenizer, so prompts are sent as token ids
(`/v1/completions`) and the boundaries are exact. A leaf module: it imports no vLLM and no torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from glmcot.contract import Level

WIRE_VERSION = 1
KEY_VERSION = "glmcot_wire"
KEY_LEVELS = "glmcot_levels"
KEY_TOKENS = "glmcot_tokens"
KEY_SESSION = "glmcot_session"
KEY_END = "glmcot_end_session"
KEY_FORCED = "glmcot_forced"
MAX_TOKEN_ID = 2**31 - 1  # no vocabulary is larger; bigger ids are malformed before the model sees them
# Bounds on what one request may make the plugin keep or walk (settings can change them): a
# session id is kept until the session is forgotten (up to max_sessions of them), and the spans
# are walked each time the request's blocks are freed. Real requests have a handful of spans.
MAX_SESSION_CHARS = 256
MAX_SPANS = 4096


class WireError(ValueError):
    """A request's glmcot fields are malformed (the plugin then treats the request as untagged)."""


class WireLimitError(WireError):
    """A request's glmcot fields are well formed but over a bound (too many spans, too long a
    session id): it is treated as untagged too, and counted apart."""


@dataclass(frozen=True)
class RequestLevels:
    """What one request says about its prompt: (level, tokens) spans, its session, session end."""

    spans: tuple[tuple[int, int], ...]
    session: str | None = None
    end_session: bool = False

    @property
    def num_tokens(self) -> int:
        return sum(count for _, count in self.spans)


def encode(spans: Iterable[tuple[int, int]], session: str | None = None, end_session: bool = False) -> dict[str, Any]:
    """The `vllm_xargs` entries for these (level, token count) spans; empty spans are dropped and
    neighbouring spans of one level merged."""
    levels: list[int] = []
    tokens: list[int] = []
    for level, count in spans:
        level = int(Level.parse(level))
        if count < 0:
            raise WireError(f"a span has {count} tokens")
        if count == 0:
            continue
        if levels and levels[-1] == level:
            tokens[-1] += int(count)
        else:
            levels.append(level)
            tokens.append(int(count))
    xargs: dict[str, Any] = {KEY_VERSION: WIRE_VERSION, KEY_LEVELS: levels, KEY_TOKENS: tokens}
    if session is not None:
        xargs[KEY_SESSION] = str(session)
    if end_session:
        xargs[KEY_END] = 1
    return xargs


def decode(extra_args: Mapping[str, Any] | None, session_id: str | None = None, *, max_spans: int = MAX_SPANS,
           max_session_chars: int = MAX_SESSION_CHARS) -> RequestLevels | None:
    """A request's levels from its extra args; None when it carries no glmcot fields (an ordinary
    request). `session_id` is vLLM's own session field, used when no glmcot session is given.
    Raises WireError on malformed fields or an unknown version, WireLimitError past `max_spans`
    spans or a session id over `max_session_chars` (checked before anything is walked)."""
    if not extra_args or KEY_VERSION not in extra_args:
        return None
    version = extra_args.get(KEY_VERSION)
    if version != WIRE_VERSION:
        raise WireError(f"{KEY_VERSION}={version!r}: this plugin speaks version {WIRE_VERSION}")
    levels = extra_args.get(KEY_LEVELS, [])
    tokens = extra_args.get(KEY_TOKENS, [])
    if not isinstance(levels, list) or not isinstance(tokens, list) or len(levels) != len(tokens):
        raise WireError(f"{KEY_LEVELS} and {KEY_TOKENS} must be lists of equal length")
    if len(levels) > max_spans:
        raise WireLimitError(f"{len(levels)} spans; at most {max_spans}")
    session = extra_args.get(KEY_SESSION, session_id)
    if session is not None and not isinstance(session, (str, int)):
        raise WireError(f"{KEY_SESSION} must be a string, got {session!r}")
    if session is not None and len(str(session)) > max_session_chars:
        raise WireLimitError(f"a session id of {len(str(session))} characters; at most {max_session_chars}")
    spans = []
    for level, count in zip(levels, tokens):
        if isinstance(level, bool) or not isinstance(level, int) or not 1 <= level <= 4:
            raise WireError(f"a span level must be 1..4, got {level!r}")
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise WireError(f"a span token count must be a non-negative int, got {count!r}")
        spans.append((level, count))
    end = extra_args.get(KEY_END, 0)
    if end not in (0, 1, True, False):
        raise WireError(f"{KEY_END} must be 0 or 1, got {end!r}")
    return RequestLevels(tuple(spans), None if session is None else str(session), bool(end))


def encode_forced(token_ids: Iterable[int]) -> dict[str, Any]:
    """The `vllm_xargs` entries that force these generated tokens (an empty list: end at once)."""
    ids = [int(token) for token in token_ids]
    for token in ids:
        if not 0 <= token <= MAX_TOKEN_ID:
            raise WireError(f"a forced token id must be in 0..{MAX_TOKEN_ID}, got {token}")
    return {KEY_VERSION: WIRE_VERSION, KEY_FORCED: ids}


def decode_forced(extra_args: Mapping[str, Any] | None) -> tuple[int, ...] | None:
    """A request's forced token ids; None when it forces nothing. Raises WireError on a malformed
    list or an unknown version (the vocabulary bound is checked where the model is known)."""
    if not extra_args or KEY_FORCED not in extra_args:
        return None
    version = extra_args.get(KEY_VERSION)
    if version != WIRE_VERSION:
        raise WireError(f"{KEY_VERSION}={version!r}: this plugin speaks version {WIRE_VERSION}")
    ids = extra_args[KEY_FORCED]
    if not isinstance(ids, list):
        raise WireError(f"{KEY_FORCED} must be a list of token ids, got {type(ids).__name__}")
    for token in ids:
        if isinstance(token, bool) or not isinstance(token, int) or not 0 <= token <= MAX_TOKEN_ID:
            raise WireError(f"{KEY_FORCED} must hold token ids (integers 0..{MAX_TOKEN_ID}), got {token!r}")
    return tuple(ids)
