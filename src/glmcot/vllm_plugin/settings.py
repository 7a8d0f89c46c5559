"""The plugin's settings, read from the environment of the vLLM process (all optional but the switch)."""

from __future__ import annotations

import enum
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from glmcot.vllm_plugin.wire import MAX_SESSION_CHARS, MAX_SPANS

ENV_MODE = "GLMCOT_VLLM_PLUGIN"  # enforce | observe | off (unset: off)
ENV_P1_SHARE = "GLMCOT_VLLM_P1_SHARE"
ENV_SESSION_TIMEOUT = "GLMCOT_VLLM_SESSION_TIMEOUT_S"
ENV_MAX_SESSIONS = "GLMCOT_VLLM_MAX_SESSIONS"
ENV_STATS = "GLMCOT_VLLM_STATS"
ENV_MAX_SESSION_CHARS = "GLMCOT_VLLM_MAX_SESSION_CHARS"
ENV_MAX_SPANS = "GLMCOT_VLLM_MAX_SPANS"


class Mode(enum.Enum):
    ENFORCE = "enforce"  # evict by level
    OBSERVE = "observe"  # stock LRU order; levels tracked and counted only
    OFF = "off"


@dataclass(frozen=True)
class Settings:
    mode: Mode = Mode.OFF
    p1_share: float = 0.5  # P1 blocks beyond this share of the pool rank as P2
    session_timeout_s: float = 900.0  # a session with no request for this long counts as ended
    max_sessions: int = 65536  # running sessions kept (the oldest ends first) and ended ones remembered
    # a request with a longer session id or more spans is treated as untagged (counted: over_limit)
    max_session_chars: int = MAX_SESSION_CHARS
    max_spans: int = MAX_SPANS
    stats_path: Path = Path(tempfile.gettempdir()) / "glmcot-vllm-stats.json"
    stats_interval_s: float = 0.5

    @classmethod
    def from_env(cls, environ: "os._Environ[str] | dict[str, str] | None" = None) -> "Settings":
        """Settings from the environment; ValueError names the bad variable."""
        env = os.environ if environ is None else environ
        raw = env.get(ENV_MODE, "off").strip().lower() or "off"
        try:
            mode = Mode(raw)
        except ValueError:
            raise ValueError(f"{ENV_MODE}={raw!r}: expected enforce, observe or off") from None
        share = _number(env, ENV_P1_SHARE, 0.5)
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"{ENV_P1_SHARE}={share}: expected a share between 0 and 1")
        timeout = _number(env, ENV_SESSION_TIMEOUT, 900.0)
        if timeout <= 0:
            raise ValueError(f"{ENV_SESSION_TIMEOUT}={timeout}: expected seconds > 0")
        sessions = int(_number(env, ENV_MAX_SESSIONS, 65536))
        if sessions < 1:
            raise ValueError(f"{ENV_MAX_SESSIONS}={sessions}: expected at least 1")
        session_chars = _whole(env, ENV_MAX_SESSION_CHARS, MAX_SESSION_CHARS)
        spans = _whole(env, ENV_MAX_SPANS, MAX_SPANS)
        stats = env.get(ENV_STATS) or str(cls.stats_path)
        return cls(mode=mode, p1_share=share, session_timeout_s=timeout, max_sessions=sessions,
                   max_session_chars=session_chars, max_spans=spans, stats_path=Path(stats))


def _whole(env, name: str, default: int) -> int:
    value = _number(env, name, default)
    if value < 1 or value != int(value):
        raise ValueError(f"{name}={env.get(name)!r}: expected a whole number of at least 1")
    return int(value)


def _number(env, name: str, default: float) -> float:
    value = env.get(name)
    if value is None or value.strip() == "":
        return default
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"{name}={value!r}: expected a number") from None
