"""A real vLLM engine on a tiny random checkpoint under KV pressure, with the plugin and without.

Two engines run the same request sequence (tests/vllm/pressure_scenario.py, one process each):
with GLMCOT_VLLM_PLUGIN=enforce the agent prompt (level 1) and the running session's notebook
(level 2) are still cached when probed; stock vLLM (plugin off) has evicted them. Then one
`vllm serve` with the plugin answers glmcot's vllm+glmcot backend over HTTP: its levels and
session reach the engine core, and the plugin's prefix counters equal vLLM's own /metrics.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.vllm.conftest import engine_env, needs_vllm, vllm_server

needs_vllm()

SCENARIO = Path(__file__).with_name("pressure_scenario.py")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    from glmcot.benchmarks.tiny_checkpoint import tiny_qwen3

    return tiny_qwen3(tmp_path_factory.mktemp("tiny-qwen3"))


def run_scenario(checkpoint: Path, mode: str, folder: Path) -> tuple[dict, dict | None]:
    stats = folder / f"stats-{mode}.json"
    done = subprocess.run([sys.executable, str(SCENARIO), str(checkpoint), str(stats)], env=engine_env(mode, stats),
                          capture_output=True, text=True, timeout=900)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, f"scenario ({mode}) failed:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    results = {r["name"]: r for r in json.loads(lines[-1][len("RESULT "):])["results"]}
    return results, (json.loads(stats.read_text()) if stats.is_file() else None)


@pytest.fixture(scope="module")
def scenarios(checkpoint, tmp_path_factory):
    folder = tmp_path_factory.mktemp("scenario")
    return {mode: run_scenario(checkpoint, mode, folder) for mode in ("enforce", "off")}


def test_every_request_completes_in_both_engines(scenarios):
    for mode, (results, _) in scenarios.items():
        assert len(results) == 8
        for result in results.values():
            assert result["finished"] and result["output_tokens"] == 2, (mode, result)


def test_prompt_and_running_notebook_survive_pressure_only_with_the_plugin(scenarios):
    enforce, stats = scenarios["enforce"]
    stock, stock_stats = scenarios["off"]
    block = 32
    # the running session's next call finds its prompt (3 blocks) and notebook (2 blocks)
    assert enforce["probe-running"]["cached_tokens"] == 5 * block
    assert stock["probe-running"]["cached_tokens"] == 0
    # after the session ended and more pressure, the agent prompt is still there
    assert enforce["probe-prompt"]["cached_tokens"] == 3 * block
    assert stock["probe-prompt"]["cached_tokens"] == 0
    assert stock_stats is None  # off: the plugin wrote nothing
    assert stats["mode"] == "enforce" and stats["last_error"] is None
    assert stats["evictions"]["p1"] == 0 and stats["evictions"]["p2"] == 0 and stats["evictions"]["p4"] > 0
    assert stats["requests"]["tagged"] == 8 and stats["requests"]["session_ends"] == 1
    assert stats["demoted_blocks"] == 2  # the ended session's notebook
    cached = sum(r["cached_tokens"] for r in enforce.values())
    assert stats["prefix_cache"]["hits"] == cached


# ---- over HTTP: vllm serve with the plugin, glmcot's backend --------------------------------------
@pytest.fixture(scope="module")
def server(checkpoint, tmp_path_factory):
    with vllm_server(checkpoint, tmp_path_factory.mktemp("serve")) as (url, stats):
        yield url, stats, checkpoint


def test_backend_levels_reach_the_plugin_and_counters_match_vllms_metrics(server):
    import httpx

    from glmcot.llm import BackendSpec
    from glmcot.system import make_backend
    from glmcot.llm.types import LLMRequest, Segment
    from glmcot.vllm_plugin.stats import read_stats

    url, stats_path, checkpoint = server
    backend = make_backend(BackendSpec.parse(f"vllm+glmcot:{url}/v1").with_options(tokenizer=str(checkpoint)))
    prompt = Segment("You are the reasoning agent of a graph question answering system. " * 6, 1)
    notebook = Segment("Notebook: paper P1 cites paper P2; author A wrote P1 and P3. " * 3, 2)
    responses = []
    for question in ("Who wrote P1?", "Who wrote P3?"):
        responses.append(backend.complete(LLMRequest(segments=[prompt, notebook, Segment(question, 4)], max_tokens=3,
                                                     session="q1")))
    backend.end_session("q1")
    ids, spans = backend.prompt_spans(LLMRequest(segments=[prompt, notebook, Segment("Who wrote P1?", 4)]))
    assert responses[0].prompt_tokens == len(ids)
    assert responses[1].cached_tokens >= 32 * ((spans[0][1] + spans[1][1]) // 32)
    deadline = time.monotonic() + 30
    while True:
        stats = read_stats(stats_path) if stats_path.is_file() else {}
        if stats.get("requests", {}).get("session_ends") == 1 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert stats["requests"] == {"tagged": 3, "untagged": 0, "malformed": 0, "over_limit": 0,
                                 "session_ends": 1}
    assert stats["sessions"]["ended"] == 1 and stats["tagged_blocks"]["p1"] >= 1
    metrics = httpx.get(url + "/metrics", timeout=10).text

    def counter(name: str) -> float:
        return sum(float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
                   if line.startswith(name + "{") or line.startswith(name + " "))

    assert stats["prefix_cache"]["queries"] == counter("vllm:prefix_cache_queries_total")
    assert stats["prefix_cache"]["hits"] == counter("vllm:prefix_cache_hits_total")
    backend.close()
