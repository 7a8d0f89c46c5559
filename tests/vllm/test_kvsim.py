"""kvsim's vLLM arms: vLLM's own KVCacheManager (with glmcot's plugin) under the simulator.

The validation: a small trace replayed call by call through the simulator gives exactly the
cached-token counts, call by call, and the evictions per level that a real vLLM engine (the
engine core `vllm serve` runs, on the tiny checkpoint) with the plugin computed for the same
order; and vLLM's LRU without the plugin likewise.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.vllm.conftest import engine_env, needs_vllm

needs_vllm()

from glmcot.benchmarks.kvsim.backends import Limits  # noqa: E402
from glmcot.benchmarks.kvsim.cost import deployment  # noqa: E402
from glmcot.benchmarks.kvsim.sim import ARMS, SimConfig, replay_in_order, simulate  # noqa: E402
from glmcot.benchmarks.kvsim.trace import write_trace  # noqa: E402
from tests.kvsim.tiny_trace import tiny_trace  # noqa: E402

SCENARIO = Path(__file__).with_name("kvsim_scenario.py")
BLOCKS = 13  # usable blocks of 32 tokens (vLLM adds its null block)
LIMITS = Limits(block_size=32, max_num_seqs=16, max_num_batched_tokens=2048)
DEPLOYMENT = deployment("H100:Qwen3-8B:1")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    from glmcot.benchmarks.tiny_checkpoint import tiny_qwen3

    return tiny_qwen3(tmp_path_factory.mktemp("tiny-qwen3"))


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory):
    # 96-token agent prompts in 13 blocks of 32: the plugin changes the hits (1,248 vs 1,504 computed)
    return write_trace(tmp_path_factory.mktemp("trace") / "tiny.jsonl", tiny_trace(sessions=5, calls=3, prompt=96))


def real_engine(checkpoint: Path, trace_file: Path, mode: str, folder: Path) -> tuple[list[int], dict | None]:
    stats = folder / f"stats-{mode}.json"
    done = subprocess.run([sys.executable, str(SCENARIO), str(checkpoint), str(trace_file), str(BLOCKS), str(stats)],
                          env=engine_env(mode, stats), capture_output=True, text=True, timeout=900)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, f"scenario ({mode}) failed:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    calls = json.loads(lines[-1][len("RESULT "):])["calls"]
    return [c["cached_tokens"] for c in calls], (json.loads(stats.read_text()) if stats.is_file() else None)


@pytest.fixture(scope="module")
def engines(checkpoint, trace_file, tmp_path_factory):
    folder = tmp_path_factory.mktemp("engines")
    return {mode: real_engine(checkpoint, trace_file, mode, folder) for mode in ("enforce", "off")}


def simulated(trace_file: Path, arm: str):
    from glmcot.benchmarks.kvsim.trace import read_trace

    trace = read_trace(trace_file)
    result = replay_in_order(trace.sessions, ARMS[arm], BLOCKS * 32, LIMITS, DEPLOYMENT)
    prompts = [call.prompt_tokens for s in trace.sessions for call in s.calls]
    return [p - c for p, c in zip(prompts, result.per_call_computed)], result


@pytest.mark.parametrize("mode,arm", [("enforce", "vllm-glm"), ("off", "vllm-lru")])
def test_replay_gives_the_real_engines_hits_call_by_call(engines, trace_file, mode, arm):
    cached, _ = engines[mode]
    predicted, _ = simulated(trace_file, arm)
    assert len(cached) == 15
    assert predicted == cached
    assert sum(cached) > 0  # the trace does reuse the cache


def test_replay_gives_the_real_engines_evictions_per_level(engines, trace_file):
    _, stats = engines["enforce"]
    _, result = simulated(trace_file, "vllm-glm")
    assert stats is not None
    real = {level: stats["evictions"][level] for level in ("p1", "p2", "p3", "p4")}
    assert sum(real.values()) > 0  # the pool is under pressure
    assert result.evictions == real


def test_the_plugin_changes_the_hits_on_this_trace(engines):
    # otherwise the two comparisons above would not tell the arms apart
    assert engines["enforce"][0] != engines["off"][0]


def test_observe_is_vllms_order_and_counts_levels():
    sessions = tiny_trace(sessions=12, calls=3).sessions
    config = SimConfig(concurrency=4, sessions=24)
    lru = simulate(sessions, ARMS["vllm-lru"], DEPLOYMENT, 12 * 32, LIMITS, config)
    observe = simulate(sessions, ARMS["vllm-observe"], DEPLOYMENT, 12 * 32, LIMITS, config)
    enforce = simulate(sessions, ARMS["vllm-glm"], DEPLOYMENT, 12 * 32, LIMITS, config)
    assert lru.evictions is None
    assert observe.prompt_tokens_computed == lru.prompt_tokens_computed
    assert observe.per_call_computed == lru.per_call_computed
    assert sum(observe.evictions.values()) > 0
    assert enforce.evictions["p1"] < observe.evictions["p1"]
