"""Admission control, Prometheus rendering, SSE framing, config and command-line checks."""

from __future__ import annotations

import asyncio

import pytest
from typer.testing import CliRunner

from glmcot.cli import app as cli
from glmcot.serve import errors, sse
from glmcot.serve.config import ServeConfig
from glmcot.serve.limits import Admission
from glmcot.serve.metrics import Counter, Histogram, ServerMetrics, flatten_stats


def run(coro):
    return asyncio.run(coro)


def test_admission_rejects_beyond_slots_plus_queue():
    async def scenario():
        admission = Admission(max_concurrency=2, max_queue=1, timeout_s=5)
        a = await admission.acquire("x")
        b = await admission.acquire("x")
        waiter = asyncio.create_task(admission.acquire("x"))
        await asyncio.sleep(0.01)
        assert admission.running == 2 and admission.waiting == 1
        with pytest.raises(errors.APIError) as info:
            await admission.acquire("x")
        assert info.value.status == 429 and info.value.headers["Retry-After"] == "1"
        a.release()
        c = await asyncio.wait_for(waiter, 1)
        assert c.queue_s > 0 and admission.running == 2
        b.release(); c.release(); c.release()   # release is idempotent
        assert admission.running == 0
        assert admission.rejected["busy"] == 1

    run(scenario())


def test_admission_queue_wait_is_bounded_by_the_timeout():
    async def scenario():
        admission = Admission(max_concurrency=1, max_queue=5, timeout_s=0.05)
        held = await admission.acquire("x")
        with pytest.raises(errors.APIError) as info:
            await admission.acquire("x")
        assert info.value.status == 504
        held.release()

    run(scenario())


def test_drain_refuses_new_work_and_cancels_what_outlives_the_grace():
    async def scenario():
        admission = Admission(max_concurrency=2, max_queue=0, timeout_s=5)
        quick = await admission.acquire("x")
        stuck = await admission.acquire("x")
        cancelled = []
        stuck.on_cancel.append(lambda: cancelled.append("stuck"))
        asyncio.get_running_loop().call_later(0.01, quick.release)
        count = await admission.drain(grace_s=0.1)
        assert count == 1 and cancelled == ["stuck"] and admission.running == 0
        with pytest.raises(errors.APIError) as info:
            await admission.acquire("x")
        assert info.value.status == 503

    run(scenario())


def test_counter_and_histogram_render_prometheus_text():
    counter = Counter("demo_total", "Demo.", ("kind",))
    counter.inc(2, kind='a"b')
    assert counter.render()[-1] == 'demo_total{kind="a\\"b"} 2'
    with pytest.raises(ValueError):
        counter.inc(-1, kind="a")
    with pytest.raises(ValueError):
        counter.inc(1, other="a")
    hist = Histogram("demo_seconds", "Demo.", (), buckets=(0.1, 1.0))
    for value in (0.05, 0.5, 5.0):
        hist.observe(value)
    lines = hist.render()
    assert 'demo_seconds_bucket{le="0.1"} 1' in lines
    assert 'demo_seconds_bucket{le="1"} 2' in lines
    assert 'demo_seconds_bucket{le="+Inf"} 3' in lines
    assert "demo_seconds_count 3" in lines and "demo_seconds_sum 5.55" in lines


def test_flatten_stats_turns_level_dicts_into_labels():
    lines = flatten_stats("glmcot_engine", {"prefix_hits": 7, "evictions": {"1": 0, "4": 3},
                                            "name": "skipped", "pool": {"free": 5, "used": 2}},
                          "Engine.")
    assert 'glmcot_engine_evictions{key="4"} 3' in lines
    assert "glmcot_engine_prefix_hits 7" in lines
    assert 'glmcot_engine_pool{key="free"} 5' in lines
    assert not any("skipped" in line for line in lines)
    many = flatten_stats("c", [((("graph", "a"),), {"hits": 1}), ((("graph", "b"),), {"hits": 2})],
                         "Cache.")
    assert many.count("# TYPE c_hits gauge") == 1
    assert 'c_hits{graph="b"} 2' in many


def test_server_metrics_survive_a_failing_collector():
    metrics = ServerMetrics("scripted policy", "m")
    metrics.collectors.append(lambda: 1 / 0)
    text = metrics.render()
    assert 'glmcot_server_info{policy="scripted policy",model="m"} 1' in text
    assert "# collector error: ZeroDivisionError" in text


def test_sse_event_round_trip():
    text = sse.event({"a": "line1\nline2"}, name="snippet", id=3) + sse.event("x\ny") + sse.DONE
    events = sse.parse(text)
    assert events[0] == {"event": "snippet", "data": '{"a":"line1\\nline2"}'}
    assert events[1]["data"] == "x\ny"
    assert events[2]["data"] == "[DONE]"


def test_config_validates_and_labels_the_policy(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="not both"):
        ServeConfig(model="random:qwen3:tiny", llm_url="http://127.0.0.1:1/v1")
    with pytest.raises(ValueError, match="cannot force-decode"):
        ServeConfig(scripted=tmp_path / "q.jsonl", llm_url="http://127.0.0.1:1/v1")
    with pytest.raises(ValueError, match="retriever"):
        ServeConfig(retriever="magic")
    with pytest.raises(ValueError, match="max_concurrency"):
        ServeConfig(max_concurrency=0)
    with pytest.raises(ValueError, match="graph name"):
        ServeConfig(graphs={"bad name": tmp_path})
    monkeypatch.setenv("GLMCOT_API_KEY", "from-env")
    config = ServeConfig(scripted=tmp_path / "q.jsonl")
    assert config.api_key == "from-env"
    assert config.policy == "scripted policy"
    assert config.host == "127.0.0.1"


def flat(output: str) -> str:
    """CLI output without rich's box drawing and line wrapping."""
    return " ".join(output.replace("│", " ").split())


def test_serve_command_help_and_errors(tmp_path):
    runner = CliRunner()
    result = runner.invoke(cli, ["serve", "--help"])
    assert result.exit_code == 0
    for option in ("--graph", "--api-key", "--max-concurrency", "--timeout", "--scripted"):
        assert option in result.output
    result = runner.invoke(cli, ["serve"])
    assert result.exit_code != 0 and "--model, --llm or --scripted" in flat(result.output)
    result = runner.invoke(cli, ["serve", "--model", "random:qwen3:tiny", "--graph",
                                 f"g={tmp_path / 'missing'}"])
    assert result.exit_code != 0 and "no such graph directory" in flat(result.output)


def test_engine_mode_comes_from_the_flag_or_the_environment(monkeypatch):
    import uvicorn

    import glmcot.engine.kernels as kernels
    import glmcot.serve.app as app_module

    monkeypatch.delenv("GLMCOT_ENGINE_PROCESS", raising=False)
    seen = []
    monkeypatch.setattr(app_module, "create_app", lambda config, runtime=None: seen.append(config) or object())
    monkeypatch.setattr(uvicorn.Server, "__init__", lambda self, config: None)
    monkeypatch.setattr(uvicorn.Server, "run", lambda self: None)
    monkeypatch.setattr(kernels, "cpu_kernels", lambda: None)
    monkeypatch.setattr("glmcot.serve.server.uvicorn_config", lambda app, config, level: None)
    runner = CliRunner()
    for args, env, expected in ((["--engine-process"], {}, True), (["--engine-thread"], {}, False),
                                ([], {"GLMCOT_ENGINE_PROCESS": "1"}, True),
                                ([], {"GLMCOT_ENGINE_PROCESS": "0"}, False),
                                (["--engine-thread"], {"GLMCOT_ENGINE_PROCESS": "1"}, False)):
        result = runner.invoke(cli, ["serve", "--model", "random:qwen3:tiny", *args], env=env)
        assert result.exit_code == 0, result.output
        assert seen.pop().engine_process is expected, (args, env)
    assert runner.invoke(cli, ["serve", "--model", "random:qwen3:tiny"]).exit_code == 0
    assert seen.pop().engine_process is ServeConfig().engine_process   # the CLI's default is the config's


def test_tokens_posted_from_the_engine_thread_arrive_in_order_with_one_wake_up_per_batch():
    import asyncio
    import threading

    from glmcot.serve.engine_bridge import poster_for

    async def scenario():
        loop = asyncio.get_running_loop()
        poster = poster_for(loop)
        assert poster_for(loop) is poster
        queues = [asyncio.Queue(), asyncio.Queue()]

        def engine_step():  # one step's tokens for two sequences, posted while the loop is busy
            for number in range(500):
                for index, queue in enumerate(queues):
                    poster.post(queue, (index, number))

        thread = threading.Thread(target=engine_step)
        thread.start()
        thread.join()  # the loop is blocked here, as it is while a handler runs
        before = poster.flushes
        received = [[await queue.get() for _ in range(500)] for queue in queues]
        assert received == [[(index, n) for n in range(500)] for index in range(2)]
        assert poster.flushes - before == 1
        poster.post(queues[0], "later")
        assert await queues[0].get() == "later" and poster.flushes - before == 2

    asyncio.run(scenario())
