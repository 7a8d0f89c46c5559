"""The KV simulator's trace file (format `glmcot.kvsim-trace/1`): agent sessions as token ids.

JSON Lines. The first line is a header, every other line one session (one question):

    {"format": "glmcot.kvsim-trace/1", "tokenizer": "qwen", "source": "..."}
    {"session": "dblp-00001", "method": "glm", "calls": [
        {"agent": "classify",
         "segments": [{"level": 1, "tokens": [151644, ...]},
                      {"level": 2, "key": "v:Q42", "tokens": [...]},
                      {"level": 4, "tokens": [...]}],
         "output_tokens": 37,
         "tool_s": 0.014, "retrieval_s": 0.002}, ...]}

- `segments`: the prompt, head to tail; `level` is GLM's priority (1 shared agent prompt,
  2 notebook, 3 finished notebook, 4 transient; `glmcot.contract.Level`); `key` (optional) names
  a vertex chunk, the same key meaning the same content in any prompt. A trace without levels
  (a plain agent) puts everything at level 4.
- `output_tokens`: tokens the call generated (decode steps).
- `tool_s`: seconds the session spends after this call before its next call (running the
  A-Agent's snippet, RetrieveNode included); `retrieval_s`: the RetrieveNode part of it, which GLM
  overlaps with the call's decoding when pipelining is on. Both 0 for the last call.

`record_from_question_traces` converts glmcot's own question traces (`glmcot.trace/1`, written by
`run_questions(..., traces=)` / `python -m glmcot.benchmarks.agents --traces DIR`) with a tokenizer;
any other source (a user's model, glmcot-mini's real decoding) writes this format directly.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

FORMAT = "glmcot.kvsim-trace/1"


class TraceFormatError(ValueError):
    """A trace file that does not follow glmcot.kvsim-trace/1 (the message names file and line)."""


@dataclass(frozen=True)
class TraceSegment:
    level: int
    tokens: tuple[int, ...]
    key: str | None = None


@dataclass(frozen=True)
class TraceCall:
    agent: str
    segments: tuple[TraceSegment, ...]
    output_tokens: int
    tool_s: float = 0.0
    retrieval_s: float = 0.0

    @property
    def prompt_tokens(self) -> int:
        return sum(len(s.tokens) for s in self.segments)

    def token_ids(self) -> list[int]:
        return [t for s in self.segments for t in s.tokens]


@dataclass(frozen=True)
class TraceSession:
    session: str
    method: str
    calls: tuple[TraceCall, ...]
    domain: str = ""


@dataclass
class Trace:
    sessions: list[TraceSession]
    tokenizer: str = "unknown"
    source: str = ""
    meta: dict = field(default_factory=dict)

    def methods(self) -> list[str]:
        return sorted({s.method for s in self.sessions})


# ---- writing and reading --------------------------------------------------------------------
def session_to_dict(session: TraceSession) -> dict:
    calls = []
    for call in session.calls:
        segments = []
        for segment in call.segments:
            item: dict = {"level": segment.level, "tokens": list(segment.tokens)}
            if segment.key is not None:
                item["key"] = segment.key
            segments.append(item)
        calls.append({"agent": call.agent, "segments": segments, "output_tokens": call.output_tokens,
                      "tool_s": round(call.tool_s, 6), "retrieval_s": round(call.retrieval_s, 6)})
    return {"session": session.session, "method": session.method, "domain": session.domain, "calls": calls}


def write_trace(path: str | Path, trace: Trace) -> Path:
    """Writes the trace atomically (header line, then one session per line)."""
    from glmcot.files import write_rows_atomic

    header = {"format": FORMAT, "tokenizer": trace.tokenizer, "source": trace.source, **trace.meta}
    write_rows_atomic(path, [header, *(session_to_dict(s) for s in trace.sessions)])
    return Path(path)


def _int(value, what: str, where: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise TraceFormatError(f"{where}: {what} must be an integer >= {minimum}, got {value!r}")
    return value


def _seconds(value, what: str, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise TraceFormatError(f"{where}: {what} must be seconds >= 0, got {value!r}")
    return float(value)


def session_from_dict(record: dict, where: str) -> TraceSession:
    if not isinstance(record, dict) or not isinstance(record.get("calls"), list):
        raise TraceFormatError(f"{where}: a session line needs a 'calls' list")
    calls = []
    for number, raw in enumerate(record["calls"]):
        here = f"{where} call {number}"
        if not isinstance(raw, dict) or not isinstance(raw.get("segments"), list) or not raw["segments"]:
            raise TraceFormatError(f"{here}: needs a non-empty 'segments' list")
        segments = []
        for item in raw["segments"]:
            if not isinstance(item, dict) or not isinstance(item.get("tokens"), list):
                raise TraceFormatError(f"{here}: a segment needs a 'tokens' list")
            level = _int(item.get("level", 4), "a segment level", here, 1)
            if level > 4:
                raise TraceFormatError(f"{here}: a segment level must be 1..4, got {level}")
            tokens = tuple(_int(t, "a token id", here) for t in item["tokens"])
            key = item.get("key")
            if key is not None and not isinstance(key, str):
                raise TraceFormatError(f"{here}: a segment key must be a string, got {key!r}")
            segments.append(TraceSegment(level, tokens, key))
        if not any(s.tokens for s in segments):
            raise TraceFormatError(f"{here}: the prompt has no tokens")
        calls.append(TraceCall(str(raw.get("agent", "call")), tuple(segments),
                               _int(raw.get("output_tokens", 1), "output_tokens", here, 1),
                               _seconds(raw.get("tool_s", 0.0), "tool_s", here),
                               _seconds(raw.get("retrieval_s", 0.0), "retrieval_s", here)))
    if not calls:
        raise TraceFormatError(f"{where}: a session needs at least one call")
    return TraceSession(str(record.get("session", where)), str(record.get("method", "unknown")), tuple(calls),
                        str(record.get("domain", "")))


def read_trace(path: str | Path) -> Trace:
    """A trace file; TraceFormatError names the file and line of the first problem."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no trace file at {path}")
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines:
        raise TraceFormatError(f"{path}: empty (expected a {FORMAT} header line)")
    try:
        header = json.loads(lines[0])
    except json.JSONDecodeError as error:
        raise TraceFormatError(f"{path}:1: not JSON ({error.msg})") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise TraceFormatError(f"{path}:1: not a {FORMAT} header (got format {header.get('format') if isinstance(header, dict) else header!r})")
    sessions = []
    for number, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise TraceFormatError(f"{path}:{number}: not JSON ({error.msg})") from None
        sessions.append(session_from_dict(record, f"{path}:{number}"))
    if not sessions:
        raise TraceFormatError(f"{path}: no sessions")
    meta = {k: v for k, v in header.items() if k not in ("format", "tokenizer", "source")}
    return Trace(sessions, str(header.get("tokenizer", "unknown")), str(header.get("source", "")), meta)


# ---- from glmcot's question traces ----------------------------------------------------------
def record_from_question_traces(paths: Iterable[str | Path], encode: Callable[[str], list[int]],
                                methods: tuple[str, ...] = ("glm", "graphcot"), tokenizer: str = "qwen") -> Trace:
    """Converts glmcot.trace/1 question traces (the agents' own recordings) into a kvsim trace.

    Each segment is tokenized on its own (so level boundaries are exact); the output tokens are
    the reply's tokens; the wait after a call is the sandbox time of the snippets run before the
    session's next call, its RetrieveNode part kept apart."""
    from glmcot.agents.trace import LLMCall, SnippetRun, event_from_dict
    from glmcot.agents.call_traces import PromptResolver, trace_files

    resolver = PromptResolver()
    cache: dict[str, tuple[int, ...]] = {}

    def tokens(text: str) -> tuple[int, ...]:
        if text not in cache:
            cache[text] = tuple(encode(text))
        return cache[text]

    sessions: list[TraceSession] = []
    for path in trace_files(paths):
        domain = path.stem.split("-")[0]
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # a torn last line, as resuming skips it
            method = str(record.get("method", "glm"))
            if method not in methods or not isinstance(record.get("trace"), list):
                continue
            calls: list[dict] = []
            for raw in record["trace"]:
                event = event_from_dict(raw) if isinstance(raw, dict) else None
                if isinstance(event, LLMCall):
                    segments = []
                    for item in event.segments:
                        text = item["text"] if "text" in item else resolver.text(str(item["prompt"]))
                        segments.append(TraceSegment(int(item.get("level", 4)), tokens(str(text)), item.get("key")))
                    calls.append({"agent": event.agent, "segments": tuple(segments),
                                  "output_tokens": max(1, len(encode(event.text))), "tool_s": 0.0, "retrieval_s": 0.0})
                elif isinstance(event, SnippetRun) and calls:
                    calls[-1]["tool_s"] += float(event.result.get("seconds", 0.0) or 0.0)
                    calls[-1]["retrieval_s"] += float(event.result.get("retrieval_s", 0.0) or 0.0)
            if calls:
                calls[-1]["tool_s"] = calls[-1]["retrieval_s"] = 0.0  # nothing waits on the last call
                sessions.append(TraceSession(f"{record.get('qid', f'{path.name}:{number}')}", method,
                                             tuple(TraceCall(**c) for c in calls), domain))
    if not sessions:
        raise TraceFormatError(f"no question traces of {', '.join(methods)} with LLM calls in the given files")
    return Trace(sessions, tokenizer, "glmcot question traces (scripted policy)")
