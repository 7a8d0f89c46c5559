"""The vLLM plugin's bounds on one request, in its pure modules (no vLLM needed): the wire
decoder refuses too many spans or too long a session id before walking anything, and the
settings read both bounds from the environment. tests/vllm checks the plugin inside vLLM."""

from __future__ import annotations

import pytest

from glmcot.vllm_plugin import wire
from glmcot.vllm_plugin.settings import ENV_MAX_SESSION_CHARS, ENV_MAX_SPANS, Settings


def _xargs(spans: int, session: str | None = None) -> dict:
    return {"glmcot_wire": 1, "glmcot_levels": [2] * spans, "glmcot_tokens": [1] * spans,
            **({"glmcot_session": session} if session is not None else {})}


def test_a_request_over_the_bounds_is_a_limit_error_and_one_at_them_decodes():
    at = wire.decode(_xargs(wire.MAX_SPANS, "s" * wire.MAX_SESSION_CHARS))
    assert len(at.spans) == wire.MAX_SPANS and len(at.session) == wire.MAX_SESSION_CHARS
    with pytest.raises(wire.WireLimitError, match=r"1000000 spans; at most 4096"):
        wire.decode(_xargs(1_000_000))
    with pytest.raises(wire.WireLimitError, match=r"a session id of 100000 characters; at most 256"):
        wire.decode(_xargs(1, "s" * 100_000))
    # vLLM's own session field is bounded the same way
    with pytest.raises(wire.WireLimitError, match="session id of 300 characters"):
        wire.decode(_xargs(1), session_id="v" * 300)
    assert issubclass(wire.WireLimitError, wire.WireError)   # older callers treat it as malformed
    assert wire.decode(_xargs(3, "abc"), max_spans=3, max_session_chars=3).session == "abc"


def test_the_bounds_are_settings_from_the_environment():
    assert (Settings().max_spans, Settings().max_session_chars) == (wire.MAX_SPANS, wire.MAX_SESSION_CHARS)
    settings = Settings.from_env({ENV_MAX_SPANS: "64", ENV_MAX_SESSION_CHARS: "32"})
    assert (settings.max_spans, settings.max_session_chars) == (64, 32)
    for name, value in ((ENV_MAX_SPANS, "0"), (ENV_MAX_SESSION_CHARS, "2.5"), (ENV_MAX_SPANS, "many")):
        with pytest.raises(ValueError, match=name):
            Settings.from_env({name: value})
