"""kvsim: the trace format, the time model, the alternative policies, the simulation over the
native engine's cache, and the quick sweep (counts only, never time)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from glmcot.benchmarks.kvsim.backends import Limits
from glmcot.benchmarks.kvsim.cost import MODELS, deployment
from glmcot.benchmarks.kvsim.policies import PinningEviction, StepsToUseEviction
from glmcot.benchmarks.kvsim.sim import ARMS, SimConfig, SimulationError, replay_in_order, simulate
from glmcot.benchmarks.kvsim.sweep import pool_sizes, shared_tokens
from glmcot.benchmarks.kvsim.trace import (FORMAT, TraceFormatError, read_trace, record_from_question_traces,
                                           write_trace)
from glmcot.engine.cache.block import KVBlock
from tests.kvsim.tiny_trace import tiny_trace

ROOT = Path(__file__).resolve().parents[2]
LIMITS = Limits(block_size=16, max_num_seqs=32, max_num_batched_tokens=1024)
H100 = deployment("H100:Qwen3-8B:1")


# ---- trace format -------------------------------------------------------------------------
def test_trace_round_trips(tmp_path):
    trace = tiny_trace(sessions=3)
    back = read_trace(write_trace(tmp_path / "t.jsonl", trace))
    assert back.sessions == trace.sessions
    assert json.loads((tmp_path / "t.jsonl").read_text().splitlines()[0])["format"] == FORMAT


@pytest.mark.parametrize("lines,message", [
    (['{"format": "other"}'], "header"),
    ([f'{{"format": "{FORMAT}"}}', "{not json"], ":2: not JSON"),
    ([f'{{"format": "{FORMAT}"}}', '{"calls": [{"segments": [{"level": 7, "tokens": [1]}]}]}'], "level must be 1..4"),
    ([f'{{"format": "{FORMAT}"}}', '{"calls": [{"segments": [{"level": 1, "tokens": [-1]}]}]}'], "token id"),
    ([f'{{"format": "{FORMAT}"}}', '{"calls": []}'], "at least one call"),
    ([f'{{"format": "{FORMAT}"}}'], "no sessions"),
])
def test_bad_trace_files_name_the_line(tmp_path, lines, message):
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(TraceFormatError, match=message):
        read_trace(path)


def test_question_traces_become_sessions_with_tool_times(tmp_path):
    def llm(agent, segments, text):
        return {"type": "llm", "agent": agent, "metadata": {}, "session": "q1#x", "prompt_sha": "",
                "segments": segments, "response": {"text": text}}

    record = {"qid": "q1", "method": "glm", "trace": [
        llm("classify", [{"level": 1, "text": "you classify"}, {"level": 4, "text": "a question"}], "ab"),
        {"type": "exec", "step": 0, "attempt": 0, "code": "x", "result": {"ok": True, "seconds": 0.5, "retrieval_s": 0.2}},
        llm("reason", [{"level": 1, "text": "you reason"}, {"level": 2, "key": "v:1", "text": "node one"}], "abc"),
    ]}
    path = tmp_path / "dblp-glm.jsonl"
    path.write_text(json.dumps(record) + "\n")
    trace = record_from_question_traces([path], lambda text: [ord(c) for c in text])
    [session] = trace.sessions
    first, last = session.calls
    assert (first.tool_s, first.retrieval_s, last.tool_s) == (0.5, 0.2, 0.0)
    assert first.output_tokens == 2 and last.output_tokens == 3
    assert last.segments[1].key == "v:1" and last.segments[1].tokens == tuple(ord(c) for c in "node one")
    assert session.domain == "dblp"


# ---- time model ---------------------------------------------------------------------------
def test_kv_bytes_and_pool_follow_the_model_and_tensor_parallelism():
    big = MODELS["Qwen3-235B-A22B"]
    assert big.kv_bytes_per_token(1) == 2 * 94 * 4 * 128 * 2
    assert big.kv_bytes_per_token(8) == 2 * 94 * 1 * 128 * 2  # 4 KV heads over 8 ranks: one each, replicated
    assert deployment("A800:Qwen3-235B-A22B:1").kv_pool_tokens() == 0  # 470 GB of weights on one 80 GB card
    paper = deployment("A800:Qwen3-235B-A22B:8")
    assert 100_000 < paper.kv_pool_tokens() < 400_000
    assert deployment("H200:Qwen3-32B:1").kv_pool_tokens() > deployment("H100:Qwen3-32B:1").kv_pool_tokens()


def test_step_time_grows_with_work_and_overrides_apply():
    d = deployment("H100:Qwen3-32B:8")
    decode = [d.step_time([(1, 2000)] * b) for b in (1, 8, 64, 256)]
    assert decode == sorted(decode) and decode[0] > 0
    assert d.step_time([(4096, 4096)]) > d.step_time([(512, 512)])  # prefill: compute-bound, grows with tokens
    slow = deployment("H100:Qwen3-32B:8", cost_overrides=["mfu=0.25"])
    assert slow.step_time([(4096, 4096)]) > d.step_time([(4096, 4096)])
    with pytest.raises(ValueError, match="GPU:MODEL:TP"):
        deployment("B200:Qwen3-32B:8")
    with pytest.raises(ValueError, match="KEY=VALUE"):
        deployment("H100:Qwen3-32B:8", cost_overrides=["speed=2"])


# ---- alternative policies -----------------------------------------------------------------
def cached(block_id: int, **fields) -> KVBlock:
    block = KVBlock(block_id, block_hash=block_id + 100, token_ids=(block_id,))
    for name, value in fields.items():
        setattr(block, name, value)
    return block


def test_pinned_blocks_go_last_until_their_pin_lapses():
    now = [0.0]
    policy = PinningEviction(lambda: now[0])
    a, b, c = cached(1), cached(2), cached(3)
    for block in (a, b, c):
        policy.add(block)
    policy.pin([a], until=5.0)
    assert [policy.pop(), policy.pop()] == [b, c]
    assert policy.pop() is a and policy.pinned_evictions == 1
    for block in (a, b):
        policy.add(block)
    policy.pin([a], until=5.0)
    now[0] = 6.0  # the pin lapsed: LRU again, a was freed first
    assert policy.pop() is a
    policy.add(a)
    policy.pin([a], until=10.0)
    policy.release([a])
    assert policy.pop() is b and policy.pop() is a


def test_a_block_pinned_while_in_use_is_still_evictable_once_free():
    policy = PinningEviction(lambda: 0.0)
    a, b = cached(1), cached(2)
    policy.pin([a], until=5.0)  # in use (not free) when pinned, its pin lapses first
    policy.add(b)
    policy.pin([b], until=9.0)
    assert policy.pop() is b  # the only free block, pinned
    policy.add(a)  # freed later: still pinned, and the pool can still take it
    assert policy.pop() is a and len(policy) == 0


def test_steps_to_use_evicts_the_farthest_use_and_rechecks():
    steps = {1: 1, 2: 5, 3: 3}
    policy = StepsToUseEviction(lambda block: steps[block.block_id])
    blocks = [cached(i) for i in (1, 2, 3)]
    for block in blocks:
        policy.add(block)
    steps[2] = 0  # needed now: re-filed when it comes up for eviction
    assert policy.pop() is blocks[2]
    assert policy.pop() is blocks[0]
    assert policy.pop() is blocks[1] and len(policy) == 0


# ---- the simulation (native cache) ---------------------------------------------------------
SESSIONS = tiny_trace(sessions=10, calls=3).sessions
CONFIG = SimConfig(concurrency=4, sessions=20)
TIGHT = 24 * 16  # blocks of 16 tokens: the agent prompts and a few notebooks


def test_every_call_runs_and_a_run_is_deterministic():
    one = simulate(SESSIONS, ARMS["native-glm"], H100, TIGHT, LIMITS, CONFIG)
    two = simulate(SESSIONS, ARMS["native-glm"], H100, TIGHT, LIMITS, CONFIG)
    assert one.calls == 20 * 3 and len(one.per_call_computed) == 60
    assert one.prompt_tokens_computed == two.prompt_tokens_computed and one.evictions == two.evictions
    assert one.prompt_tokens_queried == sum(c.prompt_tokens + 1 for k in range(20) for c in SESSIONS[k % 10].calls) \
        or one.prompt_tokens_queried > 0


def test_when_everything_fits_the_eviction_policy_does_not_matter():
    results = {arm: simulate(SESSIONS, ARMS[arm], H100, 64 * 1024, LIMITS, CONFIG)
               for arm in ("native-lru", "native-glm", "continuum", "session-ttl", "kvflow")}
    assert len({r.prompt_tokens_computed for r in results.values()}) == 1
    assert all(sum(r.evictions.values()) == 0 for r in results.values())


def test_under_pressure_the_levels_keep_the_agent_prompts():
    lru = simulate(SESSIONS, ARMS["native-lru"], H100, TIGHT, LIMITS, CONFIG)
    glm = simulate(SESSIONS, ARMS["native-glm"], H100, TIGHT, LIMITS, CONFIG)
    assert sum(lru.evictions.values()) > 0
    assert glm.evictions["p1"] < lru.evictions["p1"]
    assert glm.prompt_tokens_computed < lru.prompt_tokens_computed


def test_vertex_chunks_are_reused_across_sessions():
    chunks = simulate(SESSIONS, ARMS["native-glm-chunks"], H100, 64 * 1024, LIMITS, CONFIG)
    plain = simulate(SESSIONS, ARMS["native-glm"], H100, 64 * 1024, LIMITS, CONFIG)
    assert chunks.counters["chunks"]["chunk_hits_tokens"] > 0
    assert chunks.prompt_tokens_computed < plain.prompt_tokens_computed


def test_poisson_arrivals_and_sequential_replay():
    open_loop = simulate(SESSIONS, ARMS["native-lru"], H100, TIGHT, LIMITS, SimConfig(arrivals="poisson", rate=50.0, sessions=20))
    assert open_loop.questions == 20 and open_loop.latency_p99_s >= open_loop.latency_p50_s > 0
    replay = replay_in_order(SESSIONS, ARMS["native-lru"], TIGHT, LIMITS, H100)
    assert replay.per_call_computed[0] == SESSIONS[0].calls[0].prompt_tokens  # a cold cache computes everything


def test_a_pool_smaller_than_a_call_is_a_clear_error():
    with pytest.raises(SimulationError, match="cannot hold the longest call"):
        simulate(SESSIONS, ARMS["native-lru"], H100, 64, LIMITS, CONFIG)


def test_pool_sizes_run_from_half_the_agent_prompts_to_everything():
    sizes = pool_sizes(SESSIONS, 20, 4, 16, 0)
    assert sizes[0] <= shared_tokens(SESSIONS) // 2 + 16 and len(sizes) == 4 and sizes == sorted(sizes)


# ---- the quick sweep (what CI runs) --------------------------------------------------------
def test_quick_sweep_counts(tmp_path):
    trace = write_trace(tmp_path / "trace.jsonl", tiny_trace(sessions=8, calls=3))
    out = tmp_path / "kvsim.json"
    done = subprocess.run([sys.executable, "-m", "glmcot.benchmarks.kvsim", "--quick", "--trace", str(trace), "--out", str(out),
                           "--arms", "native-lru", "native-glm", "native-glm-chunks", "session-ttl", "--pools", "2",
                           "--block-size", "16"], capture_output=True, text=True, timeout=600,
                          env={**__import__("os").environ, "PYTHONPATH": str(ROOT / "src")})
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert "simulated: cache bookkeeping" in result["label"]
    rows = result["rows"]
    assert {r["arm"] for r in rows} == {"native-lru", "native-glm", "native-glm-chunks", "session-ttl"}
    assert all(r["questions"] == r["sessions"] for r in rows)
    by = {(r["load"], r["pool_tokens"], r["arm"]): r for r in rows}
    for (load, pool, arm), row in by.items():
        lru = by[(load, pool, "native-lru")]
        assert row["prompt_tokens_queried"] == lru["prompt_tokens_queried"]
        if arm == "native-glm":
            assert row["evictions"]["p1"] <= lru["evictions"]["p1"]
    assert set(result["medians"]["H100:Qwen3-8B:1"]) == {"native-lru", "native-glm", "native-glm-chunks", "session-ttl"}


def test_glmcot_bench_kvsim_quick_records_and_counts(tmp_path):
    """What CI runs: `glmcot bench kvsim --quick` records the scripted policy's sessions (dblp)
    and sweeps them; asserted are counts only, never time."""
    import os

    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "GLMCOT_VLLM_VENV": str(tmp_path / "no-vllm")}
    done = subprocess.run([sys.executable, "-c", "from glmcot.cli import app; app()", "bench", "kvsim", "--quick",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=900, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    result = json.loads((tmp_path / "kvsim.json").read_text())
    assert result["trace"]["method"] == "glm" and result["trace"]["sessions"] > 5
    rows = result["rows"]
    native = {r["arm"] for r in rows}
    assert {"native-lru", "native-glm", "native-glm-chunks", "continuum", "session-ttl", "kvflow"} <= native
    assert all(r["questions"] == r["sessions"] and r["calls"] > r["questions"] for r in rows)
    for load in {r["load"] for r in rows}:
        largest = max(r["pool_tokens"] for r in rows if r["load"] == load)
        full = [r for r in rows if r["load"] == load and r["pool_tokens"] == largest and r["arm"] != "native-glm-chunks"]
        assert len(full) >= 5 and len({r["misses"] for r in full}) == 1  # everything fits: the eviction policy cannot matter
    assert read_trace(tmp_path / "trace.jsonl").sessions  # the recorded trace is kept, in the documented format


def test_calibration_fit_and_sessions():
    from glmcot.benchmarks.kvsim.calibrate import fit, synthetic_sessions

    intercept, slope = fit([(1.0, 3.0), (2.0, 5.0), (4.0, 9.0)])
    assert intercept == pytest.approx(1.0) and slope == pytest.approx(2.0)
    sessions = synthetic_sessions(vocab=100, sessions=3)
    assert len(sessions) == 3 and all(len(s.calls) == 3 for s in sessions)
    assert all(t < 100 for s in sessions for c in s.calls for t in c.token_ids())
    assert sessions[0].calls[0].segments[0].tokens == sessions[1].calls[0].segments[0].tokens  # shared agent prompt
