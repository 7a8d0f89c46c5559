"""A small hand-made kvsim trace (token ids < 2000, the tiny checkpoint's vocabulary): agent
prompts shared by sessions, notebooks that grow call by call, vertex chunks shared across sessions."""

from __future__ import annotations

import random

from glmcot.benchmarks.kvsim.trace import Trace, TraceCall, TraceSegment, TraceSession


def ids(seed: int, n: int) -> tuple[int, ...]:
    rng = random.Random(seed)
    return tuple(rng.randrange(10, 2000) for _ in range(n))


def tiny_trace(sessions: int = 4, calls: int = 3, prompt: int = 64, seed: int = 0) -> Trace:
    agents = {name: ids(1000 + i, prompt) for i, name in enumerate(("classify", "reason", "act"))}
    chunks = {k: ids(2000 + k, 24) for k in range(6)}
    out = []
    for s in range(sessions):
        notebook: list[TraceSegment] = []
        question = ids(3000 + 97 * s + seed, 20)
        session_calls = []
        for c in range(calls):
            agent = ("classify", "reason", "act")[min(c, 2)]
            if c:
                k = (s + c) % len(chunks)
                notebook.append(TraceSegment(2, chunks[k], f"v{k}"))
                notebook.append(TraceSegment(2, ids(4000 + 31 * s + c, 12)))
            segments = (TraceSegment(1, agents[agent]), TraceSegment(4, question), *notebook,
                        TraceSegment(4, ids(5000 + 17 * s + c, 8)))
            session_calls.append(TraceCall(agent, segments, 3 + c, tool_s=0.01 * (c + 1), retrieval_s=0.005))
        out.append(TraceSession(f"q{s}", "glm", tuple(session_calls), "tiny"))
    trace = Trace(out, "synthetic", "tests/kvsim/tiny_trace.py")
    # The trace is only useful if it holds what the kvsim tests rely on: every session's calls,
    # one agent prompt per agent shared by all sessions, and vertex chunks that recur across sessions.
    assert [len(session.calls) for session in trace.sessions] == [calls] * sessions
    chunk_users: dict[str, set[str]] = {}
    for session in trace.sessions:
        for call in session.calls:
            for segment in call.segments:
                if segment.key:
                    chunk_users.setdefault(segment.key, set()).add(session.session)
    assert sessions < 2 or calls < 2 or any(len(users) > 1 for users in chunk_users.values())
    return trace
