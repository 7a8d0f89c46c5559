"""Sweeps of pool size x load for every arm, and what they show against LRU.

The pool sizes of a sweep run from "the agent prompts alone do not fit" (half the distinct
level-1 tokens of the sessions) to "everything fits" (every distinct prompt token of the run),
geometrically. Each arm is compared with the LRU of its own cache (vLLM arms with `vllm-lru`,
native arms with `native-lru`): the ratio of prompt tokens computed (misses), of throughput and
of p99 latency per point, and the median of each over the whole sweep.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass

from glmcot.benchmarks.kvsim.backends import Limits
from glmcot.benchmarks.kvsim.cost import Deployment
from glmcot.benchmarks.kvsim.sim import ARMS, RunResult, SimConfig, simulate
from glmcot.benchmarks.kvsim.trace import TraceSession

LABEL = "simulated: cache bookkeeping is vLLM's (or glmcot's) own code; time is a model"
BASELINE = {"vllm": "vllm-lru", "native": "native-lru"}


@dataclass(frozen=True)
class Point:
    deployment: str
    arrivals: str
    load: float  # concurrency (closed) or sessions per second (poisson)
    sessions: int
    pool_tokens: int
    pool_share: float  # of "everything fits"


def shared_tokens(sessions: list[TraceSession]) -> int:
    """Distinct level-1 (shared agent prompt) tokens."""
    seen = {segment.tokens for s in sessions for call in s.calls for segment in call.segments if segment.level == 1}
    return sum(len(tokens) for tokens in seen)


def all_tokens(sessions: list[TraceSession], count: int) -> int:
    """Prompt tokens that would all be cached at once if nothing were evicted, for `count`
    simulated sessions (the shared prompts once, everything else per session)."""
    per = [sum(len(g.tokens) for c in s.calls for g in c.segments if g.level != 1) for s in sessions]
    return shared_tokens(sessions) + sum(per[k % len(per)] for k in range(count)) + count


def pool_sizes(sessions: list[TraceSession], count: int, points: int, block_size: int, floor: int) -> list[int]:
    low = max(shared_tokens(sessions) // 2, floor)
    high = max(all_tokens(sessions, count), low + block_size)
    if points == 1:
        return [high]
    sizes = [low * (high / low) ** (i / (points - 1)) for i in range(points)]
    return sorted({max(block_size, int(size) // block_size * block_size) for size in sizes})


def sessions_for(load: float, arrivals: str, minimum: int, maximum: int | None = None) -> int:
    """Closed loop: two rounds of the concurrency (at least `minimum`, at most `maximum`)."""
    if arrivals != "closed":
        return minimum
    count = max(minimum, int(2 * load))
    return min(count, max(maximum, int(load))) if maximum else count


def run_point(point: Point, sessions: list[TraceSession], arms: list[str], deployment: Deployment, limits: Limits,
              base: SimConfig) -> list[dict]:
    rows = []
    config = SimConfig(**{**vars(base), "arrivals": point.arrivals, "sessions": point.sessions,
                          "concurrency": int(point.load) if point.arrivals == "closed" else base.concurrency,
                          "rate": point.load if point.arrivals == "poisson" else base.rate})
    for arm in arms:
        result = simulate(sessions, ARMS[arm], deployment, point.pool_tokens, limits, config)
        rows.append(row_of(point, result))
    return rows


def row_of(point: Point, result: RunResult) -> dict:
    row = {**asdict(point), **{k: v for k, v in asdict(result).items() if k not in ("config", "per_call_computed")}}
    row["misses"] = result.prompt_tokens_computed
    return row


def compare(rows: list[dict]) -> list[dict]:
    """Adds, to each row, its ratios to the LRU of its own cache at the same point."""
    key = lambda r: (r["deployment"], r["arrivals"], r["load"], r["pool_tokens"])  # noqa: E731
    base = {(key(r), r["arm"]): r for r in rows}
    # the misses when nothing is evicted (the top of the sweep, where everything fits): no policy does better
    floor = {(r["deployment"], r["arrivals"], r["load"], r["arm"]): r["misses"] for r in rows if r["pool_share"] >= 0.99}
    for row in rows:
        baseline = BASELINE[ARMS[row["arm"]].backend]
        lru = base.get((key(row), baseline))
        if lru is None:
            continue
        bottom = floor.get((row["deployment"], row["arrivals"], row["load"], baseline))
        # under pressure: LRU evicts something that is read again, so an eviction policy can matter
        row["under_pressure"] = bottom is not None and lru["misses"] > bottom
        row["bound_vs_lru"] = bottom / lru["misses"] if bottom is not None and lru["misses"] else None
        row["misses_vs_lru"] = row["misses"] / lru["misses"] if lru["misses"] else None
        row["throughput_vs_lru"] = row["throughput_qps"] / lru["throughput_qps"] if lru["throughput_qps"] else None
        row["p99_vs_lru"] = row["latency_p99_s"] / lru["latency_p99_s"] if lru["latency_p99_s"] else None
        row["hit_rate_minus_lru"] = row["hit_rate"] - lru["hit_rate"]
    return rows


def medians(rows: list[dict], where: Callable[[dict], bool] = lambda r: True) -> dict[str, dict]:
    """Per arm, the median over the sweep points of each ratio to LRU (and how many points it won)."""
    out: dict[str, dict] = {}
    for arm in dict.fromkeys(r["arm"] for r in rows):
        mine = [r for r in rows if r["arm"] == arm and where(r) and r.get("misses_vs_lru") is not None]
        if not mine:
            continue
        out[arm] = {
            "points": len(mine),
            "misses_vs_lru": statistics.median(r["misses_vs_lru"] for r in mine),
            "throughput_vs_lru": statistics.median(r["throughput_vs_lru"] for r in mine if r["throughput_vs_lru"]),
            "p99_vs_lru": statistics.median(r["p99_vs_lru"] for r in mine if r["p99_vs_lru"]),
            "hit_rate_minus_lru": statistics.median(r["hit_rate_minus_lru"] for r in mine),
            "fewer_misses_points": sum(1 for r in mine if r["misses_vs_lru"] < 1),
            "more_misses_points": sum(1 for r in mine if r["misses_vs_lru"] > 1),
            "evictions": {level: sum((r["evictions"] or {}).get(level, 0) for r in mine) for level in ("p1", "p2", "p3", "p4")}
            if any(r["evictions"] for r in mine) else None,
        }
    return out


def winners(rows: list[dict], arms: list[str]) -> list[dict]:
    """For each point, the arm (among `arms`) with the fewest misses, and GLM's standing there."""
    key = lambda r: (r["deployment"], r["arrivals"], r["load"], r["pool_tokens"])  # noqa: E731
    out = []
    for point in dict.fromkeys(key(r) for r in rows):
        mine = [r for r in rows if key(r) == point and r["arm"] in arms]
        if not mine:
            continue
        fewest = min(r["misses"] for r in mine)
        best = [r["arm"] for r in mine if r["misses"] == fewest]
        out.append({"deployment": point[0], "arrivals": point[1], "load": point[2], "pool_tokens": point[3],
                    "best": best[0] if len(best) == 1 else "tie", "tied": best if len(best) > 1 else [],
                    "best_misses": fewest,
                    "misses": {r["arm"]: r["misses"] for r in mine}})
    return out
