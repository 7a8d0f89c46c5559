"""The co-design benchmark's arms: the engine configurations it compares, and their replays.

Each arm replays the same sessions on its own engine (one copy of the weights), closed loop, with
forced decoding; the arms run in lock-step, one engine step of each in turn, and each arm's time is
the sum of its own steps, so a shared, noisy machine slows every arm alike.
"""

from __future__ import annotations

import itertools
import time

from glmcot.benchmarks.codesign.workload import FORCED_MAX_TOKENS, Session, fact_sessions
from glmcot.benchmarks.common import percentile

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
