"""The co-design benchmark's workload: the sessions it replays, their calls and segments.

Synthetic GRBench-style GLM sessions (seeded; vertex chunks drawn from a Zipf popularity), or
recorded GLM question traces; and the same notebooks cut into single facts, the paper's
fact-unit baseline. How much chunk reuse could add at most is measured here too, before any
caching.
"""

from __future__ import annotations

import argparse
import hashlib
import random
from dataclasses import dataclass, field
from pathlib import Path

WORDS = ("graph node edge paper author venue citation year title field topic keyword neighbour weight "
         "relation count list answer question fact notebook retrieve feature degree check missing value "
         "network learning model data system method result study analysis review patient drug disease "
         "product brand category book series genre court case judge statute price rating").split()
TYPES = ("paper", "author", "venue", "field", "product", "brand")
FORCED_MAX_TOKENS = 2048  # a cap only: a forced completion ends with its text


@dataclass
class Call:
    agent: str
    segments: list  # list[Segment]
    forced: str


@dataclass
class Session:
    sid: str
    calls: list[Call] = field(default_factory=list)


def words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def vertex_chunk(vid: int, rng_seed: int, neighbours: int) -> str:
    rng = random.Random(rng_seed * 1_000_003 + vid)
    kind = TYPES[vid % len(TYPES)]
    lines = [f"Node V{vid} ({kind}): {words(rng, 4)}."]
    for _ in range(neighbours):
        other = rng.randrange(10 * (vid + 1))
        lines.append(f"-> V{other} w{rng.randint(1, 99)}: {words(rng, 3)}")
    return "\n".join(lines) + "\n"


def zipf_sampler(rng: random.Random, n: int, s: float):
    weights = [1.0 / (rank + 1) ** s for rank in range(n)]
    order = list(range(n))
    rng.shuffle(order)  # popular vertices are spread over the id space
    cumulative, total = [], 0.0
    for w in weights:
        total += w
        cumulative.append(total)

    def draw() -> int:
        x = rng.random() * total
        lo, hi = 0, n - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if cumulative[mid] < x:
                lo = mid + 1
            else:
                hi = mid
        return order[lo]

    return draw


def make_workload(seed: int, num_sessions: int, num_vertices: int, zipf_s: float, prompt_words: int,
                  neighbours: int) -> tuple[list[Session], dict[str, str]]:
    from glmcot.engine import Segment

    rng = random.Random(seed)
    prompts = {agent: f"[{agent} agent]\n" + words(random.Random(seed * 7 + i), prompt_words) + "\n"
               for i, agent in enumerate(("classify", "reason", "act"))}
    draw = zipf_sampler(rng, num_vertices, zipf_s)
    sessions = []
    for q in range(num_sessions):
        sid = f"q{q}"
        question = Segment(f"QuestionRecord {q}: {words(rng, 8)}?\n", 4)
        session = Session(sid)
        deterministic = rng.random() < 0.3
        session.calls.append(Call("classify", [Segment(prompts["classify"], 1), question],
                                  "deterministic\n" if deterministic else "non-deterministic\n"))
        notebook: list = []
        seen: set[int] = set()
        rounds = 1 if deterministic else rng.randint(2, 4)
        for r in range(rounds):
            if not deterministic:
                session.calls.append(Call("reason", [Segment(prompts["reason"], 1), Segment("Notebook:\n", 2), *notebook,
                                                     question], f"Missing: {words(rng, 5)}\n"))
            missing = Segment(f"Needed: {words(rng, 6)}\n", 4)
            session.calls.append(Call("act", [Segment(prompts["act"], 1), missing],
                                      f'n = RetrieveNode("{words(rng, 2)}")\nprint(NodeInfo(n))\n'))
            for _ in range(rng.randint(2, 4)):  # the retriever returns the touched vertices' chunks
                vid = draw()
                if vid not in seen:
                    seen.add(vid)
                    notebook.append(Segment(vertex_chunk(vid, seed, neighbours), 2, f"vertex:{vid}:v1"))
            notebook.append(Segment(f"Fact {r + 1}: {words(rng, 8)}.\n", 2))
        session.calls.append(Call("reason", [Segment(prompts["reason"], 1), Segment("Notebook:\n", 2), *notebook, question],
                                  f"Answer: {words(rng, 4)}\n"))
        sessions.append(session)
    return sessions, prompts


def recorded_workload(paths: list[str], seed: int, limit: int | None) -> tuple[list[Session], dict[str, str]]:
    """Sessions replayed from recorded GLM question traces: the agents' real segments (P-I prompts
    rebuilt from the package and checked against the recorded prompt hash) and their recorded
    responses, force-decoded. Files of several domains are mixed in a seeded order, as one server
    answering every domain would see them."""
    from glmcot.agents.call_traces import load_recorded_sessions
    from glmcot.engine import Segment

    recorded = sorted(load_recorded_sessions(paths), key=lambda r: r.qid)  # files list questions as they finished
    random.Random(seed).shuffle(recorded)
    if limit:
        recorded = recorded[:limit]
    sessions, prompts = [], {}
    for number, record in enumerate(recorded):
        session = Session(f"{record.qid}#{number}")
        for call in record.calls:
            for segment in call.segments:
                if segment.level == 1:
                    prompts.setdefault(segment.text, segment.text)  # each shared prompt warmed once
            session.calls.append(Call(call.agent, [Segment(s.text, s.level, s.key) for s in call.segments], call.response))
        sessions.append(session)
    return sessions, prompts


def fact_notebook(segments: list) -> list:
    """One prompt with its notebook (the P2 segments) rewritten as the paper's fact-unit baseline
    sees it: the same text, cut into single facts (each line of a vertex chunk; each other
    notebook entry whole) and listed by a fixed score per fact, as a retriever ranking facts lists
    them. A fact keeps its place relative to the older ones, but a new fact can land anywhere, not
    only at the end, and facts carry no chunk key. A leading one-line title ("Notebook:") stays
    first. No text is added or dropped, so both units cost the same tokens."""
    from glmcot.engine import Segment

    first = next((i for i, s in enumerate(segments) if s.level == 2), None)
    if first is None:
        return list(segments)
    title, facts = "", []
    for index, segment in enumerate(s for s in segments if s.level == 2):
        if segment.key is not None:
            facts.extend(segment.text.splitlines(keepends=True))
        elif index == 0 and segment.text.count("\n") <= 1:
            title = segment.text
        else:
            facts.append(segment.text)
    facts.sort(key=lambda fact: hashlib.sha1(fact.encode()).digest())
    notebook = Segment(title + "".join(facts), 2)
    return [*segments[:first], notebook, *(s for s in segments[first:] if s.level != 2)]


def fact_sessions(sessions: list[Session]) -> list[Session]:
    """The sessions with every notebook rewritten by `fact_notebook` (the forced text unchanged)."""
    return [Session(s.sid, [Call(c.agent, fact_notebook(c.segments), c.forced) for c in s.calls]) for s in sessions]


def reuse_ceiling(sessions: list[Session]) -> dict:
    """How much vertex-chunk reuse could add at most, before any caching: the share of prompt
    characters in keyed chunks, and in chunks a session reads that an earlier session read too
    (counted once per session; a session's own re-reads are prefix hits already, as its notebook
    only grows). No pool size or policy can make chunk hits exceed the second share."""
    total = chunk = repeated = 0
    sessions_by_key: dict[str, int] = {}
    keys_repeated = set()
    for session in sessions:
        seen = set()
        for call in session.calls:
            for segment in call.segments:
                total += len(segment.text)
                if segment.key is None:
                    continue
                chunk += len(segment.text)
                if segment.key in seen:
                    continue
                seen.add(segment.key)
                sessions_by_key[segment.key] = sessions_by_key.get(segment.key, 0) + 1
                if sessions_by_key[segment.key] > 1:
                    repeated += len(segment.text)
                    keys_repeated.add(segment.key)
    return {"chunk_share": chunk / total if total else 0.0, "cross_session_chunk_share": repeated / total if total else 0.0,
            "distinct_chunks": len(sessions_by_key), "chunks_in_several_sessions": len(keys_repeated)}


def record_traces(per_domain: int, domains: list[str], folder: Path, console) -> list[Path]:
    """Runs the GLM agent (scripted policy: the gold plans) on the synthetic GRBench-schema domains,
    MiniLM retrieval and the sandbox as in `glmcot eval`, and records its question traces."""
    from glmcot.agents import AgentConfig, AgentContext, ScriptedBackend, run_questions
    from glmcot.eval.config import default_cache_dir
    from glmcot.eval.workload import DEMO_SCALE, DEMO_SEED, ensure_dataset, pick_questions
    from glmcot.data.questions import read_questions

    paths = []
    for domain in domains:
        path = folder / f"{domain}-glm.jsonl"
        data = ensure_dataset(domain, DEMO_SCALE, DEMO_SEED, default_cache_dir())
        records = list(pick_questions(read_questions(data / "questions.jsonl", domain=domain), per_domain))
        console.print(f"[dim]recording {len(records)} {domain} questions (GLM, scripted policy) into {path}[/dim]")
        with AgentContext(data, domain=domain) as context:
            backend = ScriptedBackend(records, code_runner=context.run_code)
            try:
                run_questions(records, method="glm", backend=backend, context=context, config=AgentConfig(domain=domain),
                              concurrency=4, traces=path, resume=False)
            finally:
                backend.close()
        paths.append(path)
    return paths


def add_workload_arguments(parser: argparse.ArgumentParser) -> None:
    """The workload options the codesign, codesign_sweep and vllm_codesign benchmarks share."""
    parser.add_argument("--sessions", type=int, default=40, help="questions (agent sessions) replayed per arm")
    parser.add_argument("--concurrency", type=int, default=12, help="sessions in flight")
    parser.add_argument("--vertices", type=int, default=200, help="distinct vertex chunks in the graph")
    parser.add_argument("--zipf", type=float, default=1.1, help="Zipf exponent of vertex popularity")
    parser.add_argument("--neighbours", type=int, default=4, help="neighbour lines per vertex chunk")
    parser.add_argument("--prompt-words", type=int, default=60, help="words per shared agent prompt (P1)")
    parser.add_argument("--traces", nargs="+", default=None, metavar="PATH",
                        help="replay recorded GLM question traces (files, or folders of *.jsonl) instead of the synthetic workload")
    parser.add_argument("--record-traces", type=int, default=0, metavar="N",
                        help="first record N questions per domain with the GLM agent (scripted policy, synthetic tiny "
                             "domains), then replay them; the traces are kept beside --out")
    parser.add_argument("--domains", nargs="+", default=["dblp", "amazon", "goodreads", "biomedical", "legal"],
                        help="domains for --record-traces")
    parser.add_argument("--seed", type=int, default=0)


def load_workload(args, out: Path, console) -> tuple[list[Session], dict[str, str]]:
    """The sessions to replay and the shared prompts to warm: recorded (--traces, or
    --record-traces first, kept beside `out`) or synthetic."""
    if args.record_traces:
        args.traces = [str(p) for p in record_traces(args.record_traces, args.domains, out.parent / "traces", console)]
    if args.traces:
        return recorded_workload(args.traces, args.seed, args.sessions)
    return make_workload(args.seed, args.sessions, args.vertices, args.zipf, args.prompt_words, args.neighbours)
