"""`glmcot serve` as a user runs it: a subprocess on a loopback port, stopped with SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import httpx
import pytest

from glmcot.serve.server import free_port

from .conftest import wait_for_health
from .dataset import QUESTIONS, build_dataset

READY_TIMEOUT_S = 600.0


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    pytest.importorskip("glmcot.engine.async_engine")
    data = build_dataset(tmp_path_factory.mktemp("cmd") / "data")
    port = free_port()
    env = {**os.environ, "GLMCOT_API_KEY": "env-key", "HF_HUB_OFFLINE": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "glmcot.cli", "serve", "--graph", f"dblp={data}",
         "--model", "random:qwen3:tiny", "--scripted", str(data / "questions.jsonl"),
         "--port", str(port), "--engine-option", "num_threads=1", "--max-concurrency", "2",
         "--log-level", "info"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_health(process, url, READY_TIMEOUT_S)
        yield process, url
    finally:
        if process.poll() is None:
            # SIGTERM, never SIGKILL: a kill in the middle of a kernel build leaves its lock behind
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(READY_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                pytest.fail("glmcot serve ignored SIGTERM")


def test_serve_command_answers_and_shuts_down_cleanly(served):
    process, url = served
    assert httpx.get(url + "/v1/graphs", timeout=60).status_code == 401   # key from the env
    # warmed up before reporting ready: the engine has already generated
    metrics = httpx.get(url + "/metrics", headers={"Authorization": "Bearer env-key"}, timeout=60).text
    generated = [line for line in metrics.splitlines() if line.startswith("glmcot_engine_generated_tokens ")]
    assert generated and float(generated[0].split()[-1]) >= 1, generated
    record = QUESTIONS[0]
    response = httpx.post(url + "/v1/ask", json={"question": record["question"]},
                          headers={"Authorization": "Bearer env-key"}, timeout=600)
    assert response.status_code == 200, response.text
    assert response.json()["answer"] == record["answer"]
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=READY_TIMEOUT_S)
    # uvicorn shuts down gracefully, then re-raises the signal so the exit status reports it
    assert process.returncode in (0, -signal.SIGTERM), output
    assert "Application shutdown complete" in output
    assert "Traceback" not in output
