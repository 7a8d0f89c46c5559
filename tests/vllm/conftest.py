"""Helpers for the plugin's tests: vLLM's own KVCacheManager (one full-attention group, tiny blocks)
and requests that go through it the way vLLM's scheduler drives them. Modules that need vLLM
call `needs_vllm()`; it skips them (with the reason) where vLLM is not installed, e.g. in the main
environment (scripts/setup_vllm.sh makes the environment that has it)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

BLOCK = 4
ROOT = Path(__file__).resolve().parents[2]
# vLLM's v1 logits processor for forced decoding, by its qualified name (--logits-processors)
FORCING = "glmcot.vllm_plugin.forcing:ForcedTokensLogitsProcessor"


def needs_vllm():
    try:
        import vllm  # noqa: F401
        from vllm.v1.core.kv_cache_manager import KVCacheManager  # noqa: F401
    except Exception as error:  # ImportError, or a broken install
        pytest.skip(f"vLLM is not importable here ({type(error).__name__}: {error}); "
                    "run tests/vllm with the environment scripts/setup_vllm.sh makes", allow_module_level=True)


class Harness:
    """A KVCacheManager with `num_blocks` usable blocks (plus vLLM's null block), driven like the
    scheduler: lookup, allocate, finish, free."""

    def __init__(self, num_blocks: int = 12, mode: str = "enforce", attach: bool = True, spec=None, **settings):
        import torch
        from vllm.utils.hashing import sha256
        from vllm.v1.core.kv_cache_manager import KVCacheManager
        from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
        from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec

        from glmcot.vllm_plugin.hooks import attach as attach_plugin
        from glmcot.vllm_plugin.settings import Mode, Settings

        spec = spec or FullAttentionSpec(block_size=BLOCK, num_kv_heads=1, head_size=1, dtype=torch.float32)
        config = KVCacheConfig(num_blocks=num_blocks + 1, kv_cache_tensors=[],
                               kv_cache_groups=[KVCacheGroupSpec(["layer.0"], spec)])
        self.manager = KVCacheManager(config, max_model_len=256, scheduler_block_size=BLOCK, hash_block_size=BLOCK,
                                      enable_caching=True, log_stats=True)
        init_none_hash(sha256)
        self.hasher = get_request_block_hasher(BLOCK, sha256)
        self.controller = None
        if attach:
            self.controller = attach_plugin(self.manager, Settings(mode=Mode(mode), **settings), write_stats=False)
        self.pool = self.manager.block_pool
        self._count = 0
        self.requests = {}

    def start(self, tokens: list[int], spans=None, session=None, end=False, xargs=None):
        """Admits and allocates a request (prompt = tokens); returns (request, cached tokens)."""
        from vllm import SamplingParams
        from vllm.v1.request import Request

        from glmcot.vllm_plugin import wire

        self._count += 1
        if xargs is None and spans is not None:
            xargs = wire.encode(spans, session, end)
        params = SamplingParams(max_tokens=1, extra_args=xargs)
        request = Request(f"r{self._count}", list(tokens), params, None, block_hasher=self.hasher)
        blocks, cached, _ = self.manager.get_computed_blocks(request)
        self.manager.record_prefix_cache_stats(request, cached)
        allocated = self.manager.allocate_slots(request, len(tokens) - cached, cached, blocks)
        assert allocated is not None, "the pool is full"
        request.num_computed_tokens = len(tokens)
        self.manager.cache_blocks(request, len(tokens))
        return request, cached

    def finish(self, request) -> None:
        from vllm.v1.request import RequestStatus

        request.status = RequestStatus.FINISHED_STOPPED
        self.manager.free(request)

    def run(self, tokens, spans=None, session=None, end=False, xargs=None) -> tuple[list[int], int]:
        """start + finish; returns the request's block ids (head first) and its cached tokens."""
        request, cached = self.start(tokens, spans, session, end, xargs)
        ids = [b.block_id for b in self.manager.coordinator.get_blocks(request.request_id)[0]]
        self.finish(request)
        return ids, cached

    def free_order(self) -> list[int]:
        """Free block ids in the order the pool hands them out (next evicted first)."""
        return [b.block_id for b in self.pool.free_block_queue.get_all_free_blocks()]

    def cached_order(self) -> list[int]:
        return [b.block_id for b in self.pool.free_block_queue.get_all_free_blocks() if b.block_hash is not None]

    def evict(self, n: int) -> list[int]:
        """Takes n fresh blocks from the pool (evicting cached ones) and gives them back uncached."""
        blocks = self.pool.get_new_blocks(n)
        ids = [b.block_id for b in blocks]
        self.pool.free_blocks(blocks)
        return ids


def tokens(seed: int, n: int) -> list[int]:
    import random

    rng = random.Random(seed)
    return [rng.randrange(1, 1000) for _ in range(n)]


@pytest.fixture
def harness():
    needs_vllm()
    return Harness


def engine_env(mode: str, stats: Path) -> dict[str, str]:
    """A vLLM process's environment: the plugin in `mode`, counters to `stats`, this checkout's glmcot."""
    env = dict(os.environ)
    env.update(GLMCOT_VLLM_PLUGIN=mode, GLMCOT_VLLM_STATS=str(stats), HF_HUB_OFFLINE="1", VLLM_CPU_KVCACHE_SPACE="1",
               PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH", "")]))
    return env


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def vllm_server(checkpoint: Path, folder: Path, mode: str = "enforce", extra: tuple[str, ...] = (), blocks: int = 14,
                max_model_len: int = 256):
    """`vllm serve` on the tiny checkpoint under KV pressure (by default 14 blocks of 32 tokens);
    yields its URL (no /v1) and the plugin's counters file; stops the server's whole process group
    after."""
    import httpx

    stats = folder / "stats.json"
    port = free_port()
    vllm = Path(sys.executable).with_name("vllm")
    log_path = folder / "server.log"
    log = open(log_path, "w")
    process = subprocess.Popen(
        [str(vllm), "serve", str(checkpoint), "--served-model-name", "tiny", "--dtype", "float32", "--block-size", "32",
         "--num-gpu-blocks-override", str(blocks), "--max-model-len", str(max_model_len), "--enforce-eager",
         "--enable-prompt-tokens-details", "--gpu-memory-utilization", "0.05", "--host", "127.0.0.1", "--port", str(port),
         *extra],
        env=engine_env(mode, stats), stdout=log, stderr=subprocess.STDOUT, cwd=folder, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 600
    try:
        while True:
            if process.poll() is not None:
                raise AssertionError(f"vllm serve exited:\n{log_path.read_text()[-6000:]}")
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"vllm serve not ready in 600 s:\n{log_path.read_text()[-6000:]}")
            time.sleep(1)
        yield url, stats
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
        log.close()


def glmcot_cli(arguments: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Runs the glmcot CLI here when the graph side imports (faiss), else with the interpreter
    named by GLMCOT_CLIENT_PYTHON (the main environment: vLLM's has no faiss); skips without one."""
    try:
        import faiss  # noqa: F401
        python = sys.executable
    except ImportError:
        python = os.environ.get("GLMCOT_CLIENT_PYTHON", "")
        if not python:
            pytest.skip("glmcot's graph retrieval needs faiss, which vLLM's environment lacks: set "
                        "GLMCOT_CLIENT_PYTHON to the main environment's python to run this")
    done = subprocess.run([python, "-c", "from glmcot.cli import app; app()", *arguments], capture_output=True,
                          text=True, timeout=900, env={**os.environ, **env,
                                                      "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])})
    return done.returncode, done.stdout[-4000:] + done.stderr[-4000:]
