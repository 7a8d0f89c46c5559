"""Real `glmcot serve` and `glmcot mcp` processes for the integration tests: the tiny serve
dataset (tests/serve/dataset.py) under the scripted policy (a system check, never model
accuracy), per-graph keys, stopped with SIGTERM when the tests end."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.serve.conftest import wait_for_health
from tests.serve.dataset import QUESTIONS, build_dataset

SRC = str(Path(__file__).resolve().parents[2] / "src")
KEYS = {  # name -> (key, graphs, update, admin, rate)
    "reader": "reader-key-0001",     # dblp only
    "ops": "ops-key-000000001",      # every graph, updates, admin
    "limited": "limited-key-0001",   # dblp, 3 requests a minute
}
BY_QID = {q["qid"]: q for q in QUESTIONS}


def keys_document() -> dict:
    return {"keys": [
        {"name": "reader", "key": KEYS["reader"], "graphs": ["dblp"]},
        {"name": "ops", "key": KEYS["ops"], "graphs": "*", "update": True, "admin": True},
        {"name": "limited", "key": KEYS["limited"], "graphs": ["dblp"], "requests_per_minute": 3},
    ]}


def auth(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[name]}"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def child_env() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": SRC + (os.pathsep + path if path else ""), "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}


def start(args: list[str], port: int, cwd: Path | None = None) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen([sys.executable, "-m", "glmcot.cli", *args, "--port", str(port)], cwd=cwd,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=child_env())
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_health(process, url)
    except BaseException:
        stop(process)
        raise
    return process, url


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


@pytest.fixture(scope="package")
def dataset(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("integrations")
    data = build_dataset(root / "data")
    (root / "keys.json").write_text(json.dumps(keys_document()))
    # a second copy of the store: the replica test writes new versions into it
    shutil.copytree(data, root / "replica")
    return data


def serve_args(dataset: Path) -> list[str]:
    return ["--graph", f"dblp={dataset}", "--graph", f"secret={dataset}", "--graph", f"replica={dataset.parent / 'replica'}",
            "--scripted", str(dataset / "questions.jsonl"), "--retriever", "lexical",
            "--keys-file", str(dataset.parent / "keys.json"), "--watch-graphs", "0.2", "--timeout", "120",
            "--max-body-bytes", "65536", "--log-level", "warning"]


@pytest.fixture(scope="package")
def served(dataset):
    """A `glmcot serve` process: graphs dblp, secret and replica; the keys above."""
    process, url = start(["serve", *serve_args(dataset)], free_port())
    yield url
    stop(process)


@pytest.fixture(scope="package")
def mcp_http(dataset):
    """A `glmcot mcp --transport http` process (MCP at /mcp beside the whole serve API)."""
    args = ["mcp", "--transport", "http", "--graph", f"dblp={dataset}", "--graph", f"secret={dataset}",
            "--scripted", str(dataset / "questions.jsonl"), "--retriever", "lexical",
            "--keys-file", str(dataset.parent / "keys.json"), "--max-body-bytes", "65536"]
    process, url = start(args, free_port())
    yield url
    stop(process)
