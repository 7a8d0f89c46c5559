"""Recording and replaying agent calls as JSON Lines.

`RecordingBackend(inner, path)` appends one line per call: the request metadata, session, a hash of
the prompt and the response. `ReplayBackend(path)` answers each call from such a file, or from the
agents' question traces (lines with a "trace" list whose "llm" events carry the same fields), by
(qid, agent, step, attempt), with the prompt hash as a check. A call that was never recorded is an
error, not a guess.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from pathlib import Path

from glmcot.llm.types import LineSplitter, LLMBackend, LLMError, LLMRequest, LLMResponse

RECORD_VERSION = "glmcot.llm-calls/1"


def prompt_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def call_key(metadata: dict) -> tuple:
    return (
        str(metadata.get("qid")),
        str(metadata.get("agent")),
        int(metadata.get("step", 0)),
        int(metadata.get("attempt", 0)),
    )


class RecordingBackend(LLMBackend):
    """Passes calls to `inner` and appends each one to `path` (one JSON object a line)."""

    def __init__(self, inner: LLMBackend, path: str | Path):
        self.inner = inner
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "a", encoding="utf-8")
        self._lock = threading.Lock()
        self.label = inner.label

    def complete(self, request: LLMRequest) -> LLMResponse:
        response = self.inner.complete(request)
        record = {
            "format": RECORD_VERSION,
            "metadata": dict(request.metadata),
            "session": request.session,
            "prompt_sha": prompt_hash(request.prompt),
            "response": response.to_dict(),
            "time": time.time(),
        }
        line = json.dumps(record, ensure_ascii=False) + "\n"
        with self._lock:
            self._file.write(line)
            self._file.flush()
        return response

    def end_session(self, session_id: str) -> None:
        self.inner.end_session(session_id)

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.close()
        self.inner.close()


class ReplayBackend(LLMBackend):
    """Answers from recorded calls. `strict`: a prompt that differs from the recorded one is an
    error (off by default: prompts change when a graph index is rebuilt, the answers still replay)."""

    label = "replay"

    def __init__(self, path: str | Path, *, strict: bool = False):
        self.path = Path(path)
        self.strict = strict
        self._calls: dict[tuple, dict] = {}
        if not self.path.exists():
            raise FileNotFoundError(f"no recorded calls at {self.path}")
        with open(self.path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    # A crash mid-write leaves a torn last line; everything before it replays.
                    continue
                if "trace" in record:
                    for event in record["trace"]:
                        if event.get("type") == "llm":
                            self._add(event)
                elif "response" in record:
                    self._add(record)
        self.label = f"replay {self.path.name}"

    def _add(self, record: dict) -> None:
        self._calls[call_key(record.get("metadata") or {})] = record

    def __len__(self) -> int:
        return len(self._calls)

    def complete(self, request: LLMRequest) -> LLMResponse:
        key = call_key(request.metadata)
        record = self._calls.get(key)
        if record is None:
            raise LLMError(f"replay: no recorded call for qid={key[0]} agent={key[1]} step={key[2]} attempt={key[3]}")
        if self.strict and record.get("prompt_sha") and record["prompt_sha"] != prompt_hash(request.prompt):
            raise LLMError(f"replay: the prompt of qid={key[0]} agent={key[1]} step={key[2]} differs from the recording")
        recorded = record["response"]
        started = time.perf_counter()
        splitter = LineSplitter(request.on_delta, request.on_line)
        splitter.feed(recorded["text"])
        splitter.finish()
        return LLMResponse(
            text=recorded["text"],
            prompt_tokens=int(recorded.get("prompt_tokens", 0)),
            cached_tokens=int(recorded.get("cached_tokens", 0)),
            output_tokens=int(recorded.get("output_tokens", 0)),
            latency_s=time.perf_counter() - started,
            ttft_s=0.0,
            finish_reason=recorded.get("finish_reason", "stop"),
            backend=self.label,
        )
