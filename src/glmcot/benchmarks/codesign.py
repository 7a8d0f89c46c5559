"""GLM serving co-design benchmark: vertex-chunk KV reuse and four-level priority eviction.

Replays a multi-agent workload through the native engine under KV memory pressure, with forced
decoding (every forward pass, cache hit and eviction is real; the text is scripted), for the
arms below in the same run, each on its own engine (one copy of the weights). The arms run in
lock-step, one engine step of each in turn, and each arm's time is the sum of its own steps: on a
shared, noisy machine the slow and fast moments fall on every arm alike (--sequential runs them
one after the other). Throughput is sessions per second of the arm's own time; call latency is
measured in that time too. --control ARM runs a second copy of ARM alongside: the two do
identical work, so their throughput spread is this run's noise floor (2-7 % on this 2-core
machine), and an effect smaller than it is not measured. Most of that spread follows the order the
engines' KV pools were allocated (in our profiles the first was faster for a whole run): --repeats N
creates the engines in a rotated order each time and reports the median.

    lru+facts     the paper's vertex-centric-off baseline: the same notebooks cut into single facts
                  (a line of a vertex chunk, or one fact block) listed by a fixed per-fact score, so
                  a new fact lands anywhere rather than at the end; prefix caching, LRU eviction
    lru           vLLM-style prefix caching, LRU eviction, chunk keys ignored (exact); notebooks of
                  whole vertex chunks appended in order, so a session's next call hits its notebook
    lru+chunks    the same plus vertex-chunk reuse (pic, first k tokens of each chunk recomputed;
                  a chunk's KV is taken from the first prompt that computed it: chunk_source=context)
    glm+chunks    four-level priority eviction (P4, P3, P2, P1) plus vertex-chunk reuse; inside P3,
                  prefix blocks no other session has read go first (engine policy glm)
    glm-paper+chunks  the same with the four levels exactly as the paper describes them (P3 one LRU
                  level; policy glm-paper)
    glm+isolated  glm+chunks with every chunk computed alone (chunk_source=isolated)

The workload follows GRBench-style GLM sessions (one session = one question): a C-Agent call,
then rounds of R-Agent (P1 prompt + P2 notebook + P4 question) and A-Agent (P1 prompt + P4
"missing" text) calls; each retrieval adds vertex chunks, drawn from a heavy-tailed (Zipf)
popularity over the graph's vertices, to the session's notebook; a final R call answers and the
session ends (end_session demotes its notebook to P3). Many sessions run concurrently (closed
loop: a session's next call starts when its previous one returns). The synthetic workload is
seeded; its settings are in the JSON.

With --traces (or --record-traces N, which first runs the GLM agent on the synthetic GRBench-schema
domains), the sessions are recorded GLM questions instead: the agents' real prompts, notebooks,
vertex chunks and responses, mixed over domains as one server answering all of them sees them.

It also measures fidelity of position-independent chunk reuse (pic, pic0) against full prefill
on the same prompts: top-1 agreement and KL of the next-token distributions, teacher-forced along
the same completion. Random weights cannot tell fidelity for a real model: run the same command
with --model /path/to/local/checkpoint for that.

    python -m glmcot.benchmarks.codesign                  # about 6-8 minutes on 2 CPU cores
    python -m glmcot.benchmarks.codesign --quick          # about 2 minutes
    python -m glmcot.benchmarks.codesign --record-traces 20 --sessions 100   # recorded GLM sessions
    python -m glmcot.benchmarks.codesign --traces runs/glm-traces/           # from glmcot.benchmarks.agents --traces or run_questions(traces=)
    python -m glmcot.benchmarks.codesign --model /models/Qwen3-0.6B --device cuda --kv-tokens 60000 --sessions 400
"""

from __future__ import annotations

from glmcot.offline import stay_offline

import argparse
import hashlib
import itertools
import json
import math
import os
import platform
import random
import statistics
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

RANDOM_CAVEAT = ("fidelity on random weights says nothing about a real model: rerun this command with "
                 "--model /path/to/local/checkpoint to measure it")
# The paper's vertex-centric ablation switches the retrieval unit from single facts (fragments in
# no stable order, so even similar prompts miss the prefix cache) to vertex chunks with KV reuse:
# here lru+facts against lru+chunks.
PAPER = {"vertex_centric_hit_points": 17.7, "vertex_centric_throughput_pct": 41.6, "priority_miss_pct": -15.1,
         "priority_throughput_pct": 14.3}
ARMS = {
    "lru+facts": dict(eviction_policy="lru", chunk_reuse="exact"),
    "lru": dict(eviction_policy="lru", chunk_reuse="exact"),
    "lru+chunks": dict(eviction_policy="lru", chunk_reuse="pic", chunk_source="context"),
    "glm+chunks": dict(eviction_policy="glm", chunk_reuse="pic", chunk_source="context"),
    "glm-paper+chunks": dict(eviction_policy="glm-paper", chunk_reuse="pic", chunk_source="context"),
    "glm+isolated": dict(eviction_policy="glm", chunk_reuse="pic", chunk_source="isolated"),
}
FACT_ARMS = frozenset({"lru+facts"})  # arms that replay notebooks of single facts (fact_notebook)
CONTROL_SUFFIX = " (A/A)"  # a second copy of an arm: the spread between the two is the noise floor


def arm_settings(name: str) -> dict:
    """Engine settings of an arm, or of the arm a control copy repeats."""
    return ARMS[name.removesuffix(CONTROL_SUFFIX)]


def arm_notebook(name: str) -> str:
    """The retrieval unit an arm's notebooks are made of."""
    return "facts" if name.removesuffix(CONTROL_SUFFIX) in FACT_ARMS else "vertex chunks"


FIDELITY_MODES = {"pic": ("pic", "context"), "pic0": ("pic0", "context"),
                  "pic isolated": ("pic", "isolated"), "pic0 isolated": ("pic0", "isolated")}
WORDS = ("graph node edge paper author venue citation year title field topic keyword neighbour weight "
         "relation count list answer question fact notebook retrieve feature degree check missing value "
         "network learning model data system method result study analysis review patient drug disease "
         "product brand category book series genre court case judge statute price rating").split()
FORCED_MAX_TOKENS = 2048  # a cap only: a forced completion ends with its text
TYPES = ("paper", "author", "venue", "field", "product", "brand")


# ---- workload -------------------------------------------------------------------------------
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
    """The workload options codesign.py and codesign_sweep.py share."""
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


def signed(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.1f}"


# ---- one arm ----------------------------------------------------------------------------------
def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(q / 100 * len(ordered)) - 1))]


def engine_config(args, **overrides):
    from glmcot.engine import EngineConfig

    return EngineConfig(model=args.model, dtype=args.dtype, device=args.device, block_size=args.block_size,
                        kv_cache_tokens=args.kv_tokens, max_num_seqs=args.concurrency * 2,
                        max_num_batched_tokens=args.batch_tokens, pic_recompute_tokens=args.pic_k,
                        chunk_admission=getattr(args, "chunk_admission", 2),
                        num_threads=args.threads, **overrides)


class ArmReplay:
    """One arm's closed-loop replay on its own engine, advanced one engine step at a time, so
    several arms can run in lock-step (`run_arms`): the machine's slow and fast moments then
    fall on every arm alike, and each arm's time is the sum of its own steps."""

    def __init__(self, name: str, args, sessions: list[Session], prompts: dict[str, str], loaded=None,
                 progress=None) -> None:
        from glmcot.engine import SamplingParams, Segment
        from glmcot.engine.core.llm_engine import LLMEngine

        self.name, self.args = name, args
        if arm_notebook(name) == "facts":
            sessions = fact_sessions(sessions)
        self.engine = engine = LLMEngine(engine_config(args, **arm_settings(name)), loaded=loaded)
        # Warm-up: prefill-only requests put the shared agent prompts in the cache (every arm).
        for text in prompts.values():
            engine.add_request([Segment(text, 1)], SamplingParams(max_tokens=0))
        while engine.has_unfinished():
            engine.step()
        self.warm_stats = engine.stats()
        # A recorded prompt can outgrow a small model's positions (biomedical notebooks on the tiny
        # model): such sessions are left out, the same ones in every arm, and counted.
        fitting = [s for s in sessions if all(
            len(engine.tokenize_prompt(c.segments)[0]) + len(engine.tokenizer.encode(c.forced)) < engine.max_model_len
            for c in s.calls)]
        self.too_long = len(sessions) - len(fitting)
        self.queue = list(reversed(fitting))
        self.inflight: dict[str, tuple[Session, int, float]] = {}
        self.latencies: list[float] = []  # per call, in this arm's own time
        self.session_latency: list[float] = []
        self.session_start: dict[str, float] = {}
        self.calls = self.done_sessions = 0
        self.clock = 0.0  # this arm's own time: the sum of its steps
        self.cpu = 0.0
        self.prefill_clock = 0.0  # ... of which steps that computed prompt tokens (the rest only decoded)
        self.progress = progress
        self.task = progress.add_task(f"{name:>10}", total=len(fitting)) if progress else None
        while self.queue and len(self.inflight) < args.concurrency:
            self._start_next()

    @property
    def finished(self) -> bool:
        return not self.engine.has_unfinished()

    def _submit(self, session: Session, index: int) -> None:
        from glmcot.engine import SamplingParams

        call = session.calls[index]
        request = self.engine.add_request(call.segments, SamplingParams(forced_text=call.forced, max_tokens=FORCED_MAX_TOKENS),
                                          session=session.sid)
        self.inflight[request.request_id] = (session, index, self.clock)

    def _start_next(self) -> None:
        session = self.queue.pop()
        self.session_start[session.sid] = self.clock
        self._submit(session, 0)

    def step(self) -> None:
        started, cpu_started = time.perf_counter(), time.process_time()
        computed = self.engine.num_prompt_tokens_computed
        outputs = self.engine.step()
        elapsed = time.perf_counter() - started
        self.clock += elapsed
        self.cpu += time.process_time() - cpu_started
        if self.engine.num_prompt_tokens_computed > computed:
            self.prefill_clock += elapsed
        for out in outputs:
            session, index, submitted = self.inflight.pop(out.request_id)
            self.latencies.append(self.clock - submitted)
            self.calls += 1
            if index + 1 < len(session.calls):
                self._submit(session, index + 1)
                continue
            self.engine.end_session(session.sid)
            self.done_sessions += 1
            self.session_latency.append(self.clock - self.session_start.pop(session.sid))
            if self.progress:
                self.progress.advance(self.task)
            if self.queue:
                self._start_next()

    def result(self) -> dict:
        stats, warm = self.engine.stats(), self.warm_stats
        queries = stats["prefix_queries_tokens"] - warm["prefix_queries_tokens"]
        prefix_hits = stats["prefix_hits_tokens"] - warm["prefix_hits_tokens"]
        chunk_hits = stats["chunk_hits_tokens"]
        wall, cpu, done = self.clock, self.cpu, self.done_sessions
        return {
            "arm": self.name, **arm_settings(self.name), "notebook": arm_notebook(self.name),
            "sessions": done, "sessions_too_long": self.too_long, "calls": self.calls, "wall_s": wall, "cpu_s": cpu,
            # Time in steps that computed prompt tokens; steps that only decode are work that saving
            # prefill tokens cannot remove.
            "prefill_steps_s": self.prefill_clock,
            "throughput_sessions_per_s": done / wall, "throughput_calls_per_s": self.calls / wall,
            "throughput_sessions_per_cpu_s": done / cpu if cpu else None,
            "latency_p50_s": percentile(self.latencies, 50), "latency_p99_s": percentile(self.latencies, 99),
            "session_latency_p50_s": percentile(self.session_latency, 50),
            "prompt_tokens_queried": queries,
            "prefix_hit_tokens": prefix_hits, "chunk_hit_tokens": chunk_hits,
            "prefix_hit_rate": prefix_hits / queries if queries else 0.0,
            "chunk_hit_rate": chunk_hits / queries if queries else 0.0,
            "hit_rate": (prefix_hits + chunk_hits) / queries if queries else 0.0,
            "prefill_tokens_computed": stats["prompt_tokens_computed"] - warm["prompt_tokens_computed"],
            "chunk_tokens_computed_isolated": stats["chunk_computed_tokens"],
            "chunk_tokens_captured": stats["chunk_captured_tokens"],
            "chunk_fallbacks": stats["chunk_fallbacks"],
            "chunk_admission_skips": stats["chunk_admission_skips"],
            "generated_tokens": stats["generated_tokens"],
            "steps": stats["steps"] - warm["steps"],
            "preemptions": stats["preemptions"],
            "evictions": {f"P{level}": stats[f"evictions_p{level}"] for level in range(1, 5)},
            "sessions_demoted_blocks": stats["sessions_demoted_blocks"],
            "kv_pool_tokens": stats["blocks_total"] * stats["block_size"],
        }


def run_arms(names: list[str], args, sessions: list[Session], prompts: dict[str, str], progress=None,
             lockstep: bool = True) -> dict[str, dict]:
    """Every arm on its own engine over one copy of the weights. Lock-step: one engine step of
    each arm in turn until all are done; otherwise one arm after the other."""
    from glmcot.engine.core.llm_engine import load_for

    loaded = load_for(engine_config(args))
    results = {}
    if not lockstep:
        for name in names:
            arm = ArmReplay(name, args, sessions, prompts, loaded, progress)
            while not arm.finished:
                arm.step()
            results[name] = arm.result()
            if progress:
                progress.remove_task(arm.task)
            del arm
        return results
    # Engines are created in the order given. One engine's KV pool can be faster than another's
    # for a whole run (in our profiles the first allocated, by 6-14 % of decode time; swapping two
    # engines' pools moved the gap with them), so main() rotates the order between repeats.
    arms = [ArmReplay(name, args, sessions, prompts, loaded, progress) for name in names]
    # Who steps first changes every round, so no arm always follows the same neighbour. A spread
    # between identical engines remains (up to 7 % here); --control measures it.
    for round_number in itertools.count():
        if all(arm.finished for arm in arms):
            break
        first = round_number % len(arms)
        for arm in arms[first:] + arms[:first]:
            if not arm.finished:
                arm.step()
    for position, arm in enumerate(arms):
        results[arm.name] = {**arm.result(), "created": position}
        if progress:
            progress.remove_task(arm.task)
    return results


def run_arm(name: str, args, sessions: list[Session], prompts: dict[str, str], progress=None) -> dict:
    """One arm alone, on its own engine."""
    return run_arms([name], args, sessions, prompts, progress, lockstep=False)[name]


# ---- fidelity ---------------------------------------------------------------------------------
def distributions(engine, calls: list[Call], warm: list[Call]) -> tuple[list[list], int]:
    """Teacher-forced next-token log-probabilities along each call's forced completion, after
    prefill-only runs of `warm` (other sessions' calls: their chunks are then cached, so the
    measured calls reuse chunks first computed elsewhere, as under load)."""
    import torch
    from glmcot.engine import SamplingParams

    for call in warm:
        engine.add_request(call.segments, SamplingParams(max_tokens=0))
    while engine.has_unfinished():
        engine.step()
    hits_before = engine.stats()["chunk_hits_tokens"]
    captured: dict[str, list] = {}
    execute = engine.runner.execute

    def recording(scheduled, kv):
        logits, sampled = execute(scheduled, kv)
        for row, request in enumerate(sampled):
            if not request.is_chunk_job:
                captured.setdefault(request.request_id, []).append(torch.log_softmax(logits[row].float(), -1).cpu())
        return logits, sampled

    engine.runner.execute = recording
    ids = [engine.add_request(c.segments, SamplingParams(forced_text=c.forced, max_tokens=FORCED_MAX_TOKENS)).request_id for c in calls]
    while engine.has_unfinished():
        engine.step()
    engine.runner.execute = execute
    return [captured[i] for i in ids], engine.stats()["chunk_hits_tokens"] - hits_before


def fidelity(args, sessions: list[Session]) -> dict:
    import torch
    from glmcot.engine.core.llm_engine import LLMEngine

    # The measured calls: the last R-Agent call of the last sessions (the longest notebooks);
    # every other session's calls warm the cache first.
    targets = [s for s in reversed(sessions) if any(seg.key for seg in s.calls[-1].segments)][: args.fidelity_prompts]
    calls = [s.calls[-1] for s in targets]
    warm = [c for s in sessions if s not in targets for c in s.calls]
    big = dict(vars(args))
    big["kv_tokens"] = None  # no memory pressure: only the reuse mode differs
    reference, _ = distributions(LLMEngine(engine_config(argparse.Namespace(**big), chunk_reuse="exact")), calls, [])
    out = {"prompts": len(calls), "warm_calls": len(warm),
           "caveat": RANDOM_CAVEAT if args.model.startswith("random:") else None}
    for mode, (reuse, source) in FIDELITY_MODES.items():
        engine = LLMEngine(engine_config(argparse.Namespace(**big), chunk_reuse=reuse, chunk_source=source))
        got, chunk_hits = distributions(engine, calls, warm)
        agree = first_agree = steps = 0
        kls = []
        for want_steps, got_steps in zip(reference, got):
            for j, (p, q) in enumerate(zip(want_steps, got_steps)):
                same = int(p.argmax() == q.argmax())
                agree += same
                first_agree += same if j == 0 else 0
                steps += 1
                kls.append(float(torch.sum(p.exp() * (p - q))))
        out[mode] = {"top1_agreement": agree / steps, "first_token_agreement": first_agree / len(calls),
                     "kl_mean": statistics.fmean(kls), "kl_p99": percentile(kls, 99), "steps": steps,
                     "chunk_hit_tokens": chunk_hits}
    return out


# ---- report -----------------------------------------------------------------------------------
def compare(rows: dict[str, dict], throughput_key: str | None) -> dict:
    """The paper's four effects from the arms that ran (None where an arm is missing, and for
    throughput without a `throughput_key`)."""
    facts, base, chunks, glm = rows.get("lru+facts"), rows.get("lru"), rows.get("lru+chunks"), rows.get("glm+chunks")
    paper_glm = rows.get("glm-paper+chunks")

    def pct(a, b):
        return (b / a - 1) * 100 if a else None

    def both(old, new):
        return old is not None and new is not None

    def throughput(old, new):
        return pct(old[throughput_key], new[throughput_key]) if throughput_key and both(old, new) else None

    def points(old, new):
        return (new["hit_rate"] - old["hit_rate"]) * 100 if both(old, new) else None

    def misses(old, new):
        return pct(1 - old["hit_rate"], 1 - new["hit_rate"]) if both(old, new) else None

    controls = [(rows[name.removesuffix(CONTROL_SUFFIX)], row) for name, row in rows.items() if name.endswith(CONTROL_SUFFIX)]
    return {
        # Two copies of one arm doing identical work: an effect smaller than this is noise.
        "control_throughput_pct": throughput(*controls[0]) if controls else None,
        # The paper's vertex-centric ablation: fact notebooks -> vertex chunks with KV reuse ...
        "vertex_centric_hit_points": points(facts, chunks),
        "vertex_centric_throughput_pct": throughput(facts, chunks),
        # ... of which whole chunks appended in order (prefix hits on a session's own notebook) ...
        "unit_hit_points": points(facts, base),
        "unit_throughput_pct": throughput(facts, base),
        # ... and chunk KV reused at any position (hits on other sessions' chunks).
        "vertex_hit_points": points(base, chunks),
        "vertex_throughput_pct": throughput(base, chunks),
        "priority_miss_pct": misses(chunks, glm),
        "priority_throughput_pct": throughput(chunks, glm),
        # The same with the four levels exactly as the paper describes them (P3 one LRU level).
        "priority_paper_miss_pct": misses(chunks, paper_glm),
        "priority_paper_throughput_pct": throughput(chunks, paper_glm),
        "throughput_key": throughput_key,
    }


def paired_effects(runs: dict[str, list[dict]], throughput_key: str) -> dict[str, list[float]]:
    """Each effect within each repeat: arms that stepped in the same lock-step run, so one
    repeat's machine load falls on both sides of its comparison. The medians reported beside
    them pair each arm's median run, which may come from different repeats."""
    repeats = min(map(len, runs.values()))
    per_repeat = [compare({name: results[i] for name, results in runs.items()}, throughput_key) for i in range(repeats)]
    return {key: [effect[key] for effect in per_repeat] for key in per_repeat[0]
            if key != "throughput_key" and per_repeat[0][key] is not None}


def print_report(rows: dict[str, dict], ours: dict, ours_cpu: dict, fid: dict | None, console,
                 paired: dict[str, list[float]] | None = None) -> None:
    """`paired`: the effects per repeat, printed as a column when given."""
    from rich.table import Table

    table = Table(title="GLM co-design: forced decoding under KV pressure (scripted text, real compute)")
    for col in ("arm", "hit rate", "prefix", "chunk", "prefill tok", "time in prefill steps", "sess/s", "sess/cpu-s",
                "p50 s", "p99 s", "evict P1/P2/P3/P4", "preempt"):
        table.add_column(col, justify="right")
    for name, r in rows.items():
        ev = r["evictions"]
        table.add_row(name, f"{r['hit_rate']:.1%}", f"{r['prefix_hit_rate']:.1%}", f"{r['chunk_hit_rate']:.1%}",
                      f"{r['prefill_tokens_computed']:,}", f"{r['prefill_steps_s'] / r['wall_s']:.0%}",
                      f"{r['throughput_sessions_per_s']:.3f}",
                      f"{r['throughput_sessions_per_cpu_s']:.3f}", f"{r['latency_p50_s']:.3f}",
                      f"{r['latency_p99_s']:.3f}", f"{ev['P1']}/{ev['P2']}/{ev['P3']}/{ev['P4']}", str(r["preemptions"]))
    console.print(table)
    bars = Table(title="Against the paper's ablation (Fig. 15), same run")
    columns = ["effect", "paper", "ours (own step time)", "ours (CPU time)"]
    if paired:
        columns.append("per repeat (same run)")
    for col in columns:
        bars.add_column(col, justify="right")
    labels = {"vertex_centric_hit_points": "vertex-centric (facts -> chunks + reuse): hit rate, points",
              "vertex_centric_throughput_pct": "vertex-centric: throughput %",
              "unit_hit_points": "  of which chunks as the unit (facts -> lru): points",
              "unit_throughput_pct": "  of which chunks as the unit: throughput %",
              "vertex_hit_points": "  of which chunk KV reuse (lru -> lru+chunks): points",
              "vertex_throughput_pct": "  of which chunk KV reuse: throughput %",
              "priority_miss_pct": "priority eviction: misses %", "priority_throughput_pct": "priority eviction: throughput %",
              "priority_paper_miss_pct": "  the paper's four levels as written (glm-paper): misses %",
              "priority_paper_throughput_pct": "  the paper's four levels as written: throughput %",
              "control_throughput_pct": "noise floor: same arm twice, throughput %"}
    for key, label in labels.items():
        if key in PAPER or ours.get(key) is not None:
            cells = [label, f"{PAPER[key]:+.1f}" if key in PAPER else "-", signed(ours[key]), signed(ours_cpu[key])]
            if paired:
                cells.append(" / ".join(signed(value) for value in paired.get(key, [])) or "-")
            bars.add_row(*cells)
    console.print(bars)
    if fid:
        ft = Table(title=f"Fidelity vs full prefill, {fid['prompts']} R-Agent prompts, teacher-forced")
        for col in ("mode", "top-1 agreement", "first token", "KL mean", "KL p99", "chunk-hit tokens"):
            ft.add_column(col, justify="right")
        for mode in FIDELITY_MODES:
            f = fid[mode]
            ft.add_row(mode, f"{f['top1_agreement']:.1%}", f"{f['first_token_agreement']:.1%}", f"{f['kl_mean']:.2e}",
                       f"{f['kl_p99']:.2e}", f"{f['chunk_hit_tokens']:,}")
        console.print(ft)
        if fid.get("caveat"):
            console.print(f"[bold yellow]caveat:[/] {fid['caveat']}")


def main(argv: list[str] | None = None) -> int:
    stay_offline()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="random:qwen3:tiny", help="random:<family>:<size> or a local checkpoint directory")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: all cores)")
    add_workload_arguments(parser)
    parser.add_argument("--kv-tokens", type=int, default=8192, help="KV pool size in tokens (the memory pressure)")
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--batch-tokens", type=int, default=2048, help="max tokens per engine step")
    parser.add_argument("--pic-k", type=int, default=16, help="pic: tokens recomputed at the head of each reused chunk")
    parser.add_argument("--chunk-admission", type=int, default=2, metavar="N",
                        help="index a missed chunk the N-th time a prompt holds it (engine chunk_admission)")
    parser.add_argument("--fidelity-prompts", type=int, default=8)
    parser.add_argument("--no-fidelity", action="store_true")
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS),
                        help="arms to run (lru+facts, lru+chunks and glm+chunks are needed for the comparison with the paper; lru "
                             "splits the vertex-centric effect into its two parts)")
    parser.add_argument("--control", default=None, choices=list(ARMS), metavar="ARM",
                        help="also run a second copy of ARM: their throughput spread is the run's noise floor")
    parser.add_argument("--sequential", action="store_true",
                        help="run the arms one after the other (default: in lock-step, one engine step of each in turn, "
                             "so a noisy machine slows every arm alike)")
    parser.add_argument("--repeats", type=int, default=1,
                        help="run the arms this many times, the engines created in a rotated order each time (the "
                             "first KV pool allocated can be faster); report the median")
    parser.add_argument("--quick", action="store_true", help="a smaller run (about 2 minutes on 2 cores)")
    parser.add_argument("--out", default="runs/bench-codesign/codesign.json")
    args = parser.parse_args(argv)
    if args.quick:
        args.sessions, args.concurrency, args.fidelity_prompts = 16, 6, 4
        args.kv_tokens = min(args.kv_tokens, 4096)

    from rich.console import Console
    from rich.progress import Progress

    console = Console()
    out = Path(args.out)
    sessions, prompts = load_workload(args, out, console)
    console.print(f"{len(sessions)} sessions, {sum(len(s.calls) for s in sessions)} calls, model {args.model}, "
                  f"KV pool {args.kv_tokens} tokens, {args.concurrency} sessions in flight")
    ceiling = reuse_ceiling(sessions)
    console.print(f"vertex chunks: {ceiling['chunk_share']:.1%} of prompt characters; read again by a later session: "
                  f"{ceiling['cross_session_chunk_share']:.1%} ({ceiling['chunks_in_several_sessions']} of "
                  f"{ceiling['distinct_chunks']} chunks), the most chunk KV reuse can add to lru's hit rate")
    names = list(args.arms) + ([args.control + CONTROL_SUFFIX] if args.control else [])
    if args.control and args.control not in args.arms:
        parser.error(f"--control {args.control}: that arm is not in --arms")
    runs: dict[str, list[dict]] = {name: [] for name in names}
    with Progress(console=console, transient=True) as progress:
        for repeat in range(args.repeats):
            order = names[repeat % len(names):] + names[:repeat % len(names)]  # each arm takes its turn first
            for name, result in run_arms(order, args, sessions, prompts, progress, lockstep=not args.sequential).items():
                runs[name].append(result)
    rows = {}
    for name, results in runs.items():
        ranked = sorted(results, key=lambda r: r["throughput_sessions_per_s"])  # all_runs keeps the repeat order
        rows[name] = ranked[len(ranked) // 2]
    too_long = next(iter(rows.values()))["sessions_too_long"]
    if too_long:
        console.print(f"[yellow]{too_long} of {len(sessions)} sessions left out: a call does not fit the model's "
                      f"{args.model} positions[/]")
    ours = compare(rows, "throughput_sessions_per_s")
    ours_cpu = compare(rows, "throughput_sessions_per_cpu_s")
    paired = paired_effects(runs, "throughput_sessions_per_s")
    fid = None if args.no_fidelity else fidelity(args, sessions)
    print_report(rows, ours, ours_cpu, fid, console, paired if args.repeats > 1 else None)
    result = {
        # Version 4 added ours_wall_per_repeat.
        "benchmark": "codesign", "version": 4, **run_header(argv),
        "settings": {k: v for k, v in vars(args).items()},
        "workload": {"synthetic": not args.traces, "traces": args.traces, "sessions": len(sessions), "calls": sum(len(s.calls) for s in sessions),
                     "reuse_ceiling": ceiling, "note": "scripted policy (forced decoding): measures the system, never model accuracy"},
        "arms": rows, "all_runs": runs, "paper": PAPER, "ours_wall": ours, "ours_cpu": ours_cpu,
        "ours_wall_per_repeat": paired, "fidelity": fid,
    }
    write_json(out, result)
    console.print(f"wrote {out}")
    return 0


def run_header(argv: list[str] | None) -> dict:
    """The JSON fields every codesign result starts with: when, which command, which machine."""
    return {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
            "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version()}}


def save_figure(figure, path: Path, dpi: int = 120) -> Path:
    """Lays out, writes and closes a matplotlib figure (the sweep's and the repeats' plots)."""
    import matplotlib.pyplot as plt

    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=dpi)
    plt.close(figure)
    return path


def write_json(out: Path, result: dict) -> None:
    """Atomic: a crash never leaves a half-written result."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=2))
    tmp.replace(out)


if __name__ == "__main__":
    raise SystemExit(main())
