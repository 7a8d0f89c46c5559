"""glmcot's vLLM plugin: GLM's four-level priority eviction inside vLLM v1's prefix cache.

Installed with glmcot (entry point group `vllm.general_plugins`, name `glmcot`) and switched on
with `GLMCOT_VLLM_PLUGIN=enforce` (or `observe`: count only, stock order; unset or `off`: nothing)
in the environment of `vllm serve`. Requests say their prompt's levels in `vllm_xargs`
(`glmcot.vllm_plugin.wire`); the counters are written to `GLMCOT_VLLM_STATS`
(`glmcot.vllm_plugin.stats.read_stats`). README, "vLLM plugin".
"""

from __future__ import annotations

import logging

logger = logging.getLogger("vllm.plugins.glmcot")  # under vLLM's logger, so its handler prints it
_state = {"registered": False, "status": "not registered"}


def register() -> None:
    """vLLM's general-plugin entry point (called in every vLLM process, maybe more than once).
    Never raises: on an unknown vLLM version or a bad setting it logs one line and does nothing."""
    if _state["registered"]:
        return
    _state["registered"] = True
    try:
        from glmcot.vllm_plugin.settings import Mode, Settings

        settings = Settings.from_env()
        if settings.mode is Mode.OFF:
            _state["status"] = "off"
            return
        from glmcot.vllm_plugin.hooks import Unsupported, install

        try:
            version = install(settings)
        except Unsupported as reason:
            _state["status"] = f"unsupported: {reason}"
            logger.warning("glmcot vLLM plugin: %s; vLLM's stock eviction is used", reason)
            return
        _state["status"] = f"{settings.mode.value} (vLLM {version})"
    except Exception as error:  # a plugin must never stop vLLM from starting
        _state["status"] = f"failed: {type(error).__name__}: {error}"
        logger.warning("glmcot vLLM plugin not loaded (%s: %s); vLLM's stock eviction is used",
                       type(error).__name__, error)


def status() -> str:
    """What register() did in this process."""
    return _state["status"]
