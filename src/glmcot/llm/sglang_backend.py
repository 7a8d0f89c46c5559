"""An SGLang server with priority eviction (`--llm sglang+glmcot:URL`): GLM's levels as SGLang
request priorities.

SGLang (`--radix-eviction-policy priority`) gives every radix-tree node a request inserts that
request's `priority` and keeps the maximum along a shared path; leaves with the lowest priority
are evicted first, LRU among equals. A priority is per request, not per token range, so the
levels are mapped like this:

- a call's priority is that of its most protective segment after the level-1 head: a call that
  carries a running session's notebook (level 2) gets NOTEBOOK_PRIORITY, so the notebook and
  the few transient tokens after it are kept; a call with only transient text after its head
  gets TRANSIENT_PRIORITY, so its suffix goes first;
- the level-1 head (agent instructions) is shared by many calls and keeps the maximum of their
  priorities; to lift it above notebooks, the first time a head is seen it is sent alone as a
  one-token request with SHARED_PRIORITY (the radix tree then keeps that priority on its path);
- level 3 (a finished session's notebook) has no equivalent: priorities only rise, so an ended
  session's notebook keeps its priority and goes by LRU among level-2 blocks, which, as it is no
  longer read, puts it first among them.

Server: `python -m sglang.launch_server --model-path MODEL --radix-eviction-policy priority
--enable-priority-scheduling` (README, "SGLang").
"""

from __future__ import annotations

import threading
from typing import Any

from glmcot.contract import Level
from glmcot.llm.openai_backend import OpenAIBackend
from glmcot.llm.types import LLMRequest

SHARED_PRIORITY = 30
NOTEBOOK_PRIORITY = 20
TRANSIENT_PRIORITY = 0


def request_priority(request: LLMRequest) -> int:
    """The SGLang priority of a call (see the module docstring)."""
    segments = list(request.segments)
    index = 0
    while index < len(segments) and segments[index].level == Level.SHARED_PROMPT:
        index += 1
    rest = [segment.level for segment in segments[index:] if segment.text]
    if any(level == Level.NOTEBOOK for level in rest):
        return NOTEBOOK_PRIORITY
    if any(level == Level.SHARED_PROMPT for level in rest):  # a level-1 piece after other text
        return NOTEBOOK_PRIORITY
    return TRANSIENT_PRIORITY


def shared_head(request: LLMRequest) -> str:
    """The call's leading level-1 text."""
    head = []
    for segment in request.segments:
        if segment.level != Level.SHARED_PROMPT:
            break
        head.append(segment.text)
    return "".join(head)


class SGLangBackend(OpenAIBackend):
    """`base_url` like http://127.0.0.1:30000/v1; chat or completions as OpenAIBackend."""

    def __init__(self, base_url: str, **options: Any) -> None:
        options.pop("glmcot_extras", None)
        super().__init__(base_url, glmcot_extras=False, **options)
        self._heads_sent: set[str] = set()
        self._heads_lock = threading.Lock()
        self.label = f"sglang+glmcot {self.base_url}"

    def _body(self, request: LLMRequest, stream: bool) -> tuple[str, dict]:
        path, body = super()._body(request, stream)
        body["priority"] = request_priority(request)
        return path, body

    def complete(self, request: LLMRequest):
        head = shared_head(request)
        if head:
            with self._heads_lock:
                first = head not in self._heads_sent
                self._heads_sent.add(head)
            if first:
                self._pin_head(head)
        return super().complete(request)

    def _pin_head(self, head: str) -> None:
        """Sends the level-1 head alone at SHARED_PRIORITY, so its radix path keeps that priority."""
        from glmcot.contract import Segment

        pin = LLMRequest(segments=[Segment(head, Level.SHARED_PROMPT)], max_tokens=1)
        path, body = OpenAIBackend._body(self, pin, False)
        body["priority"] = SHARED_PRIORITY

        def send() -> None:
            response = self._client.post(self.base_url + path, headers=self._headers, json=body)
            self._raise_for(response)

        self._with_retries(send)
