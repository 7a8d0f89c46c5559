"""The discrete-event simulation: agent sessions replayed through a real cache, timed by a model.

Sessions (questions) arrive open-loop (Poisson, `rate` per second) or closed-loop (`concurrency`
in flight: a new one starts when one ends). A session sends its calls one after another: a call
goes to the backend (backends.py: a scheduler over the native engine's or vLLM's own cache);
each engine step's duration comes from the cost model (cost.py); when a call's last token is
out the session waits its recorded tool time (with pipelining, the RetrieveNode part overlaps the
call's decoding) and sends the next call. Each simulated session is its own instance: a unique
"salt" token after its shared agent prompt keeps two instances of one recorded question from
sharing their notebooks (the agent prompts and vertex chunks stay shared, as between questions).

Arms are the caches and policies compared (`ARMS`); the alternatives drive kvsim's policies
(policies.py) from the session events they publish (a tool wait begins, a session ends).
"""

from __future__ import annotations

import heapq
import random
import statistics
from collections import defaultdict
from dataclasses import dataclass, field

from glmcot.benchmarks.kvsim.backends import Backend, Limits, NativeBackend, VllmBackend
from glmcot.benchmarks.kvsim.cost import Deployment
from glmcot.benchmarks.kvsim.policies import NEVER, PinningEviction, StepsToUseEviction
from glmcot.benchmarks.kvsim.trace import TraceSession
from glmcot.contract import Level

SALT_BASE = 1 << 27  # salt token ids: above any vocabulary, below the generated ids


class SimulationError(RuntimeError):
    """The simulation cannot go on (the message says why, e.g. a prompt larger than the pool)."""


@dataclass(frozen=True)
class Arm:
    name: str
    backend: str  # native | vllm
    policy: str  # native: an engine policy or continuum | session-ttl | kvflow; vllm: absent | observe | enforce
    chunks: bool = False
    description: str = ""


ARMS = {a.name: a for a in (
    Arm("vllm-lru", "vllm", "absent", description="vLLM 0.32 prefix cache, its LRU, no plugin"),
    Arm("vllm-observe", "vllm", "observe", description="vLLM's LRU order; glmcot's plugin only counts evicted levels"),
    Arm("vllm-glm", "vllm", "enforce", description="vLLM + glmcot's plugin: GLM's four levels"),
    Arm("native-lru", "native", "lru", description="native engine cache, LRU (vLLM's order)"),
    Arm("native-glm", "native", "glm", description="native engine cache, GLM's four levels"),
    Arm("native-glm-chunks", "native", "glm", chunks=True,
        description="native engine cache, four levels + vertex-chunk reuse (engine defaults)"),
    Arm("continuum", "native", "continuum",
        description="TTL pin of a call's blocks while its session waits on a tool (Continuum; vLLM RFC #37003)"),
    Arm("session-ttl", "native", "session-ttl",
        description="session hint: blocks retained for a TTL after each request, released at session end (vLLM RFC #52113)"),
    Arm("kvflow", "native", "kvflow", description="evict the largest steps-to-next-use first (KVFlow's agent step graph)"),
)}
VLLM_ARMS = tuple(n for n, a in ARMS.items() if a.backend == "vllm")


@dataclass
class SimConfig:
    arrivals: str = "closed"  # closed | poisson
    concurrency: int = 8  # closed loop: sessions in flight
    rate: float = 1.0  # poisson: sessions per second
    sessions: int = 64  # sessions simulated
    seed: int = 0
    salt: bool = True  # each simulated session its own notebooks (see the module docstring)
    pipelined: bool = True  # RetrieveNode overlaps the call's decoding
    tool_scale: float = 1.0  # multiplies the recorded tool times
    continuum_ttl_factor: float = 2.0  # Continuum: pin for this times the agent's mean tool wait so far
    continuum_first_ttl_s: float = 1.0  # ... before any wait of that agent was seen
    retention_ttl_s: float = 5.0  # session hints: retention after each request
    in_order: bool = False  # replay the sessions in the given order (no shuffling)


@dataclass
class RunResult:
    arm: str
    pool_tokens: int
    config: dict
    questions: int
    calls: int
    prompt_tokens_queried: int
    prompt_tokens_computed: int
    hit_rate: float
    evictions: dict | None
    throughput_qps: float
    latency_p50_s: float
    latency_p99_s: float
    makespan_s: float
    steps: int
    counters: dict = field(default_factory=dict)
    per_call_computed: list[int] = field(default_factory=list)


@dataclass
class _Instance:
    index: int
    trace: TraceSession
    salt: int | None
    arrival: float = 0.0
    call: int = 0
    first_token: float = 0.0
    finished: float | None = None
    pinned: list = field(default_factory=list)


class _Workflow:
    """What KVFlow's step graph knows: for each agent, how many steps until an in-flight session
    calls it next (from each session's remaining calls), and which sessions are in flight."""

    LOOKAHEAD = 3

    def __init__(self) -> None:
        self.counts: dict[str, list[int]] = defaultdict(lambda: [0] * self.LOOKAHEAD)
        self.live: set[str] = set()
        self.agent_of_hash: dict[int, str] = {}

    def _apply(self, instance: _Instance, sign: int) -> None:
        for d, call in enumerate(instance.trace.calls[instance.call: instance.call + self.LOOKAHEAD]):
            self.counts[call.agent][d] += sign

    def enter(self, instance: _Instance) -> None:
        self.live.add(f"s{instance.index}")
        self._apply(instance, 1)

    def leave(self, instance: _Instance) -> None:
        self._apply(instance, -1)

    def done(self, instance: _Instance) -> None:
        self.live.discard(f"s{instance.index}")

    def steps(self, block) -> int:
        if block.level == Level.SHARED_PROMPT and block.block_hash in self.agent_of_hash:
            counts = self.counts.get(self.agent_of_hash[block.block_hash])
            if counts:
                return next((d for d, c in enumerate(counts) if c > 0), NEVER)
            return NEVER
        if block.owner in self.live and not block.shared:
            return 1  # the owning session's next call reads it
        if block.shared and block.key is not None:
            return self.LOOKAHEAD  # a vertex chunk other sessions read: maybe soon
        return NEVER


def make_backend(arm: Arm, num_blocks: int, limits: Limits, clock: list[float], workflow: _Workflow) -> Backend:
    if arm.backend == "vllm":
        return VllmBackend(num_blocks, limits, arm.policy)
    if arm.policy in ("continuum", "session-ttl"):
        return NativeBackend(num_blocks, limits, PinningEviction(lambda: clock[0]), arm.chunks)
    if arm.policy == "kvflow":
        return NativeBackend(num_blocks, limits, StepsToUseEviction(workflow.steps), arm.chunks)
    return NativeBackend(num_blocks, limits, arm.policy, arm.chunks)


def call_spans(instance: _Instance, number: int) -> tuple[list[int], list[tuple[int, int, str | None]]]:
    """The call's prompt ids and (level, tokens, key) spans, the instance's salt token placed
    before its first segment that is not a shared agent prompt."""
    call = instance.trace.calls[number]
    tokens: list[int] = []
    spans: list[tuple[int, int, str | None]] = []
    salted = instance.salt is None
    for segment in call.segments:
        if not salted and segment.level != int(Level.SHARED_PROMPT):
            tokens.append(instance.salt)
            spans.append((segment.level if segment.key is None else int(Level.TRANSIENT), 1, None))
            salted = True
        tokens.extend(segment.tokens)
        spans.append((segment.level, len(segment.tokens), segment.key))
    if not salted:
        tokens.append(instance.salt)
        spans.append((int(Level.TRANSIENT), 1, None))
    return tokens, spans


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def simulate(sessions: list[TraceSession], arm: Arm, deployment: Deployment, pool_tokens: int,
             limits: Limits = Limits(), config: SimConfig = SimConfig()) -> RunResult:
    """One arm at one pool size and one arrival setting; cache counts from the arm's real cache."""
    if not sessions:
        raise SimulationError("no sessions to simulate")
    num_blocks = pool_tokens // limits.block_size
    rng = random.Random(config.seed)
    order = list(range(len(sessions)))
    if not config.in_order:
        rng.shuffle(order)
    instances = [_Instance(k, sessions[order[k % len(order)]], SALT_BASE + k if config.salt else None)
                 for k in range(config.sessions)]
    longest = max(c.prompt_tokens + c.output_tokens + 2 for s in instances for c in s.trace.calls)
    if num_blocks * limits.block_size < longest + limits.block_size:
        raise SimulationError(f"a pool of {pool_tokens} tokens cannot hold the longest call ({longest} tokens)")
    clock = [0.0]
    workflow = _Workflow()
    backend = make_backend(arm, num_blocks, limits, clock, workflow)
    pinning = backend.policy if isinstance(getattr(backend, "policy", None), PinningEviction) else None
    waits: dict[str, list[float]] = defaultdict(list)
    events: list[tuple[float, int, int]] = []  # (time, seq, instance) a call is due
    seq = 0

    def due(time: float, index: int) -> None:
        nonlocal seq
        heapq.heappush(events, (time, seq, index))
        seq += 1

    if config.arrivals == "closed":
        for k in range(min(config.concurrency, len(instances))):
            due(0.0, k)
        started = min(config.concurrency, len(instances))
    elif config.arrivals == "poisson":
        time = 0.0
        for k in range(len(instances)):
            due(time, k)
            instances[k].arrival = time
            time += rng.expovariate(config.rate)
        started = len(instances)
    else:
        raise ValueError(f"arrivals must be closed or poisson, got {config.arrivals!r}")
    ready_at: dict[int, float] = {}
    done = steps = calls = 0
    per_call: list[int] = []
    while done < len(instances):
        while events and events[0][0] <= clock[0]:
            _, _, k = heapq.heappop(events)
            instance = instances[k]
            if instance.call == 0:
                instance.arrival = clock[0] if config.arrivals == "closed" else instance.arrival
                workflow.enter(instance)
            elif k in ready_at:
                waits[instance.trace.calls[instance.call - 1].agent].append(clock[0] - ready_at.pop(k))
            if pinning is not None and arm.policy == "continuum" and instance.pinned:
                pinning.release(instance.pinned)
                instance.pinned = []
            tokens, spans = call_spans(instance, instance.call)
            last = instance.call == len(instance.trace.calls) - 1
            backend.add(k, f"s{k}-c{instance.call}", tokens, spans, instance.trace.calls[instance.call].output_tokens,
                        f"s{k}", last)
            calls += 1
        if not backend.has_work():
            if not events:
                raise SimulationError("nothing to run and nothing due before every session ended")
            clock[0] = max(clock[0], events[0][0])
            continue
        result = backend.step()
        if not result.computed and not result.finished:
            if result.preempted:
                continue  # the next step runs what is left
            if events:
                clock[0] = max(clock[0], events[0][0])
                continue
            raise SimulationError("the scheduler can run nothing: the pool is too small for the waiting calls")
        clock[0] += deployment.step_time(result.computed)
        steps += 1
        for k in result.first_tokens:
            instances[k].first_token = clock[0]
        for item in result.finished:
            k = item.handle
            instance = instances[k]
            call = instance.trace.calls[instance.call]
            per_call.append(item.prompt_computed)
            if arm.policy == "kvflow":
                for block in item.blocks:
                    if block.level == Level.SHARED_PROMPT and block.block_hash is not None:
                        workflow.agent_of_hash[block.block_hash] = call.agent
            workflow.leave(instance)
            instance.call += 1
            if instance.call == len(instance.trace.calls):
                instance.finished = clock[0]
                done += 1
                workflow.done(instance)
                if pinning is not None:
                    pinning.release(instance.pinned + item.blocks)
                    instance.pinned = []
                if config.arrivals == "closed" and started < len(instances):
                    due(clock[0], started)
                    started += 1
                continue
            workflow.enter(instance)
            tool = call.tool_s * config.tool_scale
            if config.pipelined:
                tool -= min(call.retrieval_s * config.tool_scale, max(0.0, clock[0] - instance.first_token))
            if pinning is not None:
                if arm.policy == "continuum":
                    seen = waits.get(call.agent)
                    ttl = config.continuum_ttl_factor * statistics.fmean(seen) if seen else config.continuum_first_ttl_s
                else:
                    ttl = config.retention_ttl_s
                pinning.pin(item.blocks, clock[0] + ttl)
                instance.pinned = instance.pinned + item.blocks
            ready_at[k] = clock[0]
            due(clock[0] + max(0.0, tool), k)
    counters = backend.counters()
    latencies = [i.finished - i.arrival for i in instances]
    start = min(i.arrival for i in instances)
    makespan = max(i.finished for i in instances) - start
    queried, computed = counters["prompt_tokens_queried"], counters["prompt_tokens_computed"]
    if pinning is not None:
        counters["pinned_evictions"] = pinning.pinned_evictions
    return RunResult(
        arm=arm.name, pool_tokens=num_blocks * limits.block_size, config=vars(config).copy(), questions=len(instances),
        calls=calls, prompt_tokens_queried=queried, prompt_tokens_computed=computed,
        hit_rate=1 - computed / queried if queried else 0.0, evictions=counters.get("evictions"),
        throughput_qps=len(instances) / makespan if makespan > 0 else 0.0,
        latency_p50_s=percentile(latencies, 0.5), latency_p99_s=percentile(latencies, 0.99), makespan_s=makespan,
        steps=steps, counters=counters, per_call_computed=per_call)


def replay_in_order(sessions: list[TraceSession], arm: Arm, pool_tokens: int, limits: Limits,
                    deployment: Deployment) -> RunResult:
    """Every call of every session one at a time, in the given order (what a sequential client
    sends, without salt); `per_call_computed` then lists each call's computed prompt tokens in order."""
    config = SimConfig(arrivals="closed", concurrency=1, sessions=len(sessions), salt=False, in_order=True)
    return simulate(sessions, arm, deployment, pool_tokens, limits, config)
