"""Where the plugin hooks into vLLM v1, and the checks that keep it out where it does not fit.

`install(settings)` (from `register()`, in every vLLM process) checks the vLLM version and the
names it hooks, then wraps `Scheduler.__init__`: once a scheduler is built (in the engine-core
process), `attach()` checks the setup and, where it is supported, swaps the block pool's free
queue and wraps three methods of that one `KVCacheManager` instance (`free`,
`pop_blocks_for_free`: tag the request's blocks before vLLM releases them, tail first;
`record_prefix_cache_stats`: count queries and hits as vLLM does; `reset_prefix_cache`). Anything
unexpected logs one line and leaves vLLM's stock behaviour.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import logging
import os
import time
from dataclasses import dataclass
from typing import Any

from glmcot.vllm_plugin.levels import LevelTable, block_levels
from glmcot.vllm_plugin.settings import Mode, Settings
from glmcot.vllm_plugin.stats import StatsWriter
from glmcot.vllm_plugin.wire import WIRE_VERSION, WireError, WireLimitError, decode

logger = logging.getLogger("vllm.plugins.glmcot")  # under vLLM's logger, so its handler prints it

SUPPORTED_VERSIONS = ("0.32.0",)  # the vLLM releases this plugin was tested on (local suffixes like +cpu allowed)
QUEUE_METHODS = {"popleft", "popleft_n", "remove", "append", "append_n", "prepend_n", "get_all_free_blocks",
                 "iter_blocks_after"}
MANAGER_METHODS = {"free": ["self", "request"], "pop_blocks_for_free": ["self", "request"],
                   "record_prefix_cache_stats": ["self", "request", "num_hits"], "reset_prefix_cache": ["self"]}
_MARK = "_glmcot_wrapped"


class Unsupported(Exception):
    """This vLLM or this setup is not one the plugin hooks into (the message says why)."""


def check_version() -> str:
    """vLLM's version if the plugin supports it and every hooked name is as expected."""
    import vllm
    from vllm.v1.core import block_pool, kv_cache_manager, kv_cache_utils
    from vllm.v1.core.sched import scheduler

    version = str(getattr(vllm, "__version__", "unknown"))
    if version.split("+")[0] not in SUPPORTED_VERSIONS:
        raise Unsupported(f"vLLM {version} is not one of the tested versions {', '.join(SUPPORTED_VERSIONS)}")
    queue = kv_cache_utils.FreeKVCacheBlockQueue
    methods = {name for name, value in vars(queue).items() if callable(value) and not name.startswith("_")}
    if methods != QUEUE_METHODS:
        raise Unsupported(f"vLLM's FreeKVCacheBlockQueue has methods {sorted(methods)}, expected {sorted(QUEUE_METHODS)}")
    if getattr(block_pool, "FreeKVCacheBlockQueue", None) is not queue:
        raise Unsupported("vLLM's block pool no longer builds FreeKVCacheBlockQueue")
    fields = getattr(kv_cache_utils.KVCacheBlock, "__dataclass_fields__", {})
    if not {"block_id", "ref_cnt", "is_null"} <= set(fields) or not hasattr(kv_cache_utils.KVCacheBlock, "block_hash"):
        raise Unsupported("vLLM's KVCacheBlock lacks block_id, ref_cnt, is_null or block_hash")
    for name, parameters in MANAGER_METHODS.items():
        method = getattr(kv_cache_manager.KVCacheManager, name, None)
        if method is None or list(inspect.signature(method).parameters) != parameters:
            raise Unsupported(f"vLLM's KVCacheManager.{name} is not ({', '.join(parameters)})")
    if not hasattr(scheduler, "Scheduler"):
        raise Unsupported("vLLM has no v1 Scheduler")
    return version


def install(settings: Settings) -> str:
    """Wraps the v1 scheduler's constructor (once per process); returns vLLM's version."""
    version = check_version()
    from vllm.v1.core.sched.scheduler import Scheduler

    original = Scheduler.__init__
    if getattr(original, _MARK, False):
        return version

    @functools.wraps(original)
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        try:
            self._glmcot_levels = attach(self.kv_cache_manager, settings, vllm_config=self.vllm_config,
                                         version=version)
        except Unsupported as reason:
            logger.warning("glmcot vLLM plugin: %s; vLLM's stock eviction is used", reason)
        except Exception as error:  # never break vLLM's start-up
            logger.warning("glmcot vLLM plugin: could not attach (%s: %s); vLLM's stock eviction is used",
                           type(error).__name__, error)

    setattr(__init__, _MARK, True)
    Scheduler.__init__ = __init__
    return version


def check_setup(manager: Any, vllm_config: Any = None) -> int:
    """The block size if this KV-cache manager is one the plugin supports, else Unsupported."""
    from vllm.v1.core.kv_cache_coordinator import UnitaryKVCacheCoordinator
    from vllm.v1.kv_cache_interface import FullAttentionSpec, MLAAttentionSpec

    if not manager.enable_caching:
        raise Unsupported("prefix caching is off")
    if type(manager.coordinator) is not UnitaryKVCacheCoordinator:
        raise Unsupported(f"hybrid or special KV cache ({type(manager.coordinator).__name__}) is not supported")
    groups = manager.kv_cache_config.kv_cache_groups
    spec = groups[0].kv_cache_spec
    if len(groups) != 1 or type(spec) not in (FullAttentionSpec, MLAAttentionSpec):
        raise Unsupported(f"only full attention is supported, not {type(spec).__name__}")
    if getattr(manager.coordinator, "dcp_world_size", 1) != 1 or getattr(manager.coordinator, "pcp_world_size", 1) != 1:
        raise Unsupported("decode/prefill context parallelism is not supported")
    if vllm_config is not None:
        if vllm_config.kv_transfer_config is not None:
            raise Unsupported("KV connectors and offloading are not supported")
        if vllm_config.parallel_config.data_parallel_size != 1:
            raise Unsupported("data parallelism is not supported (one plugin state per rank)")
    pool = manager.block_pool
    if pool.get_num_free_blocks() != pool.num_gpu_blocks - 1:
        raise Unsupported("the block pool is in use already")
    return int(spec.block_size)


@dataclass
class RequestCounts:
    tagged: int = 0
    untagged: int = 0
    malformed: int = 0
    over_limit: int = 0   # well formed but over max_spans / max_session_chars: run untagged
    session_ends: int = 0


class Controller:
    """The plugin's state for one KV-cache manager (one per engine core)."""

    def __init__(self, manager: Any, settings: Settings, block_size: int, version: str) -> None:
        from glmcot.vllm_plugin.queue import EvictionCounts, LeveledFreeBlockQueue, ObservingFreeBlockQueue

        self.manager = manager
        self.settings = settings
        self.block_size = block_size
        self.version = version
        pool = manager.block_pool
        self.table = LevelTable(pool.num_gpu_blocks - 1, settings.p1_share, settings.session_timeout_s,
                                settings.max_sessions)
        self.evictions = EvictionCounts()
        queue_class = LeveledFreeBlockQueue if settings.mode is Mode.ENFORCE else ObservingFreeBlockQueue
        self.queue = queue_class(pool.free_block_queue.get_all_free_blocks(), self.table, self.evictions)
        pool.free_block_queue = self.queue
        self.requests = RequestCounts()
        self.prefix = {"requests": 0, "queries": 0, "hits": 0}
        self.last_error: str | None = None
        self.writer: StatsWriter | None = None

    # ---- hooks
    def on_free(self, request: Any) -> None:
        """Tags the request's cached blocks before vLLM frees them; ends its session if it says so."""
        try:
            with self.table.lock:
                self._tag(request)
                self.queue.refile(self.table.expire())
        except Exception as error:  # the free itself must go on
            self.last_error = f"{type(error).__name__}: {error}"
        if self.writer is not None:
            self.writer.mark()

    def on_prefix_query(self, request: Any, num_hits: int) -> None:
        if not self.manager.prefix_cache_lookup_enabled(request):
            return
        self.prefix["requests"] += 1
        self.prefix["queries"] += int(request.num_tokens)
        self.prefix["hits"] += int(num_hits)

    def on_reset(self) -> None:
        with self.table.lock:
            self.table.reset()
            self.queue.reset()
        if self.writer is not None:
            self.writer.mark()

    def _tag(self, request: Any) -> None:
        params = getattr(request, "sampling_params", None)
        try:
            levels = decode(getattr(params, "extra_args", None), getattr(request, "session_id", None),
                            max_spans=self.settings.max_spans, max_session_chars=self.settings.max_session_chars)
            if levels is None:
                self.requests.untagged += 1
            else:
                self.requests.tagged += 1
        except WireLimitError as error:   # kept out of the table and not walked: runs untagged
            self.requests.over_limit += 1
            self.last_error = f"request {request.request_id}: {error}"
            levels = None
        except WireError as error:  # the request runs as an untagged one
            self.requests.malformed += 1
            self.last_error = f"request {request.request_id}: {error}"
            levels = None
        spans = levels.spans if levels is not None else ()
        blocks = self.manager.coordinator.get_blocks(request.request_id)[0]
        per_block = block_levels(spans, int(request.num_prompt_tokens), len(blocks), self.block_size)
        ids, claimed = [], []
        for block, level in zip(blocks, per_block):
            if block.block_hash is not None and not block.is_null:
                ids.append(block.block_id)
                claimed.append(level)
        session = levels.session if levels is not None else None
        if session is None and 2 in claimed:
            # a notebook without a session times out like one; a client-chosen request id can be
            # of any length, and the table keeps this key, so a long one is kept as its digest
            rid = str(request.request_id)
            if len(rid) > self.settings.max_session_chars - len("request:"):
                rid = hashlib.blake2b(rid.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
            session = f"request:{rid}"
        self.table.claim(ids, claimed, session)
        if levels is not None and levels.end_session and session is not None and request.is_finished():
            self.requests.session_ends += 1
            self.queue.refile(self.table.end_session(session))

    # ---- counters
    def snapshot(self) -> dict[str, Any]:
        with self.table.lock:
            names = {1: "p1", 2: "p2", 3: "p3", 4: "p4"}
            return {
                "plugin": "glmcot",
                "wire_version": WIRE_VERSION,
                "mode": self.settings.mode.value,
                "vllm_version": self.version,
                "pid": os.getpid(),
                "updated_unix": time.time(),
                "block_size": self.block_size,
                "num_blocks": self.manager.block_pool.num_gpu_blocks - 1,
                "p1_cap_blocks": self.table.p1_cap,
                "evictions": self.evictions.as_dict(),
                "evicted_cached_blocks": sum(v for k, v in self.evictions.by_level.items() if k),
                "free_blocks": self.queue.free_counts(),
                "tagged_blocks": {names[k]: v for k, v in self.table.counts().items()},
                "p1_overflow_claims": self.table.p1_overflow,
                "demoted_blocks": self.table.demoted,
                "sessions": {"live": self.table.live_sessions, "ended": self.table.sessions_ended,
                             "timed_out": self.table.sessions_timed_out},
                "requests": vars(self.requests).copy(),
                "prefix_cache": dict(self.prefix),
                "last_error": self.last_error,
            }


def attach(manager: Any, settings: Settings, vllm_config: Any = None, version: str | None = None,
           write_stats: bool = True) -> Controller:
    """Puts the plugin into one vLLM `KVCacheManager` (fresh, nothing allocated yet); raises
    Unsupported where it does not fit. The manager's methods are wrapped on the instance only."""
    if settings.mode is Mode.OFF:
        raise Unsupported("switched off")
    block_size = check_setup(manager, vllm_config)
    controller = Controller(manager, settings, block_size, version or check_version())
    free, pop, record, reset = (manager.free, manager.pop_blocks_for_free, manager.record_prefix_cache_stats,
                                manager.reset_prefix_cache)

    def free_(request: Any) -> None:
        controller.on_free(request)
        free(request)

    def pop_blocks_for_free_(request: Any) -> list:
        controller.on_free(request)
        return pop(request)

    def record_prefix_cache_stats_(request: Any, num_hits: int) -> None:
        controller.on_prefix_query(request, num_hits)
        record(request, num_hits)

    def reset_prefix_cache_() -> bool:
        done = reset()
        if done:
            controller.on_reset()
        return done

    manager.free = free_
    manager.pop_blocks_for_free = pop_blocks_for_free_
    manager.record_prefix_cache_stats = record_prefix_cache_stats_
    manager.reset_prefix_cache = reset_prefix_cache_
    if write_stats:
        controller.writer = StatsWriter(settings.stats_path, controller.snapshot, settings.stats_interval_s)
        controller.writer.flush()
    logger.info("glmcot vLLM plugin: %s mode, %d blocks of %d tokens, level-1 cap %d blocks, counters in %s",
                settings.mode.value, manager.block_pool.num_gpu_blocks - 1,
                block_size, controller.table.p1_cap, settings.stats_path)
    return controller
