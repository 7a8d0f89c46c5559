"""Recorded question traces as per-session call sequences, for replaying a real agent workload
through an engine (glmcot.benchmarks.codesign --traces).

A traces file (`run_questions(..., traces=...)`, `glmcot.benchmarks.agents --traces`) holds one question per line; its
"llm" events list each call's segments, with the shared agent prompts (P-I) named by
`agent/domain@hash` instead of repeated. Loading rebuilds those texts from the package prompts and
checks every rebuilt prompt against the recorded prompt hash, so a replay sends exactly what the
agent sent.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from glmcot.agents.trace import LLMCall, event_from_dict
from glmcot.llm.replay import prompt_hash
from glmcot.contract import Segment, join_segments


class TraceError(ValueError):
    """A traces file that cannot be replayed (malformed line, unknown prompt, changed prompt)."""


@dataclass
class RecordedCall:
    agent: str
    segments: list[Segment]
    response: str
    step: int = 0
    attempt: int = 0


@dataclass
class RecordedSession:
    qid: str
    method: str
    calls: list[RecordedCall] = field(default_factory=list)


class PromptResolver:
    """`agent/domain@hash` -> the P-I text the package prompts render for it."""

    def __init__(self) -> None:
        self._texts: dict[str, str] = {}
        self._domains: set[str] = set()

    def text(self, name: str) -> str:
        if name in self._texts:
            return self._texts[name]
        attribute, _, rest = name.partition("/")
        domain, _, _digest = rest.partition("@")
        if not attribute or not domain or not _digest:
            raise TraceError(f"prompt name {name!r} is not agent/domain@hash")
        if domain not in self._domains:
            self._load(domain)
        if name not in self._texts:
            raise TraceError(f"prompt {name} is not what the package prompts render for {domain!r} now "
                             f"(they changed since the recording, or the graph had no known domain): record the traces again")
        return self._texts[name]

    def _load(self, domain: str) -> None:
        from glmcot.agents.prompts import load_prompts

        self._domains.add(domain)
        for examples in (True, False):
            prompts = load_prompts(None if domain == "default" else domain, graphcot_examples=examples)
            for attribute in ("classify", "classify_plan", "reason", "act", "graphcot"):
                self._texts.setdefault(prompts.name(attribute), getattr(prompts, attribute))
            from glmcot.agents.graphcot_faithful import domain_prompt  # the faithful Graph-CoT's prompt

            faithful = domain_prompt(prompts, zero_shot=not examples)
            self._texts.setdefault(faithful.name, faithful.shared)


def _session(record: dict, resolver: PromptResolver, where: str) -> RecordedSession:
    session = RecordedSession(qid=str(record.get("qid")), method=str(record.get("method", "glm")))
    for raw in record.get("trace") or []:
        event = event_from_dict(raw) if isinstance(raw, dict) else None
        if not isinstance(event, LLMCall):
            continue
        segments = []
        for item in event.segments:
            level, key = int(item.get("level", 4)), item.get("key")
            if "text" in item:
                segments.append(Segment(str(item["text"]), level, key))
            elif "prompt" in item:
                segments.append(Segment(resolver.text(str(item["prompt"])), level, key))
            else:
                raise TraceError(f"{where}: a segment of qid {session.qid} has neither text nor prompt name")
        if not segments:
            raise TraceError(f"{where}: an llm event of qid {session.qid} has no segments (recorded before segments were traced?)")
        if event.prompt_sha and prompt_hash(join_segments(segments)) != event.prompt_sha:
            raise TraceError(f"{where}: the rebuilt prompt of qid {session.qid} ({event.agent}) differs from the recorded one")
        session.calls.append(RecordedCall(agent=event.agent, segments=segments, response=event.text,
                                          step=int(event.metadata.get("step", 0)),
                                          attempt=int(event.metadata.get("attempt", 0))))
    return session


def trace_files(paths: Iterable[str | Path]) -> list[Path]:
    """Files named, and the *.jsonl files of folders named, in order."""
    files: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            files.extend(sorted(path.glob("*.jsonl")))
        elif path.is_file():
            files.append(path)
        else:
            raise FileNotFoundError(f"no traces file or folder at {path}")
    if not files:
        raise TraceError(f"no *.jsonl traces under {', '.join(map(str, paths))}")
    return files


def load_recorded_sessions(paths: Iterable[str | Path], *, methods: tuple[str, ...] = ("glm",)) -> list[RecordedSession]:
    """Every question of the given methods with at least one LLM call, file by file, in order.

    A torn last line (a crash mid-write) is skipped, as resuming does; any other malformed line is
    an error naming the file and line."""
    resolver = PromptResolver()
    sessions: list[RecordedSession] = []
    for path in trace_files(paths):
        lines = path.read_text(encoding="utf-8").splitlines()
        while lines and not lines[-1].strip():
            lines.pop()
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                if number == len(lines):
                    continue
                raise TraceError(f"{path}:{number}: not JSON ({error.msg})") from None
            if not isinstance(record, dict) or "trace" not in record:
                raise TraceError(f"{path}:{number}: not a question trace (no 'trace' list)")
            if record.get("method", "glm") not in methods:
                continue
            session = _session(record, resolver, f"{path}:{number}")
            if session.calls:
                sessions.append(session)
    return sessions
