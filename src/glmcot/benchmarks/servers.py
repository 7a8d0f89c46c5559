"""Servers a benchmark starts as child processes (`glmcot serve`, `vllm serve`): each in its own
process group, ready when /health answers, stopped with SIGTERM (SIGKILL after a grace period)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx


@dataclass
class ServerProcess:
    name: str
    url: str
    process: subprocess.Popen
    log: Path
    stats: Path | None = None  # the vLLM plugin's counters file, where there is one
    started: float = field(default_factory=time.monotonic)
    ready_s: float | None = None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def spawn(name: str, command: list[str], env: dict[str, str], port: int, log: Path,
          stats: Path | None = None) -> ServerProcess:
    handle = open(log, "w")
    # its own process group: SIGTERM reaches vLLM's engine and worker processes too
    process = subprocess.Popen(command, env=env, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)
    return ServerProcess(name, f"http://127.0.0.1:{port}", process, log, stats)


def wait_ready(servers: list[ServerProcess], timeout_s: float = 900) -> None:
    """Polls /health (generously: vLLM compiles at start, glmcot may build its kernels); a server
    that exits first ends the wait with the tail of its log."""
    deadline = time.monotonic() + timeout_s
    pending = list(servers)
    while pending:
        for server in list(pending):
            if server.process.poll() is not None:
                raise SystemExit(f"{server.name} server exited:\n{server.log.read_text()[-4000:]}")
            try:
                if httpx.get(server.url + "/health", timeout=5).status_code == 200:
                    server.ready_s = time.monotonic() - server.started
                    pending.remove(server)
            except httpx.HTTPError:
                pass
        if time.monotonic() > deadline:
            raise SystemExit(f"servers not ready in {timeout_s:.0f} s: {[s.name for s in pending]}")
        time.sleep(1)


def stop(servers: list[ServerProcess], grace_s: float = 60) -> None:
    for server in servers:
        if server.process.poll() is None:
            os.killpg(server.process.pid, signal.SIGTERM)
    for server in servers:
        try:
            server.process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(server.process.pid, signal.SIGKILL)
            server.process.wait()
