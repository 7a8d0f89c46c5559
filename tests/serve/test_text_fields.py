"""Text fields that are not valid Unicode (a lone surrogate from a JSON `\\ud800` escape): a 400
naming the field, for every endpoint and field, before anything reaches the tokenizer or the
engine; and a failed engine request is a clean error with no traceback in the log."""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import json
import logging

import httpx
import pytest

from glmcot.serve.engine_bridge import Generation
from glmcot.serve.errors import APIError

from .conftest import API_KEY

AUTH = {"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"}
BAD = "Alice \ud800 Bob"   # json.dumps writes it as the escape \ud800

CASES = [
    ("/v1/completions", {"prompt": BAD}, "prompt"),
    ("/v1/completions", {"prompt": ["ok", BAD]}, "prompt"),
    ("/v1/completions", {"prompt": "hi", "forced_text": BAD}, "forced_text"),
    ("/v1/completions", {"prompt": "hi", "stop": [BAD]}, "stop"),
    ("/v1/completions", {"prompt": "hi", "session": BAD}, "session"),
    ("/v1/completions", {"segments": [{"text": BAD, "level": 2}]}, "segments.0.text"),
    ("/v1/completions", {"segments": [{"text": "a", "key": BAD}]}, "segments.0.key"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": BAD}]}, "messages.0.content"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": [{"type": "text", "text": BAD}]}]},
     "messages.0.content"),   # the union names its list branch: ...content.list[ContentPart].0.text
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "forced_text": BAD}, "forced_text"),
    ("/v1/ask", {"question": BAD}, "question"),
    ("/v1/ask", {"question": "Who?", "qid": BAD}, "qid"),
    ("/v1/ask", {"question": "Who?", "graph": BAD}, "graph"),
]


@pytest.mark.parametrize("path,body,field", CASES, ids=[f"{c[0]}:{c[2]}" for c in CASES])
def test_a_lone_surrogate_is_a_400_naming_the_field(bare_server, caplog, path, body, field):
    payload = json.dumps({"model": "m", "max_tokens": 2, **body})
    assert "\\ud800" in payload
    with caplog.at_level(logging.WARNING):
        response = httpx.post(bare_server.url + path, content=payload, headers=AUTH, timeout=30)
    assert response.status_code == 400, response.text
    message = response.json()["error"]["message"]
    assert message.startswith(f"invalid request: {field}")
    # pydantic itself refuses it in fields with a length bound; ours says where the surrogate is
    assert "lone surrogate (U+D800 at character 6)" in message or "unable to parse raw data as a unicode string" in message
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


class _FailingBridge:
    def abort(self, future):
        pass


def test_a_failed_engine_request_is_a_clean_500_with_no_traceback_logged(caplog):
    """The engine's failure is reported by result_of; asyncio's copy of the future is read too,
    so no "Future exception was never retrieved" traceback reaches the log."""

    async def run() -> None:
        generation = Generation(_FailingBridge(), asyncio.get_running_loop())
        future: concurrent.futures.Future = concurrent.futures.Future()
        future.set_exception(UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed"))
        generation.futures.append(future)
        with pytest.raises(APIError) as raised:
            await generation.wait(5.0)
        assert raised.value.status == 500 and "UnicodeEncodeError" in raised.value.message
        del generation, future
        gc.collect()
        await asyncio.sleep(0)

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        asyncio.run(run())
        gc.collect()
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]
