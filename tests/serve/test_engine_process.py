"""`glmcot serve --engine-process`: the native engine in its own process behind the same
endpoints; a dead engine process shows in /health and in every later answer."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai
import pytest

from glmcot.serve.config import ServeConfig
from glmcot.serve.server import BackgroundServer, free_port

from .conftest import MODEL, wait_for_health

KEY = "process-test-key"
PROMPT = "The graph has a node called"
START_S = 600.0   # generous: the first start may build the CPU kernels on a busy machine
ENGINE_OPTIONS = {"num_threads": 1, "kv_cache_tokens": 8192}


def process_server() -> BackgroundServer:
    config = ServeConfig(model=MODEL, port=0, api_key=KEY, engine_process=True, engine_options=dict(ENGINE_OPTIONS))
    return BackgroundServer(config)


@pytest.fixture(scope="module")
def server():
    pytest.importorskip("glmcot.engine.process_engine")
    with process_server() as server:
        yield server


def headers() -> dict[str, str]:
    return {"Authorization": f"Bearer {KEY}"}


def test_the_engine_runs_in_another_process(server):
    from glmcot.engine import ProcessEngine

    engine = server.app.state.serve.runtime.engine
    assert isinstance(engine, ProcessEngine) and engine.pid != os.getpid() and engine.failure is None
    health = httpx.get(server.url + "/health", timeout=60)
    assert health.status_code == 200 and health.json()["status"] == "ok"


def test_completions_plain_and_streamed_agree_with_the_threaded_engine(server, engine):
    from glmcot.engine import SamplingParams

    client = openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0, timeout=60)
    plain = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=12, temperature=0)
    chunks = list(client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=12, temperature=0,
                                            stream=True, stream_options={"include_usage": True}))
    streamed = "".join(c.choices[0].text for c in chunks if c.choices)
    local = engine.submit(PROMPT, SamplingParams(temperature=0, max_tokens=12)).result(60)
    assert plain.choices[0].text == streamed == local.text
    assert plain.usage.prompt_tokens == local.prompt_tokens
    assert chunks[-1].usage.completion_tokens == plain.usage.completion_tokens == len(local.token_ids)


def test_a_dead_engine_process_shows_in_health_and_answers():
    with process_server() as server:
        engine = server.app.state.serve.runtime.engine
        body = {"model": MODEL, "prompt": PROMPT, "max_tokens": 3000, "ignore_eos": True, "stream": True}
        with httpx.stream("POST", server.url + "/v1/completions", headers=headers(), json=body, timeout=60) as stream:
            lines = stream.iter_lines()
            first = next(line for line in lines if line.startswith("data: "))
            assert "text_completion" in first
            os.kill(engine.pid, signal.SIGKILL)   # mid-stream
            rest = [line for line in lines if line.startswith("data: ")]
        assert rest[-1] == "data: [DONE]"
        error = json.loads(rest[-2][len("data: "):])["error"]
        assert error["code"] == "engine_unavailable" and "SIGKILL" in error["message"]
        deadline = time.monotonic() + 60
        while (health := httpx.get(server.url + "/health", timeout=60)).status_code == 200:
            assert time.monotonic() < deadline, "the server did not notice its engine died"
            time.sleep(0.05)
        assert health.status_code == 503
        assert health.json()["status"] == "engine_failed" and "SIGKILL" in health.json()["detail"]
        reply = httpx.post(server.url + "/v1/completions", headers=headers(), timeout=60,
                           json={"model": MODEL, "prompt": PROMPT, "max_tokens": 4})
        assert reply.status_code == 503
        error = reply.json()["error"]
        assert error["code"] == "engine_unavailable" and "SIGKILL" in error["message"]


def children_of(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def test_serve_command_with_engine_process_stops_its_engine_on_sigterm_to_its_group():
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "glmcot.cli", "serve", "--model", MODEL, "--engine-process", "--port", str(port),
         "--engine-option", "num_threads=1", "--log-level", "info"],
        env={**os.environ, "HF_HUB_OFFLINE": "1", "GLMCOT_API_KEY": KEY},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    children: list[int] = []
    try:
        wait_for_health(process, url, START_S)
        children = children_of(process.pid)
        assert children, "no engine process under the server"
        reply = httpx.post(url + "/v1/completions", headers=headers(), timeout=60,
                           json={"prompt": PROMPT, "max_tokens": 4, "ignore_eos": True})
        assert reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] == 4
        os.killpg(process.pid, signal.SIGTERM)   # the whole group, as a supervisor may: the server stops its engine
        output, _ = process.communicate(timeout=START_S)
        assert process.returncode in (0, -signal.SIGTERM), output
        assert "Application shutdown complete" in output and "Traceback" not in output
        assert "engine process" not in output, output   # no death reported, no SIGTERM/SIGKILL needed
        deadline = time.monotonic() + 60   # multiprocessing's resource tracker leaves once the server has
        while [pid for pid in children if running(pid)]:
            assert time.monotonic() < deadline, f"children {children} outlived the server:\n{output}"
            time.sleep(0.1)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(START_S)
        for pid in children:
            if running(pid):
                os.kill(pid, signal.SIGKILL)
